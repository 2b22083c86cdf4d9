//! The `[search]` table of a MASE config (doc/mase-semantics.md#search-config), parsed and checked. Keys
//! MASE's example files carry but MASE ignores (`setup.model_parallel`, `setup.runner_style`,
//! `pkl_ckpt`, `save_every_n_trials`) are accepted and reported as warnings; any other unknown
//! key is an error naming it.

use crate::objective::{Constraint, MetricSpec, Objective};
use crate::{Direction, Result, SearchError};
use serde_json::{Map, Value};

/// The most trials a process runs at once (`n_jobs`), as many threads.
pub const MAX_JOBS: usize = 256;

/// A parsed `[search]` table.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchConfig {
    /// `[search.search_space]`, read by the space's constructor.
    pub space: Value,
    /// `[search.strategy.sw_runner.*]`, in file order.
    pub sw_runners: Vec<(String, Value)>,
    /// `[search.strategy.hw_runner.*]`, in file order.
    pub hw_runners: Vec<(String, Value)>,
    pub setup: Setup,
    pub objective: Objective,
    /// `[search.strategy.sampler_options]` (or `Null`).
    pub sampler_options: Value,
    /// `search.strategy.eval_mode` (MASE's; batch norm and dropout in evaluation behaviour).
    pub eval_mode: bool,
    /// `[search.storage]` (mase-rs's): a shared study store and the heartbeat settings.
    pub storage: StorageConfig,
    /// Keys that were accepted but have no effect.
    pub warnings: Vec<String>,
}

/// `[search.strategy.setup]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Setup {
    pub n_jobs: usize,
    pub n_trials: usize,
    /// Seconds after which no new trial starts.
    pub timeout: Option<f64>,
    pub sampler: String,
    /// The sampler seed; `None` uses the run's `seed`.
    pub seed: Option<u64>,
}

/// `[search.storage]`: where the study lives (`url`, `study`) and how workers show they are
/// alive (`stale_after`, `heartbeat_interval`, in seconds), and how long to wait for a server.
#[derive(Clone, Debug, PartialEq)]
pub struct StorageConfig {
    /// `postgresql://...`, `sqlite:///...` or a path; `None`: the project's `study.db`.
    pub url: Option<String>,
    /// The study to join (default: the project name).
    pub study: Option<String>,
    /// Seconds without a heartbeat after which a running trial is failed and its point re-queued.
    pub stale_after: f64,
    /// Seconds between heartbeats (default: a quarter of `stale_after`).
    pub heartbeat_interval: f64,
    /// Seconds to wait for a server to answer.
    pub connect_timeout: f64,
}

impl Default for StorageConfig {
    fn default() -> StorageConfig {
        StorageConfig { url: None, study: None, stale_after: 60.0, heartbeat_interval: 15.0, connect_timeout: 5.0 }
    }
}

impl StorageConfig {
    /// Parses `[search.storage]` (absent: the defaults).
    pub fn parse(v: Option<&Value>) -> Result<StorageConfig> {
        let at = "search.storage";
        let Some(m) = table(v, at)? else { return Ok(StorageConfig::default()) };
        check_keys(m, at, &["url", "study", "stale_after", "heartbeat_interval", "connect_timeout"])?;
        let text = |k: &str| -> Result<Option<String>> {
            m.get(k)
                .map(|v| {
                    v.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| SearchError::config(format!("{at}.{k}"), format!("must be a string, got {v}")))
                })
                .transpose()
        };
        let secs = |k: &str| -> Result<Option<f64>> {
            m.get(k)
                .map(|v| {
                    v.as_f64()
                        .filter(|x| x.is_finite() && *x > 0.0)
                        .ok_or_else(|| SearchError::config(format!("{at}.{k}"), format!("must be a positive number of seconds, got {v}")))
                })
                .transpose()
        };
        let d = StorageConfig::default();
        let stale_after = secs("stale_after")?.unwrap_or(d.stale_after);
        let heartbeat_interval = secs("heartbeat_interval")?.unwrap_or(stale_after / 4.0);
        if heartbeat_interval >= stale_after {
            return Err(SearchError::config(
                format!("{at}.heartbeat_interval"),
                format!("must be shorter than stale_after ({stale_after} s), got {heartbeat_interval}"),
            ));
        }
        Ok(StorageConfig {
            url: text("url")?,
            study: text("study")?,
            stale_after,
            heartbeat_interval,
            connect_timeout: secs("connect_timeout")?.unwrap_or(d.connect_timeout),
        })
    }

    /// The heartbeat settings of a study run.
    pub fn liveness(&self) -> crate::study::Liveness {
        crate::study::Liveness {
            stale_after: Some(std::time::Duration::from_secs_f64(self.stale_after)),
            heartbeat_interval: std::time::Duration::from_secs_f64(self.heartbeat_interval),
        }
    }

    /// How to reach a server.
    pub fn connect_options(&self) -> crate::storage::ConnectOptions {
        crate::storage::ConnectOptions {
            connect_timeout: std::time::Duration::from_secs_f64(self.connect_timeout),
            env: crate::storage::PgEnv::from_process(),
        }
    }
}

