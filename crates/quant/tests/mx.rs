//! The OCP microscaling formats (`mxint`, `mxfp`): hand-computed tables from the specification's
//! conversion, and PyTorch's answers (`tests/fixtures/mx_torch.txt`, made by
//! `scripts/make_mx_references.py`, whose FP8 elements come from torch's own `float8_e4m3fn` and
//! `float8_e5m2` casts). The kernel and the reference must both give every value bit for bit.

mod common;

use common::same;
use mase_ir::{QuantFormat, Rng};
use mase_quant::{on_grid, quantize, quantize_reference, representable, validate_for_shape, validate_format};
use std::collections::HashMap;

type QuantizeFn = fn(&QuantFormat, &[f32], &[usize], &mut [f32], &mut Rng) -> mase_quant::Result<()>;

fn mxint(width: u32, block_size: usize, block_dim: i64) -> QuantFormat {
    QuantFormat::Mxint { width, block_size, block_dim }
}

fn mxfp(exponent_width: u32, frac_width: u32, block_size: usize, block_dim: i64) -> QuantFormat {
    QuantFormat::Mxfp { exponent_width, frac_width, block_size, block_dim }
}

/// Checks one row with both implementations, bit for bit (every NaN equal to every NaN).
fn check(fmt: QuantFormat, shape: &[usize], x: &[f32], want: &[f32]) {
    let impls: [(&str, QuantizeFn); 2] = [("kernel", quantize), ("reference", quantize_reference)];
    for (name, f) in impls {
        let mut out = vec![0.0; x.len()];
        f(&fmt, x, shape, &mut out, &mut Rng::new(0)).expect("valid format");
        for i in 0..x.len() {
            assert!(same(out[i], want[i]), "{name} {fmt:?}: x[{i}] = {:e} gives {:e}, want {:e}", x[i], out[i], want[i]);
        }
    }
}

#[test]
fn fp4_e2m1_rounds_to_its_grid() {
    // Block maximum 6: X = 2^(floor(log2 6) - 2) = 1, so the elements are the values. The E2M1
    // grid is {0, 0.5, 1, 1.5, 2, 3, 4, 6}: steps of 0.5 below 2, 1 in [2, 4), 2 in [4, 6].
    // 0.25 is a tie between 0 and 0.5 (even: 0); 0.75 between 0.5 and 1 (even mantissa: 1);
    // 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4, 5.5 -> 6, -4.4 -> -4, 0.3 -> 0.5.
    let x = [6.0, 0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.5, -4.4, 0.2, 0.3];
    let want = [6.0, 0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, -4.0, 0.0, 0.5];
    check(mxfp(2, 1, 32, -1), &[12], &x, &want);
    // Every grid value is its own quantization.
    let grid = [6.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 0.0, -0.5, -6.0];
    check(mxfp(2, 1, 32, -1), &[10], &grid, &grid);
    // Block maximum 0.9: X = 2^(-1 - 2) = 1/8; 0.9 * 8 = 7.2 saturates at 6 -> 0.75, and
    // 0.1 * 8 = 0.8 -> 1 -> 0.125.
    check(mxfp(2, 1, 32, -1), &[2], &[0.9, 0.1], &[0.75, 0.125]);
}

#[test]
fn fp8_fp6_largest_values_and_subnormals() {
    // E4M3: block maximum 480, X = 2^(8 - 8) = 1. 464 = 14.5 steps of 2^(8-3) = 32 -> 14 -> 448;
    // 480 -> 15 * 32 = 480, above the largest value 448 (its code is NaN), saturates to 448.
    // Subnormals in steps of 2^-9: 2^-10 ties to 0, 3 * 2^-10 ties to 2 * 2^-9.
    let s = 2f32.powi(-9);
    check(mxfp(4, 3, 32, -1), &[6], &[480.0, 464.0, -448.0, s, s / 2.0, 1.5 * s], &[448.0, 448.0, -448.0, s, 0.0, 2.0 * s]);
    // E5M2: 61440 = 7.5 steps of 2^(15-2) -> 8 * 8192 = 65536, saturates at 57344.
    check(mxfp(5, 2, 32, -1), &[3], &[61440.0, 57344.0, 1.0], &[57344.0, 57344.0, 1.0]);
    // E3M2: maximum 28 (X = 1 for a block maximum in [16, 32)); 30 saturates, 0.0625 = 2^-4 is
    // the smallest subnormal, 0.09375 ties to 2 * 2^-4.
    check(mxfp(3, 2, 32, -1), &[4], &[30.0, 27.0, 0.0625, 0.09375], &[28.0, 28.0, 0.0625, 0.125]);
    // E2M3: maximum 7.5 (X = 1 for a block maximum in [4, 8)); steps of 1/8 below 2.
    check(mxfp(2, 3, 32, -1), &[4], &[7.9, 7.3, 0.0625, 1.1], &[7.5, 7.5, 0.0, 1.125]);
}

