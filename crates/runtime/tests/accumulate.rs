//! Gradient accumulation (`Executor::accumulate_grad`, Lightning's `accumulate_grad_batches`):
//! two halves of a loss add up to the whole loss's gradients bit for bit (a weight of 1/2 scales
//! every product of backward exactly), a weight of 1 is `loss_and_grad`, and a step consumes the
//! held gradients so the next backward writes fresh ones.

mod common;

use mase_ir::{Graph, Rng};
use mase_runtime::{init_params, ExecOptions, Executor, Optimizer, OptimizerKind};
use mase_zoo::{build_model, ModelContext};

fn adam() -> Optimizer {
    Optimizer::new(OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }, 1e-2)
}

fn check(name: &str, graph: &Graph, sample: &[usize], classes: u32, threads: usize) {
    let params = init_params(graph, &mut Rng::new(4));
    let mut shape = vec![24];
    shape.extend_from_slice(sample);
    let mut rng = Rng::new(5);
    let x: Vec<f32> = (0..shape.iter().product::<usize>()).map(|_| rng.normal() as f32).collect();
    let y: Vec<u32> = (0..24).map(|i| i % classes).collect();
    let opts = ExecOptions { threads, seed: 0 };

    let mut whole = Executor::new(graph, &params, opts).unwrap();
    let want = whole.loss_and_grad(&x, &shape, &y).unwrap();
    let mut halves = Executor::new(graph, &params, opts).unwrap();
    let first = halves.accumulate_grad(&x, &shape, &y, 0.5).unwrap();
    halves.accumulate_grad(&x, &shape, &y, 0.5).unwrap();
    assert_eq!(first, want, "{name}: the reported loss is not weighted");
    assert_eq!(halves.grads(), whole.grads(), "{name}: two halves give the whole gradient");

    // After a step, the next backward writes: the same as a fresh executor's first backward.
    let (mut a, mut b) = (adam(), adam());
    whole.step(&mut a).unwrap();
    halves.step(&mut b).unwrap();
    whole.accumulate_grad(&x, &shape, &y, 1.0).unwrap();
    halves.loss_and_grad(&x, &shape, &y).unwrap();
    // (The running statistics of batch norm differ: `halves` ran two training forwards.)
    assert_eq!(halves.grads(), whole.grads(), "{name}: a step consumes the held gradients");
}

#[test]
fn halves_add_up_to_the_whole_gradient() {
    let zoo = |name: &str, sample: &[usize], classes: usize| build_model(name, &ModelContext::new(sample.to_vec(), classes)).unwrap();
    check("jsc-toy", &common::jsc_toy(), &[16], 5, 1);
    check("jsc-three-layer", &zoo("jsc-three-layer", &[16], 5), &[16], 5, 1);
    check("tfc", &zoo("tfc", &[1, 28, 28], 10), &[1, 28, 28], 10, 2);
    check("mnist-cnn, one thread", &zoo("mnist-cnn", &[1, 28, 28], 10), &[1, 28, 28], 10, 1);
    check("mnist-cnn, two threads", &zoo("mnist-cnn", &[1, 28, 28], 10), &[1, 28, 28], 10, 2);
    check("jsc-toy, integer fake-quant", &common::quantize_linears(common::jsc_toy(), 8, 4), &[16], 5, 1);
}
