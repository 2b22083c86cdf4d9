//! `ch train MODEL DATASET`: MASE's training loop (doc/mase-semantics.md#training-loop) with resumable,
//! self-describing checkpoints.

use super::divergence::{first_non_finite, number, LossWatch, Verdict};
use super::epoch::EpochRecord;
use super::train_report::{open_tensorboard, write_curves, TensorBoardLog};
use crate::args::RunArgs;
use crate::config::{merge_and_warn, ReportTo, Settings};
use crate::output::{Human, ProjectDirs};
use crate::session::{self, evaluate};
use anyhow::{anyhow, bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use mase_io::{Checkpoint, Dataset, Splits};
use mase_ir::Rng;
use mase_runtime::{cosine_lr, Executor};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Streams used to draw the epoch shuffles and the initial weights; fixed so that a resumed run
/// shuffles exactly as an uninterrupted one.
const INIT_STREAM: u64 = 1;
const SHUFFLE_STREAM: u64 = 1_000;
/// One augmentation stream per epoch (`--augment`), so a resumed run crops and flips as an
/// uninterrupted one.
const AUGMENT_STREAM: u64 = 2_000;

pub fn run(args: &RunArgs) -> Result<()> {
    let human = Human { json: args.json };
    let merged = merge_and_warn(args, &human)?;
    let s = merged.settings;
    if s.max_epochs == 0 {
        bail!("max_epochs = 0: nothing to train and no checkpoint to write (give at least 1)");
    }
    let (dataset, splits) = load_splits(&s)?;
    let ctx = session::model_context(&splits);
    let (graph, label) = session::resolve_graph(&s, &ctx)?;
    let dirs = ProjectDirs::new(&s.project_dir, s.project.as_deref(), &label, &s.task, &dataset);
    let ckpt_dir = dirs.training_ckpts();
    std::fs::create_dir_all(&ckpt_dir).with_context(|| format!("cannot create {}", ckpt_dir.display()))?;

    let seed_rng = Rng::new(s.seed);
    // An ONNX model starts from its own weights; zoo models and model files from fresh ones.
    let params = session::initial_params(&s, &graph, &mut seed_rng.fork(INIT_STREAM))?;
    let mut opt = session::make_optimizer(&s);

    let resume_path = args.resume_from.clone().or_else(|| args.resume.then(|| ckpt_dir.join("last.ckpt")));
    let start = starting_point(&s, resume_path.as_deref(), graph, &label, &human)?;
    let (graph, params) = (start.graph, start.params.unwrap_or(params));
    let (mut history, mut best_val, mut global_step) = (start.history, start.best_val, start.global_step);
    if let Some(state) = start.optimizer {
        opt.load_state(state)?;
    }

    let mut exec = session::executor(&s, &graph, &params)?;
    let mut tensorboard = open_logs(&s, &dirs, &human)?;
    announce(&human, &s, &graph, &label, &dataset, &splits, &history);

    let mut watch = LossWatch::new(splits.info.num_classes, &history);
    // The epoch held by this project's last.ckpt, which a divergence leaves as it is: the
    // resumed one when the run continues it.
    let mut saved_epoch = history.last().map(|r| r.epoch).filter(|_| resume_path.as_deref() == Some(ckpt_dir.join("last.ckpt").as_path()));

    let mut stopped = false;
    let start_epoch = history.len();
    for epoch in start_epoch..s.max_epochs {
        if stopped {
            break;
        }
        let lr = cosine_lr(s.learning_rate as f32, s.eta_min as f32, epoch, s.max_epochs);
        opt.lr = lr;
        let t0 = Instant::now();
        let order = epoch_order(&s, splits.train.len(), &seed_rng, epoch);
        let bar = progress(order.len() as u64, epoch, s.max_epochs, args.json);
        let mut augment_rng = seed_rng.fork(AUGMENT_STREAM + epoch as u64);
        let mut run =
            Steps { exec: &mut exec, opt: &mut opt, watch: &mut watch, tensorboard: &mut tensorboard, global_step: &mut global_step };
        let sums = match train_epoch(&mut run, &s, &splits.train, &order, epoch, &mut augment_rng, &bar, &human)? {
            EpochEnd::Done(sums) => sums,
            EpochEnd::MaxSteps(sums) => {
                stopped = true;
                sums
            }
            EpochEnd::Diverged(what) => {
                bar.finish_and_clear();
                return Err(diverged(&what, saved_epoch));
            }
        };
        bar.finish_and_clear();
        let val = evaluate(&mut exec, &validation_data(&s, &splits.val), s.batch_size)?;
        if !val.loss.is_finite() {
            return Err(diverged(
                &format!("validation loss is {} after epoch {epoch}, step {global_step}", number(val.loss as f32)),
                saved_epoch,
            ));
        }
        history.push(EpochRecord {
            epoch,
            train_loss: sums.loss / sums.batches.max(1) as f64,
            train_acc: sums.correct as f64 / sums.seen.max(1) as f64,
            val_loss: val.loss,
            val_acc: val.accuracy,
            lr: lr as f64,
            seconds: t0.elapsed().as_secs_f64(),
        });
        if s.debug {
            print_row(&human, history.last().expect("pushed above"));
            continue;
        }
        let improved = val.loss < best_val;
        if improved {
            best_val = val.loss;
        }
        let ck = checkpoint(&exec, &opt, &s, &label, &dataset, &splits.info, &history, best_val, global_step)?;
        if let Some(name) = first_non_finite(&ck.params) {
            return Err(diverged(&format!("`{name}` is no longer finite after epoch {epoch}, step {global_step}"), saved_epoch));
        }
        save_epoch(&ckpt_dir, &ck, improved, &label, &history)?;
        saved_epoch = Some(epoch);
        if let Some(tb) = &mut tensorboard {
            tb.epoch(global_step, history.last().expect("pushed above"))?;
        }
        // The row is printed after the checkpoint is on disk, so a printed epoch is a saved epoch.
        print_row(&human, history.last().expect("pushed above"));
    }
    human.info("Training is completed");
    let best = ckpt_dir.join("best.ckpt");
    human.line(format!("best checkpoint: {}", best.display()));
    human.result(&json!({
        "action": "train",
        "model": label,
        "dataset": dataset,
        "trainable_params": mase_zoo::trainable_params(&graph),
        "best_checkpoint": abs(&best),
        "last_checkpoint": abs(&ckpt_dir.join("last.ckpt")),
        "best_val_loss": best_val,
        "global_step": global_step,
        "history": history,
    }));
    Ok(())
}

/// The data set's name and splits, checked against `--augment`.
fn load_splits(s: &Settings) -> Result<(String, Splits)> {
    let dataset = s.dataset.clone().ok_or_else(|| anyhow!("no data set given (see `ch info`)"))?;
    let splits = session::load_data(s, &dataset)?;
    if s.augment && splits.train.sample_shape != [3, 32, 32] {
        bail!("--augment crops and flips 3x32x32 images (cifar10); `{dataset}` has samples of shape {:?}", splits.train.sample_shape);
    }
    Ok((dataset, splits))
}

/// The error of a diverged run, saying what `last.ckpt` keeps (`saved`: its epoch, if this run
/// or the one it resumes wrote it).
fn diverged(what: &str, saved: Option<usize>) -> anyhow::Error {
    let kept = match saved {
        Some(e) => format!("last.ckpt keeps epoch {e} and best.ckpt the best epoch so far"),
        None => "no checkpoint was written".to_string(),
    };
    anyhow!("training diverged: {what}; stopped, {kept} (lower the learning rate)")
}

/// The training batches of `epoch`, shuffled by the epoch's own stream; one batch under `--debug`.
fn epoch_order(s: &Settings, len: usize, seed_rng: &Rng, epoch: usize) -> Vec<Vec<usize>> {
    let mut order = mase_io::batch_order(len, s.batch_size, Some(&mut seed_rng.fork(SHUFFLE_STREAM + epoch as u64)));
    if s.debug {
        order.truncate(1);
    }
    order
}

/// The TensorBoard log of the run, when `report_to` asks for one (Lightning's fast_dev_run logs
/// nothing; neither does `--debug`).
fn open_logs(s: &Settings, dirs: &ProjectDirs, human: &Human) -> Result<Option<TensorBoardLog>> {
    let tensorboard = match s.report_to {
        ReportTo::TensorBoard if !s.debug => Some(open_tensorboard(&dirs.software(), s.optimizer)?),
        ReportTo::TensorBoard | ReportTo::None => None,
    };
    if let Some(tb) = &tensorboard {
        human.info(format!(
            "TensorBoard logs: {} (tensorboard --logdir {})",
            tb.dir().display(),
            dirs.software().join("tensorboard").display()
        ));
    }
    Ok(tensorboard)
}

/// The lines before the first epoch: the model and data set, the table header, and the rows of
/// the epochs a resumed run has already trained.
fn announce(human: &Human, s: &Settings, graph: &mase_ir::Graph, label: &str, dataset: &str, splits: &Splits, history: &[EpochRecord]) {
    human.info(format!("Training model '{label}'..."));
    human.line(format!(
        "Model '{label}': {} trainable parameters; data set '{dataset}': {} train / {} val / {} test samples ({})",
        mase_zoo::trainable_params(graph),
        splits.train.len(),
        splits.val.len(),
        splits.test.len(),
        splits.info.splits_note
    ));
    if s.debug {
        human.info("debug: one training batch and one validation batch, no checkpoints (Lightning's fast_dev_run)");
    }
    human.line(format!(
        "{:>5} {:>11} {:>10} {:>10} {:>9} {:>10} {:>7}",
        "epoch", "train_loss", "train_acc", "val_loss", "val_acc", "lr", "secs"
    ));
    for r in history {
        print_row(human, r);
    }
}

/// The validation split, or its first batch under `--debug`.
fn validation_data(s: &Settings, val: &Dataset) -> Dataset {
    if s.debug {
        val.subset(&(0..val.len().min(s.batch_size)).collect::<Vec<_>>())
    } else {
        val.clone()
    }
}

/// Writes an epoch's checkpoints, `metrics.csv` and curves. `last` is written first: a kill
/// between the two checkpoint writes leaves a resumable run.
fn save_epoch(ckpt_dir: &Path, ck: &Checkpoint, improved: bool, label: &str, history: &[EpochRecord]) -> Result<()> {
    mase_io::save_checkpoint(&ckpt_dir.join("last.ckpt"), ck)?;
    if improved {
        mase_io::save_checkpoint(&ckpt_dir.join("best.ckpt"), ck)?;
    }
    write_metrics(ckpt_dir, history)?;
    write_curves(ckpt_dir, label, history)?;
    Ok(())
}

/// What a run carries from one optimizer step to the next.
struct Steps<'a> {
    exec: &'a mut Executor,
    opt: &'a mut mase_runtime::Optimizer,
    watch: &'a mut LossWatch,
    tensorboard: &'a mut Option<TensorBoardLog>,
    global_step: &'a mut u64,
}

