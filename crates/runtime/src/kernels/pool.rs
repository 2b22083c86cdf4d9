//! Max, average and adaptive-average pooling in one and two dimensions.
//!
//! A 1-D pool runs as a 2-D one of height 1. Every `(sample, channel)` plane is independent, so
//! large inputs are split over planes on the pool.

use super::{Accum, Bwd, Fwd, Kernel};
use crate::par::for_each_chunk;
use mase_ir::PoolSpec;

/// Sizes of a pooling node for one batch shape.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PoolGeom {
    ih: usize,
    iw: usize,
    oh: usize,
    ow: usize,
    kh: usize,
    kw: usize,
    sh: usize,
    sw: usize,
    ph: usize,
    pw: usize,
    /// Average pools: whether the divisor counts padded positions (PyTorch's default).
    count_include_pad: bool,
}

impl PoolGeom {
    /// Geometry from the spec and the input/output shapes (`[N, C, L]` or `[N, C, H, W]`).
    pub fn new(spec: &PoolSpec, x: &[usize], y: &[usize]) -> PoolGeom {
        let two = |v: &[usize], fill: usize| if v.len() == 1 { (fill, v[0]) } else { (v[0], v[1]) };
        let (ih, iw) = if x.len() == 3 { (1, x[2]) } else { (x[2], x[3]) };
        let (oh, ow) = if y.len() == 3 { (1, y[2]) } else { (y[2], y[3]) };
        let (kh, kw) = two(&spec.kernel, 1);
        let (sh, sw) = two(&spec.stride, 1);
        let (ph, pw) = two(&spec.padding, 0);
        PoolGeom { ih, iw, oh, ow, kh, kw, sh, sw, ph, pw, count_include_pad: spec.count_include_pad }
    }

    fn in_plane(&self) -> usize {
        self.ih * self.iw
    }
    fn out_plane(&self) -> usize {
        self.oh * self.ow
    }

    /// The input rows and columns of output `(oy, ox)`'s window, clipped to the input.
    fn window(&self, oy: usize, ox: usize) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
        let clip = |o: usize, s: usize, p: usize, k: usize, len: usize| {
            let start = (o * s) as isize - p as isize;
            let end = (start + k as isize).min(len as isize);
            (start.max(0) as usize)..(end.max(0) as usize)
        };
        (clip(oy, self.sh, self.ph, self.kh, self.ih), clip(ox, self.sw, self.pw, self.kw, self.iw))
    }

    /// The divisor of output `(oy, ox)` of an average pool, as PyTorch's kernel computes it: the
    /// window clipped to the padded input when padded positions count (so a `ceil_mode` window
    /// that runs past the right padding divides by less than the kernel area), else clipped to
    /// the input.
    fn divisor(&self, oy: usize, ox: usize) -> usize {
        if !self.count_include_pad {
            let (rows, cols) = self.window(oy, ox);
            return rows.len() * cols.len();
        }
        let span = |o: usize, s: usize, p: usize, k: usize, len: usize| (o * s + k).min(len + 2 * p) - o * s;
        span(oy, self.sh, self.ph, self.kh, self.ih) * span(ox, self.sw, self.pw, self.kw, self.iw)
    }

    /// A 2x2 window with stride 2, no padding and every window inside the input (VGG's pools),
    /// which [`MaxPool`] runs without clipping windows.
    fn is_2x2(&self) -> bool {
        // `ceil_mode` may add a last row or column of windows that runs past the input.
        (self.kh, self.kw, self.sh, self.sw, self.ph, self.pw) == (2, 2, 2, 2, 0, 0) && 2 * self.oh <= self.ih && 2 * self.ow <= self.iw
    }

    /// [`PoolGeom::argmax`] of every window of a 2x2 pool, in output order: the same comparisons
    /// in the same order (row by row, a later value wins only when strictly larger, NaN wins at
    /// once), without the clipping of the general case.
    fn argmax_2x2(&self, xp: &[f32], mut f: impl FnMut(usize, usize)) {
        let iw = self.iw;
        for oy in 0..self.oh {
            let (r0, r1) = (2 * oy * iw, (2 * oy + 1) * iw);
            for ox in 0..self.ow {
                let mut at = r0 + 2 * ox;
                let mut best = xp[at];
                if !best.is_nan() {
                    for i in [r0 + 2 * ox + 1, r1 + 2 * ox, r1 + 2 * ox + 1] {
                        let v = xp[i];
                        if v > best || v.is_nan() {
                            best = v;
                            at = i;
                            if v.is_nan() {
                                break;
                            }
                        }
                    }
                }
                f(oy * self.ow + ox, at);
            }
        }
    }

    /// Index within the plane of the first maximum of the window (NaN wins, as in PyTorch).
    /// Calls `f(o, at)` for every output `o` of a plane with `at` the index of its window's
    /// maximum in `xp` (the fast 2x2 path where it applies).
    fn for_each_argmax(&self, xp: &[f32], mut f: impl FnMut(usize, usize)) {
        if self.is_2x2() {
            self.argmax_2x2(xp, f);
            return;
        }
        for oy in 0..self.oh {
            for ox in 0..self.ow {
                f(oy * self.ow + ox, self.argmax(xp, oy, ox));
            }
        }
    }

    fn argmax(&self, xp: &[f32], oy: usize, ox: usize) -> usize {
        let (rows, cols) = self.window(oy, ox);
        let mut best = f32::NEG_INFINITY;
        let mut at = rows.start * self.iw + cols.start;
        for r in rows {
            for c in cols.clone() {
                let v = xp[r * self.iw + c];
                if v > best || v.is_nan() {
                    best = v;
                    at = r * self.iw + c;
                    if v.is_nan() {
                        return at;
                    }
                }
            }
        }
        at
    }
}

