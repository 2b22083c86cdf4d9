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
    /// Evaluate a checkpoint (`--load`) on the test split (or `--split train|val|test|all`).
    Test(TestArgs),
    /// Search a design space (the `[search]` table of `--config`); trials go to a study database.
    Search(SearchArgs),
    /// List, show, export or copy the studies of a store (SQLite file or PostgreSQL server).
    Study(StudyArgs),
    /// Run the `[passes.*]` of `--config` in order (quantize, analyses) and save the transformed model.
    Transform(TransformArgs),
    /// Report on a model without a config: graph, metadata, statistics, FLOPs, BitOPs, latency.
    Analyze(AnalyzeArgs),
    /// Write a model (`--load CKPT` or `--model-file F`) as ONNX, or as QONNX with its number formats.
    Export(ExportArgs),
    /// Raw outputs of a model (`--load CKPT` or `--model-file F`) on given inputs (`--input x.npy|x.npz` or `--random SHAPE`).
    Run(RunModelArgs),
    /// Write a quantized checkpoint (`--load`) as Verilog: a streaming pipeline, a Verilator testbench, a manifest.
    Emit(EmitArgs),
    /// Build an emitted design with Verilator, stream a data split through it and compare with the integer executor.
    Simulate(SimulateArgs),
    /// Synthesize an emitted design with Yosys and report LUTs, flip-flops, DSPs, BRAMs and logic depth.
    Synth(SynthArgs),
    /// List the known models and data sets.
    Info,
}

/// Options shared by the actions (MASE's `CLI_DEFAULTS` keys, doc/mase-semantics.md#cli-defaults).
#[derive(Debug, Args, Default, Clone)]
pub struct RunArgs {
    /// Zoo model name (see `ch info`), or a model file (`*.toml`).
    pub model: Option<String>,
    /// Data set name (see `ch info`).
    pub dataset: Option<String>,
    /// TOML configuration; its top-level keys are the long flag names with `_` (defaults < TOML < flags).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// A user model file (TOML, or an ONNX/QONNX model `*.onnx` with its weights) used instead of a zoo name.
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
    #[arg(long = "batch-size", value_parser = positive, allow_negative_numbers = true)]
    pub batch_size: Option<usize>,
    #[arg(long = "learning-rate", allow_hyphen_values = true)]
    pub learning_rate: Option<f64>,
    /// adam, adamw or sgd.
    #[arg(long = "optimizer", alias = "training-optimizer")]
    pub training_optimizer: Option<String>,
    #[arg(long = "weight-decay", allow_hyphen_values = true)]
    pub weight_decay: Option<f64>,
    #[arg(long = "max-epochs", value_parser = positive, allow_negative_numbers = true)]
    pub max_epochs: Option<usize>,
    /// Stop after this many optimizer steps (values <= 0 mean no limit).
    #[arg(long = "max-steps", allow_hyphen_values = true)]
    pub max_steps: Option<i64>,
    /// Random crop (zero padding 4) and horizontal flip of every training batch (cifar10).
    #[arg(long)]
    pub augment: bool,
    /// Leave out data rows with a NaN or infinite feature (else loading refuses them).
    #[arg(long = "drop-nonfinite")]
    pub drop_nonfinite: bool,
    #[arg(long, value_parser = whole_u64, allow_negative_numbers = true)]
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
    #[arg(long, value_parser = whole, allow_negative_numbers = true)]
    pub threads: Option<usize>,
    /// How `train`, `test` and `run` compute convolutions: fast (default; Winograd for the 3x3
    /// shapes where it measured faster), exact (direct sums everywhere) or winograd (every 3x3
    /// convolution it applies to).
    #[arg(long = "conv-algo")]
    pub conv_algo: Option<String>,
    #[arg(long = "log-level")]
    pub log_level: Option<String>,
    #[arg(long = "log-every-n-steps", value_parser = whole, allow_negative_numbers = true)]
    pub log_every_n_steps: Option<usize>,
    #[arg(long = "accumulate-grad-batches", value_parser = positive, allow_negative_numbers = true)]
    pub accumulate_grad_batches: Option<usize>,
    #[arg(long = "debug")]
    pub to_debug: bool,
    /// Where train, test and search run the model: auto or cpu (mase-rs's executor), gpu or cuda,
    /// mps, torch-cpu (PyTorch on that device; needs the `ch` of the Python package and torch).
    #[arg(long)]
    pub accelerator: Option<String>,
    // Flags that only steer PyTorch/Lightning in MASE. They are accepted so that MASE command lines
    // run unchanged, and a non-default value is reported with a one-line warning.
    #[arg(long)]
    pub strategy: Option<String>,
    #[arg(long = "trainer-precision")]
    pub trainer_precision: Option<String>,
    #[arg(long = "cpu", alias = "num-workers", value_parser = whole, allow_negative_numbers = true)]
    pub num_workers: Option<usize>,
    #[arg(long = "gpu", alias = "num-devices", value_parser = whole, allow_negative_numbers = true)]
    pub num_devices: Option<usize>,
    #[arg(long = "nodes", value_parser = whole, allow_negative_numbers = true)]
    pub num_nodes: Option<usize>,
    #[arg(long = "report-to")]
    pub report_to: Option<String>,
}

