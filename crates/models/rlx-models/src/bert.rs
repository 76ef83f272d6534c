//! BERT encoders (Hugging Face `BertModel`: all-MiniLM, paraphrase-MiniLM, bert-base, …) from
//! a `config.json` + `model.safetensors` directory, and sentence embeddings (mean pooling over
//! the attention mask, then L2 normalization, as sentence-transformers' `Pooling` +
//! `Normalize` modules).
//!
//! The graph ([`encoder_graph`]) is built per `(batch, seq)` bucket with static shapes from
//! the composites `embedding`, `layer_norm`, `linear`, `scaled_dot_product_attention` (a bool
//! key mask from `attention_mask`) and `gelu` (erf form); weights are graph inputs under their
//! Hugging Face names (`encoder.layer.{i}.attention.self.query.weight`, …), fed by reference.

use crate::{ModelError, Result};
use rlx_ir::op::MaskKind;
use rlx_ir::ops::CompareOp;
use rlx_ir::{DType, Graph, Shape, Tensor};
use rlx_runtime::{CompileOptions, CompiledGraph, Device, Session};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;

/// Names of the token inputs of [`encoder_graph`], in order; each is i64 `[B, S]`.
pub const BERT_INPUTS: [&str; 3] = ["input_ids", "attention_mask", "token_type_ids"];

/// Hyperparameters of a BERT encoder (Hugging Face `BertConfig` names in the docs).
#[derive(Clone, Debug, PartialEq)]
pub struct BertConfig {
    /// `vocab_size`.
    pub vocab: usize,
    /// `hidden_size` `H`.
    pub hidden: usize,
    /// `num_hidden_layers`.
    pub layers: usize,
    /// `num_attention_heads` (divides `H`).
    pub heads: usize,
    /// `intermediate_size` (MLP width).
    pub intermediate: usize,
    /// `max_position_embeddings`: the longest sequence.
    pub max_positions: usize,
    /// `type_vocab_size` (token type rows).
    pub type_vocab: usize,
    /// `layer_norm_eps`.
    pub layer_norm_eps: f64,
    /// `hidden_act` is `gelu_new` / `gelu_pytorch_tanh` (tanh GELU) rather than `gelu` (erf).
    pub gelu_tanh: bool,
}

impl BertConfig {
    /// Parse a Hugging Face `config.json` of `model_type` `bert`.
    ///
    /// Errors: invalid JSON, another `model_type`, a missing integer key, heads that do not
    /// divide `hidden_size`, an activation other than the GELUs, a position embedding type
    /// other than `absolute`.
    pub fn from_hf_config(json: &str) -> Result<BertConfig> {
        let v: serde_json::Value = serde_json::from_str(json)?;
        let arch = v["model_type"].as_str().unwrap_or("").to_string();
        let unsupported = |missing: String| ModelError::UnsupportedArchitecture { arch: arch.clone(), missing };
        if arch != "bert" {
            return Err(unsupported("the BERT encoder builder needs model_type \"bert\"".into()));
        }
        let int = |k: &str| {
            v[k].as_u64()
                .map(|x| x as usize)
                .ok_or_else(|| ModelError::MissingMetadata { key: k.into(), hint: " in config.json".into() })
        };
        let gelu_tanh = match v["hidden_act"].as_str().unwrap_or("gelu") {
            "gelu" => false,
            "gelu_new" | "gelu_pytorch_tanh" => true,
            a => return Err(unsupported(format!("hidden_act {a:?} (gelu, gelu_new are built)"))),
        };
        if let Some(p) = v["position_embedding_type"].as_str().filter(|p| *p != "absolute") {
            return Err(unsupported(format!("position_embedding_type {p:?} (absolute is built)")));
        }
        let cfg = BertConfig {
            vocab: int("vocab_size")?,
            hidden: int("hidden_size")?,
            layers: int("num_hidden_layers")?,
            heads: int("num_attention_heads")?,
            intermediate: int("intermediate_size")?,
            max_positions: int("max_position_embeddings")?,
            type_vocab: int("type_vocab_size").unwrap_or(2),
            layer_norm_eps: v["layer_norm_eps"].as_f64().unwrap_or(1e-12),
            gelu_tanh,
        };
        if cfg.heads == 0 || !cfg.hidden.is_multiple_of(cfg.heads) {
            return Err(unsupported(format!("{} heads do not divide hidden_size {}", cfg.heads, cfg.hidden)));
        }
        Ok(cfg)
    }

