//! `ch emit --load CKPT -o DIR`: a quantized checkpoint (or `--model-file M.onnx`, a QONNX model
//! with its formats) as a streaming Verilog pipeline (doc/hardware.md). The folder gets the RTL, a Verilator testbench, `build.sh`,
//! `manifest.json`, the design (`design.json`) and the checkpoint itself (`model.ckpt`), so
//! that `ch simulate DIR` has the golden model at hand. A layer's reuse factor is the one
//! `--reuse-layer` names, else its node's `hardware.reuse_factor` metadata (a `quantize` entry's
//! `hardware` table, as a hardware search's `best.json` writes it), else `--reuse`; with
//! `--part`, the one that fits the design to the part at the smallest initiation interval.

use crate::args::EmitArgs;
use crate::config::merge_on_cpu;
use crate::hw_pass::{fill_named, fit_json, fit_line, lower_options, multipliers_named, part_named, summary_lines, write_design, Build};
use crate::output::Human;
use crate::session;
use anyhow::{anyhow, Result};
use serde_json::{json, Value};

pub fn run(args: &EmitArgs) -> Result<()> {
    let human = Human { json: args.run.json };
    let merged = merge_on_cpu(&args.run, &human, "emit")?;
    let s = merged.settings;
    let dir = args.output.clone().ok_or_else(|| anyhow!("name the folder to write with -o DIR"))?;
    // A quantized checkpoint (`--load`), else a QONNX model file with its formats (FINN's TFC).
    let (path, ck) = match (s.load_name.clone(), session::onnx_model_file(&s)) {
        (Some(path), _) => {
            let ck = session::read_checkpoint(&path)?;
            (path, ck)
        }
        (None, Some(onnx)) => {
            let m = session::import_onnx(&onnx)?;
            let label = onnx.file_stem().and_then(|x| x.to_str()).unwrap_or("model").to_string();
            // The data set named on the command line is recorded for `ch simulate`.
            let meta = match &s.dataset {
                Some(d) => json!({ "model": label, "dataset": d }),
                None => json!({ "model": label }),
            };
            (onnx, mase_io::Checkpoint { graph: m.graph, params: m.params, optimizer_tensors: Vec::new(), meta })
        }
        (None, None) => return Err(session::no_weights(&s, "a quantized checkpoint (see `ch transform`)")),
    };
    if ck.graph.is_empty() {
        return Err(anyhow!("checkpoint {}: it holds weights but no model; quantize it with `ch transform` first", path.display()));
    }
    let label = ck.meta.get("model").and_then(Value::as_str).unwrap_or("model").to_string();
    if args.reuse == Some(0) {
        return Err(anyhow!("--reuse: expected a positive integer"));
    }
    let mut layers = Vec::new();
    for item in &args.reuse_layer {
        let parsed =
            item.split_once('=').and_then(|(n, r)| r.trim().parse::<usize>().ok().filter(|&r| r >= 1).map(|r| (n.trim().to_string(), r)));
        let (node, r) = parsed.ok_or_else(|| anyhow!("--reuse-layer `{item}`: expected NODE=R with R a positive integer"))?;
        layers.push((node, r));
    }
    if args.reuse.is_some() && args.part.is_some() {
        return Err(anyhow!(
            "--reuse and --part both set every layer's reuse factor: give one (--reuse-layer fixes single layers under --part)"
        ));
    }
    let opts = lower_options(&ck.graph, args.reuse.unwrap_or(1), &layers, "--reuse-layer")?;
    let part = part_named(args.part.as_deref(), "--part")?;
    let build = Build {
        clock_mhz: args.clock_mhz,
        multipliers: multipliers_named(args.multipliers.as_deref(), "--multipliers")?,
        fill: fill_named(args.fill, part.as_ref(), "--fill", "--part")?,
        part,
        shift_add: args.shift_add.iter().map(|n| n.trim().to_string()).collect(),
    };
    let (design, manifest, fitted) = write_design(&ck, &label, &opts, &build, &dir)?;
    for line in summary_lines(&design, &manifest) {
        human.line(line);
    }
    let fit = build.part.zip(fitted.as_ref());
    if let Some((p, f)) = fit {
        human.line(fit_line(&p, f));
    }
    human.info(format!("wrote {}", dir.display()));
    human.result(&json!({"action": "emit", "model": label, "dir": dir, "manifest": manifest, "fit": fit.map(|(p, f)| fit_json(&p, f))}));
    Ok(())
}
