//! The timing protocol, shared with `bench/pytorch_ref.py`: warm-up steps, then timed training
//! steps over consecutive batches (cycled), then timed eval batches; medians of each.

use crate::cases::build_bench_model;
use crate::cases::Case;
use crate::error::{BenchError, Result};
use crate::report::{median, Measurement};
use mase_ir::Rng;
use mase_runtime::{init_params, ConvAlgo, ExecOptions, Executor, Fusion, Optimizer, OptimizerKind};
use mase_zoo::{trainable_params, ModelContext};
use std::hint::black_box;
use std::time::Instant;

/// Adam as `torch.optim.Adam(params, lr=1e-3)` builds it.
pub fn torch_default_adam() -> Optimizer {
    Optimizer::new(OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }, 1e-3)
}

/// How a case runs.
#[derive(Clone, Copy, Debug)]
pub struct RunOptions {
    /// Worker threads of the executor.
    pub threads: usize,
    /// Seed of the initial parameters (and dropout).
    pub seed: u64,
    /// The convolution algorithm.
    pub conv: ConvAlgo,
    /// Whether the executor fuses epilogues.
    pub fusion: Fusion,
}

impl RunOptions {
    /// One thread, seed 0, the executor's defaults.
    pub fn single_thread() -> RunOptions {
        RunOptions { threads: 1, seed: 0, conv: ConvAlgo::default(), fusion: Fusion::default() }
    }
}

/// Builds the case's model from the zoo, initialises it from `opts.seed`, and measures it.
pub fn run_case(case: &Case, opts: RunOptions) -> Result<Measurement> {
    let RunOptions { threads, seed, conv, fusion } = opts;
    let (model, batch) = (case.model, case.batch);
    let run_err = |source| BenchError::Run { model: model.to_string(), batch, source: Box::new(source) };
    let ctx = ModelContext::new(case.data.sample_shape.clone(), case.data.num_classes);
    let graph = build_bench_model(model, &ctx).map_err(|source| BenchError::Build { model: model.to_string(), source })?;
    let params = init_params(&graph, &mut Rng::new(seed));
    let mut exec = Executor::new(&graph, &params, ExecOptions { threads, seed }).map_err(run_err)?;
    exec.set_conv_algo(conv);
    exec.set_fusion(fusion);
    let mut opt = torch_default_adam();
    let shape = case.data.batch_shape(batch);
    let rows =
        |i: usize| case.data.batch(i, batch).ok_or(BenchError::TooFewRows { model: model.to_string(), rows: case.data.rows(), batch });

    let mut last_loss = f32::NAN;
    let mut train_us = Vec::with_capacity(case.steps);
    let train_steps = if case.phase.trains() { case.warmup + case.steps } else { 0 };
    for step in 0..train_steps {
        let (x, y) = rows(step)?;
        let t = Instant::now();
        let loss = exec.train_step(x, &shape, y, &mut opt).map_err(run_err)?.loss;
        let us = t.elapsed().as_secs_f64() * 1e6;
        if !loss.is_finite() {
            return Err(BenchError::NonFiniteLoss { model: model.to_string(), batch, step, loss });
        }
        if step >= case.warmup {
            train_us.push(us);
        }
        last_loss = loss;
    }

    let mut eval_us = Vec::with_capacity(case.steps);
    let eval_steps = if case.phase.evaluates() { case.steps } else { 0 };
    for step in 0..eval_steps {
        let (x, _) = rows(step)?;
        let t = Instant::now();
        black_box(exec.infer(x, &shape).map_err(run_err)?);
        eval_us.push(t.elapsed().as_secs_f64() * 1e6);
    }

    Ok(Measurement {
        model: model.to_string(),
        batch,
        threads,
        conv,
        fusion,
        params: trainable_params(&graph),
        train_step_us: median(&train_us),
        eval_batch_us: median(&eval_us),
        last_loss,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cases::Phase;
    use crate::data::jsc_synthetic;

    #[test]
    fn run_case_measures_real_steps_of_jsc_tiny() {
        let case = Case { model: "jsc-tiny", data: jsc_synthetic(1024, 3), batch: 256, warmup: 2, steps: 5, phase: Phase::Both };
        let m = run_case(&case, RunOptions::single_thread()).expect("jsc-tiny runs");
        assert_eq!((m.model.as_str(), m.batch, m.threads, m.params), ("jsc-tiny", 256, 1, 117));
        assert!(m.train_step_us > 0.0 && m.eval_batch_us > 0.0, "{m:?}");
        // Cross-entropy over 5 classes of ReLU'd logits starts near ln 5 = 1.61 and cannot go
        // below 0 or, with logits that small, far above ln 5 after 7 steps.
        assert!(m.last_loss > 0.5 && m.last_loss < 3.0, "{m:?}");
    }

    #[test]
    fn the_quantized_case_trains_with_fake_quantization() {
        let case = Case { model: "jsc-toy-q", data: jsc_synthetic(1024, 3), batch: 256, warmup: 2, steps: 5, phase: Phase::Train };
        let m = run_case(&case, RunOptions::single_thread()).expect("jsc-toy-q runs");
        assert_eq!((m.model.as_str(), m.params), ("jsc-toy-q", 327));
        assert!(m.last_loss.is_finite(), "{m:?}");
    }

    #[test]
    fn the_mxint8_encoder_trains_with_fake_quantization() {
        let data = crate::data::seq_synthetic(8, 64, 10, 3);
        let case = Case { model: "bert-tiny-mx", data, batch: 4, warmup: 1, steps: 1, phase: Phase::Both };
        let m = run_case(&case, RunOptions::single_thread()).expect("bert-tiny-mx runs");
        assert_eq!((m.model.as_str(), m.params), ("bert-tiny-mx", 425_226));
        // Cross-entropy over 10 classes at initialisation is near ln 10 = 2.30.
        assert!(m.last_loss > 1.0 && m.last_loss < 4.0, "{m:?}");
    }

    #[test]
    fn a_phase_alone_leaves_the_other_unmeasured() {
        let case = |phase| Case { model: "jsc-tiny", data: jsc_synthetic(512, 3), batch: 256, warmup: 1, steps: 2, phase };
        let t = run_case(&case(Phase::Train), RunOptions::single_thread()).expect("train only");
        assert!(t.train_step_us > 0.0 && t.eval_batch_us.is_nan() && t.last_loss.is_finite(), "{t:?}");
        let e = run_case(&case(Phase::Eval), RunOptions::single_thread()).expect("eval only");
        assert!(e.train_step_us.is_nan() && e.eval_batch_us > 0.0 && e.last_loss.is_nan(), "{e:?}");
    }
}
