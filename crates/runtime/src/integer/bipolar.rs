//! Bipolar operands (QONNX `BipolarQuant`, Brevitas' 1-bit weights and activations) as integer
//! codes: a value `±s` with a per-tensor scale `s = 2^-f` is the code `±1` with `f` fraction
//! bits, so a linear layer whose input and weight are both bipolar sums `±1` products exactly
//! (`2 popcount(xnor(w, x)) - K`, the sum the hardware computes with XNOR gates).

use mase_ir::QuantFormat;
use mase_quant::Fixed;

/// The fixed-point format holding the codes of a bipolar format (`±1` at `f` fraction bits,
/// inside a 2-bit signed range), or `None` when the format is not bipolar or its scale is not
/// one power of two for the whole tensor.
pub fn bipolar_fixed(f: Option<&QuantFormat>) -> Option<Fixed> {
    let Some(QuantFormat::BipolarQuant { scale }) = f else { return None };
    let s = match scale.data.as_slice() {
        [s] => *s,
        _ => return None,
    };
    if !(s.is_finite() && s > 0.0) {
        return None;
    }
    let frac = -(s.log2().round() as i32);
    (2f32.powi(-frac) == s).then_some(Fixed { width: 2, frac_width: frac, signed: true })
}

/// The bipolar code of a float value: `+1` where `v >= 0`, else `-1` (NaN gives `-1`, as
/// `BipolarQuant` maps it to `-scale`).
pub fn bipolar_code(v: f32) -> i64 {
    if v >= 0.0 {
        1
    } else {
        -1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mase_ir::Tensor;

    #[test]
    fn power_of_two_scales_become_codes_and_others_do_not() {
        let fmt = |s: &[f32]| QuantFormat::BipolarQuant { scale: Tensor::new(vec![s.len()], s.to_vec()).unwrap() };
        // (scale, fraction bits of the codes, or None)
        let cases: [(&[f32], Option<i32>); 6] =
            [(&[1.0], Some(0)), (&[0.25], Some(2)), (&[4.0], Some(-2)), (&[0.3], None), (&[1.0, 1.0], None), (&[0.0], None)];
        for (s, want) in cases {
            assert_eq!(bipolar_fixed(Some(&fmt(s))).map(|f| f.frac_width), want, "{s:?}");
        }
        assert_eq!([bipolar_code(0.0), bipolar_code(-0.0), bipolar_code(-1e-30), bipolar_code(f32::NAN)], [1, 1, -1, -1]);
    }
}
