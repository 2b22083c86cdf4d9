//! The files a search writes beside its study database (doc/mase-semantics.md#search-files):
//! `log.json` (every trial, the columns of Optuna's `trials_dataframe` as MASE writes them),
//! `best.json` (the best trial or the Pareto front, MASE's record layout, `value` always a
//! list), and `trials.csv` (one row per trial with its metrics and chosen values).

use crate::flatten::flatten;
use crate::objective::Objective;
use crate::pareto::{hypervolume, reference_point};
use crate::storage::metrics_to_json;
use crate::study::best_trials;
use crate::trial::{TrialRecord, TrialState};
use crate::{ParamDef, Result, SearchError};
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::path::Path;

/// `log.json`: `{"0": {...}, "1": {...}}`, one record per trial in number order.
pub fn log_json(trials: &[TrialRecord], objective: &Objective) -> Value {
    let attrs: BTreeSet<&String> = trials.iter().flat_map(|t| t.system_attrs.keys()).collect();
    let names = objective.value_names();
    let mut out = Map::new();
    for (row, t) in trials.iter().enumerate() {
        let mut r = Map::new();
        r.insert("number".into(), Value::from(t.number));
        let vals = t.values.clone().unwrap_or_default();
        if objective.sum_scaled.is_some() {
            r.insert("value".into(), vals.first().map_or(Value::Null, |v| Value::from(*v)));
        } else {
            for i in 0..names.len() {
                r.insert(format!("values_{i}"), vals.get(i).map_or(Value::Null, |v| Value::from(*v)));
            }
        }
        let done = t.state == TrialState::Complete;
        let metrics = |m: &crate::trial::Metrics| if done { metrics_to_json(m) } else { Value::Null };
        r.insert("user_attrs_hardware_metrics".into(), metrics(&t.hardware_metrics));
        r.insert("user_attrs_sampled_config".into(), t.config.clone());
        r.insert("user_attrs_scaled_metrics".into(), metrics(&t.scaled_metrics));
        r.insert("user_attrs_software_metrics".into(), metrics(&t.software_metrics));
        for a in &attrs {
            r.insert(format!("system_attrs_{a}"), t.system_attrs.get(*a).cloned().unwrap_or(Value::Null));
        }
        r.insert("state".into(), Value::from(t.state.as_str()));
        r.insert("datetime_start".into(), Value::from(t.start_ms));
        r.insert("datetime_complete".into(), t.complete_ms.map_or(Value::Null, Value::from));
        r.insert("duration".into(), t.duration_ms().map_or(Value::Null, Value::from));
        out.insert(row.to_string(), Value::Object(r));
    }
    Value::Object(out)
}

