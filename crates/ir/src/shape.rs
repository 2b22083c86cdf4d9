//! Shape inference: what each op produces for given input shapes.

use crate::op::{ConvSpec, DimArg, Op, PoolSpec, ReduceSpec};
use crate::Result;

/// What flows along an edge: a tensor of known shape, or an integer (the result of `x.size(d)`).
#[derive(Clone, Debug, PartialEq)]
pub enum ValueInfo {
    Tensor(Vec<usize>),
    Int(i64),
}

impl ValueInfo {
    /// The tensor shape, or `[]` for an integer.
    pub fn shape(&self) -> &[usize] {
        match self {
            ValueInfo::Tensor(s) => s,
            ValueInfo::Int(_) => &[],
        }
    }

    pub fn is_tensor(&self) -> bool {
        matches!(self, ValueInfo::Tensor(_))
    }
}

/// Numpy/PyTorch broadcasting of two shapes, or `None` when they are incompatible.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    for i in 0..n {
        let da = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let db = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        out[i] = match (da, db) {
            (x, y) if x == y => x,
            (1, y) => y,
            (x, 1) => x,
            _ => return None,
        };
    }
    Some(out)
}

/// Resolves a possibly negative dimension index against a rank.
pub(crate) fn norm_dim(dim: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let d = if dim < 0 { dim + r } else { dim };
    (0..r.max(1)).contains(&d).then_some(d as usize)
}

/// The most elements one value may have. Beyond it a buffer would not fit in memory anyway, and
/// every element count below it fits in `usize` and `i64`, so later arithmetic on shapes (a
/// checkpoint's or a model file's, which nothing else bounds) cannot overflow.
pub const MAX_ELEMENTS: usize = 1 << 31;

/// Output length of a sliding window, or `None` when the window does not fit (or the numbers are
/// out of range: a zero kernel or stride, or sizes that overflow).
fn window_out(len: usize, k: usize, s: usize, p: usize, d: usize) -> Option<usize> {
    let eff = d.checked_mul(k.checked_sub(1)?)?.checked_add(1)?;
    let padded = p.checked_mul(2)?.checked_add(len)?;
    if padded < eff || s == 0 {
        return None;
    }
    Some((padded - eff) / s + 1)
}

/// The number of elements of `shape`, or `None` when it exceeds [`MAX_ELEMENTS`].
pub fn checked_numel(shape: &[usize]) -> Option<usize> {
    shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).filter(|&n| n <= MAX_ELEMENTS)
}

pub(crate) fn infer(op: &Op, node: &str, inputs: &[ValueInfo]) -> Result<ValueInfo> {
    // Specs from checkpoints and model files carry whatever numbers they were given; the
    // geometry is checked before anything is indexed by it.
    op.check_spec().map_err(|reason| op.err(node, inputs, reason))?;
    let out = infer_unchecked(op, node, inputs)?;
    if checked_numel(out.shape()).is_none() {
        return Err(op.err(node, inputs, format!("the output shape {:?} has more than {MAX_ELEMENTS} elements", out.shape())));
    }
    Ok(out)
}

/// A shape rule's answer: the output shape, or the reason the input does not fit.
type Shaped = std::result::Result<Vec<usize>, String>;

