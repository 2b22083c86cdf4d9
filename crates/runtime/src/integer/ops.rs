//! Integer kernels: products of codes summed in an integer accumulator. They compute what the
//! float kernels compute on dequantized values, with every sum exact.

use super::codes::{with_codes, Acc, Code, Codes};
use crate::kernels::conv::ConvGeom;

/// `out[r, o] = sum_k x[r, k] w[o, k]` (`nn.Linear` without bias) for `rows` rows.
fn linear_t<X: Code, W: Code, A: Acc>(x: &[X], w: &[W], inf: usize, outf: usize, out: &mut [i64]) {
    for (xr, or) in x.chunks_exact(inf.max(1)).zip(out.chunks_exact_mut(outf.max(1))) {
        for (o, wr) in or.iter_mut().zip(w.chunks_exact(inf.max(1))) {
            let mut a = A::default();
            for (&p, &q) in xr.iter().zip(wr) {
                a += A::of(p) * A::of(q);
            }
            *o = a.to_i64();
        }
    }
}

/// A linear layer on codes; `wide` picks the `i64` accumulator.
pub(crate) fn linear(x: &Codes, w: &Codes, inf: usize, outf: usize, wide: bool, out: &mut [i64]) {
    with_codes!(x, xv => with_codes!(w, wv => if wide {
        linear_t::<_, _, i64>(xv, wv, inf, outf, out)
    } else {
        linear_t::<_, _, i32>(xv, wv, inf, outf, out)
    }))
}

/// Direct convolution (zero padding, stride, dilation, groups) of `[N, C, H, W]` codes with
/// `[O, C/groups, kh, kw]` codes. Each output plane is accumulated one weight at a time over
/// whole rows, which keeps the inner loop contiguous; integer sums do not depend on the order.
fn conv_t<X: Code, W: Code, A: Acc>(x: &[X], w: &[W], g: &ConvGeom, out: &mut [i64]) {
    let (cig, cog) = (g.cin / g.groups, g.cout / g.groups);
    let mut plane = vec![A::default(); g.oh * g.ow];
    for n in 0..g.n {
        for o in 0..g.cout {
            plane.fill(A::default());
            let grp = o / cog.max(1);
            for c in 0..cig {
                let xc = &x[(n * g.cin + grp * cig + c) * g.h * g.w..][..g.h * g.w];
                for ky in 0..g.kh {
                    for kx in 0..g.kw {
                        let wv = A::of(w[((o * cig + c) * g.kh + ky) * g.kw + kx]);
                        // Output columns whose input column ox * sw + x0 lies in 0..w.
                        let x0 = (kx * g.dw) as isize - g.pw as isize;
                        let lo = if x0 >= 0 { 0 } else { ((-x0) as usize).div_ceil(g.sw) }.min(g.ow);
                        let hi = if g.w as isize - x0 <= 0 { 0 } else { ((g.w as isize - x0) as usize).div_ceil(g.sw) }.clamp(lo, g.ow);
                        for oy in 0..g.oh {
                            let iy = (oy * g.sh + ky * g.dh) as isize - g.ph as isize;
                            if iy < 0 || iy >= g.h as isize {
                                continue;
                            }
                            let xr = &xc[iy as usize * g.w..][..g.w];
                            let pr = &mut plane[oy * g.ow..][..g.ow];
                            if g.sw == 1 {
                                // Unit stride: two zipped slices, which the compiler vectorises.
                                let s0 = (lo as isize + x0) as usize;
                                for (p, &v) in pr[lo..hi].iter_mut().zip(&xr[s0..s0 + (hi - lo)]) {
                                    *p += wv * A::of(v);
                                }
                            } else {
                                for ox in lo..hi {
                                    pr[ox] += wv * A::of(xr[(ox as isize * g.sw as isize + x0) as usize]);
                                }
                            }
                        }
                    }
                }
            }
            let dst = &mut out[(n * g.cout + o) * g.oh * g.ow..][..g.oh * g.ow];
            dst.iter_mut().zip(&plane).for_each(|(d, a)| *d = a.to_i64());
        }
    }
}

/// A convolution on codes; `wide` picks the `i64` accumulator.
pub(crate) fn conv(x: &Codes, w: &Codes, g: &ConvGeom, wide: bool, out: &mut [i64]) {
    with_codes!(x, xv => with_codes!(w, wv => if wide {
        conv_t::<_, _, i64>(xv, wv, g, out)
    } else {
        conv_t::<_, _, i32>(xv, wv, g, out)
    }))
}

/// `[.., M, K] x [.., K, N]` on `i64` codes, for equal batch dimensions (or none).
pub(crate) fn matmul(a: &[i64], b: &[i64], batch: usize, m: usize, k: usize, n: usize, out: &mut [i64]) {
    for t in 0..batch {
        let (a, b) = (&a[t * m * k..][..m * k], &b[t * k * n..][..k * n]);
        for i in 0..m {
            for j in 0..n {
                out[(t * m + i) * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
    }
}

/// Strides of `shape` seen as a tensor of `out` (right-aligned, 0 on broadcast dimensions).
fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let lead = out.len() - shape.len();
    let mut own = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        own[d] = own[d + 1] * shape[d + 1];
    }
    (0..out.len()).map(|d| if d < lead || shape[d - lead] == 1 { 0 } else { own[d - lead] }).collect()
}

/// `out = f(a, b)` elementwise with NumPy broadcasting of `a` and `b` to `out_shape`.
pub(crate) fn broadcast(
    a: &[i64],
    sa: &[usize],
    b: &[i64],
    sb: &[usize],
    out_shape: &[usize],
    out: &mut [i64],
    f: impl Fn(i64, i64) -> i64,
) {
    let (ta, tb) = (broadcast_strides(sa, out_shape), broadcast_strides(sb, out_shape));
    let mut idx = vec![0usize; out_shape.len()];
    crate::kernels::shape_ops::walk(out_shape, &ta, &tb, &mut idx, |j, ia, ib| out[j] = f(a[ia], b[ib]));
}

/// `out[n, c, ...] = x[n, c, ...] * w[c]`: a per-channel scale of `[N, C, ...]` codes (a batch
/// norm in affine form; the channel is dimension 1).
pub(crate) fn channel_scale(x: &[i64], w: &[i64], shape: &[usize], out: &mut [i64]) {
    let inner: usize = shape.get(2..).map_or(1, |s| s.iter().product());
    let channels = w.len().max(1);
    for (j, (o, &v)) in out.iter_mut().zip(x).enumerate() {
        *o = v * w[(j / inner.max(1)) % channels];
    }
}
