//! `add_common_metadata` (doc/mase-semantics.md#common-metadata): mase_type and mase_op of every node, the
//! shapes, dtypes and number formats of its inputs, parameters and output, and the graph's
//! input and output nodes.
//!
//! Shapes come from shape inference on a dummy batch (`[batch_size, ...sample_shape]`) rather
//! than from running the model, so every op the runtime knows is covered (MASE's tables cover a
//! handful and raise on the rest). Departures from MASE, on purpose:
//! - a method keeps its receiver: `x.view(8, -1)` has `data_in_0` besides `shape_0`, `shape_1`
//!   (MASE drops `self`, so the view's input is missing from its own metadata);
//! - the output node lists what it returns as `data_in_0`;
//! - output formats are propagated (see [`super::precision`]) instead of staying `float [32]`;
//! - tensor values are not stored (`add_value` is accepted and ignored): weights live in the
//!   parameter store, activations in the executor.

use super::classify::classify;
use super::precision::{propagate, EdgeFormat, NodeFormats};
use crate::{PassContext, PassError, PassReport, Result};
use indexmap::IndexMap;
use mase_ir::{ArgMeta, DimArg, Graph, Node, NodeId, NodeKind, Op, TensorMeta, ValueInfo};
use serde::Deserialize;
use serde_json::{json, Value};

/// Arguments of `add_common_metadata`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommonArgs {
    /// Batch size of the dummy input (default: the context's batch size).
    pub batch_size: Option<usize>,
    /// MASE stores tensor values in metadata when true; mase-rs never does.
    pub add_value: Option<bool>,
    /// MASE runs on PyTorch's "meta" device when true; mase-rs only ever computes shapes.
    pub force_device_meta: Option<bool>,
}

/// The pass.
pub fn add_common_metadata(graph: &mut Graph, ctx: &mut PassContext, args: &CommonArgs) -> Result<PassReport> {
    const PASS: &str = "add_common_metadata";
    let samples = ctx.sample_shapes(graph).ok_or_else(|| PassError::NoData {
        pass: PASS.into(),
        reason: "the input shape is unknown: give a data set or run the pass on a graph whose inputs have metadata".into(),
    })?;
    let batch = args.batch_size.unwrap_or(ctx.batch_size).max(1);
    let shapes = batched(batch, &samples);
    let values = infer(graph, ctx, &shapes)?;
    annotate(graph, &values);
    // One input reports its shape as before; several report the list.
    let shape = if shapes.len() == 1 { json!(shapes[0]) } else { json!(shapes) };
    let nodes_in = graph.meta.common.get("nodes_in").cloned().unwrap_or(Value::Null);
    let nodes_out = graph.meta.common.get("nodes_out").cloned().unwrap_or(Value::Null);
    Ok(PassReport::new(PASS, json!({"input_shape": shape, "nodes": graph.len(), "nodes_in": nodes_in, "nodes_out": nodes_out})))
}

/// Shapes of every value for one input batch of each shape in `shapes` (in placeholder order).
pub(crate) fn infer(graph: &Graph, ctx: &PassContext, shapes: &[Vec<usize>]) -> Result<Vec<ValueInfo>> {
    let consts = |name: &str| ctx.params.get(name).map(|t| t.shape.clone());
    Ok(graph.infer_shapes(shapes, &consts)?)
}

/// Each sample shape with the batch `batch` in front.
pub(crate) fn batched(batch: usize, samples: &[Vec<usize>]) -> Vec<Vec<usize>> {
    samples.iter().map(|s| std::iter::once(batch).chain(s.iter().copied()).collect()).collect()
}

/// The dummy input shapes recorded by an earlier `add_common_metadata` (one per input), if
/// every input has one.
pub(crate) fn recorded_input_shapes(graph: &Graph) -> Option<Vec<Vec<usize>>> {
    let inputs = graph.inputs();
    if inputs.is_empty() {
        return None;
    }
    inputs
        .iter()
        .map(|&i| match graph.node(i).meta.common.results.get("data_out_0") {
            Some(ArgMeta::Tensor(t)) => Some(t.shape.clone()),
            _ => None,
        })
        .collect()
}

/// Recomputes common metadata after a transform changed formats, when the graph has it.
pub(crate) fn refresh(graph: &mut Graph, ctx: &PassContext) -> Result<()> {
    if let Some(shapes) = recorded_input_shapes(graph) {
        let values = infer(graph, ctx, &shapes)?;
        annotate(graph, &values);
    }
    Ok(())
}

