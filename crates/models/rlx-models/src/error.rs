//! The crate's error type.

use thiserror::Error;

/// Errors of model loading, graph building and generation.
#[derive(Debug, Error)]
pub enum ModelError {
    /// The file declares an architecture this crate does not build.
    #[error("unsupported architecture {arch:?}: {missing}")]
    UnsupportedArchitecture {
        /// The declared architecture (`general.architecture` or HF `model_type`).
        arch: String,
        /// What is missing to run it.
        missing: String,
    },
    /// A required hyperparameter is absent or has the wrong type.
    #[error("missing or invalid hyperparameter {key:?}{hint}")]
    MissingMetadata {
        /// The metadata / config key.
        key: String,
        /// Extra context (may be empty).
        hint: String,
    },
    /// A required weight tensor is absent.
    #[error("missing weight tensor {0:?}")]
    MissingTensor(String),
    /// A weight tensor has the wrong shape or type.
    #[error("weight tensor {name:?}: {msg}")]
    BadTensor {
        /// Tensor name.
        name: String,
        /// What is wrong.
        msg: String,
    },
    /// The sequence would not fit the model's context window.
    #[error("{needed} tokens do not fit the context of {context} tokens")]
    ContextOverflow {
        /// Tokens the cache would hold.
        needed: usize,
        /// The model's context length.
        context: usize,
    },
    /// A token id outside the vocabulary.
    #[error("token id {id} is outside the vocabulary of {vocab}")]
    BadToken {
        /// The id.
        id: u32,
        /// Vocabulary size.
        vocab: usize,
    },
    /// The tokens given do not match the cache's batch: a row-major `[B, n]` block needs a
    /// multiple of `B` tokens (at least one row's worth), per-sequence input needs `B` lists.
    #[error("a batch of {batch} sequences does not match the {got} token lists or tokens given")]
    Batch {
        /// Batch size of the cache.
        batch: usize,
        /// Tokens given.
        got: usize,
    },
    /// An option value that is not one of the accepted ones.
    #[error("invalid option: {0}")]
    BadOption(String),
    /// The model produced a NaN logit (corrupt weights or metadata, e.g. a NaN
    /// `rope.freq_base`): sampling from it would pick an arbitrary token.
    #[error("the model produced NaN logits at generated token {step} (sequence {seq}): corrupt weights or metadata?")]
    NanLogits {
        /// Index of the token being sampled (0 = the first after the prompt).
        step: usize,
        /// Sequence of the batch.
        seq: usize,
    },
    /// Generation needs a prompt token and the model declares no BOS to start from.
    #[error("empty prompt and the model declares no BOS token to start from")]
    EmptyPrompt,
    /// GGUF parsing failed.
    #[error(transparent)]
    Gguf(#[from] rlx_gguf::GgufError),
    /// Safetensors parsing failed.
    #[error(transparent)]
    Safetensors(#[from] rlx_safetensors::SafetensorsError),
    /// Compiling or running the graph failed.
    #[error(transparent)]
    Runtime(#[from] rlx_runtime::Error),
    /// Building the graph failed.
    #[error(transparent)]
    Ir(#[from] rlx_ir::IrError),
    /// Reading a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// `config.json` is not valid JSON.
    #[error("config.json: {0}")]
    Json(#[from] serde_json::Error),
}

/// `Result` with [`ModelError`].
pub type Result<T> = std::result::Result<T, ModelError>;
