//! Exact mode on x86-64 CPUs with AVX2, FMA and F16C but no AVX-512 (AMD Zen 2 / Zen 3,
//! Intel Haswell to Comet Lake, and the client cores without AVX-512): the 8-lane counterparts
//! of [`super::exact`]'s decoders, with the same f32 operations in the same order, so every
//! dequantized weight is bit-identical with `rlx_gguf::quants::dequantize_into` (and with the
//! AVX-512 decoders).
//!
//! [`decode_row`] fills the `tile` path's tiles (prefill); [`dot_rows`] is the decode kernel
//! (`M` up to `FUSED_ROWS`, one activation row at a time): each weight row decoded in registers,
//! 8 weights at a time, and FMA'd against `x` into four accumulators, one horizontal sum per
//! row; the rows ahead are prefetched as in the fast-mode decode ([`super::decode::Ahead`]).
//! Schemes: those of [`super::exact::has_decoder`], Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 also in
//! `rlx_gguf::Layout::SplitRows`, read in place.
//!
//! Before this kernel an AVX2-only CPU ran `rowwise` (one `dequantize_into` row into scratch,
//! then an SSE2 dot): SmolLM2-135M Q4_1 decode on one AMD EPYC Zen 3 core, 185 ms per token.

use super::decode::{Ahead, prefetch_ahead, prefetch_rows};
use rlx_gguf::GgmlType;
use rlx_gguf::quants::kquants::scale_min_k4;
use std::arch::x86_64::*;

/// True when the CPU has what these kernels use (AVX2, FMA, F16C); checked once.
pub(super) fn available() -> bool {
    crate::kernels::simd::has_avx2()
}

/// The f16 at `p` as f32, read from [`super::decode::f16_table`] at `tp` (a load instead of the
/// F16C conversion's insert, convert and broadcast, which share the shuffle ports with the
/// quant unpacking).
#[inline(always)]
unsafe fn f16s(tp: *const f32, p: *const u8) -> f32 {
    // SAFETY: the caller guarantees 2 readable bytes at `p`; the table has 65536 entries.
    unsafe { *tp.add(usize::from(p.cast::<u16>().read_unaligned())) }
}

/// 8 bytes at `p` zero-extended to 8 `i32` lanes.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn u8x8(p: *const u8) -> __m256i {
    // SAFETY: the caller guarantees 8 readable bytes at `p`.
    _mm256_cvtepu8_epi32(unsafe { _mm_loadl_epi64(p.cast()) })
}

/// A shift count for `_mm256_srl_epi32`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn shift(n: usize) -> __m128i {
    _mm_cvtsi32_si128(n as i32)
}

