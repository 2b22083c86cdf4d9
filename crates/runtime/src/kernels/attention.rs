//! `einsum` of two operands, `scaled_dot_product_attention` and `embedding`.

use super::shape_ops::{strides, walk};
use super::vector::{exp_nonpositive, multiversion};
use super::{Accum, Bwd, Fwd, Kernel};
use crate::gemm::{gemm, Mat, MatMut};
use mase_ir::{size_of, AttnMask, Contraction};

/// Offsets, in a row-major tensor whose dimensions carry `letters`, of each element of the
/// tensor laid out in `order` (a permutation of some of those letters; the others are held at 0).
fn gather_map(letters: &[char], shape: &[usize], order: &[char], sizes: &[(char, usize)]) -> Vec<usize> {
    let st = strides(shape);
    let dims: Vec<usize> = order.iter().map(|&c| size_of(sizes, c)).collect();
    let along: Vec<usize> = order.iter().map(|c| letters.iter().position(|l| l == c).map_or(0, |d| st[d])).collect();
    let mut map = Vec::with_capacity(dims.iter().product());
    let mut idx = vec![0; dims.len()];
    walk(&dims, &along, &along, &mut idx, |_, o, _| map.push(o));
    map
}

/// A gather map, or `None` when it is the identity (the operand is already in packed order).
fn non_identity(map: Vec<usize>) -> Option<Vec<usize>> {
    (!map.iter().enumerate().all(|(i, &o)| i == o)).then_some(map)
}

/// `torch.einsum` of two operands as `batch` products `[m, k] x [k, n]`: each operand is
/// gathered into packed order (skipped where it already is), multiplied, and the product is
/// scattered into the output's letter order.
pub(crate) struct Einsum {
    batch: usize,
    m: usize,
    k: usize,
    n: usize,
    /// Gather maps of the two operands and of the output (`None`: identity).
    maps: [Option<Vec<usize>>; 3],
    /// The packed operands of the last forward (kept for backward), the packed product, and the
    /// packed output gradient.
    packed: [Vec<f32>; 2],
    product: Vec<f32>,
    dy: Vec<f32>,
    /// The packed gradient of one operand.
    dpacked: Vec<f32>,
}

impl Einsum {
    pub fn new(equation: &str, a: &[usize], b: &[usize], out: &[usize]) -> Einsum {
        // Shape inference has accepted the equation and the shapes before a plan is built.
        let c = Contraction::parse(equation).expect("checked by shape inference");
        let sizes = c.sizes([a, b]).expect("checked by shape inference");
        let prod = |v: &[char]| v.iter().map(|&l| size_of(&sizes, l)).product::<usize>();
        let (batch, m, k, n) = (prod(&c.batch), prod(&c.rows), prod(&c.contracted), prod(&c.cols));
        let cat = |parts: [&[char]; 3]| parts.concat();
        let maps = [
            non_identity(gather_map(&c.operands[0], a, &cat([&c.batch, &c.rows, &c.contracted]), &sizes)),
            non_identity(gather_map(&c.operands[1], b, &cat([&c.batch, &c.contracted, &c.cols]), &sizes)),
            non_identity(gather_map(&c.output, out, &cat([&c.batch, &c.rows, &c.cols]), &sizes)),
        ];
        let len = |i: usize, n: usize| if maps[i].is_some() { n } else { 0 };
        Einsum {
            batch,
            m,
            k,
            n,
            packed: [vec![0.0; len(0, batch * m * k)], vec![0.0; len(1, batch * k * n)]],
            product: vec![0.0; len(2, batch * m * n)],
            dy: vec![0.0; len(2, batch * m * n)],
            dpacked: vec![0.0; batch * k * m.max(n)],
            maps,
        }
    }
}

/// `dst[i] = src[map[i]]`.
fn gather(dst: &mut [f32], src: &[f32], map: &[usize]) {
    dst.iter_mut().zip(map).for_each(|(d, &o)| *d = src[o]);
}

