//! GGUF writer.
//!
//! Produces the layout the reader documents: header, metadata in insertion order, tensor infos
//! in insertion order, zero padding to the alignment, then each tensor's bytes followed by zero
//! padding to the alignment (also after the last one). Tensor offsets are consecutive multiples
//! of the alignment. This is exactly what the `gguf` Python package's `GGUFWriter` writes, so the
//! same metadata and tensors added in the same order give a byte-identical file (note that
//! `GGUFWriter` always adds `general.architecture` first).
//!
//! Version 3 by default; versions 1 and 2 can be written too (v1 stores counts, lengths and dims
//! as `u32` and fails on anything larger).

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;

use crate::quants;
use crate::reader::{ALIGNMENT_KEY, DEFAULT_ALIGNMENT, GGUF_MAGIC, MAX_ARRAY_DEPTH, MAX_DIMS};
use crate::value::{MetadataArray, MetadataValue};
use crate::{GgmlType, GgufError, Result};

struct PendingTensor {
    name: String,
    dims: Vec<u64>,
    ty: GgmlType,
    data: Vec<u8>,
}

/// Builds a GGUF file in memory; see the module docs for the layout.
pub struct GgufWriter {
    version: u32,
    alignment: u64,
    metadata: Vec<(String, MetadataValue)>,
    tensors: Vec<PendingTensor>,
    names: HashSet<String>,
}

impl Default for GgufWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl GgufWriter {
    /// An empty GGUF v3 file with the default alignment (32).
    pub fn new() -> Self {
        GgufWriter {
            version: 3,
            alignment: DEFAULT_ALIGNMENT,
            metadata: Vec::new(),
            tensors: Vec::new(),
            names: HashSet::new(),
        }
    }

    /// Select the format version (1, 2 or 3).
    ///
    /// Errors: [`GgufError::InvalidInput`] for other versions.
    pub fn set_version(&mut self, version: u32) -> Result<()> {
        if !(1..=3).contains(&version) {
            return Err(GgufError::InvalidInput(format!("version {version}; only 1, 2 and 3 can be written")));
        }
        self.version = version;
        Ok(())
    }

    /// Set the data alignment and record it as `general.alignment` (a `u32`; replaces an earlier
    /// value in place, else appended).
    ///
    /// Errors: [`GgufError::InvalidInput`] unless `alignment` is a non-zero power of two.
    pub fn set_alignment(&mut self, alignment: u32) -> Result<()> {
        if alignment == 0 || !alignment.is_power_of_two() {
            return Err(GgufError::InvalidInput(format!("alignment {alignment} is not a non-zero power of two")));
        }
        self.alignment = u64::from(alignment);
        match self.metadata.iter_mut().find(|(k, _)| k == ALIGNMENT_KEY) {
            Some((_, v)) => *v = MetadataValue::U32(alignment),
            None => self.metadata.push((ALIGNMENT_KEY.to_string(), MetadataValue::U32(alignment))),
        }
        Ok(())
    }

    /// Append metadata `key = value`. `general.alignment` is routed to [`Self::set_alignment`].
    ///
    /// Errors: [`GgufError::InvalidInput`] for a duplicate key, arrays nested deeper than
    /// [`MAX_ARRAY_DEPTH`], or a `general.alignment` that is not a power-of-two `U32`.
    pub fn add_metadata(&mut self, key: impl Into<String>, value: impl Into<MetadataValue>) -> Result<()> {
        let key = key.into();
        let value = value.into();
        if key == ALIGNMENT_KEY {
            return match value {
                MetadataValue::U32(a) => self.set_alignment(a),
                other => {
                    Err(GgufError::InvalidInput(format!("{ALIGNMENT_KEY} must be U32, got {:?}", other.value_type())))
                }
            };
        }
        if self.metadata.iter().any(|(k, _)| *k == key) {
            return Err(GgufError::InvalidInput(format!("duplicate metadata key {key:?}")));
        }
        if let MetadataValue::Array(a) = &value
            && array_depth(a) > MAX_ARRAY_DEPTH
        {
            return Err(GgufError::InvalidInput(format!(
                "metadata {key:?}: arrays nested deeper than {MAX_ARRAY_DEPTH} levels"
            )));
        }
        self.metadata.push((key, value));
        Ok(())
    }

