//! `graph/quantize/mixed_precision_ptq` (doc/mase-semantics.md#search-space-mixed_precision_ptq): one choice list per config
//! field of every quantizable node, seeded by node name or by op type.
//!
//! Differences from MASE, on purpose:
//! - each trial quantizes a fresh copy of the base graph (MASE re-quantizes one graph in place);
//! - `by = "type"` picks each node's seed by its op type, and the sampled config is then applied
//!   by node name, so the sampled formats are used (in MASE the per-node keys of a `by = "type"`
//!   search never match, every node falls to the bypassed default, and all trials score the same).

use crate::flatten::{flatten, unflatten};
use crate::space::{chosen, BaseModel, Candidate, Quantizer, SearchSpace, SpaceInputs};
use crate::{ParamDef, ParamKind, Result, SearchError};
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// MASE's `QUANTIZEABLE_OP`: the mase_ops that get a seed entry.
pub const QUANTIZEABLE_OPS: &[&str] = &["add", "bmm", "conv1d", "conv2d", "matmul", "mul", "linear", "relu", "sub"];

/// MASE's `DEFAULT_QUANTIZATION_CONFIG`, appended to every sampled config as `default`.
pub fn default_quantization_config() -> Value {
    json!({"config": {"name": "integer", "bypass": true, "bias_frac_width": 5, "bias_width": 8,
                      "data_in_frac_width": 5, "data_in_width": 8, "weight_frac_width": 3, "weight_width": 8}})
}

/// The JSON text of [`default_quantization_config`], for documentation and tests.
pub const DEFAULT_QUANTIZATION_CONFIG: &str = r#"{"config": {"name": "integer", "bypass": true, "bias_frac_width": 5, "bias_width": 8, "data_in_frac_width": 5, "data_in_width": 8, "weight_frac_width": 3, "weight_width": 8}}"#;

const NAME: &str = "graph/quantize/mixed_precision_ptq";

/// The mixed-precision PTQ space over one base model.
pub struct MixedPrecisionPtq {
    base: Arc<BaseModel>,
    quantizer: Arc<dyn Quantizer>,
    params: Vec<ParamDef>,
    /// The choice values of each parameter (MASE's `choices_flattened`), `"NA"` already `null`.
    choices: Vec<Vec<Value>>,
}

impl MixedPrecisionPtq {
    /// The choice lists, in parameter order.
    pub fn choices(&self) -> &[Vec<Value>] {
        &self.choices
    }

    /// The number of distinct configs (the product of the choice counts), saturating.
    pub fn size(&self) -> u128 {
        self.choices.iter().fold(1u128, |acc, c| acc.saturating_mul(c.len() as u128))
    }
}

fn err(reason: impl Into<String>) -> SearchError {
    SearchError::Space { space: NAME.into(), reason: reason.into() }
}

/// MASE writes `"NA"` for None.
fn na_to_null(v: &Value) -> Value {
    match v {
        Value::String(s) if s == "NA" => Value::Null,
        other => other.clone(),
    }
}

