//! AVX-512 row kernels for the native `softmax`, `log_softmax`, `layer_norm` and `rms_norm`
//! composites (the portable versions are in [`super::composite`]; callers check
//! [`super::simd::has_avx512`] first).
//!
//! Each row is read from memory once and written once:
//! - a statistics pass: softmax keeps a running max and a sum rescaled whenever the max
//!   grows (online softmax: `s ← s·exp(m - m') + Σ exp(x - m')`, four 16-lane accumulators
//!   sharing one max, the rescale skipped when no lane's max moved); the norms sum `x - x₀` and
//!   `(x - x₀)²` (shifted by the row's first element, so no `E[x²] - E[x]²` cancellation for
//!   rows far from zero) or `x²` in f32 lanes over blocks of 1024 elements, the blocks added
//!   in f64;
//! - a write pass that re-reads the row (from L1/L2) and writes the result, with non-temporal
//!   stores when `stream` is set (outputs far larger than the caches: no read-for-ownership of
//!   the destination, so memory sees one read and one write per element). Softmax rows of at
//!   most [`SCRATCH`] elements ([`softmax_rows`]) keep their `exp` values in L1 and write a row
//!   during the next row's `exp` pass.
//!
//! `exp` is [`exp512`], the vector form of [`super::simd::exp_f32`] (same range reduction and
//! polynomial; the `2ⁿ` scale by `vscalefps`, which gets subnormals and overflow right).
//! Special values follow the decomposition: a NaN in a row gives a NaN row, `+inf` gives NaN
//! (`inf - inf`), a row of all `-inf` gives NaN for softmax, `-inf` entries with a finite
//! max get weight 0.

#![cfg(target_arch = "x86_64")]

use super::math_avx512::{LANES, exp512, exp512_clamped, tail_mask};
use std::arch::x86_64::*;

/// Elements per f32 accumulation block of the norms (then added in f64).
const BLOCK: usize = 1024;

/// Write `f(i, mask)` (the result for elements `i..i + 16` under `mask`) to every element of
/// `y`: aligned non-temporal stores in the middle when `stream`, masked stores at the edges
/// ([`RowWriter`]).
#[inline(always)]
unsafe fn write_row(y: &mut [f32], stream: bool, f: impl FnMut(usize, __mmask16) -> __m512) {
    unsafe {
        RowWriter { y: y.as_mut_ptr(), n: y.len(), pos: 0, stream, f }.finish();
        if stream {
            // Non-temporal stores are weakly ordered: fence before another thread reads `y`.
            _mm_sfence();
        }
    }
}

/// Writes the `n` floats at `y`, `f(i, mask)` being the result for elements `i..i + 16`
/// under `mask`, one vector per [`RowWriter::step`] (so that softmax can spread a row's write
/// over the next row's `exp` pass): aligned non-temporal stores when `stream` (after a masked
/// head up to the first 64-byte boundary; f32 storage is 4-byte aligned), masked stores at the
/// edges. The caller fences after non-temporal stores.
struct RowWriter<F> {
    y: *mut f32,
    n: usize,
    pos: usize,
    stream: bool,
    f: F,
}

