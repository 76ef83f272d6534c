//! [`Tokenizer`]: a GGUF vocabulary tokenized with llama.cpp's semantics, or a Hugging Face
//! `tokenizer.json` run by the `tokenizers` crate.

use std::collections::BTreeSet;
use std::path::Path;

use rlx_gguf::{GgufContent, GgufFile};

use crate::hf::HfTokenizer;
use crate::vocab::{TokenType, Vocab, VocabKind};
use crate::{TextError, bpe, bytes, spm, wpm};

/// A tokenizer: text to token ids and back.
///
/// Built from a GGUF file's `tokenizer.ggml.*` metadata ([`Tokenizer::from_gguf`]; byte-level
/// BPE `gpt2` with the pre-tokenizer named by `tokenizer.ggml.pre`, SentencePiece `llama`,
/// `gemma4` BPE, WordPiece `bert`), following llama.cpp's `llama_tokenize` /
/// `llama_detokenize` exactly; or from a `tokenizer.json` ([`Tokenizer::from_tokenizer_json`]).
#[derive(Debug)]
pub struct Tokenizer {
    inner: Inner,
}

#[derive(Debug)]
enum Inner {
    Gguf(Box<Vocab>),
    Hf(Box<HfTokenizer>),
}

/// A piece of the input after special-token partitioning.
enum Fragment<'a> {
    Text(&'a str),
    Token(u32),
}

impl Tokenizer {
    /// The tokenizer stored in a GGUF file's metadata.
    ///
    /// Errors: [`TextError::UnknownModel`] / [`TextError::UnknownPreTokenizer`] for tokenizers
    /// this crate does not implement (the error names them), [`TextError::Metadata`] for a
    /// missing or mistyped `tokenizer.ggml.*` key.
    pub fn from_gguf(file: &GgufFile<'_>) -> Result<Tokenizer, TextError> {
        Self::from_gguf_content(file.content())
    }

    /// As [`Tokenizer::from_gguf`], from the parsed header alone.
    pub fn from_gguf_content(content: &GgufContent) -> Result<Tokenizer, TextError> {
        Ok(Tokenizer { inner: Inner::Gguf(Box::new(Vocab::from_gguf(content)?)) })
    }

    /// A Hugging Face `tokenizer.json`, run by the `tokenizers` crate. BOS/EOS and the chat
    /// template come from a `tokenizer_config.json` beside it when present.
    ///
    /// Errors: [`TextError::HfTokenizer`] when the file cannot be read or parsed.
    pub fn from_tokenizer_json(path: &Path) -> Result<Tokenizer, TextError> {
        Ok(Tokenizer { inner: Inner::Hf(Box::new(HfTokenizer::from_file(path)?)) })
    }

    /// Tokenize `text` as llama.cpp's `common_tokenize(text, add_special, parse_special = true)`:
    /// special tokens written in the text (e.g. `<|im_start|>` from a chat template) become their
    /// ids; with `add_special`, BOS/EOS are added where the vocabulary's `add_bos_token` /
    /// `add_eos_token` say so.
    pub fn encode(&self, text: &str, add_special: bool) -> Result<Vec<u32>, TextError> {
        self.encode_with(text, add_special, true)
    }

