//! Fast mode with many activation rows (prefill) in panels of 16 weight rows × 16 activation
//! rows: on AMX tiles (Intel Sapphire Rapids and later), else on AVX-512 VNNI registers
//! ([`vnni_product`], the same integers), for every scheme of the fast mode: the same integers
//! and scales as [`super::q8k`] (Q4_K, Q5_K, Q6_K against Q8_K activations, llama.cpp's
//! `ggml_vec_dot_q{4,5,6}_K_q8_K`) and [`super::int8`] (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 against
//! Q8_0 activations), with each (sub-)block's `Σ q · q8` for 16 weight rows × 16 activation rows
//! done by one `tdpbusd`.
//!
//! Layout per call: the quantized activation rows are laid out once as `tdpbusd`'s B operand (groups
//! of 4 consecutive values of 16 rows side by side, [`Acts`]), with their per-sub-block sums
//! and `d` as f32 vectors over the 16 rows. Per block of 16 weight rows, the rows are unpacked
//! once into bytes (`0..=15` for Q4_K, `0..=31` Q5_K, `0..=63` Q6_K: `tdpbusd`'s unsigned A
//! operand) with their sub-block factors `a = d · sc` and `b` (Q4_K / Q5_K: `dmin · m`, Q6_K:
//! `32 · d · sc`, the `- 32` of every weight), then for every 16 activation rows and sub-block
//! `s`: `C = Σ_{k ∈ s} q[n, k] · q8[m, k]` (int32, exact), and per super-block
//! `y[m, n] += d_x[m] · Σ_s (a[n, s] · C[n, m] − b[n, s] · Σ_{k ∈ s} q8[m, k])` in f32. The
//! legacy schemes have one scale per block of 32 on both sides: `y += d_w · d_x · (C − off ·
//! Σ q8)` per block (`off` 8 for Q4_0, 128 for Q8_0 stored as `q + 128`), and Q4_1 adds
//! `m_w · s_x` (see [`kind`]). Two sets
//! of tiles alternate so the next sub-block's product runs while this one's is scaled (stored
//! first, then the next issued: the tile unit runs in order).
//!
//! Accuracy: as [`super::q8k`] / [`super::int8`] up to f32 rounding (the sub-block sums are
//! converted one by one instead of once per super-block), i.e. `dequant(W) · dequant(q8(x))`.
//!
//! The tile instructions are written with `asm!` (Rust's AMX intrinsics are unstable); the
//! tiles run only where [`crate::kernels::simd::has_amx`] found the CPU features, the OS
//! support and Linux's tile-data permission, which it requests once. Without them, each
//! sub-block product is 16 rows of `vpdpbusd` (one per 4 bytes of a weight row, broadcast,
//! against 16 activation rows' 4 values), written where the tile store would put it, so the
//! scaling is shared: on an AMD Zen 4 core (no AMX) 1.6–2.7× faster than the `1 × 8` register
//! tiles of [`super::int8`] / [`super::q8k`], which unpack each 64 weights for 8 activation
//! rows and apply the K-quants' sub-block scales with a second multiply (`vpmaddubsw` +
//! `vpdpwssd`).

// The kernels index several per-row arrays with one row index.
#![allow(clippy::needless_range_loop)]

use super::q8k::{Q8K_BYTES, QK_K};
use rlx_gguf::GgmlType;

/// Rows of a tile (weight rows and activation rows alike).
const T: usize = 16;
/// Activation rows from which [`super::Path::Amx`] is planned: below, most of every tile's
/// product would be zero padding, and the VNNI `1 × 8` register tiles waste less.
pub(super) const MIN_M: usize = 16;

/// Values per sub-block (one scale): 16 for Q6_K, 32 for the others.
fn sub_len(ty: GgmlType) -> usize {
    if ty == GgmlType::Q6_K { 16 } else { 32 }
}

/// The scaling a scheme's products need ([`block`]'s `L`): 0 the K-quants (`d_x` per
/// super-block), 1 Q4_0 / Q8_0 (`d_w · d_x · (Σ q · q8 − off · Σ q8)` per block), 2 Q4_1
/// (`d_w · d_x · Σ q · q8 + m_w · s_x` per block).
fn kind(ty: GgmlType) -> u8 {
    match ty {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => 1,
        GgmlType::Q4_1 | GgmlType::Q5_1 => 2,
        _ => 0,
    }
}

/// The activation side of a call (per kernel: every chunk reads it, on any thread).
#[derive(Clone, Debug)]
pub(super) struct AmxScratch {
    /// `[m-block][k / 4][16 rows][4]` Q8_K values: `tdpbusd`'s B operand per sub-block.
    vnni: Vec<u8>,
    /// `[m-block][sub-block][16 rows]`: `Σ q8` over the sub-block (Q8_K's `bsums`); for Q4_0 /
    /// Q8_0 `off · Σ q8` (`off` = 8 / 128, the weights' offset as unsigned bytes).
    sums: Vec<f32>,
    /// `[m-block][super-block (K-quants) or block][16 rows]`: the activations' `d`.
    dx: Vec<f32>,
    /// `[m-block][block][16 rows]`: Q4_1's `s_x = f16(d · Σ q8)` (Q8_1's block sum).
    sx: Vec<f32>,
}