impl<F: FnMut(usize, __mmask16) -> __m512> RowWriter<F> {
    /// Write the next vector (or the head / tail piece); nothing once the row is written.
    #[inline(always)]
    unsafe fn step(&mut self) {
        unsafe {
            let rem = self.n - self.pos;
            if rem == 0 {
                return;
            }
            let p = self.y.add(self.pos);
            let head = if self.stream { (64 - (p as usize % 64)) % 64 / 4 } else { 0 };
            if head == 0 && rem >= LANES {
                let v = (self.f)(self.pos, !0);
                if self.stream {
                    _mm512_stream_ps(p, v);
                } else {
                    _mm512_storeu_ps(p, v);
                }
                self.pos += LANES;
            } else {
                let k = if head > 0 { head.min(rem) } else { rem };
                let m = tail_mask(k);
                _mm512_mask_storeu_ps(p, m, (self.f)(self.pos, m));
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

/// Copy `x` to `y` (equal lengths) with [`write_row`]'s non-temporal stores: the fused
/// elementwise kernel's results of at least `composite::STREAM_MIN_BYTES`, block by block.
///
/// # Safety
/// AVX-512F must be available.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn stream_copy(x: &[f32], y: &mut [f32]) {
    assert_eq!(x.len(), y.len(), "stream_copy lengths");
    // SAFETY: `f` reads `x[i..i + 16]` under the mask of the lanes `write_row` writes.
    unsafe { write_row(y, true, |i, m| _mm512_maskz_loadu_ps(m, x.as_ptr().add(i))) }
}

/// Prefetch the cache line holding `x[i]` into L2, not L1: softmax's next row, fetched while
/// this row's `exp` pass computes from L1 (the row and the scratch row fill L1; `T0` was
/// slower), so memory streams during the compute too. Softmax over [4096, 4096] on one
/// thread (Zen 4), interleaved runs: 8.4 → 7.1 ms. The norms' write passes are too
/// short to hide a row: prefetching there made layer_norm 8–10% slower.
#[inline(always)]
unsafe fn prefetch_l2(x: &[f32], i: usize) {
    unsafe { _mm_prefetch::<_MM_HINT_T1>(x.as_ptr().add(i) as *const i8) }
}

/// Load 16 lanes at `x[i..]` under `mask`, `fill` elsewhere.
#[inline(always)]
unsafe fn load(x: &[f32], i: usize, mask: __mmask16, fill: f32) -> __m512 {
    unsafe {
        if mask == !0 {
            _mm512_loadu_ps(x.as_ptr().add(i))
        } else {
            _mm512_mask_loadu_ps(_mm512_set1_ps(fill), mask, x.as_ptr().add(i))
        }
    }
}

/// Online max and sum of `exp(x - max)` over a row: `(max, sum)`.
#[inline(always)]
unsafe fn max_sum_exp(x: &[f32]) -> (f32, f32) {
    unsafe {
        let n = x.len();
        let p = x.as_ptr();
        let mut m = _mm512_set1_ps(f32::MIN);
        let mut s = [_mm512_setzero_ps(); 4];
        let mut i = 0;
        while i + 4 * LANES <= n {
            let v = [0, 1, 2, 3].map(|k| _mm512_loadu_ps(p.add(i + k * LANES)));
            let mx = _mm512_max_ps(_mm512_max_ps(v[0], v[1]), _mm512_max_ps(v[2], v[3]));
            let mn = _mm512_max_ps(m, mx);
            if _mm512_cmp_ps_mask::<_CMP_NEQ_UQ>(mn, m) != 0 {
                let r = exp512(_mm512_sub_ps(m, mn));
                s = s.map(|a| _mm512_mul_ps(a, r));
                m = mn;
            }
            for k in 0..4 {
                s[k] = _mm512_add_ps(s[k], exp512(_mm512_sub_ps(v[k], m)));
            }
            i += 4 * LANES;
        }
        while i < n {
            let mask = if i + LANES <= n { !0 } else { tail_mask(n - i) };
            let v = load(x, i, mask, f32::NEG_INFINITY);
            let mn = _mm512_max_ps(m, v);
            if _mm512_cmp_ps_mask::<_CMP_NEQ_UQ>(mn, m) != 0 {
                let r = exp512(_mm512_sub_ps(m, mn));
                s = s.map(|a| _mm512_mul_ps(a, r));
                m = mn;
            }
            s[0] = _mm512_add_ps(s[0], exp512(_mm512_sub_ps(v, m)));
            i += LANES;
        }
        let mut lanes_m = [0f32; LANES];
        _mm512_storeu_ps(lanes_m.as_mut_ptr(), m);
        let big = lanes_m.iter().fold(f32::MIN, |a, &b| if b.is_nan() || a.is_nan() { f32::NAN } else { a.max(b) });
        let tot = _mm512_add_ps(_mm512_add_ps(s[0], s[1]), _mm512_add_ps(s[2], s[3]));
        let scaled = _mm512_mul_ps(tot, exp512(_mm512_sub_ps(m, _mm512_set1_ps(big))));
        let mut lanes_s = [0f32; LANES];
        _mm512_storeu_ps(lanes_s.as_mut_ptr(), scaled);
        (big, lanes_s.iter().map(|&v| v as f64).sum::<f64>() as f32)
    }
}

/// Longest row that softmax runs through on-stack scratch rows (two of 16 KiB, in L1).
pub(crate) const SCRATCH: usize = 4096;

/// Softmax of consecutive rows of `len` (at most [`SCRATCH`]) elements, `x` and `y` holding
/// the same whole number of rows, with one `exp` per element: per row a max pass (reads the row,
/// prefetched into L2), then `exp(x - max)` into one of two L1 scratch rows while summing and
/// prefetching the following row (`next` after the last), and, in the same loop, the scaled
/// write of the previous row from the other scratch row; the last row's write follows its
/// `exp` pass. Cheaper than the online form (which needs a second `exp` per element in its
/// write pass), and the non-temporal stores of one row overlap the `exp` work of the next
/// instead of running alone. [4096, 4096] f32 (`fusion_bench softmax 1`, `taskset -c 0`, three
/// interleaved rounds): write pass after each row 6.83–7.18 ms, overlapped 6.21–6.61 (2 threads
/// 3.52–3.59 → 3.22).
///
/// # Safety
/// The CPU must support AVX-512F/VL/BW and FMA.
#[target_feature(enable = "avx512f,avx512vl,avx512bw,fma")]
pub(crate) unsafe fn softmax_rows(x: &[f32], y: &mut [f32], len: usize, stream: bool, next: &[f32]) {
    assert!(
        len > 0 && len <= SCRATCH && x.len() == y.len() && x.len().is_multiple_of(len),
        "softmax_rows: {} and {} elements in rows of {len}",
        x.len(),
        y.len()
    );
    unsafe {
        let n = len;
        let mut scratch = std::mem::MaybeUninit::<[[f32; SCRATCH]; 2]>::uninit();
        let base = scratch.as_mut_ptr() as *mut f32;
        // The previous row's writer: its scratch row and `1 / Σ`.
        let mut w: Option<RowWriter<_>> = None;
        for (ri, xr) in x.chunks_exact(n).enumerate() {
            let nx = x.get((ri + 1) * n..(ri + 2) * n).unwrap_or(next);
            let ep = base.add((ri % 2) * SCRATCH);
            let mut m = [_mm512_set1_ps(f32::NEG_INFINITY); 4];
            let mut i = 0;
            while i + 4 * LANES <= n {
                for (k, mk) in m.iter_mut().enumerate() {
                    *mk = _mm512_max_ps(*mk, _mm512_loadu_ps(xr.as_ptr().add(i + k * LANES)));
                }
                i += 4 * LANES;
            }
            while i < n {
                let mask = if i + LANES <= n { !0 } else { tail_mask(n - i) };
                m[0] = _mm512_max_ps(m[0], load(xr, i, mask, f32::NEG_INFINITY));
                i += LANES;
            }
            let big = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m[0], m[1]), _mm512_max_ps(m[2], m[3])));
            let mv = _mm512_set1_ps(big);
            // `x - max` is at most 0 (or NaN), so only the lower clamp of `exp512` is needed.
            let exp = |d: __m512| exp512_clamped(_mm512_max_ps(_mm512_set1_ps(-104.0), d));
            let mut s = [_mm512_setzero_ps(); 4];
            let mut i = 0;
            while i + 4 * LANES <= n {
                if i + 4 * LANES <= nx.len() {
                    for k in 0..4 {
                        prefetch_l2(nx, i + k * LANES);
                    }
                }
                for (k, sk) in s.iter_mut().enumerate() {
                    let v = exp(_mm512_sub_ps(_mm512_loadu_ps(xr.as_ptr().add(i + k * LANES)), mv));
                    _mm512_storeu_ps(ep.add(i + k * LANES), v);
                    *sk = _mm512_add_ps(*sk, v);
                    if let Some(w) = w.as_mut() {
                        w.step();
                    }
                }
                i += 4 * LANES;
            }
            while i < n {
                let mask = if i + LANES <= n { !0 } else { tail_mask(n - i) };
                let v = exp(_mm512_sub_ps(load(xr, i, mask, f32::NEG_INFINITY), mv));
                // Masked-off lanes are exp(-inf - max) = 0 (or NaN when the max is -inf, and
                // then the row is NaN anyway).
                let v = _mm512_maskz_mov_ps(mask, v);
                _mm512_mask_storeu_ps(ep.add(i), mask, v);
                s[0] = _mm512_add_ps(s[0], v);
                i += LANES;
            }
            if let Some(w) = w.as_mut() {
                w.finish();
            }
            let tot = hsum_f64(_mm512_add_ps(_mm512_add_ps(s[0], s[1]), _mm512_add_ps(s[2], s[3])));
            let r = _mm512_set1_ps((1.0 / tot) as f32);
            let e = ep as *const f32;
            let f = move |i: usize, k: __mmask16| _mm512_mul_ps(_mm512_maskz_loadu_ps(k, e.add(i)), r);
            w = Some(RowWriter { y: y.as_mut_ptr().add(ri * n), n, pos: 0, stream, f });
        }
        if let Some(w) = w.as_mut() {
            w.finish();
        }
        if stream {
            // Non-temporal stores are weakly ordered: fence before another thread reads `y`.
            _mm_sfence();
        }
    }
}

