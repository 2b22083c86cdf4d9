//! The shape and indexing ops against PyTorch: `tests/fixtures/shape_ops.txt` (made by
//! `scripts/make_shape_references.py`) holds, per case, an input counting 0, 1, 2, ... with NaN,
//! ±inf and -0.0 in its first places, PyTorch's output, an output gradient and PyTorch's input
//! gradient. Each line of the table builds the case's graph; every value must be PyTorch's bit
//! for bit (these ops move values and add gradients, in the same order as PyTorch here).

mod common;

use common::read_text_fixture;
use mase_ir::{items_at, DimArg, Graph, IndexItem, NodeId, Op, ParamStore, SizeOp};
use mase_runtime::{ExecOptions, Executor, Mode};

type Fixture = std::collections::HashMap<String, Vec<f32>>;

/// Builds a case's graph from its input node, returning the output value.
type Build = Box<dyn Fn(&mut Graph, NodeId) -> NodeId>;

fn slice(start: Option<i64>, end: Option<i64>, step: usize) -> IndexItem {
    IndexItem::Slice { start, end, step }
}

/// One op applied to the input.
fn op(op: Op) -> Build {
    Box::new(move |g, x| g.call_function("f", op.clone(), &[x]))
}

/// `torch.stack` / `torch.cat` of `k` copies of the input.
fn of_copies(k: usize, op: Op) -> Build {
    Box::new(move |g, x| g.call_function("f", op.clone(), &vec![x; k]))
}

/// torchvision's `channel_shuffle(x, 2)`: `view(n, 2, c // 2, h, w)`, `transpose(1, 2)`,
/// `view(n, c, h, w)`, with every size computed from `x.size()`.
fn channel_shuffle(g: &mut Graph, x: NodeId) -> NodeId {
    let [n, c, h, w] = [0, 1, 2, 3].map(|d| g.call_method("size", Op::Size { dim: d }, &[x]));
    let half = Op::SizeArith { arith: SizeOp::FloorDiv, args: [DimArg::Input(0), DimArg::Const(2)] };
    let half = g.call_function("operator.floordiv", half, &[c]);
    let five = vec![DimArg::Input(1), DimArg::Const(2), DimArg::Input(2), DimArg::Input(3), DimArg::Input(4)];
    let v = g.call_method("view", Op::Reshape { shape: five }, &[x, n, half, h, w]);
    let t = g.call_function("torch.transpose", Op::Transpose { dim0: 1, dim1: 2 }, &[v]);
    let four = (1..=4).map(DimArg::Input).collect();
    g.call_method("view", Op::Reshape { shape: four }, &[t, n, c, h, w])
}

/// Whether `got` is `want` bit for bit (any NaN meets any NaN).
fn same(got: f32, want: f32) -> bool {
    (got.is_nan() && want.is_nan()) || got.to_bits() == want.to_bits()
}

fn mismatches(case: &str, what: &str, got: &[f32], want: &[f32]) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{case}.{what}: {} values, torch {}", got.len(), want.len()));
    }
    common::mismatches(case, what, got, want, same)
}

fn check(fx: &Fixture, case: &str, build: &dyn Fn(&mut Graph, NodeId) -> NodeId) -> Vec<String> {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let y = build(&mut g, x);
    g.output(y);
    let mut exec = Executor::new(&g, &ParamStore::new(), ExecOptions { threads: 1, seed: 0 }).unwrap_or_else(|e| panic!("{case}: {e}"));
    exec.set_keep_input_grad(true);
    let shape: Vec<usize> = fx[&format!("{case}.shape")].iter().map(|&v| v as usize).collect();
    let out = exec.forward(&fx[&format!("{case}.x")], &shape, Mode::Train).unwrap_or_else(|e| panic!("{case}: {e}")).to_vec();
    let mut bad: Vec<String> = mismatches(case, "y", &out, &fx[&format!("{case}.y")]).into_iter().collect();
    exec.backward(&fx[&format!("{case}.dy")]).unwrap_or_else(|e| panic!("{case}: {e}"));
    bad.extend(mismatches(case, "dx", exec.input_grad().expect("input gradient kept"), &fx[&format!("{case}.dx")]));
    bad
}

#[test]
fn shape_and_indexing_ops_match_pytorch() {
    use IndexItem::{Chunk, Ellipsis, NewAxis, Select};
    let fx = read_text_fixture("shape_ops.txt");
    let full = IndexItem::full;
    let index = |items| op(Op::Index { items });
    let c = DimArg::Const;
    let cases: Vec<(&str, Build)> = vec![
        ("select_1", index(vec![full(), Select(0)])),
        ("slice_step_new_axis", index(vec![Ellipsis, slice(Some(1), None, 2), NewAxis])),
        ("slice_negative", index(vec![full(), slice(Some(-3), Some(-1), 1), slice(None, None, 3)])),
        ("select_last_ellipsis", index(vec![Ellipsis, Select(-1)])),
        ("chunk_2_dim_1_piece_1", index(items_at(1, Chunk { chunks: 2, index: 1 }))),
        ("chunk_3_last_piece_2", index(items_at(-1, Chunk { chunks: 3, index: 2 }))),
        ("split_sizes_piece_1", index(items_at(1, slice(Some(1), Some(4), 1)))),
        ("split_2_piece_1", index(items_at(0, slice(Some(2), Some(4), 1)))),
        ("unbind_last_2", index(items_at(-1, Select(2)))),
        ("expand", op(Op::Expand { shape: vec![c(2), c(-1), c(4), c(-1)] })),
        ("repeat", op(Op::Repeat { repeats: vec![2, 1, 3] })),
        ("stack_last", of_copies(2, Op::Stack { dim: -1 })),
        ("stack_0", of_copies(3, Op::Stack { dim: 0 })),
        ("cat_negative", of_copies(2, Op::Concat { dim: -2 })),
        ("flatten_1_2", op(Op::Flatten { start_dim: 1, end_dim: 2 })),
        ("channel_shuffle", Box::new(channel_shuffle)),
    ];
    let bad: Vec<String> = cases.iter().flat_map(|(case, build)| check(&fx, case, build.as_ref())).collect();
    assert!(bad.is_empty(), "{} mismatches:\n{}", bad.len(), bad.join("\n"));
}
