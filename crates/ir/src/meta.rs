//! MASE's node metadata (doc/mase-semantics.md#node-metadata): `common`, `hardware` and `software` parts.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Metadata of one tensor edge: shape, dtype and number format.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorMeta {
    pub shape: Vec<usize>,
    pub torch_dtype: String,
    /// Number format name: `float`, `integer`, `minifloat_ieee`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// Format parameters in the fixed order of the format (`[32]` for float, `[width, frac]` ...).
    pub precision: Vec<Value>,
    /// The tensor is a parameter of the node rather than data flowing in (`from: None` in MASE).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_param: bool,
}

impl TensorMeta {
    pub fn float32(shape: Vec<usize>) -> TensorMeta {
        TensorMeta { shape, torch_dtype: "torch.float32".into(), kind: "float".into(), precision: vec![Value::from(32)], is_param: false }
    }
}

/// An entry of `common.args` / `common.results`: a tensor edge, or a plain configuration value
/// (`start_dim: 1`, `dim: 0`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ArgMeta {
    Tensor(TensorMeta),
    Config(Value),
}

/// `common` metadata.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CommonMeta {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mase_type: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mase_op: Option<String>,
    pub args: IndexMap<String, ArgMeta>,
    pub results: IndexMap<String, ArgMeta>,
}

/// All metadata of a node. `software` and `hardware` are open JSON maps because passes of later
/// issues add keys (statistics, verilog parameters) whose sets are open-ended.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeMeta {
    pub common: CommonMeta,
    pub software: Map<String, Value>,
    pub hardware: Map<String, Value>,
}

/// Graph-level metadata (`graph.meta["mase"]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GraphMeta {
    pub common: Map<String, Value>,
    pub software: Map<String, Value>,
    pub hardware: Map<String, Value>,
}
