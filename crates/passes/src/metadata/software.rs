//! `add_software_metadata` (doc/mase-semantics.md#software-metadata): an empty `{"stat": {}}` slot for every
//! tensor a node reads or writes, where `profile_statistics` later puts its statistics.

use crate::{PassContext, PassError, PassReport, Result};
use mase_ir::{Graph, NodeId, NodeKind};
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// Arguments of `add_software_metadata`: none.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SoftwareArgs {}

/// The pass. Needs `add_common_metadata` (it reads `mase_type`).
pub fn add_software_metadata(graph: &mut Graph, _ctx: &mut PassContext, _args: &SoftwareArgs) -> Result<PassReport> {
    let mut count = 0usize;
    for id in graph.ids().collect::<Vec<_>>() {
        let (args, results) = entries(graph, id)?;
        count += args.len() + results.len();
        let slot = |names: Vec<String>| Value::Object(names.into_iter().map(|n| (n, json!({"stat": {}}))).collect::<Map<_, _>>());
        let sw = &mut graph.node_mut(id).meta.software;
        sw.insert("args".into(), slot(args));
        sw.insert("results".into(), slot(results));
    }
    Ok(PassReport::new("add_software_metadata", json!({"entries": count})))
}

/// Deduplicated input nodes (fx's `all_input_nodes`: `x + x` has one).
pub(crate) fn all_input_nodes(graph: &Graph, id: NodeId) -> Vec<NodeId> {
    let mut v: Vec<NodeId> = Vec::new();
    for &u in &graph.node(id).inputs {
        if !v.contains(&u) {
            v.push(u);
        }
    }
    v
}

/// The names of a node's software `args` and `results` entries.
fn entries(graph: &Graph, id: NodeId) -> Result<(Vec<String>, Vec<String>)> {
    let n = graph.node(id);
    let ty = n.meta.common.mase_type.as_deref().ok_or_else(|| PassError::MissingMeta {
        pass: "add_software_metadata".into(),
        node: n.name.clone(),
        what: "mase_type".into(),
        needed: "add_common_metadata".into(),
    })?;
    let out = vec!["data_out_0".to_string()];
    let data_in = |k: usize| (0..k).map(|i| format!("data_in_{i}")).collect::<Vec<_>>();
    Ok(match (n.kind, ty) {
        (NodeKind::Placeholder, _) | (NodeKind::GetAttr, _) => (vec![], out),
        (NodeKind::Output, _) => (data_in(1), vec![]),
        (NodeKind::CallModule, _) => {
            // Parameters first, then buffers, as `named_parameters()` then `named_buffers()`.
            let specs = n.op.param_specs();
            let mut a = data_in(1);
            a.extend(specs.iter().filter(|s| s.trainable).map(|s| s.name.to_string()));
            a.extend(specs.iter().filter(|s| !s.trainable).map(|s| s.name.to_string()));
            (a, out)
        }
        _ => {
            let a = data_in(all_input_nodes(graph, id).len());
            let r = if n.meta.common.mase_op.as_deref() == Some("size") { vec![] } else { out };
            (a, r)
        }
    })
}