impl AmxScratch {
    /// Scratch for `m × k` activations.
    pub(super) fn new(ty: GgmlType, m: usize, k: usize) -> AmxScratch {
        let mb = m.div_ceil(T);
        let ns = k / sub_len(ty);
        AmxScratch {
            vnni: vec![0; mb * k * T],
            sums: vec![0.0; mb * ns * T],
            dx: vec![0.0; mb * if kind(ty) == 0 { k / QK_K } else { ns } * T],
            sx: vec![0.0; if kind(ty) == 2 { mb * ns * T } else { 0 }],
        }
    }
}

/// What a chunk of weight rows works in: the running thread's (in its `super::Work`), grown to
/// the largest kernel's needs. Owned per kernel, one set per chunk, these took 112 MB in
/// SmolLM2 `--fast` generation after a 400-token prompt (`heaptrack`). Each block of 16 weight
/// rows rewrites all of it before reading it ([`unpack_rows`] zeroes the rows past the last,
/// `out` is cleared, the tiles are stored whole).
#[derive(Default)]
pub(super) struct ChunkScratch {
    /// 16 unpacked weight rows, `[sub-block][16 rows][sub_len]` (each tile's operand
    /// contiguous: rows `k` bytes apart put all 16 in one L1 set).
    wq: Vec<u8>,
    /// `[16 rows][sub-block]` factors `a`, then `b`.
    ab: Vec<f32>,
    /// `[16 weight rows][m-blocks · 16]` results of one block of weight rows.
    out: Vec<f32>,
    /// Two `16 × 16` int32 tiles.
    cbuf: Vec<i32>,
}

/// Lay out the `m` quantized activation rows `xq` (Q8_K blocks for the K-quants, else
/// [`super::int8::quantize_q8_0`]'s rows) into `s` (rows past `m` in the last m-block stay
/// zero).
pub(super) fn layout_acts(ty: GgmlType, xq: &[u8], m: usize, k: usize, s: &mut AmxScratch) {
    let (nsb, sl) = (k / QK_K, sub_len(ty));
    let ns = k / sl;
    if kind(ty) != 0 {
        let rb = super::int8::row_bytes_q8_0(k);
        let off = match ty {
            GgmlType::Q4_0 => 8.0,
            GgmlType::Q5_0 => 16.0,
            GgmlType::Q8_0 => 128.0,
            _ => 0.0,
        };
        let f32_at = |b: &[u8], i: usize| f32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]]);
        for mi in 0..m {
            let (mb, r) = (mi / T, mi % T);
            let row = &xq[mi * rb..(mi + 1) * rb];
            let (q, ds) = row.split_at(k);
            let (d, sxs) = ds.split_at(4 * ns);
            for (g, q4) in q.chunks_exact(4).enumerate() {
                let o = ((mb * (k / 4) + g) * T + r) * 4;
                s.vnni[o..o + 4].copy_from_slice(q4);
            }
            for (blk, qb) in q.chunks_exact(sl).enumerate() {
                let at = (mb * ns + blk) * T + r;
                s.dx[at] = f32_at(d, blk);
                s.sums[at] = off * qb.iter().map(|&v| f32::from(v as i8)).sum::<f32>();
                if let Some(v) = s.sx.get_mut(at) {
                    *v = f32_at(sxs, blk);
                }
            }
        }
        return;
    }
    for mi in 0..m {
        let (mb, r) = (mi / T, mi % T);
        let row = &xq[mi * nsb * Q8K_BYTES..(mi + 1) * nsb * Q8K_BYTES];
        for (sb, blk) in row.chunks_exact(Q8K_BYTES).enumerate() {
            s.dx[(mb * nsb + sb) * T + r] = f32::from_le_bytes([blk[0], blk[1], blk[2], blk[3]]);
            for (g, q4) in blk[4..4 + QK_K].chunks_exact(4).enumerate() {
                let o = ((mb * (k / 4) + sb * QK_K / 4 + g) * T + r) * 4;
                s.vnni[o..o + 4].copy_from_slice(q4);
            }
            let bsum = |i: usize| f32::from(i16::from_le_bytes([blk[260 + 2 * i], blk[261 + 2 * i]]));
            for j in 0..QK_K / sl {
                let v = if sl == 16 { bsum(j) } else { bsum(2 * j) + bsum(2 * j + 1) };
                s.sums[(mb * ns + sb * (QK_K / sl) + j) * T + r] = v;
            }
        }
    }
}

impl AmxScratch {
    /// The activations as [`run`] reads them.
    pub(super) fn acts(&self) -> Acts<'_> {
        Acts { vnni: &self.vnni, sums: &self.sums, dx: &self.dx, sx: &self.sx, corr: &[], bfp: false }
    }
}

