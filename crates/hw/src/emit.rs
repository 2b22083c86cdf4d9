//! Writing a design's folder: `rtl/` (one file per layer and the top), `tb/tb.cpp`, `build.sh`,
//! `design.json` (the design itself, which `simulate` reads back), `manifest.json` and
//! `SHA256SUMS` (the checksums tying them together, [`crate::integrity`]).

use crate::design::Design;
use crate::error::{file_cause, file_err, file_msg, Result};
use crate::testbench::{build_script, testbench_cpp};
use crate::verilog::{layer_module, layer_verilog, top_verilog, TOP};
use serde_json::{json, Value};
use std::path::Path;

/// The manifest: ports, widths, latency and initiation interval, and per layer its widths.
pub fn manifest(d: &Design) -> Value {
    let port = |len: usize, r: crate::design::Range| json!({"elements": len, "element_width": r.width(), "frac_width": r.frac, "min_code": r.lo, "max_code": r.hi, "bits": len * r.width() as usize});
    let (w, f, s) = d.input_format;
    let est = crate::cost::estimate(d);
    json!({
        "model": d.model,
        "top": TOP,
        "handshake": "valid/ready on input and output; a transfer happens on a rising clock edge where both are high; rst is synchronous and active high; a pipelined design leaves reset a cycle after rst falls, with in_ready low in that cycle",
        // Elements per beat; a convolutional network takes a sample in `beats` beats, one pixel
        // (its channels) each, in raster order.
        "input": port(d.beat_len(), d.input_range()),
        "beats": d.input_beats(),
        "input_format": {"name": "integer", "width": w, "frac_width": f, "signed": s},
        "output": port(d.output_len(), d.output_range()),
        "latency_cycles": d.latency(),
        "initiation_interval": d.initiation_interval(),
        "clock_mhz": d.clock_mhz,
        "multipliers": d.multipliers.name(),
        "part": d.part,
        "register_bits": est.layers.iter().map(|e| e.register_bits).sum::<usize>(),
        "registers_added": est.layers.iter().map(|e| e.registers_added).sum::<usize>(),
        "estimate": {"model": crate::cost::MODEL, "luts": est.luts, "ffs": est.ffs, "dsps": est.dsps, "fmax_mhz": est.fmax_mhz, "lut4": est.lut4},
        "stages": d.stages.iter().zip(&est.stages).map(|(s, e)| {
            let mut v = crate::conv::stage_json(s);
            v["estimate"] = json!({"luts": e.luts, "ffs": e.ffs, "dsps": e.dsps});
            v
        }).collect::<Vec<_>>(),
        "layers": d.layers.iter().zip(&est.layers).map(|(l, e)| json!({
            "node": l.node,
            "module": layer_module(l),
            "in_features": l.in_features,
            "out_features": l.out_features,
            "input_width": l.input.width(),
            "pre_steps": steps_json(&l.pre, l.input),
            "product_input_width": l.product_input().width(),
            "accumulator_width": l.acc.width(),
            "accumulator_frac_width": l.acc.frac,
            "post_steps": steps_json(&l.post, l.acc),
            "output_width": l.output().width(),
            "reuse_factor": l.reuse,
            "multipliers": l.multipliers(),
            "products": if l.is_popcount() { "xnor-popcount" } else { l.products.name() },
            "latency_cycles": d.layer_latency(l),
            "initiation_interval": l.initiation_interval(),
            "pipeline": d.pipelining().map(|p| crate::pipeline::schedule(l, &p)),
            "register_bits": e.register_bits,
            "registers_added": e.registers_added,
            "estimate": layer_estimate(e),
        })).collect::<Vec<_>>(),
    })
}

/// A layer's estimate in the manifest: the cost model's LUTs, flip-flops and DSPs, and the
/// ECP5 LUT4 model's figure (null where it has none).
fn layer_estimate(e: &crate::cost::LayerCost) -> Value {
    json!({"luts": e.luts, "ffs": e.ffs, "dsps": e.dsps, "lut4": e.lut4})
}

