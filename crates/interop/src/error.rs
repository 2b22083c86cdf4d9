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
    /// An error inside a file, with the file's path; the error itself stays the source.
    #[error("{path}: {source}")]
    InFile {
        path: String,
        #[source]
        source: Box<InteropError>,
    },
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

    /// Names the file an error happened in, keeping the error as the source, unless the error
    /// names a path already.
    pub fn in_file(self, path: &std::path::Path) -> InteropError {
        match self {
            InteropError::Io { .. } | InteropError::InFile { .. } => self,
            e => InteropError::InFile { path: path.display().to_string(), source: Box::new(e) },
        }
    }
}

/// `Result` with [`InteropError`].
pub type Result<T, E = InteropError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn errors_in_a_file_keep_their_source() {
        let inner = InteropError::Graph { reason: "no output".into() };
        let e = inner.clone().in_file(std::path::Path::new("m.onnx"));
        assert_eq!(e.to_string(), "m.onnx: ONNX graph: no output");
        // The source is the boxed error itself.
        let source = e.source().and_then(|s| s.downcast_ref::<Box<InteropError>>());
        assert_eq!(source.map(|b| b.as_ref()), Some(&inner));
        // A path is named once, however often the error passes a file boundary.
        assert_eq!(e.clone().in_file(std::path::Path::new("other.onnx")), e);
    }
}
