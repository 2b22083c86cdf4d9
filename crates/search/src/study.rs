//! The search loop: claim a point, build and measure the candidate, score it, commit the trial;
//! on `n_jobs` threads at once, until `n_trials` trials are complete, the sampler has nothing
//! left, or the timeout has passed.
//!
//! With `n_jobs = 1` a study is reproducible: the same seed gives the same trials in the same
//! order, because samplers are functions of the seed, the trial number and the stored history.
//! With more jobs each sampler sees the trials finished so far, so the order depends on timing.
//!
//! Several processes (on one machine or many) can run the loop on one shared study
//! ([`OpenMode::Join`]): each claim sees every worker's trials. While a worker evaluates, a
//! thread refreshes the heartbeat of its running trials every `heartbeat_interval`; a claim marks
//! another worker's trial whose heartbeat is older than `stale_after` as failed, and the next
//! claim hands its point out again (`retry_of` in the new trial's system attrs). A worker that
//! finds nothing left to claim while other workers' trials still run waits for them (polling the
//! store), so a point whose worker died is always finished by someone.

use crate::objective::Objective;
use crate::pareto::pareto_front;
use crate::runner::{RunContext, Runner, Stage};
use crate::sampler::{SampleContext, Sampler};
use crate::space::SearchSpace;
use crate::storage::{Claim, OpenMode, Storage};
use crate::trial::{now_ms, Metrics, TrialOutcome, TrialRecord, TrialState, INTERRUPTED_PREFIX};
use crate::{Result, SearchError};
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// How often a point whose worker vanished is handed out again before it is left failed.
pub const MAX_RETRIES: u64 = 3;

/// How workers show they are alive.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Liveness {
    /// A running trial whose heartbeat is older than this is failed and its point re-queued;
    /// `None` turns heartbeats off.
    pub stale_after: Option<Duration>,
    /// How often a worker refreshes the heartbeat of its running trials.
    pub heartbeat_interval: Duration,
}

impl Default for Liveness {
    /// 60 s to stale, a heartbeat every 15 s.
    fn default() -> Liveness {
        Liveness { stale_after: Some(Duration::from_secs(60)), heartbeat_interval: Duration::from_secs(15) }
    }
}

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
    /// Heartbeats and the stale timeout.
    pub liveness: Liveness,
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
    /// Trials of this worker that another worker declared stale before they finished; their
    /// results were dropped (their points were run again).
    pub discarded: usize,
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

/// The objective a stored study spec describes, as far as ranking trials needs it (names and
/// directions; scales and constraints were applied when the trials were scored).
pub fn objective_from_spec(study: &str, spec: &Value) -> Result<Objective> {
    let bad = |what: &str| SearchError::Study { study: study.into(), reason: format!("the stored spec has no valid `{what}`") };
    let dirs: Vec<crate::Direction> = spec
        .get("directions")
        .and_then(|d| serde_json::from_value(d.clone()).ok())
        .filter(|d: &Vec<crate::Direction>| !d.is_empty())
        .ok_or_else(|| bad("directions"))?;
    let names: Vec<String> =
        spec.get("objectives").and_then(|d| serde_json::from_value(d.clone()).ok()).ok_or_else(|| bad("objectives"))?;
    if names.len() != dirs.len() {
        return Err(bad("objectives"));
    }
    let metric = |(name, direction): (String, crate::Direction)| crate::MetricSpec { name, scale: 1.0, direction };
    Ok(if names == ["value"] {
        Objective::new(vec![metric(("value".into(), dirs[0]))], Some(dirs[0]), vec![])
    } else {
        Objective::new(names.into_iter().zip(dirs).map(metric).collect(), None, vec![])
    })
}

/// The parameters of a stored study's space (empty when its signature does not list them).
pub fn params_from_spec(spec: &Value) -> Vec<crate::ParamDef> {
    spec.pointer("/space/params").and_then(|p| serde_json::from_value(p.clone()).ok()).unwrap_or_default()
}

/// Checks that stored trials fit the study: one point entry per parameter of the space (when
/// `params` is known) and, on every trial that has values, one value per objective. Stores are
/// written by this crate alone, which keeps that true; a trial that breaks it comes from a study
/// file changed by hand or by another version, and is an error naming the trial rather than an
/// index past the end of a point in a sampler or of the values in a ranking.
pub fn check_trials(study: &str, trials: &[TrialRecord], params: Option<usize>, values: usize) -> Result<()> {
    let bad = |reason: String| Err(SearchError::Study { study: study.into(), reason });
    for t in trials {
        if let Some(p) = params.filter(|&p| p != t.point.len()) {
            return bad(format!("trial {} stores a point of {} value(s), the space has {p} parameter(s)", t.number, t.point.len()));
        }
        if let Some(v) = t.values.as_ref().filter(|v| v.len() != values) {
            return bad(format!("trial {} stores {} value(s), the objective has {values}", t.number, v.len()));
        }
    }
    Ok(())
}

