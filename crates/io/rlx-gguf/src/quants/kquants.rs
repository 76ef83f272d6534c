//! k-quants: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and Q8_K (super-blocks of 256).
//!
//! Byte layouts (`ggml-common.h`):
//! - Q2_K (84): `scales[16] | qs[64] | d f16 | dmin f16`; 16 groups of 16, each with a 4-bit
//!   scale (low nibble) and min (high nibble): `x = d*sc * q - dmin*m`.
//! - Q3_K (110): `hmask[32] | qs[64] | scales[12] | d f16`; 16 groups of 16 with 6-bit signed
//!   scales (`-32` bias): `x = d*sc * (q - 4*(1 - hbit))`.
//! - Q4_K (144): `d | dmin | scales[12] | qs[128]`; 8 groups of 32 with 6-bit scale/min pairs
//!   packed as in `get_scale_min_k4`: `x = d*sc * q - dmin*m`.
//! - Q5_K (176): `d | dmin | scales[12] | qh[32] | qs[128]`: as Q4_K with a fifth bit.
//! - Q6_K (210): `ql[128] | qh[64] | scales i8[16] | d f16`: `x = d*sc * (q - 32)`.
//! - Q8_K (292): `d f32 | qs i8[256] | bsums i16[16]`: `x = d * q`.
//!
//! Within a 256 block the 2-bit quants of Q2_K/Q3_K are stored as two halves of 128: element
//! `e` is bits `2*((e%128)/32)` of byte `32*(e/128) + e%32`; 4-bit quants of Q4_K/Q5_K put
//! element `e` in nibble `(e%64)/32` of byte `32*(e/64) + e%32`.
//!
//! Dequantization matches `gguf.quants` bit for bit (group scale `d*sc` rounded first, then
//! `* q`, then `- d*m`). Quantization ports llama.cpp's `quantize_row_q{2..6,8}_K_ref` (the
//! deterministic reference without an importance matrix), including its `nearest_int` rounding.

use super::{f16_at, put_f16};
use crate::types::QK_K;

/// `GROUP_MAX_EPS` of ggml-quants.c: groups with a smaller max |x| quantize to zero.
const GROUP_MAX_EPS: f32 = 1e-15;

/// llama.cpp's `nearest_int`: round half to even via the 1.5*2^23 trick (valid for |x| < 2^22,
/// the range the callers produce).
#[inline]
fn nearest_int(fval: f32) -> i32 {
    let val = fval + 12_582_912.0;
    let i = val.to_bits() as i32;
    (i & 0x007f_ffff) - 0x0040_0000
}

/// Scale and min of group `j` (0..8) of a Q4_K/Q5_K block (`get_scale_min_k4`); `q` is the
/// block's 12 packed scale bytes.
#[inline]
pub fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0xf) | ((q[j - 4] >> 6) << 4), (q[j + 4] >> 4) | ((q[j] >> 6) << 4))
    }
}

