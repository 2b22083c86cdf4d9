//! `channel_multiplier`: widen linear and convolution layers by an integer factor (MASE lab 4's
//! `redefine_linear_transform_pass`, for `Linear`, `Conv1d` and `Conv2d`).
//!
//! ```toml
//! [passes.channel_multiplier]
//! by = "name"                      # or "type" (linear, conv1d, conv2d), "regex_name"
//! keep_weights = false             # true: old weights keep their place in the wider tensors
//! [passes.channel_multiplier.seq_blocks_2.config]
//! name = "output_only"             # out_features x channel_multiplier
//! channel_multiplier = 2
//! [passes.channel_multiplier.seq_blocks_4.config]
//! name = "both"                    # input follows the widened producer, output x multiplier
//! channel_multiplier = 4
//! [passes.channel_multiplier.seq_blocks_6.config]
//! name = "input_only"              # input follows the widened producer
//! ```
//!
//! Every width is derived from the graph. A layer with `output_only` or `both` gets
//! `out = old_out x channel_multiplier`; then the graph is walked in order and every node whose
//! shape follows the widened value is rewritten from the new shapes: BatchNorm1d/2d
//! `num_features`, the `in_features`/`in_channels` of the consumers (also when they carry no
//! config), a `view(-1, K)` after the features (`K` becomes the new per-sample size) and the
//! classifier `Linear` after a flatten, whose `in_features` grow by the channel factor times the
//! spatial size. Activations, pooling, dropout and flatten follow by shape inference.
//!
//! `input_only` and the input side of `both` say that the layer's input comes from a widened
//! producer; the input width is then the producer's, whatever its multiplier (a `both` layer after
//! an `output_only` x2 one takes 2x inputs even when its own multiplier is 4). A
//! `channel_multiplier` given with `input_only` is checked against that width.
//!
//! Refused, with the node names: `input_only` or `both` on a layer that no widened layer feeds
//! (MASE's lab code would silently build a model that cannot run), a residual `add` (or any
//! elementwise op or concatenation) whose two sides would get different widths, a widening that
//! reaches the model output (the class count would change), a view that does not keep the batch
//! dimension, a grouped convolution whose input width changes, and a module called by several
//! nodes.
//!
//! New tensors are drawn as PyTorch initialises a new module (`mase_runtime::init_tensor`: the
//! uniform bound uses the new fan-in; BatchNorm weights 1, biases and running means 0, running
//! variances 1) from the context's seed. With `keep_weights = true` the old values are copied
//! into the leading block they came from (old output channel `o` and input channel `i` stay `o`
//! and `i`), and only the new rows and columns are fresh; the copied values keep the scale of
//! the old fan-in. Tensors whose shape does not change are kept as they are.

use super::resize::copy_into_leading_block;
use crate::keyed::{entry_config, parse_by, ChangeableOps, Keyed};
use crate::metadata::common::refresh;
use crate::select::{type_key, By};
use crate::table::{Table, TableFormat};
use crate::{PassContext, PassError, PassReport, Result};
use indexmap::IndexMap;
use mase_ir::{DimArg, Graph, NodeId, Op, ParamStore, Rng, ValueInfo};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

const PASS: &str = "channel_multiplier";

/// The ops this pass can widen (their `mase_op` names, the keys of `by = "type"`).
pub const WIDENABLE_OPS: &[&str] = &["linear", "conv1d", "conv2d"];

/// The nodes this pass can change, and the words its errors use for them.
const WIDENABLE: ChangeableOps =
    ChangeableOps { ops: WIDENABLE_OPS, by_key_only: &[], key_noun: "layers", action_done: "widened", list_heading: "widenable" };

/// The stream of the context's seed that new tensors are drawn from.
const INIT_STREAM: u64 = 0xC4A2;

/// Batch size of the shape probe; 2 rather than 1 so that a view that mixes samples shows.
const PROBE_BATCH: usize = 2;

/// What a config does to its layer (MASE lab 4's `name`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WidenMode {
    /// Widen the output; the input stays.
    OutputOnly,
    /// Take the widened input of the producer and widen the output.
    Both,
    /// Take the widened input of the producer; the output stays.
    InputOnly,
}