/// Call `f(offset, w)` for every run of 8 dequantized weights of the row at `row` (`nb` blocks
/// of `ty`, which must satisfy [`super::exact::has_decoder`]; with `split` a row in
/// `rlx_gguf::Layout::SplitRows`, laid out as `super::exact`'s decoder documents).
///
/// # Safety
/// AVX2, FMA and F16C must be available; `row` must point to `nb` whole blocks of `ty` (a
/// split row of as many bytes with `split`).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn visit<F: FnMut(usize, __m256)>(ty: GgmlType, split: bool, row: *const u8, nb: usize, mut f: F) {
    let m15 = _mm256_set1_epi32(15);
    let ts = ty.type_size();
    let tp = super::decode::f16_table().as_ptr();
    // `(d, quants)` of legacy block `b` with `q` quant bytes per block and its `d` at byte `dq`.
    let legacy = |b: usize, q: usize, dq: usize| super::exact::legacy_block(row, split, nb, ts, b, q, dq);
    // SAFETY (every `add` / load below): offsets stay inside block `b` of `ts` bytes (split:
    // inside the row's arrays of `nb` entries).
    unsafe {
        match ty {
            GgmlType::Q8_0 => {
                for b in 0..nb {
                    let (d, q) = legacy(b, 32, 2);
                    let d = _mm256_set1_ps(f16s(tp, d));
                    for g in 0..4 {
                        let q = _mm256_cvtepi8_epi32(_mm_loadl_epi64(q.add(8 * g).cast()));
                        f(32 * b + 8 * g, _mm256_mul_ps(_mm256_cvtepi32_ps(q), d));
                    }
                }
            }
            GgmlType::Q4_0 => {
                let eight = _mm256_set1_epi32(8);
                for b in 0..nb {
                    let (d, q) = legacy(b, 16, 2);
                    let d = _mm256_set1_ps(f16s(tp, d));
                    for g in 0..2 {
                        let v = u8x8(q.add(8 * g));
                        let lo = _mm256_sub_epi32(_mm256_and_si256(v, m15), eight);
                        let hi = _mm256_sub_epi32(_mm256_srli_epi32(v, 4), eight);
                        f(32 * b + 8 * g, _mm256_mul_ps(d, _mm256_cvtepi32_ps(lo)));
                        f(32 * b + 16 + 8 * g, _mm256_mul_ps(d, _mm256_cvtepi32_ps(hi)));
                    }
                }
            }
            GgmlType::Q4_1 => {
                for b in 0..nb {
                    let (d, q) = legacy(b, 16, 4);
                    // `m` follows `d`: in the block, and in a split row's `d` array, `2 nb` on.
                    let m = if split { d.add(2 * nb) } else { d.add(2) };
                    let (d, m) = (_mm256_set1_ps(f16s(tp, d)), _mm256_set1_ps(f16s(tp, m)));
                    for g in 0..2 {
                        let v = u8x8(q.add(8 * g));
                        // d * q is exact (11 x 4 significant bits), so the fused form rounds
                        // exactly as the reference's `d * q + m`.
                        f(32 * b + 8 * g, _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_and_si256(v, m15)), m));
                        f(32 * b + 16 + 8 * g, _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4)), m));
                    }
                }
            }
            GgmlType::Q5_0 | GgmlType::Q5_1 => {
                // Bit `i` of `qh` is bit 4 of element `i` (see `super::exact`).
                let (one, sixteen) = (ty == GgmlType::Q5_1, _mm256_set1_epi32(16));
                let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
                let at = |e: i32| _mm256_add_epi32(lane, _mm256_set1_epi32(e));
                let shifts = [at(0), at(8), at(16), at(24)];
                let one_bit = _mm256_set1_epi32(1);
                for b in 0..nb {
                    let (d, m, qh, q) = super::exact::q5_block(row, split, nb, ts, one, b);
                    let d = _mm256_set1_ps(f16s(tp, d));
                    let m = if one { _mm256_set1_ps(f16s(tp, m)) } else { _mm256_setzero_ps() };
                    let qhv = _mm256_set1_epi32(qh as i32);
                    for g in 0..2 {
                        let v = u8x8(q.add(8 * g));
                        for (s, q) in [(g, _mm256_and_si256(v, m15)), (2 + g, _mm256_srli_epi32(v, 4))] {
                            let bit = _mm256_and_si256(_mm256_srlv_epi32(qhv, shifts[s]), one_bit);
                            let q = _mm256_or_si256(q, _mm256_slli_epi32(bit, 4));
                            // d * q is exact (11 x 5 significant bits): the fused form rounds as
                            // the reference's `d * q + m`.
                            let w = if one {
                                _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(q), m)
                            } else {
                                _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_sub_epi32(q, sixteen)))
                            };
                            f(32 * b + 8 * s, w);
                        }
                    }
                }
            }
            GgmlType::Q4_K | GgmlType::Q5_K => {
                let five = ty == GgmlType::Q5_K;
                let one_bit = _mm256_set1_epi32(1);
                for b in 0..nb {
                    let p = row.add(b * ts);
                    let (d, dmin) = (f16s(tp, p), f16s(tp, p.add(2)));
                    let scales = std::slice::from_raw_parts(p.add(4), 12);
                    let (qh, qs) = if five { (p.add(16), p.add(48)) } else { (p, p.add(16)) };
                    for pair in 0..4 {
                        for half in 0..2 {
                            let j = 2 * pair + half;
                            let (sc, mn) = scale_min_k4(j, scales);
                            let dl = _mm256_set1_ps(d * f32::from(sc));
                            let ml = _mm256_set1_ps(dmin * f32::from(mn));
                            for s in 0..4 {
                                let v = u8x8(qs.add(32 * pair + 8 * s));
                                let mut q = if half == 0 { _mm256_and_si256(v, m15) } else { _mm256_srli_epi32(v, 4) };
                                if five {
                                    let h = _mm256_and_si256(_mm256_srl_epi32(u8x8(qh.add(8 * s)), shift(j)), one_bit);
                                    q = _mm256_or_si256(q, _mm256_slli_epi32(h, 4));
                                }
                                let w = _mm256_sub_ps(_mm256_mul_ps(dl, _mm256_cvtepi32_ps(q)), ml);
                                f(256 * b + 32 * j + 8 * s, w);
                            }
                        }
                    }
                }
            }
            GgmlType::Q6_K => {
                let (m3, off) = (_mm256_set1_epi32(3), _mm256_set1_epi32(32));
                for b in 0..nb {
                    let p = row.add(b * ts);
                    let d = f16s(tp, p.add(208));
                    for h in 0..2 {
                        let (ql, qh) = (p.add(64 * h), p.add(128 + 32 * h));
                        for s in 0..4 {
                            let l = [u8x8(ql.add(8 * s)), u8x8(ql.add(32 + 8 * s))];
                            let hb = u8x8(qh.add(8 * s));
                            for c in 0..4 {
                                let lo = _mm256_and_si256(_mm256_srl_epi32(l[c % 2], shift(4 * (c / 2))), m15);
                                let hi = _mm256_and_si256(_mm256_srl_epi32(hb, shift(2 * c)), m3);
                                let q = _mm256_sub_epi32(_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)), off);
                                // Scale `g` covers 16 weights: two runs of 8.
                                let g = 8 * h + 2 * c + s / 2;
                                let dl = _mm256_set1_ps(d * f32::from(*p.add(192 + g) as i8));
                                f(256 * b + 128 * h + 32 * c + 8 * s, _mm256_mul_ps(dl, _mm256_cvtepi32_ps(q)));
                            }
                        }
                    }
                }
            }
            _ => unreachable!("no in-register decoder for {ty:?}"),
        }
    }
}

