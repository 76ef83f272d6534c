//! GGUF v1/v2/v3 reader.
//!
//! Layout (all little-endian; spec: ggml `docs/gguf.md`):
//!
//! ```text
//! magic "GGUF" | version u32 | n_tensors C | n_kv C
//! n_kv x  { key: string, value_type u32, value }
//! n_tensors x { name: string, n_dims u32, dims: C x n_dims, ggml_type u32, offset u64 }
//! zero padding to `general.alignment` (default 32)
//! data section: tensor i at data_start + offset_i
//! ```
//!
//! `C` (counts, string lengths, array lengths and tensor dims) is `u64` in v2/v3 and `u32` in
//! v1 (the August 2023 format). A string is `C` bytes of UTF-8, no terminator. An array value is
//! `elem_type u32 | len C | len x value`. Dims are stored innermost first (`ne[0]` is the
//! row length); [`TensorInfo::shape`] gives the row-major (numpy) order.
//!
//! The reader treats the file as untrusted: every count is checked against the bytes that remain
//! before anything is allocated for it, all offset arithmetic is overflow-checked, arrays nest
//! at most [`MAX_ARRAY_DEPTH`] deep, unknown type ids are errors, and tensor byte ranges are
//! checked to be aligned, inside the file and non-overlapping. Nothing here panics on any input.
//!
//! Deviations from the letter of the spec, all lenient: a bool byte other than 0/1 reads as
//! `true`; tensor names longer than 64 bytes are accepted; a file without tensors may end before
//! the data-section padding. Strict where llama.cpp is strict: at most 4 dims, duplicate keys and
//! tensor names are errors, `general.alignment` must be a power-of-two `u32`.

use std::collections::HashSet;
use std::path::Path;

use rlx_mmap::FileBytes;

use crate::quants;
use crate::value::{MetadataArray, MetadataValue, ValueType};
use crate::{GgmlType, GgufError, Result};

/// The GGUF magic, `"GGUF"`.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// Default data alignment when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// The metadata key that sets the alignment.
pub const ALIGNMENT_KEY: &str = "general.alignment";
/// Most tensor dimensions accepted (`GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;
/// Deepest array nesting accepted (arrays of arrays of ...).
pub const MAX_ARRAY_DEPTH: usize = 16;

/// One tensor's description from the tensor-info table.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    /// Tensor name.
    pub name: String,
    /// Dimensions in ggml order: `dims[0]` is the innermost (contiguous) one.
    pub dims: Vec<u64>,
    /// Element type.
    pub ty: GgmlType,
    /// Offset of the first byte relative to the start of the data section.
    pub offset: u64,
    /// Number of elements (product of `dims`; 1 for zero dims).
    pub n_elements: u64,
    /// Number of bytes.
    pub n_bytes: u64,
    /// Absolute file offset at which this tensor's info record starts.
    pub info_offset: u64,
}

impl TensorInfo {
    /// Row-major (numpy / `rlx_ir`) shape: `dims` reversed.
    pub fn shape(&self) -> Vec<u64> {
        self.dims.iter().rev().copied().collect()
    }
}

/// A parsed header: version, metadata, tensor infos and where the data section starts.
///
/// It borrows nothing; pair it with the file's bytes via [`GgufContent::tensor_bytes`], or use
/// [`GgufFile`], which owns (or maps) the bytes.
#[derive(Clone, Debug, PartialEq)]
pub struct GgufContent {
    /// Format version (1, 2 or 3).
    pub version: u32,
    /// Metadata key/value pairs in file order.
    pub metadata: Vec<(String, MetadataValue)>,
    /// Tensor infos in file order.
    pub tensors: Vec<TensorInfo>,
    /// Data alignment (from `general.alignment`, default 32).
    pub alignment: u64,
    /// Absolute offset of the data section.
    pub data_offset: u64,
    /// Length of the parsed file.
    pub file_len: u64,
}

struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
    version: u32,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> u64 {
        (self.buf.len() - self.pos) as u64
    }

    fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8]> {
        let available = self.remaining();
        if n > available {
            return Err(GgufError::Truncated { what, offset: self.pos as u64, needed: n, available });
        }
        let n = n as usize; // n <= available, which came from a usize
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let s = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    fn u32(&mut self, what: &'static str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &'static str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// Bytes of a count / length field: 4 in v1, 8 later.
    fn count_width(&self) -> u64 {
        if self.version == 1 { 4 } else { 8 }
    }

    /// A count / length field (u32 in v1, u64 later).
    fn count(&mut self, what: &'static str) -> Result<u64> {
        if self.version == 1 { self.u32(what).map(u64::from) } else { self.u64(what) }
    }

    /// Read a count of items each taking at least `min_size` bytes, and check that that many
    /// items can fit in what remains.
    fn bounded_count(&mut self, what: &'static str, min_size: u64) -> Result<u64> {
        self.bounded(what, "items", min_size)
    }

    /// [`Self::bounded_count`] of `unit`s (a string's length counts bytes).
    fn bounded(&mut self, what: &'static str, unit: &'static str, min_size: u64) -> Result<u64> {
        let offset = self.pos as u64;
        let count = self.count(what)?;
        let remaining = self.remaining();
        let max = remaining / min_size.max(1);
        if count > max {
            return Err(GgufError::CountTooLarge { what, unit, count, offset, remaining, max });
        }
        Ok(count)
    }

    fn string(&mut self, what: &'static str) -> Result<String> {
        let len = self.bounded(what, "bytes", 1)?;
        let start = self.pos as u64;
        let bytes = self.take(len, what)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_string()),
            Err(_) => Err(GgufError::InvalidUtf8 { what, offset: start }),
        }
    }

    fn value_type(&mut self) -> Result<ValueType> {
        let offset = self.pos as u64;
        let id = self.u32("metadata value type")?;
        ValueType::from_id(id).ok_or(GgufError::UnknownValueType { type_id: id, offset })
    }

    /// Smallest encoding of one value of type `t` (used to bound array lengths).
    fn min_size(&self, t: ValueType) -> u64 {
        match t.fixed_size() {
            Some(n) => n as u64,
            None if t == ValueType::String => self.count_width(),
            None => 4 + self.count_width(),
        }
    }

    fn value(&mut self, t: ValueType, depth: usize) -> Result<MetadataValue> {
        Ok(match t {
            ValueType::U8 => MetadataValue::U8(self.array::<1>("u8 value")?[0]),
            ValueType::I8 => MetadataValue::I8(i8::from_le_bytes(self.array("i8 value")?)),
            ValueType::U16 => MetadataValue::U16(u16::from_le_bytes(self.array("u16 value")?)),
            ValueType::I16 => MetadataValue::I16(i16::from_le_bytes(self.array("i16 value")?)),
            ValueType::U32 => MetadataValue::U32(self.u32("u32 value")?),
            ValueType::I32 => MetadataValue::I32(i32::from_le_bytes(self.array("i32 value")?)),
            ValueType::F32 => MetadataValue::F32(f32::from_le_bytes(self.array("f32 value")?)),
            ValueType::Bool => MetadataValue::Bool(self.array::<1>("bool value")?[0] != 0),
            ValueType::String => MetadataValue::String(self.string("string value")?),
            ValueType::U64 => MetadataValue::U64(self.u64("u64 value")?),
            ValueType::I64 => MetadataValue::I64(i64::from_le_bytes(self.array("i64 value")?)),
            ValueType::F64 => MetadataValue::F64(f64::from_le_bytes(self.array("f64 value")?)),
            ValueType::Array => MetadataValue::Array(self.array_value(depth + 1)?),
        })
    }

    fn array_value(&mut self, depth: usize) -> Result<MetadataArray> {
        let start = self.pos as u64;
        if depth > MAX_ARRAY_DEPTH {
            return Err(GgufError::NestingTooDeep { max: MAX_ARRAY_DEPTH, offset: start });
        }
        let et = self.value_type()?;
        let n = self.bounded_count("array length", self.min_size(et))?;
        // `n` is bounded by the remaining bytes, so these loops allocate at most a small
        // constant factor of the file size; no capacity is reserved from `n` itself.
        macro_rules! fixed {
            ($variant:ident, $t:ty, $w:expr) => {{
                let bytes = self.take(n * $w, "array data")?;
                MetadataArray::$variant(
                    bytes.chunks_exact($w).map(|c| <$t>::from_le_bytes(c.try_into().unwrap_or([0; $w]))).collect(),
                )
            }};
        }
        Ok(match et {
            ValueType::U8 => MetadataArray::U8(self.take(n, "array data")?.to_vec()),
            ValueType::I8 => fixed!(I8, i8, 1),
            ValueType::U16 => fixed!(U16, u16, 2),
            ValueType::I16 => fixed!(I16, i16, 2),
            ValueType::U32 => fixed!(U32, u32, 4),
            ValueType::I32 => fixed!(I32, i32, 4),
            ValueType::F32 => fixed!(F32, f32, 4),
            ValueType::U64 => fixed!(U64, u64, 8),
            ValueType::I64 => fixed!(I64, i64, 8),
            ValueType::F64 => fixed!(F64, f64, 8),
            ValueType::Bool => MetadataArray::Bool(self.take(n, "array data")?.iter().map(|&b| b != 0).collect()),
            ValueType::String => {
                let mut v = Vec::new();
                for _ in 0..n {
                    v.push(self.string("array string")?);
                }
                MetadataArray::String(v)
            }
            ValueType::Array => {
                let mut v = Vec::new();
                for _ in 0..n {
                    v.push(self.array_value(depth + 1)?);
                }
                MetadataArray::Array(v)
            }
        })
    }
}