    /// Append tensor `name` of row-major `shape` (numpy order; stored reversed, innermost first)
    /// and type `ty`, whose raw bytes are `data`.
    ///
    /// Errors: [`GgufError::InvalidInput`] for a duplicate name, more than 4 dims, a last dim
    /// that is not a multiple of the block size, or `data.len()` not the size of `shape` in `ty`.
    pub fn add_tensor(&mut self, name: impl Into<String>, shape: &[u64], ty: GgmlType, data: Vec<u8>) -> Result<()> {
        let name = name.into();
        let bad = |m: String| Err(GgufError::InvalidInput(format!("tensor {name:?}: {m}")));
        if self.names.contains(&name) {
            return bad("duplicate tensor name".into());
        }
        if shape.len() > MAX_DIMS {
            return bad(format!("{} dims, at most {MAX_DIMS}", shape.len()));
        }
        let n = shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d));
        let Some(n) = n else {
            return bad(format!("shape {shape:?} overflows"));
        };
        let row = shape.last().copied().unwrap_or(1);
        if row % ty.block_size() as u64 != 0 {
            return bad(format!("last dim {row} is not a multiple of the {ty} block size {}", ty.block_size()));
        }
        match ty.bytes_for(n) {
            Some(nb) if nb == data.len() as u64 => {}
            expected => return bad(format!("{} data bytes, {ty} {shape:?} needs {expected:?}", data.len())),
        }
        self.names.insert(name.clone());
        self.tensors.push(PendingTensor { name, dims: shape.iter().rev().copied().collect(), ty, data });
        Ok(())
    }

    /// Quantize `values` (row-major, `shape`) to `ty` and append it.
    ///
    /// Errors: as [`Self::add_tensor`] and [`quants::quantize`] (e.g. no quantizer for `ty`).
    pub fn add_f32_tensor(
        &mut self,
        name: impl Into<String>,
        shape: &[u64],
        ty: GgmlType,
        values: &[f32],
    ) -> Result<()> {
        let data = quants::quantize(ty, values)?;
        self.add_tensor(name, shape, ty, data)
    }

    /// Serialize to a byte vector.
    ///
    /// Errors: [`GgufError::InvalidInput`] if a count or length does not fit the version's
    /// integer width (v1: u32).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut e = Enc { out: Vec::new(), version: self.version };
        e.out.extend_from_slice(&GGUF_MAGIC);
        e.out.extend_from_slice(&self.version.to_le_bytes());
        e.count(self.tensors.len() as u64, "tensor count")?;
        e.count(self.metadata.len() as u64, "metadata count")?;
        for (k, v) in &self.metadata {
            e.string(k)?;
            e.out.extend_from_slice(&v.value_type().id().to_le_bytes());
            e.value(v)?;
        }
        let mut offset = 0u64;
        let pad = |n: u64| n.div_ceil(self.alignment) * self.alignment;
        for t in &self.tensors {
            e.string(&t.name)?;
            e.out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for &d in &t.dims {
                e.count(d, "tensor dim")?;
            }
            e.out.extend_from_slice(&t.ty.id().to_le_bytes());
            e.out.extend_from_slice(&offset.to_le_bytes());
            offset += pad(t.data.len() as u64);
        }
        e.out.resize(pad(e.out.len() as u64) as usize, 0);
        for t in &self.tensors {
            e.out.extend_from_slice(&t.data);
            e.out.resize(pad(e.out.len() as u64) as usize, 0);
        }
        Ok(e.out)
    }

    /// Serialize into `w`.
    ///
    /// Errors: as [`Self::to_bytes`], plus [`GgufError::Io`] (path `<writer>`).
    pub fn write_to(&self, mut w: impl Write) -> Result<()> {
        let bytes = self.to_bytes()?;
        w.write_all(&bytes).map_err(|source| GgufError::Io { path: "<writer>".into(), source })
    }

    /// Serialize to the file `path` (created or truncated).
    ///
    /// Errors: as [`Self::to_bytes`], plus [`GgufError::Io`].
    pub fn write_file(&self, path: impl AsRef<Path>) -> Result<()> {
        let bytes = self.to_bytes()?;
        std::fs::write(path.as_ref(), bytes)
            .map_err(|source| GgufError::Io { path: path.as_ref().to_path_buf(), source })
    }
}