/// Softmax (or log-softmax when `log`) of one row; `next` is the row after it (or empty), which
/// the one-`exp` path prefetches.
///
/// # Safety
/// The CPU must support AVX-512F/VL/BW and FMA.
#[target_feature(enable = "avx512f,avx512vl,avx512bw,fma")]
pub(crate) unsafe fn softmax_row(x: &[f32], y: &mut [f32], log: bool, stream: bool, next: &[f32]) {
    unsafe {
        if !log && x.len() <= SCRATCH {
            return softmax_rows(x, y, x.len(), stream, next);
        }
        let (m, s) = max_sum_exp(x);
        let mv = _mm512_set1_ps(m);
        if log {
            let lse = _mm512_set1_ps((s as f64).ln() as f32);
            write_row(y, stream, |i, mask| _mm512_sub_ps(_mm512_sub_ps(load(x, i, mask, 0.0), mv), lse));
        } else {
            let r = _mm512_set1_ps((1.0 / s as f64) as f32);
            write_row(y, stream, |i, mask| _mm512_mul_ps(exp512(_mm512_sub_ps(load(x, i, mask, 0.0), mv)), r));
        }
    }
}

/// Horizontal f64 sum of 16 f32 lanes.
#[inline(always)]
unsafe fn hsum_f64(v: __m512) -> f64 {
    unsafe {
        let lo = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
        let hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v))));
        _mm512_reduce_add_pd(_mm512_add_pd(lo, hi))
    }
}

