//! `latency`: measured forward time of the whole model and of each node on this machine.
//!
//! Each node is timed alone: a one-node graph whose input is the value the node receives in the
//! full model (other tensor inputs become constants), run by the same executor in evaluation
//! mode, quantization included. The median of `repeats` runs after `warmup` runs is reported, so
//! one slow run (a context switch) does not move it. Times depend on the machine and its load.

use crate::select::type_key;
use crate::table::{Table, TableFormat};
use crate::{InputSource, PassContext, PassError, PassReport, Result, Split};
use mase_ir::{DimArg, Graph, NodeId, NodeKind, Op, ParamStore, Rng, Tensor, ValueInfo};
use mase_runtime::{ExecOptions, Executor, Mode};
use serde::Deserialize;
use serde_json::json;
use std::time::Instant;

/// Arguments of `latency`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LatencyArgs {
    /// Samples per run (default: the context's batch size).
    pub batch_size: Option<usize>,
    /// Timed runs per node (default 20).
    pub repeats: Option<usize>,
    /// Untimed runs first (default 3).
    pub warmup: Option<usize>,
    /// Split the input batch comes from when there is a data set (default `test`).
    pub split: Option<Split>,
}

/// Median of `repeats` timed forwards, in microseconds.
fn time_forward(exec: &mut Executor, x: &[f32], shape: &[usize], warmup: usize, repeats: usize) -> Result<f64> {
    for _ in 0..warmup {
        exec.forward(x, shape, Mode::Eval)?;
    }
    let mut t: Vec<f64> = Vec::with_capacity(repeats);
    for _ in 0..repeats.max(1) {
        let start = Instant::now();
        exec.forward(x, shape, Mode::Eval)?;
        t.push(start.elapsed().as_secs_f64() * 1e6);
    }
    t.sort_by(|a, b| a.total_cmp(b));
    Ok(t[t.len() / 2])
}

/// The pass. Needs input samples or a known input shape (random inputs are used without data).
pub fn latency(graph: &mut Graph, ctx: &mut PassContext, args: &LatencyArgs) -> Result<PassReport> {
    const PASS: &str = "latency";
    PassContext::require_one_input(PASS, graph)?;
    let batch = args.batch_size.unwrap_or(ctx.batch_size).max(1);
    let (warmup, repeats) = (args.warmup.unwrap_or(3), args.repeats.unwrap_or(20).max(1));
    let (x, shape) = match &ctx.inputs {
        InputSource::Data(_) => {
            let b = ctx.batches(PASS, graph, args.split.unwrap_or(Split::Test), batch, batch)?;
            let b = b.into_iter().next().ok_or_else(|| PassError::NoData { pass: PASS.into(), reason: "no samples".into() })?;
            (b.x, b.shape)
        }
        _ => {
            let sample = ctx
                .sample_shape(graph)
                .ok_or_else(|| PassError::NoData { pass: PASS.into(), reason: "the input shape is unknown".into() })?;
            let mut rng = Rng::new(ctx.seed).fork(0x1a7);
            let mut shape = vec![batch];
            shape.extend(sample);
            ((0..shape.iter().product::<usize>()).map(|_| rng.normal() as f32).collect(), shape)
        }
    };
    let opts = ExecOptions { threads: ctx.threads, seed: ctx.seed };
    let mut exec = Executor::new(graph, &ctx.params, opts)?;
    let total = time_forward(&mut exec, &x, &shape, warmup, repeats)?;
    exec.forward(&x, &shape, Mode::Eval)?;
    let consts = |name: &str| ctx.params.get(name).map(|t| t.shape.clone());
    let infos = graph.infer_shapes(std::slice::from_ref(&shape), &consts)?;
    let values: Vec<Option<Tensor>> =
        graph.ids().map(|id| exec.value(id).map(|(s, v)| Tensor { shape: s.to_vec(), data: v.to_vec() })).collect();

    let mut t = Table::new(["Node name", "Mase op", "Latency (us)"]);
    let mut nodes = Vec::new();
    let mut sum = 0.0;
    for id in graph.ids() {
        let n = graph.node(id);
        if matches!(n.kind, NodeKind::Placeholder | NodeKind::Output | NodeKind::GetAttr) {
            continue;
        }
        let us = match isolate(graph, id, &infos, &values, &ctx.params) {
            Some((g, p, xin)) => {
                let mut e = Executor::new(&g, &p, opts)?;
                time_forward(&mut e, &xin.data, &xin.shape, warmup, repeats)?
            }
            // Integer-valued nodes (`x.size(0)`) do no tensor work.
            None => 0.0,
        };
        sum += us;
        t.push([n.name.clone(), type_key(n), format!("{us:.2}")]);
        nodes.push(json!({"name": n.name, "mase_op": type_key(n), "latency_us": us}));
    }
    t.push(["sum of nodes".to_string(), String::new(), format!("{sum:.2}")]);
    t.push(["whole model".to_string(), String::new(), format!("{total:.2}")]);
    let text = format!("Latency on this machine, batch of {batch}, median of {repeats} runs:\n{}", t.render(TableFormat::Simple));
    Ok(PassReport::new(PASS, json!({"batch_size": batch, "repeats": repeats, "nodes": nodes, "sum_of_nodes_us": sum, "model_us": total}))
        .with_text(text))
}

/// A graph holding only node `id`, fed by the values it receives in the full model: its first
/// tensor input becomes the graph input, the others constants, and integer inputs are folded
/// into the op. Returns the graph, its parameters and the input batch.
fn isolate(
    graph: &Graph,
    id: NodeId,
    infos: &[ValueInfo],
    values: &[Option<Tensor>],
    params: &ParamStore,
) -> Option<(Graph, ParamStore, Tensor)> {
    let n = graph.node(id);
    if !infos.get(id.0)?.is_tensor() {
        return None;
    }
    let mut g = Graph::new();
    let mut p = ParamStore::new();
    let x = g.placeholder("x");
    let first = *n.inputs.iter().find(|u| infos[u.0].is_tensor())?;
    let xin = values.get(first.0)?.clone()?;
    let mut op = n.op.clone();
    let mut ins = Vec::new();
    for (k, &u) in n.inputs.iter().enumerate() {
        match &infos[u.0] {
            ValueInfo::Tensor(_) if u == first => ins.push(x),
            ValueInfo::Tensor(_) => {
                let name = format!("_latency_input_{k}");
                p.insert(name.clone(), values.get(u.0)?.clone()?, false);
                ins.push(g.get_attr(&name));
            }
            ValueInfo::Int(v) => {
                if let Op::Reshape { shape } = &mut op {
                    for d in shape.iter_mut() {
                        if *d == DimArg::Input(k) {
                            *d = DimArg::Const(*v);
                        }
                    }
                }
            }
        }
    }
    // After folding, view's integer inputs are gone; its shape refers to input 0 only.
    let y = match n.kind {
        NodeKind::CallModule => g.call_module(&n.target, op, &ins),
        NodeKind::CallMethod => g.call_method(&n.target, op, &ins),
        _ => g.call_function(&n.target, op, &ins),
    };
    g.node_mut(y).quant = n.quant.clone();
    g.output(y);
    for (name, _) in n.params() {
        let e = params.entry(&name)?;
        p.insert(name, e.tensor.clone(), e.trainable);
    }
    Some((g, p, xin))
}
