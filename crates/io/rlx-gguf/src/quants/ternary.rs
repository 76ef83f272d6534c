//! Ternary types TQ1_0 and TQ2_0 (super-blocks of 256 values in {-1, 0, 1} times an f16 scale).
//!
//! - TQ1_0 (54 B): `qs[48] | qh[4] | d f16`. Five ternary digits per byte of `qs` and four per
//!   byte of `qh`, stored as `ceil(v * 256 / 243)` of the base-3 number `v`; digit `k` of a byte
//!   is recovered as `((byte * 3^k mod 256) * 3) >> 8`. Element `e < 160` is digit `e / 32` of
//!   `qs[e % 32]`; `160 <= e < 240` is digit `(e - 160) / 16` of `qs[32 + e % 16]`; `e >= 240` is
//!   digit `(e - 240) / 4` of `qh[e % 4]`.
//! - TQ2_0 (66 B): `qs[64] | d f16`; element `e` is bits `2 * ((e % 128) / 32)` of byte
//!   `32 * (e / 128) + e % 32`, minus one.
//!
//! Dequantization is `d * q`, bit-identical with `gguf.quants`; quantization (`d = max |x|`,
//! `q = round(x / d)` half away from zero) is byte-identical with `gguf.quants.quantize`.

use super::{f16_at, put_f16};

const POW3: [u8; 5] = [1, 3, 9, 27, 81];

#[inline]
fn trit(byte: u8, k: usize) -> f32 {
    let v = byte.wrapping_mul(POW3[k]);
    (((u16::from(v) * 3) >> 8) as i8 - 1) as f32
}

/// Dequantize one TQ1_0 block (54 bytes -> 256 values).
pub fn dequantize_tq1_0(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 52);
    for (e, o) in out.iter_mut().enumerate() {
        let q = if e < 160 {
            trit(b[e % 32], e / 32)
        } else if e < 240 {
            trit(b[32 + e % 16], (e - 160) / 16)
        } else {
            trit(b[48 + e % 4], (e - 240) / 4)
        };
        *o = d * q;
    }
}

/// Dequantize one TQ2_0 block (66 bytes -> 256 values).
pub fn dequantize_tq2_0(b: &[u8], out: &mut [f32]) {
    let d = f16_at(b, 64);
    for (e, o) in out.iter_mut().enumerate() {
        let q = (b[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
        *o = d * (q as i8 - 1) as f32;
    }
}

/// `max |x|`, its reciprocal (0 for 0), and the ternary digits `round(x / d) + 1` in 0..=2.
fn ternary_digits(x: &[f32]) -> (f32, [u8; 256]) {
    let d = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut q = [0u8; 256];
    for (qi, &v) in q.iter_mut().zip(x) {
        *qi = ((v * id).round() as i8 + 1) as u8;
    }
    (d, q)
}

/// Quantize 256 values to one TQ1_0 block.
pub fn quantize_tq1_0(x: &[f32], b: &mut [u8]) {
    let (d, q) = ternary_digits(x);
    let pack = |v: u32| (v * 256).div_ceil(243) as u8;
    for m in 0..32 {
        let v: u32 = (0..5).map(|k| u32::from(q[32 * k + m]) * u32::from(POW3[4 - k])).sum();
        b[m] = pack(v);
    }
    for m in 0..16 {
        let v: u32 = (0..5).map(|k| u32::from(q[160 + 16 * k + m]) * u32::from(POW3[4 - k])).sum();
        b[32 + m] = pack(v);
    }
    for m in 0..4 {
        let v: u32 = (0..4).map(|k| u32::from(q[240 + 4 * k + m]) * u32::from(POW3[4 - k])).sum();
        b[48 + m] = pack(v);
    }
    put_f16(b, 52, d);
}

/// Quantize 256 values to one TQ2_0 block.
pub fn quantize_tq2_0(x: &[f32], b: &mut [u8]) {
    let (d, q) = ternary_digits(x);
    for j in 0..2 {
        for m in 0..32 {
            b[32 * j + m] = (0..4).fold(0u8, |acc, k| acc | (q[128 * j + 32 * k + m] << (2 * k)));
        }
    }
    put_f16(b, 64, d);
}

#[cfg(test)]
mod tests {
    use crate::GgmlType;
    use crate::quants::{dequantize, quantize};

    #[test]
    fn ternary_values_round_trip_exactly() {
        let x: Vec<f32> = (0..256).map(|i| [-0.5f32, 0.0, 0.5][(i * 7 + i / 3) % 3]).collect();
        for ty in [GgmlType::TQ1_0, GgmlType::TQ2_0] {
            let y = dequantize(ty, &quantize(ty, &x).unwrap()).unwrap();
            assert_eq!(x, y, "{ty}");
        }
    }
}
