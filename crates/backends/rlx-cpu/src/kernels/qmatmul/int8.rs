//! Fast mode (opt-in, `CpuOptions::quantized_activations`): integer dots against quantized
//! activations, as llama.cpp's `ggml_vec_dot_q*_q8_0` / `_q8_K`. This file: the legacy schemes
//! Q8_0, Q4_0, Q4_1, Q5_0 and Q5_1 against Q8_0 activations, and the tile loop ([`tile`])
//! shared with the K-quant kernels of [`super::q8k`].
//!
//! Each activation row is quantized once per call to Q8_0 blocks into scratch, as llama.cpp's
//! x86 `quantize_row_q8_0` / `quantize_row_q8_1` (AVX path) do: `d = amax / 127` (stored
//! rounded to f16), `q = round_half_even(x · (127 / amax))`, and for Q4_1 the Q8_1 block sum
//! `s = f16(d · Σq)` (with the unrounded `d`). Then every weight row is a sum over blocks of
//! `d_w · d_x · Σ q_w·q_x` (f32 lanes, FMA per block, one horizontal sum at the end) plus, for
//! Q4_1, `Σ m_w · s_x` accumulated block by block in scalar FMAs: the order of
//! `ggml_vec_dot_q4_1_q8_1` / `_q8_0_q8_0`, so the fast mode reproduces llama.cpp's CPU results
//! up to the order of nothing (the integer dots are exact). With AVX-512 VNNI the 32-term
//! integer dot is one 256-bit `vpdpbusd` of the weights as unsigned bytes (nibbles; Q8_0:
//! `q + 128`) against the activation bytes, started from `-off · Σx` per lane (`off` = 8 for
//! Q4_0, 128 for Q8_0) so each lane holds the exact signed dot; f16 scales are converted 16
//! blocks at a time, and a kernel computes an `R × C` tile (weight rows × activation rows, see
//! [`tile`]) with one horizontal sum per output. CPUs
//! without VNNI (AVX-512 or AVX2 only) run Q4_0 / Q4_1 / Q8_0 with AVX2 `vpmaddubsw` +
//! `vpmaddwd` and llama.cpp's `|x| · sign(w, x)` trick (weights in `-127..=127`), one row at a
//! time; their other schemes run the exact mode (`super::select`: its vector f32 kernels are
//! faster than the scalar loop). Under `SimdLevel::Baseline`, or without AVX2, a scalar loop.
//!
//! Accuracy: it computes `dequant(W) · dequant(quantize_q8_0(x))` exactly up to f32 rounding of
//! the per-block sums, i.e. it differs from the f32 reference (the composite's body) by the
//! activation quantization error, at most `Σ_i |W[j, i]| · amax(block(i)) / 254` per output
//! (the rounding error of a Q8_0 value is at most half a step `d_x / 2 = amax / 254`). This is
//! what llama.cpp does, and what the tests check.

use half::f16;
use rlx_gguf::GgmlType;

/// Elements per legacy block.
pub(super) const QK: usize = 32;

/// True when `ty` has an integer kernel against Q8_0 activations.
pub(super) fn has_q8_0_path(ty: GgmlType) -> bool {
    matches!(ty, GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1)
}

/// 2: AVX-512 + VNNI, 1: AVX2 + FMA + F16C (with or without AVX-512), 0: scalar, as `simd`
/// (the caller's `SimdLevel`) allows on this CPU.
pub(super) fn simd_level(simd: crate::SimdLevel) -> u8 {
    #[cfg(target_arch = "x86_64")]
    {
        if simd.avx512() && std::is_x86_feature_detected!("avx512vnni") && simd.avx2() {
            2
        } else if simd.avx2() {
            1
        } else {
            0
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = simd;
        0
    }
}

/// True when `level` (of [`simd_level`]) has a vector integer kernel for `ty` and `m`
/// activation rows: VNNI every scheme of the fast mode and every `m`; AVX2 the Q4_0 / Q4_1 /
/// Q8_0 decode (`m` up to `max_rows`, [`super::int8_avx2`]: it runs one activation row at a
/// time). The scalar loop (level 0) is the portable reference.
pub(super) fn has_vector_kernel(ty: GgmlType, level: u8, m: usize, max_rows: usize) -> bool {
    match level {
        2 => true,
        1 => m <= max_rows && super::int8_avx2::has_kernel(ty),
        _ => false,
    }
}

/// Bytes of one quantized activation row of `k` values: `q i8[k] | d f32[k / 32] | s f32[k / 32]`
/// (`d` the f16-rounded block scale, `s = f16(d · Σ q)` per block: Q8_1's block sum).
pub(super) fn row_bytes_q8_0(k: usize) -> usize {
    k + 8 * (k / QK)
}

/// Quantize `x` (whole Q8_0 blocks) into one activation row `out` (layout of
/// [`row_bytes_q8_0`]) as llama.cpp's x86 `quantize_row_q8_1` (the AVX path, which
/// `quantize_row_q8_0` shares but for the sum): `id = 127 / amax` (not `1 / d`) and rounding
/// half to even (`_mm256_round_ps`), which differ from `quantize_row_q8_0_ref` (`1 / d`,
/// `roundf`) in the last bit of a few values per row.
#[inline(always)]
pub(super) fn quantize_q8_0(x: &[f32], out: &mut [u8]) {
    let nb = x.len() / QK;
    let (q, ds) = out.split_at_mut(x.len());
    let (d, s) = ds.split_at_mut(4 * nb);
    for (b, (xb, qb)) in x.chunks_exact(QK).zip(q.chunks_exact_mut(QK)).enumerate() {
        // Eight running maxima, not one chain of 32 dependent `maxss`.
        let mut m8 = [0.0f32; 8];
        for c in xb.chunks_exact(8) {
            for l in 0..8 {
                m8[l] = m8[l].max(c[l].abs());
            }
        }
        let amax = m8.iter().fold(0.0f32, |a, &v| a.max(v));
        let dd = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        let mut sum = 0i32;
        for (qv, &v) in qb.iter_mut().zip(xb) {
            let qi = (v * id).round_ties_even() as i8;
            *qv = qi as u8;
            sum += i32::from(qi);
        }
        let db = f16::from_f32(dd).to_f32();
        let sb = f16::from_f32(dd * sum as f32).to_f32();
        d[4 * b..4 * b + 4].copy_from_slice(&db.to_le_bytes());
        s[4 * b..4 * b + 4].copy_from_slice(&sb.to_le_bytes());
    }
}

#[inline(always)]
fn f16_at(b: &[u8], i: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[i], b[i + 1]])).to_f32()
}

