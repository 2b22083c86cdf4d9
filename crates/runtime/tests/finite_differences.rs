//! Analytic gradients of every op against central finite differences.
//!
//! Each case is a tiny graph (usually one op) with random parameters. The loss is a random linear
//! functional `L = sum(R * y)` of the output, so `dL/dy = R` is fed to `Executor::backward`;
//! the numeric gradient of `L` (accumulated in f64) with respect to every input value and every
//! trainable parameter value is compared with the analytic one. Forward runs in training mode so
//! batch norm uses batch statistics; each numeric evaluation uses a fresh executor with the same
//! seed, so dropout draws the same mask every time.

mod common;

use mase_ir::{
    items_at, AttnMask, ConvSpec, DimArg, Graph, IndexItem, NodeId, NormSpec, Op, ParamStore, PoolSpec, ReduceSpec, Rng, SizeOp, Tensor,
};
use mase_runtime::{init_params, ExecOptions, Executor, Mode};

const OPTS: ExecOptions = ExecOptions { threads: 1, seed: 11 };
/// Finite-difference step.
const EPS: f32 = 5e-3;

/// How the input batch is drawn.
#[derive(Clone, Copy)]
enum Input {
    /// Normal values times a scale, pushed at least 0.05 away from the kinks 0, 6 and ±3 of the
    /// piecewise-linear activations (relu6, hardswish, hardsigmoid) so that no step of `EPS`
    /// crosses one.
    Normal(f32),
    /// Distinct values at least 0.05 apart in random order, so a max-pool window's maximum
    /// cannot change under a step of `EPS`.
    Distinct,
}

struct Case {
    name: String,
    graph: Graph,
    params: ParamStore,
    x_shape: Vec<usize>,
    input: Input,
}

/// `Conv{dims}d(cin, cout, k, stride, padding)`; dilation, groups and bias are set at the call.
fn conv(dims: usize, cin: usize, cout: usize, k: usize, stride: usize, pad: usize) -> ConvSpec {
    ConvSpec::new(dims, cin, cout, k, stride, pad)
}

fn pool(dims: usize, k: usize, s: usize, p: usize) -> PoolSpec {
    PoolSpec::window(vec![k; dims], vec![s; dims], vec![p; dims])
}

/// The window with `ceil_mode=True`.
fn ceil(p: PoolSpec) -> PoolSpec {
    PoolSpec { ceil_mode: true, ..p }
}

/// Random trainable parameters (weights away from PyTorch's init so batch-norm affine terms are
/// not trivially 1 and 0) for every module tensor, plus the given constants.
fn finish(name: &str, graph: Graph, x_shape: &[usize], consts: &[(&str, Vec<usize>)], input: Input) -> Case {
    let mut rng = Rng::new(name.bytes().map(u64::from).sum());
    let mut params = init_params(&graph, &mut rng);
    for (_, e) in params.iter_mut() {
        if e.trainable {
            e.tensor.data.iter_mut().for_each(|v| *v += 0.3 * rng.normal() as f32);
        }
    }
    for (c, shape) in consts {
        let n = shape.iter().product();
        params.insert(*c, Tensor::new(shape.clone(), (0..n).map(|_| rng.normal() as f32).collect()).unwrap(), true);
    }
    Case { name: name.to_string(), graph, params, x_shape: x_shape.to_vec(), input }
}

/// `x -> module(op) -> output`.
fn module(name: &str, op: Op, x_shape: &[usize]) -> Case {
    module_with(name, op, x_shape, Input::Normal(1.0))
}

fn module_with(name: &str, op: Op, x_shape: &[usize], input: Input) -> Case {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let y = g.call_module("m", op, &[x]);
    g.output(y);
    finish(name, g, x_shape, &[], input)
}

/// `x -> method/function(op) -> output`.
fn function(name: &str, op: Op, x_shape: &[usize]) -> Case {
    function_with(name, op, x_shape, Input::Normal(1.0))
}

fn function_with(name: &str, op: Op, x_shape: &[usize], input: Input) -> Case {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let y = g.call_function(&format!("torch.{}", op.mase_op()), op, &[x]);
    g.output(y);
    finish(name, g, x_shape, &[], input)
}

/// `op(x, c)` (or `op(c, x)`) with a trainable constant `c` read by `get_attr`.
fn with_const(name: &str, op: Op, x_shape: &[usize], c_shape: &[usize], const_first: bool) -> Case {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let c = g.get_attr("c");
    let ins = if const_first { [c, x] } else { [x, c] };
    let y = g.call_function(&format!("operator.{}", op.mase_op()), op, &ins);
    g.output(y);
    finish(name, g, x_shape, &[("c", c_shape.to_vec())], Input::Normal(1.0))
}

