//! Regex pre-tokenizers for byte-level BPE vocabularies, chosen by `tokenizer.ggml.pre`.
//!
//! The patterns and the name table are llama.cpp's (`llm_tokenizer_bpe` and
//! `llama_vocab::impl::load` in `src/llama-vocab.cpp`), which adapt each model's
//! `tokenizer.json` pattern (e.g. `(?i:'s|...)` spelled out as `'[sS]|...`). Semantics follow
//! llama.cpp's `unicode_regex_split`: the patterns run in sequence; each one splits every piece
//! left by the previous one into its matches and the unmatched gaps between them, matching
//! within the piece only (so lookaheads and `$` see the piece's end).

use fancy_regex::Regex;

use crate::TextError;

/// A compiled pre-tokenizer.
#[derive(Clone, Debug)]
pub(crate) struct PreTokenizer {
    pub name: String,
    pub regexes: Vec<Regex>,
    /// Map each piece's bytes to GPT-2's printable characters before BPE (false for the
    /// SentencePiece-style `gemma4` BPE, which merges raw UTF-8 with `▁` for spaces).
    pub byte_encode: bool,
    /// A piece that is itself a token is emitted whole, without merging (llama3, tekken, ...).
    pub ignore_merges: bool,
    /// Replace ' ' by '▁' before splitting (gemma4).
    pub escape_whitespaces: bool,
    /// The model's default for adding BOS (overridden by `tokenizer.ggml.add_bos_token`).
    pub add_bos: bool,
    /// gemma4: a piece made only of newlines that is a token is emitted whole.
    pub newline_runs_whole: bool,
    /// Apply `clean_up_tokenization_spaces` when detokenizing.
    pub clean_spaces: bool,
}

/// Pre-tokenizer names for which llama.cpp turns `clean_up_tokenization_spaces` off.
const NO_CLEAN_SPACES: &[&str] = &[
    "deepseek-llm",
    "deepseek-coder",
    "deepseek-v3",
    "spark2_5",
    "youtu",
    "sarvam-moe",
    "command-r",
    "qwen2",
    "deepseek-r1-qwen",
    "kormo",
    "f2llmv2",
    "qwen35",
    "poro-chat",
    "viking",
    "tekken",
    "smollm",
    "chameleon",
    "gpt-4o",
    "llama4",
    "kanana2",
    "talkie",
    "granite-embed-multi-97m",
    "tiny_aya",
    "cohere2moe",
    "superbpe",
    "trillion",
    "granite-docling",
    "bailingmoe",
    "bailingmoe2",
    "llada-moe",
    "seed-coder",
    "hunyuan",
    "hunyuan-dense",
    "hy_v4",
    "joyai-llm",
    "ufakzeka",
    "grok-2",
    "laguna",
    "minimax-m2",
    "solar-open",
];

struct Spec {
    patterns: &'static [&'static str],
    ignore_merges: bool,
    byte_encode: bool,
    escape_whitespaces: bool,
    add_bos: bool,
}

const fn s(patterns: &'static [&'static str]) -> Spec {
    Spec { patterns, ignore_merges: false, byte_encode: true, escape_whitespaces: false, add_bos: false }
}

/// `tokenizer.ggml.pre` value -> pattern list and flags (llama.cpp's table).
fn spec(name: &str) -> Option<Spec> {
    let im = |mut sp: Spec| {
        sp.ignore_merges = true;
        sp
    };
    Some(match name {
        "default" => s(DEFAULT),
        "minicpm5" => im(s(MINICPM5)),
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0" | "lfm2"
        | "jina-v5-nano" => Spec { add_bos: true, ..im(s(LLAMA3)) },
        "deepseek-llm" => s(DEEPSEEK_LLM),
        "deepseek-coder" => s(DEEPSEEK_CODER),
        "deepseek-v3" | "hunyuan-dense" | "hy_v4" | "joyai-llm" => s(DEEPSEEK3_LLM),
        "spark2_5" => s(SPARK2_5),
        "youtu" => im(s(YOUTU)),
        "falcon" => s(FALCON),
        "mpt" | "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es" | "jina-v2-de" | "a.x-4.0"
        | "mellum" | "modern-bert" | "jina-v1-en" | "jina-v2-code" | "roberta-bpe" | "olmo" | "jais" | "exaone4"
        | "trillion" | "granite-docling" => s(GPT2),
        "jais-2" => s(JAIS2),
        "gemma4" | "granite-embed-multi-311m" => Spec { byte_encode: false, escape_whitespaces: true, ..s(GEMMA4) },
        "sarvam-moe" => Spec { byte_encode: false, escape_whitespaces: true, ..s(SARVAM_MOE) },
        "starcoder" | "refact" | "command-r" | "smollm" | "codeshell" | "exaone" | "minerva-7b" | "mellum2" => {
            s(STARCODER)
        }
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "megrez" | "stablelm2" | "hunyuan" | "solar-open" => {
            s(STABLELM2)
        }
        "qwen35" => s(QWEN35),
        "dbrx" | "smaug-bpe" => s(DBRX),
        "poro-chat" | "bloom" | "gpt3-finnish" => s(PORO),
        "chatglm-bpe" => s(CHATGLM4),
        "glm4" | "glm5" => im(s(CHATGLM4)),
        "viking" => s(VIKING),
        "tekken" => Spec { add_bos: true, ..im(s(TEKKEN)) },
        "exaone-moe" => s(EXAONE_MOE),
        "chameleon" => Spec { add_bos: true, ..s(CHAMELEON) },
        "gpt-4o" | "llama4" | "kanana2" | "talkie" | "minimax-m2" => s(GPT4O),
        "granite-embed-multi-97m" => im(s(GRANITE_EMB_MULTI)),
        "tiny_aya" | "cohere2moe" => s(TINY_AYA),
        "superbpe" => s(SUPERBPE),
        "bailingmoe" | "bailingmoe2" | "llada-moe" => s(BAILINGMOE),
        "seed-coder" => s(SEED_CODER),
        "ufakzeka" => s(UFAKZEKA),
        "grok-2" => s(GROK_2),
        "laguna" => s(LAGUNA),
        _ => return None,
    })
}

