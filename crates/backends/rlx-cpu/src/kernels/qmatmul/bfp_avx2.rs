//! Exact-mode decode of Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q4_K / Q5_K / Q6_K on integer dot products where the CPU has AVX2 but not
//! AVX-512 VNNI: [`super::bfp`]'s block floating point (the activation row as 22-bit integers
//! per 32-element block, split into three signed byte planes `n = 2¹⁶ h + 2⁸ m + l`), with
//! `vpmaddubsw` (unsigned nibbles × signed digits, 16-bit pair sums) and `vpmaddwd` in place of
//! `vpdpbusd`. The error contract is `bfp`'s: each block's `Σ q n` is an exact integer, rounded
//! to f32 once and scaled by `d · s_b`, so the dot agrees with the f64 reference up to f32
//! rounding (`tests/qmatmul.rs`).
//!
//! Two blocks share every register: the activation row is laid out per pair of blocks `2p`,
//! `2p + 1` and per plane as `x₂ₚ[0..16] | x₂ₚ₊₁[0..16]` then `x₂ₚ[16..32] | x₂ₚ₊₁[16..32]`, which
//! meets one 256-bit load of the two blocks' nibbles (split rows: 32 contiguous bytes) masked to
//! the low and shifted to the high nibbles. Per pair and row: six `vpmaddubsw` (two per plane,
//! their 16-bit sums added: `|·| ≤ 4 · 15 · 128`, Q5 `4 · 31 · 128`), three `vpmaddwd` (`h` and `l` by 1, `m` by
//! 256; `h`'s then shifted by 16), leaving block `2p` in lanes 0–3 and `2p + 1` in lanes 4–7
//! (per lane eight elements: `|Σ q n| ≤ 8 · 15 · 2²²`, inside `i32`), one conversion, and one FMA
//! with the pair's scales `[d₂ₚ s₂ₚ ×4, d₂ₚ₊₁ s₂ₚ₊₁ ×4]`. Q4_0's `-8 Σ n` per lane is an exact
//! integer stored with the row and added before the conversion; Q4_1's `m · Σ x_b` is one FMA
//! per 8 blocks. Q5_0 / Q5_1 the same, their fifth bits (`qh`) or-ed into the nibble bytes as
//! 16 (unsigned quants up to 31; Q5_0's correction `-16 Σ n`). The f32 kernel
//! ([`super::exact_avx2`]) spends about twice the vector instructions per block.
//!
//! Row layout ([`act_bytes`]): per pair [`PAIR_BYTES`] (planes `h`, `m`, `l`, 64 bytes each,
//! then 32 bytes of Q4_0 / Q5_0 correction, `i32` per lane), then `s_b` and `Σ x_b` as f32 per
//! block.
//! Rows with an odd block count are not planned here ([`has_path`]). Q4_K / Q5_K run the same
//! pair layout, the pair's lanes each under one sub-block scale ([`rows_dot`]); Q6_K its own
//! element-order layout ([`rows_q6k`], [`BLOCK6_BYTES`]).

use super::decode::row_groups;
use super::exact_avx2::hsum;
use rlx_gguf::GgmlType;
use std::arch::x86_64::*;

/// Bytes of one pair of blocks: three 64-byte digit planes and the 32-byte correction.
const PAIR_BYTES: usize = 3 * 64 + 32;
/// Bytes of one block in Q6_K's layout: three 32-byte digit planes in element order and the
/// 32-byte correction.
const BLOCK6_BYTES: usize = 3 * 32 + 32;
/// Weight rows processed together.
const ROWS: usize = 4;

/// True when rows of `k` elements of `ty` have this kernel (Q4_0 / Q4_1 / Q5_0 / Q5_1 in whole
/// pairs of blocks, Q4_K / Q5_K / Q6_K in whole blocks of 256).
pub(super) fn has_path(ty: GgmlType, k: usize) -> bool {
    match ty {
        GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 => k.is_multiple_of(64),
        GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K => k.is_multiple_of(256),
        _ => false,
    }
}

