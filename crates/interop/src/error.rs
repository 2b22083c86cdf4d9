//! The error type of the interop crate. Every variant names the file, entry, node, key or offset at
//! fault, so that the CLI can print it as one line.

use mase_ir::IrError;
use mase_quant::QuantError;
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

fn tensor_prefix(tensor: &str) -> String {
    if tensor.is_empty() {
        String::new()
    } else {
        format!("`{tensor}`: ")
    }
}

fn list_ops(ops: &[UnsupportedOp]) -> String {
    ops.iter().map(|o| o.to_string()).collect::<Vec<_>>().join(", ")
}

/// Errors of reading and writing ONNX, QONNX, PyTorch, npz and safetensors files. Where a lower
/// error (the operating system's, protobuf's, a quantizer's) is the cause, it stays the
/// [`std::error::Error::source`].
#[derive(Debug, Error)]
pub enum InteropError {
    /// A file could not be read or written (`action` is `read` or `write`).
    #[error("{path}: cannot {action}: {source}")]
    Io {
        path: String,
        action: &'static str,
        #[source]
        source: std::io::Error,
    },
    /// An error inside a file, with the file's path; the error itself stays the source.
    #[error("{path}: {source}")]
    InFile {
        path: String,
        #[source]
        source: Box<InteropError>,
    },
    #[error("{what}: not a valid protobuf message ({reason}); the file is truncated or not an ONNX model")]
    Decode { what: String, reason: String },
    /// Protobuf rejected the bytes of a message.
    #[error("{what}: not a valid protobuf message ({source}); the file is truncated or not an ONNX model")]
    Protobuf {
        what: String,
        #[source]
        source: prost::DecodeError,
    },
    #[error("unsupported ONNX operators: {}", list_ops(.ops))]
    UnsupportedOps { ops: Vec<UnsupportedOp> },
    #[error("ONNX opset {version} of domain `{domain}` is not supported (standard opsets 6 to 21)")]
    UnsupportedOpset { domain: String, version: i64 },
    #[error("ONNX node `{node}` ({op}): {reason}")]
    Node { node: String, op: String, reason: String },
    /// The IR's shape inference rejected the node an ONNX node became; `note` (empty or
    /// starting with "; ") says more about the cause.
    #[error("ONNX node `{node}` ({op}): {source}{note}")]
    NodeShape {
        node: String,
        op: String,
        #[source]
        source: Box<IrError>,
        note: String,
    },
    /// A weight could not be quantized with the format the model gives it.
    #[error("ONNX node `{node}` ({op}): {source}")]
    NodeQuant {
        node: String,
        op: String,
        #[source]
        source: Box<QuantError>,
    },
    #[error("ONNX tensor `{name}`: {reason}")]
    Tensor { name: String, reason: String },
    #[error("ONNX graph: {reason}")]
    Graph { reason: String },
    #[error("zip archive: {reason}")]
    Zip { reason: String },
    /// A deflated zip entry does not inflate.
    #[error("zip archive: entry `{entry}`: bad deflate data: {source}")]
    Inflate {
        entry: String,
        #[source]
        source: std::io::Error,
    },
    #[error("npy array `{entry}`: {reason}")]
    Npy { entry: String, reason: String },
    #[error("pickle at byte {offset}: {reason}")]
    Pickle { offset: usize, reason: String },
    #[error("PyTorch checkpoint: {reason}")]
    Torch { reason: String },
    /// A tensor's storage entry of a `torch.save` zip cannot be read.
    #[error("PyTorch checkpoint: storage `{path}`: {source}")]
    TorchStorage {
        path: String,
        #[source]
        source: Box<InteropError>,
    },
    #[error("safetensors: {reason}")]
    Safetensors { reason: String },
    /// The safetensors reader rejected the file (`tensor` is empty) or one of its tensors.
    #[error("safetensors: {}{source}", tensor_prefix(.tensor))]
    SafetensorsFormat {
        tensor: String,
        #[source]
        source: safetensors::SafeTensorError,
    },
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

    /// A read or write error of the file at `path`.
    pub(crate) fn io(path: &std::path::Path, action: &'static str, source: std::io::Error) -> InteropError {
        InteropError::Io { path: path.display().to_string(), action, source }
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
        let e = InteropError::Graph { reason: "no output".into() }.in_file(std::path::Path::new("m.onnx"));
        assert_eq!(e.to_string(), "m.onnx: ONNX graph: no output");
        // The source is the boxed error itself.
        let source = e.source().and_then(|s| s.downcast_ref::<Box<InteropError>>());
        assert_eq!(source.map(|b| b.to_string()), Some(inner.to_string()));
        // A path is named once, however often the error passes a file boundary.
        let text = e.to_string();
        assert_eq!(e.in_file(std::path::Path::new("other.onnx")).to_string(), text);
    }

    #[test]
    fn decoder_errors_stay_the_source() {
        // (what, the error, whether its source is the decoder's own error type)
        let onnx = crate::import_bytes(b"\xff\xff\xff", &Default::default()).err();
        let safetensors = crate::read_safetensors(&[8, 0, 0, 0, 0, 0, 0, 0, b'{', b'x']).err();
        type IsCause = fn(&(dyn std::error::Error + 'static)) -> bool;
        let cases: [(&str, Option<InteropError>, IsCause); 2] = [
            ("protobuf", onnx, |s| s.is::<prost::DecodeError>()),
            ("safetensors", safetensors, |s| s.is::<safetensors::SafeTensorError>()),
        ];
        for (what, e, is_cause) in cases {
            let e = e.unwrap_or_else(|| panic!("{what}: no error"));
            assert!(e.source().is_some_and(is_cause), "{what}: {e} has source {:?}", e.source());
        }
    }
}
