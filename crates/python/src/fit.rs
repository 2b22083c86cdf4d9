//! Training in the process: `MaseGraph.fit` runs epochs of mini-batch steps (forward in train
//! mode, mean cross-entropy, backward, one optimizer step) on arrays the caller gives, with the
//! runtime's kernels and PyTorch's optimizer formulas.

use crate::errors::{raise, to_py, ErrorClass};
use mase_ir::Rng;
use mase_runtime::{Executor, Optimizer, OptimizerKind};

/// How to train: PyTorch's names and defaults (`torch.optim.Adam(lr=1e-3)`).
pub struct FitOptions {
    pub epochs: usize,
    pub batch_size: usize,
    pub lr: f32,
    pub optimizer: OptimizerKind,
    /// Whether each epoch visits the samples in a new seeded order (otherwise in order).
    pub shuffle: bool,
    pub seed: u64,
}

/// The optimizer called `name` (`adam`, `adamw`, `sgd`) with PyTorch's default hyper-parameters
/// besides `weight_decay` and (for SGD) `momentum`.
pub fn optimizer_kind(name: &str, weight_decay: f32, momentum: f32) -> pyo3::PyResult<OptimizerKind> {
    // The same ranges as `ch train` (`--weight-decay`): a NaN would turn every weight to NaN.
    for (what, v) in [("weight_decay", weight_decay), ("momentum", momentum)] {
        if !(v.is_finite() && v >= 0.0) {
            return Err(raise(ErrorClass::Value, &format!("fit: {what}={v}: expected a finite number >= 0")));
        }
    }
    Ok(match name.to_ascii_lowercase().as_str() {
        "adam" => OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay },
        "adamw" => OptimizerKind::AdamW { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay },
        "sgd" => OptimizerKind::Sgd { momentum, dampening: 0.0, weight_decay, nesterov: false },
        other => return Err(raise(ErrorClass::Value, &format!("fit: unknown optimizer `{other}`; optimizers: adam, adamw, sgd"))),
    })
}

/// One epoch's mean loss (over samples) and accuracy on the training batches.
pub struct EpochStats {
    pub loss: f64,
    pub accuracy: f64,
}

/// The stream of `ir::Rng` that `fit` shuffles with.
const SHUFFLE_STREAM: u64 = 0xf17;

/// Trains `exec` on `xs` (`[N, ...sample]`, row-major) and `labels`; returns each epoch's
/// statistics. The executor's parameters are the trained ones afterwards.
pub fn fit(exec: &mut Executor, xs: &[f32], shape: &[usize], labels: &[i64], opts: &FitOptions) -> pyo3::PyResult<Vec<EpochStats>> {
    let n = shape.first().copied().unwrap_or(0);
    if n == 0 || labels.len() != n {
        return Err(raise(
            ErrorClass::Value,
            &format!("fit: {n} samples and {} labels; both must be the same, non-zero count", labels.len()),
        ));
    }
    let labels: Vec<u32> = labels
        .iter()
        .map(|&l| u32::try_from(l).map_err(|_| raise(ErrorClass::Value, &format!("fit: label {l} is not a class index"))))
        .collect::<pyo3::PyResult<_>>()?;
    if opts.batch_size == 0 || opts.epochs == 0 {
        return Err(raise(ErrorClass::Value, "fit: epochs and batch_size must be at least 1"));
    }
    if !(opts.lr.is_finite() && opts.lr > 0.0) {
        return Err(raise(ErrorClass::Value, &format!("fit: lr={}: expected a finite number > 0", opts.lr)));
    }
    let per: usize = shape[1..].iter().product();
    let mut opt = Optimizer::new(opts.optimizer, opts.lr);
    let mut rng = Rng::new(opts.seed).fork(SHUFFLE_STREAM);
    let mut order: Vec<usize> = (0..n).collect();
    let (mut bx, mut by) = (Vec::new(), Vec::new());
    let mut stats = Vec::with_capacity(opts.epochs);
    for _ in 0..opts.epochs {
        if opts.shuffle {
            rng.shuffle(&mut order);
        }
        let (mut loss, mut correct) = (0.0f64, 0usize);
        for chunk in order.chunks(opts.batch_size) {
            bx.clear();
            by.clear();
            for &i in chunk {
                bx.extend_from_slice(&xs[i * per..(i + 1) * per]);
                by.push(labels[i]);
            }
            let mut bshape = vec![chunk.len()];
            bshape.extend(&shape[1..]);
            let s = exec.train_step(&bx, &bshape, &by, &mut opt).map_err(|e| to_py(&e))?;
            loss += f64::from(s.loss) * s.count as f64;
            correct += s.correct;
        }
        stats.push(EpochStats { loss: loss / n as f64, accuracy: correct as f64 / n as f64 });
    }
    Ok(stats)
}
