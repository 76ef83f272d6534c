//! Exact-mode decode (`M = 1`) for Q4_0, Q4_1, Q8_0, Q4_K, Q5_K and Q6_K: `y[j] = Σ_i
//! dequant(W[j])[i] · x[i]` in f32 (only the summation order, and for the legacy 4-bit schemes
//! the fused rounding of `d q + m`, differ from the reference, so results agree with it up to
//! f32 rounding). With VNNI, Q4_0 / Q4_1 / Q8_0 run `bfp`'s integer kernel instead and come
//! here only for a row it does not convert (non-finite, or a block below its range).
//!
//! Q4_0 / Q4_1, per 32-weight block and row: the block's 16 possible values `d q + m` (`d (q -
//! 8)`) are formed by one FMA on a 0..15 vector, then looked up by nibble with `vpermps` (it
//! reads only the low 4 bits of each lane, so no mask is needed) and multiplied into the
//! accumulator by two FMAs; with the zero-extension of the 16 packed bytes that is 7 vector
//! µops, 3 of them on the shuffle port. (Scaling the two half-block products by `d` and adding
//! `m · Σx` took 8 and a dependent chain; as a scalar chain per row, the compiler turned the `m`
//! reads into a 4-lane gather that a third of the kernel's SmolLM2 samples waited on.) Q8_0:
//! sign-extension, conversion, `d · (q0 · x0 + q1 · x1)`. A legacy block's f16 scales are read
//! as broadcast memory operands from a 65536-entry f16 → f32 table ([`f16_table`], as ggml's
//! `ggml_table_f32_f16`): two loads, no shuffle-port work. [`ROWS`] weight rows share each
//! activation load; the rows [`prefetch_rows`] ahead are prefetched; the horizontal sum happens
//! once per row.
//!
//! Q4_K and Q5_K (`w = d scale_j q - dmin min_j` per 32-weight sub-block) use the per-block
//! activation sums from [`block_sums`] (computed once per call) for the `min` term; Q5_K adds
//! its fifth bit as a masked `+ 16.0` on the looked-up values. Q6_K (`w = d sc_g (q - 32)`,
//! sub-blocks of 16): the 6-bit `q` of 64 weights are assembled as bytes in one register,
//! widened 16 at a time, and `-32 d sc_g Σx_g` uses per-16 activation sums.

