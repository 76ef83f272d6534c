//! Weight tensors under their GGUF names, packed (quantized, run through `dequant_matmul`) or
//! dense f32, loaded from a GGUF file or Hugging Face safetensors.

use crate::{LlamaConfig, ModelError, Result};
use rlx_gguf::{GgmlType, GgufFile, Layout};
use rlx_ir::{DType, Data, Tensor};
use std::collections::BTreeMap;

/// One weight tensor.
#[derive(Clone, Debug, PartialEq)]
pub enum Weight {
    /// f32, row-major logical shape.
    Dense(Tensor),
    /// GGUF blocks of ggml type `scheme` for a row-major `[n, k]` matrix, as a U8 tensor
    /// `[n, bytes_per_row]` (each row is whole blocks), in the byte layout `layout` (see
    /// [`Weights::to_split_rows`]).
    Packed {
        /// The bytes.
        data: Tensor,
        /// ggml type name (`"Q4_1"`, `"Q8_0"`, `"F16"`, …).
        scheme: String,
        /// Rows.
        n: usize,
        /// Columns (logical elements per row).
        k: usize,
        /// How each row's bytes are arranged: GGUF blocks as in the file, or
        /// `Layout::SplitRows` (Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 in fast mode).
        layout: Layout,
    },
    /// The rows `row_start .. row_start + n` of the `Packed` weight `pool`, a pool of weights
    /// of one scheme, layout and row length ([`Weights::pool_packed`]): the same bytes as a
    /// `Packed` weight of this shape, held in the pool's tensor.
    PackedRows {
        /// Name of the pool (a `Packed` weight in the same [`Weights`]).
        pool: String,
        /// First row of this weight in the pool.
        row_start: usize,
        /// ggml type name, as the pool's.
        scheme: String,
        /// Rows.
        n: usize,
        /// Columns (logical elements per row).
        k: usize,
        /// The rows' byte layout, as the pool's.
        layout: Layout,
    },
}

impl Weight {
    /// Logical row-major shape.
    pub fn shape(&self) -> Vec<usize> {
        match self {
            Weight::Dense(t) => t.shape().to_vec(),
            Weight::Packed { n, k, .. } | Weight::PackedRows { n, k, .. } => vec![*n, *k],
        }
    }
    /// The tensor fed to the graph (f32 values or U8 blocks); `None` for `PackedRows`, whose
    /// bytes are in its pool's tensor.
    pub fn tensor(&self) -> Option<&Tensor> {
        match self {
            Weight::Dense(t) | Weight::Packed { data: t, .. } => Some(t),
            Weight::PackedRows { .. } => None,
        }
    }
    /// Bytes of the weight's values (what one full read of it costs), for `PackedRows` its rows
    /// in the pool.
    pub fn bytes(&self) -> usize {
        match (self.tensor(), self) {
            (Some(t), _) => t.numel() * t.dtype().size_bytes(),
            (None, Weight::PackedRows { scheme, n, k, .. }) => {
                GgmlType::from_name(scheme).map_or(0, |ty| n * (k / ty.block_size() * ty.type_size()))
            }
            (None, _) => 0,
        }
    }
}

/// Bytes from which a group of packed weights is pooled ([`Weights::pool_packed`]): two huge
/// pages.
pub const POOL_MIN_BYTES: usize = 4 << 20;

/// The weights of a decoder, keyed by GGUF tensor name (`token_embd.weight`,
/// `blk.{i}.attn_q.weight`, …, `output_norm.weight`, `output.weight`).
#[derive(Clone, Debug, Default)]
pub struct Weights {
    map: BTreeMap<String, Weight>,
}

