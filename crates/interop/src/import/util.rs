//! Helpers of the lowerings: node errors, axes, and the `Importer` methods that read a node's
//! inputs and emit IR nodes. Both the dispatcher ([`super::lower`]) and the lowerings of
//! [`super::ops`] use them.

use super::value::{Computed, Dim, Val};
use super::{base_name, Importer};
use crate::onnx::proto::NodeProto;
use crate::onnx::tensor::Const;
use crate::qonnx;
use crate::{InteropError, Result};
use mase_ir::{NodeId, NodeKind, Op, QuantFormat};

pub(crate) fn err(n: &NodeProto, reason: impl Into<String>) -> InteropError {
    InteropError::node(&n.name, &n.op_type, reason)
}

/// Resolves a possibly negative axis against a rank.
pub(crate) fn axis(n: &NodeProto, a: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    let v = if a < 0 { a + r } else { a };
    if (0..r.max(1)).contains(&v) {
        Ok(v as usize)
    } else {
        Err(err(n, format!("axis {a} is out of range for rank {rank}")))
    }
}

/// Flatten's axis: in [-rank, rank], negative values counting from the end.
pub(crate) fn flatten_axis(n: &NodeProto, a: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    let v = if a < 0 { a + r } else { a };
    if (0..=r).contains(&v) {
        Ok(v as usize)
    } else {
        Err(err(n, format!("axis {a} is out of range for rank {rank}")))
    }
}

/// How torch.fx would spell a parameter-free op: node kind and target.
pub(crate) fn fx_target(op: &Op) -> Option<(NodeKind, &'static str)> {
    Some(match op {
        Op::Add => (NodeKind::CallFunction, "operator.add"),
        Op::Sub => (NodeKind::CallFunction, "operator.sub"),
        Op::Mul => (NodeKind::CallFunction, "operator.mul"),
        Op::Div => (NodeKind::CallFunction, "operator.truediv"),
        Op::Pow => (NodeKind::CallFunction, "operator.pow"),
        Op::MatMul => (NodeKind::CallFunction, "torch.matmul"),
        Op::Einsum { .. } => (NodeKind::CallFunction, "torch.functional.einsum"),
        Op::Sqrt => (NodeKind::CallFunction, "torch.sqrt"),
        Op::Clip { .. } => (NodeKind::CallFunction, "torch.clamp"),
        Op::Concat { .. } => (NodeKind::CallFunction, "torch.cat"),
        Op::Index { .. } => (NodeKind::CallFunction, "operator.getitem"),
        Op::Stack { .. } => (NodeKind::CallFunction, "torch.stack"),
        Op::Expand { .. } => (NodeKind::CallMethod, "expand"),
        Op::Repeat { .. } => (NodeKind::CallMethod, "repeat"),
        Op::Pad { .. } => (NodeKind::CallFunction, "torch.nn.functional.pad"),
        Op::Flatten { .. } => (NodeKind::CallFunction, "torch.flatten"),
        Op::Reshape { .. } => (NodeKind::CallMethod, "reshape"),
        Op::Permute { .. } => (NodeKind::CallMethod, "permute"),
        Op::Transpose { .. } => (NodeKind::CallMethod, "transpose"),
        Op::Size { .. } => (NodeKind::CallMethod, "size"),
        Op::Mean(_) => (NodeKind::CallMethod, "mean"),
        Op::Sum(_) => (NodeKind::CallMethod, "sum"),
        Op::Amax(_) => (NodeKind::CallMethod, "amax"),
        Op::Eq => (NodeKind::CallFunction, "operator.eq"),
        Op::Ne => (NodeKind::CallFunction, "operator.ne"),
        Op::Lt => (NodeKind::CallFunction, "operator.lt"),
        Op::Le => (NodeKind::CallFunction, "operator.le"),
        Op::Gt => (NodeKind::CallFunction, "operator.gt"),
        Op::Ge => (NodeKind::CallFunction, "operator.ge"),
        Op::Where => (NodeKind::CallFunction, "torch.where"),
        _ => return None,
    })
}

