//! The graph IR as ONNX (a float graph) or QONNX (a quantized graph: its number formats become
//! `IntQuant`/`BipolarQuant`/`FloatQuant` nodes in front of the values they apply to).
//!
//! Exports use opset 13, or 17 when the graph holds a layer norm (`LayerNormalization` is an
//! opset-17 operator; every other operator written here means the same at 13 and 17). Node names follow PyTorch's exporter (`/seq_blocks.2/Gemm`) and
//! parameters keep their state-dict names, so importing an exported file gives back the same
//! module paths, node names and parameter names.

use crate::onnx::proto::tensor_proto::DataType;
use crate::onnx::proto::{AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto};
use crate::onnx::tensor::{f32_proto, i64_proto};
use crate::qonnx::{quant_node, QONNX_DOMAIN};
use crate::{InteropError, Result};
use mase_ir::{
    ArgMeta, AttnMask, ConvSpec, Graph, Node, NodeId, NodeKind, NodeQuant, NormSpec, Op, ParamStore, QuantFormat, ReduceSpec, Tensor,
    ValueInfo,
};
use std::path::Path;

/// `Cast`'s `to` for the graph's float values and for a `Where` condition.
const ONNX_FLOAT: i64 = DataType::Float as i64;
const ONNX_BOOL: i64 = DataType::Bool as i64;

mod indexing;

/// The opset exports use.
pub const EXPORT_OPSET: i64 = 13;

/// The opset of exports that hold a layer norm (`LayerNormalization`).
pub const LAYER_NORM_OPSET: i64 = 17;

/// Plain ONNX or QONNX.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    /// Standard ONNX of a float graph; a graph with active number formats is refused.
    Onnx,
    /// ONNX plus QONNX quantizers for every number format on the graph's nodes.
    Qonnx,
}

/// Settings of [`export_model`].
#[derive(Clone, Debug, PartialEq)]
pub struct ExportOptions {
    pub format: ExportFormat,
    /// Shape of one input sample; `None` takes it from the input's metadata (imported models and
    /// checkpoints have it) or from the first layer.
    pub sample_shape: Option<Vec<usize>>,
}

impl ExportOptions {
    pub fn new(format: ExportFormat) -> ExportOptions {
        ExportOptions { format, sample_shape: None }
    }
}

fn xerr(node: &str, reason: impl Into<String>) -> InteropError {
    InteropError::Export { node: node.to_string(), reason: reason.into() }
}