impl PreTokenizer {
    /// The pre-tokenizer llama.cpp uses for `tokenizer.ggml.pre` = `name`.
    ///
    /// Errors: [`TextError::UnknownPreTokenizer`] for names llama.cpp does not know or that need
    /// one of its hand-written splitters (`kimi-k2`, `afmoe`, `whitespace`).
    pub fn by_name(name: &str) -> Result<PreTokenizer, TextError> {
        let sp = spec(name).ok_or_else(|| TextError::UnknownPreTokenizer(name.to_string()))?;
        let regexes = sp
            .patterns
            .iter()
            .map(|p| Regex::new(p).map_err(|e| TextError::Regex { pattern: p.to_string(), msg: e.to_string() }))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(PreTokenizer {
            name: name.to_string(),
            regexes,
            byte_encode: sp.byte_encode,
            ignore_merges: sp.ignore_merges,
            escape_whitespaces: sp.escape_whitespaces,
            add_bos: sp.add_bos,
            newline_runs_whole: matches!(name, "gemma4" | "granite-embed-multi-311m"),
            clean_spaces: !NO_CLEAN_SPACES.contains(&name),
        })
    }

    /// Split `text` into pieces (byte ranges, in order, covering `text`).
    pub fn split(&self, text: &str) -> Result<Vec<(usize, usize)>, TextError> {
        let mut pieces = if text.is_empty() { vec![] } else { vec![(0, text.len())] };
        for re in &self.regexes {
            let mut next = Vec::with_capacity(pieces.len() * 2);
            for &(start, end) in &pieces {
                let piece = &text[start..end];
                let mut last = 0;
                for m in re.find_iter(piece) {
                    let m = m.map_err(|e| TextError::Regex { pattern: re.as_str().to_string(), msg: e.to_string() })?;
                    if m.start() > last {
                        next.push((start + last, start + m.start()));
                    }
                    if m.end() > m.start() {
                        next.push((start + m.start(), start + m.end()));
                    }
                    last = m.end();
                }
                if last < piece.len() {
                    next.push((start + last, end));
                }
            }
            pieces = next;
        }
        Ok(pieces)
    }
}

