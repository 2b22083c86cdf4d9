//! `nn.BatchNorm1d` (`[N, C]` and `[N, C, L]`) and `nn.BatchNorm2d` (`[N, C, H, W]`).
//!
//! Training normalises with the biased batch variance and updates the running variance with
//! the unbiased one, with PyTorch's momentum convention; statistics and gradient sums are
//! accumulated in f64, as PyTorch's CPU kernel does. Evaluation uses the running statistics.

use super::activation::relu_grad;
use super::vector::sum_f64;
use super::{Accum, Bwd, Fwd, Kernel};
use crate::par::for_each_chunk;
use crate::slots::ParamSlot;
use mase_ir::NormSpec;
use rayon::ThreadPool;

/// Parameter slots of a batch-norm node.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NormSlots {
    pub weight: Option<usize>,
    pub bias: Option<usize>,
    pub running_mean: usize,
    pub running_var: usize,
}

/// A batch-norm node over `n` samples of `c` channels with `s` values per channel and sample.
pub(crate) struct BatchNorm {
    n: usize,
    c: usize,
    s: usize,
    eps: f64,
    momentum: f64,
    slots: NormSlots,
    /// Batch mean (f64, for the variance pass) and its f32 rounding, which normalises.
    mean64: Vec<f64>,
    mean: Vec<f32>,
    istd: Vec<f32>,
    /// Per-channel `y = x * scale + shift` of the last forward.
    scale: Vec<f32>,
    shift: Vec<f32>,
    /// Per-channel pairs: (sum, sum of squared deviations) in forward, (sum dy, sum dy*(x-mean))
    /// in backward.
    sums: Vec<f64>,
    /// Per-channel constants of the input gradient: k, mean of dy, istd*weight, mean.
    coef: Vec<[f32; 4]>,
    /// Contiguous per-channel accumulators of the `[N, C]` loops.
    acc: Vec<f64>,
    acc2: Vec<f64>,
}

impl BatchNorm {
    pub fn new(spec: &NormSpec, shape: &[usize], slots: NormSlots) -> BatchNorm {
        let (n, c) = (shape[0], shape[1]);
        let s = shape[2..].iter().product::<usize>();
        BatchNorm {
            n,
            c,
            s,
            eps: f64::from(spec.eps),
            momentum: f64::from(spec.momentum),
            slots,
            mean64: vec![0.0; c],
            mean: vec![0.0; c],
            istd: vec![0.0; c],
            scale: vec![0.0; c],
            shift: vec![0.0; c],
            sums: vec![0.0; 2 * c],
            coef: vec![[0.0; 4]; c],
            acc: vec![0.0; c],
            acc2: vec![0.0; c],
        }
    }

    /// Fills `sums[2ch]` with the sum of `x` and then `sums[2ch+1]` with the sum of squared
    /// deviations from the mean, per channel.
    fn batch_stats(&mut self, pool: Option<&ThreadPool>, x: &[f32]) {
        let (n, c, s) = (self.n, self.c, self.s);
        let m = (n * s) as f64;
        if s == 1 {
            // [N, C]: walk rows so that the inner loops run over contiguous channels, with one
            // accumulator per channel (`sum`, then `sq`) so the loops vectorise.
            let (sum, sq) = (&mut self.acc[..c], &mut self.acc2[..c]);
            sum.fill(0.0);
            for row in x.chunks_exact(c) {
                sum.iter_mut().zip(row).for_each(|(a, &v)| *a += f64::from(v));
            }
            self.mean64.iter_mut().zip(sum.iter()).for_each(|(mu, t)| *mu = t / m);
            sq.fill(0.0);
            for row in x.chunks_exact(c) {
                sq.iter_mut().zip(row.iter().zip(&self.mean64)).for_each(|(a, (&v, mu))| {
                    let d = f64::from(v) - mu;
                    *a += d * d;
                });
            }
            for ch in 0..c {
                self.sums[2 * ch] = sum[ch];
                self.sums[2 * ch + 1] = sq[ch];
            }
            return;
        }
        let block = |ch: usize, i: usize| (i * c + ch) * s;
        for_each_chunk(pool, n * c * s, &mut self.sums, 2, |ch, out| {
            // Each image's plane in eight f64 lanes (`sum_f64`), the planes in image order.
            let total: f64 = (0..n)
                .map(|i| {
                    let xb = &x[block(ch, i)..][..s];
                    sum_f64(s, |j| f64::from(xb[j]))
                })
                .sum();
            let mu = total / m;
            let sq: f64 = (0..n)
                .map(|i| {
                    let xb = &x[block(ch, i)..][..s];
                    sum_f64(s, |j| {
                        let d = f64::from(xb[j]) - mu;
                        d * d
                    })
                })
                .sum();
            out[0] = total;
            out[1] = sq;
        });
        for ch in 0..c {
            self.mean64[ch] = self.sums[2 * ch] / m;
        }
    }