/// Weight rows processed together.
const ROWS: usize = 4;
/// How far ahead of the rows being multiplied their successors are prefetched into L1 (two
/// groups: a group of 4 rows of K = 576 takes ~250 cycles, less than one L3 miss). Measured on
/// SmolLM2 decode (`rlx generate --profile`, `dequant_matmul` ms per token, 1 thread, five
/// interleaved rounds): this 14.9 median; four groups ahead into L2 (`T1`) 18.1, although that
/// was faster on a 1 × 4096 × 4096 product whose weights stay in L3 between runs; no prefetch
/// 20.5; one group ahead 15.0; three or four groups ahead into L1 17.1. Rows of 4 KiB or more
/// in a group go one group ahead ([`prefetch_rows`]).
pub(super) const PREFETCH_ROWS: usize = 2 * ROWS;
/// Groups ahead that [`prefetch_ahead`] also prefetches into L2 (`T1`) when a group's rows hold
/// 4 KiB or more. An L1 prefetch holds one of the core's few line-fill buffers until its line
/// arrives, which caps how many DRAM reads are in flight; L2 prefetches queue in the larger L2
/// miss queue, so the L1 prefetch one group ahead then finds its line in L2. 1 × 4096 × 4096
/// fast-mode products with their weights in DRAM (`qmatmul_bench 1 10 Q4_0,Q4_K,Q8_0 1 fast
/// 64`, 1 core, interleaved rounds): Q4_0 0.83–0.89 → 0.78–0.84 ms, Q4_K 0.78–0.85 → 0.72–0.75,
/// Q8_0 1.25–1.32 → 1.24–1.28; four or eight groups ahead no better. With the weights in L3
/// between runs (1 copy) it costs up to 10% (Q8_0 0.64–0.66 → 0.69–0.72 ms): decode of a model
/// with rows this long reads its weights from DRAM. An L3 hint (`T2`) measured between the two.
const FAR_GROUPS: usize = 2;
/// Bytes ahead (rounded up to whole rows) that [`prefetch_ahead`] prefetches into L2 when a
/// group's rows hold less than 4 KiB: the short rows of a small model lie back to back, so this
/// is one stream [`FAR_BYTES_SHORT`] ahead of the reads. Session 26, 4 KiB: `qmatmul_bench 1 20 <type> 1 fast 400 576 1536`
/// (DRAM, two rounds): Q4_0 0.063 → 0.059, Q4_1 0.071 → 0.065, Q8_0 0.118 → 0.110 ms; 1536 × 576
/// and 576 × 576 8–10% faster; equal within the noise with 1 copy (cache); 2 KiB ahead measured
/// between, 8 and 16 KiB worse than none on two of three shapes. In SmolLM2 `--fast` decode
/// (`dequant_matmul` over 127 steps, three interleaved rounds) 1 thread 1470–1654 → 1392–1518
/// ms, 2 threads 725–795 → 705–715: the same direction, but inside that host's run-to-run
/// spread (two identical builds differed by 10% that hour).
///
/// Never less than one group beyond the L1 prefetch (rows over 341 bytes: SmolLM2's K = 1536
/// and its Q8_0 head), which finds its lines in L2 only when the L2 stream leads it; before,
/// rows of 960 bytes had the L2 stream 4 800 bytes and the L1 prefetch 7 680 bytes ahead. On
/// an AMD EPYC (Zen 4) host, session 27, `qmatmul_bench 1 20 Q4_1 1 exact 200 1536 576`, four
/// interleaved rounds: 0.068–0.077 → 0.043–0.050 ms (`fast` alike); `1 10 Q8_0 1 exact 4 576
/// 49152` (the head) 2.27–2.36 → 2.13–2.14; K = 576 rows (360 bytes) keep 4 320 bytes. 16 KiB
/// for every row length measured there: the head 1.9 ms, but 576 × 576 0.014 → 0.024 ms.
/// SmolLM2 exact decode there (`rlx generate --profile`, generation's `dequant_matmul` ms,
/// interleaved): 1 thread, six rounds, median 1113 → 1036; 2 threads, eight rounds, 856 → 866.
///
/// 8 KiB since session 30, on an AMD EPYC Zen 5 host whose one core streams 35–45 GB/s (more
/// bytes in flight needed to cover the same latency): `qmatmul_bench 1 20 <type> 1 <mode>
/// <copies> <K> <N>`, two interleaved rounds, 4 KiB → 8 KiB: the Q8_0 head (`Q8_0 … 4 576
/// 49152`) fast 1.02–1.25 → 0.92–0.97 ms, exact 0.97–1.00 → 0.92–0.94; Q4_1 from DRAM (400
/// copies) 576 × 1536 fast 0.0219–0.0224 → 0.0178–0.0189, exact 0.0227–0.0232 → 0.0188–0.0190,
/// 576 × 576 fast 0.0086–0.0088 → 0.0068–0.0072; 1536 × 576 and the L3-resident 576 × 576 (64
/// copies) equal within the noise. 16 KiB: the head 0.97–1.16, 576 × 1536 0.0165–0.0175. In
/// SmolLM2 decode (generation's `dequant_matmul` ms over 127 steps, 1 thread, three interleaved
/// rounds, 4 / 8 / 16 KiB): fast 457–506 / 448–496 / 444–503, exact 438–484 / 434–483 /
/// 437–486 — the same direction, inside the run-to-run spread.
const FAR_BYTES_SHORT: usize = 8192;

/// Rows ahead to prefetch for rows of `row_bytes`: [`PREFETCH_ROWS`], or one group when a
/// group's rows hold 4 KiB or more. 1 × 4096 × 4096 products with their weights in DRAM
/// (`qmatmul_bench 1 10 Q4_1,Q4_0,Q8_0,Q4_K 1 fast,exact 64`, 1 core, two interleaved rounds):
/// one group ahead instead of two, fast 0.96 → 0.88 ms (Q4_1), 0.87 → 0.83 (Q4_0), 1.32 →
/// 1.26 (Q8_0), 0.84 → 0.81 (Q4_K), exact 1–3% faster; on SmolLM2 (rows of 360 bytes) within
/// the noise either way.
#[inline(always)]
pub(super) fn prefetch_rows(row_bytes: usize) -> usize {
    if row_bytes * ROWS >= 4096 { ROWS } else { PREFETCH_ROWS }
}