    /// llama.cpp's `llama_tokenize(text, add_special, parse_special)`. With `parse_special =
    /// false`, control tokens in the text are tokenized as plain text (user-defined tokens are
    /// still matched), as llama.cpp's tokenizer tests do.
    pub fn encode_with(&self, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<u32>, TextError> {
        match &self.inner {
            Inner::Hf(h) => h.encode(text, add_special),
            Inner::Gguf(v) => encode_gguf(v, text, add_special, parse_special),
        }
    }

    /// The most tokens [`Tokenizer::encode`] returns (special tokens included): a
    /// `tokenizer.json`'s `truncation.max_length`, or what [`Tokenizer::set_max_length`] set.
    /// `None`: no truncation (always for a GGUF vocabulary).
    pub fn max_length(&self) -> Option<usize> {
        match &self.inner {
            Inner::Hf(h) => h.max_length(),
            Inner::Gguf(_) => None,
        }
    }

    /// Truncate encodings to `max_length` tokens, special tokens included (the `tokenizers`
    /// crate's truncation, as sentence-transformers applies its `max_seq_length`); `None` turns
    /// truncation off. The strategy and stride of a `tokenizer.json`'s own `truncation`
    /// section are kept.
    ///
    /// Errors: [`TextError::HfTokenizer`] when `max_length` leaves no room beside the special
    /// tokens and stride; [`TextError::Unsupported`] for a GGUF vocabulary.
    pub fn set_max_length(&mut self, max_length: Option<usize>) -> Result<(), TextError> {
        match &mut self.inner {
            Inner::Hf(h) => h.set_max_length(max_length),
            Inner::Gguf(_) => {
                Err(TextError::Unsupported("truncation needs a tokenizer.json tokenizer, not a GGUF vocabulary".into()))
            }
        }
    }

    /// Token ids back to text: the concatenated pieces of [`Tokenizer::token_to_piece`]
    /// (control tokens are not rendered), invalid UTF-8 replaced by U+FFFD. As llama.cpp's
    /// `llama_detokenize(remove_special = false, unparse_special = false)`.
    ///
    /// Errors: [`TextError::TokenOutOfRange`].
    pub fn decode(&self, ids: &[u32]) -> Result<String, TextError> {
        Ok(String::from_utf8_lossy(&self.detokenize(ids, false, false)?).into_owned())
    }

    /// llama.cpp's `llama_detokenize`: with `remove_special`, a leading BOS and trailing EOS
    /// that the vocabulary adds are dropped; with `unparse_special`, control tokens are
    /// rendered as their text. SentencePiece vocabularies drop the first piece's leading space;
    /// BPE vocabularies with `clean_up_tokenization_spaces` apply its rules.
    pub fn detokenize(&self, ids: &[u32], remove_special: bool, unparse_special: bool) -> Result<Vec<u8>, TextError> {
        let v = match &self.inner {
            Inner::Hf(h) => return h.decode(ids, !unparse_special).map(String::into_bytes),
            Inner::Gguf(v) => v,
        };
        let mut ids = ids;
        let mut remove_space = v.add_space_prefix;
        if remove_special && v.add_bos && !ids.is_empty() && Some(ids[0]) == v.bos {
            remove_space = false;
            ids = &ids[1..];
        }
        if remove_special && v.add_eos && !ids.is_empty() && Some(ids[ids.len() - 1]) == v.eos {
            ids = &ids[..ids.len() - 1];
        }
        let mut out = Vec::new();
        for &id in ids {
            let piece = piece_gguf(v, id, unparse_special)?;
            let piece = if remove_space && piece.first() == Some(&b' ') { &piece[1..] } else { &piece[..] };
            out.extend_from_slice(piece);
            remove_space = false;
        }
        if v.pre.as_ref().is_some_and(|p| p.clean_spaces) {
            out = clean_spaces(&out);
        }
        Ok(out)
    }

    /// The raw bytes of one token, for streaming (may be part of a UTF-8 character; see
    /// [`crate::StreamDecoder`]). Control tokens give no bytes (llama.cpp's
    /// `token_to_piece(special = false)`).
    ///
    /// Errors: [`TextError::TokenOutOfRange`].
    pub fn token_to_piece(&self, id: u32) -> Result<Vec<u8>, TextError> {
        self.token_to_piece_with(id, false)
    }

    /// As [`Tokenizer::token_to_piece`]; with `special`, control tokens render as their text.
    pub fn token_to_piece_with(&self, id: u32, special: bool) -> Result<Vec<u8>, TextError> {
        match &self.inner {
            Inner::Hf(h) => h.piece(id, special),
            Inner::Gguf(v) => piece_gguf(v, id, special),
        }
    }

    /// The vocabulary's stored text of token `id` (GPT-2 byte characters, `▁` for spaces, ...).
    pub fn token_text(&self, id: u32) -> Result<String, TextError> {
        match &self.inner {
            Inner::Hf(h) => h.token_text(id),
            Inner::Gguf(v) => Ok(v.tokens.get(id as usize).ok_or_else(|| out_of_range(id, v.tokens.len()))?.clone()),
        }
    }

    /// The id of the token whose stored text is exactly `text`.
    pub fn token_id(&self, text: &str) -> Option<u32> {
        match &self.inner {
            Inner::Hf(h) => h.token_id(text),
            Inner::Gguf(v) => v.id(text),
        }
    }

    /// The token's type (GGUF `tokenizer.ggml.token_type`; `Normal` or `Control` for
    /// `tokenizer.json`).
    pub fn token_type(&self, id: u32) -> Result<TokenType, TextError> {
        match &self.inner {
            Inner::Hf(h) => h.token_type(id),
            Inner::Gguf(v) => v.types.get(id as usize).copied().ok_or_else(|| out_of_range(id, v.tokens.len())),
        }
    }

    /// Beginning-of-sequence token.
    pub fn bos(&self) -> Option<u32> {
        match &self.inner {
            Inner::Hf(h) => h.bos,
            Inner::Gguf(v) => v.bos,
        }
    }

    /// End-of-sequence token.
    pub fn eos(&self) -> Option<u32> {
        match &self.inner {
            Inner::Hf(h) => h.eos,
            Inner::Gguf(v) => v.eos,
        }
    }

    /// Padding token.
    pub fn pad(&self) -> Option<u32> {
        match &self.inner {
            Inner::Hf(_) => None,
            Inner::Gguf(v) => v.pad,
        }
    }

    /// End-of-turn token (`<|im_end|>`, `<|eot_id|>`, ...), from metadata or detected by text
    /// as llama.cpp does.
    pub fn eot(&self) -> Option<u32> {
        match &self.inner {
            Inner::Hf(h) => h.eot,
            Inner::Gguf(v) => v.eot,
        }
    }

    /// Every token that ends generation (llama.cpp's EOG set: EOS, EOT, EOM and end-of-turn
    /// markers found by text), ascending.
    pub fn stop_tokens(&self) -> Vec<u32> {
        self.eog_set().iter().copied().collect()
    }

    /// Whether `id` ends generation.
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog_set().contains(&id)
    }