/// The running sums of an epoch's training batches.
#[derive(Default)]
struct EpochSums {
    loss: f64,
    seen: usize,
    correct: usize,
    batches: usize,
}

/// How an epoch's training batches ended.
enum EpochEnd {
    Done(EpochSums),
    /// `max_steps` was reached: the run validates this epoch and stops.
    MaxSteps(EpochSums),
    /// A non-finite loss, before the optimizer stepped: what diverged, for the error line.
    Diverged(String),
}

/// The training batches of one epoch in `order`: forward and backward, Lightning's gradient
/// accumulation (each loss divided by `accumulate_grad_batches`, a step after that many batches
/// or at the epoch's last), the divergence check before each step, and the per-step scalars.
#[allow(clippy::too_many_arguments)]
fn train_epoch(
    run: &mut Steps<'_>,
    s: &Settings,
    train: &mase_io::Dataset,
    order: &[Vec<usize>],
    epoch: usize,
    augment_rng: &mut Rng,
    bar: &ProgressBar,
    human: &Human,
) -> Result<EpochEnd> {
    let mut shape = vec![0];
    shape.extend(&train.sample_shape);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    let mut sums = EpochSums::default();
    // The batches summed into the optimizer step under way, for the per-step scalars.
    let mut step = EpochSums::default();
    let accumulate = s.accumulate_grad_batches;
    for (b, idx) in order.iter().enumerate() {
        train.gather(idx, &mut x, &mut y);
        shape[0] = idx.len();
        if s.augment {
            mase_io::augment_cifar(&mut x, idx.len(), augment_rng);
        }
        let st = run.exec.accumulate_grad(&x, &shape, &y, 1.0 / accumulate as f32)?;
        // Checked before the optimizer step, so the weights never take a non-finite update.
        match run.watch.check(st.loss, epoch, *run.global_step) {
            Verdict::Fine => {}
            Verdict::Exploding(warning) => human.warn(warning),
            Verdict::Diverged(what) => {
                if let Some(tb) = run.tensorboard.as_mut() {
                    tb.flush()?;
                }
                return Ok(EpochEnd::Diverged(what));
            }
        }
        for sum in [&mut sums, &mut step] {
            sum.loss += st.loss as f64;
            sum.batches += 1;
            sum.seen += st.count;
            sum.correct += st.correct;
        }
        if sums.batches % s.log_every_n_steps.min(10) == 0 || sums.batches == order.len() {
            bar.set_position(sums.batches as u64);
            bar.set_message(format!("loss {:.4}", sums.loss / sums.batches as f64));
        }
        if (b + 1) % accumulate != 0 && b + 1 != order.len() {
            continue;
        }
        run.exec.step(run.opt)?;
        if let Some(tb) = run.tensorboard.as_mut() {
            // Lightning logs every `log_every_n_steps` steps, counting from 1. `%` rather than
            // `is_multiple_of`, which needs a newer compiler than the workspace's minimum.
            #[allow(clippy::manual_is_multiple_of)]
            let log_now = (*run.global_step + 1) % s.log_every_n_steps as u64 == 0;
            if log_now {
                tb.step(*run.global_step, step.loss / step.batches as f64, step.correct as f64 / step.seen.max(1) as f64)?;
            }
        }
        step = EpochSums::default();
        *run.global_step += 1;
        if s.max_steps.is_some_and(|m| *run.global_step >= m) {
            return Ok(EpochEnd::MaxSteps(sums));
        }
    }
    Ok(EpochEnd::Done(sums))
}

