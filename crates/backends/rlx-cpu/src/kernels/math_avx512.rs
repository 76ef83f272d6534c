//! AVX-512 forms of the f32 transcendental functions in [`super::simd`], sixteen lanes at a
//! time with explicit FMAs, for the elementwise kernels and the softmax / norm rows (callers
//! check [`super::simd::has_avx512`] first).
//!
//! Same range reductions and polynomials (the coefficients are shared) as the portable
//! [`super::simd::exp_f32`] and [`super::simd::erf_f32`]; the portable forms compile to separate
//! multiplies and adds (Rust never contracts `a * b + c`), so these differ from them by
//! rounding only (tests: against f64 libm). Measured over 196 608 elements (MiniLM's GELU),
//! 1 thread: `erf` 1.63 → 0.77 ns per element, `exp` 0.51 → 0.25 (bench/RESULTS.md, "Session 7").

#![cfg(target_arch = "x86_64")]

use super::simd::{ERF_BIG, ERF_SMALL, ERFC_BIG, EXP_POLY, TANH_P};
use std::arch::x86_64::*;

/// Lanes per vector.
pub(crate) const LANES: usize = 16;

/// `exp(x)` on 16 lanes (Cephes `expf`, about 1 ulp): the `2ⁿ` scale by `vscalefps`, which
/// gets subnormals and overflow right. `exp(-inf) = 0`, `exp(NaN) = NaN`.
#[inline(always)]
pub(crate) unsafe fn exp512(x: __m512) -> __m512 {
    unsafe {
        // max/min return their second operand when one is NaN: NaN passes through.
        exp512_clamped(_mm512_min_ps(_mm512_set1_ps(88.8), _mm512_max_ps(_mm512_set1_ps(-104.0), x)))
    }
}

/// [`exp512`] of an `x` already in `[-104, 88.8]` (or NaN). `n = round(x·log₂e)` by the
/// 1.5·2²³ shifter (one FMA and a subtraction, as the portable `exp_f32`), the Cody–Waite
/// reduction `r = x - n·ln 2` in two parts, Cephes' polynomial `1 + r + r²·P(r)` by Horner's
/// rule, then `·2ⁿ` by `vscalefps`.
#[inline(always)]
pub(crate) unsafe fn exp512_clamped(xc: __m512) -> __m512 {
    unsafe {
        let magic = _mm512_set1_ps(12_582_912.0);
        let n = _mm512_sub_ps(_mm512_fmadd_ps(xc, _mm512_set1_ps(std::f32::consts::LOG2_E), magic), magic);
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693_359_4), xc);
        let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.121_944_4e-4), r);
        _mm512_scalef_ps(horner(r, &EXP_POLY), n)
    }
}

/// `c[0]·xⁿ + … + c[n]` by Horner's rule with FMAs (coefficients highest degree first).
#[inline(always)]
unsafe fn horner(x: __m512, c: &[f32]) -> __m512 {
    unsafe {
        let mut p = _mm512_set1_ps(c[0]);
        for &ci in &c[1..] {
            p = _mm512_fmadd_ps(p, x, _mm512_set1_ps(ci));
        }
        p
    }
}

/// `erf(x)` on 16 lanes, [`super::simd::erf_f32`]'s method: the Maclaurin series for
/// `|x| < 1`, else `±(1 - t·exp(P(t) - x²))` with `t = 1 / (1 + |x|/2)` (`|x|` clamped to 4).
/// `erf(±inf) = ±1`, `erf(NaN) = NaN`.
#[inline(always)]
pub(crate) unsafe fn erf512(x: __m512) -> __m512 {
    unsafe {
        let one = _mm512_set1_ps(1.0);
        let a = _mm512_abs_ps(x);
        let z = _mm512_mul_ps(x, x);
        let s = horner(z, &ERF_SMALL);
        let small = _mm512_mul_ps(x, s);
        let ac = _mm512_min_ps(a, _mm512_set1_ps(4.0));
        let t = _mm512_div_ps(one, _mm512_fmadd_ps(ac, _mm512_set1_ps(0.5), one));
        let p = horner(t, &ERF_BIG);
        let big = _mm512_fnmadd_ps(t, exp512(_mm512_fnmadd_ps(ac, ac, p)), one);
        // The sign of x (its bit copied onto the positive `big`).
        let sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(i32::MIN));
        let big = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(big), sign));
        let r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, one), big, small);
        _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x), r, x)
    }
}

