//! `hw_runner.rtl`: the candidate lowered to the streaming integer pipeline of `mase-hw` (the
//! RTL `ch emit` writes), measured by the cost model (`mase_hw::cost`, doc/hardware.md "Cost
//! model") or, with `synth = true`, by Yosys on the emitted RTL of every trial.
//!
//! Metrics: `luts`, `ffs`, `dsps`, `latency_cycles` and `ii` (initiation interval in cycles).
//! Latency and initiation interval are the design's schedule in both modes.
//!
//! Each layer's reuse factor is its node's `hardware.reuse_factor` (set by a search space's
//! `seed.<key>.hardware.reuse_factor` choices), else the runner's `reuse_factor` option (1).

use crate::runner::{positive, runner_table, RunContext, Runner, RunnerEnv, Stage};
use crate::space::Candidate;
use crate::trial::Metrics;
use crate::{Result, SearchError};
use mase_hw::synth::{synth, SynthTarget};
use mase_hw::{lower, metadata_reuse, LowerOptions};
use serde_json::Value;
use std::path::PathBuf;

const AT: &str = "search.strategy.hw_runner.rtl";

/// The options of the runner.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RtlOptions {
    /// Run Yosys on every trial instead of the cost model.
    pub synth: bool,
    /// What Yosys maps to (with `synth = true`).
    pub target: SynthTarget,
    /// The reuse factor of layers whose node has none.
    pub reuse_factor: usize,
    /// Where trials' RTL is written with `synth = true` (a folder per trial, removed after).
    pub work_dir: PathBuf,
}

struct Rtl {
    opts: RtlOptions,
}

pub(crate) fn build(cfg: &Value, _env: &RunnerEnv) -> Result<Box<dyn Runner>> {
    let m = runner_table(cfg, "rtl", "hw_runner", &["synth", "target", "reuse_factor", "work_dir"])?;
    let synth = match m.get("synth") {
        None => false,
        Some(v) => v.as_bool().ok_or_else(|| SearchError::config(format!("{AT}.synth"), format!("must be true or false, got {v}")))?,
    };
    let target = match m.get("target") {
        None => SynthTarget::Xilinx,
        Some(v) => v
            .as_str()
            .and_then(SynthTarget::parse)
            .ok_or_else(|| SearchError::config(format!("{AT}.target"), format!("must be \"xilinx\" or \"generic\", got {v}")))?,
    };
    let reuse_factor = positive(&m, "reuse_factor", AT)?.unwrap_or(1);
    let work_dir = match m.get("work_dir") {
        None => std::env::temp_dir().join(format!("mase_rtl_runner_{}", std::process::id())),
        Some(v) => {
            PathBuf::from(v.as_str().ok_or_else(|| SearchError::config(format!("{AT}.work_dir"), format!("must be a path, got {v}")))?)
        }
    };
    Ok(Box::new(Rtl { opts: RtlOptions { synth, target, reuse_factor, work_dir } }))
}

fn runner_err(e: impl std::error::Error + Send + Sync + 'static) -> SearchError {
    SearchError::RunnerCause { runner: "rtl".into(), source: Box::new(e) }
}

impl Runner for Rtl {
    fn name(&self) -> &'static str {
        "rtl"
    }

    fn stage(&self) -> Stage {
        Stage::Hardware
    }

    fn reports(&self) -> Vec<&'static str> {
        vec!["luts", "ffs", "dsps", "latency_cycles", "ii"]
    }

    fn run(&self, cand: &mut Candidate, cx: &RunContext) -> Result<Metrics> {
        let opts = LowerOptions {
            reuse: metadata_reuse(&cand.graph).map_err(runner_err)?,
            default_reuse: self.opts.reuse_factor,
            ..Default::default()
        };
        let design = lower(&cand.graph, &cand.params, "candidate", &opts).map_err(runner_err)?;
        let (luts, ffs, dsps) = if self.opts.synth {
            let dir = self.opts.work_dir.join(format!("trial{}", cx.trial));
            let _ = std::fs::remove_dir_all(&dir);
            mase_hw::emit(&design, &dir).map_err(runner_err)?;
            let r = synth(&dir, self.opts.target).map_err(runner_err);
            let _ = std::fs::remove_dir_all(&dir);
            let r = r?;
            (r.luts as f64, r.flip_flops as f64, r.dsps as f64)
        } else {
            let c = mase_hw::cost::estimate(&design);
            (c.luts, c.ffs, c.dsps)
        };
        let mut out = Metrics::new();
        out.insert("luts".into(), luts);
        out.insert("ffs".into(), ffs);
        out.insert("dsps".into(), dsps);
        out.insert("latency_cycles".into(), design.latency() as f64);
        out.insert("ii".into(), design.initiation_interval() as f64);
        Ok(out)
    }
}
