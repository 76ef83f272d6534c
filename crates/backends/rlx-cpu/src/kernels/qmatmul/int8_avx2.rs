//! Fast mode on x86-64 CPUs with AVX2 but no AVX-512 VNNI: Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0
//! weight rows against one Q8_0 activation row ([`super::int8::quantize_acts`]), as llama.cpp's
//! AVX2 `ggml_vec_dot_q4_0_q8_0` / `_q4_1_q8_1` / `_q5_0_q8_0` / `_q5_1_q8_1` / `_q8_0_q8_0`
//! (Q5's fifth bits as bytes, [`super::bfp_avx2::bit_bytes`]: Q5_0's `q - 16` as the signed
//! nibble byte or-ed with `0xf0` where the bit is clear, Q5_1's `q` with 16 where it is set):
//! per 32-weight block one 256-bit
//! `vpmaddubsw` of unsigned weight bytes against signed activation bytes (Q4_0 / Q5_0 / Q8_0: llama.cpp's
//! `|w| · sign(x, w)` form, weights in `-127..=127`), `vpmaddwd` into 8 exact `i32` lanes,
//! converted and FMA'd with `d_w · d_x` into one f32 accumulator per row; Q4_1's / Q5_1's `m_w · s_x`
//! accumulated in a scalar per row: llama.cpp's operations in its order, so the results are
//! bit-identical with its AVX2 (and AVX-512 VNNI) dots. The same math as [`super::int8`]'s
//! other levels: results equal up to f32 rounding of the per-block sums.
//!
//! [`ROWS`] weight rows share each activation load (Q8_0: one row at a time, see [`dot_rows`]);
//! weights in `rlx_gguf::Layout::SplitRows` are read in place (quants at `16 b` (`32 b`), `d`
//! at `16 nb + 2 b` (`32 nb + 2 b`), Q4_1's `m` `2 nb` after its `d`); the rows ahead are
//! prefetched into L1 ([`super::decode::row_groups`]); split rows' f16 scales 8 at a time by
//! `vcvtph2ps`.

use super::decode::{Ahead, prefetch, prefetch_ahead, prefetch_rows, row_groups};
use super::exact_avx2::hsum;
use super::int8::QK;
use rlx_gguf::GgmlType;
use std::arch::x86_64::*;

/// Weight rows processed together.
const ROWS: usize = 4;

/// Block kinds (const parameters of [`rows_dot`]).
const Q4_0: u8 = 0;
const Q4_1: u8 = 1;
const Q8_0: u8 = 2;
const Q5_0: u8 = 3;
const Q5_1: u8 = 4;

/// True when `ty` has this kernel.
pub(super) fn has_kernel(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q8_0)
}

/// The dot products of `R` rows (`nb` blocks each) with one activation row (the [`Ahead`]: see
/// [`rows_dot`]'s `STEP`).
type RowsFn<const R: usize> = unsafe fn([*const u8; R], usize, *const u8, Ahead) -> [f32; R];

