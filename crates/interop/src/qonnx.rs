//! QONNX quantizers (<https://github.com/fastmachinelearning/qonnx>, docs/qonnx-custom-ops):
//! `Quant`/`IntQuant`, `BipolarQuant`, `FloatQuant` and `Trunc`, read into [`QuantFormat`]s and
//! written back from them.
//!
//! The same operators appear under three domains: `qonnx.custom_op.general` (current),
//! `finn.custom_op.general` (older FINN exports) and `onnx.brevitas` (Brevitas exports).

use crate::onnx::attrs::Attrs;
use crate::onnx::proto::{AttributeProto, NodeProto, TensorProto};
use crate::onnx::tensor::{f32_proto, Const};
use crate::{InteropError, Result};
use mase_ir::{QuantFormat, RoundingMode, Tensor};

/// The domain QONNX exports use.
pub const QONNX_DOMAIN: &str = "qonnx.custom_op.general";

/// Domains whose quantizers are read.
pub const QONNX_DOMAINS: [&str; 3] = [QONNX_DOMAIN, "finn.custom_op.general", "onnx.brevitas"];

/// QONNX operator names the importer understands.
pub(crate) const QUANT_OPS: [&str; 5] = ["Quant", "IntQuant", "BipolarQuant", "FloatQuant", "Trunc"];

/// Whether a node is a QONNX quantizer.
pub(crate) fn is_quant_op(n: &NodeProto) -> bool {
    QONNX_DOMAINS.contains(&n.domain.as_str()) && QUANT_OPS.contains(&n.op_type.as_str())
}

fn rounding(n: &NodeProto, attrs: &Attrs, default: &str) -> Result<RoundingMode> {
    let s = attrs.string("rounding_mode", default)?;
    Ok(match s.to_ascii_uppercase().as_str() {
        "ROUND" | "HALF_EVEN" => RoundingMode::Round,
        "CEIL" => RoundingMode::Ceil,
        "FLOOR" => RoundingMode::Floor,
        "UP" => RoundingMode::Up,
        "DOWN" | "ROUND_TO_ZERO" => RoundingMode::Down,
        "HALF_UP" => RoundingMode::HalfUp,
        "HALF_DOWN" => RoundingMode::HalfDown,
        other => return Err(InteropError::node(&n.name, &n.op_type, format!("unknown rounding_mode `{other}`"))),
    })
}

fn scalar(n: &NodeProto, c: &Const, what: &str) -> Result<f32> {
    c.scalar_f32().ok_or_else(|| InteropError::node(&n.name, &n.op_type, format!("{what} must be a single value, got shape {:?}", c.shape)))
}

