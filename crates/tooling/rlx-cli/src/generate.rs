//! `rlx generate`: text generation with a Llama-family GGUF model, streamed to stdout.
//!
//! The prompt is tokenized as llama.cpp does (`common_tokenize(prompt, add_special = true,
//! parse_special = true)`: BOS only where the GGUF's `add_bos_token` says so; an empty prompt is
//! then the BOS alone, and refused on a model without one, as llama.cpp); `--chat` wraps
//! it in the GGUF's chat template as one user message with the generation prompt. Tokens are
//! printed as they are sampled; then one line on stderr gives the prompt-processing and
//! generation speeds and why generation stopped (`--max-tokens`, an end-of-generation token,
//! or the context limit, which gets a note), and with `--json` the last stdout line is a JSON
//! object with `tokens`, `text`, `stop`, `prompt_tokens`, `prompt_tokens_per_s`,
//! `gen_tokens_per_s` (null when fewer than 2 tokens were generated: the first token comes
//! from the prompt's logits, so there is no decode step to time).

use clap::{Args, ValueEnum};
use rlx_gguf::GgufFile;
use rlx_models::{
    GenerateOptions, GenerationStats, Generator, KvCacheDtype, LlamaConfig, LlamaModel, OpTime, Phase, Weights,
};
use rlx_runtime::CompileOptions;
use rlx_text::{ChatMessage, Sampler, SamplerConfig, StreamDecoder, TextError, Tokenizer, apply_chat_template};
use std::io::Write;
use std::num::NonZeroUsize;
use std::path::{Path, PathBuf};

use crate::error::{CliError, Format, err, require_format, stdout_error};

/// Options of `rlx generate`.
#[derive(Args, Clone, Debug)]
pub struct GenerateArgs {
    /// GGUF model (default: SmolLM2-135M-Instruct from the cache; `tools/fetch.sh smollm2`)
    #[arg(long)]
    pub model: Option<PathBuf>,
    /// Prompt text (tokenized as llama.cpp does). An empty prompt is the BOS token alone on a
    /// model that adds one; a model that adds none (`add_bos_token` false, e.g. SmolLM2) has
    /// nothing to start from and refuses it, as llama.cpp does
    #[arg(long, default_value = "The capital of France is")]
    pub prompt: String,
    /// Wrap the prompt in the model's chat template as one user message
    #[arg(long)]
    pub chat: bool,
    /// Most tokens to generate (0: load the model, tokenize the prompt and stop; nothing is
    /// compiled or run, as llama.cpp's -n 0)
    #[arg(long, default_value_t = 64, allow_hyphen_values = true, value_parser = parse_max_tokens)]
    pub max_tokens: usize,
    /// Context size in tokens, prompt included (default: the model's; at most the model's).
    /// Generation stops with a note when it is full
    #[arg(long, value_name = "N", value_parser = crate::parse_count::<usize>)]
    pub ctx_size: Option<usize>,
    /// Sampling temperature, a finite number; 0 (or below) = greedy
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true, value_parser = parse_temperature)]
    pub temperature: f32,
    /// Top-k (0 or below disables)
    #[arg(long, default_value_t = 40, allow_hyphen_values = true)]
    pub top_k: i32,
    /// Top-p, in (0, 1] (1.0 disables)
    #[arg(long, default_value_t = 0.95, allow_hyphen_values = true, value_parser = parse_top_p)]
    pub top_p: f32,
    /// RNG seed
    #[arg(long, default_value_t = 0, allow_hyphen_values = true, value_parser = parse_seed)]
    pub seed: u64,
    /// Worker threads, at least 1, at most the cores (default: all cores)
    #[arg(long, value_parser = crate::parse_threads)]
    pub threads: Option<NonZeroUsize>,
    /// Keep generating past end-of-generation tokens (as llama.cpp's --ignore-eos)
    #[arg(long)]
    pub ignore_eos: bool,
    /// Fast mode: Q8_0-quantized activations inside the quantized matmuls, as llama.cpp
    /// (default: exact f32 activations, parity with the fp64 reference over the dequantized weights)
    #[arg(long)]
    pub fast: bool,
    /// Element type of the KV cache (f16 halves its memory)
    #[arg(long, value_enum, default_value_t = KvType::F32)]
    pub kv_type: KvType,
    /// Time every step and print where prompt processing and generation spent their time, per
    /// op (with a quantized product's weight type) and kernel, to stderr (and as `profile` in
    /// the --json object)
    #[arg(long)]
    pub profile: bool,
}

