//! One ONNX node at a time into IR nodes, constants or shapes.

use super::fold::{self, Bin};
use super::value::{Dim, Dyn, Val};
use super::{base_name, is_state_dict_name, Importer, WeightQuant};
use crate::onnx::attrs::Attrs;
use crate::onnx::proto::NodeProto;
use crate::onnx::tensor::{dims_fit, Const, Data};
use crate::qonnx;
use crate::{InteropError, Result};
use mase_ir::{ConvSpec, DimArg, NodeId, NodeKind, NodeQuant, NormSpec, Op, PoolSpec, QuantFormat, Tensor};

fn err(n: &NodeProto, reason: impl Into<String>) -> InteropError {
    InteropError::node(&n.name, &n.op_type, reason)
}

/// Resolves a possibly negative axis against a rank.
fn axis(n: &NodeProto, a: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    let v = if a < 0 { a + r } else { a };
    if (0..r.max(1)).contains(&v) {
        Ok(v as usize)
    } else {
        Err(err(n, format!("axis {a} is out of range for rank {rank}")))
    }
}

/// Flatten's axis: in [-rank, rank], negative values counting from the end.
fn flatten_axis(n: &NodeProto, a: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    let v = if a < 0 { a + r } else { a };
    if (0..=r).contains(&v) {
        Ok(v as usize)
    } else {
        Err(err(n, format!("axis {a} is out of range for rank {rank}")))
    }
}

/// How torch.fx would spell a parameter-free op: node kind and target.
fn fx_target(op: &Op) -> Option<(NodeKind, &'static str)> {
    Some(match op {
        Op::Add => (NodeKind::CallFunction, "operator.add"),
        Op::Sub => (NodeKind::CallFunction, "operator.sub"),
        Op::Mul => (NodeKind::CallFunction, "operator.mul"),
        Op::Div => (NodeKind::CallFunction, "operator.truediv"),
        Op::Pow => (NodeKind::CallFunction, "operator.pow"),
        Op::MatMul => (NodeKind::CallFunction, "torch.matmul"),
        Op::Sqrt => (NodeKind::CallFunction, "torch.sqrt"),
        Op::Clip { .. } => (NodeKind::CallFunction, "torch.clamp"),
        Op::Concat { .. } => (NodeKind::CallFunction, "torch.cat"),
        Op::Pad { .. } => (NodeKind::CallFunction, "torch.nn.functional.pad"),
        Op::Flatten { .. } => (NodeKind::CallFunction, "torch.flatten"),
        Op::Reshape { .. } => (NodeKind::CallMethod, "reshape"),
        Op::Permute { .. } => (NodeKind::CallMethod, "permute"),
        Op::Transpose { .. } => (NodeKind::CallMethod, "transpose"),
        Op::Size { .. } => (NodeKind::CallMethod, "size"),
        _ => return None,
    })
}

/// Product of the fixed dimensions (saturating, so hostile sizes compare unequal rather than
/// overflow) and the number of batch dimensions.
fn product(dims: &[Dim]) -> (i64, usize) {
    dims.iter().fold((1, 0), |(p, b), d| match d {
        Dim::Fixed(v) => (p.saturating_mul(*v), b),
        Dim::Batch => (p, b + 1),
    })
}

/// Strides, dilations and kernel sizes beyond this are treated as hostile.
const MAX_WINDOW: i64 = 1 << 16;

impl Importer {
    /// Imports one ONNX node.
    pub(crate) fn node(&mut self, n: &NodeProto) -> Result<()> {
        let out = self.lower(n).map_err(|e| self.explain_moved_batch(n, e))?;
        if matches!(out, Val::Const(_) | Val::Sym { .. }) && n.op_type != "Constant" {
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
            other => other,
        }
    }

    /// The value of ONNX node `n`.
    fn lower(&mut self, n: &NodeProto) -> Result<Val> {
        Ok(if qonnx::is_quant_op(n) {
            self.quant(n)?
        } else {
            match n.op_type.as_str() {
                "Add" => self.binary(n, Bin::Add, Op::Add)?,
                "Sub" => self.binary(n, Bin::Sub, Op::Sub)?,
                "Mul" => self.binary(n, Bin::Mul, Op::Mul)?,
                "Div" => self.binary(n, Bin::Div, Op::Div)?,
                "Pow" => self.binary(n, Bin::Pow, Op::Pow)?,
                "MatMul" => self.matmul(n)?,
                "Gemm" => self.gemm(n)?,
                "Conv" => self.conv(n)?,
                "MaxPool" => self.pool(n, true)?,
                "AveragePool" => self.pool(n, false)?,
                "GlobalAveragePool" => self.global_avg_pool(n)?,
                "BatchNormalization" => self.batch_norm(n)?,
                "Relu" => self.unary(n, Op::Relu)?,
                "Sigmoid" => self.unary(n, Op::Sigmoid)?,
                "Tanh" => self.unary(n, Op::Tanh)?,
                "LeakyRelu" => {
                    let a = Attrs::new(n).float("alpha", 0.01)?;
                    self.unary(n, Op::LeakyRelu { negative_slope: a })?
                }
                "Selu" => self.selu(n)?,
                "Sqrt" => self.sqrt(n)?,
                "Clip" => self.clip(n)?,
                "Softmax" => self.softmax(n, false)?,
                "LogSoftmax" => self.softmax(n, true)?,
                "Flatten" => self.flatten(n)?,
                "Reshape" => self.reshape(n)?,
                "Transpose" => self.transpose(n)?,
                "Squeeze" => self.squeeze(n, true)?,
                "Unsqueeze" => self.squeeze(n, false)?,
                "Concat" => self.concat(n)?,
                "Shape" => self.shape(n)?,
                "Gather" => self.gather(n)?,
                "Constant" => self.constant(n)?,
                "Identity" => self.identity(n)?,
                "Dropout" => self.dropout(n)?,
                "Cast" => self.cast(n)?,
                "Pad" => self.pad(n)?,
                other => return Err(err(n, format!("operator `{other}` is not supported"))),
            }
        })
    }

    fn opt(&self, n: &NodeProto, k: usize) -> Result<Option<Val>> {
        match n.input.get(k) {
            Some(name) if !name.is_empty() => Ok(Some(self.value(name)?)),
            _ => Ok(None),
        }
    }

    fn req(&self, n: &NodeProto, k: usize) -> Result<Val> {
        self.opt(n, k)?.ok_or_else(|| err(n, format!("input {k} is missing")))
    }

