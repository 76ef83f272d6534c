//! `rlx generate`: text generation with a Llama-family GGUF model, streamed to stdout.
//!
//! The prompt is tokenized as llama.cpp does (`common_tokenize(prompt, add_special = true,
//! parse_special = true)`: BOS only where the GGUF's `add_bos_token` says so); `--chat` wraps
//! it in the GGUF's chat template as one user message with the generation prompt. Tokens are
//! printed as they are sampled; then one line on stderr gives the prompt-processing and
//! generation speeds, and with `--json` the last stdout line is a JSON object with `tokens`,
//! `text`, `prompt_tokens`, `prompt_tokens_per_s`, `gen_tokens_per_s`.

use rlx_gguf::GgufFile;
use rlx_models::{GenerateOptions, Generator, LlamaModel};
use rlx_runtime::CompileOptions;
use rlx_text::{ChatMessage, Sampler, SamplerConfig, StreamDecoder, Tokenizer, apply_chat_template};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Options of `rlx generate` (clap fills them in main.rs).
#[derive(Clone, Debug)]
pub struct GenerateArgs {
    /// GGUF file; `None` = the default model in the cache.
    pub model: Option<PathBuf>,
    /// Prompt text.
    pub prompt: String,
    /// Apply the GGUF's chat template.
    pub chat: bool,
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Sampling temperature (`<= 0` = greedy).
    pub temperature: f32,
    /// Top-k (`<= 0` disables).
    pub top_k: i32,
    /// Top-p (`1.0` disables).
    pub top_p: f32,
    /// RNG seed.
    pub seed: u64,
    /// Worker threads (`None` = all cores).
    pub threads: Option<usize>,
    /// Keep generating past end-of-generation tokens (as llama.cpp's `--ignore-eos`).
    pub ignore_eos: bool,
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
    let opts = match args.threads {
        Some(n) => CompileOptions::default().with_threads(n),
        None => CompileOptions::default(),
    };
    let mut model = LlamaModel::from_gguf(&file, opts)?;
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
