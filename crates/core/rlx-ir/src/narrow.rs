//! Narrow element types: 8- and 4-bit floats and 4- and 2-bit integers, one byte each.
//!
//! Semantics follow `ml_dtypes` (what ONNX's reference `Cast` and JAX use): converting into a
//! narrow float rounds once to nearest even and does not saturate (overflow gives ∞ where the
//! format has one, NaN otherwise; `F4E2M1FN`, which has neither, saturates at ±6 and maps NaN
//! to `0x8`). ONNX's `saturate=1` is a clamp to the finite range before the conversion, done
//! by the importer. Converting a float into a 4/2-bit integer truncates toward zero and wraps
//! (as `ml_dtypes.int4` and ONNX `Cast` do), unlike the wide integers, which saturate.

use crate::DType;
use crate::tensor::{Data, Elem};
use std::cmp::Ordering;

/// How a minifloat format spends its special encodings.
#[derive(Clone, Copy, PartialEq)]
enum Special {
    /// IEEE-style: all-ones exponent is ∞ (mantissa 0) or NaN.
    Ieee,
    /// "Finite": no ∞; only all-ones exponent and mantissa is NaN.
    Fn,
    /// "Finite, unsigned zero": no ∞ or -0; the pattern of -0 (`0x80`) is the one NaN.
    Fnuz,
    /// No ∞ and no NaN at all: conversions saturate.
    None,
}

/// A sign + `e`-bit exponent + `m`-bit mantissa format with exponent bias `bias`.
#[derive(Clone, Copy)]
struct Format {
    e: u32,
    m: u32,
    bias: i32,
    special: Special,
}

impl Format {
    fn sign_bit(self) -> u8 {
        1 << (self.e + self.m)
    }
    fn exp_ones(self) -> u32 {
        (1 << self.e) - 1
    }
    fn max_finite(self) -> f64 {
        let (top_exp, top_man) = match self.special {
            Special::Ieee => (self.exp_ones() - 1, (1u32 << self.m) - 1),
            Special::Fn => (self.exp_ones(), (1u32 << self.m) - 2),
            Special::Fnuz | Special::None => (self.exp_ones(), (1u32 << self.m) - 1),
        };
        (1.0 + top_man as f64 / (1u32 << self.m) as f64) * 2f64.powi(top_exp as i32 - self.bias)
    }
    fn nan(self, negative: bool) -> u8 {
        let sign = if negative { self.sign_bit() } else { 0 };
        match self.special {
            Special::Ieee => sign | (self.exp_ones() << self.m) as u8 | (1 << (self.m - 1)),
            Special::Fn => sign | ((self.exp_ones() << self.m) | ((1 << self.m) - 1)) as u8,
            Special::Fnuz => 0x80,
            Special::None => self.sign_bit(),
        }
    }

    fn decode(self, bits: u8) -> f64 {
        let negative = bits & self.sign_bit() != 0;
        let exp = (bits as u32 >> self.m) & self.exp_ones();
        let man = bits as u32 & ((1 << self.m) - 1);
        match self.special {
            Special::Ieee if exp == self.exp_ones() => {
                return if man == 0 { if negative { f64::NEG_INFINITY } else { f64::INFINITY } } else { f64::NAN };
            }
            Special::Fn if exp == self.exp_ones() && man == (1 << self.m) - 1 => return f64::NAN,
            Special::Fnuz if bits == 0x80 => return f64::NAN,
            _ => {}
        }
        let mag = if exp == 0 {
            man as f64 * 2f64.powi(1 - self.bias - self.m as i32)
        } else {
            (1.0 + man as f64 / (1u32 << self.m) as f64) * 2f64.powi(exp as i32 - self.bias)
        };
        if negative { -mag } else { mag }
    }

    /// Round `v` to nearest even into this format (no saturation, see the module docs).
    fn encode(self, v: f64) -> u8 {
        let negative = v.is_sign_negative();
        if v.is_nan() {
            return self.nan(negative);
        }
        let sign = if negative { self.sign_bit() } else { 0 };
        let a = v.abs();
        let emin = 1 - self.bias;
        let floor_log2 = |x: f64| ((x.to_bits() >> 52) & 0x7ff) as i32 - 1023;
        let e = if a < 2f64.powi(emin) { emin } else { floor_log2(a) };
        let quantum = 2f64.powi(e - self.m as i32);
        let rounded = if a.is_infinite() { a } else { (a / quantum).round_ties_even() * quantum };
        if rounded > self.max_finite() {
            return match self.special {
                Special::Ieee => sign | (self.exp_ones() << self.m) as u8,
                Special::None => sign | self.encode(self.max_finite()),
                _ => self.nan(negative),
            };
        }
        if rounded == 0.0 {
            return if self.special == Special::Fnuz { 0 } else { sign };
        }
        let (exp, man) = if rounded < 2f64.powi(emin) {
            (0, rounded / 2f64.powi(emin - self.m as i32))
        } else {
            let e2 = floor_log2(rounded);
            ((e2 + self.bias) as u32, rounded / 2f64.powi(e2 - self.m as i32) - (1u32 << self.m) as f64)
        };
        sign | ((exp << self.m) | man as u32) as u8
    }
}

