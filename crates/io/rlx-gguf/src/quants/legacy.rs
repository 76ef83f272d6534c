//! The original ggml block formats: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q8_1 (32 elements per block).
//!
//! Layouts (bytes): Q4_0 `d f16 | qs[16]`; Q4_1 `d f16 | m f16 | qs[16]`; Q5_0 `d | qh u32 |
//! qs[16]`; Q5_1 `d | m | qh u32 | qs[16]`; Q8_0 `d | qs i8[32]`; Q8_1 `d f16 | s f16 | qs i8[32]` (36 bytes, as ggml).
//! Nibble `j` of byte `qs[j]` low half is element `j`, high half element `j + 16`; bit `j` of `qh`
//! is the fifth bit of element `j`.
//!
//! Dequantization is `d * q` (Q4_0/Q5_0/Q8_0/Q8_1, with `q` centred) or `d * q + m`, each a
//! separately rounded f32 operation, as in `gguf.quants`. Quantization reproduces
//! `gguf.quants.quantize` (= llama.cpp `quantize_row_*_ref`) byte for byte: the scale is computed
//! in f32 and its reciprocal taken before rounding the stored f16.

use super::{f16_at, put_f16};

/// Elements per block of every legacy type.
pub const QK: usize = 32;

fn inv(d: f32) -> f32 {
    if d != 0.0 { 1.0 / d } else { 0.0 }
}

/// The first element of largest magnitude (`argmax(abs(x))`).
fn signed_absmax(x: &[f32]) -> f32 {
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &v in x {
        if v.abs() > amax {
            amax = v.abs();
            max = v;
        }
    }
    max
}

fn min_max(x: &[f32]) -> (f32, f32) {
    let mut min = f32::INFINITY;
    let mut max = f32::NEG_INFINITY;
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

/// Dequantize one Q4_0 block (18 bytes -> 32 values).
pub fn dequantize_q4_0(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    for j in 0..16 {
        let q = b[2 + j];
        out[j] = d * ((q & 0x0f) as i32 - 8) as f32;
        out[j + 16] = d * ((q >> 4) as i32 - 8) as f32;
    }
}

/// Dequantize one Q4_1 block (20 bytes -> 32 values).
pub fn dequantize_q4_1(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let m = f16_at(b, 2);
    for j in 0..16 {
        let q = b[4 + j];
        out[j] = d * (q & 0x0f) as f32 + m;
        out[j + 16] = d * (q >> 4) as f32 + m;
    }
}

/// Dequantize one Q5_0 block (22 bytes -> 32 values).
pub fn dequantize_q5_0(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    for j in 0..16 {
        let q = b[6 + j];
        let lo = (q & 0x0f) as u32 | (((qh >> j) & 1) << 4);
        let hi = (q >> 4) as u32 | (((qh >> (j + 16)) & 1) << 4);
        out[j] = d * (lo as i32 - 16) as f32;
        out[j + 16] = d * (hi as i32 - 16) as f32;
    }
}

/// Dequantize one Q5_1 block (24 bytes -> 32 values).
pub fn dequantize_q5_1(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    let m = f16_at(b, 2);
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    for j in 0..16 {
        let q = b[8 + j];
        let lo = (q & 0x0f) as u32 | (((qh >> j) & 1) << 4);
        let hi = (q >> 4) as u32 | (((qh >> (j + 16)) & 1) << 4);
        out[j] = d * lo as f32 + m;
        out[j + 16] = d * hi as f32 + m;
    }
}

/// Dequantize one Q8_0 block (34 bytes -> 32 values).
pub fn dequantize_q8_0(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    for j in 0..QK {
        out[j] = (b[2 + j] as i8) as f32 * d;
    }
}

/// Dequantize one Q8_1 block (36 bytes -> 32 values): `d * q`; the stored sum `s` is unused.
pub fn dequantize_q8_1(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 0);
    for j in 0..QK {
        out[j] = (b[4 + j] as i8) as f32 * d;
    }
}

/// Quantize 32 values to one Q4_0 block: `d = max / -8` (max = the signed value of largest
/// magnitude), `q = min(15, trunc(x / d + 8.5))`.
pub fn quantize_q4_0(x: &[f32], b: &mut [u8]) {
    let d = signed_absmax(x) / -8.0;
    let id = inv(d);
    put_f16(b, 0, d);
    let q = |v: f32| ((v * id + 8.5).trunc() as u8).min(15);
    for j in 0..16 {
        b[2 + j] = q(x[j]) | (q(x[j + 16]) << 4);
    }
}

/// Quantize 32 values to one Q4_1 block: `d = (max - min) / 15`, `m = min`,
/// `q = min(15, trunc((x - min) / d + 0.5))`.
pub fn quantize_q4_1(x: &[f32], b: &mut [u8]) {
    let (min, max) = min_max(x);
    let d = (max - min) / 15.0;
    let id = inv(d);
    put_f16(b, 0, d);
    put_f16(b, 2, min);
    let q = |v: f32| (((v - min) * id + 0.5).trunc() as u8).min(15);
    for j in 0..16 {
        b[4 + j] = q(x[j]) | (q(x[j + 16]) << 4);
    }
}

