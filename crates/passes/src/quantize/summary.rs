//! `summarize_quantization` (doc/mase-semantics.md#quantize-summary): the node-by-node comparison of the graph
//! before and after quantization, and the histogram by original type, on the terminal (org
//! table) and as `quantize_table.csv` / `quantize_histogram.csv` in pandas' layout.
//!
//! A quantized node reports the class MASE would have swapped in: `LinearInteger`,
//! `Conv2dBinaryScaling`, `ReLUMinifloatIEEE` for modules, `add_integer`, `mult_integer` for
//! functions. `Changed` compares those names, so a function replaced by its quantized version
//! counts as changed (MASE compares Python types, and two functions have the same type, so it
//! reports them unchanged). A bypassed node counts as changed, as in MASE, which swaps its module
//! too.

use super::config::QUANTIZABLE_OPS;
use crate::metadata::classify::{classify, type_str};
use crate::report::write_file;
use crate::table::{csv_field, Table, TableFormat};
use crate::{PassContext, PassError, PassReport, Result};
use mase_ir::{Graph, Node, NodeKind, NodeQuant};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Arguments of `summarize_quantization`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SummaryArgs {
    /// Folder of the two CSV files (default: `<out_dir>/quantize` when there is an output folder).
    pub save_dir: Option<PathBuf>,
}

/// The format name a node was quantized with: its config's `name`, else its first format.
fn format_name(q: &NodeQuant) -> Option<String> {
    if let Some(n) = q.config.get("name").and_then(Value::as_str) {
        return Some(n.to_string());
    }
    q.data_in
        .iter()
        .flatten()
        .chain(q.weight.iter())
        .chain(q.bias.iter())
        .chain(q.data_out.iter())
        .next()
        .map(|f| f.type_name().to_string())
}

/// MASE's class-name suffix of a format (`LinearMinifloatIEEE`).
fn class_suffix(name: &str) -> String {
    match name {
        "integer" | "fixed" => "Integer".into(),
        "minifloat_denorm" => "MinifloatDenorm".into(),
        "minifloat_ieee" => "MinifloatIEEE".into(),
        "log" => "Log".into(),
        "block_fp" => "BlockFP".into(),
        "block_minifloat" => "BlockMinifloat".into(),
        "block_log" => "BlockLog".into(),
        other => other
            .split('_')
            .map(|w| {
                let mut c = w.chars();
                c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
            })
            .collect(),
    }
}

/// What the node calls after quantization, as MASE names it.
pub fn quantized_type_str(node: &Node) -> String {
    let Some(name) = node.quant.as_ref().and_then(format_name) else { return type_str(node) };
    match node.kind {
        NodeKind::CallModule => {
            let base = node.op.module_class().unwrap_or("Module");
            let mut suffix = class_suffix(&name);
            if suffix == "Binary" && base == "Conv2d" {
                suffix = "BinaryScaling".into();
            }
            format!("{base}{suffix}")
        }
        NodeKind::CallFunction | NodeKind::CallMethod | NodeKind::Placeholder | NodeKind::GetAttr | NodeKind::Output => {
            let f = type_str(node);
            let f = if f == "mul" { "mult".to_string() } else { f };
            let name = if name == "fixed" { "integer".to_string() } else { name };
            format!("{f}_{name}")
        }
    }
}

/// One row of the comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct CompareRow {
    pub ori_name: String,
    pub new_name: String,
    pub mase_type: String,
    pub mase_op: String,
    pub original_type: String,
    pub quantized_type: String,
    pub changed: bool,
}

/// The comparison of two graphs node by node, in order.
pub fn compare(original: &Graph, new: &Graph) -> Vec<CompareRow> {
    original
        .nodes()
        .iter()
        .zip(new.nodes())
        .map(|(o, n)| {
            let (ty, op) = classify(n);
            let ori = quantized_type_str(o);
            let q = quantized_type_str(n);
            CompareRow {
                ori_name: o.name.clone(),
                new_name: n.name.clone(),
                mase_type: n.meta.common.mase_type.clone().unwrap_or_else(|| ty.to_string()),
                mase_op: n.meta.common.mase_op.clone().unwrap_or(op),
                changed: ori != q,
                original_type: type_str(o),
                quantized_type: q,
            }
        })
        .collect()
}

