//! Design-space search of mase-rs (MASE's `ch search`, doc/mase-semantics.md#search), done exactly:
//! spaces rebuild every candidate from the unmodified base model, metrics are fresh per trial,
//! samplers are seeded and stateless, and every trial is committed to a study store as it
//! finishes, so a killed search resumes where it stopped.
//!
//! The pieces, each behind a small trait with a registry table:
//! - [`space`]: what is searched ([`SearchSpace`]; `graph/quantize/mixed_precision_ptq`);
//! - [`sampler`]: how points are chosen ([`Sampler`]; brute force, random, TPE, NSGA-II, QMC);
//! - [`runner`]: how a candidate is measured ([`Runner`]; evaluation, training, bit widths,
//!   BitOPs, FLOPs, model size, latency);
//! - [`objective`]: metrics, scales, directions, constraints;
//! - [`storage`]: where trials live ([`Storage`]; SQLite by default, PostgreSQL for studies
//!   shared by workers on many machines);
//! - [`study`]: the loop that ties them together, on one or several threads, in named steps that
//!   [`ask_tell`] shares for loops written by the caller (`ask()` / `tell()`);
//! - [`report`] and [`plot`]: `log.json`, `best.json`, `trials.csv`, PNG and SVG charts;
//! - [`compare`]: samplers compared over several seeds (mean best so far with a min–max band).
//!
//! ```
//! use mase_search::{SearchConfig, build_sampler};
//! let cfg: toml::Table = r#"
//!     [search_space]
//!     name = "graph/quantize/mixed_precision_ptq"
//!     [search_space.setup]
//!     by = "name"
//!     [search_space.seed.default.config]
//!     name = ["integer"]
//!     weight_width = [2, 4, 8]
//!     [strategy.setup]
//!     sampler = "brute"
//!     sum_scaled_metrics = false
//!     [strategy.metrics]
//!     accuracy = { scale = 1.0, direction = "maximize" }
//! "#.parse().unwrap();
//! let search = SearchConfig::from_toml(&cfg).unwrap();
//! assert_eq!(search.setup.n_trials, 20);
//! assert_eq!(build_sampler(&search.setup.sampler, &search.sampler_options).unwrap().name(), "brute");
//! ```

pub mod ask_tell;
pub mod compare;
pub mod config;
mod error;
pub mod failpoint;
pub mod flatten;
pub mod math;
pub mod objective;
mod param;
pub mod pareto;
pub mod plot;
pub mod report;
pub mod runner;
pub mod sampler;
mod setup;
pub mod space;
pub mod storage;
pub mod study;
pub mod trial;

pub use ask_tell::{AskTell, AskTellParts, Told};
pub use config::{SearchConfig, Setup, StorageConfig};
pub use error::{Result, SearchError};
pub use objective::{Constraint, MetricSpec, Objective};
pub use param::{Direction, ParamDef, ParamKind};
pub use runner::{build_runners, build_runners_with, ExternalRunners, FixedRunner, Runner, RunnerEnv, RunnerInfo, Stage, ANY_METRIC};
pub use sampler::{build_sampler, share_sampler_options, Sampler, SamplerOptions};
pub use setup::{assemble_search, assemble_search_with, check_search_config, SearchSetup};
pub use space::{build_space, BaseModel, Candidate, LocalQuantizer, PassesQuantizer, Quantizer, SearchSpace, SpaceInputs};
pub use storage::{
    open_storage, ConnectOptions, MemoryStorage, OpenMode, PgEnv, PostgresStorage, SqliteStorage, SslMode, Storage, StorageUrl,
};
pub use study::{
    best_trials, check_trials, objective_from_spec, params_from_spec, run_study, ClaimRules, Liveness, Observer, Proposed, Silent,
    StopReason, StudyOutcome, StudySetup,
};
pub use trial::{Metrics, TrialRecord, TrialState};
