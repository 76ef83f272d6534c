//! Exact mode with many activation rows (prefill, M >= [`super::amx::MIN_M`]) on AVX-512 VNNI:
//! the activation rows as block floating point (the digits of [`super::bfp`]: per 32-element
//! block `x_i = s_b · n_i`, `s_b` a power of two, each `n_i` split into three signed bytes,
//! `n = 2¹⁶ h + 2⁸ m + l`), multiplied in [`super::amx`]'s panels of 16 weight rows × 16
//! activation rows with three `vpdpbusd` per group of 4 values, one per digit plane, where the
//! fast mode runs one. The planes are joined in the integers (`(2⁸ C_h + C_m) · 2⁸ + C_l`, plus
//! Q4_0's `-8 Σ n` / Q5_0's `-16 Σ n`), converted to f32 once per block and scaled by `s_b`
//! (exact: a power of two) and the weights' `d` (Q4_1 / Q5_1 add `m · Σ x_b`, Q4_K / Q5_K
//! subtract `dmin m_j · Σ x_j`: [`super::amx`]'s `L` = 2 form). Each weight is unpacked once per
//! call into bytes, as the `tile` path dequantizes it once into f32; then one `vpdpbusd` does 64
//! multiply-adds where an FMA does 16, so three digit planes cost 3/4 of the f32 tile's
//! instructions: 128 × 896 × 4864 Q5_0 (Qwen2.5-0.5B's FFN), one Zen 4 core, 10.8–11.0 → 9.0–9.1
//! ms; Q4_K at 4864 × 896 10.6 → 9.7–9.8.
//!
//! Bits: one lane of a panel sums a whole block (32 products, where the decode kernels' lanes sum
//! 8), so `|n| ≤ 2^B` with `B` = 22 for the 4-bit schemes (`32 · 15 · 2²² < 2³¹`; Q4_0 `32 · 8 ·
//! 2²²`) and 21 for the 5-bit ones (`32 · 31 · 2²¹ < 2³¹`): the per-lane sums and Q4_0's /
//! Q5_0's corrections (`|off · Σ n| ≤ 2³⁰`) fit in `i32`, and the wrapping shifts and adds give
//! the exact integer. Error per element `≤ s_b / 2 ≤ 2^-B max_b |x|` (the decode kernel's bound,
//! `B` 21 as its Q8_0), then one rounding of the block's integer to f32 and f32 rounding of the
//! scaled sum over blocks.
//!
//! Not here: Q8_0 (`32 · 128 · 2^B` fits `i32` only for `B <= 18`) and Q6_K (its 16-element
//! sub-blocks each need their own conversion and scaling: 12.1–13.1 ms against the f32 tiles'
//! 10.6 for 128 × 4864 × 896, one Zen 4 core, in a trial); they run the `tile` path. So does a
//! call whose activations hold a non-finite value or a block below 2⁻⁸¹ ([`run`] returns false).

use super::amx::{self, Acts, WeightRows};
use super::bfp::{block_ints, digits};
use super::grown;
use rlx_gguf::GgmlType;

/// Activation rows per panel.
const T: usize = 16;

/// True when `ty` has this kernel.
pub(super) fn has_path(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q4_K | GgmlType::Q5_K)
}

/// Bits `B` of `|n|` for `ty` (see the module docs).
fn bits(ty: GgmlType) -> u32 {
    if matches!(ty, GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q5_K) { 21 } else { 22 }
}

/// The weights' offset as unsigned bytes where the scheme has one (Q4_0 8, Q5_0 16: its
/// `-off · Σ n` goes into the integers), else 0.
fn offset(ty: GgmlType) -> i32 {
    match ty {
        GgmlType::Q4_0 => 8,
        GgmlType::Q5_0 => 16,
        _ => 0,
    }
}

