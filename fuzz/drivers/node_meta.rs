//! The `node_meta` fuzz target's driver, shared with the normal test suite
//! (`crates/cli/tests/fuzz_drivers.rs` includes this file): text given as one part of a node's
//! metadata, as Python's `MaseGraph` writes it (`node.meta["mase"]["common"] = ...` crosses as
//! JSON), then the passes and the executor that read metadata. Each must accept it or refuse it
//! with one line, never panic.

use mase_ir::Rng;
use mase_passes::{run_pass, InputSource, PassContext};
use serde_json::{json, Value};

/// The metadata parts Python may write, as `mase_python`'s `set_node_meta_json` names them.
pub const PARTS: [&str; 3] = ["common", "software", "hardware"];

/// The passes that read a node's metadata, each with default arguments.
const READERS: [&str; 9] = [
    "report_graph",
    "report_node_type",
    "report_node_shape",
    "report_node_meta_param",
    "add_software_metadata",
    "add_hardware_metadata",
    "flops",
    "bitops",
    "latency",
];

/// Runs one input: its first byte picks the node of jsc-tiny (low bits) and the part (high
/// bits), the rest is the part's JSON. `Err` is the one-line refusal.
pub fn run(data: &[u8]) -> Result<(), String> {
    let Some((&pick, rest)) = data.split_first() else { return Err("empty input".into()) };
    let text = std::str::from_utf8(rest).map_err(|e| format!("not UTF-8: {e}"))?;
    let mut graph = mase_zoo::build_model("jsc-tiny", &mase_zoo::ModelContext::new([16], 5)).map_err(|e| e.to_string())?;
    let params = mase_runtime::init_params(&graph, &mut Rng::new(0));
    let mut ctx = PassContext::new(params);
    ctx.inputs = InputSource::Random { sample_shape: vec![16] };
    run_pass("add_common_metadata", &mut graph, &mut ctx, &Value::Null).map_err(|e| e.to_string())?;
    let id = graph.ids().nth(usize::from(pick & 0x0f) % graph.len()).ok_or("no node")?;
    let part = PARTS[usize::from(pick >> 4) % PARTS.len()];
    // As `set_node_meta_json` writes it, and `node_meta_json` reads it back.
    let meta = &mut graph.node_mut(id).meta;
    let bad = |e: serde_json::Error| format!("metadata `{part}`: {e}");
    match part {
        "common" => meta.common = serde_json::from_str(text).map_err(bad)?,
        "software" => meta.software = serde_json::from_str(text).map_err(bad)?,
        _ => meta.hardware = serde_json::from_str(text).map_err(bad)?,
    }
    serde_json::to_string(&graph.node(id).meta.common).map_err(|e| e.to_string())?;
    for pass in READERS {
        run_pass(pass, &mut graph, &mut ctx, &Value::Null).map_err(|e| e.to_string())?;
    }
    mase_hw::metadata_reuse(&graph).map_err(|e| e.to_string())?;
    let q = json!({"by": "type", "default": {"config": {"name": "NA"}}, "linear": {"config": {"name": "integer",
        "data_in_width": 8, "data_in_frac_width": 4, "weight_width": 8, "weight_frac_width": 4, "bias_width": 8, "bias_frac_width": 4}}});
    run_pass("quantize", &mut graph, &mut ctx, &q).map_err(|e| e.to_string())?;
    let opts = mase_runtime::ExecOptions { threads: 1, seed: 0 };
    let mut exec = mase_runtime::Executor::new(&graph, &ctx.params, opts).map_err(|e| e.to_string())?;
    exec.forward(&[0.5; 32], &[2, 16], mase_runtime::Mode::Eval).map_err(|e| e.to_string())?;
    Ok(())
}