/// A graph built by `f` from the input node.
fn custom(name: &str, x_shape: &[usize], consts: &[(&str, Vec<usize>)], f: impl FnOnce(&mut Graph, NodeId) -> NodeId) -> Case {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let y = f(&mut g, x);
    g.output(y);
    finish(name, g, x_shape, consts, Input::Normal(1.0))
}

fn draw_input(input: Input, n: usize, rng: &mut Rng) -> Vec<f32> {
    match input {
        Input::Normal(scale) => (0..n)
            .map(|_| {
                let mut v = rng.normal() as f32 * scale;
                for kink in [0.0f32, 6.0, -3.0, 3.0] {
                    if (v - kink).abs() < 0.05 {
                        v = kink + 0.05f32.copysign(v - kink);
                    }
                }
                v
            })
            .collect(),
        Input::Distinct => {
            let mut v: Vec<f32> = (0..n).map(|i| (i as f32 - n as f32 / 2.0) * 0.05).collect();
            rng.shuffle(&mut v);
            v
        }
    }
}

/// `sum(r * forward_train(x))` in f64 with a fresh executor.
fn functional(case: &Case, params: &ParamStore, x: &[f32], r: &[f32]) -> f64 {
    let mut exec = Executor::new(&case.graph, params, OPTS).unwrap();
    let y = exec.forward(x, &case.x_shape, Mode::Train).unwrap();
    y.iter().zip(r).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum()
}

/// Asserts that `analytic` matches `numeric` within 2% of each value plus 0.5% of the largest.
fn assert_close(case: &str, what: &str, analytic: &[f32], numeric: &[f64]) {
    let scale = numeric.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-3);
    for (i, (a, n)) in analytic.iter().zip(numeric).enumerate() {
        let tol = 2e-2 * n.abs() + 5e-3 * scale;
        assert!((f64::from(*a) - n).abs() <= tol, "{case}: d/d {what}[{i}]: analytic {a}, numeric {n} (tolerance {tol:.2e})");
    }
}

fn check(case: &Case) {
    let mut rng = Rng::new(7);
    let n: usize = case.x_shape.iter().product();
    let x = draw_input(case.input, n, &mut rng);
    let mut exec = Executor::new(&case.graph, &case.params, OPTS).unwrap();
    exec.set_keep_input_grad(true);
    let out_len = exec.forward(&x, &case.x_shape, Mode::Train).unwrap().len();
    let r: Vec<f32> = (0..out_len).map(|_| rng.normal() as f32).collect();
    exec.backward(&r).unwrap();
    let dx = exec.input_grad().expect("input gradient was requested").to_vec();
    // Central difference of the functional; `at(e)` gives the parameters and input moved by `e`.
    let central = |at: &dyn Fn(f32) -> (ParamStore, Vec<f32>)| -> f64 {
        let (p1, x1) = at(EPS);
        let (p2, x2) = at(-EPS);
        (functional(case, &p1, &x1, &r) - functional(case, &p2, &x2, &r)) / (2.0 * f64::from(EPS))
    };
    let numeric_dx: Vec<f64> = (0..n)
        .map(|i| {
            central(&|e| {
                let mut xe = x.clone();
                xe[i] += e;
                (case.params.clone(), xe)
            })
        })
        .collect();
    assert_close(&case.name, "x", &dx, &numeric_dx);
    let grads = exec.grads();
    assert!(!grads.is_empty() || case.params.trainable_count() == 0);
    for (name, g) in grads {
        let numeric: Vec<f64> = (0..g.len())
            .map(|i| {
                central(&|e| {
                    let mut p = case.params.clone();
                    p.get_mut(&name).unwrap().data[i] += e;
                    (p, x.clone())
                })
            })
            .collect();
        assert_close(&case.name, &name, &g, &numeric);
    }
}

