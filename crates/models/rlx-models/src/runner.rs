//! The host-side model runner: weights, compiled step graphs per bucket, and the KV cache.
//!
//! KV cache design: per layer, K and V are f32 `[B, Hk, C, D]` host tensors owned by
//! [`KvCache`], with capacity `C` a power of two (at least [`MIN_CACHE`]). A step feeds them
//! to the graph by reference (`CompiledGraph::run_refs`, no copy), the graph returns only the
//! new rows `[B, Hk, S, D]`, and the host writes those rows in place: per-token copies are
//! O(new tokens). When the cache is full it is reallocated at twice the capacity (amortized
//! O(1) per token) and the next step uses the graph compiled for the new `C`. Prompts run in
//! chunks of at most [`MAX_CHUNK`] tokens padded to a power of two, so graphs are compiled
//! once per `(B, S, C)` bucket, never per token.

use crate::graph::{STEP_INPUTS, step_graph};
use crate::{LlamaConfig, ModelError, Result, Weights};
use rlx_gguf::GgufFile;
use rlx_ir::op::RopeStyle;
use rlx_ir::{DType, Tensor};
use rlx_runtime::{CompileOptions, CompiledGraph, Device, Session};
use std::collections::HashMap;
use std::path::Path;

/// Smallest cache capacity (tokens).
pub const MIN_CACHE: usize = 16;
/// Largest number of tokens one prefill step processes.
pub const MAX_CHUNK: usize = 256;

/// The per-layer K/V cache of one batch of sequences.
#[derive(Clone, Debug)]
pub struct KvCache {
    k: Vec<Tensor>,
    v: Vec<Tensor>,
    batch: usize,
    len: usize,
    cap: usize,
    dims: (usize, usize),
}

impl KvCache {
    /// An empty cache for `batch` sequences of `cfg`'s model.
    pub fn new(cfg: &LlamaConfig, batch: usize) -> KvCache {
        let mut c =
            KvCache { k: vec![], v: vec![], batch: batch.max(1), len: 0, cap: 0, dims: (cfg.n_kv_head, cfg.head_dim) };
        c.k = vec![Tensor::zeros(&[0], DType::F32); cfg.n_layer];
        c.v = c.k.clone();
        c.grow(MIN_CACHE);
        c
    }

    /// Tokens held per sequence.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no token is held.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Sequences in the batch.
    pub fn batch(&self) -> usize {
        self.batch
    }

    /// Current capacity (tokens per sequence).
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Forget every token (keeps the allocation).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Bytes held by the cache tensors.
    pub fn bytes(&self) -> usize {
        2 * self.k.len() * self.batch * self.dims.0 * self.cap * self.dims.1 * 4
    }

    /// Reallocate to hold `cap` tokens, keeping the first `len` rows.
    fn grow(&mut self, cap: usize) {
        let (hk, d) = self.dims;
        let (b, old) = (self.batch, self.cap);
        for t in self.k.iter_mut().chain(self.v.iter_mut()) {
            let mut n = vec![0f32; b * hk * cap * d];
            if let Some(src) = t.as_slice::<f32>().filter(|s| !s.is_empty()) {
                for bh in 0..b * hk {
                    n[bh * cap * d..][..self.len * d].copy_from_slice(&src[bh * old * d..][..self.len * d]);
                }
            }
            *t = Tensor::from_vec(n, &[b, hk, cap, d]).expect("sized above");
        }
        self.cap = cap;
    }

    /// Append rows `0..n` of `new` (`[B, Hk, S, D]`, layer `l`) at position `len`.
    fn write(&mut self, l: usize, k_new: &Tensor, v_new: &Tensor, n: usize) {
        let (hk, d) = self.dims;
        let (cap, len) = (self.cap, self.len);
        let s = k_new.shape()[2];
        for (dst, src) in [(&mut self.k[l], k_new), (&mut self.v[l], v_new)] {
            let src = src.as_slice::<f32>().expect("graph outputs are f32");
            let dst = dst.as_mut_slice::<f32>().expect("cache is f32");
            for bh in 0..self.batch * hk {
                dst[(bh * cap + len) * d..][..n * d].copy_from_slice(&src[bh * s * d..][..n * d]);
            }
        }
    }
}

/// A Llama-family decoder ready to run: config, weights, and the compiled step graphs.
pub struct LlamaModel {
    cfg: LlamaConfig,
    weights: Weights,
    session: Session,
    opts: CompileOptions,
    graphs: HashMap<(usize, usize, usize), CompiledGraph>,
    weight_names: Vec<String>,
}

