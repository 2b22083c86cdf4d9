//! Shared by the integration tests: a generator of hard inputs and a list of formats covering
//! every variant with several parameter sets.
#![allow(dead_code)]

use mase_ir::{QuantFormat, Rng, RoundingMode, Tensor};

/// `n` values mixing the cases quantizers get wrong: ±0, halves and near-halves at many scales,
/// exact powers of two and their neighbours, tiny and huge values, subnormals, values near the
/// 1e-8 pass-through threshold, random bit patterns, and (when `special`) ±inf and NaN.
pub fn hard_values(rng: &mut Rng, n: usize, special: bool) -> Vec<f32> {
    (0..n)
        .map(|_| {
            let pick = rng.below(12);
            let sign = if rng.below(2) == 0 { 1.0 } else { -1.0 };
            let scale = 2f32.powi(rng.below(40) as i32 - 20);
            let v = match pick {
                0 => 0.0,
                1 => (rng.below(64) as f32 + 0.5) * scale,
                2 => scale,
                // The neighbours of a power of two (bit patterns one apart; rust-version 1.81 has
                // no `next_up`).
                3 => f32::from_bits(if rng.below(2) == 0 { scale.to_bits() + 1 } else { scale.to_bits() - 1 }),
                4 => 10f32.powi(rng.below(20) as i32 - 12) * rng.uniform(),
                5 => f32::from_bits(rng.below(1 << 23) as u32 + 1),
                6 => 1e-8 * (0.9 + 0.2 * rng.uniform()),
                7 => f32::from_bits((rng.next_u64() as u32) & 0x7fff_ffff),
                8 if special => [f32::INFINITY, f32::NAN, f32::MAX, f32::MIN_POSITIVE][rng.below(4) as usize],
                9 => f32::from_bits(((rng.below(64) as f32 + 0.5) * scale).to_bits() + 1),
                _ => rng.normal() as f32 * scale * 8.0,
            };
            let v = if v.is_nan() { v } else { sign * v };
            if v.is_nan() && !special {
                1.0
            } else {
                v
            }
        })
        .collect()
}

/// A QONNX parameter tensor.
pub fn t(shape: &[usize], data: &[f32]) -> Tensor {
    Tensor::new(shape.to_vec(), data.to_vec()).expect("test tensor has matching shape")
}

/// E4M3 as QONNX writes it (bias 7, max 448), with a mode and saturation choice.
pub fn e4m3(scale: Tensor, saturation: bool, has_inf: bool, mode: RoundingMode) -> QuantFormat {
    QuantFormat::FloatQuant {
        scale,
        exponent_bitwidth: 4.0,
        mantissa_bitwidth: 3.0,
        exponent_bias: 7.0,
        max_val: 448.0,
        has_inf,
        has_nan: !has_inf,
        has_subnormal: true,
        saturation,
        rounding_mode: mode,
    }
}

/// IntQuant with a scale and zero point.
pub fn int_quant(scale: Tensor, zp: Tensor, bits: f32, signed: bool, narrow: bool, mode: RoundingMode) -> QuantFormat {
    QuantFormat::IntQuant { scale, zero_point: zp, bit_width: bits, signed, narrow, rounding_mode: mode }
}

pub const MODES: [RoundingMode; 7] = [
    RoundingMode::Round,
    RoundingMode::Ceil,
    RoundingMode::Floor,
    RoundingMode::Up,
    RoundingMode::Down,
    RoundingMode::HalfUp,
    RoundingMode::HalfDown,
];

