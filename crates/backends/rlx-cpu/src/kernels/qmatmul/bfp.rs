//! Exact-mode decode (`M = 1`) of Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 / Q4_K / Q5_K / Q6_K on integer dot
//! products: the activation row is held as block floating point with 22 (Q8_0: 21) bits per
//! element, so `Σ q · x` of every 32-weight (sub-)block is an exact integer computed with
//! `vpdpbusd`, as the fast mode computes its dots, without the fast mode's 8-bit rounding of the
//! activations.
//!
//! Per 32-element block `b` of `x`: `x_i = s_b · n_i` with `s_b` the power of two that makes `max
//! |n_i| ≤ 2^B` (`B = 22`, Q8_0 21; `n_i = round(x_i / s_b)`: the block's largest elements keep 23
//! (22) of their 24 mantissa bits, smaller ones their bits down to `s_b / 2`), and each `n_i` split
//! into three signed bytes `n = 2¹⁶ h + 2⁸ m + l` (`l, m ∈ [-128, 127]`, `|h| ≤ 65`). Then `Σ q n =
//! 2¹⁶ Σ q h + 2⁸ Σ q m + Σ q l`: three `vpdpbusd` per 64 weights (Q4_0 / Q4_1: the low and the
//! high nibbles of four blocks against each digit plane, six per quad; Q5_0 / Q5_1 the same, their
//! fifth bits (`qh`, blocks only) added as 16 to the nibble bytes under a byte mask; Q8_0: two
//! blocks, flipped to unsigned `q + 128`; Q4_K: the low and the high nibbles of 64 quant bytes in
//! two chains, their sub-blocks having their own scales; Q5_K the same with its fifth bits added as
//! 16; Q6_K: the 6-bit quants of 64 elements, unsigned, as Q8_0's pairs, scaled per 16-element
//! sub-block), accumulated in an `i32` lane chain with two shifts, converted to f32 once (the first and
//! only rounding of the integer dot) and scaled by `d · s_b` (Q4_K: `d sc_j s_j`). Per lane `|Σ q
//! n| ≤ 8 · 15 · 2²²` (4-bit), `8 · 31 · 2²²` (5-bit), `4 · 63 · 2²²` (Q6_K) or `4 · 128 · 2²¹`
//! (Q8_0): no overflow, and
//! the `i32` arithmetic wraps, so the unsigned form's larger intermediate sums are exact once the
//! correction is added. Q4_0's `-8 Σ n`, Q5_0's `-16 Σ n`, Q6_K's `-32 Σ n` and Q8_0's `-128 Σ n` per lane are exact
//! integers added before the conversion; Q4_1's and Q5_1's `m · Σ x_b` is one FMA per block, with
//! `Σ x_b = s_b Σ n_i`, and Q4_K's `dmin m_j Σ x_j` one FMA per eight sub-blocks.
//!
//! Error: `|x_i - s_b n_i| ≤ s_b / 2 ≤ 2^-B max_b |x|`, so a block's dot is within `2^-B · 32 ·
//! max_b |x| · max |w|` plus one f32 rounding of each of the terms above, the order of an f32
//! sum's rounding (the exact mode's contract: agreement with the f64 reference up to f32
//! rounding; `tests/qmatmul.rs`, `exact_decode_block_floating_point_edges` with large
//! outliers). A row with a non-finite element, or a block whose largest element is nonzero and
//! below 2⁻⁸¹ (where `d · s_b` could fall below the normal f32 range), is not converted:
//! [`quantize`] returns `false` and the caller runs `decode`'s f32 kernel.
//!
//! Activation row layout ([`act_bytes`]): per quad of 4 blocks 384 bytes of digits, each plane
//! `h, m, l` as two 64-byte registers. Q4_0 / Q4_1: the quad's 16-byte low halves (elements
//! 0–15 of block `j` at bytes `16 j ..`), then its high halves (elements 16–31), the layout of a
//! quad's nibbles in one 512-bit register. Q4_K (sub-blocks `4g .. 4g + 4`): sub-blocks `4g`,
//! `4g + 2` (32 bytes each), then `4g + 1`, `4g + 3`, as a Q4_K block's 64 quant bytes hold
//! their low and their high nibbles. Q8_0 and Q6_K: per pair of blocks the planes, each 64 bytes in
//! element order. Then 64 bytes of correction (`i32` per lane) per quad (Q4_0) or pair (Q8_0, Q6_K);
//! then `s_b` and `Σ x_b` as f32 per block. Blocks past the row's end, up to a whole quad, are
//! zero.

use rlx_gguf::GgmlType;

/// Bytes of one quad's digit planes.
const QUAD_BYTES: usize = 3 * 2 * 64;
/// Bytes of one quad's (Q4) or pair's (Q8_0) correction.
const CORR_BYTES: usize = 64;

/// True when `ty` has this kernel.
pub(super) fn has_path(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q4_0
            | GgmlType::Q4_1
            | GgmlType::Q5_0
            | GgmlType::Q5_1
            | GgmlType::Q8_0
            | GgmlType::Q4_K
            | GgmlType::Q5_K
            | GgmlType::Q6_K
    )
}

/// Bytes of one converted activation row of `k` elements (`k` a multiple of 32).
pub(super) fn act_bytes(k: usize) -> usize {
    let nb = k / 32;
    nb.div_ceil(4) * (QUAD_BYTES + 2 * CORR_BYTES) + 8 * nb
}