/// Prefetch the bytes `from .. to` of `w` (clamped to it) into L1, one line at a time: the
/// weight rows [`prefetch_rows`] ahead of a decode kernel's rows, in one burst per group of
/// rows (this kernel; the fast mode's first rows in `int8::drive`).
#[inline(always)]
pub(super) fn prefetch(w: &[u8], from: usize, to: usize) {
    #[cfg(target_arch = "x86_64")]
    for off in (from.min(w.len())..to.min(w.len())).step_by(64) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: `off < w.len()`; a prefetch changes nothing architecturally.
        unsafe { _mm_prefetch::<_MM_HINT_T0>(w.as_ptr().add(off).cast()) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (w, from, to);
}

/// Bytes ahead of a row that [`prefetch_ahead`] prefetches into L2 (see [`FAR_GROUPS`] and
/// [`FAR_BYTES_SHORT`]). (The same in this module's exact kernel, as a burst per group: no
/// gain, `qmatmul_bench 1 20 <type> 1 exact 400 <K> <N>` Q4_0 3–8% slower, Q8_0 mixed.)
#[inline(always)]
fn far_bytes(row_bytes: usize) -> usize {
    if row_bytes * ROWS >= 4096 {
        FAR_GROUPS * ROWS * row_bytes
    } else {
        FAR_BYTES_SHORT.max((prefetch_rows(row_bytes) + ROWS) * row_bytes).next_multiple_of(row_bytes)
    }
}

/// How far ahead of a row [`prefetch_ahead`] reaches for rows of one length: the byte offsets
/// of the row [`prefetch_rows`] rows on (into L1) and of [`far_bytes`] on (into L2). Built once
/// per kernel call: `far_bytes` divides by the row length, and in the prefetch of every block
/// group those divisions cost SmolLM2's K = 576 products (18 blocks a row) measurable time.
#[derive(Clone, Copy)]
pub(super) struct Ahead {
    near: usize,
    far: usize,
}

impl Ahead {
    /// The distances for rows of `row_bytes` bytes.
    #[inline(always)]
    pub(super) fn new(row_bytes: usize) -> Ahead {
        Ahead { near: prefetch_rows(row_bytes) * row_bytes, far: far_bytes(row_bytes) }
    }

    /// The L1 distance of [`Ahead::new`] and no L2 prefetch: the AVX2 kernels', which run
    /// where the CPU has no AVX-512. On an AMD EPYC Zen 3 host (AVX2, one core streams 15–18
    /// GB/s) the L2 prefetch that the AVX-512 hosts (Zen 4 / Zen 5) gained from cost time:
    /// `qmatmul_bench 1 20 Q4_1 1 fast 200 <K> <N>`, three interleaved rounds, with → without:
    /// 1536 × 576 0.072–0.074 → 0.064–0.065 ms, 576 × 1536 0.058 → 0.049–0.050, the Q8_0 head
    /// (`1 5 Q8_0 1 fast 4 576 49152`) 2.90–2.98 → 2.12–2.19; exact mode 1536 × 576 0.089–0.090
    /// → 0.076–0.077, the others equal. (Zen 3's `prefetcht1` also fills L1, so the far lines
    /// take L1 fill buffers and space from the rows being read.) Exact mode: two rounds.
    #[inline(always)]
    pub(super) fn near_only(row_bytes: usize) -> Ahead {
        Ahead { near: prefetch_rows(row_bytes) * row_bytes, far: 0 }
    }
}

/// Prefetch into L1 the bytes `from .. to` past `p` of the row [`prefetch_rows`] rows after
/// the one at `p` (`ahead` = [`Ahead::new`] of the row length): the fast-mode decode kernels
/// (`int8`, `q8k`, `C == 1`) call it block by block, in step with their reads. Measured against
/// the burst of [`prefetch`] there: SmolLM2 `--fast` decode products, 1 thread, interleaved,
/// none 21.1–23.0, burst 17.2–22.5, block by block 15.9–19.6 ms per token; on a 1 × 4096 ×
/// 4096 product whose weights stay in L3 the burst was 20–50% slower, block by block about
/// equal to none. (Block by block in this module's exact kernel measured no better in-model
/// than its burst.) The same bytes are also prefetched into L2 further on: [`FAR_GROUPS`]
/// groups ahead for rows of 4 KiB or more per group, else [`FAR_BYTES_SHORT`] ahead.
///
/// # Safety
/// None needed for the prefetch itself (it never faults); `p` is a row pointer.
#[inline(always)]
pub(super) unsafe fn prefetch_ahead(p: *const u8, ahead: Ahead, from: usize, to: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _MM_HINT_T1, _mm_prefetch};
        let (q, q2) = (p.wrapping_add(ahead.near), p.wrapping_add(ahead.far));
        let mut off = from & !63;
        while off < to {
            // SAFETY: a prefetch reads nothing architecturally and never faults.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(q.wrapping_add(off).cast()) };
            if ahead.far != 0 {
                // SAFETY: as above.
                unsafe { _mm_prefetch::<_MM_HINT_T1>(q2.wrapping_add(off).cast()) };
            }
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, ahead, from, to);
}

