//! f32 matrix-vector products (`M == 1` or `N == 1` dot_generals, and small `M` against a
//! small rhs: one product per row, see [`SMALL_M`]), written for memory bandwidth: the matrix
//! is read once (once per lhs row in the small-`M` case, from L2), in long sequential runs.
//!
//! Two forms, by which stride of the matrix is 1:
//! - [`Gemv::Axpy`] (`y[j] = Σ_k v[k] · W[k, j]`, rows of `W` contiguous over `j`, e.g.
//!   `x[1,K] @ W[K,N]`): `y` is accumulated over blocks of 8 rows at a time, so the kernel
//!   streams 8 consecutive rows of `W` and reads/writes the `y` block (in L1) once per 8 rows.
//! - [`Gemv::Dot`] (`y[j] = Σ_k W[j, k] · v[k]`, rows contiguous over `k`, e.g.
//!   `A[M,K] @ v[K]` or `x @ Wᵀ`): 4 rows at a time against one read of `v`.
//!
//! The one-row kernels use no software prefetch (the multi-row kernels below, for short
//! matrices, do): the 8 row streams are sequential, which the hardware prefetchers follow.
//! Measured alternatives (1x4096x4096, interleaved A/B runs on this machine): prefetching
//! every line 16 rows ahead was no faster (slower under memory contention), 4- or 16-row blocks
//! were level with 8, and the column-block form (8 zmm accumulators over 128 columns, all `K`
//! rows, prefetching 8 rows ahead) was about 1.8x slower, since each row read is only 512 bytes
//! at a large stride.
//!
//! Huge pages matter as much as the kernel: with 4 KiB pages the same loop ran 1.2-2x slower on
//! 64 MiB of weights; buffers the executor allocates are advised onto huge pages
//! ([`super::simd::advise_huge_pages`]), and callers should allocate large weights likewise.
//!
//! Several lhs rows against one small matrix per batch (grouped-query decode attention: the
//! query heads of a KV group against its keys, then against its values) run together:
//! [`avx512::dot_multi`] / [`avx512::axpy_multi`] load each matrix row once for up to four lhs
//! rows (the one-row kernels read it once per row, from L1 after the first), keep their
//! accumulators in registers across all of `k`, and reduce the dots four at a time — with each
//! element's FMAs in the one-row kernels' order, so the same bits. SmolLM2 exact decode, 1
//! thread, two interleaved rounds: 440-token prompt + 64, 194–201 → 214–215 tok/s; 34-token
//! prompt + 128, 252–255 → 256–264.
//!
//! The rhs matrix may be f16 ([`MatElem`]): its elements are widened in registers as they are
//! read (exact), so an f16 KV cache's keys and values are read at half the bytes of f32 and
//! never copied to f32 first.
//!
//! Columns (Axpy) or rows (Dot) are split across rayon threads when the matrix is large. The
//! AVX-512 versions are chosen at run time (cached detection); portable loops cover the rest.
//! Accumulation is in f32 (the reference accumulates in f64): results agree to f32 rounding of
//! a `K`-term sum.

use super::dot::DotPlan;
use super::simd::{has_avx512, threads};
use super::spin::{self, SyncPtr};
use rayon::prelude::*;
use rlx_ir::half::f16;
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::{__m512, __mmask16};

/// Element types the GEMV reads its matrix in: f32, and f16 widened as it is read.
pub trait MatElem: Copy + Send + Sync + 'static {
    /// The element as f32 (exact for both types).
    fn to_f32(self) -> f32;
    /// `s` itself when the elements are f32 (a vector operand must be f32).
    fn as_f32(s: &[Self]) -> Option<&[f32]>;
    /// `s` itself when the elements are f16.
    fn as_f16(s: &[Self]) -> Option<&[f16]>;
    /// The 16 elements at `p`, widened to f32.
    ///
    /// # Safety
    /// AVX-512F/BW/VL are available and 16 elements at `p` are readable.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load16(p: *const Self) -> __m512;
    /// The elements of `p` in the lanes set in `m` (0 in the others), widened to f32.
    ///
    /// # Safety
    /// AVX-512F/BW/VL are available and the lanes of `m` at `p` are readable.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load16_masked(m: __mmask16, p: *const Self) -> __m512;
    /// The 8 elements at `p`, widened to f32.
    ///
    /// # Safety
    /// AVX2 and F16C are available and 8 elements at `p` are readable.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load8(p: *const Self) -> std::arch::x86_64::__m256;
}

impl MatElem for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    fn as_f32(s: &[f32]) -> Option<&[f32]> {
        Some(s)
    }
    fn as_f16(_: &[f32]) -> Option<&[f16]> {
        None
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16(p: *const f32) -> __m512 {
        // SAFETY: the caller's contract.
        unsafe { std::arch::x86_64::_mm512_loadu_ps(p) }
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16_masked(m: __mmask16, p: *const f32) -> __m512 {
        // SAFETY: the caller's contract.
        unsafe { std::arch::x86_64::_mm512_maskz_loadu_ps(m, p) }
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const f32) -> std::arch::x86_64::__m256 {
        // SAFETY: the caller's contract.
        unsafe { std::arch::x86_64::_mm256_loadu_ps(p) }
    }
}

impl MatElem for f16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn as_f32(_: &[f16]) -> Option<&[f32]> {
        None
    }
    fn as_f16(s: &[f16]) -> Option<&[f16]> {
        Some(s)
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16(p: *const f16) -> __m512 {
        use std::arch::x86_64::*;
        // SAFETY: the caller's contract (32 bytes at `p`).
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p.cast())) }
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16_masked(m: __mmask16, p: *const f16) -> __m512 {
        use std::arch::x86_64::*;
        // SAFETY: the caller's contract (masked lanes are not read).
        unsafe { _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p.cast())) }
    }
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load8(p: *const f16) -> std::arch::x86_64::__m256 {
        use std::arch::x86_64::*;
        // SAFETY: the caller's contract (16 bytes at `p`).
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
    }
}