/// The power of two `s` that block floating point holds a block whose largest magnitude is
/// `amax` with (`|x / s| < 2^bits`), and `1 / s`; `None` where the block is not converted.
/// `amax` in `[2^(e-127), 2^(e-126))` gives `s = 2^(e-126-bits)`; `e >= 46` keeps
/// `s >= 2^-102`, so `d · s` is a normal f32 for every f16 `d`. An all-zero block takes `s = 1`.
#[inline(always)]
pub(super) fn block_scale(amax: f32, bits: u32) -> Option<(f32, f32)> {
    let e = amax.to_bits() >> 23;
    if amax == 0.0 {
        Some((1.0, 1.0))
    } else if e < 46 {
        None
    } else {
        Some((f32::from_bits((e + 1 - bits) << 23), f32::from_bits((253 + bits - e) << 23)))
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) use avx512::{block_ints, digits, dot_rows, quantize};

#[cfg(target_arch = "x86_64")]
// The kernels index several per-row arrays with one row index.
#[allow(clippy::needless_range_loop)]
mod avx512 {
    use super::{CORR_BYTES, QUAD_BYTES};
    use crate::kernels::avx512::reduce_rows;
    use crate::kernels::qmatmul::decode::{Ahead, k4_scales, prefetch, prefetch_ahead, prefetch_rows};
    use crate::kernels::qmatmul::int8::{Heads, group};
    use rlx_gguf::GgmlType;
    use std::arch::x86_64::*;

    /// Weight rows per group (sharing the activation loads).
    const ROWS: usize = 4;

    /// Convert the activation row `x` (`32 nb` floats) into `out` ([`super::act_bytes`] bytes)
    /// for the weights `ty` (a scheme of [`super::has_path`]). Returns `false`, leaving `out`
    /// unspecified, for a row with a non-finite element or a block whose largest magnitude is
    /// nonzero and below 2⁻⁸¹.
    ///
    /// # Safety
    /// AVX-512F/BW/VL + VNNI must be available; `out.len() >= act_bytes(x.len())`, `x.len()` a
    /// multiple of 32.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    pub(in crate::kernels::qmatmul) unsafe fn quantize(ty: GgmlType, x: &[f32], out: &mut [u8]) -> bool {
        // Q8_0 and Q6_K: pairs of blocks, each plane 64 bytes in element order.
        let (pairs, q4k) =
            (matches!(ty, GgmlType::Q8_0 | GgmlType::Q6_K), matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K));
        // Bits of `|n|`: four products of up to 128 · 2^21 (Q8_0) per lane stay inside i32.
        let bits: u32 = if ty == GgmlType::Q8_0 { 21 } else { 22 };
        let nb = x.len() / 32;
        let nq = nb.div_ceil(4);
        debug_assert!(out.len() >= super::act_bytes(x.len()));
        let (o, xp) = (out.as_mut_ptr(), x.as_ptr());
        let (corr, scales) = (nq * QUAD_BYTES, nq * (QUAD_BYTES + 2 * CORR_BYTES));
        let sums = scales + 4 * nb;
        // Byte offset of plane `p`, half `hf` (elements 16 hf ..) of block `b`.
        let at = |b: usize, p: usize, hf: usize| {
            if pairs {
                b / 2 * (QUAD_BYTES / 2) + 64 * p + 32 * (b % 2) + 16 * hf
            } else if q4k {
                // Sub-blocks 4g, 4g + 2 in the low-nibble register, 4g + 1, 4g + 3 in the high.
                b / 4 * QUAD_BYTES + 64 * (2 * p + b % 2) + 32 * (b % 4 / 2) + 16 * hf
            } else {
                b / 4 * QUAD_BYTES + 64 * (2 * p + hf) + 16 * (b % 4)
            }
        };
        // SAFETY (every pointer below): block `b < nb` has 32 floats at `xp + 32 b`; a quad's
        // digits span `QUAD_BYTES` from `o + q QUAD_BYTES`, its correction `CORR_BYTES` from
        // `o + corr + q CORR_BYTES`; the scales and sums `4 nb` bytes each.
        unsafe {
            for b in 0..4 * nq {
                if b >= nb {
                    for t in 0..6 {
                        _mm_storeu_si128(o.add(at(b, t / 2, t % 2)).cast(), _mm_setzero_si128());
                    }
                    continue;
                }
                let Some((s, ns)) = block_ints(xp.add(32 * b), bits) else { return false };
                let total = _mm512_add_epi32(ns[0], ns[1]);
                for (hf, &n) in ns.iter().enumerate() {
                    for (p, d) in digits(n).into_iter().enumerate() {
                        _mm_storeu_si128(o.add(at(b, p, hf)).cast(), _mm512_cvtepi32_epi8(d));
                    }
                }
                o.add(scales + 4 * b).cast::<f32>().write_unaligned(s);
                // |Σ n| ≤ 2^27: exact in i32; one rounding to f32, exact scaling.
                o.add(sums + 4 * b).cast::<f32>().write_unaligned(_mm512_reduce_add_epi32(total) as f32 * s);
            }
            // `-8 Σ n` (Q4_0), `-16 Σ n` (Q5_0), `-128 Σ n` (Q8_0) or `-32 Σ n` (Q6_K) per lane:
            // the kernel's own chain on bytes of 8 (16, 128, 32). Q4_1, Q5_1, Q4_K and Q5_K have
            // none.
            let zero = _mm512_setzero_si512();
            if pairs {
                let flip = _mm512_set1_epi8(if ty == GgmlType::Q8_0 { -128 } else { 32 });
                for pr in 0..2 * nq {
                    let d = chain_dot(o.add(pr * QUAD_BYTES / 2), 64, flip, zero);
                    _mm512_storeu_si512(o.add(corr + pr * CORR_BYTES).cast(), _mm512_sub_epi32(zero, d));
                }
            } else if matches!(ty, GgmlType::Q4_0 | GgmlType::Q5_0) {
                let off = _mm512_set1_epi8(if ty == GgmlType::Q4_0 { 8 } else { 16 });
                for q in 0..nq {
                    let d = quad_dot(o.add(q * QUAD_BYTES), off, off, zero);
                    _mm512_storeu_si512(o.add(corr + q * CORR_BYTES).cast(), _mm512_sub_epi32(zero, d));
                }
            }
        }
        true
    }

    /// The 32-element block at `p` as block floating point: `s_b` and the integers `n_i =
    /// round(x_i / s_b)` (elements 0–15, 16–31; the scaling by a power of two is exact, the
    /// rounding to nearest even), `|n_i| ≤ 2^bits`; `None` where the block holds a non-finite
    /// value or [`super::block_scale`] refuses it.
    ///
    /// # Safety
    /// AVX-512F; 32 floats readable at `p`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl")]
    #[inline]
    pub(in crate::kernels::qmatmul) unsafe fn block_ints(p: *const f32, bits: u32) -> Option<(f32, [__m512i; 2])> {
        let expo = _mm512_set1_epi32(0x7f80_0000);
        // SAFETY: the caller's.
        let xs = unsafe { [_mm512_loadu_ps(p), _mm512_loadu_ps(p.add(16))] };
        let inf = _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(xs[0]), expo), expo)
            | _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_castps_si512(xs[1]), expo), expo);
        if inf != 0 {
            return None;
        }
        let amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(xs[0]), _mm512_abs_ps(xs[1])));
        let (s, inv) = super::block_scale(amax, bits)?;
        let inv = _mm512_set1_ps(inv);
        Some((s, xs.map(|xv| _mm512_cvtps_epi32(_mm512_mul_ps(xv, inv)))))
    }

    /// The signed byte digits `[h, m, l]` of `n = 2¹⁶ h + 2⁸ m + l` per lane (`l, m ∈ [-128,
    /// 127]`; `|h| ≤ 65` for `|n| ≤ 2²²`).
    #[target_feature(enable = "avx512f")]
    #[inline]
    pub(in crate::kernels::qmatmul) fn digits(n: __m512i) -> [__m512i; 3] {
        let (byte, half) = (_mm512_set1_epi32(255), _mm512_set1_epi32(128));
        let l = _mm512_sub_epi32(_mm512_and_si512(_mm512_add_epi32(n, half), byte), half);
        let t = _mm512_srai_epi32::<8>(_mm512_sub_epi32(n, l));
        let m = _mm512_sub_epi32(_mm512_and_si512(_mm512_add_epi32(t, half), byte), half);
        let h = _mm512_srai_epi32::<8>(_mm512_sub_epi32(t, m));
        [h, m, l]
    }

    /// `init + Σ q n` per lane of one quad: the unsigned nibbles `zlo` / `zhi` (block `j`'s low /
    /// high nibbles in 128-bit lane `j`) against the quad's digit planes at `xq` (two interleaved
    /// [`chain_dot`]s summed in one chain; `init` starts the `l` chain, as there).
    ///
    /// # Safety
    /// AVX-512F + VNNI; `xq` points to a quad's `QUAD_BYTES`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn quad_dot(xq: *const u8, zlo: __m512i, zhi: __m512i, init: __m512i) -> __m512i {
        // SAFETY: six 64-byte loads inside the quad (caller).
        let x = |t: usize| unsafe { _mm512_loadu_si512(xq.add(64 * t).cast()) };
        // Three independent chains of two, shifted and summed at the end (the same i32 result,
        // wrapping): one chain of six `vpdpbusd` made the row loop latency-bound.
        let z = _mm512_setzero_si512();
        let h = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, zlo, x(0)), zhi, x(1));
        let m = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(z, zlo, x(2)), zhi, x(3));
        let l = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(init, zlo, x(4)), zhi, x(5));
        _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32::<16>(h), _mm512_slli_epi32::<8>(m)), l)
    }

    /// [`quad_dot`] of a quad's first two blocks alone (the low 256 bits of every register; a
    /// row's last, half-filled quad, as K = 576's 18 blocks leave): half the work of the
    /// 512-bit form, on single-pumped 256-bit µops.
    ///
    /// # Safety
    /// As [`quad_dot`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn half_quad_dot(xq: *const u8, zlo: __m256i, zhi: __m256i, init: __m256i) -> __m256i {
        // SAFETY: the low 32 bytes of the quad's six 64-byte planes (caller).
        let x = |t: usize| unsafe { _mm256_loadu_si256(xq.add(64 * t).cast()) };
        let z = _mm256_setzero_si256();
        let h = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(z, zlo, x(0)), zhi, x(1));
        let m = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(z, zlo, x(2)), zhi, x(3));
        let l = _mm256_dpbusd_epi32(_mm256_dpbusd_epi32(init, zlo, x(4)), zhi, x(5));
        _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32::<16>(h), _mm256_slli_epi32::<8>(m)), l)
    }

    /// `init + Σ q n` per lane of the unsigned bytes `z` against the digit planes `h, m, l` at
    /// `x`, `x + step`, `x + 2 step` (a Q8_0 pair's planes: `step` 64; a Q4_K quad's low-nibble
    /// sub-blocks from its first register, the high ones from its second: `step` 128). `init`
    /// (a correction) starts the `l` chain instead of being added after it: one add fewer.
    ///
    /// # Safety
    /// AVX-512F + VNNI; the three 64-byte planes are readable.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn chain_dot(x: *const u8, step: usize, z: __m512i, init: __m512i) -> __m512i {
        // SAFETY: three 64-byte loads (caller).
        let x = |p: usize| unsafe { _mm512_loadu_si512(x.add(step * p).cast()) };
        // Independent chains, shifted and summed at the end (the same wrapping i32 result).
        let zero = _mm512_setzero_si512();
        let (h, m) = (_mm512_dpbusd_epi32(zero, z, x(0)), _mm512_dpbusd_epi32(zero, z, x(1)));
        let l = _mm512_dpbusd_epi32(init, z, x(2));
        _mm512_add_epi32(_mm512_add_epi32(_mm512_slli_epi32::<16>(h), _mm512_slli_epi32::<8>(m)), l)
    }

    /// Block layouts (const parameters of the row kernel): `d f16, 16 bytes`, `w = d (q - 8)`.
    const Q4_0: u8 = 0;
    /// `d f16, m f16, 16 bytes`, `w = d q + m`.
    const Q4_1: u8 = 1;
    /// `d f16, qh u32, 16 bytes`, `w = d (q - 16)` with bit `i` of `qh` as bit 4 of element `i`.
    const Q5_0: u8 = 2;
    /// `d f16, m f16, qh u32, 16 bytes`, `w = d q + m` (bit 4 as in Q5_0).
    const Q5_1: u8 = 3;

    /// The dot products of `R` rows.
    type RowsFn<const R: usize> = unsafe fn([*const u8; R], *const u8, usize) -> [f32; R];

    /// `y[r] = Σ dequant(w row r) · x` for every row of `w` (`y.len()` rows of `row_bytes`),
    /// `xa` the activation row converted by [`quantize`]; with `split` the rows are in
    /// `rlx_gguf::Layout::SplitRows`.
    ///
    /// # Safety
    /// AVX-512F/BW/VL + VNNI, AVX2, FMA and F16C must be available; `ty` satisfies
    /// [`super::has_path`]; `w.len() == y.len() · row_bytes`, `row_bytes` = `nb` blocks of `ty`;
    /// `xa` holds `act_bytes(32 nb)` bytes written by [`quantize`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    pub(in crate::kernels::qmatmul) unsafe fn dot_rows(
        ty: GgmlType,
        split: bool,
        w: &[u8],
        row_bytes: usize,
        xa: &[u8],
        nb: usize,
        y: &mut [f32],
    ) {
        debug_assert_eq!(w.len(), y.len() * row_bytes);
        debug_assert!(xa.len() >= super::act_bytes(32 * nb));
        let (dot, dot1): (RowsFn<ROWS>, RowsFn<1>) = match (ty, split) {
            (GgmlType::Q4_K, _) => (rows_q4k::<ROWS, false>, rows_q4k::<1, false>),
            (GgmlType::Q5_K, _) => (rows_q4k::<ROWS, true>, rows_q4k::<1, true>),
            (GgmlType::Q6_K, _) => (rows_q6k::<ROWS>, rows_q6k::<1>),
            (GgmlType::Q8_0, false) => (rows_q8::<ROWS, false>, rows_q8::<1, false>),
            (GgmlType::Q8_0, true) => (rows_q8::<ROWS, true>, rows_q8::<1, true>),
            (GgmlType::Q4_0, false) => (rows::<ROWS, Q4_0, false>, rows::<1, Q4_0, false>),
            (GgmlType::Q4_0, true) => (rows::<ROWS, Q4_0, true>, rows::<1, Q4_0, true>),
            (GgmlType::Q5_0, false) => (rows::<ROWS, Q5_0, false>, rows::<1, Q5_0, false>),
            (GgmlType::Q5_0, true) => (rows::<ROWS, Q5_0, true>, rows::<1, Q5_0, true>),
            (GgmlType::Q5_1, false) => (rows::<ROWS, Q5_1, false>, rows::<1, Q5_1, false>),
            (GgmlType::Q5_1, true) => (rows::<ROWS, Q5_1, true>, rows::<1, Q5_1, true>),
            (_, false) => (rows::<ROWS, Q4_1, false>, rows::<1, Q4_1, false>),
            (_, true) => (rows::<ROWS, Q4_1, true>, rows::<1, Q4_1, true>),
        };
        let (wp, xp) = (w.as_ptr(), xa.as_ptr());
        let full = y.len() / ROWS * ROWS;
        // SAFETY: rows `j .. j + ROWS` (or `j`) lie inside `w`; the callee's contract is ours.
        unsafe {
            // The rows between the first group and the first ones the kernel prefetches.
            prefetch(w, ROWS * row_bytes, prefetch_rows(row_bytes) * row_bytes);
            for j in (0..full).step_by(ROWS) {
                let rows = std::array::from_fn(|r| wp.add((j + r) * row_bytes));
                y[j..j + ROWS].copy_from_slice(&dot(rows, xp, nb));
            }
            for (j, yj) in y.iter_mut().enumerate().skip(full) {
                *yj = dot1([wp.add(j * row_bytes)], xp, nb)[0];
            }
        }
    }

    /// The dot products of `R` rows of scheme `K` (`nb` blocks each; `SPLIT`: in
    /// `rlx_gguf::Layout::SplitRows`) with the converted activation row at `xa`.
    ///
    /// # Safety
    /// As [`dot_rows`]; every `w[r]` points to a whole row.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn rows<const R: usize, const K: u8, const SPLIT: bool>(
        w: [*const u8; R],
        xa: *const u8,
        nb: usize,
    ) -> [f32; R] {
        // Block bytes: Q4_0 18, Q4_1 20, Q5_0 22, Q5_1 24 (the quants the last 16, Q5's `qh`
        // the 4 before them); `m` (Q4_1, Q5_1) and the sign offset (Q4_0 8, Q5_0 16).
        let tb: usize = [18, 20, 22, 24][K as usize];
        let (has_m, offset, five) = (K == Q4_1 || K == Q5_1, K == Q4_0 || K == Q5_0, K >= Q5_0);
        let row: usize = nb * tb;
        let ahead = Ahead::new(row);
        // Split rows: the `qh` low halves after the `d`s (and `m`s), then the high halves.
        let qh_at = rlx_gguf::layout::split_qh_offset(nb, has_m);
        // Quant bytes of block `b` at `ts b + qo`.
        let (ts, qo): (usize, usize) = if SPLIT { (16, 0) } else { (tb, tb - 16) };
        // Opaque to the optimizer: knowing the constant, LLVM turns each masked `+ 16` on the
        // nibble bytes into an OR and a masked byte move (two µops instead of one `vpaddb{k}`).
        let bit4 = std::hint::black_box(_mm512_set1_epi8(16));
        // Bytes of four `qh` words: their low 16-bit halves, then their high ones.
        let halves = _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15);
        let nq = nb.div_ceil(4);
        let m4 = _mm512_set1_epi8(0x0f);
        let heads = Heads::new(ts);
        // Block of each lane in a quad (plus the quad's first block in its group).
        let quad = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
        let (corr, scales) = (xa.wrapping_add(nq * QUAD_BYTES), xa.wrapping_add(nq * (QUAD_BYTES + 2 * CORR_BYTES)));
        let sums = scales.wrapping_add(4 * nb);
        let mut acc = [_mm512_setzero_ps(); R];
        let mut sc = [_mm512_setzero_ps(); R];
        let mut g0 = 0;
        // SAFETY (every pointer below): block `b < nb` of row `r` spans `ts` bytes from
        // `w[r] + ts b` (split: its quants 16 bytes from `w[r] + 16 b`, its f16 fields at
        // `w[r] + 16 nb + 2 b` and `+ 18 nb + 2 b`, Q5's `qh` halves at `qh_at + 2 b` and `2 nb`
        // on), read under the group's lane mask or for
        // blocks `< nb` only; the activation row is `act_bytes(32 nb)` bytes (`quantize`).
        unsafe {
            while g0 < nb {
                let (gn, lanes) = group(nb, g0);
                let xs = _mm512_maskz_loadu_ps(lanes, scales.add(4 * g0).cast());
                let sx = _mm512_maskz_loadu_ps(lanes, sums.add(4 * g0).cast());
                for r in 0..R {
                    prefetch_ahead(w[r], ahead, g0 * ts, (g0 + gn) * ts);
                    let (d, m) = if SPLIT {
                        let s0 = 16 * nb + 2 * g0;
                        if K == Q4_0 {
                            prefetch_ahead(w[r], ahead, s0, s0 + 2 * gn);
                        } else if g0 == 0 {
                            prefetch_ahead(w[r], ahead, s0, row);
                        }
                        let d = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, w[r].add(s0).cast()));
                        let m = if has_m {
                            _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, w[r].add(s0 + 2 * nb).cast()))
                        } else {
                            _mm512_setzero_ps()
                        };
                        (d, m)
                    } else {
                        let h = heads.at(w[r].add(g0 * ts), lanes);
                        let m = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(h)));
                        (_mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)), m)
                    };
                    sc[r] = _mm512_mul_ps(d, xs);
                    if has_m {
                        // Q4_1 / Q5_1's `m · Σx` into the same lanes: one horizontal sum per
                        // row (a second one was ~6% of a K = 576 row's time).
                        acc[r] = _mm512_fmadd_ps(m, sx, acc[r]);
                    }
                }
                let mut i = 0;
                while i < gn {
                    let b = g0 + i;
                    let xq = xa.add(b / 4 * QUAD_BYTES);
                    let init = if offset {
                        _mm512_loadu_si512(corr.add(b / 4 * CORR_BYTES).cast())
                    } else {
                        _mm512_setzero_si512()
                    };
                    let sidx = _mm512_add_epi32(quad, _mm512_set1_epi32(i as i32));
                    let nblk = 4.min(gn - i);
                    if nblk <= 2 {
                        // The row's last blocks, one or two: 256-bit registers, the quad's
                        // lanes 0–1 (the same integer dots; the upper lanes' zero dots as the
                        // 512-bit form has them, so the same bits).
                        let init = _mm512_castsi512_si256(init);
                        let (m4, bit4) = (_mm512_castsi512_si256(m4), _mm512_castsi512_si256(bit4));
                        for r in 0..R {
                            let p = w[r].add(b * ts + qo);
                            let q = if SPLIT {
                                _mm256_maskz_loadu_epi32(((1u16 << (4 * nblk)) - 1) as u8, p.cast())
                            } else {
                                let q = _mm256_castsi128_si256(_mm_loadu_si128(p.cast()));
                                if nblk > 1 {
                                    _mm256_inserti128_si256::<1>(q, _mm_loadu_si128(p.add(ts).cast()))
                                } else {
                                    q
                                }
                            };
                            let mut zlo = _mm256_and_si256(q, m4);
                            let mut zhi = _mm256_and_si256(_mm256_srli_epi16::<4>(q), m4);
                            if five {
                                // As the 512-bit path below, blocks `b` and `b + 1` alone.
                                let qh = |j: usize| -> u32 {
                                    if j >= nblk {
                                        0
                                    } else if SPLIT {
                                        let h = w[r].add(qh_at + 2 * (b + j)).cast::<u16>();
                                        u32::from(h.read_unaligned()) | u32::from(h.add(nb).read_unaligned()) << 16
                                    } else {
                                        w[r].add((b + j) * ts + qo - 4).cast::<u32>().read_unaligned()
                                    }
                                };
                                let (q0, q1) = (qh(0), qh(1));
                                zlo = _mm256_mask_add_epi8(zlo, (q0 & 0xffff) | q1 << 16, zlo, bit4);
                                zhi = _mm256_mask_add_epi8(zhi, q0 >> 16 | (q1 & 0xffff_0000), zhi, bit4);
                            }
                            let dot = _mm512_zextsi256_si512(half_quad_dot(xq, zlo, zhi, init));
                            let s = _mm512_permutexvar_ps(sidx, sc[r]);
                            acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, acc[r]);
                        }
                        i += 4;
                        continue;
                    }
                    for r in 0..R {
                        let p = w[r].add(b * ts + qo);
                        let q = if SPLIT && nblk == 4 {
                            _mm512_loadu_si512(p.cast())
                        } else if SPLIT {
                            _mm512_maskz_loadu_epi32((1u16 << (4 * nblk)) - 1, p.cast())
                        } else {
                            let mut q = _mm512_castsi128_si512(_mm_loadu_si128(p.cast()));
                            if nblk > 1 {
                                q = _mm512_mask_broadcast_i32x4(q, 0x00f0, _mm_loadu_si128(p.add(ts).cast()));
                            }
                            if nblk > 2 {
                                q = _mm512_mask_broadcast_i32x4(q, 0x0f00, _mm_loadu_si128(p.add(2 * ts).cast()));
                            }
                            if nblk > 3 {
                                q = _mm512_mask_broadcast_i32x4(q, 0xf000, _mm_loadu_si128(p.add(3 * ts).cast()));
                            }
                            q
                        };
                        // Lanes of missing blocks: zero nibbles against zero digits.
                        let q =
                            if !SPLIT && nblk < 4 { _mm512_maskz_mov_epi32((1u16 << (4 * nblk)) - 1, q) } else { q };
                        let mut zlo = _mm512_and_si512(q, m4);
                        let mut zhi = _mm512_and_si512(_mm512_srli_epi16::<4>(q), m4);
                        if five && SPLIT {
                            // Split rows hold the four blocks' `qh` low halves side by side at
                            // `qh_at + 2 b`, their high halves `2 nb` on: the two byte masks
                            // below, as loaded (blocks past the row's end: no bits).
                            let h = w[r].add(qh_at + 2 * b);
                            let (lo, hi) = if nblk == 4 {
                                (h.cast::<u64>().read_unaligned(), h.add(2 * nb).cast::<u64>().read_unaligned())
                            } else {
                                let half = |at: usize| {
                                    (0..nblk).fold(0u64, |a, j| {
                                        a | u64::from(h.add(at + 2 * j).cast::<u16>().read_unaligned()) << (16 * j)
                                    })
                                };
                                (half(0), half(2 * nb))
                            };
                            zlo = _mm512_mask_add_epi8(zlo, lo, zlo, bit4);
                            zhi = _mm512_mask_add_epi8(zhi, hi, zhi, bit4);
                        } else if five {
                            // Bit 4 of element `i` (`16 + i`) of block `j`: bit `i` (`16 + i`) of
                            // its `qh`, for byte `16 j + i` of the low (high) nibbles. The four
                            // `qh` in one register, their low halves then their high ones packed
                            // by one shuffle (a loop over the blocks became a `vpgatherdd`,
                            // microcoded and slow on AMD Zen 4).
                            let qh = |j: usize| {
                                if j < nblk {
                                    w[r].add((b + j) * ts + qo - 4).cast::<i32>().read_unaligned()
                                } else {
                                    0
                                }
                            };
                            let v = _mm_shuffle_epi8(_mm_set_epi32(qh(3), qh(2), qh(1), qh(0)), halves);
                            let (lo, hi) = (_mm_cvtsi128_si64(v) as u64, _mm_extract_epi64::<1>(v) as u64);
                            zlo = _mm512_mask_add_epi8(zlo, lo, zlo, bit4);
                            zhi = _mm512_mask_add_epi8(zhi, hi, zhi, bit4);
                        }
                        let dot = quad_dot(xq, zlo, zhi, init);
                        let s = _mm512_permutexvar_ps(sidx, sc[r]);
                        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, acc[r]);
                    }
                    i += 4;
                }
                g0 += gn;
            }
        }
        reduce_rows(acc)
    }

    /// [`rows`] for Q8_0 (`d f16, 32 i8`; `SPLIT`: quants at `32 b`, `d` at `32 nb + 2 b`),
    /// two blocks per 512-bit step.
    ///
    /// # Safety
    /// As [`rows`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn rows_q8<const R: usize, const SPLIT: bool>(w: [*const u8; R], xa: *const u8, nb: usize) -> [f32; R] {
        let ahead = Ahead::new(34 * nb);
        let (ts, qo): (usize, usize) = if SPLIT { (32, 0) } else { (34, 2) };
        let nq = nb.div_ceil(4);
        let flip = _mm512_set1_epi8(-128);
        let heads = Heads::new(ts);
        // Block of each lane in a pair (plus the pair's first block in its group).
        let pair = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
        let (corr, scales) = (xa.wrapping_add(nq * QUAD_BYTES), xa.wrapping_add(nq * (QUAD_BYTES + 2 * CORR_BYTES)));
        let mut acc = [_mm512_setzero_ps(); R];
        let mut sc = [_mm512_setzero_ps(); R];
        let mut g0 = 0;
        // SAFETY (every pointer below): block `b < nb` of row `r` spans `ts` bytes from
        // `w[r] + ts b` (split: its 32 quants from `w[r] + 32 b`, its `d` at `w[r] + 32 nb +
        // 2 b`), read under the group's lane mask or for blocks `< nb` only; the activation row
        // is `act_bytes(32 nb)` bytes (`quantize`).
        unsafe {
            while g0 < nb {
                let (gn, lanes) = group(nb, g0);
                let xs = _mm512_maskz_loadu_ps(lanes, scales.add(4 * g0).cast());
                for r in 0..R {
                    if !SPLIT {
                        prefetch_ahead(w[r], ahead, g0 * ts, (g0 + gn) * ts);
                    }
                    let d = if SPLIT {
                        let s0 = 32 * nb + 2 * g0;
                        prefetch_ahead(w[r], ahead, s0, s0 + 2 * gn);
                        _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, w[r].add(s0).cast()))
                    } else {
                        let h = heads.at(w[r].add(g0 * ts), lanes);
                        _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h))
                    };
                    sc[r] = _mm512_mul_ps(d, xs);
                }
                let mut i = 0;
                while i < gn {
                    let b = g0 + i;
                    let two = i + 1 < gn;
                    let xp = xa.add(b / 2 * (QUAD_BYTES / 2));
                    let c = _mm512_loadu_si512(corr.add(b / 2 * CORR_BYTES).cast());
                    let sidx = _mm512_add_epi32(pair, _mm512_set1_epi32(i as i32));
                    for r in 0..R {
                        if SPLIT {
                            // In step with the reads: one line per row and pair.
                            prefetch_ahead(w[r], ahead, b * ts, (b + 2).min(g0 + gn) * ts);
                        }
                        let p = w[r].add(b * ts + qo);
                        // A missing second block: zero bytes, flipped to 128, against zero digits.
                        let q = if !two {
                            _mm512_zextsi256_si512(_mm256_loadu_si256(p.cast()))
                        } else if SPLIT {
                            _mm512_loadu_si512(p.cast())
                        } else {
                            let lo = _mm512_castsi256_si512(_mm256_loadu_si256(p.cast()));
                            _mm512_mask_broadcast_i64x4(lo, 0xf0, _mm256_loadu_si256(p.add(ts).cast()))
                        };
                        let dot = chain_dot(xp, 64, _mm512_xor_si512(q, flip), c);
                        let s = _mm512_permutexvar_ps(sidx, sc[r]);
                        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, acc[r]);
                    }
                    i += 2;
                }
                g0 += gn;
            }
        }
        reduce_rows(acc)
    }

    /// [`rows`] for Q4_K (144-byte blocks of 256: `d`, `dmin` f16, 12 bytes of 6-bit scales and
    /// mins, 128 bytes of nibbles; `w = d sc_j q - dmin m_j` per 32-weight sub-block `j`,
    /// `nb` sub-blocks per row): per 64 quant bytes (four sub-blocks), the low and the high
    /// nibbles each in their own integer chain (their sub-blocks have their own scales), each
    /// lane scaled by `d sc_j s_j`; the `dmin m_j Σ x_j` terms in 8 f32 lanes per row. With
    /// `FIVE`, Q5_K (176-byte blocks: 32 bytes of fifth bits before the nibbles, bit `j` of
    /// byte `l` for element `l` of sub-block `j`): `16` added to the nibble bytes whose bit is
    /// set (`q ≤ 31`, so a lane's `|Σ q n| ≤ 4 · 31 · 2²²` per chain step stays inside `i32`).
    ///
    /// # Safety
    /// As [`rows`] (`nb` a multiple of 8).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn rows_q4k<const R: usize, const FIVE: bool>(w: [*const u8; R], xa: *const u8, nb: usize) -> [f32; R] {
        let (ts, qo): (usize, usize) = if FIVE { (176, 48) } else { (144, 16) };
        let ahead = Ahead::new(ts * nb / 8);
        // Opaque to the optimizer (see `rows`): one `vpaddb{k}` per fifth-bit add.
        let sixteen = std::hint::black_box(_mm512_set1_epi8(16));
        // Q5_K: the fifth bit of each nibble byte of a 64-byte load (the low nibbles: sub-blocks
        // 4g in bytes 0..32, 4g + 2 in 32..64; the high: 4g + 1, 4g + 3).
        let bit =
            |j: i32| _mm512_mask_blend_epi8(!0u64 << 32, _mm512_set1_epi8(1 << j), _mm512_set1_epi8(1 << (j + 2)));
        let bits = [[bit(0), bit(1)], [bit(4), bit(5)]];
        let nq = nb.div_ceil(4);
        let m4 = _mm512_set1_epi8(0x0f);
        // Sub-block of each lane: the low nibbles of a 64-byte load are sub-blocks 4g and
        // 4g + 2, the high ones 4g + 1 and 4g + 3.
        let idx = |g: i32, t: i32| {
            let (a, b) = (4 * g + t, 4 * g + t + 2);
            _mm512_setr_epi32(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b)
        };
        let sel = [[idx(0, 0), idx(0, 1)], [idx(1, 0), idx(1, 1)]];
        let (scales, sums) = (
            xa.wrapping_add(nq * (QUAD_BYTES + 2 * CORR_BYTES)),
            xa.wrapping_add(nq * (QUAD_BYTES + 2 * CORR_BYTES) + 4 * nb),
        );
        let mut acc = [_mm512_setzero_ps(); R];
        let mut macc = [_mm256_setzero_ps(); R];
        // SAFETY (every pointer below): block `b < nb / 8` of row `r` spans `ts` bytes from
        // `w[r] + ts b`; the activation row is `act_bytes(32 nb)` bytes (`quantize`).
        unsafe {
            for b in 0..nb / 8 {
                let xs = _mm256_loadu_ps(scales.add(32 * b).cast());
                let sx = _mm256_loadu_ps(sums.add(32 * b).cast());
                for r in 0..R {
                    let p = w[r].add(ts * b);
                    prefetch_ahead(w[r], ahead, ts * b, ts * (b + 1));
                    let qh = if FIVE {
                        _mm512_broadcast_i64x4(_mm256_loadu_si256(p.add(16).cast()))
                    } else {
                        _mm512_setzero_si512()
                    };
                    let (dsc, mmn) = k4_scales(p);
                    macc[r] = _mm256_fmadd_ps(mmn, sx, macc[r]);
                    let s16 = _mm512_castps256_ps512(_mm256_mul_ps(dsc, xs));
                    for g in 0..2 {
                        let q = _mm512_loadu_si512(p.add(qo + 64 * g).cast());
                        let xq = xa.add((2 * b + g) * QUAD_BYTES);
                        let mut zlo = _mm512_and_si512(q, m4);
                        let mut zhi = _mm512_and_si512(_mm512_srli_epi16::<4>(q), m4);
                        if FIVE {
                            zlo = _mm512_mask_add_epi8(zlo, _mm512_test_epi8_mask(qh, bits[g][0]), zlo, sixteen);
                            zhi = _mm512_mask_add_epi8(zhi, _mm512_test_epi8_mask(qh, bits[g][1]), zhi, sixteen);
                        }
                        let lo = _mm512_cvtepi32_ps(chain_dot(xq, 128, zlo, _mm512_setzero_si512()));
                        let hi = _mm512_cvtepi32_ps(chain_dot(xq.add(64), 128, zhi, _mm512_setzero_si512()));
                        acc[r] = _mm512_fmadd_ps(lo, _mm512_permutexvar_ps(sel[g][0], s16), acc[r]);
                        acc[r] = _mm512_fmadd_ps(hi, _mm512_permutexvar_ps(sel[g][1], s16), acc[r]);
                    }
                }
            }
        }
        let a = reduce_rows(acc);
        std::array::from_fn(|r| {
            let m = macc[r];
            let m4 = _mm_add_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps::<1>(m));
            let m2 = _mm_add_ps(m4, _mm_movehl_ps(m4, m4));
            a[r] - _mm_cvtss_f32(_mm_add_ss(m2, _mm_movehdup_ps(m2)))
        })
    }

    /// [`rows`] for Q6_K (210-byte blocks of 256: 128 bytes of low nibbles `ql`, 64 bytes of
    /// high bit pairs `qh`, 16 `i8` sub-block scales, `d` f16; `w = d sc_j (q - 32)` per
    /// 16-weight sub-block `j`, `nb` 32-weight blocks per row). Per 128-weight half, one
    /// 64-byte load of `ql` holds its elements 0–63 in its low nibbles and 64–127 in its high
    /// ones, in element order (the activation's pair layout, as Q8_0's), each completed to
    /// 6 bits from `qh` and dotted unsigned (`q ≤ 63`: a lane's `|Σ q n| ≤ 4 · 63 · 2²²`) with
    /// the `-32 Σ n` correction added; each lane scaled by `d sc_j s_b`.
    ///
    /// # Safety
    /// As [`rows`] (`nb` a multiple of 8).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn rows_q6k<const R: usize>(w: [*const u8; R], xa: *const u8, nb: usize) -> [f32; R] {
        const TS: usize = 210;
        let ahead = Ahead::new(TS * nb / 8);
        let nq = nb.div_ceil(4);
        let (m4, m30) = (_mm512_set1_epi8(0x0f), _mm512_set1_epi8(0x30));
        // `qh` (32 bytes, in both 256-bit halves): byte `l` holds the bit pairs of elements
        // `l`, `l + 32`, `l + 64`, `l + 96` of the half; moved to bits 4..6 for elements 0..32
        // / 32..64 (low nibbles) and 64..96 / 96..128 (high nibbles).
        let sh_lo = _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2);
        let sh_hi = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
        // Sub-block of each lane of the `g`-th 64-element register of a block; the 32-element
        // block of each sub-block.
        let sel: [__m512i; 4] = std::array::from_fn(|g| {
            let s = 4 * g as i32;
            _mm512_setr_epi32(
                s,
                s,
                s,
                s,
                s + 1,
                s + 1,
                s + 1,
                s + 1,
                s + 2,
                s + 2,
                s + 2,
                s + 2,
                s + 3,
                s + 3,
                s + 3,
                s + 3,
            )
        });
        let half = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
        let (corr, scales) = (xa.wrapping_add(nq * QUAD_BYTES), xa.wrapping_add(nq * (QUAD_BYTES + 2 * CORR_BYTES)));
        let mut acc = [_mm512_setzero_ps(); R];
        // SAFETY (every pointer below): block `b < nb / 8` of row `r` spans `TS` bytes from
        // `w[r] + TS b`; the activation row is `act_bytes(32 nb)` bytes (`quantize`), its pairs
        // `4 b .. 4 b + 4` the block's four registers.
        unsafe {
            for b in 0..nb / 8 {
                let xs =
                    _mm512_permutexvar_ps(half, _mm512_castps256_ps512(_mm256_loadu_ps(scales.add(32 * b).cast())));
                let c: [__m512i; 4] =
                    std::array::from_fn(|g| _mm512_loadu_si512(corr.add((4 * b + g) * CORR_BYTES).cast()));
                for r in 0..R {
                    let p = w[r].add(TS * b);
                    prefetch_ahead(w[r], ahead, TS * b, TS * (b + 1));
                    let d = _mm512_set1_ps(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(
                        p.add(208).cast::<u16>().read_unaligned(),
                    )))));
                    let sc = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p.add(192).cast())));
                    let s16 = _mm512_mul_ps(_mm512_mul_ps(d, sc), xs);
                    for h in 0..2 {
                        let q = _mm512_loadu_si512(p.add(64 * h).cast());
                        let qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(p.add(128 + 32 * h).cast()));
                        let z = [
                            _mm512_or_si512(
                                _mm512_and_si512(q, m4),
                                _mm512_and_si512(_mm512_sllv_epi64(qh, sh_lo), m30),
                            ),
                            _mm512_or_si512(
                                _mm512_and_si512(_mm512_srli_epi16::<4>(q), m4),
                                _mm512_and_si512(_mm512_srlv_epi64(qh, sh_hi), m30),
                            ),
                        ];
                        for t in 0..2 {
                            let g = 2 * h + t;
                            let xq = xa.add((4 * b + g) * (QUAD_BYTES / 2));
                            let dot = chain_dot(xq, 64, z[t], c[g]);
                            acc[r] =
                                _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_permutexvar_ps(sel[g], s16), acc[r]);
                        }
                    }
                }
            }
        }
        reduce_rows(acc)
    }
}
