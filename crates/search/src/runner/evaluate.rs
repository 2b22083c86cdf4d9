//! `basic_evaluation`: loss and accuracy of the candidate over the first `num_samples` of a split.
//!
//! Differences from MASE, on purpose: the metrics are fresh for every trial (MASE never resets
//! them, so trial k reports the running mean over trials 0..k); accuracy is plain (micro), not
//! torchmetrics' macro average; exactly `num_samples` samples are evaluated (MASE evaluates
//! `ceil(num_samples / batch_size)` whole batches). The loss is the mean of per-batch mean losses,
//! as MASE's `MeanMetric`. Both spellings of the loader key work (`dataloader`, which MASE
//! reads, and `data_loader`, which its example configs write and it ignores).

use crate::runner::{batches, positive, runner_table, split, Batch, FixedRunner, RunContext, Runner, RunnerEnv, RunnerInfo, Stage};
use crate::space::Candidate;
use crate::trial::Metrics;
use crate::{Result, SearchError};
use mase_runtime::{open_engine, Accelerator, ExecOptions};
use serde_json::Value;

pub(crate) struct BasicEvaluation {
    batches: Vec<Batch>,
    samples: usize,
    seed: u64,
    accelerator: Accelerator,
}

const AT: &str = "search.strategy.sw_runner.basic_evaluation";

pub(crate) fn build(cfg: &Value, env: &RunnerEnv) -> Result<Box<dyn Runner>> {
    let m = runner_table(cfg, "basic_evaluation", "sw_runner", &["num_samples", "dataloader", "data_loader", "batch_size"])?;
    let num_samples =
        positive(&m, "num_samples", AT)?.ok_or_else(|| SearchError::config(format!("{AT}.num_samples"), "missing (MASE requires it)"))?;
    let loader = m.get("dataloader").or(m.get("data_loader")).map(|v| v.as_str().unwrap_or("")).unwrap_or("val_dataloader");
    let data = split(&env.splits, loader, &format!("{AT}.dataloader"))?;
    if data.is_empty() {
        return Err(SearchError::config(format!("{AT}.dataloader"), format!("the `{loader}` split of this data set is empty")));
    }
    let batch_size = positive(&m, "batch_size", AT)?.unwrap_or(env.batch_size);
    let samples = num_samples.min(data.len());
    Ok(Box::new(BasicEvaluation {
        batches: batches(data, samples, batch_size),
        samples,
        seed: env.seed,
        accelerator: env.accelerator.clone(),
    }))
}

impl FixedRunner for BasicEvaluation {
    const INFO: RunnerInfo = RunnerInfo { name: "basic_evaluation", stage: Stage::Software, reports: &["loss", "accuracy"] };

    fn measure(&self, cand: &mut Candidate, cx: &RunContext) -> Result<Metrics> {
        let mut exec = open_engine(&cand.graph, &cand.params, ExecOptions { threads: cx.threads, seed: self.seed }, &self.accelerator)?;
        let (mut loss, mut correct) = (0.0f64, 0usize);
        for b in &self.batches {
            let st = exec.eval_batch(&b.x, &b.shape, &b.y)?;
            loss += st.loss as f64;
            correct += st.correct;
        }
        let mut out = Metrics::new();
        out.insert("loss".into(), loss / self.batches.len() as f64);
        out.insert("accuracy".into(), correct as f64 / self.samples as f64);
        Ok(out)
    }
}