fn infer_unchecked(op: &Op, node: &str, inputs: &[ValueInfo]) -> Result<ValueInfo> {
    let err = |reason: String| op.err(node, inputs, reason);
    if let Some(n) = op.arity() {
        if inputs.len() != n {
            return Err(crate::IrError::Arity { node: node.into(), op: op.mase_op().into(), expected: n.to_string(), got: inputs.len() });
        }
    }
    let tensor_in = |i: usize| -> Result<&[usize]> {
        match &inputs[i] {
            ValueInfo::Tensor(s) => Ok(s),
            ValueInfo::Int(_) => Err(err(format!("input {i} is an integer, expected a tensor"))),
        }
    };
    let shaped = |s: Shaped| s.map(ValueInfo::Tensor).map_err(err);
    match op {
        Op::Input | Op::Constant => Err(err("inputs and constants take their shape from outside the graph".into())),
        // The output node's own value is its first output's (several outputs are its inputs).
        Op::Output => inputs.first().cloned().ok_or_else(|| err("the output returns no value".into())),
        Op::Linear { in_features, out_features, .. } => shaped(linear(tensor_in(0)?, *in_features, *out_features)),
        Op::Conv1d(c) => shaped(conv(c, tensor_in(0)?, 1)),
        Op::Conv2d(c) => shaped(conv(c, tensor_in(0)?, 2)),
        Op::BatchNorm1d(n) => shaped(batch_norm(tensor_in(0)?, n.num_features, &[2, 3], "[N, C] or [N, C, L]")),
        Op::BatchNorm2d(n) => shaped(batch_norm(tensor_in(0)?, n.num_features, &[4], "[N, C, H, W]")),
        Op::Relu
        | Op::Relu6
        | Op::LeakyRelu { .. }
        | Op::Sigmoid
        | Op::Tanh
        | Op::Selu
        | Op::Gelu { .. }
        | Op::Silu
        | Op::Hardswish
        | Op::Hardsigmoid
        | Op::Softplus { .. }
        | Op::Mish
        | Op::Dropout { .. }
        | Op::StochasticDepth { .. }
        | Op::Sqrt
        | Op::Clip { .. } => shaped(Ok(tensor_in(0)?.to_vec())),
        Op::Softmax { dim } | Op::LogSoftmax { dim } => {
            let x = tensor_in(0)?;
            shaped(norm_dim(*dim, x.len()).map(|_| x.to_vec()).ok_or_else(|| format!("dim {dim} out of range")))
        }
        Op::MaxPool1d(p) | Op::AvgPool1d(p) => shaped(pool(p, tensor_in(0)?, 1)),
        Op::MaxPool2d(p) | Op::AvgPool2d(p) => shaped(pool(p, tensor_in(0)?, 2)),
        Op::AdaptiveAvgPool1d { output_size } => shaped(adaptive_pool(tensor_in(0)?, &[*output_size], "[N, C, L]")),
        Op::AdaptiveAvgPool2d { output_size } => shaped(adaptive_pool(tensor_in(0)?, output_size, "[N, C, H, W]")),
        Op::Flatten { start_dim, end_dim } => shaped(flatten(tensor_in(0)?, *start_dim, *end_dim)),
        Op::Reshape { shape } => {
            let x = tensor_in(0)?;
            let numel = checked_numel(x).ok_or_else(|| err(format!("the input has more than {MAX_ELEMENTS} elements")))?;
            shaped(reshape_dims(shape, inputs).and_then(|dims| resolve_reshape(&dims, numel)))
        }
        Op::Transpose { dim0, dim1 } => shaped(transpose(tensor_in(0)?, *dim0, *dim1)),
        Op::Permute { dims } => shaped(permute(tensor_in(0)?, dims)),
        Op::Size { dim } => {
            let x = tensor_in(0)?;
            let d = norm_dim(*dim, x.len()).ok_or_else(|| err(format!("dim {dim} out of range")))?;
            Ok(ValueInfo::Int(x[d] as i64))
        }
        Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Pow | Op::Eq | Op::Ne | Op::Lt | Op::Le | Op::Gt | Op::Ge => {
            let (a, b) = (tensor_in(0)?, tensor_in(1)?);
            shaped(broadcast_shapes(a, b).ok_or_else(|| "shapes do not broadcast".into()))
        }
        Op::Where => {
            let (c, a, b) = (tensor_in(0)?, tensor_in(1)?, tensor_in(2)?);
            let shape = broadcast_shapes(a, b).and_then(|ab| broadcast_shapes(c, &ab));
            shaped(shape.ok_or_else(|| format!("the condition {c:?} and the values {a:?} and {b:?} do not broadcast")))
        }
        Op::Concat { dim } => {
            if inputs.is_empty() {
                return Err(err("cat needs at least one input".into()));
            }
            let first = tensor_in(0)?;
            let d = norm_dim(*dim, first.len()).filter(|_| !first.is_empty()).ok_or_else(|| err(format!("dim {dim} out of range")))?;
            let mut s = first.to_vec();
            for i in 1..inputs.len() {
                s = concat_one(s, first, tensor_in(i)?, i, d, *dim).map_err(err)?;
            }
            Ok(ValueInfo::Tensor(s))
        }
        Op::Pad { begin, end, .. } => shaped(pad(tensor_in(0)?, begin, end)),
        Op::Opaque { class, sample_shape } => {
            let x = tensor_in(0)?;
            let Some(sample) = sample_shape else {
                return Err(err(format!(
                    "PyTorch module {class}: its output shape is known after a forward run (pass dataset_info= or dummy_in)"
                )));
            };
            let mut s = vec![x.first().copied().unwrap_or(1)];
            s.extend(sample);
            Ok(ValueInfo::Tensor(s))
        }
        Op::MatMul => shaped(matmul(tensor_in(0)?, tensor_in(1)?)),
        Op::LayerNorm { normalized_shape, elementwise_affine, .. } => {
            let extra = (1..inputs.len()).map(tensor_in).collect::<Result<Vec<_>>>()?;
            shaped(layer_norm(tensor_in(0)?, normalized_shape, *elementwise_affine, &extra))
        }
        Op::AdaptiveMaxPool1d { output_size } => shaped(adaptive_pool(tensor_in(0)?, &[*output_size], "[N, C, L]")),
        Op::AdaptiveMaxPool2d { output_size } => shaped(adaptive_pool(tensor_in(0)?, output_size, "[N, C, H, W]")),
        Op::GroupNorm { num_groups, num_channels, affine, .. } => {
            let extra = (1..inputs.len()).map(tensor_in).collect::<Result<Vec<_>>>()?;
            shaped(group_norm(tensor_in(0)?, *num_groups, *num_channels, *affine, &extra))
        }
        Op::Mean(r) | Op::Sum(r) | Op::Amax(r) => shaped(reduce(tensor_in(0)?, r)),
        Op::Index { items } => shaped(crate::index::resolve_index(items, tensor_in(0)?).map(|r| r.shape())),
        Op::Expand { shape } => {
            let x = tensor_in(0)?;
            shaped(reshape_dims(shape, inputs).and_then(|dims| crate::index::expand_shape(x, &dims)))
        }
        Op::Repeat { repeats } => shaped(crate::index::repeat_shape(tensor_in(0)?, repeats)),
        Op::Stack { dim } => {
            if inputs.is_empty() {
                return Err(err("stack needs at least one tensor".into()));
            }
            let first = tensor_in(0)?;
            for i in 1..inputs.len() {
                if tensor_in(i)? != first {
                    return Err(err(format!("input {i} has another shape than input 0; stack needs tensors of one shape")));
                }
            }
            let d = norm_dim(*dim, first.len() + 1).ok_or_else(|| err(format!("dim {dim} out of range for rank {}", first.len() + 1)))?;
            let mut s = first.to_vec();
            s.insert(d, inputs.len());
            Ok(ValueInfo::Tensor(s))
        }
        Op::SizeArith { arith, args } => {
            if let Some(i) = inputs.iter().position(|v| v.is_tensor()) {
                return Err(err(format!("input {i} is a tensor; size arithmetic takes integers")));
            }
            let [a, b] = reshape_dims(args, inputs).map_err(err)?[..] else {
                return Err(err("size arithmetic takes two operands".into()));
            };
            arith.apply(a, b).map(ValueInfo::Int).map_err(err)
        }
        Op::Einsum { equation } => {
            let c = crate::Contraction::parse(equation).map_err(err)?;
            shaped(c.output_shape([tensor_in(0)?, tensor_in(1)?]))
        }
        Op::ScaledDotProductAttention { mask, is_causal, .. } => {
            let all = (0..inputs.len()).map(tensor_in).collect::<Result<Vec<_>>>()?;
            shaped(crate::attention::attention(&all, *mask, *is_causal))
        }
        Op::Embedding { num_embeddings, embedding_dim, functional, .. } => {
            let all = (0..inputs.len()).map(tensor_in).collect::<Result<Vec<_>>>()?;
            shaped(crate::attention::embedding(&all, *num_embeddings, *embedding_dim, *functional))
        }
    }
}

