//! Helpers shared by the integration tests: model builders and fixture readers.
#![allow(dead_code)]

use mase_ir::{Graph, NormSpec, Op, ParamStore, Tensor};
use std::collections::HashMap;
use std::path::PathBuf;

/// Path of a file in `tests/fixtures`.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

/// MASE's jsc-toy: BN16, ReLU, Linear 16-8, BN8, ReLU, Linear 8-8, BN8, ReLU, Linear 8-5, BN5,
/// ReLU as `seq_blocks.0` .. `seq_blocks.10`.
pub fn jsc_toy() -> Graph {
    let mut g = Graph::new();
    let mut v = g.placeholder("x");
    let layers = [
        Op::BatchNorm1d(NormSpec::new(16)),
        Op::Relu,
        Op::Linear { in_features: 16, out_features: 8, bias: true },
        Op::BatchNorm1d(NormSpec::new(8)),
        Op::Relu,
        Op::Linear { in_features: 8, out_features: 8, bias: true },
        Op::BatchNorm1d(NormSpec::new(8)),
        Op::Relu,
        Op::Linear { in_features: 8, out_features: 5, bias: true },
        Op::BatchNorm1d(NormSpec::new(5)),
        Op::Relu,
    ];
    for (i, op) in layers.into_iter().enumerate() {
        v = g.call_module(&format!("seq_blocks.{i}"), op, &[v]);
    }
    g.output(v);
    g
}

/// Reads the text fixture format `name count v1 v2 ...`, one tensor per line.
pub fn read_text_fixture(name: &str) -> HashMap<String, Vec<f32>> {
    let text = std::fs::read_to_string(fixture(name)).expect("fixture is readable");
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let mut it = l.split_whitespace();
            let key = it.next().expect("name").to_string();
            let count: usize = it.next().expect("count").parse().expect("count is an integer");
            let vals: Vec<f32> = it.map(|v| v.parse().expect("value is a float")).collect();
            assert_eq!(vals.len(), count, "{key}");
            (key, vals)
        })
        .collect()
}

/// A parameter store for `graph` whose tensors come from `get("<prefix>.<state-dict name>")`.
pub fn store_from(graph: &Graph, get: impl Fn(&str) -> Vec<f32>) -> ParamStore {
    let mut store = ParamStore::new();
    for (name, spec) in graph.param_specs() {
        store.insert(
            name.clone(),
            Tensor::new(spec.shape.clone(), get(&name)).expect("fixture tensor has the spec's size"),
            spec.trainable,
        );
    }
    store
}

/// Largest error of `got` against `want`, absolute below 1 and relative above.
pub fn max_err(got: &[f32], want: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len());
    got.iter().zip(want).map(|(a, b)| (a - b).abs() / b.abs().max(1.0)).fold(0.0, f32::max)
}

/// `graph` with `quant(node)` set on every node it returns formats for.
pub fn with_quant(mut graph: Graph, quant: impl Fn(&mase_ir::Node) -> Option<mase_ir::NodeQuant>) -> Graph {
    for n in graph.nodes_mut() {
        if let Some(q) = quant(n) {
            n.quant = Some(q);
        }
    }
    graph
}

/// The same `integer` format on the data input, weight and bias of every linear layer (the
/// fake-quant jsc-toy of the benchmark).
pub fn quantize_linears(graph: Graph, width: u32, frac_width: i32) -> Graph {
    let f = mase_ir::QuantFormat::Integer { width, frac_width, signed: true };
    with_quant(graph, |n| {
        matches!(n.op, Op::Linear { .. }).then(|| mase_ir::NodeQuant {
            data_in: vec![Some(f.clone())],
            weight: Some(f.clone()),
            bias: Some(f.clone()),
            ..Default::default()
        })
    })
}

/// The values of `got` that `same` does not accept against PyTorch's `want`, as one line
/// (`case.what: [i] got vs torch want, ...`), or `None`. Panics when the lengths differ.
pub fn mismatches(case: &str, what: &str, got: &[f32], want: &[f32], same: impl Fn(f32, f32) -> bool) -> Option<String> {
    assert_eq!(got.len(), want.len(), "{case}.{what}: length");
    let bad: Vec<String> = got
        .iter()
        .zip(want)
        .enumerate()
        .filter(|(_, (g, w))| !same(**g, **w))
        .map(|(i, (g, w))| format!("[{i}] {g:?} vs torch {w:?}"))
        .collect();
    (!bad.is_empty()).then(|| format!("{case}.{what}: {}", bad.join(", ")))
}
