//! Property tests: for every format and many parameter sets, shapes and hard inputs (±0, halves,
//! powers of two and their neighbours, tiny, huge, subnormal, ±inf, NaN), the vectorised kernel
//! gives exactly the bits of the reference formula.

mod common;

use common::{formats, hard_values, same, SHAPES};
use mase_ir::Rng;
use mase_quant::{quantize, quantize_reference};

#[test]
fn every_kernel_agrees_with_its_reference_bit_for_bit() {
    let mut rng = Rng::new(2024);
    let mut checked = 0usize;
    for shape in SHAPES {
        let n: usize = shape.iter().product();
        for fmt in formats(shape) {
            for round in 0..12 {
                let x = hard_values(&mut rng, n, round % 3 != 0);
                let (mut fast, mut slow) = (vec![0.0; n], vec![0.0; n]);
                let seed = rng.next_u64();
                quantize(&fmt, &x, shape, &mut fast, &mut Rng::new(seed)).expect("valid format");
                quantize_reference(&fmt, &x, shape, &mut slow, &mut Rng::new(seed)).expect("valid format");
                for i in 0..n {
                    assert!(
                        same(fast[i], slow[i]),
                        "{fmt:?} shape {shape:?}: x[{i}] = {:e} ({:#x}): kernel {:e}, reference {:e}",
                        x[i],
                        x[i].to_bits(),
                        fast[i],
                        slow[i]
                    );
                }
                checked += n;
            }
        }
    }
    assert!(checked > 100_000, "{checked}");
}

#[test]
fn quantized_values_lie_on_their_grid() {
    // Moderate inputs (no inf/NaN, |x| < 2^20) so that no format overflows its f32 carrier.
    let mut rng = Rng::new(7);
    for shape in SHAPES {
        let n: usize = shape.iter().product();
        for fmt in formats(shape) {
            if matches!(
                fmt,
                mase_ir::QuantFormat::MinifloatDenorm { width: 32, .. } | mase_ir::QuantFormat::MinifloatIeee { width: 32, .. }
            ) {
                // 8 exponent bits and 23 mantissa bits round inside f32's own subnormals.
                continue;
            }
            for _ in 0..6 {
                let x: Vec<f32> =
                    hard_values(&mut rng, n, false).into_iter().map(|v| if v.abs() < 1048576.0 { v } else { 1.0 / v }).collect();
                let mut q = vec![0.0; n];
                quantize(&fmt, &x, shape, &mut q, &mut rng).expect("valid format");
                // NaN is how non-saturating QONNX formats without infinities mark overflow.
                let off: Vec<usize> =
                    mase_quant::on_grid(&fmt, &q, shape).expect("valid format").into_iter().filter(|&i| !q[i].is_nan()).collect();
                assert!(
                    off.is_empty(),
                    "{fmt:?} shape {shape:?}: outputs {:?} off the grid (inputs {:?})",
                    off.iter().map(|&i| q[i]).collect::<Vec<_>>(),
                    off.iter().map(|&i| x[i]).collect::<Vec<_>>()
                );
            }
        }
    }
}

#[test]
fn stochastic_binary_is_reproducible_and_unbiased() {
    let fmt = mase_ir::QuantFormat::Binary { stochastic: true, bipolar: true };
    let x = vec![0.5f32; 20_000];
    let (mut a, mut b) = (vec![0.0; x.len()], vec![0.0; x.len()]);
    quantize(&fmt, &x, &[x.len()], &mut a, &mut Rng::new(3)).unwrap();
    quantize(&fmt, &x, &[x.len()], &mut b, &mut Rng::new(3)).unwrap();
    assert_eq!(a, b, "same seed, same bits");
    // p = (0.5 + 1) / 2 = 0.75, so E[out] = 0.75 - 0.25 = 0.5.
    let mean = a.iter().map(|&v| v as f64).sum::<f64>() / a.len() as f64;
    assert!((mean - 0.5).abs() < 0.02, "{mean}");
}
