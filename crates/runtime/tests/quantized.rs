//! Fake quantization in the executor: quantized operands in forward, the straight-through
//! estimator in backward, weights quantized once per parameter change, and clear errors.

mod common;

use common::{jsc_toy, quantize_linears, with_quant};
use mase_ir::{Graph, NodeQuant, Op, ParamStore, QuantFormat, Rng, Tensor};
use mase_runtime::{init_params, ExecOptions, Executor, Mode, Optimizer, OptimizerKind, RuntimeError};

const Q84: QuantFormat = QuantFormat::Integer { width: 8, frac_width: 4, signed: true };

fn opts() -> ExecOptions {
    ExecOptions { threads: 1, seed: 0 }
}

fn q(fmt: &QuantFormat, x: &[f32], shape: &[usize]) -> Vec<f32> {
    let mut out = vec![0.0; x.len()];
    mase_quant::quantize(fmt, x, shape, &mut out, &mut Rng::new(0)).expect("valid format");
    out
}

/// x -> Linear(4 -> 3) -> output, optionally followed by a sigmoid.
fn linear_net(sigmoid: bool) -> Graph {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let mut v = g.call_module("fc", Op::Linear { in_features: 4, out_features: 3, bias: true }, &[x]);
    if sigmoid {
        v = g.call_module("act", Op::Sigmoid, &[v]);
    }
    g.output(v);
    g
}

fn randn(rng: &mut Rng, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| rng.normal() as f32 * scale).collect()
}

/// `params` with weight and bias replaced by their quantized values.
fn quantized_params(params: &ParamStore, fmt: &QuantFormat) -> ParamStore {
    let mut p = params.clone();
    for name in ["fc.weight", "fc.bias"] {
        let t = params.get(name).expect("linear has weight and bias");
        p.set(name, Tensor::new(t.shape.clone(), q(fmt, &t.data, &t.shape)).expect("same size")).expect("same shape");
    }
    p
}

#[test]
fn forward_and_ste_backward_equal_the_float_graph_on_quantized_operands() {
    let mut rng = Rng::new(5);
    let g = linear_net(false);
    let params = init_params(&g, &mut rng);
    let x = randn(&mut rng, 6 * 4, 1.5);
    let gq = quantize_linears(g.clone(), 8, 4);
    let mut quant = Executor::new(&gq, &params, opts()).unwrap();
    // The float graph fed quantized inputs and parameters.
    let mut float = Executor::new(&g, &quantized_params(&params, &Q84), opts()).unwrap();
    let xq = q(&Q84, &x, &[6, 4]);
    for e in [&mut quant, &mut float] {
        e.set_keep_input_grad(true);
    }
    let yq = quant.forward(&x, &[6, 4], Mode::Train).unwrap().to_vec();
    let yf = float.forward(&xq, &[6, 4], Mode::Train).unwrap().to_vec();
    assert_eq!(yq, yf, "forward = float linear on quantized x, W, b");
    let dy = randn(&mut rng, yq.len(), 1.0);
    quant.backward(&dy).unwrap();
    float.backward(&dy).unwrap();
    // Straight-through: dL/dx = dL/dxq = dY Wq, dL/dW = dY^T xq, dL/db = sum dY.
    assert_eq!(quant.input_grad().unwrap(), float.input_grad().unwrap());
    assert_eq!(quant.grads(), float.grads());
    // The executor's parameters stay float.
    assert_eq!(quant.params(), params);
}

#[test]
fn output_quantization_keeps_the_float_output_for_backward() {
    // data_out on a sigmoid: forward gives q(sigmoid(x)); backward uses sigmoid(x) itself, so the
    // input gradient equals the float graph's.
    let mut rng = Rng::new(9);
    let g = linear_net(true);
    let params = init_params(&g, &mut rng);
    let gq = with_quant(g.clone(), |n| (n.name == "act").then(|| NodeQuant { data_out: Some(Q84), ..Default::default() }));
    let x = randn(&mut rng, 5 * 4, 2.0);
    let (mut a, mut b) = (Executor::new(&gq, &params, opts()).unwrap(), Executor::new(&g, &params, opts()).unwrap());
    let ya = a.forward(&x, &[5, 4], Mode::Train).unwrap().to_vec();
    let yb = b.forward(&x, &[5, 4], Mode::Train).unwrap().to_vec();
    assert_eq!(ya, q(&Q84, &yb, &[5, 3]));
    assert_ne!(ya, yb);
    let dy = randn(&mut rng, ya.len(), 1.0);
    a.backward(&dy).unwrap();
    b.backward(&dy).unwrap();
    assert_eq!(a.grads(), b.grads());
}

