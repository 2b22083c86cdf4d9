//! Shapes and indexing: the settings of `getitem` on tensors (`x[:, 0]`, `x[..., 1::2, None]`, a
//! piece of `chunk`/`split`/`unbind`), `expand`, `repeat`, and integer arithmetic on sizes, with
//! the rules that resolve them against a concrete input shape. Shape inference, the kernels and
//! the ONNX exporter all read the resolved forms here, so they agree on every edge case.

use serde::{Deserialize, Serialize};

/// One entry of a tensor subscript, as Python writes it between the brackets. A piece of
/// `x.chunk(n, dim)` is a `Chunk` entry at `dim`, because where it starts depends on the size
/// of `dim`, which the tracer does not know.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexItem {
    /// `start:end:step`; an absent bound is the start or end of the dimension, negative bounds
    /// count from the end, and bounds past either end are clipped (Python's slice rules).
    Slice { start: Option<i64>, end: Option<i64>, step: usize },
    /// An integer: the dimension is selected at that index (negative counts from the end) and
    /// removed.
    Select(i64),
    /// `None`: a new dimension of size 1.
    NewAxis,
    /// `...`: as many full slices as the dimensions the other entries leave.
    Ellipsis,
    /// Piece `index` of `chunk(chunks)` along this dimension: pieces of `ceil(len / chunks)`
    /// values, the last one shorter, as PyTorch cuts them.
    Chunk { chunks: usize, index: usize },
    /// Piece `index` of `split(size)` along this dimension: pieces of `size` values, the last
    /// one shorter. A piece past the end is an error, as PyTorch's tuple has no such entry.
    Split { size: usize, index: usize },
    /// Piece `index` of `split([s0, s1, ...])` along this dimension, whose size the sizes must
    /// add up to, as PyTorch requires.
    Sections { sizes: Vec<usize>, index: usize },
    /// `x.squeeze(dim)` at this dimension: removed when its size is 1, read whole otherwise.
    Squeeze,
    /// `x.squeeze()`: like `...`, the dimensions the other entries leave, each one squeezed.
    SqueezeAll,
}

impl IndexItem {
    /// The full slice `:`.
    pub fn full() -> IndexItem {
        IndexItem::Slice { start: None, end: None, step: 1 }
    }

    /// Whether the entry consumes a dimension of the input.
    fn consumes(&self) -> bool {
        !matches!(self, IndexItem::NewAxis | IndexItem::Ellipsis | IndexItem::SqueezeAll)
    }

    /// Whether the entry stands for the dimensions the others leave (`...`, `squeeze()`).
    fn fills(&self) -> bool {
        matches!(self, IndexItem::Ellipsis | IndexItem::SqueezeAll)
    }
}

/// The items of piece `index` of a split of dimension `dim` (negative counts from the end):
/// full slices up to `dim`, then `item`. A negative `dim` goes after an ellipsis, so the items
/// need no rank.
pub fn items_at(dim: i64, item: IndexItem) -> Vec<IndexItem> {
    if dim >= 0 {
        let mut v = vec![IndexItem::full(); dim as usize];
        v.push(item);
        v
    } else {
        let mut v = vec![IndexItem::Ellipsis, item];
        v.extend(std::iter::repeat_n(IndexItem::full(), (-dim - 1) as usize));
        v
    }
}

/// How one input dimension is read: from `start`, every `step`-th value, `len` of them; `kept`
/// is false for a selected dimension, which the output drops.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadDim {
    pub start: usize,
    pub step: usize,
    pub len: usize,
    pub kept: bool,
}

/// A subscript resolved against an input shape: how each input dimension is read, and the
/// output dimensions in order, each an input dimension (`Some(d)`) or a new axis (`None`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Indexed {
    pub reads: Vec<ReadDim>,
    pub out: Vec<Option<usize>>,
}

impl Indexed {
    /// The output shape.
    pub fn shape(&self) -> Vec<usize> {
        self.out.iter().map(|d| d.map_or(1, |d| self.reads[d].len)).collect()
    }
}

