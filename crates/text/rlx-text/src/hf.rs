//! `tokenizer.json` via the `tokenizers` crate, plus BOS/EOS and the chat template from a
//! `tokenizer_config.json` beside it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::TextError;
use crate::tokenizer::out_of_range;
use crate::vocab::TokenType;

pub(crate) struct HfTokenizer {
    tok: tokenizers::Tokenizer,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub eog: BTreeSet<u32>,
    pub chat_template: Option<String>,
    byte_level: bool,
}

impl std::fmt::Debug for HfTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HfTokenizer").field("vocab_size", &self.vocab_size()).finish_non_exhaustive()
    }
}

fn hf_err(path: &Path, e: impl std::fmt::Display) -> TextError {
    TextError::HfTokenizer { path: path.to_path_buf(), msg: e.to_string() }
}

/// A `tokenizer_config.json` token entry: a string or `{"content": ...}`.
fn token_str(v: Option<&serde_json::Value>) -> Option<String> {
    match v? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Object(o) => o.get("content")?.as_str().map(str::to_string),
        _ => None,
    }
}

impl HfTokenizer {
    pub fn from_file(path: &Path) -> Result<HfTokenizer, TextError> {
        // Checked here before the `tokenizers` crate sees the text: its error for a file that is
        // not a tokenizer.json at all is serde's bare "invalid type: sequence, expected struct
        // Tokenizer" (a BERT vocab.txt starting "[PAD]" reads as a JSON array).
        let not_hf = |why: String| TextError::NotHfTokenizer { path: path.to_path_buf(), why };
        let text = std::fs::read_to_string(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::InvalidData => not_hf("not UTF-8 text".into()),
            _ => hf_err(path, e),
        })?;
        let raw: serde_json::Value = serde_json::from_str(&text).map_err(|e| not_hf(format!("not JSON: {e}")))?;
        if !raw.get("model").is_some_and(serde_json::Value::is_object) {
            let what = if raw.is_object() { "a JSON object" } else { "JSON" };
            return Err(not_hf(format!("{what} without the \"model\" object of a tokenizer.json")));
        }
        let mut tok: tokenizers::Tokenizer = text.parse().map_err(|e| hf_err(path, e))?;
        // `encode` returns one text's tokens: a `padding` section (sentence-transformers files
        // pad to a fixed 128) is the batching caller's business, not the tokenizer's.
        tok.with_padding(None);
        let byte_level = raw.pointer("/decoder/type").and_then(|t| t.as_str()) == Some("ByteLevel");
        let cfg_path: PathBuf = path.with_file_name("tokenizer_config.json");
        let cfg: serde_json::Value = match std::fs::read_to_string(&cfg_path) {
            Ok(s) => serde_json::from_str(&s).map_err(|e| hf_err(&cfg_path, e))?,
            Err(_) => serde_json::Value::Null,
        };
        let id = |key: &str| token_str(cfg.get(key)).and_then(|s| tok.token_to_id(&s));
        let (bos, eos) = (id("bos_token"), id("eos_token"));
        let chat_template = cfg.get("chat_template").and_then(|t| t.as_str()).map(str::to_string);
        let mut eog: BTreeSet<u32> = eos.into_iter().collect();
        let mut eot = None;
        for t in ["<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>"] {
            if let Some(i) = tok.token_to_id(t) {
                eot.get_or_insert(i);
                eog.insert(i);
            }
        }
        Ok(HfTokenizer { tok, bos, eos, eot, eog, chat_template, byte_level })
    }

    pub fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>, TextError> {
        let enc = self.tok.encode(text, add_special).map_err(|e| hf_err(Path::new(""), e))?;
        Ok(enc.get_ids().to_vec())
    }

    pub fn max_length(&self) -> Option<usize> {
        self.tok.get_truncation().map(|t| t.max_length)
    }

    pub fn set_max_length(&mut self, max_length: Option<usize>) -> Result<(), TextError> {
        let t = max_length.map(|max_length| tokenizers::TruncationParams {
            max_length,
            ..self.tok.get_truncation().cloned().unwrap_or_default()
        });
        self.tok.with_truncation(t).map_err(|e| hf_err(Path::new(""), e))?;
        Ok(())
    }

    pub fn decode(&self, ids: &[u32], skip_special: bool) -> Result<String, TextError> {
        let n = self.vocab_size();
        if let Some(&bad) = ids.iter().find(|&&i| i as usize >= n) {
            return Err(out_of_range(bad, n));
        }
        self.tok.decode(ids, skip_special).map_err(|e| hf_err(Path::new(""), e))
    }

    pub fn vocab_size(&self) -> usize {
        self.tok.get_vocab_size(true)
    }

    pub fn token_text(&self, id: u32) -> Result<String, TextError> {
        self.tok.id_to_token(id).ok_or_else(|| out_of_range(id, self.vocab_size()))
    }

    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.tok.token_to_id(text)
    }

    fn is_special(&self, id: u32) -> bool {
        self.tok.get_added_tokens_decoder().get(&id).is_some_and(|t| t.special)
    }

    pub fn token_type(&self, id: u32) -> Result<TokenType, TextError> {
        self.token_text(id)?;
        Ok(if self.is_special(id) { TokenType::Control } else { TokenType::Normal })
    }

    pub fn piece(&self, id: u32, special: bool) -> Result<Vec<u8>, TextError> {
        let text = self.token_text(id)?;
        if self.is_special(id) {
            return Ok(if special { text.into_bytes() } else { Vec::new() });
        }
        if self.tok.get_added_tokens_decoder().contains_key(&id) {
            return Ok(text.into_bytes());
        }
        if self.byte_level {
            return Ok(text
                .chars()
                .flat_map(|c| match crate::bytes::char_to_byte(c) {
                    Some(b) => vec![b],
                    None => c.to_string().into_bytes(),
                })
                .collect());
        }
        if text.len() == 6
            && text.starts_with("<0x")
            && text.ends_with('>')
            && let Ok(b) = u8::from_str_radix(&text[3..5], 16)
        {
            return Ok(vec![b]);
        }
        Ok(text.replace('\u{2581}', " ").into_bytes())
    }
}
