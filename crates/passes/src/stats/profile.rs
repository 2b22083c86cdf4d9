//! `profile_statistics` (doc/mase-semantics.md#profile_statistics): statistics of the weights and the input
//! activations of chosen nodes, stored in `software.args.<entry>.stat`.
//!
//! Weights: each parameter and buffer of a `call_module` weight target is one sample. Activations:
//! the first `num_samples` inputs of the chosen split run through the model in evaluation mode
//! (quantized nodes quantize, as in the runtime), and each sample of every data input of an
//! activation target (`[1, ...]`) updates its statistics. Departures from MASE, each a fix:
//! - activation statistics go on data inputs only, so an activation target that is also a
//!   module never mismatches its parameter count (MASE then calls `exit(1)`);
//! - exactly `num_samples` samples are used (MASE rounds up to whole batches), taken in order;
//! - `x + x` profiles its one input once; integer inputs (`x.size(0)`) are skipped;
//! - `profile_output_activation = true` also profiles `data_out_0` into `software.results`
//!   (MASE accepts the key and ignores it).

use super::stat::StatCollection;
use crate::metadata::software::all_input_nodes;
use crate::select::{By, Selector};
use crate::{PassContext, PassError, PassReport, Result, Split};
use mase_ir::{Graph, NodeId, NodeKind};
use mase_runtime::{ExecOptions, Executor, Mode};
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// Arguments of `profile_statistics`.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileArgs {
    /// `type`, `name` or `regex_name`.
    pub by: String,
    #[serde(default)]
    pub target_weight_nodes: Vec<String>,
    #[serde(default)]
    pub target_activation_nodes: Vec<String>,
    /// `{stat_name: {kwargs}}` for weights.
    #[serde(default)]
    pub weight_statistics: Map<String, Value>,
    /// `{stat_name: {kwargs}}` for activations.
    #[serde(default)]
    pub activation_statistics: Map<String, Value>,
    /// Number of input samples for activations (default 32).
    pub num_samples: Option<usize>,
    /// Split the samples come from (default `train`, as MASE's `ch transform`).
    #[serde(default)]
    pub split: Split,
    /// Batch size of the runs (default: the context's).
    pub batch_size: Option<usize>,
    /// Also profile each activation target's output.
    #[serde(default)]
    pub profile_output_activation: bool,
}

