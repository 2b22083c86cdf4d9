//! Element-wise loops compiled for the CPU's widest vectors, an `e^x` they can use, and an f64
//! sum that vectorises.
//!
//! [`multiversion!`] defines a function whose body is an `#[inline(always)]` loop, compiled three
//! times (AVX-512 with FMA, AVX2 with FMA, and the baseline) and chosen at run time. The loops use
//! plain arithmetic and `mul_add` (fused in hardware, or by the library's correctly rounded `fmaf`
//! on the baseline), and Rust contracts no multiply-add by itself, so every version gives the same
//! bits. Write the loops with indices rather than iterator adapters: those are generic functions
//! that LLVM does not always inline into a function compiled for other features, and the loop
//! would then not vectorise.

/// `$vis fn $name($args)` running `$body($args)` compiled for the widest vectors the CPU has.
macro_rules! multiversion {
    ($(#[$meta:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) => $body:path) => {
        $(#[$meta])*
        $vis fn $name($($arg: $ty),*) {
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f,fma")]
                unsafe fn wide($($arg: $ty),*) {
                    $body($($arg),*)
                }
                #[target_feature(enable = "avx2,fma")]
                unsafe fn narrow($($arg: $ty),*) {
                    $body($($arg),*)
                }
                let fma = std::arch::is_x86_feature_detected!("fma");
                if fma && std::arch::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU has the features the function was compiled for.
                    return unsafe { wide($($arg),*) };
                }
                if fma && std::arch::is_x86_feature_detected!("avx2") {
                    // SAFETY: as above.
                    return unsafe { narrow($($arg),*) };
                }
            }
            $body($($arg),*)
        }
    };
}
pub(crate) use multiversion;

/// `e^a` for `a` in [-175, 0] as a value in [1/sqrt 2, sqrt 2] and a power of two `n` in
/// [-252, 0] (NaN stays NaN in the value): Cephes' `expf`, a Cody-Waite reduction and a degree-7
/// minimax polynomial.
#[inline(always)]
pub(crate) fn exp_parts(a: f32) -> (f32, i32) {
    // 1.5 * 2^23: adding it rounds to an integer, held in the low bits of the sum.
    const SHIFT: f32 = 12_582_912.0;
    let kd = a * std::f32::consts::LOG2_E + SHIFT;
    let n = kd - SHIFT;
    // Cephes' two-part ln 2: `n * 0.693359375` is exact for the `n` here.
    let r = (a - n * 0.693_359_4) - n * -2.121_944_4e-4;
    let mut p: f32 = 1.987_569_1e-4;
    for c in [1.398_199_9e-3, 8.333_452e-3, 4.166_579_6e-2, 1.666_666_5e-1, 5e-1] {
        p = p.mul_add(r, c);
    }
    let value = p.mul_add(r * r, r) + 1.0;
    let n = (kd.to_bits() as i32).wrapping_sub(0x4B40_0000);
    (value, n.clamp(-252, 0))
}

/// `2^n` as two factors, each a normal f32 (`n` in [-252, 0]), so that a product with both
/// underflows gradually, once.
#[inline(always)]
pub(crate) fn powers_of_two(n: i32) -> (f32, f32) {
    let half = n >> 1;
    let power = |k: i32| f32::from_bits(((k + 127) as u32) << 23);
    (power(half), power(n - half))
}

/// `e^a` for `a <= 0` (and NaN), within 2 ulp of the exact value: 0 below -110, where the exact
/// value rounds to 0 in f32, and at -inf.
#[inline(always)]
pub(crate) fn exp_nonpositive(a: f32) -> f32 {
    let a = if a < -110.0 { -110.0 } else { a };
    let (m, n) = exp_parts(a);
    let (s1, s2) = powers_of_two(n);
    m * s1 * s2
}

/// `f(0) + ... + f(n - 1)` in f64, in eight interleaved partial sums added in a fixed tree, so
/// that the loop vectorises; the order depends on `n` alone.
#[inline(always)]
pub(crate) fn sum_f64(n: usize, f: impl Fn(usize) -> f64) -> f64 {
    let mut lanes = [0.0f64; 8];
    let whole = n - n % 8;
    for j in (0..whole).step_by(8) {
        for (k, lane) in lanes.iter_mut().enumerate() {
            *lane += f(j + k);
        }
    }
    let mut sum = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
    for j in whole..n {
        sum += f(j);
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::exp_nonpositive;

    #[test]
    fn exp_matches_the_library_to_two_ulps() {
        for i in 0..=1_200_000 {
            let a = -(i as f32) / 10_000.0;
            let (got, want) = (exp_nonpositive(a), f64::from(a).exp());
            // Two units in the last place (the spacing of normal f32 values near `want`, or of
            // subnormals below 2^-126).
            let ulp = if want < 1.18e-38 { 1.4e-45 } else { f64::from(f32::EPSILON) * want };
            assert!((f64::from(got) - want).abs() <= 2.0 * ulp, "exp({a}) = {got:e}, want {want:e}");
        }
        assert_eq!(exp_nonpositive(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_nonpositive(-1000.0), 0.0);
        assert_eq!(exp_nonpositive(0.0), 1.0);
        assert!(exp_nonpositive(f32::NAN).is_nan());
    }
}
