//! Row kernels for the native `softmax`, `log_softmax`, `layer_norm` and `rms_norm` composites
//! on any [`Vf32`] width, entered through the `*_avx512` and `*_avx2` functions at the end
//! ([`RowKernels`]; callers check [`super::simd::has_avx512`] / [`super::simd::has_avx2`]). Both
//! widths give the same bits.
//!
//! Each row is read from memory once and written once:
//! - a statistics pass: softmax's max (rows of at most [`SCRATCH`]) or an online max and sum
//!   rescaled when the max grows (longer rows, log-softmax); the norms sum `x - x₀` and
//!   `(x - x₀)²` (shifted by the row's first element, so no `E[x²] - E[x]²` cancellation) or
//!   `x²` in f32 lanes over blocks of 1024 elements, the blocks added in f64;
//! - a write pass that re-reads the row (from L1/L2) and writes the result, with non-temporal
//!   stores when `stream` is set. Softmax rows of at most [`SCRATCH`] elements keep their `exp`
//!   values in an L1 scratch row and write a row during the next row's `exp` pass.
//!
//! Special values follow the decomposition: a NaN in a row gives a NaN row, `+inf` gives NaN
//! (`inf - inf`), a row of all `-inf` gives NaN for softmax, `-inf` entries with a finite
//! max get weight 0.

#![cfg(target_arch = "x86_64")]

use super::math_vec::{exp, exp_clamped};
use super::vf32::{F32x8, F32x16, Vf32};
use std::arch::x86_64::_mm_sfence;

/// Longest row that softmax runs through on-stack scratch rows (two of 16 KiB, in L1).
pub(crate) const SCRATCH: usize = 4096;

/// Elements per f32 accumulation block of the norms (then added in f64).
const BLOCK: usize = 1024;

/// `V::LANES` floats of `x` from `i`, of which the first `n` are read (`n ≤ LANES`), `fill`
/// in the others.
#[inline(always)]
unsafe fn load<V: Vf32>(x: &[f32], i: usize, n: usize, fill: f32) -> V {
    unsafe { if n == V::LANES { V::load(x.as_ptr().add(i)) } else { V::load_part(x.as_ptr().add(i), n, fill) } }
}

/// Writes the `n` floats at `y`, `f(i, k)` being the result for elements `i..i + LANES` of
/// which the first `k` are written, one vector per [`RowWriter::step`] (so that softmax can
/// spread a row's write over the next row's `exp` pass): aligned non-temporal stores when
/// `stream` (after a partial head up to the first vector-aligned address), partial stores at
/// the edges. The caller fences after non-temporal stores.
struct RowWriter<V, F> {
    y: *mut f32,
    n: usize,
    pos: usize,
    stream: bool,
    f: F,
    _v: std::marker::PhantomData<V>,
}

impl<V: Vf32, F: FnMut(usize, usize) -> V> RowWriter<V, F> {
    #[inline(always)]
    fn new(y: *mut f32, n: usize, stream: bool, f: F) -> Self {
        RowWriter { y, n, pos: 0, stream, f, _v: std::marker::PhantomData }
    }

    /// Write the next vector (or the head / tail piece); nothing once the row is written.
    #[inline(always)]
    unsafe fn step(&mut self) {
        unsafe {
            let rem = self.n - self.pos;
            if rem == 0 {
                return;
            }
            let p = self.y.add(self.pos);
            let bytes = 4 * V::LANES;
            let head = if self.stream { (bytes - (p as usize % bytes)) % bytes / 4 } else { 0 };
            if head == 0 && rem >= V::LANES {
                let v = (self.f)(self.pos, V::LANES);
                if self.stream {
                    v.stream(p);
                } else {
                    v.store(p);
                }
                self.pos += V::LANES;
            } else {
                let k = if head > 0 { head.min(rem) } else { rem };
                (self.f)(self.pos, k).store_part(p, k);
                self.pos += k;
            }
        }
    }

    /// Write what is left of the row.
    #[inline(always)]
    unsafe fn finish(&mut self) {
        while self.pos < self.n {
            unsafe { self.step() };
        }
    }
}

