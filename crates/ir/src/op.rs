//! What a node computes. One enum variant per operator the runtime implements; the fx kind and
//! target of the node say how torch.fx would have spelled it (module, function or method).

use crate::index::{IndexItem, SizeOp};
use crate::shape::{self, ValueInfo};
use crate::{AttnMask, IrError, OpFamily, Result};
use serde::{Deserialize, Serialize};

/// Geometry of a 1-D or 2-D convolution. Vectors have one entry per spatial dimension.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConvSpec {
    pub in_channels: usize,
    pub out_channels: usize,
    pub kernel: Vec<usize>,
    pub stride: Vec<usize>,
    pub padding: Vec<usize>,
    pub dilation: Vec<usize>,
    pub groups: usize,
    pub bias: bool,
}

impl ConvSpec {
    /// A PyTorch `Conv{1,2}d(in, out, k, stride, padding)` with dilation 1 and one group.
    pub fn new(dims: usize, in_channels: usize, out_channels: usize, k: usize, stride: usize, padding: usize) -> ConvSpec {
        ConvSpec {
            in_channels,
            out_channels,
            kernel: vec![k; dims],
            stride: vec![stride; dims],
            padding: vec![padding; dims],
            dilation: vec![1; dims],
            groups: 1,
            bias: true,
        }
    }

    /// Checks the geometry of a `dims`-D convolution: one kernel size, stride, padding and
    /// dilation per spatial dimension, and kernel sizes, strides, dilations and groups of at least
    /// 1. Specs built here always pass; a checkpoint's or a model file's may not.
    pub fn check(&self, dims: usize) -> Result<(), String> {
        let lists = [("kernel", &self.kernel), ("stride", &self.stride), ("padding", &self.padding), ("dilation", &self.dilation)];
        if let Some((name, v)) = lists.iter().find(|(_, v)| v.len() != dims) {
            return Err(format!("{name} {v:?} needs {dims} entries, one per spatial dimension"));
        }
        if let Some((name, v)) = lists.iter().find(|(name, v)| *name != "padding" && v.contains(&0)) {
            return Err(format!("{name} {v:?} has an entry of 0; every entry must be at least 1"));
        }
        if self.groups == 0 {
            return Err("groups = 0; it must be at least 1".into());
        }
        Ok(())
    }
}

/// Batch normalisation settings with PyTorch's meaning of `momentum`
/// (`running = (1 - momentum) * running + momentum * batch`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NormSpec {
    pub num_features: usize,
    pub eps: f32,
    pub momentum: f32,
    pub affine: bool,
}

impl NormSpec {
    pub fn new(num_features: usize) -> NormSpec {
        NormSpec { num_features, eps: 1e-5, momentum: 0.1, affine: true }
    }
}

/// Window of a max or average pool. Vectors have one entry per spatial dimension.
///
/// `ceil_mode` and `count_include_pad` are left out of graph JSON at their PyTorch defaults
/// (false and true), so graphs written before they existed load unchanged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PoolSpec {
    pub kernel: Vec<usize>,
    pub stride: Vec<usize>,
    pub padding: Vec<usize>,
    /// PyTorch's `ceil_mode`: the output length rounds up, so a last window that starts inside
    /// the input or its left padding but runs past the end still counts (clipped to the input).
    #[serde(default, skip_serializing_if = "is_false")]
    pub ceil_mode: bool,
    /// Average pools: whether a window's divisor counts the padded positions it covers
    /// (PyTorch's default) or only the input values. Max pools ignore it.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub count_include_pad: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_true(b: &bool) -> bool {
    *b
}

fn yes() -> bool {
    true
}

impl PoolSpec {
    /// PyTorch's default: the stride equals the kernel size.
    pub fn new(dims: usize, kernel: usize) -> PoolSpec {
        PoolSpec {
            kernel: vec![kernel; dims],
            stride: vec![kernel; dims],
            padding: vec![0; dims],
            ceil_mode: false,
            count_include_pad: true,
        }
    }

    /// A window with PyTorch's defaults for `ceil_mode` (false) and `count_include_pad` (true).
    pub fn window(kernel: Vec<usize>, stride: Vec<usize>, padding: Vec<usize>) -> PoolSpec {
        PoolSpec { kernel, stride, padding, ceil_mode: false, count_include_pad: true }
    }