/// `(Σ (x - shift), Σ (x - shift)²)` over a row, f32 lanes within blocks, f64 across blocks.
#[inline(always)]
unsafe fn shifted_sums(x: &[f32], shift: f32, want_linear: bool) -> (f64, f64) {
    unsafe {
        let k = _mm512_set1_ps(shift);
        let (mut s1, mut s2) = (0f64, 0f64);
        for (bi, xb) in x.chunks(BLOCK).enumerate() {
            let base = bi * BLOCK;
            // Even vectors into the `0` accumulators, odd ones into the `1`s: named locals, so
            // they stay in registers (an array indexed by the parity went through the stack,
            // a store-forwarding chain per vector: 40% of layer_norm's time under `perf`).
            let (mut a10, mut a11, mut a20, mut a21) = [_mm512_setzero_ps(); 4].into();
            let mut i = 0;
            while i + 2 * LANES <= xb.len() {
                let d0 = _mm512_sub_ps(_mm512_loadu_ps(xb.as_ptr().add(i)), k);
                let d1 = _mm512_sub_ps(_mm512_loadu_ps(xb.as_ptr().add(i + LANES)), k);
                a10 = _mm512_add_ps(a10, d0);
                a20 = _mm512_fmadd_ps(d0, d0, a20);
                a11 = _mm512_add_ps(a11, d1);
                a21 = _mm512_fmadd_ps(d1, d1, a21);
                i += 2 * LANES;
            }
            while i < xb.len() {
                let mask = if i + LANES <= xb.len() { !0 } else { tail_mask(xb.len() - i) };
                // Masked-off lanes load `shift`: they add 0 to both sums.
                let d = _mm512_sub_ps(load(x, base + i, mask, shift), k);
                if (i / LANES) & 1 == 0 {
                    a10 = _mm512_add_ps(a10, d);
                    a20 = _mm512_fmadd_ps(d, d, a20);
                } else {
                    a11 = _mm512_add_ps(a11, d);
                    a21 = _mm512_fmadd_ps(d, d, a21);
                }
                i += LANES;
            }
            if want_linear {
                s1 += hsum_f64(_mm512_add_ps(a10, a11));
            }
            s2 += hsum_f64(_mm512_add_ps(a20, a21));
        }
        (s1, s2)
    }
}