/// Write `f(i, k)` to every element of `y` ([`RowWriter`]), fencing after non-temporal stores.
#[inline(always)]
unsafe fn write_row<V: Vf32>(y: &mut [f32], stream: bool, f: impl FnMut(usize, usize) -> V) {
    unsafe {
        RowWriter::new(y.as_mut_ptr(), y.len(), stream, f).finish();
        if stream {
            _mm_sfence();
        }
    }
}

/// Online max and sum of `exp(x - max)` over a row: `(max, sum)`.
#[inline(always)]
unsafe fn max_sum_exp<V: Vf32>(x: &[f32]) -> (f32, f32) {
    unsafe {
        let (n, l) = (x.len(), V::LANES);
        let p = x.as_ptr();
        let mut m = V::splat(f32::MIN);
        let mut s = [V::splat(0.0); 4];
        let mut i = 0;
        while i + 4 * l <= n {
            let v = [V::load(p.add(i)), V::load(p.add(i + l)), V::load(p.add(i + 2 * l)), V::load(p.add(i + 3 * l))];
            let mn = m.max(v[0].max(v[1]).max(v[2].max(v[3])));
            if mn.any_ne(m) {
                let r = exp(m.sub(mn));
                s = [s[0].mul(r), s[1].mul(r), s[2].mul(r), s[3].mul(r)];
                m = mn;
            }
            for k in 0..4 {
                s[k] = s[k].add(exp(v[k].sub(m)));
            }
            i += 4 * l;
        }
        while i < n {
            let v: V = load(x, i, (n - i).min(l), f32::NEG_INFINITY);
            let mn = m.max(v);
            if mn.any_ne(m) {
                let r = exp(m.sub(mn));
                s = [s[0].mul(r), s[1].mul(r), s[2].mul(r), s[3].mul(r)];
                m = mn;
            }
            s[0] = s[0].add(exp(v.sub(m)));
            i += l;
        }
        // The lane buffer holds one vector of at most 16 lanes (not an `Interleaved` wider one).
        const { assert!(V::LANES <= 16) };
        let mut lanes_m = [0f32; 16];
        m.store(lanes_m.as_mut_ptr());
        let big =
            lanes_m[..l].iter().fold(f32::MIN, |a, &b| if b.is_nan() || a.is_nan() { f32::NAN } else { a.max(b) });
        let tot = s[0].add(s[1]).add(s[2].add(s[3]));
        (big, tot.mul(exp(m.sub(V::splat(big)))).hsum_f64() as f32)
    }
}

/// `exp(d)` for `d = x - max ≤ 0` (or NaN): only the lower clamp of [`exp`] is needed.
#[inline(always)]
unsafe fn exp_le0<V: Vf32>(d: V) -> V {
    unsafe { exp_clamped(V::splat(-104.0).max(d)) }
}

