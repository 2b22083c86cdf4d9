//! A store in memory, for tests and throw-away searches.

use crate::storage::{check_spec, Claim, OpenMode, Propose, Storage};
use crate::trial::{TrialOutcome, TrialRecord, TrialState};
use crate::{Result, SearchError};
use indexmap::IndexMap;
use serde_json::Value;

/// Studies kept in memory.
#[derive(Debug, Default)]
pub struct MemoryStorage {
    studies: IndexMap<String, (Value, Vec<TrialRecord>)>,
}

impl MemoryStorage {
    pub fn new() -> MemoryStorage {
        MemoryStorage::default()
    }

    fn study(&mut self, name: &str) -> Result<&mut (Value, Vec<TrialRecord>)> {
        self.studies.get_mut(name).ok_or_else(|| SearchError::Study { study: name.into(), reason: "no such study".into() })
    }
}

impl Storage for MemoryStorage {
    fn location(&self) -> String {
        "memory".into()
    }

    fn open_study(&mut self, name: &str, spec: &Value, mode: OpenMode) -> Result<()> {
        match (mode, self.studies.get(name)) {
            (OpenMode::Resume, Some((stored, _))) => check_spec(name, stored, spec),
            _ => {
                self.studies.insert(name.into(), (spec.clone(), Vec::new()));
                Ok(())
            }
        }
    }

    fn study_spec(&mut self, name: &str) -> Result<Option<Value>> {
        Ok(self.studies.get(name).map(|(s, _)| s.clone()))
    }

    fn study_names(&mut self) -> Result<Vec<String>> {
        Ok(self.studies.keys().cloned().collect())
    }

    fn trials(&mut self, study: &str) -> Result<Vec<TrialRecord>> {
        Ok(self.study(study)?.1.clone())
    }

    fn claim(&mut self, study: &str, propose: &mut Propose<'_>) -> Result<Option<TrialRecord>> {
        let trials = &mut self.study(study)?.1;
        let number = trials.last().map_or(0, |t| t.number + 1);
        let Some(Claim { point, config, system_attrs }) = propose(trials, number)? else { return Ok(None) };
        let rec = TrialRecord::running(number, point, config, system_attrs);
        trials.push(rec.clone());
        Ok(Some(rec))
    }

    fn finish(&mut self, study: &str, number: u64, o: &TrialOutcome) -> Result<()> {
        let trials = &mut self.study(study)?.1;
        let t = trials
            .iter_mut()
            .find(|t| t.number == number)
            .ok_or_else(|| SearchError::Study { study: study.into(), reason: format!("no trial {number} to finish") })?;
        t.state = o.state;
        t.values = o.values.clone();
        t.software_metrics = o.software_metrics.clone();
        t.hardware_metrics = o.hardware_metrics.clone();
        t.scaled_metrics = o.scaled_metrics.clone();
        t.violation = o.violation;
        t.error = o.error.clone();
        t.complete_ms = Some(o.complete_ms);
        Ok(())
    }

    fn fail_running(&mut self, study: &str, reason: &str) -> Result<usize> {
        let mut n = 0;
        for t in self.study(study)?.1.iter_mut().filter(|t| t.state == TrialState::Running) {
            t.state = TrialState::Fail;
            t.error = Some(reason.into());
            n += 1;
        }
        Ok(n)
    }
}
