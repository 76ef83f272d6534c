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