/// Matrix elements (`K · N`) below which the product runs on one thread.
const PAR_ELEMS: usize = 1 << 18;
/// Most lhs rows a batched product runs as one GEMV per row against a rhs matrix of at most
/// [`SMALL_RHS`] elements per batch (which then stays in L2 across the rows; single products
/// run on `sgemm`, which reads the rhs once for all rows): grouped-query decode
/// attention (SmolLM2: 3 query heads per KV head, 256 cached keys, head dim 64) took 43 µs per
/// layer for `q·Kᵀ` in the batched `gemm` (its packing and dispatch per 3-row product) and 23 µs
/// this way, now limited by reading the cache rows from L3.
const SMALL_M: usize = 8;
/// See [`SMALL_M`] (512 KiB of f32).
const SMALL_RHS: usize = 1 << 17;
/// Multiply-adds over all the GEMVs of one batched product from which they run in parallel
/// (a task hand-off on the team costs about a microsecond; 32K multiply-adds about 4).
const PAR_BATCH: usize = 1 << 15;
/// Matrix rows per task when several lhs rows share one matrix (16 KiB of a 64-wide f32 key
/// matrix: stays in L1 while every lhs row passes over it).
const DOT_COLS: usize = 64;

/// A matrix-vector form of a planned dot (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gemv {
    /// `y[j] = Σ_k v[k·vs] · W[k·ws + j]`.
    Axpy {
        /// The matrix is the lhs (`N == 1`) rather than the rhs (`M == 1`).
        mat_is_lhs: bool,
        /// Matrix stride between rows (`k`).
        ws: usize,
        /// Vector stride.
        vs: usize,
    },
    /// `y[j] = Σ_k W[j·ws + k] · v[k]`.
    Dot {
        /// The matrix is the lhs (`N == 1`) rather than the rhs (`M == 1`).
        mat_is_lhs: bool,
        /// Matrix stride between rows (`j`).
        ws: usize,
    },
}

/// The GEMV form of `p`, if it is a matrix-vector product with a unit-stride matrix dim.
pub fn plan(p: &DotPlan) -> Option<Gemv> {
    if p.n == 1 {
        if p.lhs_ks == 1 && p.rhs_ks == 1 {
            return Some(Gemv::Dot { mat_is_lhs: true, ws: p.lhs_ms });
        }
        if p.lhs_ms == 1 && p.m > 1 {
            return Some(Gemv::Axpy { mat_is_lhs: true, ws: p.lhs_ks, vs: p.rhs_ks });
        }
    }
    if p.m == 1 || (p.batch > 1 && p.m <= SMALL_M && p.k * p.n <= SMALL_RHS) {
        if p.rhs_ns == 1 {
            return Some(Gemv::Axpy { mat_is_lhs: false, ws: p.rhs_ks, vs: p.lhs_ks });
        }
        if p.rhs_ks == 1 && p.lhs_ks == 1 {
            return Some(Gemv::Dot { mat_is_lhs: false, ws: p.rhs_ns });
        }
    }
    None
}