// The sampler's flags are checked as clap parses them, so a bad value is a usage error (status
// 2) before any file is read. `allow_hyphen_values` lets a value such as `-nan` reach the check
// (clap took it for flags, `-n` …, as it knows only digits as negative numbers).

/// `--temperature`: a finite number (`inf` was accepted); at or below 0 it is greedy, as
/// llama.cpp's.
fn parse_temperature(s: &str) -> Result<f32, String> {
    let t: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if !t.is_finite() {
        Err("must be a finite number (0 or below is greedy)".into())
    } else if !(t as f32).is_finite() {
        Err(format!("{s} is beyond f32's range (the sampler's type)"))
    } else {
        Ok(t as f32)
    }
}

/// A whole number, 0 or more; a negative one (llama.cpp's `-1` spellings) gets `neg`, what to
/// give instead (clap's own message for it was `invalid digit found in string`), and one past
/// 64 bits says so.
fn non_negative<T: std::str::FromStr>(s: &str, neg: &str) -> Result<T, String> {
    match s.parse::<i64>() {
        Ok(n) if n < 0 => Err(format!("must be 0 or more ({neg})")),
        _ => s.parse::<T>().map_err(|_| {
            if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
                format!("{s} is too large (more than 64 bits)")
            } else {
                format!("{s:?} is not a whole number")
            }
        }),
    }
}

/// `--max-tokens`: llama.cpp users write `-n -1` for "until the context is full".
fn parse_max_tokens(s: &str) -> Result<usize, String> {
    non_negative(s, "for llama.cpp's -n -1, give a large number: generation stops with a note when the context is full")
}

/// `--seed`: llama.cpp's `-1`, a random seed, is not offered: a run is reproducible from its
/// flags.
fn parse_seed(s: &str) -> Result<u64, String> {
    non_negative(s, "every run is seeded: llama.cpp's -1, a random seed, is not offered")
}

/// `--top-p`: in (0, 1] (NaN fails the range test too), and not 0 once rounded to f32.
fn parse_top_p(s: &str) -> Result<f32, String> {
    let p: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if !(p > 0.0 && p <= 1.0) {
        Err("must be in (0, 1]".into())
    } else if p as f32 == 0.0 {
        Err(format!("{s} rounds to 0 in f32 (the sampler's type)"))
    } else {
        Ok(p as f32)
    }
}

/// `--kv-type` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum KvType {
    /// f32 (exact)
    F32,
    /// f16 (half the memory; with --fast, llama.cpp's default attention: f16 K/V, flash attention)
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

/// The model path `args` names (or the default), checked to exist.
pub fn model_path(args: &GenerateArgs) -> Result<PathBuf, CliError> {
    match &args.model {
        Some(p) => Ok(p.clone()),
        None => {
            let p = rlx_fetched::SMOLLM2_GGUF.path();
            if p.exists() {
                Ok(p)
            } else {
                Err(err(format!(
                    "no --model given and the default model is missing; run tools/fetch.sh smollm2 (expected {})",
                    p.display()
                )))
            }
        }
    }
}

