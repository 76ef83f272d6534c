//! `rlx-gguf`: read and write GGUF files and (de)quantize every ggml tensor type.
//!
//! - [`GgufFile`] opens a GGUF v1/v2/v3 file (memory-mapped, from a `Vec` or a borrowed slice),
//!   exposes its metadata ([`MetadataValue`], arrays nested or not) and tensor infos
//!   ([`TensorInfo`]), and gives zero-copy access to each tensor's bytes, or dequantizes them to
//!   f32 / an `rlx_ir::Tensor`. [`GgufContent::parse`] is the allocation-bounded, panic-free
//!   parser underneath; every error is a typed [`GgufError`] with the byte offset.
//! - [`GgufWriter`] writes metadata and tensors with alignment; its output is byte-identical with
//!   the `gguf` Python package's `GGUFWriter` for the same content.
//! - [`GgmlType`] lists every ggml type with its id, block size and type size; [`quants`]
//!   dequantizes all of them bit-exactly with `gguf.quants.dequantize`, and quantizes the legacy
//!   (Q4_0..Q8_1), k-quant (Q2_K..Q8_K), ternary (TQ1_0, TQ2_0) and MXFP4 types.
//!
//! ```
//! use rlx_gguf::{GgmlType, GgufFile, GgufWriter};
//!
//! let mut w = GgufWriter::new();
//! w.add_metadata("general.architecture", "llama").unwrap();
//! let x: Vec<f32> = (0..64).map(|i| i as f32 / 8.0).collect();
//! w.add_f32_tensor("w", &[2, 32], GgmlType::Q8_0, &x).unwrap();
//! let file = GgufFile::from_vec(w.to_bytes().unwrap()).unwrap();
//! assert_eq!(file.content().architecture(), Some("llama"));
//! assert_eq!(file.tensor_info("w").unwrap().shape(), vec![2, 32]);
//! let y = file.dequantize("w").unwrap();
//! assert!((y[63] - 7.875).abs() < 0.05);
//! ```

#![warn(missing_docs)]

mod error;
pub mod ir_ops;
pub mod layout;
pub mod quants;
mod reader;
mod types;
mod value;
mod writer;

pub use error::{GgufError, Result, magic_text};
pub use ir_ops::register_ops;
pub use layout::Layout;
pub use reader::{
    ALIGNMENT_KEY, DEFAULT_ALIGNMENT, GGUF_MAGIC, GgufContent, GgufFile, MAX_ARRAY_DEPTH, MAX_DIMS, TensorInfo,
};
pub use types::{GgmlType, QK_K};
pub use value::{MetadataArray, MetadataValue, ValueType};
pub use writer::GgufWriter;
