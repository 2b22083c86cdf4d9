//! Shapes, constants and data movement: Flatten, Reshape, Transpose, Squeeze, Unsqueeze, Concat,
//! Shape, Gather (an embedding where its indices are computed), Constant, Identity, Cast, Pad.

use super::super::fold::{self};
use super::super::util::{axis, err, flatten_axis, product, MAX_WINDOW};
use super::super::value::{Computed, Dim, Val};
use super::super::{is_state_dict_name, Importer};
use super::Lower;
use crate::onnx::attrs::Attrs;
use crate::onnx::proto::tensor_proto::DataType;
use crate::onnx::proto::NodeProto;
use crate::onnx::tensor::{dims_fit, Const};
use crate::qonnx;
use crate::Result;
use mase_ir::{DimArg, Op};

/// The ONNX operators of this family and their lowering.
pub(super) const OPS: &[(&str, Lower)] = &[
    ("Flatten", Importer::flatten),
    ("Reshape", Importer::reshape),
    ("Transpose", Importer::transpose),
    ("Squeeze", |im, n| im.squeeze(n, true)),
    ("Unsqueeze", |im, n| im.squeeze(n, false)),
    ("Concat", Importer::concat),
    ("Shape", Importer::shape),
    ("Gather", Importer::gather),
    ("Constant", Importer::constant),
    ("Identity", Importer::identity),
    ("Cast", Importer::cast),
    ("Pad", Importer::pad),
];

impl Importer {
    /// A reshape of a computed tensor to `target`, which may hold the batch at most once.
    pub(crate) fn reshape_to(&mut self, n: &NodeProto, x: Computed, target: Vec<Dim>, suffix: &str) -> Result<Computed> {
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

    pub(crate) fn flatten(&mut self, n: &NodeProto) -> Result<Val> {
        let a = Attrs::new(n).int("axis", 1)?;
        match self.req(n, 0)? {
            Val::Const(c) => {
                let k = flatten_axis(n, a, c.shape.len())?;
                let shape = vec![c.shape[..k].iter().product(), c.shape[k..].iter().product()];
                Ok(Val::Const(Const { shape, ..c }))
            }
            Val::Computed(x) => {
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
                    return Ok(Val::Computed(self.moving(n, Op::Flatten { start_dim: 1, end_dim: -1 }, x, "")?));
                }
                Ok(Val::Computed(self.reshape_to(n, x, target, "")?))
            }
            v => Err(err(n, format!("flatten of {} is not supported", v.kind()))),
        }
    }

    pub(crate) fn reshape(&mut self, n: &NodeProto) -> Result<Val> {
        let data = self.req(n, 0)?;
        let allow_zero = Attrs::new(n).int("allowzero", 0)? != 0;
        let entries: Vec<Dim> = match self.req(n, 1)? {
            Val::Const(c) => c.i64s().into_iter().map(Dim::Fixed).collect(),
            Val::Shape { dims, .. } => dims,
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
            Val::Computed(x) => {
                let t = self.resolve_reshape(n, &x.shape, &entries, allow_zero, true)?;
                Ok(Val::Computed(self.reshape_to(n, x, t, "")?))
            }
            v => Err(err(n, format!("reshape of {} is not supported", v.kind()))),
        }
    }