/// The sampler settings of `args`, checked before any file is read (clap's parsers have
/// refused the bad values the flags can give; this is the sampler's own check of the rest),
/// naming a field as its flag: `--top-p`, not the sampler's `top_p`. (A `--ctx-size` beyond the
/// model's context needs the model and is checked in [`generate`].)
pub fn sampler_config(args: &GenerateArgs) -> Result<SamplerConfig, CliError> {
    let cfg = SamplerConfig {
        temperature: args.temperature,
        top_k: args.top_k,
        top_p: args.top_p,
        seed: args.seed,
        ..SamplerConfig::default()
    };
    cfg.validate().map_err(|e| match e {
        // Every field this command sets has a flag of the same name (`top_p` is `--top-p`);
        // the fields it leaves at their defaults are valid.
        TextError::Sampler { setting, must, value } => {
            err(format!("--{} must be {must}, got {value}", setting.replace('_', "-")))
        }
        e => e.into(),
    })?;
    Ok(cfg)
}

fn prompt_ids(tok: &Tokenizer, args: &GenerateArgs) -> Result<Vec<u32>, CliError> {
    let text = if args.chat {
        let tpl = tok.chat_template().ok_or_else(|| err("--chat: the model has no chat template"))?;
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
pub fn generate(args: &GenerateArgs, path: &Path, json: bool) -> Result<String, CliError> {
    let sampler_cfg = sampler_config(args)?;
    let needs = "rlx generate needs a Llama-family GGUF (rlx run runs ONNX models; rlx embed, BERT encoders)";
    require_format(path, &[Format::Gguf], needs, "a GGUF model, .gguf")?;
    let file = GgufFile::open(path)?;
    // llama.cpp's ggml-vocab-*.gguf hold a tokenizer and hyperparameters but no tensors: say
    // so, rather than name the first weight that is missing.
    if file.tensors().is_empty() {
        return Err(err("has no model weights (0 tensors): a tokenizer/vocabulary-only GGUF (as llama.cpp's \
             ggml-vocab-*.gguf); rlx generate needs a model GGUF"));
    }
    // The architecture first: a GGUF of another kind of model is named as such, not as a
    // missing tokenizer key.
    let mut cfg = LlamaConfig::from_gguf(&file)?;
    let tok = Tokenizer::from_gguf(&file)?;
    // As llama.cpp's completion tool: the prompt tokenizes to [BOS] alone where the model adds
    // a BOS (generation continues from it), and to nothing where it adds none, which llama.cpp
    // refuses ("input is empty"). Starting such a model from its BOS anyway (SmolLM2's is
    // `<|im_start|>`) would be a prompt the user did not give. Checked before the weights load.
    let ids = prompt_ids(&tok, args)?;
    if ids.is_empty() {
        return Err(err(
            "the prompt is empty and this model adds no BOS token (add_bos_token = false), so there is no \
             token to start from; give a non-empty --prompt (llama.cpp refuses it too: \"input is empty\")",
        ));
    }
    let bos_only = args.prompt.is_empty() && !args.chat && ids.len() == 1;
    match args.ctx_size {
        Some(n) if n > cfg.context_length => {
            return Err(err(format!("--ctx-size {n} is more than the model's context of {}", cfg.context_length)));
        }
        Some(n) => cfg.context_length = n,
        None => {}
    }
    let ctx = cfg.context_length;
    if ids.len() > ctx {
        // The subject of the line is the model file: say that the context is the one it runs with.
        let from = if args.ctx_size.is_some() { "set by --ctx-size" } else { "the model's context_length" };
        return Err(err(format!(
            "the prompt has {} tokens, more than the context of {ctx} this model runs with ({from})",
            ids.len()
        )));
    }
    let mut opts = CompileOptions::default().with_quantized_activations(args.fast);
    opts.threads = crate::threads_in_use(args.threads);
    opts.profile = args.profile;
    // The mode the model runs in: `--fast`, or the `RLX_QUANTIZED_ACTIVATIONS=1` override.
    let fast = opts.clone().with_env_overrides().quantized_activations;
    let weights = Weights::from_gguf(&file, &cfg)?;
    let mut model = LlamaModel::new(cfg, weights, opts)?;
    model.set_kv_dtype(args.kv_type.into());
    drop(file);
    let mut sampler = Sampler::new(sampler_cfg);
    // Compile every bucket up front so the tokens/s below measure running, not compiling.
    // `--max-tokens 0` runs nothing, as llama.cpp's `-n 0` (the model is loaded, the prompt
    // tokenized, nothing decoded), so nothing is compiled either: compiling the prompt's graph
    // was most of its time.
    let n = ids.len().max(1);
    let compile_secs = if args.max_tokens == 0 { 0.0 } else { model.prepare(1, n, (n + args.max_tokens).min(ctx))? };
    let stop_tokens = if args.ignore_eos { vec![] } else { tok.stop_tokens() };
    let gen_opts = GenerateOptions { max_tokens: args.max_tokens, stop_tokens: stop_tokens.clone() };
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
        if io_err.is_none() {
            io_err = out.write_all(rest.as_bytes()).err();
        }
    }
    if io_err.is_none() && !text.is_empty() {
        io_err = writeln!(out).and_then(|_| out.flush()).err();
    }
    if let Some(e) = io_err {
        // A closed stdout (`rlx generate | head`) ends quietly, as every other subcommand; any
        // other failed write is said as such (it was printed as an error of the model file).
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            return Ok(String::new());
        }
        return Err(stdout_error(e));
    }
    let stop = Stop::of(&stats.tokens, args.max_tokens, &stop_tokens);
    eprintln!("{}", stats_line(&stats, stop, ctx, bos_only));
    let profile = if args.profile { model.profile().unwrap_or_default() } else { vec![] };
    if args.profile {
        let runs = |phase| model.profile_runs(phase).unwrap_or(0);
        eprint!("{}", profile_table(&profile, &stats, [runs(Phase::Prompt), runs(Phase::Generation)]));
    }
    if !json {
        return Ok(String::new());
    }
    let gen_rate = (stats.tokens.len() >= 2).then(|| stats.gen_tokens_per_s());
    let mut j = serde_json::json!({
        "model": path.display().to_string(),
        "mode": if fast { "fast" } else { "exact" },
        "kv_type": if args.kv_type == KvType::F16 { "f16" } else { "f32" },
        "context": ctx,
        "prompt_tokens": stats.prompt_tokens,
        "tokens": stats.tokens,
        "text": text,
        "stop": stop.name(),
        "prompt_tokens_per_s": (stats.prompt_secs > 0.0).then(|| stats.prompt_tokens_per_s()),
        "gen_tokens_per_s": gen_rate,
        "prompt_secs": stats.prompt_secs,
        "gen_secs": stats.gen_secs,
        "compile_secs": compile_secs,
    });
    if args.profile {
        j["profile"] = profile
            .iter()
            .map(|t| {
                serde_json::json!({
                    "phase": t.phase.name(),
                    "op": t.op,
                    "scheme": t.scheme,
                    "kernel": t.kernel,
                    "calls": t.calls,
                    "ms": (t.total.as_secs_f64() * 1e6).round() / 1e3,
                })
            })
            .collect();
    }
    Ok(format!("{j}\n"))
}

