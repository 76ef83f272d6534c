//! Sharded checkpoints: a `model.safetensors.index.json` plus shard files.
//!
//! The index is the Hugging Face form:
//!
//! ```json
//! {"metadata": {"total_size": 1234}, "weight_map": {"tensor.name": "model-00001-of-00002.safetensors", ...}}
//! ```
//!
//! Shard paths are relative to the index's directory and must stay inside it (no absolute
//! paths, no `..`). Shards are opened (memory-mapped) lazily, on the first access to one of
//! their tensors, and stay open; a shard that fails to open is retried on the next access.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use rlx_ir::{DType, Tensor};
use serde::Deserialize;

use crate::{Result, SafetensorsError, SafetensorsFile, TensorInfo};

/// The usual index file name.
pub const INDEX_FILE_NAME: &str = "model.safetensors.index.json";

#[derive(Deserialize)]
struct RawIndex {
    #[serde(default)]
    metadata: serde_json::Map<String, serde_json::Value>,
    weight_map: BTreeMap<String, String>,
}

struct Shard {
    file_name: String,
    path: PathBuf,
    file: OnceLock<SafetensorsFile<'static>>,
}

/// A sharded checkpoint opened from its index; shards are memory-mapped on first use.
pub struct ShardedSafetensors {
    index_path: PathBuf,
    metadata: serde_json::Map<String, serde_json::Value>,
    /// Tensor name → index into `shards`.
    weight_map: BTreeMap<String, usize>,
    shards: Vec<Shard>,
}

impl std::fmt::Debug for ShardedSafetensors {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShardedSafetensors")
            .field("index_path", &self.index_path)
            .field("shards", &self.shards.iter().map(|s| &s.file_name).collect::<Vec<_>>())
            .field("tensors", &self.weight_map.len())
            .finish_non_exhaustive()
    }
}

impl ShardedSafetensors {
    /// Read the index at `index_path` (no shard is opened yet).
    ///
    /// Errors: [`SafetensorsError::Io`] if it cannot be read; [`SafetensorsError::BadIndex`] if
    /// it is not JSON of the form above or names a shard path outside its directory.
    pub fn open(index_path: impl AsRef<Path>) -> Result<ShardedSafetensors> {
        let index_path = index_path.as_ref().to_path_buf();
        let text =
            std::fs::read(&index_path).map_err(|source| SafetensorsError::Io { path: index_path.clone(), source })?;
        Self::from_index_json(&index_path, &text)
    }

    /// Parse index JSON `text` as if read from `index_path` (shards resolve next to it).
    ///
    /// Errors: as [`ShardedSafetensors::open`] without the I/O.
    pub fn from_index_json(index_path: &Path, text: &[u8]) -> Result<ShardedSafetensors> {
        let bad = |message: String| SafetensorsError::BadIndex { path: index_path.to_path_buf(), message };
        let raw: RawIndex = serde_json::from_slice(text).map_err(|e| bad(e.to_string()))?;
        let dir = index_path.parent().unwrap_or(Path::new(""));
        let mut shards: Vec<Shard> = Vec::new();
        let mut by_file: BTreeMap<String, usize> = BTreeMap::new();
        let mut weight_map = BTreeMap::new();
        for (tensor, file_name) in raw.weight_map {
            let rel = Path::new(&file_name);
            if file_name.is_empty() || !rel.components().all(|c| matches!(c, Component::Normal(_))) {
                return Err(bad(format!(
                    "tensor {tensor:?} maps to shard path {file_name:?}, which is not a relative path inside the index's directory"
                )));
            }
            let i = *by_file.entry(file_name.clone()).or_insert_with(|| {
                shards.push(Shard { file_name: file_name.clone(), path: dir.join(rel), file: OnceLock::new() });
                shards.len() - 1
            });
            weight_map.insert(tensor, i);
        }
        Ok(ShardedSafetensors { index_path: index_path.to_path_buf(), metadata: raw.metadata, weight_map, shards })
    }