fn get<'a>(m: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    m.get(key)
}

fn table<'a>(v: Option<&'a Value>, at: &str) -> Result<Option<&'a Map<String, Value>>> {
    match v {
        None => Ok(None),
        Some(Value::Object(m)) => Ok(Some(m)),
        Some(other) => Err(SearchError::config(at, format!("must be a table, got {other}"))),
    }
}

fn check_keys(m: &Map<String, Value>, at: &str, allowed: &[&str]) -> Result<()> {
    reject_unknown_keys(m, at, allowed, &format!("unknown key (expected one of: {})", allowed.join(", ")))
}

/// Fails on the first key of the table `m` (found at `at`) that `allowed` does not list, with the
/// error at `{at}.{key}` and the reason `reason`. Shared by the config, runner, sampler and space
/// tables, whose reasons word the allowed keys each their own way.
pub(crate) fn reject_unknown_keys(m: &Map<String, Value>, at: &str, allowed: &[&str], reason: &str) -> Result<()> {
    match m.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) => Err(SearchError::config(format!("{at}.{k}"), reason)),
        None => Ok(()),
    }
}

fn uint(v: &Value, at: &str) -> Result<u64> {
    v.as_u64().ok_or_else(|| SearchError::config(at, format!("must be a non-negative integer, got {v}")))
}

impl SearchConfig {
    /// Parses the `[search]` table (as JSON; see [`SearchConfig::from_toml`]).
    pub fn parse(search: &Value) -> Result<SearchConfig> {
        let root = table(Some(search), "search")?.ok_or_else(|| SearchError::config("search", "missing"))?;
        check_keys(root, "search", &["search_space", "strategy", "storage"])?;
        let storage = StorageConfig::parse(get(root, "storage"))?;
        let space = get(root, "search_space")
            .cloned()
            .ok_or_else(|| SearchError::config("search.search_space", "missing: name the space to search"))?;
        table(Some(&space), "search.search_space")?;
        let strategy = table(get(root, "strategy"), "search.strategy")?.ok_or_else(|| SearchError::config("search.strategy", "missing"))?;
        check_keys(
            strategy,
            "search.strategy",
            &["name", "eval_mode", "sw_runner", "hw_runner", "setup", "metrics", "constraints", "sampler_options"],
        )?;
        let mut warnings = Vec::new();
        check_strategy_name(strategy)?;
        let eval_mode = parse_eval_mode(strategy, &mut warnings)?;
        let sw_runners = runner_tables(strategy, "sw_runner")?;
        let hw_runners = runner_tables(strategy, "hw_runner")?;
        let (setup, sum_scaled) = parse_setup(strategy, &mut warnings)?;
        let metrics = parse_metrics(strategy, sum_scaled.is_some())?;
        let constraints = parse_constraints(strategy)?;
        Ok(SearchConfig {
            space,
            sw_runners,
            hw_runners,
            setup,
            objective: Objective::new(metrics, sum_scaled, constraints),
            sampler_options: get(strategy, "sampler_options").cloned().unwrap_or(Value::Null),
            eval_mode,
            storage,
            warnings,
        })
    }

    /// Parses the `[search]` table of a TOML config.
    pub fn from_toml(search: &toml::Table) -> Result<SearchConfig> {
        let v = serde_json::to_value(search).map_err(|e| SearchError::config("search", e.to_string()))?;
        SearchConfig::parse(&v)
    }
}

