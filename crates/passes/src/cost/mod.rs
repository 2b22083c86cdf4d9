//! Cost passes: `flops` (operations, parameters and memory traffic per node and in total),
//! `bitops` (operations weighted by operand widths, traffic and model size in bits) and
//! `latency` (measured time per node on this machine).

pub mod count;
pub mod latency;

use crate::metadata::common::{batched, infer};
use crate::select::type_key;
use crate::table::{Table, TableFormat};
use crate::{PassContext, PassError, PassReport, Result};
use count::{node_cost, NodeCost};
use mase_ir::{Graph, NodeKind};
use serde::Deserialize;
use serde_json::{json, Value};

/// Arguments of `flops` and `bitops`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CostArgs {
    /// Samples per inference the totals are given for (default 1, as MASE's estimator).
    pub batch_size: Option<usize>,
}

/// Counts of every node for one sample, in graph order, with the node's name and type.
pub fn graph_costs(pass: &str, graph: &Graph, ctx: &PassContext) -> Result<Vec<(String, String, NodeCost)>> {
    let samples = ctx.sample_shapes(graph).ok_or_else(|| PassError::NoData {
        pass: pass.into(),
        reason: "the input shape is unknown: give a data set or run add_common_metadata on a graph with a known input".into(),
    })?;
    let values = infer(graph, ctx, &batched(1, &samples))?;
    Ok(graph
        .nodes()
        .iter()
        .zip(&values)
        .filter(|(n, _)| !matches!(n.kind, NodeKind::Placeholder | NodeKind::Output | NodeKind::GetAttr))
        .map(|(n, v)| (n.name.clone(), type_key(n), node_cost(n, &values, v)))
        .collect())
}

fn fmt_count(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{}", x as i64)
    } else {
        format!("{x}")
    }
}

/// The batch the counts are for: `batch_size`, at least 1 (1 when not given).
fn batch_size(args: &CostArgs) -> u64 {
    args.batch_size.unwrap_or(1).max(1) as u64
}

/// `flops`: forward and backward FLOPs, parameters and memory traffic.
pub fn flops(graph: &mut Graph, ctx: &mut PassContext, args: &CostArgs) -> Result<PassReport> {
    const PASS: &str = "flops";
    let costs = graph_costs(PASS, graph, ctx)?;
    let b = batch_size(args);
    let mut t = Table::new(["Node name", "Mase op", "FLOPs", "Backward FLOPs", "Params", "Buffers", "In elements", "Out elements"]);
    let mut nodes = Vec::new();
    let (mut f, mut bf, mut p, mut bu, mut ie, mut oe) = (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    for (name, op, c) in &costs {
        t.push([
            name.clone(),
            op.clone(),
            (c.flops * b).to_string(),
            (c.backward_flops * b).to_string(),
            c.params.to_string(),
            c.buffers.to_string(),
            (c.input_elements * b).to_string(),
            (c.output_elements * b).to_string(),
        ]);
        nodes.push(json!({"name": name, "mase_op": op, "flops": c.flops * b, "backward_flops": c.backward_flops * b, "params": c.params, "buffers": c.buffers,
            "input_elements": c.input_elements * b, "output_elements": c.output_elements * b}));
        f += c.flops * b;
        bf += c.backward_flops * b;
        p += c.params;
        bu += c.buffers;
        ie += c.input_elements * b;
        oe += c.output_elements * b;
    }
    t.push([
        "total".to_string(),
        String::new(),
        f.to_string(),
        bf.to_string(),
        p.to_string(),
        bu.to_string(),
        ie.to_string(),
        oe.to_string(),
    ]);
    let total = json!({"flops": f, "backward_flops": bf, "params": p, "buffers": bu, "input_elements": ie, "output_elements": oe, "memory_elements": ie + oe + p + bu});
    let text = format!("FLOPs for a batch of {b}:\n{}", t.render(TableFormat::Simple));
    Ok(PassReport::new(PASS, json!({"batch_size": b, "nodes": nodes, "total": total})).with_text(text))
}

/// `bitops`: BitOPs, memory traffic in bits, model size in bits and average widths.
pub fn bitops(graph: &mut Graph, ctx: &mut PassContext, args: &CostArgs) -> Result<PassReport> {
    const PASS: &str = "bitops";
    let costs = graph_costs(PASS, graph, ctx)?;
    let b = batch_size(args) as f64;
    let mut t = Table::new(["Node name", "Mase op", "Data in bits", "Weight bits", "BitOPs", "In bits", "Out bits", "Param bits"]);
    let mut nodes = Vec::new();
    let (mut bo, mut ib, mut ob, mut pb, mut wsum, mut wn, mut dsum, mut dn) = (0f64, 0f64, 0f64, 0f64, 0f64, 0f64, 0f64, 0f64);
    for (name, op, c) in &costs {
        let w = c.weight_width.map_or(String::new(), fmt_count);
        t.push([
            name.clone(),
            op.clone(),
            fmt_count(c.data_in_width),
            w,
            fmt_count(c.bitops * b),
            fmt_count(c.input_bits * b),
            fmt_count(c.output_bits * b),
            fmt_count(c.param_bits),
        ]);
        nodes.push(
            json!({"name": name, "mase_op": op, "data_in_width": c.data_in_width, "weight_width": c.weight_width, "bitops": c.bitops * b,
            "input_bits": c.input_bits * b, "output_bits": c.output_bits * b, "param_bits": c.param_bits}),
        );
        bo += c.bitops * b;
        ib += c.input_bits * b;
        ob += c.output_bits * b;
        pb += c.param_bits;
        // Average widths over the weights and inputs of layers with weights (MASE's
        // calculate_avg_bits, with the width rather than the sum of the precision list).
        if let Some(ww) = c.weight_width {
            let wcount = if c.params > 0 { c.params as f64 } else { 1.0 };
            wsum += ww * wcount;
            wn += wcount;
            dsum += c.data_in_width * c.input_elements as f64;
            dn += c.input_elements as f64;
        }
    }
    t.push(["total".to_string(), String::new(), String::new(), String::new(), fmt_count(bo), fmt_count(ib), fmt_count(ob), fmt_count(pb)]);
    let avg = |s: f64, n: f64| if n > 0.0 { Value::from(s / n) } else { Value::Null };
    let total = json!({"bitops": bo, "input_bits": ib, "output_bits": ob, "model_size_bits": pb, "w_avg_bit": avg(wsum, wn), "data_avg_bit": avg(dsum, dn)});
    let text = format!("BitOPs for a batch of {b}:\n{}\nmodel size: {} bits", t.render(TableFormat::Simple), fmt_count(pb));
    Ok(PassReport::new(PASS, json!({"batch_size": b, "nodes": nodes, "total": total})).with_text(text))
}
