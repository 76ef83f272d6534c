//! Our f32 matrix product for AVX-512 and AVX2 + FMA CPUs: `C[M,N] = A[M,K] · B[K,N]` with any operand
//! strides. `B` is packed into panels a compiled step keeps (no allocation per run): once at
//! compile time when it is a graph constant ([`pack_b`], [`matmul`]), else during each product,
//! each `K` block just before its first use ([`matmul_packing`]). Row ranges can be computed
//! one block at a time so a matmul epilogue reads each block of `C` while it is still in cache.
//!
//! Why not the `gemm` crate here: at the mid-size shapes of encoders and MLP training
//! (M = 128–784, K = 256–1536) it reached 88–137 GFLOP/s on this machine (bench/RESULTS.md),
//! below this kernel, and it packs `B` again for every call, including every row block of an
//! epilogue. The `gemm` crate still runs f64, batched products and CPUs without AVX-512.
//!
//! Structure (the classic Goto / BLIS blocking): `B` is packed into [`NR`]-column panels per
//! `K` block of at most [`KC`] rows, zero-padded, 64-byte aligned, reading `B` along its
//! contiguous axis; a block of at most [`MC`] rows of `A` is packed (on the stack) as rows of
//! [`KC`] floats, so a row-major `A` packs by row copies and a transposed one by 16 × 16
//! register transposes, except that a row-major `A` whose row stride spreads rows over L1's
//! sets is read in place (no copy); the micro-kernel keeps an `MR × NR` tile of `C` in 24 zmm
//! registers and does one broadcast-FMA per (row, 16 columns) per `k`, prefetching its share
//! of the next `B` panel into L2 along the way; edge tiles run a kernel for their
//! row count with masked columns; each tile's lines of `C` are prefetched for writing before its
//! kernel runs (a first write to a line of `C` otherwise waits for a read-for-ownership). The
//! first `K` block overwrites `C`, later ones accumulate, so
//! every element is the same sequence of f32 FMAs whatever the thread count and whether `B`
//! was packed ahead or on the way (results are deterministic and independent of how rows or
//! columns are split across threads).
//!
//! Without AVX-512 (AVX2 + FMA: AMD Zen 2 / Zen 3, Intel before AVX-512) the same packing and
//! blocking run an 8-lane micro-kernel ([`kernel_avx2`]) on sub-tiles of at most 6 rows × 16
//! columns of each `MR × NR` tile (12 ymm accumulators of the 16), the same f32 FMA sequence
//! per element, so the same bits as on AVX-512; a transposed `A` packs element by element
//! there. Before, such CPUs ran the `gemm` crate, which packs `B` again on every call (12% of
//! an encoder layer's time on an AMD Zen 3 core).

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

use super::simd::threads;
use super::spin::{self, SyncPtr};
use std::mem::MaybeUninit;
use std::sync::Arc;

/// Rows of the micro-kernel's tile of `C`.
pub const MR: usize = 12;
/// Columns of the micro-kernel's tile of `C` (two zmm vectors).
pub const NR: usize = 32;
/// Most `K` rows per block. A `KC × NR` panel of `B` is 48 KiB, the L1 data cache: the
/// kernel's two loads per 24 FMAs come from L2 fast enough, and encoders' `K = 384` products
/// run in one block, each tile of `C` written once (4096 × 384 × 1536, 1 thread: 39.2–44.8 →
/// 38.5–38.8 ms against 128; no shape measured slower, bench/RESULTS.md "Session 8").
pub const KC: usize = 384;
/// Most rows of `A` per packed block (192 × 384 f32 = 288 KiB on the stack, within L2).
pub const MC: usize = 192;

/// `B` packed for [`matmul`]: for each `K` block, `ceil(N / NR)` panels of `kc × NR` floats,
/// row `p` of a panel holding `B[k0 + p, j0 .. j0 + NR]` (zeros past `N`).
#[derive(Clone, Debug, Default)]
pub struct PackedB {
    k: usize,
    n: usize,
    store: Store,
}

/// Where a [`PackedB`]'s floats live.
#[derive(Clone, Debug)]
enum Store {
    /// Its own vector; the packing starts at the first 64-byte-aligned element (`off`).
    Own { data: Vec<f32>, off: usize },
    /// Read-only, at float offset `off` of a [`WeightArena`] shared with the other constant
    /// weights of one executable ([`share_constants`]).
    Arena { arena: Arc<WeightArena>, off: usize },
}

impl Default for Store {
    fn default() -> Self {
        Store::Own { data: Vec::new(), off: 0 }
    }
}

impl PackedB {
    /// Storage for a `k × n` operand (allocated once, at compile time).
    pub fn new(k: usize, n: usize) -> Self {
        let data = vec![0f32; packed_len(k, n) + 16];
        let off = data.as_ptr().align_offset(64).min(15);
        PackedB { k, n, store: Store::Own { data, off } }
    }

    /// Make this storage for a `k × n` operand, keeping its vector when that is large enough:
    /// a per-run packing buffer shared by products of different shapes (packing writes every
    /// float a product reads, zeros past `N` included).
    pub fn fit(&mut self, k: usize, n: usize) {
        match &self.store {
            Store::Own { data, .. } if data.len() >= packed_len(k, n) + 16 => (self.k, self.n) = (k, n),
            _ => *self = PackedB::new(k, n),
        }
    }

    /// Fill the packed floats with NaN in debug builds (a no-op in release): a buffer reused
    /// per thread ([`super::scratch`]'s contract) must be packed before a product reads it.
    pub(crate) fn poison_in_debug(&mut self) {
        if let Store::Own { data, off } = &mut self.store {
            super::scratch::poison(&mut data[*off..*off + packed_len(self.k, self.n)]);
        }
    }

    fn base(&self) -> *const f32 {
        match &self.store {
            Store::Own { data, off } => data[*off..].as_ptr(),
            // SAFETY: `share_constants` placed `packed_len` floats at `off` inside the arena.
            Store::Arena { arena, off } => unsafe { arena.base().add(*off) },
        }
    }
}

/// Floats of a packed `k × n` operand.
fn packed_len(k: usize, n: usize) -> usize {
    k * panels(n) * NR
}

