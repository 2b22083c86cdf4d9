//! The ops a model file may name, and how each becomes an IR op from the layer's keys and the
//! shape flowing into it.

use super::keys::{boolean, choice, dims, float_in, int, int_list, int_or_list, uint, width, Keys};
use crate::{ModelContext, ZooError};
use mase_ir::{ConvSpec, DimArg, NormSpec, Op, PoolSpec, ReduceSpec};

/// How torch.fx would record the layer, which decides its node name and kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    /// A module: `seq_blocks.<i>` or the layer's name.
    Module,
    /// A function with two tensor inputs (`operator.add` -> node `add`).
    Function(&'static str),
    /// A tensor method with the layer's only input (`transpose`, `permute`).
    Method(&'static str),
    /// `x.view(x.size(0), *shape)`: a `size` node and a `view` node.
    View,
}

/// What a model file's `op` names: the keys it takes besides `op`, `name` and `inputs`, and how
/// many inputs it reads.
pub(crate) struct LayerEntry {
    pub name: &'static str,
    pub keys: &'static [&'static str],
    pub arity: usize,
}

const fn entry(name: &'static str, keys: &'static [&'static str], arity: usize) -> LayerEntry {
    LayerEntry { name, keys, arity }
}

const CONV: &[&str] = &["out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "bias"];
const NORM: &[&str] = &["eps", "momentum", "affine"];
const MAX_POOL: &[&str] = &["kernel_size", "stride", "padding", "ceil_mode"];
const AVG_POOL: &[&str] = &["kernel_size", "stride", "padding", "ceil_mode", "count_include_pad"];

/// Every op a model file may use, in the order the documentation lists them. [`layer_op`] builds
/// each; a name here without an arm there is a bug that the tests of every op catch.
pub(crate) const LAYERS: &[LayerEntry] = &[
    entry("linear", &["out_features", "bias"], 1),
    entry("conv1d", CONV, 1),
    entry("conv2d", CONV, 1),
    entry("batch_norm1d", NORM, 1),
    entry("batch_norm2d", NORM, 1),
    entry("relu", &[], 1),
    entry("relu6", &[], 1),
    entry("leaky_relu", &["negative_slope"], 1),
    entry("sigmoid", &[], 1),
    entry("tanh", &[], 1),
    entry("selu", &[], 1),
    entry("gelu", &["approximate"], 1),
    entry("silu", &[], 1),
    entry("hardswish", &[], 1),
    entry("hardsigmoid", &[], 1),
    entry("softplus", &["beta", "threshold"], 1),
    entry("mish", &[], 1),
    entry("mean", &["dim", "keepdim"], 1),
    entry("sum", &["dim", "keepdim"], 1),
    entry("amax", &["dim", "keepdim"], 1),
    entry("softmax", &["dim"], 1),
    entry("log_softmax", &["dim"], 1),
    entry("max_pool1d", MAX_POOL, 1),
    entry("max_pool2d", MAX_POOL, 1),
    entry("avg_pool1d", AVG_POOL, 1),
    entry("avg_pool2d", AVG_POOL, 1),
    entry("adaptive_avg_pool1d", &["output_size"], 1),
    entry("adaptive_avg_pool2d", &["output_size"], 1),
    entry("flatten", &["start_dim", "end_dim"], 1),
    entry("dropout", &["p"], 1),
    entry("stochastic_depth", &["p", "mode"], 1),
    entry("reshape", &["shape"], 1),
    entry("transpose", &["dim0", "dim1"], 1),
    entry("permute", &["dims"], 1),
    entry("add", &[], 2),
    entry("sub", &[], 2),
    entry("mul", &[], 2),
    entry("matmul", &[], 2),
    entry("layer_norm", &["normalized_shape", "eps", "elementwise_affine", "bias"], 1),
    entry("group_norm", &["num_groups", "eps", "affine", "bias"], 1),
    entry("adaptive_max_pool1d", &["output_size"], 1),
    entry("adaptive_max_pool2d", &["output_size"], 1),
    entry("einsum", &["equation"], 2),
    entry("scaled_dot_product_attention", &["is_causal", "scale"], 3),
    entry("embedding", &["num_embeddings", "embedding_dim", "padding_idx"], 1),
];

/// The ops (by `mase_op`) that model files do not name, each with the reason. Every op of the IR
/// is in [`LAYERS`] or here; a unit test walks [`Op::examples`] to keep it so.
pub(crate) const NOT_IN_MODEL_FILES: &[(&str, &str)] = &[
    ("placeholder", "a model's input is the data set's sample, implicit as `x`"),
    ("output", "the model returns its `output` layer, or the last one"),
    ("constant", "model files hold no tensors; parameters belong to layers"),
    ("size", "written by `reshape`, which keeps the batch dimension as `x.size(0)`"),
    ("div", "arithmetic beyond add, sub, mul and matmul arrives by ONNX or torch.fx import"),
    ("pow", "arithmetic beyond add, sub, mul and matmul arrives by ONNX or torch.fx import"),
    ("sqrt", "arithmetic beyond add, sub, mul and matmul arrives by ONNX or torch.fx import"),
    ("clamp", "arrives by ONNX (Clip) or torch.fx import"),
    ("cat", "arrives by ONNX (Concat) or torch.fx import"),
    ("pad", "arrives by ONNX (Pad) or torch.fx import"),
    ("opaque", "a PyTorch module kept whole arrives only by tracing a module in Python"),
    ("getitem", "subscripts and pieces of chunk/split/unbind arrive by torch.fx import"),
    ("expand", "arrives by torch.fx import"),
    ("repeat", "arrives by torch.fx import"),
    ("stack", "arrives by torch.fx import"),
    ("size_arith", "arithmetic on sizes arrives by torch.fx import, where a forward computes shapes"),
    ("eq", "comparisons and `where` (masks) arrive by ONNX or torch.fx import"),
    ("ne", "comparisons and `where` (masks) arrive by ONNX or torch.fx import"),
    ("lt", "comparisons and `where` (masks) arrive by ONNX or torch.fx import"),
    ("le", "comparisons and `where` (masks) arrive by ONNX or torch.fx import"),
    ("gt", "comparisons and `where` (masks) arrive by ONNX or torch.fx import"),
    ("ge", "comparisons and `where` (masks) arrive by ONNX or torch.fx import"),
    ("where", "comparisons and `where` (masks) arrive by ONNX or torch.fx import"),
];

/// Why model files do not name the op `mase_op`, for the ops of [`NOT_IN_MODEL_FILES`].
pub(crate) fn why_not_in_model_files(mase_op: &str) -> Option<&'static str> {
    NOT_IN_MODEL_FILES.iter().find(|(n, _)| *n == mase_op).map(|(_, why)| *why)
}

/// The entry of an op name.
pub(crate) fn layer_entry(op: &str) -> Option<&'static LayerEntry> {
    LAYERS.iter().find(|l| l.name == op)
}

