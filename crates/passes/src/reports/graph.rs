//! `report_graph`: the fx graph listing, the number of nodes of each fx kind and the module of
//! every `call_module` node, as MASE prints them.

use super::save_text;
use crate::pyfmt::py_str;
use crate::{PassContext, PassReport, Result};
use mase_ir::{Graph, NodeKind};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::path::PathBuf;

/// Arguments of `report_graph`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphArgs {
    /// Where to write the report (default: `<out_dir>/report_graph.txt` when there is an output folder).
    pub file_name: Option<PathBuf>,
}

/// The number of nodes of each fx kind, in fx's order.
pub fn op_counts(graph: &Graph) -> Vec<(&'static str, usize)> {
    NodeKind::ALL.iter().map(|k| (k.as_str(), graph.nodes().iter().filter(|n| n.kind == *k).count())).collect()
}

/// `repr(module)` of every `call_module` node, in graph order.
pub fn layer_types(graph: &Graph) -> Vec<String> {
    graph
        .nodes()
        .iter()
        .filter(|n| n.kind == NodeKind::CallModule)
        .map(|n| n.op.module_repr().unwrap_or_else(|| format!("{}()", n.target)))
        .collect()
}

/// The pass. Needs no metadata.
pub fn report_graph(graph: &mut Graph, ctx: &mut PassContext, args: &GraphArgs) -> Result<PassReport> {
    let counts = op_counts(graph);
    let layers = layer_types(graph);
    let count_text = format!("{{{}}}", counts.iter().map(|(k, c)| format!("{}: {c}", py_str(k))).collect::<Vec<_>>().join(", "));
    let listing = graph.to_string();
    let text = format!("{}\nNetwork overview:\n{count_text}\nLayer types:\n[{}]", listing.trim_end(), layers.join(", "));
    let files = save_text(ctx, "report_graph", args.file_name.as_deref(), &text)?;
    let count_json: Map<String, Value> = counts.iter().map(|(k, c)| (k.to_string(), Value::from(*c))).collect();
    let mut r = PassReport::new("report_graph", json!({"counts": count_json, "layer_types": layers, "graph": listing})).with_text(text);
    r.files = files;
    Ok(r)
}
