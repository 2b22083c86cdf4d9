//! Throughput benchmark of mase-rs's runtime on the zoo's models.
//!
//! `mase-bench` times training steps (forward, cross-entropy, backward, Adam) and eval batches on
//! seeded synthetic data shaped like the real sets, and prints one JSON line per case with the
//! keys of `bench/pytorch_ref.py`, which runs the same models and protocol in PyTorch eager.
//! `bench/run.sh` runs both and writes the comparison table to `bench/results.md`.

pub mod cases;
pub mod data;
pub mod error;
pub mod example;
pub mod protocol;
pub mod report;

pub use cases::{cases, BenchConfig, Case, Phase, MODELS};
pub use data::{cifar_synthetic, jsc_synthetic, mnist_synthetic, Dataset};
pub use error::{BenchError, Result};
pub use protocol::{run_case, torch_default_adam, RunOptions};
pub use report::{median, Measurement};
