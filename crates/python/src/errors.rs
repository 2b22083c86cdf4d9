//! Rust errors and panics as Python exceptions. The message is the CLI's one line; the class
//! follows the error's variant: an unknown name or key is a `KeyError`, a missing file (an
//! operating-system "not found" anywhere in the chain of sources) a `FileNotFoundError`, any
//! other bad input a `ValueError`, and a panic (a bug) a `RuntimeError`.

use mase_io::IoError;
use mase_passes::PassError;
use mase_zoo::ZooError;
use pyo3::exceptions::{PyFileNotFoundError, PyKeyError, PyRuntimeError, PyValueError};
use pyo3::PyErr;
use std::error::Error;

/// The Python exception class an error maps to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    Key,
    FileNotFound,
    Value,
}

/// Builds the Python exception of `class` with `message` made one line.
pub fn raise(class: ErrorClass, message: &str) -> PyErr {
    let line = one_line(message);
    match class {
        ErrorClass::Key => PyKeyError::new_err(line),
        ErrorClass::FileNotFound => PyFileNotFoundError::new_err(line),
        ErrorClass::Value => PyValueError::new_err(line),
    }
}

/// A library error as a Python exception.
pub fn to_py(e: &(dyn Error + 'static)) -> PyErr {
    raise(classify(e), &e.to_string())
}

/// Which exception an error of the workspace's crates is: its variant decides an unknown name
/// or key; an operating-system "not found" anywhere in its chain of sources is a missing file
/// (a model, weight or data file that is not there); anything else is a `ValueError`.
pub fn classify(e: &(dyn Error + 'static)) -> ErrorClass {
    if let Some(class) = unknown_name(e) {
        return class;
    }
    let mut cause: Option<&(dyn Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::NotFound) {
            return ErrorClass::FileNotFound;
        }
        cause = c.source();
    }
    ErrorClass::Value
}

/// `KeyError` for the variants that name an unknown pass, node, argument, model or data set.
fn unknown_name(e: &(dyn Error + 'static)) -> Option<ErrorClass> {
    if let Some(p) = e.downcast_ref::<PassError>() {
        return match p {
            PassError::UnknownPass { .. } | PassError::UnknownNode { .. } | PassError::UnknownArg { .. } => Some(ErrorClass::Key),
            _ => None,
        };
    }
    if let Some(z) = e.downcast_ref::<ZooError>() {
        return match z {
            ZooError::UnknownModel { .. } => Some(ErrorClass::Key),
            _ => None,
        };
    }
    if let Some(i) = e.downcast_ref::<IoError>() {
        return match i {
            IoError::UnknownDataset { .. } => Some(ErrorClass::Key),
            _ => None,
        };
    }
    None
}

/// Runs `f`, turning a panic into `RuntimeError("internal error in <what>: ...; please report")`
/// so that no Rust panic reaches Python as pyo3's `PanicException`.
pub fn guarded<T>(what: &str, f: impl FnOnce() -> pyo3::PyResult<T>) -> pyo3::PyResult<T> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(payload) => {
            let text = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "a panic without a message".to_string());
            Err(PyRuntimeError::new_err(format!("internal error in {what}: {}; please report", one_line(&text))))
        }
    }
}

/// The message on one line: line breaks become "; ".
pub fn one_line(s: &str) -> String {
    s.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join("; ")
}