    /// The index file's path.
    pub fn index_path(&self) -> &Path {
        &self.index_path
    }

    /// The index's `metadata` object (e.g. `total_size`), empty when absent.
    pub fn index_metadata(&self) -> &serde_json::Map<String, serde_json::Value> {
        &self.metadata
    }

    /// Tensor names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.weight_map.keys().map(String::as_str)
    }

    /// Number of tensors in the weight map.
    pub fn len(&self) -> usize {
        self.weight_map.len()
    }

    /// Whether the weight map is empty.
    pub fn is_empty(&self) -> bool {
        self.weight_map.is_empty()
    }

    /// Shard file names as the index spells them, in first-mention order (by tensor name).
    pub fn shard_files(&self) -> impl Iterator<Item = &str> {
        self.shards.iter().map(|s| s.file_name.as_str())
    }

    /// The shard file name holding tensor `name`.
    pub fn shard_of(&self, name: &str) -> Option<&str> {
        self.weight_map.get(name).map(|&i| self.shards[i].file_name.as_str())
    }

    /// How many shards have been opened so far.
    pub fn opened_shards(&self) -> usize {
        self.shards.iter().filter(|s| s.file.get().is_some()).count()
    }

    /// The opened shard `i` (opening it now if needed).
    fn shard(&self, i: usize) -> Result<&SafetensorsFile<'static>> {
        let s = &self.shards[i];
        if let Some(f) = s.file.get() {
            return Ok(f);
        }
        let f = SafetensorsFile::open(&s.path)?;
        // If another thread opened it meanwhile, keep theirs and drop ours.
        Ok(s.file.get_or_init(|| f))
    }

    /// The opened shard holding `name`, after checking that it really holds it.
    ///
    /// Errors: [`SafetensorsError::TensorNotFound`] if the index does not map `name`;
    /// the shard's open/parse errors; [`SafetensorsError::NotInShard`].
    pub fn file_of(&self, name: &str) -> Result<&SafetensorsFile<'static>> {
        let &i = self.weight_map.get(name).ok_or_else(|| SafetensorsError::TensorNotFound(name.to_string()))?;
        let f = self.shard(i)?;
        if f.header().get(name).is_none() {
            return Err(SafetensorsError::NotInShard { tensor: name.to_string(), shard: self.shards[i].path.clone() });
        }
        Ok(f)
    }

    /// Open every shard and check that each holds the tensors the index maps to it.
    ///
    /// Errors: the first failure of [`ShardedSafetensors::file_of`].
    pub fn open_all(&self) -> Result<()> {
        for name in self.weight_map.keys() {
            self.file_of(name)?;
        }
        Ok(())
    }

    /// The info of tensor `name` (opens its shard). Errors: as [`ShardedSafetensors::file_of`].
    pub fn info(&self, name: &str) -> Result<&TensorInfo> {
        self.file_of(name)?.info(name)
    }

    /// See [`SafetensorsFile::tensor_bytes`] (opens the shard).
    pub fn tensor_bytes(&self, name: &str) -> Result<&[u8]> {
        self.file_of(name)?.tensor_bytes(name)
    }

    /// See [`SafetensorsFile::f32_view`] (opens the shard).
    pub fn f32_view(&self, name: &str) -> Result<Cow<'_, [f32]>> {
        self.file_of(name)?.f32_view(name)
    }

    /// See [`SafetensorsFile::to_f32`] (opens the shard).
    pub fn to_f32(&self, name: &str) -> Result<Vec<f32>> {
        self.file_of(name)?.to_f32(name)
    }

    /// See [`SafetensorsFile::tensor`] (opens the shard).
    pub fn tensor(&self, name: &str) -> Result<Tensor> {
        self.file_of(name)?.tensor(name)
    }

    /// See [`SafetensorsFile::tensor_as`] (opens the shard).
    pub fn tensor_as(&self, name: &str, dtype: DType) -> Result<Tensor> {
        self.file_of(name)?.tensor_as(name, dtype)
    }
}
