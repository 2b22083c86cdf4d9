//! The exact GELU as torch.onnx writes it before opset 20, which has no `Gelu` operator:
//! `Div(x, sqrt 2) -> Erf -> Add 1 -> Mul x -> Mul 0.5`. The chain is found before import and
//! becomes one `gelu` node (exact) named after its last `Mul`. ONNX's `Erf` is imported only
//! inside that chain: the IR has no `erf` op of its own.

use crate::onnx::proto::{GraphProto, NodeProto};
use crate::onnx::tensor::from_proto;
use std::collections::{HashMap, HashSet};

/// The GELU chains of a graph.
#[derive(Debug, Default)]
pub(crate) struct ErfGelus {
    /// Index of each chain's last `Mul`, with the name of the value the GELU reads.
    pub last: HashMap<usize, String>,
    /// Indices of the chains' other nodes (the `Div`, `Erf`, `Add` and first `Mul`), which
    /// import skips.
    pub inner: HashSet<usize>,
}

/// Whether `a` or `b` is the scalar `want` (to 1e-6 relative), and the other operand's name.
fn with_const<'a>(n: &'a NodeProto, want: f32, consts: &HashMap<&str, f32>) -> Option<&'a str> {
    let [a, b] = &n.input[..] else { return None };
    let is = |v: &str| consts.get(v).is_some_and(|c| (c - want).abs() <= 1e-6 * want.abs());
    match (is(a), is(b)) {
        (false, true) => Some(a),
        (true, false) => Some(b),
        _ => None,
    }
}

/// Finds every `Div(x, sqrt 2) -> Erf -> Add 1 -> Mul x -> Mul 0.5` chain whose inner values
/// nothing else reads (the `Add` and both `Mul`s may take their operands in either order).
pub(crate) fn find(graph: &GraphProto) -> ErfGelus {
    // Scalar constants by value name: initializers and `Constant` nodes with a one-element
    // float `value`.
    let mut consts: HashMap<&str, f32> = HashMap::new();
    for t in &graph.initializer {
        if let Some(v) = from_proto(t).ok().filter(|c| c.is_float()).and_then(|c| c.scalar_f32()) {
            consts.insert(t.name.as_str(), v);
        }
    }
    for n in graph.node.iter().filter(|n| n.op_type == "Constant") {
        let value = n.attribute.iter().find(|a| a.name == "value").and_then(|a| a.t.as_ref()).and_then(|t| from_proto(t).ok());
        if let (Some(v), Some(out)) = (value.filter(|c| c.is_float()).and_then(|c| c.scalar_f32()), n.output.first()) {
            consts.insert(out.as_str(), v);
        }
    }
    let mut reads: HashMap<&str, usize> = HashMap::new();
    for i in graph.node.iter().flat_map(|n| &n.input).chain(graph.output.iter().map(|o| &o.name)) {
        *reads.entry(i.as_str()).or_default() += 1;
    }
    // The only node reading `value`, when exactly one node reads it once.
    let only_reader = |value: &str, op: &str| -> Option<usize> {
        if reads.get(value) != Some(&1) {
            return None;
        }
        graph.node.iter().position(|n| n.input.iter().any(|i| i == value)).filter(|&k| graph.node[k].op_type == op)
    };
    let standard = |n: &NodeProto| n.domain.is_empty() || n.domain == "ai.onnx";
    let mut found = ErfGelus::default();
    for (d, div) in graph.node.iter().enumerate() {
        if div.op_type != "Div" || !standard(div) || div.input.len() != 2 {
            continue;
        }
        let x = &div.input[0];
        if consts.get(div.input[1].as_str()).is_none_or(|c| (c - std::f32::consts::SQRT_2).abs() > 1e-6) || consts.contains_key(x.as_str())
        {
            continue;
        }
        let chain = (|| {
            let e = only_reader(div.output.first()?, "Erf")?;
            let a = only_reader(graph.node[e].output.first()?, "Add")?;
            (with_const(&graph.node[a], 1.0, &consts)? == graph.node[e].output[0]).then_some(())?;
            let m = only_reader(graph.node[a].output.first()?, "Mul")?;
            let [p, q] = &graph.node[m].input[..] else { return None };
            let other = if *p == graph.node[a].output[0] { q } else { p };
            (other == x).then_some(())?;
            let last = only_reader(graph.node[m].output.first()?, "Mul")?;
            (with_const(&graph.node[last], 0.5, &consts)? == graph.node[m].output[0]).then_some(())?;
            [e, a, m, last].iter().all(|&k| standard(&graph.node[k])).then_some([e, a, m, last])
        })();
        if let Some([e, a, m, last]) = chain {
            found.last.insert(last, x.clone());
            found.inner.extend([d, e, a, m]);
        }
    }
    found
}