    fn req_const(&self, n: &NodeProto, k: usize, what: &str) -> Result<Const> {
        match self.req(n, k)? {
            Val::Const(c) => Ok(c),
            v => Err(err(n, format!("input {k} ({what}) must be a constant, it is {}", v.kind()))),
        }
    }

    fn req_dyn(&self, n: &NodeProto, k: usize) -> Result<Dyn> {
        match self.req(n, k)? {
            Val::Dyn(d) => Ok(d),
            v => Err(err(n, format!("input {k} must be a computed tensor, it is {}", v.kind()))),
        }
    }

    /// The IR node of a value used as an operand, and the format it carries.
    fn operand(&mut self, n: &NodeProto, v: Val) -> Result<(NodeId, Option<QuantFormat>)> {
        match v {
            Val::Dyn(d) => Ok((d.id, d.quant)),
            Val::Const(c) => Ok((self.const_node(n, &c), None)),
            Val::QConst(c, f) => Ok((self.const_node(n, &c), Some(f))),
            Val::Sym { .. } => Err(err(n, "a shape computed from the batch size is used as data, which is not supported")),
        }
    }

    /// Emits a parameter-free op (a function, method or parameter-free module) on `ins`.
    fn call(&mut self, n: &NodeProto, op: Op, ins: Vec<Val>) -> Result<Dyn> {
        let mut ids = Vec::with_capacity(ins.len());
        let mut data_in = Vec::with_capacity(ins.len());
        for v in ins {
            let (id, q) = self.operand(n, v)?;
            ids.push(id);
            data_in.push(q);
        }
        self.call_ids(n, op, &ids, data_in, "")
    }

