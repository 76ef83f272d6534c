//! The f32 transcendental functions on any [`Vf32`] width, with explicit FMAs, for the
//! elementwise, fused and norm kernels: entry points for 16 lanes (`*_avx512`, callers check
//! [`super::simd::has_avx512`]) and 8 lanes (`*_avx2`, [`super::simd::has_avx2`]).
//!
//! Same range reductions and polynomials (coefficients from [`super::simd`]) as the portable
//! [`super::simd::exp_f32`] and [`super::simd::erf_f32`], which compile to separate multiplies
//! and adds (Rust never contracts `a * b + c`), so these differ from them by rounding only
//! (tests: against f64 libm); `2ⁿ` by [`Vf32::scale_pow2`], exact as `vscalefps`. `exp`, `erf`,
//! `erfc` and `tanh` give the same bits at both widths; the logistic function's reciprocal is a
//! division on AVX2 (`rcp14` and a Newton step on AVX-512), so it may differ in the last bit.
//! Measured over 196 608 elements (MiniLM's GELU), 1 thread, AVX-512 against the portable
//! forms: `erf` 1.63 → 0.77 ns per element, `exp` 0.51 → 0.25 (bench/RESULTS.md, "Session 7");
//! on AVX2 CPUs the portable forms had run as LLVM vectorized them, and `erfc` (the exact GELU)
//! as f64 libm per element.

#![cfg(target_arch = "x86_64")]

use super::simd::{ERF_BIG, ERF_SMALL, ERFC_BIG, EXP_POLY, TANH_P};
use super::vf32::{F32x8, F32x16, Interleaved, Vf32};

/// `c[0]·xⁿ + … + c[n]` by Horner's rule with FMAs (coefficients highest degree first).
#[inline(always)]
unsafe fn horner<V: Vf32>(x: V, c: &[f32]) -> V {
    unsafe {
        let mut p = V::splat(c[0]);
        for &ci in &c[1..] {
            p = p.fmadd(x, V::splat(ci));
        }
        p
    }
}

/// `exp(x)` (Cephes `expf`'s reduction, the polynomial `EXP_POLY`; about 1 ulp): clamped to
/// `[-104, 88.8]` (NaN passes through: x86 `min` / `max` return their second operand), then
/// [`exp_clamped`]. `exp(-inf) = 0`.
#[inline(always)]
pub(crate) unsafe fn exp<V: Vf32>(x: V) -> V {
    unsafe { exp_clamped(V::splat(88.8).min(V::splat(-104.0).max(x))) }
}

/// `exp` of an `x` already in `[-104, 88.8]` (or NaN): `n = round(x·log₂e)` by the 1.5·2²³
/// shifter, the Cody–Waite reduction `r = x - n·ln 2` in two parts, the polynomial by Horner's
/// rule, then `·2ⁿ`.
#[inline(always)]
pub(crate) unsafe fn exp_clamped<V: Vf32>(xc: V) -> V {
    unsafe {
        let magic = V::splat(12_582_912.0);
        let n = xc.fmadd(V::splat(std::f32::consts::LOG2_E), magic).sub(magic);
        let r = n.fnmadd(V::splat(0.693_359_4), xc);
        let r = n.fnmadd(V::splat(-2.121_944_4e-4), r);
        horner(r, &EXP_POLY).scale_pow2(n)
    }
}

/// `erf(x)` ([`super::simd::erf_f32`]'s method): the Maclaurin series for `|x| < 1`, else
/// `±(1 - t·exp(P(t) - x²))` with `t = 1 / (1 + |x|/2)` (`|x|` clamped to 4).
#[inline(always)]
pub(crate) unsafe fn erf<V: Vf32>(x: V) -> V {
    unsafe {
        let one = V::splat(1.0);
        let a = x.abs();
        let small = x.mul(horner(x.mul(x), &ERF_SMALL));
        let ac = a.min(V::splat(4.0));
        let t = one.div(ac.fmadd(V::splat(0.5), one));
        let p = horner(t, &ERF_BIG);
        let big = t.fnmadd(exp(ac.fnmadd(ac, p)), one).or_sign_of(x);
        V::keep_nan(x, V::select_lt(a, one, small, big))
    }
}