#[test]
fn layers_with_parameters() {
    let lin = |i, o, bias| Op::Linear { in_features: i, out_features: o, bias };
    let bn = |c| NormSpec::new(c);
    let cases = vec![
        module("linear", lin(5, 4, true), &[3, 5]),
        module("linear on [N, L, F] without bias", lin(5, 3, false), &[2, 3, 5]),
        module("conv2d 3x3 pad 1", Op::Conv2d(conv(2, 3, 4, 3, 1, 1)), &[2, 3, 5, 5]),
        module(
            "conv2d stride 2 pad 1 dilation 2 groups 2",
            Op::Conv2d(ConvSpec { dilation: vec![2, 2], groups: 2, ..conv(2, 4, 6, 3, 2, 1) }),
            &[2, 4, 7, 7],
        ),
        module("conv2d 1x1 groups 2 no bias", Op::Conv2d(ConvSpec { groups: 2, bias: false, ..conv(2, 4, 6, 1, 1, 0) }), &[2, 4, 3, 3]),
        module("conv2d stride 3 no pad", Op::Conv2d(conv(2, 2, 3, 2, 3, 0)), &[2, 2, 7, 8]),
        // ConvNeXt's depthwise 7x7 (padding 3) on its last 2x2 maps: some kernel columns only
        // ever read padding.
        module("conv2d 7x7 pad 3 depthwise on a 2x2 input", Op::Conv2d(ConvSpec { groups: 2, ..conv(2, 2, 2, 7, 1, 3) }), &[2, 2, 2, 2]),
        module("conv1d k3 stride 2 pad 1", Op::Conv1d(conv(1, 3, 4, 3, 2, 1)), &[2, 3, 9]),
        module(
            "conv1d groups 3 dilation 2 no bias",
            Op::Conv1d(ConvSpec { dilation: vec![2], groups: 3, bias: false, ..conv(1, 3, 6, 3, 1, 2) }),
            &[2, 3, 8],
        ),
        module("batch_norm1d [N, C]", Op::BatchNorm1d(bn(4)), &[6, 4]),
        module("batch_norm1d [N, C, L]", Op::BatchNorm1d(bn(3)), &[4, 3, 5]),
        module("batch_norm2d", Op::BatchNorm2d(bn(2)), &[3, 2, 3, 3]),
        module("batch_norm1d without affine", Op::BatchNorm1d(NormSpec { affine: false, ..bn(4) }), &[5, 4]),
    ];
    cases.iter().for_each(check);
}

/// `LayerNorm(shape, eps, elementwise_affine, bias)`.
fn layer_norm(shape: &[usize], affine: bool, bias: bool) -> Op {
    Op::LayerNorm { normalized_shape: shape.to_vec(), eps: 1e-5, elementwise_affine: affine, bias }
}

/// `GroupNorm(groups, channels, eps, affine, bias)`.
fn group_norm(groups: usize, channels: usize, affine: bool, bias: bool) -> Op {
    Op::GroupNorm { num_groups: groups, num_channels: channels, eps: 1e-5, affine, bias }
}

/// `F.<name>(x, ..., w, b)` with trainable weight and bias constants of shape `affine`.
fn norm_function(name: &str, op: Op, x_shape: &[usize], affine: &[usize], with_bias: bool) -> Case {
    let consts: Vec<(&str, Vec<usize>)> =
        if with_bias { vec![("w", affine.to_vec()), ("b", affine.to_vec())] } else { vec![("w", affine.to_vec())] };
    let target = format!("torch.nn.functional.{}", op.mase_op());
    custom(name, x_shape, &consts, |g, x| {
        let mut ins = vec![x, g.get_attr("w")];
        if with_bias {
            ins.push(g.get_attr("b"));
        }
        g.call_function(&target, op, &ins)
    })
}

#[test]
fn layer_and_group_norms() {
    let cases = vec![
        module("layer_norm [N, F]", layer_norm(&[5], true, true), &[3, 5]),
        module("layer_norm over two trailing dims", layer_norm(&[3, 4], true, true), &[2, 3, 4]),
        module("layer_norm without bias", layer_norm(&[4], true, false), &[2, 3, 4]),
        module("layer_norm without affine", layer_norm(&[6], false, false), &[3, 6]),
        norm_function("F.layer_norm(x, (4,), w, b)", layer_norm(&[4], false, false), &[2, 3, 4], &[4], true),
        norm_function("F.layer_norm(x, (3, 4), w)", layer_norm(&[3, 4], false, false), &[2, 3, 4], &[3, 4], false),
        module("group_norm [N, C, H, W]", group_norm(2, 4, true, true), &[2, 4, 3, 3]),
        module("group_norm [N, C, L] one group per channel", group_norm(3, 3, true, true), &[2, 3, 5]),
        module("group_norm [N, C] one group", group_norm(1, 6, true, false), &[3, 6]),
        module("group_norm without affine", group_norm(2, 6, false, false), &[2, 6, 4]),
        norm_function("F.group_norm(x, 2, w, b)", group_norm(2, 4, false, false), &[2, 4, 3], &[4], true),
    ];
    cases.iter().for_each(check);
}