/// Resolves `items` against an input of shape `x`, or says why they do not fit it.
pub fn resolve_index(items: &[IndexItem], x: &[usize]) -> Result<Indexed, String> {
    let ellipses = items.iter().filter(|i| i.fills()).count();
    if ellipses > 1 {
        return Err("an index can only have a single ellipsis ('...')".into());
    }
    let consumed = items.iter().filter(|i| i.consumes()).count();
    if consumed > x.len() {
        return Err(format!("too many indices for a tensor of rank {}: {consumed} given", x.len()));
    }
    // Without an ellipsis, the dimensions left over are read whole at the end.
    let mut expanded: Vec<IndexItem> = Vec::with_capacity(items.len() + x.len());
    for item in items {
        if item.fills() {
            let each = if *item == IndexItem::SqueezeAll { IndexItem::Squeeze } else { IndexItem::full() };
            expanded.extend(std::iter::repeat_n(each, x.len() - consumed));
        } else {
            expanded.push(item.clone());
        }
    }
    if ellipses == 0 {
        expanded.extend(std::iter::repeat_n(IndexItem::full(), x.len() - consumed));
    }
    let (mut reads, mut out) = (Vec::with_capacity(x.len()), Vec::with_capacity(expanded.len()));
    for item in &expanded {
        if *item == IndexItem::NewAxis {
            out.push(None);
            continue;
        }
        let d = reads.len();
        let len = x[d];
        let read = match item.clone() {
            IndexItem::Slice { start, end, step } => {
                if step == 0 {
                    return Err("slice step cannot be zero".into());
                }
                let clip = |v: Option<i64>, default: usize| match v {
                    None => default,
                    Some(v) if v < 0 => (v + len as i64).max(0) as usize,
                    Some(v) => (v as u64).min(len as u64) as usize,
                };
                let (s, e) = (clip(start, 0), clip(end, len));
                ReadDim { start: s, step, len: if e > s { (e - s).div_ceil(step) } else { 0 }, kept: true }
            }
            IndexItem::Select(i) => {
                let k = if i < 0 { i + len as i64 } else { i };
                if !(0..len as i64).contains(&k) {
                    return Err(format!("index {i} is out of bounds for dimension {d} with size {len}"));
                }
                ReadDim { start: k as usize, step: 1, len: 1, kept: false }
            }
            IndexItem::Chunk { chunks, index } => {
                if chunks == 0 {
                    return Err("chunk expects `chunks` to be greater than 0".into());
                }
                let piece = len.div_ceil(chunks).max(1);
                let start = index.checked_mul(piece).filter(|&s| s < len || (len == 0 && index == 0));
                let Some(start) = start else {
                    let pieces = len.div_ceil(piece).max(1);
                    return Err(format!(
                        "chunk({chunks}) of dimension {d} with size {len} gives {pieces} pieces; there is no piece {index}"
                    ));
                };
                ReadDim { start, step: 1, len: piece.min(len - start), kept: true }
            }
            IndexItem::Split { size, index } => {
                if size == 0 && len != 0 {
                    return Err(format!("split(0) of dimension {d} with size {len}: a size of 0 only splits an empty dimension"));
                }
                let pieces = if size == 0 { 1 } else { len.div_ceil(size).max(1) };
                if index >= pieces {
                    return Err(format!("split({size}) of dimension {d} with size {len} gives {pieces} pieces; there is no piece {index}"));
                }
                let start = index * size;
                ReadDim { start, step: 1, len: size.min(len - start), kept: true }
            }
            IndexItem::Sections { sizes, index } => {
                let total = sizes.iter().try_fold(0usize, |a, &s| a.checked_add(s));
                if total != Some(len) {
                    return Err(format!("split sizes {sizes:?} must add up to the size {len} of dimension {d}"));
                }
                let Some(&size) = sizes.get(index) else {
                    return Err(format!("split into {} pieces has no piece {index}", sizes.len()));
                };
                ReadDim { start: sizes[..index].iter().sum(), step: 1, len: size, kept: true }
            }
            IndexItem::Squeeze => ReadDim { start: 0, step: 1, len, kept: len != 1 },
            IndexItem::NewAxis | IndexItem::Ellipsis | IndexItem::SqueezeAll => {
                unreachable!("new axes are handled above and ellipses were expanded")
            }
        };
        if read.kept {
            out.push(Some(d));
        }
        reads.push(read);
    }
    Ok(Indexed { reads, out })
}

/// The output shape of `x.expand(sizes)`: `sizes` may add leading dimensions; `-1` keeps an
/// input dimension, and an input dimension of 1 may take any size.
pub fn expand_shape(x: &[usize], sizes: &[i64]) -> Result<Vec<usize>, String> {
    if sizes.len() < x.len() {
        return Err(format!("the number of sizes ({}) must be at least the input's rank ({})", sizes.len(), x.len()));
    }
    let lead = sizes.len() - x.len();
    sizes
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let have = if i >= lead { Some(x[i - lead]) } else { None };
            match (have, s) {
                (None, -1) => Err(format!("size -1 at position {i} is for a new leading dimension, which has no size to keep")),
                (Some(h), -1) => Ok(h),
                (_, s) if s < 0 => Err(format!("size {s} at position {i} is negative")),
                (Some(h), s) if h != 1 && h as i64 != s => {
                    Err(format!("the input's size {h} at dimension {} cannot expand to {s} (only a size of 1 can)", i - lead))
                }
                (_, s) => usize::try_from(s).map_err(|_| format!("size {s} is out of range")),
            }
        })
        .collect()
}

