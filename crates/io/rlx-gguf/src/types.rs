//! The ggml tensor types: ids, block sizes and bytes per block.
//!
//! Ids, block sizes and type sizes follow `gguf.constants.GGMLQuantizationType` and
//! `GGML_QUANT_SIZES` of the `gguf` Python package 0.19.0 (which mirror `ggml.h` /
//! `ggml-common.h`), except Q8_1, which is 36 bytes as in `ggml-common.h` (see [`GgmlType::Q8_1`]). A tensor's row (`ne[0]`, the innermost dimension) must be a multiple of the
//! block size; a row of `n` elements takes `n / block_size * type_size` bytes.

use std::fmt;

/// `QK_K`: elements per super-block of the k-quants and most IQ types.
pub const QK_K: usize = 256;

macro_rules! ggml_types {
    ($($(#[$doc:meta])* $name:ident = $id:expr, $block:expr, $size:expr;)*) => {
        /// A ggml tensor element type (plain or block-quantized).
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[allow(non_camel_case_types)]
        pub enum GgmlType {
            $($(#[$doc])* $name,)*
        }

        impl GgmlType {
            /// Every type, in ggml id order.
            pub const ALL: &'static [GgmlType] = &[$(GgmlType::$name,)*];

            /// The ggml type id stored in GGUF tensor infos.
            pub const fn id(self) -> u32 {
                match self { $(GgmlType::$name => $id,)* }
            }

            /// The type with ggml id `id`, or `None` for an id this crate does not know.
            pub const fn from_id(id: u32) -> Option<GgmlType> {
                match id { $($id => Some(GgmlType::$name),)* _ => None }
            }

            /// Elements per block (1 for plain types).
            pub const fn block_size(self) -> usize {
                match self { $(GgmlType::$name => $block,)* }
            }

            /// Bytes per block.
            pub const fn type_size(self) -> usize {
                match self { $(GgmlType::$name => $size,)* }
            }

            /// The ggml name (`"Q4_K"`, `"F32"`, ...).
            pub const fn name(self) -> &'static str {
                match self { $(GgmlType::$name => stringify!($name),)* }
            }
        }
    };
}

ggml_types! {
    /// IEEE binary32.
    F32 = 0, 1, 4;
    /// IEEE binary16.
    F16 = 1, 1, 2;
    /// 32 x 4-bit, scale `d` (f16): `x = d * (q - 8)`.
    Q4_0 = 2, 32, 2 + 16;
    /// 32 x 4-bit, scale `d` and min `m` (f16): `x = d * q + m`.
    Q4_1 = 3, 32, 2 + 2 + 16;
    /// 32 x 5-bit, scale `d`: `x = d * (q - 16)`.
    Q5_0 = 6, 32, 2 + 4 + 16;
    /// 32 x 5-bit, scale `d` and min `m`: `x = d * q + m`.
    Q5_1 = 7, 32, 2 + 2 + 4 + 16;
    /// 32 x int8, scale `d`: `x = d * q`.
    Q8_0 = 8, 32, 2 + 32;
    /// 32 x int8, scale `d` plus `s = d * sum(q)` (an activation format): `x = d * q`.
    /// 36 bytes as ggml's `block_q8_1` (`d f16 | s f16 | qs[32]`); `gguf` 0.19.0's
    /// `GGML_QUANT_SIZES` says 40, a stale entry from when `d` and `s` were f32.
    Q8_1 = 9, 32, 2 + 2 + 32;
    /// k-quant, 2-bit, 16 sub-blocks of 16 with 4-bit scales and mins.
    Q2_K = 10, QK_K, 2 + 2 + QK_K / 16 + QK_K / 4;
    /// k-quant, 3-bit, 16 sub-blocks of 16 with 6-bit scales.
    Q3_K = 11, QK_K, 2 + QK_K / 4 + QK_K / 8 + 12;
    /// k-quant, 4-bit, 8 sub-blocks of 32 with 6-bit scales and mins.
    Q4_K = 12, QK_K, 2 + 2 + QK_K / 2 + 12;
    /// k-quant, 5-bit, 8 sub-blocks of 32 with 6-bit scales and mins.
    Q5_K = 13, QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12;
    /// k-quant, 6-bit, 16 sub-blocks of 16 with int8 scales.
    Q6_K = 14, QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16;
    /// k-quant, int8 with an f32 scale and per-16 sums (an activation format).
    Q8_K = 15, QK_K, 4 + QK_K + QK_K / 8;
    /// i-quant, 2.06 bpw, E8 lattice grid of 256.
    IQ2_XXS = 16, QK_K, 2 + QK_K / 4;
    /// i-quant, 2.31 bpw, grid of 512.
    IQ2_XS = 17, QK_K, 2 + QK_K / 4 + QK_K / 32;
    /// i-quant, 3.06 bpw, grid of 256 x 4.
    IQ3_XXS = 18, QK_K, 2 + QK_K / 4 + QK_K / 8;
    /// i-quant, 1.56 bpw, ternary grid of 2048.
    IQ1_S = 19, QK_K, 2 + QK_K / 8 + QK_K / 16;
    /// 32 x 4-bit non-linear levels, scale `d`.
    IQ4_NL = 20, 32, 2 + 16;
    /// i-quant, 3.44 bpw, grid of 512 x 4.
    IQ3_S = 21, QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4;
    /// i-quant, 2.5 bpw, grid of 1024.
    IQ2_S = 22, QK_K, 2 + QK_K / 4 + QK_K / 16;
    /// i-quant, 4.25 bpw, non-linear levels with 6-bit sub-block scales.
    IQ4_XS = 23, QK_K, 2 + 2 + QK_K / 2 + QK_K / 64;
    /// int8.
    I8 = 24, 1, 1;
    /// int16.
    I16 = 25, 1, 2;
    /// int32.
    I32 = 26, 1, 4;
    /// int64.
    I64 = 27, 1, 8;
    /// IEEE binary64.
    F64 = 28, 1, 8;
    /// i-quant, 1.75 bpw, the f16 scale split over the sub-block scale bytes.
    IQ1_M = 29, QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32;
    /// bfloat16.
    BF16 = 30, 1, 2;
    /// Ternary, 1.69 bpw, base-3 packed.
    TQ1_0 = 34, QK_K, 2 + 4 * 13;
    /// Ternary, 2.06 bpw, 2-bit packed.
    TQ2_0 = 35, QK_K, 2 + 64;
    /// OCP microscaling FP4 (E2M1) with an E8M0 shared exponent.
    MXFP4 = 39, 32, 1 + 16;
}

impl GgmlType {
    /// Whether this is a block-quantized type (block size > 1).
    pub const fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// The type named `name` (ggml spelling, case-insensitive), e.g. `"q4_k"`.
    pub fn from_name(name: &str) -> Option<GgmlType> {
        GgmlType::ALL.iter().copied().find(|t| t.name().eq_ignore_ascii_case(name))
    }

    /// Bytes taken by `n_elements` elements, or `None` if `n_elements` is not a multiple of the
    /// block size or the size overflows `u64`.
    pub fn bytes_for(self, n_elements: u64) -> Option<u64> {
        let bs = self.block_size() as u64;
        if !n_elements.is_multiple_of(bs) {
            return None;
        }
        (n_elements / bs).checked_mul(self.type_size() as u64)
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_are_unique() {
        for &t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Some(t));
            assert_eq!(GgmlType::from_name(&t.name().to_lowercase()), Some(t));
        }
        assert_eq!(GgmlType::ALL.len(), 32);
        for id in [4, 5, 31, 32, 33, 36, 37, 38, 40, 41, 1000] {
            assert_eq!(GgmlType::from_id(id), None, "{id}");
        }
    }

    #[test]
    fn sizes_match_ggml() {
        assert_eq!(GgmlType::Q4_0.type_size(), 18);
        assert_eq!(GgmlType::Q8_0.type_size(), 34);
        assert_eq!(GgmlType::Q8_1.type_size(), 36);
        assert_eq!(GgmlType::Q2_K.type_size(), 84);
        assert_eq!(GgmlType::Q3_K.type_size(), 110);
        assert_eq!(GgmlType::Q4_K.type_size(), 144);
        assert_eq!(GgmlType::Q5_K.type_size(), 176);
        assert_eq!(GgmlType::Q6_K.type_size(), 210);
        assert_eq!(GgmlType::Q8_K.type_size(), 292);
        assert_eq!(GgmlType::IQ1_M.type_size(), 56);
        assert_eq!(GgmlType::TQ1_0.type_size(), 54);
        assert_eq!(GgmlType::MXFP4.type_size(), 17);
        assert_eq!(GgmlType::Q4_K.bytes_for(512), Some(288));
        assert_eq!(GgmlType::Q4_K.bytes_for(100), None);
        assert_eq!(GgmlType::F32.bytes_for(u64::MAX), None);
    }
}