    /// The weight names the encoder reads, with their shapes.
    pub fn weight_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let (h, f) = (self.hidden, self.intermediate);
        let mut v = vec![
            ("embeddings.word_embeddings.weight".to_string(), vec![self.vocab, h]),
            ("embeddings.position_embeddings.weight".into(), vec![self.max_positions, h]),
            ("embeddings.token_type_embeddings.weight".into(), vec![self.type_vocab, h]),
            ("embeddings.LayerNorm.weight".into(), vec![h]),
            ("embeddings.LayerNorm.bias".into(), vec![h]),
        ];
        for l in 0..self.layers {
            let p = format!("encoder.layer.{l}.");
            for (name, shape) in [
                ("attention.self.query", vec![h, h]),
                ("attention.self.key", vec![h, h]),
                ("attention.self.value", vec![h, h]),
                ("attention.output.dense", vec![h, h]),
                ("intermediate.dense", vec![f, h]),
                ("output.dense", vec![h, f]),
            ] {
                v.push((format!("{p}{name}.bias"), vec![shape[0]]));
                v.push((format!("{p}{name}.weight"), shape));
            }
            for ln in ["attention.output.LayerNorm", "output.LayerNorm"] {
                v.push((format!("{p}{ln}.weight"), vec![h]));
                v.push((format!("{p}{ln}.bias"), vec![h]));
            }
        }
        v
    }
}

/// The encoder for batch `b` and sequence length `s`: inputs [`BERT_INPUTS`] (i64 `[b, s]`;
/// `attention_mask` 1 = attend, 0 = padding) then the weights of
/// [`BertConfig::weight_shapes`] (f32, as graph inputs); one output, `last_hidden_state` f32
/// `[b, s, H]`. Token ids are clamped into the vocabulary (the `embedding` composite).
///
/// Errors: `s` beyond `max_positions` ([`ModelError::ContextOverflow`]); graph-building
/// errors.
pub fn encoder_graph(cfg: &BertConfig, b: usize, s: usize) -> Result<Graph> {
    if s > cfg.max_positions {
        return Err(ModelError::ContextOverflow { needed: s, context: cfg.max_positions });
    }
    let (h, nh) = (cfg.hidden, cfg.heads);
    let hd = h / nh;
    let mut g = Graph::new(format!("bert_b{b}_s{s}"));
    let [ids, mask, types] = BERT_INPUTS.map(|n| g.input(n, Shape::new(&[b, s], DType::I64)));
    let w: HashMap<String, _> = cfg
        .weight_shapes()
        .into_iter()
        .map(|(n, shape)| {
            let id = g.input(&n, Shape::new(&shape, DType::F32));
            (n, id)
        })
        .collect();
    let pos = g.iota(Shape::new(&[s], DType::I64), 0);
    let we = g.embedding(w["embeddings.word_embeddings.weight"], ids);
    let pe = g.embedding(w["embeddings.position_embeddings.weight"], pos);
    let te = g.embedding(w["embeddings.token_type_embeddings.weight"], types);
    let x = g.add(we, pe);
    let x = g.add(x, te);
    let ln = |g: &mut Graph, x, p: &str| {
        g.layer_norm(x, Some(w[&format!("{p}.weight")]), Some(w[&format!("{p}.bias")]), -1, cfg.layer_norm_eps)
    };
    let lin = |g: &mut Graph, x, p: &str| g.linear(x, w[&format!("{p}.weight")], Some(w[&format!("{p}.bias")]));
    let mut x = ln(&mut g, x, "embeddings.LayerNorm");
    // Keys where attention_mask != 0, as a bool [B, 1, 1, S] mask.
    let zero = g.scalar(0.0, DType::I64);
    let keep = g.compare(CompareOp::Ne, mask, zero);
    let keep = g.reshape(keep, vec![b, 1, 1, s]);
    for l in 0..cfg.layers {
        let p = format!("encoder.layer.{l}.");
        let heads = |g: &mut Graph, x, name: &str| {
            let y = lin(g, x, &format!("{p}attention.self.{name}"));
            let y = g.reshape(y, vec![b, s, nh, hd]);
            g.transpose(y, &[0, 2, 1, 3])
        };
        let (q, k, v) = (heads(&mut g, x, "query"), heads(&mut g, x, "key"), heads(&mut g, x, "value"));
        let a = g.scaled_dot_product_attention(q, k, v, MaskKind::Bias(keep), None);
        let a = g.transpose(a, &[0, 2, 1, 3]);
        let a = g.reshape(a, vec![b, s, h]);
        let a = lin(&mut g, a, &format!("{p}attention.output.dense"));
        let r = g.add(a, x);
        x = ln(&mut g, r, &format!("{p}attention.output.LayerNorm"));
        let f = lin(&mut g, x, &format!("{p}intermediate.dense"));
        let f = g.gelu(f, cfg.gelu_tanh);
        let f = lin(&mut g, f, &format!("{p}output.dense"));
        let r = g.add(f, x);
        x = ln(&mut g, r, &format!("{p}output.LayerNorm"));
    }
    g.set_outputs(vec![x]);
    if let Some(e) = g.error() {
        return Err(ModelError::Ir(e.clone()));
    }
    Ok(g)
}

