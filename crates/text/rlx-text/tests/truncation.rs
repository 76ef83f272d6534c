//! `Tokenizer::max_length` / `set_max_length` on all-MiniLM-L6-v2's tokenizer.json
//! (`tools/fetch.sh minilm`; SKIP without it): the file's own truncation (128) applies until a
//! caller sets another length (sentence-transformers' `max_seq_length`, 256), special tokens
//! included, and `None` turns it off.

use rlx_fetched::{MINILM_TOKENIZER, or_skip};
use rlx_text::Tokenizer;

#[test]
fn max_length_comes_from_the_file_until_set() {
    let Some(path) = or_skip(MINILM_TOKENIZER, "tokenizer truncation") else { return };
    let mut tok = Tokenizer::from_tokenizer_json(&path).unwrap();
    let long = "word ".repeat(400);
    assert_eq!(tok.max_length(), Some(128));
    assert_eq!(tok.encode(&long, true).unwrap().len(), 128);
    tok.set_max_length(Some(256)).unwrap();
    assert_eq!(tok.max_length(), Some(256));
    let ids = tok.encode(&long, true).unwrap();
    assert_eq!(ids.len(), 256);
    // [CLS] … [SEP]: the text is cut, not the special tokens.
    assert_eq!((ids[0], ids[255]), (101, 102));
    tok.set_max_length(None).unwrap();
    assert_eq!(tok.max_length(), None);
    assert_eq!(tok.encode(&long, true).unwrap().len(), 402);
}