/// `y[j]` for every weight row `j` of `w` (`y.len()` rows of `row_bytes`): `dot` on groups of
/// `R` row pointers, `dot1` on the last `y.len() % R` rows, each group's rows prefetched
/// [`prefetch_rows`] ahead into L1 as it runs ([`Ahead::near_only`]): the AVX2 decode kernels'
/// driver (`int8_avx2`, `bfp_avx2`).
///
/// # Safety
/// `w.len() == y.len() · row_bytes`; `dot` and `dot1` may be called on any row pointers of
/// `w` (their own contracts are the caller's).
#[inline(always)]
pub(super) unsafe fn row_groups<const R: usize>(
    w: &[u8],
    row_bytes: usize,
    y: &mut [f32],
    dot: impl Fn([*const u8; R]) -> [f32; R],
    dot1: impl Fn(*const u8) -> f32,
) {
    debug_assert_eq!(w.len(), y.len() * row_bytes);
    let wp = w.as_ptr();
    let full = y.len() / R * R;
    let ahead = Ahead::near_only(row_bytes);
    prefetch(w, R * row_bytes, prefetch_rows(row_bytes) * row_bytes);
    for j in (0..full).step_by(R) {
        let rows = std::array::from_fn(|r| wp.wrapping_add((j + r) * row_bytes));
        for &p in &rows {
            // SAFETY: a prefetch never faults.
            unsafe { prefetch_ahead(p, ahead, 0, row_bytes) };
        }
        y[j..j + R].copy_from_slice(&dot(rows));
    }
    for (j, yj) in y.iter_mut().enumerate().skip(full) {
        *yj = dot1(wp.wrapping_add(j * row_bytes));
    }
}

/// `f32` value of every f16 bit pattern (256 KiB; a model's scales use few distinct values, so
/// the lines read stay in L1).
pub(super) fn f16_table() -> &'static [f32] {
    static TABLE: std::sync::OnceLock<Box<[f32]>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| (0..=u16::MAX).map(|b| half::f16::from_bits(b).to_f32()).collect())
}

/// True when `ty`'s kernel reads [`block_sums`].
pub(super) fn needs_block_sums(ty: rlx_gguf::GgmlType) -> bool {
    use rlx_gguf::GgmlType as T;
    matches!(ty, T::Q4_K | T::Q5_K | T::Q6_K)
}

/// Elements per [`block_sums`] entry for `ty`.
pub(super) fn sum_len(ty: rlx_gguf::GgmlType) -> usize {
    if ty == rlx_gguf::GgmlType::Q6_K { 16 } else { 32 }
}

/// `out[b] = Σ x[len b .. len b + len]` (`x.len() == len · out.len()`, `len` 16 or 32).
pub(super) fn block_sums(x: &[f32], len: usize, out: &mut [f32]) {
    for (o, c) in out.iter_mut().zip(x.chunks_exact(len)) {
        let mut acc = [0f32; 8];
        for q in c.chunks_exact(8) {
            for l in 0..8 {
                acc[l] += q[l];
            }
        }
        *o = acc.iter().sum();
    }
}

