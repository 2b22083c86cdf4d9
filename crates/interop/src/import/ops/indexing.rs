//! Slices and repeats of computed tensors: Slice (positive steps), Tile and Expand, as the
//! graph's `getitem`, `repeat` and `expand` ops. Their starts, ends, axes, steps, repeats and
//! shapes must be constants.

use super::super::util::{axis, err};
use super::super::value::{Dim, Val};
use super::super::Importer;
use super::Lower;
use crate::onnx::proto::NodeProto;
use crate::Result;
use mase_ir::{DimArg, IndexItem, Op};

/// The ONNX operators of this family and their lowering.
pub(super) const OPS: &[(&str, Lower)] = &[("Slice", Importer::slice), ("Tile", Importer::tile), ("Expand", Importer::expand)];

impl Importer {
    /// `Slice(data, starts, ends, axes, steps)` (opset 10 on) as a subscript of full slices but
    /// along `axes`. Python's slice rules are ONNX's for positive steps (negative bounds count
    /// from the end, bounds past either end are clipped).
    pub(crate) fn slice(&mut self, n: &NodeProto) -> Result<Val> {
        if self.opset < 10 {
            return Err(err(n, "Slice before opset 10 (bounds as attributes) is not supported"));
        }
        let x = self.req_dyn(n, 0)?;
        let (starts, ends) = (self.req_const(n, 1, "starts")?.i64s(), self.req_const(n, 2, "ends")?.i64s());
        let rank = x.rank();
        let axes = match self.opt(n, 3)? {
            Some(Val::Const(c)) => c.i64s(),
            Some(v) => return Err(err(n, format!("input 3 (axes) must be a constant, it is {}", v.kind()))),
            None => (0..starts.len() as i64).collect(),
        };
        let steps = match self.opt(n, 4)? {
            Some(Val::Const(c)) => c.i64s(),
            Some(v) => return Err(err(n, format!("input 4 (steps) must be a constant, it is {}", v.kind()))),
            None => vec![1; starts.len()],
        };
        if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
            return Err(err(n, "starts, ends, axes and steps must have one entry each per sliced axis"));
        }
        let mut items = vec![IndexItem::full(); rank];
        for k in 0..starts.len() {
            let d = axis(n, axes[k], rank)?;
            if d >= rank {
                return Err(err(n, format!("axis {} is out of range for rank {rank}", axes[k])));
            }
            if steps[k] <= 0 {
                return Err(err(n, format!("step {} (only positive steps are supported)", steps[k])));
            }
            items[d] = IndexItem::Slice { start: Some(starts[k]), end: Some(ends[k]), step: steps[k] as usize };
        }
        Ok(Val::Computed(self.moving(n, Op::Index { items }, x, "")?))
    }

    /// `Tile(input, repeats)` as `repeat`.
    pub(crate) fn tile(&mut self, n: &NodeProto) -> Result<Val> {
        let x = self.req_dyn(n, 0)?;
        let repeats = self.req_const(n, 1, "repeats")?.i64s();
        if repeats.len() != x.rank() || repeats.iter().any(|&r| !(0..=1 << 20).contains(&r)) {
            return Err(err(n, format!("repeats {repeats:?} must have one entry between 0 and 2^20 per dimension of the input")));
        }
        Ok(Val::Computed(self.moving(n, Op::Repeat { repeats: repeats.iter().map(|&r| r as usize).collect() }, x, "")?))
    }

    /// `Expand(input, shape)`: ONNX broadcasts the input and `shape` both ways (a 1 in `shape`
    /// keeps the input's size), which is PyTorch's `expand` with `-1` where the input's size stays.
    pub(crate) fn expand(&mut self, n: &NodeProto) -> Result<Val> {
        let x = self.req_dyn(n, 0)?;
        let shape = self.req_const(n, 1, "shape")?.i64s();
        let rank = x.rank().max(shape.len());
        let (lead_x, lead_s) = (rank - x.rank(), rank - shape.len());
        let mut sizes = Vec::with_capacity(rank);
        for d in 0..rank {
            let have = d.checked_sub(lead_x).map(|k| x.shape[k]);
            let want = d.checked_sub(lead_s).map_or(1, |k| shape[k]);
            sizes.push(DimArg::Const(match (have, want) {
                (Some(_), 1) => -1,
                (Some(Dim::Fixed(1)) | None, w) if w >= 0 => w,
                (Some(Dim::Fixed(h)), w) if h == w => -1,
                (h, w) => return Err(err(n, format!("shape entry {w} does not broadcast with the input's size {h:?} at dimension {d}"))),
            }));
        }
        Ok(Val::Computed(self.moving(n, Op::Expand { shape: sizes }, x, "")?))
    }
}
