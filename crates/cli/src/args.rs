//! Command-line grammar: `ch ACTION [MODEL] [DATASET] [options]`, with MASE's flag names.
//!
//! Every option is an `Option` so that the merge in `config.rs` can tell "given on the command
//! line" from "left at its default" (MASE compares against the default value instead, so an
//! explicit `--batch-size 128` loses to the TOML: we do not reproduce that).

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(name = "ch", version, about = "mase-rs: train, test, transform and search small networks for hardware")]
pub struct Cli {
    #[command(subcommand)]
    pub action: Action,
}

#[derive(Debug, Subcommand)]
pub enum Action {
    /// Train MODEL on DATASET; writes best/last checkpoints and metrics.
    Train(RunArgs),
    /// Evaluate a checkpoint (`--load`) on the test split.
    Test(RunArgs),
    /// List the known models and data sets.
    Info,
}

/// Options shared by the actions (MASE's `CLI_DEFAULTS` keys, spec mase-flow.md §1.3).
#[derive(Debug, Args, Default, Clone)]
pub struct RunArgs {
    /// Zoo model name (see `ch info`), or a model file (`*.toml`).
    pub model: Option<String>,
    /// Data set name (see `ch info`).
    pub dataset: Option<String>,
    /// TOML configuration; its top-level keys are the long flag names with `_` (defaults < TOML < flags).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// A user model file (TOML) used instead of a zoo name.
    #[arg(long = "model-file")]
    pub model_file: Option<PathBuf>,
    #[arg(long)]
    pub task: Option<String>,
    /// Checkpoint to start from (train) or to evaluate (test).
    #[arg(long = "load")]
    pub load_name: Option<PathBuf>,
    /// MASE's checkpoint kind: mz, pt, pl or hf. mase-rs recognises its own checkpoints by content.
    #[arg(long = "load-type")]
    pub load_type: Option<String>,
    #[arg(long = "batch-size")]
    pub batch_size: Option<usize>,
    #[arg(long = "learning-rate")]
    pub learning_rate: Option<f64>,
    /// adam, adamw or sgd.
    #[arg(long = "optimizer", alias = "training-optimizer")]
    pub training_optimizer: Option<String>,
    #[arg(long = "weight-decay")]
    pub weight_decay: Option<f64>,
    #[arg(long = "max-epochs")]
    pub max_epochs: Option<usize>,
    /// Stop after this many optimizer steps (values <= 0 mean no limit).
    #[arg(long = "max-steps", allow_hyphen_values = true)]
    pub max_steps: Option<i64>,
    #[arg(long)]
    pub seed: Option<u64>,
    #[arg(long)]
    pub project: Option<String>,
    #[arg(long = "project-dir")]
    pub project_dir: Option<PathBuf>,
    /// Folder holding the data sets (else $MASE_DATA_DIR, else the repo's `data/`).
    #[arg(long = "data-dir")]
    pub data_dir: Option<PathBuf>,
    /// Continue a killed run from `<project>/software/training_ckpts/last.ckpt`.
    #[arg(long)]
    pub resume: bool,
    /// Continue a killed run from this checkpoint.
    #[arg(long = "resume-from")]
    pub resume_from: Option<PathBuf>,
    /// Print one JSON object with the results on stdout (human output goes to stderr).
    #[arg(long)]
    pub json: bool,
    /// Threads for the kernels (0 = all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    #[arg(long = "log-level")]
    pub log_level: Option<String>,
    #[arg(long = "log-every-n-steps")]
    pub log_every_n_steps: Option<usize>,
    #[arg(long = "accumulate-grad-batches")]
    pub accumulate_grad_batches: Option<usize>,
    #[arg(long = "debug")]
    pub to_debug: bool,
    // Flags that only steer PyTorch/Lightning in MASE. They are accepted so that MASE command lines
    // run unchanged, and a non-default value is reported with a one-line warning.
    #[arg(long)]
    pub accelerator: Option<String>,
    #[arg(long)]
    pub strategy: Option<String>,
    #[arg(long = "trainer-precision")]
    pub trainer_precision: Option<String>,
    #[arg(long = "cpu", alias = "num-workers")]
    pub num_workers: Option<usize>,
    #[arg(long = "gpu", alias = "num-devices")]
    pub num_devices: Option<usize>,
    #[arg(long = "nodes")]
    pub num_nodes: Option<usize>,
    #[arg(long = "report-to")]
    pub report_to: Option<String>,
}
