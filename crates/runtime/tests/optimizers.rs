//! Optimizer updates against hand-computed values (checked with `torch.optim` 2.15) for two steps,
//! the cosine schedule's closed form, and resuming from a saved optimizer state.

mod common;

use mase_ir::{ParamStore, Rng, Tensor};
use mase_runtime::{cosine_lr, init_params, ExecOptions, Executor, Optimizer, OptimizerKind, OptimizerState};

/// Two steps on the parameter `p = [1, -2]` with gradients `[0.5, 1.5]` then `[-0.2, -0.6]`;
/// returns the parameter after each step.
fn two_steps(kind: OptimizerKind, lr: f32) -> [[f32; 2]; 2] {
    let mut store = ParamStore::new();
    store.insert("p", Tensor::new(vec![2], vec![1.0, -2.0]).unwrap(), true);
    let mut opt = Optimizer::new(kind, lr);
    let mut out = [[0.0; 2]; 2];
    for (k, g) in [0.5f32, -0.2].into_iter().enumerate() {
        opt.step(&mut store, &[("p".to_string(), vec![g, 3.0 * g])]).unwrap();
        let d = &store.get("p").unwrap().data;
        out[k] = [d[0], d[1]];
    }
    out
}

fn assert_steps(name: &str, got: [[f32; 2]; 2], want: [[f32; 2]; 2]) {
    for (g, w) in got.iter().flatten().zip(want.iter().flatten()) {
        assert!((g - w).abs() <= 1e-6, "{name}: got {got:?}, want {want:?}");
    }
}

#[test]
fn sgd_with_momentum_nesterov_and_weight_decay() {
    // Step 1 (p = 1, g = 0.5): d = g + 0.1 p = 0.6; the buffer starts as d = 0.6;
    //   nesterov d = 0.6 + 0.9 * 0.6 = 1.14; p = 1 - 0.1 * 1.14 = 0.886.
    // Step 2 (g = -0.2): d = -0.2 + 0.0886 = -0.1114; buf = 0.9 * 0.6 - 0.1114 = 0.4286;
    //   d = -0.1114 + 0.9 * 0.4286 = 0.27434; p = 0.886 - 0.027434 = 0.858566.
    let kind = OptimizerKind::Sgd { momentum: 0.9, dampening: 0.0, weight_decay: 0.1, nesterov: true };
    assert_steps("sgd nesterov", two_steps(kind, 0.1), [[0.886, -2.247], [0.858_566, -2.195_607]]);
}

#[test]
fn sgd_dampening_skips_the_first_step_and_plain_sgd() {
    // Step 1: buf = g = 0.5 (no dampening on the first step), p = 1 - 0.05 = 0.95.
    // Step 2: buf = 0.9 * 0.5 + 0.5 * (-0.2) = 0.35, p = 0.95 - 0.035 = 0.915.
    let damp = OptimizerKind::Sgd { momentum: 0.9, dampening: 0.5, weight_decay: 0.0, nesterov: false };
    assert_steps("sgd dampening", two_steps(damp, 0.1), [[0.95, -2.15], [0.915, -2.255]]);
    // Without momentum: p -= lr (g + wd p): 1 - 0.1 * 0.6 = 0.94; 0.94 - 0.1 * (-0.2 + 0.094) = 0.9506.
    let plain = OptimizerKind::Sgd { momentum: 0.0, dampening: 0.0, weight_decay: 0.1, nesterov: false };
    assert_steps("sgd", two_steps(plain, 0.1), [[0.94, -2.13], [0.9506, -2.0487]]);
}

#[test]
fn adam_with_l2_weight_decay() {
    // Step 1: g = 0.5 + 0.1 = 0.6; m = 0.06, v = 0.00036; m_hat = 0.6, sqrt(v_hat) = 0.6;
    //   p = 1 - 0.1 * 0.6 / (0.6 + 1e-8) = 0.9.
    // Step 2: g = -0.2 + 0.09 = -0.11; m = 0.043, v = 0.00037174; m_hat = 0.043 / 0.19,
    //   sqrt(v_hat) = sqrt(0.00037174 / 0.001999); p = 0.9 - 0.1 * m_hat / sqrt(v_hat) = 0.847519.
    let kind = OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.1 };
    assert_steps("adam", two_steps(kind, 0.1), [[0.9, -2.1], [0.847_519_1, -2.117_496]]);
}

#[test]
fn adamw_decouples_weight_decay() {
    // Step 1: p = 1 * (1 - 0.1 * 0.1) = 0.99, then the Adam step on g = 0.5 moves it by 0.1: 0.89.
    let kind = OptimizerKind::AdamW { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.1 };
    assert_steps("adamw", two_steps(kind, 0.1), [[0.89, -2.08], [0.846_539_5, -2.093_760_7]]);
}

