//! `ch run --model-file F|--load CKPT --input x.npy|--random SHAPE [-o y.npy] [--integer]`: the
//! raw outputs of a model on given inputs, in evaluation mode, without a data set. It is the way
//! to compare mase-rs against onnxruntime or PyTorch on the same inputs, and to run a model whose
//! input matches no data set.
//!
//! The model is a checkpoint (`--load`: its graph, weights and number formats), an ONNX/QONNX
//! file (`--model-file x.onnx`: its own weights), or a zoo model or model file with the
//! untrained initial weights of `ch train` (a warning says so). Outputs are the fake-quantized
//! float path, or with `--integer` the integer executor.

use crate::args::RunModelArgs;
use crate::config::{merge_on_cpu, Settings};
use crate::output::Human;
use crate::session;
use anyhow::{anyhow, bail, Context, Result};
use mase_ir::{Graph, ParamStore, Rng, Tensor};
use mase_zoo::ModelContext;
use serde_json::{json, Value};
use std::path::Path;

/// The stream of `--seed` that `--random` draws from, apart from the weight initialisation's.
const RANDOM_INPUT_STREAM: u64 = 7;

/// How many output rows the terminal shows (all of them go to `-o`).
const SHOWN_ROWS: usize = 8;

/// The array of an `.npy` file, or of an `.npz` archive: its only array, else the one named `x`.
fn read_input(path: &Path) -> Result<Tensor> {
    let bytes = std::fs::read(path).with_context(|| format!("input {}: cannot read", path.display()))?;
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    match ext.as_deref() {
        Some("npy") => {
            let name = path.display().to_string();
            Ok(mase_interop::npy::read_npy(&bytes, &name).with_context(|| format!("input {}", path.display()))?.tensor)
        }
        Some("npz") => {
            let arrays = mase_interop::npy::read_npz(&bytes).with_context(|| format!("input {}", path.display()))?;
            if arrays.len() == 1 {
                return Ok(arrays.into_iter().next().map(|(_, w)| w.tensor).unwrap_or_else(|| Tensor::zeros(vec![0])));
            }
            let names: Vec<String> = arrays.iter().map(|(k, _)| k.clone()).collect();
            match arrays.into_iter().find(|(k, _)| k == "x") {
                Some((_, w)) => Ok(w.tensor),
                None => bail!(
                    "input {}: {} arrays ({}) and none named `x`: which one is the input?",
                    path.display(),
                    names.len(),
                    names.join(", ")
                ),
            }
        }
        _ => bail!("input {}: expected a NumPy .npy or .npz file", path.display()),
    }
}

/// A batch of standard normal values of `shape` (batch first), from `seed`.
fn random_input(shape: &[usize], seed: u64) -> Result<Tensor> {
    if shape.len() < 2 || shape.contains(&0) {
        bail!("--random {shape:?}: expected a batch shape with the batch first and every dimension at least 1 (e.g. 8,1,28,28)");
    }
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).filter(|&n| n <= 1 << 28);
    let n = n.ok_or_else(|| anyhow!("--random {shape:?}: more than 2^28 values"))?;
    let mut rng = Rng::new(seed).fork(RANDOM_INPUT_STREAM);
    let data = (0..n).map(|_| rng.normal() as f32).collect();
    Ok(Tensor::new(shape.to_vec(), data)?)
}

/// The number of rows of the embeddings that read the graph's first input as ids (the smallest,
/// if several do), or `None` when no embedding reads it: such a model takes token ids, which
/// `--random` draws uniformly from `0..rows` instead of standard normal values.
fn input_vocab(graph: &Graph) -> Option<usize> {
    let x = *graph.inputs().first()?;
    let rows = graph.users(x).into_iter().filter_map(|u| match graph.node(u).op {
        mase_ir::Op::Embedding { num_embeddings, .. } if graph.node(u).inputs.first() == Some(&x) => Some(num_embeddings),
        _ => None,
    });
    rows.min()
}

/// `--random`'s batch for a model that takes token ids: whole numbers uniform in `0..vocab`.
fn random_ids(shape: &[usize], vocab: usize, seed: u64) -> Result<Tensor> {
    let mut rng = Rng::new(seed).fork(RANDOM_INPUT_STREAM);
    let n = shape.iter().product::<usize>();
    Ok(Tensor::new(shape.to_vec(), (0..n).map(|_| rng.below(vocab.max(1) as u64) as f32).collect())?)
}

/// The model to run, its weights, its name and (where known) one sample's shape.
struct Model {
    graph: Graph,
    params: ParamStore,
    label: String,
    sample_shape: Option<Vec<usize>>,
}

/// The context of a model that needs one (a zoo model, a model file, a PyTorch checkpoint's
/// weights): from the data set when one is named, else from the input and `--num-classes`.
fn model_context(s: &Settings, x: &Tensor, num_classes: Option<usize>) -> Result<ModelContext> {
    match &s.dataset {
        Some(d) => Ok(session::model_context(&session::load_data(s, d)?)),
        None => session::context_without_data(s, Some(&x.shape[1..]), num_classes),
    }
}