macro_rules! narrow_float {
    ($(#[$doc:meta])* $name:ident, $d:ident, $e:expr, $m:expr, $bias:expr, $special:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default)]
        #[repr(transparent)]
        pub struct $name(pub u8);

        impl $name {
            const FORMAT: Format = Format { e: $e, m: $m, bias: $bias, special: $special };
            /// The raw encoding.
            pub fn to_bits(self) -> u8 {
                self.0
            }
            /// From a raw encoding (bits above the format's width are ignored).
            pub fn from_bits(b: u8) -> Self {
                $name(b & (((1u16 << ($e + $m + 1)) - 1) as u8))
            }
        }
        impl PartialEq for $name {
            fn eq(&self, o: &Self) -> bool {
                self.to_f64() == o.to_f64()
            }
        }
        impl PartialOrd for $name {
            fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
                self.to_f64().partial_cmp(&o.to_f64())
            }
        }
        impl Elem for $name {
            const DTYPE: DType = DType::$d;
            fn to_f64(self) -> f64 {
                Self::FORMAT.decode(self.0)
            }
            fn to_i64(self) -> i64 {
                self.to_f64() as i64
            }
            fn of_f64(v: f64) -> Self {
                $name(Self::FORMAT.encode(v))
            }
            fn of_i64(v: i64) -> Self {
                Self::of_f64(v as f64)
            }
            crate::tensor::elem_storage!($d);
        }
    };
}

narrow_float!(
    /// `float8_e4m3fn` (see [`DType::F8E4M3FN`]).
    F8E4M3FN, F8E4M3FN, 4, 3, 7, Special::Fn
);
narrow_float!(
    /// `float8_e4m3fnuz` (see [`DType::F8E4M3FNUZ`]).
    F8E4M3FNUZ, F8E4M3FNUZ, 4, 3, 8, Special::Fnuz
);
narrow_float!(
    /// `float8_e5m2` (see [`DType::F8E5M2`]).
    F8E5M2, F8E5M2, 5, 2, 15, Special::Ieee
);
narrow_float!(
    /// `float8_e5m2fnuz` (see [`DType::F8E5M2FNUZ`]).
    F8E5M2FNUZ, F8E5M2FNUZ, 5, 2, 16, Special::Fnuz
);
narrow_float!(
    /// `float4_e2m1fn` (see [`DType::F4E2M1FN`]); the encoding is in the low 4 bits.
    F4E2M1FN, F4E2M1FN, 2, 1, 1, Special::None
);