/// Dequantize one row (with `split`, in `rlx_gguf::Layout::SplitRows`) into `out`
/// (bit-identical with `rlx_gguf::quants::dequantize_into` of the blocks).
///
/// # Safety
/// AVX2, FMA and F16C must be available ([`available`]); `row` holds `out.len() / block_size`
/// whole blocks of `ty` (a scheme with a decoder; with `split` one of the legacy schemes).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn decode_row(ty: GgmlType, split: bool, row: &[u8], out: &mut [f32]) {
    let nb = out.len() / ty.block_size();
    debug_assert_eq!(row.len(), nb * ty.type_size());
    let op = out.as_mut_ptr();
    // SAFETY: every offset + 8 <= out.len().
    unsafe { visit(ty, split, row.as_ptr(), nb, |o, w| _mm256_storeu_ps(op.add(o), w)) };
}

/// `y[j] = Σ dequant(w row j) · x` in f32 for every row of `w` (`y.len()` rows of
/// `row_bytes`, each `x.len() / block_size` blocks of `ty`; with `split` in
/// `rlx_gguf::Layout::SplitRows`).
///
/// # Safety
/// AVX2, FMA and F16C must be available ([`available`]); `ty` satisfies
/// `exact::has_decoder` (a legacy scheme with `split`); `w.len() == y.len() · row_bytes`.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_rows(ty: GgmlType, split: bool, w: &[u8], row_bytes: usize, x: &[f32], y: &mut [f32]) {
    debug_assert_eq!(w.len(), y.len() * row_bytes);
    let nb = x.len() / ty.block_size();
    let (wp, xp) = (w.as_ptr(), x.as_ptr());
    let ahead = Ahead::near_only(row_bytes);
    // Q4_1 ([`q4_1_dot`]) with its block sums `Σ x_b` (rows up to 256 blocks; longer ones
    // take the general loop).
    let mut sums = [0f32; 256];
    let q41 = ty == GgmlType::Q4_1 && nb <= sums.len();
    if q41 {
        for (o, c) in sums.iter_mut().zip(x.chunks_exact(32)) {
            *o = c.iter().sum();
        }
    }
    let tp = super::decode::f16_table().as_ptr();
    // The first rows, up to the first one prefetched ahead of a row.
    super::decode::prefetch(w, 0, prefetch_rows(row_bytes) * row_bytes);
    for (j, yj) in y.iter_mut().enumerate() {
        let p = wp.wrapping_add(j * row_bytes);
        // SAFETY: a prefetch never faults; row `j` holds `nb` blocks of `ty` (caller), and
        // every offset + 8 <= x.len().
        unsafe {
            prefetch_ahead(p, ahead, 0, row_bytes);
            if q41 {
                *yj = q4_1_dot(p, split, nb, xp, sums.as_ptr(), tp);
                continue;
            }
            // Four independent chains (a block's runs of 8 go to different accumulators): with
            // two, a Q4_0 block's two dependent FMAs per chain (4 cycles each) bound the loop.
            let mut acc = [_mm256_setzero_ps(); 4];
            visit(ty, split, p, nb, |o, v| {
                let a = &mut acc[(o / 8) % 4];
                *a = _mm256_fmadd_ps(v, _mm256_loadu_ps(xp.add(o)), *a);
            });
            *yj = hsum(_mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3])));
        }
    }
}

