//! `nn.Dropout`: in training, zeroes each value with probability `p` and scales the kept ones by
//! `1 / (1 - p)`; the identity in evaluation. torchvision's `StochasticDepth` does the same per
//! sample or per batch.

use super::{store_zip, Accum, Bwd, Fwd, Kernel};
use mase_ir::DepthMode;

/// A dropout node. The mask holds the factor (0 or `1/(1-p)`) each value was multiplied by.
pub(crate) struct Dropout {
    p: f32,
    mask: Vec<f32>,
}

impl Dropout {
    pub fn new(p: f32, len: usize) -> Dropout {
        Dropout { p, mask: vec![0.0; len] }
    }
}

impl Kernel for Dropout {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let x = &cx.vals[cx.ins[0]];
        if !cx.train {
            y.copy_from_slice(x);
            return;
        }
        let keep = 1.0 - self.p;
        // p = 1 drops everything; PyTorch returns zeros rather than 0 * inf.
        let scale = if keep > 0.0 { 1.0 / keep } else { 0.0 };
        for m in self.mask.iter_mut() {
            *m = if cx.rng.uniform() < keep { scale } else { 0.0 };
        }
        y.iter_mut().zip(x.iter().zip(&self.mask)).for_each(|(o, (v, m))| *o = v * m);
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, _i: usize, dx: &mut [f32], acc: Accum) {
        store_zip(acc, dx, cx.dy, &self.mask, |g, m| g * m);
    }
}

/// torchvision's `StochasticDepth`: in training, one draw per sample (`row`) or one for the whole
/// batch (`batch`) keeps the values with probability `1 - p`, scaled by `1 / (1 - p)`, or zeroes
/// them; the identity in evaluation. The factors are multiplied in, as torchvision does
/// (`input * noise`), so a NaN stays NaN in a dropped sample.
pub(crate) struct StochasticDepth {
    p: f32,
    mode: DepthMode,
    /// Values per sample.
    row_len: usize,
    /// The factor each sample was multiplied by (0 or `1/(1-p)`).
    factors: Vec<f32>,
}

impl StochasticDepth {
    pub fn new(p: f32, mode: DepthMode, out: &[usize]) -> StochasticDepth {
        let rows = out.first().copied().unwrap_or(1).max(1);
        let row_len = out.iter().skip(1).product::<usize>();
        StochasticDepth { p, mode, row_len, factors: vec![1.0; rows] }
    }
}

impl Kernel for StochasticDepth {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let x = &cx.vals[cx.ins[0]];
        if !cx.train || self.p == 0.0 {
            self.factors.iter_mut().for_each(|f| *f = 1.0);
            y.copy_from_slice(x);
            return;
        }
        let keep = 1.0 - self.p;
        let scale = if keep > 0.0 { 1.0 / keep } else { 0.0 };
        match self.mode {
            DepthMode::Row => self.factors.iter_mut().for_each(|f| *f = if cx.rng.uniform() < keep { scale } else { 0.0 }),
            DepthMode::Batch => {
                let f = if cx.rng.uniform() < keep { scale } else { 0.0 };
                self.factors.iter_mut().for_each(|v| *v = f);
            }
        }
        let n = self.row_len.max(1);
        for ((yr, xr), f) in y.chunks_mut(n).zip(x.chunks(n)).zip(&self.factors) {
            yr.iter_mut().zip(xr).for_each(|(o, v)| *o = v * f);
        }
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, _i: usize, dx: &mut [f32], acc: Accum) {
        let n = self.row_len.max(1);
        for ((dr, gr), &f) in dx.chunks_mut(n).zip(cx.dy.chunks(n)).zip(&self.factors) {
            dr.iter_mut().zip(gr).for_each(|(d, &g)| acc.put(d, g * f));
        }
    }
}
