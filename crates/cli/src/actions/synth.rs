//! `ch synth DIR [--target xilinx|generic|all]` (default `xilinx`): Yosys synthesis of a design written by
//! `ch emit`, with its LUTs, flip-flops, DSPs, BRAMs and logic depth as text and JSON
//! (`synth_<target>.json` in the folder).

use crate::args::SynthArgs;
use crate::output::Human;
use anyhow::{bail, Result};
use mase_hw::synth::{synth, SynthTarget};
use serde_json::json;

pub fn run(args: &SynthArgs) -> Result<()> {
    let human = Human { json: args.json };
    let targets = match args.target.as_deref().unwrap_or("xilinx") {
        "all" => vec![SynthTarget::Xilinx, SynthTarget::GenericLut6],
        other => match SynthTarget::parse(other) {
            Some(t) => vec![t],
            None => bail!("--target `{other}`: expected xilinx, generic or all"),
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
