//! The device engine of `ch --accelerator gpu` (and `cuda`, `mps`, `torch-cpu`): registered with
//! the runtime when the Python package loads, it hands each batch of the Rust trainer to
//! `mase_rs._accelerator.TorchEngine`, which runs the model's PyTorch view on the device.

use crate::errors::one_line;
use crate::graph::NativeGraph;
use mase_ir::{Graph, ParamStore};
use mase_passes::PassContext;
use mase_runtime::{DeviceRequest, Engine, Optimizer, OptimizerState, Result, RuntimeError, StepStats};
use numpy::{PyArray1, PyArrayMethods};
use pyo3::prelude::*;

const MODULE: &str = "mase_rs._accelerator";

/// Registers [`open`] with the runtime, once per process.
pub fn register() {
    mase_runtime::register_device_opener(open);
}

/// A model on a PyTorch device.
struct TorchEngine {
    graph: Graph,
    /// The accelerator's name, for error lines.
    device: String,
    native: Py<NativeGraph>,
    engine: Py<PyAny>,
    /// Whether the engine has stepped: the first step hands it the state `ch` resumed from.
    stepped: bool,
}

/// The runtime's error for a Python exception raised by the engine, on one line.
fn failed(device: &str, py: Python<'_>, e: PyErr) -> RuntimeError {
    RuntimeError::Accelerator { accelerator: device.to_string(), reason: one_line(&e.value(py).to_string()) }
}

fn open(req: &DeviceRequest<'_>) -> Result<Box<dyn Engine>> {
    Python::with_gil(|py| {
        let name = req.accelerator.to_string();
        let fail = |e: PyErr| failed(&name, py, e);
        let lent = NativeGraph::from_parts(req.graph.clone(), PassContext::new(req.params.clone()), "ch".into());
        let native = Py::new(py, lent).map_err(fail)?;
        let engine = py
            .import(MODULE)
            .and_then(|m| m.getattr("open_engine"))
            .and_then(|f| f.call1((native.clone_ref(py), req.device, req.seed, req.threads)))
            .map_err(fail)?;
        let boxed: Box<dyn Engine> =
            Box::new(TorchEngine { graph: req.graph.clone(), device: name.clone(), native, engine: engine.unbind(), stepped: false });
        Ok(boxed)
    })
}

impl TorchEngine {
    /// Calls `TorchEngine.<method>(x, shape, labels, *rest)` and reads its `(loss, correct, count)`.
    fn batch<'py>(
        &self,
        py: Python<'py>,
        method: &str,
        x: &[f32],
        x_shape: &[usize],
        labels: &[u32],
        weight: Option<f32>,
    ) -> PyResult<StepStats> {
        let xs = PyArray1::from_slice(py, x);
        let ys = PyArray1::from_slice(py, labels);
        let engine = self.engine.bind(py);
        let out = match weight {
            Some(w) => engine.call_method1(method, (xs, x_shape.to_vec(), ys, w))?,
            None => engine.call_method1(method, (xs, x_shape.to_vec(), ys))?,
        };
        let (loss, correct, count): (f32, usize, usize) = out.extract()?;
        Ok(StepStats { loss, correct, count })
    }
}

impl Engine for TorchEngine {
    fn graph(&self) -> &Graph {
        &self.graph
    }

    fn params(&mut self) -> Result<ParamStore> {
        Python::with_gil(|py| {
            self.engine.bind(py).call_method0("sync").map_err(|e| failed(&self.device, py, e))?;
            let native = self.native.borrow(py);
            Ok(native.parts().1.params.clone())
        })
    }

    fn accumulate_grad(&mut self, x: &[f32], x_shape: &[usize], labels: &[u32], weight: f32) -> Result<StepStats> {
        Python::with_gil(|py| self.batch(py, "accumulate_grad", x, x_shape, labels, Some(weight)).map_err(|e| failed(&self.device, py, e)))
    }

    fn step(&mut self, opt: &mut Optimizer) -> Result<()> {
        // serde writes an f32 hyper-parameter as its shortest decimal (0.9, not 0.899999976), the
        // value a user who wrote 0.9 gave PyTorch.
        let kind = serde_json::to_string(&opt.kind)
            .map_err(|e| RuntimeError::Accelerator { accelerator: self.device.clone(), reason: e.to_string() })?;
        let lr: f64 = opt.lr.to_string().parse().unwrap_or(f64::from(opt.lr));
        let resumed = if self.stepped { OptimizerState { step: 0, lr: opt.lr, buffers: Vec::new() } } else { opt.state() };
        self.stepped = true;
        Python::with_gil(|py| {
            let buffers: Vec<(String, Bound<'_, PyArray1<f32>>)> =
                resumed.buffers.iter().map(|(n, v)| (n.clone(), PyArray1::from_slice(py, v))).collect();
            self.engine.bind(py).call_method1("step", (kind, lr, resumed.step, buffers)).map(drop).map_err(|e| failed(&self.device, py, e))
        })
    }

    fn eval_batch(&mut self, x: &[f32], x_shape: &[usize], labels: &[u32]) -> Result<StepStats> {
        Python::with_gil(|py| self.batch(py, "eval_batch", x, x_shape, labels, None).map_err(|e| failed(&self.device, py, e)))
    }

    fn sync_optimizer(&mut self, opt: &mut Optimizer) -> Result<()> {
        let state = Python::with_gil(|py| -> PyResult<Option<OptimizerState>> {
            let got = self.engine.bind(py).call_method0("optimizer_state")?;
            if got.is_none() {
                return Ok(None);
            }
            let (step, entries): (u64, Vec<(String, Bound<'_, PyArray1<f32>>)>) = got.extract()?;
            let mut buffers = Vec::with_capacity(entries.len());
            for (name, array) in entries {
                buffers.push((name, array.readonly().as_slice()?.to_vec()));
            }
            Ok(Some(OptimizerState { step, lr: opt.lr, buffers }))
        })
        .map_err(|e| Python::with_gil(|py| failed(&self.device, py, e)))?;
        match state {
            Some(state) => opt.load_state(state),
            None => Ok(()),
        }
    }
}