/// The weight and bias a normalisation called as a function reads as inputs: at most two (none
/// when the op owns its own), each of shape `affine`.
fn norm_inputs(extra: &[&[usize]], owns: bool, affine: &[usize]) -> Result<(), String> {
    if owns && !extra.is_empty() {
        return Err("an op that owns its weight and bias takes one input".into());
    }
    if extra.len() > 2 {
        return Err(format!("expected the input, a weight and a bias; got {} inputs", extra.len() + 1));
    }
    match extra.iter().position(|s| *s != affine) {
        Some(k) => Err(format!("input {} (the {}) must have shape {affine:?}", k + 1, ["weight", "bias"][k])),
        None => Ok(()),
    }
}

/// Layer norm: the input must end in `normalized_shape`.
fn layer_norm(x: &[usize], normalized_shape: &[usize], owns: bool, extra: &[&[usize]]) -> Shaped {
    if x.len() < normalized_shape.len() || x[x.len() - normalized_shape.len()..] != *normalized_shape {
        return Err(format!("the input's trailing dimensions must be normalized_shape {normalized_shape:?}"));
    }
    norm_inputs(extra, owns, normalized_shape)?;
    Ok(x.to_vec())
}

/// Group norm: the input is `[N, C, ...]` with `C = num_channels`.
fn group_norm(x: &[usize], num_groups: usize, num_channels: usize, owns: bool, extra: &[&[usize]]) -> Shaped {
    if x.len() < 2 || x[1] != num_channels {
        return Err(format!("expected [N, {num_channels}, ...] ({num_groups} groups of {num_channels} channels)"));
    }
    norm_inputs(extra, owns, &[num_channels])?;
    Ok(x.to_vec())
}

