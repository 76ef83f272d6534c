//! Dequantization (every [`GgmlType`]) and quantization (legacy, k-quant, ternary and MXFP4
//! types) of ggml block formats.
//!
//! Every dequantizer is bit-exact with `gguf.quants.dequantize` of the `gguf` Python package
//! 0.19.0: the f32 operations are done in the same order with the same roundings (no fused
//! multiply-add). For the types the package cannot dequantize (Q8_1, Q8_K, F64, I8..I64) the
//! reference is llama.cpp's formula (`x = d * q`) or numpy's `astype(float32)`.
//!
//! Quantizers: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, TQ1_0, TQ2_0, MXFP4 and BF16 are byte-identical with
//! `gguf.quants.quantize` (itself a port of llama.cpp's `quantize_row_*_ref`); Q8_1 follows
//! `quantize_row_q8_1_ref`; Q2_K..Q6_K and Q8_K follow llama.cpp's `quantize_row_q*_K_ref` (no
//! importance matrix). Inputs must be finite; NaN or infinite inputs give unspecified (but
//! non-panicking) output.
//!
//! Layout of each module: one file per family ([`legacy`], [`kquants`], [`iquants`],
//! [`ternary`], [`mxfp4`]), each with `dequantize_<type>(block, out)` / `quantize_<type>(x, block)`
//! functions on exactly one block; this module checks lengths and dispatches.

pub mod iquants;
pub mod kquants;
pub mod legacy;
pub mod mxfp4;
pub mod ternary;

#[rustfmt::skip]
pub mod iq_tables;

use half::{bf16, f16};

use crate::{GgmlType, GgufError, Result};

/// Read the little-endian f16 at `b[i..i + 2]` as f32 (exact).
#[inline]
pub(crate) fn f16_at(b: &[u8], i: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[i], b[i + 1]])).to_f32()
}

/// Store `v` rounded to f16 (round to nearest even, as numpy `astype(float16)`) at `b[i..i + 2]`.
#[inline]
pub(crate) fn put_f16(b: &mut [u8], i: usize, v: f32) {
    b[i..i + 2].copy_from_slice(&f16::from_f32(v).to_bits().to_le_bytes());
}

/// Number of blocks in `len` bytes of `ty`, or [`GgufError::BadLength`].
fn n_blocks(ty: GgmlType, len: usize) -> Result<usize> {
    let ts = ty.type_size();
    if !len.is_multiple_of(ts) {
        return Err(GgufError::BadLength { ty, what: "data byte", len, multiple: ts });
    }
    Ok(len / ts)
}

type DequantFn = fn(&[u8], &mut [f32]);
type QuantFn = fn(&[f32], &mut [u8]);

fn dequant_fn(ty: GgmlType) -> DequantFn {
    use GgmlType::*;
    match ty {
        F32 => |b, o| o[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        F16 => |b, o| o[0] = f16_at(b, 0),
        BF16 => |b, o| o[0] = bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32(),
        F64 => |b, o| o[0] = f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32,
        I8 => |b, o| o[0] = b[0] as i8 as f32,
        I16 => |b, o| o[0] = i16::from_le_bytes([b[0], b[1]]) as f32,
        I32 => |b, o| o[0] = i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32,
        I64 => |b, o| o[0] = i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]) as f32,
        Q4_0 => legacy::dequantize_q4_0,
        Q4_1 => legacy::dequantize_q4_1,
        Q5_0 => legacy::dequantize_q5_0,
        Q5_1 => legacy::dequantize_q5_1,
        Q8_0 => legacy::dequantize_q8_0,
        Q8_1 => legacy::dequantize_q8_1,
        Q2_K => kquants::dequantize_q2_k,
        Q3_K => kquants::dequantize_q3_k,
        Q4_K => kquants::dequantize_q4_k,
        Q5_K => kquants::dequantize_q5_k,
        Q6_K => kquants::dequantize_q6_k,
        Q8_K => kquants::dequantize_q8_k,
        IQ2_XXS => iquants::dequantize_iq2_xxs,
        IQ2_XS => iquants::dequantize_iq2_xs,
        IQ2_S => iquants::dequantize_iq2_s,
        IQ3_XXS => iquants::dequantize_iq3_xxs,
        IQ3_S => iquants::dequantize_iq3_s,
        IQ1_S => iquants::dequantize_iq1_s,
        IQ1_M => iquants::dequantize_iq1_m,
        IQ4_NL => iquants::dequantize_iq4_nl,
        IQ4_XS => iquants::dequantize_iq4_xs,
        TQ1_0 => ternary::dequantize_tq1_0,
        TQ2_0 => ternary::dequantize_tq2_0,
        MXFP4 => mxfp4::dequantize_mxfp4,
    }
}

fn quant_fn(ty: GgmlType) -> Option<QuantFn> {
    use GgmlType::*;
    Some(match ty {
        F32 => |x, b| b.copy_from_slice(&x[0].to_le_bytes()),
        F16 => |x, b| put_f16(b, 0, x[0]),
        BF16 => |x, b| b.copy_from_slice(&bf16_from_f32_ggml(x[0]).to_le_bytes()),
        Q4_0 => legacy::quantize_q4_0,
        Q4_1 => legacy::quantize_q4_1,
        Q5_0 => legacy::quantize_q5_0,
        Q5_1 => legacy::quantize_q5_1,
        Q8_0 => legacy::quantize_q8_0,
        Q8_1 => legacy::quantize_q8_1,
        Q2_K => kquants::quantize_q2_k,
        Q3_K => kquants::quantize_q3_k,
        Q4_K => kquants::quantize_q4_k,
        Q5_K => kquants::quantize_q5_k,
        Q6_K => kquants::quantize_q6_k,
        Q8_K => kquants::quantize_q8_k,
        TQ1_0 => ternary::quantize_tq1_0,
        TQ2_0 => ternary::quantize_tq2_0,
        MXFP4 => mxfp4::quantize_mxfp4,
        _ => return None,
    })
}