/// Softmax of consecutive rows of `len` (at most [`SCRATCH`]) elements, `x` and `y` holding
/// the same whole number of rows, with one `exp` per element: per row a max pass, then
/// `exp(x - max)` into one of two L1 scratch rows while summing and prefetching the following
/// row (`next` after the last) into L2, and, in the same loop, the scaled write of the
/// previous row from the other scratch row; the last row's write follows its `exp` pass.
#[inline(always)]
unsafe fn softmax_rows<V: Vf32>(x: &[f32], y: &mut [f32], len: usize, stream: bool, next: &[f32]) {
    assert!(
        len > 0 && len <= SCRATCH && x.len() == y.len() && x.len().is_multiple_of(len),
        "softmax_rows: {} and {} elements in rows of {len}",
        x.len(),
        y.len()
    );
    unsafe {
        let (n, l) = (len, V::LANES);
        let mut scratch = std::mem::MaybeUninit::<[[f32; SCRATCH]; 2]>::uninit();
        let base = scratch.as_mut_ptr() as *mut f32;
        // The previous row's writer: its scratch row and `1 / Σ`.
        let mut w: Option<RowWriter<V, _>> = None;
        for (ri, xr) in x.chunks_exact(n).enumerate() {
            let nx = x.get((ri + 1) * n..(ri + 2) * n).unwrap_or(next);
            let ep = base.add((ri % 2) * SCRATCH);
            let mut m = [V::splat(f32::NEG_INFINITY); 4];
            let mut i = 0;
            while i + 4 * l <= n {
                for (k, mk) in m.iter_mut().enumerate() {
                    *mk = mk.max(V::load(xr.as_ptr().add(i + k * l)));
                }
                i += 4 * l;
            }
            while i < n {
                m[0] = m[0].max(load(xr, i, (n - i).min(l), f32::NEG_INFINITY));
                i += l;
            }
            let big = m[0].max(m[1]).max(m[2].max(m[3])).reduce_max();
            let mv = V::splat(big);
            let mut s = [V::splat(0.0); 4];
            let mut i = 0;
            while i + 4 * l <= n {
                if i + 4 * l <= nx.len() {
                    // One prefetch per 64-byte line.
                    let mut k = 0;
                    while k < 4 * l {
                        V::prefetch_l2(nx.as_ptr().add(i + k));
                        k += 16;
                    }
                }
                // The four vectors first, then the previous row's four writes: with the writes
                // inside a loop over `s` LLVM kept `s` on the stack (AVX2, 20% of the time in
                // the accumulators' stores and reloads).
                let xp = xr.as_ptr().add(i);
                let v = [
                    exp_le0(V::load(xp).sub(mv)),
                    exp_le0(V::load(xp.add(l)).sub(mv)),
                    exp_le0(V::load(xp.add(2 * l)).sub(mv)),
                    exp_le0(V::load(xp.add(3 * l)).sub(mv)),
                ];
                for (k, vk) in v.iter().enumerate() {
                    vk.store(ep.add(i + k * l));
                }
                s = [s[0].add(v[0]), s[1].add(v[1]), s[2].add(v[2]), s[3].add(v[3])];
                if let Some(w) = w.as_mut() {
                    for _ in 0..4 {
                        w.step();
                    }
                }
                i += 4 * l;
            }
            while i < n {
                let k = (n - i).min(l);
                let mut v = exp_le0(load::<V>(xr, i, k, f32::NEG_INFINITY).sub(mv));
                if k < l {
                    // Lanes past the row are exp(-inf - max) = 0 (or NaN when the max is -inf,
                    // and then the row is NaN anyway).
                    v = v.zero_from(k);
                    v.store_part(ep.add(i), k);
                } else {
                    v.store(ep.add(i));
                }
                s[0] = s[0].add(v);
                i += l;
            }
            if let Some(w) = w.as_mut() {
                w.finish();
            }
            let tot = s[0].add(s[1]).add(s[2].add(s[3])).hsum_f64();
            let r = V::splat((1.0 / tot) as f32);
            let e = ep as *const f32;
            w = Some(RowWriter::new(
                y.as_mut_ptr().add(ri * n),
                n,
                stream,
                #[inline(always)]
                move |i: usize, k: usize| {
                    let v = if k == l { V::load(e.add(i)) } else { V::load_part(e.add(i), k, 0.0) };
                    v.mul(r)
                },
            ));
        }
        if let Some(w) = w.as_mut() {
            w.finish();
        }
        if stream {
            _mm_sfence();
        }
    }
}

/// Softmax (or log-softmax when `log`) of one row; `next` is the row after it (or empty).
#[inline(always)]
unsafe fn softmax_row<V: Vf32>(x: &[f32], y: &mut [f32], log: bool, stream: bool, next: &[f32]) {
    unsafe {
        if !log && x.len() <= SCRATCH {
            return softmax_rows::<V>(x, y, x.len(), stream, next);
        }
        let (m, s) = max_sum_exp::<V>(x);
        let mv = V::splat(m);
        if log {
            let lse = V::splat((s as f64).ln() as f32);
            write_row(
                y,
                stream,
                #[inline(always)]
                |i, k| load::<V>(x, i, k, 0.0).sub(mv).sub(lse),
            );
        } else {
            let r = V::splat((1.0 / s as f64) as f32);
            write_row(
                y,
                stream,
                #[inline(always)]
                |i, k| exp(load::<V>(x, i, k, 0.0).sub(mv)).mul(r),
            );
        }
    }
}

