//! A tokenizer vocabulary read from GGUF metadata (`tokenizer.ggml.*`), with llama.cpp's
//! defaults and special-token rules (llama.cpp `src/llama-vocab.cpp`, `llama_vocab::impl::load`).

use std::collections::{BTreeSet, HashMap};

use rlx_gguf::{GgufContent, MetadataArray, MetadataValue};

use crate::TextError;
use crate::pretok::PreTokenizer;

/// A token's type as stored in `tokenizer.ggml.token_type` (llama.cpp `llama_token_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TokenType {
    /// 0: not set.
    Undefined,
    /// 1: an ordinary piece of text.
    Normal,
    /// 2: the unknown token.
    Unknown,
    /// 3: a control token (BOS, EOS, chat markers): matched in text only with `parse_special`,
    /// rendered only on request.
    Control,
    /// 4: a user-defined token: always matched in text before BPE, always rendered.
    UserDefined,
    /// 5: an unused slot.
    Unused,
    /// 6: a byte-fallback token `<0xXX>`.
    Byte,
}

impl TokenType {
    fn from_i32(v: i32) -> TokenType {
        match v {
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Undefined,
        }
    }
}

/// Which tokenization algorithm a vocabulary uses (`tokenizer.ggml.model`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VocabKind {
    /// `llama`: SentencePiece BPE by piece score, with `<0xXX>` byte fallback.
    Spm,
    /// `gpt2` (byte-level) and `gemma4` (raw UTF-8, `▁` for spaces): BPE by merge rank after a
    /// regex pre-tokenizer.
    Bpe,
    /// `bert`: WordPiece.
    Wpm,
}

/// The vocabulary and its flags.
#[derive(Clone, Debug)]
pub(crate) struct Vocab {
    pub kind: VocabKind,
    pub tokens: Vec<String>,
    pub scores: Vec<f32>,
    pub types: Vec<TokenType>,
    pub token_to_id: HashMap<String, u32>,
    /// BPE merge ranks keyed by (left id, right id).
    pub merges: HashMap<(u32, u32), u32>,
    pub pre: Option<PreTokenizer>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub unk: Option<u32>,
    pub sep: Option<u32>,
    pub pad: Option<u32>,
    pub eog: BTreeSet<u32>,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_space_prefix: bool,
    pub escape_whitespaces: bool,
    pub ignore_merges: bool,
    /// WordPiece: lowercase (and strip accents) before splitting.
    pub lowercase: bool,
    /// Control, user-defined and unknown tokens, longest text first (llama.cpp's
    /// `cache_special_tokens`), matched in the raw text before the model runs.
    pub special_cache: Vec<u32>,
    pub chat_template: Option<String>,
}

fn meta_err(key: &str, what: impl Into<String>) -> TextError {
    TextError::Metadata { key: key.to_string(), what: what.into() }
}

fn get_str<'a>(c: &'a GgufContent, key: &str) -> Result<Option<&'a str>, TextError> {
    match c.get(key) {
        None => Ok(None),
        Some(v) => v.as_str().map(Some).ok_or_else(|| meta_err(key, "expected a string")),
    }
}

fn get_u32(c: &GgufContent, key: &str) -> Result<Option<u32>, TextError> {
    match c.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .and_then(|x| u32::try_from(x).ok())
            .map(Some)
            .ok_or_else(|| meta_err(key, "expected a non-negative integer")),
    }
}

fn get_bool(c: &GgufContent, key: &str) -> Result<Option<bool>, TextError> {
    match c.get(key) {
        None => Ok(None),
        Some(v) => v.as_bool().map(Some).ok_or_else(|| meta_err(key, "expected a bool")),
    }
}

fn get_array<'a>(c: &'a GgufContent, key: &str) -> Result<Option<&'a MetadataArray>, TextError> {
    match c.get(key) {
        None => Ok(None),
        Some(MetadataValue::Array(a)) => Ok(Some(a)),
        Some(_) => Err(meta_err(key, "expected an array")),
    }
}

