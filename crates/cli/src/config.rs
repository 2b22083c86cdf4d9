//! Run settings: defaults < TOML config < command-line flags (doc/mase-semantics.md#config-merge).
//!
//! Differences from MASE, on purpose:
//! - an explicit flag always wins, even when it equals the default;
//! - a `seed` in the TOML seeds the run (MASE seeds before reading the TOML);
//! - unknown top-level keys are an error naming the key (MASE ignores them).

use crate::args::RunArgs;
use crate::output::Human;
use anyhow::{bail, Context, Result};
use mase_runtime::Accelerator;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// Top-level keys of a MASE TOML config. `passes` and `search` are read by the actions that use them.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    pub model: Option<String>,
    pub dataset: Option<String>,
    pub task: Option<String>,
    pub load_name: Option<PathBuf>,
    pub load_type: Option<String>,
    pub batch_size: Option<usize>,
    pub to_debug: Option<bool>,
    pub log_level: Option<String>,
    pub report_to: Option<String>,
    pub seed: Option<u64>,
    pub quant_config: Option<String>,
    pub training_optimizer: Option<String>,
    pub trainer_precision: Option<String>,
    pub learning_rate: Option<f64>,
    pub weight_decay: Option<f64>,
    pub max_epochs: Option<usize>,
    pub max_steps: Option<i64>,
    pub augment: Option<bool>,
    pub drop_nonfinite: Option<bool>,
    pub accumulate_grad_batches: Option<usize>,
    pub log_every_n_steps: Option<usize>,
    pub num_workers: Option<usize>,
    pub num_devices: Option<usize>,
    pub num_nodes: Option<usize>,
    pub accelerator: Option<String>,
    pub strategy: Option<String>,
    pub is_to_auto_requeue: Option<bool>,
    pub github_ci: Option<bool>,
    pub disable_dataset_cache: Option<bool>,
    pub target: Option<String>,
    pub num_targets: Option<usize>,
    pub is_pretrained: Option<bool>,
    pub max_token_len: Option<usize>,
    pub project_dir: Option<PathBuf>,
    pub project: Option<String>,
    pub t_max: Option<usize>,
    pub eta_min: Option<f64>,
    // mase-rs additions.
    pub data_dir: Option<PathBuf>,
    pub model_file: Option<PathBuf>,
    pub threads: Option<usize>,
    pub conv_algo: Option<String>,
    // Tables read by `transform` and `search`.
    pub passes: Option<toml::Table>,
    pub search: Option<toml::Table>,
    pub cf_args: Option<toml::Table>,
}

/// The most kernel threads a run may ask for: more cannot help the small plans of these
/// models, and each thread is a real OS thread.
const MAX_THREADS: usize = 256;

/// Reads a TOML config. MASE writes `"NA"` for None: such top-level values count as absent.
pub fn read_config(path: &Path) -> Result<ConfigFile> {
    if path.extension().and_then(|e| e.to_str()) != Some("toml") {
        bail!("config {}: expected a .toml file", path.display());
    }
    let text = std::fs::read_to_string(path).with_context(|| format!("config {}: cannot read", path.display()))?;
    let mut table: toml::Table = text.parse().with_context(|| format!("config {}", path.display()))?;
    table.retain(|_, v| v.as_str() != Some("NA"));
    let cfg: ConfigFile = toml::Value::Table(table).try_into().with_context(|| format!("config {}", path.display()))?;
    Ok(cfg)
}

/// Collapses a multi-line parser message into one line.
pub fn one_line(s: &str) -> String {
    s.split('\n')
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('|') && !l.chars().all(|c| c == '^' || c == ' '))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The optimizer named by `--optimizer` / `training_optimizer`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizerName {
    Adam,
    AdamW,
    Sgd,
}

