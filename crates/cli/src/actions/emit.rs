//! `ch emit --load CKPT -o DIR`: a quantized checkpoint as a streaming Verilog pipeline
//! (doc/hardware.md). The folder gets the RTL, a Verilator testbench, `build.sh`,
//! `manifest.json`, the design (`design.json`) and the checkpoint itself (`model.ckpt`), so
//! that `ch simulate DIR` has the golden model at hand.

use crate::args::EmitArgs;
use crate::config::merge_and_warn;
use crate::output::Human;
use crate::session;
use anyhow::{anyhow, Result};
use mase_hw::{emit, lower, LowerOptions};
use serde_json::{json, Value};

pub fn run(args: &EmitArgs) -> Result<()> {
    let human = Human { json: args.run.json };
    let merged = merge_and_warn(&args.run, &human)?;
    let s = merged.settings;
    let dir = args.output.clone().ok_or_else(|| anyhow!("name the folder to write with -o DIR"))?;
    let path = s.load_name.clone().ok_or_else(|| anyhow!("expected a quantized checkpoint via --load (see `ch transform`)"))?;
    let ck = session::read_checkpoint(&path)?;
    if ck.graph.is_empty() {
        return Err(anyhow!("checkpoint {}: it holds weights but no model; quantize it with `ch transform` first", path.display()));
    }
    let label = ck.meta.get("model").and_then(Value::as_str).unwrap_or("model").to_string();
    let mut opts = LowerOptions { reuse: Vec::new(), default_reuse: args.reuse.unwrap_or(1) };
    for item in &args.reuse_layer {
        let parsed =
            item.split_once('=').and_then(|(n, r)| r.trim().parse::<usize>().ok().filter(|&r| r >= 1).map(|r| (n.trim().to_string(), r)));
        let (node, r) = parsed.ok_or_else(|| anyhow!("--reuse-layer `{item}`: expected NODE=R with R a positive integer"))?;
        if !ck.graph.nodes().iter().any(|n| n.name == node) {
            return Err(anyhow!("--reuse-layer `{item}`: the model has no node `{node}`"));
        }
        opts.reuse.push((node, r));
    }
    if args.reuse == Some(0) {
        return Err(anyhow!("--reuse: expected a positive integer"));
    }
    let design = lower(&ck.graph, &ck.params, &label, &opts)?;
    let manifest = emit(&design, &dir)?;
    mase_io::save_checkpoint(&dir.join("model.ckpt"), &ck)?;
    human.line(format!(
        "{label}: {} layers, input {} x {} bits, output {} x {} bits, latency {} cycles, initiation interval {}",
        design.layers.len(),
        design.input_len(),
        design.input_range().width(),
        design.output_len(),
        design.output_range().width(),
        design.latency(),
        design.initiation_interval()
    ));
    for l in &manifest["layers"].as_array().cloned().unwrap_or_default() {
        human.line(format!(
            "  {:<16} {:>4} -> {:<4} in {:>2} bits  acc {:>2} bits  out {:>2} bits  multipliers {}",
            l["node"].as_str().unwrap_or(""),
            l["in_features"],
            l["out_features"],
            l["product_input_width"],
            l["accumulator_width"],
            l["output_width"],
            l["multipliers"]
        ));
    }
    let est = &manifest["estimate"];
    let n = |k: &str| est[k].as_f64().unwrap_or(0.0);
    human.line(format!(
        "  estimate ({}): {:.0} LUTs, {:.0} FFs, {:.0} DSPs",
        est["model"].as_str().unwrap_or(""),
        n("luts"),
        n("ffs"),
        n("dsps")
    ));
    human.info(format!("wrote {}", dir.display()));
    human.result(&json!({"action": "emit", "model": label, "dir": dir, "manifest": manifest}));
    Ok(())
}
