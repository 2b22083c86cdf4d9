//! Glue shared by the actions: resolving the model and data set, checkpoints, evaluation.

use crate::config::{OptimizerName, Settings};
use crate::output::Human;
use anyhow::{anyhow, bail, Context, Result};
use mase_io::{Checkpoint, DataOptions, Dataset, FileKind, NonFinite, Splits};
use mase_ir::{Graph, ParamStore};
use mase_runtime::{Engine, ExecOptions, Executor, Optimizer, OptimizerKind, OptimizerState};
use mase_zoo::ModelContext;
use serde_json::{json, Value};
use std::path::Path;

/// Loads the data set named in the settings; says how many rows `--drop-nonfinite` left out.
pub fn load_data(s: &Settings, dataset: &str) -> Result<Splits> {
    let nonfinite = if s.drop_nonfinite { NonFinite::Drop } else { NonFinite::Refuse };
    let splits = mase_io::load_dataset(dataset, &DataOptions { data_dir: s.data_dir.clone(), nonfinite })?;
    let dropped = splits.info.dropped_nonfinite;
    if dropped > 0 {
        let rows = if dropped == 1 { "row" } else { "rows" };
        Human { json: false }.warn(format!(
            "data set `{}`: left out {dropped} {rows} with a NaN or infinite feature (--drop-nonfinite) from {}",
            splits.info.name, splits.info.source
        ));
    }
    Ok(splits)
}

/// The executor of a run: the settings' threads, seed and convolution algorithm.
pub fn executor(s: &Settings, graph: &Graph, params: &ParamStore) -> Result<Executor> {
    let mut exec = Executor::new(graph, params, ExecOptions { threads: s.threads, seed: s.seed })?;
    exec.set_conv_algo(s.conv_algo.algo());
    Ok(exec)
}

/// What the data set tells a model about its input.
pub fn model_context(splits: &Splits) -> ModelContext {
    ModelContext { sample_shape: splits.info.sample_shape.clone(), num_classes: splits.info.num_classes }
}

/// The model graph: a model file (`--model-file`, or a MODEL ending in `.toml`), else a zoo name.
/// Returns the graph and the label used for project names and checkpoints.
pub fn resolve_graph(s: &Settings, ctx: &ModelContext) -> Result<(Graph, String)> {
    if let Some(path) = onnx_model_file(s) {
        let m = import_onnx(&path)?;
        check_sample_shape(&m.graph, &ctx.sample_shape, &path)?;
        let label = path.file_stem().and_then(|x| x.to_str()).unwrap_or("model").to_string();
        return Ok((m.graph, label));
    }
    let file = s.model_file.clone().or_else(|| s.model.as_ref().filter(|m| m.ends_with(".toml")).map(Into::into));
    if let Some(path) = file {
        let graph = mase_zoo::load_model_file(&path, ctx)?;
        let label = path.file_stem().and_then(|x| x.to_str()).unwrap_or("model").to_string();
        return Ok((graph, label));
    }
    let name = s.model.as_deref().ok_or_else(|| anyhow!("no model given: name one (see `ch info`) or pass --model-file"))?;
    if mase_zoo::model_info(name).is_some() {
        return Ok((mase_zoo::build_model(name, ctx)?, name.to_string()));
    }
    let path = find_model_file(name)?;
    Ok((mase_zoo::load_model_file(&path, ctx)?, name.to_string()))
}

/// The environment variable holding more folders of model files (a path list, `:`-separated on
/// Unix and `;` on Windows, as `PATH`).
pub const MODELS_DIR_VAR: &str = "MASE_MODELS_DIR";

/// Where a model named on the command line is looked for when it is no zoo model, in order:
/// `./models`, then every folder of `$MASE_MODELS_DIR`.
pub fn model_search_path() -> Vec<std::path::PathBuf> {
    let mut dirs = vec![std::path::PathBuf::from("models")];
    if let Some(list) = std::env::var_os(MODELS_DIR_VAR) {
        dirs.extend(std::env::split_paths(&list).filter(|d| !d.as_os_str().is_empty()));
    }
    dirs
}

/// The model file `<dir>/<name>.toml` of the first folder of [`model_search_path`] that has
/// one; the error names the zoo models and every file looked for.
pub fn find_model_file(name: &str) -> Result<std::path::PathBuf> {
    let candidates: Vec<std::path::PathBuf> = model_search_path().into_iter().map(|d| d.join(format!("{name}.toml"))).collect();
    if let Some(found) = candidates.iter().find(|p| p.is_file()) {
        return Ok(found.clone());
    }
    let looked: Vec<String> = candidates.iter().map(|p| p.display().to_string()).collect();
    let unset = if std::env::var_os(MODELS_DIR_VAR).is_none() { format!(" (${MODELS_DIR_VAR} is not set)") } else { String::new() };
    bail!(
        "unknown model `{name}`: it is no zoo model ({}) and no model file was found at {}{unset}",
        mase_zoo::model_names().join(", "),
        looked.join(", ")
    )
}

