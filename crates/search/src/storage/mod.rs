//! Study storage: every trial is written as it is claimed and again as it finishes, so a killed
//! search loses at most the trials in flight. One trait, three stores: [`SqliteStorage`] (the
//! embedded default), [`PostgresStorage`] (one study shared by workers on many machines) and
//! [`MemoryStorage`] (tests and throw-away searches). [`open_storage`] picks one from a URL.
//!
//! The central operation is [`Storage::claim`]: within one transaction that excludes every other
//! claimer of the study, it marks stale trials failed, reads the study's trials, lets the sampler
//! propose a point from them, and inserts that point as a `RUNNING` trial with the next free
//! number. Two workers can therefore never get the same trial number, a brute-force sampler never
//! hands out the same point twice, and every sampler sees the whole study's history.
//!
//! Liveness: a worker refreshes the heartbeat of its running trials ([`Storage::heartbeat`]); a
//! claim marks a `RUNNING` trial whose heartbeat is older than `stale_after` as `FAIL` with an
//! error starting `stale:`, and the study loop re-queues its point. [`Storage::finish`] only ends
//! a `RUNNING` trial, so the late result of a worker declared stale cannot duplicate the re-run.

mod memory;
mod pg_env;
mod pg_tls;
mod postgres;
mod rows;
mod sqlite;
mod url;

pub use memory::MemoryStorage;
pub use pg_env::PgEnv;
pub use pg_tls::SslMode;
pub use postgres::{PostgresStorage, SCHEMA_VERSION as POSTGRES_SCHEMA_VERSION};
pub use sqlite::{SqliteStorage, SCHEMA_VERSION as SQLITE_SCHEMA_VERSION};
pub use url::{open_storage, ConnectOptions, StorageUrl};

use crate::trial::{Metrics, TrialOutcome, TrialRecord};
use crate::Result;
use serde_json::{Map, Value};
use std::time::Duration;

/// How to open a study.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Start over: an existing study of the same name is deleted.
    Fresh,
    /// Continue the stored study; it must exist ([`nothing_to_resume`] otherwise) and describe
    /// the same search. Its running trials are taken to belong to a killed process: see
    /// [`Storage::fail_running`].
    Resume,
    /// Join the study as one of several workers (created by whichever comes first); it must
    /// describe the same search. Running trials of other workers are left alone: heartbeats
    /// decide when one is stale.
    Join,
}

/// The error of [`OpenMode::Resume`] when the store holds no study of that name: resuming
/// would otherwise start a new study without a word.
pub fn nothing_to_resume(location: &str, name: &str) -> crate::SearchError {
    crate::SearchError::Storage {
        location: location.to_string(),
        reason: format!("holds no study `{name}` to resume (start it without --resume, or with mode \"fresh\")"),
    }
}

/// A point proposed inside a claim.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    pub point: Vec<f64>,
    pub config: Value,
    pub system_attrs: Map<String, Value>,
}

/// The proposal callback of [`Storage::claim`]: the study's trials and the number the new trial
/// will get; `None` claims nothing.
pub type Propose<'a> = dyn FnMut(&[TrialRecord], u64) -> Result<Option<Claim>> + 'a;

/// Where studies live. Each operation is one transaction.
pub trait Storage: Send {
    /// A human description of the store (a file path, a URL without password).
    fn location(&self) -> String;

    /// Opens (or creates) the study `name`. `spec` describes the search (space signature,
    /// objectives); resuming or joining a study whose stored spec differs is an error naming the
    /// difference.
    fn open_study(&mut self, name: &str, spec: &Value, mode: OpenMode) -> Result<()>;

    /// The stored spec of a study, if it exists.
    fn study_spec(&mut self, name: &str) -> Result<Option<Value>>;

    /// Names of every stored study, oldest first.
    fn study_names(&mut self) -> Result<Vec<String>>;

    /// Every trial of the study, in number order.
    fn trials(&mut self, study: &str) -> Result<Vec<TrialRecord>>;