    fn eog_set(&self) -> &BTreeSet<u32> {
        match &self.inner {
            Inner::Hf(h) => &h.eog,
            Inner::Gguf(v) => &v.eog,
        }
    }

    /// Whether [`Tokenizer::encode`] with `add_special` prepends BOS.
    pub fn add_bos(&self) -> bool {
        match &self.inner {
            Inner::Hf(_) => false,
            Inner::Gguf(v) => v.add_bos,
        }
    }

    /// Number of tokens.
    pub fn vocab_size(&self) -> usize {
        match &self.inner {
            Inner::Hf(h) => h.vocab_size(),
            Inner::Gguf(v) => v.tokens.len(),
        }
    }

    /// The chat template (`tokenizer.chat_template`, Jinja), if the model has one.
    pub fn chat_template(&self) -> Option<&str> {
        match &self.inner {
            Inner::Hf(h) => h.chat_template.as_deref(),
            Inner::Gguf(v) => v.chat_template.as_deref(),
        }
    }

    /// A short description: `spm`, `bpe(<pre>)`, `wpm` or `tokenizer.json`.
    pub fn kind(&self) -> String {
        match &self.inner {
            Inner::Hf(_) => "tokenizer.json".to_string(),
            Inner::Gguf(v) => match v.kind {
                VocabKind::Spm => "spm".to_string(),
                VocabKind::Wpm => "wpm".to_string(),
                VocabKind::Bpe => format!("bpe({})", v.pre.as_ref().map_or("default", |p| p.name.as_str())),
            },
        }
    }
}

pub(crate) fn out_of_range(id: u32, vocab_size: usize) -> TextError {
    TextError::TokenOutOfRange { id, vocab_size }
}

/// llama.cpp's `tokenizer_st_partition`: split out special tokens (longest first).
fn partition<'a>(v: &Vocab, text: &'a str, parse_special: bool) -> Vec<Fragment<'a>> {
    let mut frags = if text.is_empty() { vec![] } else { vec![Fragment::Text(text)] };
    for &id in &v.special_cache {
        let ty = v.types[id as usize];
        if !parse_special && matches!(ty, TokenType::Control | TokenType::Unknown) {
            continue;
        }
        let needle = v.tokens[id as usize].as_str();
        if needle.is_empty() || !frags.iter().any(|f| matches!(f, Fragment::Text(t) if t.contains(needle))) {
            continue;
        }
        let mut next = Vec::with_capacity(frags.len() + 2);
        for f in frags {
            match f {
                Fragment::Token(_) => next.push(f),
                Fragment::Text(mut t) => {
                    while let Some(pos) = t.find(needle) {
                        if pos > 0 {
                            next.push(Fragment::Text(&t[..pos]));
                        }
                        next.push(Fragment::Token(id));
                        t = &t[pos + needle.len()..];
                    }
                    if !t.is_empty() {
                        next.push(Fragment::Text(t));
                    }
                }
            }
        }
        frags = next;
    }
    frags
}

