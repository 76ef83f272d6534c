//! Our f32 matrix product for AVX-512 CPUs: `C[M,N] = A[M,K] · B[K,N]` with any operand
//! strides, `B` packed once per product into panels a compiled step keeps (no allocation per
//! run), and a per-row-block callback so a matmul epilogue can read each block of `C` while it
//! is still in cache.
//!
//! Why not the `gemm` crate here: at the mid-size shapes of encoders and MLP training
//! (M = 128–256, K = 384–1536) it reached 88–137 GFLOP/s against OpenBLAS's 145–185 on this
//! machine (bench/RESULTS.md), and it packs `B` again for every call, including every row block
//! of an epilogue. The `gemm` crate still runs f64, batched products and CPUs without AVX-512.
//!
//! Structure (the classic Goto / BLIS blocking): `B` is packed into [`NR`]-column panels per
//! `K` block of at most [`KC`] rows, zero-padded, 64-byte aligned; a block of at most [`MC`]
//! rows of `A` is packed (on the stack) into [`MR`]-row tiles, `K`-major; the micro-kernel
//! keeps an `MR × NR` tile of `C` in 24 zmm registers and does one broadcast-FMA per
//! (row, 16 columns) per `k`. The first `K` block overwrites `C`, later ones accumulate, so
//! every element is the same sequence of f32 FMAs whatever the thread count (results are
//! deterministic and independent of how rows or columns are split across threads).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use super::simd::threads;
use super::spin::{self, SyncPtr};
use std::mem::MaybeUninit;

/// Rows of the micro-kernel's tile of `C`.
pub const MR: usize = 12;
/// Columns of the micro-kernel's tile of `C` (two zmm vectors).
pub const NR: usize = 32;
/// Most `K` rows per block (a `KC × NR` panel of `B` is 32 KiB, the L1 data cache).
pub const KC: usize = 128;
/// Most rows of `A` per packed block (192 × 256 f32 = 192 KiB, within L2).
pub const MC: usize = 192;

/// `B` packed for [`matmul`]: for each `K` block, `ceil(N / NR)` panels of `kc × NR` floats,
/// row `p` of a panel holding `B[k0 + p, j0 .. j0 + NR]` (zeros past `N`).
#[derive(Clone, Debug, Default)]
pub struct PackedB {
    k: usize,
    n: usize,
    data: Vec<f32>,
    /// Offset of the first 64-byte-aligned element of `data`.
    off: usize,
}

impl PackedB {
    /// Storage for a `k × n` operand (allocated once, at compile time).
    pub fn new(k: usize, n: usize) -> Self {
        let len = k * panels(n) * NR;
        let data = vec![0f32; len + 16];
        let off = data.as_ptr().align_offset(64).min(15);
        PackedB { k, n, data, off }
    }

    fn base(&self) -> *const f32 {
        self.data[self.off..].as_ptr()
    }

    /// Panel `jp` of the `K` block starting at row `k0` with `kc` rows.
    fn panel(&self, k0: usize, kc: usize, jp: usize) -> *const f32 {
        // SAFETY: within `data`: the blocks before `k0` hold `k0 · panels · NR` floats.
        unsafe { self.base().add(k0 * panels(self.n) * NR + jp * kc * NR) }
    }
}

fn panels(n: usize) -> usize {
    n.div_ceil(NR)
}

/// The `K` blocks: `(start, len)`, of near-equal length at most [`KC`].
fn k_blocks(k: usize) -> impl Iterator<Item = (usize, usize)> {
    let nb = k.div_ceil(KC).max(1);
    let len = k.div_ceil(nb);
    (0..nb).map(move |b| (b * len, len.min(k.saturating_sub(b * len))))
}

/// A read-only operand: base pointer and strides (elements) along its two axes.
#[derive(Clone, Copy)]
pub struct Operand {
    /// First element.
    pub ptr: *const f32,
    /// Stride between rows (`A`: along `M`; `B`: along `K`).
    pub rs: usize,
    /// Stride between columns (`A`: along `K`; `B`: along `N`).
    pub cs: usize,
}
// SAFETY: only read, by tasks that do not outlive the caller's borrow of the data.
unsafe impl Send for Operand {}
unsafe impl Sync for Operand {}

/// True when this module's kernels run on this CPU (AVX-512F, not disabled).
pub fn available() -> bool {
    cfg!(target_arch = "x86_64") && super::simd::has_avx512()
}

