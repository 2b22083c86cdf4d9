//! Any bytes given to the CIFAR-10 batch reader give images or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let _ = mase_io::parse::cifar_records(Path::new("fuzz.bin"), data);
});
