//! Constants (`get_attr`) and data-moving shape ops (`transpose`, `permute`).
//!
//! `flatten`, `view`/`reshape` and `size` need no kernel: the plan lets a reshaped value share
//! its input's buffer, and sizes are known when the plan is built.

use super::{Accum, Bwd, Fwd, Kernel};

/// Calls `f(j, ia, ib)` for every element `j` of a row-major tensor of `shape`, where `ia` and
/// `ib` are the offsets of that element under the strides `sa` and `sb` (a stride of 0
/// broadcasts). `idx` is a workspace of `shape.len()` entries.
pub(crate) fn walk(shape: &[usize], sa: &[usize], sb: &[usize], idx: &mut [usize], mut f: impl FnMut(usize, usize, usize)) {
    if shape.contains(&0) {
        return;
    }
    let Some(last) = shape.len().checked_sub(1) else {
        f(0, 0, 0);
        return;
    };
    idx.fill(0);
    let (len, st_a, st_b) = (shape[last], sa[last], sb[last]);
    let (mut oa, mut ob, mut j) = (0usize, 0usize, 0usize);
    loop {
        for t in 0..len {
            f(j + t, oa + t * st_a, ob + t * st_b);
        }
        j += len;
        // Advance the odometer over the outer dimensions.
        let mut d = last;
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            oa += sa[d];
            ob += sb[d];
            if idx[d] < shape[d] {
                break;
            }
            oa -= sa[d] * shape[d];
            ob -= sb[d] * shape[d];
            idx[d] = 0;
        }
    }
}

/// Row-major strides of a shape.
pub(crate) fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * shape[d + 1];
    }
    s
}

/// A tensor read from the parameter store; its gradient flows into the parameter when the
/// stored entry is trainable.
pub(crate) struct Constant {
    slot: usize,
}

impl Constant {
    pub fn new(slot: usize) -> Constant {
        Constant { slot }
    }
}

impl Kernel for Constant {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        y.copy_from_slice(&cx.params[self.slot].data);
    }

    fn backward_params(&mut self, cx: &mut Bwd<'_>) {
        if let Some(acc) = cx.param_acc {
            super::store_each(acc, &mut cx.params[self.slot].grad, |i| cx.dy[i]);
        }
    }

    fn backward_input(&mut self, _cx: &Bwd<'_>, _i: usize, _dx: &mut [f32], _acc: Accum) {}
}

/// A permutation of dimensions (`transpose` is the permutation that swaps two).
pub(crate) struct Permute {
    out_shape: Vec<usize>,
    /// Stride in the input of each output dimension.
    src_strides: Vec<usize>,
    idx: Vec<usize>,
}

impl Permute {
    /// `perm[d]` is the input dimension that becomes output dimension `d`.
    pub fn new(in_shape: &[usize], perm: &[usize]) -> Permute {
        let st = strides(in_shape);
        Permute {
            out_shape: perm.iter().map(|&p| in_shape[p]).collect(),
            src_strides: perm.iter().map(|&p| st[p]).collect(),
            idx: vec![0; perm.len()],
        }
    }
}

impl Kernel for Permute {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let x = cx.input(0);
        let st = &self.src_strides;
        walk(&self.out_shape, st, st, &mut self.idx, |j, ia, _| y[j] = x[ia]);
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, _i: usize, dx: &mut [f32], acc: Accum) {
        let dy = cx.dy;
        let st = &self.src_strides;
        walk(&self.out_shape, st, st, &mut self.idx, |j, ia, _| acc.put(&mut dx[ia], dy[j]));
    }
}
