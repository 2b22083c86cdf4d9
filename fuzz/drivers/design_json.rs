//! The `design_json` fuzz target's driver, shared with the normal test suite
//! (`crates/cli/tests/fuzz_drivers.rs` includes this file): text given as the `design.json` of
//! a folder `ch emit` wrote, read as `ch simulate` reads it, then everything `ch simulate` and
//! `ch emit` compute from a design without Verilator: sizes, ranges, schedule, the input codes
//! and outputs of a sample, the manifest, the cost model and the Verilog text. Each must accept
//! it or refuse it with one line, never panic.

use std::path::Path;

/// Runs one input; `Err` is the one-line refusal.
pub fn run(data: &[u8]) -> Result<(), String> {
    let text = std::str::from_utf8(data).map_err(|e| format!("not UTF-8: {e}"))?;
    let d = mase_hw::parse_design(Path::new("design.json"), text).map_err(|e| e.to_string())?;
    // A sample spanning negative, fractional and large values, NaN and infinities included.
    const VALUES: [f32; 8] = [-1.75, 0.0, 0.3, 2.5, -1e9, f32::NAN, f32::INFINITY, 7.0];
    let x: Vec<f32> = (0..d.input_len()).map(|i| VALUES[i % VALUES.len()]).collect();
    let out = d.eval(&d.input_codes(&x));
    assert_eq!(out.len(), d.output_len(), "one output code per output");
    let _ = (d.input_range().width(), d.output_range().width(), d.latency(), d.initiation_interval());
    let _ = (mase_hw::manifest(&d), mase_hw::cost::estimate(&d));
    let _ = (mase_hw::verilog::top_verilog(&d), mase_hw::testbench::testbench_cpp(&d));
    for layer in &d.layers {
        let _ = mase_hw::verilog::layer_verilog(layer, d.pipelining());
    }
    Ok(())
}