/// A reduction's output: the reduced dimensions become 1 (`keepdim`) or go.
fn reduce(x: &[usize], r: &ReduceSpec) -> Shaped {
    let mask = r.mask(x.len())?;
    Ok(x.iter().zip(&mask).filter_map(|(&d, &m)| if !m { Some(d) } else { r.keepdim.then_some(1) }).collect())
}

fn linear(x: &[usize], in_features: usize, out_features: usize) -> Shaped {
    match x.split_last() {
        Some((&f, lead)) if f == in_features => Ok(lead.iter().copied().chain([out_features]).collect()),
        _ => Err(format!("last dimension must be in_features = {in_features}")),
    }
}

/// Batch norm over `[N, C, ...]` inputs of one of the ranks `ranks` (drawn as `layout`).
fn batch_norm(x: &[usize], num_features: usize, ranks: &[usize], layout: &str) -> Shaped {
    if !ranks.contains(&x.len()) || x[1] != num_features {
        return Err(format!("expected {}", layout.replace('C', &num_features.to_string())));
    }
    Ok(x.to_vec())
}

fn adaptive_pool(x: &[usize], output_size: &[usize], layout: &str) -> Shaped {
    if x.len() != output_size.len() + 2 {
        return Err(format!("expected {layout}"));
    }
    Ok([x[0], x[1]].into_iter().chain(output_size.iter().copied()).collect())
}

fn flatten(x: &[usize], start_dim: i64, end_dim: i64) -> Shaped {
    let rank = x.len().max(1);
    let (s, e) = match (norm_dim(start_dim, rank), norm_dim(end_dim, rank)) {
        (Some(s), Some(e)) if s <= e => (s, e),
        _ => return Err(format!("bad dims start={start_dim} end={end_dim}")),
    };
    if x.is_empty() {
        return Ok(vec![1]);
    }
    let mut out = x[..s].to_vec();
    out.push(checked_numel(&x[s..=e]).ok_or_else(|| format!("the flattened size has more than {MAX_ELEMENTS} elements"))?);
    out.extend(&x[e + 1..]);
    Ok(out)
}

/// The target shape of a `view`, with `DimArg::Input` entries read from the integer inputs.
fn reshape_dims(shape: &[DimArg], inputs: &[ValueInfo]) -> std::result::Result<Vec<i64>, String> {
    shape
        .iter()
        .map(|d| match d {
            DimArg::Const(v) => Ok(*v),
            DimArg::Input(k) => match inputs.get(*k) {
                Some(ValueInfo::Int(v)) => Ok(*v),
                _ => Err(format!("shape entry refers to input {k}, which is not an integer")),
            },
        })
        .collect()
}

fn transpose(x: &[usize], dim0: i64, dim1: i64) -> Shaped {
    let (a, b) = match (norm_dim(dim0, x.len()), norm_dim(dim1, x.len())) {
        (Some(a), Some(b)) => (a, b),
        _ => return Err(format!("dims {dim0}, {dim1} out of range")),
    };
    let mut s = x.to_vec();
    s.swap(a, b);
    Ok(s)
}

fn permute(x: &[usize], dims: &[i64]) -> Shaped {
    if dims.len() != x.len() {
        return Err(format!("permutation {dims:?} has the wrong length"));
    }
    let mut seen = vec![false; x.len()];
    let mut s = Vec::with_capacity(x.len());
    for &d in dims {
        match norm_dim(d, x.len()) {
            Some(d) if !seen[d] => {
                seen[d] = true;
                s.push(x[d]);
            }
            _ => return Err(format!("{dims:?} is not a permutation")),
        }
    }
    Ok(s)
}

/// The shape `s` of the inputs before input `i` (`x`) concatenated with it along `d` (the
/// normalised `dim`); `first` is input 0, which every input must match outside `d`.
fn concat_one(mut s: Vec<usize>, first: &[usize], x: &[usize], i: usize, d: usize, dim: i64) -> Shaped {
    if x.len() != first.len() || x.iter().zip(first).enumerate().any(|(k, (a, b))| k != d && a != b) {
        return Err(format!("input {i} does not match input 0 outside dim {dim}"));
    }
    s[d] = s[d].checked_add(x[d]).ok_or_else(|| format!("the size along dim {dim} overflows"))?;
    Ok(s)
}

fn pad(x: &[usize], begin: &[usize], end: &[usize]) -> Shaped {
    if begin.len() != end.len() || begin.len() > x.len() {
        return Err(format!("pads {begin:?} / {end:?} do not fit a rank-{} input", x.len()));
    }
    let lead = x.len() - begin.len();
    let padded = |(d, &v): (usize, &usize)| if d < lead { Some(v) } else { v.checked_add(begin[d - lead])?.checked_add(end[d - lead]) };
    x.iter()
        .enumerate()
        .map(padded)
        .collect::<Option<Vec<usize>>>()
        .ok_or_else(|| format!("pads {begin:?} / {end:?} make a size that overflows"))
}