#[test]
fn cosine_schedule_closed_form() {
    let cases = [
        (1e-3, 1e-6, 0, 10, 1e-3),
        (1e-3, 1e-6, 5, 10, (1e-3 + 1e-6) / 2.0),
        (1e-3, 1e-6, 10, 10, 1e-6),
        // cos(pi / 3) = 1/2: eta_min + (base - eta_min) * 3/4.
        (0.1, 0.0, 2, 6, 0.075),
        (0.1, 0.0, 0, 0, 0.1),
    ];
    for (base, min, epoch, t_max, want) in cases {
        let got = cosine_lr(base, min, epoch, t_max);
        assert!((got - want).abs() <= 1e-7 * want.max(1e-3), "cosine_lr({base}, {min}, {epoch}, {t_max}) = {got}, want {want}");
    }
}

#[test]
fn saved_state_resumes_training_bit_for_bit() {
    let g = common::jsc_toy();
    let params = init_params(&g, &mut Rng::new(1));
    let mut rng = Rng::new(2);
    let x: Vec<f32> = (0..64 * 16).map(|_| rng.normal() as f32).collect();
    let y: Vec<u32> = (0..64).map(|_| rng.below(5) as u32).collect();
    let kinds = [
        OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 1e-4 },
        OptimizerKind::Sgd { momentum: 0.9, dampening: 0.0, weight_decay: 5e-4, nesterov: true },
    ];
    for kind in kinds {
        // Four uninterrupted steps ...
        let mut a = Executor::new(&g, &params, ExecOptions { threads: 1, seed: 0 }).unwrap();
        let mut oa = Optimizer::new(kind, 1e-2);
        for _ in 0..4 {
            a.train_step(&x, &[64, 16], &y, &mut oa).unwrap();
        }
        // ... equal two steps, a save through JSON, and two more steps in a new executor.
        let mut b = Executor::new(&g, &params, ExecOptions { threads: 1, seed: 0 }).unwrap();
        let mut ob = Optimizer::new(kind, 1e-2);
        for _ in 0..2 {
            b.train_step(&x, &[64, 16], &y, &mut ob).unwrap();
        }
        let json = serde_json::to_string(&ob.state()).unwrap();
        let state: OptimizerState = serde_json::from_str(&json).unwrap();
        assert_eq!(state.step, 2);
        assert!(
            state.buffers.iter().any(|(n, _)| n == "momentum_buffer.seq_blocks.2.weight" || n == "exp_avg_sq.seq_blocks.2.weight"),
            "{:?}",
            state.buffers.iter().map(|b| &b.0).collect::<Vec<_>>()
        );
        let mut c = Executor::new(&g, &b.params(), ExecOptions { threads: 1, seed: 0 }).unwrap();
        let mut oc = Optimizer::new(kind, 0.5);
        oc.load_state(state).unwrap();
        assert_eq!(oc.lr, 1e-2);
        for _ in 0..2 {
            c.train_step(&x, &[64, 16], &y, &mut oc).unwrap();
        }
        assert_eq!(a.params(), c.params(), "{kind:?}");
    }
}

#[test]
fn bad_optimizer_state_is_an_error() {
    let mut opt = Optimizer::new(OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }, 1e-3);
    let bad = OptimizerState { step: 1, lr: 1e-3, buffers: vec![("momentum_buffer.fc.weight".into(), vec![0.0])] };
    let e = opt.load_state(bad).unwrap_err();
    assert!(e.to_string().contains("momentum_buffer.fc.weight"), "{e}");
    let lonely = OptimizerState { step: 1, lr: 1e-3, buffers: vec![("exp_avg.fc.weight".into(), vec![0.0])] };
    assert!(opt.load_state(lonely).is_err(), "exp_avg without exp_avg_sq");
    // A buffer whose size does not fit the parameter is reported at the step.
    let ok = OptimizerState { step: 1, lr: 1e-3, buffers: vec![("exp_avg.p".into(), vec![0.0; 3]), ("exp_avg_sq.p".into(), vec![0.0; 3])] };
    opt.load_state(ok).unwrap();
    let mut store = ParamStore::new();
    store.insert("p", Tensor::new(vec![2], vec![1.0, 2.0]).unwrap(), true);
    let e = opt.step(&mut store, &[("p".into(), vec![0.1, 0.1])]).unwrap_err();
    assert!(e.to_string().contains("3 values"), "{e}");
    assert_eq!(store.get("p").unwrap().data, [1.0, 2.0], "a failed step leaves parameters alone");
}
