//! Fused epilogues against the unfused kernels: a convolution or linear layer followed by a batch
//! norm and/or a ReLU, run with [`Fusion::On`] and [`Fusion::Off`]. The fused evaluation
//! forward, and the training backward with the ReLU's gradient run inside the batch norm, must
//! give the same bits as the unfused path (including NaN and the infinities in the input), and
//! the same bits on one and two threads. Output quantizers of the chain's nodes run inside the
//! chain when their format quantizes each value on its own; other quantization ends the chain.

use mase_ir::{ConvSpec, Graph, NodeId, NodeQuant, NormSpec, Op, QuantFormat, Rng};
use mase_runtime::{init_params, ConvAlgo, ExecOptions, Executor, Fusion, Mode};

/// The layer that heads the chain.
#[derive(Clone, Copy, Debug)]
enum Layer {
    Conv2d { cin: usize, cout: usize, k: usize, pad: usize },
    Conv1d { cin: usize, cout: usize, k: usize },
    Linear { inf: usize, outf: usize },
}

/// What follows the layer.
#[derive(Clone, Copy, Debug)]
enum Tail {
    NormRelu,
    Relu,
    Norm,
    /// A batch norm whose output a ReLU and an addition both read (the norm is fused into the
    /// layer; the ReLU and the backward are not).
    NormShared,
    /// Nothing: the layer feeds the flatten (a chain only when it quantizes its output).
    Alone,
}

/// How the chain's nodes are quantized.
#[derive(Clone, Copy, Debug)]
enum Quant {
    None,
    /// The layer's input and weight (the chain still fuses).
    InputWeight,
    /// The layer's output, `integer` 8/4 (run in the chain, before the norm).
    Output,
    /// The layer's output, `mxint` in blocks of 4 (blocks span values: nothing fuses).
    OutputBlocks,
    /// The ReLU's output, `minifloat_ieee` 6/3 (infinities become NaN; run in the chain).
    ReluOutput,
    /// The norm's output `integer` 6/2 and the ReLU's `minifloat_ieee` 6/3 (both in the chain).
    NormReluOutputs,
    /// The norm's input (the chain ends before the norm: nothing fuses).
    NormInput,
}

#[derive(Clone, Copy, Debug)]
struct Case {
    layer: Layer,
    tail: Tail,
    bias: bool,
    algo: ConvAlgo,
    quant: Quant,
    /// Whether the evaluation forward is expected to skip the layer's own value.
    fused: bool,
}

/// The results of one executor, as bits.
#[derive(Debug, PartialEq)]
struct Outcome {
    eval: Vec<u32>,
    eval_non_finite: Vec<u32>,
    grads: Vec<(String, Vec<u32>)>,
    dx: Vec<u32>,
    /// Whether `value` answered for the layer after the evaluation batch.
    layer_value_kept: bool,
}

const BATCH: usize = 6;
const CLASSES: usize = 3;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

