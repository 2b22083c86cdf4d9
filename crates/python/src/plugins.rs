//! User code that plugs into `ch` actions run in this process: Python passes for `transform`
//! (`[passes.<name>]` tables naming a registered function) and Python runners for `search`
//! (`[search.strategy.sw_runner.<name>]` or `hw_runner` tables). The action runs without the
//! GIL; each call into Python takes it for the call only. The conversions on the Python side
//! (a `MaseGraph` around the lent graph, the data module, checking what the function returns)
//! live in `mase_rs.plugins`.

use crate::errors::{one_line, raise, ErrorClass};
use crate::graph::NativeGraph;
use mase_cli::{ExternalPasses, Plugins};
use mase_ir::Graph;
use mase_passes::{InputSource, PassContext, PassReport};
use mase_search::runner::RunContext;
use mase_search::{Candidate, ExternalRunners, Metrics, Runner, RunnerEnv, SearchError, Stage, ANY_METRIC};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};
use serde_json::Value;
use std::sync::{Arc, Mutex};

/// The Python module whose helpers call user functions.
const HELPERS: &str = "mase_rs.plugins";

/// The first exception a user function raised during an action, re-raised when the action
/// fails, so that the caller sees the function's own exception and traceback.
#[derive(Default)]
struct FirstError(Mutex<Option<PyErr>>);

impl FirstError {
    /// Keeps `e` unless an earlier one is kept, and returns its one-line text.
    fn keep(&self, py: Python<'_>, e: PyErr) -> String {
        let line = one_line(&format!("{}: {}", e.get_type(py).name().map(|n| n.to_string()).unwrap_or_default(), e.value(py)));
        self.0.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
        line
    }

    fn take(&self) -> Option<PyErr> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Registered Python passes by name.
struct PyPasses {
    funcs: Vec<(String, Arc<Py<PyAny>>)>,
    errors: Arc<FirstError>,
}

impl PyPasses {
    fn func(&self, name: &str) -> Option<&Arc<Py<PyAny>>> {
        self.funcs.iter().find(|(n, _)| n == name).map(|(_, f)| f)
    }
}

impl ExternalPasses for PyPasses {
    fn knows(&self, name: &str) -> bool {
        self.func(name).is_some()
    }

    fn names(&self) -> Vec<String> {
        self.funcs.iter().map(|(n, _)| n.clone()).collect()
    }

    fn run(&self, name: &str, graph: &mut Graph, ctx: &mut PassContext, args: &Value) -> anyhow::Result<PassReport> {
        let func = self.func(name).ok_or_else(|| anyhow::anyhow!("no Python pass `{name}` is registered"))?;
        Python::with_gil(|py| {
            let lent =
                NativeGraph::from_parts(std::mem::take(graph), std::mem::replace(ctx, PassContext::new(Default::default())), name.into());
            let native = Py::new(py, lent).map_err(|e| anyhow::anyhow!("{e}"))?;
            let called = py
                .import(HELPERS)
                .and_then(|m| m.getattr("_call_pass"))
                .and_then(|call| call.call1((name, &**func, native.clone_ref(py), args.to_string())));
            match called.and_then(|r| r.extract::<(Py<NativeGraph>, String)>()) {
                Ok((returned, info)) => {
                    let (g, c) = returned.borrow_mut(py).take_parts();
                    *graph = g;
                    *ctx = c;
                    let json: Value = serde_json::from_str(&info).map_err(|e| anyhow::anyhow!("the returned info: {e}"))?;
                    Ok(PassReport { pass: name.to_string(), json, text: String::new(), files: Vec::new(), warnings: Vec::new() })
                }
                Err(e) => {
                    // The pipeline stops; the graph goes back so that nothing is left half-moved.
                    let (g, c) = native.borrow_mut(py).take_parts();
                    *graph = g;
                    *ctx = c;
                    Err(anyhow::anyhow!("{}", self.errors.keep(py, e)))
                }
            }
        })
    }
}

/// Registered Python runners by name, with what they need to build a data module.
struct PyRunners {
    funcs: Vec<(String, Arc<Py<PyAny>>, Option<Vec<String>>)>,
    data_dir: Option<String>,
    errors: Arc<FirstError>,
}

impl ExternalRunners for PyRunners {
    fn build(&self, name: &str, stage: Stage, cfg: &Value, env: &RunnerEnv) -> Option<mase_search::Result<Box<dyn Runner>>> {
        let (_, func, metrics) = self.funcs.iter().find(|(n, _, _)| n == name)?;
        Some(Ok(Box::new(PyRunner {
            name: name.to_string(),
            stage,
            func: func.clone(),
            metrics: metrics.clone(),
            table: cfg.to_string(),
            dataset: env.splits.info.name.clone(),
            sample_shape: env.splits.info.sample_shape.clone(),
            batch_size: env.batch_size,
            data_dir: self.data_dir.clone(),
            errors: self.errors.clone(),
        })))
    }

    fn names(&self) -> Vec<String> {
        self.funcs.iter().map(|(n, _, _)| n.clone()).collect()
    }
}

/// A Python function `fn(mg, data_module, config) -> {metric: value}` as a search runner.
struct PyRunner {
    name: String,
    stage: Stage,
    func: Arc<Py<PyAny>>,
    /// The metrics it was registered with; `None`: whatever it returns.
    metrics: Option<Vec<String>>,
    /// The runner's config table, as JSON (the function's `config`).
    table: String,
    dataset: String,
    sample_shape: Vec<usize>,
    batch_size: usize,
    data_dir: Option<String>,
    errors: Arc<FirstError>,
}

impl Runner for PyRunner {
    fn name(&self) -> &str {
        &self.name
    }

