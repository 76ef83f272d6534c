//! The real model's tokenizer: SmolLM2-135M-Instruct (gpt2 byte-level BPE, pre = smollm,
//! add_bos_token = false, ChatML). Skips with a message when `tools/fetch.sh smollm2` has not
//! been run.

use rlx_gguf::GgufFile;
use rlx_text::{ChatMessage, StreamDecoder, TextError, Tokenizer, apply_chat_template};

fn load() -> Option<Tokenizer> {
    let path = rlx_fetched::or_skip(rlx_fetched::SMOLLM2_GGUF, "smollm2 tokenizer tests")?;
    Some(Tokenizer::from_gguf(&GgufFile::open(&path).expect("open gguf")).expect("tokenizer"))
}

const TEXTS: &[&str] = &[
    "The capital of France is",
    "",
    " ",
    "Hello, world!\n\n  indented\tand tabbed",
    "naïve café — Привет, мир! 你好世界 🦙🚀 😶‍🌫️",
    "fn main() { println!(\"{}\", 1 + 2); } // 3333 tokens",
    "I'm sure they've said it's 'quoted' and we'll see",
];

#[test]
fn known_prompt_ids() {
    let Some(tok) = load() else { return };
    assert_eq!(tok.kind(), "bpe(smollm)");
    assert_eq!(tok.vocab_size(), 49152);
    assert!(!tok.add_bos());
    assert_eq!(tok.encode("The capital of France is", true).unwrap(), [504, 3575, 282, 4649, 314]);
    assert_eq!(tok.bos(), Some(1));
    assert_eq!(tok.eos(), Some(2));
}

#[test]
fn encode_decode_roundtrip() {
    let Some(tok) = load() else { return };
    for t in TEXTS {
        let ids = tok.encode(t, false).unwrap();
        assert_eq!(tok.decode(&ids).unwrap(), *t, "roundtrip of {t:?} via {ids:?}");
        // Streaming gives the same text, piece by piece, each piece valid UTF-8.
        let mut s = StreamDecoder::new(&tok);
        let mut text = String::new();
        for &id in &ids {
            text.extend(s.push(id).unwrap());
        }
        text.extend(s.finish());
        assert_eq!(text, *t);
    }
}

#[test]
fn chat_prompt_special_tokens() {
    let Some(tok) = load() else { return };
    let im_start = tok.token_id("<|im_start|>").expect("<|im_start|>");
    let im_end = tok.token_id("<|im_end|>").expect("<|im_end|>");
    assert_eq!(tok.eot(), Some(im_end));
    assert!(tok.is_eog(im_end) && tok.is_eog(2));
    assert!(tok.stop_tokens().contains(&im_end));
    let prompt = apply_chat_template(
        tok.chat_template().expect("template"),
        &[ChatMessage::new("user", "Hi")],
        true,
        "",
        "<|im_end|>",
    )
    .unwrap();
    assert!(prompt.ends_with("<|im_start|>assistant\n"));
    let ids = tok.encode(&prompt, true).unwrap();
    assert_eq!(ids[0], im_start);
    assert_eq!(ids.iter().filter(|&&i| i == im_start).count(), 3);
    // Without parse_special the markers are plain text.
    let plain = tok.encode_with(&prompt, true, false).unwrap();
    assert!(!plain.contains(&im_start) && plain.len() > ids.len());
    // Control tokens are not rendered by decode, but are by token_to_piece_with(special).
    assert_eq!(tok.token_to_piece(im_end).unwrap(), b"");
    assert_eq!(tok.token_to_piece_with(im_end, true).unwrap(), b"<|im_end|>");
}

#[test]
fn out_of_range_ids_are_typed_errors() {
    let Some(tok) = load() else { return };
    let n = tok.vocab_size() as u32;
    assert!(matches!(tok.decode(&[1, n]), Err(TextError::TokenOutOfRange { id, .. }) if id == n));
    assert!(matches!(tok.token_to_piece(u32::MAX), Err(TextError::TokenOutOfRange { .. })));
}
