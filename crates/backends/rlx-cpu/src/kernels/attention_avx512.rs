//! AVX-512 products of one attention tile ([`super::attention`]): the scores `S = scale · Q Kᵀ`
//! of a block of query rows against a block of keys, and `O (+)= P V`.
//!
//! Why not the `gemm` crate here (it runs both products elsewhere): at an encoder's tile shapes
//! (64 query rows, 128 keys, head dim 32) each call packs its operands again and its tiles are
//! not sized for `K = 32`; MiniLM-L6's attention (`B = 1`, 12 heads, seq 128, bias mask) ran at
//! 56 GFLOP/s, 0.44 ms per layer; 0.38 ms with these kernels (bench/RESULTS.md "Session 9").
//!
//! Why not sgemm's micro-kernel (`sgemm.rs`): it reads `A` packed as rows of `KC` floats and `B`
//! as packed `NR`-column panels at constant displacements; here `P` sits in the score tile at
//! row stride `cols` and `V`'s rows are read in place at any stride, and packing either per tile
//! would cost as much as the `K = 128` product it feeds.
//!
//! `S`: the key block is transposed once per (tile, key block) into `kt` (`d` rows of [`W`]
//! floats, 16 × 16 register transposes, zero columns up to the next 64) and the micro-kernel
//! keeps `H ≤ 6` rows × 64 columns of `S` in 24 zmm registers, one broadcast of `Q[r, p]` and
//! four aligned loads of `kt` row `p` per step; `scale` multiplies the finished sums (as the
//! `gemm` call's `beta = scale` did). `P V`: `V`'s rows are read in place (contiguous `Dv`
//! floats at any row stride), `H` rows × up to 64 columns of `O` in registers, the last vector
//! of a row under a mask. Every element is one f32 FMA chain in `p` (resp. key) order.

use super::math_avx512::tail_mask;
use std::arch::x86_64::*;

/// Columns of a transposed key block (`kt` row stride): the key block of the attention kernel.
pub const W: usize = super::attention::BK;
/// Largest head dim the transposed key block holds (`W × MAX_D` f32 = 128 KiB on the stack).
pub const MAX_D: usize = 256;

/// A transposed key block, 64-byte aligned.
#[repr(C, align(64))]
pub struct KeysT(pub [std::mem::MaybeUninit<f32>; W * MAX_D]);

impl KeysT {
    /// An uninitialized block (written by [`pack_keys`] before any read). (Built as one
    /// uninitialized array: the array-repeat form `[MaybeUninit::uninit(); N]` compiled to a
    /// 128 KiB `memset` per attention tile, 5% of MiniLM-L6's attention.)
    pub fn new() -> Self {
        type Block = [std::mem::MaybeUninit<f32>; W * MAX_D];
        // SAFETY: an array of `MaybeUninit` is valid uninitialized.
        KeysT(unsafe { std::mem::MaybeUninit::<Block>::uninit().assume_init() })
    }

    fn ptr(&mut self) -> *mut f32 {
        self.0.as_mut_ptr().cast()
    }
}

/// `kt[p · W + j] = k[j · ks + p]` for `j < cols ≤ W`, `p < d ≤ MAX_D`; zeros in columns
/// `cols ..` up to the next multiple of 64 (read, never stored, by [`scores`]).
///
/// # Safety
/// `k` addresses `cols` rows of `d` readable floats at stride `ks`; `sgemm::available()` (its
/// `transpose16`: AVX-512F, or AVX2 for [`super::attention_vec`]).
pub unsafe fn pack_keys(k: *const f32, ks: usize, cols: usize, d: usize, kt: &mut KeysT) {
    debug_assert!(cols <= W && d <= MAX_D);
    let dst = kt.ptr();
    let (jf, pf) = (cols / 16 * 16, d / 16 * 16);
    // SAFETY (whole body): reads in rows < cols, columns < d of `k`; writes in rows < d,
    // columns < W of `kt`.
    unsafe {
        for j in (0..jf).step_by(16) {
            for p in (0..pf).step_by(16) {
                super::sgemm::transpose16(k.add(j * ks + p), ks, dst.add(p * W + j), W);
            }
        }
        for p in 0..d {
            let row = dst.add(p * W);
            let from = if p < pf { jf } else { 0 };
            for j in from..cols {
                *row.add(j) = *k.add(j * ks + p);
            }
            std::ptr::write_bytes(row.add(cols), 0, cols.next_multiple_of(64).min(W) - cols);
        }
    }
}

/// `s[r · cols + j] = scale · Σ_p q[r · qs + p] · kt[p · W + j]` for `r < rows`, `j < cols`.
///
/// # Safety
/// `q` addresses `rows` rows of `d` readable floats at stride `qs`; `kt` was filled by
/// [`pack_keys`] for `cols` keys and head dim `d`; `s` addresses `rows · cols` writable floats;
/// AVX-512F is available.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn scores(
    rows: usize,
    cols: usize,
    d: usize,
    q: *const f32,
    qs: usize,
    kt: &mut KeysT,
    scale: f32,
    s: *mut f32,
) {
    let kt = kt.ptr() as *const f32;
    for r0 in (0..rows).step_by(6) {
        let h = 6.min(rows - r0);
        for j0 in (0..cols).step_by(64) {
            let w = 64.min(cols - j0);
            let (q, s) = (q.wrapping_add(r0 * qs), s.wrapping_add(r0 * cols + j0));
            macro_rules! by_rows {
                ($($h:literal)*) => {
                    // SAFETY: the caller's contract, restricted to rows r0.., columns j0...
                    match h { $($h => unsafe { score_tile::<$h>(d, q, qs, kt.add(j0), scale, s, cols, w) },)* _ => unreachable!() }
                };
            }
            by_rows!(1 2 3 4 5 6)
        }
    }
}

