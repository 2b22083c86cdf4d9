//! `add`, `sub`, `mul`, `div`, `pow` and the comparisons with NumPy broadcasting. The gradient of a
//! broadcast input is the sum of the output gradient over the dimensions it was broadcast along; a
//! comparison (1.0 where it holds, 0.0 elsewhere) passes none, as PyTorch's bool result does not.

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
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl BinOp {
    fn is_comparison(self) -> bool {
        matches!(self, BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge)
    }
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
pub(crate) fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
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
        // IEEE comparisons, as PyTorch's: NaN is unordered, equal to nothing and unequal to all.
        BinOp::Eq => f32::from(u8::from(a == b)),
        BinOp::Ne => f32::from(u8::from(a != b)),
        BinOp::Lt => f32::from(u8::from(a < b)),
        BinOp::Le => f32::from(u8::from(a <= b)),
        BinOp::Gt => f32::from(u8::from(a > b)),
        BinOp::Ge => f32::from(u8::from(a >= b)),
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
                BinOp::Div | BinOp::Pow | BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                    y.iter_mut().zip(a.iter().zip(b)).for_each(|(o, (p, q))| *o = apply(op, *p, *q))
                }
            }
            return;
        }
        if let Some((len, [sa, sb])) = self.contiguous_rows() {
            let (shape, st, idx) = (&self.out_shape, &self.st, &mut self.idx);
            walk_rows(shape, &st[0], &st[1], idx, |j, ia, ib| {
                let yr = &mut y[j..][..len];
                let (ar, br) = (Side::of(a, ia, len, sa), Side::of(b, ib, len, sb));
                match op {
                    BinOp::Add => row_apply(yr, ar, br, |p, q| p + q),
                    BinOp::Sub => row_apply(yr, ar, br, |p, q| p - q),
                    BinOp::Mul => row_apply(yr, ar, br, |p, q| p * q),
                    BinOp::Div | BinOp::Pow | BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => {
                        row_apply(yr, ar, br, |p, q| apply(op, p, q))
                    }
                }
            });
            return;
        }
        walk(&self.out_shape, &self.st[0], &self.st[1], &mut self.idx, |j, ia, ib| y[j] = apply(op, a[ia], b[ib]));
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, i: usize, dx: &mut [f32], acc: Accum) {
        if self.op.is_comparison() {
            acc.prepare(dx);
            return;
        }
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
            // Returned above: no gradient.
            (BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge, _) => 0.0,
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
        if let Some((len, strides)) = self.contiguous_rows() {
            // Row by row, each element of `dx` gets the same additions in the same order as in
            // the element walk below.
            let (sm, so) = (strides[i], strides[1 - i]);
            let (shape, st, idx) = (&self.out_shape, &self.st, &mut self.idx);
            walk_rows(shape, &st[i], &st[1 - i], idx, |j, im, io| {
                let g = &dy[j..][..len];
                match (sm, Side::of(other, io, len, so)) {
                    (1, Side::Row(o)) => dx[im..][..len].iter_mut().zip(g.iter().zip(o)).for_each(|(d, (&g, &o))| *d += local(g, o)),
                    (1, Side::Value(o)) => dx[im..][..len].iter_mut().zip(g).for_each(|(d, &g)| *d += local(g, o)),
                    (_, Side::Row(o)) => dx[im] = g.iter().zip(o).fold(dx[im], |d, (&g, &o)| d + local(g, o)),
                    (_, Side::Value(o)) => dx[im] = g.iter().fold(dx[im], |d, &g| d + local(g, o)),
                }
            });
            return;
        }
        let (mine, theirs) = (&self.st[i], &self.st[1 - i]);
        walk(&self.out_shape, mine, theirs, &mut self.idx, |j, im, io| dx[im] += local(dy[j], other[io]));
    }
}

/// One operand's part of an output row: a run of values, or one value broadcast along the row.
#[derive(Clone, Copy)]
enum Side<'a> {
    Row(&'a [f32]),
    Value(f32),
}

impl<'a> Side<'a> {
    /// The operand `data` at offset `at` for a row of `len` values, read with last-dimension
    /// stride `stride` (1 or 0).
    #[inline(always)]
    fn of(data: &'a [f32], at: usize, len: usize, stride: usize) -> Side<'a> {
        if stride == 1 {
            Side::Row(&data[at..][..len])
        } else {
            Side::Value(data[at])
        }
    }
}

/// `y[t] = f(a[t], b[t])` over one row, with the operands' kind decided outside the loop so that
/// it vectorises.
#[inline(always)]
fn row_apply(y: &mut [f32], a: Side<'_>, b: Side<'_>, f: impl Fn(f32, f32) -> f32) {
    match (a, b) {
        (Side::Row(a), Side::Row(b)) => y.iter_mut().zip(a.iter().zip(b)).for_each(|(o, (&p, &q))| *o = f(p, q)),
        (Side::Row(a), Side::Value(q)) => y.iter_mut().zip(a).for_each(|(o, &p)| *o = f(p, q)),
        (Side::Value(p), Side::Row(b)) => y.iter_mut().zip(b).for_each(|(o, &q)| *o = f(p, q)),
        (Side::Value(p), Side::Value(q)) => y.fill(f(p, q)),
    }
}

/// `walk` over whole rows of the last dimension: `f(j, ia, ib)` with the offsets of each row's
/// first element.
fn walk_rows(shape: &[usize], sa: &[usize], sb: &[usize], idx: &mut [usize], mut f: impl FnMut(usize, usize, usize)) {
    let last = shape.len() - 1;
    let len = shape[last];
    walk(&shape[..last], &sa[..last], &sb[..last], &mut idx[..last], |j, ia, ib| f(j * len, ia, ib));
}

impl Binary {
    /// The row length and both inputs' last-dimension strides, where rows are long enough to be
    /// worth their own loops and each input either runs along them (stride 1) or holds one
    /// value per row (stride 0).
    fn contiguous_rows(&self) -> Option<(usize, [usize; 2])> {
        let len = *self.out_shape.last()?;
        let strides = [*self.st[0].last()?, *self.st[1].last()?];
        (len >= 8 && strides.iter().all(|&s| s <= 1)).then_some((len, strides))
    }

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