#[test]
fn weights_are_requantized_after_each_change() {
    let mut rng = Rng::new(11);
    let g = linear_net(false);
    let params = init_params(&g, &mut rng);
    let gq = quantize_linears(g.clone(), 8, 4);
    let x = randn(&mut rng, 8 * 4, 1.0);
    let y: Vec<u32> = (0..8).map(|i| i % 3).collect();
    let mut exec = Executor::new(&gq, &params, opts()).unwrap();
    let mut opt = Optimizer::new(OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }, 0.05);
    let xq = q(&Q84, &x, &[8, 4]);
    let eval_float = |p: &ParamStore| {
        let mut f = Executor::new(&g, &quantized_params(p, &Q84), opts()).unwrap();
        f.forward(&xq, &[8, 4], Mode::Eval).unwrap().to_vec()
    };
    for _ in 0..3 {
        exec.train_step(&x, &[8, 4], &y, &mut opt).unwrap();
        let now = exec.params();
        assert_ne!(now, params, "the optimizer moved the float weights");
        assert_eq!(exec.forward(&x, &[8, 4], Mode::Eval).unwrap(), eval_float(&now).as_slice());
    }
    // Loading parameters invalidates the cached quantized copy.
    exec.load_params(&params).unwrap();
    assert_eq!(exec.forward(&x, &[8, 4], Mode::Eval).unwrap(), eval_float(&params).as_slice());
}

#[test]
fn quantization_aware_training_of_jsc_toy_learns() {
    let g = quantize_linears(jsc_toy(), 8, 4);
    let mut rng = Rng::new(3);
    let params = init_params(&g, &mut rng);
    // A learnable rule: the class is the arg-max of five fixed sums of the features.
    let n = 256;
    let x = randn(&mut rng, n * 16, 1.0);
    let y: Vec<u32> = x
        .chunks(16)
        .map(|r| {
            (0..5).map(|c| r[c] + r[c + 5] - r[15 - c]).enumerate().fold((0, f32::MIN), |b, (i, v)| if v > b.1 { (i, v) } else { b }).0
                as u32
        })
        .collect();
    let mut exec = Executor::new(&g, &params, opts()).unwrap();
    let mut opt = Optimizer::new(OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }, 1e-2);
    let first = exec.train_step(&x, &[n, 16], &y, &mut opt).unwrap().loss;
    let mut last = first;
    for _ in 0..150 {
        last = exec.train_step(&x, &[n, 16], &y, &mut opt).unwrap().loss;
    }
    assert!(last < 0.7 * first, "loss {first} -> {last}");
}

#[test]
fn matmul_weight_format_applies_to_the_second_operand() {
    let mut g = Graph::new();
    let a = g.placeholder("x");
    let w = g.get_attr("w");
    let m = g.call_function("torch.matmul", Op::MatMul, &[a, w]);
    g.output(m);
    let mut params = ParamStore::new();
    let wv = [0.3f32, -0.71, 1.26, 0.04, 0.5, -2.2];
    params.insert("w", Tensor::new(vec![3, 2], wv.to_vec()).unwrap(), false);
    let gq = with_quant(g.clone(), |n| {
        (n.name == "matmul").then(|| NodeQuant { data_in: vec![Some(Q84)], weight: Some(Q84), ..Default::default() })
    });
    let x = [0.26f32, -1.1, 0.9, 2.0, 0.33, -0.07];
    let mut exec = Executor::new(&gq, &params, opts()).unwrap();
    let got = exec.forward(&x, &[2, 3], Mode::Eval).unwrap().to_vec();
    let (xq, wq) = (q(&Q84, &x, &[2, 3]), q(&Q84, &wv, &[3, 2]));
    let want: Vec<f32> = (0..4).map(|o| (0..3).map(|k| xq[(o / 2) * 3 + k] * wq[k * 2 + o % 2]).sum()).collect();
    assert_eq!(got, want);
}

#[test]
fn bad_quantization_is_an_error_naming_the_node() {
    let g = linear_net(false);
    let params = init_params(&g, &mut Rng::new(0));
    let bad = QuantFormat::Integer { width: 0, frac_width: 0, signed: true };
    let gq = with_quant(g.clone(), |n| (n.name == "fc").then(|| NodeQuant { weight: Some(bad.clone()), ..Default::default() }));
    let e = Executor::new(&gq, &params, opts()).unwrap_err();
    assert_eq!(e.to_string(), "node `fc`, weight: integer format: `width` = 0: must be between 1 and 32");
    // A per-channel scale that does not fit the data fails at the first batch, naming the input.
    let scale = Tensor::new(vec![5, 1], vec![1.0; 5]).unwrap();
    let iq = QuantFormat::IntQuant {
        scale,
        zero_point: Tensor::scalar(0.0),
        bit_width: 8.0,
        signed: true,
        narrow: false,
        rounding_mode: Default::default(),
    };
    let gq = with_quant(g.clone(), |n| (n.name == "fc").then(|| NodeQuant { data_in: vec![Some(iq.clone())], ..Default::default() }));
    let mut exec = Executor::new(&gq, &params, opts()).unwrap();
    let e = exec.forward(&[0.0; 8], &[2, 4], Mode::Eval).unwrap_err();
    assert!(matches!(&e, RuntimeError::Quant { node, operand, .. } if node == "fc" && operand == "data_in_0"), "{e}");
    // A view has no computation to quantize.
    let mut v = Graph::new();
    let x = v.placeholder("x");
    let f = v.call_method("flatten", Op::Flatten { start_dim: 1, end_dim: -1 }, &[x]);
    v.output(f);
    let vq = with_quant(v, |n| (n.name == "flatten").then(|| NodeQuant { data_in: vec![Some(Q84)], ..Default::default() }));
    let e = Executor::new(&vq, &ParamStore::new(), opts()).unwrap_err();
    assert!(matches!(e, RuntimeError::QuantUnsupported { .. }), "{e}");
}
