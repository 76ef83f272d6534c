//! The host-side model runner: weights and compiled step graphs per bucket.
//!
//! A step feeds the [`KvCache`] tensors to the graph by reference (`CompiledGraph::run_refs`,
//! no copy), the graph returns only the new rows `[B, Hk, S, D]`, and the host writes those
//! rows in place: per-token copies are O(new tokens). Prompts run in chunks of at most
//! [`MAX_CHUNK`] tokens per sequence padded to a bucket length ([`chunk_bucket`]: a power of two
//! up to 16, then a multiple of 8), so graphs are compiled once per `(B, S, C, cache dtype)`
//! bucket, never per token; a prompt's first chunk runs the graph of capacity `C = 0` (no cache
//! inputs, causal attention over the chunk: [`crate::graph`]). Sequences of one batch may have
//! different lengths and get different numbers of new tokens per step (the shorter ones padded
//! and masked).

use crate::graph::{STEP_INPUTS, step_graph};
use crate::kv_cache::MIN_CACHE;
use crate::{KvCache, KvCacheDtype, LlamaConfig, ModelError, Result, Weight, Weights};
use rlx_gguf::GgufFile;
use rlx_ir::Tensor;
use rlx_ir::op::RopeStyle;
use rlx_runtime::{CompileOptions, CompiledGraph, Device, Session};
use std::collections::HashMap;
use std::path::Path;

/// Largest number of tokens one prefill step processes per sequence.
pub const MAX_CHUNK: usize = 256;

/// The padded length `S` of a step graph that runs `n` new tokens per sequence: `n` rounded up
/// to a power of two up to 16, then to a multiple of 8 (at most [`MAX_CHUNK`] for `n` within
/// it). Padded rows are computed and masked, so this bounds the waste to 7 rows for prompts
/// over 16 tokens (powers of two throughout computed 256 rows for a 133-token prompt; multiples
/// of 16, 144) while keeping the number of prefill graphs at most 35 per cache capacity
/// (each compiled on first use). Multiples of 8 rather than 16 since the exact products dot
/// a last part-panel of up to 8 rows at full FMA width: Qwen2.5-0.5B, 133-token prompt, 1
/// thread (Zen 4), interleaved: 117–128 → 130–132 tok/s; SmolLM2 393–398 → 413–416.
pub fn chunk_bucket(n: usize) -> usize {
    let n = n.max(1);
    if n <= 16 { n.next_power_of_two() } else { n.next_multiple_of(8) }
}

/// The cache capacity of the step graph for a block of `s` tokens over a cache of capacity
/// `cap`: 0 for a block of several tokens over an `empty` cache (no cache inputs: causal
/// attention over the block alone, see [`crate::graph`]), else `cap`.
fn graph_cap(s: usize, cap: usize, empty: bool) -> usize {
    if empty && s > 1 { 0 } else { cap }
}

/// A Llama-family decoder ready to run: config, weights, and the compiled step graphs.
pub struct LlamaModel {
    cfg: LlamaConfig,
    weights: Weights,
    session: Session,
    opts: CompileOptions,
    graphs: HashMap<Bucket, StepGraph>,
    /// Logits of a multi-chunk forward, gathered from its chunks (`[B, V]`).
    logits: Tensor,
    weight_names: Vec<String>,
    cache_names: Vec<(String, String)>,
    kv_dtype: KvCacheDtype,
    /// Fast mode (`quantized_activations`, after the environment override): RoPE and attention
    /// take llama.cpp's arithmetic too ([`crate::ggml_numerics`]).
    ggml: bool,
    /// [`LlamaModel::profile`]'s totals per (phase, op, kernel)
    /// and the graphs' cumulative totals when a phase last ended.
    profile_books: ProfileBooks,
}