#[test]
fn mxint8_has_six_fraction_bits_and_a_symmetric_range() {
    // Block maximum 1.99: X = 2^floor(log2 1.99) = 1. Codes round(x * 64) within [-127, 127]:
    // 0.01 -> 0.64 -> 1 -> 1/64; -1.99 -> -127.36 -> -127; 1/3 -> 21.33 -> 21.
    check(mxint(8, 32, -1), &[4], &[1.0, 0.01, -1.99, 1.0 / 3.0], &[1.0, 0.015625, -127.0 / 64.0, 21.0 / 64.0]);
    // A power-of-two maximum is kept: X = 4, -4 / 4 * 64 = -64; 0.03 / 4 * 64 = 0.48 -> 0.
    check(mxint(8, 32, -1), &[4], &[4.0, -4.0, 3.0, 0.03], &[4.0, -4.0, 3.0, 0.0]);
    // MXINT4: two fraction bits, codes within [-7, 7]; X = 1: 1.9 -> 7.6 -> 7 -> 1.75,
    // 0.375 -> 1.5 -> 2 -> 0.5, -0.125 -> -0.5 -> -0.0.
    check(mxint(4, 32, -1), &[3], &[1.9, 0.375, -0.125], &[1.75, 0.5, -0.0]);
}

#[test]
fn the_scale_is_clamped_to_e8m0() {
    // 1.5 * 2^-125 has X = 2^-125 and is held; 2^-130 alone would want X = 2^-130 but E8M0 stops
    // at 2^-127, where it is 8 / 64 (held); 2^-135 there is 0.25 / 64, which rounds to 0.
    let (a, b, c) = (1.5 * 2f32.powi(-125), 2f32.powi(-130), 2f32.powi(-135));
    check(mxint(8, 1, -1), &[3], &[a, b, c], &[a, b, 0.0]);
    // E4M3 at X = 2^-127 (a block maximum of 2^-140): 2^-13 is below half the smallest
    // subnormal 2^-9, so the whole block is 0.
    check(mxfp(4, 3, 32, -1), &[2], &[2f32.powi(-140), -2f32.powi(-141)], &[0.0, -0.0]);
    // f32::MAX: floor(log2) = 127, X = 2^(127 - 8); MAX / X is just below 512 -> 448 * 2^119.
    check(mxfp(4, 3, 32, -1), &[1], &[f32::MAX], &[448.0 * 2f32.powi(119)]);
}

#[test]
fn nan_and_infinity_make_their_block_nan() {
    let nan = f32::NAN;
    // Blocks of 2 along the last axis: [1, NaN] and [inf, 2] are NaN, [3, -0.0] is not.
    let x = [1.0, nan, f32::INFINITY, 2.0, 3.0, -0.0];
    check(mxint(8, 2, -1), &[6], &x, &[nan, nan, nan, nan, 3.0, -0.0]);
    check(mxfp(4, 3, 2, -1), &[6], &x, &[nan, nan, nan, nan, 3.0, -0.0]);
    // Along axis 0 in [3, 2]: the column holding -inf is NaN, the other column is not.
    check(mxfp(2, 1, 32, 0), &[3, 2], &[1.0, f32::NEG_INFINITY, 2.0, 0.5, -6.0, 0.25], &[1.0, nan, 2.0, nan, -6.0, nan]);
}

#[test]
fn blocks_follow_block_size_and_block_dim() {
    // [2, 2] along axis 0 with E2M1: column 0 has maximum 6 (X = 1): 0.75 -> 1; column 1 has
    // maximum 0.3 (X = 2^(-2 - 2)): 0.3 * 16 = 4.8 -> 4 -> 0.25, 0.1 * 16 = 1.6 -> 1.5 -> 0.09375.
    check(mxfp(2, 1, 32, 0), &[2, 2], &[6.0, 0.3, 0.75, 0.1], &[6.0, 0.25, 1.0, 0.09375]);
    // The same along the last axis: rows [6, 0.3] (X = 1) and [0.75, 0.1] (X = 2^-2).
    // 0.3 -> 0.5; 0.75 * 4 = 3 -> 0.75, 0.1 * 4 = 0.4 -> 0.5 -> 0.125.
    check(mxfp(2, 1, 32, -1), &[2, 2], &[6.0, 0.3, 0.75, 0.1], &[6.0, 0.5, 0.75, 0.125]);
    // 40 values in blocks of 32: the first block's maximum is 1 (X = 1, steps of 1/64), the
    // second's 100 (X = 64, steps of 1), so 0.3 is 19/64 in the first and 0 in the second.
    let mut x = vec![0.3f32; 40];
    x[0] = 1.0;
    x[39] = 100.0;
    let mut want = vec![19.0 / 64.0; 40];
    want[0] = 1.0;
    want[32..39].fill(0.0);
    want[39] = 100.0;
    check(mxint(8, 32, -1), &[40], &x, &want);
}