/// The ONNX file given as the model (`--model-file model.onnx`, or a MODEL ending in `.onnx`).
/// Why a command that needs weights has none: no `--load`, and no ONNX model. A model file
/// that is not ONNX defines a model without weights, and is named.
pub fn no_weights(s: &Settings, need: &str) -> anyhow::Error {
    match &s.model_file {
        Some(p) => anyhow::anyhow!(
            "--model-file {}: not an ONNX model (.onnx), so it holds no weights; give {need} via --load CKPT, or an ONNX model via --model-file",
            p.display()
        ),
        None => anyhow::anyhow!("expected {need} via --load CKPT, or an ONNX model via --model-file"),
    }
}

pub fn onnx_model_file(s: &Settings) -> Option<std::path::PathBuf> {
    let is_onnx = |p: &Path| p.extension().is_some_and(|e| e.eq_ignore_ascii_case("onnx"));
    s.model_file.clone().filter(|p| is_onnx(p)).or_else(|| s.model.as_ref().map(std::path::PathBuf::from).filter(|p| is_onnx(p)))
}

/// Imports an ONNX/QONNX model file (graph, weights, number formats). What the import assumed
/// or changed (its notes) goes to stderr, once per file, and into the `--json` result (see
/// [`crate::output::import_notes`]).
pub fn import_onnx(path: &Path) -> Result<mase_interop::Imported> {
    let m = mase_interop::import_file(path, &mase_interop::ImportOptions::default())?;
    let file = path.display().to_string();
    if crate::output::record_import_notes(&file, &m.notes) {
        for note in &m.notes {
            eprintln!("NOTE     {file}: {note}");
        }
    }
    Ok(m)
}

/// The weights a run starts from: the ONNX file's own when the model is one, else fresh ones
/// drawn as `ch train` draws them (`rng` is the initialisation stream).
pub fn initial_params(s: &Settings, graph: &Graph, rng: &mut mase_ir::Rng) -> Result<ParamStore> {
    match onnx_model_file(s) {
        Some(path) => Ok(import_onnx(&path)?.params),
        None => Ok(mase_runtime::init_params(graph, rng)),
    }
}

/// The optimizer of the settings, with MASE's hyper-parameters (doc/mase-semantics.md#training-optimizers):
/// SGD is PyTorch's with momentum 0.9, Nesterov and weight decay 5e-4 whatever `--weight-decay` says.
pub fn make_optimizer(s: &Settings) -> Optimizer {
    let wd = s.weight_decay as f32;
    let kind = match s.optimizer {
        OptimizerName::Adam => OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: wd },
        OptimizerName::AdamW => OptimizerKind::AdamW { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: wd },
        OptimizerName::Sgd => OptimizerKind::Sgd { momentum: 0.9, dampening: 0.0, weight_decay: 5e-4, nesterov: true },
    };
    Optimizer::new(kind, s.learning_rate as f32)
}

/// Reads a checkpoint (`--load`), telling PyTorch files apart from ours and naming the flag
/// that takes a file that is no checkpoint (an ONNX model).
pub fn read_checkpoint(path: &Path) -> Result<Checkpoint> {
    let head = std::fs::File::open(path).and_then(|f| {
        let mut b = Vec::with_capacity(16);
        std::io::Read::read_to_end(&mut std::io::Read::take(f, 16), &mut b).map(|_| b)
    });
    let head = match head {
        Err(e) => bail!("checkpoint {}: cannot open: {e}", path.display()),
        Ok(b) => b,
    };
    const TAKES: &str = "--load takes a checkpoint saved by mase-rs (safetensors), a PyTorch or Lightning file, or an .npz of weights";
    match mase_io::sniff_file(&head) {
        FileKind::Zip | FileKind::Pickle => read_foreign_checkpoint(path),
        FileKind::Safetensors => Ok(mase_io::load_checkpoint(path)?),
        FileKind::Onnx => {
            bail!("checkpoint {}: it is an ONNX model, not a checkpoint; give ONNX models with --model-file", path.display())
        }
        FileKind::Empty | FileKind::Unknown => bail!("checkpoint {}: {}; {TAKES}", path.display(), mase_io::describe_file(&head)),
    }
}

