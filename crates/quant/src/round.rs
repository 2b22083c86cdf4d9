//! Exact arithmetic helpers shared by the formats: rounding, powers of two, base-2 logarithms of
//! `f32` values, and the exponent range of a biased exponent field.
//!
//! The formats are written in MASE's PyTorch terms (`torch.round`, `torch.log2`, `2 ** e`). Here
//! the transcendental steps are replaced by exact integer work on the bits of the value: the
//! result of `ceil(log2(v))` or `round(log2(v))` is decided exactly, where a float `log2` may be
//! off by one rounding step near a power of two. The reference functions use `f64` logarithms of
//! the `f32` values, which decide the same way (see the tests), so the kernels and the references
//! agree bit for bit.

use mase_ir::RoundingMode;

/// 2^23: from this magnitude on every `f32` is an integer.
const TWO_23: f32 = 8_388_608.0;

/// Sentinel exponent of zero (`log2(0) = -inf`); clamping turns it into the format's minimum.
pub(crate) const LOG2_ZERO: i64 = i64::MIN / 4;
/// Sentinel exponent of infinity; clamping turns it into the format's maximum.
pub(crate) const LOG2_INF: i64 = i64::MAX / 4;

/// Round half to even, equal to `f32::round_ties_even` for every input (±0 and NaN included).
///
/// It is one add and one subtract instead of a `roundss` instruction, which plain x86-64 (SSE2)
/// lacks: without it `round_ties_even` becomes a library call per element and loops do not
/// vectorise.
#[inline(always)]
pub fn rne(v: f32) -> f32 {
    let a = v.abs();
    // For a < 2^23, a + 2^23 lies in [2^23, 2^24) where f32 values are one apart, so the sum is a
    // rounded to an integer with ties to even (the IEEE default); the subtraction is exact.
    let r = if a < TWO_23 { (a + TWO_23) - TWO_23 } else { a };
    r.copysign(v)
}

/// `v` clamped to `[lo, hi]` with NaN kept, as `torch.clamp` does (`f32::max`/`min` would turn a
/// NaN into a bound). Written as two selects so that loops vectorise.
#[inline(always)]
pub fn clamp_nan(v: f32, lo: f32, hi: f32) -> f32 {
    let v = if v < lo { lo } else { v };
    if v > hi {
        hi
    } else {
        v
    }
}

/// `2^e` as an `f32`, exactly as `2.0 ** e` evaluates in single precision: `inf` above 2^127,
/// subnormal powers down to 2^-149, and 0 below.
#[inline(always)]
pub fn exp2i(e: i64) -> f32 {
    if e > 127 {
        f32::INFINITY
    } else if e >= -126 {
        f32::from_bits(((e + 127) as u32) << 23)
    } else if e >= -149 {
        f32::from_bits(1u32 << (e + 149))
    } else {
        0.0
    }
}

/// Splits a positive finite `f32` into `(p, m)` with `a = m * 2^p`, `m` an integer of 24 bits
/// (`2^23 <= m < 2^24`) for normal numbers and of fewer bits for subnormals.
#[inline(always)]
fn parts(a: f32) -> (i64, u32) {
    let bits = a.to_bits();
    let exp = ((bits >> 23) & 0xff) as i64;
    let man = bits & 0x7f_ffff;
    if exp == 0 {
        (-149, man)
    } else {
        (exp - 150, man | 0x80_0000)
    }
}

/// `floor(log2(a))` of a non-negative, non-NaN `a`; [`LOG2_ZERO`] for 0 and [`LOG2_INF`] for inf.
#[inline(always)]
pub fn floor_log2(a: f32) -> i64 {
    match log2_floor_exact(a) {
        Ok((floor, _)) => floor,
        Err(special) => special,
    }
}