/// The best trials: for one objective every feasible complete trial tied at the best value, for
/// several the Pareto front of the feasible complete trials (as Optuna's `best_trials`).
pub fn best_trials<'a>(trials: &'a [TrialRecord], objective: &Objective) -> Vec<&'a TrialRecord> {
    let ok: Vec<&TrialRecord> = trials.iter().filter(|t| t.is_feasible_complete()).collect();
    let losses: Vec<Vec<f64>> = ok.iter().map(|t| objective.losses(t.values.as_deref().unwrap_or(&[]))).collect();
    pareto_front(&losses).into_iter().map(|i| ok[i]).collect()
}

/// Shared progress of the workers.
struct Progress {
    complete: usize,
    /// Losses of the current best trials.
    front: Vec<Vec<f64>>,
}

impl Progress {
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

/// The claim rules of a study: what [`propose`] needs to decide the next trial, the same for
/// [`run_study`]'s loop and for ask-and-tell ([`crate::AskTell`]).
pub struct ClaimRules<'a> {
    pub study: &'a str,
    pub space: &'a dyn SearchSpace,
    pub sampler: &'a dyn Sampler,
    /// One per objective value.
    pub directions: &'a [crate::Direction],
    pub seed: u64,
    /// Complete trials to reach; `usize::MAX` for a study without a target (ask-and-tell).
    pub n_trials: usize,
}

/// What [`propose`] decided.
#[derive(Debug)]
pub enum Proposed {
    /// Run this point as the next trial.
    Claim(Claim),
    /// Nothing to claim now, but another worker's trials still run and may fail or go stale:
    /// look again later.
    Wait,
    /// The target number of complete trials is reached (or will be by the trials running).
    Done,
    /// The sampler has no point left.
    Exhausted,
}

/// Step "propose" of a claim: given every trial of the study (read inside the claim
/// transaction), the number the new trial gets and the running trials that belong to this
/// process (`ours`), decides what to run next: the point of a stale or interrupted trial again,
/// else the sampler's proposal.
pub fn propose(rules: &ClaimRules<'_>, trials: &[TrialRecord], number: u64, ours: &HashSet<u64>) -> Result<Proposed> {
    // Other workers' trials arrive here too, so they are checked at each claim.
    check_trials(rules.study, trials, Some(rules.space.params().len()), rules.directions.len())?;
    let complete = trials.iter().filter(|t| t.state == TrialState::Complete).count();
    if complete >= rules.n_trials {
        return Ok(Proposed::Done);
    }
    let running: Vec<&TrialRecord> = trials.iter().filter(|t| t.state == TrialState::Running).collect();
    // Another worker's trial may still fail or go stale and need a re-run.
    let foreign = running.iter().any(|t| !ours.contains(&t.number));
    if complete.saturating_add(running.len()) >= rules.n_trials {
        return Ok(if foreign { Proposed::Wait } else { Proposed::Done });
    }
    if let Some(claim) = requeue(trials) {
        return Ok(Proposed::Claim(claim));
    }
    let cx = SampleContext { params: rules.space.params(), trials, directions: rules.directions, number, seed: rules.seed };
    match rules.sampler.sample(&cx)? {
        None if foreign => Ok(Proposed::Wait),
        None => Ok(Proposed::Exhausted),
        Some(p) => {
            let config = rules.space.to_config(&p.point)?;
            Ok(Proposed::Claim(Claim { point: p.point, config, system_attrs: p.system_attrs }))
        }
    }
}

/// Step "open": opens (or resumes, or joins) the study in the store and checks its stored
/// trials; on resume, the running trials of the killed process are marked failed first.
/// Returns the stored trials and how many were marked failed.
pub fn open_trials(
    storage: &mut dyn Storage,
    name: &str,
    spec: &Value,
    mode: OpenMode,
    n_params: usize,
    n_values: usize,
) -> Result<(Vec<TrialRecord>, usize)> {
    storage.open_study(name, spec, mode)?;
    let interrupted = if mode == OpenMode::Resume {
        storage.fail_running(name, &format!("{INTERRUPTED_PREFIX} the search process stopped during this trial"))?
    } else {
        0
    };
    let stored = storage.trials(name)?;
    check_trials(name, &stored, Some(n_params), n_values)?;
    Ok((stored, interrupted))
}

