//! The zoo's and the data sets' tables, and data sets as numpy arrays.

use crate::errors::{guarded, raise, to_py, ErrorClass};
use mase_io::{DataOptions, Dataset};
use numpy::ndarray::{Array1, ArrayD, IxDyn};
use numpy::IntoPyArray;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use std::path::PathBuf;

/// The names of the zoo's models.
#[pyfunction]
pub fn model_names() -> Vec<&'static str> {
    mase_zoo::model_names()
}

/// What the zoo says about a model: `name`, `description`, `family`, `dataset`.
#[pyfunction]
pub fn model_info<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
    let info = mase_zoo::model_info(name)
        .ok_or_else(|| raise(ErrorClass::Key, &format!("unknown model `{name}`; known models: {}", mase_zoo::model_names().join(", "))))?;
    let d = PyDict::new(py);
    d.set_item("name", info.name)?;
    d.set_item("description", info.description)?;
    d.set_item("family", info.family)?;
    d.set_item("dataset", info.dataset)?;
    Ok(d)
}

/// The names of the data sets.
#[pyfunction]
pub fn dataset_names() -> Vec<&'static str> {
    mase_io::dataset_names().to_vec()
}

/// Loads a data set: `{"info": {...}, "train": (x, y), "val": (x, y), "test": (x, y)}` with `x`
/// float32 `[N, ...sample]` and `y` int64 `[N]`.
#[pyfunction]
#[pyo3(signature = (name, data_dir=None))]
pub fn load_dataset<'py>(py: Python<'py>, name: &str, data_dir: Option<PathBuf>) -> PyResult<Bound<'py, PyDict>> {
    let splits = guarded("load_dataset", || {
        py.allow_threads(|| mase_io::load_dataset(name, &DataOptions { data_dir, ..Default::default() }).map_err(|e| to_py(&e)))
    })?;
    let info_json = serde_json::to_string(&splits.info).map_err(|e| raise(ErrorClass::Value, &e.to_string()))?;
    let d = PyDict::new(py);
    d.set_item("info", info_json)?;
    for (key, split) in [("train", splits.train), ("val", splits.val), ("test", splits.test)] {
        d.set_item(key, split_arrays(py, split)?)?;
    }
    Ok(d)
}

/// A split as `(x, y)` arrays, moved into numpy without a copy.
fn split_arrays(py: Python<'_>, split: Dataset) -> PyResult<(PyObject, PyObject)> {
    let n = split.len();
    let mut shape = vec![n];
    shape.extend(&split.sample_shape);
    let xs = ArrayD::from_shape_vec(IxDyn(&shape), split.x).map_err(|e| raise(ErrorClass::Value, &e.to_string()))?;
    let ys = Array1::from_vec(split.y.into_iter().map(i64::from).collect::<Vec<i64>>());
    Ok((xs.into_pyarray(py).into_any().unbind(), ys.into_pyarray(py).into_any().unbind()))
}
