#![allow(dead_code)]
//! Helpers shared by the interop tests: fixture paths, reference bundles, running a graph.

use mase_interop::{import_file, ImportOptions, Imported};
use mase_ir::{Graph, ParamStore, Tensor};
use mase_runtime::{ExecOptions, Executor, Mode};
use std::path::PathBuf;

pub fn fixture(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel)
}

/// Imports `tests/fixtures/models/<name>`.
pub fn import(name: &str) -> Imported {
    import_file(&fixture(&format!("models/{name}")), &ImportOptions::default()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// A named array of an `.npz` fixture.
pub fn npz(rel: &str, key: &str) -> Tensor {
    let bytes = std::fs::read(fixture(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    let arrays = mase_interop::npy::read_npz(&bytes).unwrap();
    arrays.into_iter().find(|(k, _)| k == key).unwrap_or_else(|| panic!("{rel} has no `{key}`")).1.tensor
}

/// Runs a graph in evaluation mode on a batch.
pub fn run(graph: &Graph, params: &ParamStore, x: &Tensor) -> Tensor {
    let mut exec = Executor::new(graph, params, ExecOptions { threads: 1, seed: 0 }).unwrap();
    let y = exec.forward(&x.data, &x.shape, Mode::Eval).unwrap().to_vec();
    let shape = exec.output_shape(x.shape[0]).unwrap();
    Tensor::new(shape, y).unwrap()
}

/// The largest absolute difference, with the index where it is.
pub fn max_diff(a: &Tensor, b: &Tensor) -> (f32, usize) {
    assert_eq!(a.shape, b.shape);
    a.data.iter().zip(&b.data).enumerate().map(|(i, (x, y))| ((x - y).abs(), i)).fold((0.0, 0), |m, v| if v.0 > m.0 { v } else { m })
}