/// A Q4_K / Q5_K block's 8 sub-block factors `(d · sc_j, dmin · m_j)` (the block starts
/// with `d`, `dmin` as f16, then the 12 bytes of 6-bit scales and mins).
///
/// Shared by the AVX-512 and the AVX2 kernels (inlined into both).
///
/// # Safety
/// AVX2, FMA, F16C; `p` points to a whole block.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) unsafe fn k4_scales(p: *const u8) -> (std::arch::x86_64::__m256, std::arch::x86_64::__m256) {
    use std::arch::x86_64::*;
    // SAFETY: 16 header bytes of the block (caller).
    let (hd, u) = unsafe {
        (
            _mm_cvtph_ps(_mm_cvtsi32_si128(p.cast::<i32>().read_unaligned())),
            crate::kernels::qmatmul::q8k::scales_mins_k4(p.add(4).cast::<[u8; 12]>().read_unaligned()),
        )
    };
    // Bytes 0..8: the 8 scales, 8..16: the 8 mins.
    let sm = _mm_set_epi32(u[3] as i32, u[2] as i32, u[1] as i32, u[0] as i32);
    let to_f = |v: __m128i| _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(v));
    let d = _mm256_broadcastss_ps(hd);
    let dmin = _mm256_broadcastss_ps(_mm_movehdup_ps(hd));
    (_mm256_mul_ps(d, to_f(sm)), _mm256_mul_ps(dmin, to_f(_mm_srli_si128::<8>(sm))))
}

#[cfg(target_arch = "x86_64")]
pub(super) use avx512::dot_rows;

#[cfg(target_arch = "x86_64")]
// The kernels index several per-row arrays with one row index.
#[allow(clippy::needless_range_loop)]
mod avx512 {
    use super::{ROWS, k4_scales, prefetch_rows};
    use rlx_gguf::GgmlType;
    use std::arch::x86_64::*;

    /// Block layouts (const parameters of the row kernels).
    /// `d f16, 16 bytes of nibble pairs`, `w = d (q - 8)`.
    const Q4_0: u8 = 0;
    /// `d f16, m f16, 16 bytes`, `w = d q + m`.
    const Q4_1: u8 = 1;
    /// `d f16, 32 i8`, `w = d q`.
    const Q8_0: u8 = 2;

    /// The dot products of `R` rows with `x` (`nb` blocks each); the last argument is
    /// [`super::f16_table`].
    type RowsFn<const R: usize> = unsafe fn([*const u8; R], usize, *const f32, *const f32, *const f32) -> [f32; R];