/// `erfc(x) = 1 - erf(x)` without `1 - erf`'s cancellation (the former `erfc512`'s
/// method): `1 - x·S(x²)` for `|x| < 1/2`; for `x ≥ 1/2`, `t·exp(P(t) - x²)` with `x²` split
/// exactly and `P - x²` summed exactly (TwoSum); for `x ≤ -1/2`, `2 -` that at `|x|`.
/// Within 8 ulps of f64 libm where erfc is a normal f32.
#[inline(always)]
pub(crate) unsafe fn erfc<V: Vf32>(x: V) -> V {
    unsafe {
        let one = V::splat(1.0);
        let a = x.abs();
        let small = x.fnmadd(horner(x.mul(x), &ERF_SMALL), one);
        let ac = a.min(V::splat(11.0));
        let t = one.div(ac.fmadd(V::splat(0.5), one));
        let p = horner(t, &ERFC_BIG);
        // x² = hi + lo exactly; P - hi = sum + err exactly (Knuth's TwoSum).
        let hi = ac.mul(ac);
        let lo = ac.fmsub(ac, hi);
        let sum = p.sub(hi);
        let pv = sum.add(hi);
        let hv = sum.sub(pv);
        let err = p.sub(pv).add(hi.add(hv));
        // exp(sum + err - lo) = exp(sum)·(1 + (err - lo)) to 1e-10.
        let e = exp(sum);
        let tail = t.mul(e.fmadd(err.sub(lo), e));
        let big = V::select_lt(x, V::splat(0.0), V::splat(2.0).sub(tail), tail);
        V::keep_nan(x, V::select_lt(a, V::splat(0.5), small, big))
    }
}

/// `tanh(x)` ([`super::simd::tanh_f32`]'s method): the odd polynomial for `|x| < 0.625`, else
/// `±(1 - 2 / (exp(2|x|) + 1))`.
#[inline(always)]
pub(crate) unsafe fn tanh<V: Vf32>(x: V) -> V {
    unsafe {
        let one = V::splat(1.0);
        let a = x.abs();
        let z = x.mul(x);
        let small = horner(z, &TANH_P).mul(z).fmadd(x, x);
        let e = exp(V::splat(2.0).mul(a.min(V::splat(44.0))));
        let big = one.sub(V::splat(2.0).div(e.add(one))).or_sign_of(x);
        V::keep_nan(x, V::select_lt(a, V::splat(0.625), small, big))
    }
}

/// The logistic function `1 / (1 + exp(-x))` in the form that never overflows: `e =
/// exp(-|x|)`, `r = 1 / (1 + e)`, then `r` for `x ≥ 0` and `e·r` below.
#[inline(always)]
pub(crate) unsafe fn logistic<V: Vf32>(x: V) -> V {
    unsafe {
        let e = exp_clamped(V::splat(-104.0).max(x.neg_abs()));
        let r = V::splat(1.0).add(e).recip_1_2();
        V::select_lt(x, V::splat(0.0), e.mul(r), r)
    }
}

/// `o[i] = f(x[i])` over equal-length slices, `V::LANES` at a time, the tail by partial loads
/// and stores.
#[inline(always)]
pub(crate) unsafe fn map<V: Vf32>(x: &[f32], o: &mut [f32], f: impl Fn(V) -> V) {
    let n = o.len().min(x.len());
    let (xp, op) = (x.as_ptr(), o.as_mut_ptr());
    let mut i = 0;
    // SAFETY: every access is below `n`, inside both slices.
    unsafe {
        while i + V::LANES <= n {
            f(V::load(xp.add(i))).store(op.add(i));
            i += V::LANES;
        }
        if i < n {
            f(V::load_part(xp.add(i), n - i, 0.0)).store_part(op.add(i), n - i);
        }
    }
}

