//! `ch synth DIR [--target xilinx|generic|all|ecp5]` (default `xilinx`): Yosys synthesis of a
//! design written by `ch emit`, with its LUTs, flip-flops, DSPs, BRAMs and logic depth as text
//! and JSON (`synth_<target>.json` in the folder); `ecp5` places and routes it with nextpnr-ecp5
//! and reports the post-route Fmax (`--part`, `--seed`, `--timeout-minutes`).

use crate::args::SynthArgs;
use crate::output::Human;
use anyhow::{bail, Result};
use mase_hw::ecp5::{self, Ecp5Options};
use mase_hw::synth::{synth, SynthTarget};
use serde_json::json;

pub fn run(args: &SynthArgs) -> Result<()> {
    let human = Human { json: args.json };
    let target = args.target.as_deref().unwrap_or("xilinx");
    if target == "ecp5" {
        return run_ecp5(args, &human);
    }
    if args.part.is_some() || args.seed.is_some() || args.timeout_minutes.is_some() {
        bail!("--part, --seed and --timeout-minutes are options of --target ecp5, not of --target {target}");
    }
    let targets = match target {
        "all" => vec![SynthTarget::Xilinx, SynthTarget::GenericLut6],
        other => match SynthTarget::parse(other) {
            Some(t) => vec![t],
            None => bail!("--target `{other}`: expected xilinx, generic, all or ecp5"),
        },
    };
    let mut reports = Vec::new();
    human.line(format!("{:<14} {:>8} {:>8} {:>6} {:>6} {:>12}", "target", "LUTs", "FFs", "DSPs", "BRAMs", "logic depth"));
    for t in targets {
        let r = synth(&args.dir, t)?;
        human.line(format!("{:<14} {:>8} {:>8} {:>6} {:>6} {:>12}", t.name(), r.luts, r.flip_flops, r.dsps, r.brams, r.logic_depth));
        reports.push(r);
    }
    human.result(&json!({"action": "synth", "dir": args.dir, "reports": reports}));
    Ok(())
}

/// `--target ecp5`: place and route, then the Fmax, the resources against the part's and the
/// critical path.
fn run_ecp5(args: &SynthArgs, human: &Human) -> Result<()> {
    let mut opts = Ecp5Options::default();
    if let Some(name) = &args.part {
        match ecp5::part(name) {
            Some(p) => opts.part = Some(p),
            None => bail!("--part `{name}`: expected 25f, 45f or 85f (an ECP5 LFE5U part)"),
        }
    }
    if let Some(seed) = args.seed {
        opts.seed = seed;
    }
    match args.timeout_minutes {
        Some(0) => bail!("--timeout-minutes: expected at least 1 minute"),
        Some(m) => opts.timeout_s = m * 60,
        None => {}
    }
    let r = ecp5::place_and_route(&args.dir, &opts)?;
    let a = r.part.available;
    human.line(format!("{:<14} {:>9} {:>16} {:>16} {:>10} {:>8}", "target", "Fmax", "LUT4", "FFs", "MULT18X18D", "DP16KD"));
    let fmax = r.fmax_mhz.map_or("-".to_string(), |f| format!("{f:.1} MHz"));
    human.line(format!(
        "{:<14} {:>9} {:>16} {:>16} {:>10} {:>8}",
        format!("ecp5 {}", r.part.name.trim_start_matches("LFE5U-")),
        fmax,
        format!("{} / {}", r.used.luts, a.luts),
        format!("{} / {}", r.used.flip_flops, a.flip_flops),
        format!("{} / {}", r.used.dsps, a.dsps),
        format!("{} / {}", r.used.brams, a.brams)
    ));
    let estimate = std::fs::read_to_string(args.dir.join("manifest.json"))
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|m| m["estimate"]["lut4"].as_f64());
    human.line(format!(
        "Yosys synth_ecp5 before placement: {} LUT4s{}",
        r.synthesized.luts,
        estimate.map_or(String::new(), |e| format!(" (the cost model's estimate: {e:.0})"))
    ));
    if let Some(p) = &r.critical_path {
        human.line(format!(
            "critical path at {} MHz asked: {:.2} ns of logic, {:.2} ns of routing, {:.2} ns in its registers ({} -> {})",
            r.constraint_mhz, p.logic_ns, p.routing_ns, p.register_ns, p.from, p.to
        ));
    }
    if !r.fits {
        human.line(format!("does not fit the {}: {}", r.part.name, r.over.join(", ")));
    }
    human.result(&json!({"action": "synth", "dir": args.dir, "reports": [r]}));
    Ok(())
}
