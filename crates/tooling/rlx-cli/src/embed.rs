//! `rlx embed --model DIR_OR_ONNX [--tokenizer tokenizer.json] SENTENCE... [--json]`: sentence
//! embeddings from a BERT-style encoder.
//!
//! The model is read first (a corrupt one is named before a missing tokenizer). Sentences are
//! tokenized with the model's `tokenizer.json` (rlx-text, `[CLS] … [SEP]`), truncated as
//! sentence-transformers does: to `max_seq_length` of a `sentence_bert_config.json` beside the
//! model (else beside the tokenizer), capped by the model's `max_position_embeddings` when
//! known, else to the tokenizer.json's own `truncation`; then padded with id 0 to the longest
//! and run as one batch through either
//! - a Hugging Face BERT directory (`config.json` + `model.safetensors`, built by
//!   `rlx_models::BertModel`; its `model.safetensors` may be given instead), or
//! - an `.onnx` encoder with inputs among `input_ids`, `attention_mask`, `token_type_ids`
//!   (int64 `[batch, seq]`), whose first `[batch, seq, H]` output is the last hidden state;
//!
//! then mean-pooled over the attention mask and L2-normalized
//! (`rlx_models::bert::mean_pool_normalize`). Prints one line per sentence (`H` values), or
//! with `--json` one object `{"model", "dim", "tokens", "embeddings"}`. Any other file (a GGUF,
//! say) is named in the error rather than parsed as ONNX.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::error::{CliError, Format, err, known_format};

use rlx_ir::Tensor;
use rlx_models::BertModel;
use rlx_models::bert::mean_pool_normalize;
use rlx_onnx::ImportOptions;
use rlx_onnx::proto::ModelProto;
use rlx_runtime::{CompileOptions, Device, Session};
use serde_json::json;

/// What `rlx embed` was asked for.
pub struct EmbedArgs {
    /// A BERT directory (config.json + model.safetensors) or an `.onnx` file.
    pub model: PathBuf,
    /// `tokenizer.json`; default: the one in the model's directory.
    pub tokenizer: Option<PathBuf>,
    /// The sentences.
    pub sentences: Vec<String>,
    /// Worker threads (default: all cores).
    pub threads: Option<std::num::NonZeroUsize>,
}

fn tokenizer_path(a: &EmbedArgs) -> Result<PathBuf, CliError> {
    if let Some(t) = &a.tokenizer {
        // A directory was "tokenizer.json (DIR): Is a directory (os error 21)".
        if t.is_dir() {
            let inside = t.join("tokenizer.json");
            let hint =
                if inside.is_file() { format!(" (its tokenizer.json is {})", inside.display()) } else { String::new() };
            return Err(err(format!("--tokenizer {} is a directory, not a tokenizer.json file{hint}", t.display())));
        }
        return Ok(t.clone());
    }
    let p = model_dir(a).join("tokenizer.json");
    if p.exists() {
        Ok(p)
    } else {
        Err(err(format!("no tokenizer.json next to the model: pass --tokenizer PATH (looked for {})", p.display())))
    }
}

/// Run the ONNX encoder `m` (read from `a.model`) on padded ids / mask `[b, s]`; returns its
/// last hidden state.
fn onnx_hidden(
    a: &EmbedArgs,
    m: &ModelProto,
    opts: &CompileOptions,
    ids: &[i64],
    mask: &[i64],
    b: usize,
) -> Result<Tensor, CliError> {
    let s = ids.len() / b;
    let names: Vec<String> =
        m.graph.as_ref().map(|g| g.input.iter().map(|i| i.name().to_string()).collect()).unwrap_or_default();
    let inits: Vec<String> =
        m.graph.as_ref().map(|g| g.initializer.iter().map(|i| i.name().to_string()).collect()).unwrap_or_default();
    let mut feeds: Vec<(String, Tensor)> = vec![];
    for n in names.iter().filter(|n| !inits.contains(n)) {
        let v = match n.as_str() {
            "input_ids" => ids.to_vec(),
            "attention_mask" => mask.to_vec(),
            "token_type_ids" => vec![0; b * s],
            other => {
                return Err(err(format!("model input {other:?} is none of input_ids, attention_mask, token_type_ids")));
            }
        };
        feeds.push((n.clone(), Tensor::from_vec(v, &[b, s])?));
    }
    let shapes: HashMap<String, Vec<usize>> = feeds.iter().map(|(n, _)| (n.clone(), vec![b, s])).collect();
    let base_dir = a.model.parent().map(Path::to_path_buf);
    let im = rlx_onnx::import(m, &ImportOptions { input_shapes: shapes, base_dir, ..Default::default() })?;
    let mut compiled = Session::try_new(Device::Cpu)?.try_compile_with(im.graph, opts)?;
    let refs: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let outs = compiled.run_tensors(&refs)?;
    let k = outs
        .iter()
        .position(|t| t.shape().len() == 3 && t.shape()[..2] == [b, s])
        .ok_or_else(|| err(format!("no output of shape [{b}, {s}, H] (outputs: {})", im.outputs.join(", "))))?;
    Ok(outs[k].cast(rlx_ir::DType::F32))
}

