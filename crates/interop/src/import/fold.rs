//! Constant folding: ONNX operators evaluated at import time on constants (initializers, shape
//! arithmetic, weight layouts). Float arithmetic is done in f32 as ONNX runtimes do, integers in i64.

use crate::onnx::tensor::{Const, Data};

/// Elementwise binary operators that fold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bin {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    Equal,
    Less,
    LessOrEqual,
    Greater,
    GreaterOrEqual,
}

impl Bin {
    /// The comparison's answer for two ordered values (`None` for arithmetic).
    fn compare<T: PartialOrd>(self, p: T, q: T) -> Option<bool> {
        match self {
            Bin::Add | Bin::Sub | Bin::Mul | Bin::Div | Bin::Pow => None,
            Bin::Equal => Some(p == q),
            Bin::Less => Some(p < q),
            Bin::LessOrEqual => Some(p <= q),
            Bin::Greater => Some(p > q),
            Bin::GreaterOrEqual => Some(p >= q),
        }
    }
}

/// The largest constant folding may create.
pub(crate) const MAX_FOLDED: usize = 1 << 26;

pub(crate) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// Offsets into a tensor of `shape` for every element of the broadcast output `out`.
fn broadcast_offsets(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let own = strides(shape);
    let lead = out.len() - shape.len();
    let st: Vec<usize> = (0..out.len()).map(|d| if d < lead || shape[d - lead] == 1 { 0 } else { own[d - lead] }).collect();
    strided_offsets(out, &st)
}

