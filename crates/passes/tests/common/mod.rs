#![allow(dead_code)]
//! Models and contexts shared by the pass tests.

use mase_ir::{Graph, Rng};
use mase_passes::{run_pass, InputSource, PassContext, PassReport};
use mase_zoo::{build_model, ModelContext};
use serde_json::{json, Value};

/// A zoo model for samples of `sample_shape` and `classes` classes, with seeded parameters and a
/// context drawing random inputs, batch size 8.
pub fn model(name: &str, sample_shape: &[usize], classes: usize) -> (Graph, PassContext) {
    let g = build_model(name, &ModelContext::new(sample_shape.to_vec(), classes)).expect("zoo model");
    let params = mase_runtime::init_params(&g, &mut Rng::new(7));
    let mut ctx = PassContext::new(params);
    ctx.inputs = InputSource::Random { sample_shape: sample_shape.to_vec() };
    (g, ctx)
}

/// jsc-tiny on jsc's 16 features and 5 classes.
pub fn jsc_tiny() -> (Graph, PassContext) {
    model("jsc-tiny", &[16], 5)
}

/// Runs a pass, panicking with its error.
pub fn pass(name: &str, g: &mut Graph, ctx: &mut PassContext, args: Value) -> PassReport {
    run_pass(name, g, ctx, &args).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// init, common and software metadata.
pub fn with_metadata(g: &mut Graph, ctx: &mut PassContext) {
    for p in ["init_metadata", "add_common_metadata", "add_software_metadata"] {
        pass(p, g, ctx, json!(null));
    }
}

/// MASE's lab config: integer 8/4 for the linear layers' input, weight and bias.
pub fn lab_linear_8_4() -> Value {
    json!({
        "by": "type",
        "default": {"config": {"name": "NA"}},
        "linear": {"config": {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4, "weight_width": 8,
            "weight_frac_width": 4, "bias_width": 8, "bias_frac_width": 4}},
    })
}