impl WidenMode {
    /// The config spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            WidenMode::OutputOnly => "output_only",
            WidenMode::Both => "both",
            WidenMode::InputOnly => "input_only",
        }
    }

    fn parse(s: &str) -> Option<WidenMode> {
        match s {
            "output_only" => Some(WidenMode::OutputOnly),
            "both" => Some(WidenMode::Both),
            "input_only" => Some(WidenMode::InputOnly),
            _ => None,
        }
    }

    fn widens_output(self) -> bool {
        matches!(self, WidenMode::OutputOnly | WidenMode::Both)
    }

    fn takes_widened_input(self) -> bool {
        matches!(self, WidenMode::Both | WidenMode::InputOnly)
    }
}

/// The `config` table of one key: a mode (`None` for `name = "NA"`: leave the layer) and its
/// multiplier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerConfig {
    pub mode: Option<WidenMode>,
    pub channel_multiplier: Option<usize>,
}

/// Parsed arguments of `channel_multiplier`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(try_from = "Map<String, Value>")]
pub struct ChannelArgs {
    pub by: By,
    /// The `default.config` table: applies to widenable layers no key selects.
    pub default: Option<LayerConfig>,
    /// Selector key (op type, node name or pattern) to its config, in order.
    pub entries: IndexMap<String, LayerConfig>,
    /// Copy the old weights into the leading block of the new tensors.
    pub keep_weights: bool,
    /// Shape of one input sample, when neither the data set nor the graph's metadata gives it.
    pub input_shape: Option<Vec<usize>>,
}

fn parse_layer(key: &str, v: &Value) -> std::result::Result<LayerConfig, String> {
    let c = entry_config(key, v)?;
    if let Some(extra) = c.keys().find(|x| !["name", "channel_multiplier"].contains(&x.as_str())) {
        return Err(format!("`{key}.config.{extra}`: unknown key (expected name, channel_multiplier)"));
    }
    let mode = match c.get("name") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s == "NA" => None,
        Some(Value::String(s)) => Some(
            WidenMode::parse(s)
                .ok_or_else(|| format!("`{key}.config.name = \"{s}\"`: expected \"output_only\", \"both\", \"input_only\" or \"NA\""))?,
        ),
        Some(other) => return Err(format!("`{key}.config.name = {other}`: expected a string")),
    };
    let channel_multiplier = match c.get("channel_multiplier") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) if s == "NA" => None,
        Some(v) => Some(
            v.as_u64().filter(|&m| m >= 1).ok_or_else(|| format!("`{key}.config.channel_multiplier = {v}`: expected a positive integer"))?
                as usize,
        ),
    };
    if mode.is_some_and(WidenMode::widens_output) && channel_multiplier.is_none() {
        return Err(format!("`{key}.config`: `{}` needs a `channel_multiplier`", mode.map_or("", WidenMode::as_str)));
    }
    Ok(LayerConfig { mode, channel_multiplier })
}

impl TryFrom<Map<String, Value>> for ChannelArgs {
    type Error = String;

    fn try_from(m: Map<String, Value>) -> std::result::Result<ChannelArgs, String> {
        let by = parse_by(&m)?;
        let mut args = ChannelArgs { by, default: None, entries: IndexMap::new(), keep_weights: false, input_shape: None };
        for (k, v) in &m {
            match k.as_str() {
                "by" => {}
                "report" if v.is_boolean() => {}
                "keep_weights" => args.keep_weights = v.as_bool().ok_or_else(|| format!("`keep_weights = {v}`: expected true or false"))?,
                "input_shape" => {
                    let dims: Option<Vec<usize>> = v.as_array().and_then(|a| a.iter().map(|d| d.as_u64().map(|d| d as usize)).collect());
                    args.input_shape = Some(
                        dims.filter(|d| !d.is_empty() && d.iter().all(|&x| x > 0))
                            .ok_or_else(|| format!("`input_shape = {v}`: expected a list of positive sizes of one sample"))?,
                    );
                }
                "default" => args.default = Some(parse_layer(k, v)?),
                _ => {
                    args.entries.insert(k.clone(), parse_layer(k, v)?);
                }
            }
        }
        Ok(args)
    }
}

