//! The single matrix-product entry point of the runtime.
//!
//! Every kernel that multiplies matrices (linear, conv via im2col, matmul) calls [`gemm`], so the
//! choice of the underlying library and the threading policy live in one place.
//!
//! Threads and rounding: the `gemm` crate sums over `k` in blocks of `kc` values, and `kc`
//! depends on `k` alone on its general path (`gemm-common`'s `kernel_params`), but not on its
//! small-matrix paths (both sides at most 64, `m * n <= 256`, a side of 1). A product on the
//! general path is therefore cut only into pieces that stay on the general path: into row blocks
//! when `n > 64`, into column blocks when `m > 64`, never otherwise. Each output element then sees
//! the same sums in the same order whatever the number of pieces, so one thread (one call, no
//! cut) and several threads give the same bits, and a single thread never repacks an operand for
//! a cut it does not need.
//!
//! Kernel sets: [`gemm`] picks the crate's AVX2 or AVX-512 micro-kernels for the whole product
//! from its shape ([`GemmIsa::for_shape`], `gemm_isa.rs`), and every piece of a cut runs with
//! that set, so the choice never depends on the thread count either.

use crate::gemm_isa::{self, GemmIsa, Operands};
use rayon::prelude::*;
use rayon::ThreadPool;

/// Products with fewer multiply-adds than this run as one call on the calling thread, because
/// waking the pool costs more than it saves.
const PAR_MIN_MACS: usize = 1 << 20;

/// Pieces are whole multiples of this many rows or columns (the f32 micro-kernel's height), so
/// no piece ends in a partly filled register tile that the whole product would not have.
const PIECE_ALIGN: usize = 16;

/// The largest side of a product the `gemm` crate runs on its small-matrix path.
const SMALL_SIDE: usize = 64;

/// How a product is cut for the pool.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    /// One call.
    Whole,
    /// Row blocks of `C` of this many rows.
    Rows(usize),
    /// Column blocks of `C` of this many columns.
    Cols(usize),
}

/// The cut of an `m x k x n` product for `threads` threads: one piece per thread along a side
/// whose pieces all stay on the library's general path, preferring the cut that repacks the
/// smaller operand (every piece of a row cut packs all of `B`, `k x n`; every piece of a column
/// cut packs all of `A`, `m x k`).
fn cut(m: usize, k: usize, n: usize, threads: usize) -> Cut {
    if threads < 2 || m.saturating_mul(n).saturating_mul(k) < PAR_MIN_MACS {
        return Cut::Whole;
    }
    let piece = |len: usize| len.div_ceil(threads).next_multiple_of(PIECE_ALIGN);
    // Cutting `len` into blocks of `piece(len)`: there must be several, and each (the last may be
    // shorter) must be on the general path with the uncut side `other`.
    let fits = |len: usize, other: usize| {
        let p = piece(len);
        let last = len - (len.div_ceil(p) - 1) * p;
        p < len && general_path(p, other) && general_path(last, other)
    };
    match (fits(m, n), fits(n, m)) {
        (true, true) if m >= n => Cut::Rows(piece(m)),
        (true, true) => Cut::Cols(piece(n)),
        (true, false) => Cut::Rows(piece(m)),
        (false, true) => Cut::Cols(piece(n)),
        (false, false) => Cut::Whole,
    }
}

/// Whether an `r x c` product (any `k`) takes the `gemm` crate's general path, whose summation
/// blocks depend on `k` alone: not a matrix-vector product (a side of 1), not the tiny path
/// (`r * c <= 256`), not the small path (both sides at most 64).
pub(crate) fn general_path(r: usize, c: usize) -> bool {
    r > 1 && c > 1 && r * c > 256 && (r > SMALL_SIDE || c > SMALL_SIDE)
}

/// A read-only strided matrix view: element `(i, j)` is `data[i * rs + j * cs]`.
#[derive(Clone, Copy, Debug)]
pub struct Mat<'a> {
    data: &'a [f32],
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

