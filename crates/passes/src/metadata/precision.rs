//! Number formats on every edge: what a node's inputs, parameters and output hold.
//!
//! An input takes the format the node quantizes it to (`node.quant`), else the format of the value
//! flowing in. The output of a node follows from its inputs: MASE leaves it at `float [32]`
//! (except for binary), which loses the facts a hardware flow needs, so mase-rs propagates it:
//!
//! | op | output format |
//! |---|---|
//! | `data_out` quantized | that format |
//! | linear, conv (integer input and weight; bias integer or absent) | integer `[max(b_w, x_w + w_w + clog2(K)) + 1, max(b_f, x_f + w_f)]` with a bias, `[x_w + w_w + clog2(K), x_f + w_f]` without (MASE's verify rule; K = fan-in) |
//! | matmul, bmm (integer operands) | integer `[x_w + y_w + clog2(K), x_f + y_f]` |
//! | add, sub (integer operands) | integer `[max(x_w - x_f, y_w - y_f) + max(x_f, y_f) + 1, max(x_f, y_f)]` |
//! | mul (integer operands) | integer `[x_w + y_w, x_f + y_f]` |
//! | relu, relu6, max pool, dropout, flatten, view, transpose, permute, output | the input's format |
//! | anything else (batch norm, average pool, softmax, float operands) | `float [32]` |

use mase_ir::{Graph, Node, NodeKind, Op, QuantFormat, ValueInfo};
use serde_json::Value;

/// The `type` and `precision` of one tensor edge.
#[derive(Clone, Debug, PartialEq)]
pub struct EdgeFormat {
    pub kind: String,
    pub precision: Vec<Value>,
}

impl EdgeFormat {
    /// `float [32]`.
    pub fn float32() -> EdgeFormat {
        EdgeFormat { kind: "float".into(), precision: vec![Value::from(32)] }
    }

    /// The metadata of a quantization format.
    pub fn from_quant(f: &QuantFormat) -> EdgeFormat {
        EdgeFormat { kind: f.type_name().into(), precision: f.precision() }
    }

    /// An integer `[width, frac_width]` edge.
    pub fn integer(width: i64, frac: i64) -> EdgeFormat {
        EdgeFormat { kind: "integer".into(), precision: vec![width.into(), frac.into()] }
    }

    /// `(width, frac_width)` of an integer (or MASE `fixed`) edge.
    pub fn as_integer(&self) -> Option<(i64, i64)> {
        if self.kind != "integer" && self.kind != "fixed" {
            return None;
        }
        Some((self.precision.first()?.as_i64()?, self.precision.get(1)?.as_i64()?))
    }

    /// Bits per value: the first precision entry (the width of every format), 32 if absent.
    pub fn bits(&self) -> f64 {
        self.precision.first().and_then(Value::as_f64).unwrap_or(32.0)
    }
}

/// The formats of one node's edges.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeFormats {
    /// One per tensor input, in input order.
    pub data_in: Vec<EdgeFormat>,
    pub weight: Option<EdgeFormat>,
    pub bias: Option<EdgeFormat>,
    pub data_out: EdgeFormat,
}

/// The active quantization of a node (`None` when absent or bypassed).
pub fn active_quant(node: &Node) -> Option<&mase_ir::NodeQuant> {
    node.quant.as_ref().filter(|q| !q.bypass)
}

/// `ceil(log2(k))` for `k >= 1`.
pub fn clog2(k: usize) -> i64 {
    let mut bits = 0;
    while (1usize << bits) < k {
        bits += 1;
    }
    bits
}

/// Formats of every node's edges, in graph order, for the given value shapes.
pub fn propagate(graph: &Graph, values: &[ValueInfo]) -> Vec<NodeFormats> {
    let mut out: Vec<NodeFormats> = Vec::with_capacity(graph.len());
    for node in graph.nodes() {
        let q = active_quant(node);
        let tensor_inputs: Vec<usize> =
            node.inputs.iter().map(|u| u.0).filter(|&u| values.get(u).is_some_and(ValueInfo::is_tensor)).collect();
        let data_in: Vec<EdgeFormat> = tensor_inputs
            .iter()
            .enumerate()
            .map(|(k, &u)| match q.and_then(|q| q.data_in.get(k)).and_then(Option::as_ref) {
                Some(f) => EdgeFormat::from_quant(f),
                None => out.get(u).map(|p| p.data_out.clone()).unwrap_or_else(EdgeFormat::float32),
            })
            .collect();
        let owns = |name: &str| node.params().iter().any(|(_, s)| s.name == name && s.trainable);
        let param =
            |f: Option<&QuantFormat>, name: &str| owns(name).then(|| f.map(EdgeFormat::from_quant).unwrap_or_else(EdgeFormat::float32));
        let weight = param(q.and_then(|q| q.weight.as_ref()), "weight");
        let bias = param(q.and_then(|q| q.bias.as_ref()), "bias");
        let data_out = match q.and_then(|q| q.data_out.as_ref()) {
            Some(f) => EdgeFormat::from_quant(f),
            None => {
                output_format(node, &data_in, weight.as_ref(), bias.as_ref(), &tensor_inputs, values).unwrap_or_else(EdgeFormat::float32)
            }
        };
        out.push(NodeFormats { data_in, weight, bias, data_out });
    }
    out
}

