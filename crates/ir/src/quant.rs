//! Quantization as data (doc/ir.md#quantization-on-nodes): a quantized node is the same op plus the number
//! formats of its inputs, weight, bias and output. The arithmetic of each format lives in the
//! `mase-quant` crate; the IR only records which format applies where, so passes, the runtime,
//! checkpoints and ONNX/QONNX export all read one description.

use crate::Tensor;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// QONNX rounding modes (`rounding_mode` of `IntQuant`/`Trunc`/`FloatQuant`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RoundingMode {
    /// Half to even (`torch.round`, numpy `round`).
    #[default]
    Round,
    Ceil,
    Floor,
    /// Away from zero.
    Up,
    /// Towards zero.
    Down,
    HalfUp,
    HalfDown,
}

/// A number format with its parameters. MASE's formats use MASE's field names
/// (doc/mase-semantics.md#quantize-config, doc/mase-semantics.md#quantizers); the QONNX ones follow the QONNX operator specification.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum QuantFormat {
    /// Fixed point: `clamp(round(x * 2^frac), lo, hi) / 2^frac`.
    Integer {
        width: u32,
        frac_width: i32,
        signed: bool,
    },
    MinifloatDenorm {
        width: u32,
        exponent_width: u32,
        exponent_bias: Option<i32>,
    },
    MinifloatIeee {
        width: u32,
        exponent_width: u32,
        exponent_bias: Option<i32>,
    },
    Log {
        width: u32,
        exponent_bias: Option<i32>,
    },
    BlockFp {
        width: u32,
        exponent_width: u32,
        exponent_bias: Option<i32>,
        block_size: Vec<usize>,
        skip_first_dim: bool,
    },
    BlockMinifloat {
        width: u32,
        exponent_width: u32,
        exponent_bias_width: u32,
        block_size: Vec<usize>,
        skip_first_dim: bool,
    },
    BlockLog {
        width: u32,
        exponent_bias_width: u32,
        block_size: Vec<usize>,
        skip_first_dim: bool,
    },
    Binary {
        stochastic: bool,
        bipolar: bool,
    },
    /// MASE's ternary with its threshold honoured (MASE computes and then ignores it).
    Ternary {
        scaling_factor: bool,
        threshold: Option<f32>,
    },
    /// QONNX `IntQuant` (`Quant`): `(clamp(round(x / scale + zero_point), min, max) - zero_point) * scale`.
    /// `scale` and `zero_point` broadcast against the tensor (per-tensor: shape `[]`).
    IntQuant {
        scale: Tensor,
        zero_point: Tensor,
        bit_width: f32,
        signed: bool,
        narrow: bool,
        rounding_mode: RoundingMode,
    },
    /// QONNX `BipolarQuant`: `sign(x) * scale` with `sign(0) = +1`.
    BipolarQuant {
        scale: Tensor,
    },
    /// QONNX `FloatQuant` (arbitrary-precision minifloat).
    FloatQuant {
        scale: Tensor,
        exponent_bitwidth: f32,
        mantissa_bitwidth: f32,
        exponent_bias: f32,
        max_val: f32,
        has_inf: bool,
        has_nan: bool,
        has_subnormal: bool,
        saturation: bool,
        rounding_mode: RoundingMode,
    },
    /// OCP microscaling integer (MXINT8 at `width = 8`): each block of `block_size` values along
    /// axis `block_dim` (negative counts from the end) shares a power-of-two scale stored as E8M0,
    /// and each value is a `width`-bit two's complement number with `width - 2` fraction bits.
    Mxint {
        width: u32,
        block_size: usize,
        block_dim: i64,
    },
    /// OCP microscaling float (MXFP8 E4M3/E5M2, MXFP6 E3M2/E2M3, MXFP4 E2M1): blocks as in
    /// `Mxint`, each value a minifloat with `exponent_width` exponent and `frac_width` mantissa bits.
    Mxfp {
        exponent_width: u32,
        frac_width: u32,
        block_size: usize,
        block_dim: i64,
    },
}

