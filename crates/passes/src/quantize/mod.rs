//! The `quantize` transform (doc/mase-semantics.md#quantize-transform): sets `node.quant` on the nodes a config
//! selects, checks every format, and updates the metadata.
//!
//! Arguments (MASE's `pass_args`, a `[passes.quantize]` table):
//! ```toml
//! [passes.quantize]
//! by = "type"                  # or "name", "regex_name"
//! [passes.quantize.default.config]
//! name = "NA"                  # nodes no key selects stay in float
//! [passes.quantize.linear.config]
//! name = "integer"
//! data_in_width = 8
//! data_in_frac_width = 4
//! ...
//! ```
//! Precedence: the first key in the table's order that selects a node applies (for `type` and
//! `name` at most one can), else `default`, else the node stays as it is. `report = true` is
//! accepted (MASE's test configs carry it). Departures from MASE, each a fix: the arguments are
//! not mutated; with `regex_name`, `default` and `report` are not patterns; a name that is no node,
//! a pattern that matches no node, a type no op has, an unknown format, an unknown key or a bad
//! width is an error naming it; naming a node that cannot be quantized is an error; the output
//! formats are propagated into the metadata. An extension: `batch_norm1d`/`batch_norm2d` nodes,
//! which MASE does not quantize, are quantized where a `type` or `name` key names them (never
//! through `default` or a `regex_name` pattern), with `data_in` and optional `weight`, `bias` and `data_out` groups; missing
//! `integer` weight and bias formats are derived from the values (for the affine
//! `fold_batch_norm` leaves). Another: an entry may hold a `hardware` table beside its `config`
//! (`reuse_factor = R`, a positive integer), as the entries of a hardware search's
//! `sampled_config` do; the nodes the entry selects get it in their hardware metadata
//! (`hardware.reuse_factor`), where `ch emit` and `emit_verilog` read each layer's reuse factor.

pub mod config;
pub mod summary;
pub mod verify;

use crate::keyed::{entry_config, parse_by, ChangeableOps, Keyed};
use crate::metadata::common::refresh;
use crate::select::By;
use crate::table::{Table, TableFormat};
use crate::{PassContext, PassError, PassReport, Result};
use config::{describe, node_quant, QUANTIZABLE_BY_KEY, QUANTIZABLE_OPS};
use indexmap::IndexMap;
use mase_ir::{Graph, NodeQuant, Op, ParamStore, QuantFormat};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// Parsed arguments of `quantize`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "Map<String, Value>")]
pub struct QuantizeArgs {
    pub by: By,
    /// The `default.config` table, if any.
    pub default: Option<Map<String, Value>>,
    /// Selector key (op type, node name or pattern) to its `config` table, in order.
    pub entries: IndexMap<String, Map<String, Value>>,
    /// Selector key (or `default`) to its `hardware` table, for the entries that have one.
    pub hardware: IndexMap<String, Map<String, Value>>,
}

/// The keys an entry's `hardware` table may hold.
const HARDWARE_KEYS: &[&str] = &["reuse_factor"];

/// Splits an entry into its `config` table and its `hardware` table (checked: known keys, each
/// a positive integer).
fn entry_parts(key: &str, v: &Value) -> std::result::Result<(Map<String, Value>, Option<Map<String, Value>>), String> {
    let Value::Object(t) = v else { return Err(format!("`{key}` must be a table with a `config` table, got {v}")) };
    let mut rest = t.clone();
    let hardware = match rest.remove("hardware") {
        None => None,
        Some(Value::Object(hw)) => {
            for (k, x) in &hw {
                if !HARDWARE_KEYS.contains(&k.as_str()) {
                    return Err(format!("`{key}.hardware.{k}`: unknown key (expected one of: {})", HARDWARE_KEYS.join(", ")));
                }
                if x.as_u64().filter(|&r| r > 0).is_none() {
                    return Err(format!("`{key}.hardware.{k}`: expected a positive integer, got {x}"));
                }
            }
            Some(hw)
        }
        Some(other) => return Err(format!("`{key}.hardware` must be a table such as {{ reuse_factor = 4 }}, got {other}")),
    };
    let config = entry_config(key, &Value::Object(rest))?.clone();
    Ok((config, hardware))
}

impl TryFrom<Map<String, Value>> for QuantizeArgs {
    type Error = String;

