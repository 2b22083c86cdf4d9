//! Graphs with several inputs and outputs: forward and backward against hand-written formulas
//! (a shared-weight linear layer read by two inputs, a product of two inputs, an unused input),
//! the same bits on one and two threads, and the one-line refusals of the single-tensor calls.

use mase_ir::{Graph, Op, ParamStore, Tensor};
use mase_runtime::{ExecOptions, Executor, Mode};

const N: usize = 4;
const IN: usize = 3;
const OUT: usize = 2;

/// `forward(a, b, c)` returning `(fc(a) - fc(b), fc(a), a * b)`: `fc` is one module called on
/// both inputs (a siamese pair), `c` is never read.
fn siamese() -> Graph {
    let mut g = Graph::new();
    let a = g.placeholder("a");
    let b = g.placeholder("b");
    g.placeholder("c");
    let ya = g.call_module("fc", Op::Linear { in_features: IN, out_features: OUT, bias: true }, &[a]);
    let yb = g.call_module("fc", Op::Linear { in_features: IN, out_features: OUT, bias: true }, &[b]);
    let d = g.call_function("operator.sub", Op::Sub, &[ya, yb]);
    let s = g.call_function("operator.mul", Op::Mul, &[a, b]);
    g.outputs(&[d, ya, s]);
    g
}

fn values(n: usize, seed: f32) -> Vec<f32> {
    (0..n).map(|i| ((i as f32 * 0.37 + seed).sin() * 1.5).round() / 4.0 + 0.125 * seed).collect()
}

fn params() -> (ParamStore, Vec<f32>, Vec<f32>) {
    let (w, bias) = (values(OUT * IN, 0.3), values(OUT, 1.1));
    let mut p = ParamStore::new();
    p.insert("fc.weight", Tensor::new(vec![OUT, IN], w.clone()).unwrap(), true);
    p.insert("fc.bias", Tensor::new(vec![OUT], bias.clone()).unwrap(), true);
    (p, w, bias)
}

/// `x W^T + bias` for rows of `IN` values.
fn linear(x: &[f32], w: &[f32], bias: &[f32]) -> Vec<f32> {
    let mut y = vec![0.0; N * OUT];
    for r in 0..N {
        for o in 0..OUT {
            y[r * OUT + o] = bias[o] + (0..IN).map(|i| x[r * IN + i] * w[o * IN + i]).sum::<f32>();
        }
    }
    y
}

/// `dy W` for rows of `OUT` gradients.
fn linear_dx(dy: &[f32], w: &[f32]) -> Vec<f32> {
    (0..N * IN).map(|k| (0..OUT).map(|o| dy[(k / IN) * OUT + o] * w[o * IN + k % IN]).sum()).collect()
}

fn close(what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        assert!((g - w).abs() <= 1e-5 * (1.0 + w.abs()), "{what}[{k}]: got {g}, want {w}");
    }
}

/// Forward and backward of the siamese graph on `threads` threads: every output, the input
/// gradients and the parameter gradients.
fn run(threads: usize) -> Vec<Vec<f32>> {
    let (p, _, _) = params();
    let mut exec = Executor::new(&siamese(), &p, ExecOptions { threads, seed: 0 }).unwrap();
    exec.set_keep_input_grad(true);
    let (a, b, c) = (values(N * IN, 0.0), values(N * IN, 2.0), values(N * 5, 4.0));
    exec.forward_many(&[(&a, &[N, IN]), (&b, &[N, IN]), (&c, &[N, 5])], Mode::Train).unwrap();
    let mut got: Vec<Vec<f32>> = (0..3).map(|k| exec.output(k).unwrap().1.to_vec()).collect();
    let (gd, gya, gs) = (values(N * OUT, 5.0), values(N * OUT, 6.0), values(N * IN, 7.0));
    exec.backward_many(&[&gd, &gya, &gs]).unwrap();
    got.extend((0..2).map(|k| exec.input_grad_of(k).unwrap().to_vec()));
    assert!(exec.input_grad_of(2).is_none(), "the unused input gets no gradient, as in PyTorch");
    got.extend(exec.grads().into_iter().map(|(_, g)| g));
    got
}