#[test]
fn activations_and_softmax() {
    let cases = vec![
        module("relu", Op::Relu, &[3, 7]),
        module_with("relu6", Op::Relu6, &[3, 7], Input::Normal(4.0)),
        module("leaky_relu", Op::LeakyRelu { negative_slope: 0.1 }, &[3, 7]),
        module("sigmoid", Op::Sigmoid, &[3, 7]),
        module("tanh", Op::Tanh, &[3, 7]),
        module("selu", Op::Selu, &[3, 7]),
        module_with("gelu (erf)", Op::Gelu { tanh: false }, &[3, 7], Input::Normal(2.0)),
        module_with("gelu (tanh)", Op::Gelu { tanh: true }, &[3, 7], Input::Normal(2.0)),
        module("softmax dim 1", Op::Softmax { dim: 1 }, &[3, 5]),
        module("softmax dim 0", Op::Softmax { dim: 0 }, &[3, 5]),
        module("softmax dim -1 of rank 3", Op::Softmax { dim: -1 }, &[2, 3, 4]),
        module("log_softmax dim 1", Op::LogSoftmax { dim: 1 }, &[3, 5]),
        module("log_softmax middle dim", Op::LogSoftmax { dim: 1 }, &[2, 3, 4]),
        module("dropout", Op::Dropout { p: 0.3 }, &[4, 6]),
        module("stochastic_depth row", Op::StochasticDepth { p: 0.4, mode: mase_ir::DepthMode::Row }, &[6, 2, 3]),
        module("stochastic_depth batch", Op::StochasticDepth { p: 0.4, mode: mase_ir::DepthMode::Batch }, &[6, 2, 3]),
        custom("sqrt(sigmoid(x))", &[3, 7], &[], |g, x| {
            let s = g.call_function("torch.sigmoid", Op::Sigmoid, &[x]);
            g.call_function("torch.sqrt", Op::Sqrt, &[s])
        }),
        module("silu", Op::Silu, &[3, 7]),
        module_with("hardswish", Op::Hardswish, &[3, 7], Input::Normal(3.0)),
        module_with("hardsigmoid", Op::Hardsigmoid, &[3, 7], Input::Normal(3.0)),
        module_with("softplus", Op::Softplus { beta: 1.0, threshold: 20.0 }, &[3, 7], Input::Normal(3.0)),
        module_with("softplus beta 2 threshold 1 (both sides)", Op::Softplus { beta: 2.0, threshold: 1.0 }, &[3, 7], Input::Normal(2.0)),
        module_with("mish", Op::Mish, &[3, 7], Input::Normal(2.0)),
        function("clamp(x, 0, 6)", Op::Clip { min: 0.0, max: 6.0 }, &[3, 7]),
        function("clamp(x, -1, 1) on a wide input", Op::Clip { min: -1.0, max: 1.0 }, &[3, 7]),
    ];
    cases.iter().for_each(check);
}

#[test]
fn pools() {
    let cases = [
        module_with("max_pool2d k2", Op::MaxPool2d(pool(2, 2, 2, 0)), &[2, 2, 4, 4], Input::Distinct),
        module_with("max_pool2d k3 s2 p1 (overlapping)", Op::MaxPool2d(pool(2, 3, 2, 1)), &[1, 2, 5, 5], Input::Distinct),
        module_with("max_pool1d k3 s2 p1", Op::MaxPool1d(pool(1, 3, 2, 1)), &[2, 3, 8], Input::Distinct),
        module("avg_pool2d k3 s2 p1", Op::AvgPool2d(pool(2, 3, 2, 1)), &[1, 2, 5, 5]),
        module("avg_pool1d k2 p1", Op::AvgPool1d(pool(1, 2, 2, 1)), &[2, 3, 6]),
        module_with(
            "max_pool2d k3 s2 ceil_mode (partial last window)",
            Op::MaxPool2d(ceil(pool(2, 3, 2, 0))),
            &[1, 2, 6, 6],
            Input::Distinct,
        ),
        module_with("max_pool1d k2 s2 p1 ceil_mode", Op::MaxPool1d(ceil(pool(1, 2, 2, 1))), &[2, 2, 6], Input::Distinct),
        module("avg_pool2d k3 s2 ceil_mode", Op::AvgPool2d(ceil(pool(2, 3, 2, 0))), &[1, 2, 6, 7]),
        module(
            "avg_pool2d k3 s2 p1 count_include_pad=False",
            Op::AvgPool2d(PoolSpec { count_include_pad: false, ..pool(2, 3, 2, 1) }),
            &[1, 2, 5, 5],
        ),
        module(
            "avg_pool1d k3 s2 p1 ceil_mode count_include_pad=False",
            Op::AvgPool1d(PoolSpec { count_include_pad: false, ..ceil(pool(1, 3, 2, 1)) }),
            &[2, 2, 6],
        ),
        module("adaptive_avg_pool2d 5x7 -> 3x2", Op::AdaptiveAvgPool2d { output_size: [3, 2] }, &[2, 3, 5, 7]),
        module("adaptive_avg_pool1d 7 -> 3", Op::AdaptiveAvgPool1d { output_size: 3 }, &[2, 3, 7]),
        module_with(
            "adaptive_max_pool2d 5x7 -> 3x2 (overlapping)",
            Op::AdaptiveMaxPool2d { output_size: [3, 2] },
            &[2, 3, 5, 7],
            Input::Distinct,
        ),
        module_with("adaptive_max_pool1d 7 -> 4", Op::AdaptiveMaxPool1d { output_size: 4 }, &[2, 3, 7], Input::Distinct),
    ];
    cases.iter().for_each(check);
}

