//! The single matrix-product entry point of the runtime.
//!
//! Every kernel that multiplies matrices (linear, conv via im2col, matmul) calls [`gemm`], so the
//! choice of the underlying library and the threading policy live in one place. Large products are
//! always cut into the same blocks of [`ROW_BLOCK`] rows of `C`, with or without a pool: the
//! library's blocking over `k` depends on the shape it is given, so cutting by thread count would
//! change the rounding, while fixed blocks give the same bits on one thread or many.

use rayon::prelude::*;
use rayon::ThreadPool;

/// Products with fewer multiply-adds than this run as one call on the calling thread, because
/// waking the pool costs more than it saves.
const PAR_MIN_MACS: usize = 1 << 20;

/// Rows of `C` per block of a large product.
const ROW_BLOCK: usize = 64;

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
/// be garbage or NaN). Runs on `pool` when the product is large enough to pay for it.
///
/// # Panics
/// When the shapes of the views disagree or a view reaches past its slice: the kernels compute
/// every size from the plan, so this is a broken internal invariant, never bad user input.
pub fn gemm(alpha: f32, a: Mat<'_>, b: Mat<'_>, beta: f32, c: MatMut<'_>, pool: Option<&ThreadPool>) {
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
    if m > ROW_BLOCK && m.saturating_mul(n).saturating_mul(k) >= PAR_MIN_MACS {
        let ld = c.ld;
        let block = |(i, cblock): (usize, &mut [f32])| {
            let (r0, rows) = (i * ROW_BLOCK, ROW_BLOCK.min(m - i * ROW_BLOCK));
            sgemm_block(alpha, a.row_block(r0, rows), b, beta, MatMut { data: cblock, rows, cols: n, ld });
        };
        let used = &mut c.data[..(m - 1) * ld + n];
        match pool {
            Some(p) if p.current_num_threads() > 1 => p.install(|| used.par_chunks_mut(ROW_BLOCK * ld).enumerate().for_each(block)),
            _ => used.chunks_mut(ROW_BLOCK * ld).enumerate().for_each(block),
        }
    } else {
        sgemm_block(alpha, a, b, beta, c);
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

/// One product on views already checked by [`gemm`], by the `gemm` crate, which beat
/// `matrixmultiply` on every shape measured here: 1.5-2x on the small products of the jsc
/// models (less packing overhead) and 10-15% on the vgg7 convolutions (see
/// `examples/step_speed.rs`). Its AVX-512 kernels (feature `x86-v4`) were slower on this
/// machine's Zen 4, so they stay off.
fn sgemm_block(alpha: f32, a: Mat<'_>, b: Mat<'_>, beta: f32, c: MatMut<'_>) {
    let (m, k, n, ld) = (c.rows, a.cols, c.cols, c.ld);
    assert!(a.rows == m && a.span() <= a.data.len() && (m - 1) * ld + n <= c.data.len(), "gemm block out of range");
    // SAFETY: the asserts above and in `gemm` check that every index the product touches lies
    // inside the three slices, and `c` is borrowed mutably so it cannot alias `a` or `b`.
    // The crate computes dst = alpha * dst + beta * lhs * rhs: its names are swapped against
    // BLAS, and with `read_dst == false` the old contents of dst are not read.
    IN_LIBRARY.with(|f| f.set(true));
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.data.as_mut_ptr(),
            1,
            ld as isize,
            beta != 0.0,
            a.data.as_ptr(),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr(),
            b.cs as isize,
            b.rs as isize,
            beta,
            alpha,
            false,
            false,
            false,
            gemm::Parallelism::None,
        );
    }
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

    #[test]
    fn threaded_result_is_bitwise_the_single_thread_result() {
        // Row blocks of C must see the same reduction order over k, including when k spans
        // several cache blocks of the kernel.
        let pool = rayon::ThreadPoolBuilder::new().num_threads(3).build().expect("pool");
        for (m, k, n) in [(130, 97, 111), (67, 1500, 40), (512, 300, 9)] {
            let mut r = mase_ir::Rng::new(3);
            let a: Vec<f32> = (0..m * k).map(|_| r.uniform() - 0.5).collect();
            let b: Vec<f32> = (0..k * n).map(|_| r.uniform() - 0.5).collect();
            let mut c1 = vec![0.0; m * n];
            let mut c3 = vec![0.0; m * n];
            gemm(1.0, Mat::new(&a, m, k), Mat::new(&b, k, n), 0.0, MatMut::new(&mut c1, m, n), None);
            gemm(1.0, Mat::new(&a, m, k), Mat::new(&b, k, n), 0.0, MatMut::new(&mut c3, m, n), Some(&pool));
            assert_eq!(c1, c3, "{m}x{k}x{n}");
            let want = naive(&a, &b, m, k, n);
            let worst = c1.iter().zip(&want).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
            assert!(worst < 1e-3, "{m}x{k}x{n}: {worst}");
        }
    }
}