/// `H` rows × `w ≤ 64` columns of [`scores`]; `kt` at the tile's first column.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn score_tile<const H: usize>(
    d: usize,
    q: *const f32,
    qs: usize,
    kt: *const f32,
    scale: f32,
    s: *mut f32,
    ss: usize,
    w: usize,
) {
    // SAFETY (whole body): the caller's contract; `kt` rows hold 64 readable, 64-byte-aligned
    // columns from the tile's first one (zero padded by `pack_keys`).
    unsafe {
        let mut acc = [[_mm512_setzero_ps(); 4]; H];
        for p in 0..d {
            let b: [__m512; 4] = std::array::from_fn(|v| _mm512_load_ps(kt.add(p * W + v * 16)));
            for (i, ri) in acc.iter_mut().enumerate() {
                let a = _mm512_set1_ps(*q.add(i * qs + p));
                for (x, bv) in ri.iter_mut().zip(&b) {
                    *x = _mm512_fmadd_ps(a, *bv, *x);
                }
            }
        }
        let sc = _mm512_set1_ps(scale);
        for (i, ri) in acc.iter().enumerate() {
            for (v, x) in ri.iter().enumerate() {
                let n = w.saturating_sub(v * 16).min(16);
                if n > 0 {
                    _mm512_mask_storeu_ps(s.add(i * ss + v * 16), tail_mask(n), _mm512_mul_ps(sc, *x));
                }
            }
        }
    }
}

/// `o[r · os + c] (+)= Σ_j p[r · cols + j] · v[j · vs + c]` for `r < rows`, `c < dv`:
/// accumulating into `o` when `acc`, else overwriting it.
///
/// # Safety
/// `p` addresses `rows · cols` readable floats, `v` `cols` rows of `dv` readable floats at
/// stride `vs`, `o` `rows` rows of `dv` writable floats at stride `os` (not overlapping `p`,
/// `v`); AVX-512F is available.
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn accumulate_pv(
    rows: usize,
    cols: usize,
    dv: usize,
    p: *const f32,
    v: *const f32,
    vs: usize,
    o: *mut f32,
    os: usize,
    acc: bool,
) {
    for c0 in (0..dv).step_by(64) {
        let w = 64.min(dv - c0);
        let hmax = if w <= 32 { 12 } else { 6 };
        for r0 in (0..rows).step_by(hmax) {
            let h = hmax.min(rows - r0);
            let (p, v, o) = (p.wrapping_add(r0 * cols), v.wrapping_add(c0), o.wrapping_add(r0 * os + c0));
            macro_rules! by_rows {
                ($nv:literal; $($h:literal)*) => {
                    // SAFETY: the caller's contract, restricted to rows r0.., columns c0...
                    match h { $($h => unsafe { pv_tile::<$nv, $h>(cols, p, v, vs, o, os, acc, w) },)* _ => unreachable!() }
                };
            }
            if w <= 32 { by_rows!(2; 1 2 3 4 5 6 7 8 9 10 11 12) } else { by_rows!(4; 1 2 3 4 5 6) }
        }
    }
}

/// `H` rows × `w ≤ 16 · NV` columns of [`accumulate_pv`].
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn pv_tile<const NV: usize, const H: usize>(
    cols: usize,
    p: *const f32,
    v: *const f32,
    vs: usize,
    o: *mut f32,
    os: usize,
    acc: bool,
    w: usize,
) {
    let mask: [u16; NV] = std::array::from_fn(|i| tail_mask(w.saturating_sub(i * 16).min(16)));
    // SAFETY (whole body): the caller's contract; loads and stores past `w` columns are masked
    // off (masked-off lanes are never accessed).
    unsafe {
        let mut r = [[_mm512_setzero_ps(); NV]; H];
        if acc {
            for (i, ri) in r.iter_mut().enumerate() {
                for (c, x) in ri.iter_mut().enumerate() {
                    *x = _mm512_maskz_loadu_ps(mask[c], o.add(i * os + c * 16));
                }
            }
        }
        for j in 0..cols {
            let b: [__m512; NV] = std::array::from_fn(|c| _mm512_maskz_loadu_ps(mask[c], v.add(j * vs + c * 16)));
            for (i, ri) in r.iter_mut().enumerate() {
                let a = _mm512_set1_ps(*p.add(i * cols + j));
                for (x, bv) in ri.iter_mut().zip(&b) {
                    *x = _mm512_fmadd_ps(a, *bv, *x);
                }
            }
        }
        for (i, ri) in r.iter().enumerate() {
            for (c, x) in ri.iter().enumerate() {
                if mask[c] != 0 {
                    _mm512_mask_storeu_ps(o.add(i * os + c * 16), mask[c], *x);
                }
            }
        }
    }
}
