#![allow(dead_code)]
//! Helpers shared by the search tests: models, data, configs and a synthetic space.

use mase_io::{DataOptions, Splits};
use mase_ir::{Graph, Rng};
use mase_search::objective::Objective;
use mase_search::runner::{RunContext, Stage};
use mase_search::space::{BaseModel, Candidate, SpaceInputs};
use mase_search::storage::OpenMode;
use mase_search::{
    build_runners, build_sampler, build_space, run_study, MemoryStorage, Metrics, ParamDef, ParamKind, Result, Runner, RunnerEnv, Sampler,
    SearchConfig, SearchSpace, Silent, StudyOutcome, StudySetup,
};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[path = "../../../io/tests/common/scratch.rs"]
mod scratch;
pub use scratch::scratch;

mod postgres_server;
pub use postgres_server::postgres_url;

/// A study named `name` of `n_trials` trials on one worker thread, default liveness, no timeout.
pub fn one_thread_setup<'a>(
    name: &str,
    space: &'a dyn SearchSpace,
    sampler: &'a dyn Sampler,
    objective: &'a Objective,
    runners: &'a [Box<dyn Runner>],
    n_trials: usize,
    seed: u64,
) -> StudySetup<'a> {
    StudySetup {
        name: name.into(),
        space,
        sampler,
        objective,
        runners,
        n_trials,
        n_jobs: 1,
        timeout: None,
        seed,
        threads: 1,
        liveness: Default::default(),
    }
}

/// A study `name` of `n_trials` trials of brute force (with `options`) over `space`, measured by
/// the runners and objective of `cfg` on `splits`, in memory, on one worker thread.
pub fn brute_force(
    name: &str,
    space: &dyn SearchSpace,
    cfg: &SearchConfig,
    options: &Value,
    splits: Splits,
    n_trials: usize,
    seed: u64,
) -> StudyOutcome {
    let sampler = build_sampler("brute", options).unwrap();
    let runners = build_runners(&cfg.sw_runners, &cfg.hw_runners, &env(splits)).unwrap();
    let setup = one_thread_setup(name, space, sampler.as_ref(), &cfg.objective, &runners, n_trials, seed);
    run_study(&setup, &mut MemoryStorage::new(), OpenMode::Fresh, &Silent).unwrap()
}

pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repo root")
}

/// The jsc fixture (MASE's HDF5 format) loaded from a temporary data dir. Each call gets its own
/// folder: tests run on parallel threads, and a shared one would be emptied under another's read.
pub fn jsc_splits() -> Splits {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let d = scratch(&format!("jsc-data-{}", CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst)));
    std::fs::create_dir_all(d.join("jsc")).unwrap();
    std::fs::copy(repo_root().join("crates/io/tests/fixtures/jsc/jsc_fixture.h5"), d.join("jsc/jsc_fixture.h5")).unwrap();
    mase_io::load_dataset("jsc", &DataOptions { data_dir: Some(d.to_path_buf()), ..Default::default() }).expect("jsc fixture")
}

/// The MNIST test images shipped in the repo.
pub fn mnist_splits() -> Splits {
    mase_io::load_dataset("mnist", &DataOptions { data_dir: Some(repo_root().join("data")), ..Default::default() }).expect("shipped mnist")
}

/// A zoo model for a data set, with seeded initial weights.
pub fn base_model(name: &str, splits: &Splits, seed: u64) -> Arc<BaseModel> {
    let ctx = mase_zoo::ModelContext::new(splits.info.sample_shape.clone(), splits.info.num_classes);
    let graph: Graph = mase_zoo::build_model(name, &ctx).expect("zoo model");
    let params = mase_runtime::init_params(&graph, &mut Rng::new(seed));
    Arc::new(BaseModel { graph, params: Arc::new(params) })
}

pub fn env(splits: Splits) -> RunnerEnv {
    RunnerEnv { splits: Arc::new(splits), batch_size: 512, learning_rate: 1e-2, seed: 0, accelerator: Default::default() }
}

/// The `[search]` table of a config file under `configs/examples`.
pub fn example_search(file: &str) -> Value {
    let text = std::fs::read_to_string(repo_root().join("configs/examples").join(file)).unwrap();
    let t: toml::Table = text.parse().unwrap();
    serde_json::to_value(&t["search"]).unwrap()
}

/// The `[search]` table of a config file under `configs/`.
pub fn config_search(file: &str) -> Value {
    let text = std::fs::read_to_string(repo_root().join("configs").join(file)).unwrap();
    let t: toml::Table = text.parse().unwrap();
    serde_json::to_value(&t["search"]).unwrap()
}

/// The mixed-precision space of a `[search]` table on a base model.
pub fn space(search: &Value, base: Arc<BaseModel>) -> Result<Box<dyn SearchSpace>> {
    build_space(&SpaceInputs { config: &search["search_space"], base, quantizer: Arc::new(mase_search::PassesQuantizer) })
}

/// A synthetic space of `dims` ordered choices of `n` values; its candidate carries nothing.
pub struct Grid {
    pub params: Vec<ParamDef>,
}

