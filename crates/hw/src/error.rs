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
    /// A clock the design cannot be pipelined for.
    #[error("{reason}")]
    Clock { reason: String },
    /// Products a layer cannot have (shift-adds in a folded layer, say).
    #[error("node `{node}`: {reason}")]
    Products { node: String, reason: String },
    /// A design that cannot be folded to fit a part (`ch emit --part`), with what it needs.
    #[error("the design does not fit the {part}: {detail}")]
    DoesNotFit { part: String, detail: String },
    #[error("parameter `{name}`: {reason}")]
    Param { name: String, reason: String },
    /// A tool that is not installed, with what installs it.
    #[error("{tool} is not installed ({install})")]
    ToolMissing { tool: String, install: String },
    #[error("{what} failed: {detail}")]
    Tool { what: String, detail: String },
    /// A tool ran but its output could not be parsed; the parser's error stays the source.
    #[error("{what} failed: {detail}: {source}")]
    ToolOutput {
        what: String,
        detail: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A file's content is not what the step expects.
    #[error("{path}: {reason}")]
    File { path: String, reason: String },
    /// A file could not be read, written or parsed (`what`, when not empty, says what it should
    /// have been); the lower error (the operating system's, JSON's) stays the source.
    #[error("{path}: {}{source}", prefix(.what))]
    FileCause {
        path: String,
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error(transparent)]
    Runtime(#[from] mase_runtime::RuntimeError),
}

pub type Result<T> = std::result::Result<T, HwError>;

/// A file error naming the path, keeping the lower error as the source.
pub(crate) fn file_err(path: &std::path::Path, e: impl std::error::Error + Send + Sync + 'static) -> HwError {
    file_cause(path, "", e)
}

/// A file error naming the path and what the file should have been, keeping the lower error as
/// the source.
pub(crate) fn file_cause(path: &std::path::Path, what: &str, e: impl std::error::Error + Send + Sync + 'static) -> HwError {
    HwError::FileCause { path: path.display().to_string(), what: what.to_string(), source: Box::new(e) }
}

/// A file error with a plain reason (no lower error).
pub(crate) fn file_msg(path: &std::path::Path, reason: impl Into<String>) -> HwError {
    HwError::File { path: path.display().to_string(), reason: reason.into() }
}

/// `what: ` for a non-empty `what`.
fn prefix(what: &str) -> String {
    if what.is_empty() {
        String::new()
    } else {
        format!("{what}: ")
    }
}
