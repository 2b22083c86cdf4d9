//! Any text as the `design.json` of a folder `ch emit` wrote, read as `ch simulate` reads it: a
//! design whose evaluation, manifest, cost and Verilog never panic, or one error line.
//! The driver (`fuzz/drivers/design_json.rs`) also runs in the normal test suite, on the seed corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../drivers/design_json.rs"]
mod driver;

fuzz_target!(|data: &[u8]| {
    let _ = driver::run(data);
});