/// The weight rows of one product: `w` holds whole rows of `row_bytes` bytes (`row_bytes > 0`),
/// blocks of `ty`, or with `split` Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 rows in
/// `rlx_gguf::Layout::SplitRows`.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(super) struct WeightRows<'a> {
    pub(super) ty: GgmlType,
    pub(super) split: bool,
    pub(super) w: &'a [u8],
    pub(super) row_bytes: usize,
}

#[cfg(target_arch = "x86_64")]
impl WeightRows<'_> {
    /// Rows held.
    pub(super) fn n(&self) -> usize {
        self.w.len() / self.row_bytes
    }
}

/// Every product of the weight rows `rows` with the activations `acts` (`m` rows of `k`), into
/// `y` (`[m, n]`); the rows in chunks of `chunk` (a multiple of 16) across threads. With `amx`
/// each 16 × 16 sub-block product is one `tdpbusd`, else sixteen rows of `vpdpbusd`
/// ([`vnni_product`]): the same integers. With
/// `acts.bfp` (the exact mode's block floating point activations, [`super::bfp_panel`]) three
/// digit planes per sub-block ([`super::bfp_panel::product`]), scaled as Q4_1 is (`L` = 2) or,
/// for Q4_0 / Q5_0, with the offset's correction in the integers.
///
/// # Safety
/// AVX-512F/BW/VL + VNNI + FMA + AVX2, and with `amx` [`crate::kernels::simd::has_amx`] (not
/// with `acts.bfp`); `acts` made for `(ty, m, k)` by [`layout_acts`] or
/// [`super::bfp_panel::layout_acts`].
#[cfg(target_arch = "x86_64")]
pub(super) unsafe fn run(
    rows: WeightRows,
    (m, k): (usize, usize),
    chunk: usize,
    acts: &Acts,
    y: &mut [f32],
    amx: bool,
) {
    use super::OutPtr;
    let (WeightRows { ty, split, w, row_bytes }, n) = (rows, rows.n());
    let mb = m.div_ceil(T);
    let ns = k / sub_len(ty);
    let nchunks = n.div_ceil(chunk);
    let planes = if acts.bfp { 3 } else { 1 };
    assert!(acts.vnni.len() >= planes * mb * k * T && y.len() == m * n && w.len() % row_bytes == 0);
    assert!(!acts.bfp || !amx && sub_len(ty) == 32);
    let yp = OutPtr(y.as_mut_ptr());
    // The caller's borrow of its `Work` ended before this call: a chunk run on the calling
    // thread borrows it again.
    super::spin::for_each(nchunks, |c| {
        super::WORK.with_borrow_mut(|work| {
            let ChunkScratch { wq, ab, out, cbuf } = &mut work.chunk;
            let (wq, ab) = (super::grown(wq, T * k), super::grown(ab, 2 * ns * T));
            let (out, cbuf) = (super::grown(out, T * mb * T), super::grown(cbuf, 2 * T * T));
            // SAFETY: the features are the caller's contract; `y` holds `m · n` floats (asserted
            // above) and chunk `c` writes only its own columns of it.
            unsafe {
                if amx {
                    tiles::configure(sub_len(ty));
                }
                let (mut n0, end) = (c * chunk, ((c + 1) * chunk).min(n));
                while n0 < end {
                    let nr = T.min(n - n0);
                    unpack_rows(ty, split, &w[n0 * row_bytes..(n0 + nr) * row_bytes], row_bytes, k, wq, ab);
                    out.fill(0.0);
                    // The next 16 rows of this chunk, prefetched while these are multiplied (read
                    // straight from memory, the unpacking waited on every load).
                    let n1 = (n0 + T).min(end);
                    let next = &w[n1 * row_bytes..(n1 + T).min(end) * row_bytes];
                    match (kind(ty), amx, acts.bfp) {
                        (_, _, true) if acts.corr.is_empty() => {
                            block::<2, false, true>(ty, k, mb, wq, ab, acts, out, cbuf, next)
                        }
                        (_, _, true) => block::<1, false, true>(ty, k, mb, wq, ab, acts, out, cbuf, next),
                        (0, true, _) => block::<0, true, false>(ty, k, mb, wq, ab, acts, out, cbuf, next),
                        (1, true, _) => block::<1, true, false>(ty, k, mb, wq, ab, acts, out, cbuf, next),
                        (_, true, _) => block::<2, true, false>(ty, k, mb, wq, ab, acts, out, cbuf, next),
                        (0, false, _) => block::<0, false, false>(ty, k, mb, wq, ab, acts, out, cbuf, next),
                        (1, false, _) => block::<1, false, false>(ty, k, mb, wq, ab, acts, out, cbuf, next),
                        (_, false, _) => block::<2, false, false>(ty, k, mb, wq, ab, acts, out, cbuf, next),
                    }
                    // Row by row of `y` (column by column, every store missed L1).
                    super::write_columns(yp, n, n0, out, mb * T, nr, m);
                    n0 += T;
                }
                if amx {
                    tiles::release();
                }
            }
        })
    });
}