/// Run every batch of `p` as a GEMV into `c` (`[B, M, N]`, so each batch's `y` is contiguous).
///
/// Many small GEMVs (batched decode attention: `q·Kᵀ` and `p·V` per head, each tens of
/// microseconds) run in parallel over (batch, row) on the executor's team when they total at
/// least [`PAR_BATCH`] multiply-adds; one large GEMV splits its own rows or columns instead.
/// SmolLM2-135M decode on 2 threads: these products ran on the calling thread while the other
/// waited, 7% of the step's samples. Several lhs rows against one matrix split the matrix rows
/// instead (see the body): `q·Kᵀ` 389 → 330 µs per SmolLM2 token at 2 threads (interleaved,
/// `rlx generate --profile`).
///
/// The rhs `b` may be f16 only where it is the matrix (`mat_is_lhs == false`); an f16 vector
/// panics (the caller widens it first).
pub fn run<M: MatElem>(g: &Gemv, p: &DotPlan, a: &[f32], b: &[M], c: &mut [f32]) {
    let k = p.k;
    assert_eq!(c.len(), p.batch * p.m * p.n, "gemv result length");
    if c.is_empty() {
        return;
    }
    if k == 0 {
        c.fill(0.0);
        return;
    }
    // The matrix is the rhs: one GEMV per lhs row (`M ≤ SMALL_M`), row `i` of a batch's result
    // against lhs row `i`; else one GEMV per batch.
    let per = match *g {
        Gemv::Axpy { mat_is_lhs: false, .. } | Gemv::Dot { mat_is_lhs: false, .. } => p.m,
        _ => 1,
    };
    let len = p.m * p.n / per;
    let gemv = |t: usize, y: &mut [f32]| {
        let (bi, i) = (t / per, t % per);
        let (lo, ro) = p.batch_offs[bi];
        let (a, b) = (&a[lo..], &b[ro..]);
        let vector = || M::as_f32(b).expect("gemv: the vector operand must be f32");
        match *g {
            Gemv::Axpy { mat_is_lhs: true, ws, vs } => axpy_par(a, ws, vector(), vs, k, y),
            Gemv::Dot { mat_is_lhs: true, ws } => dot_par(a, ws, &vector()[..k], k, y),
            Gemv::Axpy { mat_is_lhs: false, ws, vs } => axpy_par(b, ws, &a[i * p.lhs_ms..], vs, k, y),
            Gemv::Dot { mat_is_lhs: false, ws } => dot_par(b, ws, &a[i * p.lhs_ms..][..k], k, y),
        }
    };
    let tasks = p.batch * per;
    // Several lhs rows against one matrix per batch (decode attention's `q·Kᵀ`: the query heads
    // of a KV group against its keys): tasks of (batch, [`DOT_COLS`] matrix rows), each doing
    // every lhs row, so a key row is read from memory once and from L1 for the other query
    // rows. Per-(batch, row) tasks read each key matrix once per query row, on both threads at
    // the same time.
    if let Gemv::Dot { mat_is_lhs: false, ws } = *g
        && per > 1
        && p.n * k < PAR_ELEMS
        && tasks * len * k >= PAR_BATCH
        && threads() > 1
    {
        // Every batch's matrix (rows `0..n` from its offset) lies inside `b`.
        let last = p.batch_offs.iter().map(|o| o.1).max().unwrap_or(0);
        assert!(last + (p.n - 1) * ws + k <= b.len(), "gemv operand too short");
        let nc = p.n.div_ceil(DOT_COLS);
        let y = SyncPtr(c.as_mut_ptr());
        spin::for_each(p.batch * nc, |t| {
            let (bi, ci) = (t / nc, t % nc);
            let (j0, j1) = (ci * DOT_COLS, ((ci + 1) * DOT_COLS).min(p.n));
            let (lo, ro) = p.batch_offs[bi];
            #[cfg(target_arch = "x86_64")]
            if has_avx512() {
                assert!(lo + (p.m - 1) * p.lhs_ms + k <= a.len(), "gemv operand too short");
                // SAFETY: AVX-512F present; the matrix rows `j0..j1` lie inside `b` and the
                // lhs rows inside `a` (asserted); task `t` alone writes columns `j0..j1` of the
                // batch's rows, inside `c` (`[B, M, N]`).
                return unsafe {
                    let w = b.as_ptr().add(ro + j0 * ws);
                    let yb = y.slice(bi * p.m * p.n, p.m * p.n).as_mut_ptr().add(j0);
                    avx512::dot_multi(w, ws, j1 - j0, a.as_ptr().add(lo), p.lhs_ms, p.m, k, yb, p.n)
                };
            }
            for i in 0..p.m {
                // SAFETY: as above.
                let yi = unsafe { y.slice((bi * p.m + i) * p.n + j0, j1 - j0) };
                dot_rows(&b[ro + j0 * ws..], ws, &a[lo + i * p.lhs_ms..][..k], yi);
            }
        });
        return;
    }
    // Several lhs rows against each batch's small matrix: one task per batch, all its rows at
    // once (`dot_multi` / `axpy_multi` load each matrix row once for all of them).
    #[cfg(target_arch = "x86_64")]
    if per > 1 && p.n * k < PAR_ELEMS && has_avx512() {
        let (m, n) = (p.m, p.n);
        let multi = |bi: usize, yb: &mut [f32]| {
            let (lo, ro) = p.batch_offs[bi];
            let (ap, bp, yp) = (a[lo..].as_ptr(), b[ro..].as_ptr(), yb.as_mut_ptr());
            match *g {
                Gemv::Dot { ws, .. } => {
                    assert!(
                        ro + (n - 1) * ws + k <= b.len() && lo + (m - 1) * p.lhs_ms + k <= a.len(),
                        "gemv operand too short"
                    );
                    // SAFETY: AVX-512F present; operands inside `a` / `b` (asserted), `yb`
                    // the batch's `m × n` results.
                    unsafe { avx512::dot_multi(bp, ws, n, ap, p.lhs_ms, m, k, yp, n) }
                }
                Gemv::Axpy { ws, vs, .. } => {
                    assert!(
                        ro + (k - 1) * ws + n <= b.len() && lo + (m - 1) * p.lhs_ms + (k - 1) * vs < a.len(),
                        "gemv operand too short"
                    );
                    // SAFETY: as above.
                    unsafe { avx512::axpy_multi(bp, ws, n, ap, p.lhs_ms, vs, m, k, yp, n) }
                }
            }
        };
        if p.batch > 1 && p.batch * m * n * k >= PAR_BATCH && threads() > 1 {
            spin::for_chunks_mut(c, m * n, multi);
        } else {
            c.chunks_mut(m * n).enumerate().for_each(|(bi, yb)| multi(bi, yb));
        }
        return;
    }
    if tasks > 1 && len * k < PAR_ELEMS && tasks * len * k >= PAR_BATCH && threads() > 1 {
        spin::for_chunks_mut(c, len, gemv);
    } else {
        c.chunks_mut(len).enumerate().for_each(|(t, y)| gemv(t, y));
    }
}

/// `y[i·ys + j] = Σ_k w[j·ws + k] · v[i·vst + k]` for `i < m`, `j < n`, `k < kk`: `m` vectors
/// against the `n` matrix rows, each row read once for all of them (on AVX-512
/// `avx512::dot_multi`; every element the same bits as the one-vector [`dot_rows`]), on the
/// calling thread. For kernels that walk their own (batch, head) tasks (`attention_with_kvcache`).
///
/// Panics when an operand is shorter than the strides say.
#[allow(clippy::too_many_arguments)]
pub(crate) fn dot_many<M: MatElem>(
    w: &[M],
    ws: usize,
    n: usize,
    v: &[f32],
    vst: usize,
    m: usize,
    kk: usize,
    y: &mut [f32],
    ys: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!(
        (n - 1) * ws + kk <= w.len() && (m - 1) * vst + kk <= v.len() && (m - 1) * ys + n <= y.len(),
        "dot_many operand too short"
    );
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        // SAFETY: AVX-512F present; the operands hold what the strides address (asserted);
        // `y` is a distinct slice.
        return unsafe { avx512::dot_multi(w.as_ptr(), ws, n, v.as_ptr(), vst, m, kk, y.as_mut_ptr(), ys) };
    }
    for i in 0..m {
        dot_rows(w, ws, &v[i * vst..][..kk], &mut y[i * ys..][..n]);
    }
}

