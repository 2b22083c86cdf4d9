//! Search spaces: what a sampler chooses and how a choice becomes a model.
//!
//! A space lists its parameters (MASE's `choices_flattened`, with `/`-joined names), turns a
//! sampled point into the concrete config MASE would store with the trial
//! (`flattened_indexes_to_config`), and rebuilds the candidate model for that config from the
//! unmodified base model (MASE instead re-quantizes one graph in place across trials, so a node a
//! trial leaves unquantized keeps the previous trial's format; we never reuse a candidate).
//!
//! Adding a space: implement [`SearchSpace`], write a constructor with the [`SpaceBuilder`]
//! signature, and add one line to [`SPACES`] (see `doc/search.md`).

mod channel_and_quantize;
mod channel_multiplier;
pub mod choices;
pub mod hardware;
mod mixed_precision_ptq;
mod quantize;

pub use channel_and_quantize::ChannelAndQuantize;
pub use channel_multiplier::{record_input_shape, ChannelMultiplier};
pub use hardware::REUSE_FACTOR;

pub use mixed_precision_ptq::{default_quantization_config, MixedPrecisionPtq, DEFAULT_QUANTIZATION_CONFIG, QUANTIZEABLE_OPS};
pub use quantize::{LocalQuantizer, PassesQuantizer, Quantizer};

use crate::{ParamDef, Result, SearchError};
use mase_ir::{Graph, ParamStore};
use serde_json::{json, Value};
use std::sync::Arc;

/// The model a search starts from: never modified by a trial.
#[derive(Clone, Debug)]
pub struct BaseModel {
    pub graph: Graph,
    pub params: Arc<ParamStore>,
}

/// A model built for one trial. Parameters are shared with the base model until a runner
/// changes them (`Arc::make_mut`), so evaluation-only trials copy no weights.
#[derive(Clone, Debug)]
pub struct Candidate {
    pub graph: Graph,
    pub params: Arc<ParamStore>,
}

/// A design space a sampler can search.
pub trait SearchSpace: Send + Sync {
    /// The registered name (`graph/quantize/mixed_precision_ptq`).
    fn name(&self) -> &str;

    /// The flattened parameters, in the order MASE suggests them.
    fn params(&self) -> &[ParamDef];

    /// The concrete config of a sampled point (one internal value per parameter), as stored with
    /// the trial and written to `log.json` / `best.json`.
    fn to_config(&self, point: &[f64]) -> Result<Value>;

    /// The candidate model for `config`, built from the unmodified base model.
    fn build(&self, config: &Value) -> Result<Candidate>;

    /// A description that identifies the space, so a resumed or shared study can check that it
    /// searches the same space.
    fn signature(&self) -> Value {
        json!({"name": self.name(), "params": self.params()})
    }
}

/// What a space constructor gets: the `[search.search_space]` table, the base model, and the
/// quantize transform to apply configs with.
pub struct SpaceInputs<'a> {
    pub config: &'a Value,
    pub base: Arc<BaseModel>,
    pub quantizer: Arc<dyn Quantizer>,
}

/// A space constructor.
pub type SpaceBuilder = fn(&SpaceInputs<'_>) -> Result<Box<dyn SearchSpace>>;

/// Every registered space: name, one-line description, constructor.
pub const SPACES: &[(&str, &str, SpaceBuilder)] = &[
    (
        "graph/quantize/mixed_precision_ptq",
        "per-node number formats of the quantizable nodes (MASE's mixed-precision post-training quantization)",
        mixed_precision_ptq::build,
    ),
    (
        "graph/architecture/channel_multiplier",
        "widths of linear/conv layers by channel multipliers (MASE lab 4)",
        channel_multiplier::build,
    ),
    (
        "graph/architecture/channel_multiplier_and_quantize",
        "channel multipliers and mixed-precision number formats chosen together",
        channel_and_quantize::build,
    ),
];

/// Checks that a point of the space `space` has one value per parameter.
pub(crate) fn check_point(space: &str, point: &[f64], params: &[ParamDef]) -> Result<()> {
    if point.len() != params.len() {
        let reason = format!("a point has {} values, the space {} parameters", point.len(), params.len());
        return Err(SearchError::Space { space: space.into(), reason });
    }
    Ok(())
}

/// A trial's quantize config to apply by node name: the keys a space samples are node names
/// whatever the space's `setup.by` was.
pub(crate) fn by_name(config: &Value) -> Value {
    let mut args = config.clone();
    if let Some(m) = args.as_object_mut() {
        m.insert("by".into(), Value::from("name"));
    }
    args
}

/// Builds the space named by `config["name"]`.
pub fn build_space(inputs: &SpaceInputs<'_>) -> Result<Box<dyn SearchSpace>> {
    let name = inputs
        .config
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| SearchError::config("search.search_space.name", "missing: name a search space"))?;
    let (_, _, build) = SPACES.iter().find(|(n, _, _)| *n == name).ok_or_else(|| SearchError::UnknownSpace {
        name: name.to_string(),
        known: SPACES.iter().map(|(n, _, _)| *n).collect::<Vec<_>>().join(", "),
    })?;
    build(inputs)
}