/// Pack `b` (`k × n`, strides in `b`) into `dst` (sized by [`PackedB::new`] for `k × n`), in
/// parallel over panels when several threads run.
///
/// # Safety
/// `b` addresses `k × n` readable elements through its strides.
pub unsafe fn pack_b(b: Operand, dst: &mut PackedB) {
    let (k, n) = (dst.k, dst.n);
    let np = panels(n);
    let base = SyncPtr(dst.data[dst.off..].as_mut_ptr());
    let one = |jp: usize| {
        let b: Operand = b; // capture the whole (Sync) operand, not its raw-pointer field
        for (k0, kc) in k_blocks(k) {
            // SAFETY: panel (k0, jp) is kc · NR floats inside `dst`, written by this task only;
            // reads stay inside `b` (`j < n`, `k0 + p < k`).
            unsafe {
                let d = base.get().add(k0 * np * NR + jp * kc * NR);
                let j0 = jp * NR;
                let w = NR.min(n - j0);
                for p in 0..kc {
                    let row = b.ptr.add((k0 + p) * b.rs + j0 * b.cs);
                    let out = d.add(p * NR);
                    if b.cs == 1 {
                        std::ptr::copy_nonoverlapping(row, out, w);
                    } else {
                        for j in 0..w {
                            *out.add(j) = *row.add(j * b.cs);
                        }
                    }
                    for j in w..NR {
                        *out.add(j) = 0.0;
                    }
                }
            }
        }
    };
    if threads() > 1 && k * n >= 1 << 16 {
        spin::for_each(np, one);
    } else {
        (0..np).for_each(one);
    }
}

/// `C = A · B` for `m` rows (`A`: `m × k` through its strides; `B` packed; `C` row-major with
/// row stride `ldc`), in parallel over row blocks, or over column panels when there are fewer
/// row blocks than threads.
///
/// # Safety
/// `a` addresses `m × k` readable elements, `c` `m` rows of `ldc ≥ n` writable elements, and
/// neither overlaps `bp`.
pub unsafe fn matmul(m: usize, a: Operand, bp: &PackedB, c: *mut f32, ldc: usize) {
    let n = bp.n;
    if m == 0 || n == 0 {
        return;
    }
    let t = threads();
    let mcs = m.div_ceil(MC);
    let np = panels(n);
    let c = SyncPtr(c);
    if t == 1 || (m * n * bp.k) < 1 << 18 {
        // SAFETY: the caller's contract.
        unsafe { rows(0, m, a, bp, 0, np, c.get(), ldc) };
        return;
    }
    // Whole row blocks per task when there are enough of them (a multiple of the thread
    // count, for balance), else row blocks × column ranges.
    let (row_tasks, col_tasks) = if mcs >= t { (mcs.next_multiple_of(t), 1) } else { (mcs, t.min(np)) };
    let mc = m.div_ceil(row_tasks).next_multiple_of(MR);
    spin::for_each(row_tasks * col_tasks, |task| {
        let (rt, ct) = (task / col_tasks, task % col_tasks);
        let (r0, r1) = ((rt * mc).min(m), ((rt + 1) * mc).min(m));
        let (p0, p1) = (ct * np / col_tasks, (ct + 1) * np / col_tasks);
        // SAFETY: each task writes the disjoint block rows r0..r1 × panels p0..p1 of `c`.
        unsafe { rows(r0, r1, a, bp, p0, p1, c.get(), ldc) };
    });
}

/// Rows `r0..r1` of `C = A · B` on the calling thread (for callers that consume `C` block
/// by block, e.g. a matmul epilogue; rows are computed exactly as [`matmul`] computes them).
///
/// # Safety
/// As [`matmul`], for rows `r0..r1 ≤ m`.
pub unsafe fn matmul_range(r0: usize, r1: usize, a: Operand, bp: &PackedB, c: *mut f32, ldc: usize) {
    // SAFETY: the caller's contract.
    unsafe { rows(r0, r1, a, bp, 0, panels(bp.n), c, ldc) };
}

/// 64-byte-aligned stack space for one packed block of `A` (left uninitialized: [`pack_a`]
/// writes every element the kernel reads).
#[repr(C, align(64))]
struct ABlock([MaybeUninit<f32>; MC * KC]);

/// Rows `r0..r1` × panels `p0..p1` of `C`, in row blocks of at most [`MC`].
#[allow(clippy::too_many_arguments)]
unsafe fn rows(r0: usize, r1: usize, a: Operand, bp: &PackedB, p0: usize, p1: usize, c: *mut f32, ldc: usize) {
    let mut ab = ABlock([MaybeUninit::uninit(); MC * KC]);
    let ap = ab.0.as_mut_ptr().cast::<f32>();
    let n = bp.n;
    let mut ic = r0;
    while ic < r1 {
        let mc = MC.min(r1 - ic);
        for (k0, kc) in k_blocks(bp.k) {
            // SAFETY: rows ic..ic+mc and columns k0..k0+kc are inside `a`.
            unsafe { pack_a(a, ic, mc, k0, kc, ap) };
            for jp in p0..p1 {
                let bpan = bp.panel(k0, kc, jp);
                let w = NR.min(n - jp * NR);
                for t in 0..mc.div_ceil(MR) {
                    let h = MR.min(mc - t * MR);
                    // SAFETY: tile (ic + t·MR, jp·NR) of h × w elements is inside `c`.
                    unsafe {
                        let ct = c.add((ic + t * MR) * ldc + jp * NR);
                        tile(kc, ap.add(t * MR * kc), bpan, ct, ldc, k0 > 0, h, w);
                    }
                }
            }
        }
        ic += mc;
    }
}

