//! The `emit_verilog` transform pass, which `ch` itself provides beside the pass registry (it
//! needs `mase-hw`, which the passes crate does not depend on): the graph, as quantized so far,
//! written as the design folder `ch emit` writes, so that one `ch transform` goes from a float
//! checkpoint (`fold_batch_norm`, `quantize`, `emit_verilog`) to RTL. `ch emit` and the pass
//! share how reuse factors are chosen and what is printed.

use crate::plugins::ExternalPasses;
use anyhow::{bail, Context, Result};
use mase_hw::ecp5::Ecp5Part;
use mase_hw::fit::{fit, Fill, FitRequest, Fitted, DEFAULT_FILL};
use mase_hw::{emit, lower, metadata_reuse, Design, LowerOptions, Multipliers};
use mase_io::Checkpoint;
use mase_ir::{Graph, ParamStore};
use mase_passes::{PassContext, PassReport, ReportKey};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A pass `ch` provides: its name, its arguments and what it does (for `ch info` and
/// `ch transform --list-passes`).
pub(crate) struct CliPassInfo {
    pub name: &'static str,
    pub args: &'static str,
    pub doc: &'static str,
    /// The keys of its JSON report, as the registry's passes give them.
    pub report: &'static [ReportKey],
}

const fn key(key: &'static str, unit: &'static str, meaning: &'static str) -> ReportKey {
    ReportKey { key, unit, meaning }
}

/// The passes `ch` provides beside the registry's.
pub(crate) const CLI_PASSES: &[CliPassInfo] = &[CliPassInfo {
    name: "emit_verilog",
    args: "EmitVerilogArgs",
    doc: "the quantized graph as the RTL folder `ch emit` writes (output_dir, reuse, reuse_layer, clock_mhz, multipliers, part, shift_add)",
    report: &[
        key("dir", "path", "the design folder written (RTL, testbench, build script, manifest, checkpoint)"),
        key("latency_cycles", "cycles", "from the first input word to its output word"),
        key("initiation_interval", "cycles", "between two samples (the largest reuse factor)"),
        key("clock_mhz", "MHz", "the clock the design is pipelined for (null: one register stage per layer)"),
        key("layers", "list", "one entry per layer, in pipeline order"),
        key("layers[].node", "name", "the linear node of the layer"),
        key("layers[].reuse_factor", "count", "its reuse factor (input terms per multiplier)"),
        key("layers[].latency_cycles", "cycles", "from the layer's input word to its output word"),
        key("estimate", "object", "the cost model's resources (doc/hardware.md, Cost model)"),
        key("fit", "object", "with `part`: the part, the reuse factors chosen, the layers given shift-add products, and the DSPs and LUT4s needed and available (null without)"),
        key("estimate.model", "text", "the synthesis flow the cost model stands for"),
        key("estimate.luts", "count", "LUTs"),
        key("estimate.ffs", "count", "flip-flops"),
        key("estimate.dsps", "count", "DSP blocks"),
        key("estimate.fmax_mhz", "MHz", "post-route clock on an ECP5 by the delay model (null: not pipelined)"),
        key("estimate.lut4", "count", "ECP5 LUT4s of Yosys synth_ecp5 before placement by the LUT4 model (null unless pipelined with --multipliers ecp5-dsp)"),
    ],
}];

/// Arguments of `emit_verilog` (a `[passes.emit_verilog]` table).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EmitVerilogArgs {
    /// The folder to write; default `<project>/hardware` under the project's output folder.
    output_dir: Option<PathBuf>,
    /// The reuse factor of layers given none (`ch emit --reuse`); default 1, fully unrolled.
    reuse: Option<usize>,
    /// Reuse factor per layer node (`ch emit --reuse-layer NODE=R`).
    #[serde(default)]
    reuse_layer: BTreeMap<String, usize>,
    /// The clock to pipeline for, in MHz (`ch emit --clock-mhz`); default none, one register
    /// stage per layer.
    clock_mhz: Option<f64>,
    /// How a pipelined design builds its products (`ch emit --multipliers`): `inferred` (the
    /// default) or `ecp5-dsp`.
    multipliers: Option<String>,
    /// The ECP5 part to fit (`ch emit --part`): the reuse factor of every layer `reuse_layer`
    /// does not name is chosen to fit it; not with `reuse`.
    part: Option<String>,
    /// Layers whose products are shifts and adds in LUTs (`ch emit --shift-add`).
    #[serde(default)]
    shift_add: Vec<String>,
    /// The largest share of the part's DSPs and of its LUTs the fitted design may use, in
    /// percent (`ch emit --fill`; default 75); only with `part`.
    fill: Option<u32>,
}

