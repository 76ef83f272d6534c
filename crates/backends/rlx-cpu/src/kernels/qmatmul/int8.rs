//! Fast mode (opt-in, `CpuOptions::quantized_activations`): integer dots against Q8_0-quantized
//! activations for Q8_0, Q4_0 and Q4_1, as llama.cpp's `ggml_vec_dot_q*_q8_0`.
//!
//! Each activation row is quantized once per call to Q8_0 blocks (`d = amax / 127` rounded to
//! f16, `q = round(x / d)`, exactly `quantize_row_q8_0_ref`) into scratch, together with
//! `d · Σq` per block; then every weight row is a sum over blocks of `d_w · d_x · Σ q_w·q_x`
//! (+ `m_w · d_x · Σq_x` for Q4_1) with the 32-term integer dot done by AVX-512 VNNI
//! `vpdpbusd` (on 256-bit registers, one block each) where the CPU has `avx512vnni`, AVX2
//! `vpmaddubsw` + `vpmaddwd` on other AVX-512 CPUs, and a scalar loop elsewhere or under
//! `SimdLevel::Baseline`. Signed products use llama.cpp's `|x| · sign(w, x)` trick, which
//! assumes weights in `-127..=127` (true of every quantizer; a stored Q8_0 value of -128 would
//! be misread, as in llama.cpp).
//!
//! Accuracy: it computes `dequant(W) · dequant(quantize_q8_0(x))` exactly up to f32 rounding of
//! the per-block sums, i.e. it differs from the f32 reference (the composite's body) by the
//! activation quantization error, at most `Σ_i |W[j, i]| · amax(block(i)) / 254` per output
//! (the rounding error of a Q8_0 value is at most half a step `d_x / 2 = amax / 254`). This is
//! what llama.cpp does, and what the tests check. Unlike llama.cpp's Q8_1 the `d · Σq` term
//! used for Q4_1 is kept in f32, not f16.

use half::f16;
use rlx_gguf::GgmlType;

/// Elements per legacy block.
pub(super) const QK: usize = 32;

/// True when `ty` has an integer kernel against Q8_0 activations.
pub(super) fn has_q8_0_path(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q4_1)
}

/// 2: AVX-512 + VNNI, 1: AVX-512 (BW/VL, AVX2 integer ops), 0: scalar. `simd`: the caller's
/// AVX-512 permission (see `SimdLevel`).
pub(super) fn simd_level(simd: bool) -> u8 {
    #[cfg(target_arch = "x86_64")]
    {
        if !simd || !std::is_x86_feature_detected!("avx2") || !std::is_x86_feature_detected!("f16c") {
            0
        } else if std::is_x86_feature_detected!("avx512vnni") {
            2
        } else {
            1
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = simd;
        0
    }
}

/// Quantize `x` (whole Q8_0 blocks) into `q` / `d` / `s` as `quantize_row_q8_0_ref`.
pub(super) fn quantize_q8_0(x: &[f32], q: &mut [i8], d: &mut [f32], s: &mut [f32]) {
    for (((xb, qb), db), sb) in x.chunks_exact(QK).zip(q.chunks_exact_mut(QK)).zip(d).zip(s) {
        let amax = xb.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let dd = amax / 127.0;
        let id = if dd != 0.0 { 1.0 / dd } else { 0.0 };
        let mut sum = 0i32;
        for (qv, &v) in qb.iter_mut().zip(xb) {
            *qv = (v * id).round() as i8;
            sum += i32::from(*qv);
        }
        *db = f16::from_f32(dd).to_f32();
        *sb = *db * sum as f32;
    }
}

#[inline(always)]
fn f16_at(b: &[u8], i: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[i], b[i + 1]])).to_f32()
}

/// One weight row (`w`, blocks of `ty`) against one Q8_0 activation row.
#[inline]
pub(super) fn dot_q8(ty: GgmlType, level: u8, w: &[u8], xq: &[i8], xd: &[f32], xs: &[f32]) -> f32 {
    debug_assert_eq!(w.len(), xd.len() * ty.type_size());
    #[cfg(target_arch = "x86_64")]
    if level > 0 {
        // SAFETY: level > 0 means the features were detected; lengths match (checked at run).
        return unsafe { if level == 2 { avx::dot_vnni(ty, w, xq, xd, xs) } else { avx::dot_avx2(ty, w, xq, xd, xs) } };
    }
    let _ = level;
    dot_q8_scalar(ty, w, xq, xd, xs)
}

