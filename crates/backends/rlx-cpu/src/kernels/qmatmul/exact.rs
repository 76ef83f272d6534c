//! Exact mode: weights dequantized inside AVX-512 registers, 16 at a time, bit-identical with
//! `rlx_gguf::quants::dequantize_into` (same f32 operations in the same order, no fused
//! multiply-add in the dequantization), stored into a tile for `gemm` ([`decode_row`],
//! prefill; decode has its own kernels in `decode.rs`).
//!
//! Schemes with a decoder: [`has_decoder`]. Every decoder reads one weight row of `nb` blocks
//! (Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 also in `rlx_gguf::Layout::SplitRows`) and
//! calls `f(offset, w)` for each run of 16 consecutive weights `w` starting at element `offset`
//! of the row.

use rlx_gguf::GgmlType;

/// True when `ty` has an in-register decoder here.
pub(super) fn has_decoder(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q8_0
            | GgmlType::Q4_0
            | GgmlType::Q4_1
            | GgmlType::Q5_0
            | GgmlType::Q5_1
            | GgmlType::Q4_K
            | GgmlType::Q5_K
            | GgmlType::Q6_K
    )
}

/// `(d, quants)` pointers of legacy block `b` of a row at `row` (`nb` blocks of `ts` bytes,
/// `q` quant bytes per block, `d` at byte `dq` of a block; with `split` in
/// `rlx_gguf::Layout::SplitRows`: quants at `q b`, `d` at `q nb + 2 b`). Shared by the AVX-512
/// and AVX2 decoders. Pointer arithmetic only (wrapping), nothing is read.
#[inline(always)]
pub(super) fn legacy_block(
    row: *const u8,
    split: bool,
    nb: usize,
    ts: usize,
    b: usize,
    q: usize,
    dq: usize,
) -> (*const u8, *const u8) {
    if split {
        (row.wrapping_add(q * nb + 2 * b), row.wrapping_add(q * b))
    } else {
        let p = row.wrapping_add(b * ts);
        (p, p.wrapping_add(dq))
    }
}

