//! A vector of f32 lanes on one x86 SIMD level ([`Vf32`]), so that a row kernel or a
//! transcendental function is written once and compiled for each width: [`F32x16`] (AVX-512,
//! 16 lanes), [`F32x8`] (AVX2 + FMA, 8 lanes), and [`Interleaved`] (`N` vectors of one width as
//! one, for long dependency chains). The generic code lives in [`super::math_vec`] (`exp`,
//! `erf`, `erfc`, `tanh`, the logistic function), [`super::norm_vec`] (softmax / layer_norm /
//! rms_norm rows) and [`super::attention_vec`] (attention's tile products).
//!
//! Every method is `#[inline(always)]` and is only called from inside a function compiled with
//! the level's `#[target_feature]` (the `*_avx512` / `*_avx2` entry points), where the
//! intrinsics inline; callers check [`super::simd::has_avx512`] / [`super::simd::has_avx2`]
//! first. Closures in the generic code carry no target features of their own: each is passed
//! in argument position with `#[inline(always)]` (a `let` closure cannot carry it), and arrays
//! are built element by element, not by `[..].map(closure)`: one closure left out of line made
//! softmax over [4096, 4096] 36 times slower (13.3 → 483 ms), every intrinsic in it a call.
//!
//! Both widths compute the same operations in the same order, so `exp`, `erf`, `erfc`, `tanh`,
//! the norms and the attention tiles give the same bits at 8 and 16 lanes (the logistic
//! function's reciprocal differs: [`Vf32::recip_1_2`]). The 16-lane forms replaced hand-written
//! `__m512` kernels (`math_avx512.rs`, `norm_avx512.rs`, `attention_avx512.rs`, 1,040 lines)
//! once an AVX-512 host could measure them: the same bits on every f32 in a sweep, and the same
//! times within noise (AMD EPYC Zen 4, 1 core: `fusion_bench erfc` 0.172 ms both, encoder
//! 4.75–4.79 both, attention `1 128 12 32 bias` 0.349 vs 0.351 ms).

#![cfg(target_arch = "x86_64")]

use super::avx512::tail_mask;
use std::arch::x86_64::*;

/// f32 lanes of one SIMD level (see the module docs). `unsafe`: each method needs its level's
/// CPU features; pointer methods read or write `LANES` (or `n`) floats.
#[allow(clippy::missing_safety_doc)]
pub(crate) trait Vf32: Copy {
    /// Lanes per vector.
    const LANES: usize;
    unsafe fn splat(v: f32) -> Self;
    unsafe fn load(p: *const f32) -> Self;
    /// Lanes `0..n` from `p` (`n < LANES`), `fill` in the others; reads nothing past `p + n`.
    unsafe fn load_part(p: *const f32, n: usize, fill: f32) -> Self;
    unsafe fn store(self, p: *mut f32);
    /// Lanes `0..n` to `p` (`n < LANES`); writes nothing past `p + n`.
    unsafe fn store_part(self, p: *mut f32, n: usize);
    /// Non-temporal store to `p`, aligned to `4 · LANES` bytes.
    unsafe fn stream(self, p: *mut f32);
    unsafe fn add(self, b: Self) -> Self;
    unsafe fn sub(self, b: Self) -> Self;
    unsafe fn mul(self, b: Self) -> Self;
    unsafe fn div(self, b: Self) -> Self;
    /// x86 `min`: `b` when either is NaN.
    unsafe fn min(self, b: Self) -> Self;
    /// x86 `max`: `b` when either is NaN.
    unsafe fn max(self, b: Self) -> Self;
    /// `self · b + c`, one rounding.
    unsafe fn fmadd(self, b: Self, c: Self) -> Self;
    /// `c - self · b`, one rounding.
    unsafe fn fnmadd(self, b: Self, c: Self) -> Self;
    /// `self · b - c`, one rounding.
    unsafe fn fmsub(self, b: Self, c: Self) -> Self;
    unsafe fn abs(self) -> Self;
    /// `self` with the sign bit of `x` or-ed in.
    unsafe fn or_sign_of(self, x: Self) -> Self;
    /// `-|self|` (the sign bit set).
    unsafe fn neg_abs(self) -> Self;
    /// Per lane: `t` where `a < b` (ordered), else `f`.
    unsafe fn select_lt(a: Self, b: Self, t: Self, f: Self) -> Self;
    /// Per lane: `x` where `x` is NaN, else `r`.
    unsafe fn keep_nan(x: Self, r: Self) -> Self;
    /// Whether any lane of `self` differs from `b` (NaN lanes differ).
    unsafe fn any_ne(self, b: Self) -> bool;
    /// `self · 2ⁿ` for integral `n` in `[-150, 128]`, rounded once (subnormal results and
    /// overflow to `inf` exact, as `vscalefps`).
    unsafe fn scale_pow2(self, n: Self) -> Self;
    /// `1 / self` for `self` in `[1, 2]` within one ulp, exact at 1 (NaN stays NaN).
    unsafe fn recip_1_2(self) -> Self;
    /// Lanes `n..` set to zero (`n < LANES`).
    unsafe fn zero_from(self, n: usize) -> Self;
    /// Maximum of the lanes (NaN lanes: one of them or another lane; callers check NaN).
    unsafe fn reduce_max(self) -> f32;
    /// Sum of the lanes in f64.
    unsafe fn hsum_f64(self) -> f64;
    /// Prefetch the line holding `p` into L2.
    #[inline(always)]
    unsafe fn prefetch_l2(p: *const f32) {
        unsafe { _mm_prefetch::<_MM_HINT_T1>(p as *const i8) }
    }
}