    /// Checks the window of a `dims`-D pool: one kernel size, stride and padding per spatial
    /// dimension, and kernel sizes and strides of at least 1.
    pub fn check(&self, dims: usize) -> Result<(), String> {
        let lists = [("kernel", &self.kernel), ("stride", &self.stride), ("padding", &self.padding)];
        if let Some((name, v)) = lists.iter().find(|(_, v)| v.len() != dims) {
            return Err(format!("{name} {v:?} needs {dims} entries, one per spatial dimension"));
        }
        if let Some((name, v)) = lists.iter().find(|(name, v)| *name != "padding" && v.contains(&0)) {
            return Err(format!("{name} {v:?} has an entry of 0; every entry must be at least 1"));
        }
        Ok(())
    }
}

/// The dimensions a reduction (`mean`, `sum`, `amax`) runs over, as PyTorch's `dim` and
/// `keepdim` arguments. Empty `dims` reduces every element, as `x.mean()` (or `dim=None`) does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReduceSpec {
    pub dims: Vec<i64>,
    pub keepdim: bool,
}

impl ReduceSpec {
    pub fn new(dims: &[i64], keepdim: bool) -> ReduceSpec {
        ReduceSpec { dims: dims.to_vec(), keepdim }
    }

    /// The reduced dimensions of a rank-`rank` input as a mask (every one when `dims` is empty),
    /// or why they do not fit it: a dimension out of range or named twice.
    pub fn mask(&self, rank: usize) -> Result<Vec<bool>, String> {
        if self.dims.is_empty() {
            return Ok(vec![true; rank]);
        }
        let mut mask = vec![false; rank];
        for &d in &self.dims {
            let k = shape::norm_dim(d, rank).filter(|_| rank > 0).ok_or_else(|| format!("dim {d} out of range for rank {rank}"))?;
            if std::mem::replace(&mut mask[k], true) {
                return Err(format!("dim {d} appears more than once in {:?}", self.dims));
            }
        }
        Ok(mask)
    }
}

/// One entry of a `view`/`reshape` target shape: a constant (with `-1` meaning "infer") or the
/// integer value of the node's input number `k` (as in `x.view(x.size(0), -1)`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DimArg {
    Const(i64),
    Input(usize),
}

/// What `StochasticDepth` drops in training: each sample on its own (`row`) or the whole batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DepthMode {
    Row,
    Batch,
}

impl DepthMode {
    /// torchvision's name of the mode.
    pub fn name(self) -> &'static str {
        match self {
            DepthMode::Row => "row",
            DepthMode::Batch => "batch",
        }
    }
}

/// How a parameter is initialised when a model is built from scratch (PyTorch defaults).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Init {
    /// U(-1/sqrt(fan_in), 1/sqrt(fan_in)): kaiming_uniform with a = sqrt(5) for weights, and the
    /// bias rule of `nn.Linear` / `nn.ConvNd`, which give the same bound.
    Uniform {
        fan_in: usize,
    },
    Ones,
    Zeros,
    /// N(0, 1), with row `zero_row` of a matrix set to zero (`nn.Embedding`'s `padding_idx`).
    Normal {
        zero_row: Option<usize>,
    },
    /// `0, 1, ..., n - 1` along the last dimension, the same for every leading index: a
    /// position-id buffer such as HuggingFace BERT's `torch.arange(n).expand((1, -1))`.
    Arange,
    /// N(0, std^2) (torchvision's `normal_(std=0.02)` of a ViT's position embedding).
    Gaussian {
        std: f32,
    },
    /// U(-b, b) with b = sqrt(6 / (fan_in + fan_out)): `xavier_uniform_`, which
    /// `nn.MultiheadAttention` draws its packed `in_proj_weight` from.
    Xavier {
        fan_in: usize,
        fan_out: usize,
    },
}

/// A parameter or buffer that an op owns, named relative to its module (`weight`, `running_mean`).
#[derive(Clone, Debug, PartialEq)]
pub struct ParamSpec {
    pub name: &'static str,
    pub shape: Vec<usize>,
    pub trainable: bool,
    pub init: Init,
}

