//! Constants (`get_attr`) and data-moving shape ops (`transpose`, `permute`).
//!
//! `flatten`, `view`/`reshape` and `size` need no kernel: the plan lets a reshaped value share
//! its input's buffer, and sizes are known when the plan is built.

use super::{Accum, Bwd, Fwd, Kernel};

/// Calls `f(j, ia, ib)` for every element `j` of a row-major tensor of `shape`, where `ia` and
/// `ib` are the offsets of that element under the strides `sa` and `sb` (a stride of 0
/// broadcasts). `idx` is a workspace of `shape.len()` entries.
pub(crate) fn walk(shape: &[usize], sa: &[usize], sb: &[usize], idx: &mut [usize], mut f: impl FnMut(usize, usize, usize)) {
    walk_n(shape, [sa, sb], idx, |j, [ia, ib]| f(j, ia, ib));
}

/// [`walk`] for any number of strided operands: `f(j, offsets)`, one offset per stride list.
pub(crate) fn walk_n<const N: usize>(shape: &[usize], st: [&[usize]; N], idx: &mut [usize], mut f: impl FnMut(usize, [usize; N])) {
    if shape.contains(&0) {
        return;
    }
    let Some(last) = shape.len().checked_sub(1) else {
        f(0, [0; N]);
        return;
    };
    idx.fill(0);
    let len = shape[last];
    let inner: [usize; N] = std::array::from_fn(|k| st[k][last]);
    let (mut off, mut j) = ([0usize; N], 0usize);
    loop {
        for t in 0..len {
            f(j + t, std::array::from_fn(|k| off[k] + t * inner[k]));
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
            off.iter_mut().zip(&st).for_each(|(o, s)| *o += s[d]);
            if idx[d] < shape[d] {
                break;
            }
            off.iter_mut().zip(&st).for_each(|(o, s)| *o -= s[d] * shape[d]);
            idx[d] = 0;
        }
    }
}

/// Splits a strided read of an output of `shape` (input stride `src_strides[d]` along output
/// dimension `d`) into the outer dimensions and the length of the runs of trailing values that
/// are consecutive in the input (the head dimension of attention's transposes, the features of
/// a `[L, B, E]` swap, the rows of a slice), so that those move as whole runs.
pub(crate) fn runs(shape: &[usize], src_strides: &[usize]) -> (Vec<usize>, Vec<usize>, usize) {
    let mut keep = shape.len();
    let mut run = 1;
    while keep > 0 && src_strides[keep - 1] == run {
        keep -= 1;
        run *= shape[keep];
    }
    (shape[..keep].to_vec(), src_strides[..keep].to_vec(), run)
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
    /// The output's shape without its trailing dimensions that stay contiguous in the input.
    outer_shape: Vec<usize>,
    /// Stride in the input of each of those output dimensions.
    src_strides: Vec<usize>,
    /// Values of the trailing dimensions that are copied as one run (1 where the last dimension
    /// moves).
    run: usize,
    idx: Vec<usize>,
}

impl Permute {
    /// `perm[d]` is the input dimension that becomes output dimension `d`.
    pub fn new(in_shape: &[usize], perm: &[usize]) -> Permute {
        let st = strides(in_shape);
        let out_shape: Vec<usize> = perm.iter().map(|&p| in_shape[p]).collect();
        let src_strides: Vec<usize> = perm.iter().map(|&p| st[p]).collect();
        let (outer_shape, src_strides, run) = runs(&out_shape, &src_strides);
        let idx = vec![0; outer_shape.len()];
        Permute { outer_shape, src_strides, run, idx }
    }
}

impl Kernel for Permute {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let x = cx.input(0);
        let (st, run) = (&self.src_strides, self.run);
        if run == 1 {
            walk(&self.outer_shape, st, st, &mut self.idx, |j, ia, _| y[j] = x[ia]);
        } else {
            walk(&self.outer_shape, st, st, &mut self.idx, |j, ia, _| y[j * run..][..run].copy_from_slice(&x[ia..][..run]));
        }
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, _i: usize, dx: &mut [f32], acc: Accum) {
        let dy = cx.dy;
        let (st, run) = (&self.src_strides, self.run);
        if run == 1 {
            walk(&self.outer_shape, st, st, &mut self.idx, |j, ia, _| acc.put(&mut dx[ia], dy[j]));
        } else {
            walk(&self.outer_shape, st, st, &mut self.idx, |j, ia, _| {
                let (to, from) = (&mut dx[ia..][..run], &dy[j * run..][..run]);
                match acc {
                    Accum::Write => to.copy_from_slice(from),
                    Accum::Add => to.iter_mut().zip(from).for_each(|(t, f)| *t += f),
                }
            });
        }
    }
}

/// `torch.cat` along one dimension: each input is a run of `outer` blocks of
/// `len[i] * inner` values, laid side by side in the output.
pub(crate) struct Concat {
    outer: usize,
    /// Block length of each input and its offset inside an output block.
    blocks: Vec<(usize, usize)>,
    out_block: usize,
}

impl Concat {
    pub fn new(ins: &[&[usize]], out: &[usize], dim: usize) -> Concat {
        let outer = out[..dim].iter().product();
        let inner: usize = out[dim + 1..].iter().product();
        let mut off = 0;
        let blocks = ins
            .iter()
            .map(|s| {
                let b = s[dim] * inner;
                off += b;
                (b, off - b)
            })
            .collect();
        Concat { outer, blocks, out_block: out[dim] * inner }
    }
}

impl Kernel for Concat {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        for (i, &(len, off)) in self.blocks.iter().enumerate() {
            let x = cx.input(i);
            for o in 0..self.outer {
                y[o * self.out_block + off..][..len].copy_from_slice(&x[o * len..][..len]);
            }
        }
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, i: usize, dx: &mut [f32], acc: Accum) {
        let (len, off) = self.blocks[i];
        for o in 0..self.outer {
            let g = &cx.dy[o * self.out_block + off..][..len];
            super::store_zip(acc, &mut dx[o * len..][..len], g, g, |g, _| g);
        }
    }
}

/// Constant padding: the input is copied into the interior of an output filled with `value`.
pub(crate) struct Pad {
    in_shape: Vec<usize>,
    in_strides: Vec<usize>,
    /// Output strides along the input's dimensions, and the output offset of the input's origin.
    out_strides: Vec<usize>,
    base: usize,
    value: f32,
    idx: Vec<usize>,
}

impl Pad {
    pub fn new(x: &[usize], out: &[usize], begin: &[usize], value: f32) -> Pad {
        let out_strides = strides(out);
        let lead = x.len() - begin.len();
        let base = begin.iter().enumerate().map(|(k, b)| b * out_strides[lead + k]).sum();
        Pad { in_shape: x.to_vec(), in_strides: strides(x), out_strides, base, value, idx: vec![0; x.len()] }
    }
}

impl Kernel for Pad {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let x = cx.input(0);
        y.fill(self.value);
        let base = self.base;
        walk(&self.in_shape, &self.in_strides, &self.out_strides, &mut self.idx, |_, ix, iy| y[base + iy] = x[ix]);
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, _i: usize, dx: &mut [f32], acc: Accum) {
        let (dy, base) = (cx.dy, self.base);
        walk(&self.in_shape, &self.in_strides, &self.out_strides, &mut self.idx, |_, ix, iy| acc.put(&mut dx[ix], dy[base + iy]));
    }
}
