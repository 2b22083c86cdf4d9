//! Any bytes given to the ONNX/QONNX importer give a model or an error, never a panic; a model
//! that imports also exports.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mase_interop::{export_bytes, import_bytes, ExportFormat, ExportOptions, ImportOptions};

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = import_bytes(data, &ImportOptions::default()) {
        let _ = export_bytes(&m.graph, &m.params, &ExportOptions::new(ExportFormat::Qonnx));
    }
});
