//! The graph: fx-style nodes in execution order.

use crate::meta::{GraphMeta, NodeMeta};
use crate::naming::Namer;
use crate::op::{Init, Op, ParamSpec};
use crate::shape::ValueInfo;
use crate::{IrError, Result};
use serde::{Deserialize, Serialize};

/// Index of a node in its graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NodeId(pub usize);

/// torch.fx's `node.op`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeKind {
    Placeholder,
    GetAttr,
    CallFunction,
    CallMethod,
    CallModule,
    Output,
}

impl NodeKind {
    /// The fx spelling (`call_module`).
    pub fn as_str(self) -> &'static str {
        match self {
            NodeKind::Placeholder => "placeholder",
            NodeKind::GetAttr => "get_attr",
            NodeKind::CallFunction => "call_function",
            NodeKind::CallMethod => "call_method",
            NodeKind::CallModule => "call_module",
            NodeKind::Output => "output",
        }
    }

    pub const ALL: [NodeKind; 6] =
        [NodeKind::Placeholder, NodeKind::GetAttr, NodeKind::CallFunction, NodeKind::CallMethod, NodeKind::CallModule, NodeKind::Output];
}

/// One node: a value computed by `op` from the values of `inputs`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Unique, torch.fx-compatible name (`seq_blocks_2`).
    pub name: String,
    pub kind: NodeKind,
    /// fx target: the module path for `call_module` (`seq_blocks.2`), the qualified function for
    /// `call_function` (`torch.nn.functional.relu`), the method name for `call_method`, the
    /// argument name for `placeholder`, the attribute path for `get_attr`.
    pub target: String,
    pub inputs: Vec<NodeId>,
    pub op: Op,
    /// Number formats applied to this node's operands, when it is quantized.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quant: Option<crate::NodeQuant>,
    #[serde(default)]
    pub meta: NodeMeta,
}

impl Node {
    /// State-dict names and specs of the tensors this node owns (`seq_blocks.2.weight`, ...).
    pub fn params(&self) -> Vec<(String, ParamSpec)> {
        match self.kind {
            NodeKind::CallModule => self.op.param_specs().into_iter().map(|s| (format!("{}.{}", self.target, s.name), s)).collect(),
            _ => Vec::new(),
        }
    }
}

/// A tensor that the graph owns itself rather than a module: an `nn.Parameter` set directly on
/// a model (a ViT's `class_token`, `encoder.pos_embedding`) or on a module the graph spells out
/// as its ops (`nn.MultiheadAttention`'s packed `in_proj_weight`). A `get_attr` node reads it at
/// `target`, which is its state-dict name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GraphParam {
    pub target: String,
    pub shape: Vec<usize>,
    pub trainable: bool,
    pub init: Init,
}

#[derive(Deserialize)]
struct GraphRepr {
    nodes: Vec<Node>,
    #[serde(default)]
    meta: GraphMeta,
    #[serde(default)]
    params: Vec<GraphParam>,
}

impl From<GraphRepr> for Graph {
    fn from(r: GraphRepr) -> Graph {
        let mut namer = Namer::new();
        for n in &r.nodes {
            namer.reserve(&n.name);
        }
        Graph { nodes: r.nodes, meta: r.meta, params: r.params, namer }
    }
}

/// A static computation graph; nodes are stored in topological order.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(from = "GraphRepr")]
pub struct Graph {
    nodes: Vec<Node>,
    pub meta: GraphMeta,
    /// The tensors the graph owns itself ([`Graph::parameter`]); graphs without any (every
    /// traced or imported one, whose `get_attr` tensors come with them) write no `params` key.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    params: Vec<GraphParam>,
    #[serde(skip)]
    namer: Namer,
}

impl PartialEq for Graph {
    fn eq(&self, other: &Graph) -> bool {
        self.nodes == other.nodes && self.meta == other.meta && self.params == other.params
    }
}

impl Graph {
    pub fn new() -> Graph {
        Graph::default()
    }

    fn push(&mut self, candidate: &str, kind: NodeKind, target: String, op: Op, inputs: &[NodeId]) -> NodeId {
        let name = self.namer.create(candidate);
        let id = NodeId(self.nodes.len());
        self.nodes.push(Node { name, kind, target, inputs: inputs.to_vec(), op, quant: None, meta: NodeMeta::default() });
        id
    }