/// Writes mase_type, mase_op, args and results of every node, and the graph-level metadata.
pub(crate) fn annotate(graph: &mut Graph, values: &[ValueInfo]) {
    let formats = propagate(graph, values);
    let metas: Vec<(IndexMap<String, ArgMeta>, IndexMap<String, ArgMeta>)> =
        graph.ids().map(|id| node_tables(graph, id, values, &formats[id.0])).collect();
    for (id, (args, results)) in graph.ids().zip(metas).collect::<Vec<_>>() {
        let node = graph.node_mut(id);
        let (ty, op) = classify(node);
        let c = &mut node.meta.common;
        c.mase_type = Some(ty.to_string());
        c.mase_op = Some(op);
        c.args = args;
        c.results = results;
    }
    graph_io(graph);
}

fn tensor(shape: &[usize], f: &EdgeFormat, is_param: bool) -> ArgMeta {
    ArgMeta::Tensor(TensorMeta {
        shape: shape.to_vec(),
        torch_dtype: "torch.float32".into(),
        kind: f.kind.clone(),
        precision: f.precision.clone(),
        is_param,
    })
}

/// `common.args` and `common.results` of one node.
fn node_tables(graph: &Graph, id: NodeId, values: &[ValueInfo], f: &NodeFormats) -> (IndexMap<String, ArgMeta>, IndexMap<String, ArgMeta>) {
    let node = graph.node(id);
    let mut args = IndexMap::new();
    let mut results = IndexMap::new();
    if node.kind != NodeKind::Placeholder && node.kind != NodeKind::GetAttr {
        let tensor_ins = node.inputs.iter().filter(|u| values[u.0].is_tensor());
        for (k, u) in tensor_ins.enumerate() {
            let fmt = f.data_in.get(k).cloned().unwrap_or_else(EdgeFormat::float32);
            args.insert(format!("data_in_{k}"), tensor(values[u.0].shape(), &fmt, false));
        }
    }
    if node.kind == NodeKind::CallModule {
        for spec in node.op.param_specs().into_iter().filter(|s| s.trainable) {
            let fmt = match spec.name {
                "weight" => f.weight.clone(),
                "bias" => f.bias.clone(),
                _ => None,
            }
            .unwrap_or_else(EdgeFormat::float32);
            args.insert(spec.name.to_string(), tensor(&spec.shape, &fmt, true));
        }
    } else {
        for (k, v) in config_entries(node, values) {
            args.insert(k, ArgMeta::Config(v));
        }
    }
    let out = match node.kind {
        NodeKind::Output => node.inputs.first().map(|u| &values[u.0]),
        _ => values.get(id.0),
    };
    match out {
        Some(ValueInfo::Tensor(s)) => {
            results.insert("data_out_0".into(), tensor(s, &f.data_out, false));
        }
        Some(ValueInfo::Int(v)) => {
            results.insert("data_out_0".into(), ArgMeta::Config(json!({"type": "int", "shape": [1], "value": v})));
        }
        None => {}
    }
    (args, results)
}

/// The non-tensor arguments fx records for a function or method call, named as the PyTorch
/// signature names them (`start_dim`, `dim`, `shape_0`, ...).
fn config_entries(node: &Node, values: &[ValueInfo]) -> Vec<(String, Value)> {
    let e = |k: &str, v: Value| (k.to_string(), v);
    match &node.op {
        Op::Flatten { start_dim, end_dim } => vec![e("start_dim", (*start_dim).into()), e("end_dim", (*end_dim).into())],
        Op::Relu => vec![e("inplace", false.into())],
        Op::Size { dim } => vec![e("dim", (*dim).into())],
        Op::Reshape { shape } => shape
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let v = match d {
                    DimArg::Const(c) => Value::from(*c),
                    DimArg::Input(k) => match node.inputs.get(*k).and_then(|u| values.get(u.0)) {
                        Some(ValueInfo::Int(v)) => Value::from(*v),
                        _ => Value::Null,
                    },
                };
                (format!("shape_{i}"), v)
            })
            .collect(),
        Op::Transpose { dim0, dim1 } => vec![e("dim0", (*dim0).into()), e("dim1", (*dim1).into())],
        Op::Permute { dims } => vec![e("dims", json!(dims))],
        Op::Softmax { dim } | Op::LogSoftmax { dim } => vec![e("dim", (*dim).into())],
        Op::Dropout { p } => vec![e("p", json!(p)), e("training", false.into())],
        Op::StochasticDepth { p, mode } => vec![e("p", json!(p)), e("mode", mode.name().into()), e("training", false.into())],
        Op::LeakyRelu { negative_slope } => vec![e("negative_slope", json!(negative_slope))],
        Op::Gelu { tanh } => vec![e("approximate", if *tanh { "tanh" } else { "none" }.into())],
        Op::Softplus { beta, threshold } => vec![e("beta", json!(beta)), e("threshold", json!(threshold))],
        Op::Mean(r) | Op::Sum(r) | Op::Amax(r) => {
            let dim = if r.dims.is_empty() { Value::Null } else { json!(r.dims) };
            vec![e("dim", dim), e("keepdim", r.keepdim.into())]
        }
        Op::Index { items } => vec![e("items", json!(items))],
        Op::Repeat { repeats } => vec![e("repeats", json!(repeats))],
        Op::Stack { dim } => vec![e("dim", (*dim).into())],
        _ => Vec::new(),
    }
}

