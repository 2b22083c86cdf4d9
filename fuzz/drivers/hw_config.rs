//! The `hw_config` fuzz target's driver, shared with the normal test suite
//! (`crates/cli/tests/fuzz_drivers.rs` includes this file): text given as a hardware transform
//! config (`[passes.fold_batch_norm]`, `[passes.quantize]` with its `hardware` tables,
//! `[passes.emit_verilog]`, as in `configs/tfc_int4_emit_verilog.toml`) applied to a jsc model,
//! lowered to a design as `emit_verilog` lowers it, then the design's outputs checked code for
//! code against the integer executor on a seeded batch. A config must be accepted or refused
//! with one line, never panic; a design that computes other codes than the executor is a bug,
//! and panics.

use mase_hw::{lower, metadata_reuse, LowerOptions};
use mase_ir::Rng;
use mase_passes::{run_pass, InputSource, PassContext};
use serde::Deserialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// The models a config may name (`model = ...`), all taking jsc's 16 features; the default is
/// `jsc-three-layer`.
pub const MODELS: [&str; 3] = ["jsc-tiny", "jsc-toy", "jsc-three-layer"];

/// `[passes.emit_verilog]` as `ch` reads it (its `output_dir` is not written here).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EmitVerilog {
    #[allow(dead_code)]
    output_dir: Option<String>,
    reuse: Option<usize>,
    #[serde(default)]
    reuse_layer: BTreeMap<String, usize>,
    clock_mhz: Option<f64>,
}

fn one_line(e: impl std::fmt::Display) -> String {
    e.to_string().lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}

/// Runs one input; `Err` is the one-line refusal. `Ok` gives the design's latency in cycles.
pub fn run(data: &[u8]) -> Result<usize, String> {
    let text = std::str::from_utf8(data).map_err(|e| format!("not UTF-8: {e}"))?;
    let table: toml::Table = text.parse().map_err(one_line)?;
    let model = match table.get("model") {
        None => "jsc-three-layer",
        Some(m) => m.as_str().filter(|m| MODELS.contains(m)).ok_or_else(|| format!("model {m}: expected one of {MODELS:?}"))?,
    };
    let passes = table.get("passes").and_then(toml::Value::as_table).ok_or("no [passes] table")?;
    let mut graph = mase_zoo::build_model(model, &mase_zoo::ModelContext::new([16], 5)).map_err(one_line)?;
    let params = mase_runtime::init_params(&graph, &mut Rng::new(0));
    let mut ctx = PassContext::new(params);
    ctx.inputs = InputSource::Random { sample_shape: vec![16] };
    run_pass("add_common_metadata", &mut graph, &mut ctx, &Value::Null).map_err(one_line)?;
    for name in ["fold_batch_norm", "quantize"] {
        if let Some(args) = passes.get(name) {
            let args = serde_json::to_value(args).map_err(one_line)?;
            run_pass(name, &mut graph, &mut ctx, &args).map_err(one_line)?;
        }
    }
    let emit = passes.get("emit_verilog").ok_or("no [passes.emit_verilog] table")?;
    let emit: EmitVerilog = serde_json::from_value(serde_json::to_value(emit).map_err(one_line)?).map_err(one_line)?;
    // As `ch`'s `lower_options`: the named layers first, then the nodes' hardware metadata.
    let mut reuse = Vec::new();
    for (node, r) in emit.reuse_layer {
        if r == 0 || graph.find(&node).is_none() {
            return Err(format!("reuse_layer `{node}={r}`: no such node, or a factor of 0"));
        }
        reuse.push((node, r));
    }
    reuse.extend(metadata_reuse(&graph).map_err(one_line)?);
    if emit.reuse == Some(0) {
        return Err("reuse: expected a positive integer, got 0".into());
    }
    let opts = LowerOptions { reuse, default_reuse: emit.reuse.unwrap_or(1), ..Default::default() };
    let mut design = lower(&graph, &ctx.params, model, &opts).map_err(one_line)?;
    if let Some(f) = emit.clock_mhz {
        design = design.pipelined(f).map_err(one_line)?;
    }
    let _ = (mase_hw::manifest(&design), mase_hw::cost::estimate(&design), mase_hw::verilog::top_verilog(&design));
    // The design against its golden model, on a seeded batch of 4 samples.
    let mut rng = Rng::new(1);
    let x: Vec<f32> = (0..4 * 16).map(|_| rng.normal() as f32 * 2.0).collect();
    let want = mase_hw::simulate::golden(&graph, &ctx.params, &design, &x, &[4, 16]).map_err(one_line)?;
    for (s, row) in x.chunks(16).enumerate() {
        assert_eq!(design.eval(&design.input_codes(row)), want[s], "sample {s}: the design differs from the integer executor");
    }
    Ok(design.latency())
}
