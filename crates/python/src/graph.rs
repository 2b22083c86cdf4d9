//! `NativeGraph`: a mase-rs graph with its parameters, the state passes share, and an executor
//! to run it. The Python `MaseGraph` wraps one; Rust owns the graph, Python reads and writes it
//! through these methods (metadata as JSON).

use crate::errors::{guarded, raise, to_py, ErrorClass};
use mase_ir::{Graph, NodeKind, ParamStore, Rng, Tensor};
use mase_passes::{InputSource, PassContext};
use mase_runtime::{ConvAlgo, ExecOptions, Executor, Mode};
use mase_zoo::ModelContext;
use numpy::ndarray::{ArrayD, IxDyn};
use numpy::{IntoPyArray, PyArrayDyn, PyReadonlyArrayDyn, PyReadwriteArrayDyn, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The stream of `ir::Rng` that `ch train` draws initial weights from (`Rng::new(seed).fork(1)`).
const INIT_STREAM: u64 = 1;

/// What `NativeGraph::backward` returns: the input's gradient, if asked for, and each
/// trainable parameter's gradient by name.
type GradsOut<'py> = (Option<Bound<'py, PyArrayDyn<f32>>>, Vec<(String, Bound<'py, PyArrayDyn<f32>>)>);

/// What `backward_many` returns: each input's gradient (flat), then the parameters'.
type GradsManyOut<'py> = (Vec<Option<Bound<'py, PyArrayDyn<f32>>>>, Vec<(String, Bound<'py, PyArrayDyn<f32>>)>);

/// Writes the buffers a train-mode forward moved (`name -> values`) into `targets`
/// (`name -> float32 array`, such as the PyTorch view's buffers).
fn write_buffers(targets: &Bound<'_, PyDict>, moved: Vec<(String, Vec<f32>)>) -> PyResult<()> {
    for (name, data) in moved {
        let Some(target) = targets.get_item(&name)? else { continue };
        let mut arr: PyReadwriteArrayDyn<'_, f32> =
            target.extract().map_err(|_| raise(ErrorClass::Value, &format!("buffer `{name}`: expected a writable float32 numpy array")))?;
        let slice =
            arr.as_slice_mut().map_err(|_| raise(ErrorClass::Value, &format!("buffer `{name}`: the array must be C-contiguous")))?;
        if slice.len() != data.len() {
            return Err(raise(ErrorClass::Value, &format!("buffer `{name}`: {} values expected, got {}", data.len(), slice.len())));
        }
        slice.copy_from_slice(&data);
    }
    Ok(())
}

/// One node as the PyTorch view reads it (`NativeGraph::view_records`).
#[derive(serde::Serialize)]
struct ViewRecord<'a> {
    name: &'a str,
    kind: NodeKind,
    target: &'a str,
    inputs: Vec<usize>,
    op: &'a mase_ir::Op,
    quant: Option<&'a mase_ir::NodeQuant>,
}

/// A graph, its parameters and what passes share (the pass context), plus a cached executor.
#[pyclass(module = "mase_rs._native")]
pub struct NativeGraph {
    graph: Graph,
    ctx: PassContext,
    /// Built on the first forward after a change; dropped by every change.
    exec: Option<Box<Executor>>,
    /// How the executor computes convolutions (`MaseGraph.conv_algo`).
    conv_algo: ConvAlgo,
    /// The model's label: the zoo name or the file's stem.
    #[pyo3(get)]
    pub(crate) label: String,
}

impl NativeGraph {
    fn new(graph: Graph, params: ParamStore, label: String, sample_shape: Option<Vec<usize>>) -> NativeGraph {
        let mut ctx = PassContext::new(params);
        if let Some(sample_shape) = sample_shape {
            ctx.inputs = InputSource::Random { sample_shape };
        }
        NativeGraph { graph, ctx, exec: None, conv_algo: ConvAlgo::default(), label }
    }

    fn changed(&mut self) {
        self.exec = None;
    }

    /// The executor of the current graph and parameters, built on first use after a change.
    fn executor(&mut self) -> PyResult<&mut Executor> {
        if self.exec.is_none() {
            let opts = ExecOptions { threads: self.ctx.threads, seed: self.ctx.seed };
            let mut exec = Executor::new(&self.graph, &self.ctx.params, opts).map_err(|e| to_py(&e))?;
            exec.set_conv_algo(self.conv_algo);
            self.exec = Some(Box::new(exec));
        }
        Ok(self.exec.as_mut().expect("the executor was just built"))
    }

    /// A graph over a pass context that Rust code hands to Python (a `ch transform` pipeline's
    /// graph for a Python pass, a search candidate for a Python runner).
    pub(crate) fn from_parts(graph: Graph, ctx: PassContext, label: String) -> NativeGraph {
        NativeGraph { graph, ctx, exec: None, conv_algo: ConvAlgo::default(), label }
    }

    /// Moves the graph and its pass context out (back to the Rust code that lent them), leaving
    /// an empty graph.
    pub(crate) fn take_parts(&mut self) -> (Graph, PassContext) {
        self.exec = None;
        let ctx = std::mem::replace(&mut self.ctx, PassContext::new(ParamStore::new()));
        (std::mem::take(&mut self.graph), ctx)
    }

    /// The graph and its parameters.
    pub(crate) fn parts(&self) -> (&Graph, &PassContext) {
        (&self.graph, &self.ctx)
    }

    fn node_id(&self, name: &str) -> PyResult<mase_ir::NodeId> {
        self.graph.find(name).ok_or_else(|| raise(ErrorClass::Key, &format!("no node named `{name}`")))
    }
}

#[pymethods]
impl NativeGraph {
    /// A zoo model for samples of `sample_shape` and `num_classes` classes, with the initial
    /// weights `ch train --seed <seed>` draws.
    #[staticmethod]
    fn from_zoo(py: Python<'_>, name: &str, sample_shape: Vec<usize>, num_classes: usize, seed: u64) -> PyResult<NativeGraph> {
        guarded("MaseGraph", || {
            py.allow_threads(|| {
                let ctx = ModelContext { sample_shape: sample_shape.clone(), num_classes };
                let graph = mase_zoo::build_model(name, &ctx).map_err(|e| to_py(&e))?;
                let params = mase_runtime::init_params(&graph, &mut Rng::new(seed).fork(INIT_STREAM));
                let label = mase_zoo::model_info(name).map_or(name.to_string(), |i| i.name.to_string());
                Ok(NativeGraph::new(graph, params, label, Some(sample_shape)))
            })
        })
    }

    /// A model file: a model TOML (needs the data set's `sample_shape` and `num_classes`), an
    /// ONNX/QONNX file, or a mase-rs checkpoint (`best.ckpt`, `last.ckpt`, `.safetensors`).
    #[staticmethod]
    #[pyo3(signature = (path, sample_shape=None, num_classes=None, seed=0))]
    fn from_file(
        py: Python<'_>,
        path: PathBuf,
        sample_shape: Option<Vec<usize>>,
        num_classes: Option<usize>,
        seed: u64,
    ) -> PyResult<NativeGraph> {
        guarded("MaseGraph", || py.allow_threads(|| load_file(&path, sample_shape, num_classes, seed)))
    }

    /// A graph traced by torch.fx: `records` is the JSON the Python side writes (nodes with fx
    /// names, kinds, targets, inputs and IR ops), `state` the module's state dict as float32
    /// arrays; `sample_shape` (without the batch), when known, checks shapes now.
    #[staticmethod]
    #[pyo3(signature = (label, records, state, sample_shape=None))]
    fn from_traced(label: &str, records: &str, state: &Bound<'_, PyDict>, sample_shape: Option<Vec<usize>>) -> PyResult<NativeGraph> {
        guarded("MaseGraph", || {
            let t = crate::traced::build(label, records, state, sample_shape.as_deref())?;
            Ok(NativeGraph::new(t.graph, t.params, label.to_string(), sample_shape))
        })
    }

    /// Trains on `x` (float32 `[N, ...sample]`) and `y` (int64 class indices `[N]`) for
    /// `epochs` passes of mini-batches (see `fit::fit`); returns `(mean loss, accuracy)` per
    /// epoch. Batch norm's running statistics move as in PyTorch's train mode. The GIL is
    /// released while Rust trains.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (x, y, epochs=1, batch_size=32, lr=1e-3, optimizer="adam", weight_decay=0.0, momentum=0.0, shuffle=true, seed=0))]
    fn fit(
        &mut self,
        py: Python<'_>,
        x: PyReadonlyArrayDyn<'_, f32>,
        y: PyReadonlyArrayDyn<'_, i64>,
        epochs: usize,
        batch_size: usize,
        lr: f32,
        optimizer: &str,
        weight_decay: f32,
        momentum: f32,
        shuffle: bool,
        seed: u64,
    ) -> PyResult<Vec<(f64, f64)>> {
        let shape = x.shape().to_vec();
        let xs = x.as_slice().map_err(|_| raise(ErrorClass::Value, "fit: the input array must be C-contiguous"))?;
        let ys = y.as_slice().map_err(|_| raise(ErrorClass::Value, "fit: the label array must be C-contiguous"))?;
        let opts = crate::fit::FitOptions {
            epochs,
            batch_size,
            lr,
            optimizer: crate::fit::optimizer_kind(optimizer, weight_decay, momentum)?,
            shuffle,
            seed,
        };
        guarded("fit", || {
            py.allow_threads(|| {
                let trained = self.executor().and_then(|exec| crate::fit::fit(exec, xs, &shape, ys, &opts).map(|s| (s, exec.params())));
                match trained {
                    Ok((stats, params)) => {
                        self.ctx.params = params;
                        Ok(stats.into_iter().map(|s| (s.loss, s.accuracy)).collect())
                    }
                    Err(e) => {
                        // A failed step may have moved some weights; the store keeps those from before the call.
                        self.changed();
                        Err(e)
                    }
                }
            })
        })
    }

    /// Every node as JSON: name, fx op, target, input names (`args`), user names, mase op and
    /// the Rust op.
    fn nodes_json(&self) -> PyResult<String> {
        let g = &self.graph;
        let nodes: Vec<Value> = g
            .ids()
            .map(|id| {
                let n = g.node(id);
                json!({
                    "name": n.name,
                    "op": n.kind.as_str(),
                    "target": n.target,
                    "args": n.inputs.iter().map(|i| g.node(*i).name.clone()).collect::<Vec<_>>(),
                    "users": g.users(id).into_iter().map(|u| g.node(u).name.clone()).collect::<Vec<_>>(),
                    "module": if n.kind == NodeKind::CallModule { serde_json::to_value(&n.op).unwrap_or(Value::Null) } else { Value::Null },
                })
            })
            .collect();
        Ok(Value::Array(nodes).to_string())
    }

    /// What the PyTorch view is built from, as JSON: per node its name, fx kind, target, the
    /// indices of its inputs, its op and its formats (no metadata).
    fn view_records(&self) -> PyResult<String> {
        let rows: Vec<ViewRecord<'_>> = self
            .graph
            .nodes()
            .iter()
            .map(|n| ViewRecord {
                name: &n.name,
                kind: n.kind,
                target: &n.target,
                inputs: n.inputs.iter().map(|i| i.0).collect(),
                op: &n.op,
                quant: n.quant.as_ref(),
            })
            .collect();
        // Serialized directly, so that f32 fields keep their shortest form (`1e-5`).
        serde_json::to_string(&rows).map_err(|e| raise(ErrorClass::Value, &e.to_string()))
    }

    /// One part (`common`, `software` or `hardware`) of a node's metadata, as JSON.
    fn node_meta_json(&self, node: &str, part: &str) -> PyResult<String> {
        let meta = &self.graph.node(self.node_id(node)?).meta;
        let v = match part {
            "common" => serde_json::to_value(&meta.common).map_err(|e| raise(ErrorClass::Value, &e.to_string()))?,
            "software" => Value::Object(meta.software.clone()),
            "hardware" => Value::Object(meta.hardware.clone()),
            other => return Err(raise(ErrorClass::Key, &format!("no metadata part `{other}`; the parts are common, software, hardware"))),
        };
        Ok(v.to_string())
    }

    /// Replaces one part of a node's metadata with `text` (JSON); `common` must keep its shape
    /// (`mase_type`, `mase_op`, `args`, `results`).
    fn set_node_meta_json(&mut self, node: &str, part: &str, text: &str) -> PyResult<()> {
        let id = self.node_id(node)?;
        let bad = |e: serde_json::Error| raise(ErrorClass::Value, &format!("node `{node}`: metadata `{part}`: {e}"));
        let meta = &mut self.graph.node_mut(id).meta;
        match part {
            "common" => meta.common = serde_json::from_str(text).map_err(bad)?,
            "software" => meta.software = serde_json::from_str(text).map_err(bad)?,
            "hardware" => meta.hardware = serde_json::from_str(text).map_err(bad)?,
            other => return Err(raise(ErrorClass::Key, &format!("no metadata part `{other}`; the parts are common, software, hardware"))),
        }
        self.changed();
        Ok(())
    }

    /// Runs the model on a float32 batch `[N, ...sample]` (train mode: batch statistics, which
    /// batch norm also records, and dropout). The GIL is released while Rust computes.
    /// With `input_grad`, the next `backward` also gives the gradient of the input. A train-mode
    /// forward also writes the buffers (batch norm's running statistics) into `buffers`
    /// (`name -> float32 array` to overwrite, such as the PyTorch view's buffers).
    #[pyo3(signature = (x, train=false, input_grad=false, buffers=None))]
    fn forward<'py>(
        &mut self,
        py: Python<'py>,
        x: PyReadonlyArrayDyn<'py, f32>,
        train: bool,
        input_grad: bool,
        buffers: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
        let shape = x.shape().to_vec();
        let xs = x.as_slice().map_err(|_| raise(ErrorClass::Value, "the input array must be C-contiguous"))?;
        let moving: Vec<String> =
            if train { self.ctx.params.iter().filter(|(_, e)| !e.trainable).map(|(n, _)| n.to_string()).collect() } else { Vec::new() };
        let (out, out_shape, moved) = guarded("forward", || {
            py.allow_threads(|| {
                crate::probe::rendezvous().map_err(|e| raise(ErrorClass::Value, &e))?;
                let exec = self.executor()?;
                exec.set_keep_input_grad(input_grad);
                let mode = if train { Mode::Train } else { Mode::Eval };
                let out = exec.forward(xs, &shape, mode).map_err(|e| to_py(&e))?.to_vec();
                let out_shape = exec.output_shape(shape[0]).map_err(|e| to_py(&e))?;
                // Batch norm's running statistics moved (the buffers); the store is what
                // state_dict reads. Trainable parameters only change in an optimizer step.
                let moved: Vec<(String, Vec<f32>)> = moving.iter().filter_map(|n| exec.param(n).map(|d| (n.clone(), d.to_vec()))).collect();
                for (name, data) in &moved {
                    if let Some(t) = self.ctx.params.get_mut(name) {
                        t.data.copy_from_slice(data);
                    }
                }
                Ok((out, out_shape, moved))
            })
        })?;
        if let Some(targets) = buffers {
            write_buffers(targets, moved)?;
        }
        let arr = ArrayD::from_shape_vec(IxDyn(&out_shape), out).map_err(|e| raise(ErrorClass::Value, &e.to_string()))?;
        Ok(arr.into_pyarray(py))
    }

    /// Runs the model on one float32 batch per graph input (in the forward's argument order),
    /// for graphs with several inputs or outputs; returns every output, in order. `train`,
    /// `input_grad` and `buffers` are as for `forward`.
    #[pyo3(signature = (xs, train=false, input_grad=false, buffers=None))]
    fn forward_many<'py>(
        &mut self,
        py: Python<'py>,
        xs: Vec<PyReadonlyArrayDyn<'py, f32>>,
        train: bool,
        input_grad: bool,
        buffers: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Vec<Bound<'py, PyArrayDyn<f32>>>> {
        let shapes: Vec<Vec<usize>> = xs.iter().map(|x| x.shape().to_vec()).collect();
        let data = xs
            .iter()
            .enumerate()
            .map(|(k, x)| x.as_slice().map_err(|_| raise(ErrorClass::Value, &format!("input {k}: the array must be C-contiguous"))))
            .collect::<PyResult<Vec<&[f32]>>>()?;
        let moving: Vec<String> =
            if train { self.ctx.params.iter().filter(|(_, e)| !e.trainable).map(|(n, _)| n.to_string()).collect() } else { Vec::new() };
        let (outs, moved) = guarded("forward", || {
            py.allow_threads(|| {
                crate::probe::rendezvous().map_err(|e| raise(ErrorClass::Value, &e))?;
                let exec = self.executor()?;
                exec.set_keep_input_grad(input_grad);
                let mode = if train { Mode::Train } else { Mode::Eval };
                let batches: Vec<(&[f32], &[usize])> = data.iter().zip(&shapes).map(|(d, s)| (*d, s.as_slice())).collect();
                exec.forward_many(&batches, mode).map_err(|e| to_py(&e))?;
                let outs: Vec<(Vec<usize>, Vec<f32>)> =
                    (0..exec.output_count()).filter_map(|k| exec.output(k).map(|(s, v)| (s.to_vec(), v.to_vec()))).collect();
                let moved: Vec<(String, Vec<f32>)> = moving.iter().filter_map(|n| exec.param(n).map(|d| (n.clone(), d.to_vec()))).collect();
                for (name, data) in &moved {
                    if let Some(t) = self.ctx.params.get_mut(name) {
                        t.data.copy_from_slice(data);
                    }
                }
                Ok((outs, moved))
            })
        })?;
        if let Some(targets) = buffers {
            write_buffers(targets, moved)?;
        }
        outs.into_iter()
            .map(|(shape, v)| {
                let arr = ArrayD::from_shape_vec(IxDyn(&shape), v).map_err(|e| raise(ErrorClass::Value, &e.to_string()))?;
                Ok(arr.into_pyarray(py))
            })
            .collect()
    }

    /// Backward from one gradient per output after a train-mode `forward_many`: returns each
    /// input's gradient as a flat float32 array (None where the forward did not ask for it or
    /// nothing differentiable reads the input) and the trainable parameters' gradients.
    fn backward_many<'py>(&mut self, py: Python<'py>, output_grads: Vec<PyReadonlyArrayDyn<'py, f32>>) -> PyResult<GradsManyOut<'py>> {
        let gs = output_grads
            .iter()
            .enumerate()
            .map(|(k, g)| g.as_slice().map_err(|_| raise(ErrorClass::Value, &format!("gradient of output {k} must be C-contiguous"))))
            .collect::<PyResult<Vec<&[f32]>>>()?;
        let (inputs, params) = guarded("backward", || {
            py.allow_threads(|| {
                let exec =
                    self.exec.as_mut().ok_or_else(|| raise(ErrorClass::Value, "backward: no train-mode forward to go back through"))?;
                exec.backward_many(&gs).map_err(|e| to_py(&e))?;
                let inputs: Vec<Option<Vec<f32>>> = (0..exec.input_count()).map(|k| exec.input_grad_of(k).map(<[f32]>::to_vec)).collect();
                Ok((inputs, exec.grads()))
            })
        })?;
        let flat = |v: Vec<f32>| ArrayD::from_shape_vec(IxDyn(&[v.len()]), v).map(|a| a.into_pyarray(py));
        let inputs = inputs
            .into_iter()
            .map(|g| g.map(flat).transpose().map_err(|e| raise(ErrorClass::Value, &e.to_string())))
            .collect::<PyResult<_>>()?;
        let mut grads = Vec::with_capacity(params.len());
        for (name, data) in params {
            let shape = self.ctx.params.get(&name).map(|t| t.shape.clone()).unwrap_or_else(|| vec![data.len()]);
            let arr = ArrayD::from_shape_vec(IxDyn(&shape), data).map_err(|e| raise(ErrorClass::Value, &e.to_string()))?;
            grads.push((name, arr.into_pyarray(py)));
        }
        Ok((inputs, grads))
    }

    /// Number of graph inputs and of values the graph returns.
    #[getter]
    fn io_counts(&self) -> PyResult<(usize, usize)> {
        let outputs = self.graph.output_values().map_err(|e| to_py(&e))?.len();
        Ok((self.graph.inputs().len(), outputs))
    }

    /// Records the shape of every graph input (batch first, in order) in the placeholders'
    /// metadata, where `add_common_metadata` and the cost passes read the shapes of a graph with
    /// several inputs (MASE's `dummy_in` with one array per input).
    fn use_input_shapes(&mut self, shapes: Vec<Vec<usize>>) -> PyResult<()> {
        let inputs = self.graph.inputs();
        if shapes.len() != inputs.len() {
            let names: Vec<&str> = inputs.iter().map(|&i| self.graph.node(i).name.as_str()).collect();
            return Err(raise(
                ErrorClass::Value,
                &format!("dummy_in: {} arrays given; the graph has {} inputs ({})", shapes.len(), inputs.len(), names.join(", ")),
            ));
        }
        for (&i, shape) in inputs.iter().zip(shapes) {
            let meta = mase_ir::ArgMeta::Tensor(mase_ir::TensorMeta::float32(shape));
            self.graph.node_mut(i).meta.common.results.insert("data_out_0".into(), meta);
        }
        Ok(())
    }

    /// Backward from `output_grad` (the gradient of the last train-mode forward's output):
    /// returns the input's gradient (when that forward asked for it) and the trainable
    /// parameters' gradients by state-dict name.
    fn backward<'py>(&mut self, py: Python<'py>, output_grad: PyReadonlyArrayDyn<'py, f32>) -> PyResult<GradsOut<'py>> {
        let g = output_grad.as_slice().map_err(|_| raise(ErrorClass::Value, "the output gradient must be C-contiguous"))?;
        let (input, params, shape) = guarded("backward", || {
            py.allow_threads(|| {
                let exec =
                    self.exec.as_mut().ok_or_else(|| raise(ErrorClass::Value, "backward: no train-mode forward to go back through"))?;
                exec.backward(g).map_err(|e| to_py(&e))?;
                let shape = exec.last_input_shape().map(<[usize]>::to_vec);
                Ok((exec.input_grad().map(<[f32]>::to_vec), exec.grads(), shape))
            })
        })?;
        let array = |data: Vec<f32>, shape: &[usize]| -> PyResult<Bound<'py, PyArrayDyn<f32>>> {
            let arr = ArrayD::from_shape_vec(IxDyn(shape), data).map_err(|e| raise(ErrorClass::Value, &e.to_string()))?;
            Ok(arr.into_pyarray(py))
        };
        let input = match (input, shape) {
            (Some(data), Some(shape)) => Some(array(data, &shape)?),
            _ => None,
        };
        let mut grads = Vec::with_capacity(params.len());
        for (name, data) in params {
            let shape = self.ctx.params.get(&name).map(|t| t.shape.clone()).unwrap_or_else(|| vec![data.len()]);
            grads.push((name, array(data, &shape)?));
        }
        Ok((input, grads))
    }

    /// The shape of one input sample (without the batch), when the graph knows it (a zoo model,
    /// a file that records it, a traced module given `dataset_info` or `dummy_in`).
    #[getter]
    fn sample_shape(&self) -> Option<Vec<usize>> {
        self.ctx.sample_shape(&self.graph)
    }

    /// Names of the parameters that train (`nn.Parameter`s in the PyTorch view); the other
    /// entries of `state_dict` are buffers.
    fn trainable_names(&self) -> Vec<String> {
        self.ctx.params.iter().filter(|(_, e)| e.trainable).map(|(n, _)| n.to_string()).collect()
    }

    /// The parameters or buffers named in `names`, as float32 arrays (copies).
    fn state_entries<'py>(&self, py: Python<'py>, names: Vec<String>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for name in names {
            let t = self.ctx.params.get(&name).ok_or_else(|| raise(ErrorClass::Key, &format!("no parameter named `{name}`")))?;
            let arr = ArrayD::from_shape_vec(IxDyn(&t.shape), t.data.clone()).map_err(|e| raise(ErrorClass::Value, &e.to_string()))?;
            d.set_item(name, arr.into_pyarray(py))?;
        }
        Ok(d)
    }

    /// Sets some parameters or buffers (`name -> float32 array` of the same shape) in the
    /// graph's store and in the executor, which stays built.
    fn set_params(&mut self, state: &Bound<'_, PyDict>) -> PyResult<()> {
        for (k, v) in state.iter() {
            let name: String = k.extract()?;
            let arr: PyReadonlyArrayDyn<'_, f32> =
                v.extract().map_err(|_| raise(ErrorClass::Value, &format!("parameter `{name}`: expected a float32 numpy array")))?;
            let Some(t) = self.ctx.params.get_mut(&name) else {
                return Err(raise(ErrorClass::Key, &format!("parameter `{name}`: the model has no parameter of that name")));
            };
            if arr.shape() != t.shape.as_slice() {
                return Err(raise(
                    ErrorClass::Value,
                    &format!("parameter `{name}`: shape {:?}, the model needs {:?}", arr.shape(), t.shape),
                ));
            }
            match arr.as_slice() {
                Ok(data) => t.data.copy_from_slice(data),
                Err(_) => t.data.iter_mut().zip(arr.as_array().iter()).for_each(|(d, s)| *d = *s),
            }
            if let Some(exec) = self.exec.as_mut() {
                exec.set_param(&name, &t.data).map_err(|e| to_py(&e))?;
            }
        }
        Ok(())
    }

    /// Replaces the graph and its parameters with a graph lowered again from the PyTorch view
    /// (`records` and `state` as `from_traced` takes them), keeping the pass context (data,
    /// batch size, seed, threads). Nodes that keep their name and op keep their metadata.
    fn relower(&mut self, records: &str, state: &Bound<'_, PyDict>) -> PyResult<()> {
        let t = guarded("MaseGraph", || crate::traced::build(&self.label, records, state, None))?;
        let mut graph = t.graph;
        for id in graph.ids().collect::<Vec<_>>() {
            let node = graph.node_mut(id);
            if let Some(old) = self.graph.find(&node.name).map(|o| self.graph.node(o)) {
                if old.op == node.op {
                    node.meta = old.meta.clone();
                }
            }
        }
        graph.meta = self.graph.meta.clone();
        self.graph = graph;
        self.ctx.params = t.params;
        self.changed();
        Ok(())
    }

    /// Seconds per eval-mode forward call on `x`, timed in Rust over `repeats` calls after one
    /// warm-up call (for the benchmark that compares Python's overhead with the Rust call).
    fn _time_forward(&mut self, py: Python<'_>, x: PyReadonlyArrayDyn<'_, f32>, repeats: usize) -> PyResult<Vec<f64>> {
        let shape = x.shape().to_vec();
        let xs = x.as_slice().map_err(|_| raise(ErrorClass::Value, "the input array must be C-contiguous"))?;
        guarded("forward", || {
            py.allow_threads(|| {
                let opts = ExecOptions { threads: self.ctx.threads, seed: self.ctx.seed };
                let mut exec = Executor::new(&self.graph, &self.ctx.params, opts).map_err(|e| to_py(&e))?;
                exec.set_conv_algo(self.conv_algo);
                exec.forward(xs, &shape, Mode::Eval).map_err(|e| to_py(&e))?;
                let mut times = Vec::with_capacity(repeats);
                for _ in 0..repeats {
                    let t0 = std::time::Instant::now();
                    let out = exec.forward(xs, &shape, Mode::Eval).map_err(|e| to_py(&e))?.to_vec();
                    times.push(t0.elapsed().as_secs_f64());
                    std::hint::black_box(out);
                }
                Ok(times)
            })
        })
    }

    /// Parameters and buffers by PyTorch state-dict name, as float32 arrays (copies).
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, entry) in self.ctx.params.iter() {
            let t = &entry.tensor;
            let arr = ArrayD::from_shape_vec(IxDyn(&t.shape), t.data.clone()).map_err(|e| raise(ErrorClass::Value, &e.to_string()))?;
            d.set_item(name, arr.into_pyarray(py))?;
        }
        Ok(d)
    }

    /// Sets parameters from `name -> float32 array`; with `strict`, every parameter of the model
    /// must be given and no other name.
    #[pyo3(signature = (state, strict=true))]
    fn load_state_dict(&mut self, state: &Bound<'_, PyDict>, strict: bool) -> PyResult<()> {
        let mut given = Vec::new();
        for (k, v) in state.iter() {
            let name: String = k.extract()?;
            let arr: PyReadonlyArrayDyn<'_, f32> =
                v.extract().map_err(|_| raise(ErrorClass::Value, &format!("state_dict entry `{name}`: expected a float32 numpy array")))?;
            let entry =
                self.ctx.params.entry(&name).ok_or_else(|| {
                    raise(ErrorClass::Key, &format!("state_dict entry `{name}`: the model has no parameter of that name"))
                })?;
            if arr.shape() != entry.tensor.shape.as_slice() {
                return Err(raise(
                    ErrorClass::Value,
                    &format!("state_dict entry `{name}`: shape {:?}, the model needs {:?}", arr.shape(), entry.tensor.shape),
                ));
            }
            let data = arr.as_array().iter().copied().collect();
            given.push((name, Tensor::new(arr.shape().to_vec(), data).map_err(|e| to_py(&e))?));
        }
        if strict {
            let missing: Vec<&str> = self.ctx.params.names().filter(|n| !given.iter().any(|(g, _)| g == n)).collect();
            if !missing.is_empty() {
                return Err(raise(ErrorClass::Key, &format!("state_dict: missing parameters: {}", missing.join(", "))));
            }
        }
        for (name, t) in given {
            self.ctx.params.set(&name, t).map_err(|e| to_py(&e))?;
        }
        self.changed();
        Ok(())
    }

    /// An independent copy (graph, metadata, parameters).
    fn clone_graph(&self) -> NativeGraph {
        NativeGraph { graph: self.graph.clone(), ctx: self.ctx.clone(), exec: None, conv_algo: self.conv_algo, label: self.label.clone() }
    }

    /// Runs the registry's pass `name` with JSON arguments; returns the report as JSON
    /// (`pass`, `json`, `text`, `files`, `warnings`).
    fn run_pass(&mut self, py: Python<'_>, name: &str, args_json: &str) -> PyResult<String> {
        let args: Value =
            serde_json::from_str(args_json).map_err(|e| raise(ErrorClass::Value, &format!("pass `{name}`: arguments: {e}")))?;
        guarded(name, || {
            py.allow_threads(|| {
                let report = mase_passes::run_pass(name, &mut self.graph, &mut self.ctx, &args).map_err(|e| to_py(&e))?;
                self.exec = None;
                serde_json::to_string(&report).map_err(|e| raise(ErrorClass::Value, &e.to_string()))
            })
        })
    }

    /// Makes `original` the graph before quantization that `summarize_quantization` compares with.
    fn set_original(&mut self, original: &NativeGraph) {
        self.ctx.original = Some(original.graph.clone());
    }

    /// Takes the input samples of passes (statistics, verification) from a data set.
    #[pyo3(signature = (name, data_dir=None))]
    fn use_dataset(&mut self, py: Python<'_>, name: &str, data_dir: Option<PathBuf>) -> PyResult<()> {
        let splits = guarded("use_dataset", || {
            py.allow_threads(|| {
                mase_io::load_dataset(name, &mase_io::DataOptions { data_dir, ..Default::default() }).map_err(|e| to_py(&e))
            })
        })?;
        self.ctx.inputs = InputSource::Data(Box::new(splits));
        Ok(())
    }

    /// Takes the input samples of passes from seeded random samples of `sample_shape` (MASE's
    /// `dummy_in`), unless a data set already gives them.
    fn use_sample_shape(&mut self, sample_shape: Vec<usize>) {
        if matches!(self.ctx.inputs, InputSource::None) {
            self.ctx.inputs = InputSource::Random { sample_shape };
        }
    }

    /// The convolution algorithm of the executor: `fast`, `exact` or `winograd`.
    #[getter]
    fn conv_algo(&self) -> &'static str {
        self.conv_algo.name()
    }

    /// Selects the convolution algorithm of the executor by name; any other name is a
    /// `ValueError` naming the three.
    fn set_conv_algo(&mut self, name: &str) -> PyResult<()> {
        let algo = ConvAlgo::from_name(name).ok_or_else(|| {
            let names: Vec<String> = ConvAlgo::NAMES.iter().map(|(n, _)| format!("'{n}'")).collect();
            raise(ErrorClass::Value, &format!("conv_algo: expected one of {}, got '{name}'", names.join(", ")))
        })?;
        self.conv_algo = algo;
        if let Some(exec) = self.exec.as_mut() {
            exec.set_conv_algo(algo);
        }
        Ok(())
    }

    /// Batch size, seed and kernel threads of what passes run.
    #[pyo3(signature = (batch_size=None, seed=None, threads=None, out_dir=None))]
    fn configure(&mut self, batch_size: Option<usize>, seed: Option<u64>, threads: Option<usize>, out_dir: Option<PathBuf>) {
        if let Some(b) = batch_size {
            self.ctx.batch_size = b.max(1);
        }
        if let Some(s) = seed {
            self.ctx.seed = s;
        }
        if let Some(t) = threads {
            self.ctx.threads = t;
        }
        if out_dir.is_some() {
            self.ctx.out_dir = out_dir;
        }
        self.changed();
    }

    /// The graph as JSON (nodes, ops, formats, metadata).
    fn graph_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.graph).map_err(|e| raise(ErrorClass::Value, &e.to_string()))
    }

    /// Writes a mase-rs checkpoint (graph and weights) that `ch test --load` and
    /// `MaseGraph(model=path)` read.
    fn save_checkpoint(&self, path: PathBuf) -> PyResult<()> {
        let ck = mase_io::Checkpoint {
            graph: self.graph.clone(),
            params: self.ctx.params.clone(),
            optimizer_tensors: Vec::new(),
            meta: json!({"model": self.label}),
        };
        mase_io::save_checkpoint(&path, &ck).map_err(|e| to_py(&e))
    }

    /// The fx-style listing of the graph.
    fn __str__(&self) -> String {
        self.graph.to_string()
    }
}