#[inline(always)]
fn f32_at(b: &[u8], i: usize) -> f32 {
    f32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// An `R × C` tile of dots: weight rows `w` (`nb` blocks each) with quantized activation rows
/// `x` (the scheme's activation layout), `out[r][c]`.
pub(super) trait RowKernel {
    /// # Safety
    /// The kernel's CPU features must be available; every `w[r]` points to `nb` whole blocks,
    /// every `x[c]` to one whole activation row of `nb` blocks.
    unsafe fn rows<const R: usize, const C: usize>(w: [*const u8; R], x: [*const u8; C], nb: usize) -> [[f32; C]; R];
    /// Activation rows per tile at M > 1: [`C_TILE`], or [`C_WIDE`] where the kernel's
    /// registers allow it (the weight-side unpacking is then shared by twice the rows).
    const WIDE: bool = false;
    /// Weight rows per group at M = 1 (2, 4 or 8) for rows of 1 KiB or more, whose weights a
    /// model's decode streams from DRAM (shorter rows use 4). The prefetch distances of
    /// `decode::prefetch_ahead` are in rows and do not change with it.
    const DECODE_ROWS: usize = 4;
    /// At M = 1, weights of [`ONE_ROW_MIN_BYTES`] or more (a model's decode streams them from
    /// DRAM) run one row at a time: Q8_0, whose dot is cheap, waits on memory in groups.
    const STREAM_ROWS_ONE_BY_ONE: bool = false;
}

/// Weight bytes from which [`RowKernel::STREAM_ROWS_ONE_BY_ONE`] kernels decode one row at a
/// time. Q8_0 `--fast` on one AMD EPYC Zen 4 core (`qmatmul_bench 1 20 Q8_0 1 fast <copies> <K>
/// <N>`, three interleaved rounds), groups of 4 → one row: SmolLM2's head 576 × 49152 (28 MB,
/// DRAM) 1.92–2.09 → 1.27–1.30 ms, 896 × 4864 from DRAM 0.27–0.28 → 0.17–0.20; but 1536 × 576
/// from cache (0.9 MB) 0.023 → 0.031, so smaller weights keep the groups. (The AVX2 kernel made
/// the same change in session 46, `int8_avx2.rs`.)
const ONE_ROW_MIN_BYTES: usize = 2 << 20;

/// Activation rows per tile at M > 1 (one weight row per tile: larger tiles spill registers).
const C_TILE: usize = 4;
/// Activation rows per tile at M > 1 for [`RowKernel::WIDE`] kernels.
const C_WIDE: usize = 8;
/// Weight rows that pass over one activation tile while it stays in L1 (M > 1): the tile is
/// read from L1 by every row of the group instead of from L2 by every weight row.
const R_GROUP: usize = 8;

/// Every product of the weight rows `w` (`row_bytes` each, `nb` blocks) with the `m` activation
/// rows `x` (`x_row` bytes each): `put(activation row, weight row, value)`.
///
/// # Safety
/// `S`'s CPU features must be available; the lengths are whole rows.
#[inline(always)]
unsafe fn drive<S: RowKernel>(
    w: &[u8],
    row_bytes: usize,
    x: &[u8],
    x_row: usize,
    m: usize,
    nb: usize,
    put: &mut dyn FnMut(usize, usize, f32),
) {
    let nr = w.len() / row_bytes;
    // SAFETY: r < nr, mi < m: whole rows inside the slices; the kernel contract is ours.
    unsafe {
        let wp = |r: usize| w.as_ptr().add(r * row_bytes);
        let xp = |mi: usize| x.as_ptr().add(mi * x_row);
        if m == 1 {
            return decode_rows::<S>(w, row_bytes, x, nb, put);
        }
        for r0 in (0..nr).step_by(R_GROUP) {
            let rows = r0..(r0 + R_GROUP).min(nr);
            let mut mi = 0;
            if S::WIDE {
                mi = tiles::<S, C_WIDE>(&wp, &xp, rows.clone(), mi, m, nb, put);
            }
            mi = tiles::<S, C_TILE>(&wp, &xp, rows.clone(), mi, m, nb, put);
            tiles::<S, 1>(&wp, &xp, rows, mi, m, nb, put);
        }
    }
}

/// [`drive`] at M = 1: [`decode`] in the kernel's groups of rows.
///
/// # Safety
/// As [`drive`].
#[inline(always)]
unsafe fn decode_rows<S: RowKernel>(
    w: &[u8],
    row_bytes: usize,
    x: &[u8],
    nb: usize,
    put: &mut dyn FnMut(usize, usize, f32),
) {
    // Short rows (a small model, whose weights stay in cache) keep groups of 4: groups of 8
    // made SmolLM2's `--fast` generation 3% slower.
    let group = if S::STREAM_ROWS_ONE_BY_ONE && w.len() >= ONE_ROW_MIN_BYTES {
        1
    } else if row_bytes >= 1024 {
        S::DECODE_ROWS
    } else {
        4
    };
    // SAFETY: the caller's contract.
    unsafe {
        match group {
            1 => decode::<S, 1>(w, row_bytes, x, nb, put),
            2 => decode::<S, 2>(w, row_bytes, x, nb, put),
            8 => decode::<S, 8>(w, row_bytes, x, nb, put),
            _ => decode::<S, 4>(w, row_bytes, x, nb, put),
        }
    }
}

/// [`drive`] at M = 1: the weight rows in groups of `R` against the one activation row `x`.
///
/// # Safety
/// As [`drive`].
#[inline(always)]
unsafe fn decode<S: RowKernel, const R: usize>(
    w: &[u8],
    row_bytes: usize,
    x: &[u8],
    nb: usize,
    put: &mut dyn FnMut(usize, usize, f32),
) {
    let nr = w.len() / row_bytes;
    // SAFETY: r < nr: whole rows inside `w`; the kernel contract is the caller's.
    unsafe {
        let wp = |r: usize| w.as_ptr().add(r * row_bytes);
        // The kernels prefetch the rows `prefetch_rows` on in step with the blocks they read
        // (`C == 1`, `decode::prefetch_ahead`); the first ones here.
        super::decode::prefetch(w, R * row_bytes, super::decode::prefetch_rows(row_bytes) * row_bytes);
        let mut r = 0;
        while r + R <= nr {
            let o = S::rows::<R, 1>(std::array::from_fn(|i| wp(r + i)), [x.as_ptr()], nb);
            for (i, v) in o.iter().enumerate() {
                put(0, r + i, v[0]);
            }
            r += R;
        }
        for r in r..nr {
            put(0, r, S::rows::<1, 1>([wp(r)], [x.as_ptr()], nb)[0][0]);
        }
    }
}

/// [`drive`]'s tiles of `C` activation rows for the weight rows `rows`, from activation row `mi`
/// on while whole tiles fit; returns the first activation row left.
///
/// # Safety
/// As [`drive`]: `wp(r)` and `xp(i)` point to whole rows for `r` in `rows` and `i < m`.
#[inline(always)]
unsafe fn tiles<S: RowKernel, const C: usize>(
    wp: &impl Fn(usize) -> *const u8,
    xp: &impl Fn(usize) -> *const u8,
    rows: std::ops::Range<usize>,
    mut mi: usize,
    m: usize,
    nb: usize,
    put: &mut dyn FnMut(usize, usize, f32),
) -> usize {
    while mi + C <= m {
        let xs = std::array::from_fn(|c| xp(mi + c));
        for r in rows.clone() {
            // SAFETY: the caller's contract.
            for (c, &v) in unsafe { S::rows::<1, C>([wp(r)], xs, nb) }[0].iter().enumerate() {
                put(mi + c, r, v);
            }
        }
        mi += C;
    }
    mi
}

/// Bytes of one quantized activation row of `k` values for the weight scheme `ty`.
pub(super) fn act_row_bytes(ty: GgmlType, k: usize) -> usize {
    if super::q8k::has_q8_k_path(ty) { k / super::q8k::QK_K * super::q8k::Q8K_BYTES } else { row_bytes_q8_0(k) }
}

/// Quantize the activation rows `x` (`[m, k]`) for the weight scheme `ty` into `out`.
pub(super) fn quantize_acts(ty: GgmlType, x: &[f32], k: usize, out: &mut [u8]) {
    #[cfg(target_arch = "x86_64")]
    if !super::q8k::has_q8_k_path(ty)
        && std::is_x86_feature_detected!("avx512f")
        && std::is_x86_feature_detected!("avx512bw")
        && std::is_x86_feature_detected!("f16c")
    {
        let xr = row_bytes_q8_0(k);
        for (xrow, orow) in x.chunks_exact(k).zip(out.chunks_exact_mut(xr)) {
            // SAFETY: the features were detected; `orow` holds `row_bytes_q8_0(k)` bytes and
            // `xrow` whole blocks (`k` is a multiple of 32 for these schemes).
            unsafe { avx::quantize_q8_0(xrow, orow) };
        }
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
        // SAFETY: the features were detected.
        return unsafe { quantize_acts_avx2(ty, x, k, out) };
    }
    quantize_acts_body(ty, x, k, out);
}

/// [`quantize_acts`] compiled with AVX2 (+ SSE4.1): `round_ties_even` becomes one `vroundps`
/// instead of a call to libm's `rintf` per value (a fifth of a 64-row Q4_0 product's time).
///
/// # Safety
/// AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn quantize_acts_avx2(ty: GgmlType, x: &[f32], k: usize, out: &mut [u8]) {
    quantize_acts_body(ty, x, k, out);
}