/// Where a run starts: a resumed run's graph, weights, optimizer state, history and counters; a
/// loaded checkpoint's graph and weights (fine-tuning, QAT, a transformed architecture); or the
/// model as built (`params: None`: the initial weights).
struct Start {
    graph: mase_ir::Graph,
    params: Option<mase_ir::ParamStore>,
    optimizer: Option<mase_runtime::OptimizerState>,
    history: Vec<EpochRecord>,
    best_val: f64,
    global_step: u64,
}

fn starting_point(s: &Settings, resume: Option<&Path>, graph: mase_ir::Graph, label: &str, human: &Human) -> Result<Start> {
    let mut start = Start { graph, params: None, optimizer: None, history: Vec::new(), best_val: f64::INFINITY, global_step: 0 };
    if let Some(path) = resume {
        let ck = session::read_checkpoint(path)?;
        if !session::same_model(&ck.graph, &start.graph) && !session::same_wiring(&ck.graph, &start.graph) {
            bail!("checkpoint {}: it holds a different model than `{label}`; resume with the same model and data set", path.display());
        }
        // The checkpoint's graph keeps the number formats of a quantization-aware run.
        start.graph = ck.graph.clone();
        start.params = Some(ck.params.clone());
        let meta = &ck.meta;
        start.history = serde_json::from_value(meta.get("history").cloned().unwrap_or(Value::Null))
            .with_context(|| format!("checkpoint {}: bad `history`", path.display()))?;
        start.best_val = meta.get("best_val_loss").and_then(Value::as_f64).unwrap_or(f64::INFINITY);
        start.global_step = meta.get("global_step").and_then(Value::as_u64).unwrap_or(0);
        let opt_meta = meta.get("optimizer").cloned().unwrap_or(Value::Null);
        let saved_name = opt_meta.get("name").and_then(Value::as_str).unwrap_or("");
        let want = serde_json::to_value(s.optimizer)?;
        if Some(saved_name) != want.as_str() {
            bail!("checkpoint {}: trained with optimizer `{saved_name}`, this run asks for {want}", path.display());
        }
        start.optimizer = Some(session::optimizer_from_checkpoint(&opt_meta, &ck.optimizer_tensors)?);
        human.info(format!("Resuming from {} after epoch {}", path.display(), start.history.len()));
    } else if let Some(path) = &s.load_name {
        let ck = session::read_checkpoint(path)?;
        // A checkpoint of an architecture transform (`channel_multiplier`) holds the same nodes
        // with other layer widths: training continues on its graph.
        if !session::same_model(&ck.graph, &start.graph) && session::same_wiring(&ck.graph, &start.graph) {
            start.graph = ck.graph.clone();
            human.info("the checkpoint holds a transformed architecture (other layer widths): training it");
        }
        session::check_params_fit(&start.graph, &ck.params, path)?;
        // A transformed checkpoint carries number formats: training continues on its graph, so
        // the quantized nodes train through their straight-through estimators (QAT).
        if session::same_model(&ck.graph, &start.graph) && ck.graph.nodes().iter().any(|n| n.quant.is_some()) {
            start.graph = ck.graph.clone();
            human.info("the checkpoint is quantized: quantization-aware training");
        }
        start.params = Some(ck.params);
        human.info(format!("'{}' checkpoint loaded before training", s.load_type));
    }
    Ok(start)
}