/// The sign offset of `ty`'s quants (`w = d (q - offset)`: Q4_0 8, Q5_0 16), 0 for the schemes
/// with a minimum `m`.
fn offset(ty: GgmlType) -> i32 {
    match ty {
        GgmlType::Q4_0 => 8,
        GgmlType::Q5_0 => 16,
        _ => 0,
    }
}

/// Bytes of the digits (and corrections) of `nb` blocks converted for `ty`.
fn digit_bytes(ty: GgmlType, nb: usize) -> usize {
    if ty == GgmlType::Q6_K { nb * BLOCK6_BYTES } else { nb / 2 * PAIR_BYTES }
}

/// Bytes of one activation row of `k` elements converted for `ty` ([`has_path`]).
pub(super) fn act_bytes(ty: GgmlType, k: usize) -> usize {
    let nb = k / 32;
    digit_bytes(ty, nb) + 8 * nb
}

/// Convert `x` (`k` elements, [`has_path`] for `ty`) into `out` ([`act_bytes`]). False (and `out`
/// unspecified) when a block holds a non-finite value or its largest magnitude is below
/// 2⁻⁸¹, as [`super::bfp`]'s conversion: the caller then runs the f32 kernel.
///
/// # Safety
/// AVX2 must be available; `out.len() >= act_bytes(x.len())`.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn quantize(ty: GgmlType, x: &[f32], out: &mut [u8]) -> bool {
    const BITS: u32 = 22;
    let nb = x.len() / 32;
    debug_assert!(out.len() >= act_bytes(ty, x.len()) && nb.is_multiple_of(2));
    let q6 = ty == GgmlType::Q6_K;
    let scales = digit_bytes(ty, nb);
    let sums = scales + 4 * nb;
    let (byte, half) = (_mm256_set1_epi32(255), _mm256_set1_epi32(128));
    let expo = _mm256_set1_epi32(0x7f80_0000);
    let o = out.as_mut_ptr();
    for b in 0..nb {
        let xb = &x[32 * b..32 * b + 32];
        // SAFETY: 32 floats at `xb`.
        let xs: [__m256; 4] = std::array::from_fn(|i| unsafe { _mm256_loadu_ps(xb.as_ptr().add(8 * i)) });
        let mut bad = _mm256_setzero_si256();
        let mut amax = _mm256_setzero_ps();
        for &v in &xs {
            bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(v), expo), expo));
            amax = _mm256_max_ps(amax, _mm256_andnot_ps(_mm256_set1_ps(-0.0), v));
        }
        if _mm256_movemask_epi8(bad) != 0 {
            return false;
        }
        let amax = hmax(amax);
        let Some((s, inv)) = super::bfp::block_scale(amax, BITS) else { return false };
        let inv = _mm256_set1_ps(inv);
        let mut total = _mm256_setzero_si256();
        let mut ns = [_mm256_setzero_si256(); 4];
        // Pair `b / 2`, block `b % 2`: elements `16 hf + 8 c ..` go to plane `p` at byte
        // `64 p + 32 hf + 16 (b % 2) + 8 c`; Q6_K: elements `8 i ..` at `32 p + 8 i` of the
        // block's own bytes.
        let at = |p: usize, i: usize| {
            if q6 {
                BLOCK6_BYTES * b + 32 * p + 8 * i
            } else {
                b / 2 * PAIR_BYTES + 16 * (b % 2) + 64 * p + 32 * (i / 2) + 8 * (i % 2)
            }
        };
        for (i, &v) in xs.iter().enumerate() {
            // Exact scaling by a power of two, then rounding to nearest even.
            let n = _mm256_cvtps_epi32(_mm256_mul_ps(v, inv));
            ns[i] = n;
            total = _mm256_add_epi32(total, n);
            let l = _mm256_sub_epi32(_mm256_and_si256(_mm256_add_epi32(n, half), byte), half);
            let t = _mm256_srai_epi32::<8>(_mm256_sub_epi32(n, l));
            let m = _mm256_sub_epi32(_mm256_and_si256(_mm256_add_epi32(t, half), byte), half);
            let h = _mm256_srai_epi32::<8>(_mm256_sub_epi32(t, m));
            for (p, d) in [h, m, l].into_iter().enumerate() {
                // The 8 lanes (each in -128..=127) as bytes.
                let w = _mm_packs_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256::<1>(d));
                // SAFETY: inside the row's pair `b / 2` (`out` holds `act_bytes` bytes).
                unsafe { _mm_storel_epi64(o.add(at(p, i)).cast(), _mm_packs_epi16(w, w)) };
            }
        }
        // SAFETY: the scale and sum arrays hold `nb` f32 each; the pair's 32 correction bytes.
        unsafe {
            o.add(scales + 4 * b).cast::<f32>().write_unaligned(s);
            // |Σ n| ≤ 2^27: exact in i32; one rounding to f32, exact scaling.
            o.add(sums + 4 * b).cast::<f32>().write_unaligned(hsum_i32(total) as f32 * s);
            if q6 {
                // `-32 Σ n` per lane: lane `q` of the kernel's `vpmaddwd` sums elements `4q ..
                // 4q + 4` (element order). Two horizontal adds leave register `i`'s halves in
                // lanes `i` and `4 + i`.
                let s4 = _mm256_hadd_epi32(_mm256_hadd_epi32(ns[0], ns[1]), _mm256_hadd_epi32(ns[2], ns[3]));
                let s4 = _mm256_permutevar8x32_epi32(s4, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
                let c = _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_slli_epi32::<5>(s4));
                _mm256_storeu_si256(o.add(BLOCK6_BYTES * b + 96).cast(), c);
            } else if offset(ty) != 0 {
                // `-8 Σ n` (Q4_0) or `-16 Σ n` (Q5_0) per lane of the kernel's `vpmaddwd`: lane
                // `4 (b % 2) + q` sums elements `4q ..` of both halves (registers 0, 1 hold the
                // first half).
                let (a, c) = (_mm256_add_epi32(ns[0], ns[2]), _mm256_add_epi32(ns[1], ns[3]));
                let mut e = [0i32; 16];
                _mm256_storeu_si256(e.as_mut_ptr().cast(), a);
                _mm256_storeu_si256(e.as_mut_ptr().add(8).cast(), c);
                let off = offset(ty);
                let lanes: [i32; 4] = std::array::from_fn(|q| -off * e[4 * q..4 * q + 4].iter().sum::<i32>());
                o.add(b / 2 * PAIR_BYTES + 192 + 16 * (b % 2)).cast::<[i32; 4]>().write_unaligned(lanes);
            }
        }
    }
    true
}