/// Every op name, for messages.
pub(crate) fn op_names() -> Vec<&'static str> {
    LAYERS.iter().map(|l| l.name).collect()
}

/// The shape the op needs to read from, checked for rank: `[N, C, ...]` with `rank` dimensions.
fn input_with_rank<'s>(keys: &Keys, shape: &'s [usize], ranks: &[usize], layout: &str) -> Result<&'s [usize], ZooError> {
    if ranks.contains(&shape.len()) {
        Ok(shape)
    } else {
        Err(keys.at().err("inputs", format!("op `{}` needs an input {layout}, got shape {shape:?}", keys.at().op)))
    }
}

/// Builds the IR op of layer `op` from its keys and the shapes of its inputs (already checked to
/// be as many as its [`LayerEntry`] says), reading the keys it lists.
pub(crate) fn layer_op(op: &str, keys: &Keys, inputs: &[Vec<usize>], ctx: &ModelContext) -> Result<(Op, Call), ZooError> {
    let x: &[usize] = inputs.first().map(|s| s.as_slice()).unwrap_or(&[]);
    let module = |o: Op| Ok((o, Call::Module));
    match op {
        "linear" => {
            let out_features = keys.req("out_features", &width(ctx.num_classes))?;
            let bias = keys.opt("bias", true, &boolean)?;
            let in_features = match x.last() {
                Some(&f) if x.len() >= 2 => f,
                _ => return Err(keys.at().err("inputs", format!("op `linear` needs an input [N, ..., features], got shape {x:?}"))),
            };
            module(Op::Linear { in_features, out_features, bias })
        }
        "conv1d" | "conv2d" => {
            let n = if op == "conv1d" { 1 } else { 2 };
            let out_channels = keys.req("out_channels", &width(ctx.num_classes))?;
            let kernel = keys.req("kernel_size", &dims(n, 1))?;
            let stride = keys.opt("stride", vec![1; n], &dims(n, 1))?;
            let padding = keys.opt("padding", vec![0; n], &dims(n, 0))?;
            let dilation = keys.opt("dilation", vec![1; n], &dims(n, 1))?;
            let groups = keys.opt("groups", 1, &uint(1))?;
            let bias = keys.opt("bias", true, &boolean)?;
            let layout = if n == 1 { "[N, C, L]" } else { "[N, C, H, W]" };
            let in_channels = input_with_rank(keys, x, &[n + 2], layout)?[1];
            if in_channels % groups != 0 || out_channels % groups != 0 {
                return Err(keys
                    .at()
                    .err("groups", format!("{groups} groups must divide in_channels = {in_channels} and out_channels = {out_channels}")));
            }
            let spec = ConvSpec { in_channels, out_channels, kernel, stride, padding, dilation, groups, bias };
            module(if n == 1 { Op::Conv1d(spec) } else { Op::Conv2d(spec) })
        }
        "batch_norm1d" | "batch_norm2d" => {
            let eps = keys.opt("eps", 1e-5, &float_in(f64::MIN_POSITIVE, 1.0))?;
            let momentum = keys.opt("momentum", 0.1, &float_in(0.0, 1.0))?;
            let affine = keys.opt("affine", true, &boolean)?;
            let (ranks, layout): (&[usize], _) =
                if op == "batch_norm1d" { (&[2, 3], "[N, C] or [N, C, L]") } else { (&[4], "[N, C, H, W]") };
            let num_features = input_with_rank(keys, x, ranks, layout)?[1];
            let spec = NormSpec { num_features, eps, momentum, affine };
            module(if op == "batch_norm1d" { Op::BatchNorm1d(spec) } else { Op::BatchNorm2d(spec) })
        }
        "relu" => module(Op::Relu),
        "relu6" => module(Op::Relu6),
        "sigmoid" => module(Op::Sigmoid),
        "tanh" => module(Op::Tanh),
        "selu" => module(Op::Selu),
        "leaky_relu" => module(Op::LeakyRelu { negative_slope: keys.opt("negative_slope", 0.01, &float_in(-1e6, 1e6))? }),
        "gelu" => module(Op::Gelu { tanh: keys.opt("approximate", "none", &choice(&["none", "tanh"]))? == "tanh" }),
        "silu" => module(Op::Silu),
        "hardswish" => module(Op::Hardswish),
        "hardsigmoid" => module(Op::Hardsigmoid),
        "softplus" => module(Op::Softplus {
            beta: keys.opt("beta", 1.0, &float_in(-1e6, 1e6))?,
            threshold: keys.opt("threshold", 20.0, &float_in(-1e6, 1e6))?,
        }),
        "mish" => module(Op::Mish),
        "mean" | "sum" | "amax" => {
            // `dim` counts the batch dimension, as PyTorch's does; the reduced value must keep
            // the batch, so the model's output has one row per sample.
            let dims = keys.req("dim", &int_or_list)?;
            let spec = ReduceSpec { dims, keepdim: keys.opt("keepdim", false, &boolean)? };
            Ok(match op {
                "mean" => (Op::Mean(spec), Call::Method("mean")),
                "sum" => (Op::Sum(spec), Call::Method("sum")),
                _ => (Op::Amax(spec), Call::Method("amax")),
            })
        }
        "softmax" => module(Op::Softmax { dim: keys.opt("dim", -1, &int)? }),
        "log_softmax" => module(Op::LogSoftmax { dim: keys.opt("dim", -1, &int)? }),
        "max_pool1d" | "max_pool2d" | "avg_pool1d" | "avg_pool2d" => {
            let n = if op.ends_with("1d") { 1 } else { 2 };
            let kernel = keys.req("kernel_size", &dims(n, 1))?;
            // PyTorch's pools default their stride to the kernel size.
            let stride = keys.opt("stride", kernel.clone(), &dims(n, 1))?;
            let padding = keys.opt("padding", vec![0; n], &dims(n, 0))?;
            let ceil_mode = keys.opt("ceil_mode", false, &boolean)?;
            // Only average pools list the key; max pools read the default.
            let count_include_pad = if op.starts_with("avg") { keys.opt("count_include_pad", true, &boolean)? } else { true };
            let spec = PoolSpec { kernel, stride, padding, ceil_mode, count_include_pad };
            module(match op {
                "max_pool1d" => Op::MaxPool1d(spec),
                "max_pool2d" => Op::MaxPool2d(spec),
                "avg_pool1d" => Op::AvgPool1d(spec),
                _ => Op::AvgPool2d(spec),
            })
        }
        "adaptive_avg_pool1d" => module(Op::AdaptiveAvgPool1d { output_size: keys.req("output_size", &uint(1))? }),
        "adaptive_avg_pool2d" => {
            let s = keys.req("output_size", &dims(2, 1))?;
            module(Op::AdaptiveAvgPool2d { output_size: [s[0], s[1]] })
        }
        "flatten" => module(Op::Flatten { start_dim: keys.opt("start_dim", 1, &int)?, end_dim: keys.opt("end_dim", -1, &int)? }),
        "dropout" => module(Op::Dropout { p: keys.opt("p", 0.5, &float_in(0.0, 1.0))? }),
        "stochastic_depth" => module(Op::StochasticDepth {
            p: keys.opt("p", 0.5, &float_in(0.0, 1.0))?,
            mode: if keys.opt("mode", "row", &choice(&["row", "batch"]))? == "row" {
                mase_ir::DepthMode::Row
            } else {
                mase_ir::DepthMode::Batch
            },
        }),
        "reshape" => {
            let per_sample = keys.req("shape", &int_list)?;
            if per_sample.iter().any(|&d| d < -1 || d == 0) {
                return Err(keys.at().err("shape", format!("entries must be positive or -1, got {per_sample:?}")));
            }
            // The batch dimension is kept as `x.size(0)`, so `shape` describes one sample.
            let mut shape = vec![DimArg::Input(1)];
            shape.extend(per_sample.into_iter().map(DimArg::Const));
            Ok((Op::Reshape { shape }, Call::View))
        }
        "transpose" => Ok((Op::Transpose { dim0: keys.req("dim0", &int)?, dim1: keys.req("dim1", &int)? }, Call::Method("transpose"))),
        "permute" => Ok((Op::Permute { dims: keys.req("dims", &int_list)? }, Call::Method("permute"))),
        "add" => Ok((Op::Add, Call::Function("operator.add"))),
        "sub" => Ok((Op::Sub, Call::Function("operator.sub"))),
        "mul" => Ok((Op::Mul, Call::Function("operator.mul"))),
        "matmul" => Ok((Op::MatMul, Call::Function("torch.matmul"))),
        "layer_norm" => {
            // Without `normalized_shape`, the last dimension (`nn.LayerNorm(features)`).
            let last = x.last().map_or(Vec::new(), |&f| vec![f as i64]);
            let shape = keys.opt("normalized_shape", last, &int_list)?;
            let fits =
                !shape.is_empty() && shape.len() < x.len() && shape.iter().zip(&x[x.len() - shape.len()..]).all(|(&a, &b)| a == b as i64);
            if !fits {
                return Err(keys.at().err("normalized_shape", format!("{shape:?} must be the trailing dimensions of the input {x:?}")));
            }
            let eps = keys.opt("eps", 1e-5, &float_in(f64::MIN_POSITIVE, 1.0))?;
            let elementwise_affine = keys.opt("elementwise_affine", true, &boolean)?;
            let bias = keys.opt("bias", true, &boolean)?;
            let normalized_shape = shape.into_iter().map(|d| d as usize).collect();
            module(Op::LayerNorm { normalized_shape, eps, elementwise_affine, bias })
        }
        "adaptive_max_pool1d" => module(Op::AdaptiveMaxPool1d { output_size: keys.req("output_size", &uint(1))? }),
        "adaptive_max_pool2d" => {
            let s = keys.req("output_size", &dims(2, 1))?;
            module(Op::AdaptiveMaxPool2d { output_size: [s[0], s[1]] })
        }
        "group_norm" => {
            let num_groups = keys.req("num_groups", &uint(1))?;
            let num_channels = input_with_rank(keys, x, &[2, 3, 4], "[N, C], [N, C, L] or [N, C, H, W]")?[1];
            if num_channels % num_groups != 0 {
                return Err(keys.at().err("num_groups", format!("{num_groups} groups must divide the input's {num_channels} channels")));
            }
            let eps = keys.opt("eps", 1e-5, &float_in(f64::MIN_POSITIVE, 1.0))?;
            let affine = keys.opt("affine", true, &boolean)?;
            let bias = keys.opt("bias", true, &boolean)?;
            module(Op::GroupNorm { num_groups, num_channels, eps, affine, bias })
        }
        "einsum" => {
            let equation = keys
                .req("equation", &|v: &toml::Value| v.as_str().map(str::to_string).ok_or_else(|| format!("expected a string, got {v}")))?;
            mase_ir::Contraction::parse(&equation).map_err(|e| keys.at().err("equation", e))?;
            Ok((Op::Einsum { equation }, Call::Function("torch.functional.einsum")))
        }
        "scaled_dot_product_attention" => {
            let is_causal = keys.opt("is_causal", false, &boolean)?;
            let scale = keys.opt("scale", None, &|v: &toml::Value| float_in(f64::MIN_POSITIVE, f64::from(f32::MAX))(v).map(Some))?;
            let op = Op::ScaledDotProductAttention { mask: None, is_causal, scale };
            Ok((op, Call::Function("torch.nn.functional.scaled_dot_product_attention")))
        }
        "embedding" => {
            let num_embeddings = keys.req("num_embeddings", &uint(1))?;
            let embedding_dim = keys.req("embedding_dim", &uint(1))?;
            let padding_idx = keys.opt("padding_idx", None, &|v: &toml::Value| uint(0)(v).map(Some))?;
            if let Some(p) = padding_idx.filter(|&p| p >= num_embeddings) {
                return Err(keys.at().err("padding_idx", format!("{p} must be below num_embeddings = {num_embeddings}")));
            }
            module(Op::Embedding { num_embeddings, embedding_dim, padding_idx, functional: false })
        }
        other => Err(keys.at().err("op", format!("unknown op `{other}`; known ops: {}", op_names().join(", ")))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model-file name of an op: its `mase_op`, but `reshape` for `view`.
    fn layer_name(op: &Op) -> &'static str {
        match op {
            Op::Reshape { .. } => "reshape",
            other => other.mase_op(),
        }
    }

    #[test]
    fn every_op_is_a_layer_or_says_why_not() {
        let ops = Op::examples();
        for op in &ops {
            let (name, layer) = (op.mase_op(), layer_name(op));
            let skipped = NOT_IN_MODEL_FILES.iter().any(|(n, _)| *n == name);
            assert!(
                skipped != layer_entry(layer).is_some(),
                "op `{name}` must be either in LAYERS (as `{layer}`) or in NOT_IN_MODEL_FILES, not both or neither"
            );
        }
        for l in LAYERS {
            assert!(ops.iter().any(|op| layer_name(op) == l.name), "LAYERS names `{}`, which is no op", l.name);
        }
        for (n, _) in NOT_IN_MODEL_FILES {
            assert!(ops.iter().any(|op| op.mase_op() == *n), "NOT_IN_MODEL_FILES names `{n}`, which is no op");
        }
    }
}