/// `Σ_b (d_b Σ q x + m_b Σ x_b)` of one Q4_1 row at `row` (`nb` blocks; with `split` in
/// `Layout::SplitRows`) against `x` (`32 nb` floats at `xp`, block sums `Σ x_b` at `sp`). The
/// quants go unscaled into each block's two partial sums, scaled by `d` once per block and the
/// `m` term added per block: per 32 weights 5 FMA-port operations and a scalar FMA instead of
/// [`visit`]'s 8 (one to dequantize, one to multiply per 8). 576 × 1536 from L2, one AMD Zen 3
/// core, interleaved rounds: 0.0871–0.0877 → 0.0791–0.0795 ms. (The same form for Q4_0
/// measured equal and for Q8_0 8% slower, so those keep [`visit`].)
///
/// # Safety
/// AVX2, FMA and F16C; the row holds `nb` Q4_1 blocks; `tp` is [`super::decode::f16_table`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_1_dot(row: *const u8, split: bool, nb: usize, xp: *const f32, sp: *const f32, tp: *const f32) -> f32 {
    let m15 = _mm256_set1_epi32(15);
    let mut acc = [_mm256_setzero_ps(); 2];
    let mut corr = 0f32;
    let f16 = |p: *const u8| -> f32 {
        // SAFETY: `p` points to 2 bytes of the row (below); the table has 65536 entries.
        unsafe { *tp.add(usize::from(p.cast::<u16>().read_unaligned())) }
    };
    // SAFETY (every pointer below): block `b < nb` (or its entries in the split row's arrays),
    // `x`'s block `b`, its sum.
    unsafe {
        for b in 0..nb {
            // `m` follows `d`: in the block, and in a split row's `d` array `2 nb` on.
            let (dp, mp, q) = if split {
                let dp = row.add(16 * nb + 2 * b);
                (dp, dp.add(2 * nb), row.add(16 * b))
            } else {
                let p = row.add(20 * b);
                (p, p.add(2), p.add(4))
            };
            let xb = xp.add(32 * b);
            let x = |e: usize| _mm256_loadu_ps(xb.add(e));
            let (v0, v1) = (u8x8(q), u8x8(q.add(8)));
            let lo = |v: __m256i| _mm256_cvtepi32_ps(_mm256_and_si256(v, m15));
            let hi = |v: __m256i| _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4));
            let t0 = _mm256_fmadd_ps(hi(v0), x(16), _mm256_mul_ps(lo(v0), x(0)));
            let t1 = _mm256_fmadd_ps(hi(v1), x(24), _mm256_mul_ps(lo(v1), x(8)));
            acc[b % 2] = _mm256_fmadd_ps(_mm256_set1_ps(f16(dp)), _mm256_add_ps(t0, t1), acc[b % 2]);
            corr = f16(mp).mul_add(*sp.add(b), corr);
        }
    }
    hsum(_mm256_add_ps(acc[0], acc[1])) + corr
}