fn abs(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

fn print_row(human: &Human, r: &EpochRecord) {
    human.line(format!(
        "{:>5} {:>11.5} {:>10.4} {:>10.5} {:>9.4} {:>10.3e} {:>7.2}",
        r.epoch, r.train_loss, r.train_acc, r.val_loss, r.val_acc, r.lr, r.seconds
    ));
}

fn progress(len: u64, epoch: usize, epochs: usize, json: bool) -> ProgressBar {
    let bar = if json { ProgressBar::hidden() } else { ProgressBar::new(len) };
    if let Ok(style) = ProgressStyle::with_template("Epoch {prefix} [{bar:30}] {pos}/{len} {msg} [{elapsed_precise}]") {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(format!("{}/{}", epoch + 1, epochs));
    bar
}

#[allow(clippy::too_many_arguments)]
fn checkpoint(
    exec: &Executor,
    opt: &mase_runtime::Optimizer,
    s: &Settings,
    label: &str,
    dataset: &str,
    info: &mase_io::DatasetInfo,
    history: &[EpochRecord],
    best_val: f64,
    global_step: u64,
) -> Result<Checkpoint> {
    let (opt_meta, opt_tensors) = session::optimizer_to_checkpoint(opt, s.optimizer);
    let last = history.last();
    Ok(Checkpoint {
        graph: exec.graph().clone(),
        params: exec.params(),
        optimizer_tensors: opt_tensors,
        meta: json!({
            "model": label,
            "dataset": dataset,
            "dataset_info": info,
            "epoch": history.len(),
            "global_step": global_step,
            "metrics": last,
            "best_val_loss": best_val,
            "history": history,
            "optimizer": opt_meta,
            "settings": s,
        }),
    })
}

fn write_metrics(dir: &Path, history: &[EpochRecord]) -> Result<()> {
    let mut csv = String::from("epoch,train_loss,train_acc,val_loss,val_acc,lr,seconds\n");
    for r in history {
        csv += &format!("{},{},{},{},{},{},{}\n", r.epoch, r.train_loss, r.train_acc, r.val_loss, r.val_acc, r.lr, r.seconds);
    }
    std::fs::write(dir.join("metrics.csv"), csv).with_context(|| format!("cannot write {}", dir.join("metrics.csv").display()))?;
    let j = serde_json::to_string_pretty(history)?;
    std::fs::write(dir.join("metrics.json"), j).with_context(|| format!("cannot write {}", dir.join("metrics.json").display()))?;
    Ok(())
}
