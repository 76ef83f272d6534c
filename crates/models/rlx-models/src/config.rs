//! Hyperparameters of a Llama-family decoder, read from GGUF metadata or a Hugging Face
//! `config.json`.

use crate::{ModelError, Result};
use rlx_gguf::GgufFile;
use rlx_ir::op::RopeStyle;

/// How RoPE positions are scaled for long contexts.
#[derive(Clone, Debug, PartialEq)]
pub enum RopeScaling {
    /// Plain RoPE.
    None,
    /// Position interpolation: positions divided by `factor` (GGUF `rope.scaling.type =
    /// linear`, HF `rope_scaling.type = "linear"`).
    Linear {
        /// Divisor of the positions.
        factor: f64,
    },
}

/// Hyperparameters of a Llama-family decoder (Llama 2/3, SmolLM, Mistral, Qwen2, Qwen3).
#[derive(Clone, Debug, PartialEq)]
pub struct LlamaConfig {
    /// Architecture name as declared (`general.architecture` / HF `model_type`).
    pub arch: String,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Model (residual) width `E`.
    pub d_model: usize,
    /// Query heads `H`.
    pub n_head: usize,
    /// Key/value heads `Hk` (`H % Hk == 0`; fewer than `H` is grouped-query attention).
    pub n_kv_head: usize,
    /// Per-head width `D`.
    pub head_dim: usize,
    /// SwiGLU hidden width.
    pub ffn_dim: usize,
    /// Vocabulary size.
    pub vocab: usize,
    /// Context length the model was trained for (the KV cache's limit).
    pub context_length: usize,
    /// RoPE base `θ`.
    pub rope_base: f64,
    /// RoPE position scaling.
    pub rope_scaling: RopeScaling,
    /// Which head-dim elements RoPE rotates together: adjacent pairs for GGUF Llama files
    /// (their Q/K rows are stored permuted, llama.cpp `NORM`), rotate-half for Hugging Face
    /// weights and GGUF Qwen2/Qwen3 (llama.cpp `NEOX`).
    pub rope_style: RopeStyle,
    /// RMSNorm epsilon.
    pub rms_eps: f64,
    /// Q/K/V projections have biases (Qwen2).
    pub qkv_bias: bool,
    /// RMSNorm over each head of Q and K before RoPE (Qwen3).
    pub qk_norm: bool,
    /// The LM head is the token embedding (no separate output matrix).
    pub tied_head: bool,
    /// Beginning-of-sequence token, if declared.
    pub bos_token_id: Option<u32>,
    /// End-of-sequence tokens, if declared (generation stops at any of them).
    pub eos_token_ids: Vec<u32>,
}

/// Architectures built here, with their RoPE pairing in GGUF files.
const GGUF_ARCHS: &[(&str, RopeStyle)] = &[
    ("llama", RopeStyle::AdjacentPairs),
    ("mistral", RopeStyle::AdjacentPairs),
    ("qwen2", RopeStyle::RotateHalf),
    ("qwen3", RopeStyle::RotateHalf),
];

fn missing(key: &str, hint: &str) -> ModelError {
    ModelError::MissingMetadata { key: key.to_string(), hint: hint.to_string() }
}