/// Max pooling. The argmax is found again in backward instead of stored, which costs one more
/// scan of the windows and saves a buffer per node.
pub(crate) struct MaxPool {
    pub g: PoolGeom,
}

/// The value [`PoolGeom::argmax`] would pick after `best` when the window goes on with `v`: `v`
/// when strictly larger, or NaN after a number; a NaN already picked stays. Written as a choice
/// without branches, so that [`max_2x2`] vectorises.
#[inline(always)]
fn later_max(best: f32, v: f32) -> f32 {
    if (v > best) | (v.is_nan() & !best.is_nan()) {
        v
    } else {
        best
    }
}

/// The maxima of the 2x2 windows of one pair of input rows (`top`, `bottom`) into the row
/// `out`: the values [`PoolGeom::argmax_2x2`] picks (the first NaN, else the first of equal
/// maxima, so `-0.0` before `+0.0` stays `-0.0`), without the indices a forward pass does not
/// need. vgg7's pools spent 5-6 % of an eval batch finding indices one window at a time.
fn max_2x2(top: &[f32], bottom: &[f32], out: &mut [f32]) {
    for ((o, t), b) in out.iter_mut().zip(top.chunks_exact(2)).zip(bottom.chunks_exact(2)) {
        *o = later_max(later_max(later_max(t[0], t[1]), b[0]), b[1]);
    }
}

impl Kernel for MaxPool {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let g = self.g;
        let x = cx.input(0);
        for_each_chunk(cx.pool, x.len(), y, g.out_plane(), |p, yp| {
            let xp = &x[p * g.in_plane()..][..g.in_plane()];
            if g.is_2x2() {
                for (oy, row) in yp.chunks_exact_mut(g.ow).enumerate() {
                    let (top, bottom) = (&xp[2 * oy * g.iw..][..2 * g.ow], &xp[(2 * oy + 1) * g.iw..][..2 * g.ow]);
                    max_2x2(top, bottom, row);
                }
            } else {
                g.for_each_argmax(xp, |o, at| yp[o] = xp[at]);
            }
        });
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, _i: usize, dx: &mut [f32], acc: Accum) {
        let g = self.g;
        let (x, dy) = (cx.input(0), cx.dy);
        acc.prepare(dx);
        for_each_chunk(cx.pool, x.len(), dx, g.in_plane(), |p, dxp| {
            let xp = &x[p * g.in_plane()..][..g.in_plane()];
            let dyp = &dy[p * g.out_plane()..][..g.out_plane()];
            g.for_each_argmax(xp, |o, at| dxp[at] += dyp[o]);
        });
    }
}

/// Average pooling: each window's sum divided by [`PoolGeom::divisor`] (the kernel area, except
/// for windows cut by `ceil_mode` or, with `count_include_pad=False`, by the padding).
pub(crate) struct AvgPool {
    pub g: PoolGeom,
}