fn checked_align_up(x: u64, align: u64) -> Option<u64> {
    // align is a non-zero power of two
    x.checked_add(align - 1).map(|v| v & !(align - 1))
}

impl GgufContent {
    /// Parse the header of a GGUF file held in `bytes` and validate every tensor's byte range
    /// against `bytes.len()`.
    ///
    /// Errors: [`GgufError`] naming the bad field and its byte offset (bad magic, unsupported
    /// version, truncation, impossible counts, unknown value / ggml types, invalid UTF-8,
    /// duplicate keys or names, bad alignment, bad shapes, misaligned, out-of-range or
    /// overlapping tensors).
    pub fn parse(bytes: &[u8]) -> Result<GgufContent> {
        let found = &bytes[..bytes.len().min(4)];
        let n = found.len();
        // An empty file, or one cut inside "GGUF", is truncated rather than of another format.
        if n < 4 && found == &GGUF_MAGIC[..n] {
            return Err(GgufError::Truncated { what: "magic", offset: 0, needed: 4, available: n as u64 });
        }
        if found != GGUF_MAGIC {
            return Err(GgufError::BadMagic { found: found.to_vec() });
        }
        let mut c = Cursor { buf: bytes, pos: 4, version: 3 };
        let version = c.u32("version")?;
        if !(1..=3).contains(&version) {
            let hint = if (1..=3).contains(&version.swap_bytes()) {
                " (this looks like a big-endian GGUF, which is not supported)"
            } else {
                ""
            };
            return Err(GgufError::UnsupportedVersion { version, hint });
        }
        c.version = version;
        let w = c.count_width();
        // smallest tensor info: name length + n_dims + type + offset
        let n_tensors = c.bounded_count("tensor count", w + 4 + 4 + 8)?;
        // smallest KV: key length + value type + 1 byte of value
        let n_kv = c.bounded_count("metadata KV count", w + 4 + 1)?;

        let mut metadata: Vec<(String, MetadataValue)> = Vec::new();
        let mut keys = HashSet::new();
        let mut alignment = DEFAULT_ALIGNMENT;
        for _ in 0..n_kv {
            let kv_offset = c.pos as u64;
            let key = c.string("metadata key")?;
            let t = c.value_type()?;
            let value_offset = c.pos as u64;
            let value = c.value(t, 0)?;
            if !keys.insert(key.clone()) {
                return Err(GgufError::DuplicateKey { key, offset: kv_offset });
            }
            if key == ALIGNMENT_KEY {
                alignment = match value {
                    MetadataValue::U32(a) if a != 0 && a.is_power_of_two() => u64::from(a),
                    MetadataValue::U32(a) => {
                        return Err(GgufError::BadAlignment {
                            reason: format!("{a} is not a non-zero power of two"),
                            offset: value_offset,
                        });
                    }
                    ref other => {
                        return Err(GgufError::BadAlignment {
                            reason: format!("type {:?}, expected U32", other.value_type()),
                            offset: value_offset,
                        });
                    }
                };
            }
            metadata.push((key, value));
        }

        let mut tensors: Vec<TensorInfo> = Vec::new();
        let mut names = HashSet::new();
        for _ in 0..n_tensors {
            let info_offset = c.pos as u64;
            let name = c.string("tensor name")?;
            let n_dims = c.u32("tensor n_dims")?;
            if n_dims as usize > MAX_DIMS {
                return Err(GgufError::BadShape {
                    name,
                    reason: format!("{n_dims} dims, at most {MAX_DIMS} supported"),
                    offset: info_offset,
                });
            }
            let mut dims = Vec::new();
            for _ in 0..n_dims {
                dims.push(c.count("tensor dim")?);
            }
            let type_offset = c.pos as u64;
            let type_id = c.u32("tensor ggml type")?;
            let offset = c.u64("tensor data offset")?;
            let Some(ty) = GgmlType::from_id(type_id) else {
                return Err(GgufError::UnknownGgmlType { type_id, name, offset: type_offset });
            };
            let bad = |reason: String| GgufError::BadShape { name: name.clone(), reason, offset: info_offset };
            // The product of max(dim, 1) must fit in i64, so that no partial product in any
            // order overflows (a zero dim must not hide huge ones).
            let mut bound: u64 = 1;
            for &d in &dims {
                bound = bound
                    .checked_mul(d.max(1))
                    .filter(|&n| n <= i64::MAX as u64)
                    .ok_or_else(|| bad(format!("dims {dims:?} overflow the element count")))?;
            }
            let n_elements: u64 = if dims.contains(&0) { 0 } else { bound };
            let row = dims.first().copied().unwrap_or(1);
            if row % ty.block_size() as u64 != 0 {
                return Err(bad(format!(
                    "row length {row} (dims {dims:?}) is not a multiple of the {ty} block size {}",
                    ty.block_size()
                )));
            }
            let n_bytes =
                ty.bytes_for(n_elements).ok_or_else(|| bad(format!("dims {dims:?} overflow the byte size")))?;
            if !names.insert(name.clone()) {
                return Err(GgufError::DuplicateTensor { name, offset: info_offset });
            }
            tensors.push(TensorInfo { name, dims, ty, offset, n_elements, n_bytes, info_offset });
        }

        let file_len = bytes.len() as u64;
        let data_offset = checked_align_up(c.pos as u64, alignment).unwrap_or(u64::MAX);
        let content = GgufContent { version, metadata, tensors, alignment, data_offset, file_len };
        content.check_tensor_ranges()?;
        Ok(content)
    }