/// A PyTorch `torch.save` state dict, a Lightning checkpoint (MASE's `best.ckpt`, `--load-type
/// pl`) or an `.npz` of weights: a checkpoint without a graph (see [`adopt_weights`]) whose
/// parameters are the file's float tensors, with a prefix common to all of them (`model.` of
/// MASE's Lightning module, `module.` of DataParallel) removed.
fn read_foreign_checkpoint(path: &Path) -> Result<Checkpoint> {
    let sd = mase_interop::read_weights(path)?;
    let floats: Vec<&(String, mase_interop::Weight)> = sd.iter().filter(|(_, w)| w.dtype.is_float()).collect();
    let prefix =
        ["model.", "module."].into_iter().find(|p| !floats.is_empty() && floats.iter().all(|(k, _)| k.starts_with(p))).unwrap_or("");
    let mut params = ParamStore::new();
    for (k, w) in floats {
        // PyTorch's buffers (batch-norm statistics) are not trained; `adopt_weights` later takes
        // the exact flags from the model.
        let buffer = k.ends_with("running_mean") || k.ends_with("running_var");
        params.insert(&k[prefix.len()..], w.tensor.clone(), !buffer);
    }
    Ok(Checkpoint { graph: Graph::new(), params, optimizer_tensors: Vec::new(), meta: json!({"format": "pytorch", "prefix": prefix}) })
}

/// Gives a checkpoint read from a PyTorch/Lightning/npz file (which has weights but no graph) the
/// model named by the settings (MODEL or `--model-file`) for the data set's shapes, with its
/// weights mapped onto it by name. Checkpoints of mase-rs are left as they are.
pub fn adopt_weights(s: &Settings, ck: &mut Checkpoint, ctx: Option<&ModelContext>, path: &Path) -> Result<()> {
    if !ck.graph.is_empty() {
        return Ok(());
    }
    let ctx =
        ctx.ok_or_else(|| anyhow!("checkpoint {}: a PyTorch file holds no model; name the model and the data set", path.display()))?;
    let (graph, label) = resolve_graph(s, ctx)?;
    check_params_fit(&graph, &ck.params, path)?;
    let mut params = ParamStore::new();
    for (name, spec) in graph.param_specs() {
        if let Some(t) = ck.params.get(&name) {
            params.insert(name, t.clone(), spec.trainable);
        }
    }
    ck.graph = graph;
    ck.params = params;
    ck.meta["model"] = json!(label);
    Ok(())
}

/// Optimizer state as checkpoint content: scalars in the JSON meta, buffers as tensors.
pub fn optimizer_to_checkpoint(opt: &Optimizer, name: OptimizerName) -> (Value, Vec<(String, Vec<f32>)>) {
    let st = opt.state();
    (json!({"name": name, "step": st.step, "lr": st.lr}), st.buffers)
}

pub fn optimizer_from_checkpoint(meta: &Value, tensors: &[(String, Vec<f32>)]) -> Result<OptimizerState> {
    let step = meta.get("step").and_then(Value::as_u64).context("checkpoint optimizer state has no `step`")?;
    let lr = meta.get("lr").and_then(Value::as_f64).context("checkpoint optimizer state has no `lr`")? as f32;
    Ok(OptimizerState { step, lr, buffers: tensors.to_vec() })
}

/// The engine of a run: the executor, or PyTorch on the device `--accelerator` names.
pub fn open_engine(s: &Settings, graph: &Graph, params: &ParamStore) -> Result<Box<dyn Engine>> {
    match s.accelerator.torch_device() {
        None => Ok(Box::new(executor(s, graph, params)?)),
        Some(_) => Ok(mase_runtime::open_engine(graph, params, ExecOptions { threads: s.threads, seed: s.seed }, &s.accelerator)?),
    }
}

/// Loss and accuracy over a whole split. The loss is the unweighted mean of per-batch mean losses,
/// as MASE's `val_loss_epoch` / `test_loss_epoch` (doc/mase-semantics.md#training-metrics); accuracy is micro.
pub struct EvalResult {
    pub loss: f64,
    pub accuracy: f64,
}

pub fn evaluate(exec: &mut dyn Engine, data: &Dataset, batch_size: usize) -> Result<EvalResult> {
    if data.is_empty() {
        bail!("the split to evaluate is empty");
    }
    let mut shape = vec![0];
    shape.extend(&data.sample_shape);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    let (mut loss_sum, mut batches, mut correct) = (0.0f64, 0usize, 0usize);
    for idx in mase_io::batch_order(data.len(), batch_size, None) {
        data.gather(&idx, &mut x, &mut y);
        shape[0] = idx.len();
        let st = exec.eval_batch(&x, &shape, &y)?;
        loss_sum += st.loss as f64;
        batches += 1;
        correct += st.correct;
    }
    Ok(EvalResult { loss: loss_sum / batches as f64, accuracy: correct as f64 / data.len() as f64 })
}

