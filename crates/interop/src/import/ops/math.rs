//! Element-wise arithmetic, activations and reductions: Add, Sub, Mul, Div, Pow, Relu, Sigmoid,
//! Tanh, LeakyRelu, Selu, Sqrt, Clip, Softmax, LogSoftmax, HardSigmoid, HardSwish, Softplus, Mish,
//! ReduceMean, ReduceSum, ReduceMax.

use super::super::fold::{self, Bin};
use super::super::util::{axis, err, product};
use super::super::value::{Computed, Dim, Val};
use super::super::Importer;
use super::Lower;
use crate::onnx::attrs::Attrs;
use crate::onnx::proto::NodeProto;
use crate::onnx::tensor::Const;
use crate::qonnx;
use crate::Result;
use mase_ir::{NodeQuant, Op, ReduceSpec, Tensor};

/// The ONNX operators of this family and their lowering.
pub(super) const OPS: &[(&str, Lower)] = &[
    ("Add", |im, n| im.binary(n, Bin::Add, Op::Add)),
    ("Sub", |im, n| im.binary(n, Bin::Sub, Op::Sub)),
    ("Mul", |im, n| im.binary(n, Bin::Mul, Op::Mul)),
    ("Div", |im, n| im.binary(n, Bin::Div, Op::Div)),
    ("Pow", |im, n| im.binary(n, Bin::Pow, Op::Pow)),
    ("Relu", |im, n| im.unary(n, Op::Relu)),
    ("Sigmoid", |im, n| im.unary(n, Op::Sigmoid)),
    ("Tanh", |im, n| im.unary(n, Op::Tanh)),
    ("LeakyRelu", |im, n| {
        let a = Attrs::new(n).float("alpha", 0.01)?;
        im.unary(n, Op::LeakyRelu { negative_slope: a })
    }),
    ("Selu", Importer::selu),
    ("Sqrt", Importer::sqrt),
    ("Clip", Importer::clip),
    ("Softmax", |im, n| im.softmax(n, false)),
    ("LogSoftmax", |im, n| im.softmax(n, true)),
    ("HardSigmoid", Importer::hard_sigmoid),
    ("HardSwish", |im, n| im.unary(n, Op::Hardswish)),
    // ONNX's softplus has no threshold; PyTorch's default of 20 gives the same float32 values.
    ("Softplus", |im, n| im.unary(n, Op::Softplus { beta: 1.0, threshold: 20.0 })),
    ("Mish", |im, n| im.unary(n, Op::Mish)),
    // The axes became an input at opset 18 (13 for ReduceSum).
    ("ReduceMean", |im, n| im.reduce(n, Op::Mean, 18)),
    ("ReduceSum", |im, n| im.reduce(n, Op::Sum, 13)),
    ("ReduceMax", |im, n| im.reduce(n, Op::Amax, 18)),
];

impl Importer {
    pub(crate) fn unary(&mut self, n: &NodeProto, op: Op) -> Result<Val> {
        let x = self.req(n, 0)?;
        Ok(Val::Computed(self.call(n, op, vec![x])?))
    }

    pub(crate) fn binary(&mut self, n: &NodeProto, bin: Bin, op: Op) -> Result<Val> {
        let (a, b) = (self.req(n, 0)?, self.req(n, 1)?);
        if let (Val::Const(x), Val::Const(y)) = (&a, &b) {
            return fold::binary(bin, x, y).map(Val::Const).map_err(|e| err(n, e));
        }
        if bin == Bin::Add {
            for (k, (d, c)) in [(0, (&a, &b)), (1, (&b, &a))] {
                if let (Val::Computed(d), Val::Const(_) | Val::QuantConst(..)) = (d, c) {
                    if self.fuse_bias(n, k, d, c)? {
                        return Ok(Val::Computed(d.clone()));
                    }
                }
            }
        }
        Ok(Val::Computed(self.call(n, op, vec![a, b])?))
    }

    /// Completes a bias-less linear layer with the constant added to its output, when nothing
    /// else reads that output.
    pub(crate) fn fuse_bias(&mut self, n: &NodeProto, k: usize, d: &Computed, c: &Val) -> Result<bool> {
        let single_use = n.input.get(k).and_then(|name| self.uses.get(name)).copied() == Some(1);
        if d.quant.is_some() || !single_use || !self.fusable.contains(&d.id) {
            return Ok(false);
        }
        let (c, fmt) = match c {
            Val::Const(c) => (c, None),
            Val::QuantConst(c, f) => (c, Some(f.clone())),
            _ => return Ok(false),
        };
        let node = self.g.node(d.id);
        let Op::Linear { in_features, out_features, .. } = node.op else { return Ok(false) };
        let row = c.shape.iter().rev().skip(1).all(|&s| s == 1) && c.shape.last() == Some(&out_features);
        if !row || fmt.as_ref().is_some_and(|f| !qonnx::per_tensor(f)) {
            return Ok(false);
        }
        let target = node.target.clone();
        self.fusable.remove(&d.id);
        let m = self.g.node_mut(d.id);
        m.op = Op::Linear { in_features, out_features, bias: true };
        if let Some(f) = fmt {
            m.quant.get_or_insert_with(NodeQuant::default).bias = Some(f);
        }
        self.params.insert(format!("{target}.bias"), Tensor { shape: vec![out_features], data: c.f32s() }, true);
        Ok(true)
    }

