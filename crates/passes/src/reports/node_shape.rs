//! `report_node_shape`: the shapes of every node's inputs and outputs, and its other arguments.

use super::{require_common, save_text};
use crate::pyfmt::{repr, Py};
use crate::{PassContext, PassReport, Result};
use mase_ir::{ArgMeta, Graph};
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// Arguments of `report_node_shape`: none.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeShapeArgs {}

fn shape_of(v: &ArgMeta) -> String {
    match v {
        ArgMeta::Tensor(t) => repr(&Py::from_json(&json!(t.shape))),
        ArgMeta::Config(c) => repr(&Py::from_json(c.get("shape").unwrap_or(c))),
    }
}

/// The pass. Needs `add_common_metadata`.
pub fn report_node_shape(graph: &mut Graph, ctx: &mut PassContext, _args: &NodeShapeArgs) -> Result<PassReport> {
    const PASS: &str = "report_node_shape";
    require_common(graph, PASS)?;
    let mut text = String::new();
    let mut nodes = Map::new();
    for n in graph.nodes() {
        let c = &n.meta.common;
        text += &format!("{}:\nin:\n", n.name);
        let mut ins = Map::new();
        for (k, v) in &c.args {
            if k.contains("data_in") {
                text += &format!("{k} = {}\n", shape_of(v));
                ins.insert(k.clone(), json!(v_shape(v)));
            } else {
                let value = serde_json::to_value(v).unwrap_or(Value::Null);
                text += &format!("{k} = {}\n", repr(&Py::from_json(&value)));
            }
        }
        text += "out:\n";
        let mut outs = Map::new();
        for (k, v) in &c.results {
            text += &format!("{k} = {}\n", shape_of(v));
            outs.insert(k.clone(), json!(v_shape(v)));
        }
        text += "\n";
        nodes.insert(n.name.clone(), json!({"in": ins, "out": outs}));
    }
    let text = text.trim_end().to_string();
    let files = save_text(ctx, PASS, None, &text)?;
    let mut r = PassReport::new(PASS, Value::Object(nodes)).with_text(text);
    r.files = files;
    Ok(r)
}

fn v_shape(v: &ArgMeta) -> Value {
    match v {
        ArgMeta::Tensor(t) => json!(t.shape),
        ArgMeta::Config(c) => c.get("shape").cloned().unwrap_or(Value::Null),
    }
}
