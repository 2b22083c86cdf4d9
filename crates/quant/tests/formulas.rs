//! Data-driven tables: each row is a format, an input tensor and the output computed by hand from
//! the format's formula (doc/mase-semantics.md#quantizers, QONNX's operator documents). Both the kernel and the
//! reference function must give it exactly.

mod common;

use common::{e4m3, int_quant, t, MODES};
use mase_ir::{QuantFormat, QuantFormat::*, Rng, RoundingMode};
use mase_quant::{quantize, quantize_reference};

type QuantizeFn = fn(&QuantFormat, &[f32], &[usize], &mut [f32], &mut Rng) -> mase_quant::Result<()>;

/// Checks one row with both implementations.
fn check(fmt: QuantFormat, shape: &[usize], x: &[f32], want: &[f32]) {
    let impls: [(&str, QuantizeFn); 2] = [("kernel", quantize), ("reference", quantize_reference)];
    for (name, f) in impls {
        let mut out = vec![0.0; x.len()];
        f(&fmt, x, shape, &mut out, &mut Rng::new(0)).expect("valid format");
        for i in 0..x.len() {
            assert!(
                out[i] == want[i] || (out[i].is_nan() && want[i].is_nan()),
                "{name} {fmt:?}: x = {} gives {}, want {}",
                x[i],
                out[i],
                want[i]
            );
        }
    }
}

#[test]
fn integer() {
    let q = |w, f, s| Integer { width: w, frac_width: f, signed: s };
    // 8/4: x * 16, half to even, clamp to [-128, 127], / 16.
    check(
        q(8, 4, true),
        &[8],
        &[0.03, 0.5 / 16.0, 1.5 / 16.0, 2.5 / 16.0, 100.0, -100.0, -1.5 / 16.0, -0.0],
        &[0.0, 0.0, 0.125, 0.125, 7.9375, -8.0, -0.125, -0.0],
    );
    // Unsigned 8/4 clamps to [0, 255] / 16.
    check(q(8, 4, false), &[3], &[-1.0, 20.0, 1.0 / 3.0], &[0.0, 15.9375, 0.3125]);
    // A negative fraction width: steps of 4, codes in [-8, 7].
    check(q(4, -2, true), &[4], &[6.0, 10.0, 100.0, -100.0], &[8.0, 8.0, 28.0, -32.0]);
    // NaN stays NaN, infinities saturate.
    check(q(8, 4, true), &[3], &[f32::NAN, f32::INFINITY, f32::NEG_INFINITY], &[f32::NAN, 7.9375, -8.0]);
}

#[test]
fn minifloat_denorm() {
    // 8 bits, E = 4, bias 7: M = 3, e in [-7, 8].
    let f = MinifloatDenorm { width: 8, exponent_width: 4, exponent_bias: None };
    check(
        f,
        &[10],
        &[1.0, 0.75, 3.0, 5.0, 5.5, 4.5, 1000.0, -3.0, 1e-9, 0.001],
        // 1.0: e = ceil(log2 1) = 0, mantissa 8 saturates to 7 -> 0.875 (the note in doc/mase-semantics.md#format-minifloat_denorm).
        // 5.5: e = 3, 5.5 / 8 * 8 = 5.5 -> 6 (half to even). 1000: e clamps to 8, mi to 7 -> 224.
        // 0.001: e = ceil(-9.97) = -9 clamps to -7; 0.001 * 2^7 * 8 = 1.024 -> 1 -> 2^-10.
        &[0.875, 0.75, 3.0, 5.0, 6.0, 4.0, 224.0, -3.0, 1e-9, 0.0009765625],
    );
}

#[test]
fn minifloat_ieee() {
    let f = MinifloatIeee { width: 8, exponent_width: 4, exponent_bias: None };
    check(
        f,
        &[9],
        &[1.0, 1.1, 1.0625, 1.1875, 300.0, 1000.0, 0.01, 0.003, -1.1],
        // 1.0625: mantissa 0.5 -> 0 (even); 1.1875: 1.5 -> 2 -> 1.25. 300: e = 8, 1.171875 -> 1.125
        // -> 288. 1000: e clamps to 8, saturates at 2^8 (2 - 1/8) = 480. 0.01: e = -7 = e_min,
        // subnormal: 0.01 * 2^7 * 8 / 2 = 5.12 -> 5 -> 2^-7 * 10/8. 0.003: e clamps to -7,
        // 0.384 * 4 = 1.536 -> 2 -> 2^-7 * 0.5.
        &[1.0, 1.125, 1.0, 1.25, 288.0, 480.0, 0.009765625, 0.00390625, -1.125],
    );
}