    /// Fills `sums` with per-channel `(sum dy, sum dy * (x - mean))`, where `dy` is
    /// `mask(r, g)` of the gradient `g` read and the value `r` at the same place of `r_all`
    /// (the output of a fused ReLU, or `dy` itself when `mask` ignores it).
    fn grad_sums<M: Fn(f32, f32) -> f32 + Sync + Copy>(
        &mut self,
        pool: Option<&ThreadPool>,
        x: &[f32],
        dy: &[f32],
        r_all: &[f32],
        mask: M,
    ) {
        let (n, c, s) = (self.n, self.c, self.s);
        let mean = &self.mean;
        if s == 1 {
            let (sd, dot) = (&mut self.acc[..c], &mut self.acc2[..c]);
            sd.fill(0.0);
            dot.fill(0.0);
            for ((xr, gr), rr) in x.chunks_exact(c).zip(dy.chunks_exact(c)).zip(r_all.chunks_exact(c)) {
                for ((a, b), (((&xv, &g), &r), &mu)) in sd.iter_mut().zip(dot.iter_mut()).zip(xr.iter().zip(gr).zip(rr).zip(mean)) {
                    let g = f64::from(mask(r, g));
                    *a += g;
                    *b += f64::from(xv - mu) * g;
                }
            }
            for ch in 0..c {
                self.sums[2 * ch] = sd[ch];
                self.sums[2 * ch + 1] = dot[ch];
            }
            return;
        }
        for_each_chunk(pool, n * c * s, &mut self.sums, 2, |ch, out| {
            let (mut sd, mut dot) = (0.0f64, 0.0f64);
            for i in 0..n {
                let k = (i * c + ch) * s;
                let (xb, gb, rb) = (&x[k..k + s], &dy[k..k + s], &r_all[k..k + s]);
                let g = |j: usize| mask(rb[j], gb[j]);
                sd += sum_f64(s, |j| f64::from(g(j)));
                dot += sum_f64(s, |j| f64::from(xb[j] - mean[ch]) * f64::from(g(j)));
            }
            out[0] = sd;
            out[1] = dot;
        });
    }

    /// `y = x * scale[ch] + shift[ch]`.
    fn apply(&self, pool: Option<&ThreadPool>, x: &[f32], y: &mut [f32]) {
        let (c, s) = (self.c, self.s);
        let (scale, shift) = (&self.scale, &self.shift);
        if s == 1 {
            for (yr, xr) in y.chunks_exact_mut(c).zip(x.chunks_exact(c)) {
                yr.iter_mut().zip(xr.iter().zip(scale.iter().zip(shift))).for_each(|(o, (&v, (&a, &b)))| *o = v * a + b);
            }
            return;
        }
        for_each_chunk(pool, y.len(), y, c * s, |i, yi| {
            let xi = &x[i * c * s..][..c * s];
            for ch in 0..c {
                let (a, b) = (scale[ch], shift[ch]);
                for (yv, xv) in yi[ch * s..][..s].iter_mut().zip(&xi[ch * s..][..s]) {
                    *yv = xv * a + b;
                }
            }
        });
    }

    /// The input gradient (see [`Kernel::backward_input`]) with `dy` read through `mask` as in
    /// [`BatchNorm::grad_sums`].
    fn input_grad<M: Fn(f32, f32) -> f32 + Sync + Copy>(&self, cx: &Bwd<'_>, r_all: &[f32], mask: M, dx: &mut [f32], acc: Accum) {
        // PyTorch's form: dx = (dy - mean(dy) - (x - mean) * k) * istd * w, k = dotp * istd^2 / m.
        let (c, s) = (self.c, self.s);
        let (x, dy, coef) = (&cx.vals[cx.ins[0]], cx.dy, &self.coef);
        if s == 1 {
            for (((dxr, dyr), xr), rr) in dx.chunks_exact_mut(c).zip(dy.chunks_exact(c)).zip(x.chunks_exact(c)).zip(r_all.chunks_exact(c)) {
                let it = dxr.iter_mut().zip(dyr.iter().zip(xr).zip(rr)).zip(coef);
                match acc {
                    Accum::Write => it.for_each(|((d, ((&g, &xv), &r)), &[k, gm, iw, mu])| *d = (mask(r, g) - gm - (xv - mu) * k) * iw),
                    Accum::Add => it.for_each(|((d, ((&g, &xv), &r)), &[k, gm, iw, mu])| *d += (mask(r, g) - gm - (xv - mu) * k) * iw),
                }
            }
            return;
        }
        for_each_chunk(cx.pool, dx.len(), dx, c * s, |i, dxi| {
            for (ch, &[k, gm, iw, mu]) in coef.iter().enumerate() {
                let base = (i * c + ch) * s;
                let it = dxi[ch * s..][..s].iter_mut().zip(dy[base..base + s].iter().zip(&x[base..base + s]).zip(&r_all[base..base + s]));
                match acc {
                    Accum::Write => it.for_each(|(d, ((&g, &xv), &r))| *d = (mask(r, g) - gm - (xv - mu) * k) * iw),
                    Accum::Add => it.for_each(|(d, ((&g, &xv), &r))| *d += (mask(r, g) - gm - (xv - mu) * k) * iw),
                }
            }
        });
    }

