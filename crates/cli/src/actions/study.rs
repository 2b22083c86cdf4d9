//! `ch study list|show|export|copy|delete`: the studies of a store (a SQLite file or a PostgreSQL
//! server), read without running anything, so a shared study can be watched while its workers
//! run, exported with the reports and plots `ch search` writes, and moved between stores.

use crate::actions::search::{curve, curve_label, print_best};
use crate::args::{StudyAction, StudyArgs, StudyCopyArgs, StudyDeleteArgs, StudyExportArgs, StudySelectArgs, StudyStoreArgs};
use crate::output::Human;
use anyhow::{bail, Context, Result};
use mase_search::plot::{plot_study, Series, StudyCharts};
use mase_search::report::{best_json, log_json, trials_csv, write_atomic};
use mase_search::{
    best_trials, check_trials, objective_from_spec, open_storage, params_from_spec, ConnectOptions, Objective, Storage, StorageUrl,
    TrialRecord, TrialState,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

pub fn run(args: &StudyArgs) -> Result<()> {
    match &args.action {
        StudyAction::List(a) => list(a),
        StudyAction::Show(a) => show(a),
        StudyAction::Export(a) => export(a),
        StudyAction::Copy(a) => copy(a),
        StudyAction::Delete(a) => delete(a),
    }
}

/// Opens a store to read from: a SQLite file must exist (opening would create an empty one).
fn open(url: &str) -> Result<Box<dyn Storage>> {
    if let StorageUrl::Sqlite(path) = StorageUrl::parse(url)? {
        if !path.is_file() {
            bail!("study storage {}: no such file", path.display());
        }
    }
    open_target(url)
}

/// Opens a store to write to (a new SQLite file is created).
fn open_target(url: &str) -> Result<Box<dyn Storage>> {
    Ok(open_storage(url, &ConnectOptions::default())?)
}

/// The studies to work on: the one named (which must exist), else all of them.
fn select(store: &mut dyn Storage, study: Option<&str>) -> Result<Vec<String>> {
    let names = store.study_names()?;
    match study {
        Some(n) if names.iter().any(|x| x == n) => Ok(vec![n.to_string()]),
        Some(n) => bail!(
            "study `{n}` not found in {}; it holds: {}",
            store.location(),
            if names.is_empty() { "no study".to_string() } else { names.join(", ") }
        ),
        None if names.is_empty() => bail!("{} holds no study", store.location()),
        None => Ok(names),
    }
}

/// A stored study read in full.
struct Loaded {
    name: String,
    spec: Value,
    trials: Vec<TrialRecord>,
    objective: Objective,
}

fn load(store: &mut dyn Storage, name: &str) -> Result<Loaded> {
    let Some(spec) = store.study_spec(name)? else { bail!("study `{name}` not found in {}", store.location()) };
    let objective = objective_from_spec(name, &spec)?;
    let trials = store.trials(name)?;
    let params = Some(params_from_spec(&spec).len()).filter(|&n| n > 0);
    check_trials(name, &trials, params, objective.directions().len())?;
    Ok(Loaded { name: name.to_string(), spec, trials, objective })
}

impl Loaded {
    fn count(&self, state: TrialState) -> usize {
        self.trials.iter().filter(|t| t.state == state).count()
    }

    /// The best value, or the size of the Pareto front, in words.
    fn best_words(&self) -> String {
        let best = best_trials(&self.trials, &self.objective);
        match (best.first(), self.objective.is_multi()) {
            (None, _) => "no feasible trial".into(),
            (Some(t), false) => {
                format!("best {:.4} (trial {})", t.values.as_ref().and_then(|v| v.first().copied()).unwrap_or(f64::NAN), t.number)
            }
            (Some(_), true) => format!("Pareto front of {}", best.len()),
        }
    }

    fn summary(&self) -> Value {
        let mut workers: Vec<&str> = self.trials.iter().filter_map(|t| t.worker.as_deref()).collect();
        workers.sort_unstable();
        workers.dedup();
        json!({
            "study": self.name,
            "space": self.spec.pointer("/space/name"),
            "parameters": params_from_spec(&self.spec).len(),
            "sampler": self.spec.get("sampler"),
            "seed": self.spec.get("seed"),
            "objectives": self.objective.value_names(),
            "directions": self.objective.directions(),
            "trials": self.trials.len(),
            "complete": self.count(TrialState::Complete),
            "running": self.count(TrialState::Running),
            "failed": self.count(TrialState::Fail),
            "workers": workers,
            "best": best_json(&self.trials, &self.objective),
        })
    }
}

fn list(a: &StudyStoreArgs) -> Result<()> {
    let human = Human { json: a.json };
    let mut store = open(&a.storage)?;
    let names = store.study_names()?;
    human.info(format!("{} stud{} in {}", names.len(), if names.len() == 1 { "y" } else { "ies" }, store.location()));
    let mut out = Vec::new();
    for n in &names {
        let s = load(store.as_mut(), n)?;
        human.line(format!(
            "| {} | {} trials: {} complete, {} running, {} failed | {} | {} sampler |",
            s.name,
            s.trials.len(),
            s.count(TrialState::Complete),
            s.count(TrialState::Running),
            s.count(TrialState::Fail),
            s.best_words(),
            s.spec.get("sampler").and_then(Value::as_str).unwrap_or("?"),
        ));
        out.push(s.summary());
    }
    human.result(&json!({"action": "study list", "storage": store.location(), "studies": out}));
    Ok(())
}

fn show(a: &StudySelectArgs) -> Result<()> {
    let human = Human { json: a.store.json };
    let mut store = open(&a.store.storage)?;
    let mut out = Vec::new();
    for n in select(store.as_mut(), a.study.as_deref())? {
        let s = load(store.as_mut(), &n)?;
        let v = s.summary();
        human.info(format!(
            "Study `{}` in {}: space `{}` ({} parameters), {} sampler, seed {}",
            s.name,
            store.location(),
            v["space"].as_str().unwrap_or("?"),
            v["parameters"],
            v["sampler"].as_str().unwrap_or("?"),
            v["seed"]
        ));
        let objectives: Vec<String> =
            s.objective.value_names().iter().zip(s.objective.directions()).map(|(n, d)| format!("{n} ({})", d.as_str())).collect();
        human.info(format!("Objectives: {}", objectives.join(", ")));
        human.info(format!(
            "{} trials: {} complete, {} running, {} failed; workers: {}",
            s.trials.len(),
            v["complete"],
            v["running"],
            v["failed"],
            v["workers"].as_array().map_or(0, |w| w.len())
        ));
        print_best(&human, &best_trials(&s.trials, &s.objective));
        out.push(v);
    }
    human.result(&json!({"action": "study show", "storage": store.location(), "studies": out}));
    Ok(())
}

/// Which files `--format` asks for.
fn formats(f: Option<&str>) -> Result<(bool, bool)> {
    match f.map(str::to_ascii_lowercase).as_deref() {
        None => Ok((true, true)),
        Some("csv") => Ok((true, false)),
        Some("json") => Ok((false, true)),
        Some(other) => bail!("--format `{other}`: expected csv or json"),
    }
}

fn export(a: &StudyExportArgs) -> Result<()> {
    let human = Human { json: a.select.store.json };
    let (csv, js) = formats(a.format.as_deref())?;
    let mut store = open(&a.select.store.storage)?;
    let names = select(store.as_mut(), a.select.study.as_deref())?;
    let mut files: Vec<PathBuf> = Vec::new();
    let mut out = Vec::new();
    for n in &names {
        let s = load(store.as_mut(), n)?;
        // `-o DIR` with `--study` is the folder itself; for every study, one folder each inside.
        let dir = match (&a.output, &a.select.study) {
            (Some(d), Some(_)) => d.clone(),
            (Some(d), None) => d.join(safe_name(n)),
            (None, _) => Path::new("mase_output").join(safe_name(n)).join("software").join("search_ckpts"),
        };
        std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let params = params_from_spec(&s.spec);
        if csv {
            let p = dir.join("trials.csv");
            write_atomic(&p, &trials_csv(&s.trials, &s.objective, &params))?;
            files.push(p);
        }
        if js {
            let pretty = |v: &Value| serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
            for (file, v) in [
                ("log.json", log_json(&s.trials, &s.objective)),
                ("best.json", best_json(&s.trials, &s.objective)),
                ("study.json", json!({"study": s.name, "spec": s.spec, "trials": s.trials})),
            ] {
                let p = dir.join(file);
                write_atomic(&p, &pretty(&v))?;
                files.push(p);
            }
        }
        files.extend(plots(&dir, &s)?);
        out.push(json!({"study": s.name, "dir": abs(&dir), "trials": s.trials.len()}));
    }
    for f in &files {
        human.line(format!("wrote {}", f.display()));
    }
    human.result(&json!({
        "action": "study export",
        "storage": store.location(),
        "studies": out,
        "files": files.iter().map(|f| abs(f)).collect::<Vec<_>>(),
    }));
    Ok(())
}

/// The charts `ch search` draws: best so far (hypervolume for several objectives) and, for two
/// objectives, the Pareto scatter.
fn plots(dir: &Path, s: &Loaded) -> Result<Vec<PathBuf>> {
    let charts = StudyCharts {
        best_so_far_title: &format!("study {}", s.name),
        pareto_title: &format!("study {}: Pareto front", s.name),
        curve_label: &curve_label(&s.objective),
        curve: Series { label: s.name.clone(), points: curve(&s.trials, &s.objective, &[&s.trials]) },
    };
    Ok(plot_study(dir, &charts, &s.trials, &best_trials(&s.trials, &s.objective), &s.objective)?)
}

fn copy(a: &StudyCopyArgs) -> Result<()> {
    let human = Human { json: a.json };
    let mut from = open(&a.from)?;
    let mut to = open_target(&a.to)?;
    let mut out = Vec::new();
    for n in select(from.as_mut(), a.study.as_deref())? {
        let s = load(from.as_mut(), &n)?;
        to.import_study(&n, &s.spec, &s.trials)?;
        human.info(format!("Copied study `{n}` ({} trials) from {} to {}", s.trials.len(), from.location(), to.location()));
        out.push(json!({"study": n, "trials": s.trials.len()}));
    }
    human.result(&json!({"action": "study copy", "from": from.location(), "to": to.location(), "studies": out}));
    Ok(())
}

fn delete(a: &StudyDeleteArgs) -> Result<()> {
    let human = Human { json: a.store.json };
    let mut store = open(&a.store.storage)?;
    let name = select(store.as_mut(), Some(&a.study))?.remove(0);
    let trials = store.delete_study(&name)?;
    human.info(format!("Deleted study `{name}` ({trials} trials) from {}", store.location()));
    human.result(&json!({"action": "study delete", "storage": store.location(), "study": name, "trials": trials}));
    Ok(())
}

/// A study name as a folder name (path separators replaced).
fn safe_name(n: &str) -> String {
    n.chars().map(|c| if c == '/' || c == '\\' || c == '\0' { '_' } else { c }).collect()
}

fn abs(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}