    /// `y[r] = Σ dequant(w row r) · x` for every row of `w` (`y.len()` rows of `row_bytes`).
    ///
    /// # Safety
    /// AVX-512F/BW/VL, AVX2, FMA and F16C must be available; `ty` satisfies
    /// `exact::has_decoder`; `w.len() == y.len() · row_bytes` with `row_bytes` =
    /// `x.len() / 32` blocks of `ty`; `xsum` holds [`super::block_sums`] of `x` (blocks of
    /// [`super::sum_len`]) when [`super::needs_block_sums`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    pub(in super::super) unsafe fn dot_rows(
        ty: GgmlType,
        w: &[u8],
        row_bytes: usize,
        x: &[f32],
        xsum: &[f32],
        y: &mut [f32],
    ) {
        debug_assert_eq!(w.len(), y.len() * row_bytes);
        debug_assert!(!super::needs_block_sums(ty) || xsum.len() == x.len() / super::sum_len(ty));
        if matches!(ty, GgmlType::Q5_0 | GgmlType::Q5_1) {
            for (j, yj) in y.iter_mut().enumerate() {
                // SAFETY: the features were detected (caller); row `j` is whole blocks.
                *yj = unsafe { super::super::exact::dot_row(ty, &w[j * row_bytes..(j + 1) * row_bytes], x) };
            }
            return;
        }
        let (dot, dot1): (RowsFn<ROWS>, RowsFn<1>) = match ty {
            GgmlType::Q4_0 => (rows_dot::<ROWS, Q4_0>, rows_dot::<1, Q4_0>),
            GgmlType::Q4_1 => (rows_dot::<ROWS, Q4_1>, rows_dot::<1, Q4_1>),
            GgmlType::Q4_K => (rows_dot_q4k::<ROWS, false>, rows_dot_q4k::<1, false>),
            GgmlType::Q5_K => (rows_dot_q4k::<ROWS, true>, rows_dot_q4k::<1, true>),
            GgmlType::Q6_K => (rows_dot_q6k::<ROWS>, rows_dot_q6k::<1>),
            _ => (rows_dot::<ROWS, Q8_0>, rows_dot::<1, Q8_0>),
        };
        let nb = x.len() / 32;
        let (wp, xp, sp, tp) = (w.as_ptr(), x.as_ptr(), xsum.as_ptr(), super::f16_table().as_ptr());
        let full = y.len() / ROWS * ROWS;
        // SAFETY: rows `j .. j + ROWS` (or `j`) lie inside `w`, and so does every prefetched
        // line (the range is clamped to `w`); the callee's contract is ours.
        unsafe {
            // The rows between the first group and the first prefetched one.
            let ahead = prefetch_rows(row_bytes);
            super::prefetch(w, ROWS * row_bytes, ahead * row_bytes);
            for j in (0..full).step_by(ROWS) {
                super::prefetch(w, (j + ahead) * row_bytes, (j + ahead + ROWS) * row_bytes);
                let rows = std::array::from_fn(|r| wp.add((j + r) * row_bytes));
                y[j..j + ROWS].copy_from_slice(&dot(rows, nb, xp, sp, tp));
            }
            for (j, yj) in y.iter_mut().enumerate().skip(full) {
                *yj = dot1([wp.add(j * row_bytes)], nb, xp, sp, tp)[0];
            }
        }
    }

    /// The dot products of `R` rows of the legacy scheme `K` (`nb` blocks each) with `x`.
    ///
    /// # Safety
    /// As [`dot_rows`]; every `rows[r]` points to `nb` blocks, `x` to `32 nb` floats, `tp` to
    /// [`super::f16_table`] (the block sums are not read).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    #[inline]
    unsafe fn rows_dot<const R: usize, const K: u8>(
        rows: [*const u8; R],
        nb: usize,
        xp: *const f32,
        _sp: *const f32,
        tp: *const f32,
    ) -> [f32; R] {
        let ts: usize = match K {
            Q4_0 => 18,
            Q4_1 => 20,
            _ => 34,
        };
        // Nibble values (exact small integers); Q4_0's are `q - 8`.
        let iota = if K == Q4_0 {
            _mm512_setr_ps(-8., -7., -6., -5., -4., -3., -2., -1., 0., 1., 2., 3., 4., 5., 6., 7.)
        } else {
            _mm512_setr_ps(0., 1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 11., 12., 13., 14., 15.)
        };
        let mut acc = [_mm512_setzero_ps(); R];
        // SAFETY (every pointer below): block `b < nb` of row `r` spans `ts` bytes from
        // `rows[r] + b ts`; `x` has `32 nb` floats; `tp` has 65536 entries.
        unsafe {
            for b in 0..nb {
                let x0 = _mm512_loadu_ps(xp.add(32 * b));
                let x1 = _mm512_loadu_ps(xp.add(32 * b + 16));
                for r in 0..R {
                    let p = rows[r].add(b * ts);
                    let d = _mm512_set1_ps(*tp.add(usize::from(p.cast::<u16>().read_unaligned())));
                    if K == Q8_0 {
                        let q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p.add(2).cast())));
                        let q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p.add(18).cast())));
                        acc[r] = _mm512_fmadd_ps(d, _mm512_fmadd_ps(q1, x1, _mm512_mul_ps(q0, x0)), acc[r]);
                    } else {
                        // The block's 16 dequantized values `d q + m` (`d (q - 8)`), looked up
                        // by nibble: one FMA per block and row instead of a scale multiply per
                        // half plus an `m · Σx` term.
                        let table = if K == Q4_1 {
                            let m = *tp.add(usize::from(p.add(2).cast::<u16>().read_unaligned()));
                            _mm512_fmadd_ps(d, iota, _mm512_set1_ps(m))
                        } else {
                            _mm512_mul_ps(d, iota)
                        };
                        let off = if K == Q4_1 { 4 } else { 2 };
                        let v = _mm512_cvtepu8_epi32(_mm_loadu_si128(p.add(off).cast()));
                        let lo = _mm512_permutexvar_ps(v, table);
                        let hi = _mm512_permutexvar_ps(_mm512_srli_epi32(v, 4), table);
                        acc[r] = _mm512_fmadd_ps(hi, x1, _mm512_fmadd_ps(lo, x0, acc[r]));
                    }
                }
            }
        }
        std::array::from_fn(|r| _mm512_reduce_add_ps(acc[r]))
    }

    /// [`rows_dot`] for Q4_K (`FIVE = false`, 144-byte blocks) and Q5_K (176) (`nb32` 32-weight
    /// sub-blocks per row, `nb32 / 8` blocks).
    ///
    /// # Safety
    /// As [`rows_dot`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    #[inline]
    unsafe fn rows_dot_q4k<const R: usize, const FIVE: bool>(
        rows: [*const u8; R],
        nb32: usize,
        xp: *const f32,
        sp: *const f32,
        _tp: *const f32,
    ) -> [f32; R] {
        let table = _mm512_setr_ps(0., 1., 2., 3., 4., 5., 6., 7., 8., 9., 10., 11., 12., 13., 14., 15.);
        let (ts, qo) = if FIVE { (176, 48) } else { (144, 16) };
        let sixteen = _mm512_set1_ps(16.0);
        let mut acc = [_mm512_setzero_ps(); R];
        let mut macc = [_mm256_setzero_ps(); R];
        let mut dl = [[0f32; 8]; R];
        // SAFETY (every pointer below): block `b < nb32 / 8` of row `r` spans 144 bytes from
        // `rows[r] + ts b`; `x` has `32 nb32` floats, `xsum` `nb32`.
        unsafe {
            for b in 0..nb32 / 8 {
                let s8 = _mm256_loadu_ps(sp.add(8 * b));
                for r in 0..R {
                    let p = rows[r].add(ts * b);
                    let (dsc, mmn) = k4_scales(p);
                    _mm256_storeu_ps(dl[r].as_mut_ptr(), dsc);
                    macc[r] = _mm256_fmadd_ps(mmn, s8, macc[r]);
                }
                for pair in 0..4 {
                    let xb = xp.add(256 * b + 64 * pair);
                    let (x0, x1) = (_mm512_loadu_ps(xb), _mm512_loadu_ps(xb.add(16)));
                    let (x2, x3) = (_mm512_loadu_ps(xb.add(32)), _mm512_loadu_ps(xb.add(48)));
                    for r in 0..R {
                        let q = rows[r].add(ts * b + qo + 32 * pair);
                        let v0 = _mm512_cvtepu8_epi32(_mm_loadu_si128(q.cast()));
                        let v1 = _mm512_cvtepu8_epi32(_mm_loadu_si128(q.add(16).cast()));
                        let mut w = [
                            _mm512_permutexvar_ps(v0, table),
                            _mm512_permutexvar_ps(v1, table),
                            _mm512_permutexvar_ps(_mm512_srli_epi32(v0, 4), table),
                            _mm512_permutexvar_ps(_mm512_srli_epi32(v1, 4), table),
                        ];
                        if FIVE {
                            // Bit `j` of qh[l] is the fifth bit of element l of sub-block j.
                            let qh = rows[r].add(ts * b + 16);
                            let h = [
                                _mm512_cvtepu8_epi32(_mm_loadu_si128(qh.cast())),
                                _mm512_cvtepu8_epi32(_mm_loadu_si128(qh.add(16).cast())),
                            ];
                            for (i, wi) in w.iter_mut().enumerate() {
                                let bit = _mm512_set1_epi32(1 << (2 * pair + i / 2));
                                let k = _mm512_test_epi32_mask(h[i % 2], bit);
                                *wi = _mm512_mask_add_ps(*wi, k, *wi, sixteen);
                            }
                        }
                        let lo = _mm512_fmadd_ps(w[1], x1, _mm512_mul_ps(w[0], x0));
                        let hi = _mm512_fmadd_ps(w[3], x3, _mm512_mul_ps(w[2], x2));
                        acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(dl[r][2 * pair]), lo, acc[r]);
                        acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(dl[r][2 * pair + 1]), hi, acc[r]);
                    }
                }
            }
        }
        std::array::from_fn(|r| {
            let m = macc[r];
            let m4 = _mm_add_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
            let m2 = _mm_add_ps(m4, _mm_movehl_ps(m4, m4));
            let m1 = _mm_add_ss(m2, _mm_movehdup_ps(m2));
            _mm512_reduce_add_ps(acc[r]) - _mm_cvtss_f32(m1)
        })
    }

    /// [`rows_dot`] for Q6_K (`nb32 / 8` blocks of 210 bytes; `xsum`: per-16 sums of `x`).
    ///
    /// # Safety
    /// As [`rows_dot`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    #[inline]
    unsafe fn rows_dot_q6k<const R: usize>(
        rows: [*const u8; R],
        nb32: usize,
        xp: *const f32,
        sp: *const f32,
        _tp: *const f32,
    ) -> [f32; R] {
        let m4 = _mm512_set1_epi8(0x0f);
        let m30 = _mm512_set1_epi8(0x30);
        // qh bit pairs 0 / 1 (elements 0..32 / 32..64 of a half) moved to bits 4..6, and
        // pairs 2 / 3 (elements 64..96 / 96..128).
        let sh_lo = _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2);
        let sh_hi = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
        let mut acc = [_mm512_setzero_ps(); R];
        let mut macc = [_mm512_setzero_ps(); R];
        let mut dl = [[0f32; 16]; R];
        let mut qb = [[0u8; 128]; R];
        // SAFETY (every pointer below): block `b < nb32 / 8` of row `r` spans 210 bytes from
        // `rows[r] + 210 b`; `x` has `32 nb32` floats, `xsum` `2 nb32`.
        unsafe {
            for b in 0..nb32 / 8 {
                let s16 = _mm512_loadu_ps(sp.add(16 * b));
                for r in 0..R {
                    let p = rows[r].add(210 * b);
                    let d = _mm512_set1_ps(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(
                        p.add(208).cast::<u16>().read_unaligned(),
                    )))));
                    let sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p.add(192).cast())));
                    let dls = _mm512_mul_ps(d, sc);
                    _mm512_storeu_ps(dl[r].as_mut_ptr(), dls);
                    macc[r] = _mm512_fmadd_ps(dls, s16, macc[r]);
                }
                for h in 0..2 {
                    for r in 0..R {
                        let p = rows[r].add(210 * b);
                        let a = _mm512_loadu_si512(p.add(64 * h).cast());
                        let qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(p.add(128 + 32 * h).cast()));
                        let q0 = _mm512_or_si512(
                            _mm512_and_si512(a, m4),
                            _mm512_and_si512(_mm512_sllv_epi64(qh, sh_lo), m30),
                        );
                        let q1 = _mm512_or_si512(
                            _mm512_and_si512(_mm512_srli_epi16::<4>(a), m4),
                            _mm512_and_si512(_mm512_srlv_epi64(qh, sh_hi), m30),
                        );
                        _mm512_storeu_si512(qb[r].as_mut_ptr().cast(), q0);
                        _mm512_storeu_si512(qb[r].as_mut_ptr().add(64).cast(), q1);
                    }
                    for g in 0..8 {
                        let xv = _mm512_loadu_ps(xp.add(256 * b + 128 * h + 16 * g));
                        for r in 0..R {
                            let q = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(
                                qb[r].as_ptr().add(16 * g).cast(),
                            )));
                            let t = _mm512_mul_ps(q, xv);
                            acc[r] = _mm512_fmadd_ps(_mm512_set1_ps(dl[r][8 * h + g]), t, acc[r]);
                        }
                    }
                }
            }
        }
        std::array::from_fn(|r| _mm512_reduce_add_ps(acc[r]) - 32.0 * _mm512_reduce_add_ps(macc[r]))
    }
}
