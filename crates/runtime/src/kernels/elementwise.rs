//! `add`, `sub`, `mul`, `div` and `pow` with NumPy broadcasting. The gradient of a broadcast input is the sum
//! of the output gradient over the dimensions it was broadcast along.

use super::shape_ops::{strides, walk};
use super::{store_each, store_zip, Accum, Bwd, Fwd, Kernel};

/// Which binary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
}

/// A broadcasting binary node.
pub(crate) struct Binary {
    op: BinOp,
    out_shape: Vec<usize>,
    /// Strides of each input aligned to the output's dimensions, 0 where it broadcasts.
    st: [Vec<usize>; 2],
    /// Whether each input has exactly the output's shape (then no index arithmetic is needed).
    full: [bool; 2],
    idx: Vec<usize>,
}

/// Strides of `shape` seen as a tensor of `out` (right-aligned, 0 on broadcast dimensions).
fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let own = strides(shape);
    let lead = out.len() - shape.len();
    (0..out.len()).map(|d| if d < lead || shape[d - lead] == 1 { 0 } else { own[d - lead] }).collect()
}

impl Binary {
    pub fn new(op: BinOp, a: &[usize], b: &[usize], out: &[usize]) -> Binary {
        Binary {
            op,
            out_shape: out.to_vec(),
            st: [broadcast_strides(a, out), broadcast_strides(b, out)],
            full: [a == out, b == out],
            idx: vec![0; out.len()],
        }
    }
}

#[inline(always)]
fn apply(op: BinOp, a: f32, b: f32) -> f32 {
    match op {
        BinOp::Add => a + b,
        BinOp::Sub => a - b,
        BinOp::Mul => a * b,
        BinOp::Div => a / b,
        BinOp::Pow => a.powf(b),
    }
}

impl Kernel for Binary {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let (a, b) = (cx.input(0), cx.input(1));
        let op = self.op;
        if self.full == [true, true] {
            match op {
                BinOp::Add => y.iter_mut().zip(a.iter().zip(b)).for_each(|(o, (p, q))| *o = p + q),
                BinOp::Sub => y.iter_mut().zip(a.iter().zip(b)).for_each(|(o, (p, q))| *o = p - q),
                BinOp::Mul => y.iter_mut().zip(a.iter().zip(b)).for_each(|(o, (p, q))| *o = p * q),
                BinOp::Div | BinOp::Pow => y.iter_mut().zip(a.iter().zip(b)).for_each(|(o, (p, q))| *o = apply(op, *p, *q)),
            }
            return;
        }
        walk(&self.out_shape, &self.st[0], &self.st[1], &mut self.idx, |j, ia, ib| y[j] = apply(op, a[ia], b[ib]));
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, i: usize, dx: &mut [f32], acc: Accum) {
        if matches!(self.op, BinOp::Div | BinOp::Pow) {
            self.backward_div_pow(cx, i, dx, acc);
            return;
        }
        let dy = cx.dy;
        let other = cx.input(1 - i);
        let op = self.op;
        // d(out)/d(input i) at one element, given the other operand's value there.
        let local = move |g: f32, o: f32| match (op, i) {
            (BinOp::Add, _) | (BinOp::Sub, 0) => g,
            (BinOp::Sub, _) => -g,
            (BinOp::Mul, _) | (BinOp::Div | BinOp::Pow, _) => g * o,
        };
        if self.full[i] && self.full[1 - i] {
            store_zip(acc, dx, dy, other, local);
            return;
        }
        if self.full[i] && op != BinOp::Mul {
            store_zip(acc, dx, dy, dy, |g, _| local(g, 0.0));
            return;
        }
        acc.prepare(dx);
        let (mine, theirs) = (&self.st[i], &self.st[1 - i]);
        walk(&self.out_shape, mine, theirs, &mut self.idx, |j, im, io| dx[im] += local(dy[j], other[io]));
    }
}

impl Binary {
    /// Gradients of `a / b` and `a ** b`, which need both operands and the output: PyTorch's
    /// formulas `g / b`, `-g * y / b`, `g * b * a^(b - 1)` and `g * y * ln(a)`.
    fn backward_div_pow(&mut self, cx: &Bwd<'_>, i: usize, dx: &mut [f32], acc: Accum) {
        let (dy, y) = (cx.dy, cx.y);
        let (mine, other) = (cx.input(i), cx.input(1 - i));
        let op = self.op;
        // PyTorch's pow_backward gives 0 where the exponent is 0 (even at a = NaN), and
        // pow_backward_exponent 0 where a = 0 and b >= 0.
        let local = move |g: f32, a: f32, b: f32, y: f32| match (op, i) {
            (BinOp::Div, 0) => g / b,
            (BinOp::Div, _) => -g * y / b,
            (BinOp::Pow, 0) if b == 0.0 => 0.0,
            (BinOp::Pow, 0) => g * b * a.powf(b - 1.0),
            _ if a == 0.0 && b >= 0.0 => 0.0,
            _ => g * y * a.ln(),
        };
        let operands = |m: f32, o: f32| if i == 0 { (m, o) } else { (o, m) };
        if self.full == [true, true] {
            // Written, not added to a zeroed buffer, so that a -0.0 gradient keeps its sign.
            store_each(acc, dx, |j| {
                let (a, b) = operands(mine[j], other[j]);
                local(dy[j], a, b, y[j])
            });
            return;
        }
        acc.prepare(dx);
        let (sm, so) = (&self.st[i], &self.st[1 - i]);
        walk(&self.out_shape, sm, so, &mut self.idx, |j, im, io| {
            let (a, b) = operands(mine[im], other[io]);
            dx[im] += local(dy[j], a, b, y[j]);
        });
    }
}