/// [`LlamaModel::profile`]'s bookkeeping.
#[derive(Default)]
struct ProfileBooks {
    booked: HashMap<ProfileKey, (u64, std::time::Duration)>,
    seen: StepTotals,
    /// Graph runs (steps of the model) since the last [`LlamaModel::end_profile_phase`].
    pending_runs: u64,
    /// Graph runs booked per phase.
    runs: HashMap<Phase, u64>,
}

/// Calls and time per (op, kernel).
type StepTotals = HashMap<(String, Option<String>, &'static str), (u64, std::time::Duration)>;

/// `(phase, op, scheme, kernel)`.
type ProfileKey = (Phase, String, Option<String>, &'static str);

/// The phase of a generation an [`OpTime`]'s steps ran in (whatever graph they belong to: a
/// one-token prompt runs the one-token decode graph).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Processing the prompt, up to the logits of its last token.
    Prompt,
    /// The decode steps after it.
    Generation,
}

impl Phase {
    /// `"prompt"` or `"generation"`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::Prompt => "prompt",
            Phase::Generation => "generation",
        }
    }
}

/// Calls and wall time of one op and kernel over a model's runs ([`LlamaModel::profile`]).
#[derive(Clone, Debug, PartialEq)]
pub struct OpTime {
    /// Prompt processing or generation.
    pub phase: Phase,
    /// Op name (as in `rlx compile --dump`).
    pub op: String,
    /// The weights' GGUF type of a `dequant_matmul` (its `scheme` attribute, e.g. `Q6_K`), so
    /// products of one kernel on different schemes are told apart; `None` for ops without one.
    pub scheme: Option<String>,
    /// Kernel name (as in the dispatch report).
    pub kernel: &'static str,
    /// Step executions summed over runs.
    pub calls: u64,
    /// Wall time summed over those executions (a step's parallel work included).
    pub total: std::time::Duration,
}

/// `(batch, new tokens padded, cache capacity, cache dtype)`.
type Bucket = (usize, usize, usize, KvCacheDtype);

/// A compiled step graph with the host tensors it is fed and fills, kept from step to step so
/// a warm step allocates nothing (`CompiledGraph::run_into` hands the outputs over in place).
struct StepGraph {
    graph: CompiledGraph,
    /// The [`STEP_INPUTS`], shaped for the bucket, refilled in place every step.
    inputs: [Tensor; 6],
    /// `logits`, then `k_new`, `v_new` per layer, from the last run.
    outputs: Vec<Tensor>,
}