    fn check_tensor_ranges(&self) -> Result<()> {
        for t in &self.tensors {
            if t.offset % self.alignment != 0 {
                return Err(GgufError::MisalignedTensor {
                    name: t.name.clone(),
                    data_offset: t.offset,
                    alignment: self.alignment,
                });
            }
            let start = self.data_offset.checked_add(t.offset);
            let end = start.and_then(|s| s.checked_add(t.n_bytes));
            match end {
                Some(e) if e <= self.file_len => {}
                _ => {
                    return Err(GgufError::TensorOutOfBounds {
                        name: t.name.clone(),
                        start: start.unwrap_or(u64::MAX),
                        end: end.unwrap_or(u64::MAX),
                        file_len: self.file_len,
                    });
                }
            }
        }
        let mut order: Vec<&TensorInfo> = self.tensors.iter().filter(|t| t.n_bytes > 0).collect();
        order.sort_by_key(|t| t.offset);
        for pair in order.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let a_end = a.offset + a.n_bytes; // in range: checked above
            if b.offset < a_end {
                return Err(GgufError::OverlappingTensors {
                    first: a.name.clone(),
                    first_end: a_end,
                    second: b.name.clone(),
                    second_start: b.offset,
                });
            }
        }
        Ok(())
    }

    /// The value of metadata key `key`.
    pub fn get(&self, key: &str) -> Option<&MetadataValue> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// The tensor info named `name`.
    pub fn tensor_info(&self, name: &str) -> Option<&TensorInfo> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// `general.architecture`, if present and a string.
    pub fn architecture(&self) -> Option<&str> {
        self.get("general.architecture").and_then(MetadataValue::as_str)
    }

    /// The bytes of tensor `t` inside `bytes` (the same bytes this header was parsed from).
    ///
    /// Errors: [`GgufError::TensorOutOfBounds`] if `bytes` is not the parsed file (shorter).
    pub fn tensor_bytes<'b>(&self, bytes: &'b [u8], t: &TensorInfo) -> Result<&'b [u8]> {
        let oob = || GgufError::TensorOutOfBounds {
            name: t.name.clone(),
            start: self.data_offset.saturating_add(t.offset),
            end: self.data_offset.saturating_add(t.offset).saturating_add(t.n_bytes),
            file_len: bytes.len() as u64,
        };
        let start = self.data_offset.checked_add(t.offset).ok_or_else(oob)?;
        let end = start.checked_add(t.n_bytes).ok_or_else(oob)?;
        let start = usize::try_from(start).map_err(|_| oob())?;
        let end = usize::try_from(end).map_err(|_| oob())?;
        bytes.get(start..end).ok_or_else(oob)
    }
}