    fn weight(&self, ch: usize, p: &[ParamSlot]) -> f32 {
        self.slots.weight.map_or(1.0, |w| p[w].data[ch])
    }

    fn bias(&self, ch: usize, p: &[ParamSlot]) -> f32 {
        self.slots.bias.map_or(0.0, |b| p[b].data[ch])
    }
}

/// The evaluation coefficients `y = x * scale + shift` of a batch norm from its running
/// statistics: `scale = weight / sqrt(running_var + eps)`, `shift = bias - running_mean * scale`.
/// The fused epilogues (`crate::fuse`) call it too, so they normalise with the same bits.
pub(crate) fn eval_coefficients(slots: &NormSlots, eps: f32, params: &[ParamSlot], scale: &mut [f32], shift: &mut [f32]) {
    for (ch, (a_out, b_out)) in scale.iter_mut().zip(shift.iter_mut()).enumerate() {
        let rv = params[slots.running_var].data[ch];
        let rm = params[slots.running_mean].data[ch];
        let w = slots.weight.map_or(1.0, |w| params[w].data[ch]);
        let b = slots.bias.map_or(0.0, |b| params[b].data[ch]);
        (*a_out, *b_out) = batch_norm_eval_coefficients(w, b, rm, rv, eps);
    }
}

/// One channel's evaluation coefficients `(scale, shift)` from its weight, bias, running mean and
/// running variance, in `f32` as the kernel computes them: `scale = weight / sqrt(var + eps)`,
/// `shift = bias - mean * scale`. The hardware's thresholds of binarized layers are derived from
/// these same bits (`mase_hw::bipolar`).
pub fn batch_norm_eval_coefficients(weight: f32, bias: f32, mean: f32, var: f32, eps: f32) -> (f32, f32) {
    let a = weight / (var + eps).sqrt();
    (a, bias - mean * a)
}

impl Kernel for BatchNorm {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let x = &cx.vals[cx.ins[0]];
        if cx.train {
            self.batch_stats(cx.pool, x);
            let m = (self.n * self.s) as f64;
            let mom = self.momentum;
            for ch in 0..self.c {
                let var = self.sums[2 * ch + 1] / m;
                self.mean[ch] = self.mean64[ch] as f32;
                self.istd[ch] = (1.0 / (var + self.eps).sqrt()) as f32;
                let rm = &mut cx.params[self.slots.running_mean].data[ch];
                *rm = (mom * self.mean64[ch] + (1.0 - mom) * f64::from(*rm)) as f32;
                let unbiased = if m > 1.0 { var * m / (m - 1.0) } else { var };
                let rv = &mut cx.params[self.slots.running_var].data[ch];
                *rv = (mom * unbiased + (1.0 - mom) * f64::from(*rv)) as f32;
                let a = self.weight(ch, cx.params) * self.istd[ch];
                self.scale[ch] = a;
                self.shift[ch] = self.bias(ch, cx.params) - self.mean[ch] * a;
            }
        } else {
            eval_coefficients(&self.slots, self.eps as f32, cx.params, &mut self.scale, &mut self.shift);
        }
        self.apply(cx.pool, x, y);
    }

    fn backward_params(&mut self, cx: &mut Bwd<'_>) {
        let x = &cx.vals[cx.ins[0]];
        match cx.relu_out {
            Some(r) => self.grad_sums(cx.pool, x, cx.dy, r, relu_grad),
            None => self.grad_sums(cx.pool, x, cx.dy, cx.dy, |_, g| g),
        }
        let m = (self.n * self.s) as f64;
        for ch in 0..self.c {
            let (sum_dy, dotp) = (self.sums[2 * ch], self.sums[2 * ch + 1]);
            let istd = f64::from(self.istd[ch]);
            let iw = self.istd[ch] * self.weight(ch, cx.params);
            self.coef[ch] = [(dotp * istd * istd / m) as f32, (sum_dy / m) as f32, iw, self.mean[ch]];
        }
        let Some(acc) = cx.param_acc else { return };
        for ch in 0..self.c {
            let (sum_dy, dotp) = (self.sums[2 * ch], self.sums[2 * ch + 1]);
            if let Some(w) = self.slots.weight {
                acc.put(&mut cx.params[w].grad[ch], (dotp * f64::from(self.istd[ch])) as f32);
            }
            if let Some(b) = self.slots.bias {
                acc.put(&mut cx.params[b].grad[ch], sum_dy as f32);
            }
        }
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, _i: usize, dx: &mut [f32], acc: Accum) {
        match cx.relu_out {
            Some(r) => self.input_grad(cx, r, relu_grad, dx, acc),
            None => self.input_grad(cx, cx.dy, |_, g| g, dx, acc),
        }
    }
}
