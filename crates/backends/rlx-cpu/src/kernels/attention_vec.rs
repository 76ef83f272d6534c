//! The two products of one attention tile ([`super::attention`]) on any [`Vf32`] width: the
//! scores `S = scale · Q Kᵀ` of a block of query rows against a block of keys, and `O (+)= P V`.
//! Compiled for AVX2 + FMA ([`F32x8`]: [`scores_avx2`], [`accumulate_pv_avx2`]), where the CPU
//! has no AVX-512 ([`super::attention_avx512`] holds the 16-lane form, which predates [`Vf32`]
//! and would move here with an `__m512` implementation measured on an AVX-512 host).
//!
//! The same scheme as the AVX-512 kernels, for the same reasons (the `gemm` crate repacks its
//! operands per call and its tiles do not fit `K = 32`; sgemm's micro-kernel wants packed
//! panels): the key block transposed once per (tile, key block) by
//! [`super::attention_avx512::pack_keys`], then micro-tiles of [`MR`] rows × [`NV`] vectors
//! (12 accumulators of 16 ymm registers at 8 lanes), one broadcast of `Q[r, p]` (`P[r, j]`)
//! and [`NV`] loads of the transposed key row `p` (the value row `j`, read in place at its
//! stride) per step; `scale` multiplies the finished sums. Every element is one f32 FMA chain
//! in `p` (key) order, as in the AVX-512 kernels: the same bits at both widths. The last
//! columns of a tile are stored (value columns loaded) under a lane mask.

use super::attention_avx512::{KeysT, W};
use super::vf32::{F32x8, Vf32};

/// Query rows per micro-tile.
const MR: usize = 6;
/// Vectors per micro-tile row.
const NV: usize = 2;

/// [`scores`] on AVX2 + FMA.
///
/// # Safety
/// As [`scores`]; AVX2 and FMA are available.
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn scores_avx2(
    rows: usize,
    cols: usize,
    d: usize,
    q: *const f32,
    qs: usize,
    kt: &KeysT,
    scale: f32,
    s: *mut f32,
) {
    // SAFETY: the caller's contract.
    unsafe { scores::<F32x8>(rows, cols, d, q, qs, kt, scale, s) }
}

/// [`accumulate_pv`] on AVX2 + FMA.
///
/// # Safety
/// As [`accumulate_pv`]; AVX2 and FMA are available.
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
pub unsafe fn accumulate_pv_avx2(
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
    // SAFETY: the caller's contract.
    unsafe { accumulate_pv::<F32x8>(rows, cols, dv, p, v, vs, o, os, acc) }
}

/// `s[r · cols + j] = scale · Σ_p q[r · qs + p] · kt[p · W + j]` for `r < rows`, `j < cols`.
///
/// # Safety
/// `q` addresses `rows` rows of `d` readable floats at stride `qs`; `kt` was filled by
/// `pack_keys` for `cols` keys and head dim `d` (zero columns up to the next 64, so whole
/// vectors are read); `s` addresses `rows · cols` writable floats; `V`'s CPU features.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn scores<V: Vf32>(
    rows: usize,
    cols: usize,
    d: usize,
    q: *const f32,
    qs: usize,
    kt: &KeysT,
    scale: f32,
    s: *mut f32,
) {
    let kt = kt.0.as_ptr().cast::<f32>();
    let tw = NV * V::LANES;
    for r0 in (0..rows).step_by(MR) {
        let h = MR.min(rows - r0);
        for j0 in (0..cols).step_by(tw) {
            let w = tw.min(cols - j0);
            let (q, s) = (q.wrapping_add(r0 * qs), s.wrapping_add(r0 * cols + j0));
            macro_rules! by_rows {
                ($($h:literal)*) => {
                    // SAFETY: the caller's contract, restricted to rows r0.., columns j0...
                    match h { $($h => unsafe { score_tile::<V, $h>(d, q, qs, kt.add(j0), scale, s, cols, w) },)* _ => unreachable!() }
                };
            }
            by_rows!(1 2 3 4 5 6)
        }
    }
}