/// `y[j] = Σ_b d_w d_x Σ q_w q_x (+ m_w s_x)` for every weight row `j` of `w` (`y.len()` rows
/// of `row_bytes`, blocks of `ty`, or with `split` in `Layout::SplitRows`) against the
/// activation row `x` (layout of [`super::int8::row_bytes_q8_0`], `row_bytes / type_size`
/// blocks).
///
/// # Safety
/// AVX2, FMA and F16C must be available; `ty` satisfies [`has_kernel`]; `w.len() == y.len() ·
/// row_bytes`; `x` holds one activation row of as many blocks.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_rows(ty: GgmlType, split: bool, w: &[u8], row_bytes: usize, x: &[u8], y: &mut [f32]) {
    debug_assert_eq!(w.len(), y.len() * row_bytes);
    let nb = row_bytes / ty.type_size();
    debug_assert!(x.len() >= super::int8::row_bytes_q8_0(nb * QK));
    let (dot, dot1): (RowsFn<ROWS>, RowsFn<1>) = match (ty, split) {
        (GgmlType::Q4_0, false) => (rows_dot::<ROWS, Q4_0, false, false>, rows_dot::<1, Q4_0, false, false>),
        (GgmlType::Q4_0, true) => (rows_dot::<ROWS, Q4_0, true, false>, rows_dot::<1, Q4_0, true, false>),
        (GgmlType::Q4_1, false) => (rows_dot::<ROWS, Q4_1, false, false>, rows_dot::<1, Q4_1, false, false>),
        (GgmlType::Q4_1, true) => (rows_dot::<ROWS, Q4_1, true, false>, rows_dot::<1, Q4_1, true, false>),
        (GgmlType::Q5_0, false) => (rows_dot::<ROWS, Q5_0, false, false>, rows_dot::<1, Q5_0, false, false>),
        (GgmlType::Q5_0, true) => (rows_dot::<ROWS, Q5_0, true, false>, rows_dot::<1, Q5_0, true, false>),
        (GgmlType::Q5_1, false) => (rows_dot::<ROWS, Q5_1, false, false>, rows_dot::<1, Q5_1, false, false>),
        (GgmlType::Q5_1, true) => (rows_dot::<ROWS, Q5_1, true, false>, rows_dot::<1, Q5_1, true, false>),
        (_, false) => (rows_dot::<ROWS, Q8_0, false, false>, rows_dot::<1, Q8_0, false, false>),
        (_, true) => (rows_dot::<ROWS, Q8_0, true, false>, rows_dot::<1, Q8_0, true, false>),
    };
    let xp = x.as_ptr();
    if ty == GgmlType::Q8_0 {
        // One row at a time, prefetching in step with the reads: the 4-row groups' interleaved
        // streams (and their burst of prefetches per group) left Q8_0, whose dot is cheap,
        // waiting on memory. Weights from DRAM, 1 core of an AMD EPYC Zen 3, `qmatmul_bench 1
        // 20 Q8_0 1 fast <copies> <K> <N>`, two interleaved rounds, 4-row groups → this:
        // 1536 × 576 0.089 → 0.055–0.057 ms, 896 × 4864 0.42–0.43 → 0.28, 4096 × 4096
        // 1.40–1.50 → 0.90–0.92, the SmolLM2 head 576 × 49152 2.2 → 1.87–1.90 (the weight
        // stream alone: 0.29 ms for 896 × 4864). One row at a time with the burst per row:
        // better on short rows only (4096 × 4096 1.67); 4-row groups prefetching in step:
        // better on 4096 × 4096 only. Q4_0 / Q4_1 / Q5_0 are bound by their dot's arithmetic
        // and keep the groups (measured no better or mixed either way).
        let step1: RowsFn<1> = if split { rows_dot::<1, Q8_0, true, true> } else { rows_dot::<1, Q8_0, false, true> };
        let wp = w.as_ptr();
        let ahead = Ahead::near_only(row_bytes);
        prefetch(w, 0, prefetch_rows(row_bytes) * row_bytes);
        for (j, yj) in y.iter_mut().enumerate() {
            // SAFETY: row `j` of `w`; the callee's contract is ours.
            *yj = unsafe { step1([wp.wrapping_add(j * row_bytes)], nb, xp, ahead)[0] };
        }
        return;
    }
    // Unused by the groups' kernels (`STEP` false).
    let ahead = Ahead::near_only(row_bytes);
    // SAFETY: the row pointers are rows of `w` (`row_groups`); the callees' contract is ours.
    unsafe { row_groups::<ROWS>(w, row_bytes, y, |rows| dot(rows, nb, xp, ahead), |row| dot1([row], nb, xp, ahead)[0]) }
}

