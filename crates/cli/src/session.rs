//! Glue shared by the actions: resolving the model and data set, checkpoints, evaluation.

use crate::config::{OptimizerName, Settings};
use anyhow::{anyhow, bail, Context, Result};
use mase_io::{Checkpoint, DataOptions, Dataset, Splits};
use mase_ir::{Graph, ParamStore};
use mase_runtime::{Executor, Optimizer, OptimizerKind, OptimizerState};
use mase_zoo::ModelContext;
use serde_json::{json, Value};
use std::path::Path;

/// Loads the data set named in the settings.
pub fn load_data(s: &Settings, dataset: &str) -> Result<Splits> {
    Ok(mase_io::load_dataset(dataset, &DataOptions { data_dir: s.data_dir.clone() })?)
}

/// What the data set tells a model about its input.
pub fn model_context(splits: &Splits) -> ModelContext {
    ModelContext { sample_shape: splits.info.sample_shape.clone(), num_classes: splits.info.num_classes }
}

/// The model graph: a model file (`--model-file`, or a MODEL ending in `.toml`), else a zoo name.
/// Returns the graph and the label used for project names and checkpoints.
pub fn resolve_graph(s: &Settings, ctx: &ModelContext) -> Result<(Graph, String)> {
    let file = s.model_file.clone().or_else(|| s.model.as_ref().filter(|m| m.ends_with(".toml")).map(Into::into));
    if let Some(path) = file {
        let graph = mase_zoo::load_model_file(&path, ctx)?;
        let label = path.file_stem().and_then(|x| x.to_str()).unwrap_or("model").to_string();
        return Ok((graph, label));
    }
    let name = s.model.as_deref().ok_or_else(|| anyhow!("no model given: name one (see `ch info`) or pass --model-file"))?;
    Ok((mase_zoo::build_model(name, ctx)?, name.to_string()))
}

/// The optimizer of the settings, with MASE's hyper-parameters (spec mase-flow.md §5.3):
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

/// Reads a checkpoint, telling PyTorch files apart from ours.
pub fn read_checkpoint(path: &Path) -> Result<Checkpoint> {
    let head = std::fs::File::open(path).and_then(|mut f| {
        let mut b = [0u8; 2];
        std::io::Read::read(&mut f, &mut b).map(|n| b[..n].to_vec())
    });
    match head {
        Err(e) => bail!("checkpoint {}: cannot open: {e}", path.display()),
        Ok(b) if b == b"PK" => bail!(
            "checkpoint {}: this is a PyTorch/Lightning file; mase-rs reads its own checkpoints (written by `ch train`) in this version",
            path.display()
        ),
        Ok(_) => Ok(mase_io::load_checkpoint(path)?),
    }
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

/// Loss and accuracy over a whole split. The loss is the unweighted mean of per-batch mean losses,
/// as MASE's `val_loss_epoch` / `test_loss_epoch` (spec mase-flow.md §5.2); accuracy is micro.
pub struct EvalResult {
    pub loss: f64,
    pub accuracy: f64,
}

pub fn evaluate(exec: &mut Executor, data: &Dataset, batch_size: usize) -> Result<EvalResult> {
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