impl Kernel for Einsum {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let (m, k, n) = (self.m, self.k, self.n);
        for i in 0..2 {
            if let Some(map) = &self.maps[i] {
                gather(&mut self.packed[i], cx.input(i), map);
            }
        }
        let a = if self.maps[0].is_some() { &self.packed[0][..] } else { cx.input(0) };
        let b = if self.maps[1].is_some() { &self.packed[1][..] } else { cx.input(1) };
        let out = if self.maps[2].is_some() { &mut self.product[..] } else { &mut *y };
        for bi in 0..self.batch {
            let c = MatMut::new(&mut out[bi * m * n..][..m * n], m, n);
            gemm(1.0, Mat::new(&a[bi * m * k..], m, k), Mat::new(&b[bi * k * n..], k, n), 0.0, c, cx.pool);
        }
        if let Some(map) = &self.maps[2] {
            map.iter().zip(&self.product).for_each(|(&o, &v)| y[o] = v);
        }
    }

    fn backward_params(&mut self, cx: &mut Bwd<'_>) {
        if let Some(map) = &self.maps[2] {
            gather(&mut self.dy, cx.dy, map);
        }
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, i: usize, dx: &mut [f32], acc: Accum) {
        let (m, k, n) = (self.m, self.k, self.n);
        let dy = if self.maps[2].is_some() { &self.dy[..] } else { cx.dy };
        let a = if self.maps[0].is_some() { &self.packed[0][..] } else { cx.input(0) };
        let b = if self.maps[1].is_some() { &self.packed[1][..] } else { cx.input(1) };
        // Packed operands write straight into `dx`; gathered ones go through `dpacked`.
        let direct = self.maps[i].is_none();
        let beta = if direct { acc.beta() } else { 0.0 };
        let dst = if direct { &mut dx[..] } else { &mut self.dpacked[..] };
        for bi in 0..self.batch {
            let g = Mat::new(&dy[bi * m * n..], m, n);
            if i == 0 {
                // dA = dY B^T
                let c = MatMut::new(&mut dst[bi * m * k..][..m * k], m, k);
                gemm(1.0, g, Mat::new(&b[bi * k * n..], k, n).t(), beta, c, cx.pool);
            } else {
                // dB = A^T dY
                let c = MatMut::new(&mut dst[bi * k * n..][..k * n], k, n);
                gemm(1.0, Mat::new(&a[bi * m * k..], m, k).t(), g, beta, c, cx.pool);
            }
        }
        if let Some(map) = &self.maps[i] {
            // Each element of the operand has one packed position (no letter repeats).
            map.iter().zip(&self.dpacked).for_each(|(&o, &v)| acc.put(&mut dx[o], v));
        }
    }
}

/// `softmax(q k^T * scale + mask) v` over `batch` matrices: `q [l, e]`, `k [s, e]`,
/// `v [s, ev]`. The probabilities of the last forward are kept for backward.
pub(crate) struct Attention {
    batch: usize,
    l: usize,
    s: usize,
    e: usize,
    ev: usize,
    scale: f32,
    mask: Option<AttnMask>,
    causal: bool,
    /// The offset in the mask of each score (broadcasting), when there is a mask.
    mask_map: Vec<usize>,
    /// Softmax probabilities `[batch, l, s]`.
    p: Vec<f32>,
    /// The gradient of the scaled, masked scores `[batch, l, s]`.
    ds: Vec<f32>,
}

impl Attention {
    pub fn new(ins: &[&[usize]], mask: Option<AttnMask>, causal: bool, scale: Option<f32>) -> Attention {
        let (q, k, v) = (ins[0], ins[1], ins[2]);
        let r = q.len();
        let batch = q[..r - 2].iter().product();
        let (l, e, s, ev) = (q[r - 2], q[r - 1], k[r - 2], v[r - 1]);
        let mut scores = q[..r - 1].to_vec();
        scores.push(s);
        let mask_map = match ins.get(3) {
            Some(m) => {
                // Align the mask's dimensions to the scores' from the right; size 1 broadcasts.
                let st = strides(m);
                let lead = scores.len() - m.len();
                let along: Vec<usize> = (0..scores.len()).map(|d| if d < lead || m[d - lead] == 1 { 0 } else { st[d - lead] }).collect();
                let mut map = Vec::with_capacity(batch * l * s);
                let mut idx = vec![0; scores.len()];
                walk(&scores, &along, &along, &mut idx, |_, o, _| map.push(o));
                map
            }
            None => Vec::new(),
        };
        Attention {
            batch,
            l,
            s,
            e,
            ev,
            scale: scale.unwrap_or(1.0 / (e as f32).sqrt()),
            mask,
            causal,
            mask_map,
            p: vec![0.0; batch * l * s],
            ds: vec![0.0; batch * l * s],
        }
    }
}