/// `--profile`'s report: per phase, each op and kernel's share of the phase's step time,
/// longest first (rows under 0.5% of a phase are summed into one line); a phase in which no
/// step ran is left out, except generation after a prompt, which says why it has no table (one
/// generated token comes from the prompt's logits, without a decode step).
/// `runs`: the graph runs of the prompt and of the generation phase.
fn profile_table(rows: &[OpTime], stats: &GenerationStats, runs: [u64; 2]) -> String {
    let mut s = String::new();
    for phase in [Phase::Prompt, Phase::Generation] {
        let rows: Vec<&OpTime> = rows.iter().filter(|r| r.phase == phase).collect();
        let total: f64 = rows.iter().map(|r| r.total.as_secs_f64()).sum();
        if rows.is_empty() || total <= 0.0 {
            if phase == Phase::Generation && !s.is_empty() {
                s += "profile, generation: no decode step ran (the first generated token comes from the prompt's logits; pass --max-tokens 2 or more to time decode steps)\n";
            }
            continue;
        }
        // Graph runs of the phase (the model counts them), so `calls` reads per run.
        let (what, wall, runs, unit) = match phase {
            Phase::Prompt => ("prompt processing", stats.prompt_secs, runs[0], "graph run"),
            Phase::Generation => ("generation", stats.gen_secs, runs[1], "decode step"),
        };
        let plural = if runs == 1 { "" } else { "s" };
        s += &format!(
            "profile, {what}: {:.1} ms in graph steps of {:.1} ms wall, {runs} {unit}{plural} (% = share of the steps)\n       ms        %     calls  op  [kernel]\n",
            total * 1e3,
            wall * 1e3,
        );
        let mut rest = (0.0, 0u64, 0usize);
        for r in rows {
            let t = r.total.as_secs_f64();
            if t < 0.005 * total {
                rest = (rest.0 + t, rest.1 + r.calls, rest.2 + 1);
                continue;
            }
            // A product's weight type after its op: `dequant_matmul Q6_K  [kernel]`.
            let op = match &r.scheme {
                Some(s) => format!("{} {s}", r.op),
                None => r.op.clone(),
            };
            s += &format!("{:9.2} {:7.1}% {:9}  {op}  [{}]\n", t * 1e3, 100.0 * t / total, r.calls, r.kernel);
        }
        if rest.2 > 0 {
            s += &format!(
                "{:9.2} {:7.1}% {:9}  ({} more op [kernel] rows, each under 0.5%)\n",
                rest.0 * 1e3,
                100.0 * rest.0 / total,
                rest.1,
                rest.2
            );
        }
    }
    s
}