/// The multipliers called `name` (`None`: inferred); `what` names the option in errors.
pub(crate) fn multipliers_named(name: Option<&str>, what: &str) -> Result<Multipliers> {
    match name {
        None => Ok(Multipliers::Inferred),
        Some(n) => Multipliers::from_name(n).ok_or_else(|| anyhow::anyhow!("{what} `{n}`: expected one of {}", Multipliers::NAMES)),
    }
}

/// The lowering options of a graph: each layer's reuse factor is the one named for it in
/// `layers`, else the one in its node's hardware metadata (`hardware.reuse_factor`, which a
/// `quantize` entry's `hardware` table writes), else `default`. `what` names the source of
/// `layers` in errors.
pub(crate) fn lower_options(graph: &Graph, default: usize, layers: &[(String, usize)], what: &str) -> Result<LowerOptions> {
    let mut reuse = Vec::new();
    for (node, r) in layers {
        if !graph.nodes().iter().any(|n| &n.name == node) {
            bail!("{what} `{node}={r}`: the model has no node `{node}`");
        }
        if *r == 0 {
            bail!("{what} `{node}={r}`: the reuse factor must be a positive integer");
        }
        reuse.push((node.clone(), *r));
    }
    // The first entry naming a node wins, so the explicit ones come before the metadata.
    reuse.extend(metadata_reuse(graph)?);
    Ok(LowerOptions { reuse, default_reuse: default, ..Default::default() })
}

/// How a design is built beside its reuse factors: `ch emit`'s `--clock-mhz`, `--multipliers`,
/// `--part` and `--shift-add` (the keys of the same names of `[passes.emit_verilog]`).
#[derive(Clone, Debug, Default)]
pub(crate) struct Build {
    pub clock_mhz: Option<f64>,
    pub multipliers: Multipliers,
    /// The part to fit: the reuse factor of every layer that `opts.reuse` does not name is
    /// chosen so that the design fits it ([`mase_hw::fit`]).
    pub part: Option<Ecp5Part>,
    /// Layers given shift-add products ([`mase_hw::shift_add`]); with a part, the fit may add
    /// others.
    pub shift_add: Vec<String>,
    /// The share of the part the fit may use.
    pub fill: Fill,
}

/// The fill of `percent` for a fit to `part` (`None`: the default); `what` names the option
/// and `part_option` the part's in errors.
pub(crate) fn fill_named(percent: Option<u32>, part: Option<&Ecp5Part>, what: &str, part_option: &str) -> Result<Fill> {
    match (percent, part) {
        (None, _) => Ok(DEFAULT_FILL),
        (Some(p), None) => bail!("{what} `{p}`: a fill is a share of the part that {part_option} names; give {part_option} too"),
        (Some(p), Some(_)) => Fill::percent(p).map_err(|reason| anyhow::anyhow!("{what} `{p}`: {reason}")),
    }
}

/// The ECP5 part called `name` (`None`: no part); `what` names the option in errors.
pub(crate) fn part_named(name: Option<&str>, what: &str) -> Result<Option<Ecp5Part>> {
    match name {
        None => Ok(None),
        Some(n) => mase_hw::ecp5::part(n)
            .map(Some)
            .ok_or_else(|| anyhow::anyhow!("{what} `{n}`: expected ecp5-25f, ecp5-45f or ecp5-85f (an ECP5 LFE5U part)")),
    }
}

/// Lowers the graph and writes its design folder (RTL, testbench, build script, manifest, the
/// design and the checkpoint `ch simulate` takes as the golden model). Returns the design, the
/// manifest and, with a part, the fit.
pub(crate) fn write_design(
    ck: &Checkpoint,
    label: &str,
    opts: &LowerOptions,
    build: &Build,
    dir: &std::path::Path,
) -> Result<(Design, Value, Option<Fitted>)> {
    // Convolutions need the image's shape, which the checkpoint's data set records.
    let shape = ck.meta.pointer("/dataset_info/sample_shape").and_then(|v| serde_json::from_value::<Vec<usize>>(v.clone()).ok());
    let opts = LowerOptions { input_shape: shape, ..opts.clone() };
    let make = |reuse: &[(String, usize)]| -> mase_hw::Result<Design> {
        let mut o = opts.clone();
        o.reuse.extend(reuse.iter().cloned());
        let mut design = lower(&ck.graph, &ck.params, label, &o)?;
        if let Some(f) = build.clock_mhz {
            design = design.pipelined(f)?;
        }
        design.with_multipliers(build.multipliers)?.with_shift_add(&build.shift_add)
    };
    let (design, fitted) = match build.part {
        None => (make(&[])?, None),
        Some(part) => {
            let fixed: Vec<String> = opts.reuse.iter().map(|(n, _)| n.clone()).collect();
            let f = fit(&FitRequest { part, fill: build.fill, fixed: &fixed }, make)?;
            // `ch synth --target ecp5` places the design on the part it was fitted to.
            let design = Design { part: Some(part.name.to_string()), ..f.design.clone() };
            (design, Some(f))
        }
    };
    let manifest = emit(&design, dir)?;
    mase_io::save_checkpoint(&dir.join("model.ckpt"), ck)?;
    Ok((design, manifest, fitted))
}

