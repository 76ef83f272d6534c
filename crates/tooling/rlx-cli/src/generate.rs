//! `rlx generate`: text generation with a Llama-family GGUF model, streamed to stdout.
//!
//! The prompt is tokenized as llama.cpp does (`common_tokenize(prompt, add_special = true,
//! parse_special = true)`: BOS only where the GGUF's `add_bos_token` says so); `--chat` wraps
//! it in the GGUF's chat template as one user message with the generation prompt. Tokens are
//! printed as they are sampled; then one line on stderr gives the prompt-processing and
//! generation speeds, and with `--json` the last stdout line is a JSON object with `tokens`,
//! `text`, `prompt_tokens`, `prompt_tokens_per_s`, `gen_tokens_per_s`.

use clap::{Args, ValueEnum};
use rlx_gguf::GgufFile;
use rlx_models::{GenerateOptions, Generator, KvCacheDtype, LlamaModel};
use rlx_runtime::CompileOptions;
use rlx_text::{ChatMessage, Sampler, SamplerConfig, StreamDecoder, Tokenizer, apply_chat_template};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Options of `rlx generate`.
#[derive(Args, Clone, Debug)]
pub struct GenerateArgs {
    /// GGUF model (default: SmolLM2-135M-Instruct from the cache; `tools/fetch.sh smollm2`)
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Prompt text (tokenized as llama.cpp does; may be empty)
    #[arg(long, default_value = "The capital of France is")]
    pub prompt: String,
    /// Wrap the prompt in the model's chat template as one user message
    #[arg(long)]
    pub chat: bool,
    /// Most tokens to generate
    #[arg(long, default_value_t = 64)]
    pub max_tokens: usize,
    /// Sampling temperature; 0 = greedy
    #[arg(long, default_value_t = 0.0)]
    pub temperature: f32,
    /// Top-k (0 disables)
    #[arg(long, default_value_t = 40)]
    pub top_k: i32,
    /// Top-p (1.0 disables)
    #[arg(long, default_value_t = 0.95)]
    pub top_p: f32,
    /// RNG seed
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Worker threads (default: all cores)
    #[arg(long)]
    pub threads: Option<usize>,
    /// Keep generating past end-of-generation tokens (as llama.cpp's --ignore-eos)
    #[arg(long)]
    pub ignore_eos: bool,
    /// Fast mode: Q8_0-quantized activations inside the quantized matmuls, as llama.cpp
    /// (default: exact f32 activations, parity with the fp32 reference)
    #[arg(long)]
    pub fast: bool,
    /// Element type of the KV cache (f16 halves its memory)
    #[arg(long, value_enum, default_value_t = KvType::F32)]
    pub kv_type: KvType,
}

/// `--kv-type` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KvType {
    /// f32 (exact)
    F32,
    /// f16 (half the memory)
    F16,
}

impl From<KvType> for KvCacheDtype {
    fn from(k: KvType) -> KvCacheDtype {
        match k {
            KvType::F32 => KvCacheDtype::F32,
            KvType::F16 => KvCacheDtype::F16,
        }
    }
}

/// A failure, as one line.
#[derive(Debug)]
pub struct GenerateError(pub String);

impl<E: std::error::Error> From<E> for GenerateError {
    fn from(e: E) -> Self {
        GenerateError(e.to_string())
    }
}

/// `${RLX_CACHE:-$HOME/.cache/rlx}/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf`, what
/// `tools/fetch.sh smollm2` downloads.
pub fn default_model() -> PathBuf {
    let cache = std::env::var_os("RLX_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/rlx"));
    cache.join("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
}

/// The model path `args` names (or the default), checked to exist.
pub fn model_path(args: &GenerateArgs) -> Result<PathBuf, GenerateError> {
    match &args.model {
        Some(p) => Ok(p.clone()),
        None => {
            let p = default_model();
            if p.exists() {
                Ok(p)
            } else {
                Err(GenerateError(format!(
                    "no --model given and the default model is missing; run tools/fetch.sh smollm2 (expected {})",
                    p.display()
                )))
            }
        }
    }
}