/// The GGUF names `cfg` needs, with their logical shapes.
pub fn expected(cfg: &LlamaConfig) -> Vec<(String, Vec<usize>)> {
    let (e, d, f) = (cfg.d_model, cfg.head_dim, cfg.ffn_dim);
    let (qd, kd) = (cfg.n_head * d, cfg.n_kv_head * d);
    let mut v = vec![("token_embd.weight".to_string(), vec![cfg.vocab, e]), ("output_norm.weight".into(), vec![e])];
    if !cfg.tied_head {
        v.push(("output.weight".into(), vec![cfg.vocab, e]));
    }
    for i in 0..cfg.n_layer {
        let mut add = |n: &str, s: Vec<usize>| v.push((format!("blk.{i}.{n}"), s));
        add("attn_norm.weight", vec![e]);
        add("attn_q.weight", vec![qd, e]);
        add("attn_k.weight", vec![kd, e]);
        add("attn_v.weight", vec![kd, e]);
        add("attn_output.weight", vec![e, qd]);
        if cfg.qkv_bias {
            add("attn_q.bias", vec![qd]);
            add("attn_k.bias", vec![kd]);
            add("attn_v.bias", vec![kd]);
        }
        if cfg.qk_norm {
            add("attn_q_norm.weight", vec![d]);
            add("attn_k_norm.weight", vec![d]);
        }
        add("ffn_norm.weight", vec![e]);
        add("ffn_gate.weight", vec![f, e]);
        add("ffn_up.weight", vec![f, e]);
        add("ffn_down.weight", vec![e, f]);
    }
    v
}

/// The Hugging Face (transformers `LlamaForCausalLM` / `Qwen2ForCausalLM`) name of a GGUF
/// tensor name.
pub fn hf_name(gguf: &str) -> String {
    match gguf {
        "token_embd.weight" => return "model.embed_tokens.weight".into(),
        "output_norm.weight" => return "model.norm.weight".into(),
        "output.weight" => return "lm_head.weight".into(),
        _ => {}
    }
    let Some(rest) = gguf.strip_prefix("blk.") else { return gguf.into() };
    let (i, name) = rest.split_once('.').unwrap_or((rest, ""));
    let (stem, kind) = name.rsplit_once('.').unwrap_or((name, ""));
    let hf = match stem {
        "attn_norm" => "input_layernorm",
        "ffn_norm" => "post_attention_layernorm",
        "attn_q" => "self_attn.q_proj",
        "attn_k" => "self_attn.k_proj",
        "attn_v" => "self_attn.v_proj",
        "attn_output" => "self_attn.o_proj",
        "attn_q_norm" => "self_attn.q_norm",
        "attn_k_norm" => "self_attn.k_norm",
        "ffn_gate" => "mlp.gate_proj",
        "ffn_up" => "mlp.up_proj",
        "ffn_down" => "mlp.down_proj",
        other => other,
    };
    format!("model.layers.{i}.{hf}.{kind}")
}

/// Joined projections: the joined weight's stem and its parts' stems, in row order (Q, K, V;
/// gate, up: the order [`crate::graph::step_graph`] slices them in).
pub const FUSED: [(&str, &[&str]); 2] =
    [("attn_qkv", &["attn_q", "attn_k", "attn_v"]), ("ffn_gate_up", &["ffn_gate", "ffn_up"])];

/// The joined weight a part belongs to (`blk.3.attn_k.weight` → `blk.3.attn_qkv.weight`), if
/// it is a part of one.
pub fn fused_name(part: &str) -> Option<String> {
    let rest = part.strip_prefix("blk.")?;
    let (i, name) = rest.split_once('.')?;
    let stem = name.strip_suffix(".weight")?;
    FUSED.iter().find(|(_, ps)| ps.contains(&stem)).map(|(f, _)| format!("blk.{i}.{f}.weight"))
}

