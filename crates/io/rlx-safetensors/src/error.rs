//! The crate's error type.

use std::path::PathBuf;

use crate::Dtype;

/// Everything that can go wrong reading or writing safetensors files and sharded checkpoints.
///
/// Every variant names the problem; those about one tensor name the tensor.
#[derive(Debug, thiserror::Error)]
pub enum SafetensorsError {
    /// The file could not be opened, mapped, read or written.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The file is shorter than the 8-byte header length.
    #[error("file of {file_len} bytes is too short for the 8-byte header length")]
    HeaderTooSmall {
        /// The file length.
        file_len: u64,
    },
    /// The declared JSON header length exceeds [`crate::MAX_HEADER_LEN`].
    #[error("declared header length {len} exceeds the limit of {max} bytes")]
    HeaderTooLarge {
        /// The declared length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// The declared JSON header length reaches past the end of the file.
    #[error("truncated file: header of {len} bytes declared at offset 0, only {available} bytes follow")]
    HeaderTruncated {
        /// The declared length.
        len: u64,
        /// Bytes after the 8-byte length.
        available: u64,
    },
    /// The JSON header is not UTF-8.
    #[error("header is not valid UTF-8 (first bad byte at header offset {valid_up_to})")]
    HeaderNotUtf8 {
        /// Length of the valid prefix.
        valid_up_to: usize,
    },
    /// The JSON header is not a JSON object of the safetensors form.
    #[error("bad JSON header: {message}")]
    BadHeader {
        /// The parser's message (with line and column).
        message: String,
    },
    /// A tensor's dtype string is not one the `safetensors` format knows.
    #[error("tensor {tensor:?}: unknown dtype {dtype:?}")]
    UnknownDtype {
        /// The tensor.
        tensor: String,
        /// The dtype string found.
        dtype: String,
    },
    /// The element count times the dtype size overflows, or is not a whole number of bytes.
    #[error("tensor {tensor:?}: {dtype:?} x shape {shape:?}: {reason}")]
    BadShape {
        /// The tensor.
        tensor: String,
        /// Its dtype.
        dtype: Dtype,
        /// Its shape.
        shape: Vec<usize>,
        /// What is wrong.
        reason: &'static str,
    },
    /// A tensor's `data_offsets` are not `[start, end]` with `start <= end`, or leave a gap or
    /// overlap with the previous tensor (the format requires the tensors to tile the data
    /// section exactly, in offset order).
    #[error("tensor {tensor:?}: data_offsets [{start}, {end}] {reason}")]
    BadOffsets {
        /// The tensor.
        tensor: String,
        /// Start offset (relative to the data section).
        start: usize,
        /// End offset.
        end: usize,
        /// What is wrong.
        reason: String,
    },
    /// A tensor's byte range does not match its dtype and shape.
    #[error("tensor {tensor:?}: {dtype:?} x shape {shape:?} needs {expected} bytes, data_offsets give {got}")]
    SizeMismatch {
        /// The tensor.
        tensor: String,
        /// Its dtype.
        dtype: Dtype,
        /// Its shape.
        shape: Vec<usize>,
        /// Bytes implied by dtype and shape.
        expected: usize,
        /// Bytes implied by the offsets.
        got: usize,
    },
    /// The data section is not exactly as long as the tensors need (truncated or trailing bytes).
    #[error("data section is {got} bytes but the tensors cover {expected} (file truncated or has trailing bytes)")]
    DataLength {
        /// Bytes the tensors cover.
        expected: u64,
        /// Bytes after the header.
        got: u64,
    },
    /// No tensor of that name.
    #[error("no tensor named {0:?}")]
    TensorNotFound(String),
    /// The dtype has no `rlx_ir::DType` (F8 variants, F4, F6, U16, U64, C64).
    #[error("tensor {tensor:?}: dtype {dtype:?} has no rlx DType ({op})")]
    UnsupportedDtype {
        /// The tensor.
        tensor: String,
        /// Its dtype.
        dtype: Dtype,
        /// What was attempted.
        op: &'static str,
    },
    /// An operation that needs one dtype found another (e.g. an f32 view of an F16 tensor).
    #[error("tensor {tensor:?}: expected dtype {expected:?}, found {found:?}")]
    WrongDtype {
        /// The tensor.
        tensor: String,
        /// The dtype needed.
        expected: Dtype,
        /// The dtype found.
        found: Dtype,
    },
    /// A `model.safetensors.index.json` that is not JSON of the expected form.
    #[error("bad index file {path}: {message}")]
    BadIndex {
        /// The index file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// A shard named by the index does not contain a tensor the index maps to it.
    #[error("tensor {tensor:?} is mapped to shard {shard} by the index, but the shard has no such tensor")]
    NotInShard {
        /// The tensor.
        tensor: String,
        /// The shard file.
        shard: PathBuf,
    },
    /// Building an `rlx_ir::Tensor` failed.
    #[error("building tensor {name:?}: {source}")]
    Tensor {
        /// The tensor.
        name: String,
        /// The IR error.
        #[source]
        source: rlx_ir::IrError,
    },
    /// The writer rejected its input (the message says why).
    #[error("cannot write safetensors: {0}")]
    Write(String),
}

/// `Result` with [`SafetensorsError`].
pub type Result<T, E = SafetensorsError> = std::result::Result<T, E>;