    fn call_ids(&mut self, n: &NodeProto, op: Op, ids: &[NodeId], data_in: Vec<Option<QuantFormat>>, suffix: &str) -> Result<Dyn> {
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
    fn moving(&mut self, n: &NodeProto, op: Op, x: Dyn, suffix: &str) -> Result<Dyn> {
        let (carry, data_in) = match &x.quant {
            Some(q) if qonnx::per_tensor(q) => (Some(q.clone()), vec![None]),
            q => (None, vec![q.clone()]),
        };
        let mut d = self.call_ids(n, op, &[x.id], data_in, suffix)?;
        d.quant = carry;
        Ok(d)
    }

    fn unary(&mut self, n: &NodeProto, op: Op) -> Result<Val> {
        let x = self.req(n, 0)?;
        Ok(Val::Dyn(self.call(n, op, vec![x])?))
    }

    fn binary(&mut self, n: &NodeProto, bin: Bin, op: Op) -> Result<Val> {
        let (a, b) = (self.req(n, 0)?, self.req(n, 1)?);
        if let (Val::Const(x), Val::Const(y)) = (&a, &b) {
            return fold::binary(bin, x, y).map(Val::Const).map_err(|e| err(n, e));
        }
        if bin == Bin::Add {
            for (k, (d, c)) in [(0, (&a, &b)), (1, (&b, &a))] {
                if let (Val::Dyn(d), Val::Const(_) | Val::QConst(..)) = (d, c) {
                    if self.fuse_bias(n, k, d, c)? {
                        return Ok(Val::Dyn(d.clone()));
                    }
                }
            }
        }
        Ok(Val::Dyn(self.call(n, op, vec![a, b])?))
    }

    /// Completes a bias-less linear layer with the constant added to its output, when nothing
    /// else reads that output.
    fn fuse_bias(&mut self, n: &NodeProto, k: usize, d: &Dyn, c: &Val) -> Result<bool> {
        let single_use = n.input.get(k).and_then(|name| self.uses.get(name)).copied() == Some(1);
        if d.quant.is_some() || !single_use || !self.fusable.contains(&d.id) {
            return Ok(false);
        }
        let (c, fmt) = match c {
            Val::Const(c) => (c, None),
            Val::QConst(c, f) => (c, Some(f.clone())),
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

    /// A weight operand: its values, format and origin.
    fn weight(&self, n: &NodeProto, v: Val, what: &str) -> Result<(Const, Option<QuantFormat>)> {
        match v {
            Val::Const(c) => Ok((c, None)),
            Val::QConst(c, f) => Ok((c, Some(f))),
            v => Err(err(n, format!("the {what} must be a constant, it is {}", v.kind()))),
        }
    }

    /// A linear layer `x W^T + b` with `w` already in PyTorch's `[out, in]` layout.
    fn linear(&mut self, n: &NodeProto, x: Dyn, w: (Const, Option<QuantFormat>), b: Option<(Const, Option<QuantFormat>)>) -> Result<Dyn> {
        let (w, wq) = w;
        if w.shape.len() != 2 {
            return Err(err(n, format!("weight of shape {:?} is not a matrix", w.shape)));
        }
        let (out_features, in_features) = (w.shape[0], w.shape[1]);
        let origins = [w.origin.as_deref(), b.as_ref().and_then(|(c, _)| c.origin.as_deref())];
        let target = self.module_target(n, &origins);
        let op = Op::Linear { in_features, out_features, bias: b.is_some() };
        let data_in = vec![x.quant.clone()];
        let id = self.emit(n, &target, NodeKind::CallModule, &target, op, &[x.id], data_in)?;
        self.params.insert(format!("{target}.weight"), self.maybe_fold(n, w.tensor(), wq.as_ref())?, true);
        let mut bq = None;
        if let Some((c, f)) = b {
            if c.numel() != out_features {
                return Err(err(n, format!("bias of shape {:?} does not match {out_features} outputs", c.shape)));
            }
            let t = Tensor { shape: vec![out_features], data: c.f32s() };
            self.params.insert(format!("{target}.bias"), self.maybe_fold(n, t, f.as_ref())?, true);
            bq = f;
        }
        if wq.is_some() || bq.is_some() {
            let q = self.g.node_mut(id).quant.get_or_insert_with(NodeQuant::default);
            q.weight = wq;
            q.bias = bq;
        }
        self.dyn_of(id)
    }

    /// The parameter values to store for a weight with format `f`: the file's values, or, with
    /// [`WeightQuant::Fold`], the quantized ones.
    fn maybe_fold(&self, n: &NodeProto, t: Tensor, f: Option<&QuantFormat>) -> Result<Tensor> {
        match (self.opts.weight_quant, f) {
            (WeightQuant::Fold, Some(f)) => crate::quantize::quantize_tensor(&t, f).map_err(|e| err(n, e)),
            _ => Ok(t),
        }
    }

    fn matmul(&mut self, n: &NodeProto) -> Result<Val> {
        let (a, b) = (self.req(n, 0)?, self.req(n, 1)?);
        match (&a, &b) {
            (Val::Dyn(x), Val::Const(c) | Val::QConst(c, _)) if c.shape.len() == 2 && x.rank() >= 2 => {
                let (c, f) = self.weight(n, b.clone(), "weight")?;
                let w = fold::transpose(&c, &[1, 0]);
                let f = f.map(|f| transpose_params(&f));
                let x = x.clone();
                let d = self.linear(n, x, (w, f), None)?;
                self.fusable.insert(d.id);
                Ok(Val::Dyn(d))
            }
            (Val::Const(_), Val::Const(_)) => Err(err(n, "MatMul of two constants is not supported")),
            _ => Ok(Val::Dyn(self.call(n, Op::MatMul, vec![a, b])?)),
        }
    }

    fn gemm(&mut self, n: &NodeProto) -> Result<Val> {
        let at = Attrs::new(n);
        let (alpha, beta) = (at.float("alpha", 1.0)?, at.float("beta", 1.0)?);
        let (trans_a, trans_b) = (at.int("transA", 0)? != 0, at.int("transB", 0)? != 0);
        let mut x = self.req_dyn(n, 0)?;
        if x.rank() != 2 {
            return Err(err(n, format!("input A has rank {}, Gemm needs a matrix", x.rank())));
        }
        if trans_a {
            x = self.moving(n, Op::Permute { dims: vec![1, 0] }, x, "_transpose_a")?;
        }
        let b = self.req(n, 1)?;
        let c = self.opt(n, 2)?;
        if let Val::Dyn(_) = b {
            // A product of two computed tensors: matmul, then the scaled addend.
            if alpha != 1.0 || beta != 1.0 {
                return Err(err(n, "Gemm of two computed tensors with alpha or beta other than 1 is not supported"));
            }
            let b = match b {
                Val::Dyn(d) if trans_b => Val::Dyn(self.moving(n, Op::Permute { dims: vec![1, 0] }, d, "_transpose_b")?),
                v => v,
            };
            let mut y = self.call(n, Op::MatMul, vec![Val::Dyn(x), b])?;
            if let Some(c) = c {
                y = self.call_vals(n, Op::Add, vec![Val::Dyn(y), c], "_add")?;
            }
            return Ok(Val::Dyn(y));
        }
        let (w, wq) = self.weight(n, b, "B operand")?;
        if w.shape.len() != 2 {
            return Err(err(n, format!("B of shape {:?} is not a matrix", w.shape)));
        }
        let (mut w, mut wq) = if trans_b { (w, wq) } else { (fold::transpose(&w, &[1, 0]), wq.map(|f| transpose_params(&f))) };
        if alpha != 1.0 {
            if wq.is_some() {
                return Err(err(n, "alpha other than 1 on a quantized weight is not supported"));
            }
            w = Const { data: Data::F(w.f32s().iter().map(|v| v * alpha).collect()), ..w };
            wq = None;
        }
        let out = w.shape[0];
        let bias = match c {
            None => None,
            Some(v) => {
                let (c, cq) = self.weight(n, v, "C operand")?;
                let rows = if c.shape.len() == 2 { c.shape[0] } else { 1 };
                let vals = match c.numel() {
                    1 => vec![c.f32s()[0]; out],
                    k if k == out && rows == 1 => c.f32s(),
                    _ => {
                        return Err(err(
                            n,
                            format!("C of shape {:?} is not a bias of {out} values (a per-sample C needs a fixed batch)", c.shape),
                        ))
                    }
                };
                if beta != 1.0 && cq.is_some() {
                    return Err(err(n, "beta other than 1 on a quantized bias is not supported"));
                }
                let vals = vals.iter().map(|v| v * beta).collect();
                Some((Const { shape: vec![out], data: Data::F(vals), origin: c.origin.clone() }, cq))
            }
        };
        let fusable = bias.is_none();
        let d = self.linear(n, x, (w, wq), bias)?;
        if fusable {
            self.fusable.insert(d.id);
        }
        Ok(Val::Dyn(d))
    }

    fn call_vals(&mut self, n: &NodeProto, op: Op, ins: Vec<Val>, suffix: &str) -> Result<Dyn> {
        let mut ids = Vec::new();
        let mut data_in = Vec::new();
        for v in ins {
            let (id, q) = self.operand(n, v)?;
            ids.push(id);
            data_in.push(q);
        }
        self.call_ids(n, op, &ids, data_in, suffix)
    }

    /// Begin and end paddings of each spatial dimension from `pads` / `auto_pad`.
    fn pads(&self, n: &NodeProto, x: &Dyn, kernel: &[usize], strides: &[usize], dilations: &[usize]) -> Result<(Vec<usize>, Vec<usize>)> {
        let at = Attrs::new(n);
        let dims = kernel.len();
        let auto = at.string("auto_pad", "NOTSET")?;
        match auto.as_str() {
            "NOTSET" => {
                let p = at.ints("pads")?.unwrap_or_else(|| vec![0; 2 * dims]);
                if p.len() != 2 * dims || p.iter().any(|&v| !(0..=MAX_WINDOW).contains(&v)) {
                    return Err(err(n, format!("pads {p:?} do not fit {dims} spatial dimensions")));
                }
                let p: Vec<usize> = p.iter().map(|&v| v as usize).collect();
                Ok((p[..dims].to_vec(), p[dims..].to_vec()))
            }
            "VALID" => Ok((vec![0; dims], vec![0; dims])),
            "SAME_UPPER" | "SAME_LOWER" => {
                let (mut b, mut e) = (Vec::new(), Vec::new());
                for d in 0..dims {
                    let len = x.fixed(2 + d).ok_or_else(|| err(n, "auto_pad needs fixed spatial sizes"))?;
                    let out = len.div_ceil(strides[d]);
                    let span = out.saturating_sub(1) * strides[d] + kernel[d].saturating_sub(1) * dilations[d] + 1;
                    let total = span.saturating_sub(len);
                    let small = total / 2;
                    let (pb, pe) = if auto == "SAME_UPPER" { (small, total - small) } else { (total - small, small) };
                    b.push(pb);
                    e.push(pe);
                }
                Ok((b, e))
            }
            other => Err(err(n, format!("unknown auto_pad `{other}`"))),
        }
    }

    /// Pads the asymmetric part explicitly and returns the input and the symmetric padding, at
    /// most `max_sym[d]` per side.
    fn split_pads(
        &mut self,
        n: &NodeProto,
        x: Dyn,
        begin: &[usize],
        end: &[usize],
        max_sym: &[usize],
        value: f32,
    ) -> Result<(Dyn, Vec<usize>)> {
        let sym: Vec<usize> = begin.iter().zip(end).zip(max_sym).map(|((b, e), m)| (*b).min(*e).min(*m)).collect();
        let eb: Vec<usize> = begin.iter().zip(&sym).map(|(b, s)| b - s).collect();
        let ee: Vec<usize> = end.iter().zip(&sym).map(|(e, s)| e - s).collect();
        if eb.iter().chain(&ee).all(|&v| v == 0) {
            return Ok((x, sym));
        }
        let y = self.moving(n, Op::Pad { begin: eb, end: ee, value }, x, "_pad")?;
        Ok((y, sym))
    }

    fn conv(&mut self, n: &NodeProto) -> Result<Val> {
        let at = Attrs::new(n);
        let x = self.req_dyn(n, 0)?;
        let (w, wq) = {
            let v = self.req(n, 1)?;
            self.weight(n, v, "weight")?
        };
        let b = match self.opt(n, 2)? {
            Some(v) => Some(self.weight(n, v, "bias")?),
            None => None,
        };
        let dims = x.rank().saturating_sub(2);
        if !(1..=2).contains(&dims) || w.shape.len() != dims + 2 {
            return Err(err(n, format!("only 1-D and 2-D convolutions are supported (input rank {}, weight {:?})", x.rank(), w.shape)));
        }
        let kernel = w.shape[2..].to_vec();
        if let Some(k) = at.ints("kernel_shape")? {
            if k.iter().map(|&v| v as usize).collect::<Vec<_>>() != kernel {
                return Err(err(n, format!("kernel_shape {k:?} differs from the weight's {kernel:?}")));
            }
        }
        if w.shape.iter().any(|&d| d == 0 || d as i64 > MAX_WINDOW * 16) {
            return Err(err(n, format!("weight shape {:?} is not a valid convolution kernel", w.shape)));
        }
        let list = |name: &str| -> Result<Vec<usize>> {
            let v = at.ints(name)?.unwrap_or_else(|| vec![1; dims]);
            if v.len() != dims || v.iter().any(|&s| !(1..=MAX_WINDOW).contains(&s)) {
                return Err(err(n, format!("{name} {v:?} do not fit {dims} spatial dimensions")));
            }
            Ok(v.iter().map(|&s| s as usize).collect())
        };
        let (stride, dilation) = (list("strides")?, list("dilations")?);
        let groups = at.int("group", 1)?;
        let groups = usize::try_from(groups)
            .ok()
            .filter(|&g| (1..=w.shape[0]).contains(&g))
            .ok_or_else(|| err(n, format!("group {groups} is not between 1 and the output channels")))?;
        let (begin, end) = self.pads(n, &x, &kernel, &stride, &dilation)?;
        let (x, padding) = self.split_pads(n, x, &begin, &end, &vec![usize::MAX; dims], 0.0)?;
        let spec = ConvSpec {
            in_channels: w.shape[1] * groups,
            out_channels: w.shape[0],
            kernel,
            stride,
            padding,
            dilation,
            groups,
            bias: b.is_some(),
        };
        let origins = [w.origin.as_deref(), b.as_ref().and_then(|(c, _)| c.origin.as_deref())];
        let target = self.module_target(n, &origins);
        let op = if dims == 1 { Op::Conv1d(spec) } else { Op::Conv2d(spec) };
        let id = self.emit(n, &target, NodeKind::CallModule, &target, op, &[x.id], vec![x.quant.clone()])?;
        self.params.insert(format!("{target}.weight"), self.maybe_fold(n, w.tensor(), wq.as_ref())?, true);
        let mut bq = None;
        if let Some((c, f)) = b {
            let t = Tensor { shape: vec![c.numel()], data: c.f32s() };
            self.params.insert(format!("{target}.bias"), self.maybe_fold(n, t, f.as_ref())?, true);
            bq = f;
        }
        if wq.is_some() || bq.is_some() {
            let q = self.g.node_mut(id).quant.get_or_insert_with(NodeQuant::default);
            q.weight = wq;
            q.bias = bq;
        }
        Ok(Val::Dyn(self.dyn_of(id)?))
    }

    fn pool(&mut self, n: &NodeProto, max: bool) -> Result<Val> {
        let at = Attrs::new(n);
        let x = self.req_dyn(n, 0)?;
        let dims = x.rank().saturating_sub(2);
        if !(1..=2).contains(&dims) {
            return Err(err(n, format!("only 1-D and 2-D pooling is supported (input rank {})", x.rank())));
        }
        let kernel: Vec<usize> = at
            .ints("kernel_shape")?
            .ok_or_else(|| err(n, "kernel_shape is missing"))?
            .iter()
            .map(|&k| k.clamp(1, MAX_WINDOW) as usize)
            .collect();
        let stride: Vec<usize> =
            at.ints("strides")?.unwrap_or_else(|| vec![1; dims]).iter().map(|&s| s.clamp(1, MAX_WINDOW) as usize).collect();
        if kernel.len() != dims || stride.len() != dims {
            return Err(err(n, "kernel_shape and strides must have one entry per spatial dimension"));
        }
        if at.ints("dilations")?.is_some_and(|d| d.iter().any(|&v| v != 1)) {
            return Err(err(n, "pooling with dilations is not supported"));
        }
        let (begin, end) = self.pads(n, &x, &kernel, &stride, &vec![1; dims])?;
        if at.int("ceil_mode", 0)? != 0 {
            for d in 0..dims {
                let len = x.fixed(2 + d).ok_or_else(|| err(n, "ceil_mode needs fixed spatial sizes"))? + begin[d] + end[d];
                if len >= kernel[d] && (len - kernel[d]) % stride[d] != 0 {
                    return Err(err(n, "ceil_mode = 1 changes the output size here, which is not supported"));
                }
            }
        }
        let (value, limit): (f32, Vec<usize>) = if max {
            (f32::MIN, kernel.iter().map(|k| k / 2).collect())
        } else {
            if at.int("count_include_pad", 0)? == 0 && begin.iter().chain(&end).any(|&p| p > 0) {
                return Err(err(n, "average pooling with padding excluded from the count (count_include_pad = 0) is not supported"));
            }
            (0.0, kernel.iter().map(|k| k / 2).collect())
        };
        let (x, padding) = self.split_pads(n, x, &begin, &end, &limit, value)?;
        let spec = PoolSpec { kernel, stride, padding };
        let op = match (max, dims) {
            (true, 1) => Op::MaxPool1d(spec),
            (true, _) => Op::MaxPool2d(spec),
            (false, 1) => Op::AvgPool1d(spec),
            (false, _) => Op::AvgPool2d(spec),
        };
        let q = x.quant.clone();
        let d = self.call_ids(n, op, &[x.id], vec![q], "")?;
        Ok(Val::Dyn(d))
    }

    fn global_avg_pool(&mut self, n: &NodeProto) -> Result<Val> {
        let x = self.req_dyn(n, 0)?;
        let op = match x.rank() {
            3 => Op::AdaptiveAvgPool1d { output_size: 1 },
            4 => Op::AdaptiveAvgPool2d { output_size: [1, 1] },
            r => return Err(err(n, format!("input of rank {r} is not supported"))),
        };
        Ok(Val::Dyn(self.call(n, op, vec![Val::Dyn(x)])?))
    }

    fn batch_norm(&mut self, n: &NodeProto) -> Result<Val> {
        let at = Attrs::new(n);
        let x = self.req_dyn(n, 0)?;
        if at.int("training_mode", 0)? != 0 {
            return Err(err(n, "training_mode = 1 is not supported; export the model in evaluation mode"));
        }
        if at.int("spatial", 1)? == 0 && x.rank() > 2 {
            return Err(err(n, "spatial = 0 (per-element statistics) is not supported"));
        }
        let c = x.fixed(1).ok_or_else(|| err(n, "the channel dimension must be fixed"))?;
        let ps: Vec<Const> = (1..5).map(|k| self.req_const(n, k, ["", "scale", "bias", "mean", "variance"][k])).collect::<Result<_>>()?;
        if let Some(p) = ps.iter().find(|p| p.numel() != c) {
            return Err(err(n, format!("parameter of shape {:?} does not match {c} channels", p.shape)));
        }
        let spec = NormSpec { num_features: c, eps: at.float("epsilon", 1e-5)?, momentum: 1.0 - at.float("momentum", 0.9)?, affine: true };
        let op = match x.rank() {
            2 | 3 => Op::BatchNorm1d(spec),
            4 => Op::BatchNorm2d(spec),
            r => return Err(err(n, format!("input of rank {r} is not supported"))),
        };
        let origins: Vec<Option<&str>> = ps.iter().map(|p| p.origin.as_deref()).collect();
        let target = self.module_target(n, &origins);
        let id = self.emit(n, &target, NodeKind::CallModule, &target, op, &[x.id], vec![x.quant.clone()])?;
        for (p, (name, trainable)) in ps.iter().zip([("weight", true), ("bias", true), ("running_mean", false), ("running_var", false)]) {
            self.params.insert(format!("{target}.{name}"), Tensor { shape: vec![c], data: p.f32s() }, trainable);
        }
        Ok(Val::Dyn(self.dyn_of(id)?))
    }

    fn selu(&mut self, n: &NodeProto) -> Result<Val> {
        let at = Attrs::new(n);
        let (a, g) = (at.float("alpha", 1.673_263_2)?, at.float("gamma", 1.050_701)?);
        if (a - 1.673_263_2).abs() > 1e-6 || (g - 1.050_701).abs() > 1e-6 {
            return Err(err(n, format!("SELU with alpha {a} and gamma {g} (not PyTorch's constants) is not supported")));
        }
        self.unary(n, Op::Selu)
    }

    fn sqrt(&mut self, n: &NodeProto) -> Result<Val> {
        match self.req(n, 0)? {
            Val::Const(c) => Ok(Val::Const(Const::float(c.shape.clone(), c.f32s().iter().map(|v| v.sqrt()).collect()))),
            v => Ok(Val::Dyn(self.call(n, Op::Sqrt, vec![v])?)),
        }
    }

    fn clip(&mut self, n: &NodeProto) -> Result<Val> {
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
            v => Ok(Val::Dyn(self.call(n, Op::Clip { min: lo, max: hi }, vec![v])?)),
        }
    }

    fn softmax(&mut self, n: &NodeProto, log: bool) -> Result<Val> {
        let x = self.req_dyn(n, 0)?;
        let r = x.rank();
        let default = if self.opset < 13 { 1 } else { -1 };
        let a = axis(n, Attrs::new(n).int("axis", default)?, r)?;
        let mk = |d: usize| if log { Op::LogSoftmax { dim: d as i64 } } else { Op::Softmax { dim: d as i64 } };
        if self.opset >= 13 || a + 1 >= r {
            return Ok(Val::Dyn(self.call(n, mk(a), vec![Val::Dyn(x)])?));
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
        Ok(Val::Dyn(self.reshape_to(n, s, orig, "_unflat")?))
    }

    /// A reshape of a computed tensor to `target`, which may hold the batch at most once.
    fn reshape_to(&mut self, n: &NodeProto, x: Dyn, target: Vec<Dim>, suffix: &str) -> Result<Dyn> {
        if target == x.shape {
            return Ok(x);
        }
        let (_, tb) = product(&target);
        let (_, xb) = product(&x.shape);
        if tb > 1 || tb != xb {
            return Err(err(n, format!("reshape of {:?} to {:?} would move the batch dimension into others", x.shape, target)));
        }
        let shape = target.iter().map(|d| DimArg::Const(if let Dim::Fixed(v) = d { *v } else { -1 })).collect();
        self.moving(n, Op::Reshape { shape }, x, suffix)
    }

    fn flatten(&mut self, n: &NodeProto) -> Result<Val> {
        let a = Attrs::new(n).int("axis", 1)?;
        match self.req(n, 0)? {
            Val::Const(c) => {
                let k = flatten_axis(n, a, c.shape.len())?;
                let shape = vec![c.shape[..k].iter().product(), c.shape[k..].iter().product()];
                Ok(Val::Const(Const { shape, ..c }))
            }
            Val::Dyn(x) => {
                let mut k = flatten_axis(n, a, x.rank())?;
                if k == 0 && x.shape.first() == Some(&Dim::Batch) {
                    self.notes.push(format!(
                        "Flatten `{}` with axis 0 keeps the batch dimension (axis 1) so the model takes any batch size",
                        n.name
                    ));
                    k = 1;
                }
                let side = |dims: &[Dim]| -> Result<Dim> {
                    match product(dims) {
                        (p, 0) => Ok(Dim::Fixed(p)),
                        (1, 1) => Ok(Dim::Batch),
                        _ => Err(err(n, "flatten would merge the batch dimension with others")),
                    }
                };
                let target = vec![side(&x.shape[..k])?, side(&x.shape[k..])?];
                if k == 1 && x.shape[0] == Dim::Batch && x.rank() > 2 {
                    return Ok(Val::Dyn(self.moving(n, Op::Flatten { start_dim: 1, end_dim: -1 }, x, "")?));
                }
                Ok(Val::Dyn(self.reshape_to(n, x, target, "")?))
            }
            v => Err(err(n, format!("flatten of {} is not supported", v.kind()))),
        }
    }

    fn reshape(&mut self, n: &NodeProto) -> Result<Val> {
        let data = self.req(n, 0)?;
        let allow_zero = Attrs::new(n).int("allowzero", 0)? != 0;
        let entries: Vec<Dim> = match self.req(n, 1)? {
            Val::Const(c) => c.i64s().into_iter().map(Dim::Fixed).collect(),
            Val::Sym { dims, .. } => dims,
            v => return Err(err(n, format!("the shape must be a constant or computed from shapes, it is {}", v.kind()))),
        };
        match data {
            Val::Const(c) => {
                let src: Vec<Dim> = c.shape.iter().map(|&v| Dim::Fixed(v as i64)).collect();
                let t = self.resolve_reshape(n, &src, &entries, allow_zero, false)?;
                let shape: Vec<usize> = t.iter().map(|d| if let Dim::Fixed(v) = d { *v as usize } else { 0 }).collect();
                // An empty constant takes any shape with a 0 in it, also one whose other sizes
                // overflow; constants never hold such shapes (see `dims_fit`).
                if !dims_fit(&shape) {
                    return Err(err(n, format!("cannot reshape {:?} to {shape:?}: the sizes overflow", c.shape)));
                }
                Ok(Val::Const(Const { shape, ..c }))
            }
            Val::Dyn(x) => {
                let t = self.resolve_reshape(n, &x.shape, &entries, allow_zero, true)?;
                Ok(Val::Dyn(self.reshape_to(n, x, t, "")?))
            }
            v => Err(err(n, format!("reshape of {} is not supported", v.kind()))),
        }
    }

    /// ONNX reshape targets (`0` copies a dimension, `-1` is inferred) against a source shape.
    fn resolve_reshape(&mut self, n: &NodeProto, src: &[Dim], entries: &[Dim], allow_zero: bool, dynamic: bool) -> Result<Vec<Dim>> {
        let mut t = Vec::with_capacity(entries.len());
        let mut infer = None;
        for (i, e) in entries.iter().enumerate() {
            t.push(match *e {
                Dim::Batch => Dim::Batch,
                Dim::Fixed(0) if !allow_zero => {
                    *src.get(i).ok_or_else(|| err(n, format!("shape entry {i} copies a dimension the input does not have")))?
                }
                Dim::Fixed(-1) if infer.is_none() => {
                    infer = Some(i);
                    Dim::Fixed(1)
                }
                Dim::Fixed(v) if v < 0 => return Err(err(n, format!("invalid shape entry {v}"))),
                Dim::Fixed(v) if dynamic && i == 0 && src.first() == Some(&Dim::Batch) && self.hard_batch == Some(v as usize) => {
                    self.notes.push(format!(
                        "Reshape `{}`: shape entry 0 equals the file's fixed batch size {v} and is read as the batch",
                        n.name
                    ));
                    Dim::Batch
                }
                Dim::Fixed(v) => Dim::Fixed(v),
            });
        }
        let (sp, sb) = product(src);
        let (tp, tb) = product(&t);
        match infer {
            Some(i) if sb == 1 && tb == 0 => {
                if sp != tp {
                    return Err(err(n, format!("cannot reshape {src:?} to {entries:?} and keep the batch dimension")));
                }
                t[i] = Dim::Batch;
            }
            Some(i) => {
                if tp == 0 || sp % tp != 0 {
                    return Err(err(n, format!("cannot reshape {src:?} to {entries:?}")));
                }
                t[i] = Dim::Fixed(sp / tp);
            }
            None if sp != tp || sb != tb => return Err(err(n, format!("cannot reshape {src:?} to {entries:?}"))),
            None => {}
        }
        Ok(t)
    }

    fn transpose(&mut self, n: &NodeProto) -> Result<Val> {
        let x = self.req(n, 0)?;
        let rank = match &x {
            Val::Dyn(d) => d.rank(),
            Val::Const(c) | Val::QConst(c, _) => c.shape.len(),
            v => return Err(err(n, format!("transpose of {} is not supported", v.kind()))),
        };
        let given = Attrs::new(n).ints("perm")?;
        let perm: Vec<usize> = match &given {
            Some(p) => p.iter().map(|&a| axis(n, a, rank)).collect::<Result<_>>()?,
            None => (0..rank).rev().collect(),
        };
        if let (None, Val::Dyn(d), Some(out)) = (&given, &x, n.output.first()) {
            if rank > 1 && d.shape.first() == Some(&Dim::Batch) {
                self.batch_moved.insert(out.clone(), (rank - 1, n.name.clone()));
            }
        }
        let mut seen = vec![false; rank];
        if perm.len() != rank || perm.iter().any(|&p| std::mem::replace(&mut seen[p], true)) {
            return Err(err(n, format!("perm {perm:?} is not a permutation of {rank} dimensions")));
        }
        Ok(match x {
            Val::Const(c) => Val::Const(fold::transpose(&c, &perm)),
            Val::QConst(c, f) => {
                let f = qonnx::map_params(&f, |t| {
                    if t.numel() == 1 || t.rank() != rank {
                        t.clone()
                    } else {
                        fold::transpose(&Const::float(t.shape.clone(), t.data.clone()), &perm).tensor()
                    }
                });
                Val::QConst(fold::transpose(&c, &perm), f)
            }
            Val::Dyn(d) if perm.iter().enumerate().all(|(i, &p)| i == p) => Val::Dyn(d),
            Val::Dyn(d) => Val::Dyn(self.moving(n, Op::Permute { dims: perm.iter().map(|&p| p as i64).collect() }, d, "")?),
            _ => unreachable!("a shape value was refused when the rank was read above"),
        })
    }

    fn axes(&self, n: &NodeProto) -> Result<Option<Vec<i64>>> {
        if self.opset >= 13 {
            return Ok(match self.opt(n, 1)? {
                Some(Val::Const(c)) => Some(c.i64s()),
                Some(v) => return Err(err(n, format!("axes must be a constant, not {}", v.kind()))),
                None => None,
            });
        }
        Attrs::new(n).ints("axes")
    }

    fn squeeze(&mut self, n: &NodeProto, squeeze: bool) -> Result<Val> {
        let axes = self.axes(n)?;
        let x = self.req(n, 0)?;
        let shape: Vec<Dim> = match &x {
            Val::Dyn(d) => d.shape.clone(),
            Val::Const(c) | Val::QConst(c, _) => c.shape.iter().map(|&v| Dim::Fixed(v as i64)).collect(),
            Val::Sym { dims, scalar } => {
                if *scalar {
                    vec![]
                } else {
                    vec![Dim::Fixed(dims.len() as i64)]
                }
            }
        };
        let target: Vec<Dim> = if squeeze {
            let drop: Vec<usize> = match &axes {
                Some(a) => a.iter().map(|&v| axis(n, v, shape.len())).collect::<Result<_>>()?,
                None => (0..shape.len()).filter(|&d| shape[d] == Dim::Fixed(1)).collect(),
            };
            // `axis` accepts 0 for a rank-0 value (Gather and Concat want that), so a scalar can
            // name a dimension it does not have.
            if let Some(&d) = drop.iter().find(|&&d| d >= shape.len()) {
                return Err(err(n, format!("axis {d} is out of range for rank {}", shape.len())));
            }
            if let Some(&d) = drop.iter().find(|&&d| shape[d] != Dim::Fixed(1)) {
                return Err(err(n, format!("dimension {d} of {shape:?} is not 1")));
            }
            shape.iter().enumerate().filter(|(d, _)| !drop.contains(d)).map(|(_, s)| *s).collect()
        } else {
            let a = axes.ok_or_else(|| err(n, "axes are missing"))?;
            let out_rank = shape.len() + a.len();
            let mut ins: Vec<usize> = a.iter().map(|&v| axis(n, v, out_rank)).collect::<Result<_>>()?;
            ins.sort_unstable();
            let mut t = shape.clone();
            for i in ins {
                t.insert(i.min(t.len()), Dim::Fixed(1));
            }
            t
        };
        match x {
            Val::Dyn(d) => Ok(Val::Dyn(self.reshape_to(n, d, target, "")?)),
            Val::Const(c) => {
                Ok(Val::Const(Const { shape: target.iter().map(|d| if let Dim::Fixed(v) = d { *v as usize } else { 0 }).collect(), ..c }))
            }
            Val::Sym { dims, .. } => Ok(Val::sym(dims, target.is_empty())),
            Val::QConst(..) => Err(err(n, "squeezing a quantized constant is not supported")),
        }
    }

    fn concat(&mut self, n: &NodeProto) -> Result<Val> {
        let a = Attrs::new(n).int("axis", i64::MIN)?;
        if a == i64::MIN {
            return Err(err(n, "axis is missing"));
        }
        let ins: Vec<Val> = (0..n.input.len()).map(|k| self.req(n, k)).collect::<Result<_>>()?;
        if ins.iter().all(|v| matches!(v, Val::Const(_))) {
            let cs: Vec<Const> = ins
                .into_iter()
                .map(|v| if let Val::Const(c) = v { c } else { unreachable!("every input was checked to be a constant just above") })
                .collect();
            let rank = cs.first().map_or(0, |c| c.shape.len());
            return fold::concat(&cs, axis(n, a, rank)?).map(Val::Const).map_err(|e| err(n, e));
        }
        if ins.iter().any(|v| matches!(v, Val::Sym { .. })) {
            let mut dims = Vec::new();
            for v in &ins {
                match v {
                    Val::Sym { dims: d, .. } => dims.extend(d),
                    Val::Const(c) if c.shape.len() <= 1 => dims.extend(c.i64s().into_iter().map(Dim::Fixed)),
                    other => return Err(err(n, format!("cannot concatenate a shape with {}", other.kind()))),
                }
            }
            return Ok(Val::sym(dims, false));
        }
        let rank = ins.iter().find_map(|v| if let Val::Dyn(d) = v { Some(d.rank()) } else { None }).unwrap_or(0);
        let d = axis(n, a, rank)?;
        Ok(Val::Dyn(self.call(n, Op::Concat { dim: d as i64 }, ins)?))
    }

    fn shape(&mut self, n: &NodeProto) -> Result<Val> {
        let at = Attrs::new(n);
        let dims: Vec<Dim> = match self.req(n, 0)? {
            Val::Dyn(d) => d.shape,
            Val::Const(c) | Val::QConst(c, _) => c.shape.iter().map(|&v| Dim::Fixed(v as i64)).collect(),
            v => return Err(err(n, format!("shape of {} is not supported", v.kind()))),
        };
        let r = dims.len() as i64;
        let clampi = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
        let (s, e) = (clampi(at.int("start", 0)?), clampi(at.int("end", r)?));
        Ok(Val::sym(dims[s..e.max(s)].to_vec(), false))
    }

    fn gather(&mut self, n: &NodeProto) -> Result<Val> {
        let a = Attrs::new(n).int("axis", 0)?;
        let idx = self.req_const(n, 1, "indices")?;
        match self.req(n, 0)? {
            Val::Const(c) => {
                let k = axis(n, a, c.shape.len())?;
                let g = fold::gather(&c, &idx, k).map_err(|e| err(n, e))?;
                if !dims_fit(&g.shape) {
                    return Err(err(n, format!("gathering indices of shape {:?} from {:?} gives sizes that overflow", idx.shape, c.shape)));
                }
                Ok(Val::Const(g))
            }
            Val::Sym { dims, .. } => {
                let len = dims.len() as i64;
                let mut out = Vec::new();
                for i in idx.i64s() {
                    let j = if i < 0 { i + len } else { i };
                    out.push(*usize::try_from(j).ok().and_then(|j| dims.get(j)).ok_or_else(|| err(n, format!("index {i} out of range")))?);
                }
                Ok(Val::sym(out, idx.shape.is_empty()))
            }
            v => Err(err(n, format!("Gather on {} is not supported (only on shapes and constants)", v.kind()))),
        }
    }

    fn constant(&mut self, n: &NodeProto) -> Result<Val> {
        let at = Attrs::new(n);
        let c = if let Some(t) = at.tensor("value")? {
            Const { origin: None, ..t }
        } else if at.has("value_float") {
            Const::float(vec![], vec![at.float("value_float", 0.0)?])
        } else if let Some(v) = at.floats("value_floats")? {
            Const::float(vec![v.len()], v)
        } else if at.has("value_int") {
            Const::ints(vec![], vec![at.int("value_int", 0)?])
        } else if let Some(v) = at.ints("value_ints")? {
            Const::ints(vec![v.len()], v)
        } else {
            return Err(err(n, "no supported value attribute (value, value_float(s), value_int(s))"));
        };
        Ok(Val::Const(c))
    }

    /// The input itself. PyTorch's exporter reads an initializer it shared between modules of
    /// equal values through an `Identity` whose output carries the reader's own state-dict name
    /// (`seq_blocks.6.weight = Identity(seq_blocks.0.weight)`): the constant takes that name.
    fn identity(&mut self, n: &NodeProto) -> Result<Val> {
        let own = n.output.first().filter(|o| is_state_dict_name(o)).cloned();
        Ok(match self.req(n, 0)? {
            Val::Const(c) if own.is_some() && c.origin.is_some() => Val::Const(Const { origin: own, ..c }),
            v => v,
        })
    }

    fn dropout(&mut self, n: &NodeProto) -> Result<Val> {
        let p = if self.opset < 12 {
            Attrs::new(n).float("ratio", 0.5)?
        } else {
            match self.opt(n, 1)? {
                Some(Val::Const(c)) => c.scalar_f32().unwrap_or(0.5),
                Some(_) => return Err(err(n, "ratio must be a constant")),
                None => 0.5,
            }
        };
        let x = self.req(n, 0)?;
        if !(0.0..1.0).contains(&p) {
            return Err(err(n, format!("ratio {p} is not in [0, 1)")));
        }
        match x {
            Val::Dyn(d) => Ok(Val::Dyn(self.moving(n, Op::Dropout { p }, d, "")?)),
            v => Ok(v),
        }
    }

    fn pad(&mut self, n: &NodeProto) -> Result<Val> {
        let at = Attrs::new(n);
        let mode = at.string("mode", "constant")?;
        if mode != "constant" {
            return Err(err(n, format!("mode `{mode}` is not supported (only constant padding)")));
        }
        let x = self.req_dyn(n, 0)?;
        let (pads, value) = if self.opset < 11 {
            (at.ints("pads")?.ok_or_else(|| err(n, "pads are missing"))?, at.float("value", 0.0)?)
        } else {
            if self.opt(n, 3)?.is_some() {
                return Err(err(n, "the axes input is not supported"));
            }
            let value = match self.opt(n, 2)? {
                Some(Val::Const(c)) => c.scalar_f32().ok_or_else(|| err(n, "constant_value must be one value"))?,
                Some(v) => return Err(err(n, format!("constant_value must be a constant, it is {}", v.kind()))),
                None => 0.0,
            };
            (self.req_const(n, 1, "pads")?.i64s(), value)
        };
        let r = x.rank();
        // A computed value loses its batch dimension only through hostile graphs (a product
        // of a transposed input with itself, reshaped to a scalar), but then it can have rank 0.
        if r == 0 {
            return Err(err(n, "padding a rank-0 value is not supported"));
        }
        if pads.len() != 2 * r || pads.iter().any(|&p| !(0..=MAX_WINDOW).contains(&p)) {
            return Err(err(n, format!("pads {pads:?} do not fit rank {r} (each pad must be between 0 and {MAX_WINDOW})")));
        }
        if pads[0] != 0 || pads[r] != 0 {
            return Err(err(n, "padding the batch dimension is not supported"));
        }
        let begin = pads[1..r].iter().map(|&p| p as usize).collect();
        let end = pads[r + 1..].iter().map(|&p| p as usize).collect();
        Ok(Val::Dyn(self.moving(n, Op::Pad { begin, end, value: value.clamp(f32::MIN, f32::MAX) }, x, "")?))
    }

    fn cast(&mut self, n: &NodeProto) -> Result<Val> {
        let to = Attrs::new(n).int("to", 1)?;
        let float = matches!(to, 1 | 10 | 11 | 16);
        let int = matches!(to, 2..=7 | 9 | 12 | 13);
        match self.req(n, 0)? {
            Val::Const(c) if float => Ok(Val::Const(Const::float(c.shape.clone(), c.f32s()))),
            Val::Const(c) if int => Ok(Val::Const(Const::ints(c.shape.clone(), c.i64s()))),
            v @ Val::Sym { .. } if int => Ok(v),
            v @ (Val::Dyn(_) | Val::QConst(..)) if float => Ok(v),
            v => Err(err(n, format!("cast of {} to type {to} is not supported", v.kind()))),
        }
    }

    fn quant(&mut self, n: &NodeProto) -> Result<Val> {
        let x = self.req(n, 0)?;
        let consts: Vec<Option<Const>> = (0..n.input.len())
            .map(|k| {
                Ok(if k == 0 {
                    None
                } else if let Some(Val::Const(c)) = self.opt(n, k)? {
                    Some(c)
                } else {
                    None
                })
            })
            .collect::<Result<_>>()?;
        let refs: Vec<Option<&Const>> = consts.iter().map(Option::as_ref).collect();
        let fmt = qonnx::format_of(n, &refs)?;
        match x {
            Val::Const(c) => Ok(Val::QConst(c, fmt)),
            Val::Dyn(d) if d.quant.is_some() => Err(err(n, "a value quantized twice in a row is not supported")),
            Val::Dyn(d) => Ok(Val::Dyn(Dyn { quant: Some(fmt), ..d })),
            v => Err(err(n, format!("quantizing {} is not supported", v.kind()))),
        }
    }
}

/// Transposes the per-channel parameters of a matrix's format together with the matrix.
fn transpose_params(f: &QuantFormat) -> QuantFormat {
    qonnx::map_params(f, |t| {
        if t.rank() == 2 {
            fold::transpose(&Const::float(t.shape.clone(), t.data.clone()), &[1, 0]).tensor()
        } else {
            t.clone()
        }
    })
}