/// The format of a QONNX quantizer node. `params[k]` is the constant value of input `k` (input 0,
/// the data, is not needed); a parameter input that is not constant is an error.
pub(crate) fn format_of(n: &NodeProto, params: &[Option<&Const>]) -> Result<QuantFormat> {
    let attrs = Attrs::new(n);
    let need = |k: usize, what: &str| -> Result<&Const> {
        params
            .get(k)
            .copied()
            .flatten()
            .ok_or_else(|| InteropError::node(&n.name, &n.op_type, format!("input {k} ({what}) must be a constant")))
    };
    let bool_attr = |name: &str, default: i64| -> Result<bool> { Ok(attrs.int(name, default)? != 0) };
    Ok(match n.op_type.as_str() {
        "Quant" | "IntQuant" => QuantFormat::IntQuant {
            scale: need(1, "scale")?.tensor(),
            zero_point: need(2, "zero point")?.tensor(),
            bit_width: scalar(n, need(3, "bit width")?, "bit width")?,
            signed: bool_attr("signed", 1)?,
            narrow: bool_attr("narrow", 0)?,
            rounding_mode: rounding(n, &attrs, "ROUND")?,
        },
        "BipolarQuant" => QuantFormat::BipolarQuant { scale: need(1, "scale")?.tensor() },
        "FloatQuant" => QuantFormat::FloatQuant {
            scale: need(1, "scale")?.tensor(),
            exponent_bitwidth: scalar(n, need(2, "exponent bit width")?, "exponent bit width")?,
            mantissa_bitwidth: scalar(n, need(3, "mantissa bit width")?, "mantissa bit width")?,
            exponent_bias: scalar(n, need(4, "exponent bias")?, "exponent bias")?,
            max_val: scalar(n, need(5, "max value")?, "max value")?,
            has_inf: bool_attr("has_infinity", 0)?,
            has_nan: bool_attr("has_nan", 0)?,
            has_subnormal: bool_attr("has_subnormal", 1)?,
            saturation: bool_attr("saturation", 1)?,
            rounding_mode: rounding(n, &attrs, "ROUND")?,
        },
        "Trunc" => {
            // Trunc re-quantizes a value on the grid of `scale` to `output_scale` = scale * t
            // (t a power of two; v1 files give the bit widths, t = 2^(in - out)): that is IntQuant
            // with scale `output_scale`, zero point zp / t and Trunc's rounding (FLOOR by
            // default), exactly, for such inputs (what an average pool of quantized values gives).
            let scale = need(1, "scale")?;
            let zp = need(2, "zero point")?;
            let (out_scale, bout) = if n.input.len() >= 6 {
                (need(4, "output scale")?.tensor(), scalar(n, need(5, "output bit width")?, "output bit width")?)
            } else {
                let bin = scalar(n, need(3, "input bit width")?, "input bit width")?;
                let bout = scalar(n, need(4, "output bit width")?, "output bit width")?;
                let f = 2f32.powf(bin - bout);
                (Tensor { shape: scale.shape.clone(), data: scale.f32s().iter().map(|v| v * f).collect() }, bout)
            };
            let (s0, o0) = (scale.f32s().first().copied().unwrap_or(1.0), out_scale.data.first().copied().unwrap_or(1.0));
            let t = 2f32.powf((o0 / s0).log2().round());
            QuantFormat::IntQuant {
                scale: out_scale,
                zero_point: Tensor { shape: zp.shape.clone(), data: zp.f32s().iter().map(|v| v / t).collect() },
                bit_width: bout,
                signed: bool_attr("signed", 1)?,
                narrow: bool_attr("narrow", 0)?,
                rounding_mode: rounding(n, &attrs, "FLOOR")?,
            }
        }
        other => return Err(InteropError::node(&n.name, other, "not a QONNX quantizer")),
    })
}

/// Whether a format's parameters are per-tensor (one scale and zero point), so that it commutes
/// with reshapes and transposes of the tensor it quantizes.
pub(crate) fn per_tensor(f: &QuantFormat) -> bool {
    match mase_quant::reach(f) {
        mase_quant::Reach::Value => true,
        mase_quant::Reach::Row | mase_quant::Reach::Tensor => false,
    }
}

/// Applies `f` to every parameter tensor of a QONNX format (scale, zero point), e.g. to transpose
/// a per-channel scale together with the weight it belongs to.
pub(crate) fn map_params(fmt: &QuantFormat, f: impl Fn(&Tensor) -> Tensor) -> QuantFormat {
    let mut out = fmt.clone();
    match &mut out {
        QuantFormat::IntQuant { scale, zero_point, .. } => {
            *scale = f(scale);
            *zero_point = f(zero_point);
        }
        QuantFormat::BipolarQuant { scale } | QuantFormat::FloatQuant { scale, .. } => *scale = f(scale),
        // MASE's formats have no tensor parameters.
        QuantFormat::Integer { .. }
        | QuantFormat::MinifloatDenorm { .. }
        | QuantFormat::MinifloatIeee { .. }
        | QuantFormat::Log { .. }
        | QuantFormat::BlockFp { .. }
        | QuantFormat::BlockMinifloat { .. }
        | QuantFormat::BlockLog { .. }
        | QuantFormat::Binary { .. }
        | QuantFormat::Ternary { .. }
        | QuantFormat::Mxint { .. }
        | QuantFormat::Mxfp { .. } => {}
    }
    out
}