/// The pass. Needs `add_software_metadata`.
pub fn profile_statistics(graph: &mut Graph, ctx: &mut PassContext, args: &ProfileArgs) -> Result<PassReport> {
    const PASS: &str = "profile_statistics";
    let by = By::parse(PASS, &args.by)?;
    let err = |reason: String| PassError::args(PASS, reason);
    StatCollection::new(&args.weight_statistics).map_err(err)?;
    StatCollection::new(&args.activation_statistics).map_err(err)?;
    let mut warnings = Vec::new();
    let weight_sel = Selector::new(PASS, by, &args.target_weight_nodes)?;
    let (weight_nodes, w) = weight_sel.select(PASS, graph)?;
    warnings.extend(w);
    let act_sel = Selector::new(PASS, by, &args.target_activation_nodes)?;
    let (act_nodes, w) = act_sel.select(PASS, graph)?;
    warnings.extend(w);
    for &id in weight_nodes.iter().chain(&act_nodes) {
        let n = graph.node(id);
        if !matches!(n.meta.software.get("args"), Some(Value::Object(_))) {
            return Err(PassError::MissingMeta {
                pass: PASS.into(),
                node: n.name.clone(),
                what: "software metadata".into(),
                needed: "add_software_metadata".into(),
            });
        }
    }
    let mut report = Map::new();
    let mut results: Vec<(NodeId, &'static str, String, Value)> = Vec::new();

    // Weights: every parameter and buffer of the module is one sample.
    let mut weight_entries = 0;
    for &id in &weight_nodes {
        let n = graph.node(id);
        if n.kind != NodeKind::CallModule {
            warnings.push(format!("{PASS}: `{}` is a {}, not a module; it has no weights to profile", n.name, n.kind.as_str()));
            continue;
        }
        let names: Vec<String> = software_args(graph, id).into_iter().filter(|k| !k.contains("data_in")).collect();
        for entry in names {
            let key = format!("{}.{entry}", n.target);
            let t = ctx.params.require(&key)?;
            let mut c = StatCollection::new(&args.weight_statistics).map_err(err)?;
            c.update(&t.shape, &t.data).map_err(|e| PassError::Node {
                pass: PASS.into(),
                node: n.name.clone(),
                reason: format!("{entry}: {e}"),
            })?;
            results.push((id, "args", entry, c.compute()));
            weight_entries += 1;
        }
    }

    // Activations: the data inputs of each target, sample by sample.
    struct Slot {
        node: NodeId,
        table: &'static str,
        entry: String,
        source: NodeId,
        stats: StatCollection,
    }
    let mut slots: Vec<Slot> = Vec::new();
    for &id in &act_nodes {
        let inputs = all_input_nodes(graph, id);
        for entry in software_args(graph, id).into_iter().filter(|k| k.starts_with("data_in_")) {
            let Some(&source) = entry["data_in_".len()..].parse::<usize>().ok().and_then(|i| inputs.get(i)) else { continue };
            slots.push(Slot {
                node: id,
                table: "args",
                entry,
                source,
                stats: StatCollection::new(&args.activation_statistics).map_err(err)?,
            });
        }
        if args.profile_output_activation && graph.node(id).kind != NodeKind::Output {
            slots.push(Slot {
                node: id,
                table: "results",
                entry: "data_out_0".into(),
                source: id,
                stats: StatCollection::new(&args.activation_statistics).map_err(err)?,
            });
        }
    }
    let num_samples = args.num_samples.unwrap_or(32);
    let mut seen = 0;
    if !slots.is_empty() && !args.activation_statistics.is_empty() {
        let batches = ctx.batches(PASS, graph, args.split, num_samples, args.batch_size.unwrap_or(ctx.batch_size))?;
        let mut exec = Executor::new(graph, &ctx.params, ExecOptions { threads: ctx.threads, seed: ctx.seed })?;
        for b in &batches {
            exec.forward(&b.x, &b.shape, Mode::Eval)?;
            for s in &mut slots {
                // Integer-valued inputs (`x.size(0)`) have no tensor to profile.
                let Some((shape, vals)) = exec.value(s.source) else { continue };
                let Some((&batch, rest)) = shape.split_first() else { continue };
                let per: usize = rest.iter().product();
                let mut sample_shape = vec![1];
                sample_shape.extend(rest);
                for i in 0..batch {
                    s.stats.update(&sample_shape, &vals[i * per..(i + 1) * per]).map_err(|e| PassError::Node {
                        pass: PASS.into(),
                        node: graph.node(s.node).name.clone(),
                        reason: format!("{}: {e}", s.entry),
                    })?;
                }
            }
            seen += b.shape[0];
        }
        for s in slots {
            if exec.value(s.source).is_some() {
                results.push((s.node, s.table, s.entry, s.stats.compute()));
            }
        }
    }

    for (id, table, entry, stat) in results {
        let n = graph.node_mut(id);
        let name = n.name.clone();
        let tbl = n.meta.software.entry(table).or_insert_with(|| json!({}));
        if let Value::Object(m) = tbl {
            m.insert(entry.clone(), json!({"stat": stat.clone()}));
        }
        let node_report = report.entry(name).or_insert_with(|| json!({}));
        node_report[&entry] = stat;
    }
    let text = format!(
        "profile_statistics: {weight_entries} weight tensor(s) of {} node(s); activations of {} node(s) over {seen} sample(s) of the {} split",
        weight_nodes.len(),
        act_nodes.len(),
        args.split.as_str()
    );
    let mut r = PassReport::new(PASS, json!({"samples": seen, "split": args.split.as_str(), "nodes": report})).with_text(text);
    r.warnings = warnings;
    Ok(r)
}

/// The names of a node's `software.args` entries.
fn software_args(graph: &Graph, id: NodeId) -> Vec<String> {
    match graph.node(id).meta.software.get("args") {
        Some(Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    }
}