/// Options of `ch test` besides the shared ones.
#[derive(Debug, Args, Default, Clone)]
pub struct TestArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// The split to evaluate: train, val, test (default) or all (every sample of the data set).
    #[arg(long)]
    pub split: Option<String>,
}

/// Options of `ch search` besides the shared ones (`--resume` continues the stored study).
#[derive(Debug, Args, Default, Clone)]
pub struct SearchArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// Run the same space and budget with each sampler (comma-separated) and plot them together.
    #[arg(long = "compare-samplers", value_delimiter = ',')]
    pub compare_samplers: Vec<String>,
    /// Run each sampler once per seed (comma-separated; overrides `[search.strategy.setup] seed`)
    /// and plot the mean best-so-far with a min–max band.
    #[arg(long, value_delimiter = ',', value_parser = whole_u64, allow_negative_numbers = true)]
    pub seeds: Vec<u64>,
    /// Overrides `[search.strategy.setup] sampler`.
    #[arg(long)]
    pub sampler: Option<String>,
    /// Overrides `[search.strategy.setup] n_trials`.
    #[arg(long = "n-trials", value_parser = positive, allow_negative_numbers = true)]
    pub n_trials: Option<usize>,
    /// Overrides `[search.strategy.setup] n_jobs` (trials run at once; -1: all cores).
    #[arg(long = "n-jobs", value_parser = jobs, allow_negative_numbers = true)]
    pub n_jobs: Option<i64>,
    /// Name of the study in the database (default: the project name).
    #[arg(long)]
    pub study: Option<String>,
    /// A shared study store to join as one of several workers: `postgresql://user:password@host/db`,
    /// `sqlite:///path/study.db` or a path (overrides `[search.storage] url`).
    #[arg(long)]
    pub storage: Option<String>,
}

/// `ch study ACTION`.
#[derive(Debug, Args, Clone)]
pub struct StudyArgs {
    #[command(subcommand)]
    pub action: StudyAction,
}

/// What `ch study` does.
#[derive(Debug, Subcommand, Clone)]
pub enum StudyAction {
    /// Every study of a store with its trial counts and best value.
    List(StudyStoreArgs),
    /// A study's summary: space, objectives, trial counts, best trials or Pareto front.
    Show(StudySelectArgs),
    /// Write a study's trials (CSV and/or JSON: trials.csv, log.json, best.json, study.json) and plots.
    Export(StudyExportArgs),
    /// Copy studies from one store to another (SQLite <-> PostgreSQL), trials unchanged.
    Copy(StudyCopyArgs),
    /// Delete one study and its trials from a store (`--study` is required).
    Delete(StudyDeleteArgs),
}

/// `ch study delete`.
#[derive(Debug, Args, Clone)]
pub struct StudyDeleteArgs {
    #[command(flatten)]
    pub store: StudyStoreArgs,
    /// The study to delete.
    #[arg(long)]
    pub study: String,
}

/// A store.
#[derive(Debug, Args, Clone)]
pub struct StudyStoreArgs {
    /// `postgresql://user:password@host/db`, `sqlite:///path/study.db` or a path.
    #[arg(long)]
    pub storage: String,
    /// Print one JSON object with the results on stdout.
    #[arg(long)]
    pub json: bool,
}

/// A store and, optionally, one study of it.
#[derive(Debug, Args, Clone)]
pub struct StudySelectArgs {
    #[command(flatten)]
    pub store: StudyStoreArgs,
    /// The study (default: every study of the store).
    #[arg(long)]
    pub study: Option<String>,
}

/// `ch study export`.
#[derive(Debug, Args, Clone)]
pub struct StudyExportArgs {
    #[command(flatten)]
    pub select: StudySelectArgs,
    /// `csv` (trials.csv) or `json` (log.json, best.json, study.json); default both.
    #[arg(long)]
    pub format: Option<String>,
    /// Output folder (default: mase_output/<study>/software/search_ckpts, as `ch search` writes).
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
}

