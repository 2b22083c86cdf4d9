//! `graph/architecture/channel_multiplier_and_quantize`: layer widths and number formats chosen
//! together. The `architecture` table is a `graph/architecture/channel_multiplier` space, the
//! `quantize` table a `graph/quantize/mixed_precision_ptq` space; a candidate is the base model
//! widened first, then quantized with the sampled formats (node names do not change when layers
//! widen, so the quantize seeds by name or type apply to the widened model).
//!
//! ```toml
//! [search.search_space]
//! name = "graph/architecture/channel_multiplier_and_quantize"
//! [search.search_space.architecture.seed.seq_blocks_2.config]
//! name = ["output_only"]
//! channel_multiplier = [1, 2, 4]
//! [search.search_space.architecture.seed.seq_blocks_4.config]
//! name = ["input_only"]
//! [search.search_space.quantize.setup]
//! by = "type"
//! [search.search_space.quantize.seed.linear.config]
//! name = ["integer"]
//! weight_width = [4, 8]
//! ```
//!
//! Parameters are the two spaces' with `architecture/` and `quantize/` in front; a trial's config
//! is `{"architecture": <transform config>, "quantize": <quantize config>}`.

use super::channel_multiplier::ChannelMultiplier;
use crate::config::reject_unknown_keys;
use crate::space::{by_name, check_point, mixed_precision_ptq, Candidate, Quantizer, SearchSpace, SpaceInputs};
use crate::{ParamDef, Result, SearchError};
use serde_json::{json, Value};
use std::sync::Arc;

const NAME: &str = "graph/architecture/channel_multiplier_and_quantize";

/// The combined space.
pub struct ChannelAndQuantize {
    architecture: ChannelMultiplier,
    quantize: Box<dyn SearchSpace>,
    quantizer: Arc<dyn Quantizer>,
    params: Vec<ParamDef>,
}

fn err(reason: impl Into<String>) -> SearchError {
    SearchError::Space { space: NAME.into(), reason: reason.into() }
}

/// Builds the space from `[search.search_space]` with its `architecture` and `quantize` tables.
pub fn build(inputs: &SpaceInputs<'_>) -> Result<Box<dyn SearchSpace>> {
    let at = "search.search_space";
    let cfg = inputs.config.as_object().ok_or_else(|| SearchError::config(at, "must be a table"))?;
    reject_unknown_keys(cfg, at, &["name", "architecture", "quantize"], "unknown key (expected name, architecture, quantize)")?;
    let part =
        |k: &str| cfg.get(k).ok_or_else(|| SearchError::config(format!("{at}.{k}"), "missing: the combined space needs both tables"));
    let architecture = ChannelMultiplier::new(part("architecture")?, inputs.base.clone(), &format!("{at}.architecture"))?;
    let mut q = part("quantize")?.clone();
    if let Some(m) = q.as_object_mut() {
        m.insert("name".into(), json!("graph/quantize/mixed_precision_ptq"));
    }
    let quantize = mixed_precision_ptq::build(&SpaceInputs { config: &q, base: inputs.base.clone(), quantizer: inputs.quantizer.clone() })
        .map_err(|e| match e {
            SearchError::Config { key, reason } => {
                SearchError::Config { key: key.replacen("search.search_space", "search.search_space.quantize", 1), reason }
            }
            other => other,
        })?;
    let prefixed = |prefix: &str, ps: &[ParamDef]| -> Vec<ParamDef> {
        ps.iter()
            .map(|p| ParamDef { name: format!("{prefix}/{}", p.name), kind: p.kind.clone(), values: p.values.clone() })
            .collect::<Vec<_>>()
    };
    let mut params = prefixed("architecture", architecture.params());
    params.extend(prefixed("quantize", quantize.params()));
    Ok(Box::new(ChannelAndQuantize { architecture, quantize, quantizer: inputs.quantizer.clone(), params }))
}

impl SearchSpace for ChannelAndQuantize {
    fn name(&self) -> &str {
        NAME
    }

    fn params(&self) -> &[ParamDef] {
        &self.params
    }

    fn to_config(&self, point: &[f64]) -> Result<Value> {
        check_point(NAME, point, &self.params)?;
        let (a, q) = point.split_at(self.architecture.params().len());
        Ok(json!({"architecture": self.architecture.to_config(a)?, "quantize": self.quantize.to_config(q)?}))
    }

    fn build(&self, config: &Value) -> Result<Candidate> {
        let part = |k: &str| config.get(k).ok_or_else(|| err(format!("a trial config has no `{k}` part")));
        let mut cand = self.architecture.build(part("architecture")?)?;
        self.quantizer.apply(&mut cand.graph, &by_name(part("quantize")?)).map_err(err)?;
        Ok(cand)
    }

    fn signature(&self) -> Value {
        json!({"name": NAME, "architecture": self.architecture.signature(), "quantize": self.quantize.signature()})
    }
}