/// `ceil(log2(a))` of a non-negative, non-NaN `a`; [`LOG2_ZERO`] for 0 and [`LOG2_INF`] for inf.
#[inline(always)]
pub fn ceil_log2(a: f32) -> i64 {
    match log2_floor_exact(a) {
        Ok((floor, exact)) => floor + i64::from(!exact),
        Err(special) => special,
    }
}

/// `floor(log2(a))` and whether `a` is a power of two, or the special value of 0 and inf.
#[inline(always)]
fn log2_floor_exact(a: f32) -> Result<(i64, bool), i64> {
    if a == 0.0 {
        return Err(LOG2_ZERO);
    }
    if a == f32::INFINITY {
        return Err(LOG2_INF);
    }
    let (p, m) = parts(a.abs());
    Ok((p + (31 - m.leading_zeros() as i64), m.is_power_of_two()))
}

/// `round(log2(a))` of a non-negative, non-NaN `a` (ties cannot happen: `log2` of a float is
/// never exactly a half-integer); [`LOG2_ZERO`] for 0 and [`LOG2_INF`] for inf.
#[inline(always)]
pub fn round_log2(a: f32) -> i64 {
    if a == 0.0 {
        return LOG2_ZERO;
    }
    if a == f32::INFINITY {
        return LOG2_INF;
    }
    let (p, m) = parts(a.abs());
    let top = 31 - m.leading_zeros() as i64;
    // a = (m / 2^top) * 2^(p + top) with the first factor in [1, 2); it rounds up when that
    // factor exceeds sqrt(2), i.e. when m^2 > 2^(2 top + 1), which u64 holds exactly.
    let up = u64::from(m) * u64::from(m) > 1u64 << (2 * top + 1);
    p + top + i64::from(up)
}

/// `v` rounded to an integer with a QONNX rounding mode (`ROUND` is half to even).
#[inline(always)]
pub fn round_mode(mode: RoundingMode, v: f32) -> f32 {
    match mode {
        RoundingMode::Round => v.round_ties_even(),
        RoundingMode::Ceil => v.ceil(),
        RoundingMode::Floor => v.floor(),
        // Away from zero; `-0.0 >= 0` keeps the sign of zero as `sign(x) * ceil(|x|)` does.
        RoundingMode::Up => {
            if v >= 0.0 {
                v.ceil()
            } else {
                v.floor()
            }
        }
        RoundingMode::Down => v.trunc(),
        RoundingMode::HalfUp => v.round(),
        RoundingMode::HalfDown => {
            // The fractional part of an f32 is exact, so the tie test is exact too.
            if (v - v.trunc()).abs() == 0.5 {
                v.trunc()
            } else {
                v.round()
            }
        }
    }
}

/// Evaluates `$body` with `$round` bound to the rounding function of the QONNX rounding mode
/// `$mode`, expanded once per mode: a kernel generic over its rounding function thus gets one
/// monomorphised loop per mode and does not match on the mode per value. Each function gives the
/// bits of [`round_mode`]; the modes without a single `f32` operation call `round_mode` itself.
///
/// A macro, because a closure cannot be generic over the function it is handed.
macro_rules! with_rounding {
    ($mode:expr, |$round:ident| $body:expr) => {
        match $mode {
            mase_ir::RoundingMode::Round => {
                let $round = $crate::round::rne;
                $body
            }
            mase_ir::RoundingMode::Ceil => {
                let $round = f32::ceil;
                $body
            }
            mase_ir::RoundingMode::Floor => {
                let $round = f32::floor;
                $body
            }
            mase_ir::RoundingMode::Down => {
                let $round = f32::trunc;
                $body
            }
            mase_ir::RoundingMode::HalfUp => {
                let $round = f32::round;
                $body
            }
            mode => {
                let $round = move |v: f32| $crate::round::round_mode(mode, v);
                $body
            }
        }
    };
}
pub(crate) use with_rounding;

