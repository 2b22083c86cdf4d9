//! The normal distribution in log space, for the truncated normal kernels of TPE (Optuna's
//! `_truncnorm` module): `Φ`, `log Φ`, its inverse, and the log of the mass between two points.

use std::f64::consts::{FRAC_1_SQRT_2, PI};

/// `Φ(x)`, the standard normal CDF.
pub fn ndtr(x: f64) -> f64 {
    0.5 * libm::erfc(-x * FRAC_1_SQRT_2)
}

/// `log Φ(x)`, accurate far into the lower tail (asymptotic series below -20).
pub fn log_ndtr(x: f64) -> f64 {
    if x > 6.0 {
        // Φ(x) = 1 - Φ(-x); log1p keeps the tiny complement.
        -ndtr(-x)
    } else if x > -20.0 {
        ndtr(x).ln()
    } else {
        let x2 = x * x;
        let series = 1.0 - 1.0 / x2 + 3.0 / (x2 * x2) - 15.0 / (x2 * x2 * x2);
        -0.5 * x2 - (-x).ln() - 0.5 * (2.0 * PI).ln() + series.ln()
    }
}

/// `Φ⁻¹(p)` for `p` in (0, 1): Acklam's rational approximation refined by one Halley step.
pub fn ndtri(p: f64) -> f64 {
    if p <= 0.0 {
        return f64::NEG_INFINITY;
    }
    if p >= 1.0 {
        return f64::INFINITY;
    }
    const A: [f64; 6] =
        [-3.969683028665376e1, 2.209460984245205e2, -2.759285104469687e2, 1.38357751867269e2, -3.066479806614716e1, 2.506628277459239];
    const B: [f64; 5] = [-5.447609879822406e1, 1.615858368580409e2, -1.556989798598866e2, 6.680131188771972e1, -1.328068155288572e1];
    const C: [f64; 6] =
        [-7.784894002430293e-3, -3.223964580411365e-1, -2.400758277161838, -2.549732539343734, 4.374664141464968, 2.938163982698783];
    const D: [f64; 4] = [7.784695709041462e-3, 3.224671290700398e-1, 2.445134137142996, 3.754408661907416];
    let plow = 0.02425;
    let x = if p < plow {
        let q = (-2.0 * p.ln()).sqrt();
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5]) / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    } else if p <= 1.0 - plow {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    } else {
        let q = (-2.0 * (1.0 - p).ln()).sqrt();
        -(((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5]) / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    // One Halley step on Φ(x) - p.
    let e = ndtr(x) - p;
    let u = e * (2.0 * PI).sqrt() * (0.5 * x * x).exp();
    x - u / (1.0 + 0.5 * x * u)
}

/// `x` with `log Φ(x) = y` (`y <= 0`), by Newton steps in log space where `exp(y)` underflows.
pub fn ndtri_exp(y: f64) -> f64 {
    if y >= 0.0 {
        return f64::INFINITY;
    }
    if y > -700.0 {
        let p = y.exp();
        if p > 1e-300 {
            return ndtri(p);
        }
    }
    let mut x = -(-2.0 * y).sqrt();
    for _ in 0..50 {
        let f = log_ndtr(x) - y;
        // d/dx log Φ(x) = φ(x) / Φ(x) ≈ -x for very negative x.
        let d = (-0.5 * x * x - 0.5 * (2.0 * PI).ln() - log_ndtr(x)).exp();
        let step = f / d;
        x -= step;
        if step.abs() < 1e-12 * x.abs().max(1.0) {
            break;
        }
    }
    x
}

/// `log(exp(a) + exp(b))`.
pub fn logaddexp(a: f64, b: f64) -> f64 {
    if a == f64::NEG_INFINITY {
        return b;
    }
    if b == f64::NEG_INFINITY {
        return a;
    }
    let m = a.max(b);
    m + ((a - m).exp() + (b - m).exp()).ln()
}

/// `log(Φ(b) - Φ(a))` for `a <= b`, stable in both tails.
pub fn log_gauss_mass(a: f64, b: f64) -> f64 {
    if b <= 0.0 {
        let (la, lb) = (log_ndtr(a), log_ndtr(b));
        lb + (-(la - lb).exp()).ln_1p()
    } else if a > 0.0 {
        log_gauss_mass(-b, -a)
    } else {
        // The mass is large; subtract both tails.
        (-ndtr(a) - ndtr(-b)).ln_1p()
    }
}

/// The quantile `q` in `[0, 1)` of the standard normal truncated to `[a, b]` (Optuna's `ppf`).
pub fn truncnorm_ppf(q: f64, a: f64, b: f64) -> f64 {
    let log_mass = log_gauss_mass(a, b);
    let x = if a < 0.0 {
        ndtri_exp(logaddexp(log_ndtr(a), q.ln() + log_mass))
    } else {
        -ndtri_exp(logaddexp(log_ndtr(-b), (-q).ln_1p() + log_mass))
    };
    if x.is_nan() {
        0.5 * (a + b)
    } else {
        x.clamp(a, b)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_cdf_and_inverse_agree_with_tables() {
        // (x, Φ(x)) from standard tables.
        for &(x, p) in &[(0.0, 0.5), (1.0, 0.841_344_746_068_543), (-1.96, 0.024_997_895_148_220_4), (3.0, 0.998_650_101_968_37)] {
            assert!((ndtr(x) - p).abs() < 1e-12, "Φ({x})");
            assert!((ndtri(p) - x).abs() < 1e-9, "Φ⁻¹({p}) = {}", ndtri(p));
        }
        // Far tail: log Φ(-30) as torch.special.log_ndtr computes it; the inverse recovers x.
        assert!((log_ndtr(-30.0) + 454.321_243_956_343_27).abs() < 1e-6, "{}", log_ndtr(-30.0));
        assert!((ndtri_exp(log_ndtr(-30.0)) + 30.0).abs() < 1e-6);
        assert!((ndtri_exp(log_ndtr(-2.5)) + 2.5).abs() < 1e-9);
    }

    #[test]
    fn gauss_mass_in_each_region() {
        // (a, b): mass from Φ differences where they are exact enough.
        for &(a, b) in &[(-1.0, 1.0), (-3.0, -1.0), (0.5, 2.0), (-0.2, 0.1)] {
            let want = (ndtr(b) - ndtr(a)).ln();
            assert!((log_gauss_mass(a, b) - want).abs() < 1e-10, "({a}, {b})");
        }
        // Deep tail: both Φ(a) and Φ(b) are below 1e-300, the mass is still finite.
        let m = log_gauss_mass(-40.0, -39.0);
        assert!(m.is_finite() && m < -700.0, "{m}");
        assert_eq!(log_gauss_mass(-40.0, -39.0), log_gauss_mass(39.0, 40.0));
    }

    #[test]
    fn truncated_quantiles_stay_inside_and_are_monotone() {
        for &(a, b) in &[(-1.0, 1.0), (2.0, 5.0), (-50.0, -45.0), (-0.5, 80.0)] {
            let mut prev = f64::NEG_INFINITY;
            for i in 0..100 {
                let x = truncnorm_ppf(i as f64 / 100.0, a, b);
                assert!(x >= a && x <= b && x >= prev, "({a}, {b}) q={i}%: {x}");
                prev = x;
            }
        }
        // The median of N(0,1) truncated to [-1, 1] is 0.
        assert!(truncnorm_ppf(0.5, -1.0, 1.0).abs() < 1e-9);
    }
}
