//! NaN, ±inf and -0.0 through MASE's quantizers, against their formulas written in torch.
//!
//! `tests/fixtures/nonfinite_quant.txt` (made by `scripts/make_nonfinite_references.py`) holds,
//! per case, an input with special values and what torch gives for MASE's formula in MASE's
//! order of operations, including its zero passthrough `(~close) * q + close * x`: its products
//! make ±inf NaN in the minifloat and block_fp formats (0 * inf), make a -0.0 input +0.0, and
//! make every value of a NaN block NaN. Both the kernel and the reference must give torch's
//! answer: NaN for NaN, the same infinities and signed zeros bit for bit, finite values to 1e-6.

use mase_ir::{QuantFormat, Rng};
use mase_quant::{quantize, quantize_reference};
use std::collections::HashMap;

fn fixture() -> HashMap<String, Vec<f32>> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/nonfinite_quant.txt");
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

fn same(got: f32, want: f32) -> bool {
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    if want.is_infinite() || want == 0.0 {
        return got.to_bits() == want.to_bits();
    }
    (got - want).abs() <= 1e-6 * want.abs().max(1.0)
}

/// The mismatches of the kernel and of the reference on case `case`.
fn check(fx: &HashMap<String, Vec<f32>>, case: &str, fmt: QuantFormat) -> Vec<String> {
    let shape: Vec<usize> = fx[&format!("{case}.shape")].iter().map(|&v| v as usize).collect();
    let (x, want) = (&fx[&format!("{case}.x")], &fx[&format!("{case}.y")]);
    let mut bad = Vec::new();
    type Quantize = fn(&QuantFormat, &[f32], &[usize], &mut [f32], &mut Rng) -> mase_quant::Result<()>;
    for (name, run) in [("kernel", quantize as Quantize), ("reference", quantize_reference)] {
        let mut out = vec![0.0; x.len()];
        run(&fmt, x, &shape, &mut out, &mut Rng::new(0)).unwrap_or_else(|e| panic!("{case}: {e}"));
        for (i, (&g, &w)) in out.iter().zip(want).enumerate() {
            if !same(g, w) {
                bad.push(format!("{case} {name}: x[{i}] = {:?} gives {g:?}, torch {w:?}", x[i]));
            }
        }
    }
    bad
}

#[test]
fn nonfinite_values_follow_mases_torch_formulas() {
    use QuantFormat as Q;
    let fx = fixture();
    let blocks = vec![4];
    let mut bad = Vec::new();
    bad.extend(check(&fx, "integer_8_4", Q::Integer { width: 8, frac_width: 4, signed: true }));
    bad.extend(check(&fx, "integer_u4_1", Q::Integer { width: 4, frac_width: 1, signed: false }));
    bad.extend(check(&fx, "minifloat_denorm_8_3", Q::MinifloatDenorm { width: 8, exponent_width: 3, exponent_bias: None }));
    bad.extend(check(&fx, "minifloat_ieee_8_4", Q::MinifloatIeee { width: 8, exponent_width: 4, exponent_bias: None }));
    bad.extend(check(&fx, "minifloat_ieee_6_2_bias_1", Q::MinifloatIeee { width: 6, exponent_width: 2, exponent_bias: Some(1) }));
    bad.extend(check(&fx, "log_5", Q::Log { width: 5, exponent_bias: None }));
    for suffix in ["", "_zero_block"] {
        let fp = Q::BlockFp { width: 8, exponent_width: 4, exponent_bias: None, block_size: blocks.clone(), skip_first_dim: true };
        bad.extend(check(&fx, &format!("block_fp_8_4{suffix}"), fp));
        let mini =
            Q::BlockMinifloat { width: 8, exponent_width: 3, exponent_bias_width: 2, block_size: blocks.clone(), skip_first_dim: true };
        bad.extend(check(&fx, &format!("block_minifloat_8_3_2{suffix}"), mini));
        let log = Q::BlockLog { width: 5, exponent_bias_width: 2, block_size: blocks.clone(), skip_first_dim: true };
        bad.extend(check(&fx, &format!("block_log_5_2{suffix}"), log));
    }
    assert!(bad.is_empty(), "{} mismatches:\n{}", bad.len(), bad.join("\n"));
}