/// The exponent range `[-B, 2^E - 1 - B]` of an `E`-bit exponent field with bias `B`, and MASE's
/// default bias `2^(E-1) - 1` when none is given. The minifloats, block floating point and the
/// log formats (whose exponent field is all but the sign bit) share it.
pub(crate) fn exponent_range(exponent_width: i64, bias: Option<i64>) -> (i64, i64) {
    let b = bias.unwrap_or((1i64 << (exponent_width - 1)) - 1);
    (-b, (1i64 << exponent_width) - 1 - b)
}

/// `torch.sign`: 1, -1, or the value itself for ±0 (and NaN).
#[inline(always)]
pub fn sign(v: f32) -> f32 {
    if v > 0.0 {
        1.0
    } else if v < 0.0 {
        -1.0
    } else {
        v
    }
}

/// `torch.isclose(v, 0)` with the default tolerances: `|v| <= atol`, where `atol = 1e-8` is
/// taken in the tensor's precision. MASE's minifloat and block formats pass such values through.
#[inline(always)]
pub fn close_to_zero(v: f32) -> bool {
    v.abs() <= 1e-8_f32
}

/// MASE's zero passthrough `(~isclose(x, 0)) * q + isclose(x, 0) * x` for a finite `x` and its
/// quantized value `q`: `x` within 1e-8 of zero passes through as `0 * q + x` (so -0.0 becomes
/// +0.0 beside `q = +0`, and a NaN `q` still gives NaN), any other `x` gives `q`. (For NaN and
/// ±inf the products give NaN; the kernels return that before computing `q`.)
#[inline(always)]
pub(crate) fn zero_passthrough(v: f32, q: f32) -> f32 {
    if close_to_zero(v) {
        0.0 * q + v
    } else {
        q
    }
}

/// The passthrough as MASE writes it, with its products, for the reference functions.
pub(crate) fn mase_mask(v: f32, q: f32) -> f32 {
    let close = if v.abs() <= 1e-8 { 1.0f32 } else { 0.0 };
    (1.0 - close) * q + close * v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rne_is_round_ties_even() {
        let cases = [0.5f32, 1.5, 2.5, -0.5, -2.5, 0.49999997, 8_388_607.5, 8_388_608.0, 4_194_304.5, -0.0, 0.0, 1e30, f32::INFINITY];
        for v in cases {
            assert_eq!(rne(v).to_bits(), v.round_ties_even().to_bits(), "{v}");
        }
        assert!(rne(f32::NAN).is_nan());
        let mut s = 0x1234_5678u32;
        for _ in 0..200_000 {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            let v = f32::from_bits(s);
            if !v.is_nan() {
                assert_eq!(rne(v).to_bits(), v.round_ties_even().to_bits(), "{v}");
            }
        }
    }

    #[test]
    fn exp2i_matches_powi() {
        for e in -160..140 {
            assert_eq!(exp2i(e).to_bits(), (2f64.powi(e as i32) as f32).to_bits(), "2^{e}");
        }
    }

    #[test]
    fn log2_helpers_match_f64_log2() {
        let mut s = 0x9e37_79b9u32;
        for _ in 0..200_000 {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            let a = f32::from_bits(s & 0x7fff_ffff);
            if !a.is_finite() || a == 0.0 {
                continue;
            }
            let l = (a as f64).log2();
            assert_eq!(floor_log2(a), l.floor() as i64, "{a}");
            assert_eq!(ceil_log2(a), l.ceil() as i64, "{a}");
            assert_eq!(round_log2(a), l.round_ties_even() as i64, "{a}");
        }
        // Around sqrt(2): 1.4142135 rounds down, the next float up rounds up.
        assert_eq!(round_log2(f32::from_bits(0x3FB5_04F3)), 0);
        assert_eq!(round_log2(f32::from_bits(0x3FB5_04F4)), 1);
        assert_eq!((floor_log2(1.0), ceil_log2(1.0), ceil_log2(1.0000001)), (0, 0, 1));
        assert_eq!((floor_log2(f32::from_bits(1)), ceil_log2(f32::from_bits(3))), (-149, -147));
    }
}