/// The largest of `v`'s 8 lanes.
#[inline(always)]
fn hmax(v: __m256) -> f32 {
    let mut a = [0f32; 8];
    // SAFETY: 32 bytes into `a`.
    unsafe { _mm256_storeu_ps(a.as_mut_ptr(), v) };
    a.iter().fold(0f32, |m, &x| m.max(x))
}

/// The sum of `v`'s 8 lanes.
#[inline(always)]
fn hsum_i32(v: __m256i) -> i32 {
    let mut a = [0i32; 8];
    // SAFETY: 32 bytes into `a`.
    unsafe { _mm256_storeu_si256(a.as_mut_ptr().cast(), v) };
    a.iter().sum()
}

/// `y[j]` = the dot of weight row `j` of `w` (`y.len()` rows of `row_bytes`, Q4_0 / Q4_1 /
/// Q5_0 / Q5_1 blocks, or with `split` in `Layout::SplitRows`) with the converted activation row `xa`
/// ([`quantize`], `nb` blocks).
///
/// # Safety
/// AVX2, FMA and F16C must be available; `ty` and `nb` satisfy [`has_path`];
/// `w.len() == y.len() · row_bytes`; `xa` was written by [`quantize`] for `32 nb` elements.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn dot_rows(
    ty: GgmlType,
    split: bool,
    w: &[u8],
    row_bytes: usize,
    xa: &[u8],
    nb: usize,
    y: &mut [f32],
) {
    debug_assert!(w.len() == y.len() * row_bytes && xa.len() >= act_bytes(ty, 32 * nb));
    type RowsFn<const R: usize> = unsafe fn([*const u8; R], usize, *const u8) -> [f32; R];
    let (dot, dot1): (RowsFn<ROWS>, RowsFn<1>) = match (ty, split) {
        (GgmlType::Q4_0, false) => (rows_dot::<ROWS, Q4_0, false>, rows_dot::<1, Q4_0, false>),
        (GgmlType::Q4_0, true) => (rows_dot::<ROWS, Q4_0, true>, rows_dot::<1, Q4_0, true>),
        (GgmlType::Q4_1, false) => (rows_dot::<ROWS, Q4_1, false>, rows_dot::<1, Q4_1, false>),
        (GgmlType::Q4_1, true) => (rows_dot::<ROWS, Q4_1, true>, rows_dot::<1, Q4_1, true>),
        (GgmlType::Q5_0, false) => (rows_dot::<ROWS, Q5_0, false>, rows_dot::<1, Q5_0, false>),
        (GgmlType::Q5_0, true) => (rows_dot::<ROWS, Q5_0, true>, rows_dot::<1, Q5_0, true>),
        (GgmlType::Q4_K, _) => (rows_dot::<ROWS, Q4_K, false>, rows_dot::<1, Q4_K, false>),
        (GgmlType::Q5_K, _) => (rows_dot::<ROWS, Q5_K, false>, rows_dot::<1, Q5_K, false>),
        (GgmlType::Q6_K, _) => (rows_q6k::<ROWS>, rows_q6k::<1>),
        (_, false) => (rows_dot::<ROWS, Q5_1, false>, rows_dot::<1, Q5_1, false>),
        (_, true) => (rows_dot::<ROWS, Q5_1, true>, rows_dot::<1, Q5_1, true>),
    };
    let xp = xa.as_ptr();
    // SAFETY: the row pointers are rows of `w` (`row_groups`); the callees' contract is ours.
    unsafe { row_groups::<ROWS>(w, row_bytes, y, |rows| dot(rows, nb, xp), |row| dot1([row], nb, xp)[0]) }
}

