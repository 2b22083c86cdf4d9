//! `softmax` and `log_softmax` along one dimension.

use super::{Accum, Bwd, Fwd, Kernel};

/// A (log-)softmax over dimension `dim` of a tensor viewed as `[outer, len, inner]`.
pub(crate) struct Softmax {
    outer: usize,
    len: usize,
    inner: usize,
    log: bool,
}

impl Softmax {
    pub fn new(shape: &[usize], dim: usize, log: bool) -> Softmax {
        Softmax { outer: shape[..dim].iter().product(), len: shape[dim], inner: shape[dim + 1..].iter().product(), log }
    }

    /// Calls `f(base)` for the index of element 0 of every softmax line; its elements are
    /// `base + j * inner`.
    fn lines(&self, mut f: impl FnMut(usize)) {
        for o in 0..self.outer {
            for i in 0..self.inner {
                f(o * self.len * self.inner + i);
            }
        }
    }
}

impl Kernel for Softmax {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let x = cx.input(0);
        let (len, inner, log) = (self.len, self.inner, self.log);
        self.lines(|b| {
            let at = |j: usize| b + j * inner;
            let max = (0..len).map(|j| x[at(j)]).fold(f32::NEG_INFINITY, f32::max);
            let sum: f32 = (0..len).map(|j| (x[at(j)] - max).exp()).sum();
            if log {
                let lse = sum.ln();
                (0..len).for_each(|j| y[at(j)] = x[at(j)] - max - lse);
            } else {
                (0..len).for_each(|j| y[at(j)] = (x[at(j)] - max).exp() / sum);
            }
        });
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, _i: usize, dx: &mut [f32], acc: Accum) {
        let (y, dy) = (cx.y, cx.dy);
        let (len, inner, log) = (self.len, self.inner, self.log);
        self.lines(|b| {
            let at = |j: usize| b + j * inner;
            if log {
                // dx = dy - exp(y) * sum(dy)
                let s: f32 = (0..len).map(|j| dy[at(j)]).sum();
                (0..len).for_each(|j| acc.put(&mut dx[at(j)], dy[at(j)] - y[at(j)].exp() * s));
            } else {
                // dx = y * (dy - sum(dy * y))
                let s: f32 = (0..len).map(|j| dy[at(j)] * y[at(j)]).sum();
                (0..len).for_each(|j| acc.put(&mut dx[at(j)], y[at(j)] * (dy[at(j)] - s)));
            }
        });
    }
}