    /// A graph input called `name`.
    pub fn placeholder(&mut self, name: &str) -> NodeId {
        self.push(name, NodeKind::Placeholder, name.to_string(), Op::Input, &[])
    }

    /// A module call; `target` is the module path (`seq_blocks.0`), whose parameters are
    /// `<target>.weight` etc. in the parameter store.
    pub fn call_module(&mut self, target: &str, op: Op, inputs: &[NodeId]) -> NodeId {
        self.push(target, NodeKind::CallModule, target.to_string(), op, inputs)
    }

    /// A function call; the node is named after the last component of `target`
    /// (`torch.nn.functional.relu` -> `relu`, `operator.add` -> `add`).
    pub fn call_function(&mut self, target: &str, op: Op, inputs: &[NodeId]) -> NodeId {
        let short = target.rsplit('.').next().unwrap_or(target).trim_matches('_');
        self.push(&crate::snake_case(short), NodeKind::CallFunction, target.to_string(), op, inputs)
    }

    /// A tensor method call (`view`, `size`, `flatten`).
    pub fn call_method(&mut self, method: &str, op: Op, inputs: &[NodeId]) -> NodeId {
        self.push(&crate::snake_case(method), NodeKind::CallMethod, method.to_string(), op, inputs)
    }

    /// A constant tensor stored in the parameter store under `target`.
    pub fn get_attr(&mut self, target: &str) -> NodeId {
        self.push(target, NodeKind::GetAttr, target.to_string(), Op::Constant, &[])
    }

    /// A tensor the graph owns (see [`GraphParam`]), read by the `get_attr` node this returns:
    /// `target` is its state-dict name, and [`Graph::param_specs`] lists it, so that a model
    /// built from scratch draws it by `init` like a module's weight. A second call with the same
    /// target reads the same tensor (as fx makes one `get_attr` node per read).
    pub fn parameter(&mut self, target: &str, shape: Vec<usize>, trainable: bool, init: Init) -> NodeId {
        if !self.params.iter().any(|p| p.target == target) {
            self.params.push(GraphParam { target: target.to_string(), shape, trainable, init });
        }
        self.get_attr(target)
    }

    /// The tensors the graph owns itself, in the order they were declared.
    pub fn graph_params(&self) -> &[GraphParam] {
        &self.params
    }

    /// A node with a name of the caller's choosing (made unique and fx-compatible by the namer),
    /// for importers that keep the names of another format (ONNX node names).
    pub fn add_node(&mut self, name: &str, kind: NodeKind, target: &str, op: Op, inputs: &[NodeId]) -> NodeId {
        self.push(name, kind, target.to_string(), op, inputs)
    }

    /// The graph output.
    pub fn output(&mut self, value: NodeId) -> NodeId {
        self.outputs(&[value])
    }