/// [`rows_dot`]'s schemes.
const Q4_0: u8 = 0;
const Q4_1: u8 = 1;
const Q5_0: u8 = 2;
const Q5_1: u8 = 3;
const Q4_K: u8 = 4;
const Q5_K: u8 = 5;

/// Bytes `0..32` of the result: `0xff` where bit `i` of `bits` is set, else 0 (the `qh` bits of
/// two blocks' 16 elements here, or of one block's 32 in [`super::int8_avx2`], as bytes that
/// line up with their nibbles; llama.cpp's `bytes_from_bits_32`).
#[inline(always)]
pub(super) unsafe fn bit_bytes(bits: u32) -> __m256i {
    unsafe {
        // Byte `i` takes byte `i / 8` of `bits` (both 128-bit lanes hold all four), then tests
        // its bit `i % 8`.
        let b = _mm256_shuffle_epi8(
            _mm256_set1_epi32(bits as i32),
            _mm256_setr_epi64x(0, 0x0101_0101_0101_0101, 0x0202_0202_0202_0202, 0x0303_0303_0303_0303),
        );
        let sel = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
        _mm256_cmpeq_epi8(_mm256_and_si256(b, sel), sel)
    }
}

/// The dots of `R` rows (`nb` blocks each of scheme `K`, one of [`Q4_0`], [`Q4_1`], [`Q5_0`],
/// [`Q5_1`], [`Q4_K`], [`Q5_K`]; `SPLIT`: in `Layout::SplitRows`) with the converted activation
/// row at `xp`. The Q5 schemes' fifth bits (`qh`) are or-ed into the nibble bytes as 16
/// ([`bit_bytes`]). Q5: `|Σ q n|` per lane ≤ 8 · 31 · 2²² plus the correction's 8 · 16 · 2²²,
/// inside `i32`.
///
/// Q4_K / Q5_K (blocks of 256: `d`, `dmin` f16, 12 bytes of 6-bit scales and mins, Q5_K 32
/// bytes of fifth bits, 128 bytes of nibbles; `w = d sc_j q - dmin m_j` per 32-weight sub-block
/// `j`, here `nb` counts sub-blocks): a group of 8 is one block, its factors `d sc_j` and
/// `dmin m_j` ([`super::decode::k4_scales`]) taking the place of the 8 `d`s and `m`s. Quant
/// bytes `32 g ..` hold sub-block `2g` in their low nibbles and `2g + 1` in their high ones:
/// each 16-byte half loaded into both 128-bit lanes and shifted by 0 and 4 (`vpsrlvq`) gives
/// the pair layout (`x₂ₚ[0..16] | x₂ₚ₊₁[0..16]`), so one pair's lanes keep one scale each.
/// Q5_K's fifth bit of element `l` of sub-block `j` is bit `j` of byte `l`.
///
/// # Safety
/// As [`dot_rows`]; every `rows[r]` points to one row of `nb` blocks.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn rows_dot<const R: usize, const K: u8, const SPLIT: bool>(
    rows: [*const u8; R],
    nb: usize,
    xp: *const u8,
) -> [f32; R] {
    let (has_m, five, kq) = (K == Q4_1 || K == Q5_1, K == Q5_0 || K == Q5_1, K >= Q4_K);
    // Block bytes and where its quants start: Q4_0 18 / 2, Q4_1 20 / 4, Q5_0 22 / 6, Q5_1 24 / 8
    // (Q5's `qh` the 4 bytes before the quants), Q4_K 144 / 16, Q5_K 176 / 48 (`qh` at 16).
    let ts: usize = [18, 20, 22, 24, 144, 176][K as usize];
    let qo: usize = [2, 4, 6, 8, 16, 48][K as usize];
    // Split rows: the `qh` low halves of every block, then the high halves.
    let qh_at = rlx_gguf::layout::split_qh_offset(nb, has_m);
    // Block `b`'s quants and `d` in row `r` (`m` `min_of` bytes after its `d`).
    let quants =
        |r: usize, b: usize| if SPLIT { rows[r].wrapping_add(16 * b) } else { rows[r].wrapping_add(ts * b + qo) };
    let scale =
        |r: usize, b: usize| if SPLIT { rows[r].wrapping_add(16 * nb + 2 * b) } else { rows[r].wrapping_add(ts * b) };
    let min_of = if SPLIT { 2 * nb } else { 2 };
    let stride = if SPLIT { 2 } else { ts };
    let np = nb / 2;
    let (sp, xs) =
        (xp.wrapping_add(np * PAIR_BYTES).cast::<f32>(), xp.wrapping_add(np * PAIR_BYTES + 4 * nb).cast::<f32>());
    let (m4, ones, c256) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi16(1), _mm256_set1_epi16(256));
    let pick: [__m256i; 4] = std::array::from_fn(|p| {
        let (a, b) = (2 * p as i32, 2 * p as i32 + 1);
        _mm256_setr_epi32(a, a, a, a, b, b, b, b)
    });
    // Q4_K / Q5_K: a 16-byte half's low nibbles in lanes 0–1, its high ones in 2–3; Q5_K's
    // fifth bits of pair `p` (bit `2p` of the `qh` bytes in the low lane, `2p + 1` in the high).
    let shift = _mm256_setr_epi64x(0, 0, 4, 4);
    let fifth: [__m256i; 4] = std::array::from_fn(|p| {
        _mm256_setr_m128i(_mm_set1_epi8(1 << (2 * p)), _mm_set1_epi8((1u8 << (2 * p + 1)) as i8))
    });
    let mut acc = [_mm256_setzero_ps(); R];
    // SAFETY (every pointer below): block `b < nb` of row `r` (or its entries in the split
    // row's arrays of `nb`), activation pair `b / 2 < np`, scales and sums `b < nb`; the
    // 8-value loads read whole groups only.
    unsafe {
        // Pair `b / 2` of row `r`, `sc` holding the row's scales of the pair's group. The
        // activation digits are loaded again for each row (from L1): shared by the rows, they
        // and the rows' accumulators outgrew the 16 registers, and the accumulators spilled
        // into a store-to-load chain per pair (64 × 4864 Q4_K from L2 0.0231 → 0.0219 ms).
        // `p`: the pair's place in its group (block `b` is `b0 + 2p`), `xa` its activation
        // digits, `blk` (Q4_K / Q5_K) the row's block of 256. (Pointers passed in, not
        // computed from `b` here: LLVM did not reduce `b / 8` and `b / 2` of the unrolled
        // pairs, 11 scalar instructions per pair; 0.0219 → 0.0206 ms.)
        let pair = |acc: &mut __m256, sc: __m256, r: usize, b: usize, p: usize, xa: *const u8, blk: *const u8| {
            let x = |i: usize| _mm256_loadu_si256(xa.add(32 * i).cast());
            {
                let (mut lo, mut hi) = if kq {
                    // Sub-blocks `2p`, `2p + 1` of the block.
                    let q = blk.add(qo + 32 * p);
                    let half = |h: usize| {
                        let v = _mm256_broadcastsi128_si256(_mm_loadu_si128(q.add(16 * h).cast()));
                        _mm256_and_si256(_mm256_srlv_epi64(v, shift), m4)
                    };
                    let (mut lo, mut hi) = (half(0), half(1));
                    if K == Q5_K {
                        let sixteen = _mm256_set1_epi8(16);
                        let bits = |h: usize| {
                            let v = _mm256_broadcastsi128_si256(_mm_loadu_si128(blk.add(16 + 16 * h).cast()));
                            let set = _mm256_cmpeq_epi8(_mm256_and_si256(v, fifth[p]), fifth[p]);
                            _mm256_and_si256(set, sixteen)
                        };
                        lo = _mm256_or_si256(lo, bits(0));
                        hi = _mm256_or_si256(hi, bits(1));
                    }
                    (lo, hi)
                } else {
                    let v = if SPLIT {
                        _mm256_loadu_si256(quants(r, b).cast())
                    } else {
                        _mm256_loadu2_m128i(quants(r, b + 1).cast(), quants(r, b).cast())
                    };
                    (_mm256_and_si256(v, m4), _mm256_and_si256(_mm256_srli_epi16::<4>(v), m4))
                };
                if five {
                    // Bits 0–15 of both blocks' `qh` go with `lo` (block `b` in bytes 0–15),
                    // bits 16–31 with `hi`.
                    let (q0, q1) = if SPLIT {
                        let at = rows[r].add(qh_at + 2 * b);
                        (at.cast::<u32>().read_unaligned(), at.add(2 * nb).cast::<u32>().read_unaligned())
                    } else {
                        let qh = |j: usize| rows[r].add(ts * (b + j) + qo - 4).cast::<u32>().read_unaligned();
                        let (h0, h1) = (qh(0), qh(1));
                        ((h0 & 0xffff) | (h1 << 16), (h0 >> 16) | (h1 & 0xffff_0000))
                    };
                    let sixteen = _mm256_set1_epi8(16);
                    lo = _mm256_or_si256(lo, _mm256_and_si256(bit_bytes(q0), sixteen));
                    hi = _mm256_or_si256(hi, _mm256_and_si256(bit_bytes(q1), sixteen));
                }
                let plane = |p: usize| {
                    _mm256_add_epi16(_mm256_maddubs_epi16(lo, x(2 * p)), _mm256_maddubs_epi16(hi, x(2 * p + 1)))
                };
                let hm = _mm256_add_epi32(
                    _mm256_slli_epi32::<16>(_mm256_madd_epi16(plane(0), ones)),
                    _mm256_madd_epi16(plane(1), c256),
                );
                let mut isum = _mm256_add_epi32(hm, _mm256_madd_epi16(plane(2), ones));
                if K == Q4_0 || K == Q5_0 {
                    isum = _mm256_add_epi32(isum, _mm256_loadu_si256(xa.add(192).cast()));
                }
                let d = _mm256_permutevar8x32_ps(sc, pick[p]);
                *acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), d, *acc);
            }
        };
        // The `n` f16 values from `p` on, `stride` bytes apart, in lanes `0..n` (zero after).
        let halves = |p: *const u8, n: usize| {
            if SPLIT && n == 8 {
                _mm256_cvtph_ps(_mm_loadu_si128(p.cast()))
            } else {
                let h = |i: usize| if i < n { p.add(stride * i).cast::<i16>().read_unaligned() } else { 0 };
                _mm256_cvtph_ps(_mm_setr_epi16(h(0), h(1), h(2), h(3), h(4), h(5), h(6), h(7)))
            }
        };
        let f32s = |p: *const f32, n: usize| {
            if n == 8 {
                _mm256_loadu_ps(p)
            } else {
                _mm256_insertf128_ps::<0>(_mm256_setzero_ps(), _mm_castsi128_ps(_mm_loadl_epi64(p.cast())))
            }
        };
        // Groups of 4 pairs (8 scales per conversion), then the last pairs one at a time.
        let groups = np / 4;
        for b0 in (0..8 * groups).step_by(8).chain((8 * groups..nb).step_by(2)) {
            let n = if b0 < 8 * groups { 8 } else { 2 };
            let s = f32s(sp.add(b0), n);
            let xg = xp.add(b0 / 2 * PAIR_BYTES);
            for r in 0..R {
                // Q4_K / Q5_K: one block of 256 per group (`nb` a multiple of 8).
                let blk = rows[r].wrapping_add(ts * (b0 / 8));
                let sc = if kq {
                    let (dsc, mmn) = super::decode::k4_scales(blk);
                    acc[r] = _mm256_fnmadd_ps(mmn, f32s(xs.add(b0), 8), acc[r]);
                    _mm256_mul_ps(dsc, s)
                } else {
                    if has_m {
                        // Only lanes `0..n` are nonzero: `m` past them is zero.
                        acc[r] = _mm256_fmadd_ps(halves(scale(r, b0).add(min_of), n), f32s(xs.add(b0), n), acc[r]);
                    }
                    _mm256_mul_ps(halves(scale(r, b0), n), s)
                };
                for p in 0..n / 2 {
                    pair(&mut acc[r], sc, r, b0 + 2 * p, p, xg.add(p * PAIR_BYTES), blk);
                }
            }
        }
    }
    std::array::from_fn(|r| hsum(acc[r]))
}