/// `erfc(x) = 1 - erf(x)` on 16 lanes without `1 - erf`'s cancellation for large `x`:
/// `1 - x·S(x²)` (erf's Maclaurin series) for `|x| < 1/2`; for `x ≥ 1/2`, `t·exp(P(t) - x²)`
/// with `t = 1 / (1 + x/2)` and `P` fitted to `erfc` on `[0.5, 10]` (`x` clamped to 11, where the
/// result underflows to 0); for `x ≤ -1/2`, `2 -` that at `|x|`. `x²` is split exactly
/// (`hi + lo` by an FMA) and `P - hi` summed exactly (TwoSum), so the exponent carries no
/// rounding of `x²` (at `x = 9`, one ulp of `x²` is 8 ulps of the result). Within 8 ulps of
/// f64 libm where erfc is a normal f32 (`x < 9.19`; test `erfc_slice_matches_libm`, worst
/// 6.6 ulps). `erfc(-inf) = 2`, `erfc(inf) = 0`, `erfc(NaN) = NaN`.
#[inline(always)]
pub(crate) unsafe fn erfc512(x: __m512) -> __m512 {
    unsafe {
        let one = _mm512_set1_ps(1.0);
        let a = _mm512_abs_ps(x);
        let z = _mm512_mul_ps(x, x);
        let s = horner(z, &ERF_SMALL);
        let small = _mm512_fnmadd_ps(x, s, one);
        let ac = _mm512_min_ps(a, _mm512_set1_ps(11.0));
        let t = _mm512_div_ps(one, _mm512_fmadd_ps(ac, _mm512_set1_ps(0.5), one));
        let p = horner(t, &ERFC_BIG);
        // x² = hi + lo exactly; P - hi = sum + err exactly (Knuth's TwoSum).
        let hi = _mm512_mul_ps(ac, ac);
        let lo = _mm512_fmsub_ps(ac, ac, hi);
        let sum = _mm512_sub_ps(p, hi);
        let pv = _mm512_add_ps(sum, hi); // the part of `sum` that came from p
        let hv = _mm512_sub_ps(sum, pv); // ... and from -hi
        let err = _mm512_add_ps(_mm512_sub_ps(p, pv), _mm512_add_ps(hi, hv));
        // exp(sum + err - lo) = exp(sum)·(1 + (err - lo)) to 1e-10 (|err - lo| < 1e-5).
        let e = exp512(sum);
        let tail = _mm512_mul_ps(t, _mm512_fmadd_ps(e, _mm512_sub_ps(err, lo), e));
        let neg = _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, _mm512_setzero_ps());
        let big = _mm512_mask_blend_ps(neg, tail, _mm512_sub_ps(_mm512_set1_ps(2.0), tail));
        let r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, _mm512_set1_ps(0.5)), big, small);
        _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x), r, x)
    }
}

/// `tanh(x)` on 16 lanes, [`super::simd::tanh_f32`]'s method: the odd polynomial for
/// `|x| < 0.625`, else `±(1 - 2 / (exp(2|x|) + 1))`. `tanh(±inf) = ±1`, `tanh(NaN) = NaN`.
#[inline(always)]
pub(crate) unsafe fn tanh512(x: __m512) -> __m512 {
    unsafe {
        let one = _mm512_set1_ps(1.0);
        let a = _mm512_abs_ps(x);
        let z = _mm512_mul_ps(x, x);
        let p = horner(z, &TANH_P);
        let small = _mm512_fmadd_ps(_mm512_mul_ps(p, z), x, x);
        let e = exp512(_mm512_mul_ps(_mm512_set1_ps(2.0), _mm512_min_ps(a, _mm512_set1_ps(44.0))));
        let big = _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0), _mm512_add_ps(e, one)));
        let sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(i32::MIN));
        let big = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(big), sign));
        let r = _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, _mm512_set1_ps(0.625)), big, small);
        _mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x, x), r, x)
    }
}

/// The logistic function `1 / (1 + exp(-x))` on 16 lanes, in the form that never overflows:
/// `e = exp(-|x|)`, `r = 1 / (1 + e)`, then `r` for `x ≥ 0` and `e·r` below. The reciprocal of
/// `1 + e ∈ [1, 2]` is `rcp14` and one Newton step (within 1 ulp; a division is 3 µops on one
/// port): 3.4 ulps at worst (test `exp_logistic_tanh_ulps_over_a_sweep`).
#[inline(always)]
pub(crate) unsafe fn logistic512(x: __m512) -> __m512 {
    unsafe {
        // -|x|: the sign bit set (one op).
        let nx = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(x), _mm512_set1_epi32(i32::MIN)));
        let e = exp512_clamped(_mm512_max_ps(_mm512_set1_ps(-104.0), nx));
        let d = _mm512_add_ps(_mm512_set1_ps(1.0), e);
        // 1/d for d in [1, 2] (NaN stays NaN): rcp14 and one Newton step, r + r·(1 - d·r).
        let r0 = _mm512_rcp14_ps(d);
        let r = _mm512_fmadd_ps(r0, _mm512_fnmadd_ps(d, r0, _mm512_set1_ps(1.0)), r0);
        // x < 0 (false for NaN, whose r is NaN already).
        _mm512_mask_mul_ps(r, _mm512_cmp_ps_mask::<_CMP_LT_OQ>(x, _mm512_setzero_ps()), e, r)
    }
}

/// Mask of the first `k` (< 16) lanes.
#[inline(always)]
pub(crate) fn tail_mask(k: usize) -> __mmask16 {
    ((1u32 << k) - 1) as __mmask16
}