/// The activation side, shared by every chunk: `[m-block][..][16 rows]` vectors as
/// [`AmxScratch`] describes them, or (`bfp`) as [`super::bfp_panel`] lays them out (`vnni`
/// three digit planes per group of 4 values, `dx` the blocks' scales `s_b`, `sx` their `Σ x`,
/// `corr` Q4_0's / Q5_0's `-off · Σ n` per block and row, else empty; `sums` unused).
pub(super) struct Acts<'a> {
    pub(super) vnni: &'a [u8],
    pub(super) sums: &'a [f32],
    pub(super) dx: &'a [f32],
    pub(super) sx: &'a [f32],
    pub(super) corr: &'a [i32],
    pub(super) bfp: bool,
}

/// Unpack the weight rows `w` (at most 16 rows of `row_bytes`; Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 rows in
/// `rlx_gguf::Layout::SplitRows` when `split`) into `wq` (`[sub-block][16][sl]` bytes; the rows
/// past the last zero) and their factors into `ab` (`[2][16][sub-block]`).
///
/// # Safety
/// AVX2, F16C, AVX-512BW/VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
unsafe fn unpack_rows(ty: GgmlType, split: bool, w: &[u8], row_bytes: usize, k: usize, wq: &mut [u8], ab: &mut [f32]) {
    use std::arch::x86_64::*;
    let nr = w.len() / row_bytes;
    let (ts, sl) = (ty.type_size(), sub_len(ty));
    // Sub-blocks per block of `ty` (a legacy block is one sub-block).
    let (nsub, ns) = (if kind(ty) == 0 { QK_K / sl } else { 1 }, k / sl);
    let (a, b) = ab.split_at_mut(ns * T);
    let m4 = _mm256_set1_epi8(0x0f);
    // SAFETY: every call reads 2 bytes inside its block.
    let f16 = |p: &[u8], i: usize| unsafe { f16_at(p[i..i + 2].as_ptr()) };
    // 8 bytes at `p` (unsigned or signed) times `f` into `out[..8]`.
    let scale8 = |p: &[u8], signed: bool, f: f32, out: &mut [f32]| {
        // SAFETY: 8 bytes read, 8 floats written (the slices are that long).
        unsafe {
            let v = _mm_loadl_epi64(p[..8].as_ptr().cast());
            let i = if signed { _mm256_cvtepi8_epi32(v) } else { _mm256_cvtepu8_epi32(v) };
            _mm256_storeu_ps(out[..8].as_mut_ptr(), _mm256_mul_ps(_mm256_cvtepi32_ps(i), _mm256_set1_ps(f)));
        }
    };
    for r in 0..T {
        if r >= nr {
            for s in 0..ns {
                wq[(s * T + r) * sl..(s * T + r + 1) * sl].fill(0);
            }
            a[r * ns..(r + 1) * ns].fill(0.0);
            b[r * ns..(r + 1) * ns].fill(0.0);
            continue;
        }
        if kind(ty) != 0 {
            let row = &w[r * row_bytes..(r + 1) * row_bytes];
            let (ar, br) = (&mut a[r * ns..(r + 1) * ns], &mut b[r * ns..(r + 1) * ns]);
            // SAFETY: `row` holds `ns` blocks, `ar` / `br` `ns` floats, `wq` `ns` tiles of
            // 16 × 32 bytes; AVX2 + F16C (this function's features).
            unsafe {
                match (ty, split) {
                    (GgmlType::Q4_0, false) => unpack_legacy::<18, false>(row, r, wq, ar, br),
                    (GgmlType::Q4_1, false) => unpack_legacy::<20, false>(row, r, wq, ar, br),
                    (GgmlType::Q4_0, true) => unpack_legacy::<18, true>(row, r, wq, ar, br),
                    (GgmlType::Q4_1, true) => unpack_legacy::<20, true>(row, r, wq, ar, br),
                    (GgmlType::Q5_0, false) => unpack_legacy::<22, false>(row, r, wq, ar, br),
                    (GgmlType::Q5_1, false) => unpack_legacy::<24, false>(row, r, wq, ar, br),
                    (GgmlType::Q5_0, true) => unpack_legacy::<22, true>(row, r, wq, ar, br),
                    (GgmlType::Q5_1, true) => unpack_legacy::<24, true>(row, r, wq, ar, br),
                    (_, false) => unpack_legacy::<34, false>(row, r, wq, ar, br),
                    (_, true) => unpack_legacy::<34, true>(row, r, wq, ar, br),
                }
            }
            continue;
        }
        for (sb, p) in w[r * row_bytes..(r + 1) * row_bytes].chunks_exact(ts).enumerate() {
            let o = &mut wq[sb * nsub * T * sl..(sb + 1) * nsub * T * sl];
            // Values `at .. at + 32` of the super-block (`at` a multiple of 32) into their
            // sub-blocks' row `r`.
            let put = |o: &mut [u8], at: usize, v: __m256i| {
                // SAFETY: sub-blocks `at / sl ..` of this super-block, row `r < 16`.
                unsafe {
                    let j = at / sl;
                    if sl == 32 {
                        _mm256_storeu_si256(o.as_mut_ptr().add((j * T + r) * 32).cast(), v);
                    } else {
                        _mm_storeu_si128(o.as_mut_ptr().add((j * T + r) * 16).cast(), _mm256_castsi256_si128(v));
                        _mm_storeu_si128(
                            o.as_mut_ptr().add(((j + 1) * T + r) * 16).cast(),
                            _mm256_extracti128_si256::<1>(v),
                        );
                    }
                }
            };
            // SAFETY (the loads): inside the block `p` (`ts` bytes).
            unsafe {
                if ty == GgmlType::Q6_K {
                    let d = f16(p, 208);
                    for h in 0..2 {
                        let l0 = _mm256_loadu_si256(p.as_ptr().add(64 * h).cast());
                        let l1 = _mm256_loadu_si256(p.as_ptr().add(64 * h + 32).cast());
                        let qh = _mm256_loadu_si256(p.as_ptr().add(128 + 32 * h).cast());
                        let m3 = _mm256_set1_epi8(3);
                        let hi = |sh: i32| {
                            let v = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(sh)), m3);
                            _mm256_slli_epi16::<4>(v)
                        };
                        let lo1 = |v: __m256i| _mm256_and_si256(_mm256_srli_epi16::<4>(v), m4);
                        put(o, 128 * h, _mm256_or_si256(_mm256_and_si256(l0, m4), hi(0)));
                        put(o, 128 * h + 32, _mm256_or_si256(_mm256_and_si256(l1, m4), hi(2)));
                        put(o, 128 * h + 64, _mm256_or_si256(lo1(l0), hi(4)));
                        put(o, 128 * h + 96, _mm256_or_si256(lo1(l1), hi(6)));
                    }
                    let o = r * ns + sb * nsub;
                    for h in 0..2 {
                        scale8(&p[192 + 8 * h..], true, d, &mut a[o + 8 * h..]);
                        scale8(&p[192 + 8 * h..], true, 32.0 * d, &mut b[o + 8 * h..]);
                    }
                } else {
                    let five = ty == GgmlType::Q5_K;
                    let (d, dmin) = (f16(p, 0), f16(p, 2));
                    let sm = super::q8k::scales_mins_k4(p[4..16].try_into().expect("12 bytes"));
                    let sm: [u8; 16] = std::mem::transmute(sm);
                    let qs = p.as_ptr().add(if five { 48 } else { 16 });
                    let qh = if five { _mm256_loadu_si256(p.as_ptr().add(16).cast()) } else { _mm256_setzero_si256() };
                    let one = _mm256_set1_epi8(1);
                    for pr in 0..4 {
                        let v = _mm256_loadu_si256(qs.add(32 * pr).cast());
                        let mut lo = _mm256_and_si256(v, m4);
                        let mut hi = _mm256_and_si256(_mm256_srli_epi16::<4>(v), m4);
                        if five {
                            let bit = |j: i32| {
                                let v = _mm256_and_si256(_mm256_srl_epi16(qh, _mm_cvtsi32_si128(j)), one);
                                _mm256_slli_epi16::<4>(v)
                            };
                            lo = _mm256_or_si256(lo, bit(2 * pr as i32));
                            hi = _mm256_or_si256(hi, bit(2 * pr as i32 + 1));
                        }
                        put(o, 64 * pr, lo);
                        put(o, 64 * pr + 32, hi);
                    }
                    let o = r * ns + sb * nsub;
                    scale8(&sm[..8], false, d, &mut a[o..]);
                    scale8(&sm[8..], false, dmin, &mut b[o..]);
                }
            }
        }
    }
}