impl LlamaModel {
    /// A model from a config and weights, compiled for the CPU with `opts`.
    pub fn new(cfg: LlamaConfig, weights: Weights, opts: CompileOptions) -> Result<LlamaModel> {
        let weight_names = crate::weights::expected(&cfg).into_iter().map(|(n, _)| n).collect::<Vec<_>>();
        for n in &weight_names {
            weights.get(n).ok_or_else(|| ModelError::MissingTensor(n.clone()))?;
        }
        let session = Session::try_new(Device::Cpu)?;
        Ok(LlamaModel { cfg, weights, session, opts, graphs: HashMap::new(), weight_names })
    }

    /// Load a GGUF file (see [`LlamaConfig::from_gguf`], [`Weights::from_gguf`]).
    pub fn from_gguf_path(path: impl AsRef<Path>, opts: CompileOptions) -> Result<LlamaModel> {
        let file = GgufFile::open(path)?;
        Self::from_gguf(&file, opts)
    }

    /// Build from an open GGUF file.
    pub fn from_gguf(file: &GgufFile, opts: CompileOptions) -> Result<LlamaModel> {
        let cfg = LlamaConfig::from_gguf(file)?;
        let w = Weights::from_gguf(file, &cfg)?;
        LlamaModel::new(cfg, w, opts)
    }

    /// Load a Hugging Face checkpoint directory holding `config.json` and
    /// `model.safetensors`.
    pub fn from_hf_dir(dir: impl AsRef<Path>, opts: CompileOptions) -> Result<LlamaModel> {
        let dir = dir.as_ref();
        let p = dir.join("config.json");
        let json =
            std::fs::read_to_string(&p).map_err(|e| ModelError::Io { path: p.display().to_string(), source: e })?;
        let cfg = LlamaConfig::from_hf_config(&json)?;
        let file = rlx_safetensors::SafetensorsFile::open(dir.join("model.safetensors"))?;
        let w = Weights::from_safetensors(&file, &cfg)?;
        LlamaModel::new(cfg, w, opts)
    }

    /// The hyperparameters.
    pub fn config(&self) -> &LlamaConfig {
        &self.cfg
    }

    /// The weights.
    pub fn weights(&self) -> &Weights {
        &self.weights
    }

    /// A new empty cache for `batch` sequences.
    pub fn new_cache(&self, batch: usize) -> KvCache {
        KvCache::new(&self.cfg, batch)
    }

    /// Compile, ahead of time, every step graph that a generation of batch `batch` will use
    /// with a prompt of `prompt_len` tokens followed by decode steps up to `total` tokens
    /// (prefill chunk buckets, then one decode graph per cache capacity), so timings of the
    /// run itself exclude compilation. Returns the seconds spent compiling.
    ///
    /// Errors: `total` beyond the context, compile errors.
    pub fn prepare(&mut self, batch: usize, prompt_len: usize, total: usize) -> Result<f64> {
        if total > self.cfg.context_length {
            return Err(ModelError::ContextOverflow { needed: total, context: self.cfg.context_length });
        }
        let t0 = std::time::Instant::now();
        let mut cap = MIN_CACHE;
        let mut len = 0;
        let mut keys = vec![];
        while len < prompt_len {
            let m = (prompt_len - len).min(MAX_CHUNK);
            keys.push((batch, m.next_power_of_two(), cap));
            len += m;
            cap = cap.max(len.next_power_of_two());
        }
        while len < total {
            keys.push((batch, 1, cap));
            len += 1;
            cap = cap.max(len.next_power_of_two());
        }
        keys.dedup();
        for key in keys {
            self.compiled(key)?;
        }
        Ok(t0.elapsed().as_secs_f64())
    }

    /// The compiled step graph of bucket `(b, s, c)`, compiling it on first use.
    fn compiled(&mut self, key: (usize, usize, usize)) -> Result<&mut CompiledGraph> {
        if !self.graphs.contains_key(&key) {
            let g = step_graph(&self.cfg, &self.weights, key.0, key.1, key.2)?;
            let cg = self.session.try_compile_with(g, &self.opts)?;
            self.graphs.insert(key, cg);
        }
        Ok(self.graphs.get_mut(&key).expect("inserted above"))
    }