/// One row of the histogram.
#[derive(Clone, Debug, PartialEq)]
pub struct HistRow {
    pub original_type: String,
    pub op: String,
    pub total: usize,
    pub changed: usize,
    pub unchanged: usize,
}

/// Rows grouped by original type, sorted by it (pandas' `groupby`).
pub fn histogram(rows: &[CompareRow]) -> Vec<HistRow> {
    let mut groups: BTreeMap<&str, HistRow> = BTreeMap::new();
    for r in rows {
        let e = groups.entry(&r.original_type).or_insert_with(|| HistRow {
            original_type: r.original_type.clone(),
            op: r.mase_op.clone(),
            total: 0,
            changed: 0,
            unchanged: 0,
        });
        e.total += 1;
        if r.changed {
            e.changed += 1;
        } else {
            e.unchanged += 1;
        }
    }
    groups.into_values().collect()
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// The pass. Needs a `quantize` earlier in the pipeline (it kept the graph before it).
pub fn summarize_quantization(graph: &mut Graph, ctx: &mut PassContext, args: &SummaryArgs) -> Result<PassReport> {
    const PASS: &str = "summarize_quantization";
    let original = ctx.original.as_ref().ok_or_else(|| PassError::MissingMeta {
        pass: PASS.into(),
        node: graph.nodes().first().map(|n| n.name.clone()).unwrap_or_default(),
        what: "graph from before quantization".into(),
        needed: "quantize".into(),
    })?;
    let rows = compare(original, graph);
    let hist = histogram(&rows);
    let mut table = Table::new(["Ori name", "New name", "MASE_TYPE", "Mase_OP", "Original type", "Quantized type", "Changed"]);
    for r in &rows {
        table.push([
            r.ori_name.clone(),
            r.new_name.clone(),
            r.mase_type.clone(),
            r.mase_op.clone(),
            r.original_type.clone(),
            r.quantized_type.clone(),
            py_bool(r.changed).into(),
        ]);
    }
    let mut h = Table::new(["Original type", "OP", "Total", "Changed", "Unchanged"]);
    for r in &hist {
        h.push([r.original_type.clone(), r.op.clone(), r.total.to_string(), r.changed.to_string(), r.unchanged.to_string()]);
    }
    let mut files = Vec::new();
    if let Some(dir) = args.save_dir.clone().or_else(|| ctx.out_dir.as_ref().map(|d| d.join("quantize"))) {
        // pandas' `DataFrame.to_csv`: an unnamed index column first.
        let mut csv = format!(",{}\n", table.headers.iter().map(|c| csv_field(c)).collect::<Vec<_>>().join(","));
        for (i, r) in table.rows.iter().enumerate() {
            csv += &format!("{i},{}\n", r.iter().map(|c| csv_field(c)).collect::<Vec<_>>().join(","));
        }
        files.push(write_file(&dir.join("quantize_table.csv"), &csv)?);
        files.push(write_file(&dir.join("quantize_histogram.csv"), &h.to_csv())?);
    }
    let quantizable = rows.iter().filter(|r| QUANTIZABLE_OPS.contains(&r.mase_op.as_str())).count();
    let json_rows: Vec<Value> = rows
        .iter()
        .map(|r| json!({"ori_name": r.ori_name, "new_name": r.new_name, "mase_type": r.mase_type, "mase_op": r.mase_op, "original_type": r.original_type, "quantized_type": r.quantized_type, "changed": r.changed}))
        .collect();
    let json_hist: Vec<Value> = hist
        .iter()
        .map(|r| json!({"original_type": r.original_type, "op": r.op, "total": r.total, "changed": r.changed, "unchanged": r.unchanged}))
        .collect();
    let text = format!("Quantized graph histogram:\n{}", h.render(TableFormat::Orgtbl));
    let mut r = PassReport::new(PASS, json!({"table": json_rows, "histogram": json_hist, "quantizable_nodes": quantizable, "compare_table": table.render(TableFormat::Orgtbl)})).with_text(text);
    r.files = files;
    Ok(r)
}