/// The dot products of `R` rows of kind `K` (`nb` blocks each, `SPLIT`: in
/// `Layout::SplitRows`) with the activation row at `xp`, in llama.cpp's order: per row one
/// 8-lane accumulator taking `fma(d_w·d_x, Σ lanes, acc)` block after block, Q4_1's `m_w s_x`
/// (Q5_1's) in a scalar FMA chain, then [`hsum`] plus that chain (bit-identical with llama.cpp's AVX2
/// loops, which the fast mode's agreement with llama.cpp rests on: summed in another order,
/// SmolLM2's teacher-forced top-1 agreement fell from 100% to 97%).
///
/// The scales of 8 blocks at a time are converted (`vcvtph2ps`) and multiplied in one
/// register and read back one broadcast each; in split rows two blocks' nibbles come from one
/// 256-bit load, recombined by 128-bit halves. With `STEP`, each group of 8 blocks first
/// prefetches the same share of the rows `ahead` on ([`prefetch_ahead`]); without, `ahead` is
/// unused (a const parameter, not a run-time test: such a test in the exact f32 kernel's loop
/// had cost 30%).
///
/// # Safety
/// As [`dot_rows`]; every `rows[r]` points to one row of `nb` blocks, `xp` to one activation
/// row of as many blocks.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn rows_dot<const R: usize, const K: u8, const SPLIT: bool, const STEP: bool>(
    rows: [*const u8; R],
    nb: usize,
    xp: *const u8,
    ahead: Ahead,
) -> [f32; R] {
    let ts: usize = match K {
        Q4_0 => 18,
        Q4_1 => 20,
        Q5_0 => 22,
        Q5_1 => 24,
        _ => 34,
    };
    // Quant bytes per block, and the quants' offset in a block (Q5's `qh` the 4 bytes before).
    let (qb, qo) = match K {
        Q4_0 => (16, 2),
        Q4_1 => (16, 4),
        Q5_0 => (16, 6),
        Q5_1 => (16, 8),
        _ => (32, 2),
    };
    // Weights with a minimum `m` (unsigned quants), and the Q5 schemes.
    let (has_m, five) = (K == Q4_1 || K == Q5_1, K == Q5_0 || K == Q5_1);
    // Split rows: the `qh` low halves of every block, then the high halves.
    let qh_at = rlx_gguf::layout::split_qh_offset(nb, has_m);
    // Block `b`'s quants and `d` in row `r`: in the block, or in a split row's arrays; Q4_1's
    // `m` follows `d` (in a split row `2 nb` on).
    let quants =
        |r: usize, b: usize| if SPLIT { rows[r].wrapping_add(qb * b) } else { rows[r].wrapping_add(ts * b + qo) };
    let scale =
        |r: usize, b: usize| if SPLIT { rows[r].wrapping_add(qb * nb + 2 * b) } else { rows[r].wrapping_add(ts * b) };
    let min_of = if SPLIT { 2 * nb } else { 2 };
    let stride = if SPLIT { 2 } else { ts };
    let (m4, eight, ones) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi8(8), _mm256_set1_epi16(1));
    let (xd, xs) = (xp.wrapping_add(nb * QK).cast::<f32>(), xp.wrapping_add(nb * QK + 4 * nb).cast::<f32>());
    let mut acc = [_mm256_setzero_ps(); R];
    let mut corr = [0f32; R];
    // Per row the group's `d_w d_x` and (Q4_1) `m_w`.
    let mut sc = [[0f32; 8]; R];
    let mut mw = [[0f32; 8]; R];
    // SAFETY (every pointer below): block `b < nb` of row `r` (or its entries in the split
    // row's arrays of `nb`), activation block `b` and its scale and sum; the 8-scale loads
    // read whole groups only (`b0 + 8 <= nb`).
    unsafe {
        // Block `b` (`i` in its group) of every row against activation block `b`, the weight
        // bytes `w(r)` (unsigned nibbles, or Q8_0's signed bytes).
        let block = |acc: &mut [__m256; R],
                     corr: &mut [f32; R],
                     sc: &[[f32; 8]; R],
                     mw: &[[f32; 8]; R],
                     b: usize,
                     i: usize,
                     w: &dyn Fn(usize) -> __m256i| {
            let xv = _mm256_loadu_si256(xp.add(QK * b).cast());
            for r in 0..R {
                let p16 = if has_m {
                    _mm256_maddubs_epi16(w(r), xv)
                } else {
                    let wv = if K == Q4_0 { _mm256_sub_epi8(w(r), eight) } else { w(r) };
                    _mm256_maddubs_epi16(_mm256_sign_epi8(wv, wv), _mm256_sign_epi8(xv, wv))
                };
                let dot = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, ones));
                acc[r] = _mm256_fmadd_ps(_mm256_broadcast_ss(&sc[r][i]), dot, acc[r]);
                if has_m {
                    corr[r] = mw[r][i].mul_add(xs.add(b).read_unaligned(), corr[r]);
                }
            }
        };
        let nibbles = |qp: *const u8| {
            let v = _mm_loadu_si128(qp.cast());
            _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16::<4>(v), v), m4)
        };
        let f16 =
            |p: *const u8| _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(p.cast::<u16>().read_unaligned()))));
        for b0 in (0..nb).step_by(8) {
            let n = (nb - b0).min(8);
            if STEP {
                for &p in &rows {
                    // The rows' bytes of this group, in proportion (`ts` per block in both
                    // layouts): a prefetch never faults.
                    prefetch_ahead(p, ahead, b0 * ts, (b0 + n) * ts);
                }
            }
            for r in 0..R {
                if SPLIT && n == 8 {
                    let dx = _mm256_loadu_ps(xd.add(b0));
                    let d = _mm256_cvtph_ps(_mm_loadu_si128(scale(r, b0).cast()));
                    _mm256_storeu_ps(sc[r].as_mut_ptr(), _mm256_mul_ps(d, dx));
                    if has_m {
                        let m = _mm256_cvtph_ps(_mm_loadu_si128(scale(r, b0).add(min_of).cast()));
                        _mm256_storeu_ps(mw[r].as_mut_ptr(), m);
                    }
                } else {
                    for i in 0..n {
                        let p = scale(r, b0).add(stride * i);
                        sc[r][i] = f16(p) * xd.add(b0 + i).read_unaligned();
                        if has_m {
                            mw[r][i] = f16(p.add(min_of));
                        }
                    }
                }
            }
            let mut i = 0;
            if SPLIT && (K == Q4_0 || K == Q4_1) {
                // Two blocks' nibbles per load: low nibbles `[b | b + 1]`, high ones the same.
                while i + 2 <= n {
                    let b = b0 + i;
                    let halves: [(__m256i, __m256i); R] = std::array::from_fn(|r| {
                        let v = _mm256_loadu_si256(quants(r, b).cast());
                        (_mm256_and_si256(v, m4), _mm256_and_si256(_mm256_srli_epi16::<4>(v), m4))
                    });
                    block(&mut acc, &mut corr, &sc, &mw, b, i, &|r| {
                        _mm256_permute2x128_si256::<0x20>(halves[r].0, halves[r].1)
                    });
                    block(&mut acc, &mut corr, &sc, &mw, b + 1, i + 1, &|r| {
                        _mm256_permute2x128_si256::<0x31>(halves[r].0, halves[r].1)
                    });
                    i += 2;
                }
            }
            while i < n {
                let b = b0 + i;
                if K == Q8_0 {
                    block(&mut acc, &mut corr, &sc, &mw, b, i, &|r| _mm256_loadu_si256(quants(r, b).cast()));
                } else if five {
                    // Block `b`'s `qh` (split rows: its low and its high 16 bits apart).
                    let qh = |r: usize| {
                        if SPLIT {
                            let at = rows[r].add(qh_at + 2 * b);
                            u32::from(at.cast::<u16>().read_unaligned())
                                | u32::from(at.add(2 * nb).cast::<u16>().read_unaligned()) << 16
                        } else {
                            rows[r].add(ts * b + qo - 4).cast::<u32>().read_unaligned()
                        }
                    };
                    block(&mut acc, &mut corr, &sc, &mw, b, i, &|r| {
                        let bits = super::bfp_avx2::bit_bytes(qh(r));
                        let hi = if K == Q5_0 {
                            _mm256_andnot_si256(bits, _mm256_set1_epi8(0xf0u8 as i8))
                        } else {
                            _mm256_and_si256(bits, _mm256_set1_epi8(16))
                        };
                        _mm256_or_si256(nibbles(quants(r, b)), hi)
                    });
                } else {
                    block(&mut acc, &mut corr, &sc, &mw, b, i, &|r| nibbles(quants(r, b)));
                }
                i += 1;
            }
        }
    }
    std::array::from_fn(|r| hsum(acc[r]) + corr[r])
}