fn fixture() -> HashMap<String, Vec<f32>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mx_torch.txt");
    let text = std::fs::read_to_string(path).expect("fixture is readable");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut it = l.split_whitespace();
            let key = it.next().expect("name").to_string();
            let count: usize = it.next().expect("count").parse().expect("count");
            let vals: Vec<f32> = it.map(|v| v.parse().expect("value")).collect();
            assert_eq!(vals.len(), count, "{key}");
            (key, vals)
        })
        .collect()
}

#[test]
fn every_element_format_equals_pytorch() {
    let fx = fixture();
    let elements: [(&str, fn(usize, i64) -> QuantFormat); 6] = [
        ("int8", |b, d| mxint(8, b, d)),
        ("e4m3", |b, d| mxfp(4, 3, b, d)),
        ("e5m2", |b, d| mxfp(5, 2, b, d)),
        ("e3m2", |b, d| mxfp(3, 2, b, d)),
        ("e2m3", |b, d| mxfp(2, 3, b, d)),
        ("e2m1", |b, d| mxfp(2, 1, b, d)),
    ];
    let cases = [("b32_last", 32, -1), ("b5_dim0", 5, 0), ("b10_last_edge", 10, -1), ("b4_dim0_edge", 4, 0)];
    let mut checked = 0;
    for (elem, make) in elements {
        for (suffix, block, dim) in cases {
            let case = format!("{elem}_{suffix}");
            let shape: Vec<usize> = fx[&format!("{case}.shape")].iter().map(|&v| v as usize).collect();
            check(make(block, dim), &shape, &fx[&format!("{case}.x")], &fx[&format!("{case}.y")]);
            checked += 1;
        }
    }
    assert_eq!(checked, 24);
}

#[test]
fn representable_and_on_grid() {
    // E2M1 holds the grid values times any E8M0 scale; 5 and 7 are on no scaled grid.
    let e2m1 = mxfp(2, 1, 32, -1);
    for v in [6.0, 0.75, 3.0 * 2f32.powi(-120), -0.0, 1.5 * 2f32.powi(100)] {
        assert!(representable(&e2m1, v), "{v}");
    }
    for v in [5.0, 7.0, f32::NAN, f32::INFINITY] {
        assert!(!representable(&e2m1, v), "{v}");
    }
    // MXINT8: codes of 7 bits and a sign over 2^6; 255 / 128 needs 8 bits.
    let int8 = mxint(8, 32, -1);
    assert!(representable(&int8, 127.0 / 64.0) && representable(&int8, 3.0));
    assert!(!representable(&int8, 255.0 / 128.0));
    // on_grid judges each block with its own scale. As one block (X = 1), 0.75 in
    // [6, 0.5, 0.75, 0.5] is off the grid; in blocks of 2, [0.75, 0.5] has X = 2^-3 and holds
    // 0.75 = 6 X and 0.5 = 4 X; 0.25 beside 6 (X = 1) is off.
    assert_eq!(on_grid(&e2m1, &[6.0, 0.5, 0.75, 0.5], &[4]).unwrap(), vec![2]);
    assert_eq!(on_grid(&mxfp(2, 1, 2, -1), &[6.0, 0.5, 0.75, 0.5], &[4]).unwrap(), Vec::<usize>::new());
    assert_eq!(on_grid(&mxfp(2, 1, 2, -1), &[6.0, 0.25, 0.75, 0.5], &[4]).unwrap(), vec![1]);
}

#[test]
fn bad_parameters_and_axes_are_refused() {
    let cases = [
        (mxint(9, 32, -1), "mxint format: `width` = 9: must be between 2 and 8 (MXINT8 is 8)"),
        (mxint(8, 0, -1), "mxint format: `block_size` = 0: must be at least 1 (the OCP MX block is 32)"),
        (
            mxfp(4, 4, 32, -1),
            "mxfp format: `exponent_width` = 4 with frac_width = 4: must name an OCP MX element format: E4M3 (4, 3), E5M2 (5, 2), E3M2 (3, 2), E2M3 (2, 3) or E2M1 (2, 1)",
        ),
    ];
    for (fmt, want) in cases {
        assert_eq!(validate_format(&fmt).unwrap_err().to_string(), want);
    }
    let e = validate_for_shape(&mxfp(4, 3, 32, 2), &[3, 4]).unwrap_err();
    assert_eq!(e.to_string(), "mxfp format: `block_dim` = 2 is not an axis of a tensor of shape [3, 4] (expected -2..=1)");
    assert!(validate_for_shape(&mxfp(4, 3, 32, -2), &[3, 4]).is_ok());
    let mut out = [0.0; 12];
    assert!(quantize(&mxint(8, 32, -3), &[0.0; 12], &[3, 4], &mut out, &mut Rng::new(0)).is_err());
}
