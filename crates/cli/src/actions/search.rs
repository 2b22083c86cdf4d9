//! `ch search --config X.toml [--load CKPT] [--resume] [--compare-samplers a,b] [--seeds 1,2]`:
//! MASE's search action (doc/mase-semantics.md#search) on the study store of mase-search. Trials
//! are committed to `<project>/software/search_ckpts/study.db` as they finish; `log.json`,
//! `best.json`, `trials.csv` and the plots are written when the search ends. With `--seeds`,
//! each sampler runs once per seed and the comparison shows the mean with a min–max band.
//!
//! With `--storage URL` (or `[search.storage] url`) the process joins a shared study as one of
//! several workers, on this machine or others: the study is created by the first worker, every
//! worker claims trials from it, and each writes the reports of the whole study when it stops.

use crate::args::SearchArgs;
use crate::config::merge_and_warn;
use crate::output::{Human, ProjectDirs};
use crate::plugins::{set_at, Plugins};
use crate::session;
use anyhow::{anyhow, bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use mase_ir::Rng;
use mase_search::compare::{self, SamplerRuns, SeedRun};
use mase_search::plot::{plot_bands, plot_study, BandSeries, Series, StudyCharts};
use mase_search::report::{best_json, best_so_far, common_reference, hypervolume_so_far, write_atomic, write_reports};
use mase_search::{
    best_trials, open_storage, run_study, share_sampler_options, BaseModel, Observer, OpenMode, PassesQuantizer, RunnerEnv, SqliteStorage,
    StopReason, Storage, StorageConfig, TrialRecord,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// The initial-weights stream of `ch train`, so a search without `--load` sees the weights a
/// training run with the same seed starts from.
const INIT_STREAM: u64 = 1;

/// A progress bar per study with the best value so far.
struct Bar(ProgressBar);

impl Observer for Bar {
    fn trial_finished(&self, _trial: &TrialRecord, complete: usize, _target: usize, best: &str) {
        self.0.set_position(complete as u64);
        self.0.set_message(best.to_string());
    }
}

pub fn run(args: &SearchArgs, plugins: &Plugins<'_>) -> Result<()> {
    let human = Human { json: args.run.json };
    let merged = merge_and_warn(&args.run, &human)?;
    let s = merged.settings;
    let mut search = search_table(args, merged.config.search.as_ref())?;
    for (at, value) in plugins.search_overrides {
        set_at(&mut search, at, value.clone())?;
    }
    let storage_cfg = StorageConfig::parse(search.get("storage"))?;
    let shared_url = args.storage.clone().or(storage_cfg.url.clone());
    // A shared store is opened first, so that a wrong URL or an unreachable server fails at once.
    let mut shared: Option<Box<dyn Storage>> = match &shared_url {
        Some(url) => Some(open_storage(url, &storage_cfg.connect_options())?),
        None => None,
    };
    if shared.is_some() && args.run.resume {
        human.warn("--resume has no effect with --storage: a worker always joins the shared study where it stands");
    }
    let dataset = s.dataset.clone().ok_or_else(|| anyhow!("no data set given (see `ch info`)"))?;
    let (base, env, label) = base_model(&s, &dataset, &search, &human)?;
    let dirs = ProjectDirs::new(&s.project_dir, s.project.as_deref(), &label, &s.task, &dataset);
    let out_dir = dirs.software().join("search_ckpts");
    std::fs::create_dir_all(&out_dir).with_context(|| format!("cannot create {}", out_dir.display()))?;
    let db = out_dir.join("study.db");
    let project = dirs.root.file_name().and_then(|n| n.to_str()).unwrap_or("study").to_string();
    let base_name = args.study.clone().or(storage_cfg.study.clone()).unwrap_or(project);
    let comparison = Comparison::new(args, &search, &human)?;

    let mut results = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    // Per sampler: its name and, per seed, the seed, the study name and the trials.
    let mut studies: Vec<(String, Vec<(u64, String, Vec<TrialRecord>)>)> = Vec::new();
    let mut objective = None;
    for (k, sampler) in comparison.samplers.iter().enumerate() {
        let search = comparison.config_of(&search, k, sampler.as_deref());
        let assembled = mase_search::assemble_search_with(&search, base.clone(), Arc::new(PassesQuantizer), &env, plugins.runners)?;
        if k == 0 {
            for w in &assembled.config.warnings {
                human.warn(w);
            }
        }
        let sampler_name = assembled.sampler.name();
        let mut runs = Vec::new();
        for seed_override in &comparison.seeds {
            let seed = seed_override.or(assembled.config.setup.seed).unwrap_or(s.seed);
            let (name, dir) = match (comparison.compare, seed_override) {
                (false, _) => (base_name.clone(), out_dir.clone()),
                (true, None) => (format!("{base_name}-{sampler_name}"), out_dir.join("compare").join(sampler_name)),
                (true, Some(x)) => {
                    (format!("{base_name}-{sampler_name}-seed{x}"), out_dir.join("compare").join(sampler_name).join(format!("seed{x}")))
                }
            };
            let mut local;
            let (store, mode): (&mut dyn Storage, OpenMode) = match shared.as_mut() {
                Some(st) => (st.as_mut(), OpenMode::Join),
                None => {
                    local = SqliteStorage::open(&db)?;
                    let mode = local_mode(args.run.resume, &mut local, &name, results.len())?;
                    (&mut local, mode)
                }
            };
            let study =
                StudyRun { assembled: &assembled, name: &name, dir: &dir, seed, label: &label, threads: s.threads, storage: &storage_cfg };
            let (result, trials) = run_one_study(&study, store, mode, &human, &mut files)?;
            results.push(result);
            runs.push((seed, name, trials));
        }
        studies.push((sampler_name.to_string(), runs));
        objective = Some(assembled.config.objective.clone());
    }
    if comparison.compare {
        let Some(objective) = objective else { bail!("no sampler to compare") };
        files.extend(write_comparison(&out_dir.join("compare_samplers"), &label, &studies, &objective, &args.seeds)?);
    }
    for f in &files {
        human.line(format!("wrote {}", f.display()));
    }
    human.info("Search is completed");
    human.result(&json!({
        "action": "search",
        "model": label,
        "dataset": dataset,
        "study_db": match &shared_url {
            Some(_) => json!(shared.as_ref().map(|st| st.location())),
            None => json!(abs(&db)),
        },
        "studies": results,
        "plots": files.iter().map(|f| abs(f)).collect::<Vec<_>>(),
    }));
    Ok(())
}

/// How a study of the project's own store opens: `--resume` continues the stored study. The
/// studies of a comparison run one after the other, so a study that a killed comparison never
/// reached starts fresh; the run's first study must be stored, or there is nothing to resume
/// (which [`OpenMode::Resume`] reports, naming the store and the study).
fn local_mode(resume: bool, store: &mut SqliteStorage, name: &str, studies_before: usize) -> Result<OpenMode> {
    if resume && studies_before > 0 && store.study_spec(name)?.is_none() {
        return Ok(OpenMode::Fresh);
    }
    Ok(if resume { OpenMode::Resume } else { OpenMode::Fresh })
}

/// The `[search]` table of the config with the command line's overrides of its setup
/// (`--n-trials`, `--n-jobs`, `--sampler`).
fn search_table(args: &SearchArgs, table: Option<&toml::Table>) -> Result<Value> {
    let table = table.ok_or_else(|| match &args.run.config {
        None => anyhow!("ch search needs --config FILE.toml with a [search] table"),
        Some(p) => anyhow!("config {}: no [search] table (ch search needs [search.search_space] and [search.strategy])", p.display()),
    })?;
    let mut search: Value = serde_json::to_value(table)?;
    if let Some(setup) = search.pointer_mut("/strategy/setup").and_then(Value::as_object_mut) {
        if let Some(n) = args.n_trials {
            setup.insert("n_trials".into(), json!(n));
        }
        if let Some(n) = args.n_jobs {
            setup.insert("n_jobs".into(), json!(n));
        }
        if let Some(x) = &args.sampler {
            setup.insert("sampler".into(), json!(x));
        }
    }
    Ok(search)
}

/// The model every trial starts from (the checkpoint of `--load`, else the initial weights of the
/// seed), the runners' environment, and the model's label.
fn base_model(s: &crate::config::Settings, dataset: &str, search: &Value, human: &Human) -> Result<(Arc<BaseModel>, RunnerEnv, String)> {
    let splits = session::load_data(s, dataset)?;
    let ctx = session::model_context(&splits);
    let (mut graph, label) = session::resolve_graph(s, &ctx)?;
    // Spaces that change layer widths follow shapes from the input, as MASE's graph spaces do
    // after add_common_metadata.
    mase_search::space::record_input_shape(&mut graph, &splits.info.sample_shape);
    let params = match &s.load_name {
        Some(path) => {
            let ck = session::read_checkpoint(path)?;
            session::check_params_fit(&graph, &ck.params, path)?;
            human.info(format!("Loaded model from {}", path.display()));
            ck.params
        }
        None => {
            // With `basic_train` each candidate is trained first, so initial weights are the usual start.
            let trains = search.pointer("/strategy/sw_runner/basic_train").is_some();
            if trains {
                human.info("no --load: each candidate is trained by basic_train from the initial weights");
            } else {
                human.warn("no --load: the search measures the untrained initial weights (train first and pass --load best.ckpt)");
            }
            session::initial_params(s, &graph, &mut Rng::new(s.seed).fork(INIT_STREAM))?
        }
    };
    let base = Arc::new(BaseModel { graph, params: Arc::new(params) });
    let env = RunnerEnv {
        splits: Arc::new(splits),
        batch_size: s.batch_size,
        learning_rate: s.learning_rate,
        seed: s.seed,
        accelerator: s.accelerator.clone(),
    };
    Ok((base, env, label))
}

/// Which studies a search runs: `--compare-samplers` runs each named sampler, `--seeds` each
/// sampler once per seed; either makes a comparison with its chart, CSV and JSON.
struct Comparison {
    compare: bool,
    /// `None`: the configured sampler.
    samplers: Vec<Option<String>>,
    /// `None`: the configured seed.
    seeds: Vec<Option<u64>>,
    /// Each compared sampler's share of `sampler_options` (the configured sampler alone gets it
    /// from the assembled search).
    sampler_options: Option<Vec<Value>>,
}

impl Comparison {
    fn new(args: &SearchArgs, search: &Value, human: &Human) -> Result<Comparison> {
        let compare = !args.compare_samplers.is_empty() || !args.seeds.is_empty();
        let samplers: Vec<Option<String>> = if args.compare_samplers.is_empty() {
            vec![None]
        } else {
            args.compare_samplers.iter().map(|x| Some(x.trim().to_string())).collect()
        };
        if let Some(twice) = args.seeds.iter().enumerate().find_map(|(i, x)| args.seeds[..i].contains(x).then_some(x)) {
            bail!("--seeds: seed {twice} is given twice (each seed is one study per sampler)");
        }
        let seeds: Vec<Option<u64>> = if args.seeds.is_empty() { vec![None] } else { args.seeds.iter().map(|&x| Some(x)).collect() };
        let sampler_options = if args.compare_samplers.is_empty() {
            None
        } else {
            let names: Vec<&str> = samplers.iter().flatten().map(String::as_str).collect();
            let shared = share_sampler_options(search.pointer("/strategy/sampler_options").unwrap_or(&Value::Null), &names)?;
            for w in &shared.warnings {
                human.warn(w);
            }
            Some(shared.options)
        };
        Ok(Comparison { compare, samplers, seeds, sampler_options })
    }

    /// The `[search]` table for the `k`-th sampler: its name and its share of the options.
    fn config_of(&self, search: &Value, k: usize, sampler: Option<&str>) -> Value {
        let mut search = search.clone();
        if let (Some(x), Some(setup)) = (sampler, search.pointer_mut("/strategy/setup").and_then(Value::as_object_mut)) {
            setup.insert("sampler".into(), json!(x));
        }
        if let (Some(options), Some(strategy)) = (&self.sampler_options, search.pointer_mut("/strategy").and_then(Value::as_object_mut)) {
            match &options[k] {
                Value::Null => strategy.remove("sampler_options"),
                mine => strategy.insert("sampler_options".into(), mine.clone()),
            };
        }
        search
    }
}

/// One study of a search: what to run and where its reports go.
struct StudyRun<'a> {
    assembled: &'a mase_search::SearchSetup,
    name: &'a str,
    dir: &'a Path,
    seed: u64,
    label: &'a str,
    threads: usize,
    storage: &'a StorageConfig,
}

/// Runs one study with a progress bar, writes its reports and plots (appended to `files`), and
/// returns its entry of the JSON result and its trials.
fn run_one_study(
    study: &StudyRun<'_>,
    store: &mut dyn Storage,
    mode: OpenMode,
    human: &Human,
    files: &mut Vec<PathBuf>,
) -> Result<(Value, Vec<TrialRecord>)> {
    let (assembled, cfg, label, dir) = (study.assembled, &study.assembled.config, study.label, study.dir);
    human.info(format!(
        "Searching `{}` of model '{label}' with the {} sampler: {} parameters, {} trials, {} job(s); study `{}` in {}{}",
        assembled.space.name(),
        assembled.sampler.name(),
        assembled.space.params().len(),
        cfg.setup.n_trials,
        cfg.setup.n_jobs,
        study.name,
        store.location(),
        if mode == OpenMode::Join { format!(" (joined as worker {})", mase_search::storage::worker_id()) } else { String::new() }
    ));
    let bar = if human.json { ProgressBar::hidden() } else { ProgressBar::new(cfg.setup.n_trials as u64) };
    if let Ok(style) = ProgressStyle::with_template("Trials [{bar:30}] {pos}/{len} {msg} [{elapsed_precise}]") {
        bar.set_style(style.progress_chars("=> "));
    }
    let setup = mase_search::StudySetup {
        name: study.name.to_string(),
        space: assembled.space.as_ref(),
        sampler: assembled.sampler.as_ref(),
        objective: &cfg.objective,
        runners: &assembled.runners,
        n_trials: cfg.setup.n_trials,
        n_jobs: cfg.setup.n_jobs,
        timeout: cfg.setup.timeout.map(Duration::from_secs_f64),
        seed: study.seed,
        threads: study.threads,
        liveness: study.storage.liveness(),
    };
    let observer = Bar(bar.clone());
    let t0 = std::time::Instant::now();
    let location = store.location();
    let out = run_study(&setup, store, mode, &observer);
    let seconds = t0.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let out = out?;
    if out.interrupted > 0 {
        human.info(format!("{} trial(s) interrupted by the previous run were marked FAIL and their points freed", out.interrupted));
    }
    if out.discarded > 0 {
        human.warn(format!(
            "{} trial(s) of this worker were declared stale by another worker (no heartbeat for {} s) and re-run there; their results here were dropped",
            out.discarded, study.storage.stale_after
        ));
    }
    match out.stop {
        StopReason::Exhausted => human.info("The sampler has visited every point of the space"),
        StopReason::Timeout => human.info("The search stopped at its timeout"),
        StopReason::Completed => {}
    }
    write_reports(dir, &out.trials, &cfg.objective, assembled.space.params())?;
    let best = best_trials(&out.trials, &cfg.objective);
    print_best(human, &best);
    files.extend(study_plots(study, &out.trials, &best)?);
    let complete = out.trials.iter().filter(|t| t.state == mase_search::TrialState::Complete).count();
    let result = json!({
        "sampler": assembled.sampler.name(),
        "seed": study.seed,
        "study": study.name,
        "trials": out.trials.len(),
        "complete": complete,
        "stop": format!("{:?}", out.stop).to_lowercase(),
        "seconds": seconds,
        "storage": location,
        "best": best_json(&out.trials, &cfg.objective),
        "dir": abs(dir),
    });
    Ok((result, out.trials))
}

/// Plots of one study: the best value so far (hypervolume for several objectives) and, for two
/// objectives, the Pareto scatter.
fn study_plots(study: &StudyRun<'_>, trials: &[TrialRecord], best: &[&TrialRecord]) -> Result<Vec<PathBuf>> {
    let (assembled, cfg, label, dir) = (study.assembled, &study.assembled.config, study.label, study.dir);
    let sampler = assembled.sampler.name();
    let charts = StudyCharts {
        best_so_far_title: &format!("{label} ({sampler})"),
        pareto_title: &format!("{label}: Pareto front"),
        curve_label: &curve_label(&cfg.objective),
        curve: Series { label: sampler.into(), points: curve(trials, &cfg.objective, &[trials]) },
    };
    Ok(plot_study(dir, &charts, trials, best, &cfg.objective)?)
}

/// The comparison of samplers: `<stem>.{png,svg}` with each sampler's mean best-so-far curve
/// (hypervolume for several objectives) over its min–max band across seeds, and the numbers in
/// `<stem>.csv` and `<stem>.json`. Returns the files written.
fn write_comparison(
    stem: &Path,
    label: &str,
    studies: &[(String, Vec<(u64, String, Vec<TrialRecord>)>)],
    objective: &mase_search::Objective,
    seeds: &[u64],
) -> Result<Vec<PathBuf>> {
    let all: Vec<&[TrialRecord]> = studies.iter().flat_map(|(_, runs)| runs.iter().map(|(_, _, t)| t.as_slice())).collect();
    let runs: Vec<SamplerRuns> = studies
        .iter()
        .map(|(sampler, runs)| SamplerRuns {
            sampler: sampler.clone(),
            runs: runs
                .iter()
                .map(|(seed, study, trials)| SeedRun { seed: *seed, study: study.clone(), curve: curve(trials, objective, &all) })
                .collect(),
        })
        .collect();
    let series: Vec<BandSeries> = compare::bands(&runs)
        .into_iter()
        .map(|(label, points)| BandSeries { label, points: points.iter().map(|p| (p.x, p.mean, p.min, p.max)).collect() })
        .collect();
    let title = match seeds {
        [] | [_] => format!("{label}: samplers compared"),
        _ => format!("{label}: samplers compared over seeds {}", seeds.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")),
    };
    let value = curve_label(objective);
    let mut files = plot_bands(stem, &title, &value, &series)?;
    let (csv, json_path) = (stem.with_extension("csv"), stem.with_extension("json"));
    write_atomic(&csv, &compare::compare_csv(&runs))?;
    write_atomic(&json_path, &serde_json::to_string_pretty(&compare::compare_json(&runs, &value))?)?;
    files.extend([csv, json_path]);
    Ok(files)
}

fn abs(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

pub(crate) fn curve_label(objective: &mase_search::Objective) -> String {
    if objective.is_multi() {
        "hypervolume of the trials so far".into()
    } else {
        "best value so far".into()
    }
}

/// Best value so far, or for several objectives the hypervolume so far (against a reference
/// point shared by every study drawn on the same chart).
pub(crate) fn curve(trials: &[TrialRecord], objective: &mase_search::Objective, all: &[&[TrialRecord]]) -> Vec<(f64, f64)> {
    let pts = if objective.is_multi() {
        hypervolume_so_far(trials, objective, &common_reference(all, objective))
    } else {
        best_so_far(trials, objective)
    };
    pts.into_iter().map(|(n, v)| (n as f64, v)).collect()
}

pub(crate) fn print_best(human: &Human, best: &[&TrialRecord]) {
    human.info("Best trial(s):");
    let fmt = |m: &mase_search::Metrics| m.iter().map(|(k, v)| format!("{k}={v:.3}")).collect::<Vec<_>>().join(", ");
    for t in best {
        human.line(format!(
            "| {:>5} | {} | {} | {} |",
            t.number,
            t.values.as_ref().map(|v| v.iter().map(|x| format!("{x:.4}")).collect::<Vec<_>>().join(", ")).unwrap_or_default(),
            fmt(&t.software_metrics),
            fmt(&t.hardware_metrics)
        ));
    }
}