    fn try_from(m: Map<String, Value>) -> std::result::Result<QuantizeArgs, String> {
        let by = parse_by(&m)?;
        let mut default = None;
        let mut entries = IndexMap::new();
        let mut hardware = IndexMap::new();
        for (k, v) in &m {
            match k.as_str() {
                "by" => {}
                "report" if v.is_boolean() => {}
                "baseline_weight_path" | "load_type" => return Err(format!("`{k}`: LogicNets baselines are not supported by mase-rs")),
                _ => {
                    let (config, hw) = entry_parts(k, v)?;
                    if let Some(hw) = hw {
                        hardware.insert(k.clone(), hw);
                    }
                    if k == "default" {
                        default = Some(config);
                    } else {
                        entries.insert(k.clone(), config);
                    }
                }
            }
        }
        Ok(QuantizeArgs { by, default, entries, hardware })
    }
}

/// How one node was quantized (for `ch transform --explain` and the report).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeChoice {
    pub node: String,
    pub mase_op: String,
    /// The key that selected the node, or `default`.
    pub selected_by: String,
    /// The config as written.
    pub config: Value,
    /// The resulting quantization (`None`: the node is left as it was, `name = "NA"`).
    pub quant: Option<NodeQuant>,
}

/// The nodes `quantize` can change, and the words its errors use for them.
const QUANTIZABLE: ChangeableOps = ChangeableOps {
    ops: &QUANTIZABLE_OPS,
    by_key_only: &QUANTIZABLE_BY_KEY,
    key_noun: "ops",
    action_done: "quantized",
    list_heading: "quantizable",
};

/// Sets `node.quant` on every node the arguments select, without a context: the transform that
/// search and other callers reuse. Metadata is not touched (the pass refreshes it). On an error
/// the graph is unchanged.
pub fn quantize_graph(graph: &mut Graph, args: &QuantizeArgs) -> Result<(Vec<NodeChoice>, Vec<String>)> {
    const PASS: &str = "quantize";
    let (keyed, mut warnings) = Keyed::new(PASS, graph, args.by, &args.entries, args.default.as_ref(), &QUANTIZABLE)?;
    let mut choices = Vec::new();
    let mut used = vec![false; args.entries.len()];
    let mut updates = Vec::new();
    for id in graph.ids().collect::<Vec<_>>() {
        let node = graph.node(id);
        let Some(pick) = keyed.pick(node)? else { continue };
        let (op, cfg) = (pick.op, pick.config);
        let selected_by = pick.key.unwrap_or("default").to_string();
        if let Some(i) = pick.key.and_then(|k| args.entries.get_index_of(k)) {
            used[i] = true;
        }
        let software = node.meta.software.clone();
        let stats = move |entry: &str, stat: &str| -> Option<f64> {
            let s = software.get("args")?.get(entry)?.get("stat")?;
            let v = match stat {
                "abs_mean" => s.get("abs_mean")?.get("abs_mean")?,
                "median" => s.get("range_quantile")?.get("max")?,
                _ => s.get("range_min_max")?.get("max")?,
            };
            v.as_f64()
        };
        let err = |reason: String| PassError::Node {
            pass: PASS.into(),
            node: node.name.clone(),
            reason: format!("config `{selected_by}`: {reason}"),
        };
        let q = node_quant(node, &op, cfg, &stats).map_err(err)?;
        if let Some(q) = &q {
            let formats = q.data_in.iter().flatten().chain(q.weight.iter()).chain(q.bias.iter()).chain(q.data_out.iter());
            for f in formats {
                mase_quant::lint_format(f).map_err(|e| PassError::node_cause(PASS, &node.name, format!("config `{selected_by}`"), e))?;
            }
        }
        choices.push(NodeChoice {
            node: node.name.clone(),
            mase_op: op,
            selected_by,
            config: Value::Object(cfg.clone()),
            quant: q.clone(),
        });
        let hardware = args.hardware.get(pick.key.unwrap_or("default")).cloned();
        updates.push((id, q, hardware));
    }
    // Formats are set only once every node's config has been read and checked, so a bad config
    // leaves the graph as it was.
    for (id, q, hardware) in updates {
        let node = graph.node_mut(id);
        if let Some(q) = q {
            node.quant = Some(q);
        }
        for (k, v) in hardware.into_iter().flatten() {
            node.meta.hardware.insert(k, v);
        }
    }
    if args.by == By::RegexName {
        for (k, _) in args.entries.keys().zip(&used).filter(|(_, u)| !**u) {
            warnings.push(format!("quantize: pattern `{k}` selects no quantizable node (or only nodes an earlier pattern took)"));
        }
    }
    Ok((choices, warnings))
}

