//! What is benchmarked: each model with its data shape, batch size and step counts.

use crate::data::{cifar_synthetic, jsc_synthetic, mnist_synthetic, seq_synthetic, Dataset};
use crate::error::{BenchError, Result};

/// The models the benchmark knows, in the order it runs them. `jsc-toy-q` is jsc-toy with
/// fake quantization on every linear layer, `bert-tiny-mx` bert-tiny with MXINT8 on every
/// linear layer (see [`build_bench_model`]).
pub const MODELS: [&str; 9] =
    ["jsc-tiny", "jsc-toy", "jsc-toy-q", "jsc-three-layer", "tfc", "vgg7", "resnet18", "vit-tiny", "bert-tiny-mx"];

/// Sequence length and classes of the bert-tiny case (digits-seq's shape).
pub const SEQ_LEN: usize = 64;
pub const SEQ_CLASSES: usize = 10;
/// Batch size of the bert-tiny case.
pub const SEQ_BATCH: usize = 64;

/// The graph of a benchmarked model: the zoo's model of that name, or for a name ending in `-q`
/// the zoo's model with integer 8/4 fake quantization on the data input, weight and bias of
/// every linear layer, which is `QLinear` of `shared/reference/torch_bench.py`; for a name ending
/// in `-mx`, MXINT8 (blocks of 32 along the last axis) on the same three, which is `MxLinear` of
/// `bench/pytorch_ref.py`.
pub fn build_bench_model(name: &str, ctx: &mase_zoo::ModelContext) -> Result<mase_ir::Graph, Box<mase_zoo::ZooError>> {
    let (base, f) = if let Some(base) = name.strip_suffix("-q") {
        (base, mase_ir::QuantFormat::Integer { width: 8, frac_width: 4, signed: true })
    } else if let Some(base) = name.strip_suffix("-mx") {
        (base, mase_ir::QuantFormat::Mxint { width: 8, block_size: 32, block_dim: -1 })
    } else {
        return mase_zoo::build_model(name, ctx).map_err(Box::new);
    };
    let mut g = mase_zoo::build_model(base, ctx).map_err(Box::new)?;
    for n in g.nodes_mut() {
        if matches!(n.op, mase_ir::Op::Linear { .. }) {
            n.quant = Some(mase_ir::NodeQuant {
                data_in: vec![Some(f.clone())],
                weight: Some(f.clone()),
                bias: Some(f.clone()),
                ..Default::default()
            });
        }
    }
    Ok(g)
}

/// Which halves of the protocol to run. Profiling one half at a time keeps the other out of
/// the profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Phase {
    /// Training steps, then eval batches.
    #[default]
    Both,
    /// Training steps only (`eval_batch_us` is reported as NaN).
    Train,
    /// Eval batches only, on the freshly initialised model (`train_step_us` is NaN).
    Eval,
}

impl Phase {
    /// Whether training steps run.
    pub fn trains(self) -> bool {
        self != Phase::Eval
    }

    /// Whether eval batches run.
    pub fn evaluates(self) -> bool {
        self != Phase::Train
    }
}

/// How much work each case does; the same numbers drive `bench/pytorch_ref.py`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BenchConfig {
    /// Rows of synthetic jsc data (MNIST-shaped sets get an eighth of it, as their rows are 49
    /// times larger).
    pub rows: usize,
    /// Timed training steps and timed eval batches of the tabular and MNIST models.
    pub steps: usize,
    /// Timed training steps and eval batches of vgg7, whose steps take seconds.
    pub vgg_steps: usize,
    /// Timed training steps and eval batches of bert-tiny-mx (a tenth of a second and more each).
    pub bert_steps: usize,
    /// Seed of the data and of the parameter initialisation.
    pub seed: u64,
    /// Which halves of the protocol run.
    pub phase: Phase,
}

impl Default for BenchConfig {
    fn default() -> BenchConfig {
        BenchConfig { rows: 65_536, steps: 500, vgg_steps: 3, bert_steps: 20, seed: 42, phase: Phase::Both }
    }
}

