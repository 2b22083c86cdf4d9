//! `ch test MODEL DATASET --load CKPT [--split train|val|test|all]`: loss and accuracy of a
//! checkpoint on one split of the data set (the test split unless `--split` says otherwise).

use crate::args::TestArgs;
use crate::config::merge_and_warn;
use crate::output::{Human, ProjectDirs};
use crate::session::{self, evaluate};
use anyhow::{anyhow, bail, Context, Result};
use mase_io::{Dataset, Splits};
use serde_json::{json, Value};

/// The part of a data set that `--split` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EvalSplit {
    Train,
    Val,
    Test,
    /// Every sample: the training, validation and test splits one after the other.
    All,
}

impl EvalSplit {
    fn parse(name: &str) -> Result<EvalSplit> {
        Ok(match name {
            "train" => EvalSplit::Train,
            "val" | "validation" => EvalSplit::Val,
            "test" => EvalSplit::Test,
            "all" => EvalSplit::All,
            other => bail!("--split `{other}` is not known: expected train, val, test or all"),
        })
    }

    fn name(self) -> &'static str {
        match self {
            EvalSplit::Train => "train",
            EvalSplit::Val => "val",
            EvalSplit::Test => "test",
            EvalSplit::All => "all",
        }
    }

    /// The samples of this split. `All` concatenates the three splits in the order train, val,
    /// test, so that every sample of the data set is scored exactly once.
    fn take(self, splits: Splits) -> Dataset {
        match self {
            EvalSplit::Train => splits.train,
            EvalSplit::Val => splits.val,
            EvalSplit::Test => splits.test,
            EvalSplit::All => {
                let n = splits.train.len() + splits.val.len() + splits.test.len();
                let mut all = Dataset::with_capacity(splits.test.sample_shape.clone(), n);
                for part in [&splits.train, &splits.val, &splits.test] {
                    all.x.extend_from_slice(&part.x);
                    all.y.extend_from_slice(&part.y);
                }
                all
            }
        }
    }
}

pub fn run(test_args: &TestArgs) -> Result<()> {
    let args = &test_args.run;
    let split = EvalSplit::parse(test_args.split.as_deref().unwrap_or("test"))?;
    let human = Human { json: args.json };
    let merged = merge_and_warn(args, &human)?;
    let s = merged.settings;
    // The weights: a checkpoint (`--load`), else those of an ONNX model file.
    let (path, mut ck) = match (s.load_name.clone(), session::onnx_model_file(&s)) {
        (Some(path), _) => {
            let ck = session::read_checkpoint(&path)?;
            (path, ck)
        }
        (None, Some(onnx)) => {
            let m = session::import_onnx(&onnx)?;
            let label = onnx.file_stem().and_then(|x| x.to_str()).unwrap_or("model").to_string();
            let ck =
                mase_io::Checkpoint { graph: m.graph, params: m.params, optimizer_tensors: Vec::new(), meta: json!({ "model": label }) };
            (onnx, ck)
        }
        (None, None) => return Err(session::no_weights(&s, "a checkpoint")),
    };
    let saved_data = ck.meta.get("dataset").and_then(Value::as_str).map(str::to_string);
    let dataset = s.dataset.clone().or(saved_data).ok_or_else(|| anyhow!("no data set given (see `ch info`)"))?;
    let splits = session::load_data(&s, &dataset)?;
    // A PyTorch/Lightning file (`--load-type pt|pl`) has weights only: the named model takes them.
    session::adopt_weights(&s, &mut ck, Some(&session::model_context(&splits)), &path)?;
    let saved_model = ck.meta.get("model").and_then(Value::as_str).unwrap_or("").to_string();
    // The checkpoint carries its graph; a model named on the command line must be the one it holds.
    if let Some(m) = s.model.as_deref() {
        let named = std::path::Path::new(m).file_stem().and_then(|x| x.to_str()).unwrap_or(m);
        if !saved_model.is_empty() && named != saved_model {
            bail!("checkpoint {}: it holds model `{saved_model}`, not `{m}`", path.display());
        }
    }
    let label = if saved_model.is_empty() { s.model.clone().unwrap_or_else(|| "model".into()) } else { saved_model };
    session::check_sample_shape(&ck.graph, &splits.info.sample_shape, &path)?;
    let mut exec = session::open_engine(&s, &ck.graph, &ck.params)?;
    human.info(format!("Testing model '{label}'..."));
    let data = split.take(splits);
    let r = evaluate(exec.as_mut(), &data, s.batch_size)?;
    human.line(format!(
        "test_loss {:.6}  test_acc {:.4}  ({} samples of '{dataset}' {} split)",
        r.loss,
        r.accuracy,
        data.len(),
        split.name()
    ));
    let dirs = ProjectDirs::new(&s.project_dir, s.project.as_deref(), &label, &s.task, &dataset);
    let out_dir = dirs.checkpoints();
    std::fs::create_dir_all(&out_dir).with_context(|| format!("cannot create {}", out_dir.display()))?;
    let result = json!({
        "action": "test",
        "model": label,
        "dataset": dataset,
        "checkpoint": path,
        "test_loss": r.loss,
        "test_acc": r.accuracy,
        "split": split.name(),
        "samples": data.len(),
    });
    // The test split keeps MASE's file name; other splits get their own file beside it.
    let file = out_dir.join(format!("{}_metrics.json", split.name()));
    std::fs::write(&file, serde_json::to_string_pretty(&result)?).with_context(|| format!("cannot write {}", file.display()))?;
    human.info("Testing is completed");
    human.result(&result);
    Ok(())
}
