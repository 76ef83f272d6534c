//! i-quants: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M (codebook grids, super-blocks
//! of 256) and IQ4_NL (32) / IQ4_XS (256) (non-linear 4-bit levels). Dequantization only.
//!
//! The grids and sign table are in [`super::iq_tables`], generated from the `gguf` package by
//! `tools/refgen/gen_iq_tables.py`. Every formula follows `gguf.quants.<TYPE>.dequantize_blocks`
//! operation by operation (f32, no fused multiply-add), so the output is bit-identical:
//!
//! - IQ2_XXS (66 B): `d | 8 x (u32 grid idx x4, u32 signs 7b x4 + scale 4b)`;
//!   `x = d*(0.5+s)*0.25 * grid * sign`.
//! - IQ2_XS (74 B): `d | qs u16[32] (9-bit grid idx, 7-bit sign idx) | scales[8]` (a nibble per
//!   16 values); `x = d*(0.5+s)*0.25 * grid * sign`.
//! - IQ2_S (82 B): `d | qs[32] | signs[32] | qh[8] | scales[8]`; 10-bit grid idx, explicit sign
//!   bits.
//! - IQ3_XXS (98 B): `d | qs[64] (grid idx of 4) | 8 x u32 (signs 7b x4 + scale 4b)`;
//!   `x = d*(0.5+s)*0.5 * grid * sign`.
//! - IQ3_S (110 B): `d | qs[64] | qh[8] | signs[32] | scales[4]`; `x = d*(1+2s) * grid * sign`.
//! - IQ1_S (50 B): `d | qs[32] | qh u16[8]`; `x = d*(2s+1) * (grid + delta)`, delta = +-1/8.
//! - IQ1_M (56 B): `qs[32] | qh[16] | scales u16[4]`; the f16 `d` is the top nibbles of the four
//!   scale words; 3-bit scales per 16 values.
//! - IQ4_NL (18 B): `d | qs[16]`; `x = d * kvalues[q]`.
//! - IQ4_XS (136 B): `d | scales_h u16 | scales_l[4] | qs[128]`; 6-bit scales (-32 bias) per 32.

use half::f16;

use super::f16_at;
use super::iq_tables::{
    IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS, KVALUES_IQ4NL,
};

/// `IQ1_S.delta` / `IQ1_M.delta`.
const IQ1_DELTA: f32 = 0.125;

#[inline]
fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

#[inline]
fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}

#[inline]
fn sign(bits: u8, j: usize) -> f32 {
    if (bits >> j) & 1 == 0 { 1.0 } else { -1.0 }
}

/// Dequantize one IQ2_XXS block (66 bytes -> 256 values).
pub fn dequantize_iq2_xxs(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    for (ib, o32) in out.chunks_exact_mut(32).enumerate() {
        let aux0 = u32_at(b, 2 + 8 * ib);
        let aux1 = u32_at(b, 2 + 8 * ib + 4);
        let db = d * (0.5 + (aux1 >> 28) as f32) * 0.25;
        for (l, o8) in o32.chunks_exact_mut(8).enumerate() {
            let grid = &IQ2XXS_GRID[((aux0 >> (8 * l)) & 0xff) as usize];
            let signs = KSIGNS_IQ2XS[((aux1 >> (7 * l)) & 0x7f) as usize];
            for (j, o) in o8.iter_mut().enumerate() {
                *o = db * grid[j] as f32 * sign(signs, j);
            }
        }
    }
}

/// Dequantize one IQ2_XS block (74 bytes -> 256 values).
pub fn dequantize_iq2_xs(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let scales = &b[66..74];
    for (g, o16) in out.chunks_exact_mut(16).enumerate() {
        let s = (scales[g / 2] >> (4 * (g % 2))) & 0x0f;
        let db = d * (0.5 + s as f32) * 0.25;
        for (h, o8) in o16.chunks_exact_mut(8).enumerate() {
            let q = u16_at(b, 2 + 2 * (2 * g + h));
            let grid = &IQ2XS_GRID[(q & 511) as usize];
            let signs = KSIGNS_IQ2XS[(q >> 9) as usize];
            for (j, o) in o8.iter_mut().enumerate() {
                *o = db * grid[j] as f32 * sign(signs, j);
            }
        }
    }
}

/// Dequantize one IQ2_S block (82 bytes -> 256 values).
pub fn dequantize_iq2_s(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let (qs, signs, qh, scales) = (&b[2..34], &b[34..66], &b[66..74], &b[74..82]);
    for (g, o16) in out.chunks_exact_mut(16).enumerate() {
        let s = (scales[g / 2] >> (4 * (g % 2))) & 0x0f;
        let db = d * (0.5 + s as f32) * 0.25;
        for (h, o8) in o16.chunks_exact_mut(8).enumerate() {
            let i = 2 * g + h;
            let idx = qs[i] as usize | ((((qh[i / 4] >> (2 * (i % 4))) & 3) as usize) << 8);
            let grid = &IQ2S_GRID[idx];
            for (j, o) in o8.iter_mut().enumerate() {
                *o = db * grid[j] as f32 * sign(signs[i], j);
            }
        }
    }
}

