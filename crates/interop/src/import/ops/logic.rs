//! Comparisons and selection: Equal, Less, LessOrEqual, Greater, GreaterOrEqual, Not, Where.
//! ONNX's bool tensors are the graph's floats 0 and 1, which the comparison ops give; `Not` of
//! such a value is its comparison with 0, and `Where` holds where its condition is not 0.

use super::super::fold::{self, Bin};
use super::super::util::err;
use super::super::value::Val;
use super::super::Importer;
use super::Lower;
use crate::onnx::proto::NodeProto;
use crate::onnx::tensor::Const;
use crate::Result;
use mase_ir::Op;

/// The ONNX operators of this family and their lowering.
pub(super) const OPS: &[(&str, Lower)] = &[
    ("Equal", |im, n| im.comparison(n, Bin::Equal, Op::Eq)),
    ("Less", |im, n| im.comparison(n, Bin::Less, Op::Lt)),
    ("LessOrEqual", |im, n| im.comparison(n, Bin::LessOrEqual, Op::Le)),
    ("Greater", |im, n| im.comparison(n, Bin::Greater, Op::Gt)),
    ("GreaterOrEqual", |im, n| im.comparison(n, Bin::GreaterOrEqual, Op::Ge)),
    ("Not", Importer::not),
    ("Where", Importer::select),
];

impl Importer {
    /// A comparison, folded when both operands are constants.
    fn comparison(&mut self, n: &NodeProto, bin: Bin, op: Op) -> Result<Val> {
        let (a, b) = (self.req(n, 0)?, self.req(n, 1)?);
        if let (Val::Const(x), Val::Const(y)) = (&a, &b) {
            return fold::binary(bin, x, y).map(Val::Const).map_err(|e| err(n, e));
        }
        Ok(Val::Computed(self.call(n, op, vec![a, b])?))
    }

    /// `Not` of a bool tensor: whether it equals 0. `Not` of an `Equal` that nothing else reads
    /// is the one `ne` (exact with NaN too, which is unequal to everything); other comparisons
    /// keep theirs, since `Not(a < b)` is not `a >= b` where either is NaN.
    fn not(&mut self, n: &NodeProto) -> Result<Val> {
        let x = self.req(n, 0)?;
        let zero = Const::ints(Vec::new(), vec![0]);
        if let Val::Const(c) = &x {
            return fold::binary(Bin::Equal, c, &zero).map(Val::Const).map_err(|e| err(n, e));
        }
        let single_use = n.input.first().and_then(|name| self.uses.get(name)).copied() == Some(1);
        if let Val::Computed(d) = &x {
            let node = self.g.node_mut(d.id);
            if single_use && node.op == Op::Eq {
                node.op = Op::Ne;
                node.target = "operator.ne".into();
                return Ok(x);
            }
        }
        Ok(Val::Computed(self.call(n, Op::Eq, vec![x, Val::Const(Const::float(Vec::new(), vec![0.0]))])?))
    }

    /// `Where(condition, a, b)`, folded when all three are constants.
    fn select(&mut self, n: &NodeProto) -> Result<Val> {
        let (c, a, b) = (self.req(n, 0)?, self.req(n, 1)?, self.req(n, 2)?);
        if let (Val::Const(c), Val::Const(a), Val::Const(b)) = (&c, &a, &b) {
            return fold::select(c, a, b).map(Val::Const).map_err(|e| err(n, e));
        }
        Ok(Val::Computed(self.call(n, Op::Where, vec![c, a, b])?))
    }

    /// A computed value cast to bool: a comparison's 0 or 1 already is one; any other value
    /// becomes whether it differs from 0 (NaN does, as a cast to bool of NaN is true).
    pub(crate) fn cast_to_bool(&mut self, n: &NodeProto, v: Val) -> Result<Val> {
        match v {
            Val::Computed(d) if self.g.node(d.id).op.is_comparison() => Ok(Val::Computed(d)),
            Val::Computed(d) => {
                let zero = Val::Const(Const::float(Vec::new(), vec![0.0]));
                Ok(Val::Computed(self.call(n, Op::Ne, vec![Val::Computed(d), zero])?))
            }
            Val::Const(c) => Ok(Val::Const(Const::ints(c.shape.clone(), c.f32s().iter().map(|&v| i64::from(v != 0.0)).collect()))),
            v => Err(err(n, format!("cast of {} to bool is not supported", v.kind()))),
        }
    }
}