/// The weight inputs of [`crate::graph::step_graph`], in declaration order: [`expected`]'s
/// names, with the parts of a joined projection (see [`Weights::fuse_projections`]) replaced
/// by the joined weight at its first part's place, and a pooled weight
/// ([`Weights::pool_packed`]) by its pool at the first member's place. A name `w` lacks stays
/// in the list (the graph builder reports it missing).
pub fn graph_weight_names(cfg: &LlamaConfig, w: &Weights) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (name, _) in expected(cfg) {
        let name = match fused_name(&name) {
            Some(f) if w.get(&name).is_none() && w.get(&f).is_some() => f,
            _ => name,
        };
        let name = match w.get(&name) {
            Some(Weight::PackedRows { pool, .. }) => pool.clone(),
            _ => name,
        };
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// The rows of `names` (all present and of one form) stacked into one weight, taken out of
/// `map`; `None`, with `map` unchanged, when one is missing or they differ in form. The first
/// part's buffer grows to hold the others (a large one is remapped, not copied), so joining
/// needs no second copy of the weights.
fn join_rows(map: &mut BTreeMap<String, Weight>, names: &[String]) -> Result<Option<Weight>> {
    let Some(parts) = names.iter().map(|n| map.get(n)).collect::<Option<Vec<_>>>() else { return Ok(None) };
    let rows: usize = parts.iter().map(|w| w.shape()[0]).sum();
    let (cols, packed) = match parts[0] {
        Weight::Dense(t0) => {
            let Some(&cols) = t0.shape().get(1) else { return Ok(None) };
            let same = |w: &&Weight| matches!(w, Weight::Dense(t) if t.shape().len() == 2 && t.shape()[1] == cols);
            (cols, if parts.iter().all(same) { None } else { return Ok(None) })
        }
        Weight::PackedRows { .. } => return Ok(None),
        Weight::Packed { data: d0, scheme: s0, k: k0, layout: l0, .. } => {
            let bpr = d0.shape().get(1).copied().unwrap_or(0);
            let same = |w: &&Weight| {
                matches!(w, Weight::Packed { data, scheme, k, layout, .. }
                    if scheme == s0 && k == k0 && layout == l0 && data.shape().get(1).copied() == Some(bpr))
            };
            (bpr, if parts.iter().all(same) { Some((s0.clone(), *k0, *l0)) } else { return Ok(None) })
        }
    };
    // A form's element type: dense f32 or packed U8 (anything else is a malformed weight).
    let mixed = |n: &str| bad(n, "a joined weight's parts must be all dense f32 or all packed U8".into());
    let mut data = None;
    for n in names {
        let t = match map.remove(n).expect("checked present") {
            Weight::Dense(t) | Weight::Packed { data: t, .. } => t,
            Weight::PackedRows { .. } => unreachable!("parts of one form, checked above"),
        };
        data = Some(match (data, t.into_data()) {
            (None, d) => d,
            (Some(Data::F32(mut a)), Data::F32(b)) => {
                a.reserve_exact((rows * cols).saturating_sub(a.len()));
                a.extend_from_slice(&b);
                Data::F32(a)
            }
            (Some(Data::U8(mut a)), Data::U8(b)) => {
                a.reserve_exact((rows * cols).saturating_sub(a.len()));
                a.extend_from_slice(&b);
                Data::U8(a)
            }
            _ => return Err(mixed(n)),
        });
    }
    let at = |e: rlx_ir::IrError| bad(&names[0], e.to_string());
    Ok(Some(match (packed, data.expect("at least one part")) {
        (None, Data::F32(v)) => Weight::Dense(Tensor::from_vec(v, &[rows, cols]).map_err(at)?),
        (Some((scheme, k, layout)), Data::U8(v)) => {
            Weight::Packed { data: Tensor::from_vec(v, &[rows, cols]).map_err(at)?, scheme, n: rows, k, layout }
        }
        _ => return Err(mixed(&names[0])),
    }))
}

fn bad(name: &str, msg: String) -> ModelError {
    ModelError::BadTensor { name: name.to_string(), msg }
}

impl Weights {
    /// Load every tensor `cfg` needs from a GGUF file: f32 tensors and all 1-D tensors as
    /// dense f32, other 2-D tensors kept packed (copied once out of the map, whose pages are
    /// then released: [`GgufFile::release_tensor_data`]).
    ///
    /// Errors: a missing tensor, a shape other than the expected one, a tensor type that
    /// cannot be dequantized.
    pub fn from_gguf(file: &GgufFile, cfg: &LlamaConfig) -> Result<Weights> {
        let mut map = BTreeMap::new();
        for (name, shape) in expected(cfg) {
            let info = file.tensor_info(&name).map_err(|_| ModelError::MissingTensor(name.clone()))?;
            let got: Vec<usize> = info.shape().iter().map(|&d| d as usize).collect();
            if got != shape {
                return Err(bad(&name, format!("shape {got:?}, expected {shape:?}")));
            }
            let w = if info.ty == GgmlType::F32 || shape.len() == 1 {
                let v = file.dequantize(&name)?;
                Weight::Dense(Tensor::from_vec(v, &shape).map_err(|e| bad(&name, e.to_string()))?)
            } else {
                let bytes = file.tensor_data(&name)?;
                let (n, k) = (shape[0], shape[1]);
                let data = Tensor::from_vec(bytes.to_vec(), &[n, bytes.len() / n.max(1)])
                    .map_err(|e| bad(&name, e.to_string()))?;
                Weight::Packed { data, scheme: info.ty.name().to_string(), n, k, layout: Layout::Blocks }
            };
            // The copy is ours now: drop the file's pages, so the peak is not file + copy.
            file.release_tensor_data(&name)?;
            map.insert(name, w);
        }
        Ok(Weights { map })
    }

    /// Load every tensor `cfg` needs from Hugging Face safetensors (names as [`hf_name`]),
    /// converted to f32 (the file's pages released after each copy, as in [`Weights::from_gguf`]).
    /// A tied head may also be stored as `lm_head.weight`; it is not read.
    ///
    /// Errors: a missing tensor or one of the wrong shape.
    pub fn from_safetensors(file: &rlx_safetensors::SafetensorsFile, cfg: &LlamaConfig) -> Result<Weights> {
        let mut map = BTreeMap::new();
        for (name, shape) in expected(cfg) {
            let hf = hf_name(&name);
            let info = file.info(&hf).map_err(|_| ModelError::MissingTensor(hf.clone()))?;
            if info.shape != shape {
                return Err(bad(&hf, format!("shape {:?}, expected {shape:?}", info.shape)));
            }
            map.insert(name, Weight::Dense(file.tensor_as(&hf, DType::F32)?));
            file.release_tensor_data(&hf)?;
        }
        Ok(Weights { map })
    }

    /// Build from a map (names and shapes as [`expected`]); for tests and custom loaders.
    pub fn from_map(map: BTreeMap<String, Weight>) -> Weights {
        Weights { map }
    }

    /// Rearrange every packed Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 weight into `rlx_gguf::Layout::SplitRows` in
    /// place (each row's quants, then its scales; the same bytes and values), which the CPU
    /// backend's fast-mode kernels read faster: 1 × 4096 × 4096 Q4_0 decode products ~8%
    /// faster from DRAM, ~20% from cache; SmolLM2's tied Q8_0 head (49152 × 576) ~13% faster
    /// (`rlx-cpu`'s `qmatmul_bench`, modes `fast` and `fast-blocks`). [`crate::LlamaModel`] does this in fast mode. Other weights are left as
    /// they are.
    ///
    /// Errors: a packed tensor whose bytes are not whole rows of its scheme.
    pub fn to_split_rows(&mut self) -> Result<()> {
        let mut converted = vec![];
        for (name, w) in self.map.iter_mut() {
            let Weight::Packed { data, scheme, k, layout, .. } = w else { continue };
            let Some(ty) = GgmlType::from_name(scheme) else { continue };
            if *layout != Layout::Blocks || !Layout::SplitRows.supports(ty) {
                continue;
            }
            let bytes = data.as_mut_slice::<u8>().ok_or_else(|| bad(name, "packed weights are not U8".into()))?;
            rlx_gguf::layout::to_split_rows(ty, bytes, *k).map_err(|e| bad(name, e.to_string()))?;
            *layout = Layout::SplitRows;
            converted.push(name.clone());
        }
        // A converted pool's rows are split rows too (each row converts on its own).
        for w in self.map.values_mut() {
            if let Weight::PackedRows { pool, layout, .. } = w
                && converted.contains(pool)
            {
                *layout = Layout::SplitRows;
            }
        }
        Ok(())
    }

    /// Join each layer's projections that read the same activation into one weight, so a
    /// step runs one product over their rows instead of several: `attn_q`, `attn_k`, `attn_v`
    /// into `blk.{i}.attn_qkv.weight` (`[qd + 2·kd, e]`, llama.cpp's name for a joined QKV) and
    /// `ffn_gate`, `ffn_up` into `blk.{i}.ffn_gate_up.weight` (`[2·f, e]`). The rows are the
    /// parts' rows in that order, unchanged (each output row is the same dot product), so
    /// results are bit-identical; [`crate::graph::step_graph`] slices the joined product back
    /// into its parts. A layer's parts are joined only when they have the same form (all
    /// dense, or all packed with one scheme, layout and row length); others stay apart.
    /// [`crate::LlamaModel`] does this for every model. Returns how many joined weights it made.
    ///
    /// Errors: a part whose tensor is not of its form's element type (dense f32, packed U8),
    /// as [`ModelError::BadTensor`].
    pub fn fuse_projections(&mut self, cfg: &LlamaConfig) -> Result<usize> {
        let mut made = 0;
        for i in 0..cfg.n_layer {
            for (fused, parts) in FUSED {
                let names: Vec<String> = parts.iter().map(|p| format!("blk.{i}.{p}.weight")).collect();
                let Some(w) = join_rows(&mut self.map, &names)? else { continue };
                self.map.insert(format!("blk.{i}.{fused}.weight"), w);
                made += 1;
            }
        }
        Ok(made)
    }

    /// Weight `name`.
    pub fn get(&self, name: &str) -> Option<&Weight> {
        self.map.get(name)
    }

    /// All weights by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Weight)> {
        self.map.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Total bytes of all weights (each pool once).
    pub fn bytes(&self) -> usize {
        self.map.values().filter(|w| w.tensor().is_some()).map(Weight::bytes).sum()
    }

    /// Move the packed weights into pools, one per scheme, byte layout and row length, so that
    /// they lie together in one allocation that the OS backs with 2 MiB pages
    /// (`rlx_cpu::advise_huge_pages`): each weight becomes [`Weight::PackedRows`] of its pool
    /// (named `pool.{scheme}.{layout}.{k}`), rows in name order, bytes unchanged. A model's
    /// weights are mostly a few MiB each; apart, each sat in its own 4 KiB pages, and a decode
    /// step, which reads them all once, missed the TLB on every page of them. Measured on one
    /// AMD Zen 4 core, SmolLM2 exact generation 144–148 → 155–163 tok/s (four interleaved
    /// runs; glibc's `glibc.malloc.hugetlb=1` tunable showed the effect first). A packed weight
    /// whose tensor is not U8 `[n, bytes_per_row]` is left as it is. `token_embd.weight` stays
    /// apart (its rows are gathered, and a tied head reads it whole) but is moved onto huge
    /// pages itself when it is at least `min_bytes`; a group under that stays as it is
    /// ([`crate::LlamaModel`] passes [`POOL_MIN_BYTES`]). The pools are left alone by a second
    /// call. Returns how many pools it made.
    pub fn pool_packed(&mut self, min_bytes: usize) -> usize {
        // Fresh zero pages advised for huge pages before the first write (faulted in as such).
        let huge_zeros = |dims: &[usize]| {
            let t = Tensor::zeros(dims, DType::U8);
            rlx_cpu::advise_huge_pages(&t);
            t
        };
        if let Some(Weight::Packed { data, .. }) = self.map.get_mut("token_embd.weight")
            && data.numel() >= min_bytes.max(1)
            && let Some(src) = data.as_slice::<u8>()
        {
            let mut fresh = huge_zeros(data.shape());
            fresh.as_mut_slice::<u8>().expect("U8 zeros").copy_from_slice(src);
            *data = fresh;
        }
        let mut groups: BTreeMap<(String, &'static str, usize, usize), Vec<String>> = BTreeMap::new();
        for (name, w) in &self.map {
            if let Weight::Packed { data, scheme, n, k, layout } = w
                && name != "token_embd.weight"
                && !name.starts_with("pool.")
                && data.as_slice::<u8>().is_some()
                && let [rows, bpr] = *data.shape()
                && rows == *n
            {
                groups.entry((scheme.clone(), layout.name(), *k, bpr)).or_default().push(name.clone());
            }
        }
        let mut made = 0;
        for ((scheme, _, k, bpr), names) in groups {
            let rows: usize = names.iter().map(|n| self.map[n].shape()[0]).sum();
            if rows * bpr < min_bytes {
                continue;
            }
            let Some(Weight::Packed { layout, .. }) = self.map.get(&names[0]) else { continue };
            let (layout, pool) = (*layout, format!("pool.{scheme}.{}.{k}", layout.name()));
            let mut data = huge_zeros(&[rows, bpr]);
            let bytes = data.as_mut_slice::<u8>().expect("U8 zeros");
            let mut row_start = 0;
            for name in names {
                let Some(Weight::Packed { data: part, n, .. }) = self.map.get(&name) else { continue };
                let n = *n;
                let src = part.as_slice::<u8>().expect("U8 [n, bpr], checked when grouped");
                bytes[row_start * bpr..(row_start + n) * bpr].copy_from_slice(src);
                let rows_of =
                    Weight::PackedRows { pool: pool.clone(), row_start, scheme: scheme.clone(), n, k, layout };
                // Replacing the part frees its own copy.
                self.map.insert(name, rows_of);
                row_start += n;
            }
            self.map.insert(pool, Weight::Packed { data, scheme, n: rows, k, layout });
            made += 1;
        }
        made
    }
}
