//! Any bytes given to the MNIST reader (an IDX image file and an IDX label file; the first byte
//! says where the input splits into the two) give a data set or an error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, rest)) = data.split_first() else { return };
    // Labels are the last `cut` bytes (up to 255: a header and a few labels).
    let (images, labels) = rest.split_at(rest.len().saturating_sub(cut as usize));
    let _ = mase_io::parse::mnist(Path::new("images.idx"), images, Path::new("labels.idx"), labels);
    let _ = mase_io::parse::idx(Path::new("fuzz.idx"), rest, 3);
    let _ = mase_io::parse::idx(Path::new("fuzz.idx"), rest, 1);
});