    /// Run `tokens` (`B · n` ids, row-major `[B, n]`, `B = cache.batch()`) through the model
    /// after the `cache.len()` tokens already cached, append their K/V to the cache, and
    /// return the logits of each sequence's last new token, f32 `[B, V]`.
    ///
    /// Errors: no tokens or a count not a multiple of `B` ([`ModelError::Batch`]), an id
    /// outside the vocabulary, more tokens than the context ([`ModelError::ContextOverflow`]),
    /// compile or run errors.
    pub fn forward(&mut self, cache: &mut KvCache, tokens: &[u32]) -> Result<Tensor> {
        let b = cache.batch;
        if tokens.is_empty() || !tokens.len().is_multiple_of(b) {
            return Err(ModelError::Batch { batch: b, got: tokens.len() });
        }
        if let Some(&id) = tokens.iter().find(|&&t| t as usize >= self.cfg.vocab) {
            return Err(ModelError::BadToken { id, vocab: self.cfg.vocab });
        }
        let n = tokens.len() / b;
        if cache.len + n > self.cfg.context_length {
            return Err(ModelError::ContextOverflow { needed: cache.len + n, context: self.cfg.context_length });
        }
        let mut out = None;
        let mut start = 0;
        while start < n {
            let m = (n - start).min(MAX_CHUNK);
            let chunk: Vec<u32> = (0..b).flat_map(|r| tokens[r * n + start..][..m].iter().copied()).collect();
            out = Some(self.step(cache, &chunk, m)?);
            start += m;
        }
        Ok(out.expect("n >= 1"))
    }

    /// One graph run over `m` new tokens per sequence (`m <= MAX_CHUNK`).
    fn step(&mut self, cache: &mut KvCache, tokens: &[u32], m: usize) -> Result<Tensor> {
        let (b, d) = (cache.batch, self.cfg.head_dim);
        let s = m.next_power_of_two();
        let c = cache.cap;
        let past = cache.len;
        let mut ids = vec![0i32; b * s];
        for r in 0..b {
            for i in 0..m {
                ids[r * s + i] = tokens[r * m + i] as i32;
            }
        }
        let (cos, sin) = rope_tables(&self.cfg, past, s);
        let mut mask = vec![f32::NEG_INFINITY; s * (c + s)];
        for i in 0..s {
            let row = &mut mask[i * (c + s)..][..c + s];
            row[..past].fill(0.0);
            row[c..=c + i].fill(0.0);
        }
        let f = |v: Vec<f32>, sh: &[usize]| Tensor::from_vec(v, sh).expect("sized above");
        let inputs = [
            Tensor::from_vec(ids, &[b, s]).expect("sized above"),
            f(cos, &[s, d]),
            f(sin, &[s, d]),
            f(mask, &[s, c + s]),
            Tensor::scalar((m - 1) as i32),
        ];
        let key = (b, s, c);
        self.compiled(key)?;
        let cache_names: Vec<(String, String)> =
            (0..self.cfg.n_layer).map(|l| (format!("cache.{l}.k"), format!("cache.{l}.v"))).collect();
        let mut feeds: Vec<(&str, &Tensor)> = Vec::with_capacity(5 + 2 * self.cfg.n_layer + self.weight_names.len());
        feeds.extend(STEP_INPUTS.iter().copied().zip(inputs.iter()));
        for (l, (kn, vn)) in cache_names.iter().enumerate() {
            feeds.push((kn, &cache.k[l]));
            feeds.push((vn, &cache.v[l]));
        }
        for n in &self.weight_names {
            feeds.push((n, self.weights.get(n).expect("checked in new").tensor()));
        }
        let outs = self.graphs.get_mut(&key).expect("compiled above").run_refs(&feeds)?;
        if past + m > cache.cap {
            cache.grow((past + m).next_power_of_two());
        }
        for l in 0..self.cfg.n_layer {
            cache.write(l, &outs[1 + 2 * l], &outs[2 + 2 * l], m);
        }
        cache.len += m;
        Ok(outs.into_iter().next().expect("logits output"))
    }
}

/// `cos`, `sin` `[s, D]` for positions `past .. past + s` in the model's RoPE pairing.
pub fn rope_tables(cfg: &LlamaConfig, past: usize, s: usize) -> (Vec<f32>, Vec<f32>) {
    let d = cfg.head_dim;
    let pos_scale = match cfg.rope_scaling {
        crate::RopeScaling::None => 1.0,
        crate::RopeScaling::Linear { factor } => 1.0 / factor,
    };
    let (mut cos, mut sin) = (Vec::with_capacity(s * d), Vec::with_capacity(s * d));
    for p in past..past + s {
        for j in 0..d {
            let i = match cfg.rope_style {
                RopeStyle::AdjacentPairs => j / 2,
                RopeStyle::RotateHalf => j % (d / 2),
            };
            let theta = cfg.rope_base.powf(-((2 * i) as f64) / d as f64);
            let a = p as f64 * pos_scale * theta;
            cos.push(a.cos() as f32);
            sin.push(a.sin() as f32);
        }
    }
    (cos, sin)
}