/// `(Σ (x - shift), Σ (x - shift)²)` over a row, f32 lanes within blocks, f64 across blocks.
#[inline(always)]
unsafe fn shifted_sums<V: Vf32>(x: &[f32], shift: f32, want_linear: bool) -> (f64, f64) {
    unsafe {
        let (l, sv) = (V::LANES, V::splat(shift));
        let (mut s1, mut s2) = (0f64, 0f64);
        for xb in x.chunks(BLOCK) {
            // Even vectors into the `0` accumulators, odd ones into the `1`s (named locals, so
            // they stay in registers).
            let (mut a10, mut a11, mut a20, mut a21) = (V::splat(0.0), V::splat(0.0), V::splat(0.0), V::splat(0.0));
            let mut i = 0;
            while i + 2 * l <= xb.len() {
                let d0 = V::load(xb.as_ptr().add(i)).sub(sv);
                let d1 = V::load(xb.as_ptr().add(i + l)).sub(sv);
                a10 = a10.add(d0);
                a20 = d0.fmadd(d0, a20);
                a11 = a11.add(d1);
                a21 = d1.fmadd(d1, a21);
                i += 2 * l;
            }
            while i < xb.len() {
                // Lanes past the row load `shift`: they add 0 to both sums.
                let d = load::<V>(xb, i, (xb.len() - i).min(l), shift).sub(sv);
                if (i / l) & 1 == 0 {
                    a10 = a10.add(d);
                    a20 = d.fmadd(d, a20);
                } else {
                    a11 = a11.add(d);
                    a21 = d.fmadd(d, a21);
                }
                i += l;
            }
            if want_linear {
                s1 += a10.add(a11).hsum_f64();
            }
            s2 += a20.add(a21).hsum_f64();
        }
        (s1, s2)
    }
}

/// Layer norm of one row: `(x - mean) / sqrt(var + eps) · gamma + beta` (biased variance).
#[inline(always)]
unsafe fn layer_norm_row<V: Vf32>(
    x: &[f32],
    y: &mut [f32],
    eps: f64,
    gamma: Option<&[f32]>,
    beta: Option<&[f32]>,
    stream: bool,
) {
    unsafe {
        let n = x.len() as f64;
        let shift = x[0];
        let (s1, s2) = shifted_sums::<V>(x, shift, true);
        let dm = s1 / n;
        let var = (s2 / n - dm * dm).max(0.0);
        let mean = V::splat((shift as f64 + dm) as f32);
        let rstd = V::splat((1.0 / (var + eps).sqrt()) as f32);
        let norm = |i, k| load::<V>(x, i, k, 0.0).sub(mean).mul(rstd);
        match (gamma, beta) {
            (Some(g), Some(b)) => write_row(
                y,
                stream,
                #[inline(always)]
                |i, k| norm(i, k).fmadd(load(g, i, k, 0.0), load(b, i, k, 0.0)),
            ),
            (Some(g), None) => write_row(
                y,
                stream,
                #[inline(always)]
                |i, k| norm(i, k).mul(load(g, i, k, 0.0)),
            ),
            (None, Some(b)) => write_row(
                y,
                stream,
                #[inline(always)]
                |i, k| norm(i, k).add(load(b, i, k, 0.0)),
            ),
            // A closure that can carry `#[inline(always)]` (a `let` closure cannot, and one not
            // inlined into the `target_feature` entry point runs its intrinsics as calls).
            #[allow(clippy::redundant_closure)]
            (None, None) => write_row(
                y,
                stream,
                #[inline(always)]
                |i, k| norm(i, k),
            ),
        }
    }
}

/// RMS norm of one row: `x / sqrt(mean(x²) + eps) · gamma`.
#[inline(always)]
unsafe fn rms_norm_row<V: Vf32>(x: &[f32], y: &mut [f32], eps: f64, gamma: Option<&[f32]>, stream: bool) {
    unsafe {
        let (_, s2) = shifted_sums::<V>(x, 0.0, false);
        let r = V::splat((1.0 / (s2 / x.len() as f64 + eps).sqrt()) as f32);
        match gamma {
            Some(g) => write_row(
                y,
                stream,
                #[inline(always)]
                |i, k| load::<V>(x, i, k, 0.0).mul(r).mul(load(g, i, k, 0.0)),
            ),
            None => write_row(
                y,
                stream,
                #[inline(always)]
                |i, k| load::<V>(x, i, k, 0.0).mul(r),
            ),
        }
    }
}