impl LlamaModel {
    /// A model from a config and weights, compiled for the CPU with `opts`.
    pub fn new(cfg: LlamaConfig, mut weights: Weights, opts: CompileOptions) -> Result<LlamaModel> {
        for (n, _) in crate::weights::expected(&cfg) {
            weights.get(&n).ok_or(ModelError::MissingTensor(n))?;
        }
        let ggml = opts.clone().with_env_overrides().quantized_activations;
        // The CPU kernels of both modes read Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 rows faster with their quants and
        // scales apart (same values, bit-identical results; see `Weights::to_split_rows`).
        weights.to_split_rows()?;
        // One product for Q, K, V and one for gate and up (bit-identical rows, fewer steps).
        weights.fuse_projections(&cfg)?;
        // Each scheme's weights in one allocation on huge pages (fewer TLB misses per step).
        weights.pool_packed(crate::weights::POOL_MIN_BYTES);
        let weight_names = crate::weights::graph_weight_names(&cfg, &weights);
        let session = Session::try_new(Device::Cpu)?;
        let cache_names = (0..cfg.n_layer).map(|l| (format!("cache.{l}.k"), format!("cache.{l}.v"))).collect();
        let graphs = HashMap::new();
        let kv_dtype = KvCacheDtype::F32;
        let logits = Tensor::zeros(&[0], rlx_ir::DType::F32);
        Ok(LlamaModel {
            cfg,
            weights,
            session,
            opts,
            graphs,
            logits,
            weight_names,
            cache_names,
            kv_dtype,
            ggml,
            profile_books: Default::default(),
        })
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

    /// The weights (Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 rows in `rlx_gguf::Layout::SplitRows`, see
    /// [`Weights::to_split_rows`]; each layer's Q/K/V and gate/up joined, see
    /// [`Weights::fuse_projections`]).
    pub fn weights(&self) -> &Weights {
        &self.weights
    }

    /// The element type of caches made by [`LlamaModel::new_cache`] (default f32).
    pub fn kv_dtype(&self) -> KvCacheDtype {
        self.kv_dtype
    }

    /// Set the element type of caches made by [`LlamaModel::new_cache`] (and so by
    /// [`crate::Generator`]). Any cache works with any model: graphs are compiled per dtype.
    pub fn set_kv_dtype(&mut self, dtype: KvCacheDtype) {
        self.kv_dtype = dtype;
    }

    /// Where the steps of the model's runs spent their time, when it was compiled with
    /// [`CompileOptions::profile`] (else `None`): calls and wall time per op and kernel, summed
    /// over every compiled step graph and booked to the phase they ran in (see
    /// [`LlamaModel::end_profile_phase`]; [`crate::Generator`] ends the prompt phase before the
    /// first decode step and the generation phase after the last). Ops that did not run are
    /// left out; sorted by phase, then time, longest first.
    pub fn profile(&self) -> Option<Vec<OpTime>> {
        if !self.opts.profile {
            return None;
        }
        let mut v: Vec<OpTime> = self
            .profile_books
            .booked
            .iter()
            .filter(|(_, t)| t.0 > 0)
            .map(|((phase, op, scheme, kernel), &(calls, total))| OpTime {
                phase: *phase,
                op: op.clone(),
                scheme: scheme.clone(),
                kernel,
                calls,
                total,
            })
            .collect();
        v.sort_by(|a, b| {
            a.phase.cmp(&b.phase).then(b.total.cmp(&a.total)).then(a.op.cmp(&b.op)).then(a.scheme.cmp(&b.scheme))
        });
        Some(v)
    }

    /// Graph runs (prompt chunks, decode steps) booked to `phase`, over which
    /// [`LlamaModel::profile`]'s calls of that phase are summed; `None` unless compiled with
    /// [`CompileOptions::profile`].
    pub fn profile_runs(&self, phase: Phase) -> Option<u64> {
        self.opts.profile.then(|| self.profile_books.runs.get(&phase).copied().unwrap_or(0))
    }

    /// Book the step time run since the previous call (or since the model was made) to
    /// `phase`. A no-op unless compiled with [`CompileOptions::profile`].
    pub fn end_profile_phase(&mut self, phase: Phase) {
        if !self.opts.profile {
            return;
        }
        let Some(now) = self.profiled() else { return };
        let ProfileBooks { booked, seen, pending_runs, runs } = &mut self.profile_books;
        *runs.entry(phase).or_default() += std::mem::take(pending_runs);
        for (key, (calls, total)) in now {
            let s = seen.entry(key.clone()).or_default();
            let (dc, dt) = (calls - s.0, total.saturating_sub(s.1));
            *s = (calls, total);
            if dc > 0 {
                let b = booked.entry((phase, key.0, key.1, key.2)).or_default();
                b.0 += dc;
                b.1 += dt;
            }
        }
    }

    /// Calls and time per (op, kernel) summed over the compiled graphs since they were built
    /// (`None` when a graph was compiled without timing).
    fn profiled(&self) -> Option<StepTotals> {
        let mut by = StepTotals::new();
        for g in self.graphs.values() {
            for s in g.graph.profile()? {
                let e = by.entry((s.step.op, s.step.scheme, s.step.kernel)).or_default();
                e.0 += s.calls;
                e.1 += s.total;
            }
        }
        Some(by)
    }

    /// A new empty cache for `batch` sequences, of [`LlamaModel::kv_dtype`].
    pub fn new_cache(&self, batch: usize) -> KvCache {
        KvCache::with_dtype(&self.cfg, batch, self.kv_dtype)
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
            let s = chunk_bucket(m);
            keys.push((batch, s, graph_cap(s, cap, len == 0), self.kv_dtype));
            len += m;
            cap = cap.max(len.next_power_of_two());
        }
        while len < total {
            keys.push((batch, 1, cap, self.kv_dtype));
            len += 1;
            cap = cap.max(len.next_power_of_two());
        }
        keys.dedup();
        for key in keys {
            self.compiled(key)?;
        }
        Ok(t0.elapsed().as_secs_f64())
    }