fn array_depth(a: &MetadataArray) -> usize {
    match a {
        MetadataArray::Array(v) => 1 + v.iter().map(array_depth).max().unwrap_or(0),
        _ => 1,
    }
}

struct Enc {
    out: Vec<u8>,
    version: u32,
}

impl Enc {
    fn count(&mut self, n: u64, what: &str) -> Result<()> {
        if self.version == 1 {
            let n32 = u32::try_from(n)
                .map_err(|_| GgufError::InvalidInput(format!("{what} {n} does not fit GGUF v1's u32")))?;
            self.out.extend_from_slice(&n32.to_le_bytes());
        } else {
            self.out.extend_from_slice(&n.to_le_bytes());
        }
        Ok(())
    }

    fn string(&mut self, s: &str) -> Result<()> {
        self.count(s.len() as u64, "string length")?;
        self.out.extend_from_slice(s.as_bytes());
        Ok(())
    }

    fn value(&mut self, v: &MetadataValue) -> Result<()> {
        match v {
            MetadataValue::U8(x) => self.out.push(*x),
            MetadataValue::I8(x) => self.out.extend_from_slice(&x.to_le_bytes()),
            MetadataValue::U16(x) => self.out.extend_from_slice(&x.to_le_bytes()),
            MetadataValue::I16(x) => self.out.extend_from_slice(&x.to_le_bytes()),
            MetadataValue::U32(x) => self.out.extend_from_slice(&x.to_le_bytes()),
            MetadataValue::I32(x) => self.out.extend_from_slice(&x.to_le_bytes()),
            MetadataValue::F32(x) => self.out.extend_from_slice(&x.to_le_bytes()),
            MetadataValue::Bool(x) => self.out.push(u8::from(*x)),
            MetadataValue::String(s) => self.string(s)?,
            MetadataValue::U64(x) => self.out.extend_from_slice(&x.to_le_bytes()),
            MetadataValue::I64(x) => self.out.extend_from_slice(&x.to_le_bytes()),
            MetadataValue::F64(x) => self.out.extend_from_slice(&x.to_le_bytes()),
            MetadataValue::Array(a) => self.array(a)?,
        }
        Ok(())
    }

    fn array(&mut self, a: &MetadataArray) -> Result<()> {
        self.out.extend_from_slice(&a.elem_type().id().to_le_bytes());
        self.count(a.len() as u64, "array length")?;
        macro_rules! le {
            ($v:expr) => {
                for x in $v {
                    self.out.extend_from_slice(&x.to_le_bytes());
                }
            };
        }
        match a {
            MetadataArray::U8(v) => self.out.extend_from_slice(v),
            MetadataArray::I8(v) => le!(v),
            MetadataArray::U16(v) => le!(v),
            MetadataArray::I16(v) => le!(v),
            MetadataArray::U32(v) => le!(v),
            MetadataArray::I32(v) => le!(v),
            MetadataArray::F32(v) => le!(v),
            MetadataArray::U64(v) => le!(v),
            MetadataArray::I64(v) => le!(v),
            MetadataArray::F64(v) => le!(v),
            MetadataArray::Bool(v) => self.out.extend(v.iter().map(|&b| u8::from(b))),
            MetadataArray::String(v) => {
                for s in v {
                    self.string(s)?;
                }
            }
            MetadataArray::Array(v) => {
                for inner in v {
                    self.array(inner)?;
                }
            }
        }
        Ok(())
    }
}
