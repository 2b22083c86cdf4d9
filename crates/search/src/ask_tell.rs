//! Ask-and-tell: a study whose trials are evaluated by the caller (Optuna's `study.ask()` /
//! `study.tell()`), for hand-written search loops such as MASE lab 3's. A trial is proposed and
//! recorded by the same steps as [`crate::run_study`]'s loop ([`propose`] inside the store's
//! claim, [`outcome_of`], [`finished_record`]), so the same seed and the same told values give
//! the same trials as `ch search`, in any store (memory, SQLite, PostgreSQL).
//!
//! Asked trials send no heartbeats: a study shared with `ch search` workers should be told
//! within their `stale_after`, or those workers re-run the point.

use crate::objective::Objective;
use crate::sampler::Sampler;
use crate::space::SearchSpace;
use crate::storage::{OpenMode, Storage};
use crate::study::{best_trials, failed_outcome, finished_record, open_trials, outcome_of, propose, study_spec, ClaimRules, Proposed};
use crate::trial::{now_ms, Metrics, TrialOutcome, TrialRecord, TrialState};
use crate::{Result, SearchError};
use std::collections::HashSet;

/// What the caller found out about an asked trial.
#[derive(Clone, Debug, PartialEq)]
pub enum Told {
    /// Metrics, scored by the study's objective as a runner's would be (software, hardware).
    Metrics(Metrics, Metrics),
    /// The objective values themselves, one per objective.
    Values(Vec<f64>),
    /// The trial failed; the reason is recorded.
    Fail(String),
}

/// The parts of an ask-and-tell study.
pub struct AskTellParts {
    pub name: String,
    pub space: Box<dyn SearchSpace>,
    pub sampler: Box<dyn Sampler>,
    pub objective: Objective,
    pub seed: u64,
}

/// An open study whose trials the caller evaluates.
pub struct AskTell {
    parts: AskTellParts,
    storage: Box<dyn Storage>,
    /// Trials asked by this handle and not told yet.
    asked: HashSet<u64>,
    /// Set once the sampler has no point left.
    exhausted: bool,
}

impl AskTell {
    /// Opens the study `parts.name` in `storage` (a fresh, resumed or joined study, as
    /// [`crate::run_study`] opens it).
    pub fn open(parts: AskTellParts, mut storage: Box<dyn Storage>, mode: OpenMode) -> Result<AskTell> {
        let spec = study_spec(parts.space.as_ref(), &parts.objective, parts.sampler.name(), parts.seed);
        let (n_params, n_values) = (parts.space.params().len(), parts.objective.directions().len());
        open_trials(storage.as_mut(), &parts.name, &spec, mode, n_params, n_values)?;
        Ok(AskTell { parts, storage, asked: HashSet::new(), exhausted: false })
    }

    /// The study's name.
    pub fn name(&self) -> &str {
        &self.parts.name
    }

    /// The space searched.
    pub fn space(&self) -> &dyn SearchSpace {
        self.parts.space.as_ref()
    }

    /// The sampler's name.
    pub fn sampler(&self) -> &'static str {
        self.parts.sampler.name()
    }

    /// The objective trials are scored by.
    pub fn objective(&self) -> &Objective {
        &self.parts.objective
    }

    /// Where the study is stored.
    pub fn location(&self) -> String {
        self.storage.location()
    }

    /// The next trial to evaluate, claimed in the store as `RUNNING`; `None` once the sampler
    /// has no point left (brute force over the whole space).
    pub fn ask(&mut self) -> Result<Option<TrialRecord>> {
        let directions = self.parts.objective.directions();
        let rules = ClaimRules {
            study: &self.parts.name,
            space: self.parts.space.as_ref(),
            sampler: self.parts.sampler.as_ref(),
            directions: &directions,
            seed: self.parts.seed,
            n_trials: usize::MAX,
        };
        let mut exhausted = false;
        let asked = &self.asked;
        let claimed = self.storage.claim(&self.parts.name, None, &mut |trials: &[TrialRecord], number: u64| match propose(
            &rules, trials, number, asked,
        )? {
            Proposed::Claim(c) => Ok(Some(c)),
            Proposed::Exhausted => {
                exhausted = true;
                Ok(None)
            }
            // Other workers' trials hold the last points; one of them may still be handed out again.
            Proposed::Wait | Proposed::Done => Ok(None),
        })?;
        if let Some(t) = &claimed {
            self.asked.insert(t.number);
        }
        self.exhausted |= exhausted;
        Ok(claimed)
    }

    /// Whether the last [`AskTell::ask`] found nothing left to propose.
    pub fn is_exhausted(&self) -> bool {
        self.exhausted
    }

    /// Records how trial `number` ended and returns it as stored. Metrics are scored by the
    /// objective (a missing metric fails the trial with a message naming it); values must be one
    /// per objective.
    pub fn tell(&mut self, number: u64, told: Told) -> Result<TrialRecord> {
        let trials = self.storage.trials(&self.parts.name)?;
        let trial = trials.iter().find(|t| t.number == number).ok_or_else(|| SearchError::Study {
            study: self.parts.name.clone(),
            reason: format!("no trial {number} (ask for trials with ask())"),
        })?;
        if trial.state != TrialState::Running {
            return Err(SearchError::NotRunning { study: self.parts.name.clone(), trial: number, state: trial.state.as_str().into() });
        }
        let outcome = match told {
            Told::Metrics(sw, hw) => outcome_of(&self.parts.objective, Ok((sw, hw))),
            Told::Values(values) => self.outcome_of_values(values)?,
            Told::Fail(reason) => failed_outcome(reason),
        };
        self.storage.finish(&self.parts.name, number, &outcome)?;
        self.asked.remove(&number);
        Ok(finished_record(trial, &outcome))
    }

    /// The outcome of objective values given directly.
    fn outcome_of_values(&self, values: Vec<f64>) -> Result<TrialOutcome> {
        let names = self.parts.objective.value_names();
        if values.len() != names.len() {
            return Err(SearchError::Study {
                study: self.parts.name.clone(),
                reason: format!("told {} value(s), the objective has {} ({})", values.len(), names.len(), names.join(", ")),
            });
        }
        if let Some(bad) = values.iter().find(|v| !v.is_finite()) {
            return Err(SearchError::Study {
                study: self.parts.name.clone(),
                reason: format!("told the value {bad}; values must be finite"),
            });
        }
        let scaled: Metrics = names.into_iter().zip(values.iter().copied()).collect();
        Ok(TrialOutcome {
            state: TrialState::Complete,
            values: Some(values),
            software_metrics: Metrics::new(),
            hardware_metrics: Metrics::new(),
            scaled_metrics: scaled,
            violation: 0.0,
            error: None,
            complete_ms: now_ms(),
        })
    }

    /// Every trial of the study, in number order.
    pub fn trials(&mut self) -> Result<Vec<TrialRecord>> {
        self.storage.trials(&self.parts.name)
    }

    /// The best trials so far (see [`best_trials`]).
    pub fn best_trials(&mut self) -> Result<Vec<TrialRecord>> {
        let trials = self.trials()?;
        Ok(best_trials(&trials, &self.parts.objective).into_iter().cloned().collect())
    }
}