/// Step "score": the outcome of a trial whose runners reported `sw` and `hw` metrics (scored by
/// the objective), or that failed with an error.
pub fn outcome_of(objective: &Objective, measured: Result<(Metrics, Metrics)>) -> TrialOutcome {
    let scored = measured.and_then(|(sw, hw)| {
        let mut all = sw.clone();
        all.extend(hw.iter().map(|(k, v)| (k.clone(), *v)));
        let s = objective.score(&all)?;
        Ok((sw, hw, s))
    });
    match scored {
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
        Err(e) => failed_outcome(e.to_string()),
    }
}

/// The outcome of a trial that failed with `reason`.
pub fn failed_outcome(reason: String) -> TrialOutcome {
    TrialOutcome {
        state: TrialState::Fail,
        values: None,
        software_metrics: Metrics::new(),
        hardware_metrics: Metrics::new(),
        scaled_metrics: Metrics::new(),
        violation: 0.0,
        error: Some(reason),
        complete_ms: now_ms(),
    }
}

/// Step "record": the claimed trial as the store holds it once `outcome` is recorded.
pub fn finished_record(trial: &TrialRecord, outcome: &TrialOutcome) -> TrialRecord {
    let mut rec = trial.clone();
    rec.record_outcome(outcome);
    rec
}

/// Runs (or resumes) a study in `storage`: [`open_trials`], then on each of `n_jobs` threads
/// claims a trial ([`propose`] inside the store's claim), measures it (`evaluate`, scored by
/// [`outcome_of`]) and records it ([`finished_record`]), until a stop condition holds.
pub fn run_study(setup: &StudySetup<'_>, storage: &mut dyn Storage, mode: OpenMode, observer: &dyn Observer) -> Result<StudyOutcome> {
    let spec = study_spec(setup.space, setup.objective, setup.sampler.name(), setup.seed);
    let (n_params, n_values) = (setup.space.params().len(), setup.objective.directions().len());
    let (stored, interrupted) = open_trials(storage, &setup.name, &spec, mode, n_params, n_values)?;
    let progress = stored_progress(&stored, setup.objective);
    let directions = setup.objective.directions();
    let run = Run {
        setup,
        rules: ClaimRules {
            study: &setup.name,
            space: setup.space,
            sampler: setup.sampler,
            directions: &directions,
            seed: setup.seed,
            n_trials: setup.n_trials,
        },
        threads: if setup.n_jobs > 1 { 1 } else { setup.threads },
        start: Instant::now(),
        storage: Mutex::new(storage),
        progress: Mutex::new(progress),
        abort: AtomicBool::new(false),
        exhausted: AtomicBool::new(false),
        timed_out: AtomicBool::new(false),
        discarded: AtomicUsize::new(0),
        failure: Mutex::new(None),
        inflight: Mutex::new(HashSet::new()),
        done: (Mutex::new(false), Condvar::new()),
    };
    std::thread::scope(|s| {
        if setup.liveness.stale_after.is_some() {
            s.spawn(|| keep_heartbeats(&run));
        }
        // Ends the heartbeats when the workers are done, and also when a worker on this thread
        // panics: the scope would otherwise wait for the heartbeat thread forever.
        let _done = WorkersDoneGuard(&run.done);
        if setup.n_jobs <= 1 {
            work(&run, observer);
        } else {
            let jobs: Vec<_> = (0..setup.n_jobs).map(|_| s.spawn(|| work(&run, observer))).collect();
            for j in jobs {
                if j.join().is_err() {
                    run.fail(SearchError::Trial { trial: 0, reason: "a worker thread panicked".into() });
                }
            }
        }
    });
    if let Some(e) = run.failure.into_inner().unwrap_or_else(|p| p.into_inner()) {
        return Err(e);
    }
    let storage = run.storage.into_inner().unwrap_or_else(|p| p.into_inner());
    let trials = storage.trials(&setup.name)?;
    let stop = if run.exhausted.load(Ordering::SeqCst) {
        StopReason::Exhausted
    } else if run.timed_out.load(Ordering::SeqCst) {
        StopReason::Timeout
    } else {
        StopReason::Completed
    };
    Ok(StudyOutcome { trials, stop, interrupted, discarded: run.discarded.load(Ordering::SeqCst) })
}

