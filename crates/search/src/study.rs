//! The search loop: claim a point, build and measure the candidate, score it, commit the trial;
//! on `n_jobs` threads at once, until `n_trials` trials are complete, the sampler has nothing
//! left, or the timeout has passed.
//!
//! With `n_jobs = 1` a study is reproducible: the same seed gives the same trials in the same
//! order, because samplers are functions of the seed, the trial number and the stored history.
//! With more jobs each sampler sees the trials finished so far, so the order depends on timing.

use crate::objective::Objective;
use crate::pareto::pareto_front;
use crate::runner::{RunContext, Runner, Stage};
use crate::sampler::{SampleContext, Sampler};
use crate::space::SearchSpace;
use crate::storage::{Claim, OpenMode, Storage};
use crate::trial::{now_ms, Metrics, TrialOutcome, TrialRecord, TrialState};
use crate::{Result, SearchError};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Everything a study run needs.
pub struct StudySetup<'a> {
    /// The study's name in the store.
    pub name: String,
    pub space: &'a dyn SearchSpace,
    pub sampler: &'a dyn Sampler,
    pub objective: &'a Objective,
    pub runners: &'a [Box<dyn Runner>],
    /// Complete trials to reach (failed and interrupted ones do not count).
    pub n_trials: usize,
    pub n_jobs: usize,
    pub timeout: Option<Duration>,
    pub seed: u64,
    /// Kernel threads of a trial when `n_jobs = 1` (0: all cores); parallel trials use 1 each.
    pub threads: usize,
}

/// Why the loop stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// `n_trials` complete trials.
    Completed,
    /// The sampler had no point left (brute force over the whole space).
    Exhausted,
    Timeout,
}

/// Told about every finished trial (for progress bars).
pub trait Observer: Sync {
    /// `complete` counts the study's complete trials so far; `best` describes the best value(s).
    fn trial_finished(&self, trial: &TrialRecord, complete: usize, target: usize, best: &str);
}

/// An observer that does nothing.
pub struct Silent;

impl Observer for Silent {
    fn trial_finished(&self, _: &TrialRecord, _: usize, _: usize, _: &str) {}
}

/// The result of [`run_study`].
#[derive(Clone, Debug)]
pub struct StudyOutcome {
    pub trials: Vec<TrialRecord>,
    pub stop: StopReason,
    /// Running trials of a previous, killed run that were marked failed on resume.
    pub interrupted: usize,
}

/// The spec stored with a study, checked when it is resumed.
pub fn study_spec(space: &dyn SearchSpace, objective: &Objective, sampler: &str, seed: u64) -> Value {
    json!({
        "space": space.signature(),
        "directions": objective.directions(),
        "objectives": objective.value_names(),
        "sampler": sampler,
        "seed": seed,
    })
}

/// The best trials: for one objective every feasible complete trial tied at the best value, for
/// several the Pareto front of the feasible complete trials (as Optuna's `best_trials`).
pub fn best_trials<'a>(trials: &'a [TrialRecord], objective: &Objective) -> Vec<&'a TrialRecord> {
    let ok: Vec<&TrialRecord> = trials.iter().filter(|t| t.is_feasible_complete()).collect();
    let losses: Vec<Vec<f64>> = ok.iter().map(|t| objective.losses(t.values.as_deref().unwrap_or(&[]))).collect();
    pareto_front(&losses).into_iter().map(|i| ok[i]).collect()
}

/// Shared progress of the workers.
struct Board {
    complete: usize,
    /// Losses of the current best trials.
    front: Vec<Vec<f64>>,
}

impl Board {
    fn add(&mut self, losses: Vec<f64>) {
        if self.front.iter().any(|f| crate::pareto::dominates(f, &losses)) {
            return;
        }
        self.front.retain(|f| !crate::pareto::dominates(&losses, f));
        self.front.push(losses);
    }

    fn describe(&self, objective: &Objective) -> String {
        let dirs = objective.directions();
        match self.front.len() {
            0 => "no feasible trial yet".into(),
            _ if dirs.len() == 1 => format!("best {:.4}", dirs[0].loss(self.front[0][0])),
            n => format!("Pareto front of {n}"),
        }
    }
}