/// 8 f32 lanes on AVX2 + FMA.
#[derive(Clone, Copy)]
pub(crate) struct F32x8(pub(crate) __m256);

/// The `vmaskmovps` mask of lanes `0..n`.
#[inline(always)]
unsafe fn lanes_below(n: usize) -> __m256i {
    unsafe { _mm256_cmpgt_epi32(_mm256_set1_epi32(n as i32), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)) }
}

impl Vf32 for F32x8 {
    const LANES: usize = 8;
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        unsafe { F32x8(_mm256_set1_ps(v)) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        unsafe { F32x8(_mm256_loadu_ps(p)) }
    }
    #[inline(always)]
    unsafe fn load_part(p: *const f32, n: usize, fill: f32) -> Self {
        unsafe {
            let m = lanes_below(n);
            F32x8(_mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m)))
        }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        unsafe { _mm256_storeu_ps(p, self.0) }
    }
    #[inline(always)]
    unsafe fn store_part(self, p: *mut f32, n: usize) {
        unsafe { _mm256_maskstore_ps(p, lanes_below(n), self.0) }
    }
    #[inline(always)]
    unsafe fn stream(self, p: *mut f32) {
        unsafe { _mm256_stream_ps(p, self.0) }
    }
    #[inline(always)]
    unsafe fn add(self, b: Self) -> Self {
        unsafe { F32x8(_mm256_add_ps(self.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn sub(self, b: Self) -> Self {
        unsafe { F32x8(_mm256_sub_ps(self.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn mul(self, b: Self) -> Self {
        unsafe { F32x8(_mm256_mul_ps(self.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn div(self, b: Self) -> Self {
        unsafe { F32x8(_mm256_div_ps(self.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn min(self, b: Self) -> Self {
        unsafe { F32x8(_mm256_min_ps(self.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn max(self, b: Self) -> Self {
        unsafe { F32x8(_mm256_max_ps(self.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn fmadd(self, b: Self, c: Self) -> Self {
        unsafe { F32x8(_mm256_fmadd_ps(self.0, b.0, c.0)) }
    }
    #[inline(always)]
    unsafe fn fnmadd(self, b: Self, c: Self) -> Self {
        unsafe { F32x8(_mm256_fnmadd_ps(self.0, b.0, c.0)) }
    }
    #[inline(always)]
    unsafe fn fmsub(self, b: Self, c: Self) -> Self {
        unsafe { F32x8(_mm256_fmsub_ps(self.0, b.0, c.0)) }
    }
    #[inline(always)]
    unsafe fn abs(self) -> Self {
        unsafe { F32x8(_mm256_andnot_ps(_mm256_set1_ps(-0.0), self.0)) }
    }
    #[inline(always)]
    unsafe fn or_sign_of(self, x: Self) -> Self {
        unsafe { F32x8(_mm256_or_ps(self.0, _mm256_and_ps(x.0, _mm256_set1_ps(-0.0)))) }
    }
    #[inline(always)]
    unsafe fn neg_abs(self) -> Self {
        unsafe { F32x8(_mm256_or_ps(self.0, _mm256_set1_ps(-0.0))) }
    }
    #[inline(always)]
    unsafe fn select_lt(a: Self, b: Self, t: Self, f: Self) -> Self {
        unsafe { F32x8(_mm256_blendv_ps(f.0, t.0, _mm256_cmp_ps::<_CMP_LT_OQ>(a.0, b.0))) }
    }
    #[inline(always)]
    unsafe fn keep_nan(x: Self, r: Self) -> Self {
        unsafe { F32x8(_mm256_blendv_ps(r.0, x.0, _mm256_cmp_ps::<_CMP_UNORD_Q>(x.0, x.0))) }
    }
    #[inline(always)]
    unsafe fn any_ne(self, b: Self) -> bool {
        unsafe { _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_NEQ_UQ>(self.0, b.0)) != 0 }
    }
    #[inline(always)]
    unsafe fn scale_pow2(self, n: Self) -> Self {
        // 2ⁿ as two normal factors 2^(n/2) · 2^(n - n/2) (each exponent in [-75, 64]): the
        // first product is exact (`self` is normal and stays normal), the second rounds once.
        unsafe {
            let ni = _mm256_cvtps_epi32(n.0);
            let n1 = _mm256_srai_epi32::<1>(ni);
            let n2 = _mm256_sub_epi32(ni, n1);
            let bias = _mm256_set1_epi32(127);
            let s1 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(n1, bias)));
            let s2 = _mm256_castsi256_ps(_mm256_slli_epi32::<23>(_mm256_add_epi32(n2, bias)));
            F32x8(_mm256_mul_ps(_mm256_mul_ps(self.0, s1), s2))
        }
    }
    #[inline(always)]
    unsafe fn recip_1_2(self) -> Self {
        // A division: `vrcpps`' 12 bits and one Newton step left the logistic function 3.98
        // ulps from libm (AVX-512's `rcp14` + one step: 3.36); two steps were 18% slower than
        // the division on `fusion_bench chain-l2` (Zen 3: 0.553–0.575 → 0.653–0.657 ms).
        unsafe { F32x8(_mm256_div_ps(_mm256_set1_ps(1.0), self.0)) }
    }
    #[inline(always)]
    unsafe fn zero_from(self, n: usize) -> Self {
        unsafe { F32x8(_mm256_and_ps(self.0, _mm256_castsi256_ps(lanes_below(n)))) }
    }
    #[inline(always)]
    unsafe fn reduce_max(self) -> f32 {
        unsafe {
            let m = _mm_max_ps(_mm256_castps256_ps128(self.0), _mm256_extractf128_ps::<1>(self.0));
            let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
            _mm_cvtss_f32(_mm_max_ss(m, _mm_shuffle_ps::<0b01>(m, m)))
        }
    }
    #[inline(always)]
    unsafe fn hsum_f64(self) -> f64 {
        unsafe {
            let lo = _mm256_cvtps_pd(_mm256_castps256_ps128(self.0));
            let hi = _mm256_cvtps_pd(_mm256_extractf128_ps::<1>(self.0));
            let s = _mm256_add_pd(lo, hi);
            let s = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd::<1>(s));
            _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)))
        }
    }
}

/// 16 f32 lanes on AVX-512F (+ FMA): callers run inside `#[target_feature(enable =
/// "avx512f,…")]` entry points and check [`super::simd::has_avx512`] first. Only AVX-512F
/// instructions (bitwise ops on the integer view: `vandps` / `vorps` on `zmm` need AVX-512DQ).
#[derive(Clone, Copy)]
pub(crate) struct F32x16(pub(crate) __m512);

/// The sign bit of every lane.
#[inline(always)]
unsafe fn sign_bits() -> __m512i {
    unsafe { _mm512_set1_epi32(i32::MIN) }
}

impl Vf32 for F32x16 {
    const LANES: usize = 16;
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        unsafe { F32x16(_mm512_set1_ps(v)) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        unsafe { F32x16(_mm512_loadu_ps(p)) }
    }
    #[inline(always)]
    unsafe fn load_part(p: *const f32, n: usize, fill: f32) -> Self {
        unsafe { F32x16(_mm512_mask_loadu_ps(_mm512_set1_ps(fill), tail_mask(n), p)) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        unsafe { _mm512_storeu_ps(p, self.0) }
    }
    #[inline(always)]
    unsafe fn store_part(self, p: *mut f32, n: usize) {
        unsafe { _mm512_mask_storeu_ps(p, tail_mask(n), self.0) }
    }
    #[inline(always)]
    unsafe fn stream(self, p: *mut f32) {
        unsafe { _mm512_stream_ps(p, self.0) }
    }
    #[inline(always)]
    unsafe fn add(self, b: Self) -> Self {
        unsafe { F32x16(_mm512_add_ps(self.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn sub(self, b: Self) -> Self {
        unsafe { F32x16(_mm512_sub_ps(self.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn mul(self, b: Self) -> Self {
        unsafe { F32x16(_mm512_mul_ps(self.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn div(self, b: Self) -> Self {
        unsafe { F32x16(_mm512_div_ps(self.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn min(self, b: Self) -> Self {
        unsafe { F32x16(_mm512_min_ps(self.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn max(self, b: Self) -> Self {
        unsafe { F32x16(_mm512_max_ps(self.0, b.0)) }
    }
    #[inline(always)]
    unsafe fn fmadd(self, b: Self, c: Self) -> Self {
        unsafe { F32x16(_mm512_fmadd_ps(self.0, b.0, c.0)) }
    }
    #[inline(always)]
    unsafe fn fnmadd(self, b: Self, c: Self) -> Self {
        unsafe { F32x16(_mm512_fnmadd_ps(self.0, b.0, c.0)) }
    }
    #[inline(always)]
    unsafe fn fmsub(self, b: Self, c: Self) -> Self {
        unsafe { F32x16(_mm512_fmsub_ps(self.0, b.0, c.0)) }
    }
    #[inline(always)]
    unsafe fn abs(self) -> Self {
        unsafe { F32x16(_mm512_abs_ps(self.0)) }
    }
    #[inline(always)]
    unsafe fn or_sign_of(self, x: Self) -> Self {
        unsafe {
            let sign = _mm512_and_si512(_mm512_castps_si512(x.0), sign_bits());
            F32x16(_mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(self.0), sign)))
        }
    }
    #[inline(always)]
    unsafe fn neg_abs(self) -> Self {
        unsafe { F32x16(_mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(self.0), sign_bits()))) }
    }
    #[inline(always)]
    unsafe fn select_lt(a: Self, b: Self, t: Self, f: Self) -> Self {
        unsafe { F32x16(_mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_LT_OQ>(a.0, b.0), f.0, t.0)) }
    }
    #[inline(always)]
    unsafe fn keep_nan(x: Self, r: Self) -> Self {
        unsafe { F32x16(_mm512_mask_blend_ps(_mm512_cmp_ps_mask::<_CMP_UNORD_Q>(x.0, x.0), r.0, x.0)) }
    }
    #[inline(always)]
    unsafe fn any_ne(self, b: Self) -> bool {
        unsafe { _mm512_cmp_ps_mask::<_CMP_NEQ_UQ>(self.0, b.0) != 0 }
    }
    #[inline(always)]
    unsafe fn scale_pow2(self, n: Self) -> Self {
        unsafe { F32x16(_mm512_scalef_ps(self.0, n.0)) }
    }
    #[inline(always)]
    unsafe fn recip_1_2(self) -> Self {
        // `rcp14` and one Newton step, r + r·(1 - d·r): within one ulp on [1, 2], exact at 1
        // (a division is 3 µops on one port; the logistic function 3.36 ulps from libm).
        unsafe {
            let r0 = _mm512_rcp14_ps(self.0);
            F32x16(_mm512_fmadd_ps(r0, _mm512_fnmadd_ps(self.0, r0, _mm512_set1_ps(1.0)), r0))
        }
    }
    #[inline(always)]
    unsafe fn zero_from(self, n: usize) -> Self {
        unsafe { F32x16(_mm512_maskz_mov_ps(tail_mask(n), self.0)) }
    }
    #[inline(always)]
    unsafe fn reduce_max(self) -> f32 {
        unsafe { _mm512_reduce_max_ps(self.0) }
    }
    #[inline(always)]
    unsafe fn hsum_f64(self) -> f64 {
        unsafe {
            let lo = _mm512_cvtps_pd(_mm512_castps512_ps256(self.0));
            let hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(self.0))));
            _mm512_reduce_add_pd(_mm512_add_pd(lo, hi))
        }
    }
}

/// `N` vectors of `V` as one: every operation applied to each in turn, so that a function
/// written once over [`Vf32`] (`math_vec`'s `erfc`, `exp`, …) runs `N` independent dependency
/// chains interleaved in program order. Those functions are chains of dependent operations
/// (`erfc`: a division, two polynomials and an `exp`, ~120 cycles of latency per vector on Zen 3),
/// and one vector at a time the out-of-order window overlaps too few of them.
#[derive(Clone, Copy)]
pub(crate) struct Interleaved<V, const N: usize>(pub(crate) [V; N]);

impl<V: Vf32, const N: usize> Interleaved<V, N> {
    /// Lanes of vector `i` among the first `n` lanes.
    #[inline(always)]
    fn part(n: usize, i: usize) -> usize {
        n.saturating_sub(i * V::LANES).min(V::LANES)
    }
}

/// `Interleaved(r)` with `r[i]` = `$e` (`$i` the vector index), element by element (see the
/// module docs: no closures).
macro_rules! each {
    ($i:ident => $e:expr) => {{
        let mut r = [V::splat(0.0); N];
        for $i in 0..N {
            r[$i] = $e;
        }
        Interleaved(r)
    }};
}

impl<V: Vf32, const N: usize> Vf32 for Interleaved<V, N> {
    const LANES: usize = N * V::LANES;
    #[inline(always)]
    unsafe fn splat(v: f32) -> Self {
        unsafe { Interleaved([V::splat(v); N]) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        unsafe { each!(i => V::load(p.add(i * V::LANES))) }
    }
    #[inline(always)]
    unsafe fn load_part(p: *const f32, n: usize, fill: f32) -> Self {
        unsafe {
            each!(i => match Self::part(n, i) {
                0 => V::splat(fill),
                k if k == V::LANES => V::load(p.add(i * V::LANES)),
                k => V::load_part(p.add(i * V::LANES), k, fill),
            })
        }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        for (i, v) in self.0.iter().enumerate() {
            unsafe { v.store(p.add(i * V::LANES)) }
        }
    }
    #[inline(always)]
    unsafe fn store_part(self, p: *mut f32, n: usize) {
        for (i, v) in self.0.iter().enumerate() {
            match Self::part(n, i) {
                0 => {}
                k if k == V::LANES => unsafe { v.store(p.add(i * V::LANES)) },
                k => unsafe { v.store_part(p.add(i * V::LANES), k) },
            }
        }
    }
    #[inline(always)]
    unsafe fn stream(self, p: *mut f32) {
        for (i, v) in self.0.iter().enumerate() {
            unsafe { v.stream(p.add(i * V::LANES)) }
        }
    }
    #[inline(always)]
    unsafe fn add(self, b: Self) -> Self {
        unsafe { each!(i => self.0[i].add(b.0[i])) }
    }
    #[inline(always)]
    unsafe fn sub(self, b: Self) -> Self {
        unsafe { each!(i => self.0[i].sub(b.0[i])) }
    }
    #[inline(always)]
    unsafe fn mul(self, b: Self) -> Self {
        unsafe { each!(i => self.0[i].mul(b.0[i])) }
    }
    #[inline(always)]
    unsafe fn div(self, b: Self) -> Self {
        unsafe { each!(i => self.0[i].div(b.0[i])) }
    }
    #[inline(always)]
    unsafe fn min(self, b: Self) -> Self {
        unsafe { each!(i => self.0[i].min(b.0[i])) }
    }
    #[inline(always)]
    unsafe fn max(self, b: Self) -> Self {
        unsafe { each!(i => self.0[i].max(b.0[i])) }
    }
    #[inline(always)]
    unsafe fn fmadd(self, b: Self, c: Self) -> Self {
        unsafe { each!(i => self.0[i].fmadd(b.0[i], c.0[i])) }
    }
    #[inline(always)]
    unsafe fn fnmadd(self, b: Self, c: Self) -> Self {
        unsafe { each!(i => self.0[i].fnmadd(b.0[i], c.0[i])) }
    }
    #[inline(always)]
    unsafe fn fmsub(self, b: Self, c: Self) -> Self {
        unsafe { each!(i => self.0[i].fmsub(b.0[i], c.0[i])) }
    }
    #[inline(always)]
    unsafe fn abs(self) -> Self {
        unsafe { each!(i => self.0[i].abs()) }
    }
    #[inline(always)]
    unsafe fn or_sign_of(self, x: Self) -> Self {
        unsafe { each!(i => self.0[i].or_sign_of(x.0[i])) }
    }
    #[inline(always)]
    unsafe fn neg_abs(self) -> Self {
        unsafe { each!(i => self.0[i].neg_abs()) }
    }
    #[inline(always)]
    unsafe fn select_lt(a: Self, b: Self, t: Self, f: Self) -> Self {
        unsafe { each!(i => V::select_lt(a.0[i], b.0[i], t.0[i], f.0[i])) }
    }
    #[inline(always)]
    unsafe fn keep_nan(x: Self, r: Self) -> Self {
        unsafe { each!(i => V::keep_nan(x.0[i], r.0[i])) }
    }
    #[inline(always)]
    unsafe fn any_ne(self, b: Self) -> bool {
        let mut any = false;
        for i in 0..N {
            any |= unsafe { self.0[i].any_ne(b.0[i]) };
        }
        any
    }
    #[inline(always)]
    unsafe fn scale_pow2(self, n: Self) -> Self {
        unsafe { each!(i => self.0[i].scale_pow2(n.0[i])) }
    }
    #[inline(always)]
    unsafe fn recip_1_2(self) -> Self {
        unsafe { each!(i => self.0[i].recip_1_2()) }
    }
    #[inline(always)]
    unsafe fn zero_from(self, n: usize) -> Self {
        unsafe {
            each!(i => match Self::part(n, i) {
                0 => V::splat(0.0),
                k if k == V::LANES => self.0[i],
                k => self.0[i].zero_from(k),
            })
        }
    }
    #[inline(always)]
    unsafe fn reduce_max(self) -> f32 {
        let mut m = self.0[0];
        for v in &self.0[1..] {
            m = unsafe { m.max(*v) };
        }
        unsafe { m.reduce_max() }
    }
    #[inline(always)]
    unsafe fn hsum_f64(self) -> f64 {
        let mut s = 0f64;
        for v in &self.0 {
            s += unsafe { v.hsum_f64() };
        }
        s
    }
}
