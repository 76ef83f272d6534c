//! safetensors reader: header validation, memory-mapped storage, typed access.
//!
//! Layout (little-endian; spec: the `safetensors` crate's README):
//!
//! ```text
//! n: u64 | n bytes of UTF-8 JSON header | data section
//! header = { "__metadata__"?: {str: str}, name: {"dtype": D, "shape": [usize], "data_offsets": [s, e]}, ... }
//! ```
//!
//! Offsets are relative to the data section. The tensors, sorted by offset, must tile the data
//! section exactly: the first starts at 0, each starts where the previous ends, the last ends at
//! the end of the file, and `e - s` is the element count times the dtype size (sub-byte dtypes
//! must fill whole bytes). These are the rules of `safetensors::SafeTensors::deserialize`; we
//! check them ourselves, with overflow-checked arithmetic and the tensor named in every error,
//! instead of calling it, because its final `end + 8 + n == file_len` sum is unchecked: a
//! crafted header whose offsets add up to near `usize::MAX` makes 0.8.0 panic ("attempt to add
//! with overflow") wherever overflow checks are on, e.g. in every debug build (see the
//! `malformed` test `crate_overflow_header_is_an_error`). The JSON grammar and the dtype names
//! are the `safetensors` crate's own (`safetensors::Dtype`'s serde names), and a property test
//! checks that we accept exactly the files it accepts.
//!
//! Nothing here panics on any input, and nothing is allocated from an unchecked field: the
//! header length is checked against the file length (and [`MAX_HEADER_LEN`]) before it is read,
//! and everything else is parsed from that JSON text.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use rlx_mmap::FileBytes;

use half::{bf16, f16};
use rlx_ir::{DType, Tensor};
use serde::Deserialize;

use crate::{Dtype, Result, SafetensorsError, dtype_to_rlx};

/// Largest JSON header accepted (100 MB, the `safetensors` crate's limit).
pub const MAX_HEADER_LEN: u64 = 100_000_000;

/// One tensor's description from the header.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorInfo {
    /// Tensor name.
    pub name: String,
    /// Element type.
    pub dtype: Dtype,
    /// Row-major shape (`[]` for a scalar).
    pub shape: Vec<usize>,
    /// `[start, end)` of the bytes, relative to the data section.
    pub data_offsets: (usize, usize),
}

impl TensorInfo {
    /// Number of bytes.
    pub fn n_bytes(&self) -> usize {
        self.data_offsets.1 - self.data_offsets.0 // start <= end is checked at parse time
    }

    /// Number of elements (product of the shape; 1 for a scalar).
    pub fn n_elements(&self) -> usize {
        self.shape.iter().product() // checked not to overflow at parse time
    }

    /// The matching `rlx_ir::DType`, if there is one.
    pub fn rlx_dtype(&self) -> Option<DType> {
        dtype_to_rlx(self.dtype)
    }
}

/// A parsed header: metadata, tensor infos (in offset order) and where the data starts.
///
/// It borrows nothing; [`SafetensorsFile`] pairs it with the file's bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// The `__metadata__` string map (empty when absent).
    pub metadata: BTreeMap<String, String>,
    /// Tensor infos sorted by data offset (file order).
    pub tensors: Vec<TensorInfo>,
    /// Absolute offset of the data section (`8 + n`).
    pub data_offset: u64,
    /// Length of the parsed file.
    pub file_len: u64,
    index: HashMap<String, usize>,
}

#[derive(Deserialize)]
struct RawHeader {
    #[serde(rename = "__metadata__", default)]
    metadata: Option<BTreeMap<String, String>>,
    #[serde(flatten)]
    tensors: HashMap<String, RawInfo>,
}

#[derive(Deserialize)]
struct RawInfo {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: (usize, usize),
}

fn parse_dtype(tensor: &str, s: &str) -> Result<Dtype> {
    serde_json::from_value::<Dtype>(serde_json::Value::String(s.to_string()))
        .map_err(|_| SafetensorsError::UnknownDtype { tensor: tensor.to_string(), dtype: s.to_string() })
}

