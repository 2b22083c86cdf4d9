//! Any bytes as one part of a node's metadata, written as Python's `MaseGraph` writes it (the
//! first byte picks the node and the part, the rest is the JSON): the passes and the executor
//! that read metadata accept it or refuse it with one line, never panic.
//! The driver (`fuzz/drivers/node_meta.rs`) also runs in the normal test suite, on the seed corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../drivers/node_meta.rs"]
mod driver;

fuzz_target!(|data: &[u8]| {
    let _ = driver::run(data);
});
