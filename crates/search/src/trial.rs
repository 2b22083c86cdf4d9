//! Trials as the study stores them.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Metric values by name, in the order runners report them.
pub type Metrics = IndexMap<String, f64>;

/// The life cycle of a trial (Optuna's names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum TrialState {
    /// Claimed by a worker and not finished yet (or its worker died: see `Storage::fail_running`).
    Running,
    /// Finished with objective values.
    Complete,
    /// Failed, or interrupted (its `error` says which).
    Fail,
}

impl TrialState {
    /// The stored spelling (`COMPLETE`).
    pub fn as_str(self) -> &'static str {
        match self {
            TrialState::Running => "RUNNING",
            TrialState::Complete => "COMPLETE",
            TrialState::Fail => "FAIL",
        }
    }

    /// Parses the stored spelling.
    pub fn parse(s: &str) -> Option<TrialState> {
        match s {
            "RUNNING" => Some(TrialState::Running),
            "COMPLETE" => Some(TrialState::Complete),
            "FAIL" => Some(TrialState::Fail),
            _ => None,
        }
    }
}

/// One trial: the sampled point and config, and once finished its metrics and objective values.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialRecord {
    /// 0, 1, 2, ... in claim order, unique within a study.
    pub number: u64,
    pub state: TrialState,
    /// The sampler's internal value of each parameter (choice index or real value).
    pub point: Vec<f64>,
    /// The sampled config (MASE's `sampled_config`).
    pub config: Value,
    /// Objective values (one per objective), when complete.
    pub values: Option<Vec<f64>>,
    pub software_metrics: Metrics,
    pub hardware_metrics: Metrics,
    /// `scale * metric` for each configured metric, in alphabetical order.
    pub scaled_metrics: Metrics,
    /// Total constraint violation; 0 means feasible.
    pub violation: f64,
    /// Sampler bookkeeping (`nsga2:generation`, `nsga2:parents`), as Optuna's system attrs.
    pub system_attrs: Map<String, Value>,
    /// Why a failed trial failed.
    pub error: Option<String>,
    /// Start and end, milliseconds since the Unix epoch.
    pub start_ms: i64,
    pub complete_ms: Option<i64>,
    /// The worker that claimed the trial (`host:pid`), as the store recorded it.
    #[serde(default)]
    pub worker: Option<String>,
}

impl TrialRecord {
    /// Writes `outcome` (state, values, metrics, violation, error, end time) into the record.
    pub fn record_outcome(&mut self, outcome: &TrialOutcome) {
        self.state = outcome.state;
        self.values = outcome.values.clone();
        self.software_metrics = outcome.software_metrics.clone();
        self.hardware_metrics = outcome.hardware_metrics.clone();
        self.scaled_metrics = outcome.scaled_metrics.clone();
        self.violation = outcome.violation;
        self.error = outcome.error.clone();
        self.complete_ms = Some(outcome.complete_ms);
    }

    /// A trial that has just been claimed.
    pub fn running(number: u64, point: Vec<f64>, config: Value, system_attrs: Map<String, Value>) -> TrialRecord {
        TrialRecord {
            number,
            state: TrialState::Running,
            point,
            config,
            values: None,
            software_metrics: Metrics::new(),
            hardware_metrics: Metrics::new(),
            scaled_metrics: Metrics::new(),
            violation: 0.0,
            system_attrs,
            error: None,
            start_ms: now_ms(),
            complete_ms: None,
            worker: None,
        }
    }

    /// Failed because its worker vanished (stale heartbeat) or its process was killed (found on
    /// `--resume`), rather than because the candidate failed: such a point is run again.
    pub fn is_requeueable(&self) -> bool {
        self.state == TrialState::Fail
            && self.error.as_deref().is_some_and(|e| e.starts_with(STALE_PREFIX) || e.starts_with(INTERRUPTED_PREFIX))
    }

    /// Finished with values that satisfy every constraint.
    pub fn is_feasible_complete(&self) -> bool {
        self.state == TrialState::Complete && self.violation <= 0.0 && self.values.is_some()
    }

    /// Duration in milliseconds, when finished.
    pub fn duration_ms(&self) -> Option<i64> {
        self.complete_ms.map(|c| c - self.start_ms)
    }
}

/// How the error of a trial whose worker stopped sending heartbeats begins.
pub const STALE_PREFIX: &str = "stale:";

/// How the error of a trial that a killed process left running (found on `--resume`) begins.
pub const INTERRUPTED_PREFIX: &str = "interrupted:";

/// What a worker reports when a trial ends.
#[derive(Clone, Debug, PartialEq)]
pub struct TrialOutcome {
    pub state: TrialState,
    pub values: Option<Vec<f64>>,
    pub software_metrics: Metrics,
    pub hardware_metrics: Metrics,
    pub scaled_metrics: Metrics,
    pub violation: f64,
    pub error: Option<String>,
    pub complete_ms: i64,
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