/// Bytes taken by `shape` elements of `dtype`, or why that is impossible.
pub(crate) fn bytes_for(dtype: Dtype, shape: &[usize]) -> std::result::Result<usize, &'static str> {
    let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or("element count overflows usize")?;
    let bits = n.checked_mul(dtype.bitsize()).ok_or("bit count overflows usize")?;
    if bits % 8 != 0 {
        return Err("sub-byte dtype does not fill a whole number of bytes");
    }
    Ok(bits / 8)
}

impl Header {
    /// Parse and validate the header of the file in `bytes` (the whole file).
    ///
    /// Errors: [`SafetensorsError::HeaderTooSmall`], [`SafetensorsError::HeaderTooLarge`],
    /// [`SafetensorsError::HeaderTruncated`], [`SafetensorsError::HeaderNotUtf8`],
    /// [`SafetensorsError::BadHeader`], [`SafetensorsError::UnknownDtype`],
    /// [`SafetensorsError::BadShape`], [`SafetensorsError::BadOffsets`],
    /// [`SafetensorsError::SizeMismatch`], [`SafetensorsError::DataLength`]. Never panics.
    pub fn parse(bytes: &[u8]) -> Result<Header> {
        let file_len = bytes.len() as u64;
        let Some((len_bytes, rest)) = bytes.split_first_chunk::<8>() else {
            return Err(SafetensorsError::HeaderTooSmall { file_len });
        };
        let n = u64::from_le_bytes(*len_bytes);
        if n > MAX_HEADER_LEN {
            return Err(SafetensorsError::HeaderTooLarge { len: n, max: MAX_HEADER_LEN });
        }
        if n > rest.len() as u64 {
            return Err(SafetensorsError::HeaderTruncated { len: n, available: rest.len() as u64 });
        }
        let (json, data) = rest.split_at(n as usize); // n <= rest.len()
        let text =
            std::str::from_utf8(json).map_err(|e| SafetensorsError::HeaderNotUtf8 { valid_up_to: e.valid_up_to() })?;
        let raw: RawHeader =
            serde_json::from_str(text).map_err(|e| SafetensorsError::BadHeader { message: e.to_string() })?;

        let mut tensors = Vec::with_capacity(raw.tensors.len());
        for (name, info) in raw.tensors {
            let dtype = parse_dtype(&name, &info.dtype)?;
            let (start, end) = info.data_offsets;
            if end < start {
                return Err(SafetensorsError::BadOffsets {
                    tensor: name,
                    start,
                    end,
                    reason: "end before start".into(),
                });
            }
            let expected = bytes_for(dtype, &info.shape).map_err(|reason| SafetensorsError::BadShape {
                tensor: name.clone(),
                dtype,
                shape: info.shape.clone(),
                reason,
            })?;
            if end - start != expected {
                return Err(SafetensorsError::SizeMismatch {
                    tensor: name,
                    dtype,
                    shape: info.shape,
                    expected,
                    got: end - start,
                });
            }
            tensors.push(TensorInfo { name, dtype, shape: info.shape, data_offsets: (start, end) });
        }
        // File order; the name breaks ties between zero-sized tensors so the order is deterministic.
        tensors.sort_by(|a, b| a.data_offsets.cmp(&b.data_offsets).then_with(|| a.name.cmp(&b.name)));
        let mut pos = 0usize;
        for t in &tensors {
            let (start, end) = t.data_offsets;
            if start != pos {
                let reason = if start < pos {
                    format!("overlap the previous tensor, which ends at {pos}")
                } else {
                    format!("leave a gap after the previous tensor, which ends at {pos}")
                };
                return Err(SafetensorsError::BadOffsets { tensor: t.name.clone(), start, end, reason });
            }
            pos = end;
        }
        if pos as u64 != data.len() as u64 {
            return Err(SafetensorsError::DataLength { expected: pos as u64, got: data.len() as u64 });
        }
        let index = tensors.iter().enumerate().map(|(i, t)| (t.name.clone(), i)).collect();
        Ok(Header { metadata: raw.metadata.unwrap_or_default(), tensors, data_offset: 8 + n, file_len, index })
    }

    /// The info of tensor `name`.
    pub fn get(&self, name: &str) -> Option<&TensorInfo> {
        self.index.get(name).map(|&i| &self.tensors[i])
    }

