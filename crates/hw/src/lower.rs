//! Lowering: a quantized graph to a [`Design`], checking that every node computes in integer
//! arithmetic exactly as the integer executor (`mase_runtime::run_integer`) runs it.
//!
//! The graph must be a chain from its input to its output of:
//! - `linear` nodes whose `data_in`, weight and bias have `integer` formats (`data_out`, when
//!   present, an `integer` format too): one layer each;
//! - `relu` nodes, quantized with `integer` formats or not quantized (then they act on the codes
//!   of the value before them, as the integer executor runs them);
//! - `batch_norm1d` nodes in the affine form `fold_batch_norm` leaves (running mean 0, running
//!   variance 1, `eps` 0), with `integer` `data_in`, weight and bias formats (and `data_out`, when
//!   present): a per-channel [`Step::Affine`], then the rescale to `data_out`;
//! - `flatten` and `dropout`, which do nothing to one flat sample in inference.
//!
//! Steps before the first linear (a batch norm first in the graph, the relu after it) become
//! steps of the first layer's input, and the stream starts in the first such node's `data_in`
//! format.
//!
//! Any other node, or a linear/relu with a non-integer format, is named in one error listing
//! every such node.

use crate::design::{signed_bits, Design, Layer, Range, Step};
use crate::error::{HwError, Result};
use mase_ir::{Graph, Node, NodeKind, Op, ParamStore, QuantFormat};
use mase_quant::Fixed;

/// Per-layer choices of the lowering.
#[derive(Clone, Debug, Default)]
pub struct LowerOptions {
    /// Reuse factor per layer node name; layers not named are fully unrolled (1).
    pub reuse: Vec<(String, usize)>,
    /// Reuse factor of every layer not named in `reuse` (0 or 1: fully unrolled).
    pub default_reuse: usize,
    /// The shape of one input sample without the batch (`[C, H, W]` for images), which the
    /// streaming stages of convolutions and pools need; `None`: not known (an MLP needs none).
    pub input_shape: Option<Vec<usize>>,
}

/// The hardware metadata key of a layer's reuse factor (MASE's `node.meta["mase"]["hardware"]`),
/// which a hardware search space and a `quantize` entry's `hardware` table set.
pub const REUSE_FACTOR: &str = "reuse_factor";

/// The reuse factor of every node that has one in its hardware metadata, in graph order; a value
/// that is not a positive integer is an error naming the node.
pub fn metadata_reuse(graph: &Graph) -> Result<Vec<(String, usize)>> {
    let mut out = Vec::new();
    for n in graph.nodes() {
        if let Some(v) = n.meta.hardware.get(REUSE_FACTOR) {
            let r = v.as_u64().filter(|&r| r > 0).ok_or_else(|| HwError::ReuseMetadata { node: n.name.clone(), value: v.to_string() })?;
            out.push((n.name.clone(), r as usize));
        }
    }
    Ok(out)
}

impl LowerOptions {
    pub(crate) fn reuse_of(&self, node: &str) -> usize {
        self.reuse.iter().find(|(n, _)| n == node).map_or(self.default_reuse.max(1), |(_, r)| (*r).max(1))
    }
}

fn fixed(f: Option<&QuantFormat>) -> Option<Fixed> {
    f.and_then(Fixed::of)
}