/// `(d, m, qh, quants)` of Q5_0 / Q5_1 (`one`) block `b` of a row at `row` (`nb` blocks of `ts`
/// bytes; with `split` in `rlx_gguf::Layout::SplitRows`: `d`, (Q5_1) `m`, then `qh`'s low and
/// high halves in arrays of `2 nb` bytes after the quants). Bit `i` of `qh` is bit 4 of
/// element `i`. Shared by the AVX-512 and AVX2 decoders.
///
/// # Safety
/// `row` holds `nb` whole blocks (a split row of as many bytes with `split`) and `b < nb`.
#[inline(always)]
pub(super) unsafe fn q5_block(
    row: *const u8,
    split: bool,
    nb: usize,
    ts: usize,
    one: bool,
    b: usize,
) -> (*const u8, *const u8, u32, *const u8) {
    // SAFETY: every offset lies inside block `b` or its split arrays (caller).
    unsafe {
        if split {
            let f = row.add(16 * nb + 2 * b);
            let h = row.add(rlx_gguf::layout::split_qh_offset(nb, one) + 2 * b);
            let qh = u32::from(h.cast::<u16>().read_unaligned())
                | u32::from(h.add(2 * nb).cast::<u16>().read_unaligned()) << 16;
            (f, f.add(2 * nb), qh, row.add(16 * b))
        } else {
            let qo = if one { 8 } else { 6 };
            let p = row.add(b * ts);
            (p, p.add(2), p.add(qo - 4).cast::<u32>().read_unaligned(), p.add(qo))
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub(super) use avx512::{decode_row, dot_row};

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use rlx_gguf::GgmlType;
    use rlx_gguf::quants::kquants::scale_min_k4;
    use std::arch::x86_64::*;

    /// The f16 at `p` as f32 (F16C).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    #[inline]
    unsafe fn f16s(p: *const u8) -> f32 {
        // SAFETY: the caller guarantees 2 readable bytes at `p`.
        let bits = unsafe { p.cast::<u16>().read_unaligned() };
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
    }

    /// 16 bytes at `p` zero-extended to 16 `i32` lanes.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    #[inline]
    unsafe fn u8x16(p: *const u8) -> __m512i {
        // SAFETY: the caller guarantees 16 readable bytes at `p`.
        _mm512_cvtepu8_epi32(unsafe { _mm_loadu_si128(p.cast()) })
    }

    /// Call `f(offset, w)` for every run of 16 dequantized weights of the row at `row`
    /// (`nb` blocks of `ty`, which must satisfy [`super::has_decoder`]; with `split` a row in
    /// `rlx_gguf::Layout::SplitRows`: a Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 block's quants at `16 b`
    /// (`32 b`), its `d` at `16 nb + 2 b` (`32 nb + 2 b`), Q4_1's and Q5_1's `m` at `18 nb + 2 b`,
    /// the low and high halves of Q5's `qh` in the next two arrays of `2 nb` bytes).
    ///
    /// # Safety
    /// AVX-512F/BW/VL, AVX2, FMA and F16C must be available; `row` must point to `nb` whole
    /// blocks of `ty` (a split row of as many bytes with `split`).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    #[inline]
    unsafe fn visit<F: FnMut(usize, __m512)>(ty: GgmlType, split: bool, row: *const u8, nb: usize, mut f: F) {
        let m15 = _mm512_set1_epi32(15);
        let ts = ty.type_size();
        // `(d, quants)` of legacy block `b` with `q` quant bytes per block and its `d` at byte
        // `dq` of the block.
        let legacy = |b: usize, q: usize, dq: usize| super::legacy_block(row, split, nb, ts, b, q, dq);
        // SAFETY (every `add` / load below): offsets stay inside block `b` of `ts` bytes.
        unsafe {
            match ty {
                GgmlType::Q8_0 => {
                    for b in 0..nb {
                        let (d, q) = legacy(b, 32, 2);
                        let d = _mm512_set1_ps(f16s(d));
                        for h in 0..2 {
                            let q = _mm512_cvtepi8_epi32(_mm_loadu_si128(q.add(16 * h).cast()));
                            f(32 * b + 16 * h, _mm512_mul_ps(_mm512_cvtepi32_ps(q), d));
                        }
                    }
                }
                GgmlType::Q4_0 => {
                    let eight = _mm512_set1_epi32(8);
                    for b in 0..nb {
                        let (d, q) = legacy(b, 16, 2);
                        let d = _mm512_set1_ps(f16s(d));
                        let v = u8x16(q);
                        let lo = _mm512_sub_epi32(_mm512_and_si512(v, m15), eight);
                        let hi = _mm512_sub_epi32(_mm512_srli_epi32(v, 4), eight);
                        f(32 * b, _mm512_mul_ps(d, _mm512_cvtepi32_ps(lo)));
                        f(32 * b + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(hi)));
                    }
                }
                GgmlType::Q4_1 => {
                    for b in 0..nb {
                        let (d, q) = legacy(b, 16, 4);
                        // `m` follows `d`: in the block, and in a split row's `d` array, `2 nb` on.
                        let m = if split { d.add(2 * nb) } else { d.add(2) };
                        let (d, m) = (_mm512_set1_ps(f16s(d)), _mm512_set1_ps(f16s(m)));
                        let v = u8x16(q);
                        // d * q is exact (11 x 4 significant bits), so the fused form rounds
                        // exactly as the reference's `d * q + m`.
                        f(32 * b, _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_and_si512(v, m15)), m));
                        f(32 * b + 16, _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(_mm512_srli_epi32(v, 4)), m));
                    }
                }
                GgmlType::Q5_0 | GgmlType::Q5_1 => {
                    // Q5_0 `d f16, qh u32, 16 bytes`, `w = d (q - 16)`; Q5_1 `d f16, m f16, qh
                    // u32, 16 bytes`, `w = d q + m`; bit `i` of `qh` is bit 4 of element `i`.
                    let (one, sixteen) = (ty == GgmlType::Q5_1, _mm512_set1_epi32(16));
                    for b in 0..nb {
                        let (d, m, qh, q) = super::q5_block(row, split, nb, ts, one, b);
                        let d = _mm512_set1_ps(f16s(d));
                        let m = if one { _mm512_set1_ps(f16s(m)) } else { _mm512_setzero_ps() };
                        let v = u8x16(q);
                        let (lo, hi) = (_mm512_and_si512(v, m15), _mm512_srli_epi32(v, 4));
                        let lo = _mm512_mask_or_epi32(lo, qh as u16, lo, sixteen);
                        let hi = _mm512_mask_or_epi32(hi, (qh >> 16) as u16, hi, sixteen);
                        for (o, q) in [(0, lo), (16, hi)] {
                            // d * q is exact (11 x 5 significant bits): the fused form rounds
                            // as the reference's `d * q + m`.
                            let w = if one {
                                _mm512_fmadd_ps(d, _mm512_cvtepi32_ps(q), m)
                            } else {
                                _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_sub_epi32(q, sixteen)))
                            };
                            f(32 * b + o, w);
                        }
                    }
                }
                GgmlType::Q4_K | GgmlType::Q5_K => {
                    let five = ty == GgmlType::Q5_K;
                    let sixteen = _mm512_set1_epi32(16);
                    for b in 0..nb {
                        let p = row.add(b * ts);
                        let (d, dmin) = (f16s(p), f16s(p.add(2)));
                        let scales = std::slice::from_raw_parts(p.add(4), 12);
                        let (qh, qs) = if five { (p.add(16), p.add(48)) } else { (p, p.add(16)) };
                        let qh = if five { [u8x16(qh), u8x16(qh.add(16))] } else { [_mm512_setzero_si512(); 2] };
                        for pair in 0..4 {
                            let v = [u8x16(qs.add(32 * pair)), u8x16(qs.add(32 * pair + 16))];
                            for half in 0..2 {
                                let j = 2 * pair + half;
                                let (sc, mn) = scale_min_k4(j, scales);
                                let dl = _mm512_set1_ps(d * f32::from(sc));
                                let ml = _mm512_set1_ps(dmin * f32::from(mn));
                                let bit = _mm512_set1_epi32(1 << j);
                                for s in 0..2 {
                                    let mut q = if half == 0 {
                                        _mm512_and_si512(v[s], m15)
                                    } else {
                                        _mm512_srli_epi32(v[s], 4)
                                    };
                                    if five {
                                        let k = _mm512_test_epi32_mask(qh[s], bit);
                                        q = _mm512_mask_add_epi32(q, k, q, sixteen);
                                    }
                                    let w = _mm512_sub_ps(_mm512_mul_ps(dl, _mm512_cvtepi32_ps(q)), ml);
                                    f(256 * b + 32 * j + 16 * s, w);
                                }
                            }
                        }
                    }
                }
                GgmlType::Q6_K => {
                    let (m3, off) = (_mm512_set1_epi32(3), _mm512_set1_epi32(32));
                    for b in 0..nb {
                        let p = row.add(b * ts);
                        let d = f16s(p.add(208));
                        for h in 0..2 {
                            let (ql, qh) = (p.add(64 * h), p.add(128 + 32 * h));
                            let ql = [[u8x16(ql), u8x16(ql.add(16))], [u8x16(ql.add(32)), u8x16(ql.add(48))]];
                            let qh = [u8x16(qh), u8x16(qh.add(16))];
                            for c in 0..4 {
                                for s in 0..2 {
                                    let lo = _mm512_and_si512(_mm512_srl_epi32(ql[c % 2][s], shift(4 * (c / 2))), m15);
                                    let hi = _mm512_and_si512(_mm512_srl_epi32(qh[s], shift(2 * c)), m3);
                                    let q = _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), off);
                                    let g = 8 * h + 2 * c + s;
                                    let dl = _mm512_set1_ps(d * f32::from(*p.add(192 + g) as i8));
                                    f(256 * b + 128 * h + 32 * c + 16 * s, _mm512_mul_ps(dl, _mm512_cvtepi32_ps(q)));
                                }
                            }
                        }
                    }
                }
                _ => unreachable!("no in-register decoder for {ty:?}"),
            }
        }
    }

    /// A shift count for `_mm512_srl_epi32`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    #[inline]
    fn shift(n: usize) -> __m128i {
        _mm_cvtsi32_si128(n as i32)
    }

    /// Dequantize one row (with `split`, in `rlx_gguf::Layout::SplitRows`) into `out`
    /// (bit-identical with `rlx_gguf::quants::dequantize_into` of the blocks).
    ///
    /// # Safety
    /// AVX-512F/BW/VL, AVX2, FMA and F16C must be available; `row` holds
    /// `out.len() / block_size` whole blocks of `ty` (a scheme with a decoder; with `split`
    /// Q4_0, Q4_1 or Q8_0).
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    pub(in super::super) unsafe fn decode_row(ty: GgmlType, split: bool, row: &[u8], out: &mut [f32]) {
        let nb = out.len() / ty.block_size();
        debug_assert_eq!(row.len(), nb * ty.type_size());
        let op = out.as_mut_ptr();
        // SAFETY: every offset + 16 <= out.len().
        unsafe { visit(ty, split, row.as_ptr(), nb, |o, w| _mm512_storeu_ps(op.add(o), w)) };
    }

    /// `Σ dequant(row) · x` in f32 (one row of blocks of `ty`, a scheme with a decoder): the
    /// decode kernel of schemes without a row-group kernel of their own (Q5_0, Q5_1).
    ///
    /// # Safety
    /// As [`decode_row`] (blocks, not split), with `x.len()` the row's element count.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx2,fma,f16c")]
    pub(in super::super) unsafe fn dot_row(ty: GgmlType, row: &[u8], x: &[f32]) -> f32 {
        let nb = x.len() / ty.block_size();
        debug_assert_eq!(row.len(), nb * ty.type_size());
        let (xp, mut acc) = (x.as_ptr(), _mm512_setzero_ps());
        // SAFETY: every offset + 16 <= x.len().
        unsafe { visit(ty, false, row.as_ptr(), nb, |o, w| acc = _mm512_fmadd_ps(w, _mm512_loadu_ps(xp.add(o)), acc)) };
        _mm512_reduce_add_ps(acc)
    }
}