/// `best.json`: `{"0": {"number", "value": [..], "software_metrics", "hardware_metrics",
/// "scaled_metrics", "sampled_config"}, ...}`.
pub fn best_json(trials: &[TrialRecord], objective: &Objective) -> Value {
    let mut out = Map::new();
    for (i, t) in best_trials(trials, objective).into_iter().enumerate() {
        let mut r = Map::new();
        r.insert("number".into(), Value::from(t.number));
        r.insert("value".into(), Value::Array(t.values.clone().unwrap_or_default().into_iter().map(Value::from).collect()));
        r.insert("software_metrics".into(), metrics_to_json(&t.software_metrics));
        r.insert("hardware_metrics".into(), metrics_to_json(&t.hardware_metrics));
        r.insert("scaled_metrics".into(), metrics_to_json(&t.scaled_metrics));
        r.insert("sampled_config".into(), t.config.clone());
        out.insert(i.to_string(), Value::Object(r));
    }
    Value::Object(out)
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn num(v: Option<f64>) -> String {
    v.map_or(String::new(), |x| if x.is_finite() { x.to_string() } else { String::new() })
}

/// `trials.csv`: number, state, objective values, every metric, every chosen value, violation,
/// start, end and duration (ms).
pub fn trials_csv(trials: &[TrialRecord], objective: &Objective, params: &[ParamDef]) -> String {
    let mut sw: Vec<String> = Vec::new();
    let mut hw: Vec<String> = Vec::new();
    for t in trials {
        for k in t.software_metrics.keys() {
            if !sw.contains(k) {
                sw.push(k.clone());
            }
        }
        for k in t.hardware_metrics.keys() {
            if !hw.contains(k) {
                hw.push(k.clone());
            }
        }
    }
    let vnames: Vec<String> =
        objective.value_names().into_iter().map(|n| if objective.sum_scaled.is_some() { n } else { format!("value_{n}") }).collect();
    let mut header = vec!["number".to_string(), "state".into()];
    header.extend(vnames.iter().cloned());
    header.extend(sw.iter().cloned());
    header.extend(hw.iter().cloned());
    header.extend(params.iter().map(|p| p.name.clone()));
    header.extend(["violation", "datetime_start", "datetime_complete", "duration_ms"].map(String::from));
    let mut out = header.iter().map(|h| csv_field(h)).collect::<Vec<_>>().join(",") + "\n";
    for t in trials {
        let mut row = vec![t.number.to_string(), t.state.as_str().to_string()];
        let vals = t.values.clone().unwrap_or_default();
        row.extend((0..vnames.len()).map(|i| num(vals.get(i).copied())));
        row.extend(sw.iter().map(|k| num(t.software_metrics.get(k).copied())));
        row.extend(hw.iter().map(|k| num(t.hardware_metrics.get(k).copied())));
        for (_, v) in chosen_params(t, params) {
            row.push(match v {
                Value::Null => "NA".into(),
                Value::String(s) => s,
                other => other.to_string(),
            });
        }
        row.push(num(Some(t.violation)));
        row.push(t.start_ms.to_string());
        row.push(t.complete_ms.map_or(String::new(), |c| c.to_string()));
        row.push(t.duration_ms().map_or(String::new(), |d| d.to_string()));
        out += &(row.iter().map(|f| csv_field(f)).collect::<Vec<_>>().join(",") + "\n");
    }
    out
}

/// The value a trial chose for each parameter, by parameter name (`null` where the trial holds
/// none): the value at the parameter's path in the trial's config, or for a tuple or tied
/// parameter, which is not a path of the config, its choice from the parameter's values.
pub fn chosen_params(trial: &TrialRecord, params: &[ParamDef]) -> Vec<(String, Value)> {
    let flat: Vec<(String, Value)> = trial.config.as_object().map(flatten).unwrap_or_default();
    params
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let v = flat.iter().find(|(k, _)| *k == p.name).map(|(_, v)| v.clone()).or_else(|| {
                let x = *trial.point.get(i)?;
                p.values.as_ref()?.get(x as usize).cloned()
            });
            (p.name.clone(), v.unwrap_or(Value::Null))
        })
        .collect()
}

/// Best value so far after each feasible complete trial, for one objective: `(trial number,
/// best value)` in number order.
pub fn best_so_far(trials: &[TrialRecord], objective: &Objective) -> Vec<(u64, f64)> {
    let dir = objective.directions()[0];
    let mut best: Option<f64> = None;
    let mut out = Vec::new();
    for t in trials.iter().filter(|t| t.is_feasible_complete()) {
        let v = t.values.as_ref().and_then(|v| v.first().copied()).unwrap_or(f64::NAN);
        best = Some(match best {
            Some(b) if dir.loss(b) <= dir.loss(v) => b,
            _ => v,
        });
        out.push((t.number, best.unwrap_or(v)));
    }
    out
}

/// Hypervolume of the feasible complete trials so far after each of them (losses, against
/// `reference`), for comparing multi-objective studies.
pub fn hypervolume_so_far(trials: &[TrialRecord], objective: &Objective, reference: &[f64]) -> Vec<(u64, f64)> {
    let mut pts = Vec::new();
    let mut out = Vec::new();
    for t in trials.iter().filter(|t| t.is_feasible_complete()) {
        pts.push(objective.losses(t.values.as_deref().unwrap_or(&[])));
        out.push((t.number, hypervolume(&pts, reference)));
    }
    out
}

/// A reference point covering the feasible trials of several studies (Optuna's rule).
pub fn common_reference(studies: &[&[TrialRecord]], objective: &Objective) -> Vec<f64> {
    let pts: Vec<Vec<f64>> = studies
        .iter()
        .flat_map(|s| s.iter())
        .filter(|t| t.is_feasible_complete())
        .map(|t| objective.losses(t.values.as_deref().unwrap_or(&[])))
        .collect();
    reference_point(&pts)
}

/// Writes `text` to `path` atomically (temporary file, then rename). The temporary name holds
/// the process id, so workers of one study writing the same report do not collide.
pub fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).map_err(|e| SearchError::write(path, e))?;
    std::fs::rename(&tmp, path).map_err(|e| SearchError::write(path, e))
}

/// Writes `log.json`, `best.json` and `trials.csv` into `dir`.
pub fn write_reports(dir: &Path, trials: &[TrialRecord], objective: &Objective, params: &[ParamDef]) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| SearchError::write(dir, e))?;
    let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    write_atomic(&dir.join("log.json"), &pretty(&log_json(trials, objective)))?;
    write_atomic(&dir.join("best.json"), &pretty(&best_json(trials, objective)))?;
    write_atomic(&dir.join("trials.csv"), &trials_csv(trials, objective, params))
}
