//! Any text given to the text table readers (the jet table as OpenML's CSV and ARFF, and
//! scikit-learn's tabular CSV) gives a table or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = mase_io::parse::jsc_csv(Path::new("fuzz.csv"), text);
    let _ = mase_io::parse::jsc_arff(Path::new("fuzz.arff"), text);
    let _ = mase_io::parse::sklearn_csv(Path::new("fuzz.csv"), text);
});
