//! Fast mode for the K-quants Q4_K, Q5_K and Q6_K: integer dots against activations quantized
//! to Q8_K blocks, as llama.cpp's `ggml_vec_dot_q{4,5,6}_K_q8_K`.
//!
//! Each activation row is quantized once per call with `rlx_gguf`'s `quantize_q8_k` (exactly
//! `quantize_row_q8_K_ref`: per 256 values `d f32 | qs i8[256] | bsums i16[16]`, `x ≈ d · q`).
//! Per 256-weight super-block the dot is, in integers, as llama.cpp:
//!
//! - Q4_K / Q5_K (`w = d·sc_j · q − dmin·m_j`, 8 sub-blocks of 32):
//!   `d_x · (d · Σ_j sc_j Σ q·q8 − dmin · Σ_j m_j · (bsum_2j + bsum_2j+1))`;
//! - Q6_K (`w = d·sc_g · (q − 32)`, 16 sub-blocks of 16, `q` read as unsigned `0..=63`):
//!   `d_x · d · (Σ_g sc_g Σ q·q8 − 32 · Σ_g sc_g · bsum_g)`.
//!
//! The AVX-512 VNNI kernels ([`rows`]) unpack 64 weights per step into one register of unsigned
//! bytes, multiply with `vpmaddubsw` against the Q8_K bytes, and apply the sub-block scales with
//! `vpdpwssd`; the integer sum of a super-block is converted and scaled once, and the horizontal
//! sum happens once per output. A kernel computes an `R × C` tile (weight rows × activation
//! rows), so each weight is unpacked once for `C` activation rows and each activation load
//! serves `R` weight rows; prefill runs `1 × 8` tiles (Q4_K / Q5_K keep their `dmin · m_j` term
//! in the low lanes of the tile entry's accumulator, so 8 entries fit the 32 registers). Elsewhere (no VNNI, `SimdLevel::Baseline`) [`dot_scalar`] runs.
//!
//! Accuracy: the integer sums are exact, so a result is `dequant(W) · dequant(quantize_q8_k(x))`
//! up to the f32 rounding of the per-super-block terms and of their sum (what the tests check).

// The kernels index several per-row / per-column arrays with one tile index.
#![allow(clippy::needless_range_loop)]

use rlx_gguf::GgmlType;
use rlx_gguf::quants::kquants::{quantize_q8_k, scale_min_k4};

/// Values per super-block.
pub(super) const QK_K: usize = 256;
/// Bytes of one Q8_K block: `d f32 | qs i8[256] | bsums i16[16]`.
pub(super) const Q8K_BYTES: usize = 292;

/// True when `ty` has an integer kernel against Q8_K activations.
pub(super) fn has_q8_k_path(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K)
}

/// Quantize `x` (whole super-blocks) into consecutive Q8_K blocks `out`
/// (`out.len() == x.len() / 256 · 292`).
pub(super) fn quantize_row(x: &[f32], out: &mut [u8]) {
    for (xb, ob) in x.chunks_exact(QK_K).zip(out.chunks_exact_mut(Q8K_BYTES)) {
        quantize_q8_k(xb, ob);
    }
}

/// The 8 six-bit scales (bytes 0..8) and 8 mins (bytes 8..16) of a Q4_K / Q5_K super-block
/// from its 12 packed bytes: `scale_min_k4(j)` for every `j` at once (llama.cpp's `kmask` form).
#[inline(always)]
pub(super) fn scales_mins_k4(packed: [u8; 12]) -> [u32; 4] {
    const KMASK1: u32 = 0x3f3f_3f3f;
    const KMASK2: u32 = 0x0f0f_0f0f;
    const KMASK3: u32 = 0x0303_0303;
    let w = |i: usize| u32::from_le_bytes([packed[4 * i], packed[4 * i + 1], packed[4 * i + 2], packed[4 * i + 3]]);
    let (u0, u1, u2) = (w(0), w(1), w(2));
    [
        u0 & KMASK1,
        (u2 & KMASK2) | (((u0 >> 6) & KMASK3) << 4),
        u1 & KMASK1,
        ((u2 >> 4) & KMASK2) | (((u1 >> 6) & KMASK3) << 4),
    ]
}

#[inline(always)]
fn f16_at(b: &[u8], i: usize) -> f32 {
    half::f16::from_bits(u16::from_le_bytes([b[i], b[i + 1]])).to_f32()
}