/// Lowers `graph` (quantized, with its parameters) to a design named `model`.
pub fn lower(graph: &Graph, params: &ParamStore, model: &str, opts: &LowerOptions) -> Result<Design> {
    // Binarized networks (bipolar weights and activations) become XNOR-popcount layers.
    if crate::bipolar::is_bipolar(graph) {
        return crate::bipolar::lower(graph, params, model, opts);
    }
    // PyTorch code kept in the graph has no hardware at all, whatever surrounds it.
    let opaque: Vec<String> = graph
        .nodes()
        .iter()
        .filter_map(|n| match &n.op {
            Op::Opaque { class, .. } => Some(format!("`{}` ({class})", n.name)),
            _ => None,
        })
        .collect();
    if !opaque.is_empty() {
        return Err(HwError::Structure {
            reason: format!("{} run as PyTorch code (opaque nodes), which has no hardware: {}", opaque.len(), opaque.join(", ")),
        });
    }
    let mut chain = Chain::default();
    let mut not_integer = Vec::new();
    for (i, node) in graph.nodes().iter().enumerate() {
        check_reads_the_node_before(node, i)?;
        let q = node.quant.as_ref().filter(|q| q.is_active());
        let lowered = match &node.op {
            Op::Input if i != 0 => return Err(HwError::Structure { reason: format!("input `{}` is not the first node", node.name) }),
            Op::Input | Op::Output | Op::Dropout { .. } | Op::StochasticDepth { .. } => Ok(()),
            Op::Flatten { .. } => {
                crate::conv::lower::flatten(&mut chain);
                Ok(())
            }
            Op::Linear { in_features, out_features, bias } => {
                lower_linear(&mut chain, node, (*in_features, *out_features, *bias), q, params, opts)?
            }
            Op::Relu => lower_relu(&mut chain, q),
            Op::BatchNorm1d(spec) | Op::BatchNorm2d(spec) => lower_batch_norm(&mut chain, node, spec.num_features, q, params)?,
            Op::Conv2d(spec) => crate::conv::lower::conv2d(&mut chain, node, spec, q, params, opts)?,
            Op::MaxPool2d(spec) => crate::conv::lower::max_pool2d(&mut chain, node, spec, q)?,
            other => Err(format!("no integer hardware for {}", other.mase_op()).into()),
        };
        match lowered {
            // A node after a refused one that only lacks the format the refused node would
            // have given it is not a problem of its own: only the refused node is named.
            Err(Refusal::NoFormat) if !not_integer.is_empty() => {}
            Err(r) => {
                chain.refused = true;
                not_integer.push(format!("{} ({}): {}", node.name, node.op.mase_op(), r.reason()));
            }
            Ok(()) => {}
        }
    }
    if !not_integer.is_empty() {
        return Err(HwError::NotInteger { nodes: not_integer.join("; ") });
    }
    if chain.spatial.is_some() {
        return Err(HwError::Structure {
            reason: "the last convolution or pool is not flattened into a linear layer; only a linear layer can end the design".into(),
        });
    }
    let (Some(fx), false, None) = (chain.input_format, chain.layers.is_empty(), chain.lead.as_ref()) else {
        return Err(HwError::Structure {
            reason: "no quantized linear layer to build, or nodes after the last one that are not element-wise steps of it".into(),
        });
    };
    Ok(Design {
        model: model.to_string(),
        input_format: (fx.width, fx.frac_width, fx.signed),
        layers: chain.layers,
        clock_mhz: None,
        stages: chain.stages,
        multipliers: Default::default(),
        bipolar: None,
        part: None,
    })
}

/// What the lowering has built so far.
#[derive(Default)]
pub(crate) struct Chain {
    pub(crate) layers: Vec<Layer>,
    /// The format of the stream's input, set by the first layer or stage.
    pub(crate) input_format: Option<Fixed>,
    /// Steps before the first layer, from the stream's input format, and the channels they need.
    pub(crate) lead: Option<Lead>,
    /// The streaming stages of convolutions and pools, before the layers.
    pub(crate) stages: Vec<crate::conv::Stage>,
    /// The image `[C, H, W]` leaving the last stage, until a `flatten` makes it a vector.
    pub(crate) spatial: Option<[usize; 3]>,
    /// A node was refused: the nodes after it lack the formats it would have given them.
    pub(crate) refused: bool,
}

/// Why a node is not integer hardware.
pub(crate) enum Refusal {
    /// The node itself cannot be lowered.
    Reason(String),
    /// An element-wise node with no integer format before it.
    NoFormat,
}

impl Refusal {
    fn reason(&self) -> String {
        match self {
            Refusal::Reason(r) => r.clone(),
            Refusal::NoFormat => "comes before the first integer node, so its input has no integer format".into(),
        }
    }
}

impl From<String> for Refusal {
    fn from(r: String) -> Refusal {
        Refusal::Reason(r)
    }
}

impl From<&str> for Refusal {
    fn from(r: &str) -> Refusal {
        Refusal::Reason(r.into())
    }
}

/// A node's lowering: `Err` when the graph cannot become a design at all, `Ok(Err(reason))` when
/// this node is not integer hardware (every such node is listed in one error at the end).
pub(crate) type Lowered = Result<std::result::Result<(), Refusal>>;

/// Every node but the input must read the node before it, and only it.
fn check_reads_the_node_before(node: &Node, i: usize) -> Result<()> {
    if node.kind == NodeKind::Placeholder || i == 0 {
        return Ok(());
    }
    if node.inputs.first().map(|u| u.0) != Some(i - 1) || node.inputs.len() != 1 {
        return Err(HwError::Structure {
            reason: format!("node `{}` does not read the node before it alone; only chains of layers are lowered", node.name),
        });
    }
    Ok(())
}

