//! Element types of tensors and the promotion rule between them.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Element type of a tensor.
///
/// `F16`/`BF16` are storage types: arithmetic on them runs in `F32` and rounds on store
/// (as XLA's CPU backend does). `Bool` is stored one byte per element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum DType {
    /// IEEE-754 binary32.
    F32,
    /// IEEE-754 binary64.
    F64,
    /// IEEE-754 binary16.
    F16,
    /// bfloat16 (8-bit exponent, 7-bit mantissa).
    BF16,
    /// Signed 8-bit integer.
    I8,
    /// Signed 16-bit integer.
    I16,
    /// Signed 32-bit integer.
    I32,
    /// Signed 64-bit integer.
    I64,
    /// Unsigned 8-bit integer.
    U8,
    /// Unsigned 32-bit integer.
    U32,
    /// Boolean, one byte per element.
    Bool,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 11] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I8,
        DType::I16,
        DType::I32,
        DType::I64,
        DType::U8,
        DType::U32,
        DType::Bool,
    ];

    /// Size of one element in bytes.
    pub fn size_bytes(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 | DType::U32 => 4,
            DType::F16 | DType::BF16 | DType::I16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }

    /// True for floating-point types.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64 | DType::F16 | DType::BF16)
    }

    /// True for integer types (signed or unsigned, not bool).
    pub fn is_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::U8 | DType::U32)
    }

    /// True for signed integer types.
    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64)
    }

    /// Lower-case name as numpy spells it (`float32`, `bfloat16`, `bool`, ...).
    pub fn numpy_name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::F64 => "float64",
            DType::F16 => "float16",
            DType::BF16 => "bfloat16",
            DType::I8 => "int8",
            DType::I16 => "int16",
            DType::I32 => "int32",
            DType::I64 => "int64",
            DType::U8 => "uint8",
            DType::U32 => "uint32",
            DType::Bool => "bool",
        }
    }

    /// Parse a numpy-style name (`float32`, `f32`, `int64`, `bool`, ...).
    pub fn from_name(s: &str) -> Option<DType> {
        Some(match s.to_ascii_lowercase().as_str() {
            "float32" | "f32" => DType::F32,
            "float64" | "f64" => DType::F64,
            "float16" | "f16" => DType::F16,
            "bfloat16" | "bf16" => DType::BF16,
            "int8" | "i8" => DType::I8,
            "int16" | "i16" => DType::I16,
            "int32" | "i32" => DType::I32,
            "int64" | "i64" => DType::I64,
            "uint8" | "u8" => DType::U8,
            "uint32" | "u32" => DType::U32,
            "bool" => DType::Bool,
            _ => return None,
        })
    }

    /// Result type of a binary arithmetic op on `self` and `other`.
    ///
    /// Follows JAX's type-promotion lattice restricted to these types (`jnp.promote_types`):
    /// bool < u8 < u32, i8 < i16 < i32 < i64, any int < any float, f16/bf16 < f32 < f64,
    /// f16 + bf16 = f32, signed + unsigned of equal or larger width promotes to the next
    /// signed width (u32 + i32 = i64).
    pub fn promote(self, other: DType) -> DType {
        use DType::*;
        if self == other {
            return self;
        }
        let (a, b) = (self, other);
        if a == Bool {
            return b;
        }
        if b == Bool {
            return a;
        }
        match (a.is_float(), b.is_float()) {
            (true, false) => return a,
            (false, true) => return b,
            (true, true) => {
                return match (a, b) {
                    (F64, _) | (_, F64) => F64,
                    (F32, _) | (_, F32) => F32,
                    _ => F32, // f16 with bf16
                };
            }
            _ => {}
        }
        // Both integers.
        let rank = |d: DType| match d {
            I8 => (true, 8),
            I16 => (true, 16),
            I32 => (true, 32),
            I64 => (true, 64),
            U8 => (false, 8),
            U32 => (false, 32),
            _ => unreachable!(),
        };
        let ((sa, wa), (sb, wb)) = (rank(a), rank(b));
        if sa == sb {
            return if wa >= wb { a } else { b };
        }
        let (sw, uw) = if sa { (wa, wb) } else { (wb, wa) };
        let need = if uw >= sw { uw * 2 } else { sw };
        match need {
            8 => I8,
            16 => I16,
            32 => I32,
            _ => I64,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I8 => "i8",
            DType::I16 => "i16",
            DType::I32 => "i32",
            DType::I64 => "i64",
            DType::U8 => "u8",
            DType::U32 => "u32",
            DType::Bool => "bool",
        };
        f.write_str(s)
    }
}

#[cfg(test)]
mod tests {
    use super::DType::*;

    #[test]
    fn promotion_matches_jax_lattice() {
        assert_eq!(F32.promote(F16), F32);
        assert_eq!(F16.promote(BF16), F32);
        assert_eq!(I32.promote(F16), F16);
        assert_eq!(U8.promote(I8), I16);
        assert_eq!(U32.promote(I32), I64);
        assert_eq!(U8.promote(I32), I32);
        assert_eq!(Bool.promote(I8), I8);
        assert_eq!(I64.promote(F64), F64);
    }
}