/// Layer norm of one row: `(x - mean) / sqrt(var + eps) · gamma + beta` (biased variance).
///
/// # Safety
/// The CPU must support AVX-512F/VL/BW and FMA; `gamma` / `beta` have the row's length.
#[target_feature(enable = "avx512f,avx512vl,avx512bw,fma")]
pub(crate) unsafe fn layer_norm_row(
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
        let (s1, s2) = shifted_sums(x, shift, true);
        let dm = s1 / n;
        let var = (s2 / n - dm * dm).max(0.0);
        let mean = _mm512_set1_ps((shift as f64 + dm) as f32);
        let rstd = _mm512_set1_ps((1.0 / (var + eps).sqrt()) as f32);
        let norm = |i: usize, mask: __mmask16| _mm512_mul_ps(_mm512_sub_ps(load(x, i, mask, 0.0), mean), rstd);
        match (gamma, beta) {
            (Some(g), Some(b)) => {
                write_row(y, stream, |i, m| _mm512_fmadd_ps(norm(i, m), load(g, i, m, 0.0), load(b, i, m, 0.0)))
            }
            (Some(g), None) => write_row(y, stream, |i, m| _mm512_mul_ps(norm(i, m), load(g, i, m, 0.0))),
            (None, Some(b)) => write_row(y, stream, |i, m| _mm512_add_ps(norm(i, m), load(b, i, m, 0.0))),
            (None, None) => write_row(y, stream, norm),
        }
    }
}

/// RMS norm of one row: `x / sqrt(mean(x²) + eps) · gamma`.
///
/// # Safety
/// The CPU must support AVX-512F/VL/BW and FMA; `gamma` has the row's length.
#[target_feature(enable = "avx512f,avx512vl,avx512bw,fma")]
pub(crate) unsafe fn rms_norm_row(x: &[f32], y: &mut [f32], eps: f64, gamma: Option<&[f32]>, stream: bool) {
    unsafe {
        let (_, s2) = shifted_sums(x, 0.0, false);
        let r = _mm512_set1_ps((1.0 / (s2 / x.len() as f64 + eps).sqrt()) as f32);
        match gamma {
            Some(g) => {
                write_row(y, stream, |i, m| _mm512_mul_ps(_mm512_mul_ps(load(x, i, m, 0.0), r), load(g, i, m, 0.0)))
            }
            None => write_row(y, stream, |i, m| _mm512_mul_ps(load(x, i, m, 0.0), r)),
        }
    }
}