/// The `data_in`, weight, bias and (optional) `data_out` formats of a linear node; a linear
/// without bias gets a 1-bit zero bias.
pub(crate) fn linear_formats(q: &mase_ir::NodeQuant, bias: bool) -> Option<(Fixed, Fixed, Fixed, Option<Fixed>)> {
    let fx = fixed(q.data_in.first().and_then(Option::as_ref))?;
    let fw = fixed(q.weight.as_ref())?;
    let fb = if bias { fixed(q.bias.as_ref())? } else { Fixed { width: 1, frac_width: 0, signed: true } };
    let fo = match q.data_out.as_ref().map(Fixed::of) {
        None => None,
        Some(Some(f)) => Some(f),
        Some(None) => return None,
    };
    Some((fx, fw, fb, fo))
}

/// The range of codes a new layer reads and the steps before its product: the last layer's output
/// rescaled to `fx`, or the steps before the first layer (which then set the stream's format).
fn layer_input(chain: &mut Chain, node: &Node, fx: Fixed, in_features: usize) -> Result<(Range, Vec<Step>)> {
    if let (None, Some(stage)) = (chain.layers.last(), chain.stages.last()) {
        if stage.out_len() != in_features {
            return Err(HwError::Structure {
                reason: format!(
                    "node `{}` gives {} codes per sample, the linear `{}` after it takes {in_features}",
                    stage.node(),
                    stage.out_len(),
                    node.name
                ),
            });
        }
        return Ok((stage.output(), vec![Step::requant(fx)]));
    }
    match (chain.layers.last(), chain.lead.take()) {
        (Some(l), _) => Ok((l.output(), vec![Step::requant(fx)])),
        (None, Some(lead)) => {
            if let Some((bn, c)) = lead.channels.iter().find(|(_, c)| *c != in_features) {
                return Err(HwError::Structure {
                    reason: format!("node `{bn}` has {c} channels, the linear `{}` after it {in_features} inputs", node.name),
                });
            }
            chain.input_format = Some(lead.format);
            let mut pre = lead.steps;
            pre.push(Step::requant(fx));
            Ok((Range::of(lead.format), pre))
        }
        (None, None) => {
            chain.input_format = Some(fx);
            Ok((Range::of(fx), Vec::new()))
        }
    }
}

/// A linear node as a layer of the chain.
fn lower_linear(
    chain: &mut Chain,
    node: &Node,
    (in_features, out_features, bias): (usize, usize, bool),
    q: Option<&mase_ir::NodeQuant>,
    params: &ParamStore,
    opts: &LowerOptions,
) -> Lowered {
    let Some(q) = q else { return Ok(Err("not quantized".into())) };
    let Some((fx, fw, fb, fo)) = linear_formats(q, bias) else {
        return Ok(Err("data_in, weight and bias need `integer` formats".into()));
    };
    if chain.spatial.is_some() {
        return Err(HwError::Structure { reason: format!("the linear `{}` reads an image that no flatten made a vector", node.name) });
    }
    let (input, pre) = layer_input(chain, node, fx, in_features)?;
    let w = param_codes(params, &format!("{}.weight", node.target), fw, in_features * out_features)?;
    let b = if bias { Some(param_codes(params, &format!("{}.bias", node.target), fb, out_features)?) } else { None };
    let (target, w, b) = at_accumulator_scale(w, b, fx, fw, fb, out_features);
    let layer = Layer {
        node: node.name.clone(),
        input,
        pre,
        in_features,
        out_features,
        weight: w,
        bias: b,
        acc: Range { lo: 0, hi: 0, frac: target },
        post: fo.map(Step::requant).into_iter().collect(),
        reuse: opts.reuse_of(&node.name),
        products: Default::default(),
    };
    chain.layers.push(with_accumulator(layer)?);
    Ok(Ok(()))
}

/// The layer with the range of its sums (`acc.frac` already set) over every input in range,
/// checked to fit 64 bits, and its reuse factor checked to divide its inputs.
pub(crate) fn with_accumulator(mut layer: Layer) -> Result<Layer> {
    let (lo, hi) = sum_bounds(&layer.weight, &layer.bias, layer.in_features, layer.product_input());
    let bits = signed_bits(lo, hi);
    if bits > 64 {
        return Err(HwError::AccumulatorTooWide { node: layer.node, bits });
    }
    if layer.in_features % layer.reuse != 0 {
        return Err(HwError::ReuseFactor { node: layer.node, reuse: layer.reuse, inputs: layer.in_features });
    }
    layer.acc.lo = lo as i64;
    layer.acc.hi = hi as i64;
    Ok(layer)
}