/// `H` rows × `w ≤ NV · LANES` columns of [`scores`]; `kt` at the tile's first column.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn score_tile<V: Vf32, const H: usize>(
    d: usize,
    q: *const f32,
    qs: usize,
    kt: *const f32,
    scale: f32,
    s: *mut f32,
    ss: usize,
    w: usize,
) {
    // SAFETY (whole body): the caller's contract; `kt` rows hold `NV · LANES` readable columns
    // from the tile's first one (zero padded by `pack_keys`); stores past `w` are masked off.
    unsafe {
        let mut acc = [[V::splat(0.0); NV]; H];
        for p in 0..d {
            let mut b = [V::splat(0.0); NV];
            for (v, x) in b.iter_mut().enumerate() {
                *x = V::load(kt.add(p * W + v * V::LANES));
            }
            for (i, ri) in acc.iter_mut().enumerate() {
                let a = V::splat(*q.add(i * qs + p));
                for (x, bv) in ri.iter_mut().zip(&b) {
                    *x = a.fmadd(*bv, *x);
                }
            }
        }
        let sc = V::splat(scale);
        for (i, ri) in acc.iter().enumerate() {
            for (v, x) in ri.iter().enumerate() {
                store_n(sc.mul(*x), s.add(i * ss + v * V::LANES), w.saturating_sub(v * V::LANES).min(V::LANES));
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
/// `v`); `V`'s CPU features.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn accumulate_pv<V: Vf32>(
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
    let tw = NV * V::LANES;
    for c0 in (0..dv).step_by(tw) {
        let w = tw.min(dv - c0);
        for r0 in (0..rows).step_by(MR) {
            let h = MR.min(rows - r0);
            let (p, v, o) = (p.wrapping_add(r0 * cols), v.wrapping_add(c0), o.wrapping_add(r0 * os + c0));
            macro_rules! by_rows {
                ($($h:literal)*) => {
                    // SAFETY: the caller's contract, restricted to rows r0.., columns c0...
                    match (h, w == tw) {
                        $(($h, true) => unsafe { pv_tile::<V, $h, true>(cols, p, v, vs, o, os, acc, w) },
                          ($h, false) => unsafe { pv_tile::<V, $h, false>(cols, p, v, vs, o, os, acc, w) },)*
                        _ => unreachable!()
                    }
                };
            }
            by_rows!(1 2 3 4 5 6)
        }
    }
}

/// Lanes `0..n` from `at` (all of a vector when `n == LANES`), zero in the others; reads
/// nothing past `at + n`.
#[inline(always)]
unsafe fn load_n<V: Vf32>(at: *const f32, n: usize) -> V {
    // SAFETY: the caller's contract.
    unsafe {
        if n == V::LANES {
            V::load(at)
        } else if n > 0 {
            V::load_part(at, n, 0.0)
        } else {
            V::splat(0.0)
        }
    }
}

/// Lanes `0..n` of `x` to `at` (all of them when `n == LANES`); writes nothing past `at + n`.
#[inline(always)]
unsafe fn store_n<V: Vf32>(x: V, at: *mut f32, n: usize) {
    // SAFETY: the caller's contract.
    unsafe {
        if n == V::LANES {
            x.store(at)
        } else if n > 0 {
            x.store_part(at, n)
        }
    }
}

/// `H` rows × `w ≤ NV · LANES` columns of [`accumulate_pv`] (`FULL`: `w == NV · LANES`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn pv_tile<V: Vf32, const H: usize, const FULL: bool>(
    cols: usize,
    p: *const f32,
    v: *const f32,
    vs: usize,
    o: *mut f32,
    os: usize,
    acc: bool,
    w: usize,
) {
    // Lanes of vector `c` inside the tile's `w` columns.
    let mut n = [V::LANES; NV];
    if !FULL {
        for (c, x) in n.iter_mut().enumerate() {
            *x = w.saturating_sub(c * V::LANES).min(V::LANES);
        }
    }
    // SAFETY (whole body): the caller's contract; loads and stores past `w` columns are masked
    // off (masked-off lanes are never accessed).
    unsafe {
        let mut r = [[V::splat(0.0); NV]; H];
        if acc {
            for (i, ri) in r.iter_mut().enumerate() {
                for (c, x) in ri.iter_mut().enumerate() {
                    *x = load_n(o.add(i * os + c * V::LANES), n[c]);
                }
            }
        }
        for j in 0..cols {
            let mut b = [V::splat(0.0); NV];
            for (c, x) in b.iter_mut().enumerate() {
                *x = load_n(v.add(j * vs + c * V::LANES), n[c]);
            }
            for (i, ri) in r.iter_mut().enumerate() {
                let a = V::splat(*p.add(i * cols + j));
                for (x, bv) in ri.iter_mut().zip(&b) {
                    *x = a.fmadd(*bv, *x);
                }
            }
        }
        for (i, ri) in r.iter().enumerate() {
            for (c, x) in ri.iter().enumerate() {
                store_n(*x, o.add(i * os + c * V::LANES), n[c]);
            }
        }
    }
}