fn encode_gguf(v: &Vocab, text: &str, add_special: bool, parse_special: bool) -> Result<Vec<u32>, TextError> {
    let frags = partition(v, text, parse_special);
    let mut out = Vec::new();
    let need = |id: Option<u32>, what: &str| {
        id.ok_or_else(|| TextError::Metadata { key: format!("tokenizer.ggml.{what}_token_id"), what: "missing".into() })
    };
    if add_special && v.add_bos && v.kind != VocabKind::Wpm {
        out.push(need(v.bos, "bos")?);
    }
    match v.kind {
        VocabKind::Spm => {
            let mut prev_special = true;
            for f in frags {
                match f {
                    Fragment::Token(id) => {
                        out.push(id);
                        prev_special = true;
                    }
                    Fragment::Text(t) => {
                        let mut s = String::with_capacity(t.len() + 3);
                        if v.add_space_prefix && prev_special {
                            s.push(' ');
                        }
                        s.push_str(t);
                        spm::spm_tokenize(v, &s.replace(' ', "\u{2581}"), &mut out)?;
                        prev_special = false;
                    }
                }
            }
        }
        VocabKind::Bpe => {
            let pre = v.pre.as_ref().expect("BPE vocabularies always carry a pre-tokenizer");
            for f in frags {
                match f {
                    Fragment::Token(id) => out.push(id),
                    Fragment::Text(t) => {
                        let owned;
                        let t = if pre.escape_whitespaces {
                            owned = t.replace(' ', "\u{2581}");
                            owned.as_str()
                        } else {
                            t
                        };
                        for (a, b) in pre.split(t)? {
                            let piece = &t[a..b];
                            if pre.byte_encode {
                                let enc = bytes::byte_encode(piece);
                                bpe::bpe_piece(v, &enc, true, pre.newline_runs_whole, &mut out);
                            } else {
                                bpe::bpe_piece(v, piece, false, pre.newline_runs_whole, &mut out);
                            }
                        }
                    }
                }
            }
        }
        VocabKind::Wpm => {
            if add_special {
                out.push(need(v.bos, "cls")?);
            }
            for f in frags {
                match f {
                    Fragment::Token(id) => out.push(id),
                    Fragment::Text(t) => wpm::wpm_tokenize(v, t, &mut out),
                }
            }
            if add_special {
                out.push(need(v.sep, "seperator")?);
            }
            return Ok(out);
        }
    }
    if add_special && v.add_eos {
        out.push(need(v.eos, "eos")?);
    }
    Ok(out)
}

/// llama.cpp's `token_to_piece` for GGUF vocabularies.
fn piece_gguf(v: &Vocab, id: u32, special: bool) -> Result<Vec<u8>, TextError> {
    let text = v.tokens.get(id as usize).ok_or_else(|| out_of_range(id, v.tokens.len()))?;
    let ty = v.types[id as usize];
    Ok(match ty {
        TokenType::Control | TokenType::Unknown if !special => Vec::new(),
        TokenType::Control | TokenType::Unknown | TokenType::UserDefined => text.as_bytes().to_vec(),
        TokenType::Normal => match v.kind {
            VocabKind::Spm => text.replace('\u{2581}', " ").into_bytes(),
            VocabKind::Wpm => text.replace('\u{2581}', " ").into_bytes(),
            VocabKind::Bpe if v.escape_whitespaces => text.replace('\u{2581}', " ").into_bytes(),
            VocabKind::Bpe => {
                let mut out = Vec::with_capacity(text.len());
                for c in text.chars() {
                    match bytes::char_to_byte(c) {
                        Some(b) => out.push(b),
                        None => out.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                    }
                }
                out
            }
        },
        TokenType::Byte => match text.get(3..5).and_then(|h| u8::from_str_radix(h, 16).ok()) {
            Some(b) => vec![b],
            None => Vec::new(),
        },
        TokenType::Undefined | TokenType::Unused => Vec::new(),
    })
}

/// `clean_up_tokenization_spaces` as llama.cpp applies it after detokenizing.
fn clean_spaces(t: &[u8]) -> Vec<u8> {
    // " ?", " !", " .", " ," -> drop the space.
    let mut a: Vec<u8> = Vec::with_capacity(t.len());
    for (i, &x) in t.iter().enumerate() {
        if i > 0 && t[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            a.pop();
        }
        a.push(x);
    }
    // " ' " -> "'".
    let mut b: Vec<u8> = Vec::with_capacity(a.len());
    let mut i = 0;
    while i < a.len() {
        let x = a[i];
        if i > 0 && x == b'\'' && i + 1 < a.len() && a[i - 1] == b' ' && a[i + 1] == b' ' {
            b.pop();
            b.push(x);
            i += 2;
            continue;
        }
        b.push(x);
        i += 1;
    }
    // " 's", " 'm", " 're", " 've" -> drop the space.
    let mut c: Vec<u8> = Vec::with_capacity(b.len());
    for i in 0..b.len() {
        let x = b[i];
        if i > 0 && b[i - 1] == b' ' && x == b'\'' && i + 1 < b.len() {
            let x1 = b[i + 1];
            let x2 = b.get(i + 2).copied();
            if matches!(x1, b's' | b'm') || (matches!((x1, x2), (b'r', Some(b'e')) | (b'v', Some(b'e')))) {
                c.pop();
            }
        }
        c.push(x);
    }
    c
}
