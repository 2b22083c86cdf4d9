//! MASE's `mase_type` and `mase_op` of a node (doc/mase-semantics.md#mase_type-and-mase_op).
//!
//! MASE matches the fx node *name* against lists of patterns, so the second `torch.matmul`
//! (`matmul_1`, which contains `mul_`) becomes `mul`, `nn.ReLU6` becomes `hardtanh`, and any op it
//! has no pattern for raises. Here the class follows from the op itself, and the fx kind only
//! decides between the module and function spellings. The differences, on purpose:
//! - `matmul_1` is `matmul` (and `torch.bmm` is `bmm`), whatever the node is called;
//! - `nn.ReLU6` is `relu6`;
//! - every `get_attr` node has `mase_op = "constant"` (MASE sets none unless the name matches a
//!   pattern; MASE's HEAD agrees with us);
//! - `nn.Flatten` is an `implicit_func` like `torch.flatten` (MASE C raises on it);
//! - activations MASE has no pattern for (sigmoid, tanh, gelu, ...) are `module_related_func`
//!   when called as functions, and methods that compute (`x.add(y)`) are typed like the function.

use mase_ir::{Node, NodeKind, Op};
use regex::Regex;
use std::sync::OnceLock;

/// MASE's `mase_type` values.
pub const MASE_TYPES: [&str; 7] = ["module", "module_related_func", "builtin_func", "implicit_func", "placeholder", "get_attr", "output"];

/// `(mase_type, mase_op)` of a node.
pub fn classify(node: &Node) -> (&'static str, String) {
    let call = match node.kind {
        NodeKind::Placeholder => return ("placeholder", "placeholder".into()),
        NodeKind::Output => return ("output", "output".into()),
        NodeKind::GetAttr => return (if constant_name(&node.name) { "implicit_func" } else { "get_attr" }, "constant".into()),
        NodeKind::CallModule => Call::Module,
        NodeKind::CallFunction | NodeKind::CallMethod => Call::Function,
    };
    let last = node.target.rsplit('.').next().unwrap_or(&node.target).trim_matches('_');
    let op = match &node.op {
        Op::MatMul if last == "bmm" => "bmm".into(),
        Op::Reshape { .. } if last == "reshape" && call == Call::Function => "reshape".into(),
        op => op.mase_op().into(),
    };
    (mase_type(&node.op, call), op)
}

/// How a node calls its op.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Call {
    Module,
    Function,
}

/// MASE's `mase_type` of an op called as a module or as a function (or tensor method).
fn mase_type(op: &Op, call: Call) -> &'static str {
    let module = call == Call::Module;
    match op {
        Op::BatchNorm1d(_) | Op::BatchNorm2d(_) if module => "module",
        Op::Flatten { .. } => "implicit_func",
        Op::Add | Op::Sub | Op::Mul | Op::MatMul if !module => "builtin_func",
        Op::Reshape { .. } | Op::Transpose { .. } | Op::Permute { .. } | Op::Size { .. } | Op::Dropout { .. } if !module => "implicit_func",
        Op::Softmax { .. } | Op::LogSoftmax { .. } if !module => "implicit_func",
        // MASE lists `getitem` and `stack` among its implicit functions; expand, repeat and
        // arithmetic on sizes are bookkeeping of the same kind.
        Op::Index { .. } | Op::Stack { .. } | Op::Expand { .. } | Op::Repeat { .. } | Op::SizeArith { .. } if !module => "implicit_func",
        // Layers, activations that MASE has no pattern for, and the ops above called the other
        // way (a graph built by hand may call any op as a module), of every family.
        _ => "module_related_func",
    }
}

/// MASE's patterns for `get_attr` nodes that hold constants (doc/mase-semantics.md#mase_type-and-mase_op).
fn constant_name(name: &str) -> bool {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(r"^(_tensor_constant\d+|(block|seq_blocks|linear|conv2d)(_\d+)?(_\d+)?_(weight|bias|gamma|means|pruning_masks))").ok()
    });
    re.as_ref().is_some_and(|r| r.is_match(name))
}

/// Python class name of what the node calls, as MASE's quantization summary prints it: the
/// module class for modules, the function's `__name__` for functions, the method or target name
/// otherwise.
pub fn type_str(node: &Node) -> String {
    match node.kind {
        NodeKind::CallModule => node.op.module_class().unwrap_or("Module").to_string(),
        NodeKind::CallFunction => node.target.rsplit('.').next().unwrap_or(&node.target).to_string(),
        NodeKind::CallMethod | NodeKind::Placeholder | NodeKind::GetAttr | NodeKind::Output => node.target.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mase_ir::{Graph, NormSpec};

    #[test]
    fn classes_follow_the_op() {
        let mut g = Graph::new();
        let x = g.placeholder("x");
        let bn = g.call_module("seq_blocks.0", Op::BatchNorm1d(NormSpec::new(4)), &[x]);
        let m0 = g.call_function("torch.matmul", Op::MatMul, &[bn, bn]);
        let m1 = g.call_function("torch.matmul", Op::MatMul, &[m0, m0]);
        let b = g.call_function("torch.bmm", Op::MatMul, &[m1, m1]);
        let r6 = g.call_module("act", Op::Relu6, &[b]);
        let fl = g.call_method("flatten", Op::Flatten { start_dim: 1, end_dim: -1 }, &[r6]);
        let s = g.call_function("torch.sigmoid", Op::Sigmoid, &[fl]);
        let add = g.call_method("add", Op::Add, &[s, s]);
        let c = g.get_attr("_tensor_constant0");
        let w = g.get_attr("scale");
        let o = g.output(add);
        let want = [
            (x, "placeholder", "placeholder"),
            (bn, "module", "batch_norm1d"),
            (m0, "builtin_func", "matmul"),
            (m1, "builtin_func", "matmul"),
            (b, "builtin_func", "bmm"),
            (r6, "module_related_func", "relu6"),
            (fl, "implicit_func", "flatten"),
            (s, "module_related_func", "sigmoid"),
            (add, "builtin_func", "add"),
            (c, "implicit_func", "constant"),
            (w, "get_attr", "constant"),
            (o, "output", "output"),
        ];
        for (id, ty, op) in want {
            let n = g.node(id);
            assert_eq!(classify(n), (ty, op.to_string()), "{}", n.name);
        }
        assert_eq!(g.node(m1).name, "matmul_1", "the name MASE misclassifies as mul");
    }
}
