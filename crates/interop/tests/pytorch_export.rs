//! A PyTorch model as torch.onnx's TorchScript exporter (`dynamo=False`) writes it
//! (tests/fixtures/pytorch, made by scripts/make_pytorch_export_fixture.py): three freshly
//! initialised batch norms whose initializers the exporter merged into one set, and an
//! `nn.Parameter` used directly in `forward`. The import must give PyTorch's names, parameters,
//! trainable count, outputs and gradients.

mod common;
use common::*;
use mase_interop::{import_file, ImportOptions, Imported};
use mase_ir::{Op, Tensor};
use mase_runtime::{ExecOptions, Executor, Optimizer, OptimizerKind};

const ONNX: &str = "pytorch/shared_bn_raw_param.onnx";
const REF: &str = "pytorch/shared_bn_raw_param.npz";

fn import_fixture() -> Imported {
    import_file(&fixture(ONNX), &ImportOptions::default()).unwrap_or_else(|e| panic!("{ONNX}: {e}"))
}

/// The arrays of the reference bundle whose names start with `prefix`, without it.
fn arrays(prefix: &str) -> Vec<(String, Tensor)> {
    let bytes = std::fs::read(fixture(REF)).unwrap();
    let all = mase_interop::npy::read_npz(&bytes).unwrap();
    all.into_iter().filter_map(|(k, w)| k.strip_prefix(prefix).map(|name| (name.to_string(), w.tensor))).collect()
}

#[test]
fn the_file_shares_initializers_between_batch_norms() {
    // The premise of the other tests: all three BatchNormalization nodes read the same
    // initializers, through `Identity` nodes named after each module's own tensors.
    let m = mase_interop::onnx::decode_model(&std::fs::read(fixture(ONNX)).unwrap()).unwrap();
    let g = m.graph.as_ref().unwrap();
    let alias: std::collections::HashMap<&str, &str> =
        g.node.iter().filter(|n| n.op_type == "Identity").map(|n| (n.output[0].as_str(), n.input[0].as_str())).collect();
    let sources: Vec<Vec<&str>> = g
        .node
        .iter()
        .filter(|n| n.op_type == "BatchNormalization")
        .map(|n| n.input[1..].iter().map(|i| alias.get(i.as_str()).copied().unwrap_or(i)).collect())
        .collect();
    let first = ["seq_blocks.0.weight", "seq_blocks.0.bias", "seq_blocks.0.bias", "seq_blocks.0.weight"];
    assert_eq!(sources, [first; 3]);
}

#[test]
fn names_come_from_each_node_not_from_shared_initializers() {
    let m = import_fixture();
    let bn_nodes: Vec<&str> = m.graph.nodes().iter().filter(|n| matches!(n.op, Op::BatchNorm1d(_))).map(|n| n.name.as_str()).collect();
    assert_eq!(bn_nodes, ["seq_blocks_0", "seq_blocks_3", "seq_blocks_6"]);
    let linears: Vec<&str> = m.graph.nodes().iter().filter(|n| matches!(n.op, Op::Linear { .. })).map(|n| n.target.as_str()).collect();
    assert_eq!(linears, ["seq_blocks.2", "seq_blocks.5", "seq_blocks.8"]);
    // Every PyTorch parameter and buffer, under its state-dict name, with its values and its
    // trainable flag; nothing else.
    let (params, buffers) = (arrays("param."), arrays("buffer."));
    for (name, want, trainable) in params.iter().map(|(k, t)| (k, t, true)).chain(buffers.iter().map(|(k, t)| (k, t, false))) {
        let e = m.params.entry(name).unwrap_or_else(|| panic!("no `{name}` in {:?}", m.params.names().collect::<Vec<_>>()));
        assert_eq!((&e.tensor, e.trainable), (want, trainable), "{name}");
    }
    assert_eq!(m.params.len(), params.len() + buffers.len(), "{:?}", m.params.names().collect::<Vec<_>>());
    let count = arrays("trainable_count")[0].1.data[0] as usize;
    assert_eq!((m.params.trainable_count(), count), (730, 730));
    let gain = m.graph.nodes().iter().find(|n| n.target == "gain").expect("a get_attr node for `gain`");
    assert_eq!(gain.kind, mase_ir::NodeKind::GetAttr);
    assert!(m.notes.iter().any(|n| n.contains("initializer `gain`") && n.contains("trainable parameter `gain`")), "{:?}", m.notes);
}

#[test]
fn outputs_match_pytorch() {
    let m = import_fixture();
    let (x, want) = (npz(REF, "x"), npz(REF, "y"));
    let got = run(&m.graph, &m.params, &x);
    let (d, at) = max_diff(&got, &want);
    assert!(d <= 1e-5, "largest difference {d} at {at}: {} vs {}", got.data[at], want.data[at]);
}

#[test]
fn training_computes_pytorchs_gradients_and_updates_the_raw_parameter() {
    let m = import_fixture();
    let (xb, labels) = (npz(REF, "xb"), npz(REF, "labels"));
    let labels: Vec<u32> = labels.data.iter().map(|&l| l as u32).collect();
    let mut exec = Executor::new(&m.graph, &m.params, ExecOptions { threads: 1, seed: 0 }).unwrap();
    exec.loss_and_grad(&xb.data, &xb.shape, &labels).unwrap();
    let grads = exec.grads();
    for (name, want) in arrays("grad.") {
        let got = grads.iter().find(|(k, _)| *k == name).unwrap_or_else(|| panic!("no gradient for `{name}`"));
        let d = got.1.iter().zip(&want.data).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        assert!(d <= 1e-5, "{name}: gradient differs from PyTorch's by {d}");
    }
    let sgd = OptimizerKind::Sgd { momentum: 0.0, dampening: 0.0, weight_decay: 0.0, nesterov: false };
    let mut opt = Optimizer::new(sgd, 0.5);
    exec.step(&mut opt).unwrap();
    let before = m.params.get("gain").unwrap();
    let after = exec.params().get("gain").unwrap().clone();
    let grad = &arrays("grad.").into_iter().find(|(k, _)| k == "gain").unwrap().1;
    for i in 0..5 {
        let want = before.data[i] - 0.5 * grad.data[i];
        assert!(
            (after.data[i] - want).abs() <= 1e-6 && after.data[i] != before.data[i],
            "gain[{i}]: {} -> {}",
            before.data[i],
            after.data[i]
        );
    }
}
