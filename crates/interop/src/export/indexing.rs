//! ONNX forms of `getitem` on tensors, `expand`, `repeat` and `stack` (opset 13). Shapes come
//! from the exporter's two probe batch sizes: a dimension whose size differs between them is the
//! batch, which ONNX keeps open.

use super::{onnx_name, xerr, Ex};
use crate::onnx::tensor::i64_proto;
use crate::Result;
use mase_ir::{resolve_index, IndexItem, NodeId};

impl Ex<'_> {
    fn i64_init(&mut self, name: String, v: &[i64]) -> String {
        if !self.inits.iter().any(|i| i.name == name) {
            self.inits.push(i64_proto(&name, &[v.len()], v));
        }
        name
    }

    /// `x[items]` as a `Slice` of the dimensions it cuts, then a `Reshape` when it selects
    /// dimensions away or adds new ones. The batch dimension must be read whole.
    pub(super) fn index(&mut self, id: NodeId, x: String, items: &[IndexItem], out: &str, key: &str) -> Result<()> {
        let n = self.g.node(id);
        let name = n.name.clone();
        let [a, b] = &self.shapes[n.inputs[0].0];
        let (ra, rb) = match (resolve_index(items, a), resolve_index(items, b)) {
            (Ok(ra), Ok(rb)) => (ra, rb),
            (Err(e), _) | (_, Err(e)) => return Err(xerr(&name, e)),
        };
        let (mut starts, mut ends, mut axes, mut steps) = (vec![], vec![], vec![], vec![]);
        for (d, (r, s)) in ra.reads.iter().zip(&rb.reads).enumerate() {
            let whole = |len: usize, r: &mase_ir::ReadDim| r.kept && r.start == 0 && r.step == 1 && r.len == len;
            if a[d] != b[d] {
                if !(whole(a[d], r) && whole(b[d], s)) {
                    return Err(xerr(&name, "a subscript that cuts the batch dimension has no ONNX export here"));
                }
                continue;
            }
            if whole(a[d], r) {
                continue;
            }
            starts.push(r.start as i64);
            ends.push((r.start + r.step * r.len.saturating_sub(1) + 1).min(a[d]) as i64);
            axes.push(d as i64);
            steps.push(r.step as i64);
        }
        let reshaped = ra.out.len() != ra.reads.len() || ra.out.iter().any(Option::is_none);
        let sliced = if axes.is_empty() {
            x
        } else {
            let ins = vec![
                x,
                self.i64_init(format!("{name}.starts"), &starts),
                self.i64_init(format!("{name}.ends"), &ends),
                self.i64_init(format!("{name}.axes"), &axes),
                self.i64_init(format!("{name}.steps"), &steps),
            ];
            let to = if reshaped { format!("{name}_slice") } else { out.to_string() };
            self.add(onnx_name(key, "Slice"), "Slice", ins, to.clone(), vec![]);
            if !reshaped {
                return Ok(());
            }
            to
        };
        if reshaped {
            return self.reshape(id, sliced, out, key);
        }
        self.add(onnx_name(key, "Identity"), "Identity", vec![sliced], out.into(), vec![]);
        Ok(())
    }

    /// `Expand` to the output shape, the batch kept by a 1 where the input has it. An expand of a
    /// batch-free input (a class token) to the batch size reads it from the graph input's shape
    /// at run time (`Shape`, `Slice`, `Concat`); other open sizes are refused.
    pub(super) fn expand(&mut self, id: NodeId, x: String, out: &str, key: &str) -> Result<()> {
        let n = self.g.node(id);
        let name = n.name.clone();
        let (xin, dims) = (self.dims(n.inputs[0]), self.dims(id));
        let lead = dims.len() - xin.len();
        let mut target = Vec::with_capacity(dims.len());
        let mut batch_from_input = false;
        for (d, v) in dims.iter().enumerate() {
            match (v, d.checked_sub(lead).map(|k| xin[k])) {
                (Some(v), _) => target.push(*v as i64),
                (None, Some(None)) => target.push(1),
                // A batch-free input (a class token) expanded to the batch: the batch size is
                // read from the graph input's shape at run time.
                (None, _) if d == 0 => {
                    batch_from_input = true;
                    target.push(1);
                }
                (None, _) => return Err(xerr(&name, "an expand to the batch size of a batch-free input has no ONNX export here")),
            }
        }
        let shape = if !batch_from_input {
            self.i64_init(format!("{name}.shape"), &target)
        } else {
            let input = self.g.inputs().first().map(|&i| self.g.node(i).name.clone());
            let input = input.ok_or_else(|| xerr(&name, "the graph has no input to read the batch size from"))?;
            let (full, batch, joined) = (format!("{name}_input_shape"), format!("{name}_batch"), format!("{name}_target"));
            self.add(onnx_name(key, "Shape"), "Shape", vec![input], full.clone(), vec![]);
            let (starts, ends) = (self.i64_init(format!("{name}.batch_start"), &[0]), self.i64_init(format!("{name}.batch_end"), &[1]));
            self.add(onnx_name(key, "Slice"), "Slice", vec![full, starts, ends], batch.clone(), vec![]);
            let rest = self.i64_init(format!("{name}.rest"), &target[1..]);
            self.add(onnx_name(key, "Concat"), "Concat", vec![batch, rest], joined.clone(), vec![super::a_int("axis", 0)]);
            joined
        };
        self.add(onnx_name(key, "Expand"), "Expand", vec![x, shape], out.into(), vec![]);
        Ok(())
    }

    /// `Tile`, after a `Reshape` that adds the leading dimensions `repeats` has beyond the input's.
    pub(super) fn repeat(&mut self, id: NodeId, x: String, repeats: &[usize], out: &str, key: &str) -> Result<()> {
        let n = self.g.node(id);
        let name = n.name.clone();
        let xin = self.dims(n.inputs[0]);
        let lead = repeats.len() - xin.len();
        let x = if lead > 0 {
            let target: Vec<i64> = std::iter::repeat_n(1, lead).chain(xin.iter().map(|d| d.map_or(-1, |v| v as i64))).collect();
            let shape = self.i64_init(format!("{name}.lead_shape"), &target);
            let to = format!("{name}_lead");
            self.add(onnx_name(key, "Reshape"), "Reshape", vec![x, shape], to.clone(), vec![]);
            to
        } else {
            x
        };
        let reps: Vec<i64> = repeats.iter().map(|&r| r as i64).collect();
        let r = self.i64_init(format!("{name}.repeats"), &reps);
        self.add(onnx_name(key, "Tile"), "Tile", vec![x, r], out.into(), vec![]);
        Ok(())
    }

    /// `Unsqueeze` of each input at `dim`, then `Concat` along it.
    pub(super) fn stack(&mut self, id: NodeId, ins: &[String], dim: i64, out: &str, key: &str) {
        let name = self.g.node(id).name.clone();
        let axes = self.i64_init(format!("{name}.axes"), &[dim]);
        let mut parts = Vec::with_capacity(ins.len());
        for (k, x) in ins.iter().enumerate() {
            let to = format!("{name}_unsqueeze_{k}");
            self.add(onnx_name(key, &format!("Unsqueeze_{k}")), "Unsqueeze", vec![x.clone(), axes.clone()], to.clone(), vec![]);
            parts.push(to);
        }
        self.add(onnx_name(key, "Concat"), "Concat", parts, out.into(), vec![super::a_int("axis", dim)]);
    }
}