    /// The compiled step graph of `key`, compiling it on first use.
    fn compiled(&mut self, key: Bucket) -> Result<&mut StepGraph> {
        if !self.graphs.contains_key(&key) {
            let (b, s, c, kv) = key;
            let g = step_graph(&self.cfg, &self.weights, (b, s, c, kv), self.ggml)?;
            let graph = self.session.try_compile_with(g, &self.opts)?;
            let d = self.cfg.head_dim;
            let inputs = [
                Tensor::zeros(&[b, s], rlx_ir::DType::I32),
                Tensor::zeros(&[b * s, d], rlx_ir::DType::F32),
                Tensor::zeros(&[b * s, d], rlx_ir::DType::F32),
                Tensor::zeros(&[b, s, c + s], rlx_ir::DType::F32),
                Tensor::zeros(&[b], rlx_ir::DType::I32),
                Tensor::zeros(&[b], rlx_ir::DType::I32),
            ];
            self.graphs.insert(key, StepGraph { graph, inputs, outputs: vec![] });
        }
        Ok(self.graphs.get_mut(&key).expect("inserted above"))
    }

    /// Run `tokens` (`B · n` ids, row-major `[B, n]`, `B = cache.batch()`) through the model
    /// after the tokens already cached, append their K/V to the cache, and return the logits
    /// of each sequence's last new token, f32 `[B, V]`.
    ///
    /// Errors: no tokens or a count not a multiple of `B` ([`ModelError::Batch`]), an id
    /// outside the vocabulary, more tokens than the context ([`ModelError::ContextOverflow`]),
    /// compile or run errors.
    pub fn forward(&mut self, cache: &mut KvCache, tokens: &[u32]) -> Result<Tensor> {
        let b = cache.batch();
        if tokens.is_empty() || !tokens.len().is_multiple_of(b) {
            return Err(ModelError::Batch { batch: b, got: tokens.len() });
        }
        let seqs: Vec<&[u32]> = tokens.chunks(tokens.len() / b).collect();
        self.forward_seqs(cache, &seqs)
    }

    /// Run new tokens per sequence (`seqs[r]` for sequence `r` of the cache; the lists may
    /// have different lengths, and may be empty) after each sequence's cached tokens, append
    /// their K/V, and return the logits of each sequence's last new token, f32 `[B, V]` (the
    /// row of a sequence given no token is unspecified).
    ///
    /// Errors: `seqs.len() != B` or no token at all ([`ModelError::Batch`]), an id outside the
    /// vocabulary, a sequence outgrowing the context ([`ModelError::ContextOverflow`]),
    /// compile or run errors.
    pub fn forward_seqs(&mut self, cache: &mut KvCache, seqs: &[&[u32]]) -> Result<Tensor> {
        self.forward_seqs_ref(cache, seqs).cloned()
    }

