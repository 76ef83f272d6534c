//! Byte layouts of a packed weight matrix for `dequant_matmul` (see `rlx_ir::compose::quant`).
//!
//! - [`Layout::Blocks`]: the GGUF layout, each row `K / block_size` consecutive blocks as the
//!   file stores them (every scheme).
//! - [`Layout::SplitRows`] (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0): the same bytes per row, regrouped:
//!   first every block's quant bytes (16, Q8_0 32; in block order, each as in its block), then
//!   each 16-bit field of every block in turn: the row's f16 `d`s, (Q4_1, Q5_1) its f16 `m`s,
//!   (Q5_0, Q5_1) the low 16 bits of every block's `qh`, then their high 16 bits. A row of `nb`
//!   Q4_0 blocks is `[16 nb quant bytes][2 nb bytes of d]` (18 nb bytes, as in GGUF); of Q5_0
//!   `[16 nb][2 nb of d][2 nb of qh bits 0–15][2 nb of qh bits 16–31]` (22 nb). A decode kernel
//!   then reads four Q4 / Q5 blocks' (two Q8_0 blocks') quants with one 64-byte load, 16
//!   blocks' scales with one 32-byte load and the fifth bits of four Q5 blocks' first (second)
//!   16 elements as one 64-bit mask, where the GGUF layout needs four 16-byte loads (two 32-byte
//!   loads and a merge), a gather and a shuffle (llama.cpp repacks its
//!   CPU weights for the same reason, into interleaved-row layouts). The values are the
//!   blocks' values: [`dequantize_rows`] of a split matrix equals `dequantize` of the blocks,
//!   bit for bit.
//!
//! [`to_split_rows`] converts a matrix in place; [`split_row_to_blocks`] is the inverse for one
//! row (kernels that read blocks convert a few rows at a time into scratch).

use crate::quants::dequantize_into;
use crate::{GgmlType, GgufError, Result};

/// Byte layout of a packed weight matrix. `dequant_matmul` names it in its `"layout"`
/// attribute ([`Layout::ATTR`]; absent means [`Layout::Blocks`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Layout {
    /// GGUF blocks, as stored in the file.
    #[default]
    Blocks,
    /// Per row: the quants of every block, then each 16-bit field of every block (Q4_0, Q4_1,
    /// Q5_0, Q5_1, Q8_0).
    SplitRows,
}

impl Layout {
    /// The attribute key of `dequant_matmul` / `gguf_dequantize` that names the layout.
    pub const ATTR: &'static str = rlx_ir::compose::quant::LAYOUT_ATTR;

    /// The attribute value: `"blocks"` or `"split_rows"`.
    pub fn name(self) -> &'static str {
        match self {
            Layout::Blocks => rlx_ir::compose::quant::BLOCKS_LAYOUT,
            Layout::SplitRows => "split_rows",
        }
    }

    /// The layout of an attribute value ([`Layout::name`]), or `None`.
    pub fn from_name(name: &str) -> Option<Layout> {
        [Layout::Blocks, Layout::SplitRows].into_iter().find(|l| l.name() == name)
    }

    /// True when rows of `ty` can be held in this layout.
    pub fn supports(self, ty: GgmlType) -> bool {
        match self {
            Layout::Blocks => true,
            Layout::SplitRows => split_fields(ty).is_some(),
        }
    }
}

/// For [`Layout::SplitRows`]: the 16-bit fields at the start of each block (Q4_0, Q8_0: `d`;
/// Q4_1: `d`, `m`; Q5_0: `d` and the two halves of the little-endian `qh`; Q5_1: `d`, `m`, the
/// halves of `qh`), or `None` for a type without that layout.
fn split_fields(ty: GgmlType) -> Option<usize> {
    match ty {
        GgmlType::Q4_0 | GgmlType::Q8_0 => Some(1),
        GgmlType::Q4_1 => Some(2),
        GgmlType::Q5_0 => Some(3),
        GgmlType::Q5_1 => Some(4),
        _ => None,
    }
}

/// In a [`Layout::SplitRows`] row of `nb` Q5_0 (`has_m` false) or Q5_1 (`has_m` true) blocks,
/// the byte offset of the array of the blocks' `qh` low 16-bit halves (block `b`'s at `+ 2 b`);
/// the high halves follow `2 nb` bytes on. For the kernels that read split rows natively.
pub const fn split_qh_offset(nb: usize, has_m: bool) -> usize {
    16 * nb + 2 * nb * (1 + has_m as usize)
}

/// Blocks per row of `row_len` bytes of `ty` in [`Layout::SplitRows`], checked.
fn split_blocks(ty: GgmlType, row_len: usize) -> Result<(usize, usize)> {
    let fields = split_fields(ty).ok_or(GgufError::Unsupported { op: "the split_rows layout", ty })?;
    let ts = ty.type_size();
    if !row_len.is_multiple_of(ts) {
        return Err(GgufError::BadLength { ty, what: "row byte", len: row_len, multiple: ts });
    }
    Ok((row_len / ts, fields))
}