/// `x = exp(x - m)` in place ([`exp`]); returns the sum of the results (`LANES` lane sums,
/// added in lane order at the end). Attention's online softmax.
#[inline(always)]
unsafe fn exp_sum<V: Vf32>(x: &mut [f32], m: f32) -> f32 {
    let (n, p) = (x.len(), x.as_mut_ptr());
    let mut i = 0;
    // SAFETY: every access is below `n`, inside `x`.
    unsafe {
        let (mv, mut acc) = (V::splat(m), V::splat(0.0));
        while i + V::LANES <= n {
            let e = exp(V::load(p.add(i)).sub(mv));
            e.store(p.add(i));
            acc = acc.add(e);
            i += V::LANES;
        }
        if i < n {
            let e = exp(V::load_part(p.add(i), n - i, 0.0).sub(mv)).zero_from(n - i);
            e.store_part(p.add(i), n - i);
            acc = acc.add(e);
        }
        // The lane buffer holds one vector of at most 16 lanes (not an `Interleaved` wider one).
        const { assert!(V::LANES <= 16) };
        let mut lanes = [0f32; 16];
        acc.store(lanes.as_mut_ptr());
        lanes[..V::LANES].iter().sum()
    }
}

/// NaN-propagating maximum of `x` (`-inf` for an empty slice), as `reduce`'s `max_row`:
/// a NaN lane stays in its accumulator lane, checked once at the end.
#[inline(always)]
unsafe fn max_nan<V: Vf32>(x: &[f32]) -> f32 {
    let (n, p) = (x.len(), x.as_ptr());
    let mut i = 0;
    // SAFETY: every access is below `n`, inside `x`.
    unsafe {
        let mut acc = V::splat(f32::NEG_INFINITY);
        while i < n {
            let v =
                if i + V::LANES <= n { V::load(p.add(i)) } else { V::load_part(p.add(i), n - i, f32::NEG_INFINITY) };
            // `acc.max(v)` is `v` where either is NaN: a NaN of `v` is taken, one of `acc` kept.
            acc = V::keep_nan(acc, acc.max(v));
            i += V::LANES;
        }
        if acc.any_ne(acc) { f32::NAN } else { acc.reduce_max() }
    }
}

/// [`exp_sum`] on AVX2 + FMA.
///
/// # Safety
/// AVX2 and FMA are available.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn exp_sum_slice_avx2(x: &mut [f32], m: f32) -> f32 {
    // SAFETY: the caller's contract.
    unsafe { exp_sum::<F32x8>(x, m) }
}

/// [`max_nan`] on AVX2 + FMA.
///
/// # Safety
/// AVX2 and FMA are available.
#[target_feature(enable = "avx2,fma")]
pub(crate) unsafe fn max_slice_avx2(x: &[f32]) -> f32 {
    // SAFETY: the caller's contract.
    unsafe { max_nan::<F32x8>(x) }
}

/// [`exp_sum`] on AVX-512.
///
/// # Safety
/// AVX-512F/VL/BW and FMA are available.
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx2,fma")]
pub(crate) unsafe fn exp_sum_slice_avx512(x: &mut [f32], m: f32) -> f32 {
    // SAFETY: the caller's contract.
    unsafe { exp_sum::<F32x16>(x, m) }
}

/// [`max_nan`] on AVX-512.
///
/// # Safety
/// AVX-512F/VL/BW and FMA are available.
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx2,fma")]
pub(crate) unsafe fn max_slice_avx512(x: &[f32]) -> f32 {
    // SAFETY: the caller's contract.
    unsafe { max_nan::<F32x16>(x) }
}