macro_rules! narrow_int {
    ($(#[$doc:meta])* $name:ident, $d:ident, $repr:ty, $bits:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[repr(transparent)]
        pub struct $name(pub $repr);

        impl $name {
            /// The value wrapped to the type's width (two's complement for signed types).
            pub fn wrapping(v: i64) -> Self {
                let shift = <$repr>::BITS - $bits;
                $name((((v as $repr) << shift) as $repr) >> shift)
            }
            /// The low bits of the encoding (what a packed format stores).
            pub fn to_bits(self) -> u8 {
                (self.0 as u8) & ((1u8 << $bits) - 1)
            }
            /// From the low bits of an encoding (sign-extended for signed types).
            pub fn from_bits(b: u8) -> Self {
                Self::wrapping(b as i64)
            }
        }
        impl Elem for $name {
            const DTYPE: DType = DType::$d;
            fn to_f64(self) -> f64 {
                self.0 as f64
            }
            fn to_i64(self) -> i64 {
                self.0 as i64
            }
            fn of_f64(v: f64) -> Self {
                Self::wrapping(v as i64)
            }
            fn of_i64(v: i64) -> Self {
                Self::wrapping(v)
            }
            crate::tensor::elem_storage!($d);
        }
    };
}

narrow_int!(
    /// `int4` (see [`DType::I4`]): the value, in -8..=7.
    I4, I4, i8, 4
);
narrow_int!(
    /// `uint4` (see [`DType::U4`]): the value, in 0..=15.
    U4, U4, u8, 4
);
narrow_int!(
    /// `int2` (see [`DType::I2`]): the value, in -2..=1.
    I2, I2, i8, 2
);
narrow_int!(
    /// `uint2` (see [`DType::U2`]): the value, in 0..=3.
    U2, U2, u8, 2
);

/// Pack elements of a 4- or 2-bit `dtype` (given as their low-bit encodings, one per byte)
/// into bytes as ONNX stores them: `8 / bits` values per byte, the first in the lowest bits.
/// Other dtypes are returned unchanged.
pub fn pack_bits(dtype: DType, codes: &[u8]) -> Vec<u8> {
    let bits = dtype.bits() as usize;
    if bits >= 8 {
        return codes.to_vec();
    }
    let per = 8 / bits;
    let mask = (1u8 << bits) - 1;
    codes.chunks(per).map(|c| c.iter().enumerate().fold(0u8, |acc, (i, &v)| acc | ((v & mask) << (i * bits)))).collect()
}

/// Inverse of [`pack_bits`]: the first `n` low-bit encodings in `bytes`, or `None` when
/// `bytes` is too short.
pub fn unpack_bits(dtype: DType, bytes: &[u8], n: usize) -> Option<Vec<u8>> {
    let bits = dtype.bits() as usize;
    if bits >= 8 {
        return (bytes.len() >= n).then(|| bytes[..n].to_vec());
    }
    let per = 8 / bits;
    if bytes.len() < n.div_ceil(per) {
        return None;
    }
    let mask = (1u8 << bits) - 1;
    Some((0..n).map(|i| (bytes[i / per] >> ((i % per) * bits)) & mask).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits<T: Elem>(v: f64, f: fn(T) -> u8) -> u8 {
        f(T::of_f64(v))
    }

    #[test]
    fn float8_matches_ml_dtypes() {
        // Values from `ml_dtypes` 0.5 (`np.array(x, np.float32).astype(t).view(np.uint8)`).
        let xs = [0.0, -0.0, 1e9, -1e9, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 460.0, 470.0, 0.3, -7.5];
        let e4m3fn = [0u8, 128, 127, 255, 127, 255, 127, 126, 127, 42, 207];
        let e4m3fnuz = [0u8, 0, 128, 128, 128, 128, 128, 128, 128, 50, 215];
        let e5m2 = [0u8, 128, 124, 252, 124, 252, 126, 95, 95, 53, 200];
        let e5m2fnuz = [0u8, 0, 128, 128, 128, 128, 128, 99, 99, 57, 204];
        let e2m1 = [0u8, 8, 7, 15, 7, 15, 8, 7, 7, 1, 15];
        for (i, &x) in xs.iter().enumerate() {
            assert_eq!(bits::<F8E4M3FN>(x, F8E4M3FN::to_bits), e4m3fn[i], "e4m3fn {x}");
            assert_eq!(bits::<F8E4M3FNUZ>(x, F8E4M3FNUZ::to_bits), e4m3fnuz[i], "e4m3fnuz {x}");
            assert_eq!(bits::<F8E5M2>(x, F8E5M2::to_bits), e5m2[i], "e5m2 {x}");
            assert_eq!(bits::<F8E5M2FNUZ>(x, F8E5M2FNUZ::to_bits), e5m2fnuz[i], "e5m2fnuz {x}");
            assert_eq!(bits::<F4E2M1FN>(x, F4E2M1FN::to_bits), e2m1[i], "e2m1 {x}");
        }
    }

    /// Every encoding's value and the conversion of ~1200 f32 inputs per type (ties, near-ties,
    /// overflow, ±inf, NaN, ±0) against `tools/refgen/gen_narrow_dtypes.py` (ml_dtypes).
    #[test]
    fn conversions_match_ml_dtypes_golden() {
        let fx: serde_json::Value = serde_json::from_str(include_str!("../tests/fixtures/narrow_dtypes.json")).unwrap();
        let f32s = |v: &serde_json::Value| -> Vec<f32> {
            v.as_array().unwrap().iter().map(|b| f32::from_bits(b.as_u64().unwrap() as u32)).collect()
        };
        let u8s = |v: &serde_json::Value| -> Vec<u8> {
            v.as_array().unwrap().iter().map(|b| b.as_u64().unwrap() as u8).collect()
        };
        fn check<T: Elem>(
            name: &str,
            case: &serde_json::Value,
            f32s: &dyn Fn(&serde_json::Value) -> Vec<f32>,
            u8s: &dyn Fn(&serde_json::Value) -> Vec<u8>,
            to_bits: fn(T) -> u8,
            from_bits: fn(u8) -> T,
        ) {
            if let Some(dec) = case.get("decode") {
                for (code, want) in f32s(dec).into_iter().enumerate() {
                    let got = from_bits(code as u8).to_f64() as f32;
                    assert!(
                        got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                        "{name} decode {code:#x}: {got} vs {want}"
                    );
                }
            }
            let (xs, want) = (f32s(&case["inputs"]), u8s(&case["codes"]));
            for (x, w) in xs.into_iter().zip(want) {
                assert_eq!(to_bits(T::of_f64(x as f64)), w, "{name} encode {x:e}");
            }
        }
        let t = &fx["types"];
        check::<F8E4M3FN>("e4m3fn", &t["float8_e4m3fn"], &f32s, &u8s, F8E4M3FN::to_bits, F8E4M3FN::from_bits);
        check::<F8E4M3FNUZ>("e4m3fnuz", &t["float8_e4m3fnuz"], &f32s, &u8s, F8E4M3FNUZ::to_bits, F8E4M3FNUZ::from_bits);
        check::<F8E5M2>("e5m2", &t["float8_e5m2"], &f32s, &u8s, F8E5M2::to_bits, F8E5M2::from_bits);
        check::<F8E5M2FNUZ>("e5m2fnuz", &t["float8_e5m2fnuz"], &f32s, &u8s, F8E5M2FNUZ::to_bits, F8E5M2FNUZ::from_bits);
        check::<F4E2M1FN>("e2m1", &t["float4_e2m1fn"], &f32s, &u8s, F4E2M1FN::to_bits, F4E2M1FN::from_bits);
        check::<I4>("int4", &t["int4"], &f32s, &u8s, I4::to_bits, I4::from_bits);
        check::<U4>("uint4", &t["uint4"], &f32s, &u8s, U4::to_bits, U4::from_bits);
        check::<I2>("int2", &t["int2"], &f32s, &u8s, I2::to_bits, I2::from_bits);
        check::<U2>("uint2", &t["uint2"], &f32s, &u8s, U2::to_bits, U2::from_bits);
    }

    #[test]
    fn every_encoding_round_trips() {
        for b in 0..=255u8 {
            for (v, back) in [
                (F8E4M3FN(b).to_f64(), F8E4M3FN::of_f64(F8E4M3FN(b).to_f64()).0),
                (F8E4M3FNUZ(b).to_f64(), F8E4M3FNUZ::of_f64(F8E4M3FNUZ(b).to_f64()).0),
                (F8E5M2(b).to_f64(), F8E5M2::of_f64(F8E5M2(b).to_f64()).0),
                (F8E5M2FNUZ(b).to_f64(), F8E5M2FNUZ::of_f64(F8E5M2FNUZ(b).to_f64()).0),
            ] {
                if !v.is_nan() {
                    assert_eq!(back, b, "{b:#x} -> {v}");
                }
            }
        }
        for b in 0..16u8 {
            assert_eq!(F4E2M1FN::of_f64(F4E2M1FN(b).to_f64()).0, b);
        }
        assert_eq!(F8E4M3FN(0x7e).to_f64(), 448.0);
        assert_eq!(F8E4M3FNUZ(0x7f).to_f64(), 240.0);
        assert_eq!(F8E5M2(0x7b).to_f64(), 57344.0);
        assert_eq!(F4E2M1FN(0x7).to_f64(), 6.0);
    }

    #[test]
    fn narrow_ints_wrap() {
        assert_eq!(I4::of_f64(-9.0), I4(7));
        assert_eq!(I4::of_f64(8.7), I4(-8));
        assert_eq!(U4::of_i64(-1), U4(15));
        assert_eq!(I2::of_i64(3), I2(-1));
        assert_eq!(U2::of_f64(5.0), U2(1));
        assert_eq!(I4(-8).to_bits(), 8);
        assert_eq!(I4::from_bits(0xf), I4(-1));
    }

    #[test]
    fn packing_is_low_nibble_first() {
        assert_eq!(pack_bits(DType::I4, &[0x7, 0x8, 0x9]), vec![0x87, 0x09]);
        assert_eq!(unpack_bits(DType::I4, &[0x87, 0x09], 3), Some(vec![0x7, 0x8, 0x9]));
        assert_eq!(pack_bits(DType::U2, &[1, 2, 3, 0, 1]), vec![0b00_11_10_01, 0b01]);
        assert_eq!(unpack_bits(DType::U2, &[0b00_11_10_01], 5), None);
    }
}
