//! `getitem` on tensors (slices, integers, `None`, `...`, a piece of `chunk`/`split`/`unbind`),
//! `expand` and `repeat`: each output value is one input value at a fixed offset, so one gather
//! kernel runs them all, with the strides of each.

use super::shape_ops::{runs, strides, walk};
use super::{Accum, Bwd, Fwd, Kernel};
use mase_ir::Indexed;

/// `y[j] = x[base + offset(j)]`, where walking the output in row-major order advances the input
/// offset by `src_strides[d]` along output dimension `d` (0 repeats a value). Backward adds each
/// output gradient to the input value it came from, in output order, so a value read several
/// times (`expand`, `repeat`) sums its gradients in the same order on any thread count.
pub(crate) struct Gather {
    /// The output's shape without its trailing dimensions that read consecutive input values.
    shape: Vec<usize>,
    src_strides: Vec<usize>,
    /// Values of those trailing dimensions, copied as one run (1 where there are none).
    run: usize,
    base: usize,
    idx: Vec<usize>,
}

impl Gather {
    fn new(shape: Vec<usize>, src_strides: Vec<usize>, base: usize) -> Gather {
        let (shape, src_strides, run) = runs(&shape, &src_strides);
        let idx = vec![0; shape.len()];
        Gather { shape, src_strides, run, base, idx }
    }

    /// `x[items]` for an input of shape `x`, resolved by [`mase_ir::resolve_index`].
    pub fn index(x: &[usize], ix: &Indexed) -> Gather {
        let st = strides(x);
        let base = ix.reads.iter().zip(&st).map(|(r, s)| r.start * s).sum();
        let src = ix.out.iter().map(|d| d.map_or(0, |d| st[d] * ix.reads[d].step)).collect();
        Gather::new(ix.shape(), src, base)
    }

    /// `x.expand(...)` to the output shape `out` (shape inference checked that it fits).
    pub fn expand(x: &[usize], out: &[usize]) -> Gather {
        let st = strides(x);
        let lead = out.len() - x.len();
        let src = (0..out.len()).map(|d| if d < lead || x[d - lead] == 1 { 0 } else { st[d - lead] }).collect();
        Gather::new(out.to_vec(), src, 0)
    }

    /// `x.repeat(repeats)`: the output read as `[r0, s0, r1, s1, ...]` (`s` the input's shape
    /// with leading 1s), whose `r` dimensions repeat the input.
    pub fn repeat(x: &[usize], repeats: &[usize]) -> Gather {
        let lead = repeats.len() - x.len();
        let sizes: Vec<usize> = (0..repeats.len()).map(|d| if d < lead { 1 } else { x[d - lead] }).collect();
        let st = strides(&sizes);
        let shape = repeats.iter().zip(&sizes).flat_map(|(&r, &s)| [r, s]).collect();
        let src = st.iter().flat_map(|&s| [0, s]).collect();
        Gather::new(shape, src, 0)
    }
}

impl Kernel for Gather {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let x = &cx.input(0)[self.base..];
        let (st, run) = (&self.src_strides, self.run);
        if run == 1 {
            walk(&self.shape, st, st, &mut self.idx, |j, ia, _| y[j] = x[ia]);
        } else {
            walk(&self.shape, st, st, &mut self.idx, |j, ia, _| y[j * run..][..run].copy_from_slice(&x[ia..][..run]));
        }
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, _i: usize, dx: &mut [f32], acc: Accum) {
        acc.prepare(dx);
        let (dy, d) = (cx.dy, &mut dx[self.base..]);
        let (st, run) = (&self.src_strides, self.run);
        // Run by run, each input value gets its additions in the same (output) order.
        walk(&self.shape, st, st, &mut self.idx, |j, ia, _| {
            d[ia..][..run].iter_mut().zip(&dy[j * run..][..run]).for_each(|(d, g)| *d += g)
        });
    }
}
