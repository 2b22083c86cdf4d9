//! ONNX protobuf types (generated at build time from the vendored `proto/onnx.proto3`), decoding
//! of model files, and conversion between `TensorProto`s and the importer's constants.

pub(crate) mod attrs;
pub(crate) mod tensor;

/// The ONNX protobuf messages, as `prost` generates them from ONNX's own schema.
#[allow(clippy::all, missing_docs)]
pub mod proto {
    include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
}

use crate::{InteropError, Result};
use prost::Message;

pub use proto::ModelProto;

/// Decodes an ONNX model from the bytes of a `.onnx` file.
pub fn decode_model(bytes: &[u8]) -> Result<ModelProto> {
    if bytes.is_empty() {
        return Err(InteropError::Decode { what: "ONNX model".into(), reason: "the file is empty".into() });
    }
    let m = ModelProto::decode(bytes).map_err(|e| InteropError::Decode { what: "ONNX model".into(), reason: e.to_string() })?;
    if m.graph.is_none() {
        return Err(InteropError::Decode { what: "ONNX model".into(), reason: "it has no graph".into() });
    }
    Ok(m)
}

/// Encodes an ONNX model into the bytes of a `.onnx` file.
pub fn encode_model(m: &ModelProto) -> Vec<u8> {
    m.encode_to_vec()
}