impl Grid {
    pub fn new(dims: usize, n: usize) -> Grid {
        Grid { params: (0..dims).map(|i| ParamDef::new(format!("x{i}"), ParamKind::Index { choices: n })).collect() }
    }
}

impl SearchSpace for Grid {
    fn name(&self) -> &str {
        "test/grid"
    }
    fn params(&self) -> &[ParamDef] {
        &self.params
    }
    fn to_config(&self, point: &[f64]) -> Result<Value> {
        Ok(json!(point))
    }
    fn build(&self, _config: &Value) -> Result<Candidate> {
        Ok(Candidate { graph: Graph::new(), params: Arc::new(Default::default()) })
    }
}

/// A runner computing the quadratic from the candidate's config, which the test space stores in
/// the graph's metadata.
pub struct QuadraticRunner {
    pub target: Vec<f64>,
}

impl Runner for QuadraticRunner {
    fn name(&self) -> &'static str {
        "quadratic"
    }
    fn stage(&self) -> Stage {
        Stage::Software
    }
    fn reports(&self) -> Vec<&'static str> {
        vec!["f"]
    }
    fn run(&self, cand: &mut Candidate, _cx: &RunContext) -> Result<Metrics> {
        let x: Vec<f64> = cand.graph.meta.common.get("point").and_then(|v| serde_json::from_value(v.clone()).ok()).unwrap_or_default();
        let mut m = Metrics::new();
        m.insert("f".into(), x.iter().zip(&self.target).map(|(a, b)| (a - b) * (a - b)).sum());
        m.insert("g".into(), x.iter().sum());
        Ok(m)
    }
}

/// [`Grid`] whose candidates carry their point in the graph metadata, for [`QuadraticRunner`].
pub struct PointGrid(pub Grid);

impl SearchSpace for PointGrid {
    fn name(&self) -> &str {
        "test/point_grid"
    }
    fn params(&self) -> &[ParamDef] {
        &self.0.params
    }
    fn to_config(&self, point: &[f64]) -> Result<Value> {
        Ok(json!({"x": point}))
    }
    fn build(&self, config: &Value) -> Result<Candidate> {
        let mut graph = Graph::new();
        graph.meta.common.insert("point".into(), config["x"].clone());
        Ok(Candidate { graph, params: Arc::new(Default::default()) })
    }
}

/// A study store a storage test runs against.
#[derive(Clone, Debug)]
pub enum Backend {
    Sqlite(PathBuf),
    Postgres(String),
}

impl Backend {
    /// SQLite (a fresh file) always, and PostgreSQL when the test server is there.
    pub fn all(test: &str) -> Vec<Backend> {
        let mut v = vec![Backend::Sqlite(scratch(test).persist().join("study.db"))];
        v.extend(postgres_url(test).map(Backend::Postgres));
        v
    }

    /// A new connection (each worker of a test opens its own).
    pub fn open(&self) -> Box<dyn mase_search::Storage> {
        mase_search::open_storage(&self.url(), &Default::default()).unwrap_or_else(|e| panic!("{self:?}: {e}"))
    }

    pub fn url(&self) -> String {
        match self {
            Backend::Sqlite(p) => p.display().to_string(),
            Backend::Postgres(u) => u.clone(),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Backend::Sqlite(_) => "sqlite",
            Backend::Postgres(_) => "postgres",
        }
    }

    /// Moves the last heartbeat of trial `number` of `study` back by `by`, as if its worker had
    /// been silent that long, so that staleness is tested without waiting for the clock. Works on
    /// the tables directly (the stores have no such operation); see `storage/sqlite.rs` and
    /// `storage/postgres.rs` for the schemas.
    pub fn backdate_heartbeat(&self, study: &str, number: u64, by: Duration) {
        let (number, by_ms) = (number as i64, by.as_millis() as i64);
        let updated = match self {
            Backend::Sqlite(path) => rusqlite::Connection::open(path)
                .unwrap()
                .execute(
                    "UPDATE trials SET heartbeat_ms = heartbeat_ms - ?3
                     WHERE study_id = (SELECT id FROM studies WHERE name = ?1) AND number = ?2",
                    rusqlite::params![study, number, by_ms],
                )
                .unwrap() as u64,
            // PostgreSQL keeps the heartbeat as a server timestamp (`heartbeat TIMESTAMPTZ`).
            Backend::Postgres(url) => postgres::Client::connect(url, postgres::NoTls)
                .unwrap()
                .execute(
                    "UPDATE mase_trials SET heartbeat = heartbeat - ($3::float8 * interval '1 millisecond')
                     WHERE study_id = (SELECT id FROM mase_studies WHERE name = $1) AND number = $2",
                    &[&study, &number, &(by_ms as f64)],
                )
                .unwrap(),
        };
        assert_eq!(updated, 1, "{}: trial {number} of study `{study}` backdated", self.name());
    }
}

/// A study name no other test (or earlier run against the same server) uses.
pub fn unique_study(test: &str) -> String {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    format!("{test}-{}-{nanos}", std::process::id())
}