// Patterns: copied verbatim from llama.cpp's `llm_tokenizer_bpe` (MIT).
/// llama.cpp pre-type(s): LLAMA3
const LLAMA3: &[&str] = &[
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];
/// llama.cpp pre-type(s): JAIS2
const JAIS2: &[&str] = &[
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s{512}(?!\\S)|\\s{256}(?!\\S)|\\s{128}(?!\\S)|\\s{64}(?!\\S)|\\s{32}(?!\\S)|\\s{16}(?!\\S)|\\s{8}(?!\\S)|\\s{4}(?!\\S)|\\s{1,2}(?!\\S)|\\s{1}",
];
/// llama.cpp pre-type(s): DBRX, SMAUG
const DBRX: &[&str] = &[
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];
/// llama.cpp pre-type(s): DEEPSEEK_LLM
const DEEPSEEK_LLM: &[&str] = &[
    "[\r\n]",
    "\\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
    "\\s?[!-/:-~！-／：-～‘-‟　-。]+",
    "\\s+$",
    "[一-龥ࠀ-一가-퟿]+",
    "\\p{N}+",
];
/// llama.cpp pre-type(s): DEEPSEEK3_LLM, HUNYUAN_DENSE, JOYAI_LLM, HY_V4
const DEEPSEEK3_LLM: &[&str] = &[
    "\\p{N}{1,3}",
    "[一-龥぀-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
];
/// llama.cpp pre-type(s): SPARK2_5
const SPARK2_5: &[&str] = &[
    "\\p{N}{1,3}",
    "[一-龥぀-ゟ゠-ヿ]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+|[\r\n]|\\s+(?!\\S)|\\s+",
    "\\p{N}",
];
/// llama.cpp pre-type(s): YOUTU
const YOUTU: &[&str] = &[
    "[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];
/// llama.cpp pre-type(s): DEEPSEEK_CODER
const DEEPSEEK_CODER: &[&str] = &["[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", "[一-龥ࠀ-一가-퟿]+", "\\p{N}"];
/// llama.cpp pre-type(s): FALCON
const FALCON: &[&str] = &[
    "[\\p{P}\\$\\+<=>\\^~\\|`]+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    "[0-9][0-9][0-9]",
];
/// llama.cpp pre-type(s): STARCODER, REFACT, COMMAND_R, SMOLLM, CODESHELL, EXAONE, MINERVA, MELLUM2
const STARCODER: &[&str] = &["\\p{N}", "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"];
/// llama.cpp pre-type(s): GPT2, MPT, OLMO, JAIS, TRILLION, GRANITE_DOCLING
const GPT2: &[&str] = &["'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"];
/// llama.cpp pre-type(s): STABLELM2, QWEN2, HUNYUAN, SOLAR_OPEN
const STABLELM2: &[&str] = &[
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];
/// llama.cpp pre-type(s): QWEN35
const QWEN35: &[&str] = &[
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];
/// llama.cpp pre-type(s): PORO, BLOOM, GPT3_FINNISH
const PORO: &[&str] = &[" ?[^(\\s|.,!?…。，、।۔،)]+"];
/// llama.cpp pre-type(s): CHATGLM4
const CHATGLM4: &[&str] = &[
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];
/// llama.cpp pre-type(s): VIKING
const VIKING: &[&str] = &[" ?[^(\\s|.,!?…。，、।۔،)]+", "\\p{N}"];
/// llama.cpp pre-type(s): TEKKEN
const TEKKEN: &[&str] = &[
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];
/// llama.cpp pre-type(s): CHAMELEON
const CHAMELEON: &[&str] = &[
    "<sentinel:[0-9]+>",
    "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
    "([\\t\\n]|    |  )",
    "\\p{N}",
    "[\\p{P}!-/:-@\\[-`{-~]",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
];
/// llama.cpp pre-type(s): GPT4O, MINIMAX_M2
const GPT4O: &[&str] = &[
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))*((?=[\\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}])([^a-z]))+((?=[\\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];
/// llama.cpp pre-type(s): GRANITE_EMB_MULTI
const GRANITE_EMB_MULTI: &[&str] = &[
    "[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))*((?=[\\p{L}\\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?((?=[\\p{L}\\p{M}])([^a-z]))+((?=[\\p{L}\\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];
/// llama.cpp pre-type(s): TINY_AYA
const TINY_AYA: &[&str] = &[
    "\\d{1,3}(?=(?:\\d{3})*\\b)",
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];
/// llama.cpp pre-type(s): SUPERBPE
const SUPERBPE: &[&str] = &["\\p{N}+", "(?=(\\d{3})+(?!\\d))"];
/// llama.cpp pre-type(s): BAILINGMOE
const BAILINGMOE: &[&str] = &[
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
];
/// llama.cpp pre-type(s): SEED_CODER
const SEED_CODER: &[&str] = &[
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\p{L}\\p{N}\\r\\n]+|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];
/// llama.cpp pre-type(s): UFAKZEKA
const UFAKZEKA: &[&str] =
    &["[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"];
/// llama.cpp pre-type(s): GROK_2
const GROK_2: &[&str] = &[
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];
/// llama.cpp pre-type(s): LAGUNA
const LAGUNA: &[&str] = &[
    "[^\\n]+|[\\n]+",
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];
/// llama.cpp pre-type(s): EXAONE_MOE
const EXAONE_MOE: &[&str] = &[
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?(?:\\p{L}\\p{M}*(?: \\p{L}\\p{M}*)*)+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]?|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+",
];
/// llama.cpp pre-type(s): GEMMA4
const GEMMA4: &[&str] = &["[^\\n]+|[\\n]+"];
/// llama.cpp pre-type(s): SARVAM_MOE
const SARVAM_MOE: &[&str] = &["[^\\n]+|[\\n]+"];
/// llama.cpp pre-type(s): MINICPM5
const MINICPM5: &[&str] = &[
    "\\p{N}{1,3}",
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+",
];
/// llama.cpp pre-type(s): DEFAULT
const DEFAULT: &[&str] = &[
    "[\\p{P}\\$\\+<=>\\^~\\|]+",
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)",
    "\\p{N}+",
    "[0-9][0-9][0-9]",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn pieces(name: &str, text: &str) -> Vec<String> {
        let p = PreTokenizer::by_name(name).unwrap();
        p.split(text).unwrap().into_iter().map(|(a, b)| text[a..b].to_string()).collect()
    }

    #[test]
    fn gpt2_style_split() {
        assert_eq!(
            pieces("smollm", "The capital of France is 42"),
            ["The", " capital", " of", " France", " is", " ", "4", "2"]
        );
        assert_eq!(pieces("gpt-2", "Hello  world\n"), ["Hello", " ", " world", "\n"]);
    }
}