    /// ONNX reshape targets (`0` copies a dimension, `-1` is inferred) against a source shape.
    pub(crate) fn resolve_reshape(
        &mut self,
        n: &NodeProto,
        src: &[Dim],
        entries: &[Dim],
        allow_zero: bool,
        dynamic: bool,
    ) -> Result<Vec<Dim>> {
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

    pub(crate) fn transpose(&mut self, n: &NodeProto) -> Result<Val> {
        let x = self.req(n, 0)?;
        let rank = match &x {
            Val::Computed(d) => d.rank(),
            Val::Const(c) | Val::QuantConst(c, _) => c.shape.len(),
            v => return Err(err(n, format!("transpose of {} is not supported", v.kind()))),
        };
        let given = Attrs::new(n).ints("perm")?;
        let perm: Vec<usize> = match &given {
            Some(p) => p.iter().map(|&a| axis(n, a, rank)).collect::<Result<_>>()?,
            None => (0..rank).rev().collect(),
        };
        if let (None, Val::Computed(d), Some(out)) = (&given, &x, n.output.first()) {
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
            Val::QuantConst(c, f) => {
                let f = qonnx::map_params(&f, |t| {
                    if t.numel() == 1 || t.rank() != rank {
                        t.clone()
                    } else {
                        fold::transpose(&Const::float(t.shape.clone(), t.data.clone()), &perm).tensor()
                    }
                });
                Val::QuantConst(fold::transpose(&c, &perm), f)
            }
            Val::Computed(d) if perm.iter().enumerate().all(|(i, &p)| i == p) => Val::Computed(d),
            Val::Computed(d) => Val::Computed(self.moving(n, Op::Permute { dims: perm.iter().map(|&p| p as i64).collect() }, d, "")?),
            _ => unreachable!("a shape value was refused when the rank was read above"),
        })
    }

    pub(crate) fn axes(&self, n: &NodeProto) -> Result<Option<Vec<i64>>> {
        if self.opset >= 13 {
            return Ok(match self.opt(n, 1)? {
                Some(Val::Const(c)) => Some(c.i64s()),
                Some(v) => return Err(err(n, format!("axes must be a constant, not {}", v.kind()))),
                None => None,
            });
        }
        Attrs::new(n).ints("axes")
    }

    pub(crate) fn squeeze(&mut self, n: &NodeProto, squeeze: bool) -> Result<Val> {
        let axes = self.axes(n)?;
        let x = self.req(n, 0)?;
        let shape: Vec<Dim> = match &x {
            Val::Computed(d) => d.shape.clone(),
            Val::Const(c) | Val::QuantConst(c, _) => c.shape.iter().map(|&v| Dim::Fixed(v as i64)).collect(),
            Val::Shape { dims, scalar } => {
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
            Val::Computed(d) => Ok(Val::Computed(self.reshape_to(n, d, target, "")?)),
            Val::Const(c) => {
                Ok(Val::Const(Const { shape: target.iter().map(|d| if let Dim::Fixed(v) = d { *v as usize } else { 0 }).collect(), ..c }))
            }
            Val::Shape { dims, .. } => Ok(Val::shape(dims, target.is_empty())),
            Val::QuantConst(..) => Err(err(n, "squeezing a quantized constant is not supported")),
        }
    }

    pub(crate) fn concat(&mut self, n: &NodeProto) -> Result<Val> {
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
        if ins.iter().any(|v| matches!(v, Val::Shape { .. })) {
            let mut dims = Vec::new();
            for v in &ins {
                match v {
                    Val::Shape { dims: d, .. } => dims.extend(d),
                    Val::Const(c) if c.shape.len() <= 1 => dims.extend(c.i64s().into_iter().map(Dim::Fixed)),
                    other => return Err(err(n, format!("cannot concatenate a shape with {}", other.kind()))),
                }
            }
            return Ok(Val::shape(dims, false));
        }
        let rank = ins.iter().find_map(|v| if let Val::Computed(d) = v { Some(d.rank()) } else { None }).unwrap_or(0);
        let d = axis(n, a, rank)?;
        Ok(Val::Computed(self.call(n, Op::Concat { dim: d as i64 }, ins)?))
    }

    pub(crate) fn shape(&mut self, n: &NodeProto) -> Result<Val> {
        let at = Attrs::new(n);
        let dims: Vec<Dim> = match self.req(n, 0)? {
            Val::Computed(d) => d.shape,
            Val::Const(c) | Val::QuantConst(c, _) => c.shape.iter().map(|&v| Dim::Fixed(v as i64)).collect(),
            v => return Err(err(n, format!("shape of {} is not supported", v.kind()))),
        };
        let r = dims.len() as i64;
        let clampi = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
        let (s, e) = (clampi(at.int("start", 0)?), clampi(at.int("end", r)?));
        Ok(Val::shape(dims[s..e.max(s)].to_vec(), false))
    }

    pub(crate) fn gather(&mut self, n: &NodeProto) -> Result<Val> {
        let a = Attrs::new(n).int("axis", 0)?;
        if let Val::Computed(ids) = self.req(n, 1)? {
            return self.embedding(n, a, ids);
        }
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
            Val::Shape { dims, .. } => {
                let len = dims.len() as i64;
                let mut out = Vec::new();
                for i in idx.i64s() {
                    let j = if i < 0 { i + len } else { i };
                    out.push(*usize::try_from(j).ok().and_then(|j| dims.get(j)).ok_or_else(|| err(n, format!("index {i} out of range")))?);
                }
                Ok(Val::shape(out, idx.shape.is_empty()))
            }
            v => Err(err(n, format!("Gather on {} is not supported (only on shapes and constants)", v.kind()))),
        }
    }

