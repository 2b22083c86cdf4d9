//! Layers: MatMul, Einsum, Gemm, Conv, pools (global ones too), BatchNormalization, LayerNormalization,
//! InstanceNormalization, Dropout.

use super::super::fold::{self};
use super::super::util::{err, MAX_WINDOW};
use super::super::value::{Computed, Val};
use super::super::{Importer, WeightQuant};
use super::Lower;
use crate::onnx::attrs::Attrs;
use crate::onnx::proto::NodeProto;
use crate::onnx::tensor::{Const, Data};
use crate::qonnx;
use crate::{InteropError, Result};
use mase_ir::{ConvSpec, NodeId, NodeKind, NodeQuant, NormSpec, Op, PoolSpec, QuantFormat, Tensor};

/// The ONNX operators of this family and their lowering.
pub(super) const OPS: &[(&str, Lower)] = &[
    ("MatMul", Importer::matmul),
    ("Einsum", Importer::einsum),
    ("Gemm", Importer::gemm),
    ("Conv", Importer::conv),
    ("MaxPool", |im, n| im.pool(n, true)),
    ("AveragePool", |im, n| im.pool(n, false)),
    ("GlobalAveragePool", |im, n| im.global_pool(n, false)),
    ("GlobalMaxPool", |im, n| im.global_pool(n, true)),
    ("BatchNormalization", Importer::batch_norm),
    ("LayerNormalization", Importer::layer_norm),
    ("InstanceNormalization", Importer::instance_norm),
    ("Dropout", Importer::dropout),
];

impl Importer {
    /// A weight operand: its values, format and origin.
    pub(crate) fn weight(&self, n: &NodeProto, v: Val, what: &str) -> Result<(Const, Option<QuantFormat>)> {
        match v {
            Val::Const(c) => Ok((c, None)),
            Val::QuantConst(c, f) => Ok((c, Some(f))),
            v => Err(err(n, format!("the {what} must be a constant, it is {}", v.kind()))),
        }
    }

    /// A linear layer `x W^T + b` with `w` already in PyTorch's `[out, in]` layout.
    pub(crate) fn linear(
        &mut self,
        n: &NodeProto,
        x: Computed,
        w: (Const, Option<QuantFormat>),
        b: Option<(Const, Option<QuantFormat>)>,
    ) -> Result<Computed> {
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
        let bias = match b {
            Some((c, _)) if c.numel() != out_features => {
                return Err(err(n, format!("bias of shape {:?} does not match {out_features} outputs", c.shape)))
            }
            Some((c, f)) => Some((Tensor { shape: vec![out_features], data: c.f32s() }, f)),
            None => None,
        };
        self.module_params(n, id, &target, (w.tensor(), wq), bias)?;
        self.dyn_of(id)
    }

    /// Stores a module's `weight` and `bias` under `target` (see [`Importer::maybe_fold`]) and
    /// records their QONNX formats on the node `id`.
    pub(crate) fn module_params(
        &mut self,
        n: &NodeProto,
        id: NodeId,
        target: &str,
        (w, wq): (Tensor, Option<QuantFormat>),
        bias: Option<(Tensor, Option<QuantFormat>)>,
    ) -> Result<()> {
        self.params.insert(format!("{target}.weight"), self.maybe_fold(n, w, wq.as_ref())?, true);
        let mut bq = None;
        if let Some((t, f)) = bias {
            self.params.insert(format!("{target}.bias"), self.maybe_fold(n, t, f.as_ref())?, true);
            bq = f;
        }
        if wq.is_some() || bq.is_some() {
            let q = self.g.node_mut(id).quant.get_or_insert_with(NodeQuant::default);
            q.weight = wq;
            q.bias = bq;
        }
        Ok(())
    }

    /// The parameter values to store for a weight with format `f`: the file's values, or, with
    /// [`WeightQuant::Fold`], the quantized ones.
    pub(crate) fn maybe_fold(&self, n: &NodeProto, t: Tensor, f: Option<&QuantFormat>) -> Result<Tensor> {
        match (self.opts.weight_quant, f) {
            (WeightQuant::Fold, Some(f)) => crate::quantize::quantize_tensor(&t, f).map_err(|source| InteropError::NodeQuant {
                node: n.name.clone(),
                op: n.op_type.clone(),
                source: Box::new(source),
            }),
            _ => Ok(t),
        }
    }