/// Softmax of one row in place. A row whose scores are all `-inf` (every position masked) gives
/// zeros, as PyTorch's `scaled_dot_product_attention` does; a NaN anywhere gives NaN.
fn softmax_row(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if max == f32::NEG_INFINITY && !row.iter().any(|v| v.is_nan()) {
        row.fill(0.0);
        return;
    }
    exp_shifted(row, max);
    let sum = row.iter().fold(0.0, |s, v| s + v);
    row.iter_mut().for_each(|v| *v /= sum);
}

multiversion! {
    /// `v = e^(v - max)` over a row, in vectors (`vector::exp_nonpositive`; NaN stays NaN).
    fn exp_shifted(row: &mut [f32], max: f32) => exp_shifted_loop
}

#[inline(always)]
fn exp_shifted_loop(row: &mut [f32], max: f32) {
    for v in row.iter_mut() {
        *v = exp_nonpositive(*v - max);
    }
}

impl Kernel for Attention {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let (l, s, e, ev) = (self.l, self.s, self.e, self.ev);
        let (q, k, v) = (cx.input(0), cx.input(1), cx.input(2));
        for bi in 0..self.batch {
            let p = &mut self.p[bi * l * s..][..l * s];
            gemm(self.scale, Mat::new(&q[bi * l * e..], l, e), Mat::new(&k[bi * s * e..], s, e).t(), 0.0, MatMut::new(p, l, s), cx.pool);
            let masks = &self.mask_map[if self.mask.is_some() { bi * l * s..(bi + 1) * l * s } else { 0..0 }];
            match self.mask {
                Some(AttnMask::Bool) => {
                    let m = cx.input(3);
                    p.iter_mut().zip(masks).for_each(|(v, &o)| {
                        if m[o] == 0.0 {
                            *v = f32::NEG_INFINITY
                        }
                    });
                }
                Some(AttnMask::Additive) => {
                    let m = cx.input(3);
                    p.iter_mut().zip(masks).for_each(|(v, &o)| *v += m[o]);
                }
                None => {}
            }
            for (i, row) in p.chunks_exact_mut(s).enumerate() {
                if self.causal {
                    row.iter_mut().skip(i + 1).for_each(|v| *v = f32::NEG_INFINITY);
                }
                softmax_row(row);
            }
            let out = MatMut::new(&mut y[bi * l * ev..][..l * ev], l, ev);
            gemm(1.0, Mat::new(&self.p[bi * l * s..], l, s), Mat::new(&v[bi * s * ev..], s, ev), 0.0, out, cx.pool);
        }
    }

    /// The gradient of the masked scores, `dS = P * (dP - rowsum(dP * P))` with `dP = dO v^T`,
    /// which the gradients of q, k and the mask read.
    fn backward_params(&mut self, cx: &mut Bwd<'_>) {
        let (l, s, ev) = (self.l, self.s, self.ev);
        let v = cx.input(2);
        for bi in 0..self.batch {
            let ds = &mut self.ds[bi * l * s..][..l * s];
            gemm(1.0, Mat::new(&cx.dy[bi * l * ev..], l, ev), Mat::new(&v[bi * s * ev..], s, ev).t(), 0.0, MatMut::new(ds, l, s), cx.pool);
            for (g, p) in ds.chunks_exact_mut(s).zip(self.p[bi * l * s..][..l * s].chunks_exact(s)) {
                let dot: f32 = g.iter().zip(p).map(|(a, b)| a * b).sum();
                g.iter_mut().zip(p).for_each(|(g, &p)| *g = p * (*g - dot));
            }
        }
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, i: usize, dx: &mut [f32], acc: Accum) {
        let (l, s, e, ev) = (self.l, self.s, self.e, self.ev);
        let (q, k) = (cx.input(0), cx.input(1));
        if i == 3 {
            // The float mask's gradient is dS, summed where the mask broadcasts; a bool mask
            // gets zeros (PyTorch gives it none).
            acc.prepare(dx);
            if self.mask == Some(AttnMask::Additive) {
                self.mask_map.iter().zip(&self.ds).for_each(|(&o, &g)| dx[o] += g);
            }
            return;
        }
        let beta = acc.beta();
        for bi in 0..self.batch {
            let ds = Mat::new(&self.ds[bi * l * s..], l, s);
            match i {
                // dq = scale * dS k
                0 => {
                    gemm(self.scale, ds, Mat::new(&k[bi * s * e..], s, e), beta, MatMut::new(&mut dx[bi * l * e..][..l * e], l, e), cx.pool)
                }
                // dk = scale * dS^T q
                1 => gemm(
                    self.scale,
                    ds.t(),
                    Mat::new(&q[bi * l * e..], l, e),
                    beta,
                    MatMut::new(&mut dx[bi * s * e..][..s * e], s, e),
                    cx.pool,
                ),
                // dv = P^T dO
                _ => {
                    let p = Mat::new(&self.p[bi * l * s..], l, s).t();
                    gemm(
                        1.0,
                        p,
                        Mat::new(&cx.dy[bi * l * ev..], l, ev),
                        beta,
                        MatMut::new(&mut dx[bi * s * ev..][..s * ev], s, ev),
                        cx.pool,
                    )
                }
            }
        }
    }
}