/// Row `r` of the legacy blocks `row` (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0: `TS` = 18, 20, 22, 24, 34
/// bytes; with `SPLIT`, a row in `rlx_gguf::Layout::SplitRows`: block `i`'s quants at `16 i`
/// (Q8_0 `32 i`), its `d` after all quants at `2 i`, Q4_1's / Q5_1's `m` at `18 nb + 2 i`, Q5's
/// `qh` halves in the next two arrays of `2 nb` bytes) into `wq`
/// (`[block][16][32]`; Q5's fifth bits added as 16, Q8_0's signed values + 128), `d` into `a`,
/// Q4_1's and Q5_1's `-m` into `b`.
///
/// # Safety
/// AVX2 + F16C + AVX-512BW/VL; `row.len() / TS` blocks, `a` and `b` that many floats, `wq` that
/// many tiles.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c,avx512f,avx512bw,avx512vl")]
unsafe fn unpack_legacy<const TS: usize, const SPLIT: bool>(
    row: &[u8],
    r: usize,
    wq: &mut [u8],
    a: &mut [f32],
    b: &mut [f32],
) {
    use std::arch::x86_64::*;
    let nb = row.len() / TS;
    assert!(a.len() >= nb && b.len() >= nb && wq.len() >= nb * T * 32);
    let (src, dst) = (row.as_ptr(), wq.as_mut_ptr());
    let m4 = _mm_set1_epi8(0x0f);
    // SAFETY: block `i < nb` of `row`, tile `i` of `wq` (asserted above).
    unsafe {
        for i in 0..nb {
            let p = src.add(i * TS);
            let o = dst.add((i * T + r) * 32);
            if SPLIT && TS == 34 {
                *a.get_unchecked_mut(i) = f16_at(src.add(32 * nb + 2 * i));
                let v = _mm256_loadu_si256(src.add(32 * i).cast());
                _mm256_storeu_si256(o.cast(), _mm256_xor_si256(v, _mm256_set1_epi8(-128)));
                continue;
            }
            if SPLIT {
                let has_m = TS == 20 || TS == 24;
                *a.get_unchecked_mut(i) = f16_at(src.add(16 * nb + 2 * i));
                *b.get_unchecked_mut(i) = if has_m { -f16_at(src.add(18 * nb + 2 * i)) } else { 0.0 };
                let v = _mm_loadu_si128(src.add(16 * i).cast());
                let (lo, hi) = (_mm_and_si128(v, m4), _mm_and_si128(_mm_srli_epi16::<4>(v), m4));
                let (lo, hi) = if TS == 22 || TS == 24 {
                    // `qh`'s low halves after the `d`s (and `m`s), then its high halves.
                    let h = src.add(rlx_gguf::layout::split_qh_offset(nb, has_m) + 2 * i).cast::<u16>();
                    let (l, u) = (h.read_unaligned(), h.add(nb).read_unaligned());
                    let sixteen = _mm_set1_epi8(16);
                    (_mm_mask_add_epi8(lo, l, lo, sixteen), _mm_mask_add_epi8(hi, u, hi, sixteen))
                } else {
                    (lo, hi)
                };
                _mm_storeu_si128(o.cast(), lo);
                _mm_storeu_si128(o.add(16).cast(), hi);
                continue;
            }
            *a.get_unchecked_mut(i) = f16_at(p);
            if TS == 34 {
                let v = _mm256_loadu_si256(p.add(2).cast());
                _mm256_storeu_si256(o.cast(), _mm256_xor_si256(v, _mm256_set1_epi8(-128)));
            } else {
                *b.get_unchecked_mut(i) = if TS == 20 || TS == 24 { -f16_at(p.add(2)) } else { 0.0 };
                let v = _mm_loadu_si128(p.add(TS - 16).cast());
                let u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16::<4>(v), v), _mm256_set1_epi8(0x0f));
                let u = if TS == 22 || TS == 24 {
                    // Bit `j` of `qh` (the 4 bytes before the quants): bit 4 of element `j`.
                    let qh = p.add(TS - 20).cast::<u32>().read_unaligned();
                    _mm256_mask_add_epi8(u, qh, u, _mm256_set1_epi8(16))
                } else {
                    u
                };
                _mm256_storeu_si256(o.cast(), u);
            }
        }
        if TS == 34 {
            b[..nb].fill(0.0);
        }
    }
}