/// Product of the fixed dimensions (saturating, so hostile sizes compare unequal rather than
/// overflow) and the number of batch dimensions.
pub(crate) fn product(dims: &[Dim]) -> (i64, usize) {
    dims.iter().fold((1, 0), |(p, b), d| match d {
        Dim::Fixed(v) => (p.saturating_mul(*v), b),
        Dim::Batch => (p, b + 1),
    })
}

/// Strides, dilations and kernel sizes beyond this are treated as hostile.
pub(crate) const MAX_WINDOW: i64 = 1 << 16;

impl Importer {
    pub(crate) fn opt(&self, n: &NodeProto, k: usize) -> Result<Option<Val>> {
        match n.input.get(k) {
            Some(name) if !name.is_empty() => Ok(Some(self.value(name)?)),
            _ => Ok(None),
        }
    }

    pub(crate) fn req(&self, n: &NodeProto, k: usize) -> Result<Val> {
        self.opt(n, k)?.ok_or_else(|| err(n, format!("input {k} is missing")))
    }

    pub(crate) fn req_const(&self, n: &NodeProto, k: usize, what: &str) -> Result<Const> {
        match self.req(n, k)? {
            Val::Const(c) => Ok(c),
            v => Err(err(n, format!("input {k} ({what}) must be a constant, it is {}", v.kind()))),
        }
    }

    pub(crate) fn req_dyn(&self, n: &NodeProto, k: usize) -> Result<Computed> {
        match self.req(n, k)? {
            Val::Computed(d) => Ok(d),
            v => Err(err(n, format!("input {k} must be a computed tensor, it is {}", v.kind()))),
        }
    }

    /// The IR node of a value used as an operand, and the format it carries.
    pub(crate) fn operand(&mut self, n: &NodeProto, v: Val) -> Result<(NodeId, Option<QuantFormat>)> {
        match v {
            Val::Computed(d) => Ok((d.id, d.quant)),
            Val::Const(c) => Ok((self.const_node(n, &c), None)),
            Val::QuantConst(c, f) => Ok((self.const_node(n, &c), Some(f))),
            Val::Shape { .. } => Err(err(n, "a shape computed from the batch size is used as data, which is not supported")),
        }
    }

    /// Emits a parameter-free op (a function, method or parameter-free module) on `ins`.
    pub(crate) fn call(&mut self, n: &NodeProto, op: Op, ins: Vec<Val>) -> Result<Computed> {
        let mut ids = Vec::with_capacity(ins.len());
        let mut data_in = Vec::with_capacity(ins.len());
        for v in ins {
            let (id, q) = self.operand(n, v)?;
            ids.push(id);
            data_in.push(q);
        }
        self.call_ids(n, op, &ids, data_in, "")
    }

    pub(crate) fn call_ids(
        &mut self,
        n: &NodeProto,
        op: Op,
        ids: &[NodeId],
        data_in: Vec<Option<QuantFormat>>,
        suffix: &str,
    ) -> Result<Computed> {
        let name = format!("{}{suffix}", base_name(n));
        let id = match fx_target(&op) {
            Some((kind, target)) => self.emit(n, &name, kind, target, op, ids, data_in)?,
            None => {
                let target = self.unique_target(&name);
                self.emit(n, &name, NodeKind::CallModule, &target, op, ids, data_in)?
            }
        };
        self.dyn_of(id)
    }

    /// A data-moving op (reshape, permute, pad) whose input's quantizer, when per-tensor, moves to
    /// its output so that the next computing node applies it.
    pub(crate) fn moving(&mut self, n: &NodeProto, op: Op, x: Computed, suffix: &str) -> Result<Computed> {
        let (carry, data_in) = match &x.quant {
            Some(q) if qonnx::per_tensor(q) => (Some(q.clone()), vec![None]),
            q => (None, vec![q.clone()]),
        };
        let mut d = self.call_ids(n, op, &[x.id], data_in, suffix)?;
        d.quant = carry;
        Ok(d)
    }

    pub(crate) fn call_vals(&mut self, n: &NodeProto, op: Op, ins: Vec<Val>, suffix: &str) -> Result<Computed> {
        let mut ids = Vec::new();
        let mut data_in = Vec::new();
        for v in ins {
            let (id, q) = self.operand(n, v)?;
            ids.push(id);
            data_in.push(q);
        }
        self.call_ids(n, op, &ids, data_in, suffix)
    }
}