/// A parsed GGUF file together with its bytes (memory-mapped, owned or borrowed).
///
/// Tensor data is never copied: [`GgufFile::tensor_data`] returns a slice into the map.
pub struct GgufFile<'a> {
    content: GgufContent,
    storage: FileBytes<'a>,
}

impl std::fmt::Debug for GgufFile<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile").field("content", &self.content).finish_non_exhaustive()
    }
}

impl GgufFile<'static> {
    /// Memory-map and parse the file at `path`.
    ///
    /// The file must not be modified while the returned value lives (the usual `mmap` caveat).
    /// Errors: [`GgufError::Io`] if it cannot be opened or mapped, else as [`GgufContent::parse`].
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile<'static>> {
        let path = path.as_ref();
        let storage = FileBytes::open(path).map_err(|source| GgufError::Io { path: path.to_path_buf(), source })?;
        Self::from_storage(storage)
    }

    /// Parse a file held in an owned buffer.
    pub fn from_vec(bytes: Vec<u8>) -> Result<GgufFile<'static>> {
        Self::from_storage(FileBytes::Owned(bytes))
    }
}

impl<'a> GgufFile<'a> {
    /// Parse a file held in a borrowed byte slice (zero-copy).
    pub fn from_slice(bytes: &'a [u8]) -> Result<GgufFile<'a>> {
        Self::from_storage(FileBytes::Borrowed(bytes))
    }

    fn from_storage(storage: FileBytes<'a>) -> Result<GgufFile<'a>> {
        let content = GgufContent::parse(&storage)?;
        Ok(GgufFile { content, storage })
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        &self.storage
    }

    /// The parsed header.
    pub fn content(&self) -> &GgufContent {
        &self.content
    }

    /// Format version.
    pub fn version(&self) -> u32 {
        self.content.version
    }

    /// Metadata in file order.
    pub fn metadata(&self) -> &[(String, MetadataValue)] {
        &self.content.metadata
    }

    /// The value of metadata key `key`.
    pub fn get(&self, key: &str) -> Option<&MetadataValue> {
        self.content.get(key)
    }

    /// Tensor infos in file order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.content.tensors
    }

    /// The info of tensor `name`.
    ///
    /// Errors: [`GgufError::TensorNotFound`].
    pub fn tensor_info(&self, name: &str) -> Result<&TensorInfo> {
        self.content.tensor_info(name).ok_or_else(|| GgufError::TensorNotFound(name.to_string()))
    }

    /// The raw (possibly quantized) bytes of tensor `name`, borrowed from the file.
    ///
    /// Errors: [`GgufError::TensorNotFound`].
    pub fn tensor_data(&self, name: &str) -> Result<&[u8]> {
        let t = self.tensor_info(name)?;
        self.content.tensor_bytes(self.bytes(), t)
    }

    /// Drop the memory-mapped pages of tensor `name`'s bytes from this process's resident set
    /// (see `rlx_mmap::FileBytes::release`): for a loader that copied them out, so that
    /// loading a model does not hold the file and its copy at once. Reading the tensor again
    /// still works (the pages fault back in). Nothing happens for a file that is not mapped.
    ///
    /// Errors: [`GgufError::TensorNotFound`], or bytes past the end of the file.
    pub fn release_tensor_data(&self, name: &str) -> Result<()> {
        let bytes = self.tensor_data(name)?;
        self.storage.release(bytes);
        Ok(())
    }

    /// Tensor `name` converted to `f32` (dequantized for block types), in row-major order.
    ///
    /// Errors: [`GgufError::TensorNotFound`]; an element count that does not fit `usize`.
    pub fn dequantize(&self, name: &str) -> Result<Vec<f32>> {
        let t = self.tensor_info(name)?;
        quants::dequantize(t.ty, self.content.tensor_bytes(self.bytes(), t)?)
    }

    /// Tensor `name` as an `rlx_ir::Tensor` with the row-major shape: F32, F16, BF16, F64, I8,
    /// I16, I32 and I64 keep their dtype; block-quantized types are dequantized to F32.
    ///
    /// Errors: [`GgufError::TensorNotFound`], [`GgufError::Tensor`].
    pub fn tensor(&self, name: &str) -> Result<rlx_ir::Tensor> {
        let t = self.tensor_info(name)?;
        let bytes = self.content.tensor_bytes(self.bytes(), t)?;
        let shape: Vec<usize> = t.shape().iter().map(|&d| d as usize).collect(); // each <= n_bytes
        let wrap = |source| GgufError::Tensor { name: name.to_string(), source };
        let dtype = match t.ty {
            GgmlType::F32 => Some(rlx_ir::DType::F32),
            GgmlType::F16 => Some(rlx_ir::DType::F16),
            GgmlType::BF16 => Some(rlx_ir::DType::BF16),
            GgmlType::F64 => Some(rlx_ir::DType::F64),
            GgmlType::I8 => Some(rlx_ir::DType::I8),
            GgmlType::I16 => Some(rlx_ir::DType::I16),
            GgmlType::I32 => Some(rlx_ir::DType::I32),
            GgmlType::I64 => Some(rlx_ir::DType::I64),
            _ => None,
        };
        match dtype {
            Some(dt) => rlx_ir::Tensor::from_le_bytes(&shape, dt, bytes).map_err(wrap),
            None => rlx_ir::Tensor::from_vec(quants::dequantize(t.ty, bytes)?, &shape).map_err(wrap),
        }
    }
}