/// An id that is not a whole number in `0..num_embeddings`, found by a forward run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct BadId {
    pub index: usize,
    pub value: f32,
    pub num_embeddings: usize,
}

/// Row `id` of the weight for every id. The weight is a parameter slot (`nn.Embedding`) or
/// input 1 (`F.embedding`).
pub(crate) struct Embedding {
    num: usize,
    dim: usize,
    padding_idx: Option<usize>,
    weight: Option<usize>,
    /// The first bad id of the last forward, taken by the executor, which stops the run.
    pub bad: Option<BadId>,
}

impl Embedding {
    pub fn new(num: usize, dim: usize, padding_idx: Option<usize>, weight_slot: Option<usize>) -> Embedding {
        Embedding { num, dim, padding_idx, weight: weight_slot, bad: None }
    }

    /// The row of an id, when it is a whole number in range.
    fn row(&self, id: f32) -> Option<usize> {
        (id >= 0.0 && id < self.num as f32 && id.fract() == 0.0).then_some(id as usize)
    }

    /// `dw[id] += dy` for every id but `padding_idx`.
    fn scatter(&self, ids: &[f32], dy: &[f32], dw: &mut [f32]) {
        let d = self.dim;
        for (&id, g) in ids.iter().zip(dy.chunks_exact(d)) {
            let Some(r) = self.row(id) else { continue };
            if Some(r) != self.padding_idx {
                dw[r * d..][..d].iter_mut().zip(g).for_each(|(w, &g)| *w += g);
            }
        }
    }
}

impl Kernel for Embedding {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let d = self.dim;
        let ids = cx.input(0);
        let w = match self.weight {
            Some(slot) => &cx.params[slot].data[..],
            None => cx.input(1),
        };
        self.bad = None;
        for (index, (&id, out)) in ids.iter().zip(y.chunks_exact_mut(d)).enumerate() {
            match self.row(id) {
                Some(r) => out.copy_from_slice(&w[r * d..][..d]),
                None => {
                    out.fill(f32::NAN);
                    self.bad.get_or_insert(BadId { index, value: id, num_embeddings: self.num });
                }
            }
        }
    }

    fn backward_params(&mut self, cx: &mut Bwd<'_>) {
        let (Some(slot), Some(acc)) = (self.weight, cx.param_acc) else { return };
        let dw = &mut cx.params[slot].grad;
        acc.prepare(dw);
        self.scatter(&cx.vals[cx.ins[0]], cx.dy, dw);
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, i: usize, dx: &mut [f32], acc: Accum) {
        acc.prepare(dx);
        // The ids (input 0) are indices: PyTorch gives them no gradient, here zeros.
        if i == 1 {
            self.scatter(cx.input(0), cx.dy, dx);
        }
    }
}
