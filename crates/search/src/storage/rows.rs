//! Trials as rows of text columns, shared by the SQL stores: JSON is stored as text (not JSONB)
//! because configs keep their key order, and a finished trial never changes again, so a store
//! caches the leading finished trials of a study and reads only the rows after them.

use crate::storage::{floats_from_json, floats_to_json, metrics_from_json, metrics_to_json};
use crate::trial::{TrialRecord, TrialState};
use serde_json::Value;

/// The columns every SQL store reads, in this order.
pub(crate) const COLUMNS: &str =
    "number, state, point, config, vals, software_metrics, hardware_metrics, scaled_metrics, violation, system_attrs, error, start_ms, complete_ms, worker";

/// One trial row as stored.
pub(crate) struct RawTrial {
    pub number: i64,
    pub state: String,
    pub point: String,
    pub config: String,
    pub vals: Option<String>,
    pub software_metrics: String,
    pub hardware_metrics: String,
    pub scaled_metrics: String,
    pub violation: f64,
    pub system_attrs: String,
    pub error: Option<String>,
    pub start_ms: i64,
    pub complete_ms: Option<i64>,
    pub worker: Option<String>,
}

impl RawTrial {
    /// The row of a record, for inserting.
    pub fn encode(t: &TrialRecord) -> RawTrial {
        RawTrial {
            number: t.number as i64,
            state: t.state.as_str().to_string(),
            point: floats_to_json(&t.point).to_string(),
            config: t.config.to_string(),
            vals: t.values.as_ref().map(|v| floats_to_json(v).to_string()),
            software_metrics: metrics_to_json(&t.software_metrics).to_string(),
            hardware_metrics: metrics_to_json(&t.hardware_metrics).to_string(),
            scaled_metrics: metrics_to_json(&t.scaled_metrics).to_string(),
            violation: t.violation,
            system_attrs: Value::Object(t.system_attrs.clone()).to_string(),
            error: t.error.clone(),
            start_ms: t.start_ms,
            complete_ms: t.complete_ms,
            worker: t.worker.clone(),
        }
    }

    /// The record of a row; the error names the trial and the column.
    pub fn decode(self) -> Result<TrialRecord, String> {
        let n = self.number;
        let json =
            |s: &str, what: &str| -> Result<Value, String> { serde_json::from_str(s).map_err(|e| format!("trial {n}: bad {what}: {e}")) };
        let state = TrialState::parse(&self.state).ok_or_else(|| format!("trial {n}: unknown state `{}`", self.state))?;
        Ok(TrialRecord {
            number: n as u64,
            state,
            point: floats_from_json(&json(&self.point, "point")?),
            config: json(&self.config, "config")?,
            values: match &self.vals {
                Some(v) => Some(floats_from_json(&json(v, "values")?)),
                None => None,
            },
            software_metrics: metrics_from_json(&json(&self.software_metrics, "metrics")?),
            hardware_metrics: metrics_from_json(&json(&self.hardware_metrics, "metrics")?),
            scaled_metrics: metrics_from_json(&json(&self.scaled_metrics, "metrics")?),
            violation: self.violation,
            system_attrs: json(&self.system_attrs, "system attrs")?.as_object().cloned().unwrap_or_default(),
            error: self.error,
            start_ms: self.start_ms,
            complete_ms: self.complete_ms,
            worker: self.worker,
        })
    }
}

/// The trials of a study as last read. The leading `finished` ones never change again (a
/// finished trial is never updated), so a read fetches only the rows numbered from `finished`.
#[derive(Default)]
pub(crate) struct Cache {
    pub all: Vec<TrialRecord>,
    pub finished: usize,
}

impl Cache {
    /// The first trial number to read.
    pub fn from(&self) -> i64 {
        self.finished as i64
    }

    /// Replaces everything after the finished prefix with `fresh` (the rows numbered from
    /// [`Cache::from`], in number order) and grows the prefix over finished trials.
    pub fn absorb(&mut self, fresh: Vec<TrialRecord>) {
        self.all.truncate(self.finished);
        for t in fresh {
            // The prefix grows over finished trials numbered without gaps from 0.
            if self.finished == self.all.len() && t.state != TrialState::Running && t.number == self.all.len() as u64 {
                self.finished += 1;
            }
            self.all.push(t);
        }
    }

    /// The number the next claimed trial gets.
    pub fn next_number(&self) -> u64 {
        self.all.last().map_or(0, |t| t.number + 1)
    }
}
