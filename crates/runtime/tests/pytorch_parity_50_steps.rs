//! 50 training steps of jsc-toy against PyTorch.
//!
//! `tests/fixtures/jsc_toy_50_steps.safetensors` (made by `scripts/make_parity_fixtures.py`, see
//! `tests/fixtures/README.md`) holds PyTorch's initial jsc-toy parameters, a 2048-row data set, the
//! 50 losses of Adam(lr=1e-3) over consecutive batches of 256, and the final parameters and
//! running statistics. This test starts the executor from the same state, runs the same steps,
//! and compares.

use mase_ir::{Graph, ParamStore, Tensor};
use mase_runtime::{ExecOptions, Executor, Optimizer, OptimizerKind};
use mase_zoo::{build_model, ModelContext};
use safetensors::{Dtype, SafeTensors};
use std::collections::HashMap;

const BATCH: usize = 256;
const FEATURES: usize = 16;
const STEPS: usize = 50;
const LR: f32 = 1e-3;

/// Every tensor of the fixture by name, as f32.
fn fixture() -> HashMap<String, Tensor> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/jsc_toy_50_steps.safetensors");
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {path}: {e}"));
    let st = SafeTensors::deserialize(&bytes).unwrap_or_else(|e| panic!("parsing {path}: {e}"));
    st.tensors()
        .into_iter()
        .map(|(name, view)| {
            assert_eq!(view.dtype(), Dtype::F32, "fixture tensor {name} is not f32");
            let data = view.data().chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
            let t = Tensor::new(view.shape().to_vec(), data).unwrap_or_else(|e| panic!("fixture tensor {name}: {e}"));
            (name, t)
        })
        .collect()
}

/// The graph's parameters and buffers with the values stored under `<prefix>.<name>`.
fn store_from(graph: &Graph, fx: &HashMap<String, Tensor>, prefix: &str) -> ParamStore {
    let mut store = ParamStore::new();
    for (name, spec) in graph.param_specs() {
        let key = format!("{prefix}.{name}");
        let t = fx.get(&key).unwrap_or_else(|| panic!("fixture has no {key}"));
        assert_eq!(t.shape, spec.shape, "{key}");
        store.insert(name, t.clone(), spec.trainable);
    }
    // The fixture must not hold tensors the graph lacks: that would mean the names drifted.
    let extra: Vec<&String> =
        fx.keys().filter(|k| k.starts_with(&format!("{prefix}.")) && !store.contains(&k[prefix.len() + 1..])).collect();
    assert!(extra.is_empty(), "fixture tensors unknown to the graph: {extra:?}");
    store
}

/// Linear layers followed by a BatchNorm (`seq_blocks.2` -> `.3`, `.5` -> `.6`, `.8` -> `.9`). The
/// BatchNorm subtracts the batch mean, so the loss does not depend on these biases: their exact
/// gradient is zero, both frameworks feed Adam rounding noise of about 1e-9, and Adam (eps 1e-8)
/// turns that noise into steps of a sizeable fraction of lr, in directions neither framework
/// controls. The running mean of the BatchNorm after each such Linear tracks the bias, so it
/// inherits the drift. These two are checked against bounds below instead of PyTorch's bits.
const PRE_BN_LINEARS: [(&str, &str); 3] =
    [("seq_blocks.2", "seq_blocks.3"), ("seq_blocks.5", "seq_blocks.6"), ("seq_blocks.8", "seq_blocks.9")];

/// Whether a final tensor is one of the noise-driven ones of [`PRE_BN_LINEARS`].
fn noise_driven(name: &str) -> bool {
    PRE_BN_LINEARS.iter().any(|(lin, bn)| name == format!("{lin}.bias") || name == format!("{bn}.running_mean"))
}

/// `got - want`, element by element.
fn diff(got: &ParamStore, want: &ParamStore, name: &str) -> Vec<f32> {
    let (g, w) = (got.require(name).expect("executor keeps every parameter"), want.require(name).expect("fixture tensor"));
    assert_eq!(g.shape, w.shape, "{name}");
    g.data.iter().zip(&w.data).map(|(a, b)| a - b).collect()
}

#[test]
fn fifty_adam_steps_of_jsc_toy_match_pytorch() {
    let fx = fixture();
    let graph = build_model("jsc-toy", &ModelContext::new(vec![FEATURES], 5)).expect("jsc-toy builds");
    let init = store_from(&graph, &fx, "init");
    let want_final = store_from(&graph, &fx, "final");
    let (x, y, losses) = (&fx["x"], &fx["y"], &fx["losses"]);
    assert_eq!((x.shape.as_slice(), y.shape.as_slice(), losses.shape.as_slice()), (&[2048, FEATURES][..], &[2048][..], &[STEPS][..]));
    let labels: Vec<u32> = y.data.iter().map(|&v| v as u32).collect();

    let mut exec = Executor::new(&graph, &init, ExecOptions { threads: 1, seed: 0 }).expect("executor");
    let mut opt = Optimizer::new(OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }, LR);
    let batches = 2048 / BATCH;
    let mut worst_loss = 0.0f32;
    for step in 0..STEPS {
        let b = step % batches;
        let xb = &x.data[b * BATCH * FEATURES..(b + 1) * BATCH * FEATURES];
        let loss = exec.train_step(xb, &[BATCH, FEATURES], &labels[b * BATCH..(b + 1) * BATCH], &mut opt).expect("train step").loss;
        let want = losses.data[step];
        assert!((loss - want).abs() <= 1e-4 * want.abs(), "step {step}: loss {loss}, PyTorch {want}");
        worst_loss = worst_loss.max((loss - want).abs() / want.abs());
    }
    eprintln!("worst relative loss error {worst_loss:e}");

    let got = exec.params();
    let mut worst = (0.0f32, String::new());
    let mut compared = 0;
    for (name, want) in want_final.iter().filter(|(n, _)| !noise_driven(n)) {
        for (i, d) in diff(&got, &want_final, name).into_iter().enumerate() {
            // Relative to the value, but absolute below 1: most parameters are of order 0.1.
            let e = d.abs() / want.tensor.data[i].abs().max(1.0);
            assert!(e <= 1e-4, "{name}[{i}]: differs from PyTorch's {} by {d:e}", want.tensor.data[i]);
            if e > worst.0 {
                worst = (e, format!("{name}[{i}]"));
            }
        }
        compared += 1;
    }
    // The 4 BatchNorms' weights, biases and running variances, the input BatchNorm's running
    // mean and the 3 Linear weights; the other 6 tensors are noise-driven.
    assert_eq!((compared, want_final.len()), (16, 22));
    eprintln!("worst final parameter error {:e} at {}", worst.0, worst.1);

    for (lin, bn) in PRE_BN_LINEARS {
        let db = diff(&got, &want_final, &format!("{lin}.bias"));
        let drm = diff(&got, &want_final, &format!("{bn}.running_mean"));
        for (i, (b, m)) in db.iter().zip(&drm).enumerate() {
            // Adam moves a parameter by at most about lr per step while the gradient's sign holds.
            assert!(b.abs() <= STEPS as f32 * LR, "{lin}.bias[{i}] drifted {b:e} from PyTorch, more than Adam's noise allows");
            // The running mean is an average with momentum 0.1 (a window of about 10 steps) of the
            // batch mean, which holds the bias; so it must differ by the bias's recent drift.
            assert!((m - b).abs() <= 10.0 * LR, "{bn}.running_mean[{i}] differs by {m:e}, its bias by {b:e}");
        }
    }
}