/// The activation side of a call, on the calling thread (grown to the largest call).
#[derive(Default)]
struct BfpActs {
    /// `[m-block][k / 4][plane h, m, l][16 rows][4]` digits.
    vnni: Vec<u8>,
    /// `[m-block][block][16 rows]`: `s_b`.
    dx: Vec<f32>,
    /// `[m-block][block][16 rows]`: `Σ x_b = s_b Σ n`.
    sx: Vec<f32>,
    /// `[m-block][block][16 rows]`: Q4_0's `-8 Σ n`, Q5_0's `-16 Σ n`; empty for the others.
    corr: Vec<i32>,
}

thread_local! {
    static ACTS: std::cell::RefCell<BfpActs> = std::cell::RefCell::new(BfpActs::default());
}

/// `y = x · dequant(w)ᵀ` (`x`: `m × k`, `w` the `n` weight rows of `rows`, `y`: `m × n`), the
/// weight rows in chunks of `chunk` (a multiple of 16) across threads. False (and `y`
/// untouched) where `x` holds a non-finite value or a block whose largest magnitude is nonzero
/// and below 2⁻⁸¹.
///
/// # Safety
/// AVX-512F/BW/VL + VNNI + FMA + AVX2 + F16C; `has_path(ty)`, `k` a multiple of the block
/// size, the lengths as above.
pub(super) unsafe fn run(rows: WeightRows, (m, k): (usize, usize), chunk: usize, x: &[f32], y: &mut [f32]) -> bool {
    let ty = rows.ty;
    assert!(has_path(ty) && x.len() == m * k && k.is_multiple_of(32));
    ACTS.with_borrow_mut(|s| {
        // SAFETY: the features are the caller's contract; `x` is `m × k` (asserted).
        if !unsafe { layout_acts(ty, x, m, k, s) } {
            return false;
        }
        // The buffers hold what the largest call on this thread needed: `corr` is read (and
        // `L` = 1 chosen) only where this scheme has an offset.
        let corr = if offset(ty) != 0 { &s.corr[..m.div_ceil(T) * (k / 32) * T] } else { &[] };
        let acts = Acts { vnni: &s.vnni, sums: &[], dx: &s.dx, sx: &s.sx, corr, bfp: true };
        // SAFETY: the caller's contract; `acts` was laid out for `(ty, m, k)` just now.
        unsafe { amx::run(rows, (m, k), chunk, &acts, y, false) };
        true
    })
}

/// Convert the `m` rows of `x` (`m × k`) into `s` ([`BfpActs`]' layout; the rows of the last
/// m-block past `m` zero). False at the first block that is not converted (see [`run`]).
///
/// # Safety
/// AVX-512F/BW/VL; `x.len() == m · k`, `k` a multiple of 32.
#[target_feature(enable = "avx512f,avx512bw,avx512vl")]
unsafe fn layout_acts(ty: GgmlType, x: &[f32], m: usize, k: usize, s: &mut BfpActs) -> bool {
    use std::arch::x86_64::*;
    let (nb, mb, bits) = (k / 32, m.div_ceil(T), bits(ty));
    let off = offset(ty);
    let vnni = grown(&mut s.vnni, 3 * mb * k * T).as_mut_ptr();
    let (dx, sx) = (grown(&mut s.dx, mb * nb * T), grown(&mut s.sx, mb * nb * T));
    let corr = grown(&mut s.corr, if off != 0 { mb * nb * T } else { 0 });
    for mi in 0..mb * T {
        let (i, r) = (mi / T, mi % T);
        for bk in 0..nb {
            let at = (i * nb + bk) * T + r;
            // SAFETY (`dst` and the loads below): group `g < 8` of block `bk < k / 32` in
            // m-block `i < mb`, plane `p < 3`, row `r < 16`: inside the `3 · mb · k · 16` bytes;
            // row `mi < m` of `x` holds block `bk`.
            let dst = |g: usize, p: usize| unsafe { vnni.add(((i * (k / 4) + 8 * bk + g) * 3 + p) * 4 * T + 4 * r) };
            if mi >= m {
                for g in 0..8 {
                    for p in 0..3 {
                        // SAFETY: see `dst`.
                        unsafe { dst(g, p).cast::<u32>().write_unaligned(0) };
                    }
                }
                (dx[at], sx[at]) = (0.0, 0.0);
                if off != 0 {
                    corr[at] = 0;
                }
                continue;
            }
            // SAFETY: see `dst`.
            let Some((sb, ns)) = (unsafe { block_ints(x.as_ptr().add(mi * k + 32 * bk), bits) }) else { return false };
            let total = _mm512_add_epi32(ns[0], ns[1]);
            for (hf, &n) in ns.iter().enumerate() {
                for (p, d) in digits(n).into_iter().enumerate() {
                    // Elements 16 hf .. 16 hf + 16: groups 4 hf .. 4 hf + 4.
                    let mut words = [0u32; 4];
                    // SAFETY: 16 bytes written into `words`.
                    unsafe { _mm_storeu_si128(words.as_mut_ptr().cast(), _mm512_cvtepi32_epi8(d)) };
                    for (j, &wd) in words.iter().enumerate() {
                        // SAFETY: see `dst`.
                        unsafe { dst(4 * hf + j, p).cast::<u32>().write_unaligned(wd) };
                    }
                }
            }
            // |Σ n| ≤ 2^27: exact in i32; one rounding to f32, exact scaling.
            let tot = _mm512_reduce_add_epi32(total);
            (dx[at], sx[at]) = (sb, tot as f32 * sb);
            if off != 0 {
                corr[at] = -off * tot;
            }
        }
    }
    true
}