/// Where block `b`'s bytes lie in a split row of `nb` blocks of `ts` bytes with `fields` f16
/// fields each: `(offset in the block, offset in the split row, bytes)` for each field, then
/// for the quants.
#[inline]
fn parts(ts: usize, fields: usize, nb: usize, b: usize) -> impl Iterator<Item = (usize, usize, usize)> {
    let qs = ts - 2 * fields;
    (0..fields).map(move |f| (2 * f, nb * qs + 2 * f * nb + 2 * b, 2)).chain([(2 * fields, b * qs, qs)])
}

/// Regroup one row of GGUF blocks `src` into [`Layout::SplitRows`] in `dst` (same length).
///
/// Errors: [`GgufError::Unsupported`] for a type without that layout, [`GgufError::BadLength`]
/// when the lengths differ or are not whole blocks.
pub fn block_row_to_split(ty: GgmlType, src: &[u8], dst: &mut [u8]) -> Result<()> {
    regroup(ty, src, dst, true)
}

/// The inverse of [`block_row_to_split`]: one [`Layout::SplitRows`] row `src` back into GGUF
/// blocks in `dst` (same length). Errors as [`block_row_to_split`].
pub fn split_row_to_blocks(ty: GgmlType, src: &[u8], dst: &mut [u8]) -> Result<()> {
    regroup(ty, src, dst, false)
}

/// One row from blocks to split rows (`to_split`) or back, block by block ([`parts`]).
fn regroup(ty: GgmlType, src: &[u8], dst: &mut [u8], to_split: bool) -> Result<()> {
    let (nb, fields) = split_blocks(ty, src.len())?;
    if dst.len() != src.len() {
        return Err(GgufError::BadLength { ty, what: "output row byte", len: dst.len(), multiple: src.len() });
    }
    let ts = ty.type_size();
    for b in 0..nb {
        for (at, split, len) in parts(ts, fields, nb, b) {
            let blk = b * ts + at;
            if to_split {
                dst[split..split + len].copy_from_slice(&src[blk..blk + len]);
            } else {
                dst[blk..blk + len].copy_from_slice(&src[split..split + len]);
            }
        }
    }
    Ok(())
}

/// Convert a row-major matrix of GGUF blocks (`data`, rows of `k` logical elements) into
/// [`Layout::SplitRows`] in place (one row of scratch).
///
/// Errors: [`GgufError::Unsupported`] for a type without that layout, [`GgufError::BadLength`]
/// when `k` is not whole blocks or `data` not whole rows.
pub fn to_split_rows(ty: GgmlType, data: &mut [u8], k: usize) -> Result<()> {
    let row = matrix_row(ty, data.len(), k)?;
    let mut tmp = vec![0u8; row];
    for r in data.chunks_exact_mut(row) {
        tmp.copy_from_slice(r);
        block_row_to_split(ty, &tmp, r)?;
    }
    Ok(())
}

/// Bytes of one row of `k` elements of `ty` in a matrix of `len` bytes, checked: `k` whole
/// blocks, `len` whole (non-empty) rows.
fn matrix_row(ty: GgmlType, len: usize, k: usize) -> Result<usize> {
    let bs = ty.block_size();
    if !k.is_multiple_of(bs) {
        return Err(GgufError::BadLength { ty, what: "row element", len: k, multiple: bs });
    }
    let row = k / bs * ty.type_size();
    if row == 0 || !len.is_multiple_of(row) {
        return Err(GgufError::BadLength { ty, what: "matrix byte", len, multiple: row });
    }
    Ok(row)
}

