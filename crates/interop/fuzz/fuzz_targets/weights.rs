//! Any bytes given to the weight readers (torch zip and Lightning checkpoints, npz, safetensors)
//! give a state dict or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = mase_interop::read_weight_bytes(data);
    let _ = mase_interop::torch::read_torch(data);
});
