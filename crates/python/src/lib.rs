//! `mase_rs._native`: the Rust side of the `mase_rs` Python package. It is a thin binding: Rust
//! owns graphs, parameters and data; the Python package (`python/mase_rs`) gives them MASE's
//! names and module paths.

mod accelerator;
mod data;
mod errors;
mod fit;
mod graph;
mod plugins;
mod probe;
mod quant_config;
mod quantize;
mod study;
mod traced;

use pyo3::prelude::*;

/// Every pass of the registry as `(name, doc, argument type)`, in registry order.
#[pyfunction]
fn pass_list() -> Vec<(&'static str, &'static str, &'static str)> {
    mase_passes::PASSES.iter().map(|p| (p.name, p.doc, p.args)).collect()
}

/// Runs `ch` with `argv` (program name first) and returns its exit status. The GIL is released
/// while the action runs.
#[pyfunction]
fn ch_main(py: Python<'_>, argv: Vec<String>) -> i32 {
    py.allow_threads(|| mase_cli::run_cli(argv))
}

/// A test hook: panics inside the boundary guard, so that tests can check that a panic reaches
/// Python as a `RuntimeError` with one line.
#[pyfunction]
fn _failpoint_panic() -> PyResult<()> {
    errors::guarded("failpoint", || panic!("failpoint panic"))
}

/// A TOML file as JSON (for configs read from Python, whatever its version).
#[pyfunction]
fn read_toml(path: std::path::PathBuf) -> PyResult<String> {
    let text =
        std::fs::read_to_string(&path).map_err(|e| errors::raise(errors::ErrorClass::FileNotFound, &format!("{}: {e}", path.display())))?;
    let table: toml::Table =
        text.parse().map_err(|e| errors::raise(errors::ErrorClass::Value, &format!("config {}: {e}", path.display())))?;
    serde_json::to_string(&table).map_err(|e| errors::raise(errors::ErrorClass::Value, &e.to_string()))
}

/// A test hook: the next `parties` forward calls wait inside their GIL-free section until all
/// of them are inside at once, each at most `limit_s` seconds (see `probe.rs`); 0 disarms it.
#[pyfunction]
#[pyo3(signature = (parties, limit_s=20.0))]
fn _arm_gil_probe(parties: usize, limit_s: f64) -> PyResult<()> {
    let limit = std::time::Duration::try_from_secs_f64(limit_s)
        .map_err(|e| errors::raise(errors::ErrorClass::Value, &format!("limit_s {limit_s}: {e}")))?;
    probe::arm(parties, limit);
    Ok(())
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    accelerator::register();
    m.add_class::<graph::NativeGraph>()?;
    m.add_function(wrap_pyfunction!(pass_list, m)?)?;
    m.add_function(wrap_pyfunction!(ch_main, m)?)?;
    m.add_function(wrap_pyfunction!(_failpoint_panic, m)?)?;
    m.add_class::<study::NativeStudy>()?;
    m.add_function(wrap_pyfunction!(plugins::run_action, m)?)?;
    m.add_function(wrap_pyfunction!(_arm_gil_probe, m)?)?;
    m.add_function(wrap_pyfunction!(read_toml, m)?)?;
    m.add_function(wrap_pyfunction!(data::model_names, m)?)?;
    m.add_function(wrap_pyfunction!(data::model_info, m)?)?;
    m.add_function(wrap_pyfunction!(data::dataset_names, m)?)?;
    m.add_function(wrap_pyfunction!(data::load_dataset, m)?)?;
    m.add_function(wrap_pyfunction!(quant_config::quant_from_config, m)?)?;
    m.add_function(wrap_pyfunction!(quantize::quantize, m)?)?;
    m.add_function(wrap_pyfunction!(quantize::quant_formats, m)?)?;
    m.add_function(wrap_pyfunction!(quantize::quant_draws_random, m)?)?;
    Ok(())
}
