//! The two products of one attention tile ([`super::attention`]) on any [`Vf32`] width: the
//! scores `S = scale · Q Kᵀ` of a block of query rows against a block of keys, and `O (+)= P V`,
//! compiled for AVX-512 ([`F32x16`]: [`scores_avx512`], [`accumulate_pv_avx512`]) and for
//! AVX2 + FMA ([`F32x8`]: [`scores_avx2`], [`accumulate_pv_avx2`]).
//!
//! Why not the `gemm` crate here (it runs both products elsewhere): at an encoder's tile shapes
//! (64 query rows, 128 keys, head dim 32) each call packs its operands again and its tiles are
//! not sized for `K = 32`; MiniLM-L6's attention (`B = 1`, 12 heads, seq 128, bias mask) ran at
//! 56 GFLOP/s, 0.44 ms per layer; 0.38 ms with these kernels (bench/RESULTS.md "Session 9").
//! Why not sgemm's micro-kernel (`sgemm.rs`): it reads `A` packed as rows of `KC` floats and `B`
//! as packed `NR`-column panels at constant displacements; here `P` sits in the score tile at
//! row stride `cols` and `V`'s rows are read in place at any stride, and packing either per tile
//! would cost as much as the `K = 128` product it feeds.
//!
//! `S`: the key block is transposed once per (tile, key block) by [`pack_keys`] (`d` rows of
//! [`W`] floats, 16 × 16 register transposes, zero columns up to the next 64), then micro-tiles
//! of up to 6 rows × `NV` vectors of `S` in registers (AVX-512: 4 vectors, 24 of 32 zmm; AVX2:
//! 2, 12 of 16 ymm), one broadcast of `Q[r, p]` and `NV` loads of `kt` row `p` per step; `scale`
//! multiplies the finished sums. `P V`: `V`'s rows are read in place (contiguous `Dv` floats at
//! any row stride), the same micro-tiles of `O` (AVX-512: a chunk of at most 32 columns in 2
//! vectors × 12 rows), the last columns under a lane mask. Every element is one f32 FMA chain
//! in `p` (key) order: the same bits at both widths.

use super::vf32::{F32x8, F32x16, Vf32};

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
/// `transpose16` needs AVX-512F, or AVX2).
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

/// Query rows per micro-tile.
const MR: usize = 6;

/// The entry points of one width: [`scores`] and [`accumulate_pv`] compiled for `$features`
/// on `$v` with `$nv` vectors per micro-tile row.
macro_rules! entry_points {
    ($features:literal, $v:ty, $nv:literal, $scores:ident, $accumulate_pv:ident) => {
        /// [`scores`] at this width.
        ///
        /// # Safety
        /// As [`scores`]; the CPU has the target features this function is compiled for.
        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $scores(
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
            unsafe { scores::<$v, $nv>(rows, cols, d, q, qs, kt, scale, s) }
        }

        /// [`accumulate_pv`] at this width.
        ///
        /// # Safety
        /// As [`accumulate_pv`]; the CPU has the target features this function is compiled for.
        #[target_feature(enable = $features)]
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $accumulate_pv(
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
            unsafe { accumulate_pv::<$v, $nv>(rows, cols, dv, p, v, vs, o, os, acc) }
        }
    };
}

entry_points!("avx2,fma", F32x8, 2, scores_avx2, accumulate_pv_avx2);
entry_points!("avx512f,avx512vl,avx512bw,fma", F32x16, 4, scores_avx512, accumulate_pv_avx512);

/// `s[r · cols + j] = scale · Σ_p q[r · qs + p] · kt[p · W + j]` for `r < rows`, `j < cols`.
///
/// # Safety
/// `q` addresses `rows` rows of `d` readable floats at stride `qs`; `kt` was filled by
/// `pack_keys` for `cols` keys and head dim `d` (zero columns up to the next 64, so whole
/// vectors are read); `s` addresses `rows · cols` writable floats; `V`'s CPU features.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn scores<V: Vf32, const NV: usize>(
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
                    match h { $($h => unsafe { score_tile::<V, NV, $h>(d, q, qs, kt.add(j0), scale, s, cols, w) },)* _ => unreachable!() }
                };
            }
            by_rows!(1 2 3 4 5 6)
        }
    }
}

/// `H` rows × `w ≤ NV · LANES` columns of [`scores`]; `kt` at the tile's first column.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn score_tile<V: Vf32, const NV: usize, const H: usize>(
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
unsafe fn accumulate_pv<V: Vf32, const NV: usize>(
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
        let (p, v, o) = (p, v.wrapping_add(c0), o.wrapping_add(c0));
        // SAFETY: the caller's contract, restricted to columns c0...
        unsafe {
            if NV == 4 && w <= 2 * V::LANES {
                // A chunk of at most two vectors (an encoder's `Dv = 32` on AVX-512): twice the
                // rows per micro-tile in the same registers.
                pv_rows::<V, 2, 12>(rows, cols, p, v, vs, o, os, acc, w)
            } else {
                pv_rows::<V, NV, MR>(rows, cols, p, v, vs, o, os, acc, w)
            }
        }
    }
}

/// [`accumulate_pv`] over the `w ≤ NV · LANES` columns at `v`, `o`: micro-tiles of up to `H`
/// rows.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn pv_rows<V: Vf32, const NV: usize, const H: usize>(
    rows: usize,
    cols: usize,
    p: *const f32,
    v: *const f32,
    vs: usize,
    o: *mut f32,
    os: usize,
    acc: bool,
    w: usize,
) {
    let full = w == NV * V::LANES;
    for r0 in (0..rows).step_by(H) {
        let h = H.min(rows - r0);
        let (p, o) = (p.wrapping_add(r0 * cols), o.wrapping_add(r0 * os));
        macro_rules! by_rows {
            ($($h:literal)*) => {
                // SAFETY: the caller's contract, restricted to rows r0...
                match (h, full) {
                    $(($h, true) => unsafe { pv_tile::<V, NV, $h, true>(cols, p, v, vs, o, os, acc, w) },
                      ($h, false) => unsafe { pv_tile::<V, NV, $h, false>(cols, p, v, vs, o, os, acc, w) },)*
                    _ => unreachable!()
                }
            };
        }
        if H <= MR { by_rows!(1 2 3 4 5 6) } else { by_rows!(1 2 3 4 5 6 7 8 9 10 11 12) }
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
unsafe fn pv_tile<V: Vf32, const NV: usize, const H: usize, const FULL: bool>(
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