    /// [`LlamaModel::forward_seqs`] returning the logits by reference (they live in the
    /// model until its next forward): a decode loop on it allocates and copies nothing per
    /// step once its graphs are warm.
    ///
    /// Errors: as [`LlamaModel::forward_seqs`].
    pub fn forward_seqs_ref(&mut self, cache: &mut KvCache, seqs: &[&[u32]]) -> Result<&Tensor> {
        let b = cache.batch();
        let total: usize = seqs.iter().map(|s| s.len()).sum();
        if seqs.len() != b || total == 0 {
            return Err(ModelError::Batch { batch: b, got: if seqs.len() != b { seqs.len() } else { 0 } });
        }
        if let Some(&id) = seqs.iter().flat_map(|s| s.iter()).find(|&&t| t as usize >= self.cfg.vocab) {
            return Err(ModelError::BadToken { id, vocab: self.cfg.vocab });
        }
        let ctx = self.cfg.context_length;
        if let Some((len, n)) = cache.lens.iter().zip(seqs).map(|(&l, s)| (l, s.len())).find(|&(l, n)| l + n > ctx) {
            return Err(ModelError::ContextOverflow { needed: len + n, context: ctx });
        }
        let steps = seqs.iter().map(|s| s.len().div_ceil(MAX_CHUNK)).max().unwrap_or(1);
        if steps == 1 {
            let key = self.step(cache, seqs)?;
            return Ok(&self.graphs[&key].outputs[0]);
        }
        for k in 0..steps {
            let chunk: Vec<&[u32]> = seqs.iter().map(|s| &s[(k * MAX_CHUNK).min(s.len())..]).collect();
            let chunk: Vec<&[u32]> = chunk.iter().map(|s| &s[..s.len().min(MAX_CHUNK)]).collect();
            let key = self.step(cache, &chunk)?;
            let logits = &self.graphs[&key].outputs[0];
            if k == 0 {
                self.logits.copy_from(logits);
            } else {
                // Keep each sequence's logits from the step that ran its last token.
                let v = self.cfg.vocab;
                let src = logits.as_slice::<f32>().expect("logits are f32");
                let dst = self.logits.as_mut_slice::<f32>().expect("logits are f32");
                for r in (0..b).filter(|&r| !chunk[r].is_empty()) {
                    dst[r * v..][..v].copy_from_slice(&src[r * v..][..v]);
                }
            }
        }
        Ok(&self.logits)
    }

    /// One graph run over `chunk[r]` (at most [`MAX_CHUNK`]) new tokens of each sequence;
    /// returns the bucket whose `outputs[0]` holds the logits.
    fn step(&mut self, cache: &mut KvCache, chunk: &[&[u32]]) -> Result<Bucket> {
        let (b, d) = (cache.batch(), self.cfg.head_dim);
        let s = chunk_bucket(chunk.iter().map(|c| c.len()).max().unwrap_or(1));
        let c = graph_cap(s, cache.cap, cache.lens.iter().all(|&l| l == 0));
        let key = (b, s, c, cache.dtype());
        self.compiled(key)?;
        let StepGraph { graph, inputs, outputs } = self.graphs.get_mut(&key).expect("compiled above");
        let [ids, cos, sin, mask, last, lens] = &mut *inputs;
        let (cos, sin, mask) = (f32s(cos), f32s(sin), f32s(mask));
        let (ids, last, lens) = (i32s(ids), i32s(last), i32s(lens));
        ids.fill(0);
        // The mask is read only by fast mode's decode attention (exact mode's attention takes
        // `cache_len`).
        if self.ggml {
            mask.fill(f32::NEG_INFINITY);
        }
        for (r, toks) in chunk.iter().enumerate() {
            let past = cache.lens[r];
            lens[r] = past as i32;
            for (i, &t) in toks.iter().enumerate() {
                ids[r * s + i] = t as i32;
            }
            let (cr, sr) = (&mut cos[r * s * d..][..s * d], &mut sin[r * s * d..][..s * d]);
            if self.ggml {
                let freq_scale = match self.cfg.rope_scaling {
                    crate::RopeScaling::None => 1.0,
                    crate::RopeScaling::Linear { factor } => 1.0 / factor as f32,
                };
                let base = self.cfg.rope_base as f32;
                crate::ggml_numerics::rope_tables_ggml(base, freq_scale, self.cfg.rope_style, d, past, cr, sr);
            } else {
                rope_rows(&self.cfg, past, cr, sr);
            }
            for i in (0..s).filter(|_| self.ggml) {
                let row = &mut mask[(r * s + i) * (c + s)..][..c + s];
                row[..past].fill(0.0);
                row[c..=c + i].fill(0.0);
            }
            last[r] = (r * s + toks.len().max(1) - 1) as i32;
        }
        let mut feeds: Vec<(&str, &Tensor)> = Vec::with_capacity(5 + 2 * self.cfg.n_layer + self.weight_names.len());
        feeds.extend(STEP_INPUTS.iter().copied().zip(inputs.iter()));
        for (l, (kn, vn)) in self.cache_names.iter().enumerate().filter(|_| c > 0) {
            feeds.push((kn, &cache.k[l]));
            feeds.push((vn, &cache.v[l]));
        }
        for n in &self.weight_names {
            if let Some(t) = self.weights.get(n).and_then(Weight::tensor) {
                feeds.push((n, t));
            }
        }
        graph.run_into(&feeds, outputs)?;
        drop(feeds);
        self.profile_books.pending_runs += 1;
        let need = cache.lens.iter().zip(chunk).map(|(l, n)| l + n.len()).max().unwrap_or(0);
        if need > cache.cap {
            cache.grow(need.next_power_of_two());
        }
        let counts: Vec<usize> = chunk.iter().map(|c| c.len()).collect();
        for l in 0..self.cfg.n_layer {
            cache.write(l, &outputs[1 + 2 * l], &outputs[2 + 2 * l], &counts);
        }
        for (len, n) in cache.lens.iter_mut().zip(chunk) {
            *len += n.len();
        }
        Ok(key)
    }
}

