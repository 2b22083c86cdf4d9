//! `graph/architecture/channel_multiplier`: MASE lab 4's search over layer widths. Each seeded
//! linear or convolution layer chooses a mode (`output_only`, `both`, `input_only`) and a channel
//! multiplier; a candidate is the base model widened by the `channel_multiplier` transform of
//! `mase-passes` (every consumer, batch norm and view follows; new tensors are drawn as PyTorch
//! initialises a new module), so a training runner should train it before it is evaluated.
//!
//! ```toml
//! [search.search_space]
//! name = "graph/architecture/channel_multiplier"
//! [search.search_space.setup]
//! by = "name"
//! keep_weights = false        # true: the base weights keep their place in the wider tensors
//! # input_shape = [3, 32, 32] # one sample; by default the data set's
//! [search.search_space.seed.seq_blocks_2.config]
//! name = ["output_only"]
//! channel_multiplier = [1, 2, 4, 6, 8, 10]
//! [search.search_space.seed.seq_blocks_6.config]
//! name = ["input_only"]       # its input follows seq_blocks_2's width: nothing to choose
//! ```
//!
//! `setup.tie = "channel_multiplier"` (MASE lab 4, question 2) makes one multiplier shared by every
//! seeded layer: the seeds' `channel_multiplier` lists must be equal, and one parameter,
//! `channel_multiplier`, picks the value written into each of them.
//!
//! The config stored with a trial is the transform's own (`{"by": "name", "seq_blocks_2":
//! {"config": {"name": "output_only", "channel_multiplier": 4}}, ...}`), so `ch transform` can
//! rebuild the best candidate. Every seed names a widenable node, and the space checks, before
//! any trial, that the first and the last choice of every list give a consistent model (an
//! `input_only` with no widened producer is refused then, not at trial 7).

use crate::config::reject_unknown_keys;
use crate::flatten::flatten;
use crate::space::choices::{choice_lists, SeededParams};
use crate::space::{BaseModel, Candidate, SearchSpace, SpaceInputs};
use crate::{ParamDef, Result, SearchError};
use mase_ir::{ArgMeta, Graph, TensorMeta};
use mase_passes::architecture::{widen_graph, widened_ops, ChannelArgs, WIDENABLE_OPS};
use serde_json::{json, Map, Value};
use std::sync::Arc;

const NAME: &str = "graph/architecture/channel_multiplier";

/// Records one sample's shape on the graph's input, as `add_common_metadata` does, so that
/// shape-changing spaces know it (`ch search` calls this with the data set's sample shape).
pub fn record_input_shape(graph: &mut Graph, sample_shape: &[usize]) {
    let mut shape = vec![1];
    shape.extend(sample_shape);
    if let Some(&input) = graph.inputs().first() {
        graph.node_mut(input).meta.common.results.insert("data_out_0".into(), ArgMeta::Tensor(TensorMeta::float32(shape)));
    }
}

/// The channel-multiplier space over one base model.
pub struct ChannelMultiplier {
    base: Arc<BaseModel>,
    /// The parameters and the seeded layers they set.
    seeded: SeededParams,
    keep_weights: bool,
    sample_shape: Vec<usize>,
    seed: u64,
}

fn err(reason: impl Into<String>) -> SearchError {
    SearchError::Space { space: NAME.into(), reason: reason.into() }
}

/// A pass's error inside this space, kept as the source.
fn pass_err(source: mase_passes::PassError) -> SearchError {
    SearchError::SpacePass { space: NAME.into(), source: Box::new(source) }
}