impl LlamaConfig {
    /// Read the hyperparameters of `file` (keys `{arch}.block_count`, `embedding_length`,
    /// `attention.head_count(_kv)`, `feed_forward_length`, `context_length`,
    /// `rope.freq_base`, `rope.scaling.*`, `attention.layer_norm_rms_epsilon`,
    /// `attention.key_length`; vocabulary size from `token_embd.weight`; flags from which
    /// tensors exist).
    ///
    /// Errors: an architecture other than llama / mistral / qwen2 / qwen3
    /// ([`ModelError::UnsupportedArchitecture`]), a missing required key, an unsupported
    /// RoPE scaling type, head counts that do not divide.
    pub fn from_gguf(file: &GgufFile) -> Result<LlamaConfig> {
        let arch = file.content().architecture().ok_or_else(|| missing(
            "general.architecture",
            ": a language-model GGUF names its architecture (e.g. \"llama\"); this file holds tensors without a model \
             (rlx inspect lists them)",
        ))?.to_string();
        let Some(&(_, rope_style)) = GGUF_ARCHS.iter().find(|(a, _)| *a == arch) else {
            let known: Vec<&str> = GGUF_ARCHS.iter().map(|(a, _)| *a).collect();
            return Err(ModelError::UnsupportedArchitecture {
                arch,
                missing: format!("rlx-models builds Llama-family decoders ({}) only", known.join(", ")),
            });
        };
        let key = |k: &str| format!("{arch}.{k}");
        let int = |k: &str| -> Result<usize> {
            file.get(&key(k)).and_then(|v| v.as_u64()).map(|v| v as usize).ok_or_else(|| missing(&key(k), ""))
        };
        let float = |k: &str| file.get(&key(k)).and_then(|v| v.as_f64());
        let n_head = int("attention.head_count")?;
        let d_model = int("embedding_length")?;
        let n_kv_head = int("attention.head_count_kv").unwrap_or(n_head);
        let head_dim = int("attention.key_length").unwrap_or(d_model / n_head.max(1));
        let embd =
            file.tensor_info("token_embd.weight").map_err(|_| ModelError::MissingTensor("token_embd.weight".into()))?;
        let vocab = embd.shape().first().copied().unwrap_or(0) as usize;
        let rope_scaling = match file.get(&key("rope.scaling.type")).and_then(|v| v.as_str()) {
            None | Some("none") => RopeScaling::None,
            Some("linear") => {
                let factor = float("rope.scaling.factor").ok_or_else(|| missing(&key("rope.scaling.factor"), ""))?;
                if factor == 1.0 { RopeScaling::None } else { RopeScaling::Linear { factor } }
            }
            Some(other) => {
                return Err(ModelError::UnsupportedArchitecture {
                    arch,
                    missing: format!("RoPE scaling type {other:?} (only none and linear are built)"),
                });
            }
        };
        if file.tensor_info("rope_freqs.weight").is_ok() {
            return Err(ModelError::UnsupportedArchitecture {
                arch,
                missing: "per-frequency RoPE factors (rope_freqs.weight, Llama 3.1 scaling)".into(),
            });
        }
        let tok = |k: &str| file.get(k).and_then(|v| v.as_u64()).map(|v| v as u32);
        let cfg = LlamaConfig {
            n_layer: int("block_count")?,
            d_model,
            n_head,
            n_kv_head,
            head_dim,
            ffn_dim: int("feed_forward_length")?,
            vocab,
            context_length: int("context_length")?,
            rope_base: float("rope.freq_base").unwrap_or(10000.0),
            rope_scaling,
            rope_style,
            rms_eps: float("attention.layer_norm_rms_epsilon")
                .ok_or_else(|| missing(&key("attention.layer_norm_rms_epsilon"), ""))?,
            qkv_bias: file.tensor_info("blk.0.attn_q.bias").is_ok(),
            qk_norm: file.tensor_info("blk.0.attn_q_norm.weight").is_ok(),
            tied_head: file.tensor_info("output.weight").is_err(),
            bos_token_id: tok("tokenizer.ggml.bos_token_id"),
            eos_token_ids: tok("tokenizer.ggml.eos_token_id")
                .into_iter()
                .chain(tok("tokenizer.ggml.eot_token_id"))
                .collect(),
            arch,
        };
        cfg.check()
    }