/// The slice functions of one width: `o = f(x)` elementwise, `N` vectors interleaved
/// ([`Interleaved`]): each function is one long dependency chain per vector, which one vector at
/// a time left the out-of-order window short of independent work. `N` per function as measured
/// (1 core, `fusion_bench`). AVX2 (AMD EPYC Zen 3): `erfc` over [128, 1536] (MiniLM's exact
/// GELU) 0.47 ms at `N = 1`, 0.35 at 2, 0.47–0.48 at 4 (spills); the `tanh` / logistic chain
/// (`chain-l2`) 0.56, 0.57, 0.49–0.50 ms. `erf` takes `erfc`'s (the same shape: a division, two
/// polynomials, an `exp`), `exp` the short chains'. AVX-512 (AMD EPYC Zen 4, 32 registers,
/// 512-bit ops in two halves): one vector; two made `erfc` slower (0.173 → 0.203 ms), the
/// `tanh` / logistic chain no faster (0.282 → 0.284).
macro_rules! slices {
    ($features:literal, $v:ty; $($(#[$doc:meta])* $name:ident => $f:ident, $n:literal;)*) => {$(
        $(#[$doc])*
        ///
        /// # Safety
        /// The CPU has the target features this function is compiled for.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $name(x: &[f32], o: &mut [f32]) {
            // SAFETY: the caller's contract.
            unsafe { map::<Interleaved<$v, $n>>(x, o, |v| $f(v)) }
        }
    )*};
}

slices! { "avx2,fma", F32x8;
    /// `o = exp(x)` ([`exp`]) on AVX2.
    exp_slice_avx2 => exp, 4;
    /// `o = erf(x)` ([`erf`]) on AVX2.
    erf_slice_avx2 => erf, 2;
    /// `o = erfc(x)` ([`erfc`]) on AVX2.
    erfc_slice_avx2 => erfc, 2;
    /// `o = tanh(x)` ([`tanh`]) on AVX2.
    tanh_slice_avx2 => tanh, 4;
    /// `o = logistic(x)` ([`logistic`]) on AVX2.
    logistic_slice_avx2 => logistic, 4;
}

slices! { "avx512f,avx512vl,avx512bw,avx2,fma", F32x16;
    /// `o = exp(x)` ([`exp`]) on AVX-512.
    exp_slice_avx512 => exp, 1;
    /// `o = erf(x)` ([`erf`]) on AVX-512.
    erf_slice_avx512 => erf, 1;
    /// `o = erfc(x)` ([`erfc`]) on AVX-512.
    erfc_slice_avx512 => erfc, 1;
    /// `o = tanh(x)` ([`tanh`]) on AVX-512.
    tanh_slice_avx512 => tanh, 1;
    /// `o = logistic(x)` ([`logistic`]) on AVX-512.
    logistic_slice_avx512 => logistic, 1;
}

/// One width's slice functions (`o = f(x)` over equal-length slices): what
/// `elementwise::unary_block` and the tests dispatch through.
pub(crate) struct MathKernels {
    /// `"avx512"` or `"avx2"` (test messages).
    #[cfg(test)]
    pub(crate) name: &'static str,
    pub(crate) exp: unsafe fn(&[f32], &mut [f32]),
    pub(crate) erf: unsafe fn(&[f32], &mut [f32]),
    pub(crate) erfc: unsafe fn(&[f32], &mut [f32]),
    pub(crate) tanh: unsafe fn(&[f32], &mut [f32]),
    pub(crate) logistic: unsafe fn(&[f32], &mut [f32]),
}

impl MathKernels {
    /// The widest this CPU has: AVX-512, else AVX2, else
    /// `None` (the portable scalar forms of `simd`).
    pub(crate) fn best() -> Option<&'static MathKernels> {
        Self::avx512().or_else(Self::avx2)
    }

    /// The 16-lane functions, where the CPU has AVX-512.
    pub(crate) fn avx512() -> Option<&'static MathKernels> {
        static K: MathKernels = MathKernels {
            #[cfg(test)]
            name: "avx512",
            exp: exp_slice_avx512,
            erf: erf_slice_avx512,
            erfc: erfc_slice_avx512,
            tanh: tanh_slice_avx512,
            logistic: logistic_slice_avx512,
        };
        super::simd::has_avx512().then_some(&K)
    }

    /// This module's 8-lane functions, where the CPU has AVX2 + FMA.
    pub(crate) fn avx2() -> Option<&'static MathKernels> {
        static K: MathKernels = MathKernels {
            #[cfg(test)]
            name: "avx2",
            exp: exp_slice_avx2,
            erf: erf_slice_avx2,
            erfc: erfc_slice_avx2,
            tanh: tanh_slice_avx2,
            logistic: logistic_slice_avx2,
        };
        super::simd::has_avx2().then_some(&K)
    }
}

#[cfg(test)]
mod tests {
    //! The vector forms against f64 libm, each width this CPU has (AVX-512's from
    //! AVX2's).
    use super::*;

    type SliceFn = unsafe fn(&[f32], &mut [f32]);