/// `y[i·ys + j] = Σ_k v[i·vst + k·vs] · w[k·ws + j]` for `i < m`, `j < n`, `k < kk` (`y` is
/// overwritten; zeros when `kk == 0`): `m` vectors against one matrix, each row read once for
/// all of them (`avx512::axpy_multi` on AVX-512, the same bits as [`axpy`] per vector), on the
/// calling thread.
///
/// Panics when an operand is shorter than the strides say.
#[allow(clippy::too_many_arguments)]
pub(crate) fn axpy_many<M: MatElem>(
    w: &[M],
    ws: usize,
    n: usize,
    v: &[f32],
    vst: usize,
    vs: usize,
    m: usize,
    kk: usize,
    y: &mut [f32],
    ys: usize,
) {
    if m == 0 || n == 0 {
        return;
    }
    assert!((m - 1) * ys + n <= y.len(), "axpy_many result too short");
    if kk == 0 {
        (0..m).for_each(|i| y[i * ys..][..n].fill(0.0));
        return;
    }
    assert!((kk - 1) * ws + n <= w.len() && (m - 1) * vst + (kk - 1) * vs < v.len(), "axpy_many operand too short");
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        // SAFETY: AVX-512F present; the operands hold what the strides address (asserted);
        // `y` is a distinct slice.
        return unsafe { avx512::axpy_multi(w.as_ptr(), ws, n, v.as_ptr(), vst, vs, m, kk, y.as_mut_ptr(), ys) };
    }
    for i in 0..m {
        axpy(w, ws, &v[i * vst..], vs, kk, &mut y[i * ys..][..n]);
    }
}

/// Split `y`'s columns across threads for large matrices.
fn axpy_par<M: MatElem>(w: &[M], ws: usize, v: &[f32], vs: usize, k: usize, y: &mut [f32]) {
    let n = y.len();
    // Bounds for the unchecked kernels: the last row's last column must be in `w`.
    assert!((k - 1) * ws + n <= w.len() && (k - 1) * vs < v.len(), "gemv operand too short");
    let t = threads();
    if t > 1 && k * n >= PAR_ELEMS && n >= 128 {
        let chunk = n.div_ceil(t).next_multiple_of(64);
        y.par_chunks_mut(chunk).enumerate().for_each(|(i, yc)| axpy(&w[i * chunk..], ws, v, vs, k, yc));
    } else {
        axpy(w, ws, v, vs, k, y);
    }
}

/// Split `y`'s rows across threads for large matrices.
fn dot_par<M: MatElem>(w: &[M], ws: usize, v: &[f32], k: usize, y: &mut [f32]) {
    let rows = y.len();
    assert!((rows - 1) * ws + k <= w.len() && v.len() == k, "gemv operand too short");
    let t = threads();
    if t > 1 && k * rows >= PAR_ELEMS && rows >= 8 {
        let chunk = rows.div_ceil(t * 4).max(4);
        y.par_chunks_mut(chunk).enumerate().for_each(|(i, yc)| dot_rows(&w[i * chunk * ws..], ws, v, yc));
    } else {
        dot_rows(w, ws, v, y);
    }
}

fn axpy<M: MatElem>(w: &[M], ws: usize, v: &[f32], vs: usize, k: usize, y: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        // SAFETY: AVX-512F present; bounds asserted by the caller ((k-1)*ws + y.len() <= w.len()).
        return unsafe { avx512::axpy(w.as_ptr(), ws, v, vs, k, y) };
    }
    #[cfg(target_arch = "x86_64")]
    if super::simd::has_avx2() {
        // SAFETY: AVX2, FMA and F16C present; bounds asserted by the caller.
        return unsafe { avx2::axpy(w.as_ptr(), ws, v, vs, k, y) };
    }
    y.fill(0.0);
    for kk in 0..k {
        let x = v[kk * vs];
        let row = &w[kk * ws..kk * ws + y.len()];
        y.iter_mut().zip(row).for_each(|(y, &a)| *y += x * a.to_f32());
    }
}

fn dot_rows<M: MatElem>(w: &[M], ws: usize, v: &[f32], y: &mut [f32]) {
    let k = v.len();
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        // SAFETY: AVX-512F present; bounds asserted by the caller.
        return unsafe { avx512::dot_rows(w.as_ptr(), ws, v, y) };
    }
    #[cfg(target_arch = "x86_64")]
    if super::simd::has_avx2() {
        // SAFETY: AVX2, FMA and F16C present; bounds asserted by the caller.
        return unsafe { avx2::dot_rows(w.as_ptr(), ws, v, y) };
    }
    for (j, yj) in y.iter_mut().enumerate() {
        let row = &w[j * ws..j * ws + k];
        let mut acc = [0f32; 16];
        let (rc, vc) = (row.chunks_exact(16), v.chunks_exact(16));
        let tail: f32 = rc.remainder().iter().zip(vc.remainder()).map(|(a, b)| a.to_f32() * b).sum();
        for (r, x) in rc.zip(vc) {
            for l in 0..16 {
                acc[l] += r[l].to_f32() * x[l];
            }
        }
        *yj = acc.iter().sum::<f32>() + tail;
    }
}

