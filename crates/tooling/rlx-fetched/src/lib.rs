//! `rlx-fetched`: where `tools/fetch.sh` puts downloaded models and data sets, and the file
//! names of its items, in one place for the `rlx` CLI's defaults and every test that needs a
//! fetched file.
//!
//! The cache directory is `${RLX_CACHE:-$HOME/.cache/rlx}` (docs/env.md). A test that needs a
//! fetched file calls [`or_skip`], which prints one `SKIP` line to stderr when the file is
//! absent (never a silent pass):
//!
//! ```
//! let Some(model) = rlx_fetched::or_skip(rlx_fetched::SMOLLM2_GGUF, "greedy decode") else {
//!     return; // stderr: SKIP greedy decode: … not found; run tools/fetch.sh smollm2
//! };
//! # let _ = model;
//! ```

#![warn(missing_docs)]

use std::path::PathBuf;

/// One file that `tools/fetch.sh <item>` downloads: the item's name and the file's path
/// relative to the cache directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fetched {
    /// The `tools/fetch.sh` argument that downloads it.
    pub item: &'static str,
    /// Path under [`cache_dir`].
    pub rel: &'static str,
}

/// SmolLM2-135M-Instruct, Q4_1 GGUF (`tools/fetch.sh smollm2`): `rlx generate`'s default model.
pub const SMOLLM2_GGUF: Fetched = Fetched { item: "smollm2", rel: "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" };
/// Qwen2.5-Coder-0.5B-Instruct AWQ GGUF (`tools/fetch.sh qwen2`): a `qwen2` model whose weights
/// mix Q5_0, Q8_0, Q4_K and Q6_K, for the parity test of a second architecture.
pub const QWEN2_GGUF: Fetched = Fetched { item: "qwen2", rel: "qwen2/Qwen2.5-Coder-0.5B-Instruct-AWQ.gguf" };
/// all-MiniLM-L6-v2, a Hugging Face directory: config.json, model.safetensors, tokenizer.json
/// (`tools/fetch.sh minilm`).
pub const MINILM_DIR: Fetched = Fetched { item: "minilm", rel: "minilm" };
/// all-MiniLM-L6-v2's safetensors weights, inside [`MINILM_DIR`].
pub const MINILM_SAFETENSORS: Fetched = Fetched { item: "minilm", rel: "minilm/model.safetensors" };
/// all-MiniLM-L6-v2's tokenizer.json, inside [`MINILM_DIR`].
pub const MINILM_TOKENIZER: Fetched = Fetched { item: "minilm", rel: "minilm/tokenizer.json" };
/// paraphrase-MiniLM-L3-v2, fp32 ONNX (`tools/fetch.sh minilm-onnx`).
pub const MINILM_L3_ONNX: Fetched = Fetched { item: "minilm-onnx", rel: "minilm-onnx/paraphrase-MiniLM-L3-v2.onnx" };
/// llama.cpp's `models` directory with the `ggml-vocab-*.gguf` tokenizer test vectors
/// (`tools/fetch.sh llama-cpp-src`).
pub const LLAMA_CPP_MODELS: Fetched = Fetched { item: "llama-cpp-src", rel: "llama-cpp-src/vendor/llama.cpp/models" };
/// The ONNX backend node test suite's `node` directory (`tools/fetch.sh onnx-node`).
pub const ONNX_NODE_DIR: Fetched = Fetched { item: "onnx-node", rel: "onnx-node/node" };

/// `${RLX_CACHE:-$HOME/.cache/rlx}`, the directory `tools/fetch.sh` writes to.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("RLX_CACHE") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/rlx"),
    }
}

impl Fetched {
    /// The file's path in the cache (whether or not it has been fetched).
    pub fn path(&self) -> PathBuf {
        cache_dir().join(self.rel)
    }

    /// The same item with a path below this one (a file inside a fetched directory).
    pub fn join(&self, rel: &str) -> PathBuf {
        self.path().join(rel)
    }
}

/// For tests: the file's path when it has been fetched; otherwise `None` after one line on
/// stderr, `SKIP <what>: <path> not found; run tools/fetch.sh <item>`.
pub fn or_skip(f: Fetched, what: &str) -> Option<PathBuf> {
    let p = f.path();
    if p.exists() {
        Some(p)
    } else {
        eprintln!("SKIP {what}: {} not found; run tools/fetch.sh {}", p.display(), f.item);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_under_the_cache_dir() {
        assert!(SMOLLM2_GGUF.path().starts_with(cache_dir()));
        assert!(SMOLLM2_GGUF.path().ends_with("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"));
        assert_eq!(ONNX_NODE_DIR.join("test_add"), cache_dir().join("onnx-node/node/test_add"));
        let absent = Fetched { item: "nothing", rel: "no/such/file.bin" };
        assert_eq!(or_skip(absent, "the absent case"), None);
    }
}