impl<'a> Mat<'a> {
    /// A row-major `rows x cols` matrix.
    pub fn new(data: &'a [f32], rows: usize, cols: usize) -> Mat<'a> {
        Mat { data, rows, cols, rs: cols, cs: 1 }
    }

    /// A matrix with explicit row and column strides.
    pub fn strided(data: &'a [f32], rows: usize, cols: usize, rs: usize, cs: usize) -> Mat<'a> {
        Mat { data, rows, cols, rs, cs }
    }

    /// The transpose, as a view of the same data.
    pub fn t(self) -> Mat<'a> {
        Mat { data: self.data, rows: self.cols, cols: self.rows, rs: self.cs, cs: self.rs }
    }

    /// One past the largest index the view touches (0 for an empty view).
    fn span(&self) -> usize {
        if self.rows == 0 || self.cols == 0 {
            0
        } else {
            (self.rows - 1) * self.rs + (self.cols - 1) * self.cs + 1
        }
    }

    /// Rows `r0..r0 + n` of the view.
    fn row_block(&self, r0: usize, n: usize) -> Mat<'a> {
        let start = (r0 * self.rs).min(self.data.len());
        Mat { data: &self.data[start..], rows: n, cols: self.cols, rs: self.rs, cs: self.cs }
    }

    /// Columns `c0..c0 + n` of the view.
    fn col_block(&self, c0: usize, n: usize) -> Mat<'a> {
        let start = (c0 * self.cs).min(self.data.len());
        Mat { data: &self.data[start..], rows: self.rows, cols: n, rs: self.rs, cs: self.cs }
    }
}

/// A mutable row-major matrix with leading dimension `ld >= cols`.
#[derive(Debug)]
pub struct MatMut<'a> {
    data: &'a mut [f32],
    rows: usize,
    cols: usize,
    ld: usize,
}

impl<'a> MatMut<'a> {
    /// A row-major `rows x cols` matrix.
    pub fn new(data: &'a mut [f32], rows: usize, cols: usize) -> MatMut<'a> {
        MatMut { data, rows, cols, ld: cols }
    }
}

/// `C = alpha * A * B + beta * C`. With `beta == 0` the old contents of `C` are ignored (they may
/// be garbage or NaN). Runs on `pool` when the product is large enough to pay for it, with the
/// kernel set [`GemmIsa::for_shape`] picks for the whole product.
///
/// # Panics
/// When the shapes of the views disagree or a view reaches past its slice: the kernels compute
/// every size from the plan, so this is a broken internal invariant, never bad user input.
pub fn gemm(alpha: f32, a: Mat<'_>, b: Mat<'_>, beta: f32, c: MatMut<'_>, pool: Option<&ThreadPool>) {
    let isa = GemmIsa::for_shape(a.rows, a.cols, b.cols);
    gemm_with(isa, alpha, a, b, beta, c, pool)
}

/// [`gemm`] with the kernel set `isa` (the next narrower one where the CPU lacks it), for
/// measurements and tests of the kernel sets against each other.
///
/// # Panics
/// As [`gemm`].
pub fn gemm_with(isa: GemmIsa, alpha: f32, a: Mat<'_>, b: Mat<'_>, beta: f32, c: MatMut<'_>, pool: Option<&ThreadPool>) {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert!(b.rows == k && c.rows == m && c.cols == n, "gemm: shapes [{m}x{k}] * [{}x{n}] -> [{}x{}] disagree", b.rows, c.rows, c.cols);
    assert!(a.span() <= a.data.len() && b.span() <= b.data.len(), "gemm: operand view reaches past its data");
    assert!(c.ld >= n && (m == 0 || (m - 1) * c.ld + n <= c.data.len()), "gemm: output view reaches past its data");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        for row in c.data.chunks_mut(c.ld).take(m) {
            for v in &mut row[..n] {
                *v = if beta == 0.0 { 0.0 } else { *v * beta };
            }
        }
        return;
    }
    let threads = pool.map_or(1, |p| p.current_num_threads());
    match (cut(m, k, n, threads), pool) {
        (Cut::Rows(rows), Some(p)) => {
            let ld = c.ld;
            let used = &mut c.data[..(m - 1) * ld + n];
            p.install(|| {
                used.par_chunks_mut(rows * ld).enumerate().for_each(|(i, cblock)| {
                    let (r0, nr) = (i * rows, rows.min(m - i * rows));
                    sgemm_block(isa, alpha, a.row_block(r0, nr), b, beta, MatMut { data: cblock, rows: nr, cols: n, ld });
                })
            });
        }
        (Cut::Cols(cols), Some(p)) => {
            let ld = c.ld;
            let base = SharedOut(c.data.as_mut_ptr());
            let pieces = n.div_ceil(cols);
            p.install(|| {
                (0..pieces).into_par_iter().for_each(|j| {
                    let (c0, nc) = (j * cols, cols.min(n - j * cols));
                    // SAFETY: `gemm_with` checked that rows `0..m` and columns `0..n` of `C` lie
                    // in `c.data`, which is borrowed mutably for this whole call. Piece `j`
                    // writes columns `c0..c0 + nc` of every row only, so no two pieces write the
                    // same element and no one else reads or writes the slice meanwhile.
                    unsafe { sgemm_raw(isa, alpha, a, b.col_block(c0, nc), beta, base.at(c0), m, nc, ld) };
                })
            });
        }
        _ => sgemm_block(isa, alpha, a, b, beta, c),
    }
}

