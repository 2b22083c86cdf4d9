//! Synthesis with Yosys of a design folder: `synth_xilinx` for a 7-series LUT6 target, or the
//! generic `synth` with `abc -lut 6`. Counts come from `stat -json`; the logic depth (cells on
//! the longest path between registers and ports) from `ltp` once every flip-flop cell is
//! deleted, so that no path runs through a register.

use crate::error::{file_err, file_msg, HwError, Result};
use crate::verilog::TOP;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

/// The technology Yosys maps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SynthTarget {
    /// Xilinx 7-series (`synth_xilinx`): LUT1-6, flip-flops, DSP48E1, block RAM, CARRY4.
    Xilinx,
    /// Technology-independent cells with logic mapped to 6-input LUTs (`abc -lut 6`).
    GenericLut6,
}

impl SynthTarget {
    /// The name used in file names and reports.
    pub fn name(self) -> &'static str {
        match self {
            SynthTarget::Xilinx => "xilinx",
            SynthTarget::GenericLut6 => "generic_lut6",
        }
    }

    /// The target called `name` (`xilinx`, `generic`).
    pub fn parse(name: &str) -> Option<SynthTarget> {
        match name {
            "xilinx" | "synth_xilinx" => Some(SynthTarget::Xilinx),
            "generic" | "generic_lut6" | "lut6" => Some(SynthTarget::GenericLut6),
            _ => None,
        }
    }

    /// The flip-flop cells of the mapped netlist, as a Yosys selection.
    fn flip_flops(self) -> &'static str {
        match self {
            SynthTarget::Xilinx => "t:FD*",
            SynthTarget::GenericLut6 => "t:$_*DFF*",
        }
    }

    fn script(self) -> String {
        match self {
            SynthTarget::Xilinx => format!("synth_xilinx -top {TOP} -flatten -noiopad"),
            SynthTarget::GenericLut6 => format!("synth -top {TOP} -flatten; abc -lut 6; opt_clean"),
        }
    }
}

/// What synthesis used.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SynthReport {
    pub target: SynthTarget,
    pub luts: u64,
    pub flip_flops: u64,
    pub dsps: u64,
    pub brams: u64,
    /// Cells on the longest combinational path from a register or input port to a register or
    /// output port (`ltp` with the flip-flops deleted).
    pub logic_depth: u64,
    pub cells_by_type: BTreeMap<String, u64>,
}

/// Which resource a cell type counts as.
fn classify(target: SynthTarget, cell: &str) -> Option<&'static str> {
    match target {
        SynthTarget::Xilinx => {
            if cell.starts_with("LUT") {
                Some("lut")
            } else if cell.starts_with("FD") {
                Some("ff")
            } else if cell.starts_with("DSP48") {
                Some("dsp")
            } else if cell.starts_with("RAMB") {
                Some("bram")
            } else {
                None
            }
        }
        SynthTarget::GenericLut6 => {
            if cell == "$lut" {
                Some("lut")
            } else if cell.starts_with("$_") && cell.contains("DFF") {
                Some("ff")
            } else {
                None
            }
        }
    }
}

/// The Verilog files of `dir/rtl`, sorted by path.
pub(crate) fn rtl_sources(dir: &Path) -> Result<Vec<String>> {
    let rtl = dir.join("rtl");
    let mut files: Vec<String> = std::fs::read_dir(&rtl)
        .map_err(|e| file_err(&rtl, e))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "v"))
        .map(|p| p.display().to_string())
        .collect();
    files.sort();
    Ok(files)
}

/// Synthesizes the RTL of `dir` for `target`; writes `synth_<target>.ys`, `.log` and `.json`.
pub fn synth(dir: &Path, target: SynthTarget) -> Result<SynthReport> {
    crate::integrity::check_sums(dir)?;
    if !crate::simulate::tool_available("yosys") {
        return Err(HwError::ToolMissing { tool: "yosys".into(), install: "Debian: apt-get install yosys".into() });
    }
    let mut files = rtl_sources(dir)?;
    // A design with instantiated ECP5 multipliers is synthesized for these targets with the
    // primitive's behavioural model, which Yosys maps as it maps any product and register.
    let model = dir.join(crate::dsp::ECP5_MODEL_FILE);
    if model.is_file() {
        files.push(model.display().to_string());
    }
    let name = target.name();
    let (stat, ltp) = (dir.join(format!("synth_{name}_stat.json")), dir.join(format!("synth_{name}_ltp.txt")));
    let script = format!(
        "read_verilog {}\n{}\ntee -q -o {} stat -json\ndelete {}\ntee -q -o {} ltp -noff\n",
        files.join(" "),
        target.script(),
        stat.display(),
        target.flip_flops(),
        ltp.display()
    );
    let ys = dir.join(format!("synth_{name}.ys"));
    std::fs::write(&ys, script).map_err(|e| file_err(&ys, e))?;
    let out = Command::new("yosys")
        .arg("-q")
        .arg("-l")
        .arg(dir.join(format!("synth_{name}.log")))
        .arg("-s")
        .arg(&ys)
        .output()
        .map_err(|e| file_err(&ys, e))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(HwError::Tool {
            what: format!("yosys {}", ys.display()),
            detail: err.lines().find(|l| l.contains("ERROR")).unwrap_or("").trim().to_string(),
        });
    }
    let text = std::fs::read_to_string(&stat).map_err(|e| file_err(&stat, e))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| file_err(&stat, e))?;
    let cells = v["design"]["num_cells_by_type"].as_object().cloned().unwrap_or_default();
    let cells_by_type: BTreeMap<String, u64> = cells.iter().map(|(k, n)| (k.clone(), n.as_u64().unwrap_or(0))).collect();
    let count = |kind: &str| cells_by_type.iter().filter(|(k, _)| classify(target, k) == Some(kind)).map(|(_, n)| n).sum();
    let ltp_text = std::fs::read_to_string(&ltp).map_err(|e| file_err(&ltp, e))?;
    let logic_depth = ltp_text
        .split("length=")
        .nth(1)
        .and_then(|t| t.split(')').next())
        .and_then(|t| t.trim().parse().ok())
        .ok_or_else(|| file_msg(&ltp, "no `length=` in the longest-path report"))?;
    let report = SynthReport {
        target,
        luts: count("lut"),
        flip_flops: count("ff"),
        dsps: count("dsp"),
        brams: count("bram"),
        logic_depth,
        cells_by_type,
    };
    let json = dir.join(format!("synth_{name}.json"));
    std::fs::write(&json, serde_json::to_string_pretty(&report).unwrap_or_default()).map_err(|e| file_err(&json, e))?;
    Ok(report)
}