    /// The graph's outputs, in order: a forward returning the tuple `(a, b)` gives one `output`
    /// node whose inputs are `a` and `b` (torch.fx's `return (a, b)`).
    pub fn outputs(&mut self, values: &[NodeId]) -> NodeId {
        self.push("output", NodeKind::Output, "output".to_string(), Op::Output, values)
    }

    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    pub fn nodes_mut(&mut self) -> &mut [Node] {
        &mut self.nodes
    }

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.0]
    }

    pub fn node_mut(&mut self, id: NodeId) -> &mut Node {
        &mut self.nodes[id.0]
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    pub fn ids(&self) -> impl Iterator<Item = NodeId> {
        (0..self.nodes.len()).map(NodeId)
    }

    /// The node called `name`.
    pub fn find(&self, name: &str) -> Option<NodeId> {
        self.nodes.iter().position(|n| n.name == name).map(NodeId)
    }

    /// The node called `name`, or an error naming it.
    pub fn require(&self, name: &str) -> Result<NodeId> {
        self.find(name).ok_or_else(|| IrError::UnknownNode(name.to_string()))
    }

    /// Removes node `id`, which must read exactly one value, and makes its users read that value
    /// instead (for transforms that fold a node into its neighbour). The ids of later nodes
    /// shift down by one; the removed node's name stays reserved, as in torch.fx.
    pub fn remove_passthrough(&mut self, id: NodeId) -> Result<()> {
        let node = &self.nodes[id.0];
        let [src] = node.inputs[..] else {
            return Err(IrError::Invalid {
                node: node.name.clone(),
                reason: format!("reads {} values; only a node reading one can be removed", node.inputs.len()),
            });
        };
        self.nodes.remove(id.0);
        for n in &mut self.nodes {
            for inp in &mut n.inputs {
                if *inp == id {
                    *inp = src;
                } else if inp.0 > id.0 {
                    inp.0 -= 1;
                }
            }
        }
        Ok(())
    }

    /// The placeholders, in order (the forward's arguments).
    pub fn inputs(&self) -> Vec<NodeId> {
        self.ids().filter(|&i| self.node(i).kind == NodeKind::Placeholder).collect()
    }

    /// The single output node.
    pub fn output_node(&self) -> Result<NodeId> {
        let outs: Vec<NodeId> = self.ids().filter(|&i| self.node(i).kind == NodeKind::Output).collect();
        match outs.len() {
            0 => Err(IrError::NoOutput),
            1 => Ok(outs[0]),
            n => Err(IrError::ManyOutputs(n)),
        }
    }

    /// The values the graph returns, in order (the inputs of its output node).
    pub fn output_values(&self) -> Result<Vec<NodeId>> {
        Ok(self.node(self.output_node()?).inputs.clone())
    }

    /// The declared shape of the graph's own tensor `target`, if it owns one of that name.
    fn param_shape(&self, target: &str) -> Option<Vec<usize>> {
        self.params.iter().find(|p| p.target == target).map(|p| p.shape.clone())
    }

    /// Nodes that consume `id`, in graph order, each once.
    pub fn users(&self, id: NodeId) -> Vec<NodeId> {
        self.ids().filter(|&u| self.node(u).inputs.contains(&id)).collect()
    }

    /// Every parameter and buffer the graph needs, with its state-dict name, in node order: the
    /// modules' and, at the first `get_attr` node reading each, the graph's own ([`GraphParam`],
    /// whose spec has an empty relative `name`: no module owns it).
    pub fn param_specs(&self) -> Vec<(String, ParamSpec)> {
        let mut out = Vec::new();
        for n in &self.nodes {
            if n.kind == NodeKind::GetAttr {
                let owned = self.params.iter().find(|p| p.target == n.target);
                if let Some(p) = owned.filter(|p| !out.iter().any(|(name, _)| *name == p.target)) {
                    let spec = ParamSpec { name: "", shape: p.shape.clone(), trainable: p.trainable, init: p.init.clone() };
                    out.push((p.target.clone(), spec));
                }
            } else {
                out.extend(n.params());
            }
        }
        out
    }

    /// Shapes of every node's value for concrete input shapes (one per placeholder, in order).
    /// Constants take the shape of their tensor in `constant_shape`, or else the declared shape
    /// of the graph's own tensor of that name.
    pub fn infer_shapes(&self, input_shapes: &[Vec<usize>], constant_shape: &dyn Fn(&str) -> Option<Vec<usize>>) -> Result<Vec<ValueInfo>> {
        let mut out: Vec<ValueInfo> = Vec::with_capacity(self.nodes.len());
        let mut next_input = 0;
        for n in &self.nodes {
            let v = match n.op {
                Op::Input => {
                    let s = input_shapes.get(next_input).ok_or_else(|| IrError::Invalid {
                        node: n.name.clone(),
                        reason: format!("graph has more inputs than the {} shape(s) given", input_shapes.len()),
                    })?;
                    next_input += 1;
                    ValueInfo::Tensor(s.clone())
                }
                Op::Constant => ValueInfo::Tensor(constant_shape(&n.target).or_else(|| self.param_shape(&n.target)).ok_or_else(|| {
                    IrError::Param { name: n.target.clone(), reason: format!("constant read by node `{}` is missing", n.name) }
                })?),
                _ => {
                    let ins: Vec<ValueInfo> = n.inputs.iter().map(|i| out[i.0].clone()).collect();
                    n.op.infer(&n.name, &ins)?
                }
            };
            out.push(v);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_parameters_are_listed_at_their_first_read_and_survive_json() {
        let mut g = Graph::new();
        let x = g.placeholder("x");
        let l = g.call_module("fc", Op::Linear { in_features: 2, out_features: 2, bias: false }, &[x]);
        let t = g.parameter("encoder.pos", vec![1, 2], true, Init::Zeros);
        let again = g.parameter("encoder.pos", vec![1, 2], true, Init::Zeros);
        let a = g.call_function("operator.add", Op::Add, &[l, t]);
        let b = g.call_function("operator.add", Op::Add, &[a, again]);
        g.output(b);
        let specs: Vec<(String, Vec<usize>, bool)> = g.param_specs().into_iter().map(|(n, s)| (n, s.shape, s.trainable)).collect();
        assert_eq!(specs, [("fc.weight".to_string(), vec![2, 2], true), ("encoder.pos".to_string(), vec![1, 2], true)]);
        assert_eq!((g.node(t).name.as_str(), g.node(again).name.as_str()), ("encoder_pos", "encoder_pos_1"));
        // Shapes come from the declaration when the caller knows none.
        let shapes = g.infer_shapes(&[vec![3, 2]], &|_| None).unwrap();
        assert_eq!(shapes[b.0].shape(), [3, 2]);
        let json = serde_json::to_string(&g).unwrap();
        assert_eq!(serde_json::from_str::<Graph>(&json).unwrap(), g);
        // A graph without parameters of its own writes no `params` key.
        let mut plain = Graph::new();
        let x = plain.placeholder("x");
        plain.output(x);
        assert!(!serde_json::to_string(&plain).unwrap().contains("params"));
    }

    #[test]
    fn removing_a_node_rewires_its_users_and_shifts_later_ids() {
        let mut g = Graph::new();
        let x = g.placeholder("x");
        let a = g.call_module("seq.0", Op::Relu, &[x]);
        let b = g.call_module("seq.1", Op::Relu, &[a]);
        let s = g.call_function("operator.add", Op::Add, &[a, b]);
        g.output(s);
        g.remove_passthrough(b).unwrap();
        let inputs: Vec<(&str, Vec<usize>)> = g.nodes().iter().map(|n| (n.name.as_str(), n.inputs.iter().map(|i| i.0).collect())).collect();
        assert_eq!(inputs, [("x", vec![]), ("seq_0", vec![0]), ("add", vec![1, 1]), ("output", vec![2])]);
        // A node reading two values cannot be removed.
        let e = g.remove_passthrough(NodeId(2)).unwrap_err().to_string();
        assert!(e.contains("add") && e.contains("reads 2 values"), "{e}");
        // The removed name stays reserved, as in torch.fx.
        let again = g.call_module("seq.1", Op::Relu, &[NodeId(1)]);
        assert_eq!(g.node(again).name, "seq_2");
    }

    /// `forward(self, a, b)` returning `(a @ b, a)`.
    fn two_in_two_out() -> Graph {
        let mut g = Graph::new();
        let a = g.placeholder("a");
        let b = g.placeholder("b");
        let m = g.call_function("torch.matmul", Op::MatMul, &[a, b]);
        g.outputs(&[m, a]);
        g
    }

    #[test]
    fn several_inputs_and_outputs_print_infer_and_round_trip() {
        let g = two_in_two_out();
        crate::validate(&g, None).unwrap();
        assert_eq!(g.inputs(), [NodeId(0), NodeId(1)]);
        assert_eq!(g.output_values().unwrap(), [NodeId(2), NodeId(0)]);
        let want = "graph():\n    %a : [num_users=2] = placeholder[target=a]\n    %b : [num_users=1] = placeholder[target=b]\n    %matmul : [num_users=1] = call_function[target=torch.matmul](args = (%a, %b), kwargs = {})\n    return (matmul, a)\n";
        assert_eq!(g.to_string(), want);
        let shapes = g.infer_shapes(&[vec![2, 3, 4], vec![2, 4, 5]], &|_| None).unwrap();
        let got: Vec<&[usize]> = shapes.iter().map(|v| v.shape()).collect();
        // The output node's own value is its first output's.
        assert_eq!(got, [&[2, 3, 4][..], &[2, 4, 5], &[2, 3, 5], &[2, 3, 5]]);
        let missing = g.infer_shapes(&[vec![2, 3, 4]], &|_| None).unwrap_err().to_string();
        assert_eq!(missing, "node `b`: graph has more inputs than the 1 shape(s) given");
        let back: Graph = serde_json::from_str(&serde_json::to_string(&g).unwrap()).unwrap();
        assert_eq!(back, g);
    }

    #[test]
    fn an_output_returning_nothing_is_refused() {
        let mut g = Graph::new();
        g.placeholder("x");
        g.outputs(&[]);
        let e = crate::validate(&g, None).unwrap_err().to_string();
        assert_eq!(e, "node `output`: the output returns no value; it needs at least one");
    }
}