/// Dequantize a row-major matrix (rows of `k` elements) held in `layout` into `out`
/// (`data.len() / row bytes · k` floats): bit-identical with `quants::dequantize_into` of the
/// same matrix as GGUF blocks (each split block is reassembled and dequantized by it).
///
/// Errors: as [`to_split_rows`] for the split layout; [`GgufError::OutputLength`] for an
/// `out` of the wrong length.
pub fn dequantize_rows(ty: GgmlType, layout: Layout, data: &[u8], k: usize, out: &mut [f32]) -> Result<()> {
    if layout == Layout::Blocks {
        return dequantize_into(ty, data, out);
    }
    if !Layout::SplitRows.supports(ty) {
        return Err(GgufError::Unsupported { op: "the split_rows layout", ty });
    }
    if k == 0 && data.is_empty() && out.is_empty() {
        return Ok(());
    }
    let row = matrix_row(ty, data.len(), k)?;
    let (nb, fields) = split_blocks(ty, row)?;
    let rows = data.len() / row;
    if out.len() != rows * k {
        return Err(GgufError::OutputLength {
            ty,
            blocks: rows * (row / ty.type_size()),
            expected: rows * k,
            got: out.len(),
        });
    }
    let (ts, bs) = (ty.type_size(), ty.block_size());
    // One block reassembled on the stack (the split types' blocks are at most 34 bytes).
    let mut blk = [0u8; 34];
    for (src, dst) in data.chunks_exact(row).zip(out.chunks_exact_mut(k)) {
        for (b, o) in dst.chunks_exact_mut(bs).enumerate() {
            for (at, split, len) in parts(ts, fields, nb, b) {
                blk[at..at + len].copy_from_slice(&src[split..split + len]);
            }
            dequantize_into(ty, &blk[..ts], o)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::quants::{dequantize, quantize};

    fn weights(n: usize, k: usize) -> Vec<f32> {
        (0..n * k).map(|i| ((i * 7919 % 1000) as f32 / 500.0 - 1.0) * (1.0 + (i / k) as f32)).collect()
    }

    #[test]
    fn split_rows_dequantize_bit_identical_and_round_trip() {
        for ty in [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0] {
            for k in [32, 64, 576, 4096 + 32] {
                let n = 3;
                let blocks = quantize(ty, &weights(n, k)).unwrap();
                let mut split = blocks.clone();
                to_split_rows(ty, &mut split, k).unwrap();
                assert_ne!(split, blocks, "{ty} k={k}: the layout moved nothing");
                let want = dequantize(ty, &blocks).unwrap();
                let mut got = vec![0f32; n * k];
                dequantize_rows(ty, Layout::SplitRows, &split, k, &mut got).unwrap();
                assert!(want.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits()), "{ty} k={k}");
                let row = blocks.len() / n;
                let mut back = vec![0u8; row];
                for r in 0..n {
                    split_row_to_blocks(ty, &split[r * row..(r + 1) * row], &mut back).unwrap();
                    assert_eq!(back, blocks[r * row..(r + 1) * row], "{ty} k={k} row {r}");
                }
            }
        }
    }

    #[test]
    fn split_row_places_quants_then_scales() {
        // Two Q4_1 blocks: d, m, then 16 quant bytes each.
        let src: Vec<u8> = (0..40).collect();
        let mut dst = vec![0u8; 40];
        block_row_to_split(GgmlType::Q4_1, &src, &mut dst).unwrap();
        let mut want: Vec<u8> = (4..20).chain(24..40).collect();
        want.extend([0, 1, 20, 21, 2, 3, 22, 23]);
        assert_eq!(dst, want);
        // Two Q8_0 blocks: d, then 32 quant bytes each.
        let src: Vec<u8> = (0..68).collect();
        let mut dst = vec![0u8; 68];
        block_row_to_split(GgmlType::Q8_0, &src, &mut dst).unwrap();
        let mut want: Vec<u8> = (2..34).chain(36..68).collect();
        want.extend([0, 1, 34, 35]);
        assert_eq!(dst, want);
        // Two Q5_0 blocks: d, qh (bits 0–15 then 16–31, little-endian), then 16 quant bytes.
        let src: Vec<u8> = (0..44).collect();
        let mut dst = vec![0u8; 44];
        block_row_to_split(GgmlType::Q5_0, &src, &mut dst).unwrap();
        let mut want: Vec<u8> = (6..22).chain(28..44).collect();
        want.extend([0, 1, 22, 23, 2, 3, 24, 25, 4, 5, 26, 27]);
        assert_eq!(dst, want);
        // The kernels' offset of the `qh` halves is where the regrouping puts them.
        for (ty, has_m) in [(GgmlType::Q5_0, false), (GgmlType::Q5_1, true)] {
            let (nb, fields) = (7, split_fields(ty).unwrap());
            let lo: Vec<usize> = parts(ty.type_size(), fields, nb, 3).map(|(_, at, _)| at).collect();
            assert_eq!(lo[fields - 2], split_qh_offset(nb, has_m) + 2 * 3, "{ty}");
            assert_eq!(lo[fields - 1], split_qh_offset(nb, has_m) + 2 * nb + 2 * 3, "{ty}");
        }
    }

    #[test]
    fn split_rows_refuses_bad_input() {
        let mut b = vec![0u8; 144];
        assert!(matches!(to_split_rows(GgmlType::Q4_K, &mut b, 256), Err(GgufError::Unsupported { .. })));
        let mut b = vec![0u8; 30];
        assert!(matches!(to_split_rows(GgmlType::Q4_0, &mut b, 32), Err(GgufError::BadLength { .. })));
        assert!(matches!(to_split_rows(GgmlType::Q4_0, &mut [0u8; 18], 31), Err(GgufError::BadLength { .. })));
        let mut out = vec![0f32; 31];
        assert!(matches!(
            dequantize_rows(GgmlType::Q4_0, Layout::SplitRows, &[0u8; 18], 32, &mut out),
            Err(GgufError::OutputLength { .. })
        ));
        assert!(split_row_to_blocks(GgmlType::Q4_0, &[0u8; 18], &mut [0u8; 36]).is_err());
        assert_eq!(Layout::from_name("split_rows"), Some(Layout::SplitRows));
        assert_eq!(Layout::from_name("rows"), None);
        assert!(Layout::SplitRows.supports(GgmlType::Q8_0) && !Layout::SplitRows.supports(GgmlType::Q4_K));
    }
}
