//! What the executor knows about a graph before any batch shape: where each value lives, which
//! parameter slots each node uses, and how gradients flow (the part of the plan that does not
//! depend on the batch).

use crate::kernels::Accum;
use crate::slots::ParamSlot;
use crate::{Result, RuntimeError};
use mase_ir::{Graph, IrError, NodeKind, Op};
use std::collections::HashMap;

/// Batch-independent wiring of a graph.
#[derive(Clone, Debug)]
pub(crate) struct Topo {
    /// The first graph input (placeholder) and the output node.
    pub input: usize,
    pub output: usize,
    /// Every graph input (placeholder), in order.
    pub inputs: Vec<usize>,
    /// The values the graph returns, in order (the output node's inputs).
    pub outputs: Vec<usize>,
    /// Node whose buffer holds each node's value: itself, or for `output`, `flatten` and `view`
    /// the storage of its data input, because those only reinterpret a contiguous buffer.
    pub storage: Vec<usize>,
    /// Storage of each input of each node.
    pub ins: Vec<Vec<usize>>,
    /// Parameter slots of each node: a module's tensors in `param_specs` order, or the slot a
    /// `get_attr` reads.
    pub slots: Vec<Vec<usize>>,
    /// Whether the node's value is a tensor (`size` gives an integer).
    pub is_tensor: Vec<bool>,
}

/// Whether a node's value is its first input's buffer under another shape: reshapes, and
/// dropout with `p = 0`, the identity in training too (as PyTorch returns its input).
pub(crate) fn is_alias(op: &Op) -> bool {
    matches!(op, Op::Output | Op::Flatten { .. } | Op::Reshape { .. }) || matches!(op, Op::Dropout { p } if *p == 0.0)
}

impl Topo {
    pub fn new(graph: &Graph, params: &[ParamSlot]) -> Result<Topo> {
        let inputs: Vec<usize> = graph.inputs().iter().map(|i| i.0).collect();
        let Some(&input) = inputs.first() else {
            return Err(RuntimeError::InputCount { count: 0 });
        };
        let output = graph.output_node()?.0;
        let outputs: Vec<usize> = graph.node(mase_ir::NodeId(output)).inputs.iter().map(|i| i.0).collect();
        // A returned size is a Python integer; the executor's outputs are tensors.
        if let Some((k, &o)) = outputs.iter().enumerate().find(|(_, &o)| graph.nodes()[o].op.gives_int()) {
            return Err(RuntimeError::IntegerOutput { index: k, node: graph.nodes()[o].name.clone() });
        }
        let by_name: HashMap<&str, usize> = params.iter().enumerate().map(|(i, s)| (s.name.as_str(), i)).collect();
        let slot = |name: &str| {
            by_name
                .get(name)
                .copied()
                .ok_or_else(|| IrError::Param { name: name.to_string(), reason: "missing from the parameter store".into() })
        };
        let n = graph.len();
        let mut storage = Vec::with_capacity(n);
        let mut ins = Vec::with_capacity(n);
        let mut slots = Vec::with_capacity(n);
        let mut is_tensor = Vec::with_capacity(n);
        for (i, node) in graph.nodes().iter().enumerate() {
            let node_ins: Vec<usize> = node.inputs.iter().map(|u| storage[u.0]).collect();
            storage.push(if is_alias(&node.op) { node_ins[0] } else { i });
            ins.push(node_ins);
            slots.push(match node.kind {
                NodeKind::GetAttr => vec![slot(&node.target)?],
                _ => node.params().iter().map(|(name, _)| slot(name)).collect::<Result<_, _>>()?,
            });
            is_tensor.push(!node.op.gives_int());
        }
        Ok(Topo { input, output, inputs, outputs, storage, ins, slots, is_tensor })
    }
}

/// How one node takes part in backward.
#[derive(Clone, Debug, Default)]
pub(crate) struct NodeGrad {
    /// Whether its backward runs at all.
    pub active: bool,
    /// How to store its parameters' gradients, if any are trainable.
    pub param_acc: Option<Accum>,
    /// How to store each input's gradient, or `None` when the input needs none.
    pub input_acc: Vec<Option<Accum>>,
}

/// The gradient flow of a graph: which backward kernels run and whether each one writes or adds
/// to its target buffer.
#[derive(Clone, Debug)]
pub(crate) struct GradPlan {
    pub nodes: Vec<NodeGrad>,
    /// Whether each parameter slot receives a gradient.
    pub reached: Vec<bool>,
    /// Whether backward writes each value buffer (by storage): a graph input's gradient is
    /// `None` where nothing differentiable reads it.
    pub written: Vec<bool>,
}

impl GradPlan {
    /// `keep_input_grad` asks for the gradient of the graph input as well.
    pub fn new(graph: &Graph, topo: &Topo, params: &[ParamSlot], keep_input_grad: bool) -> GradPlan {
        let nodes = graph.nodes();
        // Forward sweep: which values depend on something trainable (PyTorch's requires_grad).
        let mut requires = vec![false; nodes.len()];
        for (i, node) in nodes.iter().enumerate() {
            requires[i] = match node.op {
                Op::Input => keep_input_grad,
                Op::Size { .. } | Op::SizeArith { .. } => false,
                _ => topo.slots[i].iter().any(|&s| params[s].trainable) || node.inputs.iter().any(|u| requires[u.0]),
            };
        }
        // Backward sweep: the first contribution to a buffer writes it, later ones add.
        // Every output's gradient is given; a later contribution to the same buffer adds to it.
        let mut seen = vec![false; nodes.len()];
        for &o in &topo.outputs {
            seen[topo.storage[o]] = true;
        }
        let mut param_seen = vec![false; params.len()];
        let mut plan = vec![NodeGrad::default(); nodes.len()];
        for i in (0..nodes.len()).rev() {
            let node = &nodes[i];
            if is_alias(&node.op) || matches!(node.op, Op::Input) || node.op.gives_int() || !requires[i] || !seen[i] {
                continue;
            }
            let g = &mut plan[i];
            g.active = true;
            let trainable: Vec<usize> = topo.slots[i].iter().copied().filter(|&s| params[s].trainable).collect();
            if let Some(&first) = trainable.first() {
                g.param_acc = Some(if param_seen[first] { Accum::Add } else { Accum::Write });
                for s in trainable {
                    param_seen[s] = true;
                }
            }
            g.input_acc = node
                .inputs
                .iter()
                .enumerate()
                .map(|(k, u)| {
                    if !requires[u.0] || !topo.is_tensor[u.0] {
                        return None;
                    }
                    let s = topo.ins[i][k];
                    let acc = if seen[s] { Accum::Add } else { Accum::Write };
                    seen[s] = true;
                    Some(acc)
                })
                .collect();
        }
        GradPlan { nodes: plan, reached: param_seen, written: seen }
    }
}
