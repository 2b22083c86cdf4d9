//! Graphs traced by torch.fx in Python: the Python side (`mase_rs.ir.graph.torch_fx`) maps each
//! fx node onto an IR op and sends the nodes as records; this builds the `Graph` with fx's node
//! names kept exactly, takes the weights from the module's state dict, and checks the result
//! (structure, parameter shapes, and shapes for a sample batch when the sample shape is known).

use crate::errors::{raise, to_py, ErrorClass};
use mase_ir::{Graph, NodeId, NodeKind, NodeQuant, Op, ParamStore, Tensor};
use numpy::{PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde::Deserialize;
use std::collections::HashMap;

/// One fx node as the Python side describes it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct NodeRecord {
    /// torch.fx's `node.name`, kept as the IR node's name.
    name: String,
    /// torch.fx's `node.op` (`call_module`, ...).
    kind: NodeKind,
    /// torch.fx's target as text: the module path, the qualified function, the method name.
    target: String,
    /// Names of the nodes whose values the op reads, in the op's order.
    inputs: Vec<String>,
    /// The IR op, in its serialized form (`{"op": "linear", "in_features": 16, ...}`).
    op: Op,
    /// The number formats of a quantized node (a quantized module of the PyTorch view, such as
    /// `LinearInteger`, lowers back with its formats).
    #[serde(default)]
    quant: Option<NodeQuant>,
}

/// The traced model: its nodes in fx order and which `get_attr` tensors are trainable.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TracedModel {
    nodes: Vec<NodeRecord>,
    /// `get_attr` targets that are `nn.Parameter`s (trained); other constants are buffers.
    #[serde(default)]
    trainable_constants: Vec<String>,
}

/// A model traced by torch.fx, as a graph and its parameters.
pub struct Traced {
    pub graph: Graph,
    pub params: ParamStore,
}

/// The error of a traced model, as one line naming the model.
fn bad(label: &str, reason: impl std::fmt::Display) -> PyErr {
    raise(ErrorClass::Value, &format!("torch.fx graph of `{label}`: {reason}"))
}

/// Builds the graph of `records` (JSON of [`TracedModel`]) with the weights of `state` (the
/// module's state dict as float32 arrays, in its order). Entries the graph does not use
/// (`num_batches_tracked`, modules the forward never calls) are left to the caller. With
/// `sample_shape`, shapes are inferred for a batch of two samples so that a mismatch is
/// reported now, at the node that causes it.
pub fn build(label: &str, records: &str, state: &Bound<'_, PyDict>, sample_shape: Option<&[usize]>) -> PyResult<Traced> {
    let model: TracedModel = serde_json::from_str(records).map_err(|e| bad(label, format!("node records: {e}")))?;
    let graph = build_graph(label, model.nodes)?;

    let mut tensors: Vec<(String, Tensor)> = Vec::new();
    for (k, v) in state.iter() {
        let name: String = k.extract()?;
        let arr: PyReadonlyArrayDyn<'_, f32> =
            v.extract().map_err(|_| bad(label, format!("state_dict entry `{name}`: expected a float32 numpy array")))?;
        let data = arr.as_array().iter().copied().collect();
        tensors.push((name, Tensor::new(arr.shape().to_vec(), data).map_err(|e| to_py(&e))?));
    }
    let params = collect_params(label, &graph, tensors, &model.trainable_constants)?;
    mase_ir::validate(&graph, Some(&params)).map_err(|e| bad(label, e))?;
    // A sample shape describes one input; a graph with several learns theirs from its inputs.
    if let Some(sample) = sample_shape.filter(|_| graph.inputs().len() == 1) {
        let mut batch = vec![2];
        batch.extend(sample);
        graph.infer_shapes(&[batch], &|name| params.get(name).map(|t| t.shape.clone())).map_err(|e| bad(label, e))?;
    }
    Ok(Traced { graph, params })
}

/// The nodes in fx order, each named as fx named it.
fn build_graph(label: &str, records: Vec<NodeRecord>) -> PyResult<Graph> {
    let mut g = Graph::new();
    let mut ids: HashMap<String, NodeId> = HashMap::new();
    for r in records {
        let inputs = r
            .inputs
            .iter()
            .map(|i| ids.get(i).copied().ok_or_else(|| bad(label, format!("node `{}`: input `{i}` is not an earlier node", r.name))))
            .collect::<PyResult<Vec<NodeId>>>()?;
        let id = match r.kind {
            // A forward returning a tuple or list returns several values, in order.
            NodeKind::Output => g.outputs(&inputs),
            kind => g.add_node(&r.name, kind, &r.target, r.op, &inputs),
        };
        g.node_mut(id).quant = r.quant;
        // fx names are unique Python identifiers, which the namer keeps as they are (the output
        // is `output`, or `output_1` when a module called `output` took that name first).
        let given = &g.node(id).name;
        if *given != r.name {
            return Err(bad(label, format!("node `{}` would be renamed `{given}`", r.name)));
        }
        ids.insert(r.name, id);
    }
    Ok(g)
}

/// The parameter store of `graph` from the state dict: every parameter the graph's modules own
/// (trainable as the op says) and every `get_attr` tensor, in the state dict's order.
fn collect_params(label: &str, graph: &Graph, tensors: Vec<(String, Tensor)>, trainable_constants: &[String]) -> PyResult<ParamStore> {
    let mut wanted: HashMap<String, bool> = graph.param_specs().into_iter().map(|(name, spec)| (name, spec.trainable)).collect();
    for n in graph.nodes().iter().filter(|n| n.kind == NodeKind::GetAttr) {
        wanted.insert(n.target.clone(), trainable_constants.contains(&n.target));
    }
    let mut params = ParamStore::new();
    for (name, t) in tensors {
        if let Some(trainable) = wanted.remove(&name) {
            params.insert(name, t, trainable);
        }
    }
    let mut missing: Vec<String> = wanted.into_keys().collect();
    if !missing.is_empty() {
        missing.sort();
        return Err(bad(label, format!("the state dict has no {}", missing.join(", "))));
    }
    Ok(params)
}
