//! `add_software_metadata` (doc/mase-semantics.md#software-metadata): an empty `{"stat": {}}` slot for every
//! tensor a node reads or writes, where `profile_statistics` later puts its statistics.

use crate::{PassContext, PassError, PassReport, Result};
use mase_ir::{Graph, NodeId, NodeKind, Op};
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
        (NodeKind::Output, _) => (data_in(n.inputs.len()), vec![]),
        (NodeKind::CallModule, _) => {
            // Parameters first, then buffers, as `named_parameters()` then `named_buffers()`.
            let specs = n.op.param_specs();
            let mut a = data_in(1);
            a.extend(specs.iter().filter(|s| s.trainable).map(|s| s.name.to_string()));
            a.extend(specs.iter().filter(|s| !s.trainable).map(|s| s.name.to_string()));
            (a, out)
        }
        // MASE names a functional layer norm's second and third inputs `weight` and `bias`.
        _ if matches!(n.op, Op::LayerNorm { .. }) => {
            let extra = all_input_nodes(graph, id).len().saturating_sub(1);
            let mut a = data_in(1);
            a.extend(["weight", "bias"].into_iter().take(extra).map(String::from));
            (a, out)
        }
        _ => {
            let a = data_in(all_input_nodes(graph, id).len());
            let r = if n.meta.common.mase_op.as_deref() == Some("size") { vec![] } else { out };
            (a, r)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_functional_layer_norm_reads_data_in_0_weight_and_bias() {
        let mut g = Graph::new();
        let x = g.placeholder("x");
        let (w, b) = (g.get_attr("w"), g.get_attr("b"));
        let op = |affine| Op::LayerNorm { normalized_shape: vec![4], eps: 1e-5, elementwise_affine: affine, bias: affine };
        let f = g.call_function("torch.nn.functional.layer_norm", op(false), &[x, w, b]);
        let fw = g.call_function("torch.nn.functional.layer_norm", op(false), &[f, w]);
        let m = g.call_module("ln", op(true), &[fw]);
        g.output(m);
        for id in g.ids().collect::<Vec<_>>() {
            g.node_mut(id).meta.common.mase_type = Some("module_related_func".into());
        }
        let names = |id| entries(&g, id).unwrap().0;
        assert_eq!(names(f), ["data_in_0", "weight", "bias"]);
        assert_eq!(names(fw), ["data_in_0", "weight"]);
        assert_eq!(names(m), ["data_in_0", "weight", "bias"]);
    }
}