/// The output shape of `x.repeat(repeats)`: the input, with leading dimensions of 1 added up to
/// `repeats.len()`, repeated `repeats[i]` times along dimension `i`.
pub fn repeat_shape(x: &[usize], repeats: &[usize]) -> Result<Vec<usize>, String> {
    if repeats.len() < x.len() {
        return Err(format!("the number of repeats ({}) must be at least the input's rank ({})", repeats.len(), x.len()));
    }
    let lead = repeats.len() - x.len();
    repeats
        .iter()
        .enumerate()
        .map(|(i, &r)| {
            let s = if i >= lead { x[i - lead] } else { 1 };
            s.checked_mul(r).ok_or_else(|| format!("the repeated size along dimension {i} overflows"))
        })
        .collect()
}

/// Integer arithmetic on sizes, as Python computes it (`//` rounds toward minus infinity).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SizeOp {
    Add,
    Sub,
    Mul,
    FloorDiv,
}

impl SizeOp {
    /// Python's operator.
    pub fn symbol(self) -> &'static str {
        match self {
            SizeOp::Add => "+",
            SizeOp::Sub => "-",
            SizeOp::Mul => "*",
            SizeOp::FloorDiv => "//",
        }
    }

    /// `a op b`, or why it has no value (a division by zero, an overflow).
    pub fn apply(self, a: i64, b: i64) -> Result<i64, String> {
        let v = match self {
            SizeOp::Add => a.checked_add(b),
            SizeOp::Sub => a.checked_sub(b),
            SizeOp::Mul => a.checked_mul(b),
            SizeOp::FloorDiv if b == 0 => return Err(format!("{a} // 0 divides by zero")),
            SizeOp::FloorDiv => a.checked_div(b).map(|q| if a % b != 0 && ((a < 0) != (b < 0)) { q - 1 } else { q }),
        };
        v.ok_or_else(|| format!("{a} {} {b} overflows", self.symbol()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use IndexItem::*;

    fn sl(start: Option<i64>, end: Option<i64>, step: usize) -> IndexItem {
        Slice { start, end, step }
    }

    #[test]
    fn subscripts_resolve_as_pytorch_shapes_them() {
        // Each line: the subscript, the input shape and `x[subscript].shape` as PyTorch gives it.
        let cases: Vec<(Vec<IndexItem>, &[usize], Result<Vec<usize>, &str>)> = vec![
            (vec![IndexItem::full(), Select(0)], &[2, 5, 3], Ok(vec![2, 3])),
            (vec![Select(-1)], &[4, 3], Ok(vec![3])),
            (vec![sl(Some(1), None, 2)], &[6, 2], Ok(vec![3, 2])),
            (vec![sl(Some(1), None, 2)], &[5], Ok(vec![2])),
            (vec![sl(Some(-3), Some(-1), 1)], &[5], Ok(vec![2])),
            (vec![sl(Some(10), None, 1)], &[5], Ok(vec![0])),
            (vec![sl(Some(-10), Some(100), 3)], &[5], Ok(vec![2])),
            (vec![Ellipsis, Select(0)], &[2, 3, 4], Ok(vec![2, 3])),
            (vec![Ellipsis, NewAxis, sl(None, Some(2), 1)], &[2, 3, 4], Ok(vec![2, 3, 1, 2])),
            (vec![NewAxis, Select(1), Ellipsis, NewAxis], &[2, 3], Ok(vec![1, 3, 1])),
            (vec![Chunk { chunks: 2, index: 1 }], &[5, 2], Ok(vec![2, 2])),
            (vec![Chunk { chunks: 4, index: 2 }], &[6], Ok(vec![2])),
            (vec![Chunk { chunks: 4, index: 3 }], &[6], Err("gives 3 pieces; there is no piece 3")),
            (vec![Select(3)], &[3], Err("index 3 is out of bounds for dimension 0 with size 3")),
            (vec![Select(0), Select(0), Select(0)], &[3, 3], Err("too many indices for a tensor of rank 2")),
            (vec![Ellipsis, Ellipsis], &[3], Err("a single ellipsis")),
            (vec![sl(None, None, 0)], &[3], Err("step cannot be zero")),
            // x.squeeze(1), x.squeeze(-1), x.squeeze() as PyTorch shapes them.
            (vec![IndexItem::full(), Squeeze], &[2, 1, 3], Ok(vec![2, 3])),
            (vec![IndexItem::full(), Squeeze], &[2, 4, 3], Ok(vec![2, 4, 3])),
            (vec![Ellipsis, Squeeze], &[2, 3, 1], Ok(vec![2, 3])),
            (vec![SqueezeAll], &[1, 3, 1, 1], Ok(vec![3])),
            (vec![SqueezeAll], &[2, 3], Ok(vec![2, 3])),
            (vec![SqueezeAll, Ellipsis], &[2, 3], Err("a single ellipsis")),
            // x.split(2, 1)[k] and x.split([1, 3], 1)[k]: checked as PyTorch checks them.
            (vec![IndexItem::full(), Split { size: 2, index: 1 }], &[2, 5], Ok(vec![2, 2])),
            (vec![IndexItem::full(), Split { size: 2, index: 2 }], &[2, 5], Ok(vec![2, 1])),
            (vec![IndexItem::full(), Split { size: 2, index: 3 }], &[2, 5], Err("gives 3 pieces; there is no piece 3")),
            (vec![Split { size: 0, index: 0 }], &[3], Err("a size of 0 only splits an empty dimension")),
            (vec![IndexItem::full(), Sections { sizes: vec![1, 3], index: 1 }], &[2, 4], Ok(vec![2, 3])),
            (
                vec![IndexItem::full(), Sections { sizes: vec![1, 3], index: 1 }],
                &[2, 5],
                Err("split sizes [1, 3] must add up to the size 5"),
            ),
            (vec![Sections { sizes: vec![1, 3], index: 2 }], &[4], Err("split into 2 pieces has no piece 2")),
        ];
        for (items, x, want) in cases {
            let got = resolve_index(&items, x).map(|r| r.shape());
            match want {
                Ok(s) => assert_eq!(got, Ok(s), "{items:?} of {x:?}"),
                Err(w) => assert!(got.as_ref().is_err_and(|e| e.contains(w)), "{items:?} of {x:?}: {got:?}"),
            }
        }
    }

    #[test]
    fn split_items_address_one_dimension() {
        assert_eq!(items_at(1, Select(0)), vec![IndexItem::full(), Select(0)]);
        assert_eq!(items_at(-2, Select(0)), vec![Ellipsis, Select(0), IndexItem::full()]);
        let r = resolve_index(&items_at(-2, Chunk { chunks: 2, index: 1 }), &[2, 6, 3]).unwrap();
        assert_eq!((r.shape(), r.reads[1].start), (vec![2, 3, 3], 3));
    }

    #[test]
    fn expand_and_repeat_shapes() {
        assert_eq!(expand_shape(&[1, 1, 4], &[3, -1, -1]), Ok(vec![3, 1, 4]));
        assert_eq!(expand_shape(&[3, 1], &[2, 3, 5]), Ok(vec![2, 3, 5]));
        assert!(expand_shape(&[3, 2], &[3, 4]).is_err_and(|e| e.contains("size 2 at dimension 1 cannot expand to 4")));
        assert!(expand_shape(&[3], &[-1, 3]).is_err_and(|e| e.contains("new leading dimension")));
        assert_eq!(repeat_shape(&[2, 3], &[2, 1, 2]), Ok(vec![2, 2, 6]));
        assert!(repeat_shape(&[2, 3], &[2]).is_err());
    }

    #[test]
    fn size_arithmetic_is_pythons() {
        let cases = [
            (SizeOp::FloorDiv, 7, 2, Ok(3)),
            (SizeOp::FloorDiv, -7, 2, Ok(-4)),
            (SizeOp::FloorDiv, 7, -2, Ok(-4)),
            (SizeOp::FloorDiv, 6, -2, Ok(-3)),
            (SizeOp::Mul, 14, 14, Ok(196)),
            (SizeOp::Sub, 3, 5, Ok(-2)),
            (SizeOp::Add, i64::MAX, 1, Err("overflows")),
            (SizeOp::FloorDiv, 1, 0, Err("divides by zero")),
        ];
        for (op, a, b, want) in cases {
            let got = op.apply(a, b);
            match want {
                Ok(v) => assert_eq!(got, Ok(v), "{a} {} {b}", op.symbol()),
                Err(w) => assert!(got.as_ref().is_err_and(|e| e.contains(w)), "{got:?}"),
            }
        }
    }
}
