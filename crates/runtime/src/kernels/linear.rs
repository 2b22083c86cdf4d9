//! `nn.Linear`: `y = x W^T + b` over the last dimension, any number of leading dimensions.

use super::{Accum, Bwd, Fwd, Kernel};
use crate::gemm::{gemm, Mat, MatMut};

/// A linear layer applied to `rows` vectors of `inf` features.
pub(crate) struct Linear {
    rows: usize,
    inf: usize,
    outf: usize,
    weight: usize,
    bias: Option<usize>,
}

impl Linear {
    /// `x_len` is the number of values of the input; `weight`/`bias` are parameter slots.
    pub fn new(x_len: usize, inf: usize, outf: usize, weight: usize, bias: Option<usize>) -> Linear {
        Linear { rows: x_len.checked_div(inf).unwrap_or(0), inf, outf, weight, bias }
    }
}

impl Kernel for Linear {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let (rows, inf, outf) = (self.rows, self.inf, self.outf);
        let w = &cx.params[self.weight].data;
        gemm(1.0, Mat::new(cx.input(0), rows, inf), Mat::new(w, outf, inf).t(), 0.0, MatMut::new(y, rows, outf), cx.pool);
        // The bias is added after the product (as addmm does), in a loop rather than by copying
        // it into every row first: the rows are short, and a copy per row costs a call.
        if let Some(b) = self.bias {
            let bias = &cx.params[b].data;
            for row in y.chunks_exact_mut(outf.max(1)) {
                row.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
            }
        }
        // The fused batch norm and ReLU (`crate::fuse`), in one more pass over the product.
        if let Some(e) = cx.epilogue.take() {
            e.prepare(cx.params);
            e.apply_rows(y, outf);
        }
    }

    fn backward_params(&mut self, cx: &mut Bwd<'_>) {
        let Some(acc) = cx.param_acc else { return };
        let (rows, inf, outf) = (self.rows, self.inf, self.outf);
        let x = &cx.vals[cx.ins[0]];
        // dW[out, in] = dY^T X
        let dw = &mut cx.params[self.weight].grad;
        gemm(1.0, Mat::new(cx.dy, rows, outf).t(), Mat::new(x, rows, inf), acc.beta(), MatMut::new(dw, outf, inf), cx.pool);
        if let Some(b) = self.bias {
            let db = &mut cx.params[b].grad;
            match acc {
                Accum::Write => {
                    db.fill(0.0);
                    for row in cx.dy.chunks_exact(outf.max(1)) {
                        for (d, g) in db.iter_mut().zip(row) {
                            *d += g;
                        }
                    }
                }
                // Gradient accumulation: this batch's sum first (the same bits as `Write`), then
                // added to the gradient held, as PyTorch adds a fresh `.grad` contribution.
                Accum::Add => {
                    for (j, d) in db.iter_mut().enumerate() {
                        *d += cx.dy.iter().skip(j).step_by(outf.max(1)).fold(0.0, |s, g| s + g);
                    }
                }
            }
        }
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, _i: usize, dx: &mut [f32], acc: Accum) {
        // dX = dY W
        let w = &cx.params[self.weight].data;
        gemm(
            1.0,
            Mat::new(cx.dy, self.rows, self.outf),
            Mat::new(w, self.outf, self.inf),
            acc.beta(),
            MatMut::new(dx, self.rows, self.inf),
            cx.pool,
        );
    }
}
