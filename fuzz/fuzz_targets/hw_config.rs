//! Any text as a hardware transform config (`[passes.quantize]` with `hardware` tables,
//! `[passes.emit_verilog]`): it is lowered to a design that computes what the integer executor
//! computes, or refused with one line, never a panic.
//! The driver (`fuzz/drivers/hw_config.rs`) also runs in the normal test suite, on the seed corpus.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../drivers/hw_config.rs"]
mod driver;

fuzz_target!(|data: &[u8]| {
    let _ = driver::run(data);
});
