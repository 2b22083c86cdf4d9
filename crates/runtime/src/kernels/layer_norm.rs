//! `nn.LayerNorm` and `nn.GroupNorm` (and their functions): normalisations of contiguous rows.
//!
//! Both view the input as `rows` rows of `m` contiguous values, normalise each row with its own
//! mean and biased variance (accumulated in f64, then rounded), and scale and shift each value by
//! an affine entry: layer norm's rows are the trailing `normalized_shape` values and its affine
//! entry is the position in the row; group norm's rows are one sample's group of channels and its
//! affine entry is the channel. In both, value `j` of row `r` reads affine entry
//! `(r % groups) * per_group + j / inner` (layer norm: one group, `per_group = m`, `inner = 1`;
//! group norm: `per_group` channels of `inner` positions each).
//!
//! NaN and infinities propagate as in PyTorch: a row holding one makes its variance NaN (or its
//! mean infinite), so every value of the row is NaN.

use super::vector::sum_f64;
use super::{Accum, Bwd, Fwd, Kernel};
use crate::par::for_each_chunk;
use crate::slots::ParamSlot;

/// Where a normalisation's weight or bias comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Affine {
    /// Neither owned nor passed: weight 1, bias 0.
    Absent,
    /// A parameter slot of the module.
    Slot(usize),
    /// Input `k` of a function call (`F.layer_norm(x, shape, w, b)`).
    Input(usize),
}

/// The row layout of a layer or group norm.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RowLayout {
    pub rows: usize,
    pub groups: usize,
    pub per_group: usize,
    pub inner: usize,
}

impl RowLayout {
    /// Layer norm of `x` over its trailing values `m` (the product of `normalized_shape`).
    pub fn layer(x: &[usize], m: usize) -> RowLayout {
        let n = x.iter().product::<usize>();
        RowLayout { rows: n.checked_div(m).unwrap_or(0), groups: 1, per_group: m, inner: 1 }
    }

    /// Group norm of `x` (`[N, C, ...]`) in `groups` groups.
    pub fn group(x: &[usize], groups: usize) -> RowLayout {
        let (n, c) = (x[0], x[1]);
        let inner = x[2..].iter().product::<usize>();
        RowLayout { rows: n * groups, groups, per_group: c / groups, inner }
    }

    fn m(&self) -> usize {
        self.per_group * self.inner
    }

    /// The number of affine entries (the weight's length).
    fn entries(&self) -> usize {
        self.groups * self.per_group
    }
}

/// A layer or group norm node for one input shape.
pub(crate) struct RowNorm {
    l: RowLayout,
    eps: f64,
    weight: Affine,
    bias: Affine,
    /// Per row: `[rstd, -mean * rstd, mean]` of the last forward, rounded to f32.
    stats: Vec<[f32; 3]>,
    /// Per row: `[mean(g), mean(g * xhat)]` with `g = dy * weight`, for the input gradient.
    coef: Vec<[f32; 2]>,
    /// Per affine entry: the sums of `dy * xhat` and of `dy` over the batch.
    dw: Vec<f64>,
    db: Vec<f64>,
}

/// The weight or bias values, or `None` when absent.
fn affine_values<'a>(a: Affine, params: &'a [ParamSlot], input: impl Fn(usize) -> &'a [f32]) -> Option<&'a [f32]> {
    match a {
        Affine::Absent => None,
        Affine::Slot(s) => Some(&params[s].data),
        Affine::Input(k) => Some(input(k)),
    }
}

impl RowNorm {
    pub fn new(l: RowLayout, eps: f32, weight: Affine, bias: Affine) -> RowNorm {
        let p = l.entries();
        RowNorm {
            l,
            eps: f64::from(eps),
            weight,
            bias,
            stats: vec![[0.0; 3]; l.rows],
            coef: vec![[0.0; 2]; l.rows],
            dw: vec![0.0; p],
            db: vec![0.0; p],
        }
    }

    /// The affine entry of value `j` of row `r`.
    #[inline(always)]
    fn entry(&self, r: usize, j: usize) -> usize {
        (r % self.l.groups) * self.l.per_group + j / self.l.inner
    }
}

