//! Integer codes as hardware holds them: the narrowest of `i8`, `i16`, `i32` that fits the format,
//! accumulators of `i32` or `i64` chosen by the largest sum the product can reach, and requantizing
//! shifts with round-half-to-even, as `integer`'s float formula rounds.

use mase_quant::Fixed;

/// A signed integer type holding codes.
pub(crate) trait Code: Copy + Send + Sync {
    fn from_i64(v: i64) -> Self;
    fn widen(self) -> i64;
}

macro_rules! code {
    ($($t:ty),*) => {$(
        impl Code for $t {
            #[inline(always)]
            fn from_i64(v: i64) -> $t {
                // Codes are clamped to the format's range, which the type was chosen to hold.
                v as $t
            }
            #[inline(always)]
            fn widen(self) -> i64 {
                self as i64
            }
        }
    )*};
}
code!(i8, i16, i32);

/// An accumulator: `i32` when no sum can overflow it, else `i64`.
pub(crate) trait Acc: Copy + Default + std::ops::AddAssign + std::ops::Mul<Output = Self> {
    fn of<C: Code>(c: C) -> Self;
    fn to_i64(self) -> i64;
}

impl Acc for i32 {
    #[inline(always)]
    fn of<C: Code>(c: C) -> i32 {
        c.widen() as i32
    }
    fn to_i64(self) -> i64 {
        self as i64
    }
}

impl Acc for i64 {
    #[inline(always)]
    fn of<C: Code>(c: C) -> i64 {
        c.widen()
    }
    fn to_i64(self) -> i64 {
        self
    }
}

/// Codes of one tensor in the narrowest type that holds its format.
pub(crate) enum Codes {
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
}

impl Codes {
    /// Packs codes (already inside `[lo, hi]`) into the narrowest type holding `[lo, hi]`.
    pub fn pack(v: &[i64], lo: i64, hi: i64) -> Codes {
        if lo >= i8::MIN as i64 && hi <= i8::MAX as i64 {
            Codes::I8(v.iter().map(|&c| i8::from_i64(c)).collect())
        } else if lo >= i16::MIN as i64 && hi <= i16::MAX as i64 {
            Codes::I16(v.iter().map(|&c| i16::from_i64(c)).collect())
        } else {
            Codes::I32(v.iter().map(|&c| i32::from_i64(c)).collect())
        }
    }

    /// The name of the code type.
    pub fn type_name(&self) -> &'static str {
        match self {
            Codes::I8(_) => "i8",
            Codes::I16(_) => "i16",
            Codes::I32(_) => "i32",
        }
    }
}

/// Calls `$body` with `$v` bound to the codes' slice, whatever their type.
macro_rules! with_codes {
    ($c:expr, $v:ident => $body:expr) => {
        match $c {
            $crate::integer::codes::Codes::I8($v) => $body,
            $crate::integer::codes::Codes::I16($v) => $body,
            $crate::integer::codes::Codes::I32($v) => $body,
        }
    };
}
pub(crate) use with_codes;

/// `v * 2^-shift` rounded half to even, for `shift > 0`: the integer executor's rescale.
pub fn shift_right_rne(v: i64, shift: u32) -> i64 {
    if shift >= 63 {
        return 0;
    }
    let q = v >> shift;
    let rem = v - (q << shift);
    let half = 1i64 << (shift - 1);
    if rem > half || (rem == half && q & 1 == 1) {
        q + 1
    } else {
        q
    }
}

/// Re-expresses a value held with `from` fraction bits in the format `to`: an arithmetic shift
/// (rounding half to even when bits are dropped), then clamping to the format's range. This is
/// `clamp(round(v * 2^to.frac), lo, hi)` of the float formula, exactly.
pub(crate) fn requant(v: i64, from: i32, to: Fixed) -> i64 {
    let s = from - to.frac_width;
    let q = if s > 0 {
        shift_right_rne(v, s as u32)
    } else {
        let k = (-s) as u32;
        if k >= 63 {
            v.signum() * i64::MAX
        } else {
            v.checked_mul(1i64 << k).unwrap_or(v.signum() * i64::MAX)
        }
    };
    q.clamp(to.lo(), to.hi())
}

/// Magnitude bits of the largest `|v|` (0 for all zeros).
pub(crate) fn bits_used(v: &[i64]) -> u32 {
    let m = v.iter().map(|x| x.unsigned_abs()).max().unwrap_or(0);
    64 - m.leading_zeros()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requant_rounds_half_to_even_and_clamps() {
        let f = Fixed { width: 8, frac_width: 4, signed: true };
        // 40 at 8 fraction bits is 40/256 = 2.5/16 -> 2 (even); 24/256 = 1.5/16 -> 2; -24 -> -2.
        let cases = [
            (40, 8, 2),
            (24, 8, 2),
            (-24, 8, -2),
            (-40, 8, -2),
            (41, 8, 3),
            (1_000_000, 8, 127),
            (-1_000_000, 8, -128),
            (3, 2, 12),
            (5, 4, 5),
        ];
        for (v, from, want) in cases {
            assert_eq!(requant(v, from, f), want, "{v} at {from}");
            // The float formula gives the same code.
            let x = (v as f64 / 2f64.powi(from)) as f32;
            assert_eq!(f.code(x), Some(want), "{v} at {from}");
        }
    }

    #[test]
    fn codes_take_the_narrowest_type() {
        assert_eq!(Codes::pack(&[1, -128], -128, 127).type_name(), "i8");
        assert_eq!(Codes::pack(&[255], 0, 255).type_name(), "i16");
        assert_eq!(Codes::pack(&[70000], -(1 << 20), 1 << 20).type_name(), "i32");
        assert_eq!(bits_used(&[0, -5, 3]), 3);
    }
}