/// Dequantize one Q2_K block (84 bytes -> 256 values).
pub fn dequantize_q2_k(b: &[u8], out: &mut [f32]) {
    let (scales, qs) = (&b[0..16], &b[16..80]);
    let d = f16_at(b, 80);
    let dmin = f16_at(b, 82);
    for (g, og) in out.chunks_exact_mut(16).enumerate() {
        let sc = scales[g];
        let dl = d * (sc & 0xf) as f32;
        let ml = dmin * (sc >> 4) as f32;
        for (l, o) in og.iter_mut().enumerate() {
            let e = 16 * g + l;
            let q = (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
            *o = dl * q as f32 - ml;
        }
    }
}

/// The 16 signed 6-bit scales of a Q3_K block.
fn q3_k_scales(s: &[u8]) -> [i8; 16] {
    let mut out = [0i8; 16];
    for (k, o) in out.iter_mut().enumerate() {
        let lo = if k < 8 { s[k] & 0xf } else { s[k - 8] >> 4 };
        let hi = (s[8 + k % 4] >> (2 * (k / 4))) & 3;
        *o = (lo | (hi << 4)) as i8 - 32;
    }
    out
}

/// Dequantize one Q3_K block (110 bytes -> 256 values).
pub fn dequantize_q3_k(b: &[u8], out: &mut [f32]) {
    let (hmask, qs) = (&b[0..32], &b[32..96]);
    let scales = q3_k_scales(&b[96..108]);
    let d = f16_at(b, 108);
    for (g, og) in out.chunks_exact_mut(16).enumerate() {
        let dl = d * scales[g] as f32;
        for (l, o) in og.iter_mut().enumerate() {
            let e = 16 * g + l;
            let ql = ((qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3) as i8;
            let hbit = (hmask[e % 32] >> (e / 32)) & 1;
            let q = ql - if hbit == 0 { 4 } else { 0 };
            *o = dl * q as f32;
        }
    }
}

/// Dequantize one Q4_K block (144 bytes -> 256 values).
pub fn dequantize_q4_k(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let dmin = f16_at(b, 2);
    let (scales, qs) = (&b[4..16], &b[16..144]);
    for (j, og) in out.chunks_exact_mut(32).enumerate() {
        let (sc, m) = scale_min_k4(j, scales);
        let dl = d * sc as f32;
        let ml = dmin * m as f32;
        let shift = 4 * (j % 2);
        for (l, o) in og.iter_mut().enumerate() {
            let q = (qs[32 * (j / 2) + l] >> shift) & 0xf;
            *o = dl * q as f32 - ml;
        }
    }
}

/// Dequantize one Q5_K block (176 bytes -> 256 values).
pub fn dequantize_q5_k(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let dmin = f16_at(b, 2);
    let (scales, qh, qs) = (&b[4..16], &b[16..48], &b[48..176]);
    for (j, og) in out.chunks_exact_mut(32).enumerate() {
        let (sc, m) = scale_min_k4(j, scales);
        let dl = d * sc as f32;
        let ml = dmin * m as f32;
        let shift = 4 * (j % 2);
        for (l, o) in og.iter_mut().enumerate() {
            let q = ((qs[32 * (j / 2) + l] >> shift) & 0xf) | (((qh[l] >> j) & 1) << 4);
            *o = dl * q as f32 - ml;
        }
    }
}

/// Dequantize one Q6_K block (210 bytes -> 256 values).
pub fn dequantize_q6_k(b: &[u8], out: &mut [f32]) {
    let (ql, qh, scales) = (&b[0..128], &b[128..192], &b[192..208]);
    let d = f16_at(b, 208);
    for (g, og) in out.chunks_exact_mut(16).enumerate() {
        let dl = d * (scales[g] as i8) as f32;
        for (l, o) in og.iter_mut().enumerate() {
            let e = 16 * g + l;
            let (half, r) = (e / 128, e % 128);
            let lo = (ql[64 * half + r % 64] >> (4 * (r / 64))) & 0xf;
            let hi = (qh[32 * half + r % 32] >> (2 * (r / 32))) & 3;
            let q = (lo | (hi << 4)) as i8 - 32;
            *o = dl * q as f32;
        }
    }
}

/// Dequantize one Q8_K block (292 bytes -> 256 values).
pub fn dequantize_q8_k(b: &[u8], out: &mut [f32]) {
    let d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    for (j, o) in out.iter_mut().enumerate() {
        *o = d * (b[4 + j] as i8) as f32;
    }
}

/// `make_qkx2_quants`: fit `x ~ scale * L - min` with `L` in `0..=nmax` (weighted), trying
/// `nstep + 1` scales; returns `(scale, the_min)` (the min is returned positive).
#[allow(clippy::too_many_arguments)]
fn make_qkx2_quants(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    l_out: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    use_mad: bool,
) -> (f32, f32) {
    let n = x.len();
    let mut laux = [0u8; 32];
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l_out[..n].fill(0);
        return (0.0, -min);
    }
    let err = |diff: f32| if use_mad { diff.abs() } else { diff * diff };
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let l = nearest_int(iscale * (x[i] - min));
        l_out[i] = l.clamp(0, nmax) as u8;
        let diff = scale * l_out[i] as f32 + min - x[i];
        best_error += weights[i] * err(diff);
    }
    if nstep < 1 {
        return (scale, -min);
    }
    for is in 0..=nstep {
        iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
            laux[i] = l as u8;
            let w = weights[i];
            let lf = l as f32;
            sum_l += w * lf;
            sum_l2 += w * lf * lf;
            sum_xl += w * lf * x[i];
        }
        let dd = sum_w * sum_l2 - sum_l * sum_l;
        if dd > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / dd;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / dd;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut cur_error = 0.0f32;
            for i in 0..n {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                cur_error += weights[i] * err(diff);
            }
            if cur_error < best_error {
                l_out[..n].copy_from_slice(&laux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// `make_qx_quants` with `rmse_type = 1` and no importance weights (weights `x^2`): symmetric
/// fit `x ~ scale * (L - nmax)`, `L` in `0..2*nmax`; returns the scale.
fn make_qx_quants_rmse1(nmax: i32, x: &[f32], l_out: &mut [i8]) -> f32 {
    let n = x.len();
    let mut max = 0.0f32;
    let mut amax = 0.0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l_out[..n].fill(0);
        return 0.0;
    }
    let nmaxf = nmax as f32;
    let mut iscale = -nmaxf / max;
    let mut sumlx = 0.0f32;
    let mut suml2 = 0.0f32;
    for i in 0..n {
        let l = nearest_int(iscale * x[i]).clamp(-nmax, nmax - 1);
        l_out[i] = (l + nmax) as i8;
        let w = x[i] * x[i];
        let lf = l as f32;
        sumlx += w * x[i] * lf;
        suml2 += w * lf * lf;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9i32..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmaxf + 0.1 * is as f32) / max;
        sumlx = 0.0;
        suml2 = 0.0;
        for &xi in x {
            let l = nearest_int(iscale * xi).clamp(-nmax, nmax - 1);
            let w = xi * xi;
            let lf = l as f32;
            sumlx += w * xi * lf;
            suml2 += w * lf * lf;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for i in 0..n {
                let l = nearest_int(iscale * x[i]).clamp(-nmax, nmax - 1);
                l_out[i] = (nmax + l) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// `make_q3_quants` with `do_rmse = true`: symmetric fit refined by coordinate descent (5 passes
/// at most); `L` in `0..2*nmax`; returns the scale.
fn make_q3_quants_rmse(nmax: i32, x: &[f32], l_out: &mut [i8]) -> f32 {
    let n = x.len();
    let mut max = 0.0f32;
    let mut amax = 0.0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        l_out[..n].fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let mut sumlx = 0.0f32;
    let mut suml2 = 0.0f32;
    for i in 0..n {
        let l = nearest_int(iscale * x[i]).clamp(-nmax, nmax - 1);
        l_out[i] = l as i8;
        let w = x[i] * x[i];
        sumlx += w * x[i] * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    for _ in 0..5 {
        let mut n_changed = 0;
        for i in 0..n {
            let w = x[i] * x[i];
            let li = l_out[i] as f32;
            let mut slx = sumlx - w * x[i] * li;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * li * li;
                let new_l = nearest_int(x[i] * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != i32::from(l_out[i]) {
                    let nl = new_l as f32;
                    slx += w * x[i] * nl;
                    sl2 += w * nl * nl;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        l_out[i] = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed += 1;
                    }
                }
            }
        }
        if n_changed == 0 {
            break;
        }
    }
    for l in l_out[..n].iter_mut() {
        *l += nmax as i8;
    }
    if suml2 > 0.0 { sumlx / suml2 } else { 0.0 }
}

/// Pack 256 2-bit values into 64 bytes (Q2_K / Q3_K order).
fn pack_2bit(l: &[u8], qs: &mut [u8]) {
    for j in (0..QK_K).step_by(128) {
        for k in 0..32 {
            qs[j / 4 + k] = l[j + k] | (l[j + k + 32] << 2) | (l[j + k + 64] << 4) | (l[j + k + 96] << 6);
        }
    }
}

/// Quantize 256 values to one Q2_K block (`quantize_row_q2_K_ref`).
pub fn quantize_q2_k(x: &[f32], b: &mut [u8]) {
    let mut l = [0u8; QK_K];
    let mut mins = [0.0f32; 16];
    let mut scales = [0.0f32; 16];
    let mut weights = [0.0f32; 16];
    let q4scale = 15.0f32;
    let mut max_scale = 0.0f32;
    let mut max_min = 0.0f32;
    for j in 0..16 {
        let xs = &x[16 * j..16 * j + 16];
        for (w, v) in weights.iter_mut().zip(xs) {
            *w = v.abs();
        }
        let (s, m) = make_qkx2_quants(3, xs, &weights, &mut l[16 * j..16 * j + 16], -0.5, 0.1, 15, true);
        scales[j] = s;
        mins[j] = m;
        if s > max_scale {
            max_scale = s;
        }
        if m > max_min {
            max_min = m;
        }
    }
    let (sc, rest) = b.split_at_mut(16);
    if max_scale > 0.0 {
        let iscale = q4scale / max_scale;
        for j in 0..16 {
            sc[j] = nearest_int(iscale * scales[j]) as u8;
        }
        put_f16(rest, 64, max_scale / q4scale);
    } else {
        sc.fill(0);
        put_f16(rest, 64, 0.0);
    }
    if max_min > 0.0 {
        let iscale = q4scale / max_min;
        for j in 0..16 {
            let lm = nearest_int(iscale * mins[j]);
            sc[j] |= (lm << 4) as u8;
        }
        put_f16(rest, 66, max_min / q4scale);
    } else {
        put_f16(rest, 66, 0.0);
    }
    let d_all = f16_at(rest, 64);
    let dmin_all = f16_at(rest, 66);
    for j in 0..16 {
        let d = d_all * (sc[j] & 0xf) as f32;
        if d == 0.0 {
            continue;
        }
        let dm = dmin_all * (sc[j] >> 4) as f32;
        for ii in 0..16 {
            l[16 * j + ii] = nearest_int((x[16 * j + ii] + dm) / d).clamp(0, 3) as u8;
        }
    }
    pack_2bit(&l, &mut rest[0..64]);
}

/// Quantize 256 values to one Q3_K block (`quantize_row_q3_K_ref`).
pub fn quantize_q3_k(x: &[f32], b: &mut [u8]) {
    let mut l = [0i8; QK_K];
    let mut scales = [0.0f32; 16];
    let mut max_scale = 0.0f32;
    let mut amax = 0.0f32;
    for j in 0..16 {
        scales[j] = make_q3_quants_rmse(4, &x[16 * j..16 * j + 16], &mut l[16 * j..16 * j + 16]);
        let s = scales[j].abs();
        if s > amax {
            amax = s;
            max_scale = scales[j];
        }
    }
    let (hmask, rest) = b.split_at_mut(32);
    let (qs, rest) = rest.split_at_mut(64);
    let (sc, dbytes) = rest.split_at_mut(12);
    sc.fill(0);
    if max_scale != 0.0 {
        let iscale = -32.0 / max_scale;
        for j in 0..16 {
            let lv = nearest_int(iscale * scales[j]) as i8;
            let lv = (lv.clamp(-32, 31) + 32) as u8;
            if j < 8 {
                sc[j] = lv & 0xf;
            } else {
                sc[j - 8] |= (lv & 0xf) << 4;
            }
            sc[j % 4 + 8] |= (lv >> 4) << (2 * (j / 4));
        }
        put_f16(dbytes, 0, 1.0 / iscale);
    } else {
        put_f16(dbytes, 0, 0.0);
    }
    let d_all = f16_at(dbytes, 0);
    let scs = q3_k_scales(sc);
    for j in 0..16 {
        let d = d_all * scs[j] as f32;
        if d == 0.0 {
            continue;
        }
        for ii in 0..16 {
            l[16 * j + ii] = (nearest_int(x[16 * j + ii] / d).clamp(-4, 3) + 4) as i8;
        }
    }
    hmask.fill(0);
    let mut lu = [0u8; QK_K];
    for (j, (u, &v)) in lu.iter_mut().zip(l.iter()).enumerate() {
        let mut v = v as u8;
        if v > 3 {
            hmask[j % 32] |= 1 << (j / 32);
            v -= 4;
        }
        *u = v;
    }
    pack_2bit(&lu, qs);
}

/// Shared tail of Q4_K / Q5_K: pick the 6-bit scales/mins and requantize `l`.
fn kx_scales_and_requant(x: &[f32], nmax: i32, scales: &[f32; 8], mins: &[f32; 8], b: &mut [u8], l: &mut [u8]) {
    let max_scale = scales.iter().fold(0.0f32, |a, &s| if s > a { s } else { a });
    let max_min = mins.iter().fold(0.0f32, |a, &m| if m > a { m } else { a });
    let inv_scale = if max_scale > 0.0 { 63.0 / max_scale } else { 0.0 };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let sc = &mut b[4..16];
    sc.fill(0);
    for j in 0..8 {
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            sc[j] = ls;
            sc[j + 4] = lm;
        } else {
            sc[j + 4] = (ls & 0xf) | ((lm & 0xf) << 4);
            sc[j - 4] |= (ls >> 4) << 6;
            sc[j] |= (lm >> 4) << 6;
        }
    }
    put_f16(b, 0, max_scale / 63.0);
    put_f16(b, 2, max_min / 63.0);
    let d_all = f16_at(b, 0);
    let dmin_all = f16_at(b, 2);
    for j in 0..8 {
        let (s, m) = scale_min_k4(j, &b[4..16]);
        let d = d_all * s as f32;
        if d == 0.0 {
            continue;
        }
        let dm = dmin_all * m as f32;
        for ii in 0..32 {
            l[32 * j + ii] = nearest_int((x[32 * j + ii] + dm) / d).clamp(0, nmax) as u8;
        }
    }
}

/// Per-group fit shared by Q4_K / Q5_K (weights `sqrt(mean(x^2)) + |x|`).
fn kx_fit(x: &[f32], nmax: i32, rmin: f32, rdelta: f32, nstep: i32, l: &mut [u8]) -> ([f32; 8], [f32; 8]) {
    let mut scales = [0.0f32; 8];
    let mut mins = [0.0f32; 8];
    let mut weights = [0.0f32; 32];
    for j in 0..8 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0.0f32;
        for &v in xs {
            sum_x2 += v * v;
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        for (w, v) in weights.iter_mut().zip(xs) {
            *w = av_x + v.abs();
        }
        let (s, m) = make_qkx2_quants(nmax, xs, &weights, &mut l[32 * j..32 * j + 32], rmin, rdelta, nstep, false);
        scales[j] = s;
        mins[j] = m;
    }
    (scales, mins)
}

/// Quantize 256 values to one Q4_K block (`quantize_row_q4_K_ref`).
pub fn quantize_q4_k(x: &[f32], b: &mut [u8]) {
    let mut l = [0u8; QK_K];
    let (scales, mins) = kx_fit(x, 15, -1.0, 0.1, 20, &mut l);
    kx_scales_and_requant(x, 15, &scales, &mins, b, &mut l);
    let qs = &mut b[16..144];
    for (c, j) in (0..QK_K).step_by(64).enumerate() {
        for k in 0..32 {
            qs[32 * c + k] = l[j + k] | (l[j + k + 32] << 4);
        }
    }
}

/// Quantize 256 values to one Q5_K block (`quantize_row_q5_K_ref`).
pub fn quantize_q5_k(x: &[f32], b: &mut [u8]) {
    let mut l = [0u8; QK_K];
    let (scales, mins) = kx_fit(x, 31, -0.5, 0.1, 15, &mut l);
    kx_scales_and_requant(x, 31, &scales, &mins, b, &mut l);
    let (qh, ql) = b[16..176].split_at_mut(32);
    qh.fill(0);
    let (mut m1, mut m2) = (1u8, 2u8);
    for (c, n) in (0..QK_K).step_by(64).enumerate() {
        for j in 0..32 {
            let mut l1 = l[n + j];
            if l1 > 15 {
                l1 -= 16;
                qh[j] |= m1;
            }
            let mut l2 = l[n + j + 32];
            if l2 > 15 {
                l2 -= 16;
                qh[j] |= m2;
            }
            ql[32 * c + j] = l1 | (l2 << 4);
        }
        m1 = m1.wrapping_shl(2);
        m2 = m2.wrapping_shl(2);
    }
}

/// Quantize 256 values to one Q6_K block (`quantize_row_q6_K_ref`).
pub fn quantize_q6_k(x: &[f32], b: &mut [u8]) {
    let mut l = [0i8; QK_K];
    let mut scales = [0.0f32; 16];
    let mut max_scale = 0.0f32;
    let mut max_abs_scale = 0.0f32;
    for ib in 0..16 {
        let s = make_qx_quants_rmse1(32, &x[16 * ib..16 * ib + 16], &mut l[16 * ib..16 * ib + 16]);
        scales[ib] = s;
        if s.abs() > max_abs_scale {
            max_abs_scale = s.abs();
            max_scale = s;
        }
    }
    b.fill(0);
    if max_abs_scale < GROUP_MAX_EPS {
        return; // all-zero block, d = 0
    }
    let iscale = -128.0 / max_scale;
    put_f16(b, 208, 1.0 / iscale);
    for ib in 0..16 {
        b[192 + ib] = nearest_int(iscale * scales[ib]).min(127) as i8 as u8;
    }
    let d_all = f16_at(b, 208);
    for j in 0..16 {
        let d = d_all * (b[192 + j] as i8) as f32;
        if d == 0.0 {
            continue;
        }
        for ii in 0..16 {
            l[16 * j + ii] = (nearest_int(x[16 * j + ii] / d).clamp(-32, 31) + 32) as i8;
        }
    }
    let (ql, rest) = b.split_at_mut(128);
    let qh = &mut rest[..64];
    for (h, j) in (0..QK_K).step_by(128).enumerate() {
        for k in 0..32 {
            let q = |o: usize| l[j + k + o] as u8;
            ql[64 * h + k] = (q(0) & 0xf) | ((q(64) & 0xf) << 4);
            ql[64 * h + k + 32] = (q(32) & 0xf) | ((q(96) & 0xf) << 4);
            qh[32 * h + k] = (q(0) >> 4) | ((q(32) >> 4) << 2) | ((q(64) >> 4) << 4) | ((q(96) >> 4) << 6);
        }
    }
}

/// Quantize 256 values to one Q8_K block (`quantize_row_q8_K_ref`): `d = max / -127` with `max`
/// the signed value of largest magnitude, `q = min(127, nearest_int(x / d))`, plus per-16 sums.
pub fn quantize_q8_k(x: &[f32], b: &mut [u8]) {
    let mut max = 0.0f32;
    let mut amax = 0.0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    b.fill(0);
    if amax == 0.0 {
        return;
    }
    let iscale = -127.0 / max;
    for j in 0..QK_K {
        b[4 + j] = nearest_int(iscale * x[j]).min(127) as i8 as u8;
    }
    for j in 0..16 {
        let sum: i32 = b[4 + 16 * j..4 + 16 * j + 16].iter().map(|&q| i32::from(q as i8)).sum();
        b[260 + 2 * j..262 + 2 * j].copy_from_slice(&(sum as i16).to_le_bytes());
    }
    b[0..4].copy_from_slice(&(1.0 / iscale).to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GgmlType;
    use crate::quants::{dequantize, quantize};

    fn data(seed: u32) -> Vec<f32> {
        // deterministic pseudo-random values in [-1, 1] with a few outliers
        let mut s = seed.wrapping_mul(2_654_435_761).wrapping_add(1);
        (0..4 * QK_K)
            .map(|i| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                let v = (s as f32 / u32::MAX as f32) * 2.0 - 1.0;
                if i % 97 == 0 { v * 4.0 } else { v }
            })
            .collect()
    }

    fn rmse(a: &[f32], b: &[f32]) -> f32 {
        (a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f32>() / a.len() as f32).sqrt()
    }

    #[test]
    fn nearest_int_rounds_half_to_even() {
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(-2.5), -2);
        assert_eq!(nearest_int(-2.6), -3);
        assert_eq!(nearest_int(7.49), 7);
    }

    #[test]
    fn round_trip_error_bounds() {
        // RMS error relative to RMS(x), for uniform data in [-1, 1] with 1% outliers at 4x.
        // Measured: Q2_K 0.258, Q3_K 0.149, Q4_K 0.066, Q5_K 0.033, Q6_K 0.0176, Q8_K 0.0100;
        // each bound is ~1.2x that (the expected ~2x drop per extra bit is visible).
        let x = data(7);
        let rms = rmse(&x, &vec![0.0; x.len()]);
        for (ty, bound) in [
            (GgmlType::Q2_K, 0.31),
            (GgmlType::Q3_K, 0.18),
            (GgmlType::Q4_K, 0.08),
            (GgmlType::Q5_K, 0.04),
            (GgmlType::Q6_K, 0.021),
            (GgmlType::Q8_K, 0.012),
        ] {
            let q = quantize(ty, &x).unwrap();
            assert_eq!(q.len(), 4 * ty.type_size());
            let y = dequantize(ty, &q).unwrap();
            let rel = rmse(&x, &y) / rms;
            assert!(rel < bound, "{ty}: relative RMS error {rel} >= {bound}");
            // quantizing the dequantized values again is (nearly) a fixed point
            let y2 = dequantize(ty, &quantize(ty, &y).unwrap()).unwrap();
            assert!(rmse(&y, &y2) / rms < bound, "{ty}: requantization drifts");
        }
    }

    #[test]
    fn zero_and_constant_blocks() {
        for ty in [GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K] {
            let y = dequantize(ty, &quantize(ty, &[0.0; QK_K]).unwrap()).unwrap();
            assert!(y.iter().all(|&v| v == 0.0), "{ty}");
            let c = vec![0.75f32; QK_K];
            let y = dequantize(ty, &quantize(ty, &c).unwrap()).unwrap();
            assert!(y.iter().all(|&v| (v - 0.75).abs() < 0.05), "{ty}: {:?}", &y[..4]);
        }
    }

    #[test]
    fn q8_k_bsums_match_quants() {
        let x = data(3);
        let q = quantize(GgmlType::Q8_K, &x[..QK_K]).unwrap();
        let s0 = i16::from_le_bytes([q[260], q[261]]);
        let manual: i32 = q[4..20].iter().map(|&v| i32::from(v as i8)).sum();
        assert_eq!(i32::from(s0), manual);
    }
}
