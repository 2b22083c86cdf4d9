//! Broadcasting of QONNX's per-tensor or per-channel parameters (`scale`, `zero_point`) against
//! the data, with NumPy's rules: shapes right-aligned, each parameter dimension 1 or equal.

use crate::error::{QuantError, Result};
use mase_ir::Tensor;

/// Checks that a parameter tensor is well formed and broadcasts to `shape`.
pub(crate) fn check(format: &'static str, field: &'static str, p: &Tensor, shape: &[usize]) -> Result<()> {
    let err =
        |reason: &str| QuantError::Broadcast { format, field, param_shape: p.shape.clone(), shape: shape.to_vec(), reason: reason.into() };
    if p.shape.iter().product::<usize>() != p.data.len() {
        return Err(err("the parameter's values do not match its shape"));
    }
    if p.data.len() == 1 {
        return Ok(());
    }
    if p.shape.len() > shape.len() {
        return Err(err("the parameter has more dimensions than the data"));
    }
    let lead = shape.len() - p.shape.len();
    for (d, &n) in p.shape.iter().enumerate() {
        if n != 1 && n != shape[lead + d] {
            return Err(err(&format!("dimension {d} is {n}, the data has {}", shape[lead + d])));
        }
    }
    Ok(())
}

/// Strides of `p` aligned to the data's dimensions, 0 where it broadcasts.
fn strides(p: &[usize], shape: &[usize]) -> Vec<usize> {
    let lead = shape.len() - p.len();
    let mut own = vec![0usize; p.len()];
    let mut s = 1;
    for d in (0..p.len()).rev() {
        own[d] = if p[d] == 1 { 0 } else { s };
        s *= p[d];
    }
    (0..shape.len()).map(|d| if d < lead { 0 } else { own[d - lead] }).collect()
}

/// The parameter index of data element `i`, computed element by element.
fn index_of(p: &Tensor, shape: &[usize], mut i: usize) -> usize {
    if p.data.len() == 1 {
        return 0;
    }
    let st = strides(&p.shape, shape);
    let mut off = 0;
    for d in (0..shape.len()).rev() {
        let n = shape[d].max(1);
        off += (i % n) * st[d];
        i /= n;
    }
    off
}

/// The parameter value of data element `i` of a tensor of `shape`, looked up element by element
/// (for references and grid checks, where speed does not matter).
pub(crate) fn value_at(p: &Tensor, shape: &[usize], i: usize) -> f32 {
    p.data[index_of(p, shape, i)]
}

/// The kernels' loop over broadcast data: `out[i] = f(x[i], k)`, with `k` the index of element
/// `i`'s parameter in a parameter tensor of shape `p`. It walks the data in runs along the last
/// dimension, where `k` grows by a fixed step, so that `f` inlines into a loop that vectorises.
pub(crate) fn map_runs(p: &[usize], shape: &[usize], x: &[f32], out: &mut [f32], f: impl Fn(f32, usize) -> f32) {
    // `move` puts `f` itself in the run closure rather than a reference to it: one indirection
    // less on every element, which LLVM otherwise reloads in the loop (7% on int_quant).
    for_each_run(p, shape, x.len(), move |r, off, step| {
        for (k, (o, &v)) in out[r.clone()].iter_mut().zip(&x[r]).enumerate() {
            *o = f(v, off + k * step);
        }
    });
}

/// Calls `f(range, offset, step)` for each run of the data along its last dimension, where the
/// parameter of element `range.start + k` is at `offset + k * step`.
fn for_each_run(p: &[usize], shape: &[usize], len: usize, mut f: impl FnMut(std::ops::Range<usize>, usize, usize)) {
    let r = shape.len();
    if r == 0 || p.iter().product::<usize>() == 1 {
        let step = 0;
        f(0..len, 0, step);
        return;
    }
    let st = strides(p, shape);
    let inner = shape[r - 1];
    if inner == 0 {
        return;
    }
    let mut idx = vec![0usize; r - 1];
    let mut start = 0;
    while start < len {
        let off: usize = idx.iter().zip(&st).map(|(i, s)| i * s).sum();
        f(start..start + inner, off, st[r - 1]);
        start += inner;
        for d in (0..r - 1).rev() {
            idx[d] += 1;
            if idx[d] < shape[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}