/// The shape of one input sample a graph declares: its input's recorded shape (imported and
/// built models record it), else the width of a linear layer or batch norm reading the input.
pub fn declared_sample_shape(graph: &Graph) -> Option<Vec<usize>> {
    let input = *graph.inputs().first()?;
    if let Some(mase_ir::ArgMeta::Tensor(t)) = graph.node(input).meta.common.results.get("data_out_0") {
        if t.shape.len() > 1 {
            return Some(t.shape[1..].to_vec());
        }
    }
    graph.users(input).into_iter().find_map(|u| match &graph.node(u).op {
        mase_ir::Op::Linear { in_features, .. } => Some(vec![*in_features]),
        mase_ir::Op::BatchNorm1d(s) => Some(vec![s.num_features]),
        _ => None,
    })
}

/// Checks, before anything runs, that the data set's samples have the shape the model takes;
/// `origin` is the model or checkpoint file.
pub fn check_sample_shape(graph: &Graph, data_shape: &[usize], origin: &Path) -> Result<()> {
    match declared_sample_shape(graph) {
        Some(want) if want != data_shape => {
            bail!("model {}: it takes samples of shape {want:?}, the data set gives samples of shape {data_shape:?}", origin.display())
        }
        _ => Ok(()),
    }
}

/// Checks that a checkpoint's parameters fit a graph (same names and shapes).
pub fn check_params_fit(graph: &Graph, params: &ParamStore, origin: &Path) -> Result<()> {
    for (name, spec) in graph.param_specs() {
        match params.get(&name) {
            None => bail!("checkpoint {}: no tensor `{name}` for this model", origin.display()),
            Some(t) if t.shape != spec.shape => {
                bail!("checkpoint {}: tensor `{name}` has shape {:?}, the model needs {:?}", origin.display(), t.shape, spec.shape)
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Whether two graphs are the same model: the same nodes, ops and wiring, whatever their number
/// formats (`node.quant`) and metadata. A transformed (quantized) checkpoint is the same model as
/// the zoo graph it came from.
pub fn same_model(a: &Graph, b: &Graph) -> bool {
    let same = |x: &mase_ir::Node, y: &mase_ir::Node| {
        x.name == y.name && x.kind == y.kind && x.target == y.target && x.inputs == y.inputs && x.op == y.op
    };
    a.len() == b.len() && a.nodes().iter().zip(b.nodes()).all(|(x, y)| same(x, y))
}

/// Whether two graphs have the same nodes and wiring (names, kinds, targets, inputs and kinds
/// of op), whatever the widths of their layers: a model widened by `channel_multiplier` has the
/// same wiring as the zoo model it came from.
pub fn same_wiring(a: &Graph, b: &Graph) -> bool {
    let same = |x: &mase_ir::Node, y: &mase_ir::Node| {
        x.name == y.name && x.kind == y.kind && x.target == y.target && x.inputs == y.inputs && x.op.mase_op() == y.op.mase_op()
    };
    a.len() == b.len() && a.nodes().iter().zip(b.nodes()).all(|(x, y)| same(x, y))
}

/// The model context when no data set is named: the per-sample shape and class count given on
/// the command line (`--input-shape`, `--num-classes`), or for an ONNX model its own input
/// shape (a given `--input-shape` must agree with it).
pub fn context_without_data(s: &Settings, input_shape: Option<&[usize]>, num_classes: Option<usize>) -> Result<ModelContext> {
    if let Some(path) = onnx_model_file(s) {
        let m = import_onnx(&path)?;
        if let Some(shape) = input_shape.filter(|&shape| shape != m.sample_shape.as_slice()) {
            bail!("model {}: it takes samples of shape {:?}, --input-shape gives {shape:?}", path.display(), m.sample_shape);
        }
        let classes = m.output_shape.iter().product::<usize>().max(1);
        return Ok(ModelContext { sample_shape: m.sample_shape, num_classes: num_classes.unwrap_or(classes) });
    }
    let sample_shape = input_shape.ok_or_else(|| {
        anyhow!("no data set given: name one (see `ch info`) or give the input with --input-shape (one sample, e.g. 1,28,28)")
    })?;
    if sample_shape.is_empty() || sample_shape.contains(&0) {
        bail!("--input-shape {sample_shape:?}: expected one sample's dimensions, each at least 1 (e.g. 1,28,28)");
    }
    let num_classes = num_classes.ok_or_else(|| anyhow!("no data set given: the model's class count comes from --num-classes"))?;
    if num_classes == 0 {
        bail!("--num-classes must be at least 1");
    }
    Ok(ModelContext { sample_shape: sample_shape.to_vec(), num_classes })
}
