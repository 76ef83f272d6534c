//! Shared SIMD helpers: cached CPU feature detection, a vectorizable f32 `exp`, and the
//! threading thresholds used by every kernel family.
//!
//! Loops are written as plain slice code that LLVM auto-vectorizes; each hot loop is
//! instantiated three times, inside an `avx512f` or an `avx2,fma` `#[target_feature]` wrapper
//! chosen at run time ([`has_avx512`], [`has_avx2`]) and for the baseline target, so the crate
//! needs no `-C target-cpu`.

use std::sync::OnceLock;

/// Elements below which an elementwise / reduction kernel runs on one thread (rayon task
/// overhead is a few µs; 64K f32 is ~16 µs of memory traffic).
pub(crate) const PAR_THRESHOLD: usize = 1 << 16;

/// Which explicit SIMD code the CPU kernels may use (`CpuOptions::simd`).
///
/// Today it governs the `dequant_matmul` kernels; the other kernel families follow
/// [`has_avx512`] (the CPU's features and `RLX_CPU_NO_AVX512`), then [`has_avx2`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SimdLevel {
    /// The best the CPU has (AVX-512, VNNI and AMX where detected); `RLX_CPU_NO_AVX512`
    /// overrides it to [`SimdLevel::Baseline`].
    #[default]
    Native,
    /// AVX-512 (and VNNI) but no AMX tiles: what an AVX-512 CPU before Sapphire Rapids runs.
    Avx512,
    /// AVX2, FMA and F16C but no AVX-512: what an AMD Zen 2 / Zen 3 or an Intel Haswell to
    /// Comet Lake CPU runs.
    Avx2,
    /// Portable code only: what a CPU without AVX2 runs.
    Baseline,
}

impl SimdLevel {
    /// True when AVX-512 kernels may run at this level on this CPU.
    pub fn avx512(self) -> bool {
        matches!(self, SimdLevel::Native | SimdLevel::Avx512) && has_avx512()
    }

    /// True when AVX2 + FMA + F16C kernels may run at this level on this CPU (see
    /// [`has_avx2`]); the `dequant_matmul` kernels use them where [`SimdLevel::avx512`] is false.
    pub fn avx2(self) -> bool {
        self != SimdLevel::Baseline && has_avx2()
    }

    /// True when AMX-INT8 tile kernels may run at this level on this CPU (see [`has_amx`]).
    pub fn amx(self) -> bool {
        self == SimdLevel::Native && has_avx512() && has_amx()
    }
}

