//! The instruction set of the f32 GEMM micro-kernels, chosen per product at run time.
//!
//! The `gemm` crate has f32 micro-kernels for AVX2+FMA (8 lanes, 16x6 register tiles) and, with
//! its `x86-v4` feature, for AVX-512 (16 lanes, 64x6 tiles); its own entry point takes the widest
//! the CPU has for every product. This module calls the crate's generic driver
//! (`gemm_common::gemm::gemm_basic_generic`) with either kernel set, so that [`crate::gemm`] can
//! pick one per product from its shape ([`GemmIsa::for_shape`]) after detecting at run time what
//! the CPU has. Both kernel sets sum over `k` in the same order within a kernel set for every
//! piece of a cut product (see `gemm.rs`), so the choice depends on the whole product's shape
//! only, never on the thread count.

/// A set of f32 GEMM micro-kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum GemmIsa {
    /// The `gemm` crate's own dispatch, which takes the widest kernels it finds (scalar code off
    /// x86): the choice where the CPU has neither of the others.
    Portable,
    /// 256-bit AVX2 with fused multiply-add.
    Avx2,
    /// 512-bit AVX-512F.
    Avx512,
}

impl GemmIsa {
    /// Every kernel set, narrowest first.
    pub const ALL: [GemmIsa; 3] = [GemmIsa::Portable, GemmIsa::Avx2, GemmIsa::Avx512];

    /// Whether this CPU runs the kernel set (detected once, at run time).
    pub fn available(self) -> bool {
        match self {
            GemmIsa::Portable => true,
            GemmIsa::Avx2 => detected().avx2,
            GemmIsa::Avx512 => detected().avx512,
        }
    }

    /// The widest kernel set this CPU runs.
    pub fn widest() -> GemmIsa {
        GemmIsa::ALL.into_iter().rev().find(|isa| isa.available()).unwrap_or(GemmIsa::Portable)
    }

    /// The kernel set of an `m x k x n` product (`C [m, n] = A [m, k] B [k, n]`) on this CPU:
    /// AVX-512 where `C`'s rows have at least [`AVX512_MIN_COLS`] columns, AVX2 below (or where
    /// the CPU lacks AVX-512), `Portable` where it has neither. The class depends on `n` alone,
    /// so that a product and its row blocks (the batch slices of `infer.rs`, the row cuts of
    /// `gemm.rs`) take the same kernels.
    ///
    /// Measured with `examples/gemm_isa.rs` of `mase-bench` on one thread of a 2-core Xeon with
    /// AVX-512 (bench/README.md, "Vector width"): AVX-512 ran 1.3-3.4x faster (most 1.7-2.5x) on
    /// the products of vgg7 (im2col and Winograd), tfc and jsc-three-layer, 1.0-1.4x on those
    /// with `n` from 16 to 24, and 0.16-1.04x as fast with `n <= 12` (jsc-toy's and jsc-tiny's 8-
    /// and 5-wide layers, the 10- and 5-way classifiers), where most of each 16-lane register is
    /// padding.
    pub fn for_shape(m: usize, k: usize, n: usize) -> GemmIsa {
        let _ = (m, k);
        if n >= AVX512_MIN_COLS && GemmIsa::Avx512.available() {
            GemmIsa::Avx512
        } else if GemmIsa::Avx2.available() {
            GemmIsa::Avx2
        } else {
            GemmIsa::Portable
        }
    }

    /// The name used in benchmark output (`portable`, `avx2`, `avx512`).
    pub fn name(self) -> &'static str {
        match self {
            GemmIsa::Portable => "portable",
            GemmIsa::Avx2 => "avx2",
            GemmIsa::Avx512 => "avx512",
        }
    }
}

/// The fewest columns of `C` for which [`GemmIsa::for_shape`] takes AVX-512: one 16-lane register.
pub const AVX512_MIN_COLS: usize = 16;

/// What the CPU runs, detected once.
#[derive(Clone, Copy, Debug)]
struct Detected {
    avx2: bool,
    avx512: bool,
}

fn detected() -> Detected {
    static DETECTED: std::sync::OnceLock<Detected> = std::sync::OnceLock::new();
    *DETECTED.get_or_init(|| {
        #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
        {
            use gemm_common::simd::{V3, V4};
            Detected { avx2: V3::try_new().is_some(), avx512: V4::try_new().is_some() }
        }
        #[cfg(not(any(target_arch = "x86", target_arch = "x86_64")))]
        {
            Detected { avx2: false, avx512: false }
        }
    })
}

/// The operands of one product in the `gemm` crate's convention: `dst = alpha * dst + beta *
/// lhs * rhs` (the crate's names are swapped against BLAS), with element `(i, j)` of each at
/// `ptr + i * rs + j * cs`. Every stride is non-negative.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Operands {
    pub m: usize,
    pub n: usize,
    pub k: usize,
    pub dst: *mut f32,
    pub dst_cs: isize,
    pub dst_rs: isize,
    /// Whether `dst` is read (`alpha * dst` added); when false its old contents are ignored.
    pub read_dst: bool,
    pub lhs: *const f32,
    pub lhs_cs: isize,
    pub lhs_rs: isize,
    pub rhs: *const f32,
    pub rhs_cs: isize,
    pub rhs_rs: isize,
    pub alpha: f32,
    pub beta: f32,
}