impl Kernel for AvgPool {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let g = self.g;
        let x = cx.input(0);
        for_each_chunk(cx.pool, x.len(), y, g.out_plane(), |p, yp| {
            let xp = &x[p * g.in_plane()..][..g.in_plane()];
            for oy in 0..g.oh {
                for ox in 0..g.ow {
                    let (rows, cols) = g.window(oy, ox);
                    let sum: f32 = rows.map(|r| xp[r * g.iw..][cols.clone()].iter().sum::<f32>()).sum();
                    // A window of padding alone (impossible under the shape rule) is 0, as in PyTorch.
                    yp[oy * g.ow + ox] = match g.divisor(oy, ox) {
                        0 => 0.0,
                        d => sum / d as f32,
                    };
                }
            }
        });
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, _i: usize, dx: &mut [f32], acc: Accum) {
        let g = self.g;
        let dy = cx.dy;
        acc.prepare(dx);
        for_each_chunk(cx.pool, dx.len(), dx, g.in_plane(), |p, dxp| {
            let dyp = &dy[p * g.out_plane()..][..g.out_plane()];
            for oy in 0..g.oh {
                for ox in 0..g.ow {
                    let v = dyp[oy * g.ow + ox] / g.divisor(oy, ox).max(1) as f32;
                    let (rows, cols) = g.window(oy, ox);
                    for r in rows {
                        dxp[r * g.iw..][cols.clone()].iter_mut().for_each(|d| *d += v);
                    }
                }
            }
        });
    }
}

/// Adaptive average pooling with PyTorch's windows `floor(i*L/out) .. ceil((i+1)*L/out)`.
#[derive(Clone, Copy)]
pub(crate) struct AdaptiveAvgPool {
    ih: usize,
    iw: usize,
    oh: usize,
    ow: usize,
}

impl AdaptiveAvgPool {
    /// `x` is `[N, C, L]` or `[N, C, H, W]`; `y` the matching output shape.
    pub fn new(x: &[usize], y: &[usize]) -> AdaptiveAvgPool {
        let (ih, iw) = if x.len() == 3 { (1, x[2]) } else { (x[2], x[3]) };
        let (oh, ow) = if y.len() == 3 { (1, y[2]) } else { (y[2], y[3]) };
        AdaptiveAvgPool { ih, iw, oh, ow }
    }

    fn window(o: usize, len: usize, out: usize) -> std::ops::Range<usize> {
        (o * len / out)..((o + 1) * len).div_ceil(out)
    }
}

impl Kernel for AdaptiveAvgPool {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let (ih, iw, oh, ow) = (self.ih, self.iw, self.oh, self.ow);
        let x = cx.input(0);
        for_each_chunk(cx.pool, x.len(), y, oh * ow, |p, yp| {
            let xp = &x[p * ih * iw..][..ih * iw];
            for oy in 0..oh {
                let rows = Self::window(oy, ih, oh);
                for ox in 0..ow {
                    let cols = Self::window(ox, iw, ow);
                    let area = (rows.len() * cols.len()) as f32;
                    let sum: f32 = rows.clone().map(|r| xp[r * iw..][cols.clone()].iter().sum::<f32>()).sum();
                    yp[oy * ow + ox] = sum / area;
                }
            }
        });
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, _i: usize, dx: &mut [f32], acc: Accum) {
        let (ih, iw, oh, ow) = (self.ih, self.iw, self.oh, self.ow);
        let dy = cx.dy;
        acc.prepare(dx);
        for_each_chunk(cx.pool, dx.len(), dx, ih * iw, |p, dxp| {
            let dyp = &dy[p * oh * ow..][..oh * ow];
            for oy in 0..oh {
                let rows = Self::window(oy, ih, oh);
                for ox in 0..ow {
                    let cols = Self::window(ox, iw, ow);
                    let v = dyp[oy * ow + ox] / (rows.len() * cols.len()) as f32;
                    for r in rows.clone() {
                        dxp[r * iw..][cols.clone()].iter_mut().for_each(|d| *d += v);
                    }
                }
            }
        });
    }
}

/// Adaptive max pooling over [`AdaptiveAvgPool`]'s windows, with PyTorch's comparison: a value
/// replaces the maximum when it is larger or NaN (so a window's last NaN wins). The gradient goes
/// to the maximum, found again in backward.
pub(crate) struct AdaptiveMaxPool {
    pub w: AdaptiveAvgPool,
}

impl AdaptiveMaxPool {
    /// Calls `f(o, at)` for every output `o` of a plane with `at` its window's maximum in `xp`.
    fn for_each_argmax(&self, xp: &[f32], mut f: impl FnMut(usize, usize)) {
        let AdaptiveAvgPool { ih, iw, oh, ow } = self.w;
        for oy in 0..oh {
            let rows = AdaptiveAvgPool::window(oy, ih, oh);
            for ox in 0..ow {
                let cols = AdaptiveAvgPool::window(ox, iw, ow);
                let mut at = rows.start * iw + cols.start;
                let mut best = f32::NEG_INFINITY;
                for r in rows.clone() {
                    for c in cols.clone() {
                        let v = xp[r * iw + c];
                        if v > best || v.is_nan() {
                            best = v;
                            at = r * iw + c;
                        }
                    }
                }
                f(oy * ow + ox, at);
            }
        }
    }
}