fn output_format(
    node: &Node,
    data_in: &[EdgeFormat],
    weight: Option<&EdgeFormat>,
    bias: Option<&EdgeFormat>,
    tensor_inputs: &[usize],
    values: &[ValueInfo],
) -> Option<EdgeFormat> {
    let int_in = |k: usize| data_in.get(k).and_then(EdgeFormat::as_integer);
    let fan_in = || -> Option<usize> {
        match &node.op {
            Op::Linear { in_features, .. } => Some(*in_features),
            Op::Conv1d(c) | Op::Conv2d(c) => Some(c.in_channels / c.groups.max(1) * c.kernel.iter().product::<usize>()),
            Op::MatMul => values.get(*tensor_inputs.first()?)?.shape().last().copied(),
            // The product of the contracted letters' sizes.
            Op::Einsum { equation } => {
                let c = mase_ir::Contraction::parse(equation).ok()?;
                let shape = |k: usize| Some(values.get(*tensor_inputs.get(k)?)?.shape());
                let sizes = c.sizes([shape(0)?, shape(1)?]).ok()?;
                Some(c.contracted.iter().map(|&l| mase_ir::size_of(&sizes, l)).product())
            }
            // Only the sums below ask for a fan-in.
            _ => None,
        }
    };
    match &node.op {
        Op::Linear { .. } | Op::Conv1d(_) | Op::Conv2d(_) => {
            let (xw, xf) = int_in(0)?;
            let (ww, wf) = weight?.as_integer()?;
            let acc = xw + ww + clog2(fan_in()?);
            match bias {
                None => Some(EdgeFormat::integer(acc, xf + wf)),
                Some(b) => {
                    let (bw, bf) = b.as_integer()?;
                    Some(EdgeFormat::integer(bw.max(acc) + 1, bf.max(xf + wf)))
                }
            }
        }
        Op::MatMul | Op::Einsum { .. } => {
            let ((xw, xf), (yw, yf)) = (int_in(0)?, int_in(1)?);
            Some(EdgeFormat::integer(xw + yw + clog2(fan_in()?), xf + yf))
        }
        Op::Add | Op::Sub => {
            let ((xw, xf), (yw, yf)) = (int_in(0)?, int_in(1)?);
            let f = xf.max(yf);
            Some(EdgeFormat::integer((xw - xf).max(yw - yf) + f + 1, f))
        }
        Op::Mul => {
            let ((xw, xf), (yw, yf)) = (int_in(0)?, int_in(1)?);
            Some(EdgeFormat::integer(xw + yw, xf + yf))
        }
        // Ops that pass values on unchanged (or keep the largest of a window).
        Op::Relu | Op::Relu6 | Op::MaxPool1d(_) | Op::MaxPool2d(_) | Op::Dropout { .. } | Op::StochasticDepth { .. } | Op::Output => {
            data_in.first().cloned()
        }
        Op::Amax(_) => data_in.first().cloned(),
        Op::Flatten { .. } | Op::Reshape { .. } | Op::Transpose { .. } | Op::Permute { .. } => data_in.first().cloned(),
        // Indexing, expanding and repeating move values without changing them.
        Op::Index { .. } | Op::Expand { .. } | Op::Repeat { .. } => data_in.first().cloned(),
        // The output node passes its input on, whatever op a hand-made graph gave it.
        _ if node.kind == NodeKind::Output => data_in.first().cloned(),
        // Ops whose integer output format is not derived from their inputs' (yet): the edge is
        // float unless the node's quant names an output format. Listed one by one: a new op
        // must decide here whether its integer format follows from its inputs'.
        Op::Input
        | Op::Constant
        | Op::BatchNorm1d(_)
        | Op::BatchNorm2d(_)
        | Op::LeakyRelu { .. }
        | Op::Sigmoid
        | Op::Tanh
        | Op::Selu
        | Op::Gelu { .. }
        | Op::Silu
        | Op::Hardswish
        | Op::Hardsigmoid
        | Op::Softplus { .. }
        | Op::Mish
        | Op::Mean(_)
        | Op::Sum(_)
        | Op::Softmax { .. }
        | Op::LogSoftmax { .. }
        | Op::AvgPool1d(_)
        | Op::AvgPool2d(_)
        | Op::AdaptiveAvgPool1d { .. }
        | Op::AdaptiveAvgPool2d { .. }
        | Op::Size { .. }
        | Op::Div
        | Op::Pow
        | Op::Sqrt
        | Op::Clip { .. }
        | Op::Concat { .. }
        | Op::Stack { .. }
        | Op::SizeArith { .. }
        | Op::Pad { .. }
        | Op::Opaque { .. } => None,
        // A softmax sits between the two products: float unless quant names a format.
        Op::ScaledDotProductAttention { .. } => None,
        // A lookup passes the table's values on: the weight's format (input 1 as a function).
        Op::Embedding { functional: false, .. } => weight.cloned(),
        Op::Embedding { functional: true, .. } => data_in.get(1).cloned(),
        // Normalisations divide by a data-dependent deviation: float unless quant names a format.
        Op::LayerNorm { .. } | Op::GroupNorm { .. } => None,
        // The largest value of a window keeps its input's format, as a max pool's does.
        Op::AdaptiveMaxPool1d { .. } | Op::AdaptiveMaxPool2d { .. } => data_in.first().cloned(),
        // A comparison's 0 or 1: float unless quant names a format.
        Op::Eq | Op::Ne | Op::Lt | Op::Le | Op::Gt | Op::Ge => None,
        // A selection keeps the format its two values share (a multiplexer), float otherwise.
        Op::Where => {
            let (a, b) = (data_in.get(1)?, data_in.get(2)?);
            (a == b).then(|| a.clone())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clog2_is_ceil_log2() {
        for (k, want) in [(1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (16, 4), (17, 5), (784, 10)] {
            assert_eq!(clog2(k), want, "{k}");
        }
    }
}
