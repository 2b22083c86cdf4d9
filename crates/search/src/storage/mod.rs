//! Study storage: every trial is written as it is claimed and again as it finishes, so a killed
//! search loses at most the trials in flight. One trait, two stores here ([`SqliteStorage`], the
//! embedded default, and [`MemoryStorage`] for tests); a PostgreSQL store implements the same
//! trait, since every operation is one transaction over plain rows.
//!
//! The central operation is [`Storage::claim`]: within one transaction it reads the study's
//! trials, lets the sampler propose a point from them, and inserts that point as a `RUNNING`
//! trial with the next free number. Two workers can therefore never get the same trial number,
//! and a brute-force sampler never hands out the same point twice.

mod memory;
mod sqlite;

pub use memory::MemoryStorage;
pub use sqlite::SqliteStorage;

use crate::trial::{Metrics, TrialOutcome, TrialRecord};
use crate::Result;
use serde_json::{Map, Value};

/// How to open a study.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Start over: an existing study of the same name is deleted.
    Fresh,
    /// Continue the stored study (created if there is none); it must describe the same search.
    Resume,
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

/// Where studies live.
pub trait Storage: Send {
    /// A human description of the store (a file path, a URL without password).
    fn location(&self) -> String;

    /// Opens (or creates) the study `name`. `spec` describes the search (space signature,
    /// objectives); resuming a study whose stored spec differs is an error naming the difference.
    fn open_study(&mut self, name: &str, spec: &Value, mode: OpenMode) -> Result<()>;

    /// The stored spec of a study, if it exists.
    fn study_spec(&mut self, name: &str) -> Result<Option<Value>>;

    /// Names of every stored study.
    fn study_names(&mut self) -> Result<Vec<String>>;

    /// Every trial of the study, in number order.
    fn trials(&mut self, study: &str) -> Result<Vec<TrialRecord>>;

    /// Atomically: reads the trials, calls `propose`, and stores its claim as a running trial.
    fn claim(&mut self, study: &str, propose: &mut Propose<'_>) -> Result<Option<TrialRecord>>;

    /// Records how a trial ended.
    fn finish(&mut self, study: &str, number: u64, outcome: &TrialOutcome) -> Result<()>;

    /// Marks every running trial failed with `reason` (the trials of a killed process, found on
    /// resume), freeing their points; returns how many there were.
    fn fail_running(&mut self, study: &str, reason: &str) -> Result<usize>;
}

/// Compares a stored study spec with the configured one.
pub(crate) fn check_spec(study: &str, stored: &Value, spec: &Value) -> Result<()> {
    for key in ["space", "directions", "objectives"] {
        if stored.get(key) != spec.get(key) {
            return Err(crate::SearchError::Study {
                study: study.to_string(),
                reason: format!(
                    "the stored study has another {key} ({}) than this config ({}); start it afresh without --resume or name another study",
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