/// Sentence embeddings: the mean of `hidden` f32 `[B, S, D]` over the positions where `mask`
/// (row-major `[B, S]`) is non-zero, L2-normalized; one `D`-vector per row (all zeros for a
/// row with no attended position). Accumulates in f64.
///
/// Errors: `hidden` not rank 3 or `mask` not `B·S` long ([`ModelError::BadTensor`]).
pub fn mean_pool_normalize(hidden: &Tensor, mask: &[i64]) -> Result<Vec<Vec<f32>>> {
    let sh = hidden.shape();
    if sh.len() != 3 || mask.len() != sh[0] * sh[1] {
        let msg = format!("needs hidden [B, S, D] and a [B, S] mask, got {sh:?} and {} mask values", mask.len());
        return Err(ModelError::BadTensor { name: "last_hidden_state".into(), msg });
    }
    let (b, s, d) = (sh[0], sh[1], sh[2]);
    let h = hidden.to_f64_vec();
    Ok((0..b)
        .map(|i| {
            let mut acc = vec![0.0f64; d];
            for j in (0..s).filter(|&j| mask[i * s + j] != 0) {
                for (a, x) in acc.iter_mut().zip(&h[(i * s + j) * d..][..d]) {
                    *a += x;
                }
            }
            let norm = acc.iter().map(|a| a * a).sum::<f64>().sqrt();
            acc.iter().map(|a| if norm > 0.0 { (a / norm) as f32 } else { 0.0 }).collect()
        })
        .collect())
}

/// A BERT encoder ready to run on the CPU: config, weights, compiled graphs per `(B, S)`.
pub struct BertModel {
    cfg: BertConfig,
    weights: BTreeMap<String, Tensor>,
    session: Session,
    opts: CompileOptions,
    graphs: HashMap<(usize, usize), CompiledGraph>,
}

impl BertModel {
    /// A model from a config and f32 weights under Hugging Face names.
    ///
    /// Errors: a weight of [`BertConfig::weight_shapes`] missing ([`ModelError::MissingTensor`])
    /// or of another shape or dtype ([`ModelError::BadTensor`]).
    pub fn new(cfg: BertConfig, weights: BTreeMap<String, Tensor>, opts: CompileOptions) -> Result<BertModel> {
        for (n, shape) in cfg.weight_shapes() {
            let t = weights.get(&n).ok_or_else(|| ModelError::MissingTensor(n.clone()))?;
            if t.shape() != shape.as_slice() || t.dtype() != DType::F32 {
                let msg = format!("is {:?} {:?}, the config needs f32 {shape:?}", t.dtype(), t.shape());
                return Err(ModelError::BadTensor { name: n, msg });
            }
        }
        let session = Session::try_new(Device::Cpu)?;
        Ok(BertModel { cfg, weights, session, opts, graphs: HashMap::new() })
    }