    fn stage(&self) -> Stage {
        self.stage
    }

    fn reports(&self) -> Vec<&str> {
        match &self.metrics {
            Some(m) => m.iter().map(String::as_str).collect(),
            None => vec![ANY_METRIC],
        }
    }

    fn run(&self, cand: &mut Candidate, cx: &RunContext) -> mase_search::Result<Metrics> {
        let fail = |reason: String| SearchError::Runner { runner: self.name.clone(), reason };
        Python::with_gil(|py| {
            let mut ctx = PassContext::new((*cand.params).clone());
            ctx.inputs = InputSource::Random { sample_shape: self.sample_shape.clone() };
            ctx.threads = cx.threads;
            ctx.batch_size = self.batch_size;
            // The function sees the candidate as MASE's runners do, with its common metadata
            // (types, ops, shapes and the sampled formats).
            let mut graph = cand.graph.clone();
            mase_passes::run_pass("add_common_metadata", &mut graph, &mut ctx, &Value::Null).map_err(|e| fail(e.to_string()))?;
            let native = Py::new(py, NativeGraph::from_parts(graph, ctx, self.name.clone())).map_err(|e| fail(e.to_string()))?;
            let called = py.import(HELPERS).and_then(|m| m.getattr("_call_runner")).and_then(|call| {
                call.call1((
                    self.name.as_str(),
                    &*self.func,
                    native.clone_ref(py),
                    self.dataset.as_str(),
                    self.batch_size,
                    self.data_dir.clone(),
                    self.table.as_str(),
                ))
            });
            let (returned, metrics) = match called.and_then(|r| r.extract::<(Py<NativeGraph>, String)>()) {
                Ok(r) => r,
                Err(e) => return Err(fail(self.errors.keep(py, e))),
            };
            let metrics: Metrics = serde_json::from_str(&metrics).map_err(|e| fail(format!("the returned metrics: {e}")))?;
            if let Some(missing) = self.metrics.iter().flatten().find(|m| !metrics.contains_key(m.as_str())) {
                let got = metrics.keys().cloned().collect::<Vec<_>>().join(", ");
                return Err(fail(format!("registered with metric `{missing}`, but returned only: {got}")));
            }
            // A runner that trains changes the weights later runners see.
            let (graph, ctx) = returned.borrow_mut(py).take_parts();
            cand.graph = graph;
            cand.params = Arc::new(ctx.params);
            Ok(metrics)
        })
    }
}

/// Functions by name from a Python dict `{name: function}` (or `{name: (function, metrics)}`).
fn functions(py: Python<'_>, d: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<(String, Arc<Py<PyAny>>, Option<Vec<String>>)>> {
    let mut out = Vec::new();
    for (k, v) in d.map(|d| d.iter().collect::<Vec<_>>()).unwrap_or_default() {
        let name: String = k.extract()?;
        let (func, metrics): (Py<PyAny>, Option<Vec<String>>) = if v.is_callable() {
            (v.unbind(), None)
        } else {
            v.extract().map_err(|_| raise(ErrorClass::Value, &format!("`{name}`: expected a function")))?
        };
        if !func.bind(py).is_callable() {
            return Err(raise(ErrorClass::Value, &format!("`{name}`: expected a function")));
        }
        out.push((name, Arc::new(func), metrics));
    }
    Ok(out)
}

/// Runs `ch` with `argv` (program name first) in this process, with the Python passes and
/// runners given (`{name: function}`; a runner may be `(function, [metrics])`) and values set in
/// the `[search]` table (`[(json_pointer, json_text)]`). Returns `(status, error line, result
/// JSON)`; when the action failed because a Python function raised, that exception is raised
/// instead. The GIL is released while the action runs.
#[pyfunction]
#[pyo3(signature = (argv, passes=None, runners=None, search_overrides=None, data_dir=None))]
pub fn run_action(
    py: Python<'_>,
    argv: Vec<String>,
    passes: Option<&Bound<'_, PyDict>>,
    runners: Option<&Bound<'_, PyDict>>,
    search_overrides: Option<&Bound<'_, PyList>>,
    data_dir: Option<String>,
) -> PyResult<(i32, Option<String>, Option<String>)> {
    let errors = Arc::new(FirstError::default());
    let passes = PyPasses { funcs: functions(py, passes)?.into_iter().map(|(n, f, _)| (n, f)).collect(), errors: errors.clone() };
    let runners = PyRunners { funcs: functions(py, runners)?, data_dir, errors: errors.clone() };
    let mut overrides = Vec::new();
    for item in search_overrides.map(|l| l.iter().collect::<Vec<_>>()).unwrap_or_default() {
        let (at, text): (String, String) = item.extract()?;
        let value: Value = serde_json::from_str(&text).map_err(|e| raise(ErrorClass::Value, &format!("search override {at}: {e}")))?;
        overrides.push((at, value));
    }
    let plugins = Plugins { passes: Some(&passes), runners: Some(&runners), search_overrides: &overrides };
    let finished = py.allow_threads(|| mase_cli::run_embedded(argv, &plugins, true));
    if finished.status != 0 {
        if let Some(e) = errors.take() {
            return Err(e);
        }
    }
    Ok((finished.status, finished.error, finished.result.map(|v| v.to_string())))
}
