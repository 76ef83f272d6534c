//! [`super::GGML_ATTENTION`] over an f16 KV cache: llama.cpp's default attention (f16 K/V
//! cache, flash attention on, as `llama_context_default_params` and `llama-bench` run it on a
//! CPU), one query row at a time as ggml's `ggml_compute_forward_flash_attn_ext_f16_one_chunk`
//! computes it (llama.cpp as vendored by `llama-cpp-python` 0.3.36, read from its source and
//! its compiled `libggml-cpu`):
//!
//! - the query row (after RoPE) is rounded to f16 (`ggml_cpu_fp32_to_fp16`, round to nearest
//!   even); the new block's key and value rows are rounded to f16 as the cache stores them;
//! - per visible key, in position order: `s = dot(k, q)` as `ggml_vec_dot_f16` (f16 widened to
//!   f32, then [`super::dot_ggml`]'s order for each 64 elements, a remainder added in f64),
//!   `s = s · scale + mask`;
//! - online softmax with an f16 output accumulator `VKQ` (every update rounded to f16): when
//!   `s > M`, `M = s`, `ms = expf(M_old − M)`, `VKQ = f16(VKQ · ms)`
//!   (`ggml_vec_scale_f16`) and `vs = 1`, else `vs = expf(s − M)`; then
//!   `VKQ = f16(fma(v, vs, VKQ))` (`ggml_vec_mad_f16`) and `S = fma(S, ms, vs)` (GCC contracts
//!   ggml's `S*ms + vs`; seen in the compiled library);
//! - the output `VKQ · (1/S)` in f32 (0 where no key is visible, where the f32 op gives NaN).
//!
//! `expf` is the C library's (`f32::exp`), as ggml calls it. llama.cpp splits the keys of one
//! query row across its threads once a sequence holds 512 cells or more and merges the parts;
//! this follows its one-thread run, where the merge of a single part changes nothing. Its
//! batched steps (prefill) take another path (`ggml_compute_forward_flash_attn_ext_tiled`),
//! which is why, as with the f32 op, only one-token steps use this op.

use super::{Task, rope};
use rlx_ir::half::f16;

