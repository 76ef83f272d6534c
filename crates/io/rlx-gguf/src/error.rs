//! The crate's error type.

use std::path::PathBuf;

use crate::GgmlType;

/// Everything that can go wrong reading, writing or (de)quantizing GGUF data.
///
/// Parse errors carry the byte offset (from the start of the file) of the field that is wrong.
#[derive(Debug, thiserror::Error)]
pub enum GgufError {
    /// The file could not be opened, mapped, read or written.
    #[error("I/O error on {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The first four bytes are not `GGUF`.
    #[error("not a GGUF file: {}", bad_magic(.found))]
    BadMagic {
        /// The bytes found: the first four, or all of a shorter file.
        found: Vec<u8>,
    },
    /// A version other than 1, 2 or 3.
    #[error("unsupported GGUF version {version} at offset 4 (supported: 1, 2, 3){hint}")]
    UnsupportedVersion {
        /// The version read (little-endian).
        version: u32,
        /// Extra explanation (e.g. big-endian file), possibly empty.
        hint: &'static str,
    },
    /// The file ends inside a field.
    #[error("truncated file: {what} at offset {offset} needs {needed} bytes, only {available} remain")]
    Truncated {
        /// The field being read.
        what: &'static str,
        /// Where it starts.
        offset: u64,
        /// Bytes it needs.
        needed: u64,
        /// Bytes left in the file from `offset`.
        available: u64,
    },
    /// A count (tensors, KV pairs, array elements, string bytes) cannot fit in the rest of the file.
    #[error(
        "{what} of {count} {unit} at offset {offset} is impossible: the {remaining} bytes after it hold at most \
         {max} (a truncated or corrupt file)"
    )]
    CountTooLarge {
        /// Which count.
        what: &'static str,
        /// What it counts: `"items"` (tensors, KV pairs, array elements) or `"bytes"` (a
        /// string's length).
        unit: &'static str,
        /// The value read.
        count: u64,
        /// Where it was read.
        offset: u64,
        /// Bytes left after the count.
        remaining: u64,
        /// The most items those bytes could hold.
        max: u64,
    },
    /// A metadata value type id outside 0..=12.
    #[error("unknown metadata value type {type_id} at offset {offset}")]
    UnknownValueType {
        /// The id read.
        type_id: u32,
        /// Where it was read.
        offset: u64,
    },
    /// A tensor's ggml type id is not a known [`GgmlType`].
    #[error("unknown ggml type id {type_id} for tensor {name:?} at offset {offset}")]
    UnknownGgmlType {
        /// The id read.
        type_id: u32,
        /// The tensor.
        name: String,
        /// Where it was read.
        offset: u64,
    },
    /// A string that is not UTF-8.
    #[error("{what} at offset {offset} is not valid UTF-8")]
    InvalidUtf8 {
        /// Which string.
        what: &'static str,
        /// Where its bytes start.
        offset: u64,
    },
    /// Arrays nested deeper than [`crate::MAX_ARRAY_DEPTH`].
    #[error("metadata arrays nested deeper than {max} levels at offset {offset}")]
    NestingTooDeep {
        /// The limit.
        max: usize,
        /// Where the innermost array starts.
        offset: u64,
    },
    /// The same metadata key twice.
    #[error("duplicate metadata key {key:?} at offset {offset}")]
    DuplicateKey {
        /// The key.
        key: String,
        /// Where the second one starts.
        offset: u64,
    },
    /// The same tensor name twice.
    #[error("duplicate tensor name {name:?} at offset {offset}")]
    DuplicateTensor {
        /// The name.
        name: String,
        /// Where the second one starts.
        offset: u64,
    },
    /// `general.alignment` is not a non-zero power-of-two `u32`.
    #[error("invalid general.alignment at offset {offset}: {reason}")]
    BadAlignment {
        /// What is wrong.
        reason: String,
        /// Where the value starts.
        offset: u64,
    },
    /// A tensor's dimensions are invalid (too many, overflowing, or a row that is not a whole
    /// number of blocks).
    #[error("tensor {name:?} at offset {offset}: {reason}")]
    BadShape {
        /// The tensor.
        name: String,
        /// What is wrong.
        reason: String,
        /// Where the tensor info starts.
        offset: u64,
    },
    /// A tensor's data offset is not a multiple of the alignment.
    #[error("tensor {name:?}: data offset {data_offset} is not a multiple of the alignment {alignment}")]
    MisalignedTensor {
        /// The tensor.
        name: String,
        /// Its offset relative to the data section.
        data_offset: u64,
        /// The file's alignment.
        alignment: u64,
    },
    /// A tensor's bytes reach past the end of the file: the file is truncated (an interrupted
    /// download or copy), or its tensor table is corrupt.
    #[error(
        "tensor {name:?}: bytes {start}..{end} (absolute) reach past the end of the file ({file_len} bytes): \
         the file is truncated (an interrupted download?) or its tensor table is corrupt"
    )]
    TensorOutOfBounds {
        /// The tensor.
        name: String,
        /// First byte (absolute file offset; saturated on overflow).
        start: u64,
        /// One past the last byte (saturated on overflow).
        end: u64,
        /// The file length.
        file_len: u64,
    },
    /// Two tensors' byte ranges overlap.
    #[error(
        "tensors {first:?} and {second:?} overlap in the data section ({second:?} starts at {second_start}, before {first:?} ends at {first_end})"
    )]
    OverlappingTensors {
        /// The tensor that starts first.
        first: String,
        /// Its end (relative to the data section).
        first_end: u64,
        /// The tensor that starts inside it.
        second: String,
        /// Its start (relative to the data section).
        second_start: u64,
    },
    /// No tensor of that name.
    #[error("no tensor named {0:?}")]
    TensorNotFound(String),
    /// A byte or element buffer whose length does not fit the type.
    #[error("{ty}: {what} length {len} is not a multiple of {multiple}")]
    BadLength {
        /// The type.
        ty: GgmlType,
        /// Which buffer.
        what: &'static str,
        /// Its length.
        len: usize,
        /// The required multiple.
        multiple: usize,
    },
    /// Two buffers whose lengths disagree.
    #[error("{ty}: {blocks} blocks of input need an output of {expected} elements, got {got}")]
    OutputLength {
        /// The type.
        ty: GgmlType,
        /// Blocks in the input.
        blocks: usize,
        /// Elements needed.
        expected: usize,
        /// Elements given.
        got: usize,
    },
    /// The operation is not implemented for this type (e.g. quantizing to an IQ type).
    #[error("{op} is not supported for {ty}")]
    Unsupported {
        /// What was attempted.
        op: &'static str,
        /// The type.
        ty: GgmlType,
    },
    /// A writer argument is invalid (the message says which and why).
    #[error("invalid writer input: {0}")]
    InvalidInput(String),
    /// Building an `rlx_ir::Tensor` failed.
    #[error("building tensor {name:?}: {source}")]
    Tensor {
        /// The tensor.
        name: String,
        /// The IR error.
        #[source]
        source: rlx_ir::IrError,
    },
}

/// `Result` with [`GgufError`].
pub type Result<T, E = GgufError> = std::result::Result<T, E>;

/// [`GgufError::BadMagic`]'s message: what the first bytes were, and that the file ends before
/// four bytes when it does.
fn bad_magic(found: &[u8]) -> String {
    let short = if found.len() < 4 { format!(" (the file has only {} bytes)", found.len()) } else { String::new() };
    format!("bad magic {} at offset 0{short}, expected \"GGUF\" (47 47 55 46)", magic_text(found))
}

/// A file's first bytes (the magic) as text and hex, e.g. `"hell" (68 65 6c 6c)` for a text
/// file: printable ASCII as is, anything else escaped (`\x00`, `\x89`, `\"`), so that an error
/// shows a user what kind of file it is. Used by [`GgufError::BadMagic`] and by `rlx`'s
/// unknown-format error.
pub fn magic_text(b: &[u8]) -> String {
    let text: String = b.iter().flat_map(|&c| std::ascii::escape_default(c)).map(char::from).collect();
    let hex: Vec<String> = b.iter().map(|c| format!("{c:02x}")).collect();
    format!("\"{text}\" ({})", hex.join(" "))
}