    /// Atomically, excluding every other claimer of the study: marks `RUNNING` trials whose
    /// heartbeat is older than `stale_after` as failed (error `stale: ...`), reads the trials,
    /// calls `propose`, and stores its claim as a running trial of this worker with a fresh
    /// heartbeat.
    fn claim(&mut self, study: &str, stale_after: Option<Duration>, propose: &mut Propose<'_>) -> Result<Option<TrialRecord>>;

    /// Records how a trial ended. Only a `RUNNING` trial can end: for one that another worker
    /// declared stale meanwhile this is [`crate::SearchError::NotRunning`] and nothing changes.
    fn finish(&mut self, study: &str, number: u64, outcome: &TrialOutcome) -> Result<()>;

    /// Tells the store that this worker is still running these trials.
    fn heartbeat(&mut self, study: &str, numbers: &[u64]) -> Result<()>;

    /// Marks every running trial failed with `reason` (the trials of a killed process, found on
    /// resume), freeing their points; returns how many there were.
    fn fail_running(&mut self, study: &str, reason: &str) -> Result<usize>;

    /// Creates the study `name` holding `trials` exactly as given (numbers, states, metrics,
    /// times, workers): `ch study copy`. A study of that name must not exist yet.
    fn import_study(&mut self, name: &str, spec: &Value, trials: &[TrialRecord]) -> Result<()>;

    /// Deletes the study `name` with all its trials (`ch study delete`, Optuna's
    /// `delete-study`) and returns how many trials it had. Workers still running it get a
    /// "no study" error at their next claim or result.
    fn delete_study(&mut self, name: &str) -> Result<usize>;
}

/// The name a worker records on the trials it claims: `host:pid`.
pub fn worker_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()))
        .unwrap_or_else(|| "localhost".into());
    format!("{host}:{}", std::process::id())
}

/// The error recorded on a trial declared stale.
pub(crate) fn stale_error(after: Duration) -> String {
    format!("{} no heartbeat from its worker for {} s; its point is re-queued", crate::trial::STALE_PREFIX, after.as_secs_f64())
}

/// The error of a study that is not in the store.
pub(crate) fn no_study(name: &str, location: &str) -> crate::SearchError {
    crate::SearchError::Study { study: name.into(), reason: format!("not found in {location}") }
}

/// The error of importing over an existing study.
pub(crate) fn study_exists(name: &str, location: &str) -> crate::SearchError {
    crate::SearchError::Study {
        study: name.into(),
        reason: format!("already exists in {location}; a copy never overwrites a study (delete it there or copy another)"),
    }
}

/// Compares a stored study spec with the configured one.
pub(crate) fn check_spec(study: &str, stored: &Value, spec: &Value, mode: OpenMode) -> Result<()> {
    let hint = match mode {
        OpenMode::Join => "name another study (--study NAME)",
        _ => "start it afresh without --resume or name another study",
    };
    for key in ["space", "directions", "objectives"] {
        if stored.get(key) != spec.get(key) {
            return Err(crate::SearchError::Study {
                study: study.to_string(),
                reason: format!(
                    "the stored study has another {key} ({}) than this config ({}); {hint}",
                    short(stored.get(key)),
                    short(spec.get(key))
                ),
            });
        }
    }
    Ok(())
}

fn short(v: Option<&Value>) -> String {
    let s = v.map_or("none".to_string(), |v| v.to_string());
    if s.len() > 80 {
        format!("{}...", &s[..s.char_indices().take_while(|(i, _)| *i < 77).last().map_or(0, |(i, c)| i + c.len_utf8())])
    } else {
        s
    }
}

/// Metrics as JSON (NaN and infinities become `null`).
pub(crate) fn metrics_to_json(m: &Metrics) -> Value {
    Value::Object(m.iter().map(|(k, v)| (k.clone(), Value::from(*v))).collect())
}

/// Metrics from JSON (`null` becomes NaN).
pub(crate) fn metrics_from_json(v: &Value) -> Metrics {
    v.as_object().map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_f64().unwrap_or(f64::NAN))).collect()).unwrap_or_default()
}

/// Numbers as JSON (NaN becomes `null`).
pub(crate) fn floats_to_json(v: &[f64]) -> Value {
    Value::Array(v.iter().map(|x| Value::from(*x)).collect())
}

/// Numbers from JSON (`null` becomes NaN).
pub(crate) fn floats_from_json(v: &Value) -> Vec<f64> {
    v.as_array().map(|a| a.iter().map(|x| x.as_f64().unwrap_or(f64::NAN)).collect()).unwrap_or_default()
}