/// `o[i] = f(x[i])` over equal-length slices, 16 lanes at a time, the tail under a mask.
///
/// # Safety
/// AVX-512F is available.
#[inline(always)]
pub(crate) unsafe fn map(x: &[f32], o: &mut [f32], f: impl Fn(__m512) -> __m512) {
    let n = o.len().min(x.len());
    let (xp, op) = (x.as_ptr(), o.as_mut_ptr());
    let mut i = 0;
    // SAFETY: every access is below `n`, inside both slices.
    unsafe {
        while i + LANES <= n {
            _mm512_storeu_ps(op.add(i), f(_mm512_loadu_ps(xp.add(i))));
            i += LANES;
        }
        if i < n {
            let m = tail_mask(n - i);
            _mm512_mask_storeu_ps(op.add(i), m, f(_mm512_maskz_loadu_ps(m, xp.add(i))));
        }
    }
}

/// `o = erf(x)` elementwise ([`erf512`]).
///
/// # Safety
/// AVX-512F is available.
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx2,fma")]
pub(crate) unsafe fn erf_slice(x: &[f32], o: &mut [f32]) {
    // SAFETY: the caller's contract.
    unsafe { map(x, o, |v| erf512(v)) }
}

/// `o = erfc(x)` elementwise ([`erfc512`]).
///
/// # Safety
/// AVX-512F is available.
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx2,fma")]
pub(crate) unsafe fn erfc_slice(x: &[f32], o: &mut [f32]) {
    // SAFETY: the caller's contract.
    unsafe { map(x, o, |v| erfc512(v)) }
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

/// `o = exp(x)` elementwise ([`exp512`]).
///
/// # Safety
/// AVX-512F is available.
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx2,fma")]
pub(crate) unsafe fn exp_slice(x: &[f32], o: &mut [f32]) {
    // SAFETY: the caller's contract.
    unsafe { map(x, o, |v| exp512(v)) }
}

/// `o = tanh(x)` elementwise ([`tanh512`]).
///
/// # Safety
/// AVX-512F is available.
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx2,fma")]
pub(crate) unsafe fn tanh_slice(x: &[f32], o: &mut [f32]) {
    // SAFETY: the caller's contract.
    unsafe { map(x, o, |v| tanh512(v)) }
}

/// `o = logistic(x)` elementwise ([`logistic512`]).
///
/// # Safety
/// AVX-512F is available.
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx2,fma")]
pub(crate) unsafe fn logistic_slice(x: &[f32], o: &mut [f32]) {
    // SAFETY: the caller's contract.
    unsafe { map(x, o, |v| logistic512(v)) }
}

/// `x = exp(x - m)` in place ([`exp512`]); returns the sum of the results (16 lane sums,
/// added in lane order at the end). Attention's online softmax.
///
/// # Safety
/// AVX-512F is available.
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx2,fma")]
pub(crate) unsafe fn exp_sum_slice(x: &mut [f32], m: f32) -> f32 {
    let (n, p) = (x.len(), x.as_mut_ptr());
    let mv = _mm512_set1_ps(m);
    let mut acc = _mm512_setzero_ps();
    let mut i = 0;
    // SAFETY: every access is below `n`, inside `x`.
    unsafe {
        while i + LANES <= n {
            let e = exp512(_mm512_sub_ps(_mm512_loadu_ps(p.add(i)), mv));
            _mm512_storeu_ps(p.add(i), e);
            acc = _mm512_add_ps(acc, e);
            i += LANES;
        }
        if i < n {
            let k = tail_mask(n - i);
            let e = exp512(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, p.add(i)), mv));
            _mm512_mask_storeu_ps(p.add(i), k, e);
            acc = _mm512_mask_add_ps(acc, k, acc, e);
        }
        let mut lanes = [0f32; LANES];
        _mm512_storeu_ps(lanes.as_mut_ptr(), acc);
        lanes.iter().sum()
    }
}

/// NaN-propagating maximum of `x` (`-inf` for an empty slice): as [`super::reduce`]'s
/// `max_row`, which the compiler leaves scalar inside the attention tile. Attention's online
/// softmax.
///
/// # Safety
/// AVX-512F is available.
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx2,fma")]
pub(crate) unsafe fn max_slice(x: &[f32]) -> f32 {
    let (n, p) = (x.len(), x.as_ptr());
    let mut acc = _mm512_set1_ps(f32::NEG_INFINITY);
    let mut nan: __mmask16 = 0;
    let mut i = 0;
    // SAFETY: every access is below `n`, inside `x` (the tail under a mask).
    unsafe {
        while i < n {
            let k = if i + LANES <= n { !0 } else { tail_mask(n - i) };
            let v = _mm512_mask_loadu_ps(_mm512_set1_ps(f32::NEG_INFINITY), k, p.add(i));
            nan |= _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(v, v);
            acc = _mm512_max_ps(acc, v);
            i += LANES;
        }
    }
    if nan != 0 { f32::NAN } else { _mm512_reduce_max_ps(acc) }
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