#[test]
fn several_inputs_and_outputs_match_the_formulas() {
    let (_, w, bias) = params();
    let (a, b) = (values(N * IN, 0.0), values(N * IN, 2.0));
    let (gd, gya, gs) = (values(N * OUT, 5.0), values(N * OUT, 6.0), values(N * IN, 7.0));
    let (ya, yb) = (linear(&a, &w, &bias), linear(&b, &w, &bias));
    // `fc(a)` is returned and read by the difference: its gradients add.
    let dya: Vec<f32> = gd.iter().zip(&gya).map(|(d, y)| d + y).collect();
    let dyb: Vec<f32> = gd.iter().map(|d| -d).collect();
    let mut dw = vec![0.0; OUT * IN];
    let mut dbias = vec![0.0; OUT];
    for r in 0..N {
        for o in 0..OUT {
            dbias[o] += dya[r * OUT + o] + dyb[r * OUT + o];
            for i in 0..IN {
                dw[o * IN + i] += dya[r * OUT + o] * a[r * IN + i] + dyb[r * OUT + o] * b[r * IN + i];
            }
        }
    }
    let add = |x: Vec<f32>, y: Vec<f32>| -> Vec<f32> { x.iter().zip(&y).map(|(p, q)| p + q).collect() };
    let prod = |x: &[f32], y: &[f32]| -> Vec<f32> { x.iter().zip(y).map(|(p, q)| p * q).collect() };
    let want = [
        ("output 0 (fc(a) - fc(b))", ya.iter().zip(&yb).map(|(p, q)| p - q).collect()),
        ("output 1 (fc(a))", ya.clone()),
        ("output 2 (a * b)", prod(&a, &b)),
        ("grad a", add(linear_dx(&dya, &w), prod(&gs, &b))),
        ("grad b", add(linear_dx(&dyb, &w), prod(&gs, &a))),
        ("grad fc.weight", dw),
        ("grad fc.bias", dbias),
    ];
    let got = run(1);
    assert_eq!(got.len(), want.len());
    for ((what, want), got) in want.iter().zip(&got) {
        close(what, got, want);
    }
    // The same bits on two threads.
    assert_eq!(run(2), got);
}

#[test]
fn single_tensor_calls_refuse_several_inputs_or_outputs() {
    let (p, _, _) = params();
    let mut exec = Executor::new(&siamese(), &p, ExecOptions { threads: 1, seed: 0 }).unwrap();
    let x = values(N * IN, 0.0);
    let refusal = |call: &str| {
        format!(
            "graph has 3 input(s) and 3 output(s); {call} takes a graph with exactly one of each (several go through `forward_many` / `backward_many`, which training and evaluation do not use)"
        )
    };
    let cases: Vec<(&str, String)> = vec![
        ("training", exec.loss_and_grad(&x, &[N, IN], &[0; N]).unwrap_err().to_string()),
        ("evaluation", exec.eval_batch(&x, &[N, IN], &[0; N]).unwrap_err().to_string()),
        ("forward", exec.forward(&x, &[N, IN], Mode::Eval).map(|_| ()).unwrap_err().to_string()),
        ("infer", exec.infer(&x, &[N, IN]).map(|_| ()).unwrap_err().to_string()),
    ];
    for (call, got) in cases {
        assert_eq!(got, refusal(call));
    }
    let bad: Vec<(String, &str)> = vec![
        (exec.forward_many(&[(&x, &[N, IN])], Mode::Eval).unwrap_err().to_string(), "1 input batches given; the graph has 3 inputs"),
        (
            exec.forward_many(&[(&x, &[N, IN]), (&x, &[N, 2]), (&x, &[N, 3])], Mode::Eval).unwrap_err().to_string(),
            "input 1 (`b`): data has 12 values, but shape [4, 2] needs 8",
        ),
        (
            exec.backward_many(&[&x]).unwrap_err().to_string(),
            "backward needs a forward pass in training mode on the same batch shape first",
        ),
    ];
    for (got, want) in bad {
        assert_eq!(got, want);
    }
    exec.forward_many(&[(&x, &[N, IN]), (&x, &[N, IN]), (&x, &[N, IN])], Mode::Train).unwrap();
    let short = vec![0.0; 3];
    assert_eq!(exec.backward_many(&[&short]).unwrap_err().to_string(), "1 output gradients given; the graph has 3 outputs");
    assert_eq!(
        exec.backward_many(&[&short, &short, &short]).unwrap_err().to_string(),
        "gradient of output 0 has 3 values, the output has 8"
    );
}