/// What `ch emit --part` prints about the fit.
pub(crate) fn fit_line(part: &Ecp5Part, f: &Fitted) -> String {
    let a = part.available;
    let reuse = f.reuse.iter().map(|(n, r)| format!("{n}={r}")).collect::<Vec<_>>().join(",");
    let reuse = if reuse.is_empty() { "none free".to_string() } else { reuse };
    let shift_add = if f.shift_add.is_empty() { String::new() } else { format!("; shift-add products in {}", f.shift_add.join(",")) };
    format!(
        "  fitted to the {} within {} % of it: reuse {reuse}{shift_add}; {} of {} DSPs and about {} of {} LUT4s by the cost model",
        part.name,
        f.fill.as_percent(),
        f.need.dsps,
        a.dsps,
        f.need.luts,
        a.luts
    )
}

/// The fit as the JSON results give it.
pub(crate) fn fit_json(part: &Ecp5Part, f: &Fitted) -> Value {
    json!({
        "part": part.name,
        "reuse": f.reuse.iter().map(|(n, r)| json!({"node": n, "reuse_factor": r})).collect::<Vec<_>>(),
        "shift_add": f.shift_add,
        "dsps": f.need.dsps,
        "luts": f.need.luts,
        "available": {"dsps": part.available.dsps, "luts": part.available.luts},
        "fill_percent": f.fill.as_percent(),
    })
}

/// What `ch emit` prints about a design: its shape and schedule, one line per layer and the cost
/// model's estimate.
pub(crate) fn summary_lines(design: &Design, manifest: &Value) -> Vec<String> {
    let clock = design.clock_mhz.map(|f| format!(", pipelined for {f} MHz")).unwrap_or_default();
    let mut lines = vec![format!(
        "{}: {} layers, input {} x {} bits, output {} x {} bits, latency {} cycles, initiation interval {}{clock}",
        design.model,
        design.layers.len(),
        design.input_len(),
        design.input_range().width(),
        design.output_len(),
        design.output_range().width(),
        design.latency(),
        design.initiation_interval()
    )];
    if !design.stages.is_empty() {
        lines[0] = format!(
            "{}: {} streaming stages and {} layers, input {} beats of {} x {} bits, output {} x {} bits, latency {} cycles, initiation interval {}{clock}",
            design.model,
            design.stages.len(),
            design.layers.len(),
            design.input_beats(),
            design.beat_len(),
            design.input_range().width(),
            design.output_len(),
            design.output_range().width(),
            design.latency(),
            design.initiation_interval()
        );
    }
    for s in manifest["stages"].as_array().map(Vec::as_slice).unwrap_or_default() {
        let mvu = match s["window_inputs"].as_u64() {
            Some(k) => format!("  window {k} codes  acc {} bits  multipliers {}", s["accumulator_width"], s["multipliers"]),
            None => String::new(),
        };
        lines.push(format!(
            "  {:<16} {:<10} {} -> {}  kernel {}  out {:>2} bits{mvu}",
            s["node"].as_str().unwrap_or(""),
            s["stage"].as_str().unwrap_or(""),
            s["input"],
            s["output"],
            s["kernel"],
            s["output_width"]
        ));
    }
    for l in manifest["layers"].as_array().map(Vec::as_slice).unwrap_or_default() {
        lines.push(format!(
            "  {:<16} {:>4} -> {:<4} in {:>2} bits  acc {:>2} bits  out {:>2} bits  {}  latency {}",
            l["node"].as_str().unwrap_or(""),
            l["in_features"],
            l["out_features"],
            l["product_input_width"],
            l["accumulator_width"],
            l["output_width"],
            match l["products"].as_str() {
                Some("shift-add") => "shift-add products".to_string(),
                Some("xnor-popcount") => "XNOR-popcount".to_string(),
                _ => format!("multipliers {}", l["multipliers"]),
            },
            l["latency_cycles"]
        ));
    }
    let est = &manifest["estimate"];
    let n = |k: &str| est[k].as_f64().unwrap_or(0.0);
    lines.push(format!(
        "  estimate ({}): {:.0} LUTs, {:.0} FFs, {:.0} DSPs",
        est["model"].as_str().unwrap_or(""),
        n("luts"),
        n("ffs"),
        n("dsps")
    ));
    if let Some(n) = est["lut4"].as_f64() {
        lines.push(format!("  estimate of the ECP5 LUT4s ({}): {n:.0}", mase_hw::cost::LUT4_MODEL));
    }
    if let Some(f) = est["fmax_mhz"].as_f64() {
        lines.push(format!("  estimate of the ECP5 clock (delay model): {f:.1} MHz"));
    }
    lines
}