fn f32s(t: &mut Tensor) -> &mut [f32] {
    t.as_mut_slice::<f32>().expect("an f32 step input")
}

fn i32s(t: &mut Tensor) -> &mut [i32] {
    t.as_mut_slice::<i32>().expect("an i32 step input")
}

/// `cos`, `sin` `[s, D]` for positions `past .. past + s` in the model's RoPE pairing.
pub fn rope_tables(cfg: &LlamaConfig, past: usize, s: usize) -> (Vec<f32>, Vec<f32>) {
    let (mut cos, mut sin) = (vec![0.0; s * cfg.head_dim], vec![0.0; s * cfg.head_dim]);
    rope_rows(cfg, past, &mut cos, &mut sin);
    (cos, sin)
}

/// [`rope_tables`] into `cos` and `sin` (`s · D` long each) for positions from `past`.
fn rope_rows(cfg: &LlamaConfig, past: usize, cos: &mut [f32], sin: &mut [f32]) {
    let d = cfg.head_dim;
    let pos_scale = match cfg.rope_scaling {
        crate::RopeScaling::None => 1.0,
        crate::RopeScaling::Linear { factor } => 1.0 / factor,
    };
    for (k, (cr, sr)) in cos.chunks_exact_mut(d).zip(sin.chunks_exact_mut(d)).enumerate() {
        let p = past + k;
        for j in 0..d {
            let i = match cfg.rope_style {
                RopeStyle::AdjacentPairs => j / 2,
                RopeStyle::RotateHalf => j % (d / 2),
            };
            let theta = cfg.rope_base.powf(-((2 * i) as f64) / d as f64);
            let a = p as f64 * pos_scale * theta;
            cr[j] = a.cos() as f32;
            sr[j] = a.sin() as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunk_buckets_are_powers_of_two_then_multiples_of_8() {
        let got: Vec<usize> = [0, 1, 3, 5, 16, 17, 34, 48, 133, 255, 256].map(chunk_bucket).to_vec();
        assert_eq!(got, [1, 1, 4, 8, 16, 24, 40, 48, 136, 256, 256]);
        assert!((1..=MAX_CHUNK).all(|n| chunk_bucket(n) >= n && chunk_bucket(n) <= MAX_CHUNK));
    }
}
