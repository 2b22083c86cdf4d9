//! `print(graph)` in torch.fx's format.

use crate::graph::{Graph, NodeKind};
use crate::op::{DimArg, Op};
use std::fmt;

/// Positional arguments after the data inputs and keyword arguments, as fx records them.
fn extra_args(kind: NodeKind, op: &Op) -> (Vec<String>, Vec<String>) {
    let kw = |k: &str, v: String| format!("{k}: {v}");
    match (kind, op) {
        (NodeKind::CallFunction, Op::Relu) => (vec![], vec![kw("inplace", "False".into())]),
        (_, Op::Flatten { start_dim, end_dim }) if kind != NodeKind::CallModule => {
            let mut a = vec![start_dim.to_string()];
            if *end_dim != -1 {
                a.push(end_dim.to_string());
            }
            (a, vec![])
        }
        (_, Op::Size { dim }) => (vec![dim.to_string()], vec![]),
        (_, Op::Transpose { dim0, dim1 }) => (vec![dim0.to_string(), dim1.to_string()], vec![]),
        (_, Op::Permute { dims }) => (dims.iter().map(|d| d.to_string()).collect(), vec![]),
        (NodeKind::CallFunction, Op::Softmax { dim } | Op::LogSoftmax { dim }) => (vec![], vec![kw("dim", dim.to_string())]),
        (NodeKind::CallFunction, Op::Dropout { p }) => (vec![], vec![kw("p", crate::op::py_float(*p)), kw("training", "False".into())]),
        (NodeKind::CallFunction, Op::StochasticDepth { p, mode }) => {
            (vec![], vec![kw("p", crate::op::py_float(*p)), kw("mode", format!("'{}'", mode.name())), kw("training", "False".into())])
        }
        (NodeKind::CallFunction, Op::Softplus { beta, threshold }) => {
            (vec![], vec![kw("beta", crate::op::py_float(*beta)), kw("threshold", crate::op::py_float(*threshold))])
        }
        // `x.mean([2, 3], keepdim=True)`; `x.mean()` of every element has no arguments.
        (_, Op::Mean(r) | Op::Sum(r) | Op::Amax(r)) if kind != NodeKind::CallModule => {
            let dims = if r.dims.is_empty() { vec![] } else { vec![format!("{:?}", r.dims)] };
            (dims, if r.keepdim { vec![kw("keepdim", "True".into())] } else { vec![] })
        }
        _ => (vec![], vec![]),
    }
}

impl fmt::Display for Graph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "graph():")?;
        for id in self.ids() {
            let n = self.node(id);
            let users = self.users(id).len();
            match n.kind {
                NodeKind::Output => {
                    // Several outputs print as fx prints a returned tuple.
                    let names: Vec<&str> = n.inputs.iter().map(|i| self.node(*i).name.as_str()).collect();
                    match names[..] {
                        [] => writeln!(f, "    return None")?,
                        [v] => writeln!(f, "    return {v}")?,
                        _ => writeln!(f, "    return ({})", names.join(", "))?,
                    }
                }
                NodeKind::Placeholder | NodeKind::GetAttr => {
                    writeln!(f, "    %{} : [num_users={users}] = {}[target={}]", n.name, n.kind.as_str(), n.target)?;
                }
                _ => {
                    let mut args: Vec<String> = Vec::new();
                    if let Op::Reshape { shape } = &n.op {
                        args.push(format!("%{}", self.node(n.inputs[0]).name));
                        for d in shape {
                            args.push(match d {
                                DimArg::Const(v) => v.to_string(),
                                DimArg::Input(k) => format!("%{}", self.node(n.inputs[*k]).name),
                            });
                        }
                    } else {
                        args.extend(n.inputs.iter().map(|i| format!("%{}", self.node(*i).name)));
                    }
                    let (extra, kwargs) = extra_args(n.kind, &n.op);
                    args.extend(extra);
                    let args = if args.len() == 1 { format!("({},)", args[0]) } else { format!("({})", args.join(", ")) };
                    writeln!(
                        f,
                        "    %{} : [num_users={users}] = {}[target={}](args = {args}, kwargs = {{{}}})",
                        n.name,
                        n.kind.as_str(),
                        n.target,
                        kwargs.join(", ")
                    )?;
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::{Graph, NormSpec, Op};

    #[test]
    fn prints_like_torch_fx() {
        let mut g = Graph::new();
        let x = g.placeholder("x");
        let a = g.call_module("seq_blocks.0", Op::BatchNorm1d(NormSpec::new(16)), &[x]);
        let b = g.call_function("torch.nn.functional.relu", Op::Relu, &[a]);
        g.output(b);
        let want = "graph():\n    %x : [num_users=1] = placeholder[target=x]\n    %seq_blocks_0 : [num_users=1] = call_module[target=seq_blocks.0](args = (%x,), kwargs = {})\n    %relu : [num_users=1] = call_function[target=torch.nn.functional.relu](args = (%seq_blocks_0,), kwargs = {inplace: False})\n    return relu\n";
        assert_eq!(g.to_string(), want);
    }
}