/// Why generation ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stop {
    /// `--max-tokens` tokens were generated (or it was 0).
    MaxTokens,
    /// An end-of-generation token was generated.
    EndToken,
    /// The context (prompt + generated) was full.
    Context,
}

impl Stop {
    /// The generator stops for exactly these three reasons (a closed stdout returns earlier).
    /// An end token that is also the last allowed token is the end token: the model finished.
    fn of(tokens: &[u32], max_tokens: usize, stop_tokens: &[u32]) -> Stop {
        if tokens.last().is_some_and(|t| stop_tokens.contains(t)) {
            Stop::EndToken
        } else if tokens.len() >= max_tokens {
            Stop::MaxTokens
        } else {
            Stop::Context
        }
    }
    fn name(self) -> &'static str {
        match self {
            Stop::MaxTokens => "max_tokens",
            Stop::EndToken => "end_token",
            Stop::Context => "context",
        }
    }
}

/// The stderr summary: speeds (only those that were measured) and a note when the context
/// limit ended generation.
fn stats_line(stats: &GenerationStats, stop: Stop, ctx: usize, bos_only: bool) -> String {
    let n = stats.tokens.len();
    // An empty --prompt that counts 1 token says which one.
    let p = if bos_only {
        format!("{} token (the BOS; --prompt is empty)", stats.prompt_tokens)
    } else if stats.prompt_tokens == 1 {
        "1 token".to_string()
    } else {
        format!("{} tokens", stats.prompt_tokens)
    };
    let mut line = if n == 0 {
        format!("prompt: {p} | generated: 0 tokens")
    } else if n == 1 {
        format!("prompt: {p}, {:.1} tok/s | generated: 1 token", stats.prompt_tokens_per_s())
    } else {
        format!(
            "prompt: {p}, {:.1} tok/s | generated: {n} tokens, {:.1} tok/s",
            stats.prompt_tokens_per_s(),
            stats.gen_tokens_per_s()
        )
    };
    if stop == Stop::Context {
        let last =
            if n == 1 { "the one generated token".to_string() } else { format!("the last of the {n} generated") };
        line += &format!(
            "\nnote: stopped at the context limit of {ctx} token{} ({} prompt + {} generated fill it; {last} was \
             never fed back, so it needs no slot); raise --ctx-size (up to the model's context) or shorten the prompt",
            if ctx == 1 { "" } else { "s" },
            stats.prompt_tokens,
            n.saturating_sub(1)
        );
    }
    line
}
