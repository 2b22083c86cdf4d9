//! `basic_train`: trains the candidate for `max_epochs` epochs on (the first `num_samples` of)
//! the train split before the evaluation runners see it. A quantized candidate trains with its
//! fake-quant formats (quantization-aware training with the straight-through estimator).
//!
//! MASE's runner only works for NLP models and counts optimizer steps from `num_samples`; this
//! one trains any classifier by epochs, shuffling with the study seed so every candidate sees the
//! same batches. It reports `train_loss` and `train_accuracy` of the last epoch (not `loss` /
//! `accuracy`, which belong to the evaluation runner).

use crate::runner::{positive, runner_table, FixedRunner, RunContext, Runner, RunnerEnv, RunnerInfo, Stage};
use crate::space::Candidate;
use crate::trial::Metrics;
use crate::{Result, SearchError};
use mase_io::Dataset;
use mase_ir::Rng;
use mase_runtime::{cosine_lr, open_engine, Accelerator, ExecOptions, Optimizer, OptimizerKind};
use serde_json::Value;
use std::sync::Arc;

const AT: &str = "search.strategy.sw_runner.basic_train";

#[derive(Clone, Copy, Debug, PartialEq)]
enum Schedule {
    Constant,
    Cosine,
}

pub(crate) struct BasicTrain {
    data: Arc<Dataset>,
    epochs: usize,
    batch_size: usize,
    lr: f64,
    weight_decay: f64,
    optimizer: String,
    schedule: Schedule,
    seed: u64,
    accelerator: Accelerator,
}

pub(crate) fn build(cfg: &Value, env: &RunnerEnv) -> Result<Box<dyn Runner>> {
    let m = runner_table(
        cfg,
        "basic_train",
        "sw_runner",
        &[
            "max_epochs",
            "num_samples",
            "optimizer",
            "learning_rate",
            "weight_decay",
            "batch_size",
            "lr_scheduler",
            "num_warmup_steps",
            "gradient_accumulation_steps",
        ],
    )?;
    let epochs = positive(&m, "max_epochs", AT)?.unwrap_or(1);
    let train = &env.splits.train;
    if train.is_empty() {
        return Err(SearchError::config(AT, "the train split of this data set is empty"));
    }
    let n = positive(&m, "num_samples", AT)?.unwrap_or(train.len()).min(train.len());
    let data = Arc::new(train.subset(&(0..n).collect::<Vec<_>>()));
    let optimizer = m.get("optimizer").map(|v| v.as_str().unwrap_or("?").to_ascii_lowercase()).unwrap_or_else(|| "adam".into());
    if !["adam", "adamw", "sgd"].contains(&optimizer.as_str()) {
        return Err(SearchError::config(format!("{AT}.optimizer"), format!("`{optimizer}` is not known: expected adam, adamw or sgd")));
    }
    let num = |key: &str, default: f64| -> Result<f64> {
        match m.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_f64()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| SearchError::config(format!("{AT}.{key}"), format!("must be a non-negative number, got {v}"))),
        }
    };
    let lr = num("learning_rate", env.learning_rate)?;
    let weight_decay = num("weight_decay", 0.0)?;
    let schedule = match m.get("lr_scheduler").and_then(Value::as_str) {
        None | Some("constant") => Schedule::Constant,
        Some("cosine") => Schedule::Cosine,
        Some(other) => {
            return Err(SearchError::config(
                format!("{AT}.lr_scheduler"),
                format!("`{other}` is not supported: expected constant or cosine"),
            ))
        }
    };
    if num("num_warmup_steps", 0.0)? != 0.0 {
        return Err(SearchError::config(format!("{AT}.num_warmup_steps"), "warm-up is not supported; use 0"));
    }
    if num("gradient_accumulation_steps", 1.0)? != 1.0 {
        return Err(SearchError::config(format!("{AT}.gradient_accumulation_steps"), "only 1 is supported (use a larger batch_size)"));
    }
    let batch_size = positive(&m, "batch_size", AT)?.unwrap_or(env.batch_size);
    Ok(Box::new(BasicTrain {
        data,
        epochs,
        batch_size,
        lr,
        weight_decay,
        optimizer,
        schedule,
        seed: env.seed,
        accelerator: env.accelerator.clone(),
    }))
}

impl BasicTrain {
    fn optimizer(&self) -> Optimizer {
        let wd = self.weight_decay as f32;
        let kind = match self.optimizer.as_str() {
            "adamw" => OptimizerKind::AdamW { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: wd },
            "sgd" => OptimizerKind::Sgd { momentum: 0.9, dampening: 0.0, weight_decay: wd, nesterov: true },
            _ => OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: wd },
        };
        Optimizer::new(kind, self.lr as f32)
    }
}

impl FixedRunner for BasicTrain {
    const INFO: RunnerInfo = RunnerInfo { name: "basic_train", stage: Stage::Train, reports: &["train_loss", "train_accuracy"] };

    fn measure(&self, cand: &mut Candidate, cx: &RunContext) -> Result<Metrics> {
        let mut exec = open_engine(&cand.graph, &cand.params, ExecOptions { threads: cx.threads, seed: self.seed }, &self.accelerator)?;
        let mut opt = self.optimizer();
        let rng = Rng::new(self.seed);
        let (mut x, mut y) = (Vec::new(), Vec::new());
        let mut shape = vec![0];
        shape.extend(&self.data.sample_shape);
        let (mut loss, mut correct, mut seen, mut steps) = (0.0f64, 0usize, 0usize, 0usize);
        for epoch in 0..self.epochs {
            if self.schedule == Schedule::Cosine {
                opt.lr = cosine_lr(self.lr as f32, 1e-6, epoch, self.epochs);
            }
            (loss, correct, seen, steps) = (0.0, 0, 0, 0);
            for idx in mase_io::batch_order(self.data.len(), self.batch_size, Some(&mut rng.fork(1_000 + epoch as u64))) {
                self.data.gather(&idx, &mut x, &mut y);
                shape[0] = idx.len();
                let st = exec.train_step(&x, &shape, &y, &mut opt)?;
                if !st.loss.is_finite() {
                    return Err(SearchError::Runner {
                        runner: "basic_train".into(),
                        reason: format!("training diverged at epoch {epoch}: loss is {}", st.loss),
                    });
                }
                loss += st.loss as f64;
                correct += st.correct;
                seen += st.count;
                steps += 1;
            }
        }
        cand.params = Arc::new(exec.params()?);
        let mut out = Metrics::new();
        out.insert("train_loss".into(), loss / steps.max(1) as f64);
        out.insert("train_accuracy".into(), correct as f64 / seen.max(1) as f64);
        Ok(out)
    }
}
