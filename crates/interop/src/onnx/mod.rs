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
    let m = ModelProto::decode(bytes).map_err(|source| InteropError::Protobuf { what: "ONNX model".into(), source })?;
    if m.graph.is_none() {
        return Err(InteropError::Decode { what: "ONNX model".into(), reason: "it has no graph".into() });
    }
    Ok(m)
}

/// Encodes an ONNX model into the bytes of a `.onnx` file.
pub fn encode_model(m: &ModelProto) -> Vec<u8> {
    m.encode_to_vec()
}

/// A float tensor's `ValueInfoProto` (a graph input or output): a `None` dimension is the
/// symbolic `batch`.
pub fn float_value_info(name: &str, dims: &[Option<usize>]) -> proto::ValueInfoProto {
    use proto::tensor_shape_proto::{dimension::Value as DV, Dimension};
    use proto::{type_proto, TensorShapeProto, TypeProto};
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                Some(v) => DV::DimValue(*v as i64),
                None => DV::DimParam("batch".into()),
            }),
            ..Default::default()
        })
        .collect();
    proto::ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor { elem_type: 1, shape: Some(TensorShapeProto { dim }) })),
            ..Default::default()
        }),
        ..Default::default()
    }
}
