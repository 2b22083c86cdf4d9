//! Any text given as a TOML config: its `[passes.quantize]` table, as `ch transform` reads it,
//! quantizes jsc-tiny or gives an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mase_zoo::{build_model, ModelContext};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(table) = text.parse::<toml::Table>() else { return };
    let Some(quantize) = table.get("passes").and_then(|p| p.get("quantize")) else { return };
    let Ok(args) = serde_json::to_value(quantize) else { return };
    let mut graph = build_model("jsc-tiny", &ModelContext::new([16], 5)).expect("jsc-tiny builds");
    let _ = mase_passes::quantize::quantize_json(&mut graph, &args);
});