/// Loads a model file by its extension (see `NativeGraph::from_file`).
fn load_file(path: &Path, sample_shape: Option<Vec<usize>>, num_classes: Option<usize>, seed: u64) -> PyResult<NativeGraph> {
    if !path.exists() {
        return Err(raise(ErrorClass::FileNotFound, &format!("model file {}: no such file", path.display())));
    }
    let label = path.file_stem().and_then(|s| s.to_str()).unwrap_or("model").to_string();
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).unwrap_or_default();
    match ext.as_str() {
        "toml" => {
            let (Some(sample_shape), Some(num_classes)) = (sample_shape, num_classes) else {
                return Err(raise(
                    ErrorClass::Value,
                    &format!(
                        "model file {}: a model TOML needs the data set's sample_shape and num_classes (pass dataset_info)",
                        path.display()
                    ),
                ));
            };
            let ctx = ModelContext { sample_shape: sample_shape.clone(), num_classes };
            let graph = mase_zoo::load_model_file(path, &ctx).map_err(|e| to_py(&e))?;
            let params = mase_runtime::init_params(&graph, &mut Rng::new(seed).fork(INIT_STREAM));
            Ok(NativeGraph::new(graph, params, label, Some(sample_shape)))
        }
        "onnx" => {
            let m = mase_interop::import_file(path, &mase_interop::ImportOptions::default()).map_err(|e| to_py(&e))?;
            Ok(NativeGraph::new(m.graph, m.params, label, Some(m.sample_shape)))
        }
        _ => {
            let ck = mase_io::load_checkpoint(path).map_err(|e| to_py(&e))?;
            let sample_shape =
                ck.meta.get("dataset_info").and_then(|d| d.get("sample_shape")).and_then(|s| serde_json::from_value(s.clone()).ok());
            let label = ck.meta.get("model").and_then(Value::as_str).map_or(label, str::to_string);
            Ok(NativeGraph::new(ck.graph, ck.params, label, sample_shape))
        }
    }
}