    pub(crate) fn matmul(&mut self, n: &NodeProto) -> Result<Val> {
        let (a, b) = (self.req(n, 0)?, self.req(n, 1)?);
        match (&a, &b) {
            (Val::Computed(x), Val::Const(c) | Val::QuantConst(c, _)) if c.shape.len() == 2 && x.rank() >= 2 => {
                let (c, f) = self.weight(n, b.clone(), "weight")?;
                let w = fold::transpose(&c, &[1, 0]);
                let f = f.map(|f| transpose_params(&f));
                let x = x.clone();
                let d = self.linear(n, x, (w, f), None)?;
                self.fusable.insert(d.id);
                Ok(Val::Computed(d))
            }
            (Val::Const(_), Val::Const(_)) => Err(err(n, "MatMul of two constants is not supported")),
            _ => Ok(Val::Computed(self.call(n, Op::MatMul, vec![a, b])?)),
        }
    }

    /// `Einsum` of two operands that form a batched matrix product (`mase_ir::Contraction`).
    pub(crate) fn einsum(&mut self, n: &NodeProto) -> Result<Val> {
        let equation = Attrs::new(n).string("equation", "")?;
        mase_ir::Contraction::parse(&equation).map_err(|e| err(n, e))?;
        if n.input.len() != 2 {
            return Err(err(n, format!("Einsum of {} operands: only two are supported", n.input.len())));
        }
        let (a, b) = (self.req(n, 0)?, self.req(n, 1)?);
        if let (Val::Const(_), Val::Const(_)) = (&a, &b) {
            return Err(err(n, "Einsum of two constants is not supported"));
        }
        Ok(Val::Computed(self.call(n, Op::Einsum { equation }, vec![a, b])?))
    }