#[test]
fn log() {
    // 8 bits: 7 exponent bits, bias 63, e in [-63, 64].
    check(Log { width: 8, exponent_bias: None }, &[5], &[3.0, 2.8, -0.3, 0.0, 1e30], &[4.0, 2.0, -0.25, 2f32.powi(-63), 2f32.powi(64)]);
    // MASE's test config: bias 128 puts e in [-128, -1].
    check(Log { width: 8, exponent_bias: Some(128) }, &[2], &[3.0, 0.3], &[0.5, 0.25]);
    // 2 bits: one exponent bit, bias 0, e in [0, 1].
    check(Log { width: 2, exponent_bias: None }, &[2], &[0.1, 5.0], &[1.0, 2.0]);
}

#[test]
fn block_fp() {
    // M = 3, E = 8 (bias 127); a 1-D bias in blocks of 4.
    let f = BlockFp { width: 4, exponent_width: 8, exponent_bias: None, block_size: vec![4], skip_first_dim: false };
    // Block 1: max 1 -> e = 0; 1 -> 8 saturates to 7 -> 0.875; 0.1 -> 0.8 -> 1 -> 0.125.
    // Block 2: max 3 -> e = 2; 0.7 -> 0.7 / 4 * 8 = 1.4 -> 1 -> 0.5; 0 passes through.
    check(f, &[8], &[1.0, 0.5, 0.25, 0.1, 3.0, -2.0, 0.0, 0.7], &[0.875, 0.5, 0.25, 0.125, 3.0, -2.0, 0.0, 0.5]);
    // An activation [2, 3] with skip_first_dim: each row is its own block.
    let f = BlockFp { width: 3, exponent_width: 8, exponent_bias: None, block_size: vec![16], skip_first_dim: true };
    // Row 1: max 1.5 -> e = 1; 1.5 / 2 * 4 = 3 -> 1.5; 0.3 -> 0.6 -> 1 -> 0.5. Row 2: max 6 -> e = 3;
    // 1 -> 0.5 -> 0 (half to even); 6 -> 3 -> 6; -2.5 -> 1.25 -> 1 -> -2.
    check(f, &[2, 3], &[1.5, 0.3, -0.5, 1.0, 6.0, -2.5], &[1.5, 0.5, -0.5, 0.0, 6.0, -2.0]);
}

#[test]
fn block_minifloat() {
    // w = 6, E = 2, M = 3, bias in [0, 3] per block of 4: e in [-b, 3 - b].
    let f = BlockMinifloat { width: 6, exponent_width: 2, exponent_bias_width: 2, block_size: vec![4], skip_first_dim: false };
    // Block 1: max 1 -> b = 0, e in [0, 3]; every value has e = e_min, so subnormal: 0.1 -> 0.4 -> 0.
    // Block 2: max 3 -> b = 1, e in [-1, 2]; 3 is normal (1.5 -> 1.5); 0.7 subnormal at e = -1:
    // 1.4 * 4 = 5.6 -> 6 -> 2^-1 * 12/8 = 0.75.
    check(f, &[8], &[1.0, 0.5, 0.25, 0.1, 3.0, -2.0, 0.0, 0.7], &[1.0, 0.5, 0.25, 0.0, 3.0, -2.0, 0.0, 0.75]);
}

#[test]
fn block_log() {
    // w = 4 (Eb = 3), bias = clamp(7 - ceil(log2 max), 0, 3): both blocks get 3, e in [-3, 4].
    let f = BlockLog { width: 4, exponent_bias_width: 2, block_size: vec![4], skip_first_dim: false };
    // 0.1 -> log2(0.1125) = -3.15 -> -3; 0 -> sign(+t) * 2^-3; 0.7 -> log2(0.7125) = -0.49 -> 0.
    check(f, &[8], &[1.0, 0.5, 0.25, 0.1, 3.0, -2.0, 0.0, 0.7], &[1.0, 0.5, 0.25, 0.125, 4.0, -2.0, 0.125, 1.0]);
}