/// The passes of one `ch transform` run that `ch` provides, with what they need to know of the
/// run: the model's name and data set (recorded in the checkpoint of the design folder, for
/// `ch simulate`) and the default output folder.
pub(crate) struct CliPasses {
    pub label: String,
    pub dataset: Option<String>,
    pub dataset_info: Option<Value>,
    /// Where `emit_verilog` writes without an `output_dir`.
    pub hardware_dir: PathBuf,
}

impl CliPasses {
    fn emit_verilog(&self, graph: &mut Graph, ctx: &mut PassContext, args: &Value) -> Result<PassReport> {
        // Errors are one line under the caller's `pass `emit_verilog``.
        const PASS: &str = "emit_verilog";
        let args = if args.is_null() { json!({}) } else { args.clone() };
        let a: EmitVerilogArgs = serde_json::from_value(args).context("bad arguments")?;
        let layers: Vec<(String, usize)> = a.reuse_layer.into_iter().collect();
        if a.reuse == Some(0) {
            bail!("reuse: expected a positive integer, got 0");
        }
        if a.reuse.is_some() && a.part.is_some() {
            bail!("reuse and part both set every layer's reuse factor: give one (reuse_layer fixes single layers under part)");
        }
        let opts = lower_options(graph, a.reuse.unwrap_or(1), &layers, "reuse_layer")?;
        let dir = a.output_dir.unwrap_or_else(|| self.hardware_dir.clone());
        let ck = Checkpoint {
            graph: graph.clone(),
            params: ParamStore::clone(&ctx.params),
            optimizer_tensors: Vec::new(),
            meta: json!({"model": self.label, "dataset": self.dataset, "dataset_info": self.dataset_info, "transformed": true}),
        };
        let part = part_named(a.part.as_deref(), "part")?;
        let build = Build {
            clock_mhz: a.clock_mhz,
            multipliers: multipliers_named(a.multipliers.as_deref(), "multipliers")?,
            fill: fill_named(a.fill, part.as_ref(), "fill", "part")?,
            part,
            shift_add: a.shift_add,
        };
        let (design, manifest, fitted) = write_design(&ck, &self.label, &opts, &build, &dir)?;
        let mut text = summary_lines(&design, &manifest);
        let fit = build.part.zip(fitted.as_ref());
        text.extend(fit.map(|(p, f)| fit_line(&p, f)));
        text.push(format!("wrote {}", dir.display()));
        let report = json!({
            "fit": fit.map(|(p, f)| fit_json(&p, f)),
            "dir": std::path::absolute(&dir).unwrap_or(dir.clone()),
            "latency_cycles": design.latency(),
            "initiation_interval": design.initiation_interval(),
            "clock_mhz": design.clock_mhz,
            "layers": design.layers.iter().map(|l| json!({"node": l.node, "reuse_factor": l.reuse, "latency_cycles": design.layer_latency(l)})).collect::<Vec<_>>(),
            "estimate": manifest["estimate"],
        });
        Ok(PassReport::new(PASS, report).with_text(text.join("\n")))
    }
}

impl ExternalPasses for CliPasses {
    fn knows(&self, name: &str) -> bool {
        CLI_PASSES.iter().any(|p| p.name == name)
    }

    fn names(&self) -> Vec<String> {
        CLI_PASSES.iter().map(|p| p.name.to_string()).collect()
    }

    fn run(&self, name: &str, graph: &mut Graph, ctx: &mut PassContext, args: &Value) -> Result<PassReport> {
        match name {
            "emit_verilog" => self.emit_verilog(graph, ctx, args),
            other => bail!("unknown pass `{other}`"),
        }
    }
}

/// `ch`'s passes first, then the caller's (a program embedding `ch`).
pub(crate) struct Layered<'a> {
    pub first: &'a dyn ExternalPasses,
    pub then: Option<&'a dyn ExternalPasses>,
}

impl ExternalPasses for Layered<'_> {
    fn knows(&self, name: &str) -> bool {
        self.first.knows(name) || self.then.is_some_and(|t| t.knows(name))
    }

    fn names(&self) -> Vec<String> {
        let mut names = self.first.names();
        names.extend(self.then.map(|t| t.names()).unwrap_or_default());
        names
    }

    fn run(&self, name: &str, graph: &mut Graph, ctx: &mut PassContext, args: &Value) -> Result<PassReport> {
        match self.then.filter(|_| !self.first.knows(name)) {
            Some(t) => t.run(name, graph, ctx, args),
            None => self.first.run(name, graph, ctx, args),
        }
    }
}
