//! `verify_quantization` (lab 2 task 6 as a pass): evidence that quantization did what the config
//! says.
//!
//! 1. Grid: every parameter a node quantizes is quantized with its format, and each resulting value
//!    is checked to be representable in that format (and inside its range); the report counts the
//!    values off the grid (zero when all is well), the distinct levels used and the largest
//!    rounding error.
//! 2. Values: the first `num_values` float and quantized weights of the chosen nodes, side by side.
//! 3. Outputs: one batch through the quantized graph and through the same graph without
//!    quantization; the largest and mean absolute output difference, how often the arg-max
//!    agrees, and both accuracies when the batch has labels.

use super::config::describe;
use crate::metadata::precision::active_quant;
use crate::table::{Table, TableFormat};
use crate::{PassContext, PassError, PassReport, Result, Split};
use mase_ir::{Graph, Rng};
use mase_runtime::{ExecOptions, Executor, Mode};
use serde::Deserialize;
use serde_json::{json, Value};

/// Arguments of `verify_quantization`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifyArgs {
    /// Nodes whose values to show (default: every node with a quantized weight).
    pub nodes: Option<Vec<String>>,
    /// Values shown per node (default 8).
    pub num_values: Option<usize>,
    /// Samples in the output comparison (default 256; 0 skips it).
    pub num_samples: Option<usize>,
    /// Split of the samples (default `test`).
    pub split: Option<Split>,
}

/// The pass.
pub fn verify_quantization(graph: &mut Graph, ctx: &mut PassContext, args: &VerifyArgs) -> Result<PassReport> {
    const PASS: &str = "verify_quantization";
    let shown: Vec<String> = match &args.nodes {
        Some(names) => {
            for n in names {
                graph.require(n).map_err(|_| PassError::UnknownNode { pass: PASS.into(), node: n.clone() })?;
            }
            names.clone()
        }
        None => graph.nodes().iter().filter(|n| active_quant(n).is_some_and(|q| q.weight.is_some())).map(|n| n.name.clone()).collect(),
    };
    let k = args.num_values.unwrap_or(8);

    let mut grid = Table::new(["Node name", "Tensor", "Format", "Values", "Off grid", "Levels", "Max |w - q(w)|"]);
    let mut grid_json = Vec::new();
    let mut values_text = String::new();
    let mut values_json = serde_json::Map::new();
    let mut off_total = 0usize;
    for n in graph.nodes() {
        let Some(q) = active_quant(n) else { continue };
        for (tensor, fmt) in [("weight", q.weight.as_ref()), ("bias", q.bias.as_ref())] {
            let Some(fmt) = fmt else { continue };
            let name = format!("{}.{tensor}", n.target);
            let w = ctx.params.require(&name)?;
            let qerr = |e: mase_quant::QuantError| PassError::node_cause(PASS, &n.name, tensor, e);
            let mut qw = vec![0f32; w.data.len()];
            // Stochastic formats draw from a stream of their own, so the check is reproducible.
            mase_quant::quantize(fmt, &w.data, &w.shape, &mut qw, &mut Rng::new(ctx.seed)).map_err(qerr)?;
            let off = mase_quant::on_grid(fmt, &qw, &w.shape).map_err(qerr)?.len();
            off_total += off;
            let mut levels: Vec<u32> = qw.iter().map(|v| v.to_bits()).collect();
            levels.sort_unstable();
            levels.dedup();
            let err = w.data.iter().zip(&qw).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
            grid.push([
                n.name.clone(),
                tensor.to_string(),
                describe(fmt),
                w.data.len().to_string(),
                off.to_string(),
                levels.len().to_string(),
                format!("{err:.6}"),
            ]);
            grid_json.push(json!({"node": n.name, "tensor": tensor, "format": describe(fmt), "checked": true, "values": w.data.len(), "off_grid": off, "levels": levels.len(), "max_abs_error": err}));
            if tensor == "weight" && shown.contains(&n.name) {
                let f: Vec<f32> = w.data.iter().take(k).copied().collect();
                let qv: Vec<f32> = qw.iter().take(k).copied().collect();
                values_text += &format!("{} weight, float:     {f:?}\n{} weight, quantized: {qv:?}\n", n.name, n.name);
                values_json.insert(n.name.clone(), json!({"float": f, "quantized": qv, "format": describe(fmt)}));
            }
        }
    }

    let samples = args.num_samples.unwrap_or(256);
    let mut outputs = Value::Null;
    let mut out_text = String::new();
    if samples > 0 {
        let batches = ctx.batches(PASS, graph, args.split.unwrap_or(Split::Test), samples, ctx.batch_size.max(samples))?;
        let mut float_graph = graph.clone();
        for n in float_graph.nodes_mut() {
            n.quant = None;
        }
        let opts = ExecOptions { threads: ctx.threads, seed: ctx.seed };
        let mut eq = Executor::new(graph, &ctx.params, opts)?;
        let mut ef = Executor::new(&float_graph, &ctx.params, opts)?;
        let (mut max_diff, mut sum_diff, mut count, mut agree, mut n, mut acc_q, mut acc_f) =
            (0f32, 0f64, 0usize, 0usize, 0usize, 0usize, 0usize);
        for b in &batches {
            let yq = eq.forward(&b.x, &b.shape, Mode::Eval)?.to_vec();
            let yf = ef.forward(&b.x, &b.shape, Mode::Eval)?.to_vec();
            for (a, c) in yq.iter().zip(&yf) {
                let d = (a - c).abs();
                max_diff = max_diff.max(d);
                sum_diff += d as f64;
                count += 1;
            }
            let rows = b.shape[0];
            let classes = yq.len() / rows.max(1);
            for i in 0..rows {
                let am = |y: &[f32]| y.iter().enumerate().fold((0, f32::NEG_INFINITY), |m, (j, &v)| if v > m.1 { (j, v) } else { m }).0;
                let (pq, pf) = (am(&yq[i * classes..(i + 1) * classes]), am(&yf[i * classes..(i + 1) * classes]));
                agree += (pq == pf) as usize;
                if let Some(&l) = b.labels.get(i) {
                    acc_q += (pq == l as usize) as usize;
                    acc_f += (pf == l as usize) as usize;
                }
                n += 1;
            }
        }
        let labelled = batches.iter().all(|b| !b.labels.is_empty());
        let mean = if count > 0 { sum_diff / count as f64 } else { 0.0 };
        let frac = |x: usize| if n > 0 { x as f64 / n as f64 } else { 0.0 };
        outputs = json!({"samples": n, "max_abs_diff": max_diff, "mean_abs_diff": mean, "argmax_agreement": frac(agree),
            "accuracy_quantized": if labelled { json!(frac(acc_q)) } else { Value::Null }, "accuracy_float": if labelled { json!(frac(acc_f)) } else { Value::Null }});
        out_text = format!(
            "outputs on {n} samples: max |quantized - float| = {max_diff:.6}, mean = {mean:.6}, arg-max agreement {:.4}",
            frac(agree)
        );
        if labelled {
            out_text += &format!(", accuracy quantized {:.4} vs float {:.4}", frac(acc_q), frac(acc_f));
        }
    }
    let text = format!(
        "Quantized parameters on their grid ({off_total} value(s) off grid):\n{}\n{values_text}{out_text}",
        grid.render(TableFormat::Simple)
    );
    Ok(PassReport::new(PASS, json!({"off_grid": off_total, "grid": grid_json, "values": values_json, "outputs": outputs}))
        .with_text(text.trim_end().to_string()))
}
