//! The bridge from a MASE quantize config (the `pass_args` of `quantize_transform_pass`) to
//! [`mase_ir::NodeQuant`]s on a graph.
//!
//! The quantize transform proper belongs to `mase-passes`; a space only needs "apply this config
//! to this graph", so it holds an `Arc<dyn Quantizer>`. [`PassesQuantizer`] is the real transform
//! (every format, every check of the `quantize` pass); [`LocalQuantizer`] is a small stand-in for
//! MASE's `integer`/`fixed` formats that needs no other crate (it also accepts
//! `frac_width > width`, which MASE's integer quantizer computes without complaint).

use crate::space::QUANTIZEABLE_OPS;
use mase_ir::{Graph, NodeQuant, Op, QuantFormat};
use serde_json::Value;

/// Applies a MASE quantize config to a graph, in place.
pub trait Quantizer: Send + Sync {
    /// Quantizes `graph` as `quantize_transform_pass(graph, config)` would. `config` holds `by`,
    /// `default` and per-key entries `{"config": {...}}`. Errors are one line naming the node.
    fn apply(&self, graph: &mut Graph, config: &Value) -> Result<(), String>;
}

/// The number formats of `mase-passes` applied with MASE's rules for sampled configs: each
/// quantizable node takes its own entry (or `default`); the entry groups an op does not take are
/// dropped (a `weight_width` seeded onto a ReLU), as MASE's `parse_node_config` does; every format
/// is read by the quantize pass's own parser and checked by `mase-quant`. (`mase-quant` refuses an
/// integer `frac_width` larger than its width, which MASE's quantizer computes; such a sampled
/// point fails its trial.)
#[derive(Clone, Copy, Debug, Default)]
pub struct PassesQuantizer;

impl Quantizer for PassesQuantizer {
    fn apply(&self, graph: &mut Graph, config: &Value) -> Result<(), String> {
        use mase_passes::quantize::config as qc;
        let by_name = match config.get("by").and_then(Value::as_str) {
            None | Some("name") => true,
            Some("type") => false,
            Some(other) => return Err(format!("quantize: by = `{other}`: sampled configs are applied by name or type")),
        };
        let mut updates = Vec::new();
        for id in graph.ids() {
            let node = graph.node(id);
            let op = mase_passes::select::type_key(node);
            let Some(groups) = qc::op_groups(&op) else { continue };
            if !QUANTIZEABLE_OPS.contains(&op.as_str()) {
                continue;
            }
            let key = if by_name { node.name.as_str() } else { op.as_str() };
            let Some(mut cfg) =
                config.get(key).or_else(|| config.get("default")).and_then(|e| e.get("config")).and_then(Value::as_object).cloned()
            else {
                continue;
            };
            cfg.retain(|k, _| {
                let group = ["data_in", "weight", "bias", "data_out"].into_iter().find(|g| k.starts_with(&format!("{g}_")));
                group.is_none_or(|g| groups.0.contains(&g) || groups.1.contains(&g))
            });
            let err = |r: String| format!("quantize: node `{}`: {r}", node.name);
            let Some(q) = qc::node_quant(node, &op, &cfg, &|_, _| None).map_err(err)? else { continue };
            for f in q.data_in.iter().flatten().chain(q.weight.iter()).chain(q.bias.iter()).chain(q.data_out.iter()) {
                mase_quant::validate_format(f).map_err(|e| err(e.to_string()))?;
            }
            updates.push((id, q));
        }
        for (id, q) in updates {
            graph.node_mut(id).quant = Some(q);
        }
        Ok(())
    }
}

/// MASE's `integer` (alias `fixed`) format only, with `by = "name"` or `"type"`.
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalQuantizer;

impl Quantizer for LocalQuantizer {
    fn apply(&self, graph: &mut Graph, config: &Value) -> Result<(), String> {
        let by = config.get("by").and_then(Value::as_str).unwrap_or("name");
        if by != "name" && by != "type" {
            return Err(format!("quantize: by = `{by}` is not supported here (name or type)"));
        }
        for node in graph.nodes_mut() {
            let op = node.op.mase_op();
            if !QUANTIZEABLE_OPS.contains(&op) {
                continue;
            }
            let key = if by == "name" { node.name.as_str() } else { op };
            let entry = config.get(key).or_else(|| config.get("default"));
            let Some(cfg) = entry.and_then(|e| e.get("config")) else {
                return Err(format!("quantize: no config for node `{}` and no default", node.name));
            };
            let Some(name) = cfg.get("name").and_then(Value::as_str) else { continue };
            if cfg.get("bypass").and_then(Value::as_bool) == Some(true) {
                node.quant = Some(NodeQuant { bypass: true, config: cfg.clone(), ..NodeQuant::default() });
                continue;
            }
            if name != "integer" && name != "fixed" {
                return Err(format!("quantize: node `{}`: format `{name}` needs the quantize transform of mase-passes", node.name));
            }
            let fmt = |prefix: &str| -> Result<Option<QuantFormat>, String> {
                let Some(w) = cfg.get(format!("{prefix}_width")) else { return Ok(None) };
                let width = w
                    .as_u64()
                    .filter(|&w| (1..=32).contains(&w))
                    .ok_or_else(|| format!("quantize: node `{}`: `{prefix}_width` must be an integer in 1..=32, got {w}", node.name))?
                    as u32;
                let frac = match cfg.get(format!("{prefix}_frac_width")) {
                    None | Some(Value::Null) => (width / 2) as i32,
                    Some(f) => f
                        .as_i64()
                        .ok_or_else(|| format!("quantize: node `{}`: `{prefix}_frac_width` must be an integer, got {f}", node.name))?
                        as i32,
                };
                Ok(Some(QuantFormat::Integer { width, frac_width: frac, signed: true }))
            };
            let data_in = fmt("data_in")?;
            let mut q = NodeQuant { config: cfg.clone(), ..NodeQuant::default() };
            match &node.op {
                Op::Linear { bias, .. } => {
                    q.data_in = vec![data_in];
                    q.weight = fmt("weight")?;
                    q.bias = if *bias { fmt("bias")? } else { None };
                }
                Op::Conv1d(c) | Op::Conv2d(c) => {
                    q.data_in = vec![data_in];
                    q.weight = fmt("weight")?;
                    q.bias = if c.bias { fmt("bias")? } else { None };
                }
                Op::MatMul => q.data_in = vec![data_in, fmt("weight")?],
                Op::Add | Op::Sub | Op::Mul => q.data_in = vec![data_in.clone(), data_in],
                _ => q.data_in = vec![data_in],
            }
            node.quant = Some(q);
        }
        Ok(())
    }
}