/// Attention of query row `row` for the heads of KV group `g` into `out` (see the module
/// docs); `LANES` 16 selects AVX-512 + F16C conversions, 8 AVX2 + F16C ones (the caller's
/// target features), 0 the same arithmetic one value at a time (the f16 roundings are round
/// to nearest even in all three). `dot` is [`super::dot_ggml`] or its AVX-512 form.
#[inline(always)]
pub(super) fn group<'a, const LANES: usize>(
    dot: impl Fn(&[f32], &[f32]) -> f32,
    t: &Task<'a>,
    row: usize,
    g: usize,
    out: &mut [f32],
) {
    let (x, [_, s, h, hk, d, c]) = (t.x, t.dims);
    let (bi, gh) = (row / s, h / hk);
    let keys = &t.keys[t.starts[row]..t.starts[row + 1]];
    if keys.is_empty() {
        // No visible key (a padding row): llama.cpp's `S == 0` case.
        out.fill(0.0);
        return;
    }
    let mask = &x.mask[row * (c + s)..][..c + s];
    // Key or value row of column `j`: the cache's, or the new block's (rounded to f16).
    let at = |j: usize, cache: &'a [f16], new: &'a [f16]| -> &'a [f16] {
        if j < c { &cache[((bi * hk + g) * c + j) * d..][..d] } else { &new[((bi * hk + g) * s + j - c) * d..][..d] }
    };
    let mut sc = SCRATCH.take();
    let Scratch { q, w, ms, inv, acc, kf, state } = &mut sc;
    let n = keys.len();
    q.resize(gh * d, 0.0);
    for (e, qe) in q.chunks_exact_mut(d).enumerate() {
        let head = g * gh + e;
        rope(x.style, &x.q[(row * h + head) * d..][..d], &x.cos[row * d..][..d], &x.sin[row * d..][..d], qe);
        round_f16::<LANES>(qe);
    }
    // Scores, key by key for the group's heads (the key row widened once into `kf`, or, in
    // whole steps of 64, each vector in a register per head).
    kf.resize(d, 0.0);
    w.resize(gh * n, 0.0);
    // Rows of whole 64-element steps: each key vector widened in a register (`dot_f16_row`).
    #[cfg(target_arch = "x86_64")]
    let direct = LANES == 16 && d % super::STEP == 0;
    for (i, &j) in keys.iter().enumerate() {
        let kr = at(j, x.kc16, t.kn16);
        // The value row, into L2 for the accumulation (as the f32 op does).
        let vr = at(j, x.vc16, t.vn16);
        super::prefetch_row(vr);
        // The key row 16 keys on, into L2: the cache comes from DRAM in short runs (one KV
        // head's keys). SmolLM2 `--fast --kv-type f16`, 1 thread, 441-token prompt + 128, four
        // interleaved rounds: 211 → 219 tok/s (medians).
        if let Some(&ja) = keys.get(i + 16) {
            super::prefetch_row(at(ja, x.kc16, t.kn16));
        }
        #[cfg(target_arch = "x86_64")]
        if direct {
            for (e, qe) in q.chunks_exact(d).enumerate() {
                // SAFETY: `LANES == 16` means the caller enabled AVX-512F/DQ, F16C and FMA; `kr` and
                // `qe` hold `d`, a multiple of 64.
                w[e * n + i] = unsafe { avx::dot_f16_row(kr, qe) } * x.scale + mask[j];
            }
            continue;
        }
        widen::<LANES>(kr, kf);
        for (e, qe) in q.chunks_exact(d).enumerate() {
            w[e * n + i] = dot_f16(&dot, kf, qe) * x.scale + mask[j];
        }
    }
    // ggml's online-softmax factors per head, in key order: `ms` (≠ 1 only where a new max
    // rescales the accumulator) and `vs` (into `w`), and the sum. They depend on the scores
    // alone, so they are all taken before the accumulation, whose f16 rounding chain then runs
    // with no `expf` call in between (a call would spill its registers).
    // The heads' chains (each sequential in key order) advance key by key together, so the
    // out-of-order core overlaps one head's `expf` and FMA with the others'.
    ms.resize(gh * n, 1.0);
    inv.clear();
    state.clear();
    state.resize(gh, (f32::NEG_INFINITY, 0f32));
    for i in 0..n {
        for (e, (m, sum)) in state.iter_mut().enumerate() {
            let (sv, mv) = (&mut w[e * n + i], &mut ms[e * n + i]);
            let (mut f, mut v) = (1f32, 1f32);
            if *sv > *m {
                f = (*m - *sv).exp();
                *m = *sv;
            } else {
                v = (*sv - *m).exp();
            }
            *sum = sum.mul_add(f, v);
            (*sv, *mv) = (v, f);
        }
    }
    inv.extend(state.iter().map(|&(_, sum)| if sum == 0.0 { 0.0 } else { 1.0 / sum }));
    acc.clear();
    acc.resize(gh * d, 0.0);
    accumulate::<LANES>(t, keys, (row, g), w, ms, acc, kf);
    for ((o, a), &f) in out.chunks_exact_mut(d).zip(acc.chunks_exact(d)).zip(inv.iter()) {
        for (o, &a) in o.iter_mut().zip(a) {
            *o = a * f;
        }
    }
    SCRATCH.set(sc);
}

