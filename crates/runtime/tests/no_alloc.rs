//! After warm-up, training and evaluation steps allocate nothing: every buffer lives in the plan,
//! the kernels or the optimizer state. The one exception is inside the GEMM library, which
//! allocates its packing scratch in every product (1-2 small allocations, as `matrixmultiply`
//! does too); those are told apart by `mase_runtime::in_gemm_library` and not counted. Only the
//! measuring thread's allocations count (the executors here run on one thread, so all their work
//! is on it): the test harness's own threads allocate at times of their choosing, which made a
//! process-wide count fail now and then.

mod common;

use mase_ir::{ConvSpec, Graph, NormSpec, Op, PoolSpec, Rng};
use mase_runtime::{init_params, ExecOptions, Executor, Mode, Optimizer, OptimizerKind};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The system allocator, counting allocations.
struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Whether this thread's allocations are being counted (a const `Cell`: reading it never
    /// allocates, so the allocator may consult it).
    static MEASURING: Cell<bool> = const { Cell::new(false) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if MEASURING.with(Cell::get) && !mase_runtime::in_gemm_library() {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn conv_net() -> Graph {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let c = g.call_module("conv", Op::Conv2d(ConvSpec::new(2, 3, 8, 3, 1, 1)), &[x]);
    let b = g.call_module("bn", Op::BatchNorm2d(NormSpec::new(8)), &[c]);
    let r = g.call_module("relu", Op::Relu, &[b]);
    let p = g.call_module("pool", Op::MaxPool2d(PoolSpec::new(2, 2)), &[r]);
    let t = g.call_method("permute", Op::Permute { dims: vec![0, 2, 3, 1] }, &[p]);
    let f = g.call_method("flatten", Op::Flatten { start_dim: 1, end_dim: -1 }, &[t]);
    let d = g.call_module("drop", Op::Dropout { p: 0.1 }, &[f]);
    let l = g.call_module("fc", Op::Linear { in_features: 8 * 4 * 4, out_features: 4, bias: true }, &[d]);
    let s = g.call_module("act", Op::Gelu { tanh: false }, &[l]);
    g.output(s);
    g
}

/// Allocations made by `f`.
fn allocations(f: impl FnOnce()) -> usize {
    let before = ALLOCS.load(Ordering::Relaxed);
    MEASURING.with(|m| m.set(true));
    f();
    MEASURING.with(|m| m.set(false));
    ALLOCS.load(Ordering::Relaxed) - before
}

#[test]
fn warm_steps_allocate_nothing() {
    let cases: Vec<(Graph, Vec<usize>, u32)> = vec![
        (common::jsc_toy(), vec![64, 16], 5),
        (conv_net(), vec![4, 3, 8, 8], 4),
        // Fake quantization: quantized copies live in the plan and the executor.
        (common::quantize_linears(common::jsc_toy(), 8, 4), vec![64, 16], 5),
    ];
    for (g, shape, classes) in cases {
        let params = init_params(&g, &mut Rng::new(0));
        let mut rng = Rng::new(1);
        let x: Vec<f32> = (0..shape.iter().product::<usize>()).map(|_| rng.normal() as f32).collect();
        let y: Vec<u32> = (0..shape[0] as u32).map(|i| i % classes).collect();
        let mut exec = Executor::new(&g, &params, ExecOptions { threads: 1, seed: 0 }).unwrap();
        let kinds = [
            OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 1e-4 },
            OptimizerKind::Sgd { momentum: 0.9, dampening: 0.0, weight_decay: 5e-4, nesterov: true },
        ];
        for kind in kinds {
            let mut opt = Optimizer::new(kind, 1e-3);
            exec.train_step(&x, &shape, &y, &mut opt).unwrap();
            exec.eval_batch(&x, &shape, &y).unwrap();
            let n = allocations(|| {
                for epoch in 0..3 {
                    opt.lr = mase_runtime::cosine_lr(1e-3, 1e-6, epoch, 3);
                    exec.train_step(&x, &shape, &y, &mut opt).unwrap();
                    exec.eval_batch(&x, &shape, &y).unwrap();
                    exec.forward(&x, &shape, Mode::Eval).unwrap();
                }
            });
            assert_eq!(n, 0, "warm steps with a changing lr must not allocate");
            let n = allocations(|| {
                for _ in 0..3 {
                    exec.train_step(&x, &shape, &y, &mut opt).unwrap();
                    exec.eval_batch(&x, &shape, &y).unwrap();
                }
            });
            assert_eq!(n, 0, "warm steps at a fixed lr must not allocate");
        }
    }
}

#[test]
fn warm_steps_with_several_inputs_and_outputs_allocate_nothing() {
    // `forward(a, b)` returning `(fc(a) * b, fc(a))`.
    let mut g = Graph::new();
    let a = g.placeholder("a");
    let b = g.placeholder("b");
    let fc = g.call_module("fc", Op::Linear { in_features: 6, out_features: 4, bias: true }, &[a]);
    let m = g.call_function("operator.mul", Op::Mul, &[fc, b]);
    g.outputs(&[m, fc]);
    let params = init_params(&g, &mut Rng::new(0));
    let mut rng = Rng::new(1);
    let mut draw = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.normal() as f32).collect() };
    let (xa, xb, g0, g1) = (draw(16 * 6), draw(16 * 4), draw(16 * 4), draw(16 * 4));
    let mut exec = Executor::new(&g, &params, ExecOptions { threads: 1, seed: 0 }).unwrap();
    exec.set_keep_input_grad(true);
    let mut opt = Optimizer::new(OptimizerKind::Sgd { momentum: 0.9, dampening: 0.0, weight_decay: 0.0, nesterov: false }, 1e-2);
    let mut step = |exec: &mut Executor| {
        exec.forward_many(&[(&xa, &[16, 6]), (&xb, &[16, 4])], Mode::Train).unwrap();
        exec.backward_many(&[&g0, &g1]).unwrap();
        exec.step(&mut opt).unwrap();
        exec.forward_many(&[(&xa, &[16, 6]), (&xb, &[16, 4])], Mode::Eval).unwrap();
    };
    step(&mut exec);
    assert_eq!(allocations(|| (0..3).for_each(|_| step(&mut exec))), 0, "warm multi-input steps must not allocate");
}