/// A relu as steps of the chain: on codes of its `data_in` (then rescaled to `data_out`) when
/// quantized, else on the codes of the value before it.
fn lower_relu(chain: &mut Chain, q: Option<&mase_ir::NodeQuant>) -> std::result::Result<(), Refusal> {
    let mut steps = vec![Step::Relu];
    let mut fin = None;
    if let Some(q) = q {
        let fi = fixed(q.data_in.first().and_then(Option::as_ref));
        let fo = q.data_out.as_ref().map(Fixed::of);
        let (Some(fi), None | Some(Some(_))) = (fi, fo) else {
            return Err("data_in and data_out need `integer` formats".into());
        };
        fin = Some(fi);
        steps.extend(fo.flatten().map(Step::requant));
    }
    attach(chain, fin, steps, None)
}

/// A batch norm in affine form as steps of the chain.
fn lower_batch_norm(chain: &mut Chain, node: &Node, channels: usize, q: Option<&mase_ir::NodeQuant>, params: &ParamStore) -> Lowered {
    let (fin, steps) = match affine_steps(node, channels, q, params) {
        Ok(v) => v,
        Err(reason) => return Ok(Err(reason.into())),
    };
    // The widest value of the affine, over the range it sees, must fit 64 bits.
    if let Some(Step::Affine { mul, add, .. }) = steps.first() {
        let (lo, hi) = crate::design::affine_bounds(mul, add, Range::of(fin));
        let bits = signed_bits(lo, hi);
        if bits > 64 {
            return Err(HwError::AccumulatorTooWide { node: node.name.clone(), bits });
        }
    }
    if chain.layers.is_empty() && !chain.stages.is_empty() && chain.spatial.is_none() {
        return Err(HwError::Structure {
            reason: format!(
                "node `{}` is a batch norm between a flatten and the first linear; only a linear reads a flattened image",
                node.name
            ),
        });
    }
    if let Some([c, _, _]) = chain.spatial {
        if c != channels {
            return Err(HwError::Structure { reason: format!("node `{}` has {channels} channels, the image before it {c}", node.name) });
        }
    } else if let Some(l) = chain.layers.last() {
        if l.out_features != channels {
            return Err(HwError::Structure {
                reason: format!(
                    "node `{}` has {} channels, the layer `{}` before it {} outputs",
                    node.name, channels, l.node, l.out_features
                ),
            });
        }
    }
    Ok(attach(chain, Some(fin), steps, Some((node.name.clone(), channels))))
}

/// Element-wise steps met before the first layer.
pub(crate) struct Lead {
    /// The format the stream starts in: the first step's `data_in`.
    pub(crate) format: Fixed,
    pub(crate) steps: Vec<Step>,
    /// Batch norms among the steps and their channels, which the first layer's inputs must match.
    pub(crate) channels: Vec<(String, usize)>,
}

/// Appends the steps of an element-wise node to the last layer's output, or to the steps before
/// the first layer. `fin`: the node's `data_in` format (its codes are rescaled to it first), if
/// it has one; a node without one needs a format before it.
fn attach(chain: &mut Chain, fin: Option<Fixed>, steps: Vec<Step>, bn: Option<(String, usize)>) -> std::result::Result<(), Refusal> {
    let rescaled = |steps: Vec<Step>| fin.map(Step::requant).into_iter().chain(steps).collect::<Vec<_>>();
    if chain.layers.is_empty() {
        match chain.stages.last_mut() {
            Some(crate::conv::Stage::Conv(s)) => {
                s.mvu.post.extend(rescaled(steps));
                return Ok(());
            }
            Some(crate::conv::Stage::MaxPool(s)) => {
                s.post.extend(rescaled(steps));
                return Ok(());
            }
            None => {}
        }
    }
    match (chain.layers.last_mut(), chain.lead.as_mut(), fin) {
        (Some(l), _, _) => l.post.extend(rescaled(steps)),
        (None, Some(lead), _) => {
            lead.steps.extend(rescaled(steps));
            lead.channels.extend(bn);
        }
        (None, None, Some(format)) => chain.lead = Some(Lead { format, steps, channels: bn.into_iter().collect() }),
        (None, None, None) => return Err(Refusal::NoFormat),
    }
    Ok(())
}