/// The progress the stored trials of a resumed study already made.
fn stored_progress(stored: &[TrialRecord], objective: &Objective) -> Progress {
    let mut progress = Progress { complete: 0, front: Vec::new() };
    for t in stored {
        if t.state == TrialState::Complete {
            progress.complete += 1;
        }
        if t.is_feasible_complete() {
            progress.add(objective.losses(t.values.as_deref().unwrap_or(&[])));
        }
    }
    progress
}

/// What the threads of one [`run_study`] share.
struct Run<'a> {
    setup: &'a StudySetup<'a>,
    rules: ClaimRules<'a>,
    /// Threads each trial's evaluation may use.
    threads: usize,
    start: Instant,
    storage: Mutex<&'a mut dyn Storage>,
    progress: Mutex<Progress>,
    abort: AtomicBool,
    exhausted: AtomicBool,
    timed_out: AtomicBool,
    discarded: AtomicUsize,
    failure: Mutex<Option<SearchError>>,
    /// The trials this process is evaluating: they get heartbeats, and a worker never waits for them.
    inflight: Mutex<HashSet<u64>>,
    done: (Mutex<bool>, Condvar),
}

/// What a worker claimed.
enum Next {
    Trial(Box<TrialRecord>),
    /// Every open point is running elsewhere: poll again.
    Wait,
    /// Nothing left to run (or the claim failed, already recorded): the worker stops.
    Stop,
}

impl Run<'_> {
    /// Records the first error and stops every worker.
    fn fail(&self, e: SearchError) {
        self.abort.store(true, Ordering::SeqCst);
        self.failure.lock().unwrap_or_else(|p| p.into_inner()).get_or_insert(e);
    }
}

/// One worker: claims, evaluates and records trials until a stop condition holds.
fn work(run: &Run<'_>, observer: &dyn Observer) {
    let setup = run.setup;
    let poll = setup.liveness.heartbeat_interval.min(Duration::from_secs(1));
    while !run.abort.load(Ordering::SeqCst) {
        if setup.timeout.is_some_and(|t| run.start.elapsed() >= t) {
            run.timed_out.store(true, Ordering::SeqCst);
            break;
        }
        let trial = match claim_next(run) {
            Next::Trial(t) => t,
            Next::Wait => {
                std::thread::sleep(poll);
                continue;
            }
            Next::Stop => break,
        };
        // A test hook (`MASE_FAILPOINT`): dying here leaves a claimed trial that never ends.
        crate::failpoint::hit("after-claim");
        if !evaluate_and_record(run, &trial, observer) {
            break;
        }
    }
}

/// Claims a trial ([`propose`] inside the store's claim) and marks it as this process's.
fn claim_next(run: &Run<'_>) -> Next {
    let mut wait = false;
    let claimed = {
        let mut st = run.storage.lock().unwrap_or_else(|p| p.into_inner());
        let claimed = st.claim(&run.setup.name, run.setup.liveness.stale_after, &mut |trials: &[TrialRecord], number: u64| {
            let ours = run.inflight.lock().unwrap_or_else(|p| p.into_inner());
            match propose(&run.rules, trials, number, &ours)? {
                Proposed::Claim(claim) => Ok(Some(claim)),
                Proposed::Wait => {
                    wait = true;
                    Ok(None)
                }
                Proposed::Exhausted => {
                    run.exhausted.store(true, Ordering::SeqCst);
                    Ok(None)
                }
                Proposed::Done => Ok(None),
            }
        });
        // Recorded before the store is unlocked, so that this process's other threads
        // never take the new trial for another worker's and wait for it.
        if let Ok(Some(t)) = &claimed {
            run.inflight.lock().unwrap_or_else(|p| p.into_inner()).insert(t.number);
        }
        claimed
    };
    match claimed {
        Ok(Some(t)) => Next::Trial(Box::new(t)),
        Ok(None) if wait => Next::Wait,
        Ok(None) => Next::Stop,
        Err(e) => {
            run.fail(e);
            Next::Stop
        }
    }
}

