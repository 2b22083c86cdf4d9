//! `mean`, `sum` and `amax` over one or several dimensions.

use super::{Accum, Bwd, Fwd, Kernel};
use mase_ir::ReduceSpec;

/// Which reduction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReduceKind {
    Mean,
    Sum,
    Amax,
}

/// A reduction of a tensor over the dimensions of a [`ReduceSpec`]. The plan builds it once per
/// batch shape with, for every input value, the index of the output value it is reduced into;
/// forward and backward walk the input in order, so results do not depend on the thread count.
pub(crate) struct Reduce {
    kind: ReduceKind,
    /// Output index of each input value.
    out_of: Vec<u32>,
    /// How many input values make each output value.
    count: usize,
    /// Sums in f64, one per output value (forward); for `amax`, the number of input values equal
    /// to each maximum (backward).
    acc: Vec<f64>,
}

impl Reduce {
    /// `x` is the input's shape; shape inference has checked `r` against it.
    pub fn new(x: &[usize], r: &ReduceSpec, kind: ReduceKind) -> Reduce {
        let mask = r.mask(x.len()).unwrap_or_else(|_| vec![true; x.len()]);
        // Row-major strides of the output with the reduced dimensions kept as 1 (stride 0).
        let mut strides = vec![0usize; x.len()];
        let mut n_out = 1usize;
        for d in (0..x.len()).rev() {
            if !mask[d] {
                strides[d] = n_out;
                n_out *= x[d];
            }
        }
        let count = x.iter().zip(&mask).filter(|(_, &m)| m).map(|(&d, _)| d).product();
        let numel: usize = x.iter().product();
        let mut out_of = Vec::with_capacity(numel);
        let mut index = vec![0usize; x.len()];
        let mut at = 0usize;
        for _ in 0..numel {
            out_of.push(at as u32);
            // Advances the input index like an odometer, keeping the output index `at` in step.
            for d in (0..x.len()).rev() {
                index[d] += 1;
                at += strides[d];
                if index[d] < x[d] {
                    break;
                }
                at -= strides[d] * x[d];
                index[d] = 0;
            }
        }
        Reduce { kind, out_of, count, acc: vec![0.0; n_out] }
    }
}

impl Kernel for Reduce {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let x = cx.input(0);
        match self.kind {
            ReduceKind::Mean | ReduceKind::Sum => {
                self.acc.fill(0.0);
                for (&v, &o) in x.iter().zip(&self.out_of) {
                    self.acc[o as usize] += f64::from(v);
                }
                let n = self.count as f64;
                let mean = self.kind == ReduceKind::Mean;
                y.iter_mut().zip(&self.acc).for_each(|(o, &s)| *o = if mean { (s / n) as f32 } else { s as f32 });
            }
            ReduceKind::Amax => {
                y.fill(f32::NEG_INFINITY);
                // PyTorch's `max_propagate_nan(acc, v)`: a NaN wins and stays, and of equal values
                // (-0.0 and 0.0) the first is kept.
                for (&v, &o) in x.iter().zip(&self.out_of) {
                    let m = &mut y[o as usize];
                    if !m.is_nan() && (v > *m || v.is_nan()) {
                        *m = v;
                    }
                }
            }
        }
    }

    fn backward_params(&mut self, cx: &mut Bwd<'_>) {
        if self.kind == ReduceKind::Amax {
            // The number of values equal to each maximum, which share its gradient.
            let (x, y) = (cx.input(0), cx.y);
            self.acc.fill(0.0);
            for (&v, &o) in x.iter().zip(&self.out_of) {
                if v == y[o as usize] {
                    self.acc[o as usize] += 1.0;
                }
            }
        }
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, _i: usize, dx: &mut [f32], acc: Accum) {
        let (x, y, dy) = (cx.input(0), cx.y, cx.dy);
        let it = dx.iter_mut().zip(&self.out_of);
        match self.kind {
            ReduceKind::Sum => it.for_each(|(d, &o)| acc.put(d, dy[o as usize])),
            // PyTorch divides the gradient by the count (rather than multiplying by its inverse).
            ReduceKind::Mean => {
                let n = self.count as f32;
                it.for_each(|(d, &o)| acc.put(d, dy[o as usize] / n));
            }
            // PyTorch's `grad / count * (x == max)`: tied maxima share the gradient evenly, and a
            // NaN maximum (which equals nothing, count 0) gives NaN to every value of its group.
            ReduceKind::Amax => it.zip(x).for_each(|((d, &o), &v)| {
                let o = o as usize;
                let share = dy[o] / self.acc[o] as f32;
                acc.put(d, share * if v == y[o] { 1.0 } else { 0.0 });
            }),
        }
    }
}