#[test]
fn reductions() {
    let r = ReduceSpec::new;
    let cases = [
        function("mean over (2, 3)", Op::Mean(r(&[2, 3], false)), &[2, 3, 4, 5]),
        function("mean dim -1 keepdim", Op::Mean(r(&[-1], true)), &[2, 3, 4]),
        function("mean of every element", Op::Mean(r(&[], false)), &[3, 4]),
        function("sum dim 1", Op::Sum(r(&[1], false)), &[2, 3, 4]),
        function("sum over (0, 2) keepdim", Op::Sum(r(&[0, 2], true)), &[2, 3, 4]),
        function("sum of every element", Op::Sum(r(&[], false)), &[2, 3]),
        function_with("amax dim -1", Op::Amax(r(&[-1], false)), &[2, 3, 4], Input::Distinct),
        function_with("amax over (1, 2) keepdim", Op::Amax(r(&[1, 2], true)), &[2, 3, 4], Input::Distinct),
        custom("sum(relu(x), 1) read twice", &[3, 4], &[], |g, x| {
            let a = g.call_function("torch.relu", Op::Relu, &[x]);
            let s = g.call_method("sum", Op::Sum(r(&[1], true)), &[a]);
            g.call_function("operator.mul", Op::Mul, &[s, x])
        }),
    ];
    cases.iter().for_each(check);
}

#[test]
fn shape_ops() {
    let cases = [
        function("flatten", Op::Flatten { start_dim: 1, end_dim: -1 }, &[2, 3, 2, 2]),
        function("transpose", Op::Transpose { dim0: 1, dim1: 2 }, &[2, 3, 4]),
        function("permute", Op::Permute { dims: vec![2, 0, 1] }, &[2, 3, 4]),
        function("pad trailing two dims", Op::Pad { begin: vec![1, 0], end: vec![2, 1], value: 0.5 }, &[2, 3, 2, 2]),
        function("pad last dim", Op::Pad { begin: vec![0], end: vec![3], value: 0.0 }, &[2, 3, 4]),
        custom("cat([x, c, relu(x)], dim 1)", &[2, 3, 2], &[("c", vec![2, 1, 2])], |g, x| {
            let c = g.get_attr("c");
            let r = g.call_function("torch.relu", Op::Relu, &[x]);
            g.call_function("torch.cat", Op::Concat { dim: 1 }, &[x, c, r])
        }),
        custom("cat([x, x], dim -1)", &[2, 3], &[], |g, x| g.call_function("torch.cat", Op::Concat { dim: -1 }, &[x, x])),
        custom("view(x.size(0), -1)", &[2, 3, 4], &[], |g, x| {
            let n = g.call_method("size", Op::Size { dim: 0 }, &[x]);
            g.call_method("view", Op::Reshape { shape: vec![DimArg::Input(1), DimArg::Const(-1)] }, &[x, n])
        }),
        // A reshape feeding a layer: the reshaped value shares its buffer with the input.
        custom("flatten then linear", &[2, 2, 3], &[], |g, x| {
            let f = g.call_method("flatten", Op::Flatten { start_dim: 1, end_dim: -1 }, &[x]);
            g.call_module("fc", Op::Linear { in_features: 6, out_features: 2, bias: true }, &[f])
        }),
    ];
    cases.iter().for_each(check);
}

/// `x.size(d)` as a node.
fn size(g: &mut Graph, x: NodeId, dim: i64) -> NodeId {
    g.call_method("size", Op::Size { dim }, &[x])
}

fn index(g: &mut Graph, x: NodeId, items: Vec<IndexItem>) -> NodeId {
    g.call_function("operator.getitem", Op::Index { items }, &[x])
}

fn slice(start: Option<i64>, end: Option<i64>, step: usize) -> IndexItem {
    IndexItem::Slice { start, end, step }
}

