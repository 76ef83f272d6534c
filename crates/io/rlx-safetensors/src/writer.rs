//! safetensors writer: a map of name → `rlx_ir::Tensor` to a file or a byte vector.
//!
//! The layout is the `safetensors` crate's `serialize` (which the Python package also calls):
//! tensors ordered by decreasing dtype alignment, then by name; the JSON header padded with
//! spaces to a multiple of 8 bytes. The same tensors and metadata therefore give the same bytes
//! as `safetensors.numpy.save` (tested against the fixtures).

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use rlx_ir::Tensor;

use crate::{Dtype, Result, SafetensorsError, rlx_to_dtype};

struct View<'t>(&'t Tensor);

impl safetensors::View for View<'_> {
    fn dtype(&self) -> Dtype {
        // `views` admits only tensors whose dtype has a safetensors twin.
        rlx_to_dtype(self.0.dtype()).unwrap_or(Dtype::U8)
    }
    fn shape(&self) -> &[usize] {
        self.0.shape()
    }
    fn data(&self) -> Cow<'_, [u8]> {
        Cow::Owned(self.0.to_le_bytes())
    }
    fn data_len(&self) -> usize {
        self.0.numel() * self.0.dtype().size_bytes()
    }
}

fn views<'t, S: AsRef<str>>(tensors: impl IntoIterator<Item = (S, &'t Tensor)>) -> Result<BTreeMap<String, View<'t>>> {
    let mut out = BTreeMap::new();
    for (name, t) in tensors {
        let name = name.as_ref().to_string();
        if name == "__metadata__" {
            return Err(SafetensorsError::Write("a tensor cannot be named \"__metadata__\"".into()));
        }
        if rlx_to_dtype(t.dtype()).is_none() {
            return Err(SafetensorsError::Write(format!("tensor {name:?}: safetensors has no {} dtype", t.dtype())));
        }
        if out.insert(name.clone(), View(t)).is_some() {
            return Err(SafetensorsError::Write(format!("duplicate tensor name {name:?}")));
        }
    }
    Ok(out)
}

fn meta(metadata: Option<&BTreeMap<String, String>>) -> Option<HashMap<String, String>> {
    metadata.map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
}

/// Serialize `tensors` (name → tensor, any rlx dtype) and optional `__metadata__` to bytes.
///
/// Errors: [`SafetensorsError::Write`] for a duplicate name, the reserved name `__metadata__`,
/// a dtype safetensors lacks (see [`crate::rlx_to_dtype`]), or a header over 100 MB.
pub fn serialize<'t, S: AsRef<str>>(
    tensors: impl IntoIterator<Item = (S, &'t Tensor)>,
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<Vec<u8>> {
    safetensors::serialize(views(tensors)?, meta(metadata)).map_err(|e| SafetensorsError::Write(e.to_string()))
}

/// Write `tensors` (name → tensor) and optional `__metadata__` to the file at `path`.
///
/// The file is written through a buffered writer without first building it in memory, into a
/// sibling temporary file renamed over `path` (an existing `path` is never truncated under a
/// reader's mmap). It gets the permissions of the file it replaces, else those of a file
/// created at `path` (`0o666` less the umask), not the temporary file's `0o600`.
/// Errors: as [`serialize`]; [`SafetensorsError::Io`] if the file cannot be written.
pub fn save<'t, S: AsRef<str>>(
    path: impl AsRef<Path>,
    tensors: impl IntoIterator<Item = (S, &'t Tensor)>,
    metadata: Option<&BTreeMap<String, String>>,
) -> Result<()> {
    let path = path.as_ref();
    let io = |source| SafetensorsError::Io { path: path.to_path_buf(), source };
    let views = views(tensors)?;
    // The mode a new file gets here: from the file it replaces, or from an empty one created
    // now (std has no umask query), removed again if the write fails.
    let created = !path.exists();
    if created {
        std::fs::File::create(path).map_err(io)?;
    }
    let perms = std::fs::metadata(path).map_err(io)?.permissions();
    let written = safetensors::serialize_to_file(views, meta(metadata), path).map_err(|e| match e {
        safetensors::SafeTensorError::IoError(source) => io(source),
        e => SafetensorsError::Write(e.to_string()),
    });
    if written.is_err() && created {
        let _ = std::fs::remove_file(path);
    }
    written?;
    std::fs::set_permissions(path, perms).map_err(io)
}