/// The model's directory: `--model` itself, or the directory of the file it names.
fn model_dir(a: &EmbedArgs) -> &Path {
    if a.model.is_dir() { a.model.as_path() } else { a.model.parent().unwrap_or(Path::new(".")) }
}

/// An integer `key` of the JSON file `path`, if the file exists; a file that does not parse,
/// or whose `key` is not a positive integer, is an error naming it.
fn json_usize(path: &Path, key: &str) -> Result<Option<usize>, CliError> {
    let Ok(text) = std::fs::read_to_string(path) else { return Ok(None) };
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| err(format!("{}: invalid JSON: {e}", path.display())))?;
    match v.get(key) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(x) => match x.as_u64().filter(|&n| n > 0) {
            Some(n) => Ok(Some(n as usize)),
            None => Err(err(format!("{}: {key} is {x}, not a positive integer", path.display()))),
        },
    }
}

/// sentence-transformers' `max_seq_length` from a `sentence_bert_config.json` beside the model
/// (else beside the tokenizer), capped by the model's `max_position_embeddings` (`positions`,
/// when known). `None` when there is no such file: the tokenizer.json's own truncation holds.
fn max_seq_length(a: &EmbedArgs, tokenizer: &Path, positions: Option<usize>) -> Result<Option<usize>, CliError> {
    let tok_dir = tokenizer.parent().unwrap_or(Path::new("."));
    for dir in [model_dir(a), tok_dir] {
        if let Some(n) = json_usize(&dir.join("sentence_bert_config.json"), "max_seq_length")? {
            return Ok(Some(positions.map_or(n, |p| n.min(p))));
        }
    }
    Ok(None)
}

/// What `rlx embed --model` reads, for its errors.
const EXPECTED: &str = "a BERT directory (config.json + model.safetensors) or an .onnx encoder";

/// What `--model` names.
enum Source {
    /// A Hugging Face BERT directory.
    Dir(PathBuf),
    /// An ONNX encoder file.
    Onnx,
}

/// The loaded `--model`.
enum Model {
    /// A BERT encoder built from a Hugging Face directory.
    Bert(Box<BertModel>),
    /// A decoded ONNX encoder.
    Onnx(Box<ModelProto>),
}

/// Resolve `--model`: a directory, an `.onnx` file, or a BERT directory's `model.safetensors` or
/// `config.json` (taken as its directory); any other format is named in the error.
fn source(model: &Path) -> Result<Source, CliError> {
    let needs = format!("rlx embed needs {EXPECTED}");
    if model.is_dir() {
        if !model.join("config.json").exists() {
            return Err(err(format!("is a directory without a config.json, but {needs}")));
        }
        return Ok(Source::Dir(model.to_path_buf()));
    }
    let json = model.extension().is_some_and(|e| e.eq_ignore_ascii_case("json"));
    match known_format(model)? {
        // A BERT directory's config.json stands for its directory, as its model.safetensors
        // does; another JSON file is not an encoder (rather than "malformed ONNX protobuf").
        None if json => match model.parent() {
            Some(dir) if dir.join("config.json").exists() && dir.join("model.safetensors").exists() => {
                Ok(Source::Dir(dir.to_path_buf()))
            }
            _ => Err(err(format!("is a JSON file, but {needs}"))),
        },
        Some(Format::Onnx) | None => Ok(Source::Onnx),
        Some(Format::Safetensors) => match model.parent() {
            Some(dir) if dir.join("config.json").exists() => Ok(Source::Dir(dir.to_path_buf())),
            _ => Err(err(format!("is a safetensors file without a config.json beside it, but {needs}"))),
        },
        Some(Format::Gguf) => Err(err(format!("is a GGUF file, but {needs} (rlx generate runs GGUF LLMs)"))),
        Some(f) => Err(err(format!("is {}, but {needs}", f.describe()))),
    }
}