/// Measures a claimed trial (`evaluate`, scored by [`outcome_of`]), records it
/// ([`finished_record`]) and reports it; `false` when the worker must stop.
fn evaluate_and_record(run: &Run<'_>, trial: &TrialRecord, observer: &dyn Observer) -> bool {
    let setup = run.setup;
    let outcome = evaluate(setup, trial, run.threads);
    let failed = outcome.error.clone();
    let rec = finished_record(trial, &outcome);
    let stored = run.storage.lock().unwrap_or_else(|p| p.into_inner()).finish(&setup.name, trial.number, &outcome);
    run.inflight.lock().unwrap_or_else(|p| p.into_inner()).remove(&trial.number);
    match stored {
        // A test hook (`MASE_FAILPOINT`): dying here leaves exactly the trials committed so far.
        Ok(()) => crate::failpoint::hit("after-finish"),
        Err(SearchError::NotRunning { .. }) => {
            // Declared stale while we were slow: the point was handed out again, and
            // recording this result too would duplicate it.
            run.discarded.fetch_add(1, Ordering::SeqCst);
            return true;
        }
        Err(e) => {
            run.fail(e);
            return false;
        }
    }
    if let Some(reason) = failed {
        run.fail(SearchError::Trial { trial: trial.number, reason });
        return false;
    }
    let (complete, best) = {
        let mut b = run.progress.lock().unwrap_or_else(|p| p.into_inner());
        b.complete += 1;
        if rec.is_feasible_complete() {
            b.add(setup.objective.losses(rec.values.as_deref().unwrap_or(&[])));
        }
        (b.complete, b.describe(setup.objective))
    };
    observer.trial_finished(&rec, complete, setup.n_trials, &best);
    true
}

/// Refreshes the heartbeats of this process's running trials until the workers are done. A
/// failed refresh is not fatal: at worst another worker declares a trial stale and re-runs it.
fn keep_heartbeats(run: &Run<'_>) {
    let (lock, signal) = &run.done;
    loop {
        {
            let finished = lock.lock().unwrap_or_else(|p| p.into_inner());
            if *finished {
                break;
            }
            let (finished, _) = signal.wait_timeout(finished, run.setup.liveness.heartbeat_interval).unwrap_or_else(|p| p.into_inner());
            if *finished {
                break;
            }
        }
        let numbers: Vec<u64> = run.inflight.lock().unwrap_or_else(|p| p.into_inner()).iter().copied().collect();
        if !numbers.is_empty() {
            let _ = run.storage.lock().unwrap_or_else(|p| p.into_inner()).heartbeat(&run.setup.name, &numbers);
        }
    }
}

/// Sets the workers-done flag and wakes the heartbeat thread when dropped, whether the workers
/// returned or one of them is unwinding from a panic.
struct WorkersDoneGuard<'a>(&'a (Mutex<bool>, Condvar));

impl Drop for WorkersDoneGuard<'_> {
    fn drop(&mut self) {
        let (lock, signal) = self.0;
        *lock.lock().unwrap_or_else(|p| p.into_inner()) = true;
        signal.notify_all();
    }
}

/// The claim that runs again the point of a trial whose worker vanished (stale) or was killed
/// (interrupted), unless it was re-run already, holds a point that is running or complete again,
/// or has been retried [`MAX_RETRIES`] times.
fn requeue(trials: &[TrialRecord]) -> Option<Claim> {
    let retried: HashSet<u64> = trials.iter().filter_map(|t| t.system_attrs.get("retry_of").and_then(Value::as_u64)).collect();
    let busy: Vec<&[f64]> =
        trials.iter().filter(|t| matches!(t.state, TrialState::Running | TrialState::Complete)).map(|t| t.point.as_slice()).collect();
    let retries = |t: &TrialRecord| t.system_attrs.get("retries").and_then(Value::as_u64).unwrap_or(0);
    let t = trials
        .iter()
        .find(|t| t.is_requeueable() && !retried.contains(&t.number) && retries(t) < MAX_RETRIES && !busy.contains(&t.point.as_slice()))?;
    let mut attrs = Map::new();
    attrs.insert("retry_of".into(), json!(t.number));
    attrs.insert("retries".into(), json!(retries(t) + 1));
    Some(Claim { point: t.point.clone(), config: t.config.clone(), system_attrs: attrs })
}

/// Step "measure": builds one trial's candidate and runs the runners on it (training first,
/// then the other software runners, then hardware), scored by [`outcome_of`]. Errors become a
/// failed outcome.
fn evaluate(setup: &StudySetup<'_>, trial: &TrialRecord, threads: usize) -> TrialOutcome {
    let measured = (|| -> Result<(Metrics, Metrics)> {
        let mut cand = setup.space.build(&trial.config)?;
        let cx = RunContext { threads, trial: trial.number };
        let (mut sw, mut hw) = (Metrics::new(), Metrics::new());
        for r in setup.runners {
            let m = r.run(&mut cand, &cx)?;
            let into = if r.stage() == Stage::Hardware { &mut hw } else { &mut sw };
            into.extend(m);
        }
        Ok((sw, hw))
    })();
    outcome_of(setup.objective, measured)
}
