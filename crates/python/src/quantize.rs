//! The number formats of `mase-quant` on numpy arrays: the Rust kernel that the PyTorch
//! quantizers of `mase_rs.nn.quantizers` are checked against bit for bit.

use crate::errors::{guarded, raise, to_py, ErrorClass};
use mase_ir::{QuantFormat, Rng};
use numpy::ndarray::{ArrayD, IxDyn};
use numpy::{IntoPyArray, PyArrayDyn, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;

/// Quantizes a float32 array of any shape with a format given as the IR serialises a
/// `QuantFormat` (JSON with the tag `name`). `seed` seeds the random numbers of stochastic
/// formats (one uniform number per value, in index order). The GIL is released while Rust
/// computes.
#[pyfunction]
#[pyo3(signature = (fmt_json, x, seed=0))]
pub fn quantize<'py>(py: Python<'py>, fmt_json: &str, x: PyReadonlyArrayDyn<'py, f32>, seed: u64) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
    let fmt: QuantFormat =
        serde_json::from_str(fmt_json).map_err(|e| raise(ErrorClass::Value, &format!("quantize: the format {fmt_json}: {e}")))?;
    let shape = x.shape().to_vec();
    // Read in row-major order, the order the kernels expect, whatever the array's layout
    // (`as_slice` would hand over a Fortran-ordered array's memory as it lies).
    let values: Vec<f32> = x.as_array().iter().copied().collect();
    let out = guarded("quantize", || {
        py.allow_threads(|| {
            let mut out = vec![0.0f32; values.len()];
            mase_quant::quantize(&fmt, &values, &shape, &mut out, &mut Rng::new(seed)).map_err(|e| to_py(&e))?;
            Ok(out)
        })
    })?;
    let arr = ArrayD::from_shape_vec(IxDyn(&shape), out).map_err(|e| raise(ErrorClass::Value, &e.to_string()))?;
    Ok(arr.into_pyarray(py))
}

/// Every format the quant crate implements as `(name, one-line description)`, in `QuantFormat`
/// order; the names are the serde tags of `QuantFormat`.
#[pyfunction]
pub fn quant_formats() -> Vec<(&'static str, &'static str)> {
    mase_quant::formats().collect()
}

/// Whether quantizing with the format draws random numbers (stochastic binary).
#[pyfunction]
pub fn quant_draws_random(fmt_json: &str) -> PyResult<bool> {
    let fmt: QuantFormat =
        serde_json::from_str(fmt_json).map_err(|e| raise(ErrorClass::Value, &format!("quantize: the format {fmt_json}: {e}")))?;
    Ok(mase_quant::draws_random(&fmt))
}
