//! Lowering of `conv2d`, `max_pool2d` and `flatten` nodes to streaming stages
//! ([`crate::conv::Stage`]); `crate::lower` calls these for the nodes of the chain.

use super::{ConvStage, PoolStage, Stage, Window};
use crate::design::{Layer, Range, Step};
use crate::error::{HwError, Result};
use crate::lower::{at_accumulator_scale, linear_formats, param_codes, with_accumulator, Chain, LowerOptions, Lowered, Refusal};
use mase_ir::{ConvSpec, Node, NodeQuant, ParamStore, PoolSpec};

/// A `flatten`: the image leaving the last stage becomes the vector the next linear reads
/// (nothing to do on a vector).
pub(crate) fn flatten(chain: &mut Chain) {
    chain.spatial = None;
}

/// The image `[C, H, W]` arriving at a stage: the last stage's output, or the graph's input.
fn arriving(chain: &Chain, node: &Node, opts: &LowerOptions) -> Result<[usize; 3]> {
    if let Some(s) = chain.spatial {
        return Ok(s);
    }
    let structure = |reason: String| Err(HwError::Structure { reason });
    if !chain.layers.is_empty() || !chain.stages.is_empty() {
        return structure(format!("node `{}` reads a flattened vector; convolutions and pools come before the flatten", node.name));
    }
    match opts.input_shape.as_deref() {
        Some(&[c, h, w]) if c > 0 && h > 0 && w > 0 => Ok([c, h, w]),
        Some(other) => structure(format!("node `{}` needs an image input [C, H, W], the samples have shape {other:?}", node.name)),
        None => structure(format!(
            "node `{}` needs the input image's shape [C, H, W], which the checkpoint does not record (its `dataset_info`)",
            node.name
        )),
    }
}

/// The window of `spec`'s kernel, stride and padding over `[c, h, w]`; a window larger than the
/// padded image is an error naming the node.
fn window(node: &Node, [c, h, w]: [usize; 3], kernel: &[usize], stride: &[usize], padding: &[usize]) -> Result<Window> {
    let two = |v: &[usize], what: &str| match v {
        [a, b] => Ok([*a, *b]),
        _ => Err(HwError::Structure { reason: format!("node `{}`: {what} {v:?}, expected two values", node.name) }),
    };
    let win = Window {
        channels: c,
        height: h,
        width: w,
        kernel: two(kernel, "kernel")?,
        stride: two(stride, "stride")?,
        padding: two(padding, "padding")?,
    };
    let fits = |n: usize, k: usize, p: usize| k >= 1 && k <= n + 2 * p && 2 * p <= k;
    if !fits(h, win.kernel[0], win.padding[0]) || !fits(w, win.kernel[1], win.padding[1]) || win.stride.contains(&0) {
        return Err(HwError::Structure {
            reason: format!(
                "node `{}`: kernel {:?}, stride {:?} and padding {:?} do not fit a {h}x{w} image (padding at most half the kernel)",
                node.name, win.kernel, win.stride, win.padding
            ),
        });
    }
    Ok(win)
}

