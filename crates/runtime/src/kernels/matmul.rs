//! `torch.matmul`, with broadcasting over the batch dimensions; a vector operand is multiplied as
//! the row or column `mase_ir::matmul_shapes` makes of it (same elements, same order).

use super::shape_ops::{strides, walk};
use super::{Accum, Bwd, Fwd, Kernel};
use crate::gemm::{gemm, Mat, MatMut};
use mase_ir::matmul_shapes;

/// A batched matrix product `[..., m, k] x [..., k, n]`.
pub(crate) struct MatMul {
    m: usize,
    k: usize,
    n: usize,
    /// Offset of each output batch's `A` and `B` matrices in their inputs.
    offsets: [Vec<usize>; 2],
    /// Whether an input's matrices are shared by several output batches (its gradient then sums
    /// over them).
    shared: [bool; 2],
    /// Output batches when every one reads its own `A` in order and all share one `B` (a
    /// `[..., m, k]` activation times a `[k, n]` weight, as `x @ w.T` writes a linear layer): the
    /// product then runs as one `[batches * m, k] x [k, n]` GEMM. 0 otherwise.
    folded: usize,
}

impl MatMul {
    /// The kernel for operands of shapes `a` and `b`, which shape inference has accepted.
    pub fn new(a: &[usize], b: &[usize]) -> MatMul {
        let shapes = matmul_shapes(a, b).expect("shape inference accepted the operands");
        let (a, b, out) = (&shapes.a[..], &shapes.b[..], &shapes.product[..]);
        let (m, k, n) = (a[a.len() - 2], a[a.len() - 1], b[b.len() - 1]);
        let batch = &out[..out.len() - 2];
        let offsets_of = |shape: &[usize], mat: usize| -> Vec<usize> {
            let own = &shape[..shape.len() - 2];
            let st = strides(own);
            let lead = batch.len() - own.len();
            let aligned: Vec<usize> =
                (0..batch.len()).map(|d| if d < lead || own[d - lead] == 1 { 0 } else { st[d - lead] * mat }).collect();
            let mut offs = Vec::with_capacity(batch.iter().product());
            let mut idx = vec![0; batch.len()];
            walk(batch, &aligned, &aligned, &mut idx, |_, o, _| offs.push(o));
            offs
        };
        let count = batch.iter().product::<usize>();
        let na = a[..a.len() - 2].iter().product::<usize>();
        let nb = b[..b.len() - 2].iter().product::<usize>();
        let offsets = [offsets_of(a, m * k), offsets_of(b, k * n)];
        let in_order = offsets[0].iter().enumerate().all(|(i, &o)| o == i * m * k);
        let folded = if count > 1 && nb == 1 && na == count && in_order { count } else { 0 };
        MatMul { m, k, n, offsets, shared: [na < count, nb < count], folded }
    }
}

impl Kernel for MatMul {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let (m, k, n) = (self.m, self.k, self.n);
        let (a, b) = (cx.input(0), cx.input(1));
        if self.folded > 0 {
            // Each row of the product is the sum it is in a batch's own product.
            let rows = self.folded * m;
            gemm(1.0, Mat::new(a, rows, k), Mat::new(b, k, n), 0.0, MatMut::new(&mut y[..rows * n], rows, n), cx.pool);
            return;
        }
        for (bi, (&oa, &ob)) in self.offsets[0].iter().zip(&self.offsets[1]).enumerate() {
            gemm(1.0, Mat::new(&a[oa..], m, k), Mat::new(&b[ob..], k, n), 0.0, MatMut::new(&mut y[bi * m * n..][..m * n], m, n), cx.pool);
        }
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, i: usize, dx: &mut [f32], acc: Accum) {
        let (m, k, n) = (self.m, self.k, self.n);
        let beta = if self.shared[i] {
            acc.prepare(dx);
            1.0
        } else {
            acc.beta()
        };
        let (a, b, dy) = (cx.input(0), cx.input(1), cx.dy);
        if self.folded > 0 {
            let rows = self.folded * m;
            let dyf = Mat::new(dy, rows, n);
            if i == 0 {
                // dA = dY B^T, row by row as in each batch's product.
                gemm(1.0, dyf, Mat::new(b, k, n).t(), acc.beta(), MatMut::new(&mut dx[..rows * k], rows, k), cx.pool);
            } else {
                // dB = A^T dY summed over every batch's rows in one product.
                gemm(1.0, Mat::new(a, rows, k).t(), dyf, acc.beta(), MatMut::new(&mut dx[..k * n], k, n), cx.pool);
            }
            return;
        }
        for (bi, (&oa, &ob)) in self.offsets[0].iter().zip(&self.offsets[1]).enumerate() {
            let dyb = Mat::new(&dy[bi * m * n..], m, n);
            if i == 0 {
                // dA = dY B^T
                gemm(1.0, dyb, Mat::new(&b[ob..], k, n).t(), beta, MatMut::new(&mut dx[oa..][..m * k], m, k), cx.pool);
            } else {
                // dB = A^T dY
                gemm(1.0, Mat::new(&a[oa..], m, k).t(), dyb, beta, MatMut::new(&mut dx[ob..][..k * n], k, n), cx.pool);
            }
        }
    }
}
