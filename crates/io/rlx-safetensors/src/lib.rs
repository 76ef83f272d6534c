//! `rlx-safetensors`: read and write [safetensors](https://github.com/huggingface/safetensors)
//! files and sharded checkpoints.
//!
//! - [`SafetensorsFile`] opens a file memory-mapped (also from a `Vec` or a borrowed slice),
//!   validates its header ([`Header::parse`]: panic-free, every error a typed
//!   [`SafetensorsError`] naming the tensor), and gives zero-copy access: raw bytes of any
//!   dtype, and a borrowed `&[f32]` view of F32 tensors ([`SafetensorsFile::f32_view`]).
//!   F16/BF16 (and every other dtype with an rlx twin) convert on the fly to `f32`
//!   ([`SafetensorsFile::to_f32`]) or load as an `rlx_ir::Tensor` of their own dtype
//!   ([`SafetensorsFile::tensor`]).
//! - [`ShardedSafetensors`] opens a `model.safetensors.index.json` and maps shards lazily.
//! - [`save`] / [`serialize`] write a map of name → `rlx_ir::Tensor` (byte-identical with the
//!   Python `safetensors` package for the same tensors and metadata).
//!
//! dtypes: the format's [`Dtype`] (re-exported from the `safetensors` crate) maps to
//! [`rlx_ir::DType`] by [`dtype_to_rlx`]: BOOL, U8, U16, U32, U64, I8, I16, I32, I64, F16, BF16,
//! F32, F64, F8_E4M3 (`F8E4M3FN`), F8_E5M2, F8_E4M3FNUZ, F8_E5M2FNUZ. C64, F8_E8M0 and the packed
//! F6/F4 variants have no rlx dtype; they can be inspected and read as raw bytes, and converting
//! them is a typed [`SafetensorsError::UnsupportedDtype`]. Writing an rlx dtype the format lacks
//! (the 4/2-bit ints, `F4E2M1FN`) is a [`SafetensorsError::Write`].
//!
//! ```
//! use rlx_ir::{DType, Tensor};
//! use rlx_safetensors::SafetensorsFile;
//!
//! let w = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
//! let h = Tensor::from_vec(vec![half::f16::from_f32(0.5)], &[1]).unwrap();
//! let bytes = rlx_safetensors::serialize([("w", &w), ("h", &h)], None).unwrap();
//! let f = SafetensorsFile::from_vec(bytes).unwrap();
//! assert_eq!(&*f.f32_view("w").unwrap(), &[1.0, 2.0, 3.0, 4.0]);
//! assert_eq!(f.to_f32("h").unwrap(), vec![0.5]);
//! assert_eq!(f.tensor("h").unwrap().dtype(), DType::F16);
//! ```

#![warn(missing_docs)]

mod error;
mod reader;
mod sharded;
mod writer;

pub use error::{Result, SafetensorsError};
pub use reader::{Header, MAX_HEADER_LEN, SafetensorsFile, TensorInfo};
pub use safetensors::Dtype;
pub use sharded::{INDEX_FILE_NAME, ShardedSafetensors};
pub use writer::{save, serialize};

use rlx_ir::DType;

/// The `rlx_ir::DType` of a safetensors [`Dtype`], or `None` for C64, F8_E8M0 and the packed
/// 6/4-bit float variants.
pub fn dtype_to_rlx(d: Dtype) -> Option<DType> {
    Some(match d {
        Dtype::U16 => DType::U16,
        Dtype::U64 => DType::U64,
        Dtype::F8_E4M3 => DType::F8E4M3FN,
        Dtype::F8_E5M2 => DType::F8E5M2,
        Dtype::F8_E4M3FNUZ => DType::F8E4M3FNUZ,
        Dtype::F8_E5M2FNUZ => DType::F8E5M2FNUZ,
        Dtype::BOOL => DType::Bool,
        Dtype::U8 => DType::U8,
        Dtype::I8 => DType::I8,
        Dtype::I16 => DType::I16,
        Dtype::I32 => DType::I32,
        Dtype::I64 => DType::I64,
        Dtype::U32 => DType::U32,
        Dtype::F16 => DType::F16,
        Dtype::BF16 => DType::BF16,
        Dtype::F32 => DType::F32,
        Dtype::F64 => DType::F64,
        _ => return None,
    })
}

/// The safetensors [`Dtype`] of an `rlx_ir::DType`, or `None` for the 4/2-bit integers and
/// `F4E2M1FN` (the format packs F4; rlx tensors hold one element per byte).
pub fn rlx_to_dtype(d: DType) -> Option<Dtype> {
    Some(match d {
        DType::U16 => Dtype::U16,
        DType::U64 => Dtype::U64,
        DType::F8E4M3FN => Dtype::F8_E4M3,
        DType::F8E5M2 => Dtype::F8_E5M2,
        DType::F8E4M3FNUZ => Dtype::F8_E4M3FNUZ,
        DType::F8E5M2FNUZ => Dtype::F8_E5M2FNUZ,
        DType::F4E2M1FN | DType::I4 | DType::U4 | DType::I2 | DType::U2 => return None,
        DType::Bool => Dtype::BOOL,
        DType::U8 => Dtype::U8,
        DType::I8 => Dtype::I8,
        DType::I16 => Dtype::I16,
        DType::I32 => Dtype::I32,
        DType::I64 => Dtype::I64,
        DType::U32 => Dtype::U32,
        DType::F16 => Dtype::F16,
        DType::BF16 => Dtype::BF16,
        DType::F32 => Dtype::F32,
        DType::F64 => Dtype::F64,
    })
}

/// The format's spelling of a dtype (`"F32"`, `"BF16"`, `"F8_E4M3"`, ...), as in the header.
pub fn dtype_name(d: Dtype) -> String {
    match serde_json::to_value(d) {
        Ok(serde_json::Value::String(s)) => s,
        _ => format!("{d:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rlx_dtype_round_trips() {
        for d in DType::ALL {
            if let Some(s) = rlx_to_dtype(d) {
                assert_eq!(dtype_to_rlx(s), Some(d));
            }
        }
        assert_eq!(rlx_to_dtype(DType::I4), None);
        assert_eq!(dtype_to_rlx(Dtype::U16), Some(DType::U16));
        assert_eq!(dtype_to_rlx(Dtype::F8_E4M3), Some(DType::F8E4M3FN));
        assert_eq!(dtype_to_rlx(Dtype::F4), None);
        assert_eq!(dtype_name(Dtype::BF16), "BF16");
        assert_eq!(dtype_name(Dtype::F8_E4M3), "F8_E4M3");
    }

    #[test]
    fn header_errors_name_the_problem() {
        let mut b = Vec::new();
        let h = br#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}}"#;
        b.extend((h.len() as u64).to_le_bytes());
        b.extend(h);
        b.extend([0u8; 4]);
        let e = Header::parse(&b).unwrap_err().to_string();
        assert!(e.contains("\"a\"") && e.contains("needs 8 bytes"), "{e}");
        assert!(matches!(Header::parse(&[1, 2]), Err(SafetensorsError::HeaderTooSmall { file_len: 2 })));
    }
}
