//! `representable` and `on_grid`: which values a format can hold, by hand-computed cases.

mod common;

use common::{int_quant, t};
use mase_ir::{QuantFormat, QuantFormat::*, RoundingMode};
use mase_quant::{on_grid, representable};

fn rep(fmt: &QuantFormat, yes: &[f32], no: &[f32]) {
    for &v in yes {
        assert!(representable(fmt, v), "{fmt:?} should hold {v}");
    }
    for &v in no {
        assert!(!representable(fmt, v), "{fmt:?} should not hold {v}");
    }
}

#[test]
fn representable_values_by_format() {
    rep(
        &Integer { width: 8, frac_width: 4, signed: true },
        &[0.125, 7.9375, -8.0, 0.0, -0.0],
        &[0.1, 8.0, -8.0625, f32::NAN, f32::INFINITY],
    );
    rep(&Integer { width: 8, frac_width: 4, signed: false }, &[15.9375, 0.0], &[-0.0625, 16.0]);
    // 8/4 denorm minifloat (M = 3, e in [-7, 8]): values mi * 2^(e - 3), mi < 8. 1.0 = 4 * 2^-2 is
    // held (with e = 1) although quantizing 1.0 saturates it; 224 is the largest, 240 needs mi 7.5.
    let d = MinifloatDenorm { width: 8, exponent_width: 4, exponent_bias: None };
    rep(&d, &[1.0, 0.875, 224.0, 2f32.powi(-10), 1e-9], &[240.0, 2f32.powi(-11), 0.3]);
    // IEEE 8/4: 1.125 normal, 480 the largest, subnormals in steps of 2^(e_min + 1 - M) = 2^-9.
    let i = MinifloatIeee { width: 8, exponent_width: 4, exponent_bias: None };
    rep(&i, &[1.125, 480.0, 2f32.powi(-9), 3.0 * 2f32.powi(-9)], &[1.0625, 496.0, 2f32.powi(-10)]);
    rep(&Log { width: 8, exponent_bias: None }, &[4.0, -0.25, 2f32.powi(-63)], &[3.0, 0.0, 2f32.powi(-64)]);
    rep(&Binary { stochastic: false, bipolar: true }, &[1.0, -1.0], &[0.0, 0.5]);
    rep(&Binary { stochastic: false, bipolar: false }, &[0.0, 0.7], &[-0.7]);
    rep(&Ternary { scaling_factor: false, threshold: None }, &[1.0, 0.0, -1.0], &[0.5]);
    let q = int_quant(t(&[], &[0.1]), t(&[], &[0.0]), 8.0, true, false, RoundingMode::Ceil);
    rep(&q, &[0.3, 12.7, -12.8], &[0.35, 12.8]);
    rep(&BipolarQuant { scale: t(&[2, 1], &[0.5, 2.0]) }, &[0.5, -2.0], &[1.0]);
}

#[test]
fn on_grid_judges_blocks_and_rows_with_their_own_scale() {
    // block_fp, M = 3, blocks of 4: [0.875, 0.5, 0.25, 0.125] shares e = 0 (steps of 1/8);
    // [3, -2, 0, 0.5] shares e = 2 (steps of 1/2). 0.25 in the second block is off its grid.
    let f = BlockFp { width: 4, exponent_width: 8, exponent_bias: None, block_size: vec![4], skip_first_dim: false };
    assert_eq!(on_grid(&f, &[0.875, 0.5, 0.25, 0.125, 3.0, -2.0, 0.0, 0.5], &[8]).unwrap(), Vec::<usize>::new());
    assert_eq!(on_grid(&f, &[0.875, 0.5, 0.25, 0.125, 3.0, -2.0, 0.25, 0.5], &[8]).unwrap(), vec![6]);
    // Zero-scaled binary rows hold 0 and one positive value.
    let b = Binary { stochastic: false, bipolar: false };
    assert_eq!(on_grid(&b, &[2.0, 0.0, 2.0, 1.0, 1.5, 0.0], &[2, 3]).unwrap(), vec![4]);
    // Scaled ternary rows hold 0 and ±α.
    let s = Ternary { scaling_factor: true, threshold: None };
    assert_eq!(on_grid(&s, &[0.5, -0.5, 0.0, 0.5, 0.25, 0.5], &[2, 3]).unwrap(), vec![4]);
    // Per-channel IntQuant checks each row with its own scale.
    let q = int_quant(t(&[2, 1], &[0.5, 0.25]), t(&[], &[0.0]), 8.0, true, false, RoundingMode::Round);
    assert_eq!(on_grid(&q, &[1.5, 0.25, 1.25, 0.25], &[2, 2]).unwrap(), vec![1]);
    // Float weights are mostly off an 8/4 grid.
    let w: Vec<f32> = (0..100).map(|i| (i as f32 * 0.731).sin()).collect();
    let off = on_grid(&Integer { width: 8, frac_width: 4, signed: true }, &w, &[10, 10]).unwrap();
    assert!(off.len() > 90, "{}", off.len());
}
