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
    /// The arguments of a pass do not fit its schema (a wrong type, a bad value).
    #[error("pass `{pass}`: bad arguments: {reason}")]
    Args { pass: String, reason: String },
    /// The arguments of a pass could not be decoded or encoded (`what`, when not empty, says
    /// which part); serde's error stays the source.
    #[error("pass `{pass}`: bad arguments: {}{source}", prefix(.what))]
    ArgsCause {
        pass: String,
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The arguments of a pass name a key its schema does not have; serde's error (which lists
    /// the known keys) stays the source.
    #[error("pass `{pass}`: bad arguments: {source}")]
    UnknownArg {
        pass: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("pass `{pass}`: no node named `{node}`")]
    UnknownNode { pass: String, node: String },
    #[error("pass `{pass}`: {selector} matches no node")]
    NoMatch { pass: String, selector: String },
    /// A pass needs metadata that an earlier pass writes.
    #[error("pass `{pass}`: node `{node}` has no {what}; run `{needed}` first")]
    MissingMeta { pass: String, node: String, what: String, needed: String },
    /// A pass needs data (samples) and the context has none.
    /// A pass that runs or rebuilds the model on batches of one tensor, given a graph with
    /// several inputs.
    #[error("pass `{pass}` runs the model on batches of one input tensor; the graph has {inputs} inputs")]
    SeveralInputs { pass: String, inputs: usize },
    #[error("pass `{pass}` needs input samples: {reason}")]
    NoData { pass: String, reason: String },
    /// A quantization config is wrong for a node.
    #[error("pass `{pass}`: node `{node}`: {reason}")]
    Node { pass: String, node: String, reason: String },
    /// A node's number format or shapes were rejected by the quantizer or the IR (`what`, when
    /// not empty, says which config or tensor); that error stays the source.
    #[error("pass `{pass}`: node `{node}`: {}{source}", prefix(.what))]
    NodeCause {
        pass: String,
        node: String,
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A quantization config entry (selector key) is wrong.
    #[error("pass `{pass}`: `{key}`: {reason}")]
    Config { pass: String, key: String, reason: String },
    /// A selector key is not a valid regular expression (the message keeps the regex crate's
    /// last line, which says what is wrong; the whole error stays the source).
    #[error("pass `{pass}`: `{key}`: bad regular expression: {}", last_line(.source))]
    Regex {
        pass: String,
        key: String,
        #[source]
        source: regex::Error,
    },
    #[error("{}: {reason}", path.display())]
    File { path: PathBuf, reason: String },
    /// A file could not be read, written or parsed (`what` says how it failed, TOML errors are
    /// cut to their first line); the lower error stays the source.
    #[error("{}: {}{}", path.display(), prefix(.what), first_line(.source))]
    FileCause {
        path: PathBuf,
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
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

    /// A file error with its cause (`what` says how it failed: `cannot read`, ...).
    pub(crate) fn file(path: impl Into<PathBuf>, what: &str, source: impl std::error::Error + Send + Sync + 'static) -> PassError {
        PassError::FileCause { path: path.into(), what: what.to_string(), source: Box::new(source) }
    }

    /// An error at `node` of `pass` caused by a lower error.
    pub(crate) fn node_cause(
        pass: &str,
        node: &str,
        what: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> PassError {
        PassError::NodeCause { pass: pass.to_string(), node: node.to_string(), what: what.into(), source: Box::new(source) }
    }
}

/// `what: ` for a non-empty `what`.
fn prefix(what: &str) -> String {
    if what.is_empty() {
        String::new()
    } else {
        format!("{what}: ")
    }
}

/// The last non-empty line of an error's text (the regex crate ends with `error: ...`).
fn last_line(e: &dyn std::fmt::Display) -> String {
    let s = e.to_string();
    s.lines().map(str::trim).rfind(|l| !l.is_empty()).unwrap_or(&s).to_string()
}

/// The first line of an error's text (TOML and regex errors quote the input over several lines).
fn first_line(e: &dyn std::fmt::Display) -> String {
    e.to_string().lines().next().unwrap_or_default().to_string()
}