/// A quantized `conv2d` as a stage: the steps on arriving pixels (the rescale to its `data_in`,
/// or the steps met before it when it is first), its window, and its matrix-vector unit.
pub(crate) fn conv2d(
    chain: &mut Chain,
    node: &Node,
    spec: &ConvSpec,
    q: Option<&NodeQuant>,
    params: &ParamStore,
    opts: &LowerOptions,
) -> Lowered {
    let Some(q) = q else { return Ok(Err("not quantized".into())) };
    let Some((fx, fw, fb, fo)) = linear_formats(q, spec.bias) else {
        return Ok(Err("data_in, weight and bias need `integer` formats".into()));
    };
    if spec.groups != 1 {
        return Ok(Err(format!("groups {}: the streaming hardware has convolutions of groups 1", spec.groups).into()));
    }
    if spec.dilation.iter().any(|&d| d != 1) {
        return Ok(Err(format!("dilation {:?}: the streaming hardware has convolutions of dilation 1", spec.dilation).into()));
    }
    let image = arriving(chain, node, opts)?;
    if image[0] != spec.in_channels {
        return Err(HwError::Structure {
            reason: format!("node `{}` has {} input channels, the image arriving has {}", node.name, spec.in_channels, image[0]),
        });
    }
    let win = window(node, image, &spec.kernel, &spec.stride, &spec.padding)?;
    let (input, pre) = match (chain.stages.last(), chain.lead.take()) {
        (Some(s), _) => (s.output(), vec![Step::requant(fx)]),
        (None, Some(lead)) => {
            if let Some((bn, c)) = lead.channels.iter().find(|(_, c)| *c != image[0]) {
                return Err(HwError::Structure {
                    reason: format!("node `{bn}` has {c} channels, the convolution `{}` after it {}", node.name, image[0]),
                });
            }
            chain.input_format = Some(lead.format);
            let mut pre = lead.steps;
            pre.push(Step::requant(fx));
            (Range::of(lead.format), pre)
        }
        (None, None) => {
            chain.input_format = Some(fx);
            (Range::of(fx), Vec::new())
        }
    };
    let (c, o) = (spec.in_channels, spec.out_channels);
    let [kh, kw] = win.kernel;
    let k = win.window_len();
    let torch = param_codes(params, &format!("{}.weight", node.target), fw, o * k)?;
    // PyTorch's `[o][c][ky][kx]` to the window's order `[o][(ky KW + kx) C + c]`.
    let w: Vec<i64> =
        (0..o * k).map(|i| (i / k, i % k)).map(|(oc, e)| torch[((oc * c + e % c) * kh + e / c / kw) * kw + e / c % kw]).collect();
    let b = if spec.bias { Some(param_codes(params, &format!("{}.bias", node.target), fb, o)?) } else { None };
    let (target, w, b) = at_accumulator_scale(w, b, fx, fw, fb, o);
    let buffered = pre.iter().fold(input, |r, s| s.range(r));
    let mvu = with_accumulator(Layer {
        node: node.name.clone(),
        input: buffered,
        pre: Vec::new(),
        in_features: k,
        out_features: o,
        weight: w,
        bias: b,
        acc: Range { lo: 0, hi: 0, frac: target },
        post: fo.map(Step::requant).into_iter().collect(),
        reuse: opts.reuse_of(&node.name),
        products: Default::default(),
    })?;
    let [oh, ow] = win.out_hw();
    chain.stages.push(Stage::Conv(ConvStage { window: win, input, pre, mvu }));
    chain.spatial = Some([o, oh, ow]);
    Ok(Ok(()))
}

/// An unquantized `max_pool2d` after a convolution as a stage: it takes the largest code of each
/// channel in its window, as the integer executor does on the codes before it.
pub(crate) fn max_pool2d(chain: &mut Chain, node: &Node, spec: &PoolSpec, q: Option<&NodeQuant>) -> Lowered {
    if q.is_some() {
        return Ok(Err("a quantized max pool runs in float in the integer executor (leave max pools unquantized)".into()));
    }
    if spec.ceil_mode {
        return Ok(Err("ceil_mode: the streaming hardware has max pools of floor mode".into()));
    }
    let Some(last) = chain.stages.last() else {
        return Ok(Err(if chain.refused {
            Refusal::NoFormat
        } else {
            "comes before the first convolution, so its input has no integer format".into()
        }));
    };
    let input = last.output();
    let image = arriving(chain, node, &LowerOptions::default())?;
    let win = window(node, image, &spec.kernel, &spec.stride, &spec.padding)?;
    let [oh, ow] = win.out_hw();
    chain.stages.push(Stage::MaxPool(PoolStage { node: node.name.clone(), window: win, input, post: Vec::new() }));
    chain.spatial = Some([image[0], oh, ow]);
    Ok(Ok(()))
}
