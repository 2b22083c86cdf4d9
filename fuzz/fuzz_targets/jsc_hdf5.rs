//! Any bytes given to the jet-table HDF5 reader (the third-party `hdf5-reader` crate, then
//! mase-io's column decoding) give a table or an error, never a panic or an unbounded allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let _ = mase_io::parse::jsc_hdf5(Path::new("fuzz.h5"), data);
});