/// f32 -> bf16 bits as `ggml_compute_fp32_to_bf16` / `gguf.quants.BF16`: NaN forced quiet,
/// otherwise round to nearest even.
pub fn bf16_from_f32_ggml(x: f32) -> u16 {
    let n = x.to_bits();
    if n & 0x7fff_ffff > 0x7f80_0000 {
        return ((n >> 16) | 64) as u16;
    }
    ((u64::from(n) + (0x7fff + u64::from((n >> 16) & 1))) >> 16) as u16
}

/// Whether [`quantize`] supports `ty`.
pub fn can_quantize(ty: GgmlType) -> bool {
    quant_fn(ty).is_some()
}

/// Dequantize `data` (whole blocks of `ty`) into `out` (`blocks * block_size` floats).
///
/// Errors: [`GgufError::BadLength`] if `data` is not whole blocks, [`GgufError::OutputLength`] if
/// `out` has the wrong length.
pub fn dequantize_into(ty: GgmlType, data: &[u8], out: &mut [f32]) -> Result<()> {
    let nb = n_blocks(ty, data.len())?;
    let bs = ty.block_size();
    let expected = nb.saturating_mul(bs);
    if out.len() != expected {
        return Err(GgufError::OutputLength { ty, blocks: nb, expected, got: out.len() });
    }
    let f = dequant_fn(ty);
    for (b, o) in data.chunks_exact(ty.type_size()).zip(out.chunks_exact_mut(bs)) {
        f(b, o);
    }
    Ok(())
}

/// Dequantize `data` (whole blocks of `ty`) to a new vector of f32.
///
/// Errors: [`GgufError::BadLength`] if `data` is not whole blocks.
pub fn dequantize(ty: GgmlType, data: &[u8]) -> Result<Vec<f32>> {
    let nb = n_blocks(ty, data.len())?;
    // at most 256 outputs per block of >= 1 byte: bounded by the (existing) input length
    let mut out = vec![0.0f32; nb * ty.block_size()];
    dequantize_into(ty, data, &mut out)?;
    Ok(out)
}

/// Quantize `x` (a multiple of the block size of `ty`) into `out` (`blocks * type_size` bytes).
///
/// Errors: [`GgufError::Unsupported`] for types without a quantizer (the IQ types, F64, ints),
/// [`GgufError::BadLength`] / [`GgufError::OutputLength`] for wrong lengths.
pub fn quantize_into(ty: GgmlType, x: &[f32], out: &mut [u8]) -> Result<()> {
    let f = quant_fn(ty).ok_or(GgufError::Unsupported { op: "quantization", ty })?;
    let bs = ty.block_size();
    if !x.len().is_multiple_of(bs) {
        return Err(GgufError::BadLength { ty, what: "input element", len: x.len(), multiple: bs });
    }
    let nb = x.len() / bs;
    let expected = nb * ty.type_size();
    if out.len() != expected {
        return Err(GgufError::OutputLength { ty, blocks: nb, expected, got: out.len() });
    }
    for (xb, b) in x.chunks_exact(bs).zip(out.chunks_exact_mut(ty.type_size())) {
        f(xb, b);
    }
    Ok(())
}

/// Quantize `x` (a multiple of the block size of `ty`) to a new byte vector.
///
/// Errors: as [`quantize_into`].
pub fn quantize(ty: GgmlType, x: &[f32]) -> Result<Vec<u8>> {
    let bs = ty.block_size();
    let mut out = vec![0u8; x.len() / bs * ty.type_size()];
    quantize_into(ty, x, &mut out)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_errors() {
        assert!(matches!(dequantize(GgmlType::Q4_0, &[0; 17]), Err(GgufError::BadLength { .. })));
        let mut out = [0.0; 31];
        assert!(matches!(dequantize_into(GgmlType::Q4_0, &[0; 18], &mut out), Err(GgufError::OutputLength { .. })));
        assert!(matches!(quantize(GgmlType::Q4_K, &[0.0; 100]), Err(GgufError::BadLength { .. })));
        assert!(matches!(quantize(GgmlType::IQ2_XXS, &[0.0; 256]), Err(GgufError::Unsupported { .. })));
        assert!(dequantize(GgmlType::IQ1_M, &[]).unwrap().is_empty());
    }

    #[test]
    fn plain_types() {
        assert_eq!(dequantize(GgmlType::I8, &[0xff, 3]).unwrap(), vec![-1.0, 3.0]);
        assert_eq!(dequantize(GgmlType::BF16, &0x3f80u16.to_le_bytes()).unwrap(), vec![1.0]);
        assert_eq!(dequantize(GgmlType::F16, &0x3c00u16.to_le_bytes()).unwrap(), vec![1.0]);
        assert_eq!(dequantize(GgmlType::F64, &0.1f64.to_le_bytes()).unwrap(), vec![0.1f32]);
        assert_eq!(bf16_from_f32_ggml(1.0), 0x3f80);
        assert_eq!(bf16_from_f32_ggml(f32::from_bits(0x3f80_8000)), 0x3f80); // tie to even
        assert_eq!(bf16_from_f32_ggml(f32::from_bits(0x3f81_8000)), 0x3f82);
        assert_eq!(bf16_from_f32_ggml(f32::from_bits(0x7f80_0001)), 0x7fc0);
    }
}