/// `search.strategy.name`: absent, or MASE's `optuna` (or `mase`).
fn check_strategy_name(strategy: &Map<String, Value>) -> Result<()> {
    match get(strategy, "name").map(|v| v.as_str()) {
        None | Some(Some("optuna")) | Some(Some("mase")) => Ok(()),
        Some(other) => Err(SearchError::config(
            "search.strategy.name",
            format!(
                "{} is not a strategy: `optuna` (MASE's name; the samplers are built in) is the only one",
                other.map_or("a non-string".into(), |s| format!("`{s}`"))
            ),
        )),
    }
}

/// `search.strategy.eval_mode` (default true); false is accepted with a warning.
fn parse_eval_mode(strategy: &Map<String, Value>, warnings: &mut Vec<String>) -> Result<bool> {
    let eval_mode = match get(strategy, "eval_mode") {
        None => true,
        Some(v) => v.as_bool().ok_or_else(|| SearchError::config("search.strategy.eval_mode", "must be true or false"))?,
    };
    if !eval_mode {
        warnings.push(
            "search.strategy.eval_mode = false: candidates are still evaluated in evaluation mode (batch norm uses running statistics)"
                .into(),
        );
    }
    Ok(eval_mode)
}

/// The runner tables under `search.strategy.{key}`, in file order.
fn runner_tables(strategy: &Map<String, Value>, key: &str) -> Result<Vec<(String, Value)>> {
    Ok(table(get(strategy, key), &format!("search.strategy.{key}"))?
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default())
}

fn parse_direction(v: &Value, at: &str) -> Result<Direction> {
    v.as_str().and_then(Direction::parse).ok_or_else(|| SearchError::config(at, format!("must be \"maximize\" or \"minimize\", got {v}")))
}

/// `[search.strategy.setup]`, and the direction of the summed objective (`None`: one objective
/// per metric).
fn parse_setup(strategy: &Map<String, Value>, warnings: &mut Vec<String>) -> Result<(Setup, Option<Direction>)> {
    let setup_at = "search.strategy.setup";
    let s = table(get(strategy, "setup"), setup_at)?
        .ok_or_else(|| SearchError::config(setup_at, "missing: give at least `sampler` and `sum_scaled_metrics`"))?;
    check_keys(
        s,
        setup_at,
        &[
            "n_jobs",
            "n_trials",
            "timeout",
            "sampler",
            "sum_scaled_metrics",
            "direction",
            "seed",
            "pkl_ckpt",
            "save_every_n_trials",
            "model_parallel",
            "runner_style",
        ],
    )?;
    for ignored in ["pkl_ckpt", "save_every_n_trials", "model_parallel", "runner_style"] {
        if s.contains_key(ignored) {
            warnings.push(format!("{setup_at}.{ignored} is ignored: every trial is committed to the study database as it finishes"));
        }
    }
    let n_jobs = match s.get("n_jobs") {
        None => 1,
        Some(v) => match v.as_i64() {
            Some(-1) => std::thread::available_parallelism().map_or(1, |n| n.get()),
            // Each job is an OS thread; spawning many thousands fails, and a failed spawn
            // of a scoped thread panics.
            Some(n) if (1..=MAX_JOBS as i64).contains(&n) => n as usize,
            _ => {
                return Err(SearchError::config(
                    format!("{setup_at}.n_jobs"),
                    format!("must be an integer from 1 to {MAX_JOBS} or -1 (all cores), got {v}"),
                ))
            }
        },
    };
    let n_trials = match s.get("n_trials") {
        None => 20,
        Some(v) => match uint(v, &format!("{setup_at}.n_trials"))? {
            0 => {
                return Err(SearchError::config(
                    format!("{setup_at}.n_trials"),
                    "must be at least 1, got 0 (a study without trials has no result)",
                ))
            }
            n => n as usize,
        },
    };
    let timeout =
        match s.get("timeout") {
            None => None,
            Some(v) => Some(v.as_f64().filter(|t| *t > 0.0).ok_or_else(|| {
                SearchError::config(format!("{setup_at}.timeout"), format!("must be a positive number of seconds, got {v}"))
            })?),
        };
    let sampler = s
        .get("sampler")
        .ok_or_else(|| {
            let known: Vec<&str> = crate::sampler::SAMPLERS.iter().map(|(names, _, _)| names[0]).collect();
            SearchError::config(format!("{setup_at}.sampler"), format!("missing: one of {}", known.join(", ")))
        })?
        .as_str()
        .ok_or_else(|| SearchError::config(format!("{setup_at}.sampler"), "must be a string"))?
        .to_string();
    let seed = s.get("seed").map(|v| uint(v, &format!("{setup_at}.seed"))).transpose()?;
    let sum = s
        .get("sum_scaled_metrics")
        .ok_or_else(|| {
            SearchError::config(
                format!("{setup_at}.sum_scaled_metrics"),
                "missing (MASE requires it): true for one summed objective, false for one objective per metric",
            )
        })?
        .as_bool()
        .ok_or_else(|| SearchError::config(format!("{setup_at}.sum_scaled_metrics"), "must be true or false"))?;
    let sum_scaled = if sum {
        let d = s
            .get("direction")
            .ok_or_else(|| SearchError::config(format!("{setup_at}.direction"), "missing: a summed objective needs a direction"))?;
        Some(parse_direction(d, &format!("{setup_at}.direction"))?)
    } else {
        if s.contains_key("direction") {
            warnings.push(format!("{setup_at}.direction is ignored when sum_scaled_metrics = false (each metric has its own direction)"));
        }
        None
    };
    Ok((Setup { n_jobs, n_trials, timeout, sampler, seed }, sum_scaled))
}