/// How the executor computes convolutions (`--conv-algo`, TOML `conv_algo`; the runtime's
/// `ConvAlgo`, doc/runtime.md "Convolution algorithms").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ConvAlgoName {
    /// Winograd for the stride-1 3x3 shapes where it measured faster, direct sums elsewhere.
    #[default]
    Fast,
    /// Direct (im2col + GEMM) sums for every convolution.
    Exact,
    /// Winograd for every stride-1 3x3 convolution it applies to.
    Winograd,
}

impl ConvAlgoName {
    /// The runtime's setting.
    pub fn algo(self) -> mase_runtime::ConvAlgo {
        match self {
            ConvAlgoName::Fast => mase_runtime::ConvAlgo::Fast,
            ConvAlgoName::Exact => mase_runtime::ConvAlgo::Exact,
            ConvAlgoName::Winograd => mase_runtime::ConvAlgo::Winograd,
        }
    }
}

/// The convolution algorithm named by `--conv-algo` or `conv_algo` (`fast` when neither).
fn conv_algo(value: Option<&str>) -> Result<ConvAlgoName> {
    match value {
        None | Some("fast") => Ok(ConvAlgoName::Fast),
        Some("exact") => Ok(ConvAlgoName::Exact),
        Some("winograd") => Ok(ConvAlgoName::Winograd),
        Some(other) => bail!("conv algo `{other}` (--conv-algo, TOML conv_algo) is not known: expected fast, exact or winograd"),
    }
}

/// Where `ch train` logs its scalars (`--report-to`, TOML `report_to`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReportTo {
    /// TensorBoard event files under `software/tensorboard/` (MASE's default logger).
    TensorBoard,
    /// No event files (mase-rs addition; `metrics.csv` and the curves are still written).
    None,
}

/// MASE's `report_to`: `tensorboard` (the default), `wandb` (needs a Weights & Biases account
/// and network, so mase-rs says so once and writes TensorBoard files instead), or `none`.
fn report_to(value: Option<String>, warnings: &mut Vec<String>) -> Result<ReportTo> {
    match value.as_deref() {
        None | Some("tensorboard") => Ok(ReportTo::TensorBoard),
        Some("none") => Ok(ReportTo::None),
        Some("wandb") => {
            warnings.push("`report_to = wandb`: mase-rs has no Weights & Biases client; it writes TensorBoard event files instead".into());
            Ok(ReportTo::TensorBoard)
        }
        Some(other) => bail!("report_to `{other}` is not known: expected tensorboard, wandb or none"),
    }
}

/// Effective settings of a run after the merge.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Settings {
    pub model: Option<String>,
    pub model_file: Option<PathBuf>,
    pub dataset: Option<String>,
    pub task: String,
    pub load_name: Option<PathBuf>,
    pub load_type: String,
    pub batch_size: usize,
    pub learning_rate: f64,
    pub optimizer: OptimizerName,
    pub weight_decay: f64,
    pub max_epochs: usize,
    pub max_steps: Option<u64>,
    /// Batches whose gradients are summed (each loss divided by this) before one optimizer
    /// step, as Lightning does; the last batches of an epoch step whatever their number.
    pub accumulate_grad_batches: usize,
    /// Random crop and flip of every training batch (`--augment`, TOML `augment`).
    pub augment: bool,
    /// Leave out data rows with a NaN or infinite feature instead of refusing the data set
    /// (`--drop-nonfinite`, TOML `drop_nonfinite`).
    pub drop_nonfinite: bool,
    pub seed: u64,
    pub eta_min: f64,
    pub project: Option<String>,
    pub project_dir: PathBuf,
    pub data_dir: Option<PathBuf>,
    pub threads: usize,
    /// Where `ch train`, `ch test` and `ch search` run their model: the executor on the CPU
    /// (`auto`, `cpu`) or PyTorch on a device (`gpu`, `cuda`, `mps`, `torch-cpu`).
    pub accelerator: Accelerator,
    /// How the executors of `train`, `test` and `run` compute convolutions.
    pub conv_algo: ConvAlgoName,
    pub log_every_n_steps: usize,
    pub debug: bool,
    pub report_to: ReportTo,
}