/// `ch study copy`.
#[derive(Debug, Args, Clone)]
pub struct StudyCopyArgs {
    /// The store to copy from.
    #[arg(long)]
    pub from: String,
    /// The store to copy to (its study must not exist yet).
    #[arg(long)]
    pub to: String,
    /// The study to copy (default: every study).
    #[arg(long)]
    pub study: Option<String>,
    /// Print one JSON object with the results on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Options of `ch transform` besides the shared ones.
#[derive(Debug, Args, Default, Clone)]
pub struct TransformArgs {
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub spec: InputSpecArgs,
    /// Print the passes `[passes.*]` may name, with their arguments, and exit.
    #[arg(long = "list-passes")]
    pub list_passes: bool,
    /// Print the resolved quantization config of every node.
    #[arg(long)]
    pub explain: bool,
}

/// The model's input when no data set describes it (a model file or zoo model, analysed or run
/// on its own).
#[derive(Debug, Args, Default, Clone)]
pub struct InputSpecArgs {
    /// Shape of one sample without the batch dimension (`1,25,25`), used when no data set is named.
    #[arg(long = "input-shape", value_delimiter = ',', value_parser = whole, allow_negative_numbers = true)]
    pub input_shape: Option<Vec<usize>>,
    /// Number of classes (`out_features = "classes"` of a model file) when no data set is named.
    #[arg(long = "num-classes", value_parser = whole, allow_negative_numbers = true)]
    pub num_classes: Option<usize>,
}

/// Options of `ch run` besides the shared ones.
#[derive(Debug, Args, Default, Clone)]
pub struct RunModelArgs {
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub spec: InputSpecArgs,
    /// The input batch: an `.npy` array, or an `.npz` archive (its only array, or the one named `x`).
    #[arg(long, conflicts_with = "random")]
    pub input: Option<PathBuf>,
    /// A random input batch of this shape, batch first (`8,1,28,28`): standard normal values from `--seed`
    /// (for a model whose input is token ids read by an embedding, ids uniform over its rows).
    #[arg(long, value_delimiter = ',', value_parser = whole, allow_negative_numbers = true)]
    pub random: Option<Vec<usize>>,
    /// Run the integer executor (integer arithmetic on the quantized nodes) instead of fake quantization.
    #[arg(long)]
    pub integer: bool,
    /// Where to write the outputs: `y.npy` (the outputs) or `y.npz` (`x`, the inputs, and `y`).
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
}

/// Options of `ch analyze` besides the shared ones.
#[derive(Debug, Args, Default, Clone)]
pub struct AnalyzeArgs {
    #[command(flatten)]
    pub run: RunArgs,
    #[command(flatten)]
    pub spec: InputSpecArgs,
    /// Reports, comma-separated: graph, meta, type, shape, stats, flops, bitops, latency, verify (default: graph).
    #[arg(long, value_delimiter = ',')]
    pub report: Vec<String>,
    /// Input samples for `stats` and `verify` (default 32 and 256).
    #[arg(long = "num-samples", value_parser = whole, allow_negative_numbers = true)]
    pub num_samples: Option<usize>,
}

/// Options of `ch export` besides the shared ones.
#[derive(Debug, Args, Default, Clone)]
pub struct ExportArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// `onnx` (a float graph) or `qonnx` (number formats as IntQuant/BipolarQuant/FloatQuant nodes).
    #[arg(long, default_value = "onnx")]
    pub format: String,
    /// The file to write.
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
}

/// Options of `ch emit` besides the shared ones.
#[derive(Debug, Args, Default, Clone)]
pub struct EmitArgs {
    #[command(flatten)]
    pub run: RunArgs,
    /// The folder to write (RTL, testbench, build script, manifest).
    #[arg(short = 'o', long = "output")]
    pub output: Option<PathBuf>,
    /// Reuse factor of every layer (1 = fully unrolled, one sample per cycle).
    #[arg(long, value_parser = whole, allow_negative_numbers = true)]
    pub reuse: Option<usize>,
    /// Reuse factor of one layer, `NODE=R` (comma-separated or repeated).
    #[arg(long = "reuse-layer", value_delimiter = ',')]
    pub reuse_layer: Vec<String>,
    /// Pipeline every layer for this clock in MHz (products, adder tree and rescales in
    /// register stages, a skid buffer per layer); default: one register stage per layer.
    #[arg(long = "clock-mhz", allow_negative_numbers = true)]
    pub clock_mhz: Option<f64>,
    /// How a pipelined design builds its products: `inferred` (Verilog `*`, portable; the
    /// default) or `ecp5-dsp` (a Lattice ECP5 MULT18X18D with its input and output registers).
    #[arg(long)]
    pub multipliers: Option<String>,
    /// Layers whose products are shifts and adds in LUTs instead of multipliers (no DSP),
    /// `NODE` (comma-separated or repeated); needs `--clock-mhz`.
    #[arg(long = "shift-add", value_delimiter = ',')]
    pub shift_add: Vec<String>,
    /// Fold the design to fit an ECP5 part (`ecp5-25f`, `ecp5-45f`, `ecp5-85f`): every layer
    /// `--reuse-layer` does not name gets the reuse factor of the smallest initiation interval
    /// at which the cost model's DSPs and LUTs fit the part, and linear layers shift-add
    /// products (LUTs) or multipliers (DSPs), whichever uses the least of the part. Not with
    /// `--reuse`.
    #[arg(long)]
    pub part: Option<String>,
    /// With `--part`: the largest share of the part's DSPs and of its LUTs the fitted design
    /// may use, in percent (default 75: fuller designs route slower or not at all).
    #[arg(long)]
    pub fill: Option<u32>,
}

