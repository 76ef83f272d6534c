//! Element types of tensors and the promotion rule between them.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Element type of a tensor.
///
/// `F16`/`BF16` are storage types: arithmetic on them runs in `F32` and rounds on store
/// (as XLA's CPU backend does). `Bool` is stored one byte per element.
///
/// The narrow types follow `ml_dtypes` (and ONNX's `FLOAT8*`, `FLOAT4E2M1`, `INT4`, `UINT4`,
/// `INT2`, `UINT2`): 8- and 4-bit floats and 4- and 2-bit integers are storage types whose
/// arithmetic runs in f64 and rounds on store. In a host [`crate::Tensor`] every element takes
/// one byte (as `ml_dtypes` does in numpy); formats that pack them (ONNX `raw_data`, two 4-bit
/// or four 2-bit values per byte, low bits first) pack and unpack at I/O.
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
    /// Unsigned 16-bit integer.
    U16,
    /// Unsigned 64-bit integer.
    U64,
    /// 8-bit float, 4-bit exponent (bias 7), 3-bit mantissa, no infinities, NaN = `S.1111.111`
    /// (`ml_dtypes.float8_e4m3fn`, ONNX `FLOAT8E4M3FN`); max 448.
    F8E4M3FN,
    /// 8-bit float, 4-bit exponent (bias 8), 3-bit mantissa, no infinities or -0, NaN = `0x80`
    /// (`float8_e4m3fnuz`, ONNX `FLOAT8E4M3FNUZ`); max 240.
    F8E4M3FNUZ,
    /// 8-bit IEEE-style float, 5-bit exponent (bias 15), 2-bit mantissa, with infinities
    /// (`float8_e5m2`, ONNX `FLOAT8E5M2`); max 57344.
    F8E5M2,
    /// 8-bit float, 5-bit exponent (bias 16), 2-bit mantissa, no infinities or -0, NaN = `0x80`
    /// (`float8_e5m2fnuz`, ONNX `FLOAT8E5M2FNUZ`); max 57344.
    F8E5M2FNUZ,
    /// 4-bit float, 2-bit exponent (bias 1), 1-bit mantissa, no infinities or NaN; conversions
    /// saturate at ±6 (`float4_e2m1fn`, ONNX `FLOAT4E2M1`).
    F4E2M1FN,
    /// Signed 4-bit integer (`ml_dtypes.int4`, ONNX `INT4`), one byte per element in memory.
    I4,
    /// Unsigned 4-bit integer (`ml_dtypes.uint4`, ONNX `UINT4`), one byte per element in memory.
    U4,
    /// Signed 2-bit integer (`ml_dtypes.int2`, ONNX `INT2`), one byte per element in memory.
    I2,
    /// Unsigned 2-bit integer (`ml_dtypes.uint2`, ONNX `UINT2`), one byte per element in memory.
    U2,
}

impl DType {
    /// Every dtype, in declaration order.
    pub const ALL: [DType; 22] = [
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
        DType::U16,
        DType::U64,
        DType::F8E4M3FN,
        DType::F8E4M3FNUZ,
        DType::F8E5M2,
        DType::F8E5M2FNUZ,
        DType::F4E2M1FN,
        DType::I4,
        DType::U4,
        DType::I2,
        DType::U2,
    ];

    /// Size of one element in bytes in a host tensor (narrow types take one byte each).
    pub fn size_bytes(self) -> usize {
        use DType::*;
        match self {
            F64 | I64 | U64 => 8,
            F32 | I32 | U32 => 4,
            F16 | BF16 | I16 | U16 => 2,
            I8 | U8 | Bool | F8E4M3FN | F8E4M3FNUZ | F8E5M2 | F8E5M2FNUZ | F4E2M1FN | I4 | U4 | I2 | U2 => 1,
        }
    }

    /// Width of one element's value in bits (4 for `I4`, 8 for `Bool`): the width integer
    /// arithmetic wraps at.
    pub fn bits(self) -> u32 {
        use DType::*;
        match self {
            F4E2M1FN | I4 | U4 => 4,
            I2 | U2 => 2,
            _ => self.size_bytes() as u32 * 8,
        }
    }

    /// True for floating-point types (the narrow 8- and 4-bit floats included).
    pub fn is_float(self) -> bool {
        use DType::*;
        matches!(self, F32 | F64 | F16 | BF16 | F8E4M3FN | F8E4M3FNUZ | F8E5M2 | F8E5M2FNUZ | F4E2M1FN)
    }

    /// True for the storage-only 8- and 4-bit floats (arithmetic on them runs in f64).
    pub fn is_narrow_float(self) -> bool {
        use DType::*;
        matches!(self, F8E4M3FN | F8E4M3FNUZ | F8E5M2 | F8E5M2FNUZ | F4E2M1FN)
    }

    /// Smallest and largest finite value of an integer or float dtype as f64 (`None` for bool);
    /// what a saturating conversion clamps to (ONNX `QuantizeLinear`, `Cast` with
    /// `saturate=1`). For 64-bit integers the bounds are rounded to f64.
    pub fn finite_range(self) -> Option<(f64, f64)> {
        use DType::*;
        let float_max = match self {
            F32 => f32::MAX as f64,
            F64 => f64::MAX,
            F16 => 65504.0,
            BF16 => half::bf16::MAX.to_f64(),
            F8E4M3FN => 448.0,
            F8E4M3FNUZ => 240.0,
            F8E5M2 | F8E5M2FNUZ => 57344.0,
            F4E2M1FN => 6.0,
            Bool => return None,
            _ => {
                let bits = self.bits();
                return Some(if self.is_signed_int() {
                    (-(2f64.powi(bits as i32 - 1)), 2f64.powi(bits as i32 - 1) - 1.0)
                } else {
                    (0.0, 2f64.powi(bits as i32) - 1.0)
                });
            }
        };
        Some((-float_max, float_max))
    }