/// Builds the space from `[search.search_space]` (`setup.by`, `seed.<key>.config.<field> = [..]`).
pub fn build(inputs: &SpaceInputs<'_>) -> Result<Box<dyn SearchSpace>> {
    let cfg = inputs.config.as_object().ok_or_else(|| SearchError::config("search.search_space", "must be a table"))?;
    for key in cfg.keys() {
        if !["name", "setup", "seed"].contains(&key.as_str()) {
            return Err(SearchError::config(format!("search.search_space.{key}"), "unknown key (expected name, setup, seed)"));
        }
    }
    let setup = cfg.get("setup").and_then(Value::as_object).ok_or_else(|| {
        SearchError::config("search.search_space.setup", "missing: give `by = \"name\"` or `by = \"type\"` (MASE asserts it)")
    })?;
    for key in setup.keys() {
        if !["by", "model_parallel"].contains(&key.as_str()) {
            return Err(SearchError::config(format!("search.search_space.setup.{key}"), "unknown key (expected by)"));
        }
    }
    let by = match setup.get("by").and_then(Value::as_str) {
        Some(b @ ("name" | "type")) => b,
        Some(other) => {
            return Err(SearchError::config("search.search_space.setup.by", format!("`{other}` is not known: expected name or type")))
        }
        None => return Err(SearchError::config("search.search_space.setup.by", "missing: expected \"name\" or \"type\"")),
    };
    let seed = cfg.get("seed").and_then(Value::as_object).ok_or_else(|| {
        SearchError::config("search.search_space.seed", "missing: give at least `[search.search_space.seed.default.config]`")
    })?;

    // Every seed entry is checked, used or not, so a typo in an unused entry is still reported.
    for (key, entry) in seed {
        let entry = entry.as_object().ok_or_else(|| {
            SearchError::config(
                format!("search.search_space.seed.{key}"),
                "must be a table such as `[search.search_space.seed.<key>.config]`",
            )
        })?;
        for (path, leaf) in flatten(entry) {
            let where_ = format!("search.search_space.seed.{key}.{}", path.replace('/', "."));
            match &leaf {
                Value::Array(a) if a.is_empty() => return Err(SearchError::config(where_, "empty choice list: give at least one choice")),
                Value::Array(_) => {}
                _ => return Err(SearchError::config(where_, format!("must be a list of choices, got {leaf}"))),
            }
        }
    }
    let mut params = Vec::new();
    let mut choices = Vec::new();
    let mut nodes = 0;
    for node in inputs.base.graph.nodes() {
        let op = node.op.mase_op();
        if !QUANTIZEABLE_OPS.contains(&op) {
            continue;
        }
        nodes += 1;
        let key = if by == "name" { node.name.as_str() } else { op };
        let (used, entry) = match seed.get(key) {
            Some(e) => (key, e),
            None => (
                "default",
                seed.get("default").ok_or_else(|| {
                    SearchError::config(
                        "search.search_space.seed",
                        format!("no entry for `{key}` (node `{}`) and no `default` entry", node.name),
                    )
                })?,
            ),
        };
        let entry = entry.as_object().ok_or_else(|| {
            SearchError::config(
                format!("search.search_space.seed.{used}"),
                "must be a table such as `[search.search_space.seed.<key>.config]`",
            )
        })?;
        for (path, leaf) in flatten(entry) {
            let where_ = format!("search.search_space.seed.{used}.{}", path.replace('/', "."));
            let list = match &leaf {
                Value::Array(a) => a,
                _ => return Err(SearchError::config(where_, format!("must be a list of choices, got {leaf}"))),
            };
            if list.is_empty() {
                return Err(SearchError::config(where_, "empty choice list: give at least one choice"));
            }
            params.push(ParamDef { name: format!("{}/{path}", node.name), kind: ParamKind::Index { choices: list.len() } });
            choices.push(list.iter().map(na_to_null).collect());
        }
    }
    if nodes == 0 {
        return Err(err(format!("the model has no quantizable node (ops {})", QUANTIZEABLE_OPS.join(", "))));
    }
    Ok(Box::new(MixedPrecisionPtq { base: inputs.base.clone(), quantizer: inputs.quantizer.clone(), params, choices }))
}

impl SearchSpace for MixedPrecisionPtq {
    fn name(&self) -> &str {
        NAME
    }

    fn params(&self) -> &[ParamDef] {
        &self.params
    }

    fn to_config(&self, point: &[f64]) -> Result<Value> {
        let flat = chosen(NAME, point, &self.params, &self.choices)?;
        let mut cfg: Map<String, Value> = unflatten(flat);
        cfg.insert("default".into(), default_quantization_config());
        Ok(Value::Object(cfg))
    }

    fn build(&self, config: &Value) -> Result<Candidate> {
        let mut graph = self.base.graph.clone();
        // The sampled keys are node names whatever `setup.by` was, so the config is applied by name.
        let mut args = config.clone();
        if let Some(m) = args.as_object_mut() {
            m.insert("by".into(), Value::from("name"));
        }
        self.quantizer.apply(&mut graph, &args).map_err(err)?;
        Ok(Candidate { graph, params: self.base.params.clone() })
    }
}