#[test]
fn indexing_expand_repeat_stack() {
    use IndexItem::{Chunk, Ellipsis, NewAxis, Select};
    let full = IndexItem::full;
    let cases = [
        function("x[:, 0]", Op::Index { items: vec![full(), Select(0)] }, &[2, 3, 4]),
        function("x[..., 1::2, None]", Op::Index { items: vec![Ellipsis, slice(Some(1), None, 2), NewAxis] }, &[2, 3, 5]),
        function("x[:, -3:-1, ::3]", Op::Index { items: vec![full(), slice(Some(-3), Some(-1), 1), slice(None, None, 3)] }, &[2, 4, 7]),
        function("unbind(x, -1)[2]", Op::Index { items: items_at(-1, Select(2)) }, &[2, 3, 4]),
        // Both pieces of one chunk read the same input: their gradients meet in one buffer.
        custom("cat(chunk(x, 2, 1)[1], relu(chunk(x, 2, 1)[0]))", &[2, 5, 2], &[], |g, x| {
            let a = index(g, x, items_at(1, Chunk { chunks: 2, index: 0 }));
            let b = index(g, x, items_at(1, Chunk { chunks: 2, index: 1 }));
            let r = g.call_function("torch.relu", Op::Relu, &[a]);
            g.call_function("torch.cat", Op::Concat { dim: 1 }, &[b, r])
        }),
        function(
            "expand [3,1,2] to (2, 3, 4, 2)",
            Op::Expand { shape: vec![DimArg::Const(2), DimArg::Const(-1), DimArg::Const(4), DimArg::Const(-1)] },
            &[3, 1, 2],
        ),
        // ViT's class token: a trainable [1, 1, 4] expanded to the batch and put before x.
        custom("cat([c.expand(x.size(0), -1, -1), x], 1)", &[2, 3, 4], &[("c", vec![1, 1, 4])], |g, x| {
            let c = g.get_attr("c");
            let n = size(g, x, 0);
            let shape = vec![DimArg::Input(1), DimArg::Const(-1), DimArg::Const(-1)];
            let e = g.call_method("expand", Op::Expand { shape }, &[c, n]);
            g.call_function("torch.cat", Op::Concat { dim: 1 }, &[e, x])
        }),
        function("repeat(2, 1, 3)", Op::Repeat { repeats: vec![2, 1, 3] }, &[2, 3]),
        function("repeat(1, 2, 1, 2)", Op::Repeat { repeats: vec![1, 2, 1, 2] }, &[2, 3, 2]),
        custom("stack([x, relu(x)], -1)", &[2, 3], &[], |g, x| {
            let r = g.call_function("torch.relu", Op::Relu, &[x]);
            g.call_function("torch.stack", Op::Stack { dim: -1 }, &[x, r])
        }),
        custom("stack([x, x, x], 1)", &[2, 3], &[], |g, x| g.call_function("torch.stack", Op::Stack { dim: 1 }, &[x, x, x])),
        // shufflenet's channel shuffle: view(n, 2, c // 2, h, w), transpose(1, 2), view(n, c, h, w).
        custom("channel shuffle", &[2, 4, 2, 3], &[], |g, x| {
            let [n, c, h, w] = [0, 1, 2, 3].map(|d| size(g, x, d));
            let half = g.call_function(
                "operator.floordiv",
                Op::SizeArith { arith: SizeOp::FloorDiv, args: [DimArg::Input(0), DimArg::Const(2)] },
                &[c],
            );
            let dims = |ks: &[usize]| ks.iter().map(|&k| DimArg::Input(k)).collect::<Vec<_>>();
            let mut five = dims(&[1, 2, 3, 4]);
            five.insert(1, DimArg::Const(2));
            let v = g.call_method("view", Op::Reshape { shape: five }, &[x, n, half, h, w]);
            let t = g.call_function("torch.transpose", Op::Transpose { dim0: 1, dim1: 2 }, &[v]);
            g.call_method("view", Op::Reshape { shape: dims(&[1, 2, 3, 4]) }, &[t, n, c, h, w])
        }),
    ];
    cases.iter().for_each(check);
}

#[test]
fn broadcasting_elementwise_and_matmul() {
    let cases = vec![
        with_const("add [2,3,4] + [3,1]", Op::Add, &[2, 3, 4], &[3, 1], false),
        with_const("add same shape", Op::Add, &[2, 3], &[2, 3], false),
        with_const("sub [2,1,4] - x[2,3,4]", Op::Sub, &[2, 3, 4], &[2, 1, 4], true),
        with_const("sub x - [4]", Op::Sub, &[2, 3, 4], &[4], false),
        with_const("mul [2,3,4] * [4]", Op::Mul, &[2, 3, 4], &[4], false),
        with_const("mul both broadcast [2,1,4] * [3,1]", Op::Mul, &[2, 1, 4], &[3, 1], false),
        with_const("matmul batched [2,3,4] @ [2,4,2]", Op::MatMul, &[2, 3, 4], &[2, 4, 2], false),
        with_const("matmul broadcast [3,4] @ [2,4,5]", Op::MatMul, &[3, 4], &[2, 4, 5], false),
        with_const("matmul broadcast [2,4,3] @ [3,2]", Op::MatMul, &[2, 4, 3], &[3, 2], false),
        custom("div x / sigmoid(c)", &[2, 3, 4], &[("c", vec![3, 1])], |g, x| {
            let c = g.get_attr("c");
            let s = g.call_function("torch.sigmoid", Op::Sigmoid, &[c]);
            g.call_function("torch.div", Op::Div, &[x, s])
        }),
        custom("div c / sigmoid(x)", &[2, 3], &[("c", vec![3])], |g, x| {
            let c = g.get_attr("c");
            let s = g.call_function("torch.sigmoid", Op::Sigmoid, &[x]);
            g.call_function("torch.div", Op::Div, &[c, s])
        }),
        custom("pow(sigmoid(x), c)", &[2, 3], &[("c", vec![1, 3])], |g, x| {
            let c = g.get_attr("c");
            let s = g.call_function("torch.sigmoid", Op::Sigmoid, &[x]);
            g.call_function("torch.pow", Op::Pow, &[s, c])
        }),
        custom("mul x * x (one value, two inputs)", &[3, 4], &[], |g, x| g.call_function("operator.mul", Op::Mul, &[x, x])),
        custom("x @ x^T", &[2, 3, 4], &[], |g, x| {
            let t = g.call_method("transpose", Op::Transpose { dim0: 1, dim1: 2 }, &[x]);
            g.call_function("torch.matmul", Op::MatMul, &[x, t])
        }),
        custom("residual relu(linear(x)) + x", &[3, 4], &[], |g, x| {
            let fc = g.call_module("fc", Op::Linear { in_features: 4, out_features: 4, bias: true }, &[x]);
            let r = g.call_function("torch.nn.functional.relu", Op::Relu, &[fc]);
            g.call_function("operator.add", Op::Add, &[r, x])
        }),
        custom("shared module called twice", &[3, 4], &[], |g, x| {
            let a = g.call_module("fc", Op::Linear { in_features: 4, out_features: 4, bias: true }, &[x]);
            let t = g.call_function("torch.tanh", Op::Tanh, &[a]);
            g.call_module("fc", Op::Linear { in_features: 4, out_features: 4, bias: true }, &[t])
        }),
    ];
    cases.iter().for_each(check);
}