    /// True for integer types (signed or unsigned, not bool).
    pub fn is_int(self) -> bool {
        use DType::*;
        matches!(self, I8 | I16 | I32 | I64 | U8 | U16 | U32 | U64 | I4 | U4 | I2 | U2)
    }

    /// True for signed integer types.
    pub fn is_signed_int(self) -> bool {
        matches!(self, DType::I8 | DType::I16 | DType::I32 | DType::I64 | DType::I4 | DType::I2)
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
            DType::U16 => "uint16",
            DType::U64 => "uint64",
            DType::F8E4M3FN => "float8_e4m3fn",
            DType::F8E4M3FNUZ => "float8_e4m3fnuz",
            DType::F8E5M2 => "float8_e5m2",
            DType::F8E5M2FNUZ => "float8_e5m2fnuz",
            DType::F4E2M1FN => "float4_e2m1fn",
            DType::I4 => "int4",
            DType::U4 => "uint4",
            DType::I2 => "int2",
            DType::U2 => "uint2",
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
            "uint16" | "u16" => DType::U16,
            "uint64" | "u64" => DType::U64,
            "float8_e4m3fn" | "f8e4m3fn" => DType::F8E4M3FN,
            "float8_e4m3fnuz" | "f8e4m3fnuz" => DType::F8E4M3FNUZ,
            "float8_e5m2" | "f8e5m2" => DType::F8E5M2,
            "float8_e5m2fnuz" | "f8e5m2fnuz" => DType::F8E5M2FNUZ,
            "float4_e2m1fn" | "f4e2m1fn" => DType::F4E2M1FN,
            "int4" | "i4" => DType::I4,
            "uint4" | "u4" => DType::U4,
            "int2" | "i2" => DType::I2,
            "uint2" | "u2" => DType::U2,
            _ => return None,
        })
    }

    /// Result type of a binary arithmetic op on `self` and `other`.
    ///
    /// Follows JAX's type-promotion lattice restricted to these types (`jnp.promote_types`):
    /// bool < u8 < u16 < u32 < u64, i8 < i16 < i32 < i64, any int < any float, f16/bf16 < f32 <
    /// f64, f16 + bf16 = f32, signed + unsigned of equal or larger width promotes to the next
    /// signed width (u32 + i32 = i64; u64 + a signed int = f64, as numpy). JAX refuses implicit
    /// promotion of the 8/4-bit floats and 4/2-bit ints; here they sit below every wider type
    /// of their kind, and two different narrow floats meet at f32.
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
                    (F16 | BF16, n) | (n, F16 | BF16) if n.is_narrow_float() => {
                        if a.is_narrow_float() {
                            b
                        } else {
                            a
                        }
                    }
                    _ => F32, // f16 with bf16, or two different narrow floats
                };
            }
            _ => {}
        }
        // Both integers.
        let ((sa, wa), (sb, wb)) = ((a.is_signed_int(), a.bits()), (b.is_signed_int(), b.bits()));
        if sa == sb {
            return if wa >= wb { a } else { b };
        }
        let (sw, uw) = if sa { (wa, wb) } else { (wb, wa) };
        let need = if uw >= sw { uw * 2 } else { sw };
        match need {
            0..=2 => I2,
            3..=4 => I4,
            5..=8 => I8,
            9..=16 => I16,
            17..=32 => I32,
            33..=64 => I64,
            _ => F64,
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
            DType::U16 => "u16",
            DType::U64 => "u64",
            DType::F8E4M3FN => "f8e4m3fn",
            DType::F8E4M3FNUZ => "f8e4m3fnuz",
            DType::F8E5M2 => "f8e5m2",
            DType::F8E5M2FNUZ => "f8e5m2fnuz",
            DType::F4E2M1FN => "f4e2m1fn",
            DType::I4 => "i4",
            DType::U4 => "u4",
            DType::I2 => "i2",
            DType::U2 => "u2",
        };
        f.write_str(s)
    }
}

#[cfg(test)]
mod tests {
    use super::DType;
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
        assert_eq!(U16.promote(I16), I32);
        assert_eq!(U64.promote(I8), F64);
        assert_eq!(U16.promote(U64), U64);
        assert_eq!(U4.promote(I4), I8);
        assert_eq!(F8E4M3FN.promote(F16), F16);
        assert_eq!(F8E4M3FN.promote(F8E5M2), F32);
        assert_eq!(I4.finite_range(), Some((-8.0, 7.0)));
        assert_eq!(U16.finite_range(), Some((0.0, 65535.0)));
        assert_eq!(F8E4M3FN.finite_range(), Some((-448.0, 448.0)));
        for d in DType::ALL {
            assert_eq!(DType::from_name(d.numpy_name()), Some(d));
            assert_eq!(DType::from_name(&d.to_string()), Some(d));
        }
    }
}
