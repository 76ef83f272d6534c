//! GGUF metadata values.
//!
//! A value is one of 13 types (ids per the GGUF spec: `UINT8 = 0` ... `FLOAT64 = 12`). Arrays are
//! stored typed ([`MetadataArray`]), one `Vec` per element type, so an array of a million `u8`
//! costs a million bytes, not a million enum values; arrays may nest.

use std::fmt;

/// The GGUF metadata value type ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    /// The type with GGUF id `id` (0..=12).
    pub fn from_id(id: u32) -> Option<ValueType> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// The GGUF id.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// Encoded size of one value of a fixed-size type; `None` for `String` and `Array`.
    pub fn fixed_size(self) -> Option<usize> {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            String | Array => None,
        }
    }
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)]
pub enum MetadataValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    /// On disk one byte; the reader maps any non-zero byte to `true`.
    Bool(bool),
    String(String),
    Array(MetadataArray),
    U64(u64),
    I64(i64),
    F64(f64),
}

/// A typed metadata array (all elements share one type; arrays may nest).
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)]
pub enum MetadataArray {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    String(Vec<String>),
    Array(Vec<MetadataArray>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

impl MetadataValue {
    /// The value's type.
    pub fn value_type(&self) -> ValueType {
        match self {
            MetadataValue::U8(_) => ValueType::U8,
            MetadataValue::I8(_) => ValueType::I8,
            MetadataValue::U16(_) => ValueType::U16,
            MetadataValue::I16(_) => ValueType::I16,
            MetadataValue::U32(_) => ValueType::U32,
            MetadataValue::I32(_) => ValueType::I32,
            MetadataValue::F32(_) => ValueType::F32,
            MetadataValue::Bool(_) => ValueType::Bool,
            MetadataValue::String(_) => ValueType::String,
            MetadataValue::Array(_) => ValueType::Array,
            MetadataValue::U64(_) => ValueType::U64,
            MetadataValue::I64(_) => ValueType::I64,
            MetadataValue::F64(_) => ValueType::F64,
        }
    }

    /// Any integer type as `u64` (`None` for negative values and non-integers).
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            MetadataValue::U8(v) => Some(v.into()),
            MetadataValue::U16(v) => Some(v.into()),
            MetadataValue::U32(v) => Some(v.into()),
            MetadataValue::U64(v) => Some(v),
            MetadataValue::I8(v) => u64::try_from(v).ok(),
            MetadataValue::I16(v) => u64::try_from(v).ok(),
            MetadataValue::I32(v) => u64::try_from(v).ok(),
            MetadataValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any integer type as `i64` (`None` for `u64` above `i64::MAX` and non-integers).
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            MetadataValue::I8(v) => Some(v.into()),
            MetadataValue::I16(v) => Some(v.into()),
            MetadataValue::I32(v) => Some(v.into()),
            MetadataValue::I64(v) => Some(v),
            MetadataValue::U8(v) => Some(v.into()),
            MetadataValue::U16(v) => Some(v.into()),
            MetadataValue::U32(v) => Some(v.into()),
            MetadataValue::U64(v) => i64::try_from(v).ok(),
            _ => None,
        }
    }

    /// Any numeric type as `f64` (integers convert as `as f64`).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            MetadataValue::F32(v) => Some(v.into()),
            MetadataValue::F64(v) => Some(v),
            _ => self.as_i64().map(|v| v as f64).or_else(|| self.as_u64().map(|v| v as f64)),
        }
    }

    /// The string, if this is a `String`.
    pub fn as_str(&self) -> Option<&str> {
        if let MetadataValue::String(s) = self { Some(s) } else { None }
    }

    /// The flag, if this is a `Bool`.
    pub fn as_bool(&self) -> Option<bool> {
        if let MetadataValue::Bool(b) = self { Some(*b) } else { None }
    }

    /// The array, if this is an `Array`.
    pub fn as_array(&self) -> Option<&MetadataArray> {
        if let MetadataValue::Array(a) = self { Some(a) } else { None }
    }
}