/// [`quantize_graph`] with MASE's `pass_args` as JSON (`{"by": ..., "default": {"config": ...},
/// "<key>": {"config": ...}}`), for callers that hold a config rather than parsed arguments.
pub fn quantize_json(graph: &mut Graph, args: &Value) -> Result<(Vec<NodeChoice>, Vec<String>)> {
    let a: QuantizeArgs = crate::parse_args("quantize", args)?;
    quantize_graph(graph, &a)
}

/// The resolved config of every quantizable node, as a table.
pub fn explain_table(choices: &[NodeChoice]) -> Table {
    let mut t = Table::new(["Node name", "Mase op", "Selected by", "Format", "data_in", "weight", "bias", "data_out"]);
    let fmt = |f: Option<&mase_ir::QuantFormat>| f.map_or("-".to_string(), describe);
    for c in choices {
        // The format's name, then its data_in, weight, bias and data_out formats.
        let formats: [String; 5] = match &c.quant {
            None => ["NA (float)".into(), "-".into(), "-".into(), "-".into(), "-".into()],
            Some(q) if q.bypass => ["bypass (float)".into(), "-".into(), "-".into(), "-".into(), "-".into()],
            Some(q) => {
                let name = c.config.get("name").and_then(Value::as_str).unwrap_or("").to_string();
                let ins: Vec<String> = q.data_in.iter().map(|f| fmt(f.as_ref())).collect();
                [name, ins.join("; "), fmt(q.weight.as_ref()), fmt(q.bias.as_ref()), fmt(q.data_out.as_ref())]
            }
        };
        let mut row = vec![c.node.clone(), c.mase_op.clone(), c.selected_by.clone()];
        row.extend(formats);
        t.push(row);
    }
    t
}

/// The pass: [`quantize_graph`], then the metadata refresh. The graph before the first
/// quantize of a pipeline is kept in the context for `summarize_quantization`.
pub fn quantize(graph: &mut Graph, ctx: &mut PassContext, args: &QuantizeArgs) -> Result<PassReport> {
    if ctx.original.is_none() {
        ctx.original = Some(graph.clone());
    }
    let (mut choices, warnings) = quantize_graph(graph, args)?;
    derive_batch_norm_formats(graph, &ctx.params, &mut choices);
    refresh(graph, ctx)?;
    let changed = choices.iter().filter(|c| c.quant.is_some()).count();
    let text = explain_table(&choices).render(TableFormat::Simple);
    let mut r = PassReport::new("quantize", json!({"by": args.by.as_str(), "quantized": changed, "nodes": choices})).with_text(text);
    r.warnings = warnings;
    Ok(r)
}

/// A batch norm given an `integer` `data_in` format but no weight or bias format gets them from
/// its values: the `data_in` width, with the most fraction bits that keep the largest magnitude
/// in range (so no value clamps). With `fold_batch_norm` first, the values are the affine's
/// `s_c` and `t_c`.
fn derive_batch_norm_formats(graph: &mut Graph, params: &ParamStore, choices: &mut [NodeChoice]) {
    for c in choices.iter_mut() {
        let Some(id) = graph.find(&c.node) else { continue };
        let node = graph.node_mut(id);
        if !matches!(node.op, Op::BatchNorm1d(_) | Op::BatchNorm2d(_)) {
            continue;
        }
        let target = node.target.clone();
        let Some(q) = node.quant.as_mut().filter(|q| !q.bypass) else { continue };
        let Some(Some(QuantFormat::Integer { width, .. })) = q.data_in.first().cloned() else { continue };
        let derive = |name: &str| {
            let t = params.get(&format!("{target}.{name}"))?;
            let max = t.data.iter().fold(0f64, |m, &v| m.max(f64::from(v).abs()));
            Some(QuantFormat::Integer { width, frac_width: frac_for(max, width), signed: true })
        };
        if q.weight.is_none() {
            q.weight = derive("weight");
        }
        if q.bias.is_none() {
            q.bias = derive("bias");
        }
        c.quant = Some(q.clone());
    }
}

/// The most fraction bits of a signed `width`-bit format whose largest code holds `max`.
pub fn frac_for(max: f64, width: u32) -> i32 {
    let hi = 2f64.powi(width as i32 - 1) - 1.0;
    if max == 0.0 || !max.is_finite() {
        return width as i32 - 1;
    }
    (-64..=64).rev().find(|&f| (max * 2f64.powi(f)).round_ties_even() <= hi).unwrap_or(-64)
}