/// The operators of the IR.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// A graph input (fx `placeholder`).
    Input,
    /// The graph result (fx `output`); its single input is returned.
    Output,
    /// A tensor read from the parameter store at the node's target (fx `get_attr`).
    Constant,
    Linear {
        in_features: usize,
        out_features: usize,
        bias: bool,
    },
    Conv1d(ConvSpec),
    Conv2d(ConvSpec),
    BatchNorm1d(NormSpec),
    BatchNorm2d(NormSpec),
    Relu,
    Relu6,
    LeakyRelu {
        negative_slope: f32,
    },
    Sigmoid,
    Tanh,
    Selu,
    /// GELU with the exact erf form (`approximate = "none"`) or the tanh approximation.
    Gelu {
        tanh: bool,
    },
    /// `x * sigmoid(x)` (`nn.SiLU`, `F.silu`).
    Silu,
    /// `x * relu6(x + 3) / 6` (`nn.Hardswish`).
    Hardswish,
    /// `relu6(x + 3) / 6` (`nn.Hardsigmoid`).
    Hardsigmoid,
    /// `log(1 + exp(beta * x)) / beta`, and `x` itself where `beta * x > threshold` (`nn.Softplus`).
    Softplus {
        beta: f32,
        threshold: f32,
    },
    /// `x * tanh(softplus(x))` (`nn.Mish`).
    Mish,
    /// `x.mean(dims, keepdim)`.
    Mean(ReduceSpec),
    /// `x.sum(dims, keepdim)`.
    Sum(ReduceSpec),
    /// `x.amax(dims, keepdim)`: the largest value (NaN where a NaN is among them).
    Amax(ReduceSpec),
    Softmax {
        dim: i64,
    },
    LogSoftmax {
        dim: i64,
    },
    MaxPool1d(PoolSpec),
    MaxPool2d(PoolSpec),
    AvgPool1d(PoolSpec),
    AvgPool2d(PoolSpec),
    AdaptiveAvgPool1d {
        output_size: usize,
    },
    AdaptiveAvgPool2d {
        output_size: [usize; 2],
    },
    Flatten {
        start_dim: i64,
        end_dim: i64,
    },
    /// `view` / `reshape`.
    Reshape {
        shape: Vec<DimArg>,
    },
    Transpose {
        dim0: i64,
        dim1: i64,
    },
    Permute {
        dims: Vec<i64>,
    },
    /// `x.size(dim)`: an integer, used by `view`.
    Size {
        dim: i64,
    },
    Add,
    Sub,
    Mul,
    MatMul,
    Dropout {
        p: f32,
    },
    /// torchvision's `StochasticDepth(p, mode)`: in training, drops a whole sample (`row`) or
    /// the whole batch (`batch`) with probability `p` and scales what survives by `1 / (1 - p)`;
    /// the identity in evaluation.
    StochasticDepth {
        p: f32,
        mode: DepthMode,
    },
    /// Elementwise `a / b` with broadcasting (`torch.div`).
    Div,
    /// Elementwise `a ** b` with broadcasting (`torch.pow`).
    Pow,
    /// Elementwise square root (`torch.sqrt`).
    Sqrt,
    /// `torch.clamp(x, min, max)`; an open side is `f32::MIN` / `f32::MAX`.
    Clip {
        min: f32,
        max: f32,
    },
    /// `torch.cat(inputs, dim)` of any number of inputs.
    Concat {
        dim: i64,
    },
    /// Constant padding of the trailing dimensions: `begin[i]` and `end[i]` values are added
    /// before and after dimension `rank - begin.len() + i` (`torch.nn.functional.pad`).
    Pad {
        begin: Vec<usize>,
        end: Vec<usize>,
        value: f32,
    },
    /// `nn.LayerNorm` / `F.layer_norm` over the trailing `normalized_shape` dimensions (biased
    /// variance, `eps` inside the square root). As a module it owns `weight` (when
    /// `elementwise_affine`) and `bias` (when `bias` too); as a function it owns nothing and
    /// reads its weight and bias, when given, as inputs 1 and 2 of shape `normalized_shape`.
    LayerNorm {
        normalized_shape: Vec<usize>,
        eps: f32,
        elementwise_affine: bool,
        bias: bool,
    },
    /// `nn.GroupNorm` / `F.group_norm`: each sample's `num_channels` channels in `num_groups`
    /// groups, each group normalised over its channels and positions. As a module it owns a
    /// per-channel `weight` (when `affine`) and `bias` (when `bias` too); as a function it reads
    /// them, when given, as inputs 1 and 2 of shape `[num_channels]`.
    GroupNorm {
        num_groups: usize,
        num_channels: usize,
        eps: f32,
        affine: bool,
        bias: bool,
    },
    /// `nn.AdaptiveMaxPool1d/2d`: the largest value of each of PyTorch's adaptive windows
    /// `floor(i*L/out) .. ceil((i+1)*L/out)` (the first NaN of a window wins).
    AdaptiveMaxPool1d {
        output_size: usize,
    },
    AdaptiveMaxPool2d {
        output_size: [usize; 2],
    },
    /// `x[items]` on a tensor (`operator.getitem`): slices with steps, integers, `None` and
    /// `...`. A piece of `chunk`, `split` or `unbind` is one of these too: the tracer lowers
    /// each piece a graph reads to its own node, so every node stays one tensor.
    Index {
        items: Vec<IndexItem>,
    },
    /// `x.expand(sizes)`: entries as `view`'s (constants or integer inputs), `-1` keeping the
    /// input's size.
    Expand {
        shape: Vec<DimArg>,
    },
    /// `x.repeat(repeats)`.
    Repeat {
        repeats: Vec<usize>,
    },
    /// `torch.stack(inputs, dim)` of any number of inputs of one shape.
    Stack {
        dim: i64,
    },
    /// Integer arithmetic on sizes (`c // groups`, `h * w`), each operand a constant or an
    /// integer input: an integer, as `size` gives, known when a plan is built.
    SizeArith {
        arith: SizeOp,
        args: [DimArg; 2],
    },
    /// `torch.einsum(equation, a, b)` of two operands whose letters make a batched matrix
    /// product ([`crate::Contraction`]); other equations are refused when the graph is checked.
    Einsum {
        equation: String,
    },
    /// `F.scaled_dot_product_attention(q, k, v, attn_mask, 0.0, is_causal, scale)`:
    /// `softmax(q k^T * scale + mask) v`, with `scale` `1 / sqrt(E)` when absent. Inputs are
    /// query, key, value and, when `mask` is set, the mask. Dropout is not part of the op: a
    /// trace with `dropout_p` other than 0 is refused.
    ScaledDotProductAttention {
        #[serde(default)]
        mask: Option<AttnMask>,
        #[serde(default)]
        is_causal: bool,
        #[serde(default)]
        scale: Option<f32>,
    },
    /// `nn.Embedding` / `F.embedding`: row `id` of a `[num_embeddings, embedding_dim]` weight for
    /// each id of its first input, a float tensor of whole numbers in `0..num_embeddings`
    /// (anything else stops the run with an error naming the node). The row `padding_idx` gets
    /// no gradient. As a module it owns `weight`; called as a function (`functional`) it reads
    /// the weight as input 1.
    Embedding {
        num_embeddings: usize,
        embedding_dim: usize,
        #[serde(default)]
        padding_idx: Option<usize>,
        #[serde(default)]
        functional: bool,
    },
    /// Elementwise `a == b` with broadcasting (`torch.eq`, `==`): 1.0 where true, 0.0 where
    /// false (the graph holds PyTorch's bool tensors as floats), no gradient; NaN equals nothing.
    Eq,
    /// Elementwise `a != b` (`torch.ne`, `!=`); NaN differs from everything.
    Ne,
    /// Elementwise `a < b` (`torch.lt`, `<`).
    Lt,
    /// Elementwise `a <= b` (`torch.le`, `<=`).
    Le,
    /// Elementwise `a > b` (`torch.gt`, `>`).
    Gt,
    /// Elementwise `a >= b` (`torch.ge`, `>=`).
    Ge,
    /// `torch.where(condition, a, b)` with the three inputs broadcast: `a` where the condition is
    /// not 0 (a NaN condition counts as true, as PyTorch's cast to bool does), `b` elsewhere.
    /// `x.masked_fill(mask, v)` is `where(mask, v, x)`.
    Where,
    /// A PyTorch module the graph cannot lower (a user's own `nn.Module` subclass, a module
    /// mase-rs has no op for), kept as one node that PyTorch runs through `mg.model`. `class` is
    /// its Python class name; `sample_shape` its output's shape without the batch, measured by a
    /// forward run (None until one has run). The executor, export and hardware refuse it.
    Opaque {
        class: String,
        sample_shape: Option<Vec<usize>>,
    },
}