fn matmul(a: &[usize], b: &[usize]) -> Shaped {
    matmul_shapes(a, b).map(|s| s.result)
}

/// The shapes `torch.matmul` works with: as PyTorch does, a vector left operand `[k]` is the
/// row `[1, k]` and a vector right operand `[k]` the column `[k, 1]`, and the dimension so added
/// is dropped from the result. Kernels multiply the promoted shapes; the result has the same
/// elements in the same order as the promoted product.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MatMulShapes {
    /// The left operand, rank 2 or more.
    pub a: Vec<usize>,
    /// The right operand, rank 2 or more.
    pub b: Vec<usize>,
    /// The product of `a` and `b`: the broadcast batch dimensions, then `[m, n]`.
    pub product: Vec<usize>,
    /// The result's shape: `product` without the dimensions a vector operand added.
    pub result: Vec<usize>,
}

/// The promoted shapes of `torch.matmul(a, b)`, or why they do not multiply. Two vectors (a dot
/// product, whose result has rank 0) are refused: values of rank 0 have no tensor here.
pub fn matmul_shapes(a: &[usize], b: &[usize]) -> std::result::Result<MatMulShapes, String> {
    match (a.len(), b.len()) {
        (0, _) | (_, 0) => return Err("matmul needs operands of rank 1 or more".into()),
        (1, 1) => return Err("matmul of two vectors (a dot product, of rank 0) is not supported".into()),
        _ => {}
    }
    let pa = if a.len() == 1 { vec![1, a[0]] } else { a.to_vec() };
    let pb = if b.len() == 1 { vec![b[0], 1] } else { b.to_vec() };
    let (m, k) = (pa[pa.len() - 2], pa[pa.len() - 1]);
    let (k2, n) = (pb[pb.len() - 2], pb[pb.len() - 1]);
    if k != k2 {
        return Err(format!("inner dimensions {k} and {k2} differ"));
    }
    let mut product = broadcast_shapes(&pa[..pa.len() - 2], &pb[..pb.len() - 2]).ok_or("batch dimensions do not broadcast")?;
    product.push(m);
    product.push(n);
    let mut result = product.clone();
    if b.len() == 1 {
        result.pop();
    }
    if a.len() == 1 {
        result.remove(result.len() - if b.len() == 1 { 1 } else { 2 });
    }
    Ok(MatMulShapes { a: pa, b: pb, product, result })
}

fn conv(c: &ConvSpec, x: &[usize], dims: usize) -> Shaped {
    if x.len() != dims + 2 {
        return Err(format!("expected a rank-{} input [N, C, ...]", dims + 2));
    }
    if x[1] != c.in_channels {
        return Err(format!("channel dimension must be in_channels = {}", c.in_channels));
    }
    if c.groups == 0 || c.in_channels % c.groups != 0 || c.out_channels % c.groups != 0 {
        return Err(format!("groups = {} must divide in and out channels", c.groups));
    }
    let mut out = vec![x[0], c.out_channels];
    for d in 0..dims {
        out.push(window_out(x[2 + d], c.kernel[d], c.stride[d], c.padding[d], c.dilation[d]).ok_or("kernel larger than padded input")?);
    }
    Ok(out)
}

fn pool(p: &PoolSpec, x: &[usize], dims: usize) -> Shaped {
    if x.len() != dims + 2 {
        return Err(format!("expected a rank-{} input [N, C, ...]", dims + 2));
    }
    let mut out = vec![x[0], x[1]];
    for d in 0..dims {
        // `padding > kernel / 2` is `2 * padding > kernel` for integers, without the overflow.
        if p.padding[d] > p.kernel[d] / 2 {
            return Err("padding must be at most half the kernel size".into());
        }
        let floor = window_out(x[2 + d], p.kernel[d], p.stride[d], p.padding[d], 1).ok_or("window larger than padded input")?;
        out.push(if p.ceil_mode { ceil_windows(floor, x[2 + d], p.kernel[d], p.stride[d], p.padding[d]) } else { floor });
    }
    Ok(out)
}

/// The output length of a pool with `ceil_mode`, from the floor mode's `floor` (PyTorch's
/// `pooling_output_shape`): one more window when the stride leaves input over, unless that
/// window would start past the input and its left padding. `floor` came from `window_out`, so
/// the sums here do not overflow.
fn ceil_windows(floor: usize, len: usize, k: usize, s: usize, p: usize) -> usize {
    let rest = (len + 2 * p - k) % s;
    if rest != 0 && floor * s < len + p {
        floor + 1
    } else {
        floor
    }
}

