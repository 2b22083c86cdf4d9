//! The error type of the interop crate. Every variant names the file, entry, node, key or offset at
//! fault, so that the CLI can print it as one line.

use mase_ir::IrError;
use thiserror::Error;

/// An ONNX operator the importer does not handle, with where it was seen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsupportedOp {
    pub op_type: String,
    /// The operator's domain (`""` for standard ONNX).
    pub domain: String,
    /// The opset version the model imports for that domain.
    pub opset: i64,
}

impl std::fmt::Display for UnsupportedOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.domain.is_empty() || self.domain == "ai.onnx" {
            write!(f, "{} (opset {})", self.op_type, self.opset)
        } else {
            write!(f, "{}:{} (opset {})", self.domain, self.op_type, self.opset)
        }
    }
}

fn list_ops(ops: &[UnsupportedOp]) -> String {
    ops.iter().map(|o| o.to_string()).collect::<Vec<_>>().join(", ")
}

/// Errors of reading and writing ONNX, QONNX, PyTorch, npz and safetensors files.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum InteropError {
    #[error("{path}: {reason}")]
    Io { path: String, reason: String },
    #[error("{what}: not a valid protobuf message ({reason}); the file is truncated or not an ONNX model")]
    Decode { what: String, reason: String },
    #[error("unsupported ONNX operators: {}", list_ops(.ops))]
    UnsupportedOps { ops: Vec<UnsupportedOp> },
    #[error("ONNX opset {version} of domain `{domain}` is not supported (standard opsets 6 to 21)")]
    UnsupportedOpset { domain: String, version: i64 },
    #[error("ONNX node `{node}` ({op}): {reason}")]
    Node { node: String, op: String, reason: String },
    #[error("ONNX tensor `{name}`: {reason}")]
    Tensor { name: String, reason: String },
    #[error("ONNX graph: {reason}")]
    Graph { reason: String },
    #[error("zip archive: {reason}")]
    Zip { reason: String },
    #[error("npy array `{entry}`: {reason}")]
    Npy { entry: String, reason: String },
    #[error("pickle at byte {offset}: {reason}")]
    Pickle { offset: usize, reason: String },
    #[error("PyTorch checkpoint: {reason}")]
    Torch { reason: String },
    #[error("safetensors: {reason}")]
    Safetensors { reason: String },
    #[error("weights do not fit the model: {reason}")]
    Mapping { reason: String },
    #[error("export of node `{node}`: {reason}")]
    Export { node: String, reason: String },
    #[error(transparent)]
    Ir(#[from] IrError),
}

impl InteropError {
    /// Shorthand for an error at an ONNX node.
    pub(crate) fn node(node: &str, op: &str, reason: impl Into<String>) -> InteropError {
        InteropError::Node { node: node.to_string(), op: op.to_string(), reason: reason.into() }
    }

    /// Prefixes a path to errors that do not name one, for the one-line message of the CLI.
    pub fn in_file(self, path: &std::path::Path) -> InteropError {
        match self {
            InteropError::Io { .. } => self,
            e => InteropError::Io { path: path.display().to_string(), reason: e.to_string() },
        }
    }
}

/// `Result` with [`InteropError`].
pub type Result<T, E = InteropError> = std::result::Result<T, E>;
