//! The crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong while loading a tokenizer, encoding, decoding, rendering a chat
/// template or sampling.
#[derive(Debug, thiserror::Error)]
pub enum TextError {
    /// `tokenizer.ggml.model` names a tokenizer this crate does not implement.
    #[error("unknown tokenizer model '{0}' (supported: gpt2 byte-level BPE, llama SentencePiece, bert WordPiece)")]
    UnknownModel(String),
    /// `tokenizer.ggml.pre` names a pre-tokenizer this crate does not know.
    #[error("unknown pre-tokenizer '{0}' (tokenizer.ggml.pre)")]
    UnknownPreTokenizer(String),
    /// A required GGUF metadata key is missing or has the wrong type.
    #[error("GGUF metadata '{key}': {what}")]
    Metadata {
        /// The metadata key.
        key: String,
        /// What is wrong with it.
        what: String,
    },
    /// A token id is not below the vocabulary size.
    #[error("token id {id} out of range (vocabulary size {vocab_size})")]
    TokenOutOfRange {
        /// The offending id.
        id: u32,
        /// The vocabulary size.
        vocab_size: usize,
    },
    /// A piece of text could not be represented with this vocabulary (no token and no byte
    /// fallback for it).
    #[error("cannot encode {0:?}: no token and no byte-fallback token for it")]
    Unencodable(String),
    /// The chat template does not parse or fails while rendering.
    #[error("invalid chat template: {0}")]
    Template(String),
    /// A pre-tokenizer regex failed to compile or to run (catastrophic backtracking limit).
    #[error("pre-tokenizer regex {pattern:?}: {msg}")]
    Regex {
        /// The pattern.
        pattern: String,
        /// The regex engine's message.
        msg: String,
    },
    /// The `tokenizers` crate rejected a `tokenizer.json` or failed to encode/decode.
    #[error("tokenizer.json ({path}): {msg}")]
    HfTokenizer {
        /// The file (empty when the error came from encode/decode).
        path: PathBuf,
        /// The `tokenizers` crate's message.
        msg: String,
    },
    /// A file given as a `tokenizer.json` that is not one: not UTF-8 JSON, or JSON without the
    /// `model` object every HuggingFace tokenizer.json has (a BERT `vocab.txt`, a
    /// `tokenizer_config.json`, …). `why` keeps the JSON parser's detail.
    #[error("{path} is not a HuggingFace tokenizer.json ({why})")]
    NotHfTokenizer {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        why: String,
    },
    /// An invalid sampler setting: `setting` is the [`crate::SamplerConfig`] field (`top_p`,
    /// `min_p`, …; `mirostat_tau` / `mirostat_eta` for the two numbers of `mirostat_v2`), so a
    /// front end can name its own option for it (`rlx generate` says `--top-p`).
    #[error("invalid sampler setting: {setting} must be {must}, got {value}")]
    Sampler {
        /// The field.
        setting: &'static str,
        /// The rule it breaks ("in (0, 1]").
        must: &'static str,
        /// The value given.
        value: f32,
    },
    /// An operation this kind of tokenizer does not have (e.g. truncation on a GGUF vocabulary).
    #[error("{0}")]
    Unsupported(String),
}