    /// The bytes of tensor `t` within `bytes` (the file this header was parsed from).
    ///
    /// Errors: [`SafetensorsError::DataLength`] if `bytes` is not that file (too short).
    pub fn tensor_bytes<'b>(&self, bytes: &'b [u8], t: &TensorInfo) -> Result<&'b [u8]> {
        let start = self.data_offset.checked_add(t.data_offsets.0 as u64);
        let end = self.data_offset.checked_add(t.data_offsets.1 as u64);
        match (start, end) {
            (Some(s), Some(e)) if e <= bytes.len() as u64 => Ok(&bytes[s as usize..e as usize]),
            _ => Err(SafetensorsError::DataLength {
                expected: self.file_len.saturating_sub(self.data_offset),
                got: (bytes.len() as u64).saturating_sub(self.data_offset),
            }),
        }
    }
}

/// A parsed safetensors file together with its bytes (memory-mapped, owned or borrowed).
///
/// Tensor bytes are never copied by [`SafetensorsFile::tensor_bytes`] and
/// [`SafetensorsFile::f32_view`] (when aligned); the conversions copy into new storage.
pub struct SafetensorsFile<'a> {
    header: Header,
    storage: FileBytes<'a>,
}

impl std::fmt::Debug for SafetensorsFile<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SafetensorsFile").field("header", &self.header).finish_non_exhaustive()
    }
}

impl SafetensorsFile<'static> {
    /// Memory-map and parse the file at `path`.
    ///
    /// The file must not be modified while the returned value lives (the usual `mmap` caveat).
    /// Errors: [`SafetensorsError::Io`], else as [`Header::parse`].
    pub fn open(path: impl AsRef<Path>) -> Result<SafetensorsFile<'static>> {
        let path = path.as_ref();
        let storage =
            FileBytes::open(path).map_err(|source| SafetensorsError::Io { path: path.to_path_buf(), source })?;
        Self::from_storage(storage)
    }

    /// Parse a file held in an owned buffer.
    pub fn from_vec(bytes: Vec<u8>) -> Result<SafetensorsFile<'static>> {
        Self::from_storage(FileBytes::Owned(bytes))
    }
}

impl<'a> SafetensorsFile<'a> {
    /// Parse a file held in a borrowed byte slice (zero-copy).
    pub fn from_slice(bytes: &'a [u8]) -> Result<SafetensorsFile<'a>> {
        Self::from_storage(FileBytes::Borrowed(bytes))
    }

    fn from_storage(storage: FileBytes<'a>) -> Result<SafetensorsFile<'a>> {
        let header = Header::parse(&storage)?;
        Ok(SafetensorsFile { header, storage })
    }

    /// The whole file.
    pub fn bytes(&self) -> &[u8] {
        &self.storage
    }

    /// The parsed header.
    pub fn header(&self) -> &Header {
        &self.header
    }

    /// The `__metadata__` string map (empty when absent).
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.header.metadata
    }

    /// Tensor infos in file (offset) order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.header.tensors
    }

