//! `NativeStudy`: an ask-and-tell study (`mase_search::AskTell`) over a search space of a model,
//! with any sampler and store. The Python `mase_rs.Study` wraps one; values cross as JSON.

use crate::errors::{guarded, raise, to_py, ErrorClass};
use crate::graph::NativeGraph;
use mase_passes::{InputSource, PassContext};
use mase_search::report::chosen_params;
use mase_search::space::record_input_shape;
use mase_search::{
    build_sampler, build_space, open_storage, share_sampler_options, AskTell, AskTellParts, BaseModel, MemoryStorage, Metrics, OpenMode,
    PassesQuantizer, SearchConfig, SpaceInputs, Storage, StorageConfig, Told, TrialRecord,
};
use pyo3::prelude::*;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex, MutexGuard};

/// A study whose trials Python evaluates.
#[pyclass(module = "mase_rs._native")]
pub struct NativeStudy {
    /// Locked by each call (Python objects must be shareable between threads).
    study: Mutex<AskTell>,
    /// The base model's per-sample input shape, for the candidates' pass contexts.
    sample_shape: Option<Vec<usize>>,
    label: String,
}

/// The store a study lives in: `None` in memory, else a URL or a SQLite path.
fn storage(url: Option<&str>, search: &Value) -> mase_search::Result<Box<dyn Storage>> {
    match url {
        None => Ok(Box::new(MemoryStorage::new())),
        Some(url) => open_storage(url, &StorageConfig::parse(search.get("storage"))?.connect_options()),
    }
}

/// A trial as JSON: number, state, the chosen value of each parameter, config, values and metrics.
fn trial_json(t: &TrialRecord, study: &AskTell) -> Value {
    let params: serde_json::Map<String, Value> = chosen_params(t, study.space().params()).into_iter().collect();
    json!({
        "number": t.number,
        "state": t.state.as_str(),
        "params": params,
        "config": t.config,
        "values": t.values,
        "software_metrics": t.software_metrics,
        "hardware_metrics": t.hardware_metrics,
        "violation": t.violation,
        "error": t.error,
    })
}

/// The batch size of the input shape recorded in the graph's metadata, if one is.
fn recorded_batch(graph: &mase_ir::Graph) -> Option<usize> {
    let input = *graph.inputs().first()?;
    match graph.node(input).meta.common.results.get("data_out_0") {
        Some(mase_ir::ArgMeta::Tensor(t)) => t.shape.first().copied(),
        _ => None,
    }
}

fn metrics(text: &str, what: &str) -> PyResult<Metrics> {
    serde_json::from_str(text).map_err(|e| raise(ErrorClass::Value, &format!("tell: {what}: expected metric names with numbers ({e})")))
}