/// The shape of one input sample: `setup.input_shape`, else the one recorded on the graph's
/// input, else what its first layer implies (a jsc model's BatchNorm1d or Linear).
fn sample_shape(setup: &Map<String, Value>, base: &BaseModel, at: &str) -> Result<Vec<usize>> {
    if let Some(v) = setup.get("input_shape") {
        let dims: Option<Vec<usize>> = v.as_array().and_then(|a| a.iter().map(|d| d.as_u64().map(|d| d as usize)).collect());
        return dims
            .filter(|d| !d.is_empty() && d.iter().all(|&x| x > 0))
            .ok_or_else(|| SearchError::config(format!("{at}.setup.input_shape"), format!("must be a list of positive sizes, got {v}")));
    }
    let ctx = mase_passes::PassContext::new(mase_ir::ParamStore::new());
    ctx.sample_shape(&base.graph).ok_or_else(|| {
        SearchError::config(format!("{at}.setup.input_shape"), "the input shape of one sample is unknown: give it, e.g. [3, 32, 32]")
    })
}

/// Builds the space from `[search.search_space]` (`setup.by = "name"`, `setup.keep_weights`,
/// `setup.input_shape`, `setup.seed`, `seed.<node>.config.{name, channel_multiplier} = [..]`).
pub fn build(inputs: &SpaceInputs<'_>) -> Result<Box<dyn SearchSpace>> {
    Ok(Box::new(ChannelMultiplier::new(inputs.config, inputs.base.clone(), "search.search_space")?))
}

impl ChannelMultiplier {
    /// The space of the table `cfg`, found at `at` in the config (for error messages).
    pub(crate) fn new(cfg: &Value, base: Arc<BaseModel>, at: &str) -> Result<ChannelMultiplier> {
        let cfg = cfg.as_object().ok_or_else(|| SearchError::config(at, "must be a table"))?;
        reject_unknown_keys(cfg, at, &["name", "setup", "seed"], "unknown key (expected name, setup, seed)")?;
        let empty = Map::new();
        let setup = match cfg.get("setup") {
            None => &empty,
            Some(Value::Object(m)) => m,
            Some(other) => return Err(SearchError::config(format!("{at}.setup"), format!("must be a table, got {other}"))),
        };
        let allowed = ["by", "keep_weights", "input_shape", "seed", "tie"];
        reject_unknown_keys(setup, &format!("{at}.setup"), &allowed, "unknown key (expected by, keep_weights, input_shape, seed, tie)")?;
        let shared_multiplier = match setup.get("tie") {
            None => false,
            Some(Value::String(t)) if t == "none" => false,
            Some(Value::String(t)) if t == "channel_multiplier" => true,
            Some(other) => {
                return Err(SearchError::config(
                    format!("{at}.setup.tie"),
                    format!("must be \"channel_multiplier\" (one multiplier for every layer) or \"none\", got {other}"),
                ))
            }
        };
        match setup.get("by").and_then(Value::as_str) {
            None | Some("name") => {}
            Some(other) => {
                return Err(SearchError::config(
                    format!("{at}.setup.by"),
                    format!("`{other}`: channel multipliers are seeded by node name"),
                ))
            }
        }
        let keep_weights = match setup.get("keep_weights") {
            None => false,
            Some(v) => v
                .as_bool()
                .ok_or_else(|| SearchError::config(format!("{at}.setup.keep_weights"), format!("must be true or false, got {v}")))?,
        };
        let seed = match setup.get("seed") {
            None => 0,
            Some(v) => v
                .as_u64()
                .ok_or_else(|| SearchError::config(format!("{at}.setup.seed"), format!("must be a non-negative integer, got {v}")))?,
        };
        let sample_shape = sample_shape(setup, &base, at)?;
        let seed_table = cfg.get("seed").and_then(Value::as_object).ok_or_else(|| {
            SearchError::config(
                format!("{at}.seed"),
                "missing: give `[...seed.<node>.config]` tables with `name` and `channel_multiplier` lists",
            )
        })?;
        let mut seeded = SeededParams::default();
        // With a shared multiplier: its parameter and the seed that gave its list.
        let mut shared: Option<(usize, String)> = None;
        for (node, entry) in seed_table {
            let where_node = format!("{at}.seed.{node}");
            let id = base.graph.find(node).ok_or_else(|| SearchError::config(&where_node, format!("the model has no node `{node}`")))?;
            let op = base.graph.node(id).op.mase_op();
            if !WIDENABLE_OPS.contains(&op) {
                return Err(SearchError::config(
                    &where_node,
                    format!("a `{op}` node cannot be widened (widenable: {})", WIDENABLE_OPS.join(", ")),
                ));
            }
            let entry =
                entry.as_object().ok_or_else(|| SearchError::config(&where_node, "must be a table such as `[...seed.<node>.config]`"))?;
            for (path, _) in flatten(entry) {
                if !["config/name", "config/channel_multiplier"].contains(&path.as_str()) {
                    let where_ = format!("{where_node}.{}", path.replace('/', "."));
                    return Err(SearchError::config(where_, "unknown key (expected config.name, config.channel_multiplier)"));
                }
            }
            let mut ids = Vec::new();
            for list in choice_lists(entry, &where_node)? {
                if !shared_multiplier || list.path != "config/channel_multiplier" {
                    ids.push(seeded.add(format!("{node}/{}", list.path), list, true));
                    continue;
                }
                match shared.clone() {
                    None => {
                        let i = seeded.add("channel_multiplier".into(), list, false);
                        shared = Some((i, node.clone()));
                        ids.push(i);
                    }
                    Some((i, _)) if seeded.lists[i].choices == list.choices => ids.push(i),
                    Some((i, first)) => {
                        return Err(SearchError::config(
                            format!("{where_node}.config.channel_multiplier"),
                            format!(
                                "differs from `{first}`'s list {}: with `setup.tie = \"channel_multiplier\"` every layer shares one multiplier, so give the same list",
                                Value::Array(seeded.lists[i].values())
                            ),
                        ))
                    }
                }
            }
            seeded.nodes.push((node.clone(), ids));
        }
        if seeded.params.is_empty() {
            return Err(err("no layer is seeded: give `[...seed.<node>.config]` with `name` and `channel_multiplier` lists"));
        }
        let space = ChannelMultiplier { base, seeded, keep_weights, sample_shape, seed };
        // The first and the last choice of every list: configs that cannot be made consistent
        // are reported now, with the transform's message naming the nodes.
        for pick_last in [false, true] {
            let point: Vec<f64> = space.seeded.lists.iter().map(|l| if pick_last { (l.choices.len() - 1) as f64 } else { 0.0 }).collect();
            let args = space.args(&space.to_config(&point)?)?;
            widened_ops(&space.base.graph, &space.base.params, &args, &space.sample_shape).map_err(pass_err)?;
        }
        Ok(space)
    }