/// True when the CPU has AMX-TILE and AMX-INT8, the OS saves tile state (XCR0 bits 17 and 18)
/// and Linux granted this process the tile data permission (`arch_prctl(ARCH_REQ_XCOMP_PERM,
/// XFEATURE_XTILEDATA)`, requested here once; without it the first tile instruction faults).
/// Checked once, then cached.
pub fn has_amx() -> bool {
    static F: OnceLock<bool> = OnceLock::new();
    *F.get_or_init(|| {
        #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
        {
            use std::arch::x86_64::__cpuid_count;
            let max_leaf = __cpuid_count(0, 0).eax;
            if max_leaf < 7 || !std::is_x86_feature_detected!("xsave") {
                return false;
            }
            // Leaf 7 exists: `max_leaf >= 7`.
            let edx = __cpuid_count(7, 0).edx;
            let (tile, int8) = (edx & (1 << 24) != 0, edx & (1 << 25) != 0);
            // SAFETY: XGETBV(0) is available when the CPU has XSAVE and the OS enabled it
            // (`is_x86_feature_detected!("xsave")` checks OSXSAVE).
            let xcr0 = unsafe { xgetbv0() };
            if !(tile && int8) || xcr0 & (0b11 << 17) != 0b11 << 17 {
                return false;
            }
            const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
            const XFEATURE_XTILEDATA: libc::c_long = 18;
            // SAFETY: a plain system call with integer arguments.
            unsafe { libc::syscall(libc::SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0 }
        }
        #[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
        {
            false
        }
    })
}

/// `XGETBV` with ECX = 0 (the OS-enabled state components).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[target_feature(enable = "xsave")]
unsafe fn xgetbv0() -> u64 {
    // SAFETY: the caller checked XSAVE / OSXSAVE.
    unsafe { std::arch::x86_64::_xgetbv(0) }
}

/// True when the CPU has AVX-512F (checked once, then cached).
pub fn has_avx512() -> bool {
    static F: OnceLock<bool> = OnceLock::new();
    *F.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            std::is_x86_feature_detected!("avx512f")
                && std::is_x86_feature_detected!("avx512vl")
                && std::is_x86_feature_detected!("avx512bw")
                && std::is_x86_feature_detected!("fma")
                && std::env::var_os("RLX_CPU_NO_AVX512").is_none()
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// True when the CPU has AVX2, FMA and F16C (every x86-64 CPU since Intel Haswell and AMD
/// Zen); checked once, then cached.
pub fn has_avx2() -> bool {
    static F: OnceLock<bool> = OnceLock::new();
    *F.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            std::is_x86_feature_detected!("avx2")
                && std::is_x86_feature_detected!("fma")
                && std::is_x86_feature_detected!("f16c")
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

thread_local! {
    /// Set while an executable with `threads: Some(1)` runs its steps on the calling thread.
    static SERIAL: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Worker threads available to the calling kernel: 1 inside [`serial`], else the rayon pool's
/// (the executor's pool when it installed one). Kernels only use rayon when this is above 1.
pub(crate) fn threads() -> usize {
    if SERIAL.get() { 1 } else { rayon::current_num_threads() }
}

/// Run `f` with every kernel on the calling thread ([`threads`] is 1, no rayon call): a
/// one-thread executable runs this way instead of handing each run to a one-thread pool and
/// waiting for it (two context switches per run, ~10 µs on a small training step).
pub(crate) fn serial<R>(f: impl FnOnce() -> R) -> R {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            SERIAL.set(self.0);
        }
    }
    let _restore = Restore(SERIAL.replace(true));
    f()
}

/// Run `f` compiled for AVX-512 when the CPU has it, else for AVX2 + FMA where it has those
/// (AMD Zen 3: 8-lane vectors and fused multiply-adds instead of SSE2's 4 lanes), else for the
/// baseline target.
///
/// Pass `#[inline(always)] || ...`: without the attribute LLVM keeps a large closure out of
/// line, compiled for the baseline target, and the wrapper gains nothing (measured: softmax
/// over 4096x4096 ran 2x slower that way).
#[inline(always)]
pub(crate) fn dispatch<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        // SAFETY: the CPU supports the enabled features (checked above).
        return unsafe { with_avx512(f) };
    }
    #[cfg(target_arch = "x86_64")]
    if has_avx2() {
        // SAFETY: the CPU supports the enabled features (checked above).
        return unsafe { with_avx2(f) };
    }
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn with_avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl,avx512bw,avx2,fma")]
#[inline]
unsafe fn with_avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

/// Bytes from which buffers are backed by transparent huge pages (numpy's threshold).
pub const HUGEPAGE_MIN_BYTES: usize = 4 << 20;

/// Ask the kernel to back `t`'s storage (its whole capacity) with transparent huge pages when
/// it is at least [`HUGEPAGE_MIN_BYTES`] (Linux `madvise(MADV_HUGEPAGE)`; a no-op elsewhere or
/// when refused).
///
/// Call it before the storage is first written: right after [`rlx_ir::Tensor::zeros`] (whose
/// large allocations are fresh zero pages, not yet touched) or [`rlx_ir::Tensor::with_capacity`]
/// (before `set_dims`, which writes the zeros). Pages faulted in afterwards come as 2 MiB pages;
/// pages already written stay 4 KiB ones (with THP in `madvise` mode). On 4 KiB pages the
/// hardware prefetchers stop at every page boundary and every page costs a TLB miss: on an AMD
/// Zen 4 VM one core read 17.5 vs 30 GB/s and copied 30 vs 49 GB/s (`bench/stream.c`), and a
/// 1x4096x4096 GEMV ran about 1.2-2x faster on huge-page weights. numpy does the same for its
/// arrays.
pub fn advise_huge_pages(t: &rlx_ir::Tensor) {
    let bytes = t.capacity() * t.dtype().size_bytes();
    if bytes < HUGEPAGE_MIN_BYTES {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        let ptr = rlx_ir::with_dtype!(t.dtype(), T, t.as_slice::<T>().unwrap().as_ptr() as usize);
        // madvise needs a page-aligned start: advise the whole pages inside the buffer.
        const PAGE: usize = 4096;
        let start = ptr.next_multiple_of(PAGE);
        let end = (ptr + bytes) / PAGE * PAGE;
        if end > start {
            // SAFETY: the range lies inside `t`'s live allocation (its capacity); MADV_HUGEPAGE
            // only changes how the kernel backs the pages, never their contents.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
}

/// `exp(x)` for f32 in a form LLVM vectorizes: Cephes `expf`'s method (range reduction by `ln 2`
/// in two parts, then [`EXP_POLY`], error about 1 ulp) with the scale `2^n` applied as two
/// factors, so results in the subnormal range and overflow to `inf` come out right without
/// branches.
/// `exp(-inf) = 0`, `exp(inf) = inf`, `exp(NaN) = NaN`.
#[inline(always)]
pub fn exp_f32(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const C1: f32 = 0.693_359_4;
    const C2: f32 = -2.121_944_4e-4;
    const MAGIC: f32 = 12_582_912.0; // 1.5 * 2^23: adding it rounds to an integer.
    // Clamp (NaN passes through).
    let xc = x.clamp(-104.0, 88.8);
    let t = xc * LOG2E + MAGIC;
    let n = t - MAGIC; // round(x * log2 e), as a float
    let ni = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32); // the same, as an int
    let r = xc - n * C1 - n * C2;
    let z = r * r;
    // `1 + r + r²·P(r)`, `P` the first five of `EXP_POLY`.
    let c = &EXP_POLY;
    let p = (((c[0] * r + c[1]) * r + c[2]) * r + c[3]) * r + c[4];
    let e = p * z + r + 1.0;
    // 2^n = 2^(n/2) * 2^(n - n/2), each factor a normal float for n in [-150, 128].
    let n1 = ni >> 1;
    let n2 = ni - n1;
    let s1 = f32::from_bits(((n1 + 127) as u32 & 0xff) << 23);
    let s2 = f32::from_bits(((n2 + 127) as u32 & 0xff) << 23);
    e * s1 * s2
}

/// Coefficients of the vector `erfc`'s `P(t)` (`avx512::erfc512`, `math_vec::erfc`) for
/// `|x| ≥ 1/2` (highest degree first; degree 9 fitted on `[0.5, 10]` by
/// `tools/refgen/fit_erf_f32.py`, relative error 2.5e-9 in f64).
pub(crate) const ERFC_BIG: [f32; 10] = [
    0.257_901_67,
    -1.211_861_4,
    2.234_537_9,
    -1.932_326_5,
    0.799_735_8,
    -0.400_802_8,
    0.152_134_26,
    0.365_501_74,
    1.000_751_1,
    -1.265_538,
];

/// The polynomial of [`exp_f32`] and the vector `exp` in the reduced argument `r` (`|r| ≤ ln 2 /
/// 2`), highest degree first, as the vector forms evaluate it with FMAs (Horner): `exp(r) ≈
/// ((…(c₀·r + c₁)·r + …)·r + 1)·r + 1`. Degree 6, fitted for the least maximum relative error
/// by `tools/refgen/fit_exp_f32.py` (3.7e-9 on the interval). For arguments in [-87, 88] (normal
/// results) the f32 evaluation is at most 0.90 ulp from float64 `exp` in the vector forms (FMAs)
/// and 0.99 in [`exp_f32`], as Cephes `expf`'s degree 7 (0.89 / 0.98) with one FMA more per
/// value; below -87 the `2ⁿ` scale rounds into the subnormals (1.66 ulps, the crate's sweep).
pub(crate) const EXP_POLY: [f32; 7] =
    [0.001_387_967_7, 0.008_368_729, 0.041_667_227, 0.166_665_21, 0.499_999_97, 1.0, 1.0];

/// Coefficients of [`tanh_f32`]'s odd polynomial for `|x| < 0.625` (Cephes `tanhf`; highest
/// degree first, in `x²`; the result is `x + x·x²·P(x²)`).
pub(crate) const TANH_P: [f32; 5] = [-5.704_988_7e-3, 0.020_639_09, -5.373_971_6e-2, 1.333_144_2e-1, -3.333_328e-1];

/// `tanh(x)` for f32 in a form LLVM vectorizes (Cephes `tanhf`, about 2 ulp): an odd
/// polynomial for `|x| < 0.625`, else `1 - 2 / (exp(2|x|) + 1)` with the sign of `x`; both
/// branches are computed and one selected, so the loop has no branches. `tanh(±inf) = ±1`,
/// `tanh(NaN) = NaN`.
#[inline(always)]
pub fn tanh_f32(x: f32) -> f32 {
    let a = x.abs();
    let z = x * x;
    let mut p = TANH_P[0];
    for c in &TANH_P[1..] {
        p = p * z + c;
    }
    let p = p * z * x + x;
    let e = exp_f32(2.0 * a.min(44.0));
    let big = 1.0 - 2.0 / (e + 1.0);
    let big = if x < 0.0 { -big } else { big };
    if a < 0.625 {
        p
    } else if x.is_nan() {
        x
    } else {
        big
    }
}

/// Coefficients of [`erf_f32`]'s Maclaurin series in `x²` for `|x| < 1` (highest degree
/// first, Horner order; the result is `x · S(x²)`).
pub(crate) const ERF_SMALL: [f32; 11] = [
    1.480_719_3e-8,
    -1.636_584_5e-7,
    1.646_211_4e-6,
    -1.492_565e-5,
    1.205_533_3e-4,
    -8.548_327e-4,
    5.223_977_6e-3,
    -2.686_617_1e-2,
    0.112_837_92,
    -0.376_126_39,
    std::f32::consts::FRAC_2_SQRT_PI,
];
/// Coefficients of [`erf_f32`]'s `P(t)` for `|x| ≥ 1` (highest degree first; fitted by
/// `tools/refgen/fit_erf_f32.py`).
pub(crate) const ERF_BIG: [f32; 8] =
    [-0.279_366_36, 1.088_256_4, -1.516_135_2, 0.773_675_6, -0.241_701_73, 0.449_675, 0.990_349_8, -1.264_972];

/// `erf(x)` for f32 in a form LLVM vectorizes (matches `jax.lax.erf` / ONNX `Erf` to about 1e-7
/// absolute): the Maclaurin series (degree 21) for `|x| < 1`, else `1 - t·exp(-x² + P(t))` with
/// `t = 1 / (1 + |x|/2)` and the sign of `x`, `P` of degree 7 fitted to `erfc` on `[1, 4]`
/// (coefficients from `tools/refgen/fit_erf_f32.py`; beyond 4, erf rounds to ±1 in f32). Both
/// branches are computed and one selected, so the loop has no branches. `erf(±inf) = ±1`,
/// `erf(NaN) = NaN`.
#[inline(always)]
pub fn erf_f32(x: f32) -> f32 {
    let a = x.abs();
    let z = x * x;
    let mut s = ERF_SMALL[0];
    for c in &ERF_SMALL[1..] {
        s = s * z + c;
    }
    let small = x * s;
    let ac = a.min(4.0);
    let t = 1.0 / (1.0 + 0.5 * ac);
    let mut p = ERF_BIG[0];
    for c in &ERF_BIG[1..] {
        p = p * t + c;
    }
    let big = 1.0 - t * exp_f32(p - ac * ac);
    let big = if x < 0.0 { -big } else { big };
    if a < 1.0 {
        small
    } else if x.is_nan() {
        x
    } else {
        big
    }
}

/// `erf`'s error bound in units (≤ 1 passes): absolute 1.2e-7 (two f32 ulps at 1) or 4 ulps
/// relative near 0; shared by the portable and the AVX-512 tests.
#[cfg(test)]
pub(crate) fn erf_error(got: f64, want: f64) -> f64 {
    (got - want).abs() / (want.abs() * 4.0 * f32::EPSILON as f64 / 2.0).max(1.2e-7)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_f32_matches_libm() {
        // Every 997th f32 bit pattern in [-5, 5] plus the edges; reference: the IR's f64 `erf` (libm).
        let mut worst = 0.0f64;
        let mut xs: Vec<f32> =
            (0..=u32::MAX / 997).map(|i| f32::from_bits(i * 997)).filter(|v| v.abs() <= 5.0).collect();
        xs.extend([0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 0.999_999_94, 4.0, -4.0, 1e-30, -1e-30]);
        for x in xs {
            let want = rlx_ir::ops::UnaryOp::Erf.apply_f64(x as f64);
            let got = erf_f32(x) as f64;
            let err = erf_error(got, want);
            worst = worst.max(err);
            assert!(err <= 1.0, "erf_f32({x:e}) = {got:e}, libm {want:e}");
        }
        assert!(worst > 0.0);
        assert_eq!(erf_f32(f32::INFINITY), 1.0);
        assert_eq!(erf_f32(f32::NEG_INFINITY), -1.0);
        assert!(erf_f32(f32::NAN).is_nan());
    }

    #[test]
    fn tanh_matches_libm() {
        let mut worst = 0.0f64;
        let mut x = -12.0f32;
        while x < 12.0 {
            let want = (x as f64).tanh();
            let got = tanh_f32(x) as f64;
            if want != 0.0 {
                worst = worst.max(((got - want) / want).abs());
            }
            x += 0.000_731;
        }
        assert!(worst < 5e-7, "max rel err {worst}");
        assert_eq!(tanh_f32(f32::INFINITY), 1.0);
        assert_eq!(tanh_f32(f32::NEG_INFINITY), -1.0);
        assert!(tanh_f32(f32::NAN).is_nan());
        assert_eq!(tanh_f32(1e-30), 1e-30);
    }

    #[test]
    fn exp_matches_libm() {
        let mut worst = 0.0f64;
        let mut x = -103.0f32;
        while x < 88.7 {
            let want = (x as f64).exp();
            let got = exp_f32(x) as f64;
            if want > 1e-37 {
                worst = worst.max(((got - want) / want).abs());
            } else {
                assert!((got - want).abs() < 1e-44, "{x}: {got} vs {want}");
            }
            x += 0.0137;
        }
        assert!(worst < 3e-7, "max rel err {worst}");
        assert_eq!(exp_f32(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp_f32(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp_f32(89.0), f32::INFINITY);
        assert!(exp_f32(f32::NAN).is_nan());
        assert_eq!(exp_f32(0.0), 1.0);
    }
}