/// The sum of `v`'s 8 lanes (also [`super::int8_avx2`]'s).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn hsum(v: __m256) -> f32 {
    let s4 = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    _mm_cvtss_f32(_mm_add_ss(s2, _mm_movehdup_ps(s2)))
}

#[cfg(test)]
mod tests {
    use rlx_gguf::GgmlType;
    use rlx_gguf::layout::{Layout, to_split_rows};
    use rlx_gguf::quants::{dequantize, quantize};

    /// [`super::decode_row`] is bit-identical with `rlx_gguf`'s dequantization for every
    /// scheme with a decoder, on blocks and (legacy schemes) on split rows; [`super::dot_rows`]
    /// agrees with the f64 dot of those weights up to f32 rounding.
    #[test]
    fn decoders_match_the_reference_dequantization() {
        if !super::available() {
            eprintln!("skipped: no AVX2 + FMA + F16C on this CPU");
            return;
        }
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 11) as f32 / (1u64 << 53) as f32 * 2.0 - 1.0
        };
        for ty in [
            GgmlType::Q8_0,
            GgmlType::Q4_0,
            GgmlType::Q4_1,
            GgmlType::Q5_0,
            GgmlType::Q5_1,
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
        ] {
            // 288 blocks of 32 (Q4_1's per-block kernel takes rows up to 256, longer ones the
            // general loop).
            for k in [3 * 256, 36 * 256] {
                let n = 5;
                let w: Vec<f32> = (0..n * k).map(|i| next() * (1.0 + (i % 97) as f32 / 10.0)).collect();
                let x: Vec<f32> = (0..k).map(|_| next()).collect();
                let blocks = quantize(ty, &w).unwrap();
                let want = dequantize(ty, &blocks).unwrap();
                let rb = blocks.len() / n;
                let mut layouts = vec![(false, blocks.clone())];
                if Layout::SplitRows.supports(ty) {
                    let mut split = blocks.clone();
                    to_split_rows(ty, &mut split, k).unwrap();
                    layouts.push((true, split));
                }
                for (split, data) in layouts {
                    let mut got = vec![f32::NAN; n * k];
                    for (row, out) in data.chunks_exact(rb).zip(got.chunks_exact_mut(k)) {
                        // SAFETY: the features were detected; whole rows of `ty`.
                        unsafe { super::decode_row(ty, split, row, out) };
                    }
                    let same = got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits());
                    assert!(same, "{ty:?} split={split}: decode_row differs from dequantize");
                    let mut y = vec![f32::NAN; n];
                    // SAFETY: as above; `y` has one entry per row.
                    unsafe { super::dot_rows(ty, split, &data, rb, &x, &mut y) };
                    for (j, &yj) in y.iter().enumerate() {
                        let (dot, mag) =
                            want[j * k..(j + 1) * k].iter().zip(&x).fold((0f64, 0f64), |(d, m), (&a, &b)| {
                                (d + f64::from(a * b), m + f64::from((a * b).abs()))
                            });
                        assert!(
                            (f64::from(yj) - dot).abs() <= 1e-6 * mag,
                            "{ty:?} split={split} row {j}: {yj} vs {dot}"
                        );
                    }
                }
            }
        }
    }
}
