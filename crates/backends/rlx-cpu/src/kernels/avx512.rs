//! AVX-512 helpers shared by the kernels: the lane mask of a tail ([`tail_mask`]), the f16 →
//! f32 widening of a slice, and the batched horizontal sums of a decode kernel's rows
//! ([`reduce_rows`]). Callers check [`super::simd::has_avx512`] first. (The transcendental
//! functions, norms and attention tiles are written once over [`super::vf32::Vf32`] and
//! compiled for 16 lanes there.)

#![cfg(target_arch = "x86_64")]

use std::arch::x86_64::*;

/// Lanes per vector.
pub(crate) const LANES: usize = 16;

/// Mask of the first `k` (< 16) lanes.
#[inline(always)]
pub(crate) fn tail_mask(k: usize) -> __mmask16 {
    ((1u32 << k) - 1) as __mmask16
}

/// `o = f32(x)` (exact): 16 lanes per `vcvtph2ps`, where `half`'s slice conversion (F16C)
/// takes at most 8. An exact-mode decode step widens each layer's f16 KV cache this way.
///
/// # Safety
/// AVX-512F is available.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn widen_f16_slice(x: &[rlx_ir::half::f16], o: &mut [f32]) {
    assert_eq!(x.len(), o.len(), "widen_f16_slice lengths");
    let n = x.len() - x.len() % LANES;
    // SAFETY: `i + 16 <= n <= len` of both slices.
    unsafe {
        for i in (0..n).step_by(LANES) {
            let h = _mm256_loadu_si256(x.as_ptr().add(i).cast());
            _mm512_storeu_ps(o.as_mut_ptr().add(i), _mm512_cvtph_ps(h));
        }
    }
    for (d, &v) in o[n..].iter_mut().zip(&x[n..]) {
        *d = v.to_f32();
    }
}

/// `_mm512_reduce_add_ps` of each of `v` (a decode kernel's rows, a GEMV's dots), four vectors
/// at a time where `R` allows: the same additions in the same pairs (lanes `i` and `i + 8`,
/// then `i + 4`, `i + 2`, `i + 1`), so the same bits, in 12 shuffles and 8 adds for four rows
/// instead of 32 µops (SmolLM2's rows of 18 blocks spend a fifth of their time in sums).
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) fn reduce_rows<const R: usize>(v: [__m512; R]) -> [f32; R] {
    let mut out = [0f32; R];
    let mut r = 0;
    while r + 4 <= R {
        let q = [v[r], v[r + 1], v[r + 2], v[r + 3]];
        out[r..r + 4].copy_from_slice(&reduce_add4(q));
        r += 4;
    }
    for i in r..R {
        out[i] = _mm512_reduce_add_ps(v[i]);
    }
    out
}

/// [`reduce_rows`] of four vectors.
#[target_feature(enable = "avx512f")]
#[inline]
fn reduce_add4(v: [__m512; 4]) -> [f32; 4] {
    // Lanes i + (i + 8): [a_lo8 + a_hi8 | b_lo8 + b_hi8], [c… | d…].
    let ab = _mm512_add_ps(_mm512_shuffle_f32x4::<0x44>(v[0], v[1]), _mm512_shuffle_f32x4::<0xee>(v[0], v[1]));
    let cd = _mm512_add_ps(_mm512_shuffle_f32x4::<0x44>(v[2], v[3]), _mm512_shuffle_f32x4::<0xee>(v[2], v[3]));
    // Then i + (i + 4): 128-bit lane k holds vector k's four partial sums.
    let s = _mm512_add_ps(_mm512_shuffle_f32x4::<0x88>(ab, cd), _mm512_shuffle_f32x4::<0xdd>(ab, cd));
    // Then i + (i + 2) and 0 + 1 within each 128-bit lane.
    let s = _mm512_add_ps(s, _mm512_shuffle_ps::<0b01_00_11_10>(s, s));
    let s = _mm512_add_ps(s, _mm512_shuffle_ps::<0b10_11_00_01>(s, s));
    let mut lanes = [0f32; 16];
    // SAFETY: 16 floats.
    unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), s) };
    [lanes[0], lanes[4], lanes[8], lanes[12]]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every f16 bit pattern widens to the f32 that `half` gives it (NaNs to NaNs), at lengths
    /// that leave each tail size.
    #[test]
    fn widen_f16_slice_is_exact_on_every_pattern() {
        if !crate::kernels::simd::has_avx512() {
            return;
        }
        use rlx_ir::half::f16;
        let all: Vec<f16> = (0..=u16::MAX).map(f16::from_bits).collect();
        for len in [all.len(), all.len() - 1, 15, 1, 0] {
            let x = &all[all.len() - len..];
            let mut o = vec![0f32; len];
            // SAFETY: AVX-512 checked above.
            unsafe { widen_f16_slice(x, &mut o) };
            for (h, v) in x.iter().zip(&o) {
                let want = h.to_f32();
                assert!(
                    want.to_bits() == v.to_bits() || (want.is_nan() && v.is_nan()),
                    "{:#06x}: {v} vs {want}",
                    h.to_bits()
                );
            }
        }
    }

    /// The batched sums give `_mm512_reduce_add_ps`'s bits on vectors whose lanes differ by
    /// up to 2⁴⁰ in magnitude (where another pairing rounds differently), four and seven rows.
    #[test]
    fn reduce_rows_is_reduce_add_ps() {
        if !std::arch::is_x86_feature_detected!("avx512f") {
            eprintln!("SKIP: no AVX-512F");
            return;
        }
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let m = (seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            m * 2f32.powi(((seed >> 8) % 41) as i32 - 20)
        };
        let (mut differs_from_sequential, mut n) = (0, 0);
        for _ in 0..2000 {
            let lanes: Vec<[f32; 16]> = (0..7).map(|_| std::array::from_fn(|_| next())).collect();
            // SAFETY: AVX-512F was detected; 16 floats per load.
            unsafe {
                let v: [__m512; 7] = std::array::from_fn(|i| _mm512_loadu_ps(lanes[i].as_ptr()));
                let got7 = reduce_rows(v);
                let got4 = reduce_rows([v[0], v[1], v[2], v[3]]);
                for i in 0..7 {
                    let want = _mm512_reduce_add_ps(v[i]);
                    assert_eq!(got7[i].to_bits(), want.to_bits(), "row {i} of 7: {:?}", lanes[i]);
                    if i < 4 {
                        assert_eq!(got4[i].to_bits(), want.to_bits());
                    }
                    let seq: f32 = lanes[i].iter().sum();
                    differs_from_sequential += usize::from(seq.to_bits() != want.to_bits());
                    n += 1;
                }
            }
        }
        // The inputs do tell pairings apart: a left-to-right sum rounds differently often.
        assert!(differs_from_sequential * 4 > n, "{differs_from_sequential} of {n}");
    }
}
