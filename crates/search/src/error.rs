//! The error type of mase-search. Each variant names what was wrong (a config key, a trial, a
//! runner, a file) so the CLI can print one line that points at the cause.

use std::path::Path;

/// Everything that can go wrong while configuring or running a search.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// A key of the `[search]` table is missing, has the wrong type or an unusable value.
    #[error("search config: `{key}`: {reason}")]
    Config { key: String, reason: String },
    /// A search-space name that no space is registered under.
    #[error("search config: unknown search space `{name}`; known spaces: {known}")]
    UnknownSpace { name: String, known: String },
    /// A sampler name that no sampler is registered under.
    #[error("search config: unknown sampler `{name}`; known samplers: {known}")]
    UnknownSampler { name: String, known: String },
    /// A runner name that no runner of that kind is registered under.
    #[error("search config: unknown {kind} runner `{name}`; known: {known}")]
    UnknownRunner { kind: &'static str, name: String, known: String },
    /// A metric in `[search.strategy.metrics]` that none of the configured runners reports.
    #[error("search config: metric `{metric}` is reported by no configured runner; the runners report: {available}")]
    MetricWithoutRunner { metric: String, available: String },
    /// The space cannot be built for this model (no quantizable node, empty choice list, ...).
    #[error("search space `{space}`: {reason}")]
    Space { space: String, reason: String },
    /// A pass failed while the space was built or a point was applied; the pass's error stays
    /// the source.
    #[error("search space `{space}`: {source}")]
    SpacePass {
        space: String,
        #[source]
        source: Box<mase_passes::PassError>,
    },
    /// A runner failed on a candidate model.
    #[error("runner `{runner}`: {reason}")]
    Runner { runner: String, reason: String },
    /// A trial failed; the search stops, as MASE's does.
    #[error("trial {trial}: {reason}")]
    Trial { trial: u64, reason: String },
    /// The study store could not be opened, read or written.
    #[error("study storage {location}: {reason}")]
    Storage { location: String, reason: String },
    /// The study store failed (`what`, when not empty, says at which step and ends in ": ");
    /// the database's or the file system's error stays the source.
    #[error("study storage {location}: {what}{source}")]
    StorageCause {
        location: String,
        what: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A stored study does not fit the configured search (another space or other objectives).
    #[error("study `{study}`: {reason}")]
    Study { study: String, reason: String },
    /// A worker tried to finish a trial that is no longer running: another worker declared it
    /// stale (no heartbeat for `stale_after`) and re-queued its point, so this result is dropped.
    #[error("study `{study}`: trial {trial} is {state}, not RUNNING (another worker declared it stale); its result is dropped")]
    NotRunning { study: String, trial: u64, state: String },
    /// An output file (report, CSV, plot) could not be written.
    #[error("cannot write {path}: {reason}")]
    Write { path: String, reason: String },
    /// A chart could not be drawn into its file; the plotting library's error stays the source.
    #[error("cannot write {path}: plotting failed: {source}")]
    Plot {
        path: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// An output file could not be written; the operating system's error stays the source.
    #[error("cannot write {path}: {source}")]
    WriteIo {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// A runner's lower step (lowering, emission or synthesis of the candidate) failed; its error
    /// stays the source.
    #[error("runner `{runner}`: {source}")]
    RunnerCause {
        runner: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error(transparent)]
    Runtime(#[from] mase_runtime::RuntimeError),
    #[error(transparent)]
    Ir(#[from] mase_ir::IrError),
}

/// The result type of mase-search.
pub type Result<T, E = SearchError> = std::result::Result<T, E>;

impl SearchError {
    /// A config error at `key`.
    pub fn config(key: impl Into<String>, reason: impl Into<String>) -> SearchError {
        SearchError::Config { key: key.into(), reason: reason.into() }
    }

    /// A write error for `path` with its cause.
    pub fn write(path: &Path, source: std::io::Error) -> SearchError {
        SearchError::WriteIo { path: path.display().to_string(), source }
    }
}