impl Op {
    /// MASE's `mase_op` name (doc/mase-semantics.md#mase_type-and-mase_op).
    pub fn mase_op(&self) -> &'static str {
        match self {
            Op::Input => "placeholder",
            Op::Output => "output",
            Op::Constant => "constant",
            Op::Linear { .. } => "linear",
            Op::Conv1d(_) => "conv1d",
            Op::Conv2d(_) => "conv2d",
            Op::BatchNorm1d(_) => "batch_norm1d",
            Op::BatchNorm2d(_) => "batch_norm2d",
            Op::Relu => "relu",
            Op::Relu6 => "relu6",
            Op::LeakyRelu { .. } => "leaky_relu",
            Op::Sigmoid => "sigmoid",
            Op::Tanh => "tanh",
            Op::Selu => "selu",
            Op::Gelu { .. } => "gelu",
            Op::Silu => "silu",
            Op::Hardswish => "hardswish",
            Op::Hardsigmoid => "hardsigmoid",
            Op::Softplus { .. } => "softplus",
            Op::Mish => "mish",
            Op::Mean(_) => "mean",
            Op::Sum(_) => "sum",
            Op::Amax(_) => "amax",
            Op::Softmax { .. } => "softmax",
            Op::LogSoftmax { .. } => "log_softmax",
            Op::MaxPool1d(_) => "max_pool1d",
            Op::MaxPool2d(_) => "max_pool2d",
            Op::AvgPool1d(_) => "avg_pool1d",
            Op::AvgPool2d(_) => "avg_pool2d",
            Op::AdaptiveAvgPool1d { .. } => "adaptive_avg_pool1d",
            Op::AdaptiveAvgPool2d { .. } => "adaptive_avg_pool2d",
            Op::Flatten { .. } => "flatten",
            Op::Reshape { .. } => "view",
            Op::Transpose { .. } => "transpose",
            Op::Permute { .. } => "permute",
            Op::Size { .. } => "size",
            Op::Add => "add",
            Op::Sub => "sub",
            Op::Mul => "mul",
            Op::MatMul => "matmul",
            Op::Dropout { .. } => "dropout",
            Op::StochasticDepth { .. } => "stochastic_depth",
            Op::Div => "div",
            Op::Pow => "pow",
            Op::Sqrt => "sqrt",
            Op::Clip { .. } => "clamp",
            Op::Concat { .. } => "cat",
            Op::Pad { .. } => "pad",
            Op::Opaque { .. } => "opaque",
            Op::LayerNorm { .. } => "layer_norm",
            Op::GroupNorm { .. } => "group_norm",
            Op::AdaptiveMaxPool1d { .. } => "adaptive_max_pool1d",
            Op::AdaptiveMaxPool2d { .. } => "adaptive_max_pool2d",
            Op::Index { .. } => "getitem",
            Op::Expand { .. } => "expand",
            Op::Repeat { .. } => "repeat",
            Op::Stack { .. } => "stack",
            Op::SizeArith { .. } => "size_arith",
            Op::Einsum { .. } => "einsum",
            Op::ScaledDotProductAttention { .. } => "scaled_dot_product_attention",
            Op::Embedding { .. } => "embedding",
            Op::Eq => "eq",
            Op::Ne => "ne",
            Op::Lt => "lt",
            Op::Le => "le",
            Op::Gt => "gt",
            Op::Ge => "ge",
            Op::Where => "where",
        }
    }

    /// Whether the op is one of the comparisons (`eq`, `ne`, `lt`, `le`, `gt`, `ge`), whose value
    /// is 0.0 or 1.0 and which pass no gradient.
    pub fn is_comparison(&self) -> bool {
        matches!(self, Op::Eq | Op::Ne | Op::Lt | Op::Le | Op::Gt | Op::Ge)
    }

    /// Whether the op's value is an integer (a size) rather than a tensor.
    pub fn gives_int(&self) -> bool {
        matches!(self, Op::Size { .. } | Op::SizeArith { .. })
    }

    /// The PyTorch module class that implements this op, for ops that are modules.
    pub fn module_class(&self) -> Option<&'static str> {
        Some(match self {
            Op::Linear { .. } => "Linear",
            Op::Conv1d(_) => "Conv1d",
            Op::Conv2d(_) => "Conv2d",
            Op::BatchNorm1d(_) => "BatchNorm1d",
            Op::BatchNorm2d(_) => "BatchNorm2d",
            Op::Relu => "ReLU",
            Op::Relu6 => "ReLU6",
            Op::LeakyRelu { .. } => "LeakyReLU",
            Op::Sigmoid => "Sigmoid",
            Op::Tanh => "Tanh",
            Op::Selu => "SELU",
            Op::Gelu { .. } => "GELU",
            Op::Silu => "SiLU",
            Op::Hardswish => "Hardswish",
            Op::Hardsigmoid => "Hardsigmoid",
            Op::Softplus { .. } => "Softplus",
            Op::Mish => "Mish",
            Op::Softmax { .. } => "Softmax",
            Op::LogSoftmax { .. } => "LogSoftmax",
            Op::MaxPool1d(_) => "MaxPool1d",
            Op::MaxPool2d(_) => "MaxPool2d",
            Op::AvgPool1d(_) => "AvgPool1d",
            Op::AvgPool2d(_) => "AvgPool2d",
            Op::AdaptiveAvgPool1d { .. } => "AdaptiveAvgPool1d",
            Op::AdaptiveAvgPool2d { .. } => "AdaptiveAvgPool2d",
            Op::Flatten { .. } => "Flatten",
            Op::Dropout { .. } => "Dropout",
            Op::StochasticDepth { .. } => "StochasticDepth",
            Op::LayerNorm { .. } => "LayerNorm",
            Op::GroupNorm { .. } => "GroupNorm",
            Op::AdaptiveMaxPool1d { .. } => "AdaptiveMaxPool1d",
            Op::AdaptiveMaxPool2d { .. } => "AdaptiveMaxPool2d",
            Op::Embedding { functional: false, .. } => "Embedding",
            // Functions, methods and graph plumbing: no module class.
            _ => return None,
        })
    }

    /// `repr(module)` as PyTorch prints it, used by report_graph's "Layer types".
    pub fn module_repr(&self) -> Option<String> {
        let fmt_t = |v: &[usize]| match v {
            [a] => format!("({a},)"),
            _ => format!("({})", v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(", ")),
        };
        let class = self.module_class()?;
        Some(match self {
            Op::Linear { in_features, out_features, bias } => {
                format!("Linear(in_features={in_features}, out_features={out_features}, bias={})", py_bool(*bias))
            }
            Op::Conv1d(c) | Op::Conv2d(c) => {
                let mut s =
                    format!("{class}({}, {}, kernel_size={}, stride={}", c.in_channels, c.out_channels, fmt_t(&c.kernel), fmt_t(&c.stride));
                if c.padding.iter().any(|&p| p != 0) {
                    s += &format!(", padding={}", fmt_t(&c.padding));
                }
                if c.dilation.iter().any(|&d| d != 1) {
                    s += &format!(", dilation={}", fmt_t(&c.dilation));
                }
                if c.groups != 1 {
                    s += &format!(", groups={}", c.groups);
                }
                if !c.bias {
                    s += ", bias=False";
                }
                s + ")"
            }
            Op::BatchNorm1d(n) | Op::BatchNorm2d(n) => format!(
                "{class}({}, eps={}, momentum={}, affine={}, track_running_stats=True)",
                n.num_features,
                py_float(n.eps),
                py_float(n.momentum),
                py_bool(n.affine)
            ),
            Op::LeakyRelu { negative_slope } => format!("LeakyReLU(negative_slope={})", py_float(*negative_slope)),
            Op::Gelu { tanh } => format!("GELU(approximate='{}')", if *tanh { "tanh" } else { "none" }),
            Op::Softplus { beta, threshold } => format!("Softplus(beta={}, threshold={})", py_float(*beta), py_float(*threshold)),
            Op::Silu | Op::Hardswish | Op::Hardsigmoid | Op::Mish => format!("{class}()"),
            Op::Softmax { dim } | Op::LogSoftmax { dim } => format!("{class}(dim={dim})"),
            Op::MaxPool1d(p) | Op::MaxPool2d(p) => {
                let one = |v: &[usize]| if v.len() == 1 || v.iter().all(|&x| x == v[0]) { v[0].to_string() } else { fmt_t(v) };
                format!(
                    "{class}(kernel_size={}, stride={}, padding={}, dilation=1, ceil_mode={})",
                    one(&p.kernel),
                    one(&p.stride),
                    one(&p.padding),
                    py_bool(p.ceil_mode)
                )
            }
            Op::AvgPool1d(p) | Op::AvgPool2d(p) => {
                let one = |v: &[usize]| if v.len() == 1 || v.iter().all(|&x| x == v[0]) { v[0].to_string() } else { fmt_t(v) };
                // PyTorch's `extra_repr` leaves out `ceil_mode` and `count_include_pad`.
                format!("{class}(kernel_size={}, stride={}, padding={})", one(&p.kernel), one(&p.stride), one(&p.padding))
            }
            Op::AdaptiveAvgPool1d { output_size } | Op::AdaptiveMaxPool1d { output_size } => format!("{class}(output_size={output_size})"),
            Op::AdaptiveAvgPool2d { output_size } | Op::AdaptiveMaxPool2d { output_size } => {
                format!("{class}(output_size=({}, {}))", output_size[0], output_size[1])
            }
            Op::Flatten { start_dim, end_dim } => format!("Flatten(start_dim={start_dim}, end_dim={end_dim})"),
            Op::Dropout { p } => format!("Dropout(p={}, inplace=False)", py_float(*p)),
            Op::StochasticDepth { p, mode } => format!("StochasticDepth(p={}, mode={})", py_float(*p), mode.name()),
            Op::Relu | Op::Relu6 | Op::Sigmoid | Op::Tanh | Op::Selu => format!("{class}()"),
            // PyTorch shows whether a bias exists, which needs the affine parameters.
            Op::LayerNorm { normalized_shape, eps, elementwise_affine, bias } => format!(
                "LayerNorm({}, eps={}, elementwise_affine={}, bias={})",
                fmt_t(normalized_shape),
                py_float(*eps),
                py_bool(*elementwise_affine),
                py_bool(*elementwise_affine && *bias)
            ),
            Op::GroupNorm { num_groups, num_channels, eps, affine, bias } => format!(
                "GroupNorm({num_groups}, {num_channels}, eps={}, affine={}, bias={})",
                py_float(*eps),
                py_bool(*affine),
                py_bool(*affine && *bias)
            ),
            Op::Embedding { num_embeddings, embedding_dim, padding_idx, .. } => match padding_idx {
                Some(p) => format!("Embedding({num_embeddings}, {embedding_dim}, padding_idx={p})"),
                None => format!("Embedding({num_embeddings}, {embedding_dim})"),
            },
            // Ops without a module class returned above.
            _ => return None,
        })
    }

    /// Parameters and buffers this op owns, in PyTorch's `state_dict` order.
    pub fn param_specs(&self) -> Vec<ParamSpec> {
        let p = |name, shape: Vec<usize>, trainable, init| ParamSpec { name, shape, trainable, init };
        match self {
            Op::Linear { in_features, out_features, bias } => {
                let mut v = vec![p("weight", vec![*out_features, *in_features], true, Init::Uniform { fan_in: *in_features })];
                if *bias {
                    v.push(p("bias", vec![*out_features], true, Init::Uniform { fan_in: *in_features }));
                }
                v
            }
            Op::Conv1d(c) | Op::Conv2d(c) => {
                let per_group = c.in_channels / c.groups.max(1);
                // Saturating: `validate` refuses parameters too large to exist before any is built.
                let fan_in = c.kernel.iter().fold(per_group, |a, &k| a.saturating_mul(k));
                let mut shape = vec![c.out_channels, per_group];
                shape.extend(&c.kernel);
                let mut v = vec![p("weight", shape, true, Init::Uniform { fan_in })];
                if c.bias {
                    v.push(p("bias", vec![c.out_channels], true, Init::Uniform { fan_in }));
                }
                v
            }
            Op::BatchNorm1d(n) | Op::BatchNorm2d(n) => {
                let c = n.num_features;
                let mut v = Vec::new();
                if n.affine {
                    v.push(p("weight", vec![c], true, Init::Ones));
                    v.push(p("bias", vec![c], true, Init::Zeros));
                }
                v.push(p("running_mean", vec![c], false, Init::Zeros));
                v.push(p("running_var", vec![c], false, Init::Ones));
                v
            }
            Op::LayerNorm { normalized_shape, elementwise_affine, bias, .. } => {
                let mut v = Vec::new();
                if *elementwise_affine {
                    v.push(p("weight", normalized_shape.clone(), true, Init::Ones));
                    if *bias {
                        v.push(p("bias", normalized_shape.clone(), true, Init::Zeros));
                    }
                }
                v
            }
            Op::GroupNorm { num_channels, affine, bias, .. } => {
                let mut v = Vec::new();
                if *affine {
                    v.push(p("weight", vec![*num_channels], true, Init::Ones));
                    if *bias {
                        v.push(p("bias", vec![*num_channels], true, Init::Zeros));
                    }
                }
                v
            }
            Op::Embedding { num_embeddings, embedding_dim, padding_idx, functional: false } => {
                vec![p("weight", vec![*num_embeddings, *embedding_dim], true, Init::Normal { zero_row: *padding_idx })]
            }
            // Stateless ops. A `get_attr` constant's tensor is the importer's, not drawn here.
            _ => Vec::new(),
        }
    }

    /// Checks the geometry of a convolution or pool (see [`ConvSpec::check`]) and the output size
    /// of an adaptive pool; other ops have none to check.
    pub fn check_spec(&self) -> Result<(), String> {
        match self {
            Op::Conv1d(c) => c.check(1),
            Op::Conv2d(c) => c.check(2),
            Op::MaxPool1d(p) | Op::AvgPool1d(p) => p.check(1),
            Op::MaxPool2d(p) | Op::AvgPool2d(p) => p.check(2),
            Op::AdaptiveAvgPool1d { output_size } | Op::AdaptiveMaxPool1d { output_size } if *output_size == 0 => {
                Err("output_size [0] has an entry of 0; it must be at least 1".into())
            }
            Op::AdaptiveAvgPool2d { output_size } | Op::AdaptiveMaxPool2d { output_size } if output_size.contains(&0) => {
                Err(format!("output_size {output_size:?} has an entry of 0; every entry must be at least 1"))
            }
            Op::LayerNorm { normalized_shape, .. } if normalized_shape.is_empty() || normalized_shape.contains(&0) => {
                Err(format!("normalized_shape {normalized_shape:?} must have at least one entry, each at least 1"))
            }
            Op::GroupNorm { num_groups, num_channels, .. } if *num_groups == 0 || num_channels % num_groups != 0 => {
                Err(format!("num_groups = {num_groups} must be at least 1 and divide num_channels = {num_channels}"))
            }
            Op::Einsum { equation } => crate::Contraction::parse(equation).map(|_| ()),
            Op::Embedding { num_embeddings, padding_idx: Some(p), .. } if p >= num_embeddings => {
                Err(format!("padding_idx = {p} must be below num_embeddings = {num_embeddings}"))
            }
            Op::ScaledDotProductAttention { scale: Some(s), .. } if !s.is_finite() => Err(format!("scale = {s} must be finite")),
            // No geometry; shapes are checked by shape inference.
            _ => Ok(()),
        }
    }

    /// Number of inputs the op takes (`None` where it varies, as for `view`).
    pub fn arity(&self) -> Option<usize> {
        match self {
            Op::Input | Op::Constant => Some(0),
            // The graph's outputs, in order: one or more (`validate` refuses none).
            Op::Output => None,
            Op::Reshape { .. } | Op::Concat { .. } | Op::Opaque { .. } => None,
            // The input and the integer inputs its sizes read; any number of tensors; the integer
            // operands (none to two).
            Op::Expand { .. } | Op::Stack { .. } | Op::SizeArith { .. } => None,
            // The input, then the weight and bias when a function call passes them.
            Op::LayerNorm { .. } | Op::GroupNorm { .. } => None,
            // Query, key, value and the mask when there is one.
            Op::ScaledDotProductAttention { mask, .. } => Some(3 + usize::from(mask.is_some())),
            Op::Embedding { functional, .. } => Some(1 + usize::from(*functional)),
            // The condition, then the values where it holds and where it does not.
            Op::Where => Some(3),
            other => match other.family() {
                OpFamily::Binary | OpFamily::MatMul => Some(2),
                OpFamily::Graph | OpFamily::Linear | OpFamily::Conv | OpFamily::Norm | OpFamily::Pointwise => Some(1),
                OpFamily::Softmax | OpFamily::Pool | OpFamily::AdaptivePool | OpFamily::Shape | OpFamily::Opaque => Some(1),
                OpFamily::Reduce => Some(1),
                // Decided per op above.
                OpFamily::Attention | OpFamily::Embedding => None,
            },
        }
    }

    /// Output value of the op for inputs of the given kinds and shapes.
    pub fn infer(&self, node: &str, inputs: &[ValueInfo]) -> Result<ValueInfo> {
        shape::infer(self, node, inputs)
    }

    /// Whether the op has state or behaviour that differs between training and evaluation.
    pub fn is_train_sensitive(&self) -> bool {
        matches!(self, Op::BatchNorm1d(_) | Op::BatchNorm2d(_) | Op::Dropout { .. } | Op::StochasticDepth { .. })
    }

    pub(crate) fn err(&self, node: &str, inputs: &[ValueInfo], reason: impl Into<String>) -> IrError {
        IrError::ShapeMismatch {
            node: node.to_string(),
            op: self.mase_op().to_string(),
            shapes: inputs.iter().map(|v| v.shape().to_vec()).collect(),
            reason: reason.into(),
        }
    }
}

fn py_bool(b: bool) -> &'static str {
    if b {
        "True"
    } else {
        "False"
    }
}

/// Formats a float the way Python's `repr` does for the usual hyper-parameter values.
pub(crate) fn py_float(x: f32) -> String {
    let v = x as f64;
    // f32 -> f64 widening shows binary noise (0.1 -> 0.10000000149); print the shortest f32 form.
    let s = format!("{x}");
    if v.abs() >= 1e-4 || v == 0.0 {
        if s.contains('.') || s.contains('e') {
            s
        } else {
            format!("{s}.0")
        }
    } else {
        let e = format!("{x:e}");
        // Python writes 1e-05, Rust 1e-5.
        match e.split_once('e') {
            Some((m, exp)) => {
                let n: i32 = exp.parse().unwrap_or(0);
                format!("{m}e{}{:02}", if n < 0 { "-" } else { "+" }, n.abs())
            }
            None => e,
        }
    }
}
