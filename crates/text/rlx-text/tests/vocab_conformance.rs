//! llama.cpp's tokenizer test vectors: every `ggml-vocab-*.gguf` with `.inp`/`.out` files in
//! the llama.cpp sources (`tools/fetch.sh llama-cpp-src`), tokenized exactly as llama.cpp's
//! `tests/test-tokenizer-0.cpp` does: `llama_tokenize(text, add_special = false,
//! parse_special = false)`. Every vocabulary (BPE, SentencePiece, WordPiece) must pass every
//! vector. Prints a per-vocabulary table to stderr.

use rlx_gguf::GgufFile;
use rlx_text::Tokenizer;

const SEP: &str = "\n__ggml_vocab_test__\n";

/// Split as test-tokenizer-0.cpp's `read_tests` does.
fn read_tests(inp: &str, out: &str) -> Vec<(String, Vec<u32>)> {
    let mut inputs = Vec::new();
    let mut pos = 0;
    while pos < inp.len() {
        match inp[pos..].find(SEP) {
            Some(n) => {
                inputs.push(inp[pos..pos + n].to_string());
                pos += n + SEP.len();
            }
            None => {
                inputs.push(inp[pos..].to_string());
                break;
            }
        }
    }
    let outputs: Vec<Vec<u32>> =
        out.lines().map(|l| l.split_whitespace().map(|t| t.parse().expect("token id")).collect()).collect();
    assert_eq!(inputs.len(), outputs.len(), "input and output files have different numbers of tests");
    inputs.into_iter().zip(outputs).collect()
}

#[test]
fn llama_cpp_vocab_test_vectors() {
    let Some(dir) = rlx_fetched::or_skip(rlx_fetched::LLAMA_CPP_MODELS, "llama_cpp_vocab_test_vectors") else {
        return;
    };
    let mut vocabs: Vec<_> = std::fs::read_dir(&dir)
        .expect("read models dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "gguf") && p.with_extension("gguf.inp").exists())
        .collect();
    vocabs.sort();
    assert!(!vocabs.is_empty(), "no ggml-vocab-*.gguf with .inp/.out in {}", dir.display());
    let mut failures = Vec::new();
    eprintln!("{:<28} {:<20} {:>6}", "vocab", "kind", "pass");
    for path in vocabs {
        let name = path.file_name().unwrap().to_string_lossy().trim_end_matches(".gguf").to_string();
        let inp = std::fs::read_to_string(path.with_extension("gguf.inp")).expect("read .inp");
        let out = std::fs::read_to_string(path.with_extension("gguf.out")).expect("read .out");
        let tests = read_tests(&inp, &out);
        let file = GgufFile::open(&path).expect("open vocab gguf");
        let tok = match Tokenizer::from_gguf(&file) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{name:<28} {:<20} load error: {e}", "-");
                failures.push(format!("{name}: {e}"));
                continue;
            }
        };
        let mut pass = 0;
        for (text, want) in &tests {
            let got = tok.encode_with(text, false, false).expect("encode");
            if &got == want {
                pass += 1;
            } else {
                failures.push(format!("{name}: {text:?}\n   want {want:?}\n    got {got:?}"));
            }
        }
        eprintln!("{name:<28} {:<20} {pass:>3}/{}", tok.kind(), tests.len());
    }
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
}