#[inline(always)]
fn quantize_acts_body(ty: GgmlType, x: &[f32], k: usize, out: &mut [u8]) {
    let xr = act_row_bytes(ty, k);
    for (xrow, orow) in x.chunks_exact(k).zip(out.chunks_exact_mut(xr)) {
        if super::q8k::has_q8_k_path(ty) { super::q8k::quantize_row(xrow, orow) } else { quantize_q8_0(xrow, orow) }
    }
}

/// Every product of the weight rows `w` (blocks of `ty`, `row_bytes` each) with the `m`
/// quantized activation rows `x` (from [`quantize_acts`]): `put(activation row, weight row, v)`.
pub(super) fn tile(
    ty: GgmlType,
    level: u8,
    w: &[u8],
    row_bytes: usize,
    x: &[u8],
    m: usize,
    put: &mut dyn FnMut(usize, usize, f32),
) {
    let x_row = x.len() / m.max(1);
    let nb = row_bytes / ty.type_size();
    #[cfg(target_arch = "x86_64")]
    if level == 2 {
        use super::q8k::{Q4K, Q5K, Q6K};
        // SAFETY: level 2 means the VNNI features were detected; whole rows (checked at run).
        unsafe {
            match ty {
                GgmlType::Q4_0 => drive::<avx::Legacy<Q4_0>>(w, row_bytes, x, x_row, m, nb, put),
                GgmlType::Q4_1 => drive::<avx::Legacy<Q4_1>>(w, row_bytes, x, x_row, m, nb, put),
                GgmlType::Q8_0 => drive::<avx::Legacy<Q8_0>>(w, row_bytes, x, x_row, m, nb, put),
                GgmlType::Q5_0 => drive::<avx::Legacy<Q5_0>>(w, row_bytes, x, x_row, m, nb, put),
                GgmlType::Q5_1 => drive::<avx::Legacy<Q5_1>>(w, row_bytes, x, x_row, m, nb, put),
                GgmlType::Q4_K => drive::<Q4K>(w, row_bytes, x, x_row, m, nb, put),
                GgmlType::Q5_K => drive::<Q5K>(w, row_bytes, x, x_row, m, nb, put),
                _ => drive::<Q6K>(w, row_bytes, x, x_row, m, nb, put),
            }
        }
        return;
    }
    for (r, wr) in w.chunks_exact(row_bytes).enumerate() {
        for (mi, xr) in x.chunks_exact(x_row).enumerate() {
            let v = if super::q8k::has_q8_k_path(ty) {
                super::q8k::dot_scalar(ty, wr, xr)
            } else {
                dot_q8_scalar(ty, wr, xr)
            };
            put(mi, r, v);
        }
    }
}

