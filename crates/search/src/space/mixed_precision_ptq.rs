//! `graph/quantize/mixed_precision_ptq` (doc/mase-semantics.md#search-space-mixed_precision_ptq): one choice list per config
//! field of every quantizable node, seeded by node name or by op type.
//!
//! Differences from MASE, on purpose:
//! - each trial quantizes a fresh copy of the base graph (MASE re-quantizes one graph in place);
//! - `by = "type"` picks each node's seed by its op type, and the sampled config is then applied
//!   by node name, so the sampled formats are used (in MASE the per-node keys of a `by = "type"`
//!   search never match, every node falls to the bypassed default, and all trials score the same).
//!
//! Additions to MASE's syntax (its configs run unchanged):
//! - tuple choices: `data_in = [[16, 8], [8, 6]]` with `data_in_fields = ["width", "frac_width"]`
//!   is one parameter whose choices set `data_in_width` and `data_in_frac_width` together
//!   (see [`crate::space::choices`]);
//! - `setup.tie = "type"` (with `by = "type"`): the nodes of one op type share their parameters
//!   (`linear/config/weight_width` for every linear layer), so lab 3's space of four
//!   (width, frac_width) pairs for data_in and four for weight is 16 points whatever the number
//!   of layers. The stored config still names every node;
//! - `seed.<key>.hardware.reuse_factor = [..]`: the reuse factor of the layers the entry seeds,
//!   a parameter beside the formats, written to the candidate's hardware metadata for
//!   `hw_runner.rtl` (see [`crate::space::hardware`]).

use crate::config::reject_unknown_keys;
use crate::space::choices::{choice_lists, ChoiceList, SeededParams};
use crate::space::hardware;
use crate::space::{by_name, BaseModel, Candidate, Quantizer, SearchSpace, SpaceInputs};
use crate::{ParamDef, Result, SearchError};
use serde_json::{json, Value};
use std::collections::BTreeMap;
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
    /// The parameters (MASE's `choices_flattened`, `"NA"` already `null`) and the nodes they set.
    seeded: SeededParams,
}