#[test]
fn einsum_attention_and_embedding() {
    let einsum = |eq: &str| Op::Einsum { equation: eq.into() };
    let sdpa = |mask, is_causal, scale| Op::ScaledDotProductAttention { mask, is_causal, scale };
    // Query, key, value (and mask) as constants beside the input.
    let attention = |name: &str, x: &[usize], k: &[usize], v: &[usize], mask: Option<(AttnMask, Vec<usize>)>, causal: bool| {
        let mut consts = vec![("k", k.to_vec()), ("v", v.to_vec())];
        if let Some((_, m)) = &mask {
            consts.push(("m", m.clone()));
        }
        let kind = mask.as_ref().map(|(k, _)| *k);
        custom(name, x, &consts, |g, x| {
            let mut ins = vec![x, g.get_attr("k"), g.get_attr("v")];
            if kind.is_some() {
                ins.push(g.get_attr("m"));
            }
            g.call_function("torch.nn.functional.scaled_dot_product_attention", sdpa(kind, causal, None), &ins)
        })
    };
    let cases = vec![
        with_const("einsum bhqd,bhkd->bhqk", einsum("bhqd,bhkd->bhqk"), &[2, 2, 3, 4], &[2, 2, 5, 4], false),
        with_const("einsum bhqk,bhkd->bhqd", einsum("bhqk,bhkd->bhqd"), &[2, 2, 3, 5], &[2, 2, 5, 4], false),
        with_const("einsum kd,bqd->bkq (constant first)", einsum("kd,bqd->bkq"), &[2, 3, 4], &[5, 4], true),
        custom("einsum bqd,bkd->bqk of x with itself", &[2, 3, 4], &[], |g, x| {
            g.call_function("torch.functional.einsum", einsum("bqd,bkd->bqk"), &[x, x])
        }),
        attention("sdpa", &[2, 2, 3, 4], &[2, 2, 5, 4], &[2, 2, 5, 3], None, false),
        attention("sdpa causal", &[2, 4, 4], &[2, 4, 4], &[2, 4, 3], None, true),
        attention("sdpa float mask [3,5]", &[2, 3, 4], &[2, 5, 4], &[2, 5, 2], Some((AttnMask::Additive, vec![3, 5])), false),
        custom("sdpa self-attention of x", &[2, 4, 3], &[], |g, x| {
            g.call_function("torch.nn.functional.scaled_dot_product_attention", sdpa(None, false, Some(0.7)), &[x, x, x])
        }),
        {
            // The ids are a frozen constant of whole numbers (a step of EPS would make them invalid).
            // No padding row: PyTorch gives it no gradient although the forward reads it, which
            // finite differences would see (tests/attention.rs checks that rule against PyTorch).
            let emb = Op::Embedding { num_embeddings: 5, embedding_dim: 4, padding_idx: None, functional: true };
            let mut case = custom("embedding(ids, w) * x", &[2, 3, 4], &[("ids", vec![2, 3]), ("w", vec![5, 4])], |g, x| {
                let (ids, w) = (g.get_attr("ids"), g.get_attr("w"));
                let e = g.call_function("torch.nn.functional.embedding", emb, &[ids, w]);
                g.call_function("operator.mul", Op::Mul, &[e, x])
            });
            case.params.insert("ids", Tensor::new(vec![2, 3], vec![0.0, 2.0, 4.0, 2.0, 1.0, 0.0]).unwrap(), false);
            case
        },
    ];
    cases.iter().for_each(check);
}

