//! Text for LLM generation: tokenizers, chat templates and the sampler chain.
//!
//! - [`Tokenizer`]: from a GGUF file's vocabulary (llama.cpp's `llama_tokenize` /
//!   `llama_detokenize` semantics: byte-level BPE with the `tokenizer.ggml.pre` regex,
//!   SentencePiece with byte fallback, gemma4 BPE, WordPiece) or from a `tokenizer.json`.
//!   Conformance: every llama.cpp `ggml-vocab-*.gguf` test vector (see the crate README).
//! - [`StreamDecoder`]: UTF-8-safe incremental detokenization for streaming.
//! - [`apply_chat_template`]: the model's Jinja chat template via `minijinja`.
//! - [`Sampler`]: llama.cpp's sampler chain (penalties, top-k, typical, top-p, min-p,
//!   temperature, then a seeded draw; or mirostat v2), deterministic for a given seed.

mod bpe;
mod bytes;
mod chat;
mod error;
mod hf;
mod pretok;
mod sampler;
mod spm;
mod stream;
mod tokenizer;
mod vocab;
mod wpm;

pub use chat::{ChatMessage, apply_chat_template};
pub use error::TextError;
pub use sampler::{Candidate, Sampler, SamplerConfig};
pub use stream::StreamDecoder;
pub use tokenizer::Tokenizer;
pub use vocab::{TokenType, VocabKind};