/// One width's row kernels, each with the signature of its `*_avx2` form here: what
/// `composite::run` and the tests dispatch through.
pub(crate) struct RowKernels {
    /// `"avx512"` or `"avx2"` (test messages).
    #[cfg(test)]
    pub(crate) name: &'static str,
    pub(crate) softmax_rows: unsafe fn(&[f32], &mut [f32], usize, bool, &[f32]),
    pub(crate) softmax_row: unsafe fn(&[f32], &mut [f32], bool, bool, &[f32]),
    pub(crate) layer_norm_row: LayerNormFn,
    pub(crate) rms_norm_row: RmsNormFn,
    pub(crate) stream_copy: unsafe fn(&[f32], &mut [f32]),
}

/// [`layer_norm_row_avx2`]'s signature.
type LayerNormFn = unsafe fn(&[f32], &mut [f32], f64, Option<&[f32]>, Option<&[f32]>, bool);
/// [`rms_norm_row_avx2`]'s signature.
type RmsNormFn = unsafe fn(&[f32], &mut [f32], f64, Option<&[f32]>, bool);

impl RowKernels {
    /// The widest this CPU has: AVX-512, else AVX2, else
    /// `None` (the portable rows of `composite`).
    pub(crate) fn best() -> Option<&'static RowKernels> {
        Self::avx512().or_else(Self::avx2)
    }

    /// The 16-lane kernels, where the CPU has AVX-512.
    pub(crate) fn avx512() -> Option<&'static RowKernels> {
        static K: RowKernels = RowKernels {
            #[cfg(test)]
            name: "avx512",
            softmax_rows: softmax_rows_avx512,
            softmax_row: softmax_row_avx512,
            layer_norm_row: layer_norm_row_avx512,
            rms_norm_row: rms_norm_row_avx512,
            stream_copy: stream_copy_avx512,
        };
        super::simd::has_avx512().then_some(&K)
    }

    /// This module's 8-lane kernels, where the CPU has AVX2 + FMA.
    pub(crate) fn avx2() -> Option<&'static RowKernels> {
        static K: RowKernels = RowKernels {
            #[cfg(test)]
            name: "avx2",
            softmax_rows: softmax_rows_avx2,
            softmax_row: softmax_row_avx2,
            layer_norm_row: layer_norm_row_avx2,
            rms_norm_row: rms_norm_row_avx2,
            stream_copy: stream_copy_avx2,
        };
        super::simd::has_avx2().then_some(&K)
    }
}

/// The five entry points of one width: `$softmax_rows` … `$stream_copy`, each [`softmax_rows`]
/// … [`write_row`] compiled for `$features` on `$v` (`# Safety`: the CPU has those features;
/// `gamma` / `beta` have the row's length).
macro_rules! row_kernels {
    ($features:literal, $v:ty, $softmax_rows:ident, $softmax_row:ident, $layer_norm_row:ident,
     $rms_norm_row:ident, $stream_copy:ident) => {
        /// [`softmax_rows`] at this width.
        ///
        /// # Safety
        /// The CPU has the target features this function is compiled for.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $softmax_rows(x: &[f32], y: &mut [f32], len: usize, stream: bool, next: &[f32]) {
            unsafe { softmax_rows::<$v>(x, y, len, stream, next) }
        }

        /// [`softmax_row`] at this width.
        ///
        /// # Safety
        /// The CPU has the target features this function is compiled for.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $softmax_row(x: &[f32], y: &mut [f32], log: bool, stream: bool, next: &[f32]) {
            unsafe { softmax_row::<$v>(x, y, log, stream, next) }
        }

        /// [`layer_norm_row`] at this width.
        ///
        /// # Safety
        /// The CPU has the target features this function is compiled for; `gamma` / `beta`
        /// have the row's length.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $layer_norm_row(
            x: &[f32],
            y: &mut [f32],
            eps: f64,
            gamma: Option<&[f32]>,
            beta: Option<&[f32]>,
            stream: bool,
        ) {
            unsafe { layer_norm_row::<$v>(x, y, eps, gamma, beta, stream) }
        }

        /// [`rms_norm_row`] at this width.
        ///
        /// # Safety
        /// The CPU has the target features this function is compiled for; `gamma` has the
        /// row's length.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $rms_norm_row(x: &[f32], y: &mut [f32], eps: f64, gamma: Option<&[f32]>, stream: bool) {
            unsafe { rms_norm_row::<$v>(x, y, eps, gamma, stream) }
        }

        /// Copy `x` to `y` (equal lengths) with [`write_row`]'s non-temporal stores (the fused
        /// elementwise kernel's large results, block by block).
        ///
        /// # Safety
        /// The CPU has the target features this function is compiled for.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $stream_copy(x: &[f32], y: &mut [f32]) {
            assert_eq!(x.len(), y.len(), "stream_copy lengths");
            unsafe { write_row(y, true, |i, k| load::<$v>(x, i, k, 0.0)) }
        }
    };
}

