//! One ONNX node at a time into IR nodes, constants or shapes: the dispatcher, which hands each
//! node to its lowering in [`super::ops`].

use super::util::err;
use super::value::Val;
use super::Importer;
use crate::onnx::proto::NodeProto;
use crate::qonnx;
use crate::{InteropError, Result};

impl Importer {
    /// Imports one ONNX node.
    pub(crate) fn node(&mut self, n: &NodeProto) -> Result<()> {
        let out = self.lower(n).map_err(|e| self.explain_moved_batch(n, e))?;
        if matches!(out, Val::Const(_) | Val::Shape { .. }) && n.op_type != "Constant" {
            *self.folded.entry(n.op_type.clone()).or_default() += 1;
        }
        let first = n.output.first().filter(|o| !o.is_empty()).ok_or_else(|| err(n, "the node has no output"))?;
        self.vals.insert(first.clone(), out);
        for (k, o) in n.output.iter().enumerate().skip(1).filter(|(_, o)| !o.is_empty()) {
            self.unavailable
                .insert(o.clone(), format!("it is output {k} of node `{}` ({}), which mase-rs does not compute", n.name, n.op_type));
        }
        Ok(())
    }

    /// The exact GELU of value `x` in place of the chain ending at `n` (`gelu::find`), named
    /// after `n`, its last `Mul`.
    pub(crate) fn erf_gelu(&mut self, n: &NodeProto, x: &str) -> Result<()> {
        let v = self.value(x)?;
        if !matches!(v, Val::Computed(_)) {
            return Err(err(n, format!("the exact GELU ending here reads `{x}`, which is {}; it must be a computed tensor", v.kind())));
        }
        let out = Val::Computed(self.call(n, mase_ir::Op::Gelu { tanh: false }, vec![v])?);
        let first = n.output.first().filter(|o| !o.is_empty()).ok_or_else(|| err(n, "the node has no output"))?;
        self.vals.insert(first.clone(), out);
        Ok(())
    }

    /// Adds to the error of node `n` that an input's batch dimension is not in axis 0 because a
    /// `Transpose` without `perm` (which reverses all dimensions) moved it.
    fn explain_moved_batch(&self, n: &NodeProto, e: InteropError) -> InteropError {
        let Some((value, (axis, t))) = n.input.iter().find_map(|i| self.batch_moved.get(i).map(|m| (i, m))) else { return e };
        let channel = if *axis == 1 { " (the channel axis)" } else { "" };
        let why = format!(
            "input `{value}` has the batch dimension in axis {axis}{channel}: Transpose `{t}` has no `perm`, so it reverses all \
             dimensions and moves the batch out of axis 0; give it a `perm` that keeps axis 0 first"
        );
        match e {
            InteropError::Node { node, op, reason } => InteropError::Node { node, op, reason: format!("{reason}; {why}") },
            InteropError::Graph { reason } => InteropError::Graph { reason: format!("{reason}; {why}") },
            InteropError::NodeShape { node, op, source, note } => {
                InteropError::NodeShape { node, op, source, note: format!("{note}; {why}") }
            }
            other => other,
        }
    }

    /// The value of ONNX node `n`.
    fn lower(&mut self, n: &NodeProto) -> Result<Val> {
        Ok(if qonnx::is_quant_op(n) {
            self.quant(n)?
        } else {
            let lower = super::ops::lowering(&n.op_type).ok_or_else(|| err(n, format!("operator `{}` is not supported", n.op_type)))?;
            lower(self, n)?
        })
    }
}