#[test]
fn binary_and_ternary_on_any_rank() {
    check(Binary { stochastic: false, bipolar: true }, &[4], &[0.5, -0.1, 0.0, -0.0], &[1.0, -1.0, 1.0, 1.0]);
    // Zero-scaled on a 2-D tensor (MASE: 4-D only): alpha = mean |x| per row = 2 and 1.
    check(Binary { stochastic: false, bipolar: false }, &[2, 2], &[1.0, -3.0, 0.0, 2.0], &[2.0, 0.0, 0.0, 1.0]);
    // A Linear weight [2, 4]: delta = 0.75 * 4.1 / 4 = 0.76875 on row 1; alpha = (1 + 1 + 2) / 3.
    let x = [1.0, -1.0, 0.1, 2.0, 0.0, 0.0, 0.0, 0.0];
    check(Ternary { scaling_factor: false, threshold: None }, &[2, 4], &x, &[1.0, -1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]);
    let a = 4.0f32 / 3.0;
    // Row 2 is all zeros: nothing exceeds delta = 0, alpha = 0 (MASE gives NaN).
    check(Ternary { scaling_factor: true, threshold: None }, &[2, 4], &x, &[a, -a, 0.0, a, 0.0, 0.0, 0.0, 0.0]);
    // The threshold is honoured: only 2 exceeds 1.5.
    check(Ternary { scaling_factor: true, threshold: Some(1.5) }, &[2, 4], &x, &[0.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0]);
}

/// QONNX's rounding-mode table (docs/qonnx-custom-ops/intquant_v1.md), through IntQuant with
/// scale 1 and zero point 0, in the column order ROUND, CEIL, FLOOR, UP, DOWN, HALF_UP, HALF_DOWN.
#[test]
fn qonnx_rounding_table() {
    let table: [(f32, [f32; 7]); 10] = [
        (5.5, [6.0, 6.0, 5.0, 6.0, 5.0, 6.0, 5.0]),
        (2.5, [2.0, 3.0, 2.0, 3.0, 2.0, 3.0, 2.0]),
        (1.6, [2.0, 2.0, 1.0, 2.0, 1.0, 2.0, 2.0]),
        (1.1, [1.0, 2.0, 1.0, 2.0, 1.0, 1.0, 1.0]),
        (1.0, [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]),
        (-1.0, [-1.0, -1.0, -1.0, -1.0, -1.0, -1.0, -1.0]),
        (-1.1, [-1.0, -1.0, -2.0, -2.0, -1.0, -1.0, -1.0]),
        (-1.6, [-2.0, -1.0, -2.0, -2.0, -1.0, -2.0, -2.0]),
        (-2.5, [-2.0, -2.0, -3.0, -3.0, -2.0, -3.0, -2.0]),
        (-5.5, [-6.0, -5.0, -6.0, -6.0, -5.0, -6.0, -5.0]),
    ];
    for (m, mode) in MODES.into_iter().enumerate() {
        let x: Vec<f32> = table.iter().map(|r| r.0).collect();
        let want: Vec<f32> = table.iter().map(|r| r.1[m]).collect();
        check(int_quant(t(&[], &[1.0]), t(&[], &[0.0]), 8.0, true, false, mode), &[10], &x, &want);
        for (v, w) in x.iter().zip(&want) {
            assert_eq!(mase_quant::round::round_mode(mode, *v), *w, "{mode:?} {v}");
        }
    }
}