impl NativeStudy {
    fn study(&self) -> MutexGuard<'_, AskTell> {
        self.study.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl NativeStudy {
    /// Opens a study: `search` is a `[search]` table as JSON (`search_space`, `strategy.setup`
    /// with the sampler and seed, `strategy.metrics`, `sampler_options`), `model` the graph whose
    /// space is searched, `storage` a URL or SQLite path (`None`: in memory), `mode` `fresh`,
    /// `resume` or `join`.
    #[new]
    #[pyo3(signature = (search, model, name, storage_url=None, mode="fresh", seed=0))]
    fn new(
        py: Python<'_>,
        search: &str,
        model: PyRef<'_, NativeGraph>,
        name: String,
        storage_url: Option<String>,
        mode: &str,
        seed: u64,
    ) -> PyResult<NativeStudy> {
        let search: Value = serde_json::from_str(search).map_err(|e| raise(ErrorClass::Value, &format!("Study: the search table: {e}")))?;
        let mode = match mode {
            "fresh" => OpenMode::Fresh,
            "resume" => OpenMode::Resume,
            "join" => OpenMode::Join,
            other => return Err(raise(ErrorClass::Value, &format!("Study: mode `{other}`; expected fresh, resume or join"))),
        };
        let (graph, ctx) = model.parts();
        let sample_shape = match &ctx.inputs {
            InputSource::Random { sample_shape } => Some(sample_shape.clone()),
            InputSource::Data(splits) => Some(splits.info.sample_shape.clone()),
            InputSource::None => None,
        };
        let mut graph = graph.clone();
        if let (Some(shape), None) = (&sample_shape, recorded_batch(&graph)) {
            record_input_shape(&mut graph, shape);
        }
        let base = Arc::new(BaseModel { graph, params: Arc::new(ctx.params.clone()) });
        let label = model.label.clone();
        guarded("Study", || {
            py.allow_threads(|| {
                let config = SearchConfig::parse(&search).map_err(|e| to_py(&e))?;
                let shared = share_sampler_options(&config.sampler_options, &[config.setup.sampler.as_str()]).map_err(|e| to_py(&e))?;
                let sampler = build_sampler(&config.setup.sampler, &shared.options[0]).map_err(|e| to_py(&e))?;
                let space = build_space(&SpaceInputs { config: &config.space, base, quantizer: Arc::new(PassesQuantizer) })
                    .map_err(|e| to_py(&e))?;
                let parts =
                    AskTellParts { name, space, sampler, objective: config.objective.clone(), seed: config.setup.seed.unwrap_or(seed) };
                let store = storage(storage_url.as_deref(), &search).map_err(|e| to_py(&e))?;
                let study = AskTell::open(parts, store, mode).map_err(|e| to_py(&e))?;
                Ok(NativeStudy { study: Mutex::new(study), sample_shape, label })
            })
        })
    }

    /// The next trial as JSON, or `None` when the sampler has no point left.
    fn ask(&self, py: Python<'_>) -> PyResult<Option<String>> {
        guarded("Study.ask", || {
            py.allow_threads(|| {
                let mut study = self.study();
                let t = study.ask().map_err(|e| to_py(&e))?;
                Ok(t.map(|t| trial_json(&t, &study).to_string()))
            })
        })
    }

    /// Records trial `number`: `kind` is `metrics` (`payload`: `{"software": {...},
    /// "hardware": {...}}`), `values` (a list of numbers) or `fail` (the reason). Returns the
    /// stored trial as JSON.
    fn tell(&self, py: Python<'_>, number: u64, kind: &str, payload: &str) -> PyResult<String> {
        let told = match kind {
            "metrics" => {
                let v: Value = serde_json::from_str(payload).map_err(|e| raise(ErrorClass::Value, &format!("tell: {e}")))?;
                let part = |k: &str| metrics(&v.get(k).cloned().unwrap_or(json!({})).to_string(), k);
                Told::Metrics(part("software")?, part("hardware")?)
            }
            "values" => Told::Values(
                serde_json::from_str(payload).map_err(|e| raise(ErrorClass::Value, &format!("tell: values must be numbers ({e})")))?,
            ),
            "fail" => Told::Fail(payload.to_string()),
            other => return Err(raise(ErrorClass::Value, &format!("tell: `{other}`; expected metrics, values or fail"))),
        };
        guarded("Study.tell", || {
            py.allow_threads(|| {
                let mut study = self.study();
                let t = study.tell(number, told).map_err(|e| to_py(&e))?;
                Ok(trial_json(&t, &study).to_string())
            })
        })
    }

    /// Every trial as a JSON list.
    fn trials(&self, py: Python<'_>) -> PyResult<String> {
        py.allow_threads(|| {
            let mut study = self.study();
            let trials = study.trials().map_err(|e| to_py(&e))?;
            Ok(Value::Array(trials.iter().map(|t| trial_json(t, &study)).collect()).to_string())
        })
    }

    /// The best trials (the Pareto front for several objectives) as a JSON list.
    fn best_trials(&self, py: Python<'_>) -> PyResult<String> {
        py.allow_threads(|| {
            let mut study = self.study();
            let trials = study.best_trials().map_err(|e| to_py(&e))?;
            Ok(Value::Array(trials.iter().map(|t| trial_json(t, &study)).collect()).to_string())
        })
    }

    /// The candidate model of a trial's config, built from the unmodified base model.
    fn build(&self, py: Python<'_>, config: &str) -> PyResult<NativeGraph> {
        let config: Value = serde_json::from_str(config).map_err(|e| raise(ErrorClass::Value, &format!("Study.build: {e}")))?;
        guarded("Study.build", || {
            py.allow_threads(|| {
                let mut cand = self.study().space().build(&config).map_err(|e| to_py(&e))?;
                let mut ctx = PassContext::new((*cand.params).clone());
                if let Some(shape) = &self.sample_shape {
                    ctx.inputs = InputSource::Random { sample_shape: shape.clone() };
                }
                // The space sets formats (and widths); a model whose metadata was added shows
                // them in its metadata too, as after quantize_transform_pass.
                let has_metadata = cand.graph.nodes().iter().any(|n| n.meta.common.mase_op.is_some());
                if let (true, Some(batch)) = (has_metadata, recorded_batch(&cand.graph)) {
                    mase_passes::run_pass("add_common_metadata", &mut cand.graph, &mut ctx, &json!({"batch_size": batch}))
                        .map_err(|e| to_py(&e))?;
                }
                Ok(NativeGraph::from_parts(cand.graph, ctx, self.label.clone()))
            })
        })
    }

    /// Name, sampler, store, space name, parameters and objective, as JSON.
    fn describe(&self) -> String {
        let study = self.study();
        let o = study.objective();
        json!({
            "name": study.name(),
            "sampler": study.sampler(),
            "storage": study.location(),
            "space": study.space().name(),
            "params": study.space().params(),
            "objectives": o.value_names(),
            "directions": o.directions(),
        })
        .to_string()
    }
}
