//! MASE's quantize config of one module as the formats mase-rs records on a node: what a
//! quantized module made by hand (`LinearInteger(16, 5, config={...})`) holds, read by the same
//! rules as the `quantize` pass.

use crate::errors::{raise, ErrorClass};
use mase_ir::{Graph, NodeKind, Op};
use pyo3::prelude::*;
use serde_json::Value;

/// The formats (`NodeQuant` as JSON) that `config` (MASE's keys, with `name`) gives a module of
/// op `op_json`, or None when the config leaves it in float (`name = "NA"`).
#[pyfunction]
pub fn quant_from_config(op_json: &str, config_json: &str) -> PyResult<Option<String>> {
    let op: Op = serde_json::from_str(op_json).map_err(|e| raise(ErrorClass::Value, &format!("quantized module: op: {e}")))?;
    let Value::Object(cfg) =
        serde_json::from_str(config_json).map_err(|e| raise(ErrorClass::Value, &format!("quantized module: config: {e}")))?
    else {
        return Err(raise(ErrorClass::Value, "quantized module: config: expected a dict of MASE's quantize keys"));
    };
    let mut g = Graph::new();
    let x = g.add_node("x", NodeKind::Placeholder, "x", Op::Input, &[]);
    let mase_op = op.mase_op();
    let id = g.add_node("module", NodeKind::CallModule, "module", op, &[x]);
    let none = |_: &str, _: &str| None;
    let quant = mase_passes::quantize::config::node_quant(g.node(id), mase_op, &cfg, &none)
        .map_err(|e| raise(ErrorClass::Value, &format!("quantized module: config: {e}")))?;
    quant.map(|q| serde_json::to_string(&q).map_err(|e| raise(ErrorClass::Value, &e.to_string()))).transpose()
}