    /// Read a Hugging Face `config.json` (`model_type` llama / mistral / qwen2 / qwen3;
    /// `hidden_size`, `num_hidden_layers`, `num_attention_heads`, `num_key_value_heads`,
    /// `intermediate_size`, `vocab_size`, `max_position_embeddings`, `rope_theta`,
    /// `rms_norm_eps`, `tie_word_embeddings`, `head_dim`, `rope_scaling`, `attention_bias`).
    /// HF weights use rotate-half RoPE.
    ///
    /// Errors: invalid JSON, an unsupported `model_type`, a missing required key.
    pub fn from_hf_config(json: &str) -> Result<LlamaConfig> {
        let v: serde_json::Value = serde_json::from_str(json)?;
        let arch = v["model_type"].as_str().ok_or_else(|| missing("model_type", " in config.json"))?.to_string();
        if !GGUF_ARCHS.iter().any(|(a, _)| *a == arch) {
            return Err(ModelError::UnsupportedArchitecture {
                arch,
                missing: "rlx-models builds Llama-family decoders (llama, mistral, qwen2, qwen3) only".into(),
            });
        }
        let int = |k: &str| v[k].as_u64().map(|x| x as usize).ok_or_else(|| missing(k, " in config.json"));
        let n_head = int("num_attention_heads")?;
        let d_model = int("hidden_size")?;
        let rope_scaling = match &v["rope_scaling"] {
            serde_json::Value::Null => RopeScaling::None,
            s if s["type"] == "linear" || s["rope_type"] == "linear" => RopeScaling::Linear {
                factor: s["factor"].as_f64().ok_or_else(|| missing("rope_scaling.factor", " in config.json"))?,
            },
            s => {
                return Err(ModelError::UnsupportedArchitecture {
                    arch,
                    missing: format!("rope_scaling {s} (only linear is built)"),
                });
            }
        };
        let eos = match &v["eos_token_id"] {
            serde_json::Value::Array(a) => a.iter().filter_map(|x| x.as_u64()).map(|x| x as u32).collect(),
            x => x.as_u64().map(|x| x as u32).into_iter().collect(),
        };
        let cfg = LlamaConfig {
            n_layer: int("num_hidden_layers")?,
            d_model,
            n_head,
            n_kv_head: int("num_key_value_heads").unwrap_or(n_head),
            head_dim: int("head_dim").unwrap_or(d_model / n_head.max(1)),
            ffn_dim: int("intermediate_size")?,
            vocab: int("vocab_size")?,
            context_length: int("max_position_embeddings")?,
            rope_base: v["rope_theta"].as_f64().unwrap_or(10000.0),
            rope_scaling,
            rope_style: RopeStyle::RotateHalf,
            rms_eps: v["rms_norm_eps"].as_f64().ok_or_else(|| missing("rms_norm_eps", " in config.json"))?,
            qkv_bias: v["attention_bias"].as_bool().unwrap_or(arch == "qwen2"),
            qk_norm: arch == "qwen3",
            tied_head: v["tie_word_embeddings"].as_bool().unwrap_or(false),
            bos_token_id: v["bos_token_id"].as_u64().map(|x| x as u32),
            eos_token_ids: eos,
            arch,
        };
        cfg.check()
    }

    fn check(self) -> Result<LlamaConfig> {
        let bad = |k: &str, h: String| Err(missing(k, &format!(": {h}")));
        if self.n_head == 0 || self.n_kv_head == 0 || !self.n_head.is_multiple_of(self.n_kv_head) {
            return bad("head_count_kv", format!("{} query heads, {} kv heads", self.n_head, self.n_kv_head));
        }
        if self.head_dim == 0 || !self.head_dim.is_multiple_of(2) {
            return bad("key_length", format!("head dim {} must be even and positive", self.head_dim));
        }
        if self.n_layer == 0 || self.d_model == 0 || self.vocab == 0 || self.context_length == 0 {
            return bad("block_count", "layers, width, vocabulary and context must be positive".into());
        }
        let key = |k: &str| format!("{}.{k}", self.arch);
        if !(self.rope_base.is_finite() && self.rope_base > 0.0) {
            return bad(&key("rope.freq_base"), format!("is {}, must be a positive number", self.rope_base));
        }
        if !(self.rms_eps.is_finite() && self.rms_eps >= 0.0) {
            return bad(
                &key("attention.layer_norm_rms_epsilon"),
                format!("is {}, must be a number >= 0", self.rms_eps),
            );
        }
        if let RopeScaling::Linear { factor } = self.rope_scaling
            && !(factor.is_finite() && factor > 0.0)
        {
            return bad(&key("rope.scaling.factor"), format!("is {factor}, must be a positive number"));
        }
        Ok(self)
    }

    /// Query heads per key/value head.
    pub fn group(&self) -> usize {
        self.n_head / self.n_kv_head
    }
}