fn attr_int(name: &str, v: i64) -> AttributeProto {
    AttributeProto { name: name.into(), i: v, r#type: 2, ..Default::default() }
}

fn attr_str(name: &str, v: &str) -> AttributeProto {
    AttributeProto { name: name.into(), s: v.as_bytes().to_vec(), r#type: 3, ..Default::default() }
}

fn rounding_name(r: RoundingMode) -> &'static str {
    match r {
        RoundingMode::Round => "ROUND",
        RoundingMode::Ceil => "CEIL",
        RoundingMode::Floor => "FLOOR",
        RoundingMode::Up => "UP",
        RoundingMode::Down => "DOWN",
        RoundingMode::HalfUp => "HALF_UP",
        RoundingMode::HalfDown => "HALF_DOWN",
    }
}

/// A QONNX node quantizing value `x` into `y` with format `fmt`; its parameter tensors are
/// appended to `inits` under names starting with `name`. MASE's own formats are written as their
/// exact QONNX equivalent where one exists; the others are an error naming the format.
pub(crate) fn quant_node(fmt: &QuantFormat, x: &str, y: &str, name: &str, inits: &mut Vec<TensorProto>) -> Result<NodeProto> {
    let mut param = |suffix: &str, t: &Tensor| -> String {
        let n = format!("{name}.{suffix}");
        inits.push(f32_proto(&n, t));
        n
    };
    let node = |op: &str, inputs: Vec<String>, attribute: Vec<AttributeProto>| NodeProto {
        name: name.to_string(),
        op_type: op.into(),
        domain: QONNX_DOMAIN.into(),
        input: std::iter::once(x.to_string()).chain(inputs).collect(),
        output: vec![y.to_string()],
        attribute,
        ..Default::default()
    };
    Ok(match fmt {
        QuantFormat::IntQuant { scale, zero_point, bit_width, signed, narrow, rounding_mode } => {
            let ins = vec![param("scale", scale), param("zero_point", zero_point), param("bit_width", &Tensor::scalar(*bit_width))];
            node(
                "IntQuant",
                ins,
                vec![
                    attr_int("signed", *signed as i64),
                    attr_int("narrow", *narrow as i64),
                    attr_str("rounding_mode", rounding_name(*rounding_mode)),
                ],
            )
        }
        QuantFormat::Integer { width, frac_width, signed } => {
            // MASE's fixed point: clamp(round_half_even(x * 2^frac)) / 2^frac, which is IntQuant
            // with scale 2^-frac (a power of two, so x / scale and x * 2^frac are the same float).
            let scale = Tensor::scalar(2f32.powi(-*frac_width));
            let ins =
                vec![param("scale", &scale), param("zero_point", &Tensor::scalar(0.0)), param("bit_width", &Tensor::scalar(*width as f32))];
            node("IntQuant", ins, vec![attr_int("signed", *signed as i64), attr_int("narrow", 0), attr_str("rounding_mode", "ROUND")])
        }
        QuantFormat::BipolarQuant { scale } => node("BipolarQuant", vec![param("scale", scale)], vec![]),
        QuantFormat::FloatQuant {
            scale,
            exponent_bitwidth,
            mantissa_bitwidth,
            exponent_bias,
            max_val,
            has_inf,
            has_nan,
            has_subnormal,
            saturation,
            rounding_mode,
        } => {
            let ins = vec![
                param("scale", scale),
                param("exponent_bitwidth", &Tensor::scalar(*exponent_bitwidth)),
                param("mantissa_bitwidth", &Tensor::scalar(*mantissa_bitwidth)),
                param("exponent_bias", &Tensor::scalar(*exponent_bias)),
                param("max_val", &Tensor::scalar(*max_val)),
            ];
            node(
                "FloatQuant",
                ins,
                vec![
                    attr_int("has_infinity", *has_inf as i64),
                    attr_int("has_nan", *has_nan as i64),
                    attr_int("has_subnormal", *has_subnormal as i64),
                    attr_int("saturation", *saturation as i64),
                    attr_str("rounding_mode", rounding_name(*rounding_mode)),
                ],
            )
        }
        QuantFormat::Mxint { block_size, .. } | QuantFormat::Mxfp { block_size, .. } => {
            return Err(InteropError::Export {
                node: name.to_string(),
                reason: format!(
                    "number format `{}` has no QONNX equivalent: its power-of-two scale is chosen per block of {block_size} values from the values it quantizes, while QONNX's IntQuant and FloatQuant read theirs from a tensor of the model",
                    fmt.type_name()
                ),
            })
        }
        other => {
            return Err(InteropError::Export {
                node: name.to_string(),
                reason: format!("number format `{}` has no exact QONNX equivalent", other.type_name()),
            })
        }
    })
}