impl MetadataArray {
    /// The element type.
    pub fn elem_type(&self) -> ValueType {
        match self {
            MetadataArray::U8(_) => ValueType::U8,
            MetadataArray::I8(_) => ValueType::I8,
            MetadataArray::U16(_) => ValueType::U16,
            MetadataArray::I16(_) => ValueType::I16,
            MetadataArray::U32(_) => ValueType::U32,
            MetadataArray::I32(_) => ValueType::I32,
            MetadataArray::F32(_) => ValueType::F32,
            MetadataArray::Bool(_) => ValueType::Bool,
            MetadataArray::String(_) => ValueType::String,
            MetadataArray::Array(_) => ValueType::Array,
            MetadataArray::U64(_) => ValueType::U64,
            MetadataArray::I64(_) => ValueType::I64,
            MetadataArray::F64(_) => ValueType::F64,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            MetadataArray::U8(v) => v.len(),
            MetadataArray::I8(v) => v.len(),
            MetadataArray::U16(v) => v.len(),
            MetadataArray::I16(v) => v.len(),
            MetadataArray::U32(v) => v.len(),
            MetadataArray::I32(v) => v.len(),
            MetadataArray::F32(v) => v.len(),
            MetadataArray::Bool(v) => v.len(),
            MetadataArray::String(v) => v.len(),
            MetadataArray::Array(v) => v.len(),
            MetadataArray::U64(v) => v.len(),
            MetadataArray::I64(v) => v.len(),
            MetadataArray::F64(v) => v.len(),
        }
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Element `i` as a standalone value (`None` past the end).
    pub fn get(&self, i: usize) -> Option<MetadataValue> {
        Some(match self {
            MetadataArray::U8(v) => MetadataValue::U8(*v.get(i)?),
            MetadataArray::I8(v) => MetadataValue::I8(*v.get(i)?),
            MetadataArray::U16(v) => MetadataValue::U16(*v.get(i)?),
            MetadataArray::I16(v) => MetadataValue::I16(*v.get(i)?),
            MetadataArray::U32(v) => MetadataValue::U32(*v.get(i)?),
            MetadataArray::I32(v) => MetadataValue::I32(*v.get(i)?),
            MetadataArray::F32(v) => MetadataValue::F32(*v.get(i)?),
            MetadataArray::Bool(v) => MetadataValue::Bool(*v.get(i)?),
            MetadataArray::String(v) => MetadataValue::String(v.get(i)?.clone()),
            MetadataArray::Array(v) => MetadataValue::Array(v.get(i)?.clone()),
            MetadataArray::U64(v) => MetadataValue::U64(*v.get(i)?),
            MetadataArray::I64(v) => MetadataValue::I64(*v.get(i)?),
            MetadataArray::F64(v) => MetadataValue::F64(*v.get(i)?),
        })
    }
}

impl From<&str> for MetadataValue {
    fn from(s: &str) -> Self {
        MetadataValue::String(s.to_string())
    }
}

impl From<String> for MetadataValue {
    fn from(s: String) -> Self {
        MetadataValue::String(s)
    }
}

impl From<MetadataArray> for MetadataValue {
    fn from(a: MetadataArray) -> Self {
        MetadataValue::Array(a)
    }
}

macro_rules! from_scalar {
    ($($t:ty => $v:ident),*) => {$(
        impl From<$t> for MetadataValue {
            fn from(x: $t) -> Self {
                MetadataValue::$v(x)
            }
        }
        impl From<Vec<$t>> for MetadataArray {
            fn from(x: Vec<$t>) -> Self {
                MetadataArray::$v(x)
            }
        }
        impl From<Vec<$t>> for MetadataValue {
            fn from(x: Vec<$t>) -> Self {
                MetadataValue::Array(MetadataArray::$v(x))
            }
        }
    )*};
}

from_scalar!(u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32, f32 => F32, bool => Bool,
    u64 => U64, i64 => I64, f64 => F64);

impl From<Vec<String>> for MetadataValue {
    fn from(x: Vec<String>) -> Self {
        MetadataValue::Array(MetadataArray::String(x))
    }
}

impl From<Vec<&str>> for MetadataValue {
    fn from(x: Vec<&str>) -> Self {
        MetadataValue::Array(MetadataArray::String(x.into_iter().map(String::from).collect()))
    }
}

impl fmt::Display for MetadataValue {
    /// Scalars print plainly, strings quoted (Rust `{:?}` escaping), arrays as
    /// `[type; len] [first few, ...]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetadataValue::U8(v) => write!(f, "{v}"),
            MetadataValue::I8(v) => write!(f, "{v}"),
            MetadataValue::U16(v) => write!(f, "{v}"),
            MetadataValue::I16(v) => write!(f, "{v}"),
            MetadataValue::U32(v) => write!(f, "{v}"),
            MetadataValue::I32(v) => write!(f, "{v}"),
            MetadataValue::F32(v) => write!(f, "{v}"),
            MetadataValue::Bool(v) => write!(f, "{v}"),
            MetadataValue::String(v) => write!(f, "{v:?}"),
            MetadataValue::U64(v) => write!(f, "{v}"),
            MetadataValue::I64(v) => write!(f, "{v}"),
            MetadataValue::F64(v) => write!(f, "{v}"),
            MetadataValue::Array(a) => {
                write!(f, "[{:?}; {}] [", a.elem_type(), a.len())?;
                let shown = a.len().min(8);
                for i in 0..shown {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    if let Some(v) = a.get(i) {
                        write!(f, "{v}")?;
                    }
                }
                if a.len() > shown {
                    f.write_str(", ...")?;
                }
                f.write_str("]")
            }
        }
    }
}