/// The `data_in` format and the steps of a batch norm in affine form: the per-channel affine on
/// codes of `data_in`, then the rescale to `data_out` when it has one. The arithmetic is the
/// integer executor's (a linear layer with one product per output).
fn affine_steps(
    node: &Node,
    channels: usize,
    q: Option<&mase_ir::NodeQuant>,
    params: &ParamStore,
) -> std::result::Result<(Fixed, Vec<Step>), String> {
    let Some(q) = q else { return Err("not quantized".into()) };
    let (Some(fx), Some(fw), Some(fb)) =
        (fixed(q.data_in.first().and_then(Option::as_ref)), fixed(q.weight.as_ref()), fixed(q.bias.as_ref()))
    else {
        return Err("data_in, weight and bias need `integer` formats".into());
    };
    let fo = match q.data_out.as_ref().map(Fixed::of) {
        None => None,
        Some(Some(f)) => Some(f),
        Some(None) => return Err("data_out needs an `integer` format".into()),
    };
    let value = |name: &str| params.get(&format!("{}.{name}", node.target)).filter(|t| t.data.len() == channels);
    let all = |name: &str, v: f32| value(name).is_some_and(|t| t.data.iter().all(|&x| x == v));
    let eps_zero = matches!(&node.op, Op::BatchNorm1d(s) | Op::BatchNorm2d(s) if s.eps == 0.0 && s.affine);
    if !eps_zero || !all("running_mean", 0.0) || !all("running_var", 1.0) {
        return Err("a batch norm with running statistics (run fold_batch_norm first)".into());
    }
    let codes = |name: &str, f: Fixed| -> std::result::Result<Vec<i64>, String> {
        let t = value(name).ok_or_else(|| format!("parameter `{}.{name}` is missing or has the wrong size", node.target))?;
        t.data.iter().map(|&v| f.code(v).ok_or_else(|| format!("parameter `{}.{name}` holds NaN", node.target))).collect()
    };
    let (m, a) = (codes("weight", fw)?, codes("bias", fb)?);
    // The bias at the products' scale: whichever has fewer fraction bits moves up.
    let frac = fx.frac_width + fw.frac_width;
    let target = frac.max(fb.frac_width);
    let mul = m.iter().map(|v| v << (target - frac)).collect();
    let add = a.iter().map(|v| v << (target - fb.frac_width)).collect();
    let mut steps = vec![Step::Affine { mul, add, frac: target }];
    steps.extend(fo.map(Step::requant));
    Ok((fx, steps))
}

/// The codes of a parameter, checked against the size the layer needs.
pub(crate) fn param_codes(params: &ParamStore, name: &str, f: Fixed, len: usize) -> Result<Vec<i64>> {
    let t = params.get(name).ok_or_else(|| HwError::Param { name: name.into(), reason: "missing".into() })?;
    if t.data.len() != len {
        return Err(HwError::Param { name: name.into(), reason: format!("has {} values, the layer needs {len}", t.data.len()) });
    }
    t.data.iter().map(|&v| f.code(v).ok_or_else(|| HwError::Param { name: name.into(), reason: "holds NaN".into() })).collect()
}

/// Weight and bias codes moved to the accumulator's scale, and its fraction bits: the products
/// have `f_x + f_w` fraction bits, and whichever of products and bias has fewer is shifted up
/// (as the integer executor does); no bias is a zero bias.
pub(crate) fn at_accumulator_scale(
    w: Vec<i64>,
    b: Option<Vec<i64>>,
    fx: Fixed,
    fw: Fixed,
    fb: Fixed,
    out_features: usize,
) -> (i32, Vec<i64>, Vec<i64>) {
    let frac = fx.frac_width + fw.frac_width;
    match b {
        Some(b) => {
            let target = frac.max(fb.frac_width);
            let up_w = 1i64 << (target - frac);
            let up_b = 1i64 << (target - fb.frac_width);
            (target, w.iter().map(|v| v * up_w).collect(), b.iter().map(|v| v * up_b).collect())
        }
        None => (frac, w, vec![0; out_features]),
    }
}

/// The smallest and largest sum `b_j + sum_k w_jk x_k` over inputs in `x` and every output `j`.
pub(crate) fn sum_bounds(w: &[i64], b: &[i64], in_features: usize, x: Range) -> (i128, i128) {
    let (mut lo, mut hi) = (i128::MAX, i128::MIN);
    for (j, &bj) in b.iter().enumerate() {
        let (mut l, mut h) = (bj as i128, bj as i128);
        for &wk in &w[j * in_features..][..in_features] {
            let (p, q) = (wk as i128 * x.lo as i128, wk as i128 * x.hi as i128);
            l += p.min(q);
            h += p.max(q);
        }
        lo = lo.min(l);
        hi = hi.max(h);
    }
    if b.is_empty() {
        (0, 0)
    } else {
        (lo, hi)
    }
}