row_kernels!(
    "avx2,fma",
    F32x8,
    softmax_rows_avx2,
    softmax_row_avx2,
    layer_norm_row_avx2,
    rms_norm_row_avx2,
    stream_copy_avx2
);

row_kernels!(
    "avx512f,avx512vl,avx512bw,fma",
    F32x16,
    softmax_rows_avx512,
    softmax_row_avx512,
    layer_norm_row_avx512,
    rms_norm_row_avx512,
    stream_copy_avx512
);

#[cfg(test)]
mod tests {
    //! The row kernels of each width this CPU has: AVX-512's and AVX2's.
    use super::*;

    /// The widths this CPU runs.
    fn forms() -> Vec<&'static RowKernels> {
        let v: Vec<_> = [RowKernels::avx512(), RowKernels::avx2()].into_iter().flatten().collect();
        if v.is_empty() {
            eprintln!("SKIP norm_vec: neither AVX-512 nor AVX2 on this CPU");
        }
        v
    }

    /// Several rows through `softmax_rows` (each row's write overlapped with the next row's
    /// `exp` pass, streamed or not, any output alignment) give the bits of one row at a time,
    /// and agree with an f64 softmax to within f32 rounding.
    #[test]
    fn pipelined_rows_match_single_rows() {
        for f in forms() {
            pipelined_rows(f);
        }
    }

    fn pipelined_rows(f: &RowKernels) {
        let name = f.name;
        for len in [1usize, 5, 7, 8, 9, 16, 17, 63, 64, 100, 1030, SCRATCH] {
            for rows in [1usize, 2, 3, 5] {
                let x: Vec<f32> = (0..rows * len).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.21).collect();
                let mut one = vec![0f32; rows * len];
                for (xr, yr) in x.chunks(len).zip(one.chunks_mut(len)) {
                    // SAFETY: AVX2 checked above; one row of `len` ≤ SCRATCH.
                    unsafe { (f.softmax_rows)(xr, yr, len, false, &[]) };
                }
                for (xr, yr) in x.chunks(len).zip(one.chunks(len)) {
                    let m = xr.iter().fold(f64::MIN, |a, &b| a.max(b as f64));
                    let tot: f64 = xr.iter().map(|&v| (v as f64 - m).exp()).sum();
                    for (&v, &got) in xr.iter().zip(yr) {
                        let want = (v as f64 - m).exp() / tot;
                        // The f32 rounding of `x - max` (half an ulp of it, carried into `exp`
                        // as a relative error), plus `exp`'s 1.7 ulps and the rounding of the
                        // reciprocal and the product.
                        let eps = f32::EPSILON as f64;
                        let tol = want * (0.5 * eps * (v as f64 - m).abs() + 4.0 * eps);
                        assert!((got as f64 - want).abs() <= tol, "{name} len={len}: {got} vs {want}");
                    }
                }
                for off in 0..4 {
                    for stream in [false, true] {
                        let mut y = vec![0f32; rows * len + off];
                        // SAFETY: as above; `x` and `y[off..]` hold `rows` rows.
                        unsafe { (f.softmax_rows)(&x, &mut y[off..], len, stream, &[]) };
                        assert_eq!(&y[off..], &one[..], "{name} len={len} rows={rows} off={off} stream={stream}");
                    }
                }
            }
        }
    }

    /// Non-temporal writes (any alignment of the output, any length) give the same bits as
    /// ordinary stores; log-softmax and the long-row softmax against f64; the norms against
    /// f64 within f32 rounding.
    #[test]
    fn rows_match_f64_and_streamed_rows_match() {
        for f in forms() {
            rows_match(f);
        }
    }

    fn rows_match(f: &RowKernels) {
        let name = f.name;
        for n in [1usize, 5, 8, 9, 16, 17, 64, 100, 1030, 2100, SCRATCH + 9] {
            let x: Vec<f32> = (0..n).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.07 + 3.0).collect();
            let g: Vec<f32> = (0..n).map(|i| 0.5 + (i % 7) as f32 * 0.1).collect();
            let b: Vec<f32> = (0..n).map(|i| (i % 5) as f32 * 0.2 - 0.4).collect();
            let xd: Vec<f64> = x.iter().map(|&v| v as f64).collect();
            let m = xd.iter().fold(f64::MIN, |a, &v| a.max(v));
            let lse = m + xd.iter().map(|&v| (v - m).exp()).sum::<f64>().ln();
            let mean = xd.iter().sum::<f64>() / n as f64;
            let var = xd.iter().map(|&v| (v - mean) * (v - mean)).sum::<f64>() / n as f64;
            let ms = xd.iter().map(|&v| v * v).sum::<f64>() / n as f64;
            let close = |got: &[f32], want: &dyn Fn(usize) -> f64, tol: f64, what: &str| {
                for (i, &v) in got.iter().enumerate() {
                    let w = want(i);
                    assert!((v as f64 - w).abs() <= tol * w.abs().max(1.0), "{name} {what} n={n} [{i}]: {v} vs {w}");
                }
            };
            let mut y = vec![0f32; n];
            // SAFETY (each call): AVX2 checked above; gamma / beta have the row's length.
            unsafe { (f.softmax_row)(&x, &mut y, false, false, &[]) };
            close(&y, &|i| (xd[i] - lse).exp(), 1e-5, "softmax");
            unsafe { (f.softmax_row)(&x, &mut y, true, false, &[]) };
            close(&y, &|i| xd[i] - lse, 1e-5, "log_softmax");
            unsafe { (f.layer_norm_row)(&x, &mut y, 1e-5, Some(&g), Some(&b), false) };
            close(&y, &|i| (xd[i] - mean) / (var + 1e-5).sqrt() * g[i] as f64 + b[i] as f64, 1e-5, "layer_norm");
            unsafe { (f.rms_norm_row)(&x, &mut y, 1e-6, Some(&g), false) };
            close(&y, &|i| xd[i] / (ms + 1e-6).sqrt() * g[i] as f64, 1e-5, "rms_norm");
            for off in 0..4 {
                let mut a = vec![0f32; n + off];
                let mut c = vec![0f32; n + off];
                unsafe {
                    (f.softmax_row)(&x, &mut a[off..], false, false, &[]);
                    (f.softmax_row)(&x, &mut c[off..], false, true, &g);
                    assert_eq!(a, c, "{name} softmax n={n} off={off}");
                    (f.softmax_row)(&x, &mut a[off..], true, false, &[]);
                    (f.softmax_row)(&x, &mut c[off..], true, true, &g);
                    assert_eq!(a, c, "{name} log_softmax n={n} off={off}");
                    (f.layer_norm_row)(&x, &mut a[off..], 1e-5, Some(&g), None, false);
                    (f.layer_norm_row)(&x, &mut c[off..], 1e-5, Some(&g), None, true);
                    assert_eq!(a, c, "{name} layer_norm n={n} off={off}");
                    (f.rms_norm_row)(&x, &mut a[off..], 1e-6, None, false);
                    (f.rms_norm_row)(&x, &mut c[off..], 1e-6, None, true);
                    assert_eq!(a, c, "{name} rms_norm n={n} off={off}");
                    (f.stream_copy)(&x, &mut c[off..]);
                    assert_eq!(&c[off..], &x[..], "{name} stream_copy n={n} off={off}");
                }
            }
        }
    }
}