/// One layer the transform changed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LayerChange {
    pub node: String,
    pub mase_op: String,
    /// The config that selected it (`None` for a node that only follows a widened one).
    pub mode: Option<WidenMode>,
    pub channel_multiplier: Option<usize>,
    /// PyTorch's `repr` of the module before and after (or the op's name for a view).
    pub before: String,
    pub after: String,
}

/// The widened model.
#[derive(Clone, Debug)]
pub struct Widened {
    pub graph: Graph,
    pub params: ParamStore,
    /// Every node whose op changed, in graph order.
    pub changes: Vec<LayerChange>,
    pub warnings: Vec<String>,
}

/// What a config asks of one node.
#[derive(Clone, Copy, Debug)]
struct NodeWidening {
    mode: WidenMode,
    multiplier: Option<usize>,
}

fn node_err(node: &str, reason: impl Into<String>) -> PassError {
    PassError::Node { pass: PASS.into(), node: node.to_string(), reason: reason.into() }
}

/// The config of every node, by id.
fn node_widenings(graph: &Graph, args: &ChannelArgs) -> Result<(Vec<Option<NodeWidening>>, Vec<String>)> {
    let (keyed, warnings) = Keyed::new(PASS, graph, args.by, &args.entries, args.default.as_ref(), &WIDENABLE)?;
    let mut out = Vec::with_capacity(graph.len());
    for node in graph.nodes() {
        let cfg = keyed.pick(node)?.map(|p| p.config);
        out.push(cfg.and_then(|c| c.mode.map(|mode| NodeWidening { mode, multiplier: c.channel_multiplier })));
    }
    Ok((out, warnings))
}

fn tensor_shape<'a>(v: &'a ValueInfo, node: &str) -> Result<&'a [usize]> {
    match v {
        ValueInfo::Tensor(s) => Ok(s),
        ValueInfo::Int(_) => Err(node_err(node, "its input is an integer, not a tensor")),
    }
}

/// Describes where the width of a value comes from, for error messages.
fn origin(graph: &Graph, widened_by: Option<NodeId>) -> String {
    match widened_by {
        Some(p) => format!("widened by `{}`", graph.node(p).name),
        None => "not widened".into(),
    }
}