/// Runs (or resumes) a study in `storage`.
pub fn run_study(setup: &StudySetup<'_>, storage: &mut dyn Storage, mode: OpenMode, observer: &dyn Observer) -> Result<StudyOutcome> {
    let spec = study_spec(setup.space, setup.objective, setup.sampler.name(), setup.seed);
    storage.open_study(&setup.name, &spec, mode)?;
    let interrupted = if mode == OpenMode::Resume {
        storage.fail_running(&setup.name, "interrupted: the search process stopped during this trial")?
    } else {
        0
    };
    let mut board = Board { complete: 0, front: Vec::new() };
    for t in storage.trials(&setup.name)? {
        if t.state == TrialState::Complete {
            board.complete += 1;
        }
        if t.is_feasible_complete() {
            board.add(setup.objective.losses(t.values.as_deref().unwrap_or(&[])));
        }
    }
    let storage = Mutex::new(storage);
    let board = Mutex::new(board);
    let abort = AtomicBool::new(false);
    let exhausted = AtomicBool::new(false);
    let timed_out = AtomicBool::new(false);
    let failure: Mutex<Option<SearchError>> = Mutex::new(None);
    let start = Instant::now();
    let directions = setup.objective.directions();
    let threads = if setup.n_jobs > 1 { 1 } else { setup.threads };

    let worker = || {
        while !abort.load(Ordering::SeqCst) {
            if setup.timeout.is_some_and(|t| start.elapsed() >= t) {
                timed_out.store(true, Ordering::SeqCst);
                break;
            }
            let claimed = {
                let mut st = storage.lock().unwrap_or_else(|p| p.into_inner());
                st.claim(&setup.name, &mut |trials: &[TrialRecord], number: u64| {
                    let active = trials.iter().filter(|t| matches!(t.state, TrialState::Complete | TrialState::Running)).count();
                    if active >= setup.n_trials {
                        return Ok(None);
                    }
                    let cx = SampleContext { params: setup.space.params(), trials, directions: &directions, number, seed: setup.seed };
                    match setup.sampler.sample(&cx)? {
                        None => {
                            exhausted.store(true, Ordering::SeqCst);
                            Ok(None)
                        }
                        Some(p) => {
                            let config = setup.space.to_config(&p.point)?;
                            Ok(Some(Claim { point: p.point, config, system_attrs: p.system_attrs }))
                        }
                    }
                })
            };
            let trial = match claimed {
                Ok(Some(t)) => t,
                Ok(None) => break,
                Err(e) => {
                    abort.store(true, Ordering::SeqCst);
                    failure.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                    break;
                }
            };
            let outcome = evaluate(setup, &trial, threads);
            let failed = outcome.error.clone();
            let mut rec = trial.clone();
            rec.state = outcome.state;
            rec.values = outcome.values.clone();
            rec.software_metrics = outcome.software_metrics.clone();
            rec.hardware_metrics = outcome.hardware_metrics.clone();
            rec.scaled_metrics = outcome.scaled_metrics.clone();
            rec.violation = outcome.violation;
            rec.error = outcome.error.clone();
            rec.complete_ms = Some(outcome.complete_ms);
            let stored = storage.lock().unwrap_or_else(|p| p.into_inner()).finish(&setup.name, trial.number, &outcome);
            if let Err(e) = stored {
                abort.store(true, Ordering::SeqCst);
                failure.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
                break;
            }
            if let Some(reason) = failed {
                abort.store(true, Ordering::SeqCst);
                failure.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(SearchError::Trial { trial: trial.number, reason });
                break;
            }
            let (complete, best) = {
                let mut b = board.lock().unwrap_or_else(|p| p.into_inner());
                b.complete += 1;
                if rec.is_feasible_complete() {
                    b.add(setup.objective.losses(rec.values.as_deref().unwrap_or(&[])));
                }
                (b.complete, b.describe(setup.objective))
            };
            observer.trial_finished(&rec, complete, setup.n_trials, &best);
        }
    };
    if setup.n_jobs <= 1 {
        worker();
    } else {
        std::thread::scope(|s| {
            for _ in 0..setup.n_jobs {
                s.spawn(worker);
            }
        });
    }
    if let Some(e) = failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let storage = storage.into_inner().unwrap_or_else(|p| p.into_inner());
    let trials = storage.trials(&setup.name)?;
    let stop = if exhausted.load(Ordering::SeqCst) {
        StopReason::Exhausted
    } else if timed_out.load(Ordering::SeqCst) {
        StopReason::Timeout
    } else {
        StopReason::Completed
    };
    Ok(StudyOutcome { trials, stop, interrupted })
}

/// Builds, measures and scores one trial's candidate. Errors become a failed outcome.
fn evaluate(setup: &StudySetup<'_>, trial: &TrialRecord, threads: usize) -> TrialOutcome {
    let measured = (|| -> Result<(Metrics, Metrics, crate::objective::Scored)> {
        let mut cand = setup.space.build(&trial.config)?;
        let cx = RunContext { threads, trial: trial.number };
        let (mut sw, mut hw) = (Metrics::new(), Metrics::new());
        for r in setup.runners {
            let m = r.run(&mut cand, &cx)?;
            let into = if r.stage() == Stage::Hardware { &mut hw } else { &mut sw };
            into.extend(m);
        }
        let mut all = sw.clone();
        all.extend(hw.iter().map(|(k, v)| (k.clone(), *v)));
        let scored = setup.objective.score(&all)?;
        Ok((sw, hw, scored))
    })();
    match measured {
        Ok((sw, hw, s)) => TrialOutcome {
            state: TrialState::Complete,
            values: Some(s.values),
            software_metrics: sw,
            hardware_metrics: hw,
            scaled_metrics: s.scaled,
            violation: s.violation,
            error: None,
            complete_ms: now_ms(),
        },
        Err(e) => TrialOutcome {
            state: TrialState::Fail,
            values: None,
            software_metrics: Metrics::new(),
            hardware_metrics: Metrics::new(),
            scaled_metrics: Metrics::new(),
            violation: 0.0,
            error: Some(e.to_string()),
            complete_ms: now_ms(),
        },
    }
}
