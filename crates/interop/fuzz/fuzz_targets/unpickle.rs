//! Any bytes given to the safe unpickler give a value tree or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = mase_interop::torch::pickle::unpickle(data);
});