/// Options of `ch simulate`.
#[derive(Debug, Args, Default, Clone)]
pub struct SimulateArgs {
    /// A folder written by `ch emit`.
    pub dir: PathBuf,
    /// Data set to stream (default: the one the checkpoint was trained on).
    #[arg(long)]
    pub dataset: Option<String>,
    /// Folder holding the data sets (else $MASE_DATA_DIR, else the repo's `data/`).
    #[arg(long = "data-dir")]
    pub data_dir: Option<PathBuf>,
    /// train, val or test (default test).
    #[arg(long)]
    pub split: Option<String>,
    /// Stream N seeded standard-normal samples instead of a data split.
    #[arg(long, value_parser = whole, allow_negative_numbers = true)]
    pub random: Option<usize>,
    /// Lower out_ready on pseudo-random cycles (seeded), to exercise back-pressure.
    #[arg(long = "stall-seed", value_parser = whole_u64, allow_negative_numbers = true)]
    pub stall_seed: Option<u64>,
    /// Stream only the first N samples of the split.
    #[arg(long, value_parser = whole, allow_negative_numbers = true)]
    pub samples: Option<usize>,
    /// Print one JSON object with the results on stdout.
    #[arg(long)]
    pub json: bool,
}

/// Options of `ch synth`.
#[derive(Debug, Args, Default, Clone)]
pub struct SynthArgs {
    /// A folder written by `ch emit`.
    pub dir: PathBuf,
    /// `xilinx` (synth_xilinx, 7-series LUT6; the default), `generic` (synth + abc -lut 6), `all` (both), or `ecp5` (synth_ecp5, then nextpnr-ecp5 place and route).
    #[arg(long)]
    pub target: Option<String>,
    /// The ECP5 part of `--target ecp5`: `85f` (LFE5U-85F, the default), `45f` or `25f`.
    #[arg(long)]
    pub part: Option<String>,
    /// nextpnr's seed for `--target ecp5` (default 1: the same placement every run).
    #[arg(long, value_parser = whole_u64, allow_negative_numbers = true)]
    pub seed: Option<u64>,
    /// Minutes each tool of `--target ecp5` (Yosys, then nextpnr) may run before it is stopped
    /// (default 20).
    #[arg(long = "timeout-minutes", value_parser = whole_u64, allow_negative_numbers = true)]
    pub timeout_minutes: Option<u64>,
    /// Print one JSON object with the results on stdout.
    #[arg(long)]
    pub json: bool,
}

// Numeric flags take any integer token, a negative one included (clap would otherwise read `-5`
// as an unknown flag), and refuse what is out of range with the flag and value named.

/// A count that must be at least 1 (`--batch-size`, `--max-epochs`, ...).
fn positive(s: &str) -> Result<usize, String> {
    match s.trim().parse::<i128>() {
        Ok(n) if n >= 1 => usize::try_from(n).map_err(|_| format!("expected a positive integer of at most {}", usize::MAX)),
        _ => Err("expected a positive integer".to_string()),
    }
}

/// A whole number, 0 included (`--threads`, `--n-jobs`, sizes of `--random`, ...).
fn whole(s: &str) -> Result<usize, String> {
    match s.trim().parse::<i128>() {
        Ok(n) if n >= 0 => usize::try_from(n).map_err(|_| format!("expected an integer from 0 to {}", usize::MAX)),
        _ => Err("expected an integer >= 0".to_string()),
    }
}

/// Trials at once: at least 1, or -1 for all cores (Optuna's `n_jobs`).
fn jobs(s: &str) -> Result<i64, String> {
    match s.trim().parse::<i64>() {
        Ok(n) if n == -1 || n >= 1 => Ok(n),
        _ => Err("expected -1 (all cores) or an integer >= 1".to_string()),
    }
}

/// A seed: a whole number that fits 64 bits.
fn whole_u64(s: &str) -> Result<u64, String> {
    match s.trim().parse::<i128>() {
        Ok(n) if n >= 0 => u64::try_from(n).map_err(|_| format!("expected an integer from 0 to {}", u64::MAX)),
        _ => Err("expected an integer >= 0".to_string()),
    }
}