/// [`tile`] for Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 weight rows held in `rlx_gguf::Layout::SplitRows`, bit-identical
/// with [`tile`] on the same rows as blocks. Planned only with VNNI (`simd_level` 2) on x86_64
/// (`super::select`; other levels convert the rows back into blocks first).
pub(super) fn tile_split(
    ty: GgmlType,
    w: &[u8],
    row_bytes: usize,
    x: &[u8],
    m: usize,
    put: &mut dyn FnMut(usize, usize, f32),
) {
    let (x_row, nb) = (x.len() / m.max(1), row_bytes / ty.type_size());
    #[cfg(target_arch = "x86_64")]
    // SAFETY: planned only where the VNNI features were detected; whole rows (checked at run).
    unsafe {
        match ty {
            GgmlType::Q4_0 => drive::<avx::Legacy<Q4_0, true>>(w, row_bytes, x, x_row, m, nb, put),
            GgmlType::Q4_1 => drive::<avx::Legacy<Q4_1, true>>(w, row_bytes, x, x_row, m, nb, put),
            GgmlType::Q5_0 => drive::<avx::Legacy<Q5_0, true>>(w, row_bytes, x, x_row, m, nb, put),
            GgmlType::Q5_1 => drive::<avx::Legacy<Q5_1, true>>(w, row_bytes, x, x_row, m, nb, put),
            _ => drive::<avx::Legacy<Q8_0, true>>(w, row_bytes, x, x_row, m, nb, put),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    unreachable!("split rows are read natively only with VNNI ({ty}, {} bytes, {x_row}, {nb})", w.len())
}

/// Legacy block layouts (const parameters of the kernels).
/// `d f16, 16 bytes of nibble pairs`, `w = d (q - 8)`.
const Q4_0: u8 = 0;
/// `d f16, m f16, 16 bytes`, `w = d q + m`.
const Q4_1: u8 = 1;
/// `d f16, 32 i8`, `w = d q`.
const Q8_0: u8 = 2;
/// `d f16, qh u32, 16 bytes`, `w = d (q - 16)`, bit `i` of `qh` bit 4 of element `i`.
const Q5_0: u8 = 3;
/// `d f16, m f16, qh u32, 16 bytes`, `w = d q + m` (bit 4 as in Q5_0).
const Q5_1: u8 = 4;

/// Portable dot of one legacy weight row `w` with one quantized activation row `x`.
pub(crate) fn dot_q8_scalar(ty: GgmlType, w: &[u8], x: &[u8]) -> f32 {
    let ts = ty.type_size();
    let nb = w.len() / ts;
    let mut sum = 0f32;
    for (b, blk) in w.chunks_exact(ts).enumerate() {
        let q = &x[b * QK..(b + 1) * QK];
        let (xd, xs) = (f32_at(x, nb * QK + 4 * b), f32_at(x, nb * QK + 4 * nb + 4 * b));
        let d = f16_at(blk, 0);
        let (isum, extra) = match ty {
            GgmlType::Q8_0 => {
                (blk[2..34].iter().zip(q).map(|(&w, &x)| i32::from(w as i8) * i32::from(x as i8)).sum(), 0.0)
            }
            GgmlType::Q4_0 => (nib_dot(&blk[2..18], q, 8), 0.0),
            GgmlType::Q5_0 => (nib5_dot(&blk[6..22], qh_at(blk, 2), q, 16), 0.0),
            GgmlType::Q5_1 => (nib5_dot(&blk[8..24], qh_at(blk, 4), q, 0), f16_at(blk, 2) * xs),
            _ => (nib_dot(&blk[4..20], q, 0), f16_at(blk, 2) * xs),
        };
        sum += d * xd * isum as f32 + extra;
    }
    sum
}

/// `Σ (nibble - off) · q` for 16 packed bytes (low nibbles first, then high); `q` holds i8.
fn nib_dot(qs: &[u8], q: &[u8], off: i32) -> i32 {
    let mut s = 0i32;
    for j in 0..16 {
        s += (i32::from(qs[j] & 15) - off) * i32::from(q[j] as i8);
        s += (i32::from(qs[j] >> 4) - off) * i32::from(q[j + 16] as i8);
    }
    s
}

/// Q5_0 / Q5_1's `qh` at byte `i` of a block.
fn qh_at(blk: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([blk[i], blk[i + 1], blk[i + 2], blk[i + 3]])
}

/// [`nib_dot`] for 5-bit quants: bit `j` of `qh` is bit 4 of element `j`.
fn nib5_dot(qs: &[u8], qh: u32, q: &[u8], off: i32) -> i32 {
    let mut s = 0i32;
    for j in 0..16 {
        let (lo, hi) = ((qh >> j) & 1, (qh >> (j + 16)) & 1);
        s += (i32::from(qs[j] & 15) + 16 * lo as i32 - off) * i32::from(q[j] as i8);
        s += (i32::from(qs[j] >> 4) + 16 * hi as i32 - off) * i32::from(q[j + 16] as i8);
    }
    s
}

#[cfg(target_arch = "x86_64")]
pub(super) use avx::{Heads, group};

#[cfg(target_arch = "x86_64")]
// The kernels index several per-row / per-column arrays with one tile index.
#[allow(clippy::needless_range_loop)]
mod avx {
    use super::{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, QK, RowKernel};
    use crate::kernels::avx512::reduce_rows;
    use std::arch::x86_64::*;

    /// Blocks whose scales are converted together.
    const GROUP: usize = 16;

    /// The VNNI kernels of legacy scheme `K`, on GGUF blocks or (`SPLIT`) on rows
    /// in `rlx_gguf::Layout::SplitRows`.
    pub struct Legacy<const K: u8, const SPLIT: bool = false>;

    impl<const K: u8, const SPLIT: bool> RowKernel for Legacy<K, SPLIT> {
        // 1 × 4096 × 4096 from DRAM (`qmatmul_bench 1 10 Q4_0,Q4_1,Q8_0 1 fast 64`, 1 core,
        // interleaved rounds): groups of 8 instead of 4, Q4_0 0.86–0.91 → 0.80–0.82 ms, Q4_1
        // 0.93–0.96 → 0.87–0.90; Q8_0 equal from DRAM and 3% slower from L3, so it keeps 4.
        // Split rows keep 4 (`qmatmul_bench 1 20 Q4_0,Q4_1 1 fast 64` / `… 1`, two interleaved
        // rounds, 8 → 4 rows: from DRAM Q4_0 0.85 → 0.80–0.81 ms, Q4_1 0.96–0.99 → 0.90–0.92;
        // from L3 Q4_0 0.41–0.44 → 0.37–0.40, Q4_1 0.50 → 0.43–0.44).
        // Q5_0 / Q5_1 decode on `rows_legacy`'s one-block steps keeps 4 as well.
        const DECODE_ROWS: usize = if K == Q8_0 || K == Q5_0 || K == Q5_1 || SPLIT { 4 } else { 8 };
        const STREAM_ROWS_ONE_BY_ONE: bool = K == Q8_0;
        #[inline(always)]
        unsafe fn rows<const R: usize, const C: usize>(
            w: [*const u8; R],
            x: [*const u8; C],
            nb: usize,
        ) -> [[f32; C]; R] {
            // SAFETY: the trait's contract.
            unsafe { rows_legacy::<R, C, K, SPLIT>(w, x, nb) }
        }
    }

    /// [`super::quantize_q8_0`] on AVX-512, the same bits: per block the largest magnitude
    /// ignoring NaN (as `f32::max`), `d` and `127 / amax` in scalar f32 as there, `q` rounded
    /// half to even from `x · id` with NaN taken to 0 and the rest saturated to `i8` (as an
    /// `as i8` cast), the f16 roundings by F16C (round to nearest even, as `half`).
    /// One row of 576 values took ~0.8 µs in the scalar form (`half`'s software f16 and one
    /// lane at a time), a few percent of a SmolLM2 `--fast` decode step's 121 products.
    ///
    /// # Safety
    /// AVX-512F/BW and F16C; `x.len()` a multiple of 32, `out.len() >= row_bytes_q8_0(x.len())`.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,f16c")]
    pub(super) unsafe fn quantize_q8_0(x: &[f32], out: &mut [u8]) {
        let nb = x.len() / QK;
        debug_assert!(out.len() >= super::row_bytes_q8_0(x.len()));
        let (xp, o) = (x.as_ptr(), out.as_mut_ptr());
        let (dd_at, s_at) = (x.len(), x.len() + 4 * nb);
        let (lo, hi) = (_mm512_set1_ps(-128.0), _mm512_set1_ps(127.0));
        let f16 = |v: f32| _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm_set_ss(v))));
        for b in 0..nb {
            // SAFETY: block `b < nb` has 32 floats at `xp + 32 b`; its 32 quants, `d` and `s`
            // lie inside `out` (the layout of `row_bytes_q8_0`).
            unsafe {
                let v = [_mm512_loadu_ps(xp.add(QK * b)), _mm512_loadu_ps(xp.add(QK * b + 16))];
                // |x| with NaN lanes as 0: the scalar `max` skips NaN.
                let a = v.map(|v| _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_ORD_Q>(v, v), _mm512_abs_ps(v)));
                let amax = _mm512_reduce_max_ps(_mm512_max_ps(a[0], a[1]));
                let dd = amax / 127.0;
                let id = _mm512_set1_ps(if amax != 0.0 { 127.0 / amax } else { 0.0 });
                let mut sum = _mm512_setzero_si512();
                for (h, &v) in v.iter().enumerate() {
                    let p = _mm512_mul_ps(v, id);
                    let p = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_ORD_Q>(p, p), p);
                    let q = _mm512_cvtps_epi32(_mm512_min_ps(_mm512_max_ps(p, lo), hi));
                    sum = _mm512_add_epi32(sum, q);
                    _mm_storeu_si128(o.add(QK * b + 16 * h).cast(), _mm512_cvtepi32_epi8(q));
                }
                let sum = _mm512_reduce_add_epi32(sum);
                o.add(dd_at + 4 * b).cast::<f32>().write_unaligned(f16(dd));
                o.add(s_at + 4 * b).cast::<f32>().write_unaligned(f16(dd * sum as f32));
            }
        }
    }

    /// The first four bytes of each of 16 consecutive blocks of `ts` bytes (a legacy block's
    /// f16 `d`, and Q4_1's `m` after it), for the decode kernels' scale groups.
    #[derive(Clone, Copy)]
    pub(in crate::kernels::qmatmul) struct Heads(__m512i);

    impl Heads {
        /// For blocks of `ts` bytes.
        #[target_feature(enable = "avx512f")]
        #[inline]
        pub(in crate::kernels::qmatmul) fn new(ts: usize) -> Heads {
            let iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            Heads(_mm512_mullo_epi32(iota, _mm512_set1_epi32(ts as i32)))
        }

        /// The heads of the blocks from `p`, lane `i` block `i`, for the lanes in `lanes`
        /// (zero elsewhere; one gather).
        ///
        /// # Safety
        /// AVX-512F; the four bytes at `p + ts i` are readable for every lane `i` in `lanes`.
        #[target_feature(enable = "avx512f")]
        #[inline]
        pub(in crate::kernels::qmatmul) unsafe fn at(self, p: *const u8, lanes: __mmask16) -> __m512i {
            // SAFETY: the caller's contract.
            unsafe { _mm512_mask_i32gather_epi32::<1>(_mm512_setzero_si512(), lanes, self.0, p.cast()) }
        }
    }

    /// The group of blocks from `g0` of a row of `nb`: its length (at most [`GROUP`]) and lane
    /// mask.
    #[inline(always)]
    pub(in crate::kernels::qmatmul) fn group(nb: usize, g0: usize) -> (usize, __mmask16) {
        let gn = GROUP.min(nb - g0);
        (gn, if gn == GROUP { 0xffff } else { (1u16 << gn) - 1 })
    }

    /// [`group`], and the `d`s of the group's blocks in the activation row `x` (`32 nb` bytes,
    /// then `nb` d floats).
    ///
    /// # Safety
    /// AVX-512F; `x` is an activation row of `nb` blocks.
    #[target_feature(enable = "avx512f")]
    #[inline]
    unsafe fn group_at(x: *const u8, nb: usize, g0: usize) -> (usize, __mmask16, __m512) {
        let (gn, lanes) = group(nb, g0);
        // SAFETY: the group's lanes of the row's d array (caller).
        (gn, lanes, unsafe { _mm512_maskz_loadu_ps(lanes, x.add(QK * nb + 4 * g0).cast::<f32>()) })
    }

    /// `Σ` of the 8 lanes.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    #[inline]
    fn hsum256(v: __m256) -> f32 {
        let h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
        _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)))
    }

    /// The `R × C` dots of legacy weight rows `w` (scheme `K`, `nb` blocks) with quantized
    /// activation rows `x` (layout of [`super::row_bytes_q8_0`]).
    ///
    /// Per block: the weights as unsigned bytes `u` (Q4_0/Q4_1: the nibbles, low then high;
    /// Q5_0/Q5_1 the same with 16 added under the byte mask `qh`; Q8_0: `q + 128`), one 256-bit
    /// `vpdpbusd` against the activation bytes started from `-off · Σx` per lane (the exact
    /// signed dot; `off` 8 for Q4_0, 16 for Q5_0, 128 for Q8_0, 0 for Q4_1 / Q5_1), then `+= d_w
    /// d_x · dot` in f32 lanes; Q4_1's and Q5_1's `m_w · s_x` goes into a scalar FMA chain per
    /// output, block by block, and the f16 scales are converted 16 blocks at a time. This is
    /// the arithmetic, in order, of llama.cpp's AVX2/VNNI `ggml_vec_dot_q4_1_q8_1` /
    /// `_q4_0_q8_0` / `_q5_0_q8_0` / `_q5_1_q8_1` / `_q8_0_q8_0`.
    ///
    /// With `SPLIT` the rows are in `rlx_gguf::Layout::SplitRows` (see [`rows_q4_q5_decode`]; a
    /// Q8_0 block's 32 quant bytes at `32 b`, its `d` at `32 nb + 2 b`; Q5's `qh` as two arrays
    /// of 16-bit halves after the `d`s and Q5_1's `m`s): the same products,
    /// bit-identical. One activation row goes to [`rows_q4_q5_decode`] / [`rows_q8_decode`].
    ///
    /// # Safety
    /// AVX-512F/BW/VL + VNNI, AVX2, FMA, F16C; every `w[r]` points to `nb` blocks (split rows
    /// with `SPLIT`), every `x[c]` to one activation row of `nb` blocks.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn rows_legacy<const R: usize, const C: usize, const K: u8, const SPLIT: bool>(
        w: [*const u8; R],
        x: [*const u8; C],
        nb: usize,
    ) -> [[f32; C]; R] {
        // Q4_1 and Q5_1 add `m_w · s_x` per block; Q5_0 / Q5_1 have fifth bits.
        let (has_m, five) = (K == Q4_1 || K == Q5_1, K == Q5_0 || K == Q5_1);
        if C == 1 {
            // SAFETY: the caller's contract, with one activation row.
            let o = unsafe {
                if K == Q8_0 {
                    rows_q8_decode::<R, SPLIT>(w, x[0], nb)
                } else {
                    rows_q4_q5_decode::<R, K, SPLIT>(w, x[0], nb)
                }
            };
            return std::array::from_fn(|r| std::array::from_fn(|_| o[r]));
        }
        // Quant bytes of block `b` at `ts b + qo` (split rows: the quants alone).
        let (ts, qo): (usize, usize) = match K {
            _ if SPLIT && K == Q8_0 => (32, 0),
            _ if SPLIT => (16, 0),
            Q4_0 => (18, 2),
            Q4_1 => (20, 4),
            Q5_0 => (22, 6),
            Q5_1 => (24, 8),
            _ => (34, 2),
        };
        // The constant subtracted from the unsigned weight bytes, as bytes for `vpdpbusd`.
        let off = _mm256_set1_epi8(match K {
            Q4_0 => 8,
            Q5_0 => 16,
            Q4_1 | Q5_1 => 0,
            _ => -128,
        });
        let sixteen = _mm256_set1_epi8(16);
        let m4 = _mm256_set1_epi8(0x0f);
        let flip = _mm256_set1_epi8(-128);
        let heads = Heads::new(ts);
        let mut acc = [[_mm256_setzero_ps(); C]; R];
        let mut summs = [[0f32; C]; R];
        let mut sc = [[[0f32; GROUP]; C]; R];
        let mut mw = [[0f32; GROUP]; R];
        let mut sx = [[0f32; GROUP]; C];
        // Split rows' `qh` halves (Q5): the low ones after the `d`s (and `m`s), then the high.
        let qh_at = rlx_gguf::layout::split_qh_offset(nb, has_m);
        let mut g0 = 0;
        // SAFETY (every pointer below): block `b < nb` of row `r` spans `ts` bytes from
        // `w[r] + b ts` (split: its quants; its `d` at `w[r] + ts nb + 2 b` and Q4_1's `m` at
        // `+ 18 nb + 2 b`, read under the group's lane mask); activation row `c` has `32 nb`
        // bytes, then `nb` d and `nb` s floats.
        unsafe {
            while g0 < nb {
                let (gn, lanes) = group(nb, g0);
                if has_m {
                    for c in 0..C {
                        let xs = x[c].add(QK * nb + 4 * (nb + g0)).cast::<f32>();
                        _mm512_storeu_ps(sx[c].as_mut_ptr(), _mm512_maskz_loadu_ps(lanes, xs));
                    }
                }
                for r in 0..R {
                    // `d` of the group's blocks, and Q4_1's `m` (a split Q4_0 row has no `m`
                    // array: nothing is read past its `d`s).
                    let (dw, m) = if SPLIT {
                        let f = w[r].add(ts * nb + 2 * g0);
                        let dw = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, f.cast()));
                        let m = if has_m {
                            _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, f.add(2 * nb).cast()))
                        } else {
                            _mm512_setzero_ps()
                        };
                        (dw, m)
                    } else {
                        let base = w[r].add(g0 * ts);
                        let h = heads.at(base, lanes);
                        (
                            _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)),
                            _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(h))),
                        )
                    };
                    if has_m {
                        _mm512_storeu_ps(mw[r].as_mut_ptr(), m);
                    }
                    for c in 0..C {
                        let xd = x[c].add(QK * nb + 4 * g0).cast::<f32>();
                        _mm512_storeu_ps(sc[r][c].as_mut_ptr(), _mm512_mul_ps(dw, _mm512_maskz_loadu_ps(lanes, xd)));
                    }
                }
                for i in 0..gn {
                    let b = g0 + i;
                    let xv: [__m256i; C] = std::array::from_fn(|c| _mm256_loadu_si256(x[c].add(QK * b).cast()));
                    // `-off · Σx` per lane: the dot below is then the signed one, exactly.
                    let init: [__m256i; C] = std::array::from_fn(|c| {
                        if has_m {
                            _mm256_setzero_si256()
                        } else {
                            _mm256_sub_epi32(
                                _mm256_setzero_si256(),
                                _mm256_dpbusd_epi32(_mm256_setzero_si256(), off, xv[c]),
                            )
                        }
                    });
                    for r in 0..R {
                        let p = w[r].add(b * ts + qo);
                        let u = if K == Q8_0 {
                            _mm256_xor_si256(_mm256_loadu_si256(p.cast()), flip)
                        } else {
                            let v = _mm_loadu_si128(p.cast());
                            let u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16::<4>(v), v), m4);
                            if five {
                                // Bit `j` of `qh` (the 4 bytes before the quants; split: its
                                // halves at `qh_at + 2 b` and `2 nb` on): bit 4 of element `j`,
                                // byte `j` of `u`.
                                let qh = if SPLIT {
                                    let h = w[r].add(qh_at + 2 * b).cast::<u16>();
                                    u32::from(h.read_unaligned()) | u32::from(h.add(nb).read_unaligned()) << 16
                                } else {
                                    p.sub(4).cast::<u32>().read_unaligned()
                                };
                                _mm256_mask_add_epi8(u, qh, u, sixteen)
                            } else {
                                u
                            }
                        };
                        for c in 0..C {
                            let dot = _mm256_dpbusd_epi32(init[c], u, xv[c]);
                            let s = _mm256_broadcast_ss(&sc[r][c][i]);
                            acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), s, acc[r][c]);
                            if has_m {
                                summs[r][c] = mw[r][i].mul_add(sx[c][i], summs[r][c]);
                            }
                        }
                    }
                }
                g0 += gn;
            }
        }
        std::array::from_fn(|r| std::array::from_fn(|c| hsum256(acc[r][c]) + summs[r][c]))
    }

    /// [`rows_legacy`] for Q4_0 / Q4_1 / Q5_0 / Q5_1 weights (`K`) and one activation row (decode), four
    /// blocks per two 512-bit `vpdpbusd`s where a group of 16 blocks has four left: 128-bit lane
    /// `j` holds block `b + j`'s 16 packed bytes (one load and three masked broadcast loads), its
    /// low nibbles (`& 15`) go against the four activation blocks' first halves and its high
    /// nibbles against their second halves (regrouped once per quad by two `vpermt2q`, for all
    /// rows), and the lanes are scaled by one `vpermps` of the group's 16 scale products: per
    /// four blocks and row 11 vector µops instead of 14 (one convert and one FMA instead of two).
    /// 1 × 4096 × 4096 (`qmatmul_bench 1 10 Q4_1,Q4_0 1 fast 1` / `… 64`, 1 core, two
    /// interleaved rounds): from L3 Q4_1 0.59–0.60 → 0.52–0.53 ms, Q4_0 0.57–0.58 → 0.48; from
    /// DRAM Q4_1 1.15–1.19 → 1.07–1.09, Q4_0 1.00 → 0.94–1.01 (a slow hour of this host);
    /// SmolLM2 `--fast` generation, `dequant_matmul` over 127 steps at 1 thread 1739–1835 →
    /// 1539–1758 ms, 2 threads 101–105 → 109–113 tokens/s. The rest of a group goes in pairs:
    /// blocks `b` and `b + 1` as `[lo_b, hi_b, lo_b+1, hi_b+1]`
    /// nibbles (16 bytes each: each block's 16 packed bytes broadcast to two 128-bit lanes by
    /// the loads, the upper copy shifted right by 4 under a mask), against the activation
    /// pair's 64 bytes as they lie; the lanes of each block are scaled by its `d_w d_x`,
    /// broadcast from the group's 16 scale products (the second block's by a masked broadcast
    /// load); Q4_1's `Σ m_w s_x` is one FMA per group of 16 blocks. The integer dots are
    /// exact, as in `rows_legacy`; the f32 sums are added in another order (16 lanes, 4 or 2
    /// blocks each step). The pairs alone: decode from cache was compute-bound at half the
    /// read rate with one block per 256-bit step; picking the pair's scales by `vpermps` and the nibbles by lane inserts put
    /// three µops per row and pair on the shuffle port (1 × 4096 × 4096, `qmatmul_bench 1 10
    /// Q4_0,Q4_1 1 fast 1` / `… 64`, three interleaved rounds: Q4_0 from L3 0.50–0.51 → 0.47–0.48
    /// ms, from DRAM equal at 0.80–0.81; Q4_1 from DRAM 0.92–0.93 → 0.85–0.88).
    ///
    /// With `SPLIT` the rows are in `rlx_gguf::Layout::SplitRows` (block `b`'s quants at `16 b`,
    /// its `d` at `16 nb + 2 b`, Q4_1's `m` at `18 nb + 2 b`): a quad's quants are one 64-byte
    /// load and a group's scales one 32-byte load (and one more for Q4_1's `m`) instead of four
    /// 16-byte loads per quad and a gather per group; the same products in the same order, so
    /// the results are bit-identical with the block layout's.
    /// 1 × 4096 × 4096 (`qmatmul_bench 1 20 Q4_0,Q4_1 1 fast,fast-blocks 64` / `… 1`, 1 core,
    /// groups of 4 rows): from DRAM Q4_0 0.85 → 0.78–0.81 ms, Q4_1 0.93–0.96 → 0.90–0.92; from
    /// L3 Q4_0 0.47–0.49 → 0.37–0.40, Q4_1 0.50–0.52 → 0.43–0.44 (blocks → split rows).
    ///
    /// Q5_0 / Q5_1 add their fifth bits as a masked `+ 16` on the nibble bytes: a quad's low
    /// nibbles (elements `0..16` of each block) take the four blocks' low `qh` halves as one
    /// 64-bit byte mask, its high nibbles the high halves (split rows: two 8-byte loads, the
    /// halves lie in two arrays; blocks: assembled from the four `qh` words), and the offset is
    /// `-16 Σx`. Before, Q5 decode ran [`rows_legacy`]'s one block per 256-bit step with a
    /// scalar `qh` read per block and row: Qwen2.5-0.5B's 896 × 4864 Q5_0 product from cache
    /// computed at 17.3 GB/s (`qmatmul_bench 1 20 Q5_0 1 fast 1 896 4864`), below this core's
    /// DRAM read rate; now 25.3 (Q5_1 26.0), and from DRAM (`… 40 896 4864`, AMD EPYC Zen 4, two
    /// interleaved rounds) 12.2–13.8 → 14.2–15.4 GB/s.
    ///
    /// # Safety
    /// As [`rows_legacy`] with `C = 1`; with `SPLIT` every `w[r]` points to a split row of `nb`
    /// blocks.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn rows_q4_q5_decode<const R: usize, const K: u8, const SPLIT: bool>(
        w: [*const u8; R],
        x: *const u8,
        nb: usize,
    ) -> [f32; R] {
        // Q4_1 and Q5_1 add `m_w · s_x` per block; Q5_0 / Q5_1 have fifth bits.
        let (has_m, five) = (K == Q4_1 || K == Q5_1, K == Q5_0 || K == Q5_1);
        let row: usize = nb * [18, 20, 34, 22, 24][K as usize];
        let ahead = super::super::decode::Ahead::new(row);
        // Quant bytes of block `b` at `ts b + qo` (blocks: after `d`, `m` and `qh`).
        let (ts, qo): (usize, usize) = match K {
            _ if SPLIT => (16, 0),
            Q4_1 => (20, 4),
            Q5_0 => (22, 6),
            Q5_1 => (24, 8),
            _ => (18, 2),
        };
        // Split rows' `qh` low halves (Q5), the high ones `2 nb` bytes on.
        let qh_at = rlx_gguf::layout::split_qh_offset(nb, has_m);
        // Q5's fifth bits: `qh(r, b)` is block `b`'s 32-bit `qh` word (bit `i` for element `i`),
        // `quad_masks(r, b)` the 64-bit byte masks of blocks `b .. b + 4`'s low and high nibbles
        // (the pair path below builds `[lo_b, hi_b, lo_b+1, hi_b+1]` from two `qh` words).
        let qh = |r: usize, b: usize| -> u32 {
            // SAFETY: block `b` of row `r` exists (callers); blocks: `qh` is the 4 bytes
            // before the quants; split: its halves at `qh_at + 2 b` and `2 nb` on.
            unsafe {
                if SPLIT {
                    let h = w[r].add(qh_at + 2 * b).cast::<u16>();
                    u32::from(h.read_unaligned()) | u32::from(h.add(nb).read_unaligned()) << 16
                } else {
                    w[r].add(b * ts + qo - 4).cast::<u32>().read_unaligned()
                }
            }
        };
        let quad_masks = |r: usize, b: usize| -> (u64, u64) {
            if SPLIT {
                // SAFETY: blocks `b .. b + 4` of row `r` exist (caller).
                unsafe {
                    let h = w[r].add(qh_at + 2 * b);
                    (h.cast::<u64>().read_unaligned(), h.add(2 * nb).cast::<u64>().read_unaligned())
                }
            } else {
                let (mut lo, mut hi) = (0u64, 0u64);
                for j in 0..4 {
                    let q = qh(r, b + j);
                    lo |= u64::from(q & 0xffff) << (16 * j);
                    hi |= u64::from(q >> 16) << (16 * j);
                }
                (lo, hi)
            }
        };
        let m4 = _mm512_set1_epi8(0x0f);
        // Opaque to the optimizer (see `bfp::rows`): one `vpaddb{k}` per fifth-bit add.
        let sixteen = std::hint::black_box(_mm512_set1_epi8(16));
        // The offset subtracted from the unsigned weight bytes (Q4_0 8, Q5_0 16).
        let off = _mm512_set1_epi8(if five { 16 } else { 8 });
        let heads = Heads::new(ts);
        // The 16-bit words of the second and fourth 128-bit lanes: the high nibbles.
        const HI: __mmask32 = 0xff00_ff00;
        // Block of each lane in a quad (plus the quad's first block in its group).
        let quad = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
        let mut acc = [_mm512_setzero_ps(); R];
        let mut macc = [_mm512_setzero_ps(); R];
        let mut sc = [[0f32; GROUP]; R];
        let mut g0 = 0;
        // SAFETY (every pointer below): block `b < nb` of row `r` spans `ts` bytes from
        // `w[r] + ts b` (split: its quants 16 bytes from `w[r] + 16 b`, its f16 fields at
        // `w[r] + 16 nb + 2 b` and `+ 18 nb + 2 b`, read under the group's lane mask); the
        // activation row has `32 nb` bytes, then `nb` d and `nb` s floats; `sc[r][i + 1]` is
        // read only when block `g0 + i + 1` is in the group (`i + 1 < gn`).
        unsafe {
            while g0 < nb {
                let (gn, lanes, xd) = group_at(x, nb, g0);
                let sx = _mm512_maskz_loadu_ps(lanes, x.add(QK * nb + 4 * (nb + g0)).cast::<f32>());
                for r in 0..R {
                    super::super::decode::prefetch_ahead(w[r], ahead, g0 * ts, (g0 + gn) * ts);
                    if SPLIT {
                        let s0 = 16 * nb + 2 * g0;
                        // Q4_0's `d`s in step with the groups; Q4_1's `d`s and `m`s (adjacent)
                        // and Q5's fields all at the row's first group: 1 × 4096 × 4096 from
                        // DRAM, five interleaved rounds, Q4_1 0.85–0.86 → 0.81–0.83 ms (Q4_0
                        // that way 2–3% slower, so it keeps the steps).
                        if K == Q4_0 {
                            super::super::decode::prefetch_ahead(w[r], ahead, s0, s0 + 2 * gn);
                        } else if g0 == 0 {
                            super::super::decode::prefetch_ahead(w[r], ahead, s0, row);
                        }
                        let d = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, w[r].add(s0).cast()));
                        _mm512_storeu_ps(sc[r].as_mut_ptr(), _mm512_mul_ps(d, xd));
                        if has_m {
                            let m = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, w[r].add(s0 + 2 * nb).cast()));
                            macc[r] = _mm512_fmadd_ps(m, sx, macc[r]);
                        }
                        continue;
                    }
                    let h = heads.at(w[r].add(g0 * ts), lanes);
                    _mm512_storeu_ps(sc[r].as_mut_ptr(), _mm512_mul_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(h)), xd));
                    if has_m {
                        let m = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32::<16>(h)));
                        macc[r] = _mm512_fmadd_ps(m, sx, macc[r]);
                    }
                }
                let mut i = 0;
                // Four blocks per `vpdpbusd` pair: 128-bit lane `j` takes block `b + j`, its low
                // nibbles against `xlo`'s lane `j` and its high ones against `xhi`'s (the
                // activation blocks' halves regrouped once per quad for all rows).
                while i + 4 <= gn {
                    let b = g0 + i;
                    let a0 = _mm512_loadu_si512(x.add(QK * b).cast());
                    let a1 = _mm512_loadu_si512(x.add(QK * (b + 2)).cast());
                    let xlo = _mm512_permutex2var_epi64(a0, _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13), a1);
                    let xhi = _mm512_permutex2var_epi64(a0, _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15), a1);
                    let init = if has_m {
                        _mm512_setzero_si512()
                    } else {
                        let e = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), off, xlo), off, xhi);
                        _mm512_sub_epi32(_mm512_setzero_si512(), e)
                    };
                    let sidx = _mm512_add_epi32(quad, _mm512_set1_epi32(i as i32));
                    for r in 0..R {
                        let p = w[r].add(b * ts + qo);
                        let q = if SPLIT {
                            _mm512_loadu_si512(p.cast())
                        } else {
                            let q = _mm512_castsi128_si512(_mm_loadu_si128(p.cast()));
                            let q = _mm512_mask_broadcast_i32x4(q, 0x00f0, _mm_loadu_si128(p.add(ts).cast()));
                            let q = _mm512_mask_broadcast_i32x4(q, 0x0f00, _mm_loadu_si128(p.add(2 * ts).cast()));
                            _mm512_mask_broadcast_i32x4(q, 0xf000, _mm_loadu_si128(p.add(3 * ts).cast()))
                        };
                        let mut zlo = _mm512_and_si512(q, m4);
                        let mut zhi = _mm512_and_si512(_mm512_srli_epi16::<4>(q), m4);
                        if five {
                            let (lo, hi) = quad_masks(r, b);
                            zlo = _mm512_mask_add_epi8(zlo, lo, zlo, sixteen);
                            zhi = _mm512_mask_add_epi8(zhi, hi, zhi, sixteen);
                        }
                        let dot = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(init, zlo, xlo), zhi, xhi);
                        let s = _mm512_permutexvar_ps(sidx, _mm512_loadu_ps(sc[r].as_ptr()));
                        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, acc[r]);
                    }
                    i += 4;
                }
                while i < gn {
                    let b = g0 + i;
                    // One block left (an odd group): the second block's lanes get zero bytes,
                    // weights and activations, so their dots (and Q4_0's `-8 Σx`) are 0.
                    let two = i + 1 < gn;
                    let xv = if two {
                        _mm512_loadu_si512(x.add(QK * b).cast())
                    } else {
                        _mm512_zextsi256_si512(_mm256_loadu_si256(x.add(QK * b).cast()))
                    };
                    let init = if has_m {
                        _mm512_setzero_si512()
                    } else {
                        _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), off, xv))
                    };
                    for r in 0..R {
                        let p = w[r].add(b * ts + qo);
                        let (q, s) = if two {
                            let q = _mm512_broadcast_i32x4(_mm_loadu_si128(p.cast()));
                            let q = _mm512_mask_broadcast_i32x4(q, 0xff00, _mm_loadu_si128(p.add(ts).cast()));
                            let s = _mm512_set1_ps(sc[r][i]);
                            (q, _mm512_mask_broadcastss_ps(s, 0xff00, _mm_load_ss(&sc[r][i + 1])))
                        } else {
                            let q = _mm512_maskz_broadcast_i32x4(0x00ff, _mm_loadu_si128(p.cast()));
                            (q, _mm512_set1_ps(sc[r][i]))
                        };
                        let mut z = _mm512_and_si512(_mm512_mask_srli_epi16::<4>(q, HI, q), m4);
                        if five {
                            // `[lo_b, hi_b, lo_b+1, hi_b+1]`: the two `qh` words as they lie.
                            let h = u64::from(qh(r, b)) | if two { u64::from(qh(r, b + 1)) << 32 } else { 0 };
                            z = _mm512_mask_add_epi8(z, h, z, sixteen);
                        }
                        let dot = _mm512_dpbusd_epi32(init, z, xv);
                        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, acc[r]);
                    }
                    i += 2;
                }
                g0 += gn;
            }
        }
        let (a, m) = (reduce_rows(acc), reduce_rows(macc));
        std::array::from_fn(|r| a[r] + m[r])
    }

    /// [`rows_legacy`] for Q8_0 weights and one activation row (decode): two blocks per 512-bit
    /// step. A pair's 64 weight bytes (split rows: one load; GGUF blocks: two 32-byte loads,
    /// the second a masked broadcast into the upper half) are flipped to unsigned (`q + 128`),
    /// dotted with the activation pair's 64 bytes by one `vpdpbusd` started from `-128 · Σx` per
    /// lane (computed once per pair for all rows), and each half scaled by its block's
    /// `d_w d_x` (one `vpermps` of the group's 16 scale products, kept in a register per row):
    /// per pair and row 6 vector µops where one block per 256-bit step took 10. The integer
    /// dots are exact, as in `rows_legacy`; the f32 sums are added in 16 lanes (even blocks in
    /// the low 8, odd in the high 8), the same order for both layouts, so split rows give
    /// bit-identical results. An odd last block of a group fills the low half (zero bytes and
    /// activations in the high half give dots of 0).
    ///
    /// # Safety
    /// As [`rows_legacy`] with `C = 1` and `K = Q8_0`; with `SPLIT` every `w[r]` points to a
    /// split row of `nb` blocks.
    #[target_feature(enable = "avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma,f16c")]
    unsafe fn rows_q8_decode<const R: usize, const SPLIT: bool>(
        w: [*const u8; R],
        x: *const u8,
        nb: usize,
    ) -> [f32; R] {
        let ahead = super::super::decode::Ahead::new(34 * nb);
        // Quant bytes of block `b` at `ts b + qo`; split rows' `d`s at `32 nb + 2 b`.
        let (ts, qo): (usize, usize) = if SPLIT { (32, 0) } else { (34, 2) };
        let flip = _mm512_set1_epi8(-128);
        let heads = Heads::new(ts);
        // Block of each lane in a pair (plus the pair's first block in its group).
        let pair = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
        let mut acc = [_mm512_setzero_ps(); R];
        let mut sc = [_mm512_setzero_ps(); R];
        let mut g0 = 0;
        // SAFETY (every pointer below): block `b < nb` of row `r` spans `ts` bytes from
        // `w[r] + ts b` (split: its 32 quant bytes from `w[r] + 32 b`, its `d` at
        // `w[r] + 32 nb + 2 b`, read under the group's lane mask); block `b + 1`'s bytes are
        // read only when it is in the group; the activation row has `32 nb` bytes, then `nb` d
        // and `nb` s floats.
        unsafe {
            while g0 < nb {
                let (gn, lanes, xd) = group_at(x, nb, g0);
                for r in 0..R {
                    if !SPLIT {
                        super::super::decode::prefetch_ahead(w[r], ahead, g0 * ts, (g0 + gn) * ts);
                    }
                    let d = if SPLIT {
                        let s0 = 32 * nb + 2 * g0;
                        super::super::decode::prefetch_ahead(w[r], ahead, s0, s0 + 2 * gn);
                        _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(lanes, w[r].add(s0).cast()))
                    } else {
                        _mm512_cvtph_ps(_mm512_cvtepi32_epi16(heads.at(w[r].add(g0 * ts), lanes)))
                    };
                    sc[r] = _mm512_mul_ps(d, xd);
                }
                let mut i = 0;
                while i < gn {
                    let b = g0 + i;
                    let two = i + 1 < gn;
                    let xv = if two {
                        _mm512_loadu_si512(x.add(QK * b).cast())
                    } else {
                        _mm512_zextsi256_si512(_mm256_loadu_si256(x.add(QK * b).cast()))
                    };
                    // `-128 · Σx` per lane: the dot below is then the signed one, exactly.
                    let init =
                        _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), flip, xv));
                    let sidx = _mm512_add_epi32(pair, _mm512_set1_epi32(i as i32));
                    for r in 0..R {
                        if SPLIT {
                            // In step with the reads (see `bfp::rows_q8`).
                            super::super::decode::prefetch_ahead(w[r], ahead, b * ts, (b + 2).min(g0 + gn) * ts);
                        }
                        let p = w[r].add(b * ts + qo);
                        let q = if !two {
                            _mm512_zextsi256_si512(_mm256_loadu_si256(p.cast()))
                        } else if SPLIT {
                            _mm512_loadu_si512(p.cast())
                        } else {
                            let lo = _mm512_castsi256_si512(_mm256_loadu_si256(p.cast()));
                            _mm512_mask_broadcast_i64x4(lo, 0xf0, _mm256_loadu_si256(p.add(ts).cast()))
                        };
                        let dot = _mm512_dpbusd_epi32(init, _mm512_xor_si512(q, flip), xv);
                        let s = _mm512_permutexvar_ps(sidx, sc[r]);
                        acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), s, acc[r]);
                    }
                    i += 2;
                }
                g0 += gn;
            }
        }
        reduce_rows(acc)
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    /// The AVX-512 activation quantizer writes the scalar one's bytes, edge values included.
    #[test]
    fn avx512_q8_0_quantizer_is_the_scalar_one() {
        if !(std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("f16c"))
        {
            eprintln!("skipped: no AVX-512BW + F16C on this CPU");
            return;
        }
        let mut s = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (s >> 33) as u32
        };
        let specials = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            1e-45,
            -3e-39,
            1e38,
            -3.4e38,
            70000.0 * 127.0,
            0.5,
            -2.5,
        ];
        for scale in [1e-40f32, 1e-6, 1.0, 300.0, 1e30] {
            // Blocks of random values, some with specials spliced in, some all zero, and some
            // (every 7th) with exact ties `x · id = n + 1/2` (amax 63.5, so id = 2).
            let mut x: Vec<f32> = (0..32 * 24).map(|_| (next() as f32 / u32::MAX as f32 * 2.0 - 1.0) * scale).collect();
            for (b, blk) in x.chunks_exact_mut(32).enumerate().skip(1) {
                let n = next() as usize;
                blk[n % 32] = specials[b % specials.len()];
                if b % 3 == 0 {
                    blk[(n >> 8) % 32] = specials[(b + 5) % specials.len()];
                }
                if b % 5 == 0 {
                    blk.iter_mut().for_each(|v| *v = 0.0);
                }
                if b % 7 == 0 {
                    // amax 63.5: ids 2.0, so 0.25-steps give exact ties.
                    blk.iter_mut().enumerate().for_each(|(i, v)| *v = (i as f32 - 16.0) * 0.25);
                    blk[31] = 63.5;
                }
            }
            let (mut want, mut got) =
                (vec![0u8; super::row_bytes_q8_0(x.len())], vec![0xa5u8; super::row_bytes_q8_0(x.len())]);
            super::quantize_q8_0(&x, &mut want);
            // SAFETY: the features were detected above; whole blocks, full-length output.
            unsafe { super::avx::quantize_q8_0(&x, &mut got) };
            assert_eq!(got, want, "scale {scale}");
        }
    }
}
