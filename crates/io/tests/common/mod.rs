//! Helpers shared by the integration tests.
#![allow(dead_code)]

use mase_io::{DataOptions, Dataset};
use std::path::{Path, PathBuf};

mod scratch;
pub use scratch::scratch;

/// The repository's shipped data folder.
pub fn shipped() -> DataOptions {
    DataOptions { data_dir: Some(PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../data"))), ..Default::default() }
}

/// This crate's test fixtures.
pub fn fixtures() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures"))
}

pub fn write(path: &Path, bytes: &[u8]) {
    if let Some(p) = path.parent() {
        std::fs::create_dir_all(p).unwrap_or_else(|e| panic!("mkdir {}: {e}", p.display()));
    }
    std::fs::write(path, bytes).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

/// Per-feature mean and population standard deviation of flat rows.
pub fn moments(d: &Dataset) -> (Vec<f64>, Vec<f64>) {
    let f = d.sample_len();
    let n = d.len() as f64;
    let mut mean = vec![0f64; f];
    let mut sq = vec![0f64; f];
    for i in 0..d.len() {
        for (j, &v) in d.sample(i).iter().enumerate() {
            mean[j] += v as f64 / n;
        }
    }
    for i in 0..d.len() {
        for (j, &v) in d.sample(i).iter().enumerate() {
            sq[j] += (v as f64 - mean[j]).powi(2) / n;
        }
    }
    (mean, sq.into_iter().map(f64::sqrt).collect())
}

/// Concatenation of two data sets with the same sample shape.
pub fn concat(a: &Dataset, b: &Dataset) -> Dataset {
    let mut out = a.clone();
    out.x.extend_from_slice(&b.x);
    out.y.extend_from_slice(&b.y);
    out
}