    /// The widths this CPU runs.
    fn forms() -> Vec<&'static MathKernels> {
        let v: Vec<_> = [MathKernels::avx512(), MathKernels::avx2()].into_iter().flatten().collect();
        if v.is_empty() {
            eprintln!("SKIP math_vec: neither AVX-512 nor AVX2 on this CPU");
        }
        v
    }

    /// Attention's online-softmax helpers of each width this CPU has: (name, max, exp-sum).
    #[allow(clippy::type_complexity)]
    fn softmax_forms() -> Vec<(&'static str, unsafe fn(&[f32]) -> f32, unsafe fn(&mut [f32], f32) -> f32)> {
        let mut v: Vec<(&'static str, unsafe fn(&[f32]) -> f32, unsafe fn(&mut [f32], f32) -> f32)> = Vec::new();
        if crate::kernels::simd::has_avx512() {
            v.push(("avx512", max_slice_avx512, exp_sum_slice_avx512));
        }
        if crate::kernels::simd::has_avx2() {
            v.push(("avx2", max_slice_avx2, exp_sum_slice_avx2));
        }
        if v.is_empty() {
            eprintln!("SKIP softmax helpers: neither AVX-512 nor AVX2 on this CPU");
        }
        v
    }

    /// The max helper equals the scalar maximum on every length 0..=40 (tails), and any NaN
    /// makes it NaN wherever it sits.
    #[test]
    fn max_slice_matches_scalar_and_propagates_nan() {
        let x: Vec<f32> = (0..40).map(|i| ((i * 37) % 23) as f32 - 11.5 - i as f32 * 0.01).collect();
        for (name, max, _) in softmax_forms() {
            for n in 0..=40 {
                let want = x[..n].iter().fold(f32::NEG_INFINITY, |a, &b| a.max(b));
                // SAFETY: `softmax_forms` lists only what this CPU has.
                assert_eq!(unsafe { max(&x[..n]) }, want, "{name}: n = {n}");
            }
            for at in [0, 7, 8, 15, 16, 33] {
                let mut y = x.clone();
                y[at] = f32::NAN;
                // SAFETY: as above.
                assert!(unsafe { max(&y[..34]) }.is_nan(), "{name}: NaN at {at}");
            }
        }
    }

    /// The exp-sum helper over every tail length, with `-inf` scores (masked keys), against f64.
    #[test]
    fn exp_sum_slice_matches_libm() {
        for (name, _, exp_sum) in softmax_forms() {
            for n in 0..40 {
                let x: Vec<f32> = (0..n)
                    .map(|i| if i % 7 == 3 { f32::NEG_INFINITY } else { (i as f32 * 0.37).sin() * 9.0 })
                    .collect();
                let m = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let mut y = x.clone();
                // SAFETY: `softmax_forms` lists only what this CPU has.
                let sum = unsafe { exp_sum(&mut y, m) };
                let mut want_sum = 0f64;
                for (a, b) in x.iter().zip(&y) {
                    // Of the f32 difference, as the kernel computes it; `exp`'s bound (3e-7
                    // relative).
                    let want = ((*a - m) as f64).exp();
                    want_sum += want;
                    assert!((*b as f64 - want).abs() <= 3e-7 * want, "{name}: exp({a} - {m}) = {b}, want {want}");
                }
                assert!(
                    (sum as f64 - want_sum).abs() <= 1e-6 * want_sum.max(1.0),
                    "{name} n {n}: sum {sum} vs {want_sum}"
                );
            }
        }
    }

    fn run(f: SliceFn, x: &[f32]) -> Vec<f32> {
        let mut o = vec![0f32; x.len()];
        // SAFETY: `forms` lists only what this CPU has.
        unsafe { f(x, &mut o) };
        o
    }

    /// Every 97th f32 bit pattern with `|x| ≤ limit`, both signs.
    fn sweep(limit: f32) -> Vec<f32> {
        (0..u32::MAX / 97).map(|i| f32::from_bits(i * 97)).filter(|v| v.abs() <= limit).flat_map(|v| [v, -v]).collect()
    }

    /// `erfc` within 8 ulps of f64 libm wherever erfc is a normal f32 (worst measured 6.6, at
    /// x ≈ 0.59: the f32 evaluation of `P` carries ~1e-7 absolute into the exponent), over every
    /// 97th f32 bit pattern in [-10, 10] (both signs) plus the branch edges; in the subnormal
    /// range (x > 9.19) within 8 ulps of the smallest normal.
    #[test]
    fn erfc_slice_matches_libm() {
        for fm in forms() {
            let mut xs = sweep(10.0);
            xs.extend([0.0, -0.0, 0.5, -0.5, 0.499_999_97, -0.499_999_97, 9.0, 9.5, 10.0, 11.0, 1e-40, -1e-40]);
            let got = run(fm.erfc, &xs);
            let mut worst = (0.0f64, 0.0f32);
            for (&x, &g) in xs.iter().zip(&got) {
                let want = rlx_ir::ops::UnaryOp::Erfc.apply_f64(x as f64);
                let ulp = (want.abs().max(f32::MIN_POSITIVE as f64) * f32::EPSILON as f64) / 2.0;
                let err = (g as f64 - want).abs() / ulp;
                if err > worst.0 {
                    worst = (err, x);
                }
                assert!(err <= 8.0, "{}: erfc({x:e}) = {g:e}, libm {want:e}: {err:.2} ulps", fm.name);
            }
            eprintln!("{}: erfc worst {:.2} ulps at {:e}", fm.name, worst.0, worst.1);
            let edge = run(fm.erfc, &[f32::INFINITY, f32::NEG_INFINITY, f32::NAN]);
            assert_eq!(edge[..2], [0.0, 2.0], "{}", fm.name);
            assert!(edge[2].is_nan(), "{}", fm.name);
        }
    }

    /// `erf` on every 97th f32 bit pattern in [-6, 6], the edges and the specials, against
    /// f64 libm (through the IR's `erf`), with the portable form's bound (`simd::erf_error`).
    #[test]
    fn erf_slice_matches_libm() {
        for fm in forms() {
            let mut xs = sweep(6.0);
            xs.extend([0.0, -0.0, 1.0, -1.0, 4.0, -4.0, f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 1e-40, -1e-40]);
            let got = run(fm.erf, &xs);
            for (&x, &g) in xs.iter().zip(&got) {
                let want = rlx_ir::ops::UnaryOp::Erf.apply_f64(x as f64);
                if x.is_nan() {
                    assert!(g.is_nan(), "{}: erf(NaN) = {g}", fm.name);
                } else {
                    let e = super::super::simd::erf_error(g as f64, want);
                    assert!(e <= 1.0, "{}: erf({x:e}) = {g:e}, libm {want:e}", fm.name);
                }
            }
            assert_eq!(run(fm.erf, &[f32::INFINITY, f32::NEG_INFINITY]), [1.0, -1.0], "{}", fm.name);
        }
    }

    /// `exp` over [-110, 90], the specials and every tail length, against f64 libm.
    #[test]
    fn exp_slice_matches_libm() {
        for fm in forms() {
            for n in [1usize, 7, 8, 9, 15, 16, 17, 4101] {
                let xs: Vec<f32> = (0..n).map(|i| -110.0 + i as f32 * (200.0 / n as f32)).collect();
                for (&x, &g) in xs.iter().zip(&run(fm.exp, &xs)) {
                    let want = (x as f64).exp();
                    if want > 1e-37 && want < 3e38 {
                        assert!(((g as f64 - want) / want).abs() < 3e-7, "{}: exp({x}) = {g}, want {want}", fm.name);
                    } else if want <= 1e-37 {
                        assert!((g as f64 - want).abs() < 1e-44, "{}: exp({x}) = {g}, want {want}", fm.name);
                    } else if want > f32::MAX as f64 {
                        assert_eq!(g, f32::INFINITY, "{}: exp({x})", fm.name);
                    }
                }
            }
            let s = run(fm.exp, &[f32::NEG_INFINITY, f32::NAN]);
            assert_eq!(s[0], 0.0, "{}", fm.name);
            assert!(s[1].is_nan(), "{}", fm.name);
        }
    }

    /// Worst error in f32 ulps of `f` against `want` (f64) over `xs`, where the result is a
    /// normal f32 (below: in ulps of the smallest normal); returns (ulps, x).
    fn worst_ulps(f: SliceFn, xs: &[f32], want: impl Fn(f64) -> f64) -> (f64, f32) {
        let got = run(f, xs);
        let mut worst = (0.0f64, 0.0f32);
        for (&x, &g) in xs.iter().zip(&got) {
            let w = want(x as f64);
            if w.abs() > f32::MAX as f64 {
                continue;
            }
            let ulp = (w.abs().max(f32::MIN_POSITIVE as f64) * f32::EPSILON as f64) / 2.0;
            let err = (g as f64 - w).abs() / ulp;
            if err > worst.0 || err.is_nan() {
                worst = (err, x);
            }
        }
        worst
    }

    /// `exp`, the logistic function and `tanh` on every 97th f32 bit pattern of their ranges
    /// (both signs), in ulps of f64 libm: exp within 2 (`EXP_POLY` by Horner's rule, the 2ⁿ
    /// scale exact; measured 1.66, as with Cephes' degree-7 polynomial before), logistic within
    /// 3.5 below 0 (`e·r`: exp's 1.66, the reciprocal within 1, the product's rounding ½;
    /// measured 3.36 with AVX-512's `rcp14` + Newton, 3.25 with a division), tanh within the 3
    /// ulps of `tanh_and_logistic_match_libm` (measured 2.34, 2.40 with Cephes' exp; worst at
    /// x ≈ 0.63, just past the polynomial's range, where `1 - 2/(e + 1)` loses a bit to
    /// cancellation).
    #[test]
    fn exp_logistic_tanh_ulps_over_a_sweep() {
        for fm in forms() {
            let xs: Vec<f32> = sweep(104.0).into_iter().filter(|&v| v <= 88.7).collect();
            let (e, at) = worst_ulps(fm.exp, &xs, f64::exp);
            eprintln!("{}: exp worst {e:.2} ulps at {at:e}", fm.name);
            assert!(e <= 2.0, "{}: exp({at:e}): {e:.2} ulps", fm.name);
            let (l, at) = worst_ulps(fm.logistic, &sweep(120.0), |x| 1.0 / (1.0 + (-x).exp()));
            eprintln!("{}: logistic worst {l:.2} ulps at {at:e}", fm.name);
            assert!(l <= 3.5, "{}: logistic({at:e}): {l:.2} ulps", fm.name);
            let (t, at) = worst_ulps(fm.tanh, &sweep(50.0), f64::tanh);
            eprintln!("{}: tanh worst {t:.2} ulps at {at:e}", fm.name);
            assert!(t <= 3.0, "{}: tanh({at:e}): {t:.2} ulps", fm.name);
        }
    }

    /// `tanh` and the logistic function over [-30, 30] (every tail length) and the specials,
    /// against f64 libm: within 3 f32 ulps relative or 1e-7 absolute.
    #[test]
    fn tanh_and_logistic_match_libm() {
        let close = |g: f32, w: f64| (g as f64 - w).abs() <= (w.abs() * 3.0 * f32::EPSILON as f64).max(1e-7);
        for fm in forms() {
            for n in [1usize, 7, 9, 15, 17, 6001] {
                let xs: Vec<f32> = (0..n).map(|i| -30.0 + i as f32 * (60.0 / n as f32)).collect();
                for ((&x, &t), &l) in xs.iter().zip(&run(fm.tanh, &xs)).zip(&run(fm.logistic, &xs)) {
                    assert!(close(t, (x as f64).tanh()), "{}: tanh({x}) = {t}", fm.name);
                    assert!(close(l, 1.0 / (1.0 + (-(x as f64)).exp())), "{}: logistic({x}) = {l}", fm.name);
                }
            }
            let sp = [f32::INFINITY, f32::NEG_INFINITY, f32::NAN, 0.0, -0.0];
            let (t, l) = (run(fm.tanh, &sp), run(fm.logistic, &sp));
            assert_eq!((t[0], t[1], t[3]), (1.0, -1.0, 0.0), "{}", fm.name);
            assert_eq!((l[0], l[1], l[3]), (1.0, 0.0, 0.5), "{}", fm.name);
            assert!(t[2].is_nan() && l[2].is_nan(), "{}", fm.name);
        }
    }
}