/// One measured configuration: a model on a data set at one batch size.
#[derive(Clone, Debug)]
pub struct Case {
    pub model: &'static str,
    pub data: Dataset,
    pub batch: usize,
    /// Untimed training steps before the timed ones (first-touch of buffers, caches, the
    /// thread pool).
    pub warmup: usize,
    /// Timed training steps, then as many timed eval batches.
    pub steps: usize,
    /// Which halves of the protocol run.
    pub phase: Phase,
}

/// The cases for the named models: 256-row batches for the tabular and MNIST models, one fixed
/// CIFAR batch of 32 and one of 128 for vgg7, one fixed CIFAR batch of 64 for resnet18 and
/// vit-tiny (issue 20's speed goals), which take `vgg_steps` steps as vgg7 does, and batches of
/// 64 sequences of 64 token ids for bert-tiny-mx.
pub fn cases(models: &[String], cfg: &BenchConfig) -> Result<Vec<Case>> {
    let mut out = Vec::new();
    for name in models {
        let model = MODELS
            .iter()
            .copied()
            .find(|m| m == name)
            .ok_or_else(|| BenchError::UnknownModel { name: name.clone(), known: MODELS.join(", ") })?;
        let case = |data: Dataset, batch: usize, warmup: usize, steps: usize| Case { model, data, batch, warmup, steps, phase: cfg.phase };
        match model {
            "tfc" => out.push(case(mnist_synthetic(cfg.rows / 8, cfg.seed), 256, 10, cfg.steps)),
            "vgg7" => {
                for batch in [32, 128] {
                    out.push(case(cifar_synthetic(batch, cfg.seed), batch, 1, cfg.vgg_steps));
                }
            }
            "bert-tiny-mx" => out.push(case(seq_synthetic(4 * SEQ_BATCH, SEQ_LEN, SEQ_CLASSES, cfg.seed), SEQ_BATCH, 2, cfg.bert_steps)),
            "resnet18" | "vit-tiny" => out.push(case(cifar_synthetic(64, cfg.seed), 64, 1, cfg.vgg_steps)),
            _ => out.push(case(jsc_synthetic(cfg.rows, cfg.seed), 256, 10, cfg.steps)),
        }
    }
    for c in &out {
        if c.data.num_batches(c.batch) == 0 {
            return Err(BenchError::TooFewRows { model: c.model.to_string(), rows: c.data.rows(), batch: c.batch });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shapes(models: &[&str]) -> Vec<(&'static str, usize, Vec<usize>)> {
        let names: Vec<String> = models.iter().map(|s| s.to_string()).collect();
        let cfg = BenchConfig { rows: 4096, steps: 2, vgg_steps: 1, bert_steps: 1, seed: 1, phase: Phase::Both };
        cases(&names, &cfg).expect("known models").into_iter().map(|c| (c.model, c.batch, c.data.batch_shape(c.batch))).collect()
    }

    #[test]
    fn each_model_gets_its_data_shape_and_batches() {
        assert_eq!(shapes(&["jsc-toy"]), [("jsc-toy", 256, vec![256, 16])]);
        assert_eq!(shapes(&["jsc-toy-q"]), [("jsc-toy-q", 256, vec![256, 16])]);
        assert_eq!(shapes(&["tfc"]), [("tfc", 256, vec![256, 1, 28, 28])]);
        assert_eq!(shapes(&["vgg7"]), [("vgg7", 32, vec![32, 3, 32, 32]), ("vgg7", 128, vec![128, 3, 32, 32])]);
        assert_eq!(shapes(&["bert-tiny-mx"]), [("bert-tiny-mx", 64, vec![64, 64])]);
        assert_eq!(shapes(&["resnet18", "vit-tiny"]), [("resnet18", 64, vec![64, 3, 32, 32]), ("vit-tiny", 64, vec![64, 3, 32, 32])]);
    }

    #[test]
    fn unknown_models_and_tiny_sets_are_errors() {
        let e = cases(&["resnet".to_string()], &BenchConfig::default()).map(|_| ()).unwrap_err();
        assert!(matches!(&e, BenchError::UnknownModel { name, .. } if name == "resnet"), "{e}");
        let cfg = BenchConfig { rows: 100, ..BenchConfig::default() };
        let e = cases(&["jsc-tiny".to_string()], &cfg).map(|_| ()).unwrap_err();
        assert!(matches!(e, BenchError::TooFewRows { rows: 100, batch: 256, .. }), "{e}");
    }
}