fn prompt_ids(tok: &Tokenizer, args: &GenerateArgs) -> Result<Vec<u32>, GenerateError> {
    let text = if args.chat {
        let tpl = tok.chat_template().ok_or_else(|| GenerateError("--chat: the model has no chat template".into()))?;
        let piece = |id: Option<u32>| id.and_then(|i| tok.token_text(i).ok()).unwrap_or_default();
        let msgs = [ChatMessage::new("user", args.prompt.as_str())];
        apply_chat_template(tpl, &msgs, true, &piece(tok.bos()), &piece(tok.eos()))?
    } else {
        args.prompt.clone()
    };
    Ok(tok.encode_with(&text, true, true)?)
}

/// Run generation, streaming tokens to stdout; returns the final text to print (the stats
/// line goes to stderr; with `json`, the JSON object).
pub fn generate(args: &GenerateArgs, path: &Path, json: bool) -> Result<String, GenerateError> {
    let file = GgufFile::open(path)?;
    let tok = Tokenizer::from_gguf(&file)?;
    let mut opts = CompileOptions::default().with_quantized_activations(args.fast);
    opts.threads = args.threads;
    let mut model = LlamaModel::from_gguf(&file, opts)?;
    model.set_kv_dtype(args.kv_type.into());
    drop(file);
    let ids = prompt_ids(&tok, args)?;
    let cfg = SamplerConfig {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        seed: args.seed,
        ..SamplerConfig::default()
    };
    let mut sampler = Sampler::try_new(cfg)?;
    let ctx = model.config().context_length;
    if ids.len() > ctx {
        return Err(GenerateError(format!("the prompt has {} tokens, more than the context of {ctx}", ids.len())));
    }
    // Compile every bucket up front so the tokens/s below measure running, not compiling.
    let n = ids.len().max(1);
    let compile_secs = model.prepare(1, n, (n + args.max_tokens).min(ctx))?;
    let stop_tokens = if args.ignore_eos { vec![] } else { tok.stop_tokens() };
    let gen_opts = GenerateOptions { max_tokens: args.max_tokens, stop_tokens };
    let mut stream = StreamDecoder::new(&tok);
    let mut out = std::io::stdout().lock();
    let mut text = String::new();
    let mut io_err = None;
    let stats = Generator::new(&mut model).generate(
        &ids,
        &gen_opts,
        |logits, history| sampler.sample(logits, history),
        |id| {
            if let Ok(Some(piece)) = stream.push(id) {
                text.push_str(&piece);
                if let Err(e) = out.write_all(piece.as_bytes()).and_then(|_| out.flush()) {
                    io_err = Some(e);
                    return false;
                }
            }
            true
        },
    )?;
    if let Some(rest) = stream.finish() {
        text.push_str(&rest);
        let _ = out.write_all(rest.as_bytes());
    }
    if let Some(e) = io_err {
        // A closed stdout (`rlx generate | head`) ends quietly, as every other subcommand.
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return Ok(String::new());
        }
        return Err(e.into());
    }
    let _ = writeln!(out);
    eprintln!(
        "prompt: {} tokens, {:.1} tok/s | generated: {} tokens, {:.1} tok/s",
        stats.prompt_tokens,
        stats.prompt_tokens_per_s(),
        stats.tokens.len(),
        stats.gen_tokens_per_s()
    );
    if !json {
        return Ok(String::new());
    }
    let j = serde_json::json!({
        "model": path.display().to_string(),
        "mode": if args.fast { "fast" } else { "exact" },
        "kv_type": if args.kv_type == KvType::F16 { "f16" } else { "f32" },
        "prompt_tokens": stats.prompt_tokens,
        "tokens": stats.tokens,
        "text": text,
        "prompt_tokens_per_s": stats.prompt_tokens_per_s(),
        "gen_tokens_per_s": stats.gen_tokens_per_s(),
        "prompt_secs": stats.prompt_secs,
        "gen_secs": stats.gen_secs,
        "compile_secs": compile_secs,
    });
    Ok(format!("{j}\n"))
}
