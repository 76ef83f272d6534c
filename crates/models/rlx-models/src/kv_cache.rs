//! The KV cache: per layer, K and V `[B, Hk, C, D]` host tensors in f32 or f16, with one
//! length per sequence.
//!
//! Capacity `C` is a power of two (at least [`MIN_CACHE`]) shared by the batch; when a step
//! would overflow it the cache is reallocated at twice the capacity (one copy, amortized O(1)
//! per token) and the next step uses the graph compiled for the new `C`. Sequence `r` holds
//! `lens()[r]` tokens in columns `0..lens()[r]`; columns beyond are masked out by the step
//! graph, so sequences of different lengths share one cache. f16 halves the bytes; the step
//! graph converts the cache to f32 inside attention (fast mode's decode attention reads it as
//! f16, llama.cpp's flash attention: `crate::ggml_numerics`), and new rows are rounded to f16
//! (round to nearest even) when written.

use crate::{LlamaConfig, ModelError};
use rlx_ir::half::{f16, slice::HalfFloatSliceExt};
use rlx_ir::{DType, Tensor};

/// Smallest cache capacity (tokens).
pub const MIN_CACHE: usize = 16;

/// Element type of the KV cache (llama.cpp's `--cache-type-k/-v` f32 / f16).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum KvCacheDtype {
    /// f32: bit-exact with a cache-free recompute (the default).
    #[default]
    F32,
    /// f16: half the memory; K/V rounded to f16 (relative error ≤ 2⁻¹¹ per element).
    F16,
}

impl KvCacheDtype {
    /// The IR dtype of the cache tensors.
    pub fn dtype(self) -> DType {
        match self {
            KvCacheDtype::F32 => DType::F32,
            KvCacheDtype::F16 => DType::F16,
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        self.dtype().size_bytes()
    }
}

impl std::str::FromStr for KvCacheDtype {
    type Err = ModelError;
    /// `"f32"` or `"f16"`. Errors: anything else ([`ModelError::BadOption`]).
    fn from_str(s: &str) -> Result<KvCacheDtype, ModelError> {
        match s {
            "f32" => Ok(KvCacheDtype::F32),
            "f16" => Ok(KvCacheDtype::F16),
            other => Err(ModelError::BadOption(format!("KV cache type {other:?} (expected f32 or f16)"))),
        }
    }
}

/// The per-layer K/V cache of one batch of sequences.
#[derive(Clone, Debug)]
pub struct KvCache {
    pub(crate) k: Vec<Tensor>,
    pub(crate) v: Vec<Tensor>,
    pub(crate) lens: Vec<usize>,
    pub(crate) cap: usize,
    dims: (usize, usize),
    dtype: KvCacheDtype,
}

impl KvCache {
    /// An empty f32 cache for `batch` sequences of `cfg`'s model.
    pub fn new(cfg: &LlamaConfig, batch: usize) -> KvCache {
        KvCache::with_dtype(cfg, batch, KvCacheDtype::F32)
    }

    /// An empty cache of element type `dtype` for `batch` (at least 1) sequences.
    pub fn with_dtype(cfg: &LlamaConfig, batch: usize, dtype: KvCacheDtype) -> KvCache {
        let empty = Tensor::zeros(&[0], dtype.dtype());
        let mut c = KvCache {
            k: vec![empty.clone(); cfg.n_layer],
            v: vec![empty; cfg.n_layer],
            lens: vec![0; batch.max(1)],
            cap: 0,
            dims: (cfg.n_kv_head, cfg.head_dim),
            dtype,
        };
        c.grow(MIN_CACHE);
        c
    }

    /// Tokens held by the longest sequence (all of them for equal-length batches).
    pub fn len(&self) -> usize {
        self.lens.iter().copied().max().unwrap_or(0)
    }

    /// Tokens held per sequence.
    pub fn lens(&self) -> &[usize] {
        &self.lens
    }

    /// Whether no token is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sequences in the batch.
    pub fn batch(&self) -> usize {
        self.lens.len()
    }

    /// Current capacity (tokens per sequence).
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Element type.
    pub fn dtype(&self) -> KvCacheDtype {
        self.dtype
    }

    /// Forget every token (keeps the allocation).
    pub fn clear(&mut self) {
        self.lens.fill(0);
    }

    /// Bytes held by the cache tensors: `2 · layers · B · Hk · C · D · size(dtype)`.
    pub fn bytes(&self) -> usize {
        2 * self.k.len() * self.batch() * self.dims.0 * self.cap * self.dims.1 * self.dtype.size()
    }

    /// Reallocate to hold `cap` tokens, keeping each sequence's rows.
    pub(crate) fn grow(&mut self, cap: usize) {
        match self.dtype {
            KvCacheDtype::F32 => self.grow_as::<f32>(cap),
            KvCacheDtype::F16 => self.grow_as::<f16>(cap),
        }
        self.cap = cap;
    }

    fn grow_as<T: rlx_ir::Elem + Copy + Default>(&mut self, cap: usize) {
        let (hk, d) = self.dims;
        let (b, old) = (self.batch(), self.cap);
        for t in self.k.iter_mut().chain(self.v.iter_mut()) {
            let mut n = vec![T::default(); b * hk * cap * d];
            if let Some(src) = t.as_slice::<T>().filter(|s| !s.is_empty()) {
                for r in 0..b {
                    let len = self.lens[r];
                    for h in 0..hk {
                        let bh = r * hk + h;
                        n[bh * cap * d..][..len * d].copy_from_slice(&src[bh * old * d..][..len * d]);
                    }
                }
            }
            *t = Tensor::from_vec(n, &[b, hk, cap, d]).expect("sized above");
        }
    }

    /// Append, for each sequence `r`, rows `0..counts[r]` of `new` (f32 `[B, Hk, S, D]`,
    /// layer `l`) at its position `lens[r]` (the caller advances `lens` after all layers).
    pub(crate) fn write(&mut self, l: usize, k_new: &Tensor, v_new: &Tensor, counts: &[usize]) {
        let (hk, d) = self.dims;
        let cap = self.cap;
        let s = k_new.shape()[2];
        let f16 = self.dtype == KvCacheDtype::F16;
        for (dst, src) in [(&mut self.k[l], k_new), (&mut self.v[l], v_new)] {
            let src = src.as_slice::<f32>().expect("graph outputs are f32");
            for (r, (&n, &len)) in counts.iter().zip(&self.lens).enumerate() {
                for h in 0..hk {
                    let bh = r * hk + h;
                    let from = &src[bh * s * d..][..n * d];
                    let at = (bh * cap + len) * d;
                    if f16 {
                        let dst = dst.as_mut_slice::<f16>().expect("cache is f16");
                        dst[at..][..n * d].convert_from_f32_slice(from);
                    } else {
                        let dst = dst.as_mut_slice::<f32>().expect("cache is f32");
                        dst[at..][..n * d].copy_from_slice(from);
                    }
                }
            }
        }
    }
}
