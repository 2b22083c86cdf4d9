//! `where(condition, a, b)` with its three inputs broadcast: `a` where the condition is not 0, `b`
//! elsewhere. The value inputs' gradients are the output gradient where each was chosen (0
//! elsewhere), summed over the dimensions they were broadcast along; the condition gets none.

use super::elementwise::broadcast_strides;
use super::shape_ops::walk_n;
use super::{store_each, Accum, Bwd, Fwd, Kernel};

/// A broadcasting `where` node.
pub(crate) struct Where {
    out_shape: Vec<usize>,
    /// Strides of the condition, `a` and `b` aligned to the output's dimensions, 0 where each
    /// broadcasts.
    st: [Vec<usize>; 3],
    /// Whether each input has exactly the output's shape.
    full: [bool; 3],
    idx: Vec<usize>,
}

/// Whether a condition value holds: not 0, so NaN holds, as PyTorch's cast of NaN to bool.
#[inline(always)]
fn holds(c: f32) -> bool {
    c != 0.0
}

impl Where {
    pub fn new(ins: &[&[usize]], out: &[usize]) -> Where {
        Where {
            out_shape: out.to_vec(),
            st: [broadcast_strides(ins[0], out), broadcast_strides(ins[1], out), broadcast_strides(ins[2], out)],
            full: [ins[0] == out, ins[1] == out, ins[2] == out],
            idx: vec![0; out.len()],
        }
    }

    /// Calls `f(j, [ic, ia, ib])` for every output offset `j` in order, with each input's offset.
    fn walk(&mut self, f: impl FnMut(usize, [usize; 3])) {
        let [c, a, b] = &self.st;
        walk_n(&self.out_shape, [c, a, b], &mut self.idx, f);
    }
}

impl Kernel for Where {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let (c, a, b) = (cx.input(0), cx.input(1), cx.input(2));
        if self.full == [true; 3] {
            y.iter_mut().zip(c.iter().zip(a.iter().zip(b))).for_each(|(o, (&c, (&a, &b)))| *o = if holds(c) { a } else { b });
            return;
        }
        self.walk(|j, [ic, ia, ib]| y[j] = if holds(c[ic]) { a[ia] } else { b[ib] });
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, i: usize, dx: &mut [f32], acc: Accum) {
        let (c, dy) = (cx.input(0), cx.dy);
        // Input 1 takes the gradient where the condition holds, input 2 where it does not.
        let chosen = move |c: f32| holds(c) == (i == 1);
        if i == 0 {
            acc.prepare(dx);
            return;
        }
        if self.full[0] && self.full[i] {
            store_each(acc, dx, |j| if chosen(c[j]) { dy[j] } else { 0.0 });
            return;
        }
        acc.prepare(dx);
        self.walk(|j, offs| {
            if chosen(c[offs[0]]) {
                dx[offs[i]] += dy[j];
            }
        });
    }
}
