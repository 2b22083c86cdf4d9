//! `nn.Dropout`: in training, zeroes each value with probability `p` and scales the kept ones by
//! `1 / (1 - p)`; the identity in evaluation.

use super::{store_zip, Accum, Bwd, Fwd, Kernel};

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