    pub(crate) fn gemm(&mut self, n: &NodeProto) -> Result<Val> {
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
        if let Val::Computed(_) = b {
            // A product of two computed tensors: matmul, then the scaled addend.
            if alpha != 1.0 || beta != 1.0 {
                return Err(err(n, "Gemm of two computed tensors with alpha or beta other than 1 is not supported"));
            }
            let b = match b {
                Val::Computed(d) if trans_b => Val::Computed(self.moving(n, Op::Permute { dims: vec![1, 0] }, d, "_transpose_b")?),
                v => v,
            };
            let mut y = self.call(n, Op::MatMul, vec![Val::Computed(x), b])?;
            if let Some(c) = c {
                y = self.call_vals(n, Op::Add, vec![Val::Computed(y), c], "_add")?;
            }
            return Ok(Val::Computed(y));
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
        Ok(Val::Computed(d))
    }

    /// Begin and end paddings of each spatial dimension from `pads` / `auto_pad`.
    pub(crate) fn pads(
        &self,
        n: &NodeProto,
        x: &Computed,
        kernel: &[usize],
        strides: &[usize],
        dilations: &[usize],
    ) -> Result<(Vec<usize>, Vec<usize>)> {
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
    pub(crate) fn split_pads(
        &mut self,
        n: &NodeProto,
        x: Computed,
        begin: &[usize],
        end: &[usize],
        max_sym: &[usize],
        value: f32,
    ) -> Result<(Computed, Vec<usize>)> {
        let sym: Vec<usize> = begin.iter().zip(end).zip(max_sym).map(|((b, e), m)| (*b).min(*e).min(*m)).collect();
        let eb: Vec<usize> = begin.iter().zip(&sym).map(|(b, s)| b - s).collect();
        let ee: Vec<usize> = end.iter().zip(&sym).map(|(e, s)| e - s).collect();
        if eb.iter().chain(&ee).all(|&v| v == 0) {
            return Ok((x, sym));
        }
        let y = self.moving(n, Op::Pad { begin: eb, end: ee, value }, x, "_pad")?;
        Ok((y, sym))
    }

    pub(crate) fn conv(&mut self, n: &NodeProto) -> Result<Val> {
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
        let bias = b.map(|(c, f)| (Tensor { shape: vec![c.numel()], data: c.f32s() }, f));
        self.module_params(n, id, &target, (w.tensor(), wq), bias)?;
        Ok(Val::Computed(self.dyn_of(id)?))
    }

    pub(crate) fn pool(&mut self, n: &NodeProto, max: bool) -> Result<Val> {
        let at = Attrs::new(n);
        let x = self.req_dyn(n, 0)?;
        let dims = x.rank().saturating_sub(2);
        if !(1..=2).contains(&dims) {
            return Err(err(n, format!("only 1-D and 2-D pooling is supported (input rank {})", x.rank())));
        }
        let kernel = window_sizes(n, "kernel_shape", &at.ints("kernel_shape")?.ok_or_else(|| err(n, "kernel_shape is missing"))?)?;
        let stride = window_sizes(n, "strides", &at.ints("strides")?.unwrap_or_else(|| vec![1; dims]))?;
        if kernel.len() != dims || stride.len() != dims {
            return Err(err(n, "kernel_shape and strides must have one entry per spatial dimension"));
        }
        if at.ints("dilations")?.is_some_and(|d| d.iter().any(|&v| v != 1)) {
            return Err(err(n, "pooling with dilations is not supported"));
        }
        let (begin, end) = self.pads(n, &x, &kernel, &stride, &vec![1; dims])?;
        // Pads the pool's own padding holds: the same on both sides, at most half the kernel.
        // Other pads become an explicit `Pad` in front, where `ceil_mode`'s rule (which reads
        // the left padding) and `count_include_pad = 0` would no longer see them as padding.
        let symmetric = begin == end && begin.iter().zip(&kernel).all(|(p, k)| *p <= k / 2);
        let ceil_mode = at.int("ceil_mode", 0)? != 0;
        if ceil_mode && !symmetric {
            for d in 0..dims {
                let len = x.fixed(2 + d).ok_or_else(|| err(n, "ceil_mode needs fixed spatial sizes"))? + begin[d] + end[d];
                if len >= kernel[d] && (len - kernel[d]) % stride[d] != 0 {
                    return Err(err(n, "ceil_mode = 1 with asymmetric pads changes the output size here, which is not supported"));
                }
            }
        }
        let count_include_pad = max || at.int("count_include_pad", 0)? != 0;
        if !count_include_pad && !symmetric {
            return Err(err(n, "average pooling with asymmetric padding excluded from the count (count_include_pad = 0) is not supported"));
        }
        let value = if max { f32::MIN } else { 0.0 };
        let limit: Vec<usize> = kernel.iter().map(|k| k / 2).collect();
        let (x, padding) = self.split_pads(n, x, &begin, &end, &limit, value)?;
        let spec = PoolSpec { ceil_mode: ceil_mode && symmetric, count_include_pad, ..PoolSpec::window(kernel, stride, padding) };
        let op = match (max, dims) {
            (true, 1) => Op::MaxPool1d(spec),
            (true, _) => Op::MaxPool2d(spec),
            (false, 1) => Op::AvgPool1d(spec),
            (false, _) => Op::AvgPool2d(spec),
        };
        let q = x.quant.clone();
        let d = self.call_ids(n, op, &[x.id], vec![q], "")?;
        Ok(Val::Computed(d))
    }

    /// `GlobalAveragePool` or `GlobalMaxPool`: an adaptive pool to size 1.
    pub(crate) fn global_pool(&mut self, n: &NodeProto, max: bool) -> Result<Val> {
        let x = self.req_dyn(n, 0)?;
        let op = match (x.rank(), max) {
            (3, false) => Op::AdaptiveAvgPool1d { output_size: 1 },
            (4, false) => Op::AdaptiveAvgPool2d { output_size: [1, 1] },
            (3, true) => Op::AdaptiveMaxPool1d { output_size: 1 },
            (4, true) => Op::AdaptiveMaxPool2d { output_size: [1, 1] },
            (r, _) => return Err(err(n, format!("input of rank {r} is not supported"))),
        };
        Ok(Val::Computed(self.call(n, op, vec![Val::Computed(x)])?))
    }

    pub(crate) fn batch_norm(&mut self, n: &NodeProto) -> Result<Val> {
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
        Ok(Val::Computed(self.dyn_of(id)?))
    }

    /// `LayerNormalization` (opset 17) over the axes from `axis` on, which must have fixed
    /// sizes, with a constant scale and bias: a `nn.LayerNorm` module.
    pub(crate) fn layer_norm(&mut self, n: &NodeProto) -> Result<Val> {
        let at = Attrs::new(n);
        let x = self.req_dyn(n, 0)?;
        let rank = x.rank() as i64;
        let axis = at.int("axis", -1)?;
        let first = if axis < 0 { axis + rank } else { axis };
        if !(1..rank).contains(&first) {
            return Err(err(n, format!("axis {axis} must be a dimension after the batch of a rank-{rank} input")));
        }
        let normalized_shape = (first as usize..x.rank())
            .map(|d| x.fixed(d).ok_or_else(|| err(n, "the normalised dimensions must have fixed sizes")))
            .collect::<Result<Vec<usize>>>()?;
        let scale = self.req_const(n, 1, "scale")?;
        let bias = match self.opt(n, 2)? {
            Some(Val::Const(c)) => Some(c),
            Some(v) => return Err(err(n, format!("input 2 (bias) must be a constant, it is {}", v.kind()))),
            None => None,
        };
        let numel: usize = normalized_shape.iter().product();
        if let Some(p) = std::iter::once(&scale).chain(&bias).find(|p| p.numel() != numel) {
            return Err(err(n, format!("parameter of shape {:?} does not match normalized_shape {normalized_shape:?}", p.shape)));
        }
        let eps = at.float("epsilon", 1e-5)?;
        let op = Op::LayerNorm { normalized_shape: normalized_shape.clone(), eps, elementwise_affine: true, bias: bias.is_some() };
        let origins = [scale.origin.as_deref(), bias.as_ref().and_then(|c| c.origin.as_deref())];
        let target = self.module_target(n, &origins);
        let id = self.emit(n, &target, NodeKind::CallModule, &target, op, &[x.id], vec![x.quant.clone()])?;
        for (p, name) in std::iter::once(&scale).zip(["weight"]).chain(bias.iter().zip(["bias"])) {
            self.params.insert(format!("{target}.{name}"), Tensor { shape: normalized_shape.clone(), data: p.f32s() }, true);
        }
        Ok(Val::Computed(self.dyn_of(id)?))
    }

    /// `InstanceNormalization` of `[N, C, ...]`: a group norm with one channel per group (as
    /// the exporter's group norm writes it, over `[N, groups, -1]`).
    pub(crate) fn instance_norm(&mut self, n: &NodeProto) -> Result<Val> {
        let at = Attrs::new(n);
        let x = self.req_dyn(n, 0)?;
        if x.rank() < 3 {
            return Err(err(n, format!("input of rank {} is not supported; expected [N, C, ...]", x.rank())));
        }
        let c = x.fixed(1).ok_or_else(|| err(n, "the channel dimension must be fixed"))?;
        let ps: Vec<Const> = [(1, "scale"), (2, "B")].iter().map(|&(k, what)| self.req_const(n, k, what)).collect::<Result<_>>()?;
        if let Some(p) = ps.iter().find(|p| p.numel() != c) {
            return Err(err(n, format!("parameter of shape {:?} does not match {c} channels", p.shape)));
        }
        let op = Op::GroupNorm { num_groups: c, num_channels: c, eps: at.float("epsilon", 1e-5)?, affine: true, bias: true };
        let origins: Vec<Option<&str>> = ps.iter().map(|p| p.origin.as_deref()).collect();
        let target = self.module_target(n, &origins);
        let id = self.emit(n, &target, NodeKind::CallModule, &target, op, &[x.id], vec![x.quant.clone()])?;
        for (p, name) in ps.iter().zip(["weight", "bias"]) {
            self.params.insert(format!("{target}.{name}"), Tensor { shape: vec![c], data: p.f32s() }, true);
        }
        Ok(Val::Computed(self.dyn_of(id)?))
    }

    pub(crate) fn dropout(&mut self, n: &NodeProto) -> Result<Val> {
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
            Val::Computed(d) => Ok(Val::Computed(self.moving(n, Op::Dropout { p }, d, "")?)),
            v => Ok(v),
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

/// A pooling window's sizes or strides: each from 1 to `MAX_WINDOW` (onnxruntime refuses a 0
/// kernel too; it is never read as 1).
fn window_sizes(n: &NodeProto, attr: &str, values: &[i64]) -> Result<Vec<usize>> {
    if let Some(v) = values.iter().find(|&&v| !(1..=MAX_WINDOW).contains(&v)) {
        return Err(err(n, format!("{attr} {values:?}: each entry must be between 1 and {MAX_WINDOW}, got {v}")));
    }
    Ok(values.iter().map(|&v| v as usize).collect())
}