#[test]
fn cross_entropy_loss_gradient() {
    // loss_and_grad's own loss: mean cross-entropy after a linear layer and a batch norm.
    let case = custom("cross-entropy", &[6, 5], &[], |g, x| {
        let fc = g.call_module("fc", Op::Linear { in_features: 5, out_features: 4, bias: true }, &[x]);
        g.call_module("bn", Op::BatchNorm1d(NormSpec::new(4)), &[fc])
    });
    let labels = [0u32, 3, 1, 2, 3, 1];
    let mut rng = Rng::new(5);
    let x = draw_input(Input::Normal(1.0), 30, &mut rng);
    let mut exec = Executor::new(&case.graph, &case.params, OPTS).unwrap();
    exec.set_keep_input_grad(true);
    exec.loss_and_grad(&x, &case.x_shape, &labels).unwrap();
    let dx = exec.input_grad().unwrap().to_vec();
    let loss = |p: &ParamStore, x: &[f32]| -> f64 {
        let mut e = Executor::new(&case.graph, p, OPTS).unwrap();
        f64::from(e.loss_and_grad(x, &case.x_shape, &labels).unwrap().loss)
    };
    let eps = 1e-2f32;
    let numeric: Vec<f64> = (0..x.len())
        .map(|i| {
            let (mut a, mut b) = (x.clone(), x.clone());
            a[i] += eps;
            b[i] -= eps;
            (loss(&case.params, &a) - loss(&case.params, &b)) / (2.0 * f64::from(eps))
        })
        .collect();
    assert_close("cross-entropy", "x", &dx, &numeric);
    for (name, g) in exec.grads() {
        let numeric: Vec<f64> = (0..g.len())
            .map(|i| {
                let (mut a, mut b) = (case.params.clone(), case.params.clone());
                a.get_mut(&name).unwrap().data[i] += eps;
                b.get_mut(&name).unwrap().data[i] -= eps;
                (loss(&a, &x) - loss(&b, &x)) / (2.0 * f64::from(eps))
            })
            .collect();
        assert_close("cross-entropy", &name, &g, &numeric);
    }
}

/// Comparisons pass no gradient (their value is a step); `where` passes the output gradient to
/// the value it chose, summed over the dimensions that value was broadcast along.
#[test]
fn comparisons_and_where() {
    let cmp = |g: &mut Graph, op: Op, a, b| g.call_function(&format!("operator.{}", op.mase_op()), op, &[a, b]);
    let cases = [
        custom("where(x > c, x, c * x), c [4]", &[2, 3, 4], &[("c", vec![4])], |g, x| {
            let c = g.get_attr("c");
            let gt = cmp(g, Op::Gt, x, c);
            let m = g.call_function("operator.mul", Op::Mul, &[c, x]);
            g.call_function("torch.where", Op::Where, &[gt, x, m])
        }),
        custom("where(c > z, x, c): condition and b broadcast [3,1]", &[2, 3, 4], &[("c", vec![3, 1]), ("z", vec![])], |g, x| {
            let (c, z) = (g.get_attr("c"), g.get_attr("z"));
            let gt = cmp(g, Op::Gt, c, z);
            g.call_function("torch.where", Op::Where, &[gt, x, c])
        }),
        custom("where(x <= 0, c, tanh(x)): a broadcast [4]", &[3, 4], &[("c", vec![4]), ("z", vec![])], |g, x| {
            let (c, z) = (g.get_attr("c"), g.get_attr("z"));
            let le = cmp(g, Op::Le, x, z);
            let t = g.call_function("torch.tanh", Op::Tanh, &[x]);
            g.call_function("torch.where", Op::Where, &[le, c, t])
        }),
        custom("x * (x == c) + x * (x != c) + x * (x < c) + (x >= c) * c", &[2, 5], &[("c", vec![5])], |g, x| {
            let c = g.get_attr("c");
            let mut acc = None;
            for op in [Op::Eq, Op::Ne, Op::Lt] {
                let k = cmp(g, op, x, c);
                let term = g.call_function("operator.mul", Op::Mul, &[x, k]);
                acc = Some(match acc {
                    None => term,
                    Some(a) => g.call_function("operator.add", Op::Add, &[a, term]),
                });
            }
            let ge = cmp(g, Op::Ge, x, c);
            let term = g.call_function("operator.mul", Op::Mul, &[ge, c]);
            g.call_function("operator.add", Op::Add, &[acc.expect("three terms"), term])
        }),
    ];
    cases.iter().for_each(check);
}
