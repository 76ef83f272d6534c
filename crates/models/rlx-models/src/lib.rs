//! `rlx-models`: graph builders for real model architectures, with the host-side runner and
//! generation loop.
//!
//! - [`LlamaConfig`]: Llama-family hyperparameters from GGUF metadata
//!   ([`LlamaConfig::from_gguf`]) or a Hugging Face `config.json`.
//! - [`Weights`]: tensors under GGUF names, quantized ones kept packed ([`Weight::Packed`],
//!   run through `dequant_matmul`; pooled per scheme on huge pages, [`Weight::PackedRows`]).
//! - [`graph::step_graph`]: the decoder as an RLX graph (RMSNorm, RoPE in the file's pairing,
//!   grouped-query attention against a KV cache, SwiGLU, tied or untied head, Q/K/V bias,
//!   QK-norm).
//! - [`LlamaModel`] + [`KvCache`]: compiled step graphs per `(batch, tokens, cache)` bucket and
//!   a preallocated per-layer f32 or f16 cache ([`KvCacheDtype`]) with one length per
//!   sequence; [`LlamaModel::forward`] returns the last logits.
//! - [`Generator`]: prompt (or a batch of prompts) → tokens with a caller-chosen sampler,
//!   streaming, with timings.
//! - [`bert`]: BERT encoders from safetensors ([`BertModel`]) and sentence embeddings (mean
//!   pooling over the attention mask + L2 normalization, [`bert::mean_pool_normalize`]).
//!
//! No model names live in the compiler or backend: everything model-specific is here.

#![warn(missing_docs)]
// `ggml_numerics`' docs link to the private helpers that follow llama.cpp's arithmetic.
#![allow(rustdoc::private_intra_doc_links)]

pub mod bert;
pub mod config;
mod error;
pub mod generate;
pub mod ggml_numerics;
pub mod graph;
pub mod kv_cache;
pub mod runner;
pub mod weights;

pub use bert::{BertConfig, BertModel};
pub use config::{LlamaConfig, RopeScaling};
pub use error::{ModelError, Result};
pub use generate::{GenerateOptions, GenerationStats, Generator, argmax};
pub use kv_cache::{KvCache, KvCacheDtype};
pub use runner::{LlamaModel, OpTime, Phase};
pub use weights::{Weight, Weights};
