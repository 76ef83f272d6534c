//! Bad vocabularies give typed errors that name the problem.

use rlx_gguf::{GgufFile, GgufWriter, MetadataValue};
use rlx_text::{TextError, Tokenizer};

fn vocab(kvs: Vec<(&str, MetadataValue)>) -> Result<Tokenizer, TextError> {
    let mut w = GgufWriter::new();
    for (k, v) in kvs {
        w.add_metadata(k, v).unwrap();
    }
    let file = GgufFile::from_vec(w.to_bytes().unwrap()).unwrap();
    Tokenizer::from_gguf(&file)
}

fn tokens() -> MetadataValue {
    vec!["a", "b", "ab", "Ġ"].into()
}

#[test]
fn unknown_model_is_named() {
    let err =
        vocab(vec![("tokenizer.ggml.model", "wordsoup".into()), ("tokenizer.ggml.tokens", tokens())]).unwrap_err();
    assert!(matches!(&err, TextError::UnknownModel(m) if m == "wordsoup"), "{err:?}");
    assert!(err.to_string().contains("wordsoup"));
}

#[test]
fn unknown_pre_tokenizer_is_named() {
    let err = vocab(vec![
        ("tokenizer.ggml.model", "gpt2".into()),
        ("tokenizer.ggml.pre", "no-such-pre".into()),
        ("tokenizer.ggml.tokens", tokens()),
        ("tokenizer.ggml.merges", vec!["a b"].into()),
    ])
    .unwrap_err();
    assert!(matches!(&err, TextError::UnknownPreTokenizer(p) if p == "no-such-pre"), "{err:?}");
}

#[test]
fn missing_keys_are_named() {
    let err = vocab(vec![("tokenizer.ggml.model", "gpt2".into())]).unwrap_err();
    assert!(matches!(&err, TextError::Metadata { key, .. } if key == "tokenizer.ggml.tokens"), "{err:?}");
    let err = vocab(vec![("tokenizer.ggml.model", "gpt2".into()), ("tokenizer.ggml.tokens", tokens())]).unwrap_err();
    assert!(matches!(&err, TextError::Metadata { key, .. } if key == "tokenizer.ggml.merges"), "{err:?}");
    let err = vocab(vec![("tokenizer.ggml.model", 3u32.into()), ("tokenizer.ggml.tokens", tokens())]).unwrap_err();
    assert!(matches!(&err, TextError::Metadata { key, .. } if key == "tokenizer.ggml.model"), "{err:?}");
}

#[test]
fn tiny_bpe_vocab_merges() {
    let tok = vocab(vec![
        ("tokenizer.ggml.model", "gpt2".into()),
        ("tokenizer.ggml.pre", "gpt-2".into()),
        ("tokenizer.ggml.tokens", tokens()),
        ("tokenizer.ggml.merges", vec!["a b"].into()),
    ])
    .unwrap();
    assert_eq!(tok.encode("ab", false).unwrap(), [2]);
    assert_eq!(tok.encode("ba", false).unwrap(), [1, 0]);
    assert_eq!(tok.encode("ab ab", false).unwrap(), [2, 3, 2]);
    assert_eq!(tok.decode(&[2, 3, 2]).unwrap(), "ab ab");
    assert!(matches!(tok.decode(&[4]), Err(TextError::TokenOutOfRange { id: 4, vocab_size: 4 })));
}

#[test]
fn a_file_that_is_not_a_tokenizer_json_is_named_as_such() {
    // A BERT vocab.txt ("[PAD]" reads as the start of a JSON array) gave serde's bare
    // "invalid type: sequence, expected struct Tokenizer at line 1 column 1".
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("not_a_tokenizer");
    std::fs::create_dir_all(&dir).unwrap();
    let cases: [(&str, &[u8], &str); 4] = [
        ("vocab.txt", b"[PAD]\n[UNK]\n[CLS]\nhello\n", "not JSON: expected value at line 1 column 2"),
        ("config.json", br#"{"max_seq_length": 256}"#, "a JSON object without the \"model\" object"),
        ("list.json", br#"["[PAD]", "[UNK]"]"#, "JSON without the \"model\" object"),
        ("weights.bin", b"\xff\xfe\x00binary", "not UTF-8 text"),
    ];
    for (name, bytes, why) in cases {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        let err = Tokenizer::from_tokenizer_json(&p).unwrap_err();
        assert!(matches!(&err, TextError::NotHfTokenizer { path, .. } if *path == p), "{name}: {err:?}");
        let want = format!("{} is not a HuggingFace tokenizer.json ({why}", p.display());
        let msg = err.to_string();
        assert!(msg.starts_with(&want) && !msg.contains('\n'), "{name}: {msg}");
    }
    // A tokenizer.json the `tokenizers` crate rejects is still its error, not "not a
    // tokenizer.json".
    let p = dir.join("tokenizer.json");
    std::fs::write(&p, br#"{"model": {"type": "NoSuchModel"}}"#).unwrap();
    let err = Tokenizer::from_tokenizer_json(&p).unwrap_err();
    assert!(matches!(&err, TextError::HfTokenizer { .. }), "{err:?}");
}