/// Token texts that end a turn (llama.cpp's EOT / EOG auto-detection by text).
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const EOG_EXTRA_TEXTS: &[&str] = &["<|eom_id|>", "<|return|>", "<|call|>", "<eos>", "<turn|>"];

impl Vocab {
    pub fn from_gguf(c: &GgufContent) -> Result<Vocab, TextError> {
        const P: &str = "tokenizer.ggml.";
        let key = |k: &str| format!("{P}{k}");
        let model = get_str(c, &key("model"))?.ok_or_else(|| meta_err(&key("model"), "missing"))?;
        let pre_name = get_str(c, &key("pre"))?;
        let tokens = match get_array(c, &key("tokens"))? {
            Some(MetadataArray::String(v)) => v.clone(),
            Some(_) => return Err(meta_err(&key("tokens"), "expected an array of strings")),
            None => return Err(meta_err(&key("tokens"), "missing")),
        };
        let n = tokens.len();
        let scores = match get_array(c, &key("scores"))? {
            None => vec![0.0; n],
            Some(MetadataArray::F32(v)) if v.len() >= n => v[..n].to_vec(),
            Some(MetadataArray::I32(v)) if v.len() >= n => v[..n].iter().map(|&x| x as f32).collect(),
            Some(_) => return Err(meta_err(&key("scores"), format!("expected {n} f32 or i32 values"))),
        };
        let mut types = match get_array(c, &key("token_type"))? {
            None => vec![TokenType::Normal; n],
            Some(MetadataArray::I32(v)) if v.len() >= n => v[..n].iter().map(|&t| TokenType::from_i32(t)).collect(),
            Some(_) => return Err(meta_err(&key("token_type"), format!("expected {n} i32 values"))),
        };
        let mut token_to_id = HashMap::with_capacity(n);
        for (i, t) in tokens.iter().enumerate() {
            token_to_id.insert(t.clone(), i as u32);
        }

        // Per-model defaults (llama.cpp `load`).
        let (kind, mut bos, mut eos, mut unk, mut sep, mut pad) = match model {
            "llama" => (VocabKind::Spm, Some(1), Some(2), Some(0), None, None),
            "bert" => (VocabKind::Wpm, Some(101), None, Some(100), Some(102), Some(0)),
            "gpt2" => (VocabKind::Bpe, Some(11), Some(11), None, None, None),
            "gemma4" => (VocabKind::Bpe, None, None, None, None, None),
            other => return Err(TextError::UnknownModel(other.to_string())),
        };
        let mut add_bos = false;
        let mut add_eos = false;
        let mut add_space_prefix = false;
        let mut escape_whitespaces = false;
        let mut ignore_merges = false;
        let mut pre = None;
        match kind {
            VocabKind::Spm => {
                add_space_prefix = true;
                add_bos = true;
            }
            VocabKind::Wpm => {
                add_bos = true;
            }
            VocabKind::Bpe => {
                let name = if model == "gemma4" { "gemma4" } else { pre_name.unwrap_or("default") };
                let p = PreTokenizer::by_name(name)?;
                ignore_merges = p.ignore_merges;
                escape_whitespaces = p.escape_whitespaces;
                if p.add_bos {
                    add_bos = true;
                }
                pre = Some(p);
            }
        }
        if let Some(v) = get_bool(c, &key("add_space_prefix"))? {
            add_space_prefix = v;
        }

        // Merges, keyed by ids.
        let mut merges = HashMap::new();
        if kind == VocabKind::Bpe {
            let list = match get_array(c, &key("merges"))? {
                Some(MetadataArray::String(v)) => v,
                Some(_) => return Err(meta_err(&key("merges"), "expected an array of strings")),
                None => return Err(meta_err(&key("merges"), "missing (required for BPE vocabularies)")),
            };
            for (rank, m) in list.iter().enumerate() {
                // llama.cpp splits at the first space after position 0.
                let Some(pos) = m.bytes().skip(1).position(|b| b == b' ').map(|p| p + 1) else { continue };
                let (a, b) = (&m[..pos], &m[pos + 1..]);
                if let (Some(&ia), Some(&ib)) = (token_to_id.get(a), token_to_id.get(b)) {
                    merges.entry((ia, ib)).or_insert(rank as u32);
                }
            }
        }

        // Special token ids from metadata override the defaults when in range.
        let in_range = |id: Option<u32>| id.filter(|&i| (i as usize) < n);
        let ids = |name: &str, slot: &mut Option<u32>| -> Result<(), TextError> {
            *slot = in_range(*slot);
            if let Some(v) = get_u32(c, &key(name))?
                && (v as usize) < n
            {
                *slot = Some(v);
            }
            Ok(())
        };
        let mut eot = None;
        let mut eom = None;
        ids("bos_token_id", &mut bos)?;
        ids("eos_token_id", &mut eos)?;
        ids("eot_token_id", &mut eot)?;
        ids("eom_token_id", &mut eom)?;
        ids("unknown_token_id", &mut unk)?;
        ids("seperator_token_id", &mut sep)?;
        ids("padding_token_id", &mut pad)?;
        if pre_name.is_some_and(|p| p == "chatglm-bpe" || p == "glm4" || p == "glm5") {
            bos = None;
        }
        if let Some(v) = get_bool(c, &key("add_bos_token"))? {
            add_bos = v;
        }
        if let Some(v) = get_bool(c, &key("add_eos_token"))? {
            add_eos = v;
        }
        if model == "gemma4" {
            add_bos = true;
        }
        let lowercase = kind == VocabKind::Wpm && get_bool(c, &key("normalizer.lowercase"))?.unwrap_or(true);

        // End-of-turn detection by text; such tokens become control tokens (llama.cpp does the same).
        let mut eog = BTreeSet::new();
        // EOT: the match earliest in EOT_TEXTS (llama.cpp takes whichever its hash map yields first).
        if eot.is_none() {
            eot = EOT_TEXTS.iter().find_map(|t| token_to_id.get(*t).copied());
        }
        for (i, t) in tokens.iter().enumerate() {
            let i = i as u32;
            let is_eot = EOT_TEXTS.contains(&t.as_str());
            if t == "<|eom_id|>" && eom.is_none() {
                eom = Some(i);
            }
            if is_eot || EOG_EXTRA_TEXTS.contains(&t.as_str()) {
                eog.insert(i);
                if types[i as usize] != TokenType::Control {
                    types[i as usize] = TokenType::Control;
                }
            }
        }
        eog.extend([eos, eot, eom].into_iter().flatten());

        let mut special_cache: Vec<u32> = (0..n as u32)
            .filter(|&i| matches!(types[i as usize], TokenType::Control | TokenType::UserDefined | TokenType::Unknown))
            .collect();
        // Stable sort: equal lengths keep id order.
        special_cache.sort_by_key(|&i| std::cmp::Reverse(tokens[i as usize].len()));

        let chat_template = get_str(c, "tokenizer.chat_template")?.map(str::to_string);
        Ok(Vocab {
            kind,
            tokens,
            scores,
            types,
            token_to_id,
            merges,
            pre,
            bos,
            eos,
            eot,
            unk,
            sep,
            pad,
            eog,
            add_bos,
            add_eos,
            add_space_prefix,
            escape_whitespaces,
            ignore_merges,
            lowercase,
            special_cache,
            chat_template,
        })
    }

    pub fn id(&self, text: &str) -> Option<u32> {
        self.token_to_id.get(text).copied()
    }

    /// The token for one byte: `<0xXX>` (SentencePiece, gemma4) or the byte's GPT-2 unicode
    /// character (byte-level BPE), or the raw one-byte string as a last resort.
    pub fn byte_token(&self, b: u8, byte_level: bool) -> Option<u32> {
        if byte_level {
            let mut s = String::new();
            s.push(crate::bytes::BYTE_TO_CHAR[b as usize]);
            return self.id(&s);
        }
        self.id(&format!("<0x{b:02X}>")).or_else(|| std::str::from_utf8(&[b]).ok().and_then(|s| self.id(s)))
    }
}
