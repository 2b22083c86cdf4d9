//! Any text given as a model file builds a graph or gives an error, never a panic, for a
//! tabular context (jsc: 16 features, 5 classes) and an image one (MNIST: 1x28x28, 10 classes).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mase_zoo::{parse_model_file, ModelContext};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for ctx in [ModelContext::new([16], 5), ModelContext::new([1, 28, 28], 10)] {
        let _ = parse_model_file(text, "fuzz.toml", &ctx);
    }
});