/// `[search.strategy.metrics.*]`; a metric's direction may be left out of a summed objective
/// (`sum`), where it defaults to maximize.
fn parse_metrics(strategy: &Map<String, Value>, sum: bool) -> Result<Vec<MetricSpec>> {
    let metrics_at = "search.strategy.metrics";
    let mt =
        table(get(strategy, "metrics"), metrics_at)?.ok_or_else(|| SearchError::config(metrics_at, "missing: name at least one metric"))?;
    if mt.is_empty() {
        return Err(SearchError::config(metrics_at, "empty: name at least one metric"));
    }
    let mut metrics = Vec::new();
    for (name, v) in mt {
        let at = format!("{metrics_at}.{name}");
        let m = table(Some(v), &at)?.ok_or_else(|| SearchError::config(&at, "must be a table"))?;
        check_keys(m, &at, &["scale", "direction"])?;
        let scale = match m.get("scale") {
            None => 1.0,
            Some(x) => x
                .as_f64()
                .filter(|x| x.is_finite())
                .ok_or_else(|| SearchError::config(format!("{at}.scale"), format!("must be a number, got {x}")))?,
        };
        let direction = match m.get("direction") {
            Some(d) => parse_direction(d, &format!("{at}.direction"))?,
            None if sum => Direction::Maximize,
            None => {
                return Err(SearchError::config(
                    format!("{at}.direction"),
                    "missing: each metric needs a direction when sum_scaled_metrics = false",
                ))
            }
        };
        metrics.push(MetricSpec { name: name.clone(), scale, direction });
    }
    Ok(metrics)
}

/// `[search.strategy.constraints.*]`: bounds on metrics.
fn parse_constraints(strategy: &Map<String, Value>) -> Result<Vec<Constraint>> {
    let mut constraints = Vec::new();
    if let Some(c) = table(get(strategy, "constraints"), "search.strategy.constraints")? {
        for (name, v) in c {
            let at = format!("search.strategy.constraints.{name}");
            let m = table(Some(v), &at)?.ok_or_else(|| SearchError::config(&at, "must be a table such as { min = 0.9 }"))?;
            check_keys(m, &at, &["min", "max"])?;
            let bound = |k: &str| -> Result<Option<f64>> {
                m.get(k)
                    .map(|x| x.as_f64().ok_or_else(|| SearchError::config(format!("{at}.{k}"), format!("must be a number, got {x}"))))
                    .transpose()
            };
            let (min, max) = (bound("min")?, bound("max")?);
            if min.is_none() && max.is_none() {
                return Err(SearchError::config(&at, "give `min`, `max` or both"));
            }
            constraints.push(Constraint { metric: name.clone(), min, max });
        }
    }
    Ok(constraints)
}
