//! Helpers shared by the hardware integration tests.
#![allow(dead_code)]

use mase_ir::{Graph, ParamStore, Rng};
use mase_passes::{run_pass, InputSource, PassContext};
use serde_json::json;

/// Whether a tool is there; without it the test says SKIP in one line, unless CI=true.
pub fn have(tool: &str) -> bool {
    if mase_hw::simulate::tool_available(tool) {
        return true;
    }
    assert!(std::env::var("CI").map_or(true, |v| v != "true"), "{tool} is not installed and CI=true");
    eprintln!("SKIP: {tool} is not installed");
    false
}

/// A zoo model with seeded weights, its linears (and relus when `relu_bits` is set) quantized
/// to `integer` formats of `bits` bits with half of them fractional.
pub fn quantized(model: &str, bits: u32, relu_bits: Option<u32>) -> (Graph, ParamStore) {
    quantized_frac(model, bits, bits as i32 / 2, relu_bits)
}

/// `quantized` with `frac` fraction bits.
pub fn quantized_frac(model: &str, bits: u32, frac: i32, relu_bits: Option<u32>) -> (Graph, ParamStore) {
    let ctx = mase_zoo::ModelContext { sample_shape: vec![16], num_classes: 5 };
    quantize_graph(mase_zoo::build_model(model, &ctx).unwrap(), bits, frac, relu_bits)
}

/// `quantized` for any graph taking 16 features.
pub fn quantize_graph(mut g: Graph, bits: u32, f: i32, relu_bits: Option<u32>) -> (Graph, ParamStore) {
    let params = mase_runtime::init_params(&g, &mut Rng::new(7));
    let mut cx = PassContext::new(params);
    cx.inputs = InputSource::Random { sample_shape: vec![16] };
    run_pass("add_common_metadata", &mut g, &mut cx, &json!(null)).unwrap();
    let mut q = json!({"by": "type", "default": {"config": {"name": "NA"}}, "linear": {"config": {"name": "integer",
        "data_in_width": bits, "data_in_frac_width": f, "weight_width": bits, "weight_frac_width": f,
        "bias_width": bits, "bias_frac_width": f}}});
    if let Some(rb) = relu_bits {
        q["relu"] = json!({"config": {"name": "integer", "data_in_width": rb, "data_in_frac_width": rb / 2}});
    }
    run_pass("quantize", &mut g, &mut cx, &q).unwrap();
    (g, cx.params)
}