    pub(crate) fn selu(&mut self, n: &NodeProto) -> Result<Val> {
        let at = Attrs::new(n);
        let (a, g) = (at.float("alpha", 1.673_263_2)?, at.float("gamma", 1.050_701)?);
        if (a - 1.673_263_2).abs() > 1e-6 || (g - 1.050_701).abs() > 1e-6 {
            return Err(err(n, format!("SELU with alpha {a} and gamma {g} (not PyTorch's constants) is not supported")));
        }
        self.unary(n, Op::Selu)
    }

    /// `max(0, min(1, alpha * x + beta))` with PyTorch's `alpha = 1/6`, `beta = 1/2` (the form
    /// torch.onnx writes `hardsigmoid` and, with a `Mul`, `hardswish` in).
    pub(crate) fn hard_sigmoid(&mut self, n: &NodeProto) -> Result<Val> {
        let at = Attrs::new(n);
        let (a, b) = (at.float("alpha", 0.2)?, at.float("beta", 0.5)?);
        if (a - 1.0 / 6.0).abs() > 1e-6 || (b - 0.5).abs() > 1e-6 {
            return Err(err(n, format!("HardSigmoid with alpha {a} and beta {b} (not PyTorch's 1/6 and 1/2) is not supported")));
        }
        self.unary(n, Op::Hardsigmoid)
    }

    /// `ReduceMean`/`ReduceSum`/`ReduceMax`: axes from the attribute before opset `input_from`
    /// and from the optional constant input 1 after, `keepdims` (1), and `noop_with_empty_axes`
    /// (0: no axes reduce every element; 1: no axes pass the input on).
    pub(crate) fn reduce(&mut self, n: &NodeProto, make: fn(ReduceSpec) -> Op, input_from: i64) -> Result<Val> {
        let at = Attrs::new(n);
        let x = self.req_dyn(n, 0)?;
        let axes = if self.opset >= input_from {
            match self.opt(n, 1)? {
                Some(Val::Const(c)) => c.i64s(),
                Some(v) => return Err(err(n, format!("axes must be a constant, not {}", v.kind()))),
                None => Vec::new(),
            }
        } else {
            at.ints("axes")?.unwrap_or_default()
        };
        if axes.is_empty() && at.int("noop_with_empty_axes", 0)? != 0 {
            return Ok(Val::Computed(x));
        }
        let rank = x.rank();
        let dims = axes.iter().map(|&a| axis(n, a, rank).map(|d| d as i64)).collect::<Result<Vec<_>>>()?;
        let spec = ReduceSpec { dims, keepdim: at.int("keepdims", 1)? != 0 };
        Ok(Val::Computed(self.call(n, make(spec), vec![Val::Computed(x)])?))
    }

    pub(crate) fn sqrt(&mut self, n: &NodeProto) -> Result<Val> {
        match self.req(n, 0)? {
            Val::Const(c) => Ok(Val::Const(Const::float(c.shape.clone(), c.f32s().iter().map(|v| v.sqrt()).collect()))),
            v => Ok(Val::Computed(self.call(n, Op::Sqrt, vec![v])?)),
        }
    }

    pub(crate) fn clip(&mut self, n: &NodeProto) -> Result<Val> {
        let at = Attrs::new(n);
        let (mut lo, mut hi) = (f32::MIN, f32::MAX);
        if self.opset < 11 {
            lo = at.float("min", lo)?;
            hi = at.float("max", hi)?;
        } else {
            for (k, slot) in [(1, &mut lo), (2, &mut hi)] {
                if let Some(v) = self.opt(n, k)? {
                    let Val::Const(c) = v else { return Err(err(n, format!("input {k} (bound) must be a constant"))) };
                    *slot = c.scalar_f32().ok_or_else(|| err(n, "a bound must be a single value"))?;
                }
            }
        }
        // Infinite bounds mean "open"; the IR keeps finite numbers so graphs serialise to JSON.
        let (lo, hi) = (lo.max(f32::MIN), hi.min(f32::MAX));
        match self.req(n, 0)? {
            Val::Const(c) => Ok(Val::Const(Const::float(c.shape.clone(), c.f32s().iter().map(|v| v.max(lo).min(hi)).collect()))),
            v => Ok(Val::Computed(self.call(n, Op::Clip { min: lo, max: hi }, vec![v])?)),
        }
    }

    pub(crate) fn softmax(&mut self, n: &NodeProto, log: bool) -> Result<Val> {
        let x = self.req_dyn(n, 0)?;
        let r = x.rank();
        let default = if self.opset < 13 { 1 } else { -1 };
        let a = axis(n, Attrs::new(n).int("axis", default)?, r)?;
        let mk = |d: usize| if log { Op::LogSoftmax { dim: d as i64 } } else { Op::Softmax { dim: d as i64 } };
        if self.opset >= 13 || a + 1 >= r {
            return Ok(Val::Computed(self.call(n, mk(a), vec![Val::Computed(x)])?));
        }
        // Before opset 13, softmax normalises over all dimensions from `axis` on, as one.
        let mut flat = x.shape[..a].to_vec();
        let (p, b) = product(&x.shape[a..]);
        if b > 0 {
            return Err(err(n, "softmax over the batch dimension is not supported"));
        }
        flat.push(Dim::Fixed(p));
        let orig = x.shape.clone();
        let f = self.reshape_to(n, x, flat, "_flat")?;
        let s = self.call_ids(n, mk(a), &[f.id], vec![f.quant.clone()], "")?;
        Ok(Val::Computed(self.reshape_to(n, s, orig, "_unflat")?))
    }
}