/// The element-wise steps of a layer, each with the width and fraction bits of its result.
fn steps_json(steps: &[crate::design::Step], from: crate::design::Range) -> Vec<Value> {
    let mut r = from;
    steps
        .iter()
        .map(|s| {
            r = s.range(r);
            json!({"step": s.name(), "width": r.width(), "frac_width": r.frac})
        })
        .collect()
}

/// Writes the design's folder into `dir` (created if needed) and returns the manifest.
pub fn emit(d: &Design, dir: &Path) -> Result<Value> {
    let write = |rel: &str, text: &str| -> Result<()> {
        let p = dir.join(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| file_err(parent, e))?;
        }
        std::fs::write(&p, text).map_err(|e| file_err(&p, e))
    };
    let mut files = Vec::new();
    // The streaming stages of a convolutional network and the collector after them.
    for s in &d.stages {
        let f = format!("{}.v", crate::conv::verilog::stage_module(s));
        write(&format!("rtl/{f}"), &crate::conv::verilog::stage_verilog(s, d.pipelining()))?;
        files.push(format!("rtl/{f}"));
    }
    if let Some(last) = d.stages.last() {
        let [h, w] = last.window().out_hw();
        let f = format!("{}.v", crate::conv::verilog::COLLECTOR);
        write(&format!("rtl/{f}"), &crate::conv::verilog::collector_verilog(last.out_channels(), h * w, last.output()))?;
        files.push(format!("rtl/{f}"));
    }
    for (i, l) in d.layers.iter().enumerate() {
        let f = format!("{}.v", layer_module(l));
        write(&format!("rtl/{f}"), &layer_verilog(l, d.layer_pipelining(i)))?;
        files.push(format!("rtl/{f}"));
    }
    if d.multipliers == crate::dsp::Multipliers::Ecp5Dsp {
        let f = format!("rtl/{}.v", crate::dsp::ECP5_WRAPPER);
        write(&f, &crate::dsp::ecp5_wrapper())?;
        write(crate::dsp::ECP5_MODEL_FILE, &crate::dsp::mult18x18d_model())?;
        files.push(f);
        files.push(crate::dsp::ECP5_MODEL_FILE.to_string());
    }
    let top = if d.stages.is_empty() { top_verilog(d) } else { crate::conv::verilog::top_verilog(d) };
    write(&format!("rtl/{TOP}.v"), &top)?;
    write("tb/tb.cpp", &testbench_cpp(d))?;
    write("build.sh", &build_script(&files))?;
    set_executable(&dir.join("build.sh"))?;
    let m = manifest(d);
    write("manifest.json", &(serde_json::to_string_pretty(&m).unwrap_or_default() + "\n"))?;
    write("design.json", &serde_json::to_string(d).unwrap_or_default())?;
    crate::integrity::write_sums(dir)?;
    Ok(m)
}

#[cfg(unix)]
fn set_executable(p: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).map_err(|e| file_err(p, e))
}

#[cfg(not(unix))]
fn set_executable(_: &Path) -> Result<()> {
    Ok(())
}

/// Reads back the design a folder holds, once its files match their checksums
/// ([`crate::integrity::check_sums`]).
pub fn read_design(dir: &Path) -> Result<Design> {
    crate::integrity::check_sums(dir)?;
    let p = dir.join("design.json");
    let text = std::fs::read_to_string(&p).map_err(|e| file_err(&p, e))?;
    parse_design(&p, &text)
}

/// The design of the text of `design.json` (read from `path`, for messages): JSON of the right
/// shape whose sizes, widths and constants pass [`crate::check_design`].
pub fn parse_design(path: &Path, text: &str) -> Result<Design> {
    let d: Design = serde_json::from_str(text).map_err(|e| file_cause(path, "not a design written by `ch emit`", e))?;
    crate::check_design(&d).map_err(|reason| file_msg(path, format!("not a design written by `ch emit`: {reason}")))?;
    Ok(d)
}