    /// Tensor names in file (offset) order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.header.tensors.iter().map(|t| t.name.as_str())
    }

    /// The info of tensor `name`.
    ///
    /// Errors: [`SafetensorsError::TensorNotFound`].
    pub fn info(&self, name: &str) -> Result<&TensorInfo> {
        self.header.get(name).ok_or_else(|| SafetensorsError::TensorNotFound(name.to_string()))
    }

    /// The raw little-endian bytes of tensor `name`, borrowed from the file.
    ///
    /// Errors: [`SafetensorsError::TensorNotFound`].
    pub fn tensor_bytes(&self, name: &str) -> Result<&[u8]> {
        let t = self.info(name)?;
        self.header.tensor_bytes(self.bytes(), t)
    }

    /// Tensor `name` (dtype F32) as `f32`s: borrowed from the file when its bytes are 4-byte
    /// aligned in memory on a little-endian host (always the case for a memory-mapped file
    /// written by the `safetensors` library, which pads the header to 8 bytes and orders tensors
    /// by decreasing alignment), copied otherwise.
    ///
    /// Errors: [`SafetensorsError::TensorNotFound`], [`SafetensorsError::WrongDtype`] if the
    /// dtype is not F32 (use [`SafetensorsFile::to_f32`] to convert).
    pub fn f32_view(&self, name: &str) -> Result<Cow<'_, [f32]>> {
        let t = self.info(name)?;
        if t.dtype != Dtype::F32 {
            return Err(SafetensorsError::WrongDtype {
                tensor: name.to_string(),
                expected: Dtype::F32,
                found: t.dtype,
            });
        }
        let bytes = self.header.tensor_bytes(self.bytes(), t)?;
        if cfg!(target_endian = "little") {
            // SAFETY: every bit pattern is a valid f32; `align_to` only puts correctly aligned
            // elements in the middle slice, so the cast is sound.
            let (head, mid, tail) = unsafe { bytes.align_to::<f32>() };
            if head.is_empty() && tail.is_empty() {
                return Ok(Cow::Borrowed(mid));
            }
        }
        Ok(Cow::Owned(bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()))
    }

    /// Drop the memory-mapped pages of tensor `name`'s bytes from this process's resident set
    /// (see `rlx_mmap::FileBytes::release`): for a loader that copied them out, so that
    /// loading a model does not hold the file and its copy at once. Reading the tensor again
    /// still works (the pages fault back in). Nothing happens for a file that is not mapped.
    ///
    /// Errors: [`SafetensorsError::TensorNotFound`], or bytes past the end of the file.
    pub fn release_tensor_data(&self, name: &str) -> Result<()> {
        let t = self.info(name)?;
        self.storage.release(self.header.tensor_bytes(self.bytes(), t)?);
        Ok(())
    }

    /// Tensor `name` converted to `f32` in row-major order: F32 copied, F16 and BF16 widened
    /// exactly, F64 rounded to nearest, integers and BOOL converted as numpy's `astype(float32)`.
    ///
    /// Errors: [`SafetensorsError::TensorNotFound`], [`SafetensorsError::UnsupportedDtype`] for
    /// dtypes without an rlx `DType`.
    pub fn to_f32(&self, name: &str) -> Result<Vec<f32>> {
        let t = self.info(name)?;
        let b = self.header.tensor_bytes(self.bytes(), t)?;
        Ok(match t.dtype {
            Dtype::F32 => b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect(),
            Dtype::F16 => b.chunks_exact(2).map(|c| f16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
            Dtype::BF16 => b.chunks_exact(2).map(|c| bf16::from_le_bytes([c[0], c[1]]).to_f32()).collect(),
            _ => self.tensor(name)?.to_f32_vec(),
        })
    }

    /// Tensor `name` as an `rlx_ir::Tensor` of the matching dtype (F16 and BF16 stay half
    /// precision; see [`crate::dtype_to_rlx`]).
    ///
    /// Errors: [`SafetensorsError::TensorNotFound`], [`SafetensorsError::UnsupportedDtype`].
    pub fn tensor(&self, name: &str) -> Result<Tensor> {
        let t = self.info(name)?;
        let dt = t.rlx_dtype().ok_or_else(|| SafetensorsError::UnsupportedDtype {
            tensor: name.to_string(),
            dtype: t.dtype,
            op: "converting to rlx_ir::Tensor",
        })?;
        let bytes = self.header.tensor_bytes(self.bytes(), t)?;
        Tensor::from_le_bytes(&t.shape, dt, bytes)
            .map_err(|source| SafetensorsError::Tensor { name: name.to_string(), source })
    }

    /// Tensor `name` converted to `dtype` (F16/BF16 → F32 directly, otherwise
    /// `rlx_ir::Tensor::cast`, i.e. XLA `convert_element_type` rules).
    ///
    /// Errors: as [`SafetensorsFile::tensor`].
    pub fn tensor_as(&self, name: &str, dtype: DType) -> Result<Tensor> {
        let t = self.info(name)?;
        if dtype == DType::F32 && matches!(t.dtype, Dtype::F16 | Dtype::BF16 | Dtype::F32) {
            return Tensor::from_vec(self.to_f32(name)?, &t.shape)
                .map_err(|source| SafetensorsError::Tensor { name: name.to_string(), source });
        }
        Ok(self.tensor(name)?.cast(dtype))
    }
}