impl Kernel for RowNorm {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let (m, eps) = (self.l.m(), self.eps);
        let x = &cx.vals[cx.ins[0]];
        for_each_chunk(cx.pool, x.len(), &mut self.stats, 1, |r, st| {
            let row = &x[r * m..][..m];
            let mean = sum_f64(m, |j| f64::from(row[j])) / m as f64;
            let var = sum_f64(m, |j| {
                let d = f64::from(row[j]) - mean;
                d * d
            }) / m as f64;
            let rstd = (1.0 / (var + eps).sqrt()) as f32;
            // The shift from the rounded factors, so a constant row normalises to exactly 0.
            st[0] = [rstd, -(mean as f32) * rstd, mean as f32];
        });
        let ins = cx.ins;
        let vals = cx.vals;
        let input = |k: usize| vals[ins[k]].as_slice();
        let (w, b) = (affine_values(self.weight, cx.params, input), affine_values(self.bias, cx.params, input));
        let this = &*self;
        let inner = self.l.inner;
        for_each_chunk(cx.pool, x.len(), y, m, |r, yr| {
            let [rstd, shift, mean] = this.stats[r];
            let xr = &x[r * m..][..m];
            if this.l.groups == 1 && inner == 1 {
                // Layer norm, in PyTorch's order: (x * rstd - mean * rstd) * weight + bias.
                for (j, (o, &v)) in yr.iter_mut().zip(xr).enumerate() {
                    *o = (v * rstd + shift) * w.map_or(1.0, |w| w[j]) + b.map_or(0.0, |b| b[j]);
                }
                return;
            }
            // Group norm, in PyTorch's order: per channel a = rstd * weight and
            // c = bias - a * mean, then x * a + c.
            for (k, (yc, xc)) in yr.chunks_mut(inner).zip(xr.chunks(inner)).enumerate() {
                let e = this.entry(r, k * inner);
                let a = rstd * w.map_or(1.0, |w| w[e]);
                let c = -a * mean + b.map_or(0.0, |b| b[e]);
                yc.iter_mut().zip(xc).for_each(|(o, &v)| *o = v * a + c);
            }
        });
    }

    fn backward_params(&mut self, cx: &mut Bwd<'_>) {
        let m = self.l.m();
        let (x, dy) = (&cx.vals[cx.ins[0]], cx.dy);
        let (vals, ins) = (cx.vals, cx.ins);
        let w = affine_values(self.weight, cx.params, |k| vals[ins[k]].as_slice());
        self.dw.fill(0.0);
        self.db.fill(0.0);
        let l = self.l;
        if l.groups == 1 && l.inner == 1 {
            // Layer norm: entry `j` of a row is position `j` of the affine parameters. The
            // parameter sums run across rows in row order, as in the general loop below.
            for r in 0..l.rows {
                let [scale, shift, _] = self.stats[r];
                let (xr, gr) = (&x[r * m..][..m], &dy[r * m..][..m]);
                let (dw, db) = (&mut self.dw[..m], &mut self.db[..m]);
                for j in 0..m {
                    let g = f64::from(gr[j]);
                    dw[j] += g * f64::from(xr[j] * scale + shift);
                    db[j] += g;
                }
                let gw = |j: usize| f64::from(gr[j]) * w.map_or(1.0, |w| f64::from(w[j]));
                let sg = sum_f64(m, gw);
                let sgx = sum_f64(m, |j| gw(j) * f64::from(xr[j] * scale + shift));
                self.coef[r] = [(sg / m as f64) as f32, (sgx / m as f64) as f32];
            }
        } else {
            for r in 0..l.rows {
                let [scale, shift, _] = self.stats[r];
                let (xr, gr) = (&x[r * m..][..m], &dy[r * m..][..m]);
                let (mut sg, mut sgx) = (0.0f64, 0.0f64);
                for (j, (&v, &g)) in xr.iter().zip(gr).enumerate() {
                    let a = (r % l.groups) * l.per_group + j / l.inner;
                    let xhat = f64::from(v * scale + shift);
                    let g = f64::from(g);
                    self.dw[a] += g * xhat;
                    self.db[a] += g;
                    let gw = g * w.map_or(1.0, |w| f64::from(w[a]));
                    sg += gw;
                    sgx += gw * xhat;
                }
                self.coef[r] = [(sg / m as f64) as f32, (sgx / m as f64) as f32];
            }
        }
        let Some(acc) = cx.param_acc else { return };
        for (a, sums) in [(self.weight, &self.dw), (self.bias, &self.db)] {
            if let Affine::Slot(s) = a {
                for (d, &v) in cx.params[s].grad.iter_mut().zip(sums.iter()) {
                    acc.put(d, v as f32);
                }
            }
        }
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, i: usize, dx: &mut [f32], acc: Accum) {
        // The weight's and bias's gradients when they are inputs (summed in backward_params).
        for (a, sums) in [(self.weight, &self.dw), (self.bias, &self.db)] {
            if a == Affine::Input(i) {
                dx.iter_mut().zip(sums.iter()).for_each(|(d, &v)| acc.put(d, v as f32));
                return;
            }
        }
        // PyTorch's form: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * weight.
        let m = self.l.m();
        let (x, dy) = (cx.input(0), cx.dy);
        let w = affine_values(self.weight, cx.params, |k| cx.input(k));
        let this = &*self;
        let layer = this.l.groups == 1 && this.l.inner == 1;
        for_each_chunk(cx.pool, dx.len(), dx, m, |r, dxr| {
            let [scale, shift, _] = this.stats[r];
            let [mg, mgx] = this.coef[r];
            let (xr, gr) = (&x[r * m..][..m], &dy[r * m..][..m]);
            if layer {
                for (j, (d, (&v, &g))) in dxr.iter_mut().zip(xr.iter().zip(gr)).enumerate() {
                    let gw = g * w.map_or(1.0, |w| w[j]);
                    acc.put(d, scale * (gw - mg - (v * scale + shift) * mgx));
                }
                return;
            }
            for (j, (d, (&v, &g))) in dxr.iter_mut().zip(xr.iter().zip(gr)).enumerate() {
                let gw = g * w.map_or(1.0, |w| w[this.entry(r, j)]);
                let xhat = v * scale + shift;
                acc.put(d, scale * (gw - mg - xhat * mgx));
            }
        });
    }
}