/// What the merge produced besides the settings: the config tables for other actions and warnings.
pub struct Merged {
    pub settings: Settings,
    pub config: ConfigFile,
    pub warnings: Vec<String>,
}

/// [`merge`], with its warnings printed: how every action that reads a config starts, so that
/// they all report the same warnings the same way.
pub fn merge_and_warn(args: &RunArgs, human: &Human) -> Result<Merged> {
    let merged = merge(args)?;
    for w in &merged.warnings {
        human.warn(w);
    }
    Ok(merged)
}

/// [`merge_and_warn`] for an action that runs no model on a device (`transform`, `analyze`,
/// `export`, `emit`, `run`): an `accelerator` other than the CPU is said not to apply to it.
pub fn merge_on_cpu(args: &RunArgs, human: &Human, action: &str) -> Result<Merged> {
    let merged = merge_and_warn(args, human)?;
    if let Some(device) = merged.settings.accelerator.torch_device() {
        human.warn(format!("`accelerator = {device}` applies to train, test and search; `{action}` runs on the CPU"));
    }
    Ok(merged)
}

pub fn merge(args: &RunArgs) -> Result<Merged> {
    let mut cfg = match &args.config {
        Some(p) => read_config(p)?,
        None => ConfigFile::default(),
    };
    let mut warnings = Vec::new();
    let warn_if = |w: &mut Vec<String>, key: &str, value: Option<String>, default_ok: &[&str]| {
        if let Some(v) = value {
            if !default_ok.contains(&v.as_str()) {
                w.push(format!("`{key} = {v}` only steers PyTorch in MASE; mase-rs runs on this CPU in f32 and ignores it"));
            }
        }
    };
    warn_if(&mut warnings, "strategy", args.strategy.clone().or(cfg.strategy.take()), &["auto"]);
    warn_if(&mut warnings, "trainer_precision", args.trainer_precision.clone().or(cfg.trainer_precision.take()), &["32", "32-true"]);
    warn_if(&mut warnings, "num_devices", args.num_devices.or(cfg.num_devices).map(|v| v.to_string()), &["1"]);
    warn_if(&mut warnings, "num_nodes", args.num_nodes.or(cfg.num_nodes).map(|v| v.to_string()), &["1"]);
    let report_to = report_to(args.report_to.clone().or(cfg.report_to.clone()), &mut warnings)?;
    // Keys that steer parts of MASE that mase-rs does not have: said once each, never dropped
    // silently. The full sentence is built from the key and the reason.
    const PYTORCH_ONLY: &str = "only applies to MASE's PyTorch models; ignored";
    for (key, set, why) in [
        ("is_to_auto_requeue", cfg.is_to_auto_requeue == Some(true), None),
        ("github_ci", cfg.github_ci == Some(true), None),
        ("is_pretrained", cfg.is_pretrained == Some(true), None),
        ("quant_config", cfg.quant_config.is_some(), None),
        ("num_workers", args.num_workers.or(cfg.num_workers).is_some(), Some("data sets are held in memory, there are no loader workers")),
        ("disable_dataset_cache", cfg.disable_dataset_cache.is_some(), Some("data sets are read straight from the shipped files")),
        ("target", cfg.target.is_some(), Some("it selects MASE's FPGA part for hardware emit, which mase-rs does not do")),
        ("num_targets", cfg.num_targets.is_some(), Some("it belongs to MASE's hardware emit")),
        ("max_token_len", cfg.max_token_len.is_some(), Some("it applies to MASE's language models only")),
        ("cf_args", cfg.cf_args.is_some(), Some("it holds keyword arguments for MASE's PyTorch model constructors")),
    ] {
        if set {
            warnings.push(match why {
                None => format!("`{key}` {PYTORCH_ONLY}"),
                Some(why) => format!("`{key}` is ignored: {why}"),
            });
        }
    }

    let optimizer = match args.training_optimizer.clone().or(cfg.training_optimizer.clone()).as_deref().unwrap_or("adam") {
        "adam" => OptimizerName::Adam,
        "adamw" => OptimizerName::AdamW,
        "sgd" => OptimizerName::Sgd,
        other => bail!("optimizer `{other}` is not known: expected adam, adamw or sgd"),
    };
    let task = args.task.clone().or(cfg.task.clone()).unwrap_or_else(|| "classification".into());
    if !["classification", "cls"].contains(&task.as_str()) {
        bail!("task `{task}` is not supported: mase-rs models are classifiers (classification or cls)");
    }
    let load_type = args.load_type.clone().or(cfg.load_type.clone()).unwrap_or_else(|| "mz".into());
    if !["mz", "pt", "pl", "hf"].contains(&load_type.as_str()) {
        bail!("load type `{load_type}` is not known: expected mz, pt, pl or hf");
    }
    let accumulate_grad_batches = args.accumulate_grad_batches.or(cfg.accumulate_grad_batches).unwrap_or(1);
    if accumulate_grad_batches == 0 {
        bail!("accumulate_grad_batches must be at least 1, got 0");
    }
    let batch_size = args.batch_size.or(cfg.batch_size).unwrap_or(128);
    if batch_size == 0 {
        bail!("batch size must be positive");
    }
    let learning_rate = args.learning_rate.or(cfg.learning_rate).unwrap_or(1e-5);
    if !(learning_rate.is_finite() && learning_rate > 0.0) {
        bail!("learning rate must be a positive number, got {learning_rate}");
    }
    let weight_decay = args.weight_decay.or(cfg.weight_decay).unwrap_or(0.0);
    if !(weight_decay.is_finite() && weight_decay >= 0.0) {
        bail!("weight decay must be a number >= 0, got {weight_decay}");
    }
    let accelerator = match (&args.accelerator, &cfg.accelerator) {
        (Some(flag), _) => flag.parse().map_err(|e| anyhow::anyhow!("--accelerator: {e}"))?,
        (None, Some(key)) => key.parse().map_err(|e| anyhow::anyhow!("config `accelerator`: {e}"))?,
        (None, None) => Accelerator::Cpu,
    };
    let threads = args.threads.or(cfg.threads).unwrap_or(0);
    if threads > MAX_THREADS {
        bail!("threads = {threads}: at most {MAX_THREADS} (0 uses every core)");
    }
    let conv_algo_given = args.conv_algo.as_deref().or(cfg.conv_algo.as_deref());
    let conv_algo = conv_algo(conv_algo_given)?;
    if let (Some(given), Some(device)) = (conv_algo_given, accelerator.torch_device()) {
        warnings.push(format!(
            "`conv_algo = {given}` steers mase-rs's CPU executor; with `accelerator = {device}` PyTorch picks its own convolutions"
        ));
    }
    let max_steps = args.max_steps.or(cfg.max_steps).filter(|&s| s > 0).map(|s| s as u64);
    let log_level = args.log_level.clone().or(cfg.log_level.clone()).unwrap_or_else(|| "info".into());
    if !["debug", "info", "warning", "error", "critical"].contains(&log_level.as_str()) {
        bail!("log level `{log_level}` is not known: expected debug, info, warning, error or critical");
    }
    let t_max = cfg.t_max;
    if let Some(t) = t_max {
        warnings.push(format!("`t_max = {t}` is ignored: the cosine schedule spans max_epochs, as in MASE"));
    }
    // With `--model-file`, a single positional names the data set (`ch test --model-file m.onnx jsc`).
    let (pos_model, pos_dataset) = match (&args.model_file, &args.model, &args.dataset) {
        (Some(_), Some(m), None) => (None, Some(m.clone())),
        _ => (args.model.clone(), args.dataset.clone()),
    };
    let model_file = args.model_file.clone().or(cfg.model_file.clone());
    if let Some(dir) = model_file.as_ref().filter(|p| p.is_dir()) {
        bail!("--model-file {}: is a folder; expected a model file (`*.toml`, or `*.onnx` beside its weights)", dir.display());
    }
    let settings = Settings {
        model: pos_model.or(cfg.model.clone()),
        model_file,
        dataset: pos_dataset.or(cfg.dataset.clone()).map(|d| d.to_lowercase()),
        task,
        load_name: args.load_name.clone().or(cfg.load_name.clone()),
        load_type,
        batch_size,
        learning_rate,
        optimizer,
        weight_decay,
        max_epochs: args.max_epochs.or(cfg.max_epochs).unwrap_or(20),
        max_steps,
        accumulate_grad_batches,
        augment: args.augment || cfg.augment == Some(true),
        drop_nonfinite: args.drop_nonfinite || cfg.drop_nonfinite == Some(true),
        seed: args.seed.or(cfg.seed).unwrap_or(0),
        eta_min: cfg.eta_min.unwrap_or(if optimizer == OptimizerName::Sgd { 0.0 } else { 1e-6 }),
        project: args.project.clone().or(cfg.project.clone()),
        project_dir: args.project_dir.clone().or(cfg.project_dir.clone()).unwrap_or_else(|| PathBuf::from("mase_output")),
        data_dir: args.data_dir.clone().or(cfg.data_dir.clone()),
        threads,
        accelerator,
        conv_algo,
        log_every_n_steps: args.log_every_n_steps.or(cfg.log_every_n_steps).unwrap_or(50).max(1),
        debug: args.to_debug || cfg.to_debug == Some(true),
        report_to,
    };
    Ok(Merged { settings, config: cfg, warnings })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("mase-cli-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn flags_beat_toml_beat_defaults() {
        let p = write("a.toml", "model = \"jsc-tiny\"\ndataset = \"JSC\"\nbatch_size = 256\nlearning_rate = 1e-2\nseed = 42\n");
        let args = RunArgs { config: Some(p), batch_size: Some(128), ..Default::default() };
        let m = merge(&args).unwrap().settings;
        assert_eq!(m.batch_size, 128, "an explicit flag wins even when it equals the default");
        assert_eq!(m.learning_rate, 1e-2);
        assert_eq!(m.seed, 42, "the TOML seed is used (MASE ignores it)");
        assert_eq!(m.dataset.as_deref(), Some("jsc"));
        assert_eq!(m.max_epochs, 20);
    }

    #[test]
    fn unknown_key_is_named() {
        let p = write("b.toml", "model = \"jsc-tiny\"\nbatch_sise = 3\n");
        // The error keeps TOML's as its source; `{:#}` prints the chain, as `ch` does on one line.
        let e = merge(&RunArgs { config: Some(p), ..Default::default() }).err().map(|e| one_line(&format!("{e:#}"))).unwrap_or_default();
        assert!(e.contains("batch_sise") && e.contains("b.toml"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }

    #[test]
    fn pytorch_only_keys_warn() {
        let p = write("c.toml", "strategy = \"ddp\"\nload_name = \"NA\"\n[passes.quantize]\nby = \"type\"\n");
        let m = merge(&RunArgs { config: Some(p), ..Default::default() }).unwrap();
        assert_eq!(m.warnings.len(), 1, "{:?}", m.warnings);
        assert!(m.settings.load_name.is_none());
        assert!(m.config.passes.is_some());
    }

    #[test]
    fn accelerator_from_flag_or_key() {
        // (flag, TOML value, the accelerator or the error line)
        let cases: [(Option<&str>, Option<&str>, Result<&str, &str>); 6] = [
            (None, None, Ok("cpu")),
            (None, Some("auto"), Ok("cpu")),
            (None, Some("gpu"), Ok("cuda")),
            (Some("torch-cpu"), Some("gpu"), Ok("torch-cpu")),
            (Some("tpu"), None, Err("--accelerator: `tpu` is not an accelerator: expected one of auto, cpu, gpu, cuda, mps, torch-cpu")),
            (
                None,
                Some("xpu"),
                Err("config `accelerator`: `xpu` is not an accelerator: expected one of auto, cpu, gpu, cuda, mps, torch-cpu"),
            ),
        ];
        for (i, (flag, key, want)) in cases.into_iter().enumerate() {
            let config = key.map(|v| write(&format!("accel{i}.toml"), &format!("accelerator = \"{v}\"\n")));
            let args = RunArgs { config, accelerator: flag.map(Into::into), ..Default::default() };
            let got = merge(&args).map(|m| m.settings.accelerator.to_string()).map_err(|e| e.to_string());
            assert_eq!(got.as_deref().map_err(String::as_str), want, "case {i}");
        }
    }

    #[test]
    fn conv_algo_with_a_torch_accelerator_is_said_to_do_nothing() {
        // (flag --conv-algo, --accelerator, the warnings)
        let cases: [(Option<&str>, Option<&str>, &[&str]); 3] = [
            (Some("winograd"), None, &[]),
            (None, Some("gpu"), &[]),
            (
                Some("exact"),
                Some("gpu"),
                &["`conv_algo = exact` steers mase-rs's CPU executor; with `accelerator = cuda` PyTorch picks its own convolutions"],
            ),
        ];
        for (i, (algo, accelerator, want)) in cases.into_iter().enumerate() {
            let args = RunArgs { conv_algo: algo.map(Into::into), accelerator: accelerator.map(Into::into), ..Default::default() };
            assert_eq!(merge(&args).unwrap().warnings, want, "case {i}");
        }
    }

    #[test]
    fn keys_for_parts_mase_rs_lacks_warn_one_each() {
        let text =
            "num_workers = 4\ndisable_dataset_cache = true\ntarget = \"xcu250\"\nnum_targets = 2\nmax_token_len = 512\n[cf_args]\nx = 1\n";
        let m = merge(&RunArgs { config: Some(write("d.toml", text)), ..Default::default() }).unwrap();
        let keys: Vec<&str> = m.warnings.iter().map(|w| w.split('`').nth(1).unwrap_or("")).collect();
        assert_eq!(keys, ["num_workers", "disable_dataset_cache", "target", "num_targets", "max_token_len", "cf_args"], "{:?}", m.warnings);
    }

    #[test]
    fn report_to_values() {
        // (flag, TOML value, logger or None for an error naming the value, warnings)
        type Case = (Option<&'static str>, Option<&'static str>, Option<ReportTo>, usize);
        let cases: [Case; 6] = [
            (None, None, Some(ReportTo::TensorBoard), 0),
            (Some("tensorboard"), None, Some(ReportTo::TensorBoard), 0),
            (None, Some("none"), Some(ReportTo::None), 0),
            (Some("none"), Some("tensorboard"), Some(ReportTo::None), 0),
            (Some("wandb"), None, Some(ReportTo::TensorBoard), 1),
            (None, Some("tensorbored"), None, 0),
        ];
        for (i, (flag, toml_value, want, n_warnings)) in cases.into_iter().enumerate() {
            let config = toml_value.map(|v| write(&format!("report{i}.toml"), &format!("report_to = \"{v}\"\n")));
            let args = RunArgs { config, report_to: flag.map(Into::into), ..Default::default() };
            match (merge(&args), want) {
                (Ok(m), Some(want)) => {
                    assert_eq!(m.settings.report_to, want, "case {i}");
                    assert_eq!(m.warnings.len(), n_warnings, "case {i}: {:?}", m.warnings);
                }
                (Err(e), None) => assert!(e.to_string().contains("`tensorbored` is not known"), "case {i}: {e}"),
                (got, _) => panic!("case {i}: {:?}", got.map(|m| m.settings.report_to)),
            }
        }
    }
}