    /// `Gather(table, ids, axis=0)` of a constant matrix at computed ids: an embedding module
    /// owning the table as its weight.
    fn embedding(&mut self, n: &NodeProto, axis: i64, ids: Computed) -> Result<Val> {
        let table = match self.req(n, 0)? {
            Val::Const(c) if c.shape.len() == 2 => c,
            v => return Err(err(n, format!("Gather at computed indices needs a constant matrix (an embedding table), got {}", v.kind()))),
        };
        if axis != 0 {
            return Err(err(n, format!("Gather at computed indices along axis {axis}: only axis 0 (an embedding) is supported")));
        }
        let (num_embeddings, embedding_dim) = (table.shape[0], table.shape[1]);
        let target = self.module_target(n, &[table.origin.as_deref()]);
        let op = Op::Embedding { num_embeddings, embedding_dim, padding_idx: None, functional: false };
        let id = self.emit(n, &target, mase_ir::NodeKind::CallModule, &target, op, &[ids.id], vec![None])?;
        self.module_params(n, id, &target, (table.tensor(), None), None)?;
        Ok(Val::Computed(self.dyn_of(id)?))
    }

    pub(crate) fn constant(&mut self, n: &NodeProto) -> Result<Val> {
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
    pub(crate) fn identity(&mut self, n: &NodeProto) -> Result<Val> {
        let own = n.output.first().filter(|o| is_state_dict_name(o)).cloned();
        Ok(match self.req(n, 0)? {
            Val::Const(c) if own.is_some() && c.origin.is_some() => Val::Const(Const { origin: own, ..c }),
            v => v,
        })
    }

    pub(crate) fn cast(&mut self, n: &NodeProto) -> Result<Val> {
        let to = Attrs::new(n).int("to", 1)?;
        if to == DataType::Bool as i64 {
            let v = self.req(n, 0)?;
            return self.cast_to_bool(n, v);
        }
        let float = matches!(to, 1 | 10 | 11 | 16);
        let int = matches!(to, 2..=7 | 9 | 12 | 13);
        match self.req(n, 0)? {
            Val::Const(c) if float => Ok(Val::Const(Const::float(c.shape.clone(), c.f32s()))),
            Val::Const(c) if int => Ok(Val::Const(Const::ints(c.shape.clone(), c.i64s()))),
            v @ Val::Shape { .. } if int => Ok(v),
            v @ (Val::Computed(_) | Val::QuantConst(..)) if float => Ok(v),
            // Ids cast to integers for a Gather, which looks them up as an embedding (refusing,
            // at run time, any that is not a whole number in range, where a cast would truncate).
            v @ Val::Computed(_) if int && self.only_gather_indices(n) => Ok(v),
            v => Err(err(n, format!("cast of {} to type {to} is not supported", v.kind()))),
        }
    }

    /// Whether every reader of `n`'s output reads it as a Gather's indices.
    fn only_gather_indices(&self, n: &NodeProto) -> bool {
        n.output.first().is_some_and(|o| {
            let uses = self.uses.get(o).copied().unwrap_or(0);
            uses > 0 && self.index_uses.get(o).copied().unwrap_or(0) == uses
        })
    }

    pub(crate) fn pad(&mut self, n: &NodeProto) -> Result<Val> {
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
        Ok(Val::Computed(self.moving(n, Op::Pad { begin, end, value: value.clamp(f32::MIN, f32::MAX) }, x, "")?))
    }
}