/// The new op of every node (the old one where nothing changes) when `graph` is widened as
/// `args` say, checking the config against the graph; `params` only gives the shapes of
/// constants. This is the whole transform except the new tensors, and is cheap: a search space
/// checks its choices with it before any trial.
pub fn widened_ops(graph: &Graph, params: &ParamStore, args: &ChannelArgs, sample_shape: &[usize]) -> Result<WidenedOps> {
    let (widenings, warnings) = node_widenings(graph, args)?;
    let consts = |name: &str| params.get(name).map(|t| t.shape.clone());
    let mut probe = vec![PROBE_BATCH];
    probe.extend(sample_shape);
    let old = graph.infer_shapes(&[probe], &consts)?;

    // Targets called by several nodes: widening one call would change the module of the others.
    let mut calls: IndexMap<&str, usize> = IndexMap::new();
    for n in graph.nodes().iter().filter(|n| !n.params().is_empty()) {
        *calls.entry(n.target.as_str()).or_default() += 1;
    }

    let mut new_ops: Vec<Op> = Vec::with_capacity(graph.len());
    let mut new: Vec<ValueInfo> = Vec::with_capacity(graph.len());
    // The widened layer whose output reaches each value through shape-following nodes.
    let mut widened_by: Vec<Option<NodeId>> = Vec::with_capacity(graph.len());
    for id in graph.ids() {
        let node = graph.node(id);
        let name = node.name.as_str();
        if matches!(node.op, Op::Input | Op::Constant) {
            new_ops.push(node.op.clone());
            new.push(old[id.0].clone());
            widened_by.push(None);
            continue;
        }
        let ins: Vec<ValueInfo> = node.inputs.iter().map(|i| new[i.0].clone()).collect();
        let src = node.inputs.iter().find_map(|i| widened_by[i.0]);
        let widening = widenings[id.0];
        let mut op = node.op.clone();
        let mut src_out = src;
        // The input width a layer sees now, checked against what its config says of its input.
        let take_input = |old_in: usize, new_in: usize| -> Result<()> {
            let Some(p) = widening.filter(|p| p.mode.takes_widened_input()) else { return Ok(()) };
            let Some(s) = src else {
                let producer = node.inputs.first().map(|i| graph.node(*i).name.as_str()).unwrap_or("?");
                return Err(node_err(
                    name,
                    format!(
                        "`{}` takes a widened input, but no widened layer feeds it (its input `{producer}` is not widened): \
                         give the layer before it `output_only` or `both`, or drop the input side",
                        p.mode.as_str()
                    ),
                ));
            };
            if let (WidenMode::InputOnly, Some(m)) = (p.mode, p.multiplier) {
                if new_in != old_in * m {
                    return Err(node_err(
                        name,
                        format!(
                            "`input_only` with channel_multiplier {m} expects {} input features, but `{}` gives it {new_in} \
                             (x{}); give both layers the same multiplier or leave it out of the input_only config",
                            old_in * m,
                            graph.node(s).name,
                            new_in as f64 / old_in.max(1) as f64
                        ),
                    ));
                }
            }
            Ok(())
        };
        let out_mult = widening.filter(|p| p.mode.widens_output()).and_then(|p| p.multiplier);
        if (widening.is_some() || ins.iter().zip(&node.inputs).any(|(v, i)| *v != old[i.0]))
            && calls.get(node.target.as_str()).copied().unwrap_or(0) > 1
        {
            return Err(node_err(name, format!("module `{}` is called by several nodes; a shared module cannot be widened", node.target)));
        }
        match &mut op {
            Op::Linear { in_features, out_features, .. } => {
                let x = tensor_shape(&ins[0], name)?;
                let width = *x.last().ok_or_else(|| node_err(name, "its input has no dimensions"))?;
                take_input(*in_features, width)?;
                *in_features = width;
                src_out = out_mult.map(|m| {
                    *out_features *= m;
                    id
                });
            }
            Op::Conv1d(c) | Op::Conv2d(c) => {
                let x = tensor_shape(&ins[0], name)?;
                let width = *x.get(1).ok_or_else(|| node_err(name, "its input has no channel dimension"))?;
                take_input(c.in_channels, width)?;
                if width != c.in_channels && c.groups != 1 {
                    return Err(node_err(
                        name,
                        format!("a grouped convolution ({} groups) cannot follow a widened input ({})", c.groups, origin(graph, src)),
                    ));
                }
                c.in_channels = width;
                src_out = out_mult.map(|m| {
                    c.out_channels *= m;
                    id
                });
            }
            Op::BatchNorm1d(n) | Op::BatchNorm2d(n) => {
                let x = tensor_shape(&ins[0], name)?;
                n.num_features = *x.get(1).ok_or_else(|| node_err(name, "its input has no channel dimension"))?;
            }
            Op::Reshape { shape } if ins.first() != node.inputs.first().map(|i| &old[i.0]) => {
                let old_in = old[node.inputs[0].0].shape();
                let old_out = old[id.0].shape();
                if old_out.len() != 2 || old_in.first() != old_out.first() {
                    return Err(node_err(
                        name,
                        format!(
                            "a view from {old_in:?} to {old_out:?} cannot follow a widened input ({}); \
                             only views that keep the batch and flatten the rest ([N, -1] or [-1, K]) can",
                            origin(graph, src)
                        ),
                    ));
                }
                let per_sample: usize = tensor_shape(&ins[0], name)?.iter().skip(1).product();
                if let Some(DimArg::Const(k)) = shape.get_mut(1) {
                    if *k != -1 {
                        *k = per_sample as i64;
                    }
                }
            }
            _ => {}
        }
        let value = op.infer(name, &ins).map_err(|e| {
            let sides: Vec<String> = node
                .inputs
                .iter()
                .map(|i| format!("`{}` gives {:?} ({})", graph.node(*i).name, new[i.0].shape(), origin(graph, widened_by[i.0])))
                .collect();
            PassError::node_cause(PASS, name, format!("its inputs no longer fit after widening: {}", sides.join(", ")), e)
        })?;
        if matches!(op, Op::Output) && value != old[id.0] {
            return Err(node_err(
                name,
                format!(
                    "the model output would change from {:?} to {:?} ({}); the last layer cannot widen its output",
                    old[id.0].shape(),
                    value.shape(),
                    origin(graph, src)
                ),
            ));
        }
        new_ops.push(op);
        new.push(value);
        widened_by.push(src_out);
    }
    Ok(WidenedOps { ops: new_ops, widenings, warnings })
}