    /// The transform's arguments for a trial config.
    fn args(&self, config: &Value) -> Result<ChannelArgs> {
        mase_passes::parse_args("channel_multiplier", config).map_err(pass_err)
    }

    /// The number of distinct configs (the product of the choice counts), saturating.
    pub fn size(&self) -> u128 {
        self.seeded.size()
    }
}

impl SearchSpace for ChannelMultiplier {
    fn name(&self) -> &str {
        NAME
    }

    fn params(&self) -> &[ParamDef] {
        &self.seeded.params
    }

    fn to_config(&self, point: &[f64]) -> Result<Value> {
        let mut cfg = Map::new();
        cfg.insert("by".into(), json!("name"));
        cfg.extend(self.seeded.nested_config(NAME, point)?);
        Ok(Value::Object(cfg))
    }

    fn build(&self, config: &Value) -> Result<Candidate> {
        let mut args = self.args(config)?;
        args.keep_weights = self.keep_weights;
        let w = widen_graph(&self.base.graph, &self.base.params, &args, &self.sample_shape, self.seed).map_err(pass_err)?;
        Ok(Candidate { graph: w.graph, params: Arc::new(w.params) })
    }

    fn signature(&self) -> Value {
        json!({"name": NAME, "params": self.seeded.params, "choices": self.seeded.choice_values(), "keep_weights": self.keep_weights})
    }
}