impl MixedPrecisionPtq {
    /// The number of distinct configs (the product of the choice counts), saturating.
    pub fn size(&self) -> u128 {
        self.seeded.size()
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
    reject_unknown_keys(cfg, "search.search_space", &["name", "setup", "seed"], "unknown key (expected name, setup, seed)")?;
    let setup = cfg.get("setup").and_then(Value::as_object).ok_or_else(|| {
        SearchError::config("search.search_space.setup", "missing: give `by = \"name\"` or `by = \"type\"` (MASE asserts it)")
    })?;
    reject_unknown_keys(setup, "search.search_space.setup", &["by", "tie", "model_parallel"], "unknown key (expected by, tie)")?;
    let by = match setup.get("by").and_then(Value::as_str) {
        Some(b @ ("name" | "type")) => b,
        Some(other) => {
            return Err(SearchError::config("search.search_space.setup.by", format!("`{other}` is not known: expected name or type")))
        }
        None => return Err(SearchError::config("search.search_space.setup.by", "missing: expected \"name\" or \"type\"")),
    };
    let tie_by_type = match setup.get("tie") {
        None => false,
        Some(Value::String(t)) if t == "none" => false,
        Some(Value::String(t)) if t == "type" && by == "type" => true,
        Some(Value::String(t)) if t == "type" => {
            return Err(SearchError::config(
                "search.search_space.setup.tie",
                "`type` ties the nodes of one op type, which share a seed only with `by = \"type\"`",
            ))
        }
        Some(other) => {
            return Err(SearchError::config("search.search_space.setup.tie", format!("must be \"type\" or \"none\", got {other}")))
        }
    };
    let seed = cfg.get("seed").and_then(Value::as_object).ok_or_else(|| {
        SearchError::config("search.search_space.seed", "missing: give at least `[search.search_space.seed.default.config]`")
    })?;

    // Every seed entry is checked, used or not, so a typo in an unused entry is still reported.
    let mut entries: BTreeMap<&str, Vec<ChoiceList>> = BTreeMap::new();
    for (key, entry) in seed {
        let entry = entry.as_object().ok_or_else(|| {
            SearchError::config(
                format!("search.search_space.seed.{key}"),
                "must be a table such as `[search.search_space.seed.<key>.config]`",
            )
        })?;
        let lists = choice_lists(entry, &format!("search.search_space.seed.{key}"))?;
        entries.insert(key.as_str(), lists.into_iter().map(|l| l.map_values(na_to_null)).collect());
    }
    if let Some(e) = (by == "name").then(|| unknown_seed_name(seed.keys(), &inputs.base.graph)).flatten() {
        return Err(e);
    }
    let mut seeded = SeededParams::default();
    // With `tie = "type"`: the parameters of each op type, made when its first node is met.
    let mut tied: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    // The nodes each seed entry seeds, for the checks of its hardware choices.
    let mut seeded_by: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for node in inputs.base.graph.nodes() {
        let op = node.op.mase_op();
        if !QUANTIZEABLE_OPS.contains(&op) {
            continue;
        }
        let key = if by == "name" { node.name.as_str() } else { op };
        let used = if entries.contains_key(key) { key } else { "default" };
        seeded_by.entry(used).or_default().push(node.name.as_str());
        let lists = match entries.get(key).or_else(|| entries.get("default")) {
            Some(lists) => lists,
            None => {
                return Err(SearchError::config(
                    "search.search_space.seed",
                    format!("no entry for `{key}` (node `{}`) and no `default` entry", node.name),
                ))
            }
        };
        let ids = match tied.get(op) {
            Some(ids) if tie_by_type => ids.clone(),
            _ => {
                let owner = if tie_by_type { op } else { node.name.as_str() };
                let ids: Vec<usize> =
                    lists.iter().map(|l| seeded.add(format!("{owner}/{}", l.path), l.clone(), !tie_by_type && !l.tuple)).collect();
                if tie_by_type {
                    tied.insert(op, ids.clone());
                }
                ids
            }
        };
        seeded.nodes.push((node.name.clone(), ids));
    }
    for (key, entry) in seed {
        let nodes = seeded_by.get(key.as_str()).map_or(&[][..], Vec::as_slice);
        if let Some(entry) = entry.as_object() {
            hardware::check_seed_entry(entry, &format!("search.search_space.seed.{key}"), &inputs.base.graph, nodes)?;
        }
    }
    if seeded.nodes.is_empty() {
        return Err(err(format!("the model has no quantizable node (ops {})", QUANTIZEABLE_OPS.join(", "))));
    }
    Ok(Box::new(MixedPrecisionPtq { base: inputs.base.clone(), quantizer: inputs.quantizer.clone(), seeded }))
}

/// With `by = "name"`, every seed key must name a quantizable node of the model, as `ch transform`
/// refuses a name that is no node: a misspelt name would otherwise leave that node on the
/// `default` entry without a word. `default` and the quantizable op types are kept, as MASE's
/// examples hold entries for both `by = "name"` and `by = "type"` (`jsc_toy_by_type.toml`).
/// Returns the error of the first key that fails, if one does.
fn unknown_seed_name<'a>(mut keys: impl Iterator<Item = &'a String>, graph: &mase_ir::Graph) -> Option<SearchError> {
    keys.find_map(|key| {
        if key == "default" || QUANTIZEABLE_OPS.contains(&key.as_str()) {
            return None;
        }
        let at = format!("search.search_space.seed.{key}");
        let Some(id) = graph.find(key) else {
            return Some(SearchError::config(
                at,
                format!("the model has no node `{key}` (with setup.by = \"name\", a seed key is a node name, `default` or an op type)"),
            ));
        };
        let op = graph.node(id).op.mase_op();
        (!QUANTIZEABLE_OPS.contains(&op)).then(|| {
            SearchError::config(
                at,
                format!("node `{key}` is a `{op}` node, which is not searched (quantizable ops: {})", QUANTIZEABLE_OPS.join(", ")),
            )
        })
    })
}

impl SearchSpace for MixedPrecisionPtq {
    fn name(&self) -> &str {
        NAME
    }

    fn params(&self) -> &[ParamDef] {
        &self.seeded.params
    }

    fn to_config(&self, point: &[f64]) -> Result<Value> {
        let mut cfg = self.seeded.nested_config(NAME, point)?;
        cfg.insert("default".into(), default_quantization_config());
        Ok(Value::Object(cfg))
    }

    fn build(&self, config: &Value) -> Result<Candidate> {
        let mut graph = self.base.graph.clone();
        self.quantizer.apply(&mut graph, &by_name(config)).map_err(err)?;
        hardware::apply(&mut graph, config);
        Ok(Candidate { graph, params: self.base.params.clone() })
    }
}
