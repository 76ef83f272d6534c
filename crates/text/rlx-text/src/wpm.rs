//! WordPiece for `bert` GGUF vocabularies (llama.cpp `llm_tokenizer_wpm_session`): NFD +
//! lowercase + accent stripping, split on whitespace, punctuation, ASCII symbols and CJK
//! ideographs, then greedy longest match with the word-start marker `▁` (GGUF stores BERT's
//! `##` continuation form as the unmarked piece and word starts with `▁`); a word with no
//! complete match becomes `[UNK]`.

use std::sync::OnceLock;

use regex::Regex;
use unicode_normalization::UnicodeNormalization;

use crate::vocab::Vocab;

struct Classes {
    punct: Regex,
    symbol: Regex,
    control: Regex,
    accent: Regex,
}

fn classes() -> &'static Classes {
    static C: OnceLock<Classes> = OnceLock::new();
    C.get_or_init(|| Classes {
        punct: Regex::new(r"^\p{P}$").expect("static regex"),
        symbol: Regex::new(r"^\p{S}$").expect("static regex"),
        control: Regex::new(r"^\p{C}$").expect("static regex"),
        accent: Regex::new(r"^\p{Mn}$").expect("static regex"),
    })
}

fn is_chinese_char(c: u32) -> bool {
    matches!(c, 0x4E00..=0x9FFF | 0x3400..=0x4DBF | 0x20000..=0x2A6DF | 0x2A700..=0x2B73F | 0x2B740..=0x2B81F
        | 0x2B920..=0x2CEAF | 0xF900..=0xFAFF | 0x2F800..=0x2FA1F)
}

fn lower(c: char) -> char {
    let mut it = c.to_lowercase();
    match (it.next(), it.next()) {
        (Some(l), None) => l,
        (Some(l), Some(_)) if c == '\u{130}' => l,
        _ => c,
    }
}

fn words(v: &Vocab, text: &str) -> Vec<String> {
    let cls = classes();
    let chars: Vec<char> = if v.lowercase { text.nfd().collect() } else { text.chars().collect() };
    let mut words = vec![String::new()];
    let mut buf = [0u8; 4];
    for c in chars {
        if c.is_whitespace() {
            if !words.last().is_some_and(String::is_empty) {
                words.push(String::new());
            }
            continue;
        }
        let s: &str = c.encode_utf8(&mut buf);
        if c == '\0' || c == '\u{FFFD}' || cls.control.is_match(s) {
            continue;
        }
        if v.lowercase && cls.accent.is_match(s) {
            continue;
        }
        let c2 = if v.lowercase { lower(c) } else { c };
        if cls.punct.is_match(s) || ((c as u32) < 0x7F && cls.symbol.is_match(s)) || is_chinese_char(c as u32) {
            if !words.last().is_some_and(String::is_empty) {
                words.push(String::new());
            }
            if let Some(w) = words.last_mut() {
                w.push(c2);
            }
            words.push(String::new());
        } else if let Some(w) = words.last_mut() {
            w.push(c2);
        }
    }
    if words.last().is_some_and(String::is_empty) {
        words.pop();
    }
    words
}

pub(crate) fn wpm_tokenize(v: &Vocab, text: &str, out: &mut Vec<u32>) {
    let max_len = v.tokens.iter().map(String::len).max().unwrap_or(0);
    for word in words(v, text) {
        if word.is_empty() {
            continue;
        }
        let w = format!("\u{2581}{word}");
        let start = out.len();
        let mut i = 0;
        while i < w.len() {
            let mut matched = false;
            let mut j = (i + max_len + 1).min(w.len());
            while j > i {
                if let Some(id) = w.get(i..j).and_then(|s| v.id(s)) {
                    out.push(id);
                    matched = true;
                    i = j;
                    break;
                }
                j -= 1;
            }
            if !matched {
                out.truncate(start);
                break;
            }
        }
        if out.len() == start {
            out.extend(v.unk);
        }
    }
}