/// The offset `sum_d i_d * strides[d]` of every index `i` of the shape `out`, in row-major order.
fn strided_offsets(out: &[usize], strides: &[usize]) -> Vec<usize> {
    let n: usize = out.iter().product();
    let mut offs = Vec::with_capacity(n);
    let mut idx = vec![0usize; out.len()];
    for _ in 0..n {
        offs.push(idx.iter().zip(strides).map(|(i, s)| i * s).sum());
        for d in (0..out.len()).rev() {
            idx[d] += 1;
            if idx[d] < out[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    offs
}

/// `a op b` with NumPy broadcasting.
pub(crate) fn binary(op: Bin, a: &Const, b: &Const) -> Result<Const, String> {
    let out =
        mase_ir::broadcast_shapes(&a.shape, &b.shape).ok_or_else(|| format!("shapes {:?} and {:?} do not broadcast", a.shape, b.shape))?;
    // Broadcasting is the one fold whose result can be far larger than its inputs; a hostile
    // file must not make the importer allocate without bound.
    if out.iter().try_fold(1usize, |p, &d| p.checked_mul(d)).is_none_or(|n| n > MAX_FOLDED) {
        return Err(format!("folding shapes {:?} and {:?} gives a constant larger than {MAX_FOLDED} values", a.shape, b.shape));
    }
    let (oa, ob) = (broadcast_offsets(&a.shape, &out), broadcast_offsets(&b.shape, &out));
    let data = match (&a.data, &b.data) {
        (Data::I(x), Data::I(y)) => {
            let f = |p: i64, q: i64| -> Result<i64, String> {
                if let Some(holds) = op.compare(p, q) {
                    return Ok(i64::from(holds));
                }
                Ok(match op {
                    Bin::Add => p.wrapping_add(q),
                    Bin::Sub => p.wrapping_sub(q),
                    Bin::Mul => p.wrapping_mul(q),
                    Bin::Div => p.checked_div(q).ok_or("integer division by zero")?,
                    Bin::Pow => p.wrapping_pow(u32::try_from(q).map_err(|_| "negative integer exponent")?),
                    Bin::Equal | Bin::Less | Bin::LessOrEqual | Bin::Greater | Bin::GreaterOrEqual => {
                        unreachable!("comparisons returned above")
                    }
                })
            };
            Data::I(oa.iter().zip(&ob).map(|(&i, &j)| f(x[i], y[j])).collect::<Result<_, _>>()?)
        }
        _ => {
            let (x, y) = (a.f32s(), b.f32s());
            let f = |p: f32, q: f32| match op {
                Bin::Add => p + q,
                Bin::Sub => p - q,
                Bin::Mul => p * q,
                Bin::Div => p / q,
                Bin::Pow => p.powf(q),
                // A folded comparison is a bool tensor held as 0 and 1.
                Bin::Equal | Bin::Less | Bin::LessOrEqual | Bin::Greater | Bin::GreaterOrEqual => {
                    f32::from(u8::from(op.compare(p, q) == Some(true)))
                }
            };
            Data::F(oa.iter().zip(&ob).map(|(&i, &j)| f(x[i], y[j])).collect())
        }
    };
    Ok(Const { shape: out, data, origin: None })
}

/// `where(c, a, b)` with NumPy broadcasting: `a` where `c` is not 0, `b` elsewhere; integers
/// when both values are.
pub(crate) fn select(c: &Const, a: &Const, b: &Const) -> Result<Const, String> {
    let out = mase_ir::broadcast_shapes(&a.shape, &b.shape)
        .and_then(|ab| mase_ir::broadcast_shapes(&c.shape, &ab))
        .ok_or_else(|| format!("shapes {:?}, {:?} and {:?} do not broadcast", c.shape, a.shape, b.shape))?;
    if out.iter().try_fold(1usize, |p, &d| p.checked_mul(d)).is_none_or(|n| n > MAX_FOLDED) {
        return Err(format!(
            "folding shapes {:?}, {:?} and {:?} gives a constant larger than {MAX_FOLDED} values",
            c.shape, a.shape, b.shape
        ));
    }
    let (oc, oa, ob) = (broadcast_offsets(&c.shape, &out), broadcast_offsets(&a.shape, &out), broadcast_offsets(&b.shape, &out));
    let holds: Vec<bool> = {
        let cf = c.f32s();
        oc.iter().map(|&k| cf[k] != 0.0).collect()
    };
    let data = match (&a.data, &b.data) {
        (Data::I(x), Data::I(y)) => {
            Data::I(holds.iter().zip(oa.iter().zip(&ob)).map(|(&h, (&i, &j))| if h { x[i] } else { y[j] }).collect())
        }
        _ => {
            let (x, y) = (a.f32s(), b.f32s());
            Data::F(holds.iter().zip(oa.iter().zip(&ob)).map(|(&h, (&i, &j))| if h { x[i] } else { y[j] }).collect())
        }
    };
    Ok(Const { shape: out, data, origin: None })
}

fn gather_by(data: &Data, idx: &[usize]) -> Data {
    match data {
        Data::F(v) => Data::F(idx.iter().map(|&i| v[i]).collect()),
        Data::I(v) => Data::I(idx.iter().map(|&i| v[i]).collect()),
    }
}

/// Permutes the dimensions of a constant (`perm[d]` is the input dimension of output dimension d).
pub(crate) fn transpose(c: &Const, perm: &[usize]) -> Const {
    let st = strides(&c.shape);
    let out: Vec<usize> = perm.iter().map(|&p| c.shape[p]).collect();
    let src: Vec<usize> = perm.iter().map(|&p| st[p]).collect();
    let offs = strided_offsets(&out, &src);
    Const { shape: out, data: gather_by(&c.data, &offs), origin: c.origin.clone() }
}

/// Concatenates constants along `axis`.
pub(crate) fn concat(cs: &[Const], axis: usize) -> Result<Const, String> {
    let first = cs.first().ok_or("no inputs")?;
    if axis >= first.shape.len() {
        return Err(format!("axis {axis} out of range for rank {}", first.shape.len()));
    }
    let mut shape = first.shape.clone();
    for c in &cs[1..] {
        if c.shape.len() != shape.len() || c.shape.iter().zip(&first.shape).enumerate().any(|(d, (a, b))| d != axis && a != b) {
            return Err(format!("shapes {:?} and {:?} do not concatenate on axis {axis}", first.shape, c.shape));
        }
        shape[axis] = shape[axis].checked_add(c.shape[axis]).ok_or_else(|| format!("concatenating {:?} overflows", c.shape))?;
    }
    if !crate::onnx::tensor::dims_fit(&shape) {
        return Err(format!("concatenating on axis {axis} gives shape {shape:?}, whose sizes overflow"));
    }
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let ints = cs.iter().all(|c| matches!(c.data, Data::I(_)));
    let (mut f, mut i) = (Vec::new(), Vec::new());
    for o in 0..outer {
        for c in cs {
            let len = c.shape[axis] * inner;
            if ints {
                i.extend_from_slice(&c.i64s()[o * len..][..len]);
            } else {
                f.extend_from_slice(&c.f32s()[o * len..][..len]);
            }
        }
    }
    Ok(Const { shape, data: if ints { Data::I(i) } else { Data::F(f) }, origin: None })
}

/// `Gather(data, indices, axis)` on constants; negative indices count from the end.
pub(crate) fn gather(c: &Const, indices: &Const, axis: usize) -> Result<Const, String> {
    let len = *c.shape.get(axis).ok_or_else(|| format!("axis {axis} out of range"))?;
    let idx: Vec<usize> = indices
        .i64s()
        .iter()
        .map(|&i| {
            let j = if i < 0 { i + len as i64 } else { i };
            usize::try_from(j).ok().filter(|&j| j < len).ok_or_else(|| format!("index {i} out of range for size {len}"))
        })
        .collect::<Result<_, _>>()?;
    let outer: usize = c.shape[..axis].iter().product();
    let inner: usize = c.shape[axis + 1..].iter().product();
    if outer.checked_mul(inner).and_then(|x| x.checked_mul(idx.len())).is_none_or(|n| n > MAX_FOLDED) {
        return Err(format!("gathering {} indices gives a constant larger than {MAX_FOLDED} values", idx.len()));
    }
    let mut offs = Vec::with_capacity(outer * idx.len() * inner);
    for o in 0..outer {
        for &j in &idx {
            offs.extend((0..inner).map(|k| (o * len + j) * inner + k));
        }
    }
    let mut shape = c.shape[..axis].to_vec();
    shape.extend(&indices.shape);
    shape.extend(&c.shape[axis + 1..]);
    Ok(Const { shape, data: gather_by(&c.data, &offs), origin: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folds_broadcast_arithmetic() {
        let a = Const::float(vec![2, 1], vec![1.0, 2.0]);
        let b = Const::float(vec![3], vec![10.0, 20.0, 30.0]);
        assert_eq!(binary(Bin::Add, &a, &b).unwrap().f32s(), [11.0, 21.0, 31.0, 12.0, 22.0, 32.0]);
        assert_eq!(binary(Bin::Pow, &Const::float(vec![1], vec![2.0]), &Const::float(vec![], vec![3.0])).unwrap().f32s(), [8.0]);
        assert_eq!(binary(Bin::Div, &Const::ints(vec![1], vec![7]), &Const::ints(vec![], vec![2])).unwrap().i64s(), [3]);
        assert!(binary(Bin::Div, &Const::ints(vec![1], vec![7]), &Const::ints(vec![], vec![0])).is_err());
        assert!(binary(Bin::Add, &Const::float(vec![2], vec![0.0; 2]), &Const::float(vec![3], vec![0.0; 3])).is_err());
    }

    #[test]
    fn folds_layouts() {
        let c = Const::float(vec![2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        assert_eq!(transpose(&c, &[1, 0]).f32s(), [0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        let g = gather(&c, &Const::ints(vec![2], vec![-1, 0]), 1).unwrap();
        assert_eq!((g.shape.clone(), g.f32s()), (vec![2, 2], vec![2.0, 0.0, 5.0, 3.0]));
        let s = gather(&Const::ints(vec![4], vec![1, 1, 28, 28]), &Const::ints(vec![], vec![0]), 0).unwrap();
        assert_eq!((s.shape.clone(), s.i64s()), (vec![], vec![1]));
        let cat = concat(&[Const::ints(vec![1], vec![5]), Const::ints(vec![1], vec![-1])], 0).unwrap();
        assert_eq!(cat.i64s(), [5, -1]);
        assert!(gather(&c, &Const::ints(vec![], vec![3]), 1).is_err());
    }
}