/// Compute the embeddings; returns the text to print.
pub fn embed(a: &EmbedArgs, json_out: bool) -> Result<String, CliError> {
    if a.sentences.is_empty() {
        return Err(err("no sentences given"));
    }
    let source = source(&a.model)?;
    let mut opts = CompileOptions::default();
    if let Some(t) = crate::threads_in_use(a.threads) {
        opts = opts.with_threads(t);
    }
    // The model is read before the tokenizer is looked for, so a corrupt model is named as
    // such rather than hidden behind a missing tokenizer.json.
    let model = match source {
        Source::Dir(dir) => Model::Bert(Box::new(BertModel::from_hf_dir(&dir, opts.clone())?)),
        Source::Onnx => {
            Model::Onnx(Box::new(crate::error::load_onnx(&a.model, &format!("rlx embed needs {EXPECTED}"), EXPECTED)?))
        }
    };
    let positions = match &model {
        Model::Bert(m) => Some(m.config().max_positions),
        Model::Onnx(_) => json_usize(&model_dir(a).join("config.json"), "max_position_embeddings")?,
    };
    let tok_path = tokenizer_path(a)?;
    let mut tok = rlx_text::Tokenizer::from_tokenizer_json(&tok_path)?;
    if let Some(n) = max_seq_length(a, &tok_path, positions)? {
        tok.set_max_length(Some(n))?;
    }
    let toks = a.sentences.iter().map(|s| tok.encode(s, true)).collect::<Result<Vec<_>, _>>()?;
    let vectors = match model {
        Model::Bert(mut m) => m.embed(&toks)?,
        Model::Onnx(m) => {
            let (b, s) = (toks.len(), toks.iter().map(Vec::len).max().unwrap_or(0));
            let (mut ids, mut mask) = (vec![0i64; b * s], vec![0i64; b * s]);
            for (i, t) in toks.iter().enumerate() {
                for (j, &id) in t.iter().enumerate() {
                    ids[i * s + j] = id as i64;
                    mask[i * s + j] = 1;
                }
            }
            mean_pool_normalize(&onnx_hidden(a, &m, &opts, &ids, &mask, b)?, &mask)?
        }
    };
    let dim = vectors.first().map_or(0, Vec::len);
    if json_out {
        let obj = json!({
            "model": a.model.display().to_string(),
            "dim": dim,
            "tokens": toks.iter().map(Vec::len).collect::<Vec<_>>(),
            "embeddings": vectors,
        });
        return Ok(format!("{obj}\n"));
    }
    let mut out = String::new();
    for v in &vectors {
        let row: Vec<String> = v.iter().map(|&x| fixed6(x)).collect();
        out += &row.join(" ");
        out.push('\n');
    }
    Ok(out)
}

/// `x` with 6 decimals, as printed by `rlx embed`; a value that rounds to zero prints as
/// `0.000000` whatever its sign (`-0.0`, or `-1e-9`, printed `-0.000000`).
fn fixed6(x: f32) -> String {
    let s = format!("{x:.6}");
    match s.strip_prefix('-') {
        Some(rest) if rest == "0.000000" => rest.to_string(),
        _ => s,
    }
}

#[cfg(test)]
mod tests {
    use super::fixed6;

    #[test]
    fn zero_prints_without_a_sign() {
        assert_eq!(fixed6(-0.0), "0.000000");
        assert_eq!(fixed6(-1e-9), "0.000000");
        assert_eq!(fixed6(0.0), "0.000000");
        assert_eq!(fixed6(-0.000002), "-0.000002");
        assert_eq!(fixed6(-0.25), "-0.250000");
        assert_eq!(fixed6(0.125), "0.125000");
    }
}