/// Whether metadata types the node as implicit (no hardware of its own).
fn implicit(graph: &Graph, id: NodeId) -> bool {
    matches!(graph.node(id).meta.common.mase_type.as_deref(), Some("implicit_func") | Some("placeholder") | Some("output"))
}

/// MASE's `get_input_nodes` / `get_output_nodes` (doc/mase-semantics.md#graph-metadata): the first and last non-implicit nodes,
/// reached from the inputs and the output through implicit nodes, which are marked
/// `hardware.is_implicit`. Returns `(nodes_in, nodes_out, implicit nodes)`.
pub(crate) fn io_nodes(graph: &Graph) -> (Vec<NodeId>, Vec<NodeId>, Vec<NodeId>) {
    let (mut nodes_in, mut nodes_out, mut marked) = (Vec::new(), Vec::new(), Vec::new());
    let inputs = graph.inputs();
    marked.extend(inputs.iter().copied());
    walk_implicit(graph, inputs, |n| graph.users(n), &mut marked, &mut nodes_in);
    if let Ok(out) = graph.output_node() {
        // The output is marked already when only implicit nodes lie between it and the inputs.
        if !marked.contains(&out) {
            marked.push(out);
        }
        walk_implicit(graph, vec![out], |n| graph.node(n).inputs.clone(), &mut marked, &mut nodes_out);
    }
    nodes_in.sort();
    nodes_out.sort();
    (nodes_in, nodes_out, marked)
}

/// Walks from `stack` along `next` (users or inputs) through implicit nodes, marking each once,
/// and collects the first non-implicit nodes it meets into `found`.
fn walk_implicit(
    graph: &Graph,
    mut stack: Vec<NodeId>,
    next: impl Fn(NodeId) -> Vec<NodeId>,
    marked: &mut Vec<NodeId>,
    found: &mut Vec<NodeId>,
) {
    while let Some(n) = stack.pop() {
        for u in next(n) {
            if implicit(graph, u) {
                if !marked.contains(&u) {
                    marked.push(u);
                    stack.push(u);
                }
            } else if !found.contains(&u) {
                found.push(u);
            }
        }
    }
}

/// `graph.meta.common` (`nodes_in`, `nodes_out` and their data entries) and `is_implicit` marks.
fn graph_io(graph: &mut Graph) {
    let (nodes_in, nodes_out, marked) = io_nodes(graph);
    for &m in &marked {
        graph.node_mut(m).meta.hardware.insert("is_implicit".into(), true.into());
    }
    let names = |ids: &[NodeId]| Value::from(ids.iter().map(|i| graph.node(*i).name.clone()).collect::<Vec<_>>());
    let data = |ids: &[NodeId], results: bool| {
        let mut m = serde_json::Map::new();
        for i in ids {
            let c = &graph.node(*i).meta.common;
            for (k, v) in if results { &c.results } else { &c.args } {
                if k.contains("data") {
                    m.insert(k.clone(), serde_json::to_value(v).unwrap_or(Value::Null));
                }
            }
        }
        Value::Object(m)
    };
    let common = json!({
        "nodes_in": names(&nodes_in),
        "nodes_out": names(&nodes_out),
        "args": data(&nodes_in, false),
        "results": data(&nodes_out, true),
    });
    if let Value::Object(m) = common {
        graph.meta.common = m;
    }
}