/// [`axpy`] and [`dot_rows`] on CPUs with AVX2, FMA and F16C but no AVX-512: 8-lane FMA chains
/// (f16 matrices widened by `vcvtph2ps`). Grouped-query decode attention's `q·Kᵀ` and `p·V`
/// (`attention_with_kvcache`) on an AMD Zen 3 core, SmolLM2 exact decode over 127 steps: the
/// portable loops compiled for AVX2 took 164–174 ms.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use super::MatElem;
    use std::arch::x86_64::*;

    /// `y = Σ_k v[k·vs] · w[k·ws .. k·ws + y.len()]`: blocks of up to 64 columns held in
    /// registers over every `k`, one FMA chain per column from `k = 0`.
    ///
    /// # Safety
    /// AVX2, FMA and F16C must be available; `w` must hold `(k-1)·ws + y.len()` elements and
    /// `v` `(k-1)·vs + 1`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn axpy<M: MatElem>(w: *const M, ws: usize, v: &[f32], vs: usize, k: usize, y: &mut [f32]) {
        let n = y.len();
        let mut j = 0;
        // SAFETY: columns `j .. j + 8 c` of rows `kk < k` (caller), `v[kk·vs]` for `kk < k`.
        unsafe {
            while j + 64 <= n {
                cols::<M, 8>(w.add(j), ws, v, vs, k, y.as_mut_ptr().add(j));
                j += 64;
            }
            while j + 8 <= n {
                cols::<M, 1>(w.add(j), ws, v, vs, k, y.as_mut_ptr().add(j));
                j += 8;
            }
        }
        for (c, yc) in y.iter_mut().enumerate().skip(j) {
            // SAFETY: column `c < n` of rows `kk < k`.
            *yc = (0..k).fold(0f32, |a, kk| unsafe { v[kk * vs].mul_add((*w.add(kk * ws + c)).to_f32(), a) });
        }
    }

    /// [`axpy`] of `8 C` columns from `w` into `y`.
    ///
    /// # Safety
    /// As [`axpy`], for `8 C` columns at `w` and `y`.
    #[target_feature(enable = "avx2,fma,f16c")]
    #[inline]
    unsafe fn cols<M: MatElem, const C: usize>(w: *const M, ws: usize, v: &[f32], vs: usize, k: usize, y: *mut f32) {
        let mut acc = [_mm256_setzero_ps(); C];
        for kk in 0..k {
            let x = _mm256_set1_ps(v[kk * vs]);
            for (c, a) in acc.iter_mut().enumerate() {
                // SAFETY: row `kk`, columns `8 c ..` (caller).
                *a = _mm256_fmadd_ps(x, unsafe { M::load8(w.add(kk * ws + 8 * c)) }, *a);
            }
        }
        for (c, a) in acc.iter().enumerate() {
            // SAFETY: `8 C` floats at `y` (caller).
            unsafe { _mm256_storeu_ps(y.add(8 * c), *a) };
        }
    }

    /// `y[j] = Σ_k w[j·ws + k] · v[k]`: four rows at a time, each an 8-lane FMA chain over `k`,
    /// summed across lanes, plus the last `k % 8` products in order.
    ///
    /// # Safety
    /// AVX2, FMA and F16C must be available; `w` must hold `(y.len()-1)·ws + v.len()` elements.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot_rows<M: MatElem>(w: *const M, ws: usize, v: &[f32], y: &mut [f32]) {
        let k = v.len();
        let full = k / 8 * 8;
        let n = y.len();
        let vp = v.as_ptr();
        let tail = |row: *const M| {
            // SAFETY: elements `full .. k` of the row (caller).
            (full..k).fold(0f32, |a, kk| unsafe { v[kk].mul_add((*row.add(kk)).to_f32(), a) })
        };
        let mut j = 0;
        // SAFETY: rows `j < n` hold `k` elements from `w + j·ws` (caller).
        unsafe {
            while j + 4 <= n {
                let r: [*const M; 4] = std::array::from_fn(|t| w.add((j + t) * ws));
                let mut acc = [_mm256_setzero_ps(); 4];
                let mut kk = 0;
                while kk < full {
                    let x = _mm256_loadu_ps(vp.add(kk));
                    for t in 0..4 {
                        acc[t] = _mm256_fmadd_ps(M::load8(r[t].add(kk)), x, acc[t]);
                    }
                    kk += 8;
                }
                // Lane sums of the four rows at once: [r0, r1, r2, r3].
                let h01 = _mm256_hadd_ps(acc[0], acc[1]);
                let h23 = _mm256_hadd_ps(acc[2], acc[3]);
                let h = _mm256_hadd_ps(h01, h23);
                let s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
                let mut out = [0f32; 4];
                _mm_storeu_ps(out.as_mut_ptr(), s);
                for t in 0..4 {
                    y[j + t] = out[t] + tail(r[t]);
                }
                j += 4;
            }
            while j < n {
                let row = w.add(j * ws);
                let mut acc = _mm256_setzero_ps();
                let mut kk = 0;
                while kk < full {
                    acc = _mm256_fmadd_ps(M::load8(row.add(kk)), _mm256_loadu_ps(vp.add(kk)), acc);
                    kk += 8;
                }
                // The same lane sum as a group's row.
                let h = _mm256_hadd_ps(acc, acc);
                let h = _mm256_hadd_ps(h, h);
                let s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps::<1>(h));
                y[j] = _mm_cvtss_f32(s) + tail(row);
                j += 1;
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx512 {
    use super::MatElem;
    use crate::kernels::avx512::reduce_rows;
    use std::arch::x86_64::*;

    /// Rows streamed per pass over the `y` block.
    const KB: usize = 8;

    /// `y = Σ_k v[k·vs] · w[k·ws .. k·ws + y.len()]`.
    ///
    /// # Safety
    /// AVX-512F must be available; `w` must hold `(k-1)·ws + y.len()` elements and `v`
    /// `(k-1)·vs + 1`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub unsafe fn axpy<M: MatElem>(w: *const M, ws: usize, v: &[f32], vs: usize, k: usize, y: &mut [f32]) {
        let n = y.len();
        let yp = y.as_mut_ptr();
        let full = n / 16 * 16;
        let tail_mask: __mmask16 = ((1u32 << (n - full)) - 1) as __mmask16;
        y.fill(0.0);
        let mut kk = 0;
        unsafe {
            while kk + KB <= k {
                let xs: [__m512; KB] = std::array::from_fn(|r| _mm512_set1_ps(v[(kk + r) * vs]));
                let rows: [*const M; KB] = std::array::from_fn(|r| w.add((kk + r) * ws));
                let mut j = 0;
                while j < full {
                    let mut acc = _mm512_loadu_ps(yp.add(j));
                    for r in 0..KB {
                        acc = _mm512_fmadd_ps(xs[r], M::load16(rows[r].add(j)), acc);
                    }
                    _mm512_storeu_ps(yp.add(j), acc);
                    j += 16;
                }
                if full < n {
                    let mut acc = _mm512_maskz_loadu_ps(tail_mask, yp.add(full));
                    for r in 0..KB {
                        acc = _mm512_fmadd_ps(xs[r], M::load16_masked(tail_mask, rows[r].add(full)), acc);
                    }
                    _mm512_mask_storeu_ps(yp.add(full), tail_mask, acc);
                }
                kk += KB;
            }
            while kk < k {
                let x = _mm512_set1_ps(v[kk * vs]);
                let row = w.add(kk * ws);
                let mut j = 0;
                while j < full {
                    let acc = _mm512_fmadd_ps(x, M::load16(row.add(j)), _mm512_loadu_ps(yp.add(j)));
                    _mm512_storeu_ps(yp.add(j), acc);
                    j += 16;
                }
                if full < n {
                    let acc = _mm512_fmadd_ps(
                        x,
                        M::load16_masked(tail_mask, row.add(full)),
                        _mm512_maskz_loadu_ps(tail_mask, yp.add(full)),
                    );
                    _mm512_mask_storeu_ps(yp.add(full), tail_mask, acc);
                }
                kk += 1;
            }
        }
    }

    /// `f::<M, R>(args.., vy)` for each group of `R` = 4 (then the 1–3 left) of `m` rows,
    /// `vy[r]` = `at(i + r)` (a row's vector and result pointers) for the group from row `i`.
    macro_rules! row_groups {
        ($m:expr, $at:expr, $f:ident::<$t:ty>($($arg:expr),*)) => {{
            let at = $at;
            let mut i = 0;
            while i < $m {
                let vy = |r: usize| at(i + r);
                match $m - i {
                    1 => $f::<$t, 1>($($arg,)* std::array::from_fn(vy)),
                    2 => $f::<$t, 2>($($arg,)* std::array::from_fn(vy)),
                    3 => $f::<$t, 3>($($arg,)* std::array::from_fn(vy)),
                    _ => $f::<$t, 4>($($arg,)* std::array::from_fn(vy)),
                }
                i += 4;
            }
        }};
    }

    /// Matrix rows [`dot_multi`] and [`axpy_multi`] prefetch ahead of the row they read: a
    /// decode step's KV cache comes from DRAM (the weights streamed since evicted it) in short
    /// runs (a KV head's keys, `C · D · 4` bytes), too short for the hardware prefetchers to
    /// ramp up. SmolLM2 exact decode, 1 thread, 441-token prompt + 128, four interleaved
    /// rounds: 186 → 199 tok/s (medians); 34-token prompt level; 32 rows ahead level with 16.
    const AHEAD: usize = 16;

    /// Rows ahead that the L2 [`prefetch_rows`] reaches (16 KiB of an f32 cache at D = 64): L2
    /// prefetches queue in the L2's larger miss queue, so more of a long cache's DRAM reads are
    /// in flight than the L1 prefetches [`AHEAD`] rows on allow, and the L1 prefetch then finds
    /// its lines in L2 (as the quantized decode kernels' `prefetch_ahead`). SmolLM2 exact
    /// decode after a 1024-token prompt (f32 cache, 53 MB read per step), 1 thread, three
    /// interleaved rounds: `attention_kvcache_f32` 512–538 → 397–425 ms over 127 steps (593–621
    /// → 434–541 in a noisier hour; 128 rows ahead 452–598); with an f16 cache and after a
    /// 5-token prompt within the noise.
    const FAR: usize = 64;

    /// Prefetch the first `len` elements of `rows` matrix rows from `w`, `ws` apart, into the
    /// cache level `HINT` names (`_MM_HINT_T0`: L1, `_MM_HINT_T1`: L2; the addresses wrap: a
    /// prefetch never faults and reads nothing architecturally).
    #[inline(always)]
    fn prefetch_rows<M: MatElem, const HINT: i32>(w: *const M, ws: usize, rows: usize, len: usize) {
        for r in 0..rows {
            let f = w.wrapping_add(r * ws).cast::<i8>();
            for l in (0..len * std::mem::size_of::<M>()).step_by(64) {
                // SAFETY: see above.
                unsafe { _mm_prefetch::<HINT>(f.wrapping_add(l)) };
            }
        }
    }

    /// [`dot_rows`] for `m` vectors against one matrix: `y[i·ys + j] = Σ_k w[j·ws + k] ·
    /// v[i·vst + k]` for `i < m`, `j < n`, `k < kk` — up to four vectors against four matrix
    /// rows at a time, so each matrix row is loaded once for all of them and their sums reduce
    /// four at a time ([`reduce_rows`]). Per element the same FMA chain and the same final
    /// pairwise sum as [`dot_rows`]: the same bits.
    ///
    /// # Safety
    /// AVX-512F must be available; `w` holds `(n-1)·ws + kk` elements, `v` `(m-1)·vst + kk`,
    /// `y` `(m-1)·ys + n`, and `y` overlaps neither. Only the `m × n` results are written (the
    /// rest of `y`'s buffer may belong to other threads: `dequant_matmul`'s tile path).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn dot_multi<M: MatElem>(
        w: *const M,
        ws: usize,
        n: usize,
        v: *const f32,
        vst: usize,
        m: usize,
        kk: usize,
        y: *mut f32,
        ys: usize,
    ) {
        // SAFETY (every call): rows `i .. i + R` of `v` and `y` exist (`i + R <= m`).
        unsafe { row_groups!(m, |i| (v.add(i * vst), y.add(i * ys)), dot_block::<M>(w, ws, n, kk)) }
    }

    /// [`dot_multi`] of `R` vectors (`vy[i]`: vector `i` and its result row).
    ///
    /// # Safety
    /// As [`dot_multi`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    unsafe fn dot_block<M: MatElem, const R: usize>(
        w: *const M,
        ws: usize,
        n: usize,
        k: usize,
        vy: [(*const f32, *mut f32); R],
    ) {
        let full = k / 16 * 16;
        let tail_mask: __mmask16 = ((1u32 << (k - full)) - 1) as __mmask16;
        let mut j = 0;
        // SAFETY: matrix rows `j < n` hold `k` elements from `w + j·ws`, vector `i` `k` from
        // `vy[i].0`, result row `i` `n` from `vy[i].1` (caller); the tail under its mask.
        unsafe {
            while j + 4 <= n {
                let r: [*const M; 4] = std::array::from_fn(|t| w.add((j + t) * ws));
                prefetch_rows::<M, _MM_HINT_T0>(w.wrapping_add((j + AHEAD) * ws), ws, 4, k);
                prefetch_rows::<M, _MM_HINT_T1>(w.wrapping_add((j + FAR) * ws), ws, 4, k);
                let mut acc = [[_mm512_setzero_ps(); 4]; R];
                let mut kk = 0;
                while kk < full {
                    let wv: [__m512; 4] = std::array::from_fn(|t| M::load16(r[t].add(kk)));
                    for i in 0..R {
                        let x = _mm512_loadu_ps(vy[i].0.add(kk));
                        for t in 0..4 {
                            acc[i][t] = _mm512_fmadd_ps(wv[t], x, acc[i][t]);
                        }
                    }
                    kk += 16;
                }
                if full < k {
                    let wv: [__m512; 4] = std::array::from_fn(|t| M::load16_masked(tail_mask, r[t].add(full)));
                    for i in 0..R {
                        let x = _mm512_maskz_loadu_ps(tail_mask, vy[i].0.add(full));
                        for t in 0..4 {
                            acc[i][t] = _mm512_fmadd_ps(wv[t], x, acc[i][t]);
                        }
                    }
                }
                for i in 0..R {
                    let s = reduce_rows(acc[i]);
                    std::ptr::copy_nonoverlapping(s.as_ptr(), vy[i].1.add(j), 4);
                }
                j += 4;
            }
            for (v, y) in vy {
                if j < n {
                    dot_rows(
                        w.add(j * ws),
                        ws,
                        std::slice::from_raw_parts(v, k),
                        std::slice::from_raw_parts_mut(y.add(j), n - j),
                    );
                }
            }
        }
    }

    /// [`axpy`] for `m` vectors against one matrix: `y[i·ys + j] = Σ_k v[i·vst + k·vs] ·
    /// w[k·ws + j]` for `i < m`, `j < n` — up to four vectors at a time over column blocks of
    /// up to 64 held in registers for all `k`, so each matrix row is loaded once for all of
    /// them (grouped-query decode attention's `p·V`: 3 query heads per KV head). Per element
    /// the same FMAs in the same order (`k` ascending from 0) as [`axpy`]: the same bits.
    ///
    /// # Safety
    /// AVX-512F must be available; `w` holds `(k-1)·ws + n` elements, `v` `(m-1)·vst +
    /// (k-1)·vs + 1`, `y` `(m-1)·ys + n`, and `y` overlaps neither.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn axpy_multi<M: MatElem>(
        w: *const M,
        ws: usize,
        n: usize,
        v: *const f32,
        vst: usize,
        vs: usize,
        m: usize,
        k: usize,
        y: *mut f32,
        ys: usize,
    ) {
        // SAFETY (every call): rows `i .. i + R` of `v` and `y` exist (`i + R <= m`).
        unsafe { row_groups!(m, |i| (v.add(i * vst), y.add(i * ys)), axpy_block::<M>(w, ws, n, vs, k)) }
    }

    /// [`axpy_multi`] of `R` vectors, column block by column block.
    ///
    /// # Safety
    /// As [`axpy_multi`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    unsafe fn axpy_block<M: MatElem, const R: usize>(
        w: *const M,
        ws: usize,
        n: usize,
        vs: usize,
        k: usize,
        vy: [(*const f32, *mut f32); R],
    ) {
        let mut j = 0;
        // SAFETY: as `axpy_cols`'s contract, for every column block inside `0..n`.
        unsafe {
            while j < n {
                let cols = (n - j).min(64);
                match cols.div_ceil(16) {
                    1 => axpy_cols::<M, R, 1>(w.add(j), ws, cols, vy, j, vs, k),
                    2 => axpy_cols::<M, R, 2>(w.add(j), ws, cols, vy, j, vs, k),
                    3 => axpy_cols::<M, R, 3>(w.add(j), ws, cols, vy, j, vs, k),
                    _ => axpy_cols::<M, R, 4>(w.add(j), ws, cols, vy, j, vs, k),
                }
                j += 64;
            }
        }
    }

    /// Columns `j .. j + cols` (`cols` in `16 (C-1) + 1 ..= 16 C`, `w` already at column `j`)
    /// of [`axpy_block`]'s `R` results, in `R × C` registers.
    ///
    /// # Safety
    /// As [`axpy_multi`], for these columns.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    unsafe fn axpy_cols<M: MatElem, const R: usize, const C: usize>(
        w: *const M,
        ws: usize,
        cols: usize,
        vy: [(*const f32, *mut f32); R],
        j: usize,
        vs: usize,
        k: usize,
    ) {
        let last = cols - 16 * (C - 1);
        let tail_mask: __mmask16 = ((1u32 << last) - 1) as __mmask16;
        let mut acc = [[_mm512_setzero_ps(); C]; R];
        // SAFETY: row `kk < k` of the block holds `cols` elements from `w + kk·ws` (the last
        // vector under its mask); vector `i`'s element `kk` is at `vy[i].0 + kk·vs`; result
        // row `i` holds `cols` elements from `vy[i].1 + j`.
        unsafe {
            for kk in 0..k {
                let row = w.add(kk * ws);
                prefetch_rows::<M, _MM_HINT_T0>(w.wrapping_add((kk + AHEAD) * ws), ws, 1, cols);
                prefetch_rows::<M, _MM_HINT_T1>(w.wrapping_add((kk + FAR) * ws), ws, 1, cols);
                let wv: [__m512; C] = std::array::from_fn(|c| {
                    if c + 1 < C { M::load16(row.add(16 * c)) } else { M::load16_masked(tail_mask, row.add(16 * c)) }
                });
                for i in 0..R {
                    let x = _mm512_set1_ps(*vy[i].0.add(kk * vs));
                    for c in 0..C {
                        acc[i][c] = _mm512_fmadd_ps(x, wv[c], acc[i][c]);
                    }
                }
            }
            for i in 0..R {
                let y = vy[i].1.add(j);
                for (c, a) in acc[i][..C - 1].iter().enumerate() {
                    _mm512_storeu_ps(y.add(16 * c), *a);
                }
                _mm512_mask_storeu_ps(y.add(16 * (C - 1)), tail_mask, acc[i][C - 1]);
            }
        }
    }

    /// `y[j] = Σ_k w[j·ws + k] · v[k]`, four rows at a time.
    ///
    /// # Safety
    /// AVX-512F must be available; `w` must hold `(y.len()-1)·ws + v.len()` elements.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    pub unsafe fn dot_rows<M: MatElem>(w: *const M, ws: usize, v: &[f32], y: &mut [f32]) {
        let k = v.len();
        let full = k / 16 * 16;
        let tail_mask: __mmask16 = ((1u32 << (k - full)) - 1) as __mmask16;
        let vp = v.as_ptr();
        let rows = y.len();
        let mut j = 0;
        unsafe {
            while j + 4 <= rows {
                let r: [*const M; 4] = std::array::from_fn(|i| w.add((j + i) * ws));
                let mut acc = [_mm512_setzero_ps(); 4];
                let mut kk = 0;
                while kk < full {
                    let x = _mm512_loadu_ps(vp.add(kk));
                    for i in 0..4 {
                        acc[i] = _mm512_fmadd_ps(M::load16(r[i].add(kk)), x, acc[i]);
                    }
                    kk += 16;
                }
                if full < k {
                    let x = _mm512_maskz_loadu_ps(tail_mask, vp.add(full));
                    for i in 0..4 {
                        acc[i] = _mm512_fmadd_ps(M::load16_masked(tail_mask, r[i].add(full)), x, acc[i]);
                    }
                }
                for i in 0..4 {
                    y[j + i] = _mm512_reduce_add_ps(acc[i]);
                }
                j += 4;
            }
            while j < rows {
                let r = w.add(j * ws);
                let mut acc = _mm512_setzero_ps();
                let mut kk = 0;
                while kk < full {
                    acc = _mm512_fmadd_ps(M::load16(r.add(kk)), _mm512_loadu_ps(vp.add(kk)), acc);
                    kk += 16;
                }
                if full < k {
                    acc = _mm512_fmadd_ps(
                        M::load16_masked(tail_mask, r.add(full)),
                        _mm512_maskz_loadu_ps(tail_mask, vp.add(full)),
                        acc,
                    );
                }
                y[j] = _mm512_reduce_add_ps(acc);
                j += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The several-row kernels give the one-row kernels' bits: every `m` up to 9 (blocks of 4
    /// and the rest), matrix rows / columns not multiples of 4 or 16, strides wider than the
    /// rows, f32 and f16 matrices.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn multi_row_kernels_are_the_one_row_kernels() {
        if !has_avx512() {
            eprintln!("SKIP: no AVX-512");
            return;
        }
        fn check<M: MatElem>(conv: impl Fn(f32) -> M) {
            let val = |i: usize, s: usize| ((i * s + 3) % 29) as f32 * 0.173 - 2.4 + (i % 7) as f32 * 1e-3;
            for &(m, n, k) in &[(1, 5, 3), (3, 64, 37), (4, 17, 64), (5, 130, 16), (9, 33, 70), (3, 7, 1)] {
                // Dot: n matrix rows of k (stride k + 3); m vectors of k (stride k + 1).
                let (ws, vst) = (k + 3, k + 1);
                let w: Vec<M> = (0..(n - 1) * ws + k).map(|i| conv(val(i, 7))).collect();
                let v: Vec<f32> = (0..(m - 1) * vst + k).map(|i| val(i, 5)).collect();
                let mut got = vec![0f32; m * n];
                // SAFETY: AVX-512 present; the lengths above are the kernels' contracts.
                unsafe { avx512::dot_multi(w.as_ptr(), ws, n, v.as_ptr(), vst, m, k, got.as_mut_ptr(), n) };
                for i in 0..m {
                    let mut want = vec![0f32; n];
                    dot_rows(&w, ws, &v[i * vst..i * vst + k], &mut want);
                    let g = &got[i * n..(i + 1) * n];
                    assert!(
                        g.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                        "dot m={m} n={n} k={k} row {i}"
                    );
                }
                // Axpy: k matrix rows of n (stride n + 5); m vectors with element stride 2.
                let (ws, vs, vst) = (n + 5, 2, 2 * k + 1);
                let w: Vec<M> = (0..(k - 1) * ws + n).map(|i| conv(val(i, 3))).collect();
                let v: Vec<f32> = (0..(m - 1) * vst + (k - 1) * vs + 1).map(|i| val(i, 11)).collect();
                let mut got = vec![0f32; m * n];
                // SAFETY: as above.
                unsafe { avx512::axpy_multi(w.as_ptr(), ws, n, v.as_ptr(), vst, vs, m, k, got.as_mut_ptr(), n) };
                for i in 0..m {
                    let mut want = vec![0f32; n];
                    axpy(&w, ws, &v[i * vst..], vs, k, &mut want);
                    let g = &got[i * n..(i + 1) * n];
                    assert!(
                        g.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()),
                        "axpy m={m} n={n} k={k} row {i}"
                    );
                }
            }
        }
        check::<f32>(|x| x);
        check::<f16>(f16::from_f32);
    }

    #[test]
    fn kernels_match_naive() {
        for &(k, n, ws) in &[(1, 1, 1), (3, 5, 7), (17, 33, 40), (20, 16, 16), (9, 130, 131)] {
            let w: Vec<f32> = (0..(k - 1) * ws + n).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
            let v: Vec<f32> = (0..k * 2).map(|i| ((i * 5) % 11) as f32 - 5.0).collect();
            let mut y = vec![0.0; n];
            axpy(&w, ws, &v, 2, k, &mut y);
            for j in 0..n {
                let want: f32 = (0..k).map(|kk| v[kk * 2] * w[kk * ws + j]).sum();
                assert_eq!(y[j], want, "axpy k={k} n={n} j={j}");
            }
            // dot form: n rows of length k with row stride ws >= k.
            let ws2 = ws.max(k);
            let w2: Vec<f32> = (0..(n - 1) * ws2 + k).map(|i| ((i * 3) % 7) as f32 - 3.0).collect();
            let v2 = &v[..k];
            let mut y2 = vec![0.0; n];
            dot_rows(&w2, ws2, v2, &mut y2);
            for j in 0..n {
                let want: f32 = (0..k).map(|kk| w2[j * ws2 + kk] * v2[kk]).sum();
                assert_eq!(y2[j], want, "dot k={k} n={n} j={j}");
            }
        }
    }
}
