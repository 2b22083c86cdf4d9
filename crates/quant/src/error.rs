//! The error type of the quantizers. Every variant names the format and the field or shape at fault.

use thiserror::Error;

/// Errors of format validation and of quantizing a tensor.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum QuantError {
    /// A format parameter is out of its range (`width = 0`, `frac_width > width`, ...).
    #[error("{format} format: `{field}` = {value}: {reason}")]
    Param { format: &'static str, field: &'static str, value: String, reason: String },
    /// A per-channel parameter tensor (QONNX `scale`, `zero_point`) does not broadcast to the data.
    #[error("{format} format: `{field}` of shape {param_shape:?} does not broadcast to a tensor of shape {shape:?}: {reason}")]
    Broadcast { format: &'static str, field: &'static str, param_shape: Vec<usize>, shape: Vec<usize>, reason: String },
    /// A block axis (`block_dim` of the microscaling formats) that the tensor does not have.
    #[error("{format} format: `block_dim` = {block_dim} is not an axis of a tensor of shape {shape:?} (expected {lo}..={hi})")]
    Axis { format: &'static str, block_dim: i64, shape: Vec<usize>, lo: i64, hi: i64 },
    /// A slice does not hold as many values as the shape says.
    #[error("{what} has {got} values, but shape {shape:?} needs {expected}")]
    Length { what: &'static str, shape: Vec<usize>, expected: usize, got: usize },
}

/// `Result` with [`QuantError`].
pub type Result<T, E = QuantError> = std::result::Result<T, E>;

/// Builds a [`QuantError::Param`].
pub(crate) fn param(format: &'static str, field: &'static str, value: impl ToString, reason: impl Into<String>) -> QuantError {
    QuantError::Param { format, field, value: value.to_string(), reason: reason.into() }
}