/// One read-only buffer holding the packed constant weights of an executable, backed by
/// transparent huge pages where the OS grants them (Linux `MADV_HUGEPAGE`, 2 MiB aligned).
/// Weights are read once per run, usually from L3: on 4 KiB pages every 16 KiB panel costs
/// page walks. With the next-panel prefetch in the product loop, a 6-layer FFN chain
/// (`examples/chain_bench.rs`) ran 2.89 → 2.46 ms per layer; either change alone gained
/// nothing measurable (bench/RESULTS.md, "Session 7").
#[derive(Debug)]
pub struct WeightArena {
    map: memmap2::MmapMut,
    /// Byte offset of the first 2 MiB boundary in `map`.
    start: usize,
}

/// Huge-page size the arena aligns to.
const HUGE: usize = 2 << 20;

impl WeightArena {
    fn base(&self) -> *const f32 {
        self.map[self.start..].as_ptr().cast()
    }
}

/// Move the storage of `packs` (graph constants packed by [`pack_b`], read-only from now on)
/// into one [`WeightArena`]. Left as they are when they total less than 1 MiB (too small to
/// gain from huge pages) or when the anonymous mapping fails (the product is the same either
/// way).
pub fn share_constants(packs: &mut [&mut PackedB]) {
    let lens: Vec<usize> = packs.iter().map(|p| packed_len(p.k, p.n).next_multiple_of(16)).collect();
    let total: usize = lens.iter().sum::<usize>() * 4;
    if total < 1 << 20 {
        return;
    }
    let Ok(mut map) = memmap2::MmapMut::map_anon(total + HUGE) else { return };
    let start = map.as_ptr().align_offset(HUGE).min(HUGE);
    #[cfg(unix)]
    let _ = map.advise_range(memmap2::Advice::HugePage, start, total);
    let mut off = 0;
    for (p, &len) in packs.iter().zip(&lens) {
        let src = packed_len(p.k, p.n);
        // SAFETY: `base` addresses `src` packed floats; the arena has room for every pack.
        let from = unsafe { std::slice::from_raw_parts(p.base(), src) };
        let dst = &mut map[start + off * 4..start + (off + src) * 4];
        for (d, v) in dst.chunks_exact_mut(4).zip(from) {
            d.copy_from_slice(&v.to_ne_bytes());
        }
        off += len;
    }
    let arena = Arc::new(WeightArena { map, start });
    let mut off = 0;
    for (p, &len) in packs.iter_mut().zip(&lens) {
        p.store = Store::Arena { arena: arena.clone(), off };
        off += len;
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

/// True when this module's products run on this CPU: AVX-512F, or AVX2 + FMA ([`wide`] says
/// which; neither disabled).
pub fn available() -> bool {
    cfg!(target_arch = "x86_64") && (super::simd::has_avx512() || super::simd::has_avx2())
}

/// True when the AVX-512 micro-kernel runs on this CPU; else the AVX2 one, where
/// [`available`].
pub fn wide() -> bool {
    cfg!(target_arch = "x86_64") && super::simd::has_avx512()
}

/// Pack `b` (`k × n`, strides in `b`) into `dst` (sized by [`PackedB::new`] for `k × n`), in
/// parallel over column ranges when several threads run.
///
/// # Safety
/// `b` addresses `k × n` readable elements through its strides.
pub unsafe fn pack_b(b: Operand, dst: &mut PackedB) {
    let (k, n) = (dst.k, dst.n);
    // SAFETY: the caller's contract.
    unsafe { pack_all(b, dst.view_mut(), if threads() > 1 && k * n >= 1 << 16 { threads() } else { 1 }) };
}

/// Pack every panel of `b` into `pv`, split into `tasks` column ranges.
///
/// # Safety
/// `b` addresses `pv.k × pv.n` readable elements; nothing else reads or writes `pv` meanwhile.
unsafe fn pack_all(b: Operand, pv: Panels, tasks: usize) {
    let np = panels(pv.n);
    let tasks = tasks.clamp(1, np.max(1));
    let one = |t: usize| {
        let b: Operand = b; // capture the whole (Sync) operand, not its raw-pointer field
        for (k0, kc) in k_blocks(pv.k) {
            // SAFETY: panels of range t are written by this task only; reads stay inside `b`.
            unsafe { pack_block(b, pv, k0, kc, t * np / tasks, (t + 1) * np / tasks) };
        }
    };
    if tasks > 1 {
        spin::for_each(tasks, one);
    } else {
        one(0);
    }
}

/// Where packed panels live: [`PackedB`]'s storage as a raw view tasks can share (each task
/// writes only the panels it packs).
#[derive(Clone, Copy)]
struct Panels {
    base: *mut f32,
    k: usize,
    n: usize,
}
// SAFETY: tasks write disjoint panels and read panels only after they are written.
unsafe impl Send for Panels {}
unsafe impl Sync for Panels {}

impl Panels {
    /// Panel `jp` of the `K` block starting at row `k0` with `kc` rows.
    fn panel(self, k0: usize, kc: usize, jp: usize) -> *mut f32 {
        // SAFETY: within the storage: the blocks before `k0` hold `k0 · panels · NR` floats.
        unsafe { self.base.add(k0 * panels(self.n) * NR + jp * kc * NR) }
    }
}

impl PackedB {
    /// A read-only view ([`Panels`] is written through only by the packing paths, which take
    /// `&mut self`).
    fn view(&self) -> Panels {
        Panels { base: self.base().cast_mut(), k: self.k, n: self.n }
    }

    /// A writable view, for packing: a shared (constant) packing is first replaced by storage
    /// of its own.
    fn view_mut(&mut self) -> Panels {
        if matches!(self.store, Store::Arena { .. }) {
            *self = PackedB::new(self.k, self.n);
        }
        let Store::Own { data, off } = &mut self.store else { unreachable!("made own above") };
        Panels { base: data[*off..].as_mut_ptr(), k: self.k, n: self.n }
    }
}

/// Pack panels `p0..p1` of the `K` block `(k0, kc)` of `b`: each `kc` rows of [`NR`] floats,
/// zeros past `N`. Reads `b` along its contiguous axis (whole rows of a row-major `b`, whole
/// columns of a transposed one), which the hardware prefetcher can follow; a panel-at-a-time
/// walk down a row-major `b` touches a new page per row.
///
/// # Safety
/// `b` addresses the block's elements; the panels lie inside `dst`'s storage.
unsafe fn pack_block(b: Operand, dst: Panels, k0: usize, kc: usize, p0: usize, p1: usize) {
    if p0 >= p1 {
        return;
    }
    let n = dst.n;
    let full = if p1 * NR <= n { p1 } else { p1 - 1 }; // panels p0..full have NR columns
    // SAFETY (whole body): reads stay in rows k0..k0+kc, columns p0·NR..min(p1·NR, n) of `b`;
    // writes in panels p0..p1 of the block.
    unsafe {
        if b.cs == 1 {
            for p in 0..kc {
                let row = b.ptr.add((k0 + p) * b.rs);
                for jp in p0..full {
                    std::ptr::copy_nonoverlapping(row.add(jp * NR), dst.panel(k0, kc, jp).add(p * NR), NR);
                }
                if full < p1 {
                    let (j0, out) = (full * NR, dst.panel(k0, kc, full).add(p * NR));
                    std::ptr::copy_nonoverlapping(row.add(j0), out, n - j0);
                    std::ptr::write_bytes(out.add(n - j0), 0, NR - (n - j0));
                }
            }
        } else {
            // Transposed (or strided) `b`: walk each source column along `K`; whole 16 × 16
            // blocks of a transposed `b` by register transposes.
            for jp in p0..p1 {
                let (j0, d) = (jp * NR, dst.panel(k0, kc, jp));
                let w = NR.min(n - j0);
                let mut jd = 0;
                if b.rs == 1 {
                    while jd + 16 <= w {
                        let mut p = 0;
                        while p + 16 <= kc {
                            transpose16(b.ptr.add(k0 + p + (j0 + jd) * b.cs), b.cs, d.add(p * NR + jd), NR);
                            p += 16;
                        }
                        for p in p..kc {
                            for j in jd..jd + 16 {
                                *d.add(p * NR + j) = *b.ptr.add(k0 + p + (j0 + j) * b.cs);
                            }
                        }
                        jd += 16;
                    }
                }
                for j in jd..w {
                    let col = b.ptr.add(k0 * b.rs + (j0 + j) * b.cs);
                    for p in 0..kc {
                        *d.add(p * NR + j) = *col.add(p * b.rs);
                    }
                }
                if w < NR {
                    for p in 0..kc {
                        std::ptr::write_bytes(d.add(p * NR + w), 0, NR - w);
                    }
                }
            }
        }
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
    // SAFETY: the caller's contract; nothing is packed.
    unsafe { matmul_with(m, a, bp.view(), None, c, ldc) }
}

/// `C = A · B` for an unpacked `b` (`k × n` through its strides), packed into `scratch` (sized
/// by [`PackedB::new`] for `k × n`) during the product: each `K` block just before its first
/// use, while it is still in cache, instead of a separate pass over all of `b`. Same results as
/// [`pack_b`] then [`matmul`].
///
/// # Safety
/// As [`matmul`], and `b` addresses `k × n` readable elements not overlapping `c`.
pub unsafe fn matmul_packing(m: usize, a: Operand, b: Operand, scratch: &mut PackedB, c: *mut f32, ldc: usize) {
    let pv = scratch.view_mut();
    // SAFETY: the caller's contract.
    unsafe { matmul_with(m, a, pv, Some(b), c, ldc) }
}

/// [`matmul`] / [`matmul_packing`]: with `pack`, each `K` block is packed by the first row
/// block that uses it (tasks that share panels wait for a parallel packing pass first).
unsafe fn matmul_with(m: usize, a: Operand, pv: Panels, pack: Option<Operand>, c: *mut f32, ldc: usize) {
    let n = pv.n;
    if m == 0 || n == 0 {
        return;
    }
    let t = threads();
    let mcs = m.div_ceil(MC);
    let np = panels(n);
    let c = SyncPtr(c);
    if t == 1 || (m * n * pv.k) < 1 << 18 {
        // SAFETY: the caller's contract.
        unsafe { rows(0, m, a, pv, 0, np, c.get(), ldc, 0, pack) };
        return;
    }
    // Whole row blocks per task when there are enough of them (a multiple of the thread
    // count, for balance), else row blocks × column ranges.
    let (row_tasks, col_tasks) = if mcs >= t { (mcs.next_multiple_of(t), 1) } else { (mcs, t.min(np)) };
    let mut pack = pack;
    if row_tasks > 1 {
        // Several tasks read each panel: pack them all first, in parallel.
        if let Some(b) = pack.take() {
            // SAFETY: the caller's contract; the product starts after packing ends.
            unsafe { pack_all(b, pv, t) };
        }
    }
    let mc = m.div_ceil(row_tasks).next_multiple_of(MR);
    spin::for_each(row_tasks * col_tasks, |task| {
        let (rt, ct) = (task / col_tasks, task % col_tasks);
        let (r0, r1) = ((rt * mc).min(m), ((rt + 1) * mc).min(m));
        let (p0, p1) = (ct * np / col_tasks, (ct + 1) * np / col_tasks);
        // SAFETY: each task writes the disjoint block rows r0..r1 × panels p0..p1 of `c`, and
        // (one row task) packs only its own panels p0..p1.
        unsafe { rows(r0, r1, a, pv, p0, p1, c.get(), ldc, 0, pack) };
    });
}

/// Rows `r0..r1` of `C = A · B` on the calling thread (for callers that consume `C` block
/// by block, e.g. a matmul epilogue; rows are computed exactly as [`matmul`] computes them),
/// written to `c`, which points at row `r0` (a block-sized buffer can be reused per block).
///
/// # Safety
/// As [`matmul`], for rows `r0..r1 ≤ m`, with `c` holding `r1 - r0` rows at stride `ldc`.
pub unsafe fn matmul_range(r0: usize, r1: usize, a: Operand, bp: &PackedB, c: *mut f32, ldc: usize) {
    // SAFETY: the caller's contract.
    unsafe { rows(r0, r1, a, bp.view(), 0, panels(bp.n), c, ldc, r0, None) };
}

/// [`matmul_range`] for an unpacked `b`: the block starting at row 0 packs `b` into `scratch`
/// as it goes (so a run must compute its first block first); later blocks read `scratch`.
///
/// # Safety
/// As [`matmul_packing`], for rows `r0..r1 ≤ m` with `c` as in [`matmul_range`]; `scratch`
/// holds `b` packed whenever `r0 > 0`.
pub unsafe fn matmul_range_packing(
    r0: usize,
    r1: usize,
    a: Operand,
    b: Operand,
    scratch: &mut PackedB,
    c: *mut f32,
    ldc: usize,
) {
    let (pv, np) = (scratch.view_mut(), panels(scratch.n));
    // SAFETY: the caller's contract.
    unsafe { rows(r0, r1, a, pv, 0, np, c, ldc, r0, (r0 == 0).then_some(b)) };
}

/// 64-byte-aligned stack space for one packed block of `A` (left uninitialized: [`pack_a`]
/// writes every element the kernel reads).
#[repr(C, align(64))]
struct ABlock([MaybeUninit<f32>; MC * KC]);

/// Rows `r0..r1` × panels `p0..p1` of `C` (`c` points at row `c0`), in row blocks of at most
/// [`MC`]; with `pack`, the first row block packs each `K` block of those panels just before
/// using it.
#[allow(clippy::too_many_arguments)]
unsafe fn rows(
    r0: usize,
    r1: usize,
    a: Operand,
    pv: Panels,
    p0: usize,
    p1: usize,
    c: *mut f32,
    ldc: usize,
    c0: usize,
    pack: Option<Operand>,
) {
    let mut ab = ABlock([MaybeUninit::uninit(); MC * KC]);
    let ap = ab.0.as_mut_ptr().cast::<f32>();
    let n = pv.n;
    let mut ic = r0;
    while ic < r1 {
        let mc = MC.min(r1 - ic);
        for (k0, kc) in k_blocks(pv.k) {
            if let Some(b) = pack.filter(|_| ic == r0) {
                // SAFETY: this call owns panels p0..p1 (the callers' contracts).
                unsafe { pack_block(b, pv, k0, kc, p0, p1) };
            }
            // A row-major `a` whose rows spread over L1's sets is read in place; else packed.
            // SAFETY: row ic, column k0 is inside `a`.
            let first = unsafe { a.ptr.add(ic * a.rs + k0 * a.cs) };
            let (at, lda) = if direct_a(a, first, kc) {
                (first, a.rs)
            } else {
                // SAFETY: rows ic..ic+mc and columns k0..k0+kc are inside `a`.
                unsafe { pack_a(a, ic, mc, k0, kc, ap) };
                (ap.cast_const(), KC)
            };
            for jp in p0..p1 {
                let bpan = pv.panel(k0, kc, jp);
                let w = NR.min(n - jp * NR);
                let tiles = mc.div_ceil(MR);
                for t in 0..tiles {
                    // A pre-packed `B` (a constant weight) comes from L3 or DRAM on its first
                    // use, in panels of 2·kc cache lines that cross pages, which the hardware
                    // prefetcher does not follow: each tile's kernel fetches its share of the
                    // next panel (contiguous after this one, also across K blocks) into L2,
                    // one line every few `k` steps.
                    let (l0, l1) = (t * 2 * kc / tiles, (t + 1) * 2 * kc / tiles);
                    let pf = Prefetch { p: bpan.wrapping_add(kc * NR + l0 * 16), lines: l1 - l0 };
                    let h = MR.min(mc - t * MR);
                    prefetch_c(c, ldc, ic + t * MR - c0, jp * NR, h, w);
                    // SAFETY: tile (ic + t·MR, jp·NR) of h × w elements is inside `c` (from row c0).
                    unsafe {
                        let ct = c.add((ic + t * MR - c0) * ldc + jp * NR);
                        let op = Tile { kc, a: at.add(t * MR * lda), lda, b: bpan, c: ct, ldc, acc: k0 > 0, pf };
                        tile(op, h, w);
                    }
                }
            }
        }
        ic += mc;
    }
}

/// True when the kernel reads `a` in place instead of a packed copy: `a` is row-major and the
/// lines that an [`MR`]-row tile of `kc` columns starting at `first` reads spread over a 64-set
/// L1 data cache at most one line per set worse than the packed tile's (`MR · kc` contiguous
/// floats), so they stay in L1 while the tile's kernel runs beside `B`'s panel. Rows of 768 or
/// 1536 floats (6 lines in some sets against 5) read in place: 128 × 1536 × 384, 1 thread,
/// 153–155 → 160–163 GFLOP/s on a Sapphire Rapids-class Xeon. Strides that put all rows in the
/// same sets (multiples of 4 KiB) are packed.
fn direct_a(a: Operand, first: *const f32, kc: usize) -> bool {
    if a.cs != 1 {
        return false;
    }
    let mut per_set = [0u8; 64];
    let start = first as usize;
    // Rows go up in memory; a line two rows share counts once.
    let mut next = 0;
    for i in 0..MR {
        let row = start + i * a.rs * 4;
        for line in (row / 64).max(next)..=(row + kc * 4 - 1) / 64 {
            per_set[line % 64] = per_set[line % 64].saturating_add(1);
            next = line + 1;
        }
    }
    let packed = (MR * kc).div_ceil(16).div_ceil(64) as u8;
    per_set.iter().all(|&c| c <= packed + 1)
}

/// The smallest row stride (floats, `≥ k`, a multiple of 16) at which a row-major, 64-byte
/// aligned `A` of `k` columns is read in place by every `K` block of a product ([`direct_a`]),
/// for callers that lay out `A` themselves (dequantized weight tiles); `k` rounded up to 16
/// when no stride within 1024 floats more qualifies (then `A` is packed, as for any stride).
/// `k = 4096`: 4160 (rows 4 lines apart in L1's sets instead of all in the same ones).
pub fn in_place_stride(k: usize) -> usize {
    let base = k.next_multiple_of(16);
    (0..=64)
        .map(|i| base + 16 * i)
        .find(|&rs| {
            let a = Operand { ptr: std::ptr::null(), rs, cs: 1 };
            // The blocks the product runs, at their offsets within a 64-byte-aligned row.
            k_blocks(k).all(|(k0, kc)| direct_a(a, std::ptr::null::<f32>().wrapping_add(k0), kc))
        })
        .unwrap_or(base)
}

/// Prefetch for writing the `h × w` tile of `C` at row `i`, column `j`.
#[inline(always)]
fn prefetch_c(c: *mut f32, ldc: usize, i: usize, j: usize, h: usize, w: usize) {
    #[cfg(target_arch = "x86_64")]
    for r in 0..h {
        let p = c.wrapping_add((i + r) * ldc + j);
        // SAFETY: a prefetch is only a hint.
        unsafe {
            _mm_prefetch::<_MM_HINT_ET0>(p.cast::<i8>());
            if w > 16 {
                _mm_prefetch::<_MM_HINT_ET0>(p.wrapping_add(16).cast::<i8>());
            }
        }
    }
}

/// Cache lines the micro-kernel prefetches into L2 while it runs: `lines` lines from `p`,
/// spread over its `k` steps. `p` may point past the packed storage (after the last panel):
/// a prefetch never faults.
#[derive(Clone, Copy)]
struct Prefetch {
    p: *const f32,
    lines: usize,
}

impl Prefetch {
    /// The lines spread over a kernel's `kc` steps: [`Spread::step`] every step, then
    /// [`Spread::rest`].
    #[inline(always)]
    fn spread(self, kc: usize) -> Spread {
        let every = kc.checked_div(self.lines).map_or(usize::MAX, |e| e.max(1));
        Spread { every, countdown: 1, next: self.p, end: self.p.wrapping_add(self.lines * 16) }
    }
}

/// A [`Prefetch`] in progress: one line every `every` steps.
struct Spread {
    every: usize,
    countdown: usize,
    next: *const f32,
    end: *const f32,
}

impl Spread {
    /// One `k` step: the next line when its turn has come.
    #[inline(always)]
    fn step(&mut self) {
        self.countdown -= 1;
        if self.countdown == 0 {
            self.countdown = self.every;
            self.one();
        }
    }

    /// The lines left (more lines than steps: a tile or two of rows), in one go.
    #[inline(always)]
    fn rest(&mut self) {
        while self.next < self.end {
            self.one();
        }
    }

    #[inline(always)]
    fn one(&mut self) {
        if self.next < self.end {
            #[cfg(target_arch = "x86_64")]
            // SAFETY: a prefetch is only a hint and never faults.
            unsafe {
                _mm_prefetch::<_MM_HINT_T1>(self.next.cast::<i8>())
            };
            self.next = self.next.wrapping_add(16);
        }
    }
}

/// One micro-kernel call's operands: `kc` steps over `a` (rows at stride `lda`) and `b` (a
/// 64-byte-aligned panel of `kc · NR` floats), into `c` (rows at stride `ldc`), overwriting it
/// or accumulating into it (`acc`), prefetching `pf` on the way.
#[derive(Clone, Copy)]
struct Tile {
    kc: usize,
    a: *const f32,
    lda: usize,
    b: *const f32,
    c: *mut f32,
    ldc: usize,
    acc: bool,
    pf: Prefetch,
}

/// Pack rows `i0..i0+mc`, columns `k0..k0+kc` of `a` into `MR`-row tiles of [`MR`] × [`KC`]
/// floats: row `i` of a tile at offset `i · KC` (a constant, so the kernel addresses each row
/// by displacement), `kc` floats each. Row-major `a` packs by plain row copies. Rows of a last
/// partial tile past `mc` are left unwritten: the kernel reads only `h` rows.
///
/// # Safety
/// `a` addresses those elements; `dst` has room for `ceil(mc / MR) · MR · KC` floats.
unsafe fn pack_a(a: Operand, i0: usize, mc: usize, k0: usize, kc: usize, dst: *mut f32) {
    // SAFETY (whole body): reads stay in rows i0..i0+mc, columns k0..k0+kc of `a`; writes stay
    // in the first kc floats of rows of `dst`'s tiles.
    unsafe {
        let first = a.ptr.add(i0 * a.rs + k0 * a.cs);
        if a.cs == 1 {
            for i in 0..mc {
                std::ptr::copy_nonoverlapping(first.add(i * a.rs), dst.add(i * KC), kc);
            }
        } else {
            // Transposed `a` (contiguous along `M`): 16 × 16 register transposes; bands of 16
            // rows keep their destination rows in L1. Edges and other strides element-wise.
            for i0 in (0..mc).step_by(16) {
                let i1 = (i0 + 16).min(mc);
                let mut p = 0;
                if a.rs == 1 && i1 - i0 == 16 {
                    while p + 16 <= kc {
                        transpose16(first.add(p * a.cs + i0), a.cs, dst.add(i0 * KC + p), KC);
                        p += 16;
                    }
                }
                for p in p..kc {
                    let col = first.add(p * a.cs);
                    for i in i0..i1 {
                        *dst.add(i * KC + p) = *col.add(i * a.rs);
                    }
                }
            }
        }
    }
}

/// `dst[c · ds + r] = src[r · ss + c]` for a 16 × 16 block of f32 (rows of `src` and `dst`
/// contiguous): three rounds of in-register shuffles (32-bit, 64-bit, then 128-bit lanes).
///
/// # Safety
/// `src` addresses 16 rows of 16 readable floats at stride `ss`, `dst` 16 rows of 16 writable
/// floats at stride `ds`; [`available`] (AVX-512F: one 16-lane pass; AVX2: four 8 × 8 blocks).
#[cfg(target_arch = "x86_64")]
pub(crate) unsafe fn transpose16(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
    // SAFETY: the caller's contract ([`available`]: AVX-512F, else AVX2).
    unsafe {
        if wide() {
            transpose16_avx512(src, ss, dst, ds);
        } else {
            // Block (r, c) of the destination is block (c, r) of the source, transposed.
            for (r, c) in [(0, 0), (0, 8), (8, 0), (8, 8)] {
                transpose8_avx2(src.add(c * ss + r), ss, dst.add(r * ds + c), ds);
            }
        }
    }
}

/// [`transpose16`] of an 8 × 8 block in ymm registers: pairs of rows interleaved
/// (`vunpcklps` / `vunpckhps`), 4-row groups gathered by `vshufps`, then 128-bit halves swapped
/// (`vperm2f128`).
///
/// # Safety
/// As [`transpose16`] for 8 × 8; AVX2 is available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn transpose8_avx2(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        let r: [__m256; 8] = std::array::from_fn(|i| _mm256_loadu_ps(src.add(i * ss)));
        // t[2g] = rows 2g, 2g + 1 interleaved from columns 0, 1 (| 4, 5), t[2g + 1] from 2, 3.
        let t: [__m256; 8] = std::array::from_fn(|i| {
            let (a, b) = (r[i / 2 * 2], r[i / 2 * 2 + 1]);
            if i % 2 == 0 { _mm256_unpacklo_ps(a, b) } else { _mm256_unpackhi_ps(a, b) }
        });
        // s[4h + c] = column c (| c + 4) of rows 4h .. 4h + 4.
        let s: [__m256; 8] = std::array::from_fn(|i| {
            let (h, c) = (i / 4, i % 4);
            let (a, b) = (t[4 * h + c / 2], t[4 * h + 2 + c / 2]);
            if c % 2 == 0 { _mm256_shuffle_ps::<0x44>(a, b) } else { _mm256_shuffle_ps::<0xee>(a, b) }
        });
        for c in 0..4 {
            _mm256_storeu_ps(dst.add(c * ds), _mm256_permute2f128_ps::<0x20>(s[c], s[4 + c]));
            _mm256_storeu_ps(dst.add((c + 4) * ds), _mm256_permute2f128_ps::<0x31>(s[c], s[4 + c]));
        }
    }
}

/// [`transpose16`] on AVX-512.
///
/// # Safety
/// As [`transpose16`]; AVX-512F is available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn transpose16_avx512(src: *const f32, ss: usize, dst: *mut f32, ds: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        let r: [__m512; 16] = std::array::from_fn(|i| _mm512_loadu_ps(src.add(i * ss)));
        // Within each 128-bit lane: 4 × 4 transposes of row groups 4g..4g+4, giving for column
        // c of the lane the group's 4 values.
        let (lo, hi) = (|a, b| _mm512_unpacklo_ps(a, b), |a, b| _mm512_unpackhi_ps(a, b));
        let pd = |f: unsafe fn(__m512d, __m512d) -> __m512d, a: __m512, b: __m512| {
            _mm512_castpd_ps(f(_mm512_castps_pd(a), _mm512_castps_pd(b)))
        };
        let mut u = [[_mm512_setzero_ps(); 4]; 4]; // u[g][c]
        for g in 0..4 {
            let t0 = lo(r[4 * g], r[4 * g + 1]);
            let t1 = hi(r[4 * g], r[4 * g + 1]);
            let t2 = lo(r[4 * g + 2], r[4 * g + 3]);
            let t3 = hi(r[4 * g + 2], r[4 * g + 3]);
            u[g] = [
                pd(_mm512_unpacklo_pd, t0, t2),
                pd(_mm512_unpackhi_pd, t0, t2),
                pd(_mm512_unpacklo_pd, t1, t3),
                pd(_mm512_unpackhi_pd, t1, t3),
            ];
        }
        // Across lanes: output row 4L + c takes lane L of u[0][c], u[1][c], u[2][c], u[3][c].
        #[allow(clippy::needless_range_loop)] // `c` indexes the second dim of all four rows
        for c in 0..4 {
            let v0 = _mm512_shuffle_f32x4::<0x44>(u[0][c], u[1][c]);
            let v1 = _mm512_shuffle_f32x4::<0xEE>(u[0][c], u[1][c]);
            let v2 = _mm512_shuffle_f32x4::<0x44>(u[2][c], u[3][c]);
            let v3 = _mm512_shuffle_f32x4::<0xEE>(u[2][c], u[3][c]);
            _mm512_storeu_ps(dst.add(c * ds), _mm512_shuffle_f32x4::<0x88>(v0, v2));
            _mm512_storeu_ps(dst.add((4 + c) * ds), _mm512_shuffle_f32x4::<0xDD>(v0, v2));
            _mm512_storeu_ps(dst.add((8 + c) * ds), _mm512_shuffle_f32x4::<0x88>(v1, v3));
            _mm512_storeu_ps(dst.add((12 + c) * ds), _mm512_shuffle_f32x4::<0xDD>(v1, v3));
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) unsafe fn transpose16(_: *const f32, _: usize, _: *mut f32, _: usize) {
    unreachable!("sgemm runs only where available() is true")
}

/// The micro-kernel's signature: `(operands, last-vector mask)`.
type KernelFn = unsafe fn(Tile, u16);

/// The kernel for `h` rows and `nv` vectors of 16 columns.
fn kernel_for(nv: usize, h: usize) -> KernelFn {
    macro_rules! by_rows {
        ($nv:literal; $($h:literal)*) => {
            match h { $($h => kernel::<$nv, $h> as KernelFn,)* _ => unreachable!("h ≤ MR") }
        };
    }
    if nv == 2 { by_rows!(2; 1 2 3 4 5 6 7 8 9 10 11 12) } else { by_rows!(1; 1 2 3 4 5 6 7 8 9 10 11 12) }
}

/// One `h × w` tile of `C` (`h ≤ MR`, `w ≤ NR`), straight into `C`: partial tiles run a kernel
/// for `h` rows and mask the columns past `w`.
unsafe fn tile(op: Tile, h: usize, w: usize) {
    if !wide() {
        // SAFETY: the caller's contract; `available()` was checked before packing.
        unsafe { tile_avx2(op, h, w) };
        return;
    }
    let rem = w % 16;
    let mask = if rem == 0 { u16::MAX } else { ((1u32 << rem) - 1) as u16 };
    // SAFETY: the caller's contract; `available()` was checked before packing.
    unsafe { if h == MR && w == NR { kernel::<2, MR>(op, mask) } else { kernel_for(w.div_ceil(16), h)(op, mask) } }
}

/// Rows of the AVX2 micro-kernel's sub-tile (two ymm vectors of 8 columns per row: 12
/// accumulators, two `B` loads and one broadcast of the 16 registers).
const MR_AVX2: usize = 6;

/// [`tile`] on AVX2: the `h × w` tile as sub-tiles of at most [`MR_AVX2`] rows × 16 columns,
/// each a [`kernel_avx2`] call over the same `kc` steps (the 16-column half of the panel's
/// rows, 64 bytes at stride [`NR`]), the tile's `B` prefetch shared out among them.
unsafe fn tile_avx2(op: Tile, h: usize, w: usize) {
    let (hs, ws) = (h.div_ceil(MR_AVX2), w.div_ceil(16));
    let (parts, lines) = (hs * ws, op.pf.lines);
    for s in 0..parts {
        let (r0, v) = (s / ws * MR_AVX2, s % ws);
        let (hh, cols) = (MR_AVX2.min(h - r0), 16.min(w - 16 * v));
        let (l0, l1) = (s * lines / parts, (s + 1) * lines / parts);
        let sub = Tile {
            a: op.a.wrapping_add(r0 * op.lda),
            b: op.b.wrapping_add(16 * v),
            c: op.c.wrapping_add(r0 * op.ldc + 16 * v),
            pf: Prefetch { p: op.pf.p.wrapping_add(16 * l0), lines: l1 - l0 },
            ..op
        };
        macro_rules! by_rows {
            ($($h:literal)*) => {
                match hh { $($h => kernel_avx2::<$h>(sub, cols),)* _ => unreachable!("h ≤ MR_AVX2") }
            };
        }
        // SAFETY: the sub-tile lies inside the caller's tile; AVX2 + FMA (`available`, not `wide`).
        unsafe { by_rows!(1 2 3 4 5 6) }
    }
}

/// The AVX2 micro-kernel: `C[0..H, 0..cols] (+)= Σ_p a[i·lda + p] · b[p·NR + j]` (`cols ≤
/// 16`; columns past `cols` masked on load and store), one broadcast-FMA per (row, 8 columns)
/// per `k` in [`kernel`]'s order, so the same bits; `pf`'s lines prefetched into L2 as there.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn kernel_avx2<const H: usize>(op: Tile, cols: usize) {
    let Tile { kc, a, lda, b, c, ldc, acc, pf } = op;
    // Lane `l` of vector `v` is column `8v + l`: kept where it is below `cols`.
    let lane =
        |v: i32| _mm256_setr_epi32(8 * v, 8 * v + 1, 8 * v + 2, 8 * v + 3, 8 * v + 4, 8 * v + 5, 8 * v + 6, 8 * v + 7);
    let mask = [0, 1].map(|v| _mm256_cmpgt_epi32(_mm256_set1_epi32(cols as i32), lane(v)));
    let whole = cols == 16;
    // SAFETY (whole body): `a` holds H rows of kc floats at stride lda, `b` kc rows of 16
    // floats at stride NR (32-byte aligned), `c` H rows of `cols` writable floats at stride
    // `ldc` (the caller's contract); masked lanes are neither read nor written.
    unsafe {
        let mut r = [[_mm256_setzero_ps(); 2]; H];
        if acc {
            for (i, ri) in r.iter_mut().enumerate() {
                for (v, x) in ri.iter_mut().enumerate() {
                    let p = c.add(i * ldc + 8 * v);
                    *x = if whole { _mm256_loadu_ps(p) } else { _mm256_maskload_ps(p, mask[v]) };
                }
            }
        }
        let (mut a, mut b) = (a, b);
        let mut pf = pf.spread(kc);
        for _ in 0..kc {
            pf.step();
            let bv = [_mm256_load_ps(b), _mm256_load_ps(b.add(8))];
            for (i, ri) in r.iter_mut().enumerate() {
                let ai = _mm256_broadcast_ss(&*a.add(i * lda));
                for (v, x) in ri.iter_mut().enumerate() {
                    *x = _mm256_fmadd_ps(ai, bv[v], *x);
                }
            }
            a = a.add(1);
            b = b.add(NR);
        }
        pf.rest();
        for (i, ri) in r.iter().enumerate() {
            for (v, x) in ri.iter().enumerate() {
                let p = c.add(i * ldc + 8 * v);
                if whole {
                    _mm256_storeu_ps(p, *x);
                } else {
                    _mm256_maskstore_ps(p, mask[v], *x);
                }
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn kernel_avx2<const H: usize>(_: Tile, _: usize) {
    unreachable!("sgemm runs only where available() is true")
}

/// The micro-kernel: `C[0..H, 0..16·NV] (+)= Σ_p a[i·lda + p] · b[p·NR + j]`, the last vector
/// of each row loaded and stored under `mask`. It prefetches `pf`'s lines into L2 one every
/// `kc / lines` steps: issued in one burst before the tile, 70 prefetches of a panel coming
/// from DRAM stalled on the line-fill buffers (`perf annotate`: 6% of MiniLM-L6 b1 on a
/// Sapphire Rapids-class Xeon).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn kernel<const NV: usize, const H: usize>(op: Tile, mask: u16) {
    let Tile { kc, a, lda, b, c, ldc, acc, pf } = op;
    // SAFETY (whole body): `a` holds H rows of kc floats at stride lda, `b` kc · NR 64-byte-aligned floats, `c`
    // H rows of 16 · (NV − 1) + popcount(mask) writable floats at stride `ldc` (the caller's
    // contract).
    unsafe {
        let mut r = [[_mm512_setzero_ps(); NV]; H];
        if acc {
            for (i, ri) in r.iter_mut().enumerate() {
                for (v, x) in ri.iter_mut().enumerate() {
                    let p = c.add(i * ldc + v * 16);
                    *x = if v + 1 == NV { _mm512_maskz_loadu_ps(mask, p) } else { _mm512_loadu_ps(p) };
                }
            }
        }
        let (mut a, mut b) = (a, b);
        let mut pf = pf.spread(kc);
        for _ in 0..kc {
            pf.step();
            let mut bv = [_mm512_setzero_ps(); NV];
            for (v, x) in bv.iter_mut().enumerate() {
                *x = _mm512_load_ps(b.add(v * 16));
            }
            for (i, ri) in r.iter_mut().enumerate() {
                let ai = _mm512_set1_ps(*a.add(i * lda));
                for (v, x) in ri.iter_mut().enumerate() {
                    *x = _mm512_fmadd_ps(ai, bv[v], *x);
                }
            }
            a = a.add(1);
            b = b.add(NR);
        }
        pf.rest();
        for (i, ri) in r.iter().enumerate() {
            for (v, x) in ri.iter().enumerate() {
                let p = c.add(i * ldc + v * 16);
                if v + 1 == NV {
                    _mm512_mask_storeu_ps(p, mask, *x);
                } else {
                    _mm512_storeu_ps(p, *x);
                }
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn kernel<const NV: usize, const H: usize>(_: Tile, _: u16) {
    unreachable!("sgemm runs only where available() is true")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stride `in_place_stride` picks is read in place for every `K` block (a 4 KiB
    /// multiple, where all rows share L1 sets, is moved off), and is the row length when that
    /// already qualifies.
    #[test]
    fn in_place_stride_is_read_in_place() {
        assert!(!direct_a(Operand { ptr: std::ptr::null(), rs: 4096, cs: 1 }, std::ptr::null(), KC));
        for k in [100, 576, 896, 1536, 4096, 4864, 11008] {
            let rs = in_place_stride(k);
            assert!(rs >= k && rs.is_multiple_of(16) && rs < k + 1024, "k {k}: {rs}");
            let a = Operand { ptr: std::ptr::null(), rs, cs: 1 };
            // Each block as the product runs it: its length, from its column in the row.
            for (k0, kc) in k_blocks(k) {
                assert!(direct_a(a, std::ptr::null::<f32>().wrapping_add(k0), kc), "k {k}: block at {k0}");
            }
        }
        assert_eq!(in_place_stride(576), 576);
        assert_ne!(in_place_stride(4096), 4096);
        // 896 runs blocks of 299 / 299 / 298 columns, which rows of 896 floats fit in no set
        // bound (the check once used blocks of 384 and 128, which do).
        assert_ne!(in_place_stride(896), 896);
    }

    /// `A` read in place (`direct_a`: a tile of whole contiguous rows) and `A` packed (stride
    /// 1024: all rows in the same L1 sets; column-major) give the same f32 FMA sequence, so
    /// bit-identical products, and match an f64 reference. K 389 runs two K blocks, each tile
    /// reading half rows (strides 389 and 400 go either way).
    #[test]
    fn a_read_in_place_equals_a_packed() {
        if !available() {
            eprintln!("SKIP a_read_in_place: no AVX-512 on this CPU");
            return;
        }
        let (m, n) = (37usize, 45usize);
        for (k, rs) in [(200usize, 200usize), (389, 389), (389, 400), (200, 1024)] {
            let val = |i: usize, p: usize| ((i * 31 + p * 17) % 101) as f32 / 50.0 - 1.0;
            let mut a = vec![0f32; m * rs];
            let mut at = vec![0f32; k * m];
            for i in 0..m {
                for p in 0..k {
                    a[i * rs + p] = val(i, p);
                    at[p * m + i] = val(i, p);
                }
            }
            let b: Vec<f32> = (0..k * n).map(|i| ((i * 7) % 53) as f32 / 26.0 - 1.0).collect();
            let mut bp = PackedB::new(k, n);
            let row = Operand { ptr: a.as_ptr(), rs, cs: 1 };
            let col = Operand { ptr: at.as_ptr(), rs: 1, cs: m };
            let kc = k.div_ceil(k.div_ceil(KC));
            let direct = direct_a(row, a.as_ptr(), kc);
            assert!(direct == (rs == kc) || rs != kc && rs != 1024, "stride {rs}: direct {direct}");
            let (mut c1, mut c2) = (vec![0f32; m * n], vec![0f32; m * n]);
            // SAFETY: `b` is k × n row-major; `a` / `at` hold m × k at the given strides; the
            // outputs are m × n.
            unsafe {
                pack_b(Operand { ptr: b.as_ptr(), rs: n, cs: 1 }, &mut bp);
                matmul(m, row, &bp, c1.as_mut_ptr(), n);
                matmul(m, col, &bp, c2.as_mut_ptr(), n);
            }
            assert_eq!(c1, c2, "k {k} stride {rs}");
            for i in 0..m {
                for j in 0..n {
                    let want: f64 = (0..k).map(|p| val(i, p) as f64 * b[p * n + j] as f64).sum();
                    assert!((c1[i * n + j] as f64 - want).abs() <= 1e-4 * (1.0 + want.abs()), "({i}, {j})");
                }
            }
        }
    }

    /// `share_constants` moves every pack of at least 1 MiB in total into one arena (the
    /// executor-level test in `tests/dot.rs` would pass even if it silently did nothing), the
    /// packed floats unchanged; a set below 1 MiB keeps its own storage.
    #[test]
    fn share_constants_moves_packs_into_one_arena() {
        if !available() {
            eprintln!("SKIP share_constants: no AVX-512 on this CPU");
            return;
        }
        let pack = |k: usize, n: usize, seed: f32| {
            let b: Vec<f32> = (0..k * n).map(|i| (i % 97) as f32 * 0.01 + seed).collect();
            let mut p = PackedB::new(k, n);
            // SAFETY: `b` holds k × n row-major floats.
            unsafe { pack_b(Operand { ptr: b.as_ptr(), rs: n, cs: 1 }, &mut p) };
            p
        };
        let floats = |p: &PackedB| {
            // SAFETY: `base` addresses `packed_len` floats.
            unsafe { std::slice::from_raw_parts(p.base(), packed_len(p.k, p.n)) }.to_vec()
        };
        let (mut a, mut b) = (pack(600, 520, 0.5), pack(300, 70, -1.0));
        let (fa, fb) = (floats(&a), floats(&b));
        share_constants(&mut [&mut a, &mut b]);
        let (Store::Arena { arena: x, off: 0 }, Store::Arena { arena: y, off }) = (&a.store, &b.store) else {
            panic!("not moved into an arena")
        };
        assert!(Arc::ptr_eq(x, y) && *off == packed_len(600, 520).next_multiple_of(16));
        assert_eq!((floats(&a), floats(&b)), (fa, fb));
        assert_eq!(a.base() as usize % 64, 0, "panels must stay 64-byte aligned");
        let mut small = pack(64, 64, 2.0);
        share_constants(&mut [&mut small]);
        assert!(matches!(small.store, Store::Own { .. }));
    }
}