impl QuantFormat {
    /// The `type` string MASE writes into metadata (the quantizer name).
    pub fn type_name(&self) -> &'static str {
        match self {
            QuantFormat::Integer { .. } => "integer",
            QuantFormat::MinifloatDenorm { .. } => "minifloat_denorm",
            QuantFormat::MinifloatIeee { .. } => "minifloat_ieee",
            QuantFormat::Log { .. } => "log",
            QuantFormat::BlockFp { .. } => "block_fp",
            QuantFormat::BlockMinifloat { .. } => "block_minifloat",
            QuantFormat::BlockLog { .. } => "block_log",
            QuantFormat::Binary { .. } => "binary",
            QuantFormat::Ternary { .. } => "ternary",
            QuantFormat::IntQuant { .. } => "int_quant",
            QuantFormat::BipolarQuant { .. } => "bipolar_quant",
            QuantFormat::FloatQuant { .. } => "float_quant",
            QuantFormat::Mxint { .. } => "mxint",
            QuantFormat::Mxfp { .. } => "mxfp",
        }
    }

    /// The `precision` list of metadata, in MASE's fixed order per type (doc/mase-semantics.md#precision-lists).
    pub fn precision(&self) -> Vec<Value> {
        let bias = |b: &Option<i32>| b.map(Value::from).unwrap_or(Value::Null);
        // A block size of 0 (the whole dimension) is shown as MASE writes it, -1.
        let blk = |b: &[usize]| Value::from(b.iter().map(|&x| if x == 0 { -1 } else { x as i64 }).collect::<Vec<_>>());
        match self {
            QuantFormat::Integer { width, frac_width, .. } => vec![(*width).into(), (*frac_width).into()],
            QuantFormat::MinifloatDenorm { width, exponent_width, exponent_bias }
            | QuantFormat::MinifloatIeee { width, exponent_width, exponent_bias } => {
                vec![(*width).into(), (*exponent_width).into(), bias(exponent_bias)]
            }
            QuantFormat::Log { width, exponent_bias } => vec![(*width).into(), bias(exponent_bias)],
            QuantFormat::BlockFp { width, exponent_width, exponent_bias, block_size, .. } => {
                vec![(*width).into(), (*exponent_width).into(), bias(exponent_bias), blk(block_size)]
            }
            QuantFormat::BlockMinifloat { width, exponent_width, exponent_bias_width, block_size, .. } => {
                vec![(*width).into(), (*exponent_width).into(), (*exponent_bias_width).into(), blk(block_size)]
            }
            QuantFormat::BlockLog { width, exponent_bias_width, block_size, .. } => {
                vec![(*width).into(), (*exponent_bias_width).into(), blk(block_size)]
            }
            QuantFormat::Binary { stochastic, bipolar } => vec![1.into(), (*stochastic as u8).into(), (*bipolar as u8).into()],
            QuantFormat::Ternary { scaling_factor, .. } => {
                vec![2.into(), (*scaling_factor as u8).into(), Value::Null, Value::Null, Value::Null]
            }
            QuantFormat::IntQuant { bit_width, .. } => vec![(*bit_width as f64).into()],
            QuantFormat::BipolarQuant { .. } => vec![1.into()],
            QuantFormat::FloatQuant { exponent_bitwidth, mantissa_bitwidth, .. } => {
                vec![
                    (1.0 + *exponent_bitwidth as f64 + *mantissa_bitwidth as f64).into(),
                    (*exponent_bitwidth as f64).into(),
                    (*mantissa_bitwidth as f64).into(),
                ]
            }
            QuantFormat::Mxint { width, block_size, .. } => vec![(*width).into(), (*block_size).into()],
            QuantFormat::Mxfp { exponent_width, frac_width, block_size, .. } => {
                vec![(1 + exponent_width + frac_width).into(), (*exponent_width).into(), (*frac_width).into(), (*block_size).into()]
            }
        }
    }

    /// Storage width in bits of one value (for average bit width and BitOPs). The microscaling
    /// formats add their 8-bit block scale shared out over the block (`width + 8 / block_size`).
    pub fn bits(&self) -> f64 {
        match self {
            QuantFormat::Integer { width, .. }
            | QuantFormat::MinifloatDenorm { width, .. }
            | QuantFormat::MinifloatIeee { width, .. }
            | QuantFormat::Log { width, .. }
            | QuantFormat::BlockFp { width, .. }
            | QuantFormat::BlockMinifloat { width, .. }
            | QuantFormat::BlockLog { width, .. } => *width as f64,
            QuantFormat::Binary { .. } | QuantFormat::BipolarQuant { .. } => 1.0,
            QuantFormat::Ternary { .. } => 2.0,
            QuantFormat::IntQuant { bit_width, .. } => *bit_width as f64,
            QuantFormat::FloatQuant { exponent_bitwidth, mantissa_bitwidth, .. } => {
                1.0 + *exponent_bitwidth as f64 + *mantissa_bitwidth as f64
            }
            QuantFormat::Mxint { width, block_size, .. } => *width as f64 + MX_SCALE_BITS / (*block_size).max(1) as f64,
            QuantFormat::Mxfp { exponent_width, frac_width, block_size, .. } => {
                (1 + exponent_width + frac_width) as f64 + MX_SCALE_BITS / (*block_size).max(1) as f64
            }
        }
    }
}

/// Bits of the shared E8M0 scale of one microscaling block.
const MX_SCALE_BITS: f64 = 8.0;

/// The formats applied to one node. `None` means "left in float".
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeQuant {
    /// One entry per data input, in input order (`data_in_0`, `data_in_1`, ...).
    pub data_in: Vec<Option<QuantFormat>>,
    pub weight: Option<QuantFormat>,
    pub bias: Option<QuantFormat>,
    pub data_out: Option<QuantFormat>,
    /// MASE's `bypass`: the node keeps its float behaviour although it carries a config.
    #[serde(default)]
    pub bypass: bool,
    /// The config the node was quantized with, as written (for reports and sampled configs).
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub config: Value,
}

impl NodeQuant {
    /// Whether anything is actually quantized.
    pub fn is_active(&self) -> bool {
        !self.bypass
            && (self.data_in.iter().any(Option::is_some) || self.weight.is_some() || self.bias.is_some() || self.data_out.is_some())
    }
}