/// Portable dot of one weight row `w` (super-blocks of `ty`) with one Q8_K row `x`.
pub(super) fn dot_scalar(ty: GgmlType, w: &[u8], x: &[u8]) -> f32 {
    let mut sum = 0f32;
    for (wb, xb) in w.chunks_exact(ty.type_size()).zip(x.chunks_exact(Q8K_BYTES)) {
        let dx = f32::from_le_bytes([xb[0], xb[1], xb[2], xb[3]]);
        let q8 = |e: usize| i32::from(xb[4 + e] as i8);
        let bsum = |g: usize| i32::from(i16::from_le_bytes([xb[260 + 2 * g], xb[261 + 2 * g]]));
        if ty == GgmlType::Q6_K {
            let (ql, qh) = (&wb[0..128], &wb[128..192]);
            let mut isum = 0i32;
            for g in 0..16 {
                let mut s = 0i32;
                for l in 0..16 {
                    let e = 16 * g + l;
                    let (h, r) = (e / 128, e % 128);
                    let lo = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0xf;
                    let hi = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 3;
                    s += i32::from(lo | (hi << 4)) * q8(e);
                }
                isum += i32::from(wb[192 + g] as i8) * (s - 32 * bsum(g));
            }
            sum += f16_at(wb, 208) * dx * isum as f32;
        } else {
            let five = ty == GgmlType::Q5_K;
            let scales = &wb[4..16];
            let (qh, qs) = if five { (&wb[16..48], &wb[48..176]) } else { (&wb[0..0], &wb[16..144]) };
            let (mut isum, mut imin) = (0i32, 0i32);
            for j in 0..8 {
                let (sc, m) = scale_min_k4(j, scales);
                let mut s = 0i32;
                for l in 0..32 {
                    let mut q = (qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 0xf;
                    if five {
                        q |= ((qh[l] >> j) & 1) << 4;
                    }
                    s += i32::from(q) * q8(32 * j + l);
                }
                isum += i32::from(sc) * s;
                imin += i32::from(m) * (bsum(2 * j) + bsum(2 * j + 1));
            }
            sum += f16_at(wb, 0) * dx * isum as f32 - f16_at(wb, 2) * dx * imin as f32;
        }
    }
    sum
}

#[cfg(target_arch = "x86_64")]
pub(super) use avx512::{Q4K, Q5K, Q6K};

#[cfg(target_arch = "x86_64")]
mod avx512 {
    use super::Q8K_BYTES;
    use crate::kernels::qmatmul::int8::RowKernel;
    use std::arch::x86_64::*;

    /// Q4_K kernels.
    pub struct Q4K;
    /// Q5_K kernels.
    pub struct Q5K;
    /// Q6_K kernels.
    pub struct Q6K;

    impl RowKernel for Q4K {
        const WIDE: bool = true;
        // 1 × 4096 × 4096 (`qmatmul_bench 1 10 Q4_K 1 fast 64` / `… 1`, 1 core, interleaved):
        // groups of 2 instead of 4, from DRAM 0.80–0.85 → 0.70–0.80 ms, from L3 0.44–0.49 → 0.41–0.43.
        const DECODE_ROWS: usize = 2;
        #[inline(always)]
        unsafe fn rows<const R: usize, const C: usize>(
            w: [*const u8; R],
            x: [*const u8; C],
            nb: usize,
        ) -> [[f32; C]; R] {
            // SAFETY: the trait's contract.
            unsafe { rows_k45::<R, C, false>(w, x, nb) }
        }
    }

    impl RowKernel for Q5K {
        const WIDE: bool = true;
        #[inline(always)]
        unsafe fn rows<const R: usize, const C: usize>(
            w: [*const u8; R],
            x: [*const u8; C],
            nb: usize,
        ) -> [[f32; C]; R] {
            // SAFETY: the trait's contract.
            unsafe { rows_k45::<R, C, true>(w, x, nb) }
        }
    }

    impl RowKernel for Q6K {
        const WIDE: bool = true;
        #[inline(always)]
        unsafe fn rows<const R: usize, const C: usize>(
            w: [*const u8; R],
            x: [*const u8; C],
            nb: usize,
        ) -> [[f32; C]; R] {
            // SAFETY: the trait's contract.
            unsafe { rows_q6k::<R, C>(w, x, nb) }
        }
    }

    /// `vpshufb` controls that spread scale word `2p` over the low 256 bits and word `2p + 1`
    /// over the high 256 bits of a register holding the 8 scale words in every 128-bit lane.
    const fn pair_shuffles() -> [[u8; 64]; 4] {
        let mut t = [[0u8; 64]; 4];
        let mut p = 0;
        while p < 4 {
            let mut i = 0;
            while i < 64 {
                let word = if i < 32 { 2 * p } else { 2 * p + 1 };
                t[p][i] = (2 * word + i % 2) as u8;
                i += 1;
            }
            p += 1;
        }
        t
    }
    static PAIR_SHUF: [[u8; 64]; 4] = pair_shuffles();

    /// `vpermw` indices that put scale word `4q + i / 8` in word `i` (Q6_K, 64 weights = 4
    /// sub-blocks of 16 per step `q`).
    const fn q6_scale_idx() -> [[u16; 32]; 4] {
        let mut t = [[0u16; 32]; 4];
        let mut q = 0;
        while q < 4 {
            let mut i = 0;
            while i < 32 {
                t[q][i] = (4 * q + i / 8) as u16;
                i += 1;
            }
            q += 1;
        }
        t
    }
    static Q6_IDX: [[u16; 32]; 4] = q6_scale_idx();

    /// `C` activation rows' `d` and the 8 pair sums `bsum_2j + bsum_2j+1` of block `b`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    unsafe fn act_block<const C: usize>(x: [*const u8; C], b: usize) -> ([f32; C], [__m128i; C]) {
        let mut dx = [0f32; C];
        let mut bsp = [_mm_setzero_si128(); C];
        for c in 0..C {
            // SAFETY: block `b` of each activation row is readable (caller).
            unsafe {
                let xb = x[c].add(Q8K_BYTES * b);
                dx[c] = xb.cast::<f32>().read_unaligned();
                let bs = _mm256_loadu_si256(xb.add(260).cast());
                bsp[c] = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256::<1>(bs));
            }
        }
        (dx, bsp)
    }

    /// Q4_K (`FIVE = false`, 144-byte blocks) or Q5_K (176): the `R × C` dots of weight rows
    /// `w` with Q8_K activation rows `x`, `nb` super-blocks each.
    ///
    /// # Safety
    /// AVX-512F/BW/VL + VNNI, AVX2, FMA, F16C; every `w[r]` points to `nb` blocks of the scheme,
    /// every `x[c]` to `nb` Q8_K blocks.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn rows_k45<const R: usize, const C: usize, const FIVE: bool>(
        w: [*const u8; R],
        x: [*const u8; C],
        nb: usize,
    ) -> [[f32; C]; R] {
        let ts = if FIVE { 176 } else { 144 };
        let m4 = _mm512_set1_epi8(0x0f);
        // Opaque to the optimizer (see `bfp::rows`): one `vpaddb{k}` per fifth-bit add.
        let sixteen = std::hint::black_box(_mm512_set1_epi8(16));
        let nib_shift = _mm512_setr_epi64(0, 0, 0, 0, 4, 4, 4, 4);
        // SAFETY: static tables of 64 bytes.
        let shuf: [__m512i; 4] = std::array::from_fn(|p| unsafe { _mm512_loadu_si512(PAIR_SHUF[p].as_ptr().cast()) });
        // Q5_K: bit 2p of qh for the low 32 bytes (sub-block 2p), bit 2p + 1 for the high ones.
        let hbit: [__m512i; 4] = std::array::from_fn(|p| {
            _mm512_mask_blend_epi8(
                0xffff_ffff_0000_0000,
                _mm512_set1_epi8(1 << (2 * p)),
                _mm512_set1_epi8(1 << (2 * p + 1)),
            )
        });
        let mut acc = [[_mm512_setzero_ps(); C]; R];
        let ahead = crate::kernels::qmatmul::decode::Ahead::new(nb * ts);
        // SAFETY (every pointer below): inside block `b` of a row (caller's contract).
        unsafe {
            for b in 0..nb {
                let (dx, bsp) = act_block(x, b);
                for r in 0..R {
                    if C == 1 {
                        crate::kernels::qmatmul::decode::prefetch_ahead(w[r], ahead, ts * b, ts * (b + 1));
                    }
                    let p = w[r].add(ts * b);
                    let dd = _mm_cvtph_ps(_mm_cvtsi32_si128(p.cast::<i32>().read_unaligned()));
                    let (d, dmin) = (_mm_cvtss_f32(dd), _mm_cvtss_f32(_mm_movehdup_ps(dd)));
                    let u = super::scales_mins_k4(p.add(4).cast::<[u8; 12]>().read_unaligned());
                    // Bytes 0..8: the 8 scales, 8..16: the 8 mins.
                    let sm = _mm_set_epi32(u[3] as i32, u[2] as i32, u[1] as i32, u[0] as i32);
                    let scz = _mm512_broadcast_i32x4(_mm_cvtepu8_epi16(sm));
                    let mins = _mm_cvtepu8_epi16(_mm_srli_si128::<8>(sm));
                    for c in 0..C {
                        // The `dmin · m_j` term, in the low 4 lanes of the same accumulator
                        // (a separate one per tile entry spilled registers at 8 activation rows).
                        let prod = _mm512_zextps128_ps512(_mm_cvtepi32_ps(_mm_madd_epi16(mins, bsp[c])));
                        acc[r][c] = _mm512_fnmadd_ps(_mm512_set1_ps(dmin * dx[c]), prod, acc[r][c]);
                    }
                    let qs = p.add(if FIVE { 48 } else { 16 });
                    let qhb = if FIVE {
                        _mm512_broadcast_i64x4(_mm256_loadu_si256(p.add(16).cast()))
                    } else {
                        _mm512_setzero_si512()
                    };
                    let mut isum = [_mm512_setzero_si512(); C];
                    for (pr, (&sh, &hb)) in shuf.iter().zip(&hbit).enumerate() {
                        let v = _mm512_broadcast_i64x4(_mm256_loadu_si256(qs.add(32 * pr).cast()));
                        let mut q = _mm512_and_si512(_mm512_srlv_epi64(v, nib_shift), m4);
                        if FIVE {
                            q = _mm512_mask_add_epi8(q, _mm512_test_epi8_mask(qhb, hb), q, sixteen);
                        }
                        let s = _mm512_shuffle_epi8(scz, sh);
                        for c in 0..C {
                            let x8 = _mm512_loadu_si512(x[c].add(Q8K_BYTES * b + 4 + 64 * pr).cast());
                            isum[c] = _mm512_dpwssd_epi32(isum[c], _mm512_maddubs_epi16(q, x8), s);
                        }
                    }
                    for c in 0..C {
                        acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[c]), _mm512_set1_ps(d * dx[c]), acc[r][c]);
                    }
                }
            }
        }
        std::array::from_fn(|r| std::array::from_fn(|c| _mm512_reduce_add_ps(acc[r][c])))
    }

    /// Q6_K (210-byte blocks): as [`rows_k45`].
    ///
    /// # Safety
    /// As [`rows_k45`].
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn rows_q6k<const R: usize, const C: usize>(
        w: [*const u8; R],
        x: [*const u8; C],
        nb: usize,
    ) -> [[f32; C]; R] {
        let m4 = _mm512_set1_epi8(0x0f);
        let m30 = _mm512_set1_epi8(0x30);
        // qh bit pairs 0 / 1 (elements 0..32 / 32..64 of a half) moved to bits 4..6, and pairs
        // 2 / 3 (elements 64..96 / 96..128).
        let sh_lo = _mm512_setr_epi64(4, 4, 4, 4, 2, 2, 2, 2);
        let sh_hi = _mm512_setr_epi64(0, 0, 0, 0, 2, 2, 2, 2);
        // SAFETY: static tables of 32 words.
        let idx: [__m512i; 4] = std::array::from_fn(|q| unsafe { _mm512_loadu_si512(Q6_IDX[q].as_ptr().cast()) });
        let mut acc = [[_mm512_setzero_ps(); C]; R];
        let ahead = crate::kernels::qmatmul::decode::Ahead::new(nb * 210);
        // SAFETY (every pointer below): inside block `b` of a row (caller's contract).
        unsafe {
            for b in 0..nb {
                let mut dx = [0f32; C];
                let mut bs = [_mm256_setzero_si256(); C];
                for c in 0..C {
                    let xb = x[c].add(Q8K_BYTES * b);
                    dx[c] = xb.cast::<f32>().read_unaligned();
                    bs[c] = _mm256_loadu_si256(xb.add(260).cast());
                }
                for r in 0..R {
                    if C == 1 {
                        crate::kernels::qmatmul::decode::prefetch_ahead(w[r], ahead, 210 * b, 210 * (b + 1));
                    }
                    let p = w[r].add(210 * b);
                    let d = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(
                        p.add(208).cast::<u16>().read_unaligned(),
                    ))));
                    let sw = _mm256_cvtepi8_epi16(_mm_loadu_si128(p.add(192).cast()));
                    let swz = _mm512_zextsi256_si512(sw);
                    let mut isum = [_mm512_setzero_si512(); C];
                    for h in 0..2 {
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
                        for (i, q) in [q0, q1].into_iter().enumerate() {
                            let s = _mm512_permutexvar_epi16(idx[2 * h + i], swz);
                            for c in 0..C {
                                let xo = Q8K_BYTES * b + 4 + 128 * h + 64 * i;
                                let x8 = _mm512_loadu_si512(x[c].add(xo).cast());
                                isum[c] = _mm512_dpwssd_epi32(isum[c], _mm512_maddubs_epi16(q, x8), s);
                            }
                        }
                    }
                    for c in 0..C {
                        // The `- 32` of every weight: 32 · Σ_g sc_g · bsum_g.
                        let off = _mm256_slli_epi32::<5>(_mm256_madd_epi16(sw, bs[c]));
                        let i = _mm512_sub_epi32(isum[c], _mm512_zextsi256_si512(off));
                        acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(i), _mm512_set1_ps(d * dx[c]), acc[r][c]);
                    }
                }
            }
        }
        std::array::from_fn(|r| std::array::from_fn(|c| _mm512_reduce_add_ps(acc[r][c])))
    }
}
