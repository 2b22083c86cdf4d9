//! `ch analyze MODEL [DATASET] [--load CKPT] --report graph,meta,...`: the analysis passes
//! without writing a TOML. The model gets its metadata first; each report is one pass (two for
//! `meta`, which adds the hardware metadata it shows). Reports are printed in the order asked
//! and written as JSON (and text where they have it) under `<project>/software/analyze/`.

use super::transform::{context, prepare, run_named, write_report};
use crate::args::AnalyzeArgs;
use crate::config::merge_on_cpu;
use crate::output::{Human, ProjectDirs};
use anyhow::{bail, Result};
use mase_ir::Graph;
use mase_passes::select::type_key;
use mase_passes::table::{Table, TableFormat};
use serde_json::{json, Map, Value};

/// The reports `--report` takes, and what each shows.
const REPORTS: &[(&str, &str)] = &[
    ("graph", "graph listing, node counts per fx op, layer types"),
    ("meta", "grid table of common, hardware and software metadata"),
    ("type", "mase type and op of every node"),
    ("shape", "input and output shapes of every node"),
    ("stats", "weight and activation statistics (range, quantiles, variance)"),
    ("flops", "FLOPs, parameters and memory traffic per node"),
    ("bitops", "BitOPs, traffic and model size in bits"),
    ("latency", "measured time per node on this machine"),
    ("verify", "quantized weights on their grid, float vs quantized outputs"),
];

/// `profile_statistics` arguments in the spirit of MASE's lab 2: weights of the layers that have
/// them, inputs of those layers and of the ReLUs.
fn stats_args(graph: &Graph, num_samples: usize) -> Value {
    let present = |t: &str| graph.nodes().iter().any(|n| type_key(n) == t);
    let weights: Vec<&str> = ["linear", "conv1d", "conv2d"].into_iter().filter(|t| present(t)).collect();
    let mut acts = weights.clone();
    if present("relu") {
        acts.push("relu");
    }
    json!({
        "by": "type",
        "target_weight_nodes": weights,
        "target_activation_nodes": acts,
        "weight_statistics": {"variance_precise": {"dims": "all"}, "range_min_max": {"dims": "all"}},
        "activation_statistics": {"range_min_max": {"dims": "all"}, "range_quantile": {"dims": "all", "quantile": 0.97}},
        "num_samples": num_samples,
    })
}

/// One line per statistic: `min=-1.2 max=3.4 ...`.
fn stats_table(report: &Value) -> String {
    let mut t = Table::new(["Node name", "Tensor", "Statistic", "Values"]);
    let num = |v: &Value| match v.as_f64() {
        Some(x) if v.is_f64() => format!("{x:.6}"),
        _ => v.to_string(),
    };
    if let Some(nodes) = report["nodes"].as_object() {
        for (node, entries) in nodes {
            for (entry, stats) in entries.as_object().into_iter().flatten() {
                for (stat, values) in stats.as_object().into_iter().flatten() {
                    let cells: Vec<String> = values.as_object().into_iter().flatten().map(|(k, v)| format!("{k}={}", num(v))).collect();
                    t.push([node.clone(), entry.clone(), stat.clone(), cells.join(" ")]);
                }
            }
        }
    }
    t.render(TableFormat::Simple)
}

pub fn run(args: &AnalyzeArgs) -> Result<()> {
    let human = Human { json: args.run.json };
    let merged = merge_on_cpu(&args.run, &human, "analyze")?;
    let s = merged.settings;
    let wanted: Vec<String> =
        if args.report.is_empty() { vec!["graph".into()] } else { args.report.iter().map(|r| r.trim().to_lowercase()).collect() };
    for r in &wanted {
        if !REPORTS.iter().any(|(n, _)| n == r) {
            let known: Vec<String> = REPORTS.iter().map(|(n, d)| format!("{n} ({d})")).collect();
            bail!("unknown report `{r}`; known: {}", known.join(", "));
        }
    }
    let mut p = prepare(&s, &args.spec)?;
    let dataset = p.dataset.clone().unwrap_or_else(|| "none".into());
    let dirs = ProjectDirs::new(&s.project_dir, s.project.as_deref(), &p.label, &s.task, &dataset);
    let out = dirs.software().join("analyze");
    let label = p.label.clone();
    let mut graph = std::mem::take(&mut p.graph);
    let mut ctx = context(&s, &mut p, out.clone());
    for setup in ["init_metadata", "add_common_metadata", "add_software_metadata"] {
        run_named(setup, &mut graph, &mut ctx, &Value::Null)?;
    }
    let mut results = Map::new();
    for r in &wanted {
        let (pass, pass_args) = match r.as_str() {
            "graph" => ("report_graph", json!({})),
            "meta" => {
                run_named("add_hardware_metadata", &mut graph, &mut ctx, &Value::Null)?;
                ("report_node_meta_param", json!({}))
            }
            "type" => ("report_node_type", json!({})),
            "shape" => ("report_node_shape", json!({})),
            "stats" => ("profile_statistics", stats_args(&graph, args.num_samples.unwrap_or(32))),
            "verify" => ("verify_quantization", json!({"num_samples": args.num_samples.unwrap_or(256)})),
            other => (other, json!({})),
        };
        let rep = run_named(pass, &mut graph, &mut ctx, &pass_args)?;
        for w in &rep.warnings {
            human.warn(w);
        }
        let text = if r == "stats" { format!("{}\n{}", rep.text, stats_table(&rep.json)) } else { rep.text.clone() };
        human.line(&text);
        write_report(&out, pass, &rep)?;
        results.insert(r.clone(), rep.json);
    }
    human.result(&json!({"action": "analyze", "model": label, "dataset": p.dataset, "reports": results}));
    Ok(())
}