/// `acc` (the group's heads, `D` each, zeroed) `= Σ` over the keys of ggml's f16 updates
/// `acc = f16(acc · ms)` where `ms ≠ 1`, then `acc = f16(fma(v, vs, acc))`, with the factors
/// `vs` in `w` and `ms` in `ms` (`[gh][n]`, see [`group`]).
#[inline(always)]
fn accumulate<const LANES: usize>(
    t: &Task,
    keys: &[usize],
    (row, g): (usize, usize),
    w: &[f32],
    ms: &[f32],
    acc: &mut [f32],
    kf: &mut [f32],
) {
    let (x, [_, s, _, hk, d, c]) = (t.x, t.dims);
    let (bi, n) = (row / s, keys.len());
    let v_at = |j: usize| -> &[f16] {
        if j < c {
            &x.vc16[((bi * hk + g) * c + j) * d..][..d]
        } else {
            &t.vn16[((bi * hk + g) * s + j - c) * d..][..d]
        }
    };
    #[cfg(target_arch = "x86_64")]
    if LANES == 16 && d == 64 {
        // SAFETY: `LANES == 16` means the caller enabled AVX-512F, F16C and FMA; `D == 64`.
        return unsafe { avx::accumulate_d64(&v_at, n, keys, w, ms, acc) };
    }
    // The key row's buffer, free by now, takes each value row.
    let vf = kf;
    for (i, &j) in keys.iter().enumerate() {
        widen::<LANES>(v_at(j), vf);
        for (k, a) in acc.chunks_exact_mut(d).enumerate() {
            let (f, v) = (ms[k * n + i], w[k * n + i]);
            if f != 1.0 {
                scale_f16::<LANES>(a, f);
            }
            mad_f16::<LANES>(a, vf, v);
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod avx {
    use rlx_ir::half::f16;
    use std::arch::x86_64::*;

    /// Heads whose accumulators stay in registers together (4 vectors each at `D = 64`).
    const HEADS: usize = 4;

    /// `ggml_vec_dot_f16` of the f16 key row `k` and the (f16-rounded) f32 query `q`, both of a
    /// length that is a multiple of 64: [`super::super::dot_ggml_avx512`]'s arithmetic with each
    /// key vector widened in a register. (Widening the row into an f32 buffer first and reading
    /// it back made every load wait on a store of the same unaligned 64 bytes.)
    ///
    /// # Safety
    /// AVX-512F, AVX-512DQ, F16C and FMA; `k.len() == q.len()`, a multiple of 64.
    #[target_feature(enable = "avx512f,avx512dq,f16c,fma")]
    pub(super) unsafe fn dot_f16_row(k: &[f16], q: &[f32]) -> f32 {
        let mut acc = [_mm512_setzero_ps(); 4];
        for c in (0..k.len()).step_by(64) {
            for (l, s) in acc.iter_mut().enumerate() {
                // SAFETY: `c + 16 l + 16 <= len` of both rows.
                let (x, y) = unsafe {
                    (
                        _mm512_cvtph_ps(_mm256_loadu_si256(k.as_ptr().add(c + 16 * l).cast())),
                        _mm512_loadu_ps(q.as_ptr().add(c + 16 * l)),
                    )
                };
                *s = _mm512_fmadd_ps(x, y, *s);
            }
        }
        // SAFETY: AVX-512F and AVX-512DQ (this function's features).
        unsafe { super::super::reduce4_avx512(acc) }
    }

    /// [`super::accumulate`] for `D = 64`: `HEADS` heads at a time, each head's 64 values in
    /// four registers across all the keys, every update rounded through F16C.
    ///
    /// # Safety
    /// AVX-512F, F16C and FMA; `acc` holds the group's heads of 64, `w` and `ms` are `[gh][n]`,
    /// `v_at` gives rows of 64.
    #[target_feature(enable = "avx512f,f16c,fma")]
    pub(super) unsafe fn accumulate_d64<'a>(
        v_at: &impl Fn(usize) -> &'a [f16],
        n: usize,
        keys: &[usize],
        w: &[f32],
        ms: &[f32],
        acc: &mut [f32],
    ) {
        let round = |r: __m512| _mm512_cvtph_ps(_mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(r));
        for (c0, chunk) in acc.chunks_mut(HEADS * 64).enumerate() {
            let cnt = chunk.len() / 64;
            let base = c0 * HEADS;
            let mut a = [[_mm512_setzero_ps(); 4]; HEADS];
            for (i, &j) in keys.iter().enumerate() {
                let vr = v_at(j);
                // SAFETY: a row of 64 f16.
                let v: [__m512; 4] = std::array::from_fn(|l| unsafe {
                    _mm512_cvtph_ps(_mm256_loadu_si256(vr.as_ptr().add(16 * l).cast()))
                });
                for (k, ak) in a.iter_mut().enumerate() {
                    if k < cnt {
                        let (f, vs) = (ms[(base + k) * n + i], _mm512_set1_ps(w[(base + k) * n + i]));
                        if f != 1.0 {
                            let fv = _mm512_set1_ps(f);
                            for r in ak.iter_mut() {
                                *r = round(_mm512_mul_ps(*r, fv));
                            }
                        }
                        for (r, &vl) in ak.iter_mut().zip(&v) {
                            *r = round(_mm512_fmadd_ps(vl, vs, *r));
                        }
                    }
                }
            }
            for (k, ak) in a.iter().enumerate().take(cnt) {
                for (l, r) in ak.iter().enumerate() {
                    // SAFETY: head `k < cnt` of the chunk, 16 values at `64 k + 16 l`.
                    unsafe { _mm512_storeu_ps(chunk.as_mut_ptr().add(64 * k + 16 * l), *r) };
                }
            }
        }
    }
}

/// [`group`] with AVX2, F16C and FMA: f16 roundings 8 at a time, scores by
/// [`super::dot_ggml_avx2`] (the same results as the portable and AVX-512 forms).
///
/// # Safety
/// AVX2, F16C and FMA are available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,f16c,fma")]
pub(super) unsafe fn group_avx2(t: &Task, row: usize, g: usize, out: &mut [f32]) {
    // SAFETY: the caller's contract (AVX2 and FMA).
    group::<8>(|a, b| unsafe { super::dot_ggml_avx2(a, b) }, t, row, g, out)
}

/// [`group`] with AVX-512, F16C and FMA, scores by [`super::dot_ggml_avx512`].
///
/// # Safety
/// AVX-512F, AVX-512DQ, F16C and FMA are available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,f16c,fma")]
pub(super) unsafe fn group_avx512(t: &Task, row: usize, g: usize, out: &mut [f32]) {
    // SAFETY: the caller's contract.
    group::<16>(|a, b| unsafe { super::dot_ggml_avx512(a, b) }, t, row, g, out)
}

/// `ggml_vec_dot_f16` of the widened rows `k` and `q`: whole steps of 64 in `dot`'s order, the
/// remainder's f32 products added in f64.
#[inline(always)]
fn dot_f16(dot: &impl Fn(&[f32], &[f32]) -> f32, k: &[f32], q: &[f32]) -> f32 {
    let np = k.len() - k.len() % super::STEP;
    if np == k.len() {
        return dot(k, q);
    }
    let mut sum = if np == 0 { 0f64 } else { dot(&k[..np], &q[..np]) as f64 };
    for (&a, &b) in k[np..].iter().zip(&q[np..]) {
        sum += (a * b) as f64;
    }
    sum as f32
}

/// `y = f32(f16(y))`, each value (round to nearest even).
#[inline(always)]
fn round_f16<const LANES: usize>(y: &mut [f32]) {
    map_f16::<LANES>(y, |v| v);
}

/// `y = f16(y · v)`, each value (`ggml_vec_scale_f16`).
#[inline(always)]
fn scale_f16<const LANES: usize>(y: &mut [f32], v: f32) {
    map_f16::<LANES>(y, |a| a * v);
}

/// `y[i] = f16(fma(x[i], v, y[i]))` (`ggml_vec_mad_f16`; every lane, its remainder loop too, is
/// one FMA then one rounding to f16).
#[inline(always)]
fn mad_f16<const LANES: usize>(y: &mut [f32], x: &[f32], v: f32) {
    #[cfg(target_arch = "x86_64")]
    if LANES == 8 {
        use std::arch::x86_64::*;
        let n = y.len() - y.len() % 8;
        // SAFETY: `LANES == 8` means the caller enabled AVX2, F16C and FMA; `i + 8 <= n <= len`.
        unsafe {
            let vv = _mm256_set1_ps(v);
            for i in (0..n).step_by(8) {
                let r = _mm256_fmadd_ps(_mm256_loadu_ps(x.as_ptr().add(i)), vv, _mm256_loadu_ps(y.as_ptr().add(i)));
                _mm256_storeu_ps(
                    y.as_mut_ptr().add(i),
                    _mm256_cvtph_ps(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(r)),
                );
            }
        }
        for (a, &b) in y[n..].iter_mut().zip(&x[n..]) {
            *a = f16::from_f32(b.mul_add(v, *a)).to_f32();
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if LANES == 16 {
        use std::arch::x86_64::*;
        let n = y.len() - y.len() % 16;
        // SAFETY: `LANES == 16` means the caller enabled AVX-512F and F16C; `i + 16 <= n <= len`.
        unsafe {
            let vv = _mm512_set1_ps(v);
            for i in (0..n).step_by(16) {
                let r = _mm512_fmadd_ps(_mm512_loadu_ps(x.as_ptr().add(i)), vv, _mm512_loadu_ps(y.as_ptr().add(i)));
                _mm512_storeu_ps(
                    y.as_mut_ptr().add(i),
                    _mm512_cvtph_ps(_mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(r)),
                );
            }
        }
        for (a, &b) in y[n..].iter_mut().zip(&x[n..]) {
            *a = f16::from_f32(b.mul_add(v, *a)).to_f32();
        }
        return;
    }
    for (a, &b) in y.iter_mut().zip(x) {
        *a = f16::from_f32(b.mul_add(v, *a)).to_f32();
    }
}

/// `y = f32(f16(f(y)))`, each value (with `LANES` 8 or 16, rounded that many at a time by F16C).
#[inline(always)]
fn map_f16<const LANES: usize>(y: &mut [f32], f: impl Fn(f32) -> f32) {
    #[cfg(target_arch = "x86_64")]
    if LANES == 8 {
        use std::arch::x86_64::*;
        let n = y.len() - y.len() % 8;
        for i in (0..n).step_by(8) {
            let mut lanes = [0f32; 8];
            for (l, &v) in lanes.iter_mut().zip(&y[i..i + 8]) {
                *l = f(v);
            }
            // SAFETY: `LANES == 8` means the caller enabled AVX2 and F16C; 8 values in `lanes`
            // and at `y[i..]`.
            unsafe {
                let r = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(lanes.as_ptr()));
                _mm256_storeu_ps(y.as_mut_ptr().add(i), _mm256_cvtph_ps(r));
            }
        }
        for a in &mut y[n..] {
            *a = f16::from_f32(f(*a)).to_f32();
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if LANES == 16 {
        use std::arch::x86_64::*;
        let n = y.len() - y.len() % 16;
        for i in (0..n).step_by(16) {
            let mut lanes = [0f32; 16];
            for (l, &v) in lanes.iter_mut().zip(&y[i..i + 16]) {
                *l = f(v);
            }
            // SAFETY: `LANES == 16` means the caller enabled AVX-512F and F16C; 16 values in `lanes`
            // and at `y[i..]`.
            unsafe {
                let r = _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm512_loadu_ps(lanes.as_ptr()));
                _mm512_storeu_ps(y.as_mut_ptr().add(i), _mm512_cvtph_ps(r));
            }
        }
        for a in &mut y[n..] {
            *a = f16::from_f32(f(*a)).to_f32();
        }
        return;
    }
    for a in y.iter_mut() {
        *a = f16::from_f32(f(*a)).to_f32();
    }
}

/// `dst = f32(src)`.
#[inline(always)]
fn widen<const LANES: usize>(src: &[f16], dst: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if LANES == 8 {
        use std::arch::x86_64::*;
        let n = src.len() - src.len() % 8;
        // SAFETY: `LANES == 8` means the caller enabled AVX2 and F16C; `i + 8 <= n <= len` of both.
        unsafe {
            for i in (0..n).step_by(8) {
                let h = _mm_loadu_si128(src.as_ptr().add(i).cast());
                _mm256_storeu_ps(dst.as_mut_ptr().add(i), _mm256_cvtph_ps(h));
            }
        }
        for (o, &v) in dst[n..].iter_mut().zip(&src[n..]) {
            *o = v.to_f32();
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if LANES == 16 {
        use std::arch::x86_64::*;
        let n = src.len() - src.len() % 16;
        // SAFETY: `LANES == 16` means the caller enabled AVX-512F; `i + 16 <= n <= len` of both.
        unsafe {
            for i in (0..n).step_by(16) {
                let h = _mm256_loadu_si256(src.as_ptr().add(i).cast());
                _mm512_storeu_ps(dst.as_mut_ptr().add(i), _mm512_cvtph_ps(h));
            }
        }
        for (o, &v) in dst[n..].iter_mut().zip(&src[n..]) {
            *o = v.to_f32();
        }
        return;
    }
    for (o, &v) in dst.iter_mut().zip(src) {
        *o = v.to_f32();
    }
}

/// A task's buffers, kept per thread between calls: the rounded queries, the scores (then the
/// `vs` factors), the `ms` factors, each head's `1 / S`, the f16 accumulators (as f32) and a widened key row.
#[derive(Default)]
struct Scratch {
    q: Vec<f32>,
    w: Vec<f32>,
    ms: Vec<f32>,
    inv: Vec<f32>,
    acc: Vec<f32>,
    kf: Vec<f32>,
    /// Per head: the running max and sum of the online softmax.
    state: Vec<(f32, f32)>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}