fn graph(c: &Case) -> (Graph, Vec<usize>, NodeId) {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let (op, shape, channels) = match c.layer {
        Layer::Conv2d { cin, cout, k, pad } => {
            let mut s = ConvSpec::new(2, cin, cout, k, 1, pad);
            s.bias = c.bias;
            (Op::Conv2d(s), vec![BATCH, cin, 6, 7], cout)
        }
        Layer::Conv1d { cin, cout, k } => {
            let mut s = ConvSpec::new(1, cin, cout, k, 1, 1);
            s.bias = c.bias;
            (Op::Conv1d(s), vec![BATCH, cin, 9], cout)
        }
        Layer::Linear { inf, outf } => (Op::Linear { in_features: inf, out_features: outf, bias: c.bias }, vec![BATCH, inf], outf),
    };
    let norm = |g: &mut Graph, at: NodeId| match c.layer {
        Layer::Conv2d { .. } => g.call_module("bn", Op::BatchNorm2d(NormSpec::new(channels)), &[at]),
        _ => g.call_module("bn", Op::BatchNorm1d(NormSpec::new(channels)), &[at]),
    };
    let layer = g.call_module("layer", op, &[x]);
    let tail = match c.tail {
        Tail::NormRelu => {
            let n = norm(&mut g, layer);
            g.call_module("relu", Op::Relu, &[n])
        }
        Tail::Relu => g.call_module("relu", Op::Relu, &[layer]),
        Tail::Norm => norm(&mut g, layer),
        Tail::NormShared => {
            let n = norm(&mut g, layer);
            let r = g.call_module("relu", Op::Relu, &[n]);
            g.call_function("add", Op::Add, &[r, n])
        }
        Tail::Alone => layer,
    };
    let flat = g.call_function("flatten", Op::Flatten { start_dim: 1, end_dim: -1 }, &[tail]);
    let features = match c.layer {
        Layer::Conv2d { k, pad, .. } => channels * (6 + 2 * pad + 1 - k) * (7 + 2 * pad + 1 - k),
        Layer::Conv1d { k, .. } => channels * (9 + 3 - k),
        Layer::Linear { .. } => channels,
    };
    let fc = g.call_module("fc", Op::Linear { in_features: features, out_features: CLASSES, bias: true }, &[flat]);
    g.output(fc);
    let f = QuantFormat::Integer { width: 8, frac_width: 4, signed: true };
    let minifloat = QuantFormat::MinifloatIeee { width: 6, exponent_width: 3, exponent_bias: None };
    let out = |fmt: QuantFormat| Some(NodeQuant { data_out: Some(fmt), ..Default::default() });
    let (on_layer, on_norm, on_relu) = match c.quant {
        Quant::None => (None, None, None),
        Quant::InputWeight => (Some(NodeQuant { data_in: vec![Some(f.clone())], weight: Some(f), ..Default::default() }), None, None),
        Quant::Output => (out(f), None, None),
        Quant::OutputBlocks => (out(QuantFormat::Mxint { width: 8, block_size: 4, block_dim: -1 }), None, None),
        Quant::ReluOutput => (None, None, out(minifloat)),
        Quant::NormReluOutputs => (None, out(QuantFormat::Integer { width: 6, frac_width: 2, signed: true }), out(minifloat)),
        Quant::NormInput => (None, Some(NodeQuant { data_in: vec![Some(f)], ..Default::default() }), None),
    };
    g.node_mut(layer).quant = on_layer;
    for (name, q) in [("bn", on_norm), ("relu", on_relu)] {
        if let Some(q) = q {
            let id = (0..g.len()).map(NodeId).find(|&n| g.node(n).name == name).expect("the case has the node it quantizes");
            g.node_mut(id).quant = Some(q);
        }
    }
    (g, shape, layer)
}

fn run(c: &Case, fusion: Fusion, threads: usize) -> Outcome {
    let (g, shape, layer) = graph(c);
    let mut rng = Rng::new(7);
    let mut params = init_params(&g, &mut rng);
    // Running statistics and affine parameters away from their initial values.
    for name in ["bn.running_mean", "bn.running_var", "bn.weight", "bn.bias"] {
        if let Some(t) = params.get_mut(name) {
            for v in &mut t.data {
                *v = if name.ends_with("var") { 0.5 + rng.uniform() } else { rng.normal() as f32 };
            }
        }
    }
    let mut exec = Executor::new(&g, &params, ExecOptions { threads, seed: 0 }).unwrap();
    exec.set_conv_algo(c.algo);
    exec.set_fusion(fusion);
    exec.set_keep_input_grad(true);
    let x: Vec<f32> = (0..shape.iter().product::<usize>()).map(|_| rng.normal() as f32).collect();
    let eval = bits(exec.infer(&x, &shape).unwrap());
    let layer_value_kept = exec.value(layer).is_some();
    let mut bad = x.clone();
    for (i, v) in [(1, f32::NAN), (17, f32::INFINITY), (40, f32::NEG_INFINITY)] {
        bad[i] = v;
    }
    let eval_non_finite = bits(exec.infer(&bad, &shape).unwrap());
    let labels: Vec<u32> = (0..BATCH as u32).map(|i| i % CLASSES as u32).collect();
    exec.loss_and_grad(&x, &shape, &labels).unwrap();
    let grads = exec.grads().into_iter().map(|(n, v)| (n, bits(&v))).collect();
    let dx = bits(exec.input_grad().unwrap());
    // A forward that keeps every value computes the layer's own.
    exec.forward(&x, &shape, Mode::Eval).unwrap();
    assert!(exec.value(layer).is_some(), "{c:?}: forward keeps every value");
    Outcome { eval, eval_non_finite, grads, dx, layer_value_kept }
}