/// Quantize 32 values to one Q5_0 block: `d = max / -16`, `q = min(31, trunc(x / d + 16.5))`.
pub fn quantize_q5_0(x: &[f32], b: &mut [u8]) {
    let d = signed_absmax(x) / -16.0;
    let id = inv(d);
    put_f16(b, 0, d);
    let q = |v: f32| ((v * id + 16.5).trunc() as u8).min(31);
    let mut qh = 0u32;
    for j in 0..16 {
        let (lo, hi) = (q(x[j]), q(x[j + 16]));
        b[6 + j] = (lo & 0x0f) | ((hi & 0x0f) << 4);
        qh |= u32::from(lo >> 4) << j;
        qh |= u32::from(hi >> 4) << (j + 16);
    }
    b[2..6].copy_from_slice(&qh.to_le_bytes());
}

/// Quantize 32 values to one Q5_1 block: `d = (max - min) / 31`, `m = min`,
/// `q = min(31, trunc((x - min) / d + 0.5))`.
pub fn quantize_q5_1(x: &[f32], b: &mut [u8]) {
    let (min, max) = min_max(x);
    let d = (max - min) / 31.0;
    let id = inv(d);
    put_f16(b, 0, d);
    put_f16(b, 2, min);
    let q = |v: f32| (((v - min) * id + 0.5).trunc() as u8).min(31);
    let mut qh = 0u32;
    for j in 0..16 {
        let (lo, hi) = (q(x[j]), q(x[j + 16]));
        b[8 + j] = (lo & 0x0f) | ((hi & 0x0f) << 4);
        qh |= u32::from(lo >> 4) << j;
        qh |= u32::from(hi >> 4) << (j + 16);
    }
    b[4..8].copy_from_slice(&qh.to_le_bytes());
}

/// Quantize 32 values to one Q8_0 block: `d = amax / 127`, `q = round(x / d)` (half away from 0).
pub fn quantize_q8_0(x: &[f32], b: &mut [u8]) {
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = inv(d);
    put_f16(b, 0, d);
    for j in 0..QK {
        b[2 + j] = ((x[j] * id).round() as i8) as u8;
    }
}

/// Quantize 32 values to one Q8_1 block (llama.cpp `quantize_row_q8_1_ref`): as Q8_0, plus
/// `s = f16(sum(q) * d)`.
pub fn quantize_q8_1(x: &[f32], b: &mut [u8]) {
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let d = amax / 127.0;
    let id = inv(d);
    put_f16(b, 0, d);
    let mut sum = 0i32;
    for j in 0..QK {
        let q = (x[j] * id).round() as i8;
        sum += i32::from(q);
        b[4 + j] = q as u8;
    }
    put_f16(b, 2, sum as f32 * d);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::GgmlType;
    use crate::quants::{dequantize, quantize};

    fn ramp() -> Vec<f32> {
        (0..64).map(|i| (i as f32 - 20.0) * 0.37).collect()
    }

    #[test]
    fn round_trip_error_is_within_half_a_step() {
        let x = ramp();
        for (ty, levels) in [
            (GgmlType::Q4_0, 15.0),
            (GgmlType::Q4_1, 15.0),
            (GgmlType::Q5_0, 31.0),
            (GgmlType::Q5_1, 31.0),
            (GgmlType::Q8_0, 254.0),
            (GgmlType::Q8_1, 254.0),
        ] {
            let y = dequantize(ty, &quantize(ty, &x).unwrap()).unwrap();
            for (blk_x, blk_y) in x.chunks(32).zip(y.chunks(32)) {
                let (lo, hi) = min_max(blk_x);
                let step = (hi - lo).max(2.0 * lo.abs().max(hi.abs())) / levels;
                for (a, b) in blk_x.iter().zip(blk_y) {
                    assert!((a - b).abs() <= step * 0.51 + 1e-3, "{ty}: {a} vs {b} (step {step})");
                }
            }
        }
    }

    #[test]
    fn zero_block_quantizes_to_zero() {
        let x = [0.0f32; 32];
        for ty in [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0] {
            let y = dequantize(ty, &quantize(ty, &x).unwrap()).unwrap();
            assert!(y.iter().all(|&v| v == 0.0), "{ty}: {y:?}");
        }
    }

    #[test]
    fn q4_0_hand_checked() {
        // d = 1.0, every nibble 9 (low) / 7 (high): +1 and -1
        let mut b = [0u8; 18];
        b[..2].copy_from_slice(&0x3c00u16.to_le_bytes());
        for q in &mut b[2..] {
            *q = 0x79;
        }
        let y = dequantize(GgmlType::Q4_0, &b).unwrap();
        assert!(y[..16].iter().all(|&v| v == 1.0) && y[16..].iter().all(|&v| v == -1.0));
    }
}
