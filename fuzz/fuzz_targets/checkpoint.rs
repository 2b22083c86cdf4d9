//! Any bytes given to the checkpoint reader (safetensors header, metadata JSON, the graph and its
//! validation against the parameters) give a checkpoint or an error, never a panic. Under
//! `cfg(fuzzing)` the reader skips its CRC-32 check, so that mutated files reach the parsing
//! behind it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let _ = mase_io::parse::checkpoint(Path::new("fuzz.ckpt"), data);
});