/// `C = A · n + corr` for one block: `A` 16 weight rows of 32 unsigned bytes (32 apart) at `a`,
/// the activation digits of 16 rows at `b` (8 groups of 4 values, each three 64-byte planes `h,
/// m, l`), `C` 16 rows (weight rows) of 16 `i32` (activation rows) at `c`, each `(2⁸ C_h + C_m)
/// · 2⁸ + C_l` (wrapping, exact where the sum fits, see the module docs) plus `corr`'s 16 `i32`
/// (null: none). Per half (8 weight rows) 24 accumulators stay in registers.
///
/// # Safety
/// AVX-512F + VNNI; the operands readable, `c` writable for 1 KiB.
#[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
pub(super) unsafe fn product(a: *const u8, b: *const u8, corr: *const i32, c: *mut i32) {
    use std::arch::x86_64::*;
    // SAFETY: rows `8 h + r < 16` of `A` (32 bytes each), groups `g < 8` of `b` (192 bytes
    // each), `corr`'s 16 lanes, rows of `C` (caller).
    unsafe {
        let init = if corr.is_null() { _mm512_setzero_si512() } else { _mm512_loadu_si512(corr.cast()) };
        for h in 0..2 {
            let (mut ch, mut cm, mut cl) = ([_mm512_setzero_si512(); 8], [_mm512_setzero_si512(); 8], [init; 8]);
            for g in 0..8 {
                let p = b.add(192 * g);
                let (bh, bm, bl) = (
                    _mm512_loadu_si512(p.cast()),
                    _mm512_loadu_si512(p.add(64).cast()),
                    _mm512_loadu_si512(p.add(128).cast()),
                );
                for r in 0..8 {
                    let av = _mm512_set1_epi32(a.add((8 * h + r) * 32 + 4 * g).cast::<i32>().read_unaligned());
                    ch[r] = _mm512_dpbusd_epi32(ch[r], av, bh);
                    cm[r] = _mm512_dpbusd_epi32(cm[r], av, bm);
                    cl[r] = _mm512_dpbusd_epi32(cl[r], av, bl);
                }
            }
            for r in 0..8 {
                let hm = _mm512_add_epi32(_mm512_slli_epi32::<8>(ch[r]), cm[r]);
                let v = _mm512_add_epi32(_mm512_slli_epi32::<8>(hm), cl[r]);
                _mm512_storeu_si512(c.add((8 * h + r) * T).cast(), v);
            }
        }
    }
}
