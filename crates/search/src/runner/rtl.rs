//! `hw_runner.rtl`: the candidate lowered to the streaming integer pipeline of `mase-hw` (the
//! RTL `ch emit` writes), measured by the cost model (`mase_hw::cost`, doc/hardware.md "Cost
//! model") or, with `synth = true`, by Yosys on the emitted RTL of every trial.
//!
//! Metrics: `luts`, `ffs`, `dsps`, `latency_cycles` and `ii` (initiation interval in cycles).
//! Latency and initiation interval are the design's schedule in both modes. With `clock_mhz`,
//! the design is pipelined for that clock (as `ch emit --clock-mhz`), its products built by
//! `multipliers` (`inferred` or `ecp5-dsp`), and two more metrics rank it by speed: `fmax_mhz`,
//! the ECP5 clock of the delay model (`mase_hw::cost::fmax_estimate_mhz`), and `throughput`,
//! samples per microsecond at that clock (`fmax_mhz / ii`).
//!
//! Each layer's reuse factor is its node's `hardware.reuse_factor` (set by a search space's
//! `seed.<key>.hardware.reuse_factor` choices), else the runner's `reuse_factor` option (1).

use crate::runner::{positive, runner_table, RunContext, Runner, RunnerEnv, Stage};
use crate::space::Candidate;
use crate::trial::Metrics;
use crate::{Result, SearchError};
use mase_hw::synth::{synth, SynthTarget};
use mase_hw::{lower, metadata_reuse, LowerOptions, Multipliers};
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
    /// The clock every design is pipelined for, in MHz; none: one register stage per layer.
    pub clock_mhz: Option<f64>,
    /// How products are built (a choice other than `inferred` needs a clock).
    pub multipliers: Multipliers,
}

struct Rtl {
    opts: RtlOptions,
}

pub(crate) fn build(cfg: &Value, _env: &RunnerEnv) -> Result<Box<dyn Runner>> {
    let m = runner_table(cfg, "rtl", "hw_runner", &["synth", "target", "reuse_factor", "work_dir", "clock_mhz", "multipliers"])?;
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
    let clock_mhz = match m.get("clock_mhz") {
        None => None,
        Some(v) => {
            let f = v.as_f64().filter(|f| f.is_finite() && *f > 0.0);
            let f =
                f.ok_or_else(|| SearchError::config(format!("{AT}.clock_mhz"), format!("must be a positive number of MHz, got {v}")))?;
            mase_hw::pipeline::check_clock(f).map_err(|reason| SearchError::config(format!("{AT}.clock_mhz"), reason))?;
            Some(f)
        }
    };
    let multipliers = match m.get("multipliers") {
        None => Multipliers::Inferred,
        Some(v) => v
            .as_str()
            .and_then(Multipliers::from_name)
            .ok_or_else(|| SearchError::config(format!("{AT}.multipliers"), format!("must be one of {}, got {v}", Multipliers::NAMES)))?,
    };
    if multipliers.instantiated() && clock_mhz.is_none() {
        return Err(SearchError::config(
            format!("{AT}.multipliers"),
            format!("\"{}\" needs a pipelined design: set clock_mhz too", multipliers.name()),
        ));
    }
    Ok(Box::new(Rtl { opts: RtlOptions { synth, target, reuse_factor, work_dir, clock_mhz, multipliers } }))
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
        let mut r = vec!["luts", "ffs", "dsps", "latency_cycles", "ii"];
        if self.opts.clock_mhz.is_some() {
            r.extend(["fmax_mhz", "throughput"]);
            if self.opts.multipliers.instantiated() {
                r.push("lut4");
            }
        }
        r
    }

    fn run(&self, cand: &mut Candidate, cx: &RunContext) -> Result<Metrics> {
        let opts = LowerOptions {
            reuse: metadata_reuse(&cand.graph).map_err(runner_err)?,
            default_reuse: self.opts.reuse_factor,
            ..Default::default()
        };
        let mut design = lower(&cand.graph, &cand.params, "candidate", &opts).map_err(runner_err)?;
        if let Some(f) = self.opts.clock_mhz {
            design = design.pipelined(f).and_then(|d| d.with_multipliers(self.opts.multipliers)).map_err(runner_err)?;
        }
        let estimate = mase_hw::cost::estimate(&design);
        let (luts, ffs, dsps) = if self.opts.synth {
            let dir = self.opts.work_dir.join(format!("trial{}", cx.trial));
            let _ = std::fs::remove_dir_all(&dir);
            mase_hw::emit(&design, &dir).map_err(runner_err)?;
            let r = synth(&dir, self.opts.target).map_err(runner_err);
            let _ = std::fs::remove_dir_all(&dir);
            let r = r?;
            (r.luts as f64, r.flip_flops as f64, r.dsps as f64)
        } else {
            (estimate.luts, estimate.ffs, estimate.dsps)
        };
        let mut out = Metrics::new();
        out.insert("luts".into(), luts);
        out.insert("ffs".into(), ffs);
        out.insert("dsps".into(), dsps);
        out.insert("latency_cycles".into(), design.latency() as f64);
        out.insert("ii".into(), design.initiation_interval() as f64);
        if self.opts.clock_mhz.is_some() {
            let fmax = estimate.fmax_mhz.unwrap_or(0.0);
            out.insert("fmax_mhz".into(), fmax);
            out.insert("throughput".into(), fmax / design.initiation_interval().max(1) as f64);
            // The ECP5 LUT4 model's figure, for designs with instantiated multipliers.
            if let Some(n) = estimate.lut4 {
                out.insert("lut4".into(), n);
            }
        }
        Ok(out)
    }
}
