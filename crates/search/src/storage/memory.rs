//! A store in memory, for tests and throw-away searches.

use crate::storage::{check_spec, no_study, study_exists, worker_id, Claim, OpenMode, Propose, Storage};
use crate::trial::{now_ms, TrialOutcome, TrialRecord, TrialState};
use crate::{Result, SearchError};
use indexmap::IndexMap;
use serde_json::Value;
use std::collections::HashMap;
use std::time::Duration;

/// One study: its spec, its trials and the last heartbeat (ms) of each running trial.
#[derive(Debug, Default)]
struct Study {
    spec: Value,
    trials: Vec<TrialRecord>,
    heartbeats: HashMap<u64, i64>,
}

/// Studies kept in memory.
#[derive(Debug, Default)]
pub struct MemoryStorage {
    studies: IndexMap<String, Study>,
}

impl MemoryStorage {
    /// An empty store.
    pub fn new() -> MemoryStorage {
        MemoryStorage::default()
    }

    fn study(&mut self, name: &str) -> Result<&mut Study> {
        self.studies.get_mut(name).ok_or_else(|| SearchError::Study { study: name.into(), reason: "no such study".into() })
    }
}

impl Storage for MemoryStorage {
    fn location(&self) -> String {
        "memory".into()
    }

    fn open_study(&mut self, name: &str, spec: &Value, mode: OpenMode) -> Result<()> {
        match (mode, self.studies.get(name)) {
            (OpenMode::Resume | OpenMode::Join, Some(stored)) => check_spec(name, &stored.spec, spec, mode),
            (OpenMode::Resume, None) => Err(super::nothing_to_resume("memory", name)),
            _ => {
                self.studies.insert(name.into(), Study { spec: spec.clone(), ..Study::default() });
                Ok(())
            }
        }
    }

    fn study_spec(&mut self, name: &str) -> Result<Option<Value>> {
        Ok(self.studies.get(name).map(|s| s.spec.clone()))
    }

    fn study_names(&mut self) -> Result<Vec<String>> {
        Ok(self.studies.keys().cloned().collect())
    }

    fn trials(&mut self, study: &str) -> Result<Vec<TrialRecord>> {
        Ok(self.study(study)?.trials.clone())
    }

    fn claim(&mut self, study: &str, stale_after: Option<Duration>, propose: &mut Propose<'_>) -> Result<Option<TrialRecord>> {
        let s = self.study(study)?;
        if let Some(after) = stale_after {
            let cutoff = now_ms() - after.as_millis() as i64;
            for t in s.trials.iter_mut().filter(|t| t.state == TrialState::Running) {
                if s.heartbeats.get(&t.number).is_some_and(|&h| h < cutoff) {
                    t.state = TrialState::Fail;
                    t.error = Some(super::stale_error(after));
                    t.complete_ms = Some(now_ms());
                }
            }
        }
        let number = s.trials.last().map_or(0, |t| t.number + 1);
        let Some(Claim { point, config, system_attrs }) = propose(&s.trials, number)? else { return Ok(None) };
        let mut rec = TrialRecord::running(number, point, config, system_attrs);
        rec.worker = Some(worker_id());
        s.heartbeats.insert(number, rec.start_ms);
        s.trials.push(rec.clone());
        Ok(Some(rec))
    }

    fn finish(&mut self, study: &str, number: u64, o: &TrialOutcome) -> Result<()> {
        let s = self.study(study)?;
        let t = s
            .trials
            .iter_mut()
            .find(|t| t.number == number)
            .ok_or_else(|| SearchError::Study { study: study.into(), reason: format!("no trial {number} to finish") })?;
        if t.state != TrialState::Running {
            return Err(SearchError::NotRunning { study: study.into(), trial: number, state: t.state.as_str().into() });
        }
        t.record_outcome(o);
        s.heartbeats.remove(&number);
        Ok(())
    }

    fn heartbeat(&mut self, study: &str, numbers: &[u64]) -> Result<()> {
        let s = self.study(study)?;
        let now = now_ms();
        for n in numbers {
            if let Some(h) = s.heartbeats.get_mut(n) {
                *h = now;
            }
        }
        Ok(())
    }

    fn fail_running(&mut self, study: &str, reason: &str) -> Result<usize> {
        let mut n = 0;
        for t in self.study(study)?.trials.iter_mut().filter(|t| t.state == TrialState::Running) {
            t.state = TrialState::Fail;
            t.error = Some(reason.into());
            n += 1;
        }
        Ok(n)
    }

    fn import_study(&mut self, name: &str, spec: &Value, trials: &[TrialRecord]) -> Result<()> {
        if self.studies.contains_key(name) {
            return Err(study_exists(name, "memory"));
        }
        let now = now_ms();
        let heartbeats = trials.iter().filter(|t| t.state == TrialState::Running).map(|t| (t.number, now)).collect();
        self.studies.insert(name.into(), Study { spec: spec.clone(), trials: trials.to_vec(), heartbeats });
        Ok(())
    }

    fn delete_study(&mut self, name: &str) -> Result<usize> {
        let s = self.studies.shift_remove(name).ok_or_else(|| no_study(name, "memory"))?;
        Ok(s.trials.len())
    }
}
