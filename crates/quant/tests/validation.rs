//! Bad formats and bad shapes give errors that name the field, never a panic.

mod common;

use common::{e4m3, int_quant, t};
use mase_ir::{QuantFormat::*, Rng, RoundingMode};
use mase_quant::{on_grid, quantize, validate_for_shape, validate_format, QuantError};

#[test]
fn bad_parameters_name_their_field() {
    let r = RoundingMode::Round;
    let blk = |b: Vec<usize>| BlockFp { width: 8, exponent_width: 4, exponent_bias: None, block_size: b, skip_first_dim: false };
    let cases = [
        (Integer { width: 0, frac_width: 0, signed: true }, "integer format: `width` = 0"),
        (Integer { width: 33, frac_width: 0, signed: true }, "`width` = 33"),
        (Integer { width: 8, frac_width: 65, signed: true }, "`frac_width` = 65: must be at most 64"),
        (
            MinifloatDenorm { width: 8, exponent_width: 8, exponent_bias: None },
            "minifloat_denorm format: `exponent_width` = 8: must be smaller than `width` = 8",
        ),
        (MinifloatIeee { width: 8, exponent_width: 0, exponent_bias: None }, "minifloat_ieee format: `exponent_width` = 0"),
        (MinifloatIeee { width: 16, exponent_width: 9, exponent_bias: None }, "`exponent_width` = 9"),
        (MinifloatIeee { width: 8, exponent_width: 4, exponent_bias: Some(1000) }, "`exponent_bias` = 1000"),
        (Log { width: 1, exponent_bias: None }, "log format: `width` = 1"),
        (blk(vec![]), "block_fp format: `block_size` = []"),
        (
            BlockFp { width: 0, exponent_width: 8, exponent_bias: None, block_size: vec![16], skip_first_dim: true },
            "block_fp format: `width` = 0",
        ),
        (
            BlockMinifloat { width: 8, exponent_width: 8, exponent_bias_width: 4, block_size: vec![16], skip_first_dim: false },
            "block_minifloat format: `exponent_width` = 8",
        ),
        (
            BlockMinifloat { width: 8, exponent_width: 4, exponent_bias_width: 9, block_size: vec![16], skip_first_dim: false },
            "`exponent_bias_width` = 9",
        ),
        (BlockLog { width: 10, exponent_bias_width: 4, block_size: vec![16], skip_first_dim: false }, "block_log format: `width` = 10"),
        (Ternary { scaling_factor: true, threshold: Some(-1.0) }, "ternary format: `threshold` = -1"),
        (int_quant(t(&[], &[1.0]), t(&[], &[0.0]), 0.0, true, false, r), "int_quant format: `bit_width` = 0"),
        (int_quant(t(&[], &[1.0]), t(&[], &[0.0]), 2.5, true, false, r), "`bit_width` = 2.5"),
        (int_quant(t(&[], &[0.0]), t(&[], &[0.0]), 8.0, true, false, r), "int_quant format: `scale` = 0"),
        (int_quant(t(&[], &[1.0]), t(&[], &[f32::NAN]), 8.0, true, false, r), "`zero_point` = NaN"),
        (BipolarQuant { scale: t(&[], &[-1.0]) }, "bipolar_quant format: `scale` = -1"),
        (e4m3(t(&[], &[1.0]), false, false, r).clone(), ""),
    ];
    for (fmt, want) in cases {
        let got = validate_format(&fmt).map(|_| ()).map_err(|e| e.to_string());
        if want.is_empty() {
            // e4m3 helper with saturation off and has_nan on is valid.
            assert_eq!(got, Ok(()), "{fmt:?}");
            continue;
        }
        let e = got.expect_err(want);
        assert!(e.contains(want), "{fmt:?}: `{e}` should contain `{want}`");
        // quantize and on_grid refuse it too, with the same message.
        let mut out = [0.0];
        assert_eq!(quantize(&fmt, &[1.0], &[1], &mut out, &mut Rng::new(0)).map_err(|e| e.to_string()), Err(e.clone()));
        assert_eq!(on_grid(&fmt, &[1.0], &[1]).map_err(|e| e.to_string()), Err(e));
    }
    let mut f = e4m3(t(&[], &[1.0]), false, false, r);
    if let FloatQuant { has_nan, .. } = &mut f {
        *has_nan = false;
    }
    assert!(validate_format(&f).unwrap_err().to_string().contains("`saturation` = false"));
}

#[test]
fn shapes_and_lengths_are_checked() {
    let q = int_quant(t(&[3, 1], &[1.0, 2.0, 3.0]), t(&[], &[0.0]), 8.0, true, false, RoundingMode::Round);
    assert!(validate_for_shape(&q, &[3, 4]).is_ok());
    let e = validate_for_shape(&q, &[4, 3]).unwrap_err();
    assert!(matches!(&e, QuantError::Broadcast { field: "scale", .. }), "{e}");
    assert!(e.to_string().contains("`scale` of shape [3, 1] does not broadcast to a tensor of shape [4, 3]"), "{e}");
    let fmt = Integer { width: 8, frac_width: 4, signed: true };
    let mut out = [0.0; 3];
    let e = quantize(&fmt, &[1.0, 2.0], &[3], &mut out, &mut Rng::new(0)).unwrap_err();
    assert_eq!(e.to_string(), "the input has 2 values, but shape [3] needs 3");
    let e = quantize(&fmt, &[1.0, 2.0], &[2], &mut out, &mut Rng::new(0)).unwrap_err();
    assert_eq!(e.to_string(), "the output has 3 values, but shape [2] needs 2");
    // A malformed parameter tensor (values not matching its shape) is an error, not a panic.
    let bad = mase_ir::Tensor { shape: vec![2], data: vec![1.0] };
    assert!(validate_format(&BipolarQuant { scale: bad }).is_err());
}
