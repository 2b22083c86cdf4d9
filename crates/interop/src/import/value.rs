//! What an ONNX value is while a model is imported: a tensor the graph computes, a constant, a
//! quantized constant (a weight behind a QONNX quantizer), or a shape whose entries may be the
//! batch size.

use crate::onnx::tensor::Const;
use mase_ir::{NodeId, QuantFormat};

/// One dimension of a computed tensor, or one entry of a symbolic shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dim {
    Fixed(i64),
    /// The batch size, which the imported graph leaves open.
    Batch,
}

/// A tensor computed by the graph.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Computed {
    pub id: NodeId,
    pub shape: Vec<Dim>,
    /// A QONNX quantizer applied to the value and not yet attached to a node: its consumers get
    /// it as a `data_in` format.
    pub quant: Option<QuantFormat>,
}

impl Computed {
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// The fixed size of dimension `d`, or `None` for the batch dimension.
    pub fn fixed(&self, d: usize) -> Option<usize> {
        match self.shape.get(d)? {
            Dim::Fixed(v) => usize::try_from(*v).ok(),
            Dim::Batch => None,
        }
    }
}

/// An ONNX value during import.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Val {
    Computed(Computed),
    Const(Const),
    /// A constant with a quantizer on it (a QONNX weight).
    QuantConst(Const, QuantFormat),
    /// A 1-D integer tensor (or a scalar) holding shape entries, some of them the batch size.
    Shape {
        dims: Vec<Dim>,
        scalar: bool,
    },
}

impl Val {
    /// A symbolic shape, or a plain integer constant when no entry is the batch size.
    pub fn shape(dims: Vec<Dim>, scalar: bool) -> Val {
        if dims.iter().all(|d| matches!(d, Dim::Fixed(_))) {
            let v: Vec<i64> = dims.iter().map(|d| if let Dim::Fixed(v) = d { *v } else { 0 }).collect();
            let shape = if scalar { vec![] } else { vec![v.len()] };
            return Val::Const(Const::ints(shape, v));
        }
        Val::Shape { dims, scalar }
    }

    pub fn kind(&self) -> &'static str {
        match self {
            Val::Computed(_) => "a computed tensor",
            Val::Const(_) => "a constant",
            Val::QuantConst(..) => "a quantized constant",
            Val::Shape { .. } => "a shape",
        }
    }
}
