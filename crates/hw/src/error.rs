//! The error type of the hardware crate. Every variant names the node, file or tool at fault.

use thiserror::Error;

/// Errors of lowering, emission and simulation.
#[derive(Debug, Error)]
pub enum HwError {
    /// Nodes that cannot run in integer arithmetic, all of them, before anything is emitted.
    #[error("the graph is not integer end to end: {nodes}")]
    NotInteger { nodes: String },
    #[error("graph: {reason}")]
    Structure { reason: String },
    #[error("node `{node}`: its accumulator needs {bits} bits, more than 64 (narrower formats or fewer inputs per output)")]
    AccumulatorTooWide { node: String, bits: u32 },
    #[error("node `{node}`: reuse factor {reuse} does not divide its {inputs} inputs per output")]
    ReuseFactor { node: String, reuse: usize, inputs: usize },
    #[error("node `{node}`: hardware.reuse_factor must be a positive integer, got {value}")]
    ReuseMetadata { node: String, value: String },
    #[error("parameter `{name}`: {reason}")]
    Param { name: String, reason: String },
    #[error("{tool} is not installed (Debian: apt-get install {tool})")]
    ToolMissing { tool: String },
    #[error("{what} failed: {detail}")]
    Tool { what: String, detail: String },
    #[error("{path}: {reason}")]
    File { path: String, reason: String },
    #[error(transparent)]
    Runtime(#[from] mase_runtime::RuntimeError),
}

pub type Result<T> = std::result::Result<T, HwError>;

/// A file error naming the path.
pub(crate) fn file_err(path: &std::path::Path, e: impl std::fmt::Display) -> HwError {
    HwError::File { path: path.display().to_string(), reason: e.to_string() }
}