/// Portable form of [`dot_q8`].
pub(crate) fn dot_q8_scalar(ty: GgmlType, w: &[u8], xq: &[i8], xd: &[f32], xs: &[f32]) -> f32 {
    let ts = ty.type_size();
    let mut sum = 0f32;
    for (b, blk) in w.chunks_exact(ts).enumerate() {
        let q = &xq[b * QK..(b + 1) * QK];
        let d = f16_at(blk, 0);
        let (isum, extra) = match ty {
            GgmlType::Q8_0 => (blk[2..34].iter().zip(q).map(|(&w, &x)| i32::from(w as i8) * i32::from(x)).sum(), 0.0),
            GgmlType::Q4_0 => (nib_dot(&blk[2..18], q, 8), 0.0),
            _ => (nib_dot(&blk[4..20], q, 0), f16_at(blk, 2) * xs[b]),
        };
        sum += d * xd[b] * isum as f32 + extra;
    }
    sum
}

/// `Σ (nibble - off) · q` for 16 packed bytes (low nibbles first, then high).
fn nib_dot(qs: &[u8], q: &[i8], off: i32) -> i32 {
    let mut s = 0i32;
    for j in 0..16 {
        s += (i32::from(qs[j] & 15) - off) * i32::from(q[j]);
        s += (i32::from(qs[j] >> 4) - off) * i32::from(q[j + 16]);
    }
    s
}

#[cfg(target_arch = "x86_64")]
mod avx {
    use super::QK;
    use rlx_gguf::GgmlType;
    use std::arch::x86_64::*;

    macro_rules! legacy_dot {
        ($name:ident, $feat:literal, $dp:expr) => {
            /// One weight row against one Q8_0 activation row (see [`super::dot_q8_scalar`]).
            ///
            /// # Safety
            /// The features named must be available; `w` holds `xd.len()` blocks of `ty`, `xq`
            /// `32 · xd.len()` values, `xs` `xd.len()`.
            #[target_feature(enable = $feat)]
            pub unsafe fn $name(ty: GgmlType, w: &[u8], xq: &[i8], xd: &[f32], xs: &[f32]) -> f32 {
                let nb = xd.len();
                let ts = ty.type_size();
                let mut acc = _mm256_setzero_ps();
                let mut corr = 0f32;
                let mask = _mm256_set1_epi8(0x0f);
                let eight = _mm256_set1_epi8(8);
                let dp = $dp;
                let (wp, xp) = (w.as_ptr(), xq.as_ptr());
                for b in 0..nb {
                    // SAFETY: b < nb blocks of `ts` bytes in `w`, of 32 values in `xq`.
                    let (p, dw) = unsafe {
                        let blk = wp.add(b * ts);
                        let xv = _mm256_loadu_si256(xp.add(b * QK) as *const __m256i);
                        let nibbles = |at: usize| {
                            let v = _mm_loadu_si128(blk.add(at) as *const __m128i);
                            _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), mask)
                        };
                        let signed = |wv: __m256i| dp(_mm256_sign_epi8(xv, xv), _mm256_sign_epi8(wv, xv));
                        match ty {
                            GgmlType::Q8_0 => (signed(_mm256_loadu_si256(blk.add(2) as *const __m256i)), 0),
                            GgmlType::Q4_0 => (signed(_mm256_sub_epi8(nibbles(2), eight)), 0),
                            _ => (dp(nibbles(4), xv), 1),
                        }
                    };
                    let wb = &w[b * ts..];
                    // F16C conversion (half's portable one is several times slower here).
                    let h = |i: usize| {
                        let bits = i32::from(u16::from_le_bytes([wb[i], wb[i + 1]]));
                        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits)))
                    };
                    if dw == 1 {
                        corr += h(2) * xs[b];
                    }
                    let s = _mm256_set1_ps(h(0) * xd[b]);
                    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), s, acc);
                }
                let h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
                let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
                let h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
                _mm_cvtss_f32(h) + corr
            }
        };
    }

    legacy_dot!(dot_vnni, "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni", |u: __m256i, s: __m256i| {
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s)
    });
    legacy_dot!(dot_avx2, "avx2,fma,f16c,avx512f,avx512vl,avx512bw", |u: __m256i, s: __m256i| {
        _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
    });
}