/// [`rows_dot`] for Q6_K (210-byte blocks of 256: 128 bytes of low nibbles `ql`, 64 bytes of
/// high bit pairs `qh`, 16 `i8` sub-block scales, `d` f16; `w = d sc_j (q - 32)` per 16-weight
/// sub-block `j`; `nb` 32-weight blocks per row) against the Q6_K activation layout (per block
/// the three planes in element order, then the `-32 Σ n` correction per lane). Per 128-weight
/// half of a block, its 64 `ql` bytes and 32 `qh` bytes give four registers of 32 6-bit quants
/// in element order (elements `l`, `l + 32`, `l + 64`, `l + 96` share `qh` byte `l`), each
/// dotted unsigned against one activation block (`vpmaddubsw` pair sums ≤ 2 · 63 · 128, a
/// lane's `|Σ q n| ≤ 4 · 63 · 2²²`); lanes 0–3 hold one sub-block and 4–7 the next, scaled by
/// `d sc_j s_b`.
///
/// # Safety
/// As [`dot_rows`] (`nb` a multiple of 8; `xp` written by [`quantize`] for Q6_K).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn rows_q6k<const R: usize>(rows: [*const u8; R], nb: usize, xp: *const u8) -> [f32; R] {
    const TS: usize = 210;
    let sp = xp.wrapping_add(nb * BLOCK6_BYTES).cast::<f32>();
    let (m4, m30) = (_mm256_set1_epi8(0x0f), _mm256_set1_epi8(0x30));
    let (ones, c256) = (_mm256_set1_epi16(1), _mm256_set1_epi16(256));
    // Sub-blocks `2t`, `2t + 1` of a half's 8 factors for its activation block `t`; each half's
    // sub-blocks' activation scales (block `j / 2` for sub-block `j`).
    let pick: [__m256i; 4] = std::array::from_fn(|t| {
        let (a, b) = (2 * t as i32, 2 * t as i32 + 1);
        _mm256_setr_epi32(a, a, a, a, b, b, b, b)
    });
    let dup = [_mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3), _mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7, 7)];
    let mut acc = [_mm256_setzero_ps(); R];
    // One row after another: with the rows inside the block loop, LLVM hoisted the activation
    // loads out of the row loop into a stack copy (64 × 4864 from L2: 0.0299 → 0.0274 ms with
    // this order; the rows still share `row_groups`' prefetch).
    // SAFETY (every pointer below): block `blk < nb / 8` of row `r` spans `TS` bytes from
    // `rows[r] + TS blk`; activation block `b < nb` spans `BLOCK6_BYTES` from `xp +
    // BLOCK6_BYTES b`, its scale at `sp + b`.
    unsafe {
        for r in 0..R {
            for blk in 0..nb / 8 {
                let s = _mm256_loadu_ps(sp.add(8 * blk));
                let s2 = [_mm256_permutevar8x32_ps(s, dup[0]), _mm256_permutevar8x32_ps(s, dup[1])];
                let p = rows[r].add(TS * blk);
                let d = _mm256_cvtph_ps(_mm_set1_epi16(p.add(208).cast::<i16>().read_unaligned()));
                let sc8 = _mm_loadu_si128(p.add(192).cast());
                let sc = [
                    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(sc8)),
                    _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128::<8>(sc8))),
                ];
                for h in 0..2 {
                    let f = _mm256_mul_ps(_mm256_mul_ps(d, sc[h]), s2[h]);
                    let ql0 = _mm256_loadu_si256(p.add(64 * h).cast());
                    let ql1 = _mm256_loadu_si256(p.add(64 * h + 32).cast());
                    let qh = _mm256_loadu_si256(p.add(128 + 32 * h).cast());
                    let z = [
                        _mm256_or_si256(_mm256_and_si256(ql0, m4), _mm256_and_si256(_mm256_slli_epi16::<4>(qh), m30)),
                        _mm256_or_si256(_mm256_and_si256(ql1, m4), _mm256_and_si256(_mm256_slli_epi16::<2>(qh), m30)),
                        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16::<4>(ql0), m4), _mm256_and_si256(qh, m30)),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16::<4>(ql1), m4),
                            _mm256_and_si256(_mm256_srli_epi16::<2>(qh), m30),
                        ),
                    ];
                    for (t, &zt) in z.iter().enumerate() {
                        let xb = xp.add(BLOCK6_BYTES * (8 * blk + 4 * h + t));
                        let x = |pl: usize| _mm256_maddubs_epi16(zt, _mm256_loadu_si256(xb.add(32 * pl).cast()));
                        let hm = _mm256_add_epi32(
                            _mm256_slli_epi32::<16>(_mm256_madd_epi16(x(0), ones)),
                            _mm256_madd_epi16(x(1), c256),
                        );
                        let corr = _mm256_loadu_si256(xb.add(96).cast());
                        let isum = _mm256_add_epi32(hm, _mm256_add_epi32(_mm256_madd_epi16(x(2), ones), corr));
                        let fj = _mm256_permutevar8x32_ps(f, pick[t]);
                        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), fj, acc[r]);
                    }
                }
            }
        }
    }
    std::array::from_fn(|r| hsum(acc[r]))
}