/// The f16 at `p` as f32 (F16C).
///
/// # Safety
/// F16C; 2 bytes readable at `p`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "f16c")]
#[inline]
unsafe fn f16_at(p: *const u8) -> f32 {
    use std::arch::x86_64::*;
    // SAFETY: the caller's contract.
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(unsafe { p.cast::<u16>().read_unaligned() }))))
}

/// One block of 16 weight rows (`wq`, factors `ab`) against every activation m-block, added
/// into `out` (`[16][mb · 16]`, zeroed by the caller); `L` = [`kind`]`(ty)`; `AMX`: the products
/// on tiles, else [`vnni_product`]; `BFP`: block floating point activations
/// ([`super::bfp_panel::product`]; `L` = 1 with the integer correction, 2 the Q4_1 form for
/// Q4_1 / Q5_1 / Q4_K / Q5_K). `next` (the packed rows unpacked next) is prefetched into
/// L2 over the iterations.
///
/// # Safety
/// AVX-512F/BW/VL + VNNI + FMA; with `AMX`, tiles configured by [`tiles::configure`] for
/// `sub_len(ty)`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn block<const L: u8, const AMX: bool, const BFP: bool>(
    ty: GgmlType,
    k: usize,
    mb: usize,
    wq: &[u8],
    ab: &[f32],
    acts: &Acts,
    out: &mut [f32],
    cbuf: &mut [i32],
    next: &[u8],
) {
    use std::arch::x86_64::*;
    let sl = sub_len(ty);
    let (lines, iters) = (next.len().div_ceil(64), mb * k / sl);
    let (nsub, ns, nsb) = (QK_K / sl, k / sl, k / QK_K);
    let (a, b) = ab.split_at(ns * T);
    let mp = mb * T;
    // Bytes of one group of 4 values of 16 rows: one plane, or three digit planes.
    let gb = if BFP { 3 * 4 * T } else { 4 * T };
    for i in 0..mb {
        let bbase = acts.vnni[i * (k / 4) * gb..].as_ptr();
        // Sub-block `s`'s product into tile set `s % 2`.
        let issue = |s: usize| {
            // SAFETY: sub-block `s < ns` of the 16 rows of `wq` (row stride `sl`) and of this
            // m-block's B operand (`sl / 4` rows of 64 bytes from `s · sl / 4`).
            unsafe {
                let (ap, bp) = (wq.as_ptr().add(s * T * sl), bbase.add(s * sl / 4 * gb));
                if s.is_multiple_of(2) { tiles::product::<0>(ap, sl, bp) } else { tiles::product::<1>(ap, sl, bp) }
            }
        };
        if AMX {
            issue(0);
        }
        let mut t = [_mm512_setzero_ps(); T];
        for s in 0..ns {
            let c = cbuf[(s % 2) * T * T..].as_mut_ptr();
            // SAFETY: `c` holds a 16 × 16 int32 tile; the factors and sums are inside their
            // vectors (`s < ns`, `i < mb`, rows `< 16`).
            unsafe {
                // The tile unit runs its instructions in order: this product is stored before
                // the next one is issued (else the store waits for it), which then runs while
                // this one is scaled.
                if BFP {
                    let corr = if L == 1 { acts.corr.as_ptr().add((i * ns + s) * T) } else { std::ptr::null() };
                    super::bfp_panel::product(wq.as_ptr().add(s * T * sl), bbase.add(s * sl / 4 * gb), corr, c);
                } else if !AMX {
                    vnni_product(wq.as_ptr().add(s * T * sl), sl, bbase.add(s * sl / 4 * gb), c);
                } else if s.is_multiple_of(2) {
                    tiles::store::<0>(c)
                } else {
                    tiles::store::<1>(c)
                }
                if AMX && s + 1 < ns {
                    issue(s + 1);
                }
                let it = i * ns + s;
                for l in it * lines / iters..(it + 1) * lines / iters {
                    _mm_prefetch::<_MM_HINT_T1>(next.as_ptr().add(l * 64).cast());
                }
                let at = (i * ns + s) * T;
                // (Block floating point: the offsets' corrections are in the integers.)
                let sv = if BFP { _mm512_setzero_ps() } else { _mm512_loadu_ps(acts.sums.as_ptr().add(at)) };
                let (ap, bp) = (a.as_ptr().add(s), b.as_ptr().add(s));
                // Legacy: this block's `d_x` and (Q4_1) `s_x`.
                let dxb = if L == 0 { sv } else { _mm512_loadu_ps(acts.dx.as_ptr().add(at)) };
                let sxb = if L == 2 { _mm512_loadu_ps(acts.sx.as_ptr().add(at)) } else { sv };
                // Unrolled by hand so that `t` stays in registers.
                macro_rules! row {
                    ($($r:literal)*) => {$(
                        let cv = _mm512_cvtepi32_ps(_mm512_loadu_si512(c.add($r * T).cast()));
                        if L == 0 {
                            t[$r] = _mm512_fmadd_ps(cv, _mm512_set1_ps(*ap.add($r * ns)), t[$r]);
                            t[$r] = _mm512_fnmadd_ps(_mm512_set1_ps(*bp.add($r * ns)), sv, t[$r]);
                        } else {
                            let v = if BFP { _mm512_mul_ps(cv, dxb) } else { _mm512_mul_ps(_mm512_sub_ps(cv, sv), dxb) };
                            t[$r] = _mm512_fmadd_ps(v, _mm512_set1_ps(*ap.add($r * ns)), t[$r]);
                            if L == 2 {
                                t[$r] = _mm512_fnmadd_ps(_mm512_set1_ps(*bp.add($r * ns)), sxb, t[$r]);
                            }
                        }
                    )*};
                }
                row!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
                if L == 0 && (s + 1) % nsub == 0 {
                    // End of a super-block: times the activations' `d`.
                    let dx = _mm512_loadu_ps(acts.dx.as_ptr().add((i * nsb + s / nsub) * T));
                    for r in 0..T {
                        let o = out.as_mut_ptr().add(r * mp + i * T);
                        _mm512_storeu_ps(o, _mm512_fmadd_ps(t[r], dx, _mm512_loadu_ps(o)));
                        t[r] = _mm512_setzero_ps();
                    }
                } else if L != 0 && s + 1 == ns {
                    for r in 0..T {
                        _mm512_storeu_ps(out.as_mut_ptr().add(r * mp + i * T), t[r]);
                    }
                }
            }
        }
    }
}

