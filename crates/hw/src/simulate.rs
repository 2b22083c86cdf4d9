//! Simulation: builds a design folder with Verilator, streams input codes through it, and
//! compares every output code with the integer executor's.

use crate::design::Design;
use crate::error::{file_err, file_msg, HwError, Result};
use mase_ir::{Graph, ParamStore};
use std::path::Path;
use std::process::Command;

/// Whether a tool answers `--version` (`verilator`, `yosys -V` is asked as `yosys`).
pub fn tool_available(tool: &str) -> bool {
    let flag = if tool == "yosys" { "-V" } else { "--version" };
    Command::new(tool).arg(flag).output().is_ok_and(|o| o.status.success())
}

fn require(tool: &str) -> Result<()> {
    if tool_available(tool) {
        Ok(())
    } else {
        Err(HwError::ToolMissing { tool: tool.into(), install: format!("Debian: apt-get install {tool}") })
    }
}

/// Builds `dir/obj_dir/sim` with the folder's `build.sh`.
pub fn build(dir: &Path) -> Result<()> {
    require("verilator")?;
    let out = Command::new("sh").arg(dir.join("build.sh")).output().map_err(|e| file_err(&dir.join("build.sh"), e))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let line = err.lines().find(|l| l.contains("%Error") || l.contains("error")).unwrap_or(err.lines().last().unwrap_or("")).trim();
        return Err(HwError::Tool { what: format!("verilator build of {}", dir.display()), detail: line.to_string() });
    }
    Ok(())
}

/// The outputs and cycle counts of one simulation.
#[derive(Clone, Debug, PartialEq)]
pub struct SimRun {
    /// Output codes, one row per sample.
    pub outputs: Vec<Vec<i64>>,
    pub cycles: u64,
    /// Cycles from the first input handshake to the first output handshake.
    pub latency: u64,
    /// Mean cycles between output handshakes.
    pub initiation_interval: f64,
    /// Wall-clock seconds the simulator ran.
    pub seconds: f64,
}

/// Streams `inputs` (codes, one row per sample) through the built simulator of `dir`. A
/// `stall_seed` other than 0 lowers `out_ready` on pseudo-random cycles.
pub fn run(dir: &Path, d: &Design, inputs: &[Vec<i64>], stall_seed: u64) -> Result<SimRun> {
    let sim = dir.join("obj_dir/sim");
    if !sim.exists() {
        build(dir)?;
    }
    let mut text = format!("{} {}\n", inputs.len(), d.input_len());
    for row in inputs {
        text.push_str(&row.iter().map(i64::to_string).collect::<Vec<_>>().join(" "));
        text.push('\n');
    }
    let (inp, outp) = (dir.join("inputs.txt"), dir.join("outputs.txt"));
    std::fs::write(&inp, text).map_err(|e| file_err(&inp, e))?;
    let t0 = std::time::Instant::now();
    let out = Command::new(&sim).arg(&inp).arg(&outp).arg(stall_seed.to_string()).output().map_err(|e| file_err(&sim, e))?;
    let seconds = t0.elapsed().as_secs_f64();
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(HwError::Tool { what: format!("simulation {}", sim.display()), detail: err.lines().last().unwrap_or("").to_string() });
    }
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| HwError::ToolOutput {
        what: format!("simulation {}", sim.display()),
        detail: "unreadable statistics".into(),
        source: Box::new(e),
    })?;
    let text = std::fs::read_to_string(&outp).map_err(|e| file_err(&outp, e))?;
    let outputs: Vec<Vec<i64>> = text
        .lines()
        .map(|l| l.split_whitespace().map(|t| t.parse::<i64>().map_err(|e| file_err(&outp, e))).collect::<Result<Vec<_>>>())
        .collect::<Result<_>>()?;
    if outputs.len() != inputs.len() || outputs.iter().any(|r| r.len() != d.output_len()) {
        return Err(file_msg(&outp, format!("expected {} rows of {} codes", inputs.len(), d.output_len())));
    }
    let num = |k: &str| stats.get(k).and_then(serde_json::Value::as_f64).unwrap_or(0.0);
    Ok(SimRun { outputs, cycles: num("cycles") as u64, latency: num("latency") as u64, initiation_interval: num("ii"), seconds })
}

