//! The error type of the benchmark.

use mase_runtime::RuntimeError;
use mase_zoo::ZooError;
use thiserror::Error;

/// Errors of a benchmark run; each names the model (and batch) at fault.
#[derive(Debug, Error)]
pub enum BenchError {
    /// The model is not one the benchmark knows how to feed.
    #[error("model `{name}` is not benchmarked; known: {known}")]
    UnknownModel { name: String, known: String },
    /// The zoo could not build the model for the benchmark's data shapes. (The sources are
    /// boxed because they are large and this enum travels in every `Result`.)
    #[error("building `{model}`: {source}")]
    Build { model: String, source: Box<ZooError> },
    /// The runtime refused the graph, the parameters or a batch.
    #[error("running `{model}` at batch {batch}: {source}")]
    Run { model: String, batch: usize, source: Box<RuntimeError> },
    /// The synthetic data set is smaller than one batch.
    #[error("model `{model}`: {rows} rows of data do not fill one batch of {batch}")]
    TooFewRows { model: String, rows: usize, batch: usize },
    /// A step produced a loss that is not a finite number, so its timing means nothing.
    #[error("model `{model}` at batch {batch}: step {step} gave the non-finite loss {loss}")]
    NonFiniteLoss { model: String, batch: usize, step: usize, loss: f32 },
}

/// `Result` with [`BenchError`].
pub type Result<T, E = BenchError> = std::result::Result<T, E>;