impl Kernel for AdaptiveMaxPool {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let (inp, outp) = (self.w.ih * self.w.iw, self.w.oh * self.w.ow);
        let x = cx.input(0);
        let this = &*self;
        for_each_chunk(cx.pool, x.len(), y, outp, |p, yp| {
            let xp = &x[p * inp..][..inp];
            this.for_each_argmax(xp, |o, at| yp[o] = xp[at]);
        });
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, _i: usize, dx: &mut [f32], acc: Accum) {
        let (inp, outp) = (self.w.ih * self.w.iw, self.w.oh * self.w.ow);
        let (x, dy) = (cx.input(0), cx.dy);
        acc.prepare(dx);
        let this = &*self;
        for_each_chunk(cx.pool, x.len(), dx, inp, |p, dxp| {
            let xp = &x[p * inp..][..inp];
            let dyp = &dy[p * outp..][..outp];
            this.for_each_argmax(xp, |o, at| dxp[at] += dyp[o]);
        });
    }
}

/// Max pooling of integer codes, plane by plane (`x` holds whole `[N, C, ...]` planes): the
/// largest code of each window, clipped to the input as the float kernel clips it. Codes are
/// exact, so this is the float kernel's result on their values.
pub(crate) fn max_pool_codes(g: &PoolGeom, x: &[i64], y: &mut [i64]) {
    for (xp, yp) in x.chunks_exact(g.in_plane().max(1)).zip(y.chunks_exact_mut(g.out_plane().max(1))) {
        for oy in 0..g.oh {
            for ox in 0..g.ow {
                let (rows, cols) = g.window(oy, ox);
                let window = rows.flat_map(|r| cols.clone().map(move |c| r * g.iw + c));
                yp[oy * g.ow + ox] = window.map(|i| xp[i]).max().unwrap_or(0);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_2x2_path_picks_the_windows_the_general_path_picks() {
        // Ties (several equal maxima), -inf, NaN and odd sizes whose last row and column no
        // window covers.
        let g = PoolGeom::new(&PoolSpec::new(2, 2), &[1, 1, 7, 9], &[1, 1, 3, 4]);
        assert!(g.is_2x2());
        let mut rng = mase_ir::Rng::new(9);
        for trial in 0..50 {
            let xp: Vec<f32> = (0..63)
                .map(|_| match rng.below(12) {
                    0 => f32::NAN,
                    1 => f32::NEG_INFINITY,
                    2 | 3 => 1.0,
                    _ => rng.uniform(),
                })
                .collect();
            let mut fast = Vec::new();
            g.argmax_2x2(&xp, |o, at| fast.push((o, at)));
            let general: Vec<(usize, usize)> = (0..g.oh)
                .flat_map(|oy| (0..g.ow).map(move |ox| (oy, ox)))
                .map(|(oy, ox)| (oy * g.ow + ox, g.argmax(&xp, oy, ox)))
                .collect();
            assert_eq!(fast, general, "trial {trial}");
        }
    }

    #[test]
    fn the_2x2_forward_gives_the_bits_of_the_picked_windows() {
        // Signed zeros (the first of equal maxima), NaNs with different payloads and signs
        // (the first NaN), infinities, and a width whose last input column no window covers.
        let g = PoolGeom::new(&PoolSpec::new(2, 2), &[1, 1, 6, 9], &[1, 1, 3, 4]);
        let specials = [0.0, -0.0, f32::NAN, -f32::NAN, f32::from_bits(0x7fc0_0001), f32::INFINITY, f32::NEG_INFINITY, 1.0];
        let mut rng = mase_ir::Rng::new(3);
        for trial in 0..200 {
            let xp: Vec<f32> = (0..54).map(|_| specials[rng.below(specials.len() as u64) as usize]).collect();
            let mut want = vec![0.0f32; 12];
            g.argmax_2x2(&xp, |o, at| want[o] = xp[at]);
            let mut got = vec![0.0f32; 12];
            for (oy, row) in got.chunks_exact_mut(g.ow).enumerate() {
                max_2x2(&xp[2 * oy * g.iw..][..2 * g.ow], &xp[(2 * oy + 1) * g.iw..][..2 * g.ow], row);
            }
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "trial {trial}: {xp:?}");
        }
    }
}
