//! The table of number formats. Each format is one module whose items make a [`FormatImpl`]
//! (`format_entry!`); the table below lists them, and the public functions of the crate find a format's entry by the
//! `type_name` of its [`QuantFormat`] variant. Adding a format is one new module and one line here
//! (doc/how-to-add-a-quantizer.md).

use crate::Result;
use mase_ir::{QuantFormat, Rng};

/// The operations of one number format. The functions receive a format that `validate` has
/// accepted (and, for `quantize`, `reference` and `on_grid`, slices whose lengths match `shape`,
/// with `shape` accepted by `validate_shape`).
pub(crate) struct FormatImpl {
    /// The format's `type` name in metadata and configs (`integer`, `block_fp`, ...).
    pub name: &'static str,
    /// One line for listings: parameters and formula.
    pub doc: &'static str,
    /// Checks the parameters of the format, naming the field at fault.
    pub validate: fn(&QuantFormat) -> Result<()>,
    /// Checks that the format applies to tensors of this shape (broadcasting of QONNX scales).
    pub validate_shape: fn(&QuantFormat, &[usize]) -> Result<()>,
    /// The vectorised kernel.
    pub quantize: fn(&QuantFormat, &[f32], &[usize], &mut [f32], &mut Rng),
    /// The formula written out as specified, one value (or one block, one row) at a time.
    pub reference: fn(&QuantFormat, &[f32], &[usize], &mut [f32], &mut Rng),
    /// Whether a value can be an output of the format on its own (see [`crate::representable`]).
    pub representable: fn(&QuantFormat, f32) -> bool,
    /// Indices of the values of a tensor that the format cannot produce for that tensor.
    pub on_grid: fn(&QuantFormat, &[f32], &[usize]) -> Vec<usize>,
    /// Which other values the quantization of one value reads, and whether it draws random numbers.
    pub scope: fn(&QuantFormat) -> Scope,
}

/// What the quantization of one value depends on besides the value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scope {
    pub reach: Reach,
    /// Whether quantizing draws random numbers (stochastic rounding).
    pub random: bool,
}

/// Which values of a tensor decide how one value is quantized.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// The value alone (and per-tensor parameters): the format commutes with reshapes and
    /// transposes, and a batch may be cut anywhere.
    Value,
    /// The values of the same index of the first dimension (a per-row mean): a batch may be cut
    /// between samples.
    Row,
    /// Values across the tensor (blocks, per-channel parameters): nothing may be cut.
    Tensor,
}

/// `scope` of deterministic formats that quantize each value on its own.
pub(crate) fn value_scope(_fmt: &QuantFormat) -> Scope {
    Scope { reach: Reach::Value, random: false }
}

/// `scope` of deterministic formats that reduce over each index of the first dimension.
pub(crate) fn row_scope(_fmt: &QuantFormat) -> Scope {
    Scope { reach: Reach::Row, random: false }
}

/// `scope` of deterministic formats whose blocks span the tensor.
pub(crate) fn tensor_scope(_fmt: &QuantFormat) -> Scope {
    Scope { reach: Reach::Tensor, random: false }
}

/// The entry of a format module. Every format module defines the items this reads: `NAME`, `DOC`
/// and the functions `validate`, `validate_shape`, `kernel`, `reference`, `representable`,
/// `on_grid` and `scope` (a shared one, such as [`any_shape`], imported under that name), so a
/// module that leaves one out stops the build here.
macro_rules! format_entry {
    ($module:ident) => {
        FormatImpl {
            name: crate::$module::NAME,
            doc: crate::$module::DOC,
            validate: crate::$module::validate,
            validate_shape: crate::$module::validate_shape,
            quantize: crate::$module::kernel,
            reference: crate::$module::reference,
            representable: crate::$module::representable,
            on_grid: crate::$module::on_grid,
            scope: crate::$module::scope,
        }
    };
}

/// Every format, in the order of `QuantFormat`'s variants.
pub(crate) const FORMATS: &[FormatImpl] = &[
    format_entry!(integer),
    format_entry!(minifloat_denorm),
    format_entry!(minifloat_ieee),
    format_entry!(log),
    format_entry!(block_fp),
    format_entry!(block_minifloat),
    format_entry!(block_log),
    format_entry!(binary),
    format_entry!(ternary),
    format_entry!(int_quant),
    format_entry!(bipolar_quant),
    format_entry!(float_quant),
    format_entry!(mxint),
    format_entry!(mxfp),
];

/// The entry of a format.
pub(crate) fn lookup(fmt: &QuantFormat) -> &'static FormatImpl {
    let name = fmt.type_name();
    // Every variant of QuantFormat has an entry; the test `every_variant_has_an_entry` keeps it so.
    FORMATS.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("format `{name}` is missing from registry::FORMATS"))
}

/// Elementwise `on_grid`: the indices whose value is not representable.
pub(crate) fn on_grid_elementwise(fmt: &QuantFormat, x: &[f32], _shape: &[usize]) -> Vec<usize> {
    let f = lookup(fmt).representable;
    x.iter().enumerate().filter(|&(_, &v)| !f(fmt, v)).map(|(i, _)| i).collect()
}

/// `validate_shape` of formats that apply to any shape.
pub(crate) fn any_shape(_fmt: &QuantFormat, _shape: &[usize]) -> Result<()> {
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::FORMATS;
    use mase_ir::{QuantFormat, RoundingMode, Tensor};

    #[test]
    fn every_variant_has_an_entry() {
        let s = || Tensor::scalar(1.0);
        let all = [
            QuantFormat::Integer { width: 8, frac_width: 4, signed: true },
            QuantFormat::MinifloatDenorm { width: 8, exponent_width: 4, exponent_bias: None },
            QuantFormat::MinifloatIeee { width: 8, exponent_width: 4, exponent_bias: None },
            QuantFormat::Log { width: 8, exponent_bias: None },
            QuantFormat::BlockFp { width: 8, exponent_width: 8, exponent_bias: None, block_size: vec![16], skip_first_dim: true },
            QuantFormat::BlockMinifloat {
                width: 8,
                exponent_width: 4,
                exponent_bias_width: 4,
                block_size: vec![16],
                skip_first_dim: false,
            },
            QuantFormat::BlockLog { width: 8, exponent_bias_width: 4, block_size: vec![16], skip_first_dim: false },
            QuantFormat::Binary { stochastic: false, bipolar: true },
            QuantFormat::Ternary { scaling_factor: false, threshold: None },
            QuantFormat::IntQuant {
                scale: s(),
                zero_point: Tensor::scalar(0.0),
                bit_width: 8.0,
                signed: true,
                narrow: false,
                rounding_mode: RoundingMode::Round,
            },
            QuantFormat::BipolarQuant { scale: s() },
            QuantFormat::FloatQuant {
                scale: s(),
                exponent_bitwidth: 4.0,
                mantissa_bitwidth: 3.0,
                exponent_bias: 7.0,
                max_val: 448.0,
                has_inf: false,
                has_nan: false,
                has_subnormal: true,
                saturation: true,
                rounding_mode: RoundingMode::Round,
            },
            QuantFormat::Mxint { width: 8, block_size: 32, block_dim: -1 },
            QuantFormat::Mxfp { exponent_width: 4, frac_width: 3, block_size: 32, block_dim: -1 },
        ];
        assert_eq!(all.len(), FORMATS.len());
        for (f, entry) in all.iter().zip(FORMATS) {
            assert_eq!(f.type_name(), entry.name);
            assert!((entry.validate)(f).is_ok(), "{f:?}");
        }
    }
}