    /// Load a Hugging Face directory holding `config.json` and `model.safetensors` (f32, f16
    /// or bf16 weights, converted to f32; a `bert.` name prefix is stripped).
    ///
    /// Errors: unreadable files, the errors of [`BertConfig::from_hf_config`] and
    /// [`BertModel::new`].
    pub fn from_hf_dir(dir: impl AsRef<Path>, opts: CompileOptions) -> Result<BertModel> {
        let dir = dir.as_ref();
        let p = dir.join("config.json");
        let json =
            std::fs::read_to_string(&p).map_err(|e| ModelError::Io { path: p.display().to_string(), source: e })?;
        let cfg = BertConfig::from_hf_config(&json)?;
        let file = rlx_safetensors::SafetensorsFile::open(dir.join("model.safetensors"))?;
        let mut weights = BTreeMap::new();
        for (n, _) in cfg.weight_shapes() {
            let src = [n.clone(), format!("bert.{n}")].into_iter().find(|k| file.info(k).is_ok());
            let src = src.ok_or_else(|| ModelError::MissingTensor(n.clone()))?;
            weights.insert(n, file.tensor_as(&src, DType::F32)?);
        }
        BertModel::new(cfg, weights, opts)
    }

    /// The hyperparameters.
    pub fn config(&self) -> &BertConfig {
        &self.cfg
    }

    /// The last hidden state f32 `[B, S, H]` for token ids, attention mask and token type ids
    /// (each row-major `[B, S]`, `S = ids.len() / batch`), compiling the `(B, S)` graph on
    /// first use.
    ///
    /// Errors: lengths that are not `B·S` ([`ModelError::Batch`]), ids outside the vocabulary
    /// ([`ModelError::BadToken`]), `S` beyond the position table, compile or run errors.
    pub fn last_hidden_state(&mut self, batch: usize, ids: &[i64], mask: &[i64], types: &[i64]) -> Result<Tensor> {
        if batch == 0 || ids.is_empty() || !ids.len().is_multiple_of(batch) {
            return Err(ModelError::Batch { batch, got: ids.len() });
        }
        if mask.len() != ids.len() || types.len() != ids.len() {
            return Err(ModelError::Batch { batch, got: mask.len().min(types.len()) });
        }
        if let Some(&id) = ids.iter().find(|&&t| t < 0 || t as usize >= self.cfg.vocab) {
            return Err(ModelError::BadToken { id: id as u32, vocab: self.cfg.vocab });
        }
        let s = ids.len() / batch;
        if !self.graphs.contains_key(&(batch, s)) {
            let g = encoder_graph(&self.cfg, batch, s)?;
            let cg = self.session.try_compile_with(g, &self.opts)?;
            self.graphs.insert((batch, s), cg);
        }
        let toks = [ids, mask, types].map(|v| Tensor::from_vec(v.to_vec(), &[batch, s]));
        let [ids_t, mask_t, types_t] = toks;
        let toks = [ids_t?, mask_t?, types_t?];
        let mut feeds: Vec<(&str, &Tensor)> = BERT_INPUTS.iter().copied().zip(toks.iter()).collect();
        feeds.extend(self.weights.iter().map(|(n, t)| (n.as_str(), t)));
        let cg = self.graphs.get_mut(&(batch, s)).expect("compiled above");
        Ok(cg.run_refs(&feeds)?.remove(0))
    }

    /// Sentence embeddings of tokenized sentences (ids as the tokenizer gives them, with
    /// `[CLS]`/`[SEP]`): padded with id 0 to the longest, run as one batch, mean-pooled over
    /// the real tokens and L2-normalized ([`mean_pool_normalize`]). One `H`-vector per
    /// sentence.
    ///
    /// Errors: no sentences or an empty one ([`ModelError::Batch`]), and those of
    /// [`BertModel::last_hidden_state`].
    pub fn embed(&mut self, sentences: &[Vec<u32>]) -> Result<Vec<Vec<f32>>> {
        let b = sentences.len();
        let s = sentences.iter().map(Vec::len).max().unwrap_or(0);
        if b == 0 || sentences.iter().any(Vec::is_empty) {
            return Err(ModelError::Batch { batch: b.max(1), got: 0 });
        }
        let mut ids = vec![0i64; b * s];
        let mut mask = vec![0i64; b * s];
        for (i, t) in sentences.iter().enumerate() {
            for (j, &id) in t.iter().enumerate() {
                ids[i * s + j] = id as i64;
                mask[i * s + j] = 1;
            }
        }
        let hidden = self.last_hidden_state(b, &ids, &mask, &vec![0; b * s])?;
        mean_pool_normalize(&hidden, &mask)
    }
}