/// The output pointer of a column-cut product, shared by the pieces (each writes its own columns).
#[derive(Clone, Copy)]
struct SharedOut(*mut f32);

// SAFETY: the pieces that share the pointer write disjoint elements (see `gemm`).
unsafe impl Send for SharedOut {}
unsafe impl Sync for SharedOut {}

impl SharedOut {
    /// The pointer moved `offset` elements on (within the output slice, which the caller checks).
    fn at(self, offset: usize) -> *mut f32 {
        self.0.wrapping_add(offset)
    }
}

thread_local! {
    /// Whether this thread is inside the GEMM library. The library allocates its packing scratch
    /// inside every product (as `matrixmultiply` does too); the allocation test of the runtime
    /// reads this to tell those allocations from the runtime's own, which must be none.
    static IN_LIBRARY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is inside a product of the GEMM library (see `tests/no_alloc.rs`).
#[doc(hidden)]
pub fn in_gemm_library() -> bool {
    IN_LIBRARY.with(|f| f.get())
}

/// One product on views already checked by [`gemm_with`], by the `gemm` crate, which beat
/// `matrixmultiply` on every shape measured here: 1.5-2x on the small products of the jsc
/// models (less packing overhead) and 10-15% on the vgg7 convolutions (see
/// `examples/step_speed.rs`). Its kernel set is `isa` (`gemm_isa.rs`).
fn sgemm_block(isa: GemmIsa, alpha: f32, a: Mat<'_>, b: Mat<'_>, beta: f32, c: MatMut<'_>) {
    let (m, n, ld) = (c.rows, c.cols, c.ld);
    assert!(a.rows == m && a.span() <= a.data.len() && (m - 1) * ld + n <= c.data.len(), "gemm block out of range");
    // SAFETY: the assert above and those in `gemm` check that every index the product touches
    // lies inside the three slices, and `c` is borrowed mutably so it cannot alias `a` or `b`.
    unsafe { sgemm_raw(isa, alpha, a, b, beta, c.data.as_mut_ptr(), m, n, ld) }
}

/// `C = alpha * A * B + beta * C` into the row-major `m x n` matrix at `c` with leading
/// dimension `ld`, with the kernel set `isa`.
///
/// # Safety
/// `a` and `b` must fit their slices, `c` must be valid for writes of every element
/// `i * ld + j` (`i < m`, `j < n`), and nothing else may access those elements during the call.
#[allow(clippy::too_many_arguments)]
unsafe fn sgemm_raw(isa: GemmIsa, alpha: f32, a: Mat<'_>, b: Mat<'_>, beta: f32, c: *mut f32, m: usize, n: usize, ld: usize) {
    let k = a.cols;
    debug_assert!(a.rows == m && b.rows == k && b.cols == n && a.span() <= a.data.len() && b.span() <= b.data.len());
    // The crate computes dst = alpha * dst + beta * lhs * rhs: its names are swapped against
    // BLAS, and with `read_dst == false` the old contents of dst are not read.
    let operands = Operands {
        m,
        n,
        k,
        dst: c,
        dst_cs: 1,
        dst_rs: ld as isize,
        read_dst: beta != 0.0,
        lhs: a.data.as_ptr(),
        lhs_cs: a.cs as isize,
        lhs_rs: a.rs as isize,
        rhs: b.data.as_ptr(),
        rhs_cs: b.cs as isize,
        rhs_rs: b.rs as isize,
        alpha: beta,
        beta: alpha,
    };
    IN_LIBRARY.with(|f| f.set(true));
    // SAFETY: forwarded from the caller: the views fit their slices and `c` is ours alone.
    unsafe { gemm_isa::sgemm(isa, operands) };
    IN_LIBRARY.with(|f| f.set(false));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[f32], b: &[f32], m: usize, k: usize, n: usize) -> Vec<f32> {
        let mut c = vec![0.0; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
            }
        }
        c
    }

    #[test]
    fn small_product_and_transposes() {
        // [2x3] * [3x2]
        let a = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0];
        let b = [7.0, 8.0, 9.0, 10.0, 11.0, 12.0];
        let mut c = vec![f32::NAN; 4];
        gemm(1.0, Mat::new(&a, 2, 3), Mat::new(&b, 3, 2), 0.0, MatMut::new(&mut c, 2, 2), None);
        assert_eq!(c, [58.0, 64.0, 139.0, 154.0]);
        // A^T stored as [3x2]: the same product through a transposed view, accumulated with beta 1.
        let at = [1.0, 4.0, 2.0, 5.0, 3.0, 6.0];
        gemm(1.0, Mat::new(&at, 3, 2).t(), Mat::new(&b, 3, 2), 1.0, MatMut::new(&mut c, 2, 2), None);
        assert_eq!(c, [116.0, 128.0, 278.0, 308.0]);
    }

    /// Products on the library's general path, with `k` spanning several cache blocks of the
    /// kernel (k > 512) and with one side at most 64 (the library's small-matrix path for pieces
    /// of such a side).
    const SHAPES: [(usize, usize, usize); 12] = [
        (130, 97, 111),
        (67, 1500, 40),
        (512, 300, 9),
        (40, 1500, 300),
        (300, 1500, 100),
        (128, 1152, 200),
        (96, 700, 96),
        (1000, 2, 1000),
        (256, 784, 64),
        (64, 256, 784),
        (140, 200, 64),
        (200, 600, 5),
    ];

    fn random(len: usize, r: &mut mase_ir::Rng) -> Vec<f32> {
        (0..len).map(|_| r.uniform() - 0.5).collect()
    }

    /// Row and column cuts must see the same reduction order over k as the whole product, with
    /// each kernel set (those this CPU lacks fall back to a narrower one).
    fn threaded_is_bitwise_single_thread(isa: GemmIsa) {
        let pools: Vec<rayon::ThreadPool> =
            [2, 3].iter().map(|&t| rayon::ThreadPoolBuilder::new().num_threads(t).build().expect("pool")).collect();
        for (m, k, n) in SHAPES {
            let mut r = mase_ir::Rng::new(3);
            let (a, b) = (random(m * k, &mut r), random(k * n, &mut r));
            let mut c1 = vec![0.0; m * n];
            gemm_with(isa, 1.0, Mat::new(&a, m, k), Mat::new(&b, k, n), 0.0, MatMut::new(&mut c1, m, n), None);
            for pool in &pools {
                let mut cp = vec![f32::NAN; m * n];
                gemm_with(isa, 1.0, Mat::new(&a, m, k), Mat::new(&b, k, n), 0.0, MatMut::new(&mut cp, m, n), Some(pool));
                let t = pool.current_num_threads();
                assert!(c1 == cp, "{isa:?} {m}x{k}x{n} on {t} threads ({:?})", cut(m, k, n, t));
            }
            let want = naive(&a, &b, m, k, n);
            let worst = c1.iter().zip(&want).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
            assert!(worst < 1e-3, "{isa:?} {m}x{k}x{n}: {worst}");
        }
    }

    #[test]
    fn threaded_result_is_bitwise_the_single_thread_result() {
        threaded_is_bitwise_single_thread(GemmIsa::Avx2);
    }

    #[test]
    fn threaded_result_is_bitwise_the_single_thread_result_with_avx512() {
        threaded_is_bitwise_single_thread(GemmIsa::Avx512);
    }

    #[test]
    fn kernel_sets_agree_within_the_float32_bound_of_a_direct_sum() {
        // Every element of each kernel set's product lies within `gamma_k * sum_p |a_ip b_pj|`
        // of the float64 product (`gamma_k = k u / (1 - k u)`, `u = 2^-24`): the error bound of a
        // float32 sum of `k` products in any order. Operands are transposed views too (the conv
        // weight and input gradients' layouts).
        for (m, k, n) in SHAPES.into_iter().chain([(1, 784, 64), (5, 256, 8), (256, 64, 4), (128, 27, 1024)]) {
            let mut r = mase_ir::Rng::new(11);
            let (a, b) = (random(m * k, &mut r), random(k * n, &mut r));
            let (at, bt): (Vec<f32>, Vec<f32>) =
                ((0..m * k).map(|i| a[(i % m) * k + i / m]).collect(), (0..k * n).map(|i| b[(i % k) * n + i / k]).collect());
            let u = f64::from(f32::EPSILON) / 2.0;
            let gamma = k as f64 * u / (1.0 - k as f64 * u);
            for isa in GemmIsa::ALL {
                for (av, bv) in [(Mat::new(&a, m, k), Mat::new(&b, k, n)), (Mat::new(&at, k, m).t(), Mat::new(&bt, n, k).t())] {
                    let mut c = vec![f32::NAN; m * n];
                    gemm_with(isa, 1.0, av, bv, 0.0, MatMut::new(&mut c, m, n), None);
                    for (idx, &got) in c.iter().enumerate() {
                        let (i, j) = (idx / n, idx % n);
                        let (exact, abs) = (0..k).fold((0.0f64, 0.0f64), |(s, t), p| {
                            let v = f64::from(a[i * k + p]) * f64::from(b[p * n + j]);
                            (s + v, t + v.abs())
                        });
                        assert!((f64::from(got) - exact).abs() <= gamma * abs, "{isa:?} {m}x{k}x{n} ({i}, {j}): {got} vs {exact}");
                    }
                }
            }
        }
    }

    #[test]
    fn shape_classes_pick_the_measured_kernel_set() {
        // (m, k, n) -> the set on a CPU with AVX-512: AVX-512 from 16 columns of C on.
        let cases = [
            ((128, 1152, 1024), GemmIsa::Avx512),
            ((256, 784, 64), GemmIsa::Avx512),
            ((64, 256, 16), GemmIsa::Avx512),
            ((1, 64, 64), GemmIsa::Avx512),
            ((256, 64, 12), GemmIsa::Avx2),
            ((256, 32, 5), GemmIsa::Avx2),
            ((8, 256, 8), GemmIsa::Avx2),
        ];
        for ((m, k, n), want) in cases {
            let want = GemmIsa::ALL.into_iter().rev().find(|isa| *isa <= want && isa.available()).unwrap_or(GemmIsa::Portable);
            assert_eq!(GemmIsa::for_shape(m, k, n), want, "{m}x{k}x{n}");
        }
    }

    #[test]
    fn cuts_keep_every_piece_on_the_general_path() {
        // (m, k, n, threads) -> cut
        let cases = [
            ((2048, 2048, 2048, 1), Cut::Whole),
            ((2048, 2048, 2048, 2), Cut::Rows(1024)),
            ((128, 1024, 1152, 2), Cut::Cols(576)),
            ((1152, 128, 1024, 2), Cut::Rows(576)),
            // A side of 64 is cut in pieces that keep more than 64 rows (or columns): tfc's
            // forward product and weight gradient, vgg7's last convolutions.
            ((512, 4608, 64, 2), Cut::Rows(256)),
            ((4608, 512, 64, 3), Cut::Rows(1536)),
            ((256, 784, 64, 2), Cut::Rows(128)),
            ((64, 256, 784, 2), Cut::Cols(400)),
            ((140, 200, 64, 2), Cut::Cols(32)),
            ((64, 4096, 64, 2), Cut::Whole),
            ((8, 100_000, 8, 2), Cut::Whole),
            ((100, 30, 100, 2), Cut::Whole),
            ((1000, 2, 1000, 2), Cut::Rows(512)),
        ];
        for ((m, k, n, t), want) in cases {
            assert_eq!(cut(m, k, n, t), want, "{m}x{k}x{n} on {t}");
        }
    }
}