/// Runs one product with the kernel set `isa`, on the calling thread. A set the CPU lacks falls
/// back to the next narrower one.
///
/// # Safety
/// Every element the operands address must lie in memory valid for the access (reads of `lhs`
/// and `rhs`, reads and writes of `dst`), and nothing else may access `dst`'s elements during the
/// call.
pub(crate) unsafe fn sgemm(isa: GemmIsa, o: Operands) {
    debug_assert!(o.dst_cs >= 0 && o.dst_rs >= 0 && o.lhs_cs >= 0 && o.lhs_rs >= 0 && o.rhs_cs >= 0 && o.rhs_rs >= 0);
    #[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
    {
        use gemm_common::simd::{V3, V4};
        // The crate's entry point transposes the product when the destination is column-major-ish,
        // as its micro-kernels prefer column-major tiles; the same here, so that each kernel set
        // runs exactly as the crate's own dispatch would run it.
        let o = if o.dst_cs < o.dst_rs { transposed(o) } else { o };
        if isa == GemmIsa::Avx512 {
            if let Some(simd) = V4::try_new() {
                // SAFETY: forwarded from the caller.
                return unsafe { x86::avx512(simd, o) };
            }
        }
        if isa != GemmIsa::Portable {
            if let Some(simd) = V3::try_new() {
                // SAFETY: forwarded from the caller.
                return unsafe { x86::avx2(simd, o) };
            }
        }
    }
    // SAFETY: forwarded from the caller.
    unsafe { portable(o) }
}

/// The same product with the operands swapped: `dst^T = rhs^T lhs^T`.
#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
fn transposed(o: Operands) -> Operands {
    Operands {
        m: o.n,
        n: o.m,
        dst_cs: o.dst_rs,
        dst_rs: o.dst_cs,
        lhs: o.rhs,
        lhs_cs: o.rhs_rs,
        lhs_rs: o.rhs_cs,
        rhs: o.lhs,
        rhs_cs: o.lhs_rs,
        rhs_rs: o.lhs_cs,
        ..o
    }
}

/// The `gemm` crate's own entry point.
///
/// # Safety
/// As [`sgemm`].
unsafe fn portable(o: Operands) {
    // SAFETY: forwarded from the caller.
    unsafe {
        gemm::gemm(
            o.m,
            o.n,
            o.k,
            o.dst,
            o.dst_cs,
            o.dst_rs,
            o.read_dst,
            o.lhs,
            o.lhs_cs,
            o.lhs_rs,
            o.rhs,
            o.rhs_cs,
            o.rhs_rs,
            o.alpha,
            o.beta,
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    }
}

#[cfg(any(target_arch = "x86", target_arch = "x86_64"))]
mod x86 {
    use super::Operands;
    use gemm_common::gemm::gemm_basic_generic;
    use gemm_common::simd::{V3, V4};
    use gemm_f32::microkernel::{avx512f, fma};

    /// f32 lanes of a 256-bit register.
    const LANES_256: usize = 8;
    /// f32 lanes of a 512-bit register.
    const LANES_512: usize = 16;

    /// The product with the crate's AVX2+FMA kernels.
    ///
    /// # Safety
    /// As [`super::sgemm`].
    pub(super) unsafe fn avx2(simd: V3, o: Operands) {
        use fma::f32::{H_M, H_N, H_UKR, MR_DIV_N, NR, UKR};
        // SAFETY: forwarded from the caller; `simd` proves the CPU has the features.
        unsafe {
            gemm_basic_generic::<_, f32, LANES_256, { MR_DIV_N * LANES_256 }, NR, MR_DIV_N, H_M, H_N>(
                simd,
                o.m,
                o.n,
                o.k,
                o.dst,
                o.dst_cs,
                o.dst_rs,
                o.read_dst,
                o.lhs,
                o.lhs_cs,
                o.lhs_rs,
                o.rhs,
                o.rhs_cs,
                o.rhs_rs,
                o.alpha,
                o.beta,
                false,
                false,
                false,
                |a, b, c| a * b + c,
                &UKR,
                &H_UKR,
                false,
                gemm_common::Parallelism::None,
            )
        }
    }

    /// The product with the crate's AVX-512F kernels.
    ///
    /// # Safety
    /// As [`super::sgemm`].
    pub(super) unsafe fn avx512(simd: V4, o: Operands) {
        use avx512f::f32::{H_M, H_N, H_UKR, MR_DIV_N, NR, UKR};
        // SAFETY: forwarded from the caller; `simd` proves the CPU has the features.
        unsafe {
            gemm_basic_generic::<_, f32, LANES_512, { MR_DIV_N * LANES_512 }, NR, MR_DIV_N, H_M, H_N>(
                simd,
                o.m,
                o.n,
                o.k,
                o.dst,
                o.dst_cs,
                o.dst_rs,
                o.read_dst,
                o.lhs,
                o.lhs_cs,
                o.lhs_rs,
                o.rhs,
                o.rhs_cs,
                o.rhs_rs,
                o.alpha,
                o.beta,
                false,
                false,
                false,
                |a, b, c| a * b + c,
                &UKR,
                &H_UKR,
                false,
                gemm_common::Parallelism::None,
            )
        }
    }
}