fn check(c: Case) {
    let off = run(&c, Fusion::Off, 1);
    let on = run(&c, Fusion::On, 1);
    assert!(off.layer_value_kept, "{c:?}: unfused keeps the layer's value");
    assert_eq!(on.layer_value_kept, !c.fused, "{c:?}: did the chain fuse?");
    assert_eq!(on.eval, off.eval, "{c:?}: evaluation");
    assert_eq!(on.eval_non_finite, off.eval_non_finite, "{c:?}: evaluation with NaN and infinities");
    assert_eq!(on.grads, off.grads, "{c:?}: parameter gradients");
    assert_eq!(on.dx, off.dx, "{c:?}: input gradient");
    let two = run(&c, Fusion::On, 2);
    assert_eq!(two.eval, on.eval, "{c:?}: two threads, evaluation");
    assert_eq!(two.grads, on.grads, "{c:?}: two threads, gradients");
    assert_eq!(two.dx, on.dx, "{c:?}: two threads, input gradient");
    // The NaN reaches the output, as in PyTorch.
    assert!(on.eval_non_finite.iter().any(|&b| f32::from_bits(b).is_nan()), "{c:?}: NaN propagates");
}

#[test]
fn fused_epilogues_give_the_bits_of_the_unfused_kernels() {
    use ConvAlgo::{Exact, Fast, Winograd};
    use Layer::{Conv1d, Conv2d, Linear};
    use Tail::{Alone, Norm, NormRelu, NormShared, Relu};
    let c2 = |cin, cout, k, pad| Conv2d { cin, cout, k, pad };
    let case = |layer, tail, bias, algo, quant, fused| Case { layer, tail, bias, algo, quant, fused };
    let linear = Linear { inf: 10, outf: 7 };
    for c in [
        case(c2(3, 8, 3, 1), NormRelu, true, Exact, Quant::None, true),
        case(c2(3, 8, 3, 1), NormRelu, false, Exact, Quant::None, true),
        case(c2(4, 6, 3, 1), NormRelu, true, Winograd, Quant::None, true),
        case(c2(32, 32, 3, 1), NormRelu, false, Fast, Quant::None, true),
        case(c2(4, 6, 3, 1), Relu, true, Winograd, Quant::None, true),
        case(c2(5, 4, 1, 0), NormRelu, true, Fast, Quant::None, true),
        case(c2(3, 5, 3, 0), Relu, true, Exact, Quant::None, true),
        case(c2(3, 5, 3, 1), Norm, true, Exact, Quant::None, true),
        case(c2(3, 5, 3, 1), NormShared, true, Exact, Quant::None, true),
        case(c2(3, 5, 3, 1), NormRelu, true, Exact, Quant::InputWeight, true),
        case(c2(3, 5, 3, 1), NormRelu, true, Exact, Quant::Output, true),
        case(c2(4, 6, 3, 1), NormRelu, true, Winograd, Quant::Output, true),
        case(c2(32, 32, 3, 1), NormRelu, false, Fast, Quant::NormReluOutputs, true),
        case(c2(3, 5, 3, 1), Relu, true, Exact, Quant::ReluOutput, true),
        case(c2(3, 5, 3, 1), NormRelu, true, Exact, Quant::ReluOutput, true),
        case(c2(3, 5, 3, 1), Alone, true, Exact, Quant::Output, false),
        case(c2(3, 5, 3, 1), NormRelu, true, Exact, Quant::OutputBlocks, false),
        case(c2(3, 5, 3, 1), NormRelu, true, Exact, Quant::NormInput, false),
        case(Conv1d { cin: 3, cout: 4, k: 3 }, NormRelu, true, Fast, Quant::None, true),
        case(Conv1d { cin: 3, cout: 4, k: 3 }, NormRelu, true, Fast, Quant::NormReluOutputs, true),
        case(linear, NormRelu, true, Fast, Quant::None, true),
        case(linear, NormRelu, false, Fast, Quant::None, true),
        case(linear, Relu, true, Fast, Quant::None, true),
        case(linear, Norm, true, Fast, Quant::InputWeight, true),
        case(linear, NormRelu, true, Fast, Quant::Output, true),
        case(linear, NormRelu, true, Fast, Quant::NormReluOutputs, true),
        case(linear, Alone, true, Fast, Quant::Output, false),
        case(linear, NormRelu, true, Fast, Quant::OutputBlocks, false),
    ] {
        check(c);
    }
}