fn resolve_reshape(dims: &[i64], numel: usize) -> Shaped {
    let mut infer_at = None;
    let mut known = 1usize;
    for (i, &d) in dims.iter().enumerate() {
        match d {
            -1 if infer_at.is_none() => infer_at = Some(i),
            -1 => return Err("only one dimension can be -1".into()),
            d if d < 0 => return Err(format!("invalid dimension {d}")),
            d => known = usize::try_from(d).ok().and_then(|d| known.checked_mul(d)).ok_or_else(|| format!("{dims:?} overflows"))?,
        }
    }
    let mut out: Vec<usize> = dims.iter().map(|&d| d.max(0) as usize).collect();
    match infer_at {
        Some(i) => {
            if known == 0 || numel % known != 0 {
                return Err(format!("cannot view {numel} elements as {dims:?}"));
            }
            out[i] = numel / known;
        }
        None if known != numel => return Err(format!("cannot view {numel} elements as {dims:?}")),
        None => {}
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op::NormSpec;

    fn shape_of(op: Op, inputs: &[&[usize]]) -> Result<Vec<usize>> {
        let v: Vec<ValueInfo> = inputs.iter().map(|s| ValueInfo::Tensor(s.to_vec())).collect();
        op.infer("n", &v).map(|v| v.shape().to_vec())
    }

    #[test]
    fn shapes_follow_pytorch() {
        let cases: Vec<(Op, Vec<&[usize]>, Vec<usize>)> = vec![
            (Op::Linear { in_features: 16, out_features: 5, bias: true }, vec![&[8, 16]], vec![8, 5]),
            (Op::Conv2d(ConvSpec::new(2, 3, 128, 3, 1, 1)), vec![&[2, 3, 32, 32]], vec![2, 128, 32, 32]),
            (Op::Conv2d(ConvSpec::new(2, 3, 8, 3, 2, 0)), vec![&[2, 3, 9, 9]], vec![2, 8, 4, 4]),
            (Op::Conv1d(ConvSpec::new(1, 16, 32, 4, 1, 2)), vec![&[2, 16, 10]], vec![2, 32, 11]),
            (Op::MaxPool2d(PoolSpec::new(2, 2)), vec![&[2, 8, 7, 7]], vec![2, 8, 3, 3]),
            (Op::BatchNorm1d(NormSpec::new(16)), vec![&[4, 16]], vec![4, 16]),
            (Op::Flatten { start_dim: 1, end_dim: -1 }, vec![&[2, 3, 4, 5]], vec![2, 60]),
            (Op::Reshape { shape: vec![DimArg::Const(2), DimArg::Const(-1)] }, vec![&[2, 3, 4]], vec![2, 12]),
            (Op::Transpose { dim0: 1, dim1: -1 }, vec![&[2, 3, 4]], vec![2, 4, 3]),
            (Op::Permute { dims: vec![0, 2, 1] }, vec![&[2, 3, 4]], vec![2, 4, 3]),
            (Op::Add, vec![&[4, 1, 3], &[5, 1]], vec![4, 5, 3]),
            (Op::MatMul, vec![&[7, 2, 3], &[3, 4]], vec![7, 2, 4]),
            // Vector operands, as torch.matmul: [k] x [.., k, n] -> [.., n]; [.., m, k] x [k] -> [.., m].
            (Op::MatMul, vec![&[3], &[5, 3, 4]], vec![5, 4]),
            (Op::MatMul, vec![&[5, 2, 3], &[3]], vec![5, 2]),
            (Op::MatMul, vec![&[2, 3], &[3]], vec![2]),
            (Op::AdaptiveAvgPool2d { output_size: [1, 1] }, vec![&[2, 8, 5, 5]], vec![2, 8, 1, 1]),
            (Op::Div, vec![&[4, 3], &[]], vec![4, 3]),
            (Op::Pow, vec![&[1], &[2, 5]], vec![2, 5]),
            (Op::Gt, vec![&[4, 1], &[3]], vec![4, 3]),
            (Op::Where, vec![&[1, 3], &[4, 1], &[]], vec![4, 3]),
            (Op::Where, vec![&[2, 1, 1, 5], &[2, 4, 5, 5], &[]], vec![2, 4, 5, 5]),
            (Op::Clip { min: 0.0, max: 1.0 }, vec![&[2, 3]], vec![2, 3]),
            (Op::Concat { dim: 1 }, vec![&[2, 3, 4], &[2, 5, 4], &[2, 1, 4]], vec![2, 9, 4]),
            (Op::Concat { dim: -1 }, vec![&[2, 3]], vec![2, 3]),
            (Op::Pad { begin: vec![1], end: vec![2], value: 0.0 }, vec![&[2, 4, 10]], vec![2, 4, 13]),
            (Op::Pad { begin: vec![0, 1], end: vec![3, 0], value: 0.0 }, vec![&[2, 4, 5, 5]], vec![2, 4, 8, 6]),
            // PyTorch: MaxPool2d(3, 2, ceil_mode=True) on 14x14 gives 7x7 (6x6 without).
            (Op::MaxPool2d(ceil(2, 3, 2, 0)), vec![&[1, 4, 14, 14]], vec![1, 4, 7, 7]),
            (Op::MaxPool2d(PoolSpec::window(vec![3, 3], vec![2, 2], vec![0, 0])), vec![&[1, 4, 14, 14]], vec![1, 4, 6, 6]),
            // A window that would start in the right padding is dropped: 5 + 2*1 - 2 = 5, 5/2
            // rounds up to 3 windows plus one, but the fourth starts at 6 - 1 = 5 = len.
            (Op::AvgPool1d(ceil(1, 2, 2, 1)), vec![&[1, 2, 5]], vec![1, 2, 3]),
            (Op::AvgPool1d(ceil(1, 2, 2, 0)), vec![&[1, 2, 5]], vec![1, 2, 3]),
            (Op::MaxPool1d(ceil(1, 3, 3, 1)), vec![&[1, 2, 7]], vec![1, 2, 3]),
            (
                Op::LayerNorm { normalized_shape: vec![3, 4], eps: 1e-5, elementwise_affine: true, bias: true },
                vec![&[2, 3, 4]],
                vec![2, 3, 4],
            ),
            (
                Op::LayerNorm { normalized_shape: vec![4], eps: 1e-5, elementwise_affine: false, bias: false },
                vec![&[2, 3, 4], &[4], &[4]],
                vec![2, 3, 4],
            ),
            (Op::GroupNorm { num_groups: 2, num_channels: 4, eps: 1e-5, affine: true, bias: true }, vec![&[2, 4, 3, 3]], vec![2, 4, 3, 3]),
            (Op::GroupNorm { num_groups: 2, num_channels: 4, eps: 1e-5, affine: false, bias: false }, vec![&[2, 4], &[4]], vec![2, 4]),
            (Op::AdaptiveMaxPool2d { output_size: [3, 4] }, vec![&[2, 8, 7, 5]], vec![2, 8, 3, 4]),
            (Op::AdaptiveMaxPool1d { output_size: 4 }, vec![&[2, 8, 10]], vec![2, 8, 4]),
        ];
        for (op, ins, want) in cases {
            assert_eq!(shape_of(op.clone(), &ins).unwrap(), want, "{op:?}");
        }
    }

    fn ceil(dims: usize, k: usize, s: usize, p: usize) -> PoolSpec {
        PoolSpec { ceil_mode: true, ..PoolSpec::window(vec![k; dims], vec![s; dims], vec![p; dims]) }
    }

    #[test]
    fn bad_shapes_name_the_node() {
        let e = shape_of(Op::Linear { in_features: 16, out_features: 5, bias: true }, &[&[8, 15]]).unwrap_err();
        assert!(e.to_string().contains("in_features = 16"), "{e}");
        assert!(shape_of(Op::Add, &[&[3], &[4]]).is_err());
        let e = shape_of(Op::Where, &[&[2], &[3], &[3]]).unwrap_err();
        assert!(e.to_string().contains("the condition [2] and the values [3] and [3] do not broadcast"), "{e}");
        assert!(shape_of(Op::Reshape { shape: vec![DimArg::Const(5), DimArg::Const(-1)] }, &[&[2, 3]]).is_err());
        assert!(shape_of(Op::Concat { dim: 1 }, &[&[2, 3], &[3, 3]]).is_err());
        assert!(shape_of(Op::Concat { dim: 0 }, &[]).is_err());
        assert!(shape_of(Op::Pad { begin: vec![1, 1, 1], end: vec![1, 1, 1], value: 0.0 }, &[&[2, 3]]).is_err());
    }

    #[test]
    fn numbers_no_builder_writes_are_errors() {
        // Specs and sizes as a hand-edited checkpoint or an ONNX file may carry them: each is an
        // error naming the problem, not an index past a list or an arithmetic overflow.
        let conv = |f: &dyn Fn(&mut ConvSpec)| {
            let mut c = ConvSpec::new(2, 3, 4, 3, 1, 1);
            f(&mut c);
            Op::Conv2d(c)
        };
        let pool = |f: &dyn Fn(&mut PoolSpec)| {
            let mut p = PoolSpec::new(2, 2);
            f(&mut p);
            Op::MaxPool2d(p)
        };
        const BIG: usize = usize::MAX / 2;
        let cases: Vec<(Op, Vec<&[usize]>, &str)> = vec![
            (conv(&|c| c.kernel = vec![3]), vec![&[2, 3, 8, 8]], "kernel [3] needs 2 entries"),
            (conv(&|c| c.dilation = vec![1]), vec![&[2, 3, 8, 8]], "dilation [1] needs 2 entries"),
            (conv(&|c| c.kernel = vec![0, 3]), vec![&[2, 3, 8, 8]], "kernel [0, 3] has an entry of 0"),
            (conv(&|c| c.groups = 0), vec![&[2, 3, 8, 8]], "groups = 0"),
            (conv(&|c| c.padding = vec![BIG, BIG]), vec![&[2, 3, 8, 8]], "kernel larger than padded input"),
            (conv(&|c| c.dilation = vec![BIG, 1]), vec![&[2, 3, 8, 8]], "kernel larger than padded input"),
            (pool(&|p| p.stride = vec![0, 0]), vec![&[2, 3, 8, 8]], "stride [0, 0] has an entry of 0"),
            (pool(&|p| p.padding = vec![1]), vec![&[2, 3, 8, 8]], "padding [1] needs 2 entries"),
            (pool(&|p| p.padding = vec![BIG, BIG]), vec![&[2, 3, 8, 8]], "at most half the kernel"),
            (Op::Pad { begin: vec![BIG], end: vec![BIG], value: 0.0 }, vec![&[2, 4]], "make a size that overflows"),
            (Op::Pad { begin: vec![1 << 31], end: vec![0], value: 0.0 }, vec![&[2, 4]], "more than 2147483648 elements"),
            (Op::Concat { dim: 1 }, vec![&[1, BIG], &[1, BIG], &[1, BIG]], "overflows"),
            (Op::Flatten { start_dim: 0, end_dim: -1 }, vec![&[1 << 20, 1 << 20, 1 << 20]], "the flattened size has more than 2147483648"),
            (Op::Reshape { shape: vec![DimArg::Const(1 << 40), DimArg::Const(1 << 40)] }, vec![&[2, 3]], "overflows"),
            (Op::Linear { in_features: 4, out_features: 1 << 31, bias: true }, vec![&[2, 4]], "more than 2147483648 elements"),
            (Op::AdaptiveAvgPool2d { output_size: [0, 1] }, vec![&[2, 3, 8, 8]], "output_size [0, 1] has an entry of 0"),
            (Op::AdaptiveAvgPool1d { output_size: 0 }, vec![&[2, 3, 8]], "output_size [0] has an entry of 0"),
            (Op::MatMul, vec![&[4], &[4]], "matmul of two vectors (a dot product, of rank 0) is not supported"),
            (Op::MatMul, vec![&[2, 4], &[3]], "inner dimensions 4 and 3 differ"),
            (
                Op::LayerNorm { normalized_shape: vec![], eps: 1e-5, elementwise_affine: true, bias: true },
                vec![&[2, 3]],
                "at least one entry",
            ),
            (
                Op::LayerNorm { normalized_shape: vec![4], eps: 1e-5, elementwise_affine: true, bias: true },
                vec![&[2, 3]],
                "normalized_shape [4]",
            ),
            (
                Op::LayerNorm { normalized_shape: vec![3], eps: 1e-5, elementwise_affine: false, bias: false },
                vec![&[2, 3], &[4]],
                "the weight) must have shape [3]",
            ),
            (
                Op::LayerNorm { normalized_shape: vec![3], eps: 1e-5, elementwise_affine: true, bias: true },
                vec![&[2, 3], &[3]],
                "takes one input",
            ),
            (
                Op::GroupNorm { num_groups: 3, num_channels: 4, eps: 1e-5, affine: true, bias: true },
                vec![&[2, 4]],
                "must be at least 1 and divide",
            ),
            (
                Op::GroupNorm { num_groups: 2, num_channels: 4, eps: 1e-5, affine: true, bias: true },
                vec![&[2, 6, 3]],
                "expected [N, 4, ...]",
            ),
        ];
        for (op, ins, want) in cases {
            let e = shape_of(op.clone(), &ins).err().map(|e| e.to_string()).unwrap_or_default();
            assert!(e.contains(want), "{op:?}: {e}");
        }
    }

    #[test]
    fn view_takes_size_inputs() {
        let op = Op::Reshape { shape: vec![DimArg::Input(1), DimArg::Const(-1)] };
        let out = op.infer("view", &[ValueInfo::Tensor(vec![8, 1, 28, 28]), ValueInfo::Int(8)]).unwrap();
        assert_eq!(out, ValueInfo::Tensor(vec![8, 784]));
    }
}
