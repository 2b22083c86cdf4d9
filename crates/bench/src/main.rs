//! `mase-bench`: training and eval throughput of mase-rs on the zoo's models.

use clap::Parser;
use mase_bench::{cases, run_case, BenchConfig, Phase, RunOptions, MODELS};
use mase_runtime::{ConvAlgo, Fusion};
use std::process::ExitCode;

/// Times training steps and eval batches of the zoo's models on synthetic data.
#[derive(Parser, Debug)]
#[command(name = "mase-bench", version)]
struct Args {
    /// Worker threads of the executor.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Comma-separated models (jsc-tiny, jsc-toy, jsc-toy-q, jsc-three-layer, tfc, vgg7, resnet18,
    /// vit-tiny, bert-tiny-mx); all by default.
    #[arg(long, value_delimiter = ',')]
    models: Option<Vec<String>>,
    /// Print one JSON line per case instead of a table.
    #[arg(long)]
    json: bool,
    /// Timed training steps (and eval batches) of the tabular and MNIST models.
    #[arg(long, default_value_t = BenchConfig::default().steps)]
    steps: usize,
    /// Timed training steps (and eval batches) of the CIFAR models (vgg7, resnet18, vit-tiny).
    #[arg(long, default_value_t = BenchConfig::default().vgg_steps)]
    vgg_steps: usize,
    /// Timed training steps (and eval batches) of bert-tiny-mx.
    #[arg(long, default_value_t = BenchConfig::default().bert_steps)]
    bert_steps: usize,
    /// Rows of synthetic jsc data (MNIST-shaped data gets an eighth).
    #[arg(long, default_value_t = BenchConfig::default().rows)]
    rows: usize,
    /// Seed of the data and the initial parameters.
    #[arg(long, default_value_t = BenchConfig::default().seed)]
    seed: u64,
    /// Run only the training or only the eval half (for profiling one of them).
    #[arg(long, value_enum, default_value_t = Phase::Both)]
    phase: Phase,
    /// Convolution algorithm: fast (Winograd where it measured faster), exact (direct im2col +
    /// GEMM everywhere) or winograd (wherever it applies).
    #[arg(long, value_enum, default_value_t = Conv::Fast)]
    conv: Conv,
    /// Fused epilogues (a convolution's or linear layer's batch norm and ReLU in its output
    /// pass, and ReLU backward inside batch norm): on, or off for comparison.
    #[arg(long, value_enum, default_value_t = OnOff::On)]
    fusion: OnOff,
}

/// The `--fusion` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum OnOff {
    On,
    Off,
}

/// The `--conv` values.
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
enum Conv {
    Fast,
    Exact,
    Winograd,
}

fn main() -> ExitCode {
    let a = Args::parse();
    let models = a.models.clone().unwrap_or_else(|| MODELS.iter().map(|m| m.to_string()).collect());
    let cfg = BenchConfig { rows: a.rows, steps: a.steps, vgg_steps: a.vgg_steps, bert_steps: a.bert_steps, seed: a.seed, phase: a.phase };
    let run = || -> mase_bench::Result<()> {
        for case in cases(&models, &cfg)? {
            let conv = match a.conv {
                Conv::Fast => ConvAlgo::Fast,
                Conv::Exact => ConvAlgo::Exact,
                Conv::Winograd => ConvAlgo::Winograd,
            };
            let fusion = match a.fusion {
                OnOff::On => Fusion::On,
                OnOff::Off => Fusion::Off,
            };
            let m = run_case(&case, RunOptions { threads: a.threads.max(1), seed: cfg.seed, conv, fusion })?;
            if a.json {
                println!("{}", m.to_json());
            } else {
                println!("{}", m.to_line());
            }
        }
        Ok(())
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mase-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