/// The golden output codes: the integer executor on the float samples `x` (`[n, ...]`), its
/// outputs re-expressed as codes at the design's output scale (for a binarized design, as the
/// popcounts of its last layer). An output that is not a code
/// there (the executor's float path rounded it) is an error naming the sample.
pub fn golden(graph: &Graph, params: &ParamStore, d: &Design, x: &[f32], shape: &[usize]) -> Result<Vec<Vec<i64>>> {
    let run = mase_runtime::run_integer(graph, params, x, shape)?;
    check_layers_integer(d, &run.report)?;
    let frac = d.output_range().frac;
    let scale = 2f64.powi(frac);
    let n_out = d.output_len();
    if run.output.len() != shape.first().copied().unwrap_or(0) * n_out {
        return Err(HwError::Structure {
            reason: format!("the integer executor gave {} outputs, the design {} per sample", run.output.len(), n_out),
        });
    }
    if let Some(ends) = &d.bipolar {
        // A binarized design outputs the last layer's popcounts; the graph's outputs are the
        // float operations after it, strictly increasing, so each names one popcount.
        let k = d.layers.last().map_or(0, |l| l.in_features);
        return run
            .output
            .chunks(n_out)
            .enumerate()
            .map(|(s, row)| {
                row.iter()
                    .map(|&v| {
                        crate::bipolar::popcount_of(ends, k, v).ok_or_else(|| HwError::Structure {
                            reason: format!("sample {s}: executor output {v} is the output of no popcount of the last layer"),
                        })
                    })
                    .collect()
            })
            .collect();
    }
    run.output
        .chunks(n_out)
        .enumerate()
        .map(|(s, row)| {
            row.iter()
                .map(|&v| {
                    let c = v as f64 * scale;
                    if c.fract() != 0.0 {
                        return Err(HwError::Structure {
                            reason: format!("sample {s}: executor output {v} is not a code at {frac} fraction bits"),
                        });
                    }
                    Ok(c as i64)
                })
                .collect()
        })
        .collect()
}

/// Every layer of the design is a node that the integer executor ran in integer arithmetic: a
/// float checkpoint beside the design (or a design whose checkpoint lost its formats) gives
/// outputs that are no codes, which is said here with the node to quantize.
fn check_layers_integer(d: &Design, report: &mase_runtime::IntegerReport) -> Result<()> {
    for layer in &d.layers {
        let Some(node) = report.nodes.iter().find(|n| n.node == layer.node) else {
            return Err(HwError::Structure { reason: format!("the checkpoint has no node `{}`, a layer of the design", layer.node) });
        };
        if let Some(reason) = &node.float_reason {
            return Err(HwError::Structure {
                reason: format!(
                    "node `{}` ({}) runs in float ({reason}), so the design's integer codes have no reference; quantize every layer to `integer` formats (`ch transform` with [passes.quantize]) and emit again",
                    node.node, node.op
                ),
            });
        }
    }
    Ok(())
}

/// Samples whose outputs differ, as `(sample, expected, got)`.
pub fn mismatches(expected: &[Vec<i64>], got: &[Vec<i64>]) -> Vec<(usize, Vec<i64>, Vec<i64>)> {
    expected.iter().zip(got).enumerate().filter(|(_, (e, g))| e != g).map(|(i, (e, g))| (i, e.clone(), g.clone())).collect()
}

/// The fraction of rows whose first largest code is at the label.
pub fn accuracy(outputs: &[Vec<i64>], labels: &[u32]) -> f64 {
    let argmax = |r: &[i64]| r.iter().enumerate().fold((0, i64::MIN), |(bi, bv), (i, &v)| if v > bv { (i, v) } else { (bi, bv) }).0;
    let correct = outputs.iter().zip(labels).filter(|(r, &l)| argmax(r) == l as usize).count();
    correct as f64 / outputs.len().max(1) as f64
}