fn a_int(name: &str, v: i64) -> AttributeProto {
    AttributeProto { name: name.into(), i: v, r#type: 2, ..Default::default() }
}

fn a_float(name: &str, v: f32) -> AttributeProto {
    AttributeProto { name: name.into(), f: v, r#type: 1, ..Default::default() }
}

fn a_string(name: &str, v: &str) -> AttributeProto {
    AttributeProto { name: name.into(), s: v.as_bytes().to_vec(), r#type: 3, ..Default::default() }
}

fn a_ints(name: &str, v: &[usize]) -> AttributeProto {
    AttributeProto { name: name.into(), ints: v.iter().map(|&x| x as i64).collect(), r#type: 7, ..Default::default() }
}

/// Per-sample shape of every graph input, in order: the option (for the first input), each
/// input's metadata, or the first layer's width.
fn sample_shapes(graph: &Graph, opts: &ExportOptions) -> Result<Vec<Vec<usize>>> {
    let inputs = graph.inputs();
    if inputs.is_empty() {
        return Err(xerr("graph", "it has no input"));
    }
    inputs.iter().enumerate().map(|(k, &input)| sample_shape(graph, input, opts.sample_shape.as_ref().filter(|_| k == 0))).collect()
}

/// Per-sample shape of one graph input: `given`, its metadata, or the first layer's width.
fn sample_shape(graph: &Graph, input: NodeId, given: Option<&Vec<usize>>) -> Result<Vec<usize>> {
    if let Some(s) = given {
        return Ok(s.clone());
    }
    if let Some(ArgMeta::Tensor(t)) = graph.node(input).meta.common.results.get("data_out_0") {
        if t.shape.len() > 1 {
            return Ok(t.shape[1..].to_vec());
        }
    }
    for u in graph.users(input) {
        match &graph.node(u).op {
            Op::Linear { in_features, .. } => return Ok(vec![*in_features]),
            Op::BatchNorm1d(s) => return Ok(vec![s.num_features]),
            _ => {}
        }
    }
    Err(xerr(&graph.node(input).name, "the input shape is unknown; give the sample shape"))
}

struct Ex<'a> {
    g: &'a Graph,
    params: &'a ParamStore,
    qonnx: bool,
    nodes: Vec<NodeProto>,
    inits: Vec<TensorProto>,
    /// ONNX value name of each IR node.
    names: Vec<String>,
    /// Shapes at the two probe batch sizes.
    shapes: Vec<[Vec<usize>; 2]>,
    used_qonnx: bool,
}

impl Ex<'_> {
    fn add(&mut self, name: String, op_type: &str, inputs: Vec<String>, output: String, attribute: Vec<AttributeProto>) {
        self.nodes.push(NodeProto { name, op_type: op_type.into(), input: inputs, output: vec![output], attribute, ..Default::default() });
    }

    fn init(&mut self, name: &str, t: &Tensor) -> String {
        if !self.inits.iter().any(|i| i.name == name) {
            self.inits.push(f32_proto(name, t));
        }
        name.to_string()
    }

    fn param(&self, n: &Node, name: &str) -> Result<Tensor> {
        self.params.get(name).cloned().ok_or_else(|| xerr(&n.name, format!("parameter `{name}` is missing")))
    }

    /// `value` quantized with `fmt` (a QONNX node named after `base`), or `value` itself.
    fn quantized(&mut self, n: &Node, value: String, fmt: Option<&QuantFormat>, base: &str) -> Result<String> {
        let Some(fmt) = fmt else { return Ok(value) };
        if !self.qonnx {
            return Err(xerr(&n.name, format!("the node is quantized ({}); export it as QONNX", fmt.type_name())));
        }
        let out = format!("{value}_quant");
        let node = quant_node(fmt, &value, &out, base, &mut self.inits)?;
        self.nodes.push(node);
        self.used_qonnx = true;
        Ok(out)
    }

    /// Dimensions of a node's value with the batch left open (`None`).
    fn dims(&self, id: NodeId) -> Vec<Option<usize>> {
        let [a, b] = &self.shapes[id.0];
        a.iter().zip(b).map(|(x, y)| (x == y).then_some(*x)).collect()
    }

    /// Exports one node: its inputs through their `data_in` quantizers, the ONNX nodes of its op,
    /// then its value through the `data_out` quantizer.
    fn node(&mut self, id: NodeId) -> Result<()> {
        let g = self.g;
        let n = g.node(id);
        let q = n.quant.as_ref().filter(|q| q.is_active());
        let ins = self.quantized_inputs(n, q)?;
        let data_out = q.and_then(|q| q.data_out.as_ref());
        let out = if data_out.is_some() { format!("{}_float", n.name) } else { n.name.clone() };
        match self.op(id, q, &ins, &out)? {
            Emitted::Value => {
                self.names[id.0] = match data_out {
                    Some(f) => self.quantized(n, out, Some(f), &format!("/{}/output_quant", n.name))?,
                    None => out,
                }
            }
            Emitted::Initializer(init) => self.names[id.0] = init,
            Emitted::Folded => {}
        }
        Ok(())
    }

    /// The ONNX names of a node's inputs, each through its `data_in` quantizer.
    fn quantized_inputs(&mut self, n: &Node, q: Option<&NodeQuant>) -> Result<Vec<String>> {
        let mut ins = Vec::with_capacity(n.inputs.len());
        for (k, u) in n.inputs.iter().enumerate() {
            let v = self.names[u.0].clone();
            let fmt = q.and_then(|q| q.data_in.get(k)).and_then(Option::as_ref);
            ins.push(self.quantized(n, v, fmt, &format!("/{}/input_quant_{k}", n.name))?);
        }
        Ok(ins)
    }

    /// The parameter `{target}.{which}` (`weight`, `bias`) as an initializer, through its quantizer.
    fn quantized_param(&mut self, n: &Node, which: &str, fmt: Option<&QuantFormat>) -> Result<String> {
        let pname = format!("{}.{which}", n.target);
        let t = self.param(n, &pname)?;
        let init = self.init(&pname, &t);
        self.quantized(n, init, fmt, &format!("/{}/{which}_quant", n.target))
    }

    /// The ONNX nodes of a node's op, reading `ins` and writing `out`.
    fn op(&mut self, id: NodeId, q: Option<&NodeQuant>, ins: &[String], out: &str) -> Result<Emitted> {
        let g = self.g;
        let n = g.node(id);
        let name = n.name.as_str();
        let x = ins.first().cloned().unwrap_or_default();
        let key = if n.kind == NodeKind::CallModule { n.target.as_str() } else { name };
        let on = |op: &str| onnx_name(key, op);
        match &n.op {
            Op::Input => {}
            Op::Output => {}
            Op::Constant => {
                let t = self.param(n, &n.target)?;
                return Ok(Emitted::Initializer(self.init(&n.target, &t)));
            }
            Op::Linear { bias, .. } => self.linear(n, q, x, *bias, out, key)?,
            Op::Conv1d(c) | Op::Conv2d(c) => self.conv(n, q, x, c, out, key)?,
            Op::BatchNorm1d(s) | Op::BatchNorm2d(s) => self.batch_norm(n, x, s, out, key)?,
            Op::Relu => self.add(on("Relu"), "Relu", vec![x], out.into(), vec![]),
            Op::Sigmoid => self.add(on("Sigmoid"), "Sigmoid", vec![x], out.into(), vec![]),
            Op::Tanh => self.add(on("Tanh"), "Tanh", vec![x], out.into(), vec![]),
            Op::Sqrt => self.add(on("Sqrt"), "Sqrt", vec![x], out.into(), vec![]),
            Op::Selu => self.add(on("Selu"), "Selu", vec![x], out.into(), vec![a_float("alpha", 1.673_263_2), a_float("gamma", 1.050_701)]),
            Op::LeakyRelu { negative_slope } => {
                self.add(on("LeakyRelu"), "LeakyRelu", vec![x], out.into(), vec![a_float("alpha", *negative_slope)])
            }
            Op::Relu6 | Op::Clip { .. } => {
                let (lo, hi) = if let Op::Clip { min, max } = n.op { (min, max) } else { (0.0, 6.0) };
                let lo = self.init(&format!("{name}.min"), &Tensor::scalar(lo));
                let hi = self.init(&format!("{name}.max"), &Tensor::scalar(hi));
                self.add(on("Clip"), "Clip", vec![x, lo, hi], out.into(), vec![]);
            }
            Op::Gelu { tanh: false } => self.gelu_erf(name, x, out, key),
            // As torch.onnx writes them at opset 13 (HardSwish and Mish arrive in later opsets).
            Op::Silu => {
                let s = format!("{name}_sigmoid");
                self.add(on("Sigmoid"), "Sigmoid", vec![x.clone()], s.clone(), vec![]);
                self.add(on("Mul"), "Mul", vec![x, s], out.into(), vec![]);
            }
            Op::Hardsigmoid => self.add(on("HardSigmoid"), "HardSigmoid", vec![x], out.into(), hard_sigmoid_attrs()),
            Op::Hardswish => {
                let s = format!("{name}_hardsigmoid");
                self.add(on("HardSigmoid"), "HardSigmoid", vec![x.clone()], s.clone(), hard_sigmoid_attrs());
                self.add(on("Mul"), "Mul", vec![x, s], out.into(), vec![]);
            }
            Op::Softplus { beta, threshold } => self.softplus(name, x, *beta, *threshold, out, key)?,
            Op::Mish => {
                let (sp, t) = (format!("{name}_softplus"), format!("{name}_tanh"));
                self.add(on("Softplus"), "Softplus", vec![x.clone()], sp.clone(), vec![]);
                self.add(on("Tanh"), "Tanh", vec![sp], t.clone(), vec![]);
                self.add(on("Mul"), "Mul", vec![x, t], out.into(), vec![]);
            }
            Op::Mean(r) => self.reduce(id, x, r, "ReduceMean", out, key),
            Op::Sum(r) => self.reduce(id, x, r, "ReduceSum", out, key),
            Op::Amax(r) => self.reduce(id, x, r, "ReduceMax", out, key),
            Op::Softmax { dim } => self.add(on("Softmax"), "Softmax", vec![x], out.into(), vec![a_int("axis", *dim)]),
            Op::LogSoftmax { dim } => self.add(on("LogSoftmax"), "LogSoftmax", vec![x], out.into(), vec![a_int("axis", *dim)]),
            Op::MaxPool1d(p) | Op::MaxPool2d(p) | Op::AvgPool1d(p) | Op::AvgPool2d(p) => {
                let max = matches!(n.op, Op::MaxPool1d(_) | Op::MaxPool2d(_));
                let pads: Vec<usize> = p.padding.iter().chain(&p.padding).copied().collect();
                let mut attrs = vec![a_ints("kernel_shape", &p.kernel), a_ints("strides", &p.stride), a_ints("pads", &pads)];
                let op = if max { "MaxPool" } else { "AveragePool" };
                if !max {
                    attrs.push(a_int("count_include_pad", i64::from(p.count_include_pad)));
                }
                if p.ceil_mode {
                    attrs.push(a_int("ceil_mode", 1));
                }
                self.add(on(op), op, vec![x], out.into(), attrs);
            }
            Op::AdaptiveAvgPool1d { .. } | Op::AdaptiveAvgPool2d { .. } => self.adaptive_pool(id, x, out, key, false)?,
            Op::AdaptiveMaxPool1d { .. } | Op::AdaptiveMaxPool2d { .. } => self.adaptive_pool(id, x, out, key, true)?,
            Op::Flatten { .. } | Op::Reshape { .. } => self.reshape(id, x, out, key)?,
            Op::Transpose { .. } | Op::Permute { .. } => {
                let rank = self.shapes[n.inputs[0].0][0].len();
                let norm = |d: i64| if d < 0 { (d + rank as i64) as usize } else { d as usize };
                let perm: Vec<usize> = match &n.op {
                    Op::Transpose { dim0, dim1 } => {
                        let mut p: Vec<usize> = (0..rank).collect();
                        p.swap(norm(*dim0), norm(*dim1));
                        p
                    }
                    Op::Permute { dims } => dims.iter().map(|&d| norm(d)).collect(),
                    _ => unreachable!("this arm is entered for Transpose and Permute only"),
                };
                self.add(on("Transpose"), "Transpose", vec![x], out.into(), vec![a_ints("perm", &perm)]);
            }
            // Sizes and their arithmetic fold into the shapes of the reshapes and expands that
            // read them, which the exporter writes from shape inference.
            Op::Size { .. } | Op::SizeArith { .. } => {
                if g.users(id).iter().any(|&u| !matches!(g.node(u).op, Op::Reshape { .. } | Op::Expand { .. } | Op::SizeArith { .. })) {
                    return Err(xerr(name, "a size used other than by a reshape or an expand has no ONNX equivalent here"));
                }
                return Ok(Emitted::Folded);
            }
            Op::Index { items } => self.index(id, x, items, out, key)?,
            Op::Expand { .. } => self.expand(id, x, out, key)?,
            Op::Repeat { repeats } => self.repeat(id, x, repeats, out, key)?,
            Op::Stack { dim } => self.stack(id, ins, *dim, out, key),
            Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Pow | Op::MatMul => {
                let op = match n.op {
                    Op::Add => "Add",
                    Op::Sub => "Sub",
                    Op::Mul => "Mul",
                    Op::Div => "Div",
                    Op::Pow => "Pow",
                    Op::MatMul => "MatMul",
                    _ => unreachable!("this arm is entered for Add, Sub, Mul, Div, Pow and MatMul only"),
                };
                self.add(on(op), op, ins.to_vec(), out.into(), vec![]);
            }
            Op::Dropout { .. } => self.add(on("Dropout"), "Dropout", vec![x], out.into(), vec![]),
            // An exported model runs in inference, where stochastic depth is the identity.
            Op::StochasticDepth { .. } => self.add(on("Identity"), "Identity", vec![x], out.into(), vec![]),
            Op::Concat { dim } => self.add(on("Concat"), "Concat", ins.to_vec(), out.into(), vec![a_int("axis", *dim)]),
            Op::Pad { begin, end, value } => self.pad(id, x, begin, end, *value, out, key),
            Op::Opaque { class, .. } => {
                return Err(xerr(name, format!("PyTorch module {class} is kept whole in the graph and has no ONNX export")))
            }
            Op::LayerNorm { normalized_shape, eps, elementwise_affine, bias } => {
                let own = (*elementwise_affine, *elementwise_affine && *bias);
                let (w, b) = self.norm_affine(n, q, ins, own, normalized_shape)?;
                let mut i = vec![x, w];
                i.extend(b);
                let attrs = vec![a_int("axis", -(normalized_shape.len() as i64)), a_float("epsilon", *eps)];
                self.add(on("LayerNormalization"), "LayerNormalization", i, out.into(), attrs);
            }
            Op::GroupNorm { num_groups, num_channels, eps, affine, bias } => {
                let own = (*affine, *affine && *bias);
                let (w, b) = self.norm_affine(n, q, ins, own, &[*num_channels])?;
                self.group_norm(id, x, (*num_groups, *eps), (w, b), out, key);
            }
            Op::Einsum { equation } => self.add(on("Einsum"), "Einsum", ins.to_vec(), out.into(), vec![a_string("equation", equation)]),
            Op::ScaledDotProductAttention { mask, is_causal, scale } => self.attention(id, ins, (*mask, *is_causal, *scale), out, key),
            Op::Embedding { functional, .. } => {
                let w = if *functional { ins[1].clone() } else { self.quantized_param(n, "weight", q.and_then(|q| q.weight.as_ref()))? };
                let ids = format!("/{name}/ids");
                // ONNX's Gather reads integer indices (7: INT64); the graph's ids are whole floats.
                self.add(on("Cast"), "Cast", vec![x], ids.clone(), vec![a_int("to", 7)]);
                self.add(on("Gather"), "Gather", vec![w, ids], out.into(), vec![a_int("axis", 0)]);
            }
            // ONNX's comparisons give bool tensors; the graph's values are floats (0 and 1).
            Op::Eq | Op::Ne | Op::Lt | Op::Le | Op::Gt | Op::Ge => {
                let (op, negate) = match n.op {
                    Op::Eq => ("Equal", false),
                    Op::Ne => ("Equal", true),
                    Op::Lt => ("Less", false),
                    Op::Le => ("LessOrEqual", false),
                    Op::Gt => ("Greater", false),
                    Op::Ge => ("GreaterOrEqual", false),
                    _ => unreachable!("this arm is entered for the comparisons only"),
                };
                let held = format!("/{name}/{op}");
                self.add(on(op), op, ins.to_vec(), held.clone(), vec![]);
                let held = if negate {
                    let not = format!("/{name}/Not");
                    self.add(on("Not"), "Not", vec![held], not.clone(), vec![]);
                    not
                } else {
                    held
                };
                self.add(on("Cast"), "Cast", vec![held], out.into(), vec![a_int("to", ONNX_FLOAT)]);
            }
            Op::Where => {
                // Cast to bool holds where the value is not 0 (and where it is NaN), as the op.
                let cond = format!("/{name}/condition");
                self.add(on("Cast"), "Cast", vec![ins[0].clone()], cond.clone(), vec![a_int("to", ONNX_BOOL)]);
                self.add(on("Where"), "Where", vec![cond, ins[1].clone(), ins[2].clone()], out.into(), vec![]);
            }
            // GELU's tanh approximation has no ONNX operator before opset 20.
            other @ Op::Gelu { tanh: true } => return Err(xerr(name, format!("op `{}` has no ONNX export", other.mase_op()))),
        }
        Ok(Emitted::Value)
    }

    /// Attention as torch.onnx writes it before opset 23: `MatMul` of the query and the
    /// transposed key, `Mul` by the scale, the mask (`Where` of a bool mask, `Add` of a float
    /// one or of the causal mask as a constant), `Softmax` and `MatMul` by the value. ONNX's
    /// softmax gives NaN where PyTorch gives 0: on a row whose every position is masked.
    fn attention(
        &mut self,
        id: NodeId,
        ins: &[String],
        (mask, causal, scale): (Option<AttnMask>, bool, Option<f32>),
        out: &str,
        key: &str,
    ) {
        let g = self.g;
        let n = g.node(id);
        let name = n.name.clone();
        let (q, k) = (self.shapes[n.inputs[0].0][0].clone(), self.shapes[n.inputs[1].0][0].clone());
        let r = q.len();
        let (l, e, s) = (q[r - 2], q[r - 1], k[r - 2]);
        let v = |s: &str| format!("/{name}/{s}");
        let on = |op: &str| onnx_name(key, op);
        let mut perm: Vec<usize> = (0..r).collect();
        perm.swap(r - 2, r - 1);
        self.add(on("Transpose"), "Transpose", vec![ins[1].clone()], v("key_t"), vec![a_ints("perm", &perm)]);
        self.add(on("MatMul"), "MatMul", vec![ins[0].clone(), v("key_t")], v("scores"), vec![]);
        let sc = self.init(&format!("{name}.scale"), &Tensor::scalar(scale.unwrap_or(1.0 / (e as f32).sqrt())));
        self.add(on("Mul"), "Mul", vec![v("scores"), sc], v("scaled"), vec![]);
        let masked = match (mask, causal) {
            (Some(AttnMask::Bool), _) => {
                let zero = self.init(&format!("{name}.zero"), &Tensor::scalar(0.0));
                let ninf = self.init(&format!("{name}.neg_inf"), &Tensor::scalar(f32::NEG_INFINITY));
                self.add(on("Equal"), "Equal", vec![ins[3].clone(), zero], v("masked_out"), vec![]);
                self.add(on("Where"), "Where", vec![v("masked_out"), ninf, v("scaled")], v("masked"), vec![]);
                v("masked")
            }
            (Some(AttnMask::Additive), _) => {
                self.add(on("Add"), "Add", vec![v("scaled"), ins[3].clone()], v("masked"), vec![]);
                v("masked")
            }
            (None, true) => {
                let tri: Vec<f32> = (0..l * s).map(|i| if i % s > i / s { f32::NEG_INFINITY } else { 0.0 }).collect();
                let m = self.init(&format!("{name}.causal_mask"), &Tensor { shape: vec![l, s], data: tri });
                self.add(on("Add"), "Add", vec![v("scaled"), m], v("masked"), vec![]);
                v("masked")
            }
            (None, false) => v("scaled"),
        };
        self.add(on("Softmax"), "Softmax", vec![masked], v("probs"), vec![a_int("axis", -1)]);
        self.add(on("MatMul_1"), "MatMul", vec![v("probs"), ins[2].clone()], out.into(), vec![]);
    }

    /// `Gemm` for a 2-D input; `Transpose` of the weight, `MatMul` and `Add` for higher ranks.
    fn linear(&mut self, n: &Node, q: Option<&NodeQuant>, x: String, bias: bool, out: &str, key: &str) -> Result<()> {
        let wq = self.quantized_param(n, "weight", q.and_then(|q| q.weight.as_ref()))?;
        let b = if bias { Some(self.quantized_param(n, "bias", q.and_then(|q| q.bias.as_ref()))?) } else { None };
        if self.shapes[n.inputs[0].0][0].len() == 2 {
            let mut i = vec![x, wq];
            i.extend(b);
            let attrs = vec![a_float("alpha", 1.0), a_float("beta", 1.0), a_int("transB", 1)];
            self.add(onnx_name(key, "Gemm"), "Gemm", i, out.into(), attrs);
            return Ok(());
        }
        let wt = format!("{}.weight_t", n.target);
        self.add(onnx_name(key, "Transpose"), "Transpose", vec![wq], wt.clone(), vec![a_ints("perm", &[1, 0])]);
        match b {
            Some(b) => {
                let mm = format!("{}_matmul", n.name);
                self.add(onnx_name(key, "MatMul"), "MatMul", vec![x, wt], mm.clone(), vec![]);
                self.add(onnx_name(key, "Add"), "Add", vec![mm, b], out.into(), vec![]);
            }
            None => self.add(onnx_name(key, "MatMul"), "MatMul", vec![x, wt], out.into(), vec![]),
        }
        Ok(())
    }

    fn conv(&mut self, n: &Node, q: Option<&NodeQuant>, x: String, c: &ConvSpec, out: &str, key: &str) -> Result<()> {
        let mut i = vec![x, self.quantized_param(n, "weight", q.and_then(|q| q.weight.as_ref()))?];
        if c.bias {
            i.push(self.quantized_param(n, "bias", q.and_then(|q| q.bias.as_ref()))?);
        }
        let pads: Vec<usize> = c.padding.iter().chain(&c.padding).copied().collect();
        let attrs = vec![
            a_ints("kernel_shape", &c.kernel),
            a_ints("strides", &c.stride),
            a_ints("pads", &pads),
            a_ints("dilations", &c.dilation),
            a_int("group", c.groups as i64),
        ];
        self.add(onnx_name(key, "Conv"), "Conv", i, out.into(), attrs);
        Ok(())
    }

    /// `BatchNormalization`; a norm without affine parameters gets a weight of ones and a bias of
    /// zeros, and PyTorch's momentum becomes ONNX's (`1 - momentum`).
    fn batch_norm(&mut self, n: &Node, x: String, s: &NormSpec, out: &str, key: &str) -> Result<()> {
        let c = s.num_features;
        let p = |k: &str| format!("{}.{k}", n.target);
        let (w, b) = if s.affine {
            (self.param(n, &p("weight"))?, self.param(n, &p("bias"))?)
        } else {
            (Tensor::full(vec![c], 1.0), Tensor::zeros(vec![c]))
        };
        let (m, v) = (self.param(n, &p("running_mean"))?, self.param(n, &p("running_var"))?);
        let i = vec![
            x,
            self.init(&p("weight"), &w),
            self.init(&p("bias"), &b),
            self.init(&p("running_mean"), &m),
            self.init(&p("running_var"), &v),
        ];
        let attrs = vec![a_float("epsilon", s.eps), a_float("momentum", 1.0 - s.momentum)];
        self.add(onnx_name(key, "BatchNormalization"), "BatchNormalization", i, out.into(), attrs);
        Ok(())
    }

    /// The weight and bias values of a layer or group norm: its own parameters (through their
    /// quantizers) where `own` says it has them, else a function call's inputs 1 and 2, with a
    /// weight of ones when there is none (ONNX's normalisations need one).
    fn norm_affine(
        &mut self,
        n: &Node,
        q: Option<&NodeQuant>,
        ins: &[String],
        own: (bool, bool),
        shape: &[usize],
    ) -> Result<(String, Option<String>)> {
        let w = match (own.0, ins.get(1)) {
            (true, _) => self.quantized_param(n, "weight", q.and_then(|q| q.weight.as_ref()))?,
            (false, Some(w)) => w.clone(),
            (false, None) => self.init(&format!("{}.ones", n.name), &Tensor::full(shape.to_vec(), 1.0)),
        };
        let b = match (own.1, ins.get(2)) {
            (true, _) => Some(self.quantized_param(n, "bias", q.and_then(|q| q.bias.as_ref()))?),
            (false, b) if !own.0 => b.cloned(),
            (false, _) => None,
        };
        Ok((w, b))
    }

    /// Group norm as torch.onnx writes it before opset 18 (whose `GroupNormalization` scales per
    /// group, not per channel): `Reshape` to `[N, groups, -1]`, `InstanceNormalization` with
    /// unit scale, `Reshape` back, then `Mul` by the weight and `Add` of the bias, both reshaped
    /// to `[C, 1, ...]`.
    fn group_norm(&mut self, id: NodeId, x: String, (groups, eps): (usize, f32), (w, b): (String, Option<String>), out: &str, key: &str) {
        let g = self.g;
        let name = g.node(id).name.clone();
        let dims = self.dims(g.node(id).inputs[0]);
        let per_group: usize = dims[1..].iter().map(|d| d.unwrap_or(1)).product::<usize>() / groups;
        // Values under the node's name as a path, which no fx name (and so no other value) can take.
        let v = |s: &str| format!("/{name}/{s}");
        let on = |op: &str| onnx_name(key, op);
        let shape = |ex: &mut Self, s: &str, t: &[i64]| {
            let sname = format!("{name}.{s}");
            ex.inits.push(i64_proto(&sname, &[t.len()], t));
            sname
        };
        let grouped = shape(self, "grouped_shape", &[-1, groups as i64, per_group as i64]);
        let back: Vec<i64> = dims.iter().map(|d| d.map_or(-1, |v| v as i64)).collect();
        let back = shape(self, "shape", &back);
        let mut per_channel = vec![dims[1].unwrap_or(1) as i64];
        per_channel.extend(std::iter::repeat_n(1, dims.len() - 2));
        let per_channel = shape(self, "affine_shape", &per_channel);
        let ones = self.init(&format!("{name}.group_ones"), &Tensor::full(vec![groups], 1.0));
        let zeros = self.init(&format!("{name}.group_zeros"), &Tensor::zeros(vec![groups]));
        self.add(on("Reshape"), "Reshape", vec![x, grouped], v("grouped"), vec![]);
        self.add(
            on("InstanceNormalization"),
            "InstanceNormalization",
            vec![v("grouped"), ones, zeros],
            v("normed"),
            vec![a_float("epsilon", eps)],
        );
        self.add(on("Reshape_1"), "Reshape", vec![v("normed"), back], v("ungrouped"), vec![]);
        self.add(on("Reshape_2"), "Reshape", vec![w, per_channel.clone()], v("weight"), vec![]);
        let scaled = if b.is_some() { v("scaled") } else { out.to_string() };
        self.add(on("Mul"), "Mul", vec![v("ungrouped"), v("weight")], scaled.clone(), vec![]);
        if let Some(b) = b {
            self.add(on("Reshape_3"), "Reshape", vec![b, per_channel], v("bias"), vec![]);
            self.add(on("Add"), "Add", vec![scaled, v("bias")], out.into(), vec![]);
        }
    }

    /// `0.5 x (1 + erf(x / sqrt 2))`, as torch.onnx writes GELU before opset 20.
    fn gelu_erf(&mut self, name: &str, x: String, out: &str, key: &str) {
        let s2 = self.init(&format!("{name}.sqrt2"), &Tensor::scalar(std::f32::consts::SQRT_2));
        let one = self.init(&format!("{name}.one"), &Tensor::scalar(1.0));
        let half = self.init(&format!("{name}.half"), &Tensor::scalar(0.5));
        let v = |s: &str| format!("{name}_{s}");
        let on = |op: &str| onnx_name(key, op);
        self.add(on("Div"), "Div", vec![x.clone(), s2], v("div"), vec![]);
        self.add(on("Erf"), "Erf", vec![v("div")], v("erf"), vec![]);
        self.add(on("Add"), "Add", vec![v("erf"), one], v("add"), vec![]);
        self.add(on("Mul"), "Mul", vec![x, v("add")], v("mul"), vec![]);
        self.add(on("Mul_1"), "Mul", vec![v("mul"), half], out.into(), vec![]);
    }

    /// An adaptive average (or max) pool: `GlobalAveragePool` (`GlobalMaxPool`) to size 1,
    /// `AveragePool` (`MaxPool`) to a size that divides the input's.
    fn adaptive_pool(&mut self, id: NodeId, x: String, out: &str, key: &str, max: bool) -> Result<()> {
        let g = self.g;
        let n = g.node(id);
        let (i, o) = (self.shapes[n.inputs[0].0][0].clone(), self.shapes[id.0][0].clone());
        let (global, window) = if max { ("GlobalMaxPool", "MaxPool") } else { ("GlobalAveragePool", "AveragePool") };
        if o[2..].iter().all(|&v| v == 1) {
            self.add(onnx_name(key, global), global, vec![x], out.into(), vec![]);
        } else if i[2..].iter().zip(&o[2..]).all(|(a, b)| a % b == 0) {
            let k: Vec<usize> = i[2..].iter().zip(&o[2..]).map(|(a, b)| a / b).collect();
            let attrs = vec![a_ints("kernel_shape", &k), a_ints("strides", &k)];
            self.add(onnx_name(key, window), window, vec![x], out.into(), attrs);
        } else {
            let what = if max { "max" } else { "average" };
            return Err(xerr(&n.name, format!("adaptive {what} pooling to a size that does not divide the input has no ONNX equivalent")));
        }
        Ok(())
    }

    /// `Reshape` to the node's output shape, with `-1` for the batch.
    fn reshape(&mut self, id: NodeId, x: String, out: &str, key: &str) -> Result<()> {
        let g = self.g;
        let name = &g.node(id).name;
        let dims = self.dims(id);
        if dims.iter().filter(|d| d.is_none()).count() > 1 {
            return Err(xerr(name, "the reshape keeps more than one batch-sized dimension"));
        }
        let target: Vec<i64> = dims.iter().map(|d| d.map_or(-1, |v| v as i64)).collect();
        let sname = format!("{name}.shape");
        if !self.inits.iter().any(|i| i.name == sname) {
            self.inits.push(i64_proto(&sname, &[target.len()], &target));
        }
        self.add(onnx_name(key, "Reshape"), "Reshape", vec![x, sname], out.into(), vec![]);
        Ok(())
    }

    /// `Softplus`, between a `Mul` and a `Div` by `beta` when it is not 1. ONNX's softplus has no
    /// threshold; from PyTorch's default of 20 on, `log1p(exp(x))` and `x` are the same float32
    /// above the threshold, so only smaller thresholds are refused.
    #[allow(clippy::too_many_arguments)]
    fn softplus(&mut self, name: &str, x: String, beta: f32, threshold: f32, out: &str, key: &str) -> Result<()> {
        // A NaN threshold is refused too.
        if threshold.is_nan() || threshold < 20.0 {
            return Err(xerr(name, format!("softplus with threshold {threshold} (below 20) has no ONNX equivalent")));
        }
        let on = |op: &str| onnx_name(key, op);
        if beta == 1.0 {
            self.add(on("Softplus"), "Softplus", vec![x], out.into(), vec![]);
            return Ok(());
        }
        let b = self.init(&format!("{name}.beta"), &Tensor::scalar(beta));
        let (scaled, sp) = (format!("{name}_scaled"), format!("{name}_softplus"));
        self.add(on("Mul"), "Mul", vec![x, b.clone()], scaled.clone(), vec![]);
        self.add(on("Softplus"), "Softplus", vec![scaled], sp.clone(), vec![]);
        self.add(on("Div"), "Div", vec![sp, b], out.into(), vec![]);
        Ok(())
    }

    /// `ReduceMean`/`ReduceSum`/`ReduceMax` at opset 13: the axes (none for every element) are an
    /// attribute, but an input of `ReduceSum`.
    fn reduce(&mut self, id: NodeId, x: String, r: &ReduceSpec, op: &str, out: &str, key: &str) {
        let n = self.g.node(id);
        let rank = self.shapes[n.inputs[0].0][0].len();
        let axes: Vec<usize> = r.mask(rank).unwrap_or_default().iter().enumerate().filter(|(_, &m)| m).map(|(d, _)| d).collect();
        let mut attrs = vec![a_int("keepdims", i64::from(r.keepdim))];
        let mut ins = vec![x];
        if !r.dims.is_empty() {
            if op == "ReduceSum" {
                let aname = format!("{}.axes", n.name);
                let v: Vec<i64> = axes.iter().map(|&a| a as i64).collect();
                if !self.inits.iter().any(|i| i.name == aname) {
                    self.inits.push(i64_proto(&aname, &[v.len()], &v));
                }
                ins.push(aname);
            } else {
                attrs.push(a_ints("axes", &axes));
            }
        }
        self.add(onnx_name(key, op), op, ins, out.into(), attrs);
    }

    /// `Pad` with ONNX's pads (all begins, then all ends, over every dimension).
    #[allow(clippy::too_many_arguments)]
    fn pad(&mut self, id: NodeId, x: String, begin: &[usize], end: &[usize], value: f32, out: &str, key: &str) {
        let g = self.g;
        let n = g.node(id);
        let rank = self.shapes[n.inputs[0].0][0].len();
        let lead = rank - begin.len();
        let mut pads = vec![0i64; 2 * rank];
        for (k, (b, e)) in begin.iter().zip(end).enumerate() {
            pads[lead + k] = *b as i64;
            pads[rank + lead + k] = *e as i64;
        }
        let pname = format!("{}.pads", n.name);
        self.inits.push(i64_proto(&pname, &[pads.len()], &pads));
        let vname = self.init(&format!("{}.value", n.name), &Tensor::scalar(value));
        self.add(onnx_name(key, "Pad"), "Pad", vec![x, pname, vname], out.into(), vec![]);
    }
}

/// What exporting a node's op produced.
enum Emitted {
    /// ONNX nodes that write the node's value.
    Value,
    /// No ONNX node: the value is this initializer (a constant).
    Initializer(String),
    /// Nothing: the value is folded into its users (a size read by a reshape).
    Folded,
}

/// PyTorch's name of an ONNX node: the module path or node name, then the op (`/seq_blocks.2/Gemm`).
/// ONNX's `HardSigmoid` with PyTorch's `relu6(x + 3) / 6`: `alpha = 1/6`, `beta = 1/2`.
fn hard_sigmoid_attrs() -> Vec<AttributeProto> {
    vec![a_float("alpha", 1.0 / 6.0), a_float("beta", 0.5)]
}

fn onnx_name(key: &str, op: &str) -> String {
    format!("/{key}/{op}")
}

/// Exports a graph and its parameters as an ONNX model.
pub fn export_model(graph: &Graph, params: &ParamStore, opts: &ExportOptions) -> Result<ModelProto> {
    mase_ir::validate(graph, Some(params))?;
    let samples = sample_shapes(graph, opts)?;
    let consts = |name: &str| params.get(name).map(|t| t.shape.clone());
    let probe = |b: usize| -> Result<Vec<ValueInfo>> {
        let batches: Vec<Vec<usize>> = samples.iter().map(|s| std::iter::once(b).chain(s.iter().copied()).collect()).collect();
        Ok(graph.infer_shapes(&batches, &consts)?)
    };
    let (p2, p3) = (probe(2)?, probe(3)?);
    let shapes = p2.iter().zip(&p3).map(|(a, b)| [a.shape().to_vec(), b.shape().to_vec()]).collect();
    let mut ex = Ex {
        g: graph,
        params,
        qonnx: opts.format == ExportFormat::Qonnx,
        nodes: Vec::new(),
        inits: Vec::new(),
        names: graph.nodes().iter().map(|n| n.name.clone()).collect(),
        shapes,
        used_qonnx: false,
    };
    let mut inputs = Vec::new();
    for id in graph.ids() {
        if graph.node(id).kind == NodeKind::Placeholder {
            inputs.push(crate::onnx::float_value_info(&graph.node(id).name, &ex.dims(id)));
        }
        ex.node(id)?;
    }
    // One ONNX graph output per returned value, in order; a value returned twice is written
    // once more through an `Identity`, since ONNX output names are unique.
    let mut outputs: Vec<crate::onnx::proto::ValueInfoProto> = Vec::new();
    for (k, src) in graph.output_values()?.into_iter().enumerate() {
        let mut name = ex.names[src.0].clone();
        if outputs.iter().any(|o| o.name == name) {
            let copy = format!("{name}_output_{k}");
            ex.add(onnx_name(&copy, "Identity"), "Identity", vec![name], copy.clone(), vec![]);
            name = copy;
        }
        outputs.push(crate::onnx::float_value_info(&name, &ex.dims(src)));
    }
    let layer_norm = graph.nodes().iter().any(|n| matches!(n.op, Op::LayerNorm { .. }));
    let opset = if layer_norm { LAYER_NORM_OPSET } else { EXPORT_OPSET };
    let mut opset_import = vec![OperatorSetIdProto { domain: String::new(), version: opset }];
    if ex.used_qonnx {
        opset_import.push(OperatorSetIdProto { domain: QONNX_DOMAIN.into(), version: 1 });
    }
    Ok(ModelProto {
        ir_version: 7,
        opset_import,
        producer_name: "mase-rs".into(),
        producer_version: env!("CARGO_PKG_VERSION").into(),
        graph: Some(GraphProto {
            node: ex.nodes,
            name: "mase_graph".into(),
            initializer: ex.inits,
            input: inputs,
            output: outputs,
            ..Default::default()
        }),
        ..Default::default()
    })
}

/// [`export_model`] encoded as the bytes of a `.onnx` file.
pub fn export_bytes(graph: &Graph, params: &ParamStore, opts: &ExportOptions) -> Result<Vec<u8>> {
    Ok(crate::onnx::encode_model(&export_model(graph, params, opts)?))
}

/// [`export_model`] written to a file.
pub fn export_file(path: &Path, graph: &Graph, params: &ParamStore, opts: &ExportOptions) -> Result<()> {
    let bytes = export_bytes(graph, params, opts)?;
    std::fs::write(path, bytes).map_err(|e| InteropError::io(path, "write", e))
}