/// Dequantize one IQ3_XXS block (98 bytes -> 256 values).
pub fn dequantize_iq3_xxs(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let qs = &b[2..66];
    for (ib, o32) in out.chunks_exact_mut(32).enumerate() {
        let aux = u32_at(b, 66 + 4 * ib);
        let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
        for (l, o8) in o32.chunks_exact_mut(8).enumerate() {
            let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 0x7f) as usize];
            for (j, o) in o8.iter_mut().enumerate() {
                let e = 8 * l + j; // within the 32
                let grid = &IQ3XXS_GRID[qs[8 * ib + e / 4] as usize];
                *o = db * grid[e % 4] as f32 * sign(signs, j);
            }
        }
    }
}

/// Dequantize one IQ3_S block (110 bytes -> 256 values).
pub fn dequantize_iq3_s(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let (qs, qh, signs, scales) = (&b[2..66], &b[66..74], &b[74..106], &b[106..110]);
    for (ib, o32) in out.chunks_exact_mut(32).enumerate() {
        let s = (scales[ib / 2] >> (4 * (ib % 2))) & 0x0f;
        let db = d * (1 + 2 * s) as f32;
        for (l, o8) in o32.chunks_exact_mut(8).enumerate() {
            let sbyte = signs[4 * ib + l];
            for (j, o) in o8.iter_mut().enumerate() {
                let i = 8 * ib + (8 * l + j) / 4; // grid index number (64 per block)
                let idx = qs[i] as usize | ((((qh[i / 8] >> (i % 8)) & 1) as usize) << 8);
                *o = db * IQ3S_GRID[idx][j % 4] as f32 * sign(sbyte, j);
            }
        }
    }
}

/// Dequantize one IQ1_S block (50 bytes -> 256 values).
pub fn dequantize_iq1_s(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let qs = &b[2..34];
    for (ib, o32) in out.chunks_exact_mut(32).enumerate() {
        let qh = u16_at(b, 34 + 2 * ib);
        let dl = d * (2 * ((qh >> 12) & 7) + 1) as f32;
        let delta = if qh & 0x8000 == 0 { IQ1_DELTA } else { -IQ1_DELTA };
        for (l, o8) in o32.chunks_exact_mut(8).enumerate() {
            let i = 4 * ib + l;
            let idx = qs[i] as usize | ((((qh >> (3 * l)) & 7) as usize) << 8);
            let grid = &IQ1S_GRID[idx];
            for (j, o) in o8.iter_mut().enumerate() {
                *o = dl * (grid[j] as f32 + delta);
            }
        }
    }
}

/// Dequantize one IQ1_M block (56 bytes -> 256 values).
pub fn dequantize_iq1_m(b: &[u8], out: &mut [f32]) {
    let (qs, qh) = (&b[0..32], &b[32..48]);
    let sc = [u16_at(b, 48), u16_at(b, 50), u16_at(b, 52), u16_at(b, 54)];
    let d_bits = ((sc[0] & 0xf000) >> 12) | ((sc[1] & 0xf000) >> 8) | ((sc[2] & 0xf000) >> 4) | (sc[3] & 0xf000);
    let d = f16::from_bits(d_bits).to_f32();
    for (g, o16) in out.chunks_exact_mut(16).enumerate() {
        let s = (sc[g / 4] >> (3 * (g % 4))) & 7;
        let dl = d * (2 * s + 1) as f32;
        for (h, o8) in o16.chunks_exact_mut(8).enumerate() {
            let i = 2 * g + h;
            let nib = (qh[i / 2] >> (4 * (i % 2))) & 0x0f;
            let idx = qs[i] as usize | (((nib & 7) as usize) << 8);
            let delta = if nib & 8 == 0 { IQ1_DELTA } else { -IQ1_DELTA };
            let grid = &IQ1S_GRID[idx];
            for (j, o) in o8.iter_mut().enumerate() {
                *o = dl * (grid[j] as f32 + delta);
            }
        }
    }
}

/// Dequantize one IQ4_NL block (18 bytes -> 32 values).
pub fn dequantize_iq4_nl(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    for j in 0..16 {
        let q = b[2 + j];
        out[j] = d * KVALUES_IQ4NL[(q & 0x0f) as usize] as f32;
        out[j + 16] = d * KVALUES_IQ4NL[(q >> 4) as usize] as f32;
    }
}

/// Dequantize one IQ4_XS block (136 bytes -> 256 values).
pub fn dequantize_iq4_xs(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let scales_h = u16_at(b, 2);
    let (scales_l, qs) = (&b[4..8], &b[8..136]);
    for (ib, o32) in out.chunks_exact_mut(32).enumerate() {
        let lo = (scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0f;
        let hi = ((scales_h >> (2 * ib)) & 3) as u8;
        let dl = d * ((lo | (hi << 4)) as i8 - 32) as f32;
        for j in 0..16 {
            let q = qs[16 * ib + j];
            o32[j] = dl * KVALUES_IQ4NL[(q & 0x0f) as usize] as f32;
            o32[j + 16] = dl * KVALUES_IQ4NL[(q >> 4) as usize] as f32;
        }
    }
}
