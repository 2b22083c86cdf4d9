//! The error type of the passes. Every variant names the pass and, where one is at fault, the
//! node, argument, key or file, so that the CLI can print one line that says what to fix.

use mase_ir::IrError;
use mase_runtime::RuntimeError;
use std::path::PathBuf;
use thiserror::Error;

/// Errors of the pass registry and of every pass.
#[derive(Debug, Error)]
pub enum PassError {
    #[error("unknown pass `{name}`; known passes: {known}")]
    UnknownPass { name: String, known: String },
    /// The arguments of a pass do not fit its schema (unknown key, wrong type, bad value).
    #[error("pass `{pass}`: bad arguments: {reason}")]
    Args { pass: String, reason: String },
    #[error("pass `{pass}`: no node named `{node}`")]
    UnknownNode { pass: String, node: String },
    #[error("pass `{pass}`: {selector} matches no node")]
    NoMatch { pass: String, selector: String },
    /// A pass needs metadata that an earlier pass writes.
    #[error("pass `{pass}`: node `{node}` has no {what}; run `{needed}` first")]
    MissingMeta { pass: String, node: String, what: String, needed: String },
    /// A pass needs data (samples) and the context has none.
    #[error("pass `{pass}` needs input samples: {reason}")]
    NoData { pass: String, reason: String },
    /// A quantization config is wrong for a node.
    #[error("pass `{pass}`: node `{node}`: {reason}")]
    Node { pass: String, node: String, reason: String },
    /// A quantization config entry (selector key) is wrong.
    #[error("pass `{pass}`: `{key}`: {reason}")]
    Config { pass: String, key: String, reason: String },
    #[error("{}: {reason}", path.display())]
    File { path: PathBuf, reason: String },
    #[error(transparent)]
    Ir(#[from] IrError),
    /// Boxed: the runtime's errors carry shapes and names, and a pass error travels by value.
    #[error(transparent)]
    Runtime(Box<RuntimeError>),
}

impl From<RuntimeError> for PassError {
    fn from(e: RuntimeError) -> PassError {
        PassError::Runtime(Box::new(e))
    }
}

/// `Result` with [`PassError`].
pub type Result<T, E = PassError> = std::result::Result<T, E>;

impl PassError {
    /// A bad-arguments error for `pass`.
    pub(crate) fn args(pass: &str, reason: impl Into<String>) -> PassError {
        PassError::Args { pass: pass.to_string(), reason: reason.into() }
    }

    /// A file error with the OS reason.
    pub(crate) fn file(path: impl Into<PathBuf>, reason: impl ToString) -> PassError {
        PassError::File { path: path.into(), reason: reason.to_string() }
    }
}