/// Formats for tensors of `shape`; with rank 2 or more, per-channel QONNX scales along the first
/// dimension are included too.
pub fn formats(shape: &[usize]) -> Vec<QuantFormat> {
    let c = if shape.len() >= 2 { shape[0] } else { 0 };
    let mut pshape = vec![1; shape.len()];
    if c > 0 {
        pshape[0] = c;
    }
    use QuantFormat::*;
    let mut v = vec![
        Integer { width: 8, frac_width: 4, signed: true },
        Integer { width: 8, frac_width: 4, signed: false },
        Integer { width: 1, frac_width: 0, signed: true },
        Integer { width: 4, frac_width: -2, signed: true },
        Integer { width: 16, frac_width: 8, signed: true },
        Integer { width: 32, frac_width: 16, signed: true },
        Integer { width: 8, frac_width: 8, signed: false },
        MinifloatDenorm { width: 8, exponent_width: 4, exponent_bias: None },
        MinifloatDenorm { width: 8, exponent_width: 4, exponent_bias: Some(7) },
        MinifloatDenorm { width: 4, exponent_width: 2, exponent_bias: None },
        MinifloatDenorm { width: 32, exponent_width: 8, exponent_bias: None },
        MinifloatDenorm { width: 6, exponent_width: 3, exponent_bias: Some(-2) },
        MinifloatIeee { width: 8, exponent_width: 4, exponent_bias: None },
        MinifloatIeee { width: 8, exponent_width: 4, exponent_bias: Some(7) },
        MinifloatIeee { width: 4, exponent_width: 2, exponent_bias: None },
        MinifloatIeee { width: 16, exponent_width: 5, exponent_bias: None },
        MinifloatIeee { width: 32, exponent_width: 8, exponent_bias: None },
        Log { width: 8, exponent_bias: None },
        Log { width: 8, exponent_bias: Some(128) },
        Log { width: 2, exponent_bias: None },
        Log { width: 9, exponent_bias: None },
        Log { width: 5, exponent_bias: Some(-3) },
        BlockFp { width: 7, exponent_width: 8, exponent_bias: Some(127), block_size: vec![1, 16], skip_first_dim: true },
        BlockFp { width: 12, exponent_width: 8, exponent_bias: None, block_size: vec![16], skip_first_dim: false },
        BlockFp { width: 4, exponent_width: 3, exponent_bias: None, block_size: vec![2, 3], skip_first_dim: false },
        BlockFp { width: 5, exponent_width: 4, exponent_bias: Some(3), block_size: vec![3], skip_first_dim: true },
        BlockMinifloat { width: 8, exponent_width: 4, exponent_bias_width: 4, block_size: vec![16], skip_first_dim: false },
        BlockMinifloat { width: 6, exponent_width: 2, exponent_bias_width: 2, block_size: vec![2, 2], skip_first_dim: true },
        BlockMinifloat { width: 8, exponent_width: 3, exponent_bias_width: 8, block_size: vec![5], skip_first_dim: false },
        BlockLog { width: 8, exponent_bias_width: 4, block_size: vec![16], skip_first_dim: false },
        BlockLog { width: 4, exponent_bias_width: 2, block_size: vec![3], skip_first_dim: true },
        BlockLog { width: 9, exponent_bias_width: 6, block_size: vec![2, 2], skip_first_dim: false },
        Binary { stochastic: false, bipolar: true },
        Binary { stochastic: false, bipolar: false },
        Binary { stochastic: true, bipolar: true },
        Binary { stochastic: true, bipolar: false },
        Ternary { scaling_factor: false, threshold: None },
        Ternary { scaling_factor: true, threshold: None },
        Ternary { scaling_factor: true, threshold: Some(0.3) },
        Ternary { scaling_factor: false, threshold: Some(0.0) },
        BipolarQuant { scale: t(&[], &[0.5]) },
        e4m3(t(&[], &[1.0]), true, false, RoundingMode::Round),
        e4m3(t(&[], &[0.1]), false, true, RoundingMode::Floor),
        e4m3(t(&[], &[3.0]), false, false, RoundingMode::Ceil),
        e4m3(t(&[], &[1.0]), true, false, RoundingMode::HalfDown),
    ];
    // The microscaling formats: every OCP element format, blocks of 32 (the specification's), of
    // 2 and 3 (partial last blocks), along the last axis, the first, and a middle one.
    let mxfp = |e, m, b, d| Mxfp { exponent_width: e, frac_width: m, block_size: b, block_dim: d };
    v.extend([
        Mxint { width: 8, block_size: 32, block_dim: -1 },
        Mxint { width: 8, block_size: 3, block_dim: 0 },
        Mxint { width: 4, block_size: 2, block_dim: -1 },
        mxfp(4, 3, 32, -1),
        mxfp(4, 3, 3, 0),
        mxfp(5, 2, 32, -1),
        mxfp(5, 2, 2, 0),
        mxfp(3, 2, 3, -1),
        mxfp(2, 3, 32, 0),
        mxfp(2, 1, 32, -1),
        mxfp(2, 1, 2, -1),
    ]);
    if shape.len() >= 2 {
        v.extend([Mxint { width: 8, block_size: 2, block_dim: 1 }, mxfp(4, 3, 2, -2), mxfp(2, 1, 32, 1)]);
    }
    for mode in MODES {
        v.push(int_quant(t(&[], &[0.1]), t(&[], &[0.0]), 8.0, true, false, mode));
        v.push(int_quant(t(&[], &[1.0 / 16.0]), t(&[], &[3.0]), 4.0, false, true, mode));
    }
    v.push(int_quant(t(&[], &[0.25]), t(&[], &[0.0]), 8.0, true, true, RoundingMode::Round));
    v.push(int_quant(t(&[], &[0.5]), t(&[], &[0.0]), 1.0, true, false, RoundingMode::Round));
    v.push(int_quant(t(&[], &[0.03]), t(&[], &[0.0]), 24.0, true, false, RoundingMode::Round));
    if c > 0 {
        let per: Vec<f32> = (0..c).map(|i| 0.05 * (i + 1) as f32).collect();
        let zps: Vec<f32> = (0..c).map(|i| i as f32 - 1.0).collect();
        v.push(int_quant(t(&pshape, &per), t(&pshape, &zps), 6.0, true, false, RoundingMode::HalfUp));
        v.push(int_quant(t(&pshape, &per), t(&[], &[0.0]), 8.0, false, false, RoundingMode::Round));
        v.push(QuantFormat::BipolarQuant { scale: t(&pshape, &per) });
        v.push(e4m3(t(&pshape, &per), true, false, RoundingMode::Round));
        // Per last dimension, to exercise the stepping of the scale along a run.
        let last = shape[shape.len() - 1];
        let mut lshape = vec![1; shape.len()];
        lshape[shape.len() - 1] = last;
        let lper: Vec<f32> = (0..last).map(|i| 0.125 * (i + 1) as f32).collect();
        v.push(int_quant(t(&lshape, &lper), t(&[], &[1.0]), 5.0, true, true, RoundingMode::Floor));
    }
    v
}

/// Shapes of the property tests: scalars, vectors, matrices, 3-D and 4-D tensors, odd sizes.
pub const SHAPES: [&[usize]; 7] = [&[], &[64], &[7, 13], &[3, 5, 6], &[2, 3, 4, 5], &[1, 37], &[5, 1]];

/// Bitwise equality, with every NaN equal to every NaN.
pub fn same(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}