/// The result of [`widened_ops`]: one op per node, and what the config asked of each node.
#[derive(Clone, Debug)]
pub struct WidenedOps {
    pub ops: Vec<Op>,
    widenings: Vec<Option<NodeWidening>>,
    pub warnings: Vec<String>,
}

/// Widens `graph` as `args` say. `sample_shape` is the shape of one input sample; new tensors
/// come from `seed`. The inputs are not modified; on an error nothing is built.
pub fn widen_graph(graph: &Graph, params: &ParamStore, args: &ChannelArgs, sample_shape: &[usize], seed: u64) -> Result<Widened> {
    let WidenedOps { ops: new_ops, widenings, warnings } = widened_ops(graph, params, args, sample_shape)?;
    let mut out_graph = graph.clone();
    let mut out_params = params.clone();
    let mut changes = Vec::new();
    let mut rng = Rng::new(seed).fork(INIT_STREAM);
    for (id, op) in graph.ids().zip(new_ops) {
        let node = graph.node(id);
        if node.op == op {
            continue;
        }
        let repr = |o: &Op| o.module_repr().unwrap_or_else(|| format!("{o:?}"));
        changes.push(LayerChange {
            node: node.name.clone(),
            mase_op: type_key(node),
            mode: widenings[id.0].map(|p| p.mode),
            channel_multiplier: widenings[id.0].filter(|p| p.mode.widens_output()).and_then(|p| p.multiplier),
            before: repr(&node.op),
            after: repr(&op),
        });
        out_graph.node_mut(id).op = op;
        for (pname, spec) in out_graph.node(id).params() {
            let old_t = params.require(&pname)?;
            if old_t.shape == spec.shape {
                continue;
            }
            let mut t = mase_runtime::init_tensor(&spec, &mut rng);
            if args.keep_weights && !copy_into_leading_block(old_t, &mut t) {
                return Err(node_err(&node.name, format!("`{pname}` would shrink from {:?} to {:?}", old_t.shape, spec.shape)));
            }
            out_params.insert(pname, t, spec.trainable);
        }
    }
    mase_ir::validate(&out_graph, None)?;
    Ok(Widened { graph: out_graph, params: out_params, changes, warnings })
}

/// The pass: [`widen_graph`] on the context's parameters, then the metadata refresh.
pub fn channel_multiplier(graph: &mut Graph, ctx: &mut PassContext, args: &ChannelArgs) -> Result<PassReport> {
    PassContext::require_one_input(PASS, graph)?;
    let sample = args.input_shape.clone().or_else(|| ctx.sample_shape(graph)).ok_or_else(|| PassError::NoData {
        pass: PASS.into(),
        reason: "the input shape is unknown: give a data set, run add_common_metadata first, or set `input_shape`".into(),
    })?;
    let before = ctx.params.trainable_count();
    let w = widen_graph(graph, &ctx.params, args, &sample, ctx.seed)?;
    *graph = w.graph;
    ctx.params = w.params;
    refresh(graph, ctx)?;
    let after = ctx.params.trainable_count();
    let mut t = Table::new(["Node name", "Mase op", "Config", "Before", "After"]);
    for c in &w.changes {
        let cfg = match (c.mode, c.channel_multiplier) {
            (Some(m), Some(k)) => format!("{} x{k}", m.as_str()),
            (Some(m), None) => m.as_str().to_string(),
            (None, _) => "follows".to_string(),
        };
        t.push([c.node.clone(), c.mase_op.clone(), cfg, c.before.clone(), c.after.clone()]);
    }
    let text = format!("{}\nTrainable parameters: {before} -> {after}", t.render(TableFormat::Simple));
    let mut r = PassReport::new(
        PASS,
        json!({"changed": w.changes, "trainable_params_before": before, "trainable_params_after": after,
               "keep_weights": args.keep_weights, "input_shape": sample}),
    )
    .with_text(text);
    r.warnings = w.warnings;
    Ok(r)
}