fn load_model(s: &Settings, args: &RunModelArgs, x: &Tensor, human: &Human) -> Result<Model> {
    if let Some(path) = &s.load_name {
        let mut ck = session::read_checkpoint(path)?;
        if ck.graph.is_empty() {
            let ctx = model_context(s, x, args.spec.num_classes)?;
            session::adopt_weights(s, &mut ck, Some(&ctx), path)?;
        }
        let label = ck.meta.get("model").and_then(Value::as_str).unwrap_or("model").to_string();
        let sample_shape = ck.meta.pointer("/dataset_info/sample_shape").and_then(|v| serde_json::from_value(v.clone()).ok());
        return Ok(Model { graph: ck.graph, params: ck.params, label, sample_shape });
    }
    if let Some(path) = session::onnx_model_file(s) {
        let m = session::import_onnx(&path)?;
        let label = path.file_stem().and_then(|x| x.to_str()).unwrap_or("model").to_string();
        return Ok(Model { graph: m.graph, params: m.params, label, sample_shape: Some(m.sample_shape) });
    }
    if s.model.is_none() && s.model_file.is_none() {
        bail!("no model given: --load CKPT, --model-file F (.onnx or .toml) or a zoo model name");
    }
    let ctx = model_context(s, x, args.spec.num_classes)?;
    let (graph, label) = session::resolve_graph(s, &ctx)?;
    human.warn("no --load: the outputs are those of the untrained initial weights (pass --load best.ckpt for a trained model)");
    let params = session::initial_params(s, &graph, &mut Rng::new(s.seed).fork(1))?;
    Ok(Model { graph, params, label, sample_shape: Some(ctx.sample_shape) })
}

/// Writes the outputs: `.npy` holds `y`; `.npz` holds the inputs `x` and the outputs `y`.
fn write_output(path: &Path, x: &Tensor, y: &Tensor) -> Result<()> {
    let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
    let bytes = match ext.as_deref() {
        Some("npy") => mase_interop::npy::write_npy_f32(y),
        Some("npz") => mase_interop::npy::write_npz(&[("x", x), ("y", y)]),
        _ => bail!("-o {}: expected a .npy (outputs) or .npz (inputs and outputs) file", path.display()),
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    std::fs::write(path, bytes).with_context(|| format!("cannot write {}", path.display()))
}

/// The first rows of the output, one line each.
fn preview(y: &Tensor) -> String {
    let row = y.shape[1..].iter().product::<usize>().max(1);
    let rows = y.data.chunks(row).take(SHOWN_ROWS).map(|r| r.iter().map(|v| format!("{v:.6}")).collect::<Vec<_>>().join(" "));
    let mut text: Vec<String> = rows.collect();
    if y.shape[0] > SHOWN_ROWS {
        text.push(format!("... ({} rows in all)", y.shape[0]));
    }
    text.join("\n")
}

pub fn run(args: &RunModelArgs) -> Result<()> {
    let human = Human { json: args.run.json };
    let merged = merge_on_cpu(&args.run, &human, "run")?;
    let s = merged.settings;
    let x = match (&args.input, &args.random) {
        (Some(path), _) => read_input(path)?,
        (None, Some(shape)) => random_input(shape, s.seed)?,
        (None, None) => bail!("no input given: --input x.npy (or x.npz), or --random SHAPE (batch first, e.g. 8,1,28,28)"),
    };
    if x.shape.len() < 2 || x.shape[0] == 0 {
        bail!("input of shape {:?}: expected a batch, with the batch dimension first and at least one sample", x.shape);
    }
    if let Some(shape) = args.spec.input_shape.as_deref().filter(|&shape| shape != &x.shape[1..]) {
        bail!(
            "--input-shape {shape:?} does not match the input's samples {:?} (the input gives the shape; --input-shape may be left out)",
            &x.shape[1..]
        );
    }
    let model = load_model(&s, args, &x, &human)?;
    let x = match (args.random.is_some(), input_vocab(&model.graph)) {
        (true, Some(vocab)) => random_ids(&x.shape, vocab, s.seed)?,
        _ => x,
    };
    if let Some(want) = model.sample_shape.as_deref().filter(|&w| w != &x.shape[1..]) {
        bail!("input of shape {:?}: model `{}` takes samples of shape {want:?} (after the batch dimension)", x.shape, model.label);
    }
    let (y, integer) = if args.integer {
        let r = mase_runtime::run_integer(&model.graph, &model.params, &x.data, &x.shape)?;
        (Tensor::new(r.shape, r.output)?, Some(r.report))
    } else {
        let mut exec = session::executor(&s, &model.graph, &model.params)?;
        let out = exec.infer(&x.data, &x.shape)?.to_vec();
        (Tensor::new(exec.output_shape(x.shape[0])?, out)?, None)
    };
    human.info(format!("Ran model '{}' on {} samples: output shape {:?}", model.label, x.shape[0], y.shape));
    if let Some(report) = &integer {
        let ints = report.integer_nodes();
        human.info(format!(
            "integer arithmetic on {} node(s): {}; widest accumulator {} bits",
            ints.len(),
            ints.join(", "),
            report.max_acc_bits()
        ));
        for n in report.nodes.iter().filter(|n| !n.is_integer()) {
            human.info(format!("{} ({}) ran in float: {}", n.node, n.op, n.float_reason.as_deref().unwrap_or("")));
        }
    }
    match &args.output {
        Some(path) => {
            write_output(path, &x, &y)?;
            human.info(format!("Outputs written to {}", path.display()));
        }
        None => human.line(preview(&y)),
    }
    let mut result = json!({
        "action": "run",
        "model": model.label,
        "input_shape": x.shape,
        "output_shape": y.shape,
        "executor": if integer.is_some() { "integer" } else { "float" },
        "output_file": args.output,
    });
    if args.output.is_none() {
        result["output"] = json!(y.data);
    }
    if let Some(report) = &integer {
        result["integer_nodes"] = json!(report.integer_nodes());
        result["max_acc_bits"] = json!(report.max_acc_bits());
        result["float_nodes"] = report.nodes.iter().filter(|n| !n.is_integer()).map(|n| (n.node.clone(), json!(n.float_reason))).collect();
    }
    human.result(&result);
    Ok(())
}
