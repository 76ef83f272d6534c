//! MXFP4 (OCP microscaling FP4): 32 E2M1 values sharing one E8M0 exponent byte.
//!
//! Layout (17 B): `e u8 | qs[16]`; element `j < 16` is the low nibble of `qs[j]`, `j >= 16` the
//! high nibble of `qs[j - 16]`. The nibble indexes the doubled E2M1 levels
//! `kvalues = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, ..., -12]`, and the scale is half of `2^(e - 127)`
//! (`ggml_e8m0_to_fp32_half`), so `x = d * kvalue`.
//!
//! Quantization follows `gguf.quants.MXFP4.quantize_blocks`: `e = floor(log2(max |x|)) - 2 + 127`
//! (0 for an all-zero block), then each value takes the first level of least absolute error.
//! Blocks with `max |x| < 2^-125` (where `e` would be negative) are outside its domain.

use super::iq_tables::KVALUES_MXFP4;

/// `ggml_e8m0_to_fp32_half`: `2^(e - 128)` as f32 (subnormal for `e < 2`).
pub fn e8m0_to_fp32_half(e: u8) -> f32 {
    let bits = if e < 2 { 0x0020_0000u32 << e } else { u32::from(e - 1) << 23 };
    f32::from_bits(bits)
}

/// Dequantize one MXFP4 block (17 bytes -> 32 values).
pub fn dequantize_mxfp4(b: &[u8], out: &mut [f32]) {
    let d = e8m0_to_fp32_half(b[0]);
    for j in 0..16 {
        let q = b[1 + j];
        out[j] = d * KVALUES_MXFP4[(q & 0x0f) as usize] as f32;
        out[j + 16] = d * KVALUES_MXFP4[(q >> 4) as usize] as f32;
    }
}

/// Quantize 32 values to one MXFP4 block.
pub fn quantize_mxfp4(x: &[f32], b: &mut [u8]) {
    let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    let e = if amax > 0.0 { (amax.log2().floor() - 2.0 + 127.0) as u8 } else { 0 };
    let d = e8m0_to_fp32_half(e);
    let best = |v: f32| {
        let mut best_i = 0usize;
        let mut best_err = (d * KVALUES_MXFP4[0] as f32 - v).abs();
        for (i, &k) in KVALUES_MXFP4.iter().enumerate().skip(1) {
            let err = (d * k as f32 - v).abs();
            if err < best_err {
                best_i = i;
                best_err = err;
            }
        }
        best_i as u8
    };
    b[0] = e;
    for j in 0..16 {
        b[1 + j] = best(x[j]) | (best(x[j + 16]) << 4);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn e8m0_half() {
        assert_eq!(e8m0_to_fp32_half(128), 1.0);
        assert_eq!(e8m0_to_fp32_half(127), 0.5);
        assert_eq!(e8m0_to_fp32_half(0), f32::from_bits(0x0020_0000));
        assert_eq!(e8m0_to_fp32_half(1), f32::from_bits(0x0040_0000));
        assert_eq!(e8m0_to_fp32_half(2), f32::from_bits(0x0080_0000));
    }

    #[test]
    fn representable_values_round_trip() {
        let x: Vec<f32> = (0..32)
            .map(|i| [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0][i % 8] * if i % 3 == 0 { -1.0 } else { 1.0 })
            .collect();
        let mut b = [0u8; 17];
        quantize_mxfp4(&x, &mut b);
        let mut y = [0.0f32; 32];
        dequantize_mxfp4(&b, &mut y);
        assert_eq!(&x[..], &y[..]);
    }
}