/// `C = A · B` as `tdpbusd` computes it, in AVX-512 VNNI registers: `A` 16 rows of `sl`
/// unsigned bytes (`sl` apart) at `a`, `B` `sl / 4` rows of 64 signed bytes (16 columns of 4
/// consecutive values) at `b`, `C` 16 rows of 16 `i32` at `c`. Per row of `A` and group of 4
/// values, one `vpdpbusd` of the 4 bytes broadcast against a row of `B`; 8 rows of `C` at a
/// time (the caller's 16 accumulators stay in registers).
///
/// # Safety
/// AVX-512F + VNNI; the operands readable, `c` writable for 1 KiB.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
unsafe fn vnni_product(a: *const u8, sl: usize, b: *const u8, c: *mut i32) {
    use std::arch::x86_64::*;
    for h in 0..2 {
        let mut acc = [_mm512_setzero_si512(); 8];
        // SAFETY: rows `8 h + r < 16` of `A` (`sl` bytes each), rows `g < sl / 4` of `B`, rows
        // of `C` (caller).
        unsafe {
            for g in 0..sl / 4 {
                let bv = _mm512_loadu_si512(b.add(64 * g).cast());
                for (r, acc) in acc.iter_mut().enumerate() {
                    let av = _mm512_set1_epi32(a.add((8 * h + r) * sl + 4 * g).cast::<i32>().read_unaligned());
                    *acc = _mm512_dpbusd_epi32(*acc, av, bv);
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                _mm512_storeu_si512(c.add((8 * h + r) * T).cast(), *acc);
            }
        }
    }
}

/// The AMX tile instructions used here: two sets of tiles, `A` (16 weight rows × one
/// sub-block of bytes), `B` (the sub-block of 16 activation rows, `tdpbusd`'s layout) and `C`
/// (16 × 16 int32): set 0 in `tmm0..=2`, set 1 in `tmm3..=5`.
#[cfg(target_arch = "x86_64")]
mod tiles {
    use std::arch::asm;

    /// The 64-byte tile configuration (`ldtilecfg`'s operand).
    #[repr(C, align(64))]
    struct Config([u8; 64]);

    /// Configure the tiles for sub-blocks of `sl` values (16 or 32).
    ///
    /// # Safety
    /// [`crate::kernels::simd::has_amx`].
    pub(super) unsafe fn configure(sl: usize) {
        let mut c = Config([0; 64]);
        c.0[0] = 1; // palette 1
        for set in 0..2 {
            // (tile, rows, bytes per row)
            for (t, rows, colsb) in [(3 * set, 16, sl), (3 * set + 1, sl / 4, 64), (3 * set + 2, 16, 64)] {
                c.0[16 + 2 * t..18 + 2 * t].copy_from_slice(&(colsb as u16).to_le_bytes());
                c.0[48 + t] = rows as u8;
            }
        }
        // SAFETY: a valid palette-1 configuration; AMX present and permitted (caller).
        unsafe { asm!("ldtilecfg [{0}]", in(reg) c.0.as_ptr(), options(nostack, readonly)) };
    }

    /// Release the tiles (so the OS need not save their state).
    ///
    /// # Safety
    /// [`crate::kernels::simd::has_amx`].
    pub(super) unsafe fn release() {
        // SAFETY: caller.
        unsafe { asm!("tilerelease", options(nostack, nomem)) };
    }

    /// `C_set = A · B`: `A` from `a` (16 rows, `lda` bytes apart), `B` from `b` (rows of 64
    /// bytes).
    ///
    /// # Safety
    /// Configured tiles; the rows readable.
    #[inline(always)]
    pub(super) unsafe fn product<const SET: usize>(a: *const u8, lda: usize, b: *const u8) {
        // SAFETY: caller.
        unsafe {
            if SET == 0 {
                asm!(
                    "tileloadd tmm0, [{a} + {lda}*1]",
                    "tileloadd tmm1, [{b} + {ldb}*1]",
                    "tilezero tmm2",
                    "tdpbusd tmm2, tmm0, tmm1",
                    a = in(reg) a, lda = in(reg) lda, b = in(reg) b, ldb = in(reg) 64usize,
                    options(nostack, readonly)
                );
            } else {
                asm!(
                    "tileloadd tmm3, [{a} + {lda}*1]",
                    "tileloadd tmm4, [{b} + {ldb}*1]",
                    "tilezero tmm5",
                    "tdpbusd tmm5, tmm3, tmm4",
                    a = in(reg) a, lda = in(reg) lda, b = in(reg) b, ldb = in(reg) 64usize,
                    options(nostack, readonly)
                );
            }
        }
    }

    /// Store `C_set` to `c` (16 rows of 16 int32).
    ///
    /// # Safety
    /// Configured tiles; `c` writable for 1 KiB.
    #[inline(always)]
    pub(super) unsafe fn store<const SET: usize>(c: *mut i32) {
        // SAFETY: caller.
        unsafe {
            if SET == 0 {
                asm!("tilestored [{c} + {ld}*1], tmm2", c = in(reg) c, ld = in(reg) 64usize, options(nostack));
            } else {
                asm!("tilestored [{c} + {ld}*1], tmm5", c = in(reg) c, ld = in(reg) 64usize, options(nostack));
            }
        }
    }
}