/// Pack rows `i0..i0+mc`, columns `k0..k0+kc` of `a` into `MR`-row tiles, `K`-major, rows
/// past `mc` zero.
///
/// # Safety
/// `a` addresses those elements; `dst` has room for `ceil(mc / MR) · MR · kc` floats.
unsafe fn pack_a(a: Operand, i0: usize, mc: usize, k0: usize, kc: usize, dst: *mut f32) {
    for t in 0..mc.div_ceil(MR) {
        let h = MR.min(mc - t * MR);
        // SAFETY (whole loop): reads stay in rows i0..i0+mc, columns k0..k0+kc of `a`; writes
        // stay in tile t of `dst`.
        unsafe {
            let d = dst.add(t * MR * kc);
            for i in 0..MR {
                if i >= h {
                    for p in 0..kc {
                        *d.add(p * MR + i) = 0.0;
                    }
                    continue;
                }
                let row = a.ptr.add((i0 + t * MR + i) * a.rs + k0 * a.cs);
                for p in 0..kc {
                    *d.add(p * MR + i) = *row.add(p * a.cs);
                }
            }
        }
    }
}

/// One `h × w` tile of `C` (`h ≤ MR`, `w ≤ NR`): straight into `C` when whole, else through a
/// local tile.
#[allow(clippy::too_many_arguments)]
unsafe fn tile(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, acc: bool, h: usize, w: usize) {
    if h == MR && w == NR {
        // SAFETY: the caller's contract; `available()` was checked before packing.
        unsafe { kernel::<2>(kc, a, b, c, ldc, acc) };
        return;
    }
    let mut buf = [0f32; MR * NR];
    if acc {
        for i in 0..h {
            // SAFETY: row i of the tile has w elements inside `c`.
            unsafe { std::ptr::copy_nonoverlapping(c.add(i * ldc), buf.as_mut_ptr().add(i * NR), w) };
        }
    }
    // SAFETY: `buf` is a whole MR × NR tile.
    unsafe {
        if w <= 16 {
            kernel::<1>(kc, a, b, buf.as_mut_ptr(), NR, acc);
        } else {
            kernel::<2>(kc, a, b, buf.as_mut_ptr(), NR, acc);
        }
    }
    for i in 0..h {
        // SAFETY: as above.
        unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr().add(i * NR), c.add(i * ldc), w) };
    }
}

/// The micro-kernel: `C[0..MR, 0..16·NV] (+)= Σ_p a[p·MR + i] · b[p·NR + j]`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn kernel<const NV: usize>(kc: usize, a: *const f32, b: *const f32, c: *mut f32, ldc: usize, acc: bool) {
    // SAFETY (whole body): `a` holds kc · MR floats, `b` kc · NR 64-byte-aligned floats, `c`
    // MR rows of 16 · NV writable floats at stride `ldc` (the caller's contract).
    unsafe {
        let mut r = [[_mm512_setzero_ps(); NV]; MR];
        if acc {
            for (i, ri) in r.iter_mut().enumerate() {
                for (v, x) in ri.iter_mut().enumerate() {
                    *x = _mm512_loadu_ps(c.add(i * ldc + v * 16));
                }
            }
        }
        let (mut a, mut b) = (a, b);
        for _ in 0..kc {
            let mut bv = [_mm512_setzero_ps(); NV];
            for (v, x) in bv.iter_mut().enumerate() {
                *x = _mm512_load_ps(b.add(v * 16));
            }
            for (i, ri) in r.iter_mut().enumerate() {
                let ai = _mm512_set1_ps(*a.add(i));
                for (v, x) in ri.iter_mut().enumerate() {
                    *x = _mm512_fmadd_ps(ai, bv[v], *x);
                }
            }
            a = a.add(MR);
            b = b.add(NR);
        }
        for (i, ri) in r.iter().enumerate() {
            for (v, x) in ri.iter().enumerate() {
                _mm512_storeu_ps(c.add(i * ldc + v * 16), *x);
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn kernel<const NV: usize>(_: usize, _: *const f32, _: *const f32, _: *mut f32, _: usize, _: bool) {
    unreachable!("sgemm runs only where available() is true")
}