#[test]
fn int_quant_ranges_zero_points_and_channels() {
    let r = RoundingMode::Round;
    let x = [-10.0, 10.0, 7.4, -8.6];
    // 4 bits: signed [-8, 7], narrow [-7, 7], unsigned [0, 15], unsigned narrow [0, 14].
    check(int_quant(t(&[], &[1.0]), t(&[], &[0.0]), 4.0, true, false, r), &[4], &x, &[-8.0, 7.0, 7.0, -8.0]);
    check(int_quant(t(&[], &[1.0]), t(&[], &[0.0]), 4.0, true, true, r), &[4], &x, &[-7.0, 7.0, 7.0, -7.0]);
    check(int_quant(t(&[], &[1.0]), t(&[], &[0.0]), 4.0, false, false, r), &[4], &x, &[0.0, 10.0, 7.0, 0.0]);
    check(int_quant(t(&[], &[1.0]), t(&[], &[0.0]), 4.0, false, true, r), &[2], &[20.0, 13.6], &[14.0, 14.0]);
    // A zero point of 3 with scale 0.5: y = 2x + 3 in [0, 15], out = (round(y) - 3) / 2.
    check(int_quant(t(&[], &[0.5]), t(&[], &[3.0]), 4.0, false, false, r), &[4], &[-2.0, 0.26, 7.0, -1.5], &[-1.5, 0.5, 6.0, -1.5]);
    // Per-channel scale [2, 1] on [2, 3]: row 1 in steps of 0.5, row 2 in steps of 0.25.
    let s = t(&[2, 1], &[0.5, 0.25]);
    check(
        int_quant(s, t(&[], &[0.0]), 8.0, true, false, r),
        &[2, 3],
        &[1.3, -0.2, 100.0, 1.3, -0.2, 100.0],
        &[1.5, -0.0, 63.5, 1.25, -0.25, 31.75],
    );
    // A signed 1-bit IntQuant is bipolar, as QONNX's executor treats it.
    check(int_quant(t(&[], &[0.5]), t(&[], &[0.0]), 1.0, true, false, r), &[3], &[0.2, -0.2, 0.0], &[0.5, -0.5, 0.5]);
}

#[test]
fn bipolar_quant_and_float_quant() {
    check(BipolarQuant { scale: t(&[2, 1], &[0.5, 2.0]) }, &[2, 2], &[0.1, -0.1, 0.0, -3.0], &[0.5, -0.5, 2.0, -2.0]);
    // E4M3 (bias 7, max 448): 1.0625 -> es = -3, 8.5 -> 8 -> 1; 300 -> es = 5, 9.375 -> 9 -> 288;
    // 500 -> 512 clamps to min(480, 448); 2^-9 is the smallest subnormal, 0.7 of it rounds up.
    let e = e4m3(t(&[], &[1.0]), true, false, RoundingMode::Round);
    let sub = 2f32.powi(-9);
    check(e, &[7], &[1.0, 1.0625, 300.0, 500.0, sub, 0.7 * sub, 0.4 * sub], &[1.0, 1.0, 288.0, 448.0, sub, sub, 0.0]);
    // Not saturating: out-of-range values become infinities (has_inf) or NaN (has_nan).
    check(e4m3(t(&[], &[1.0]), false, true, RoundingMode::Round), &[3], &[500.0, -500.0, 3.0], &[f32::INFINITY, f32::NEG_INFINITY, 3.0]);
    check(e4m3(t(&[], &[1.0]), false, false, RoundingMode::Round), &[2], &[500.0, 3.0], &[f32::NAN, 3.0]);
    // The reference turns infinite inputs into NaN (inf / inf).
    check(e4m3(t(&[], &[1.0]), true, false, RoundingMode::Round), &[1], &[f32::INFINITY], &[f32::NAN]);
}

#[test]
fn qonnx_trunc() {
    use mase_quant::{trunc, TruncSpec};
    // An 8-bit accumulator at scale 1 truncated to 4 bits at scale 4: y / 4, floored, times 4.
    let spec = TruncSpec {
        scale: 1.0,
        zero_point: 0.0,
        input_bit_width: 8.0,
        output_scale: 4.0,
        output_bit_width: 4.0,
        signed: true,
        narrow: false,
        rounding_mode: RoundingMode::Floor,
    };
    let mut out = [0.0; 5];
    trunc(&spec, &[13.0, -13.0, 7.6, 100.0, -100.0], &mut out).unwrap();
    assert_eq!(out, [12.0, -16.0, 8.0, 28.0, -32.0]);
}
