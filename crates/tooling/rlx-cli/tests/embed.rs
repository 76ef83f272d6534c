//! `rlx embed` as a process: all-MiniLM-L6-v2 from safetensors (`tools/fetch.sh minilm`) and
//! paraphrase-MiniLM-L3-v2 ONNX (`tools/fetch.sh minilm-onnx`) give unit-norm 384-d vectors,
//! `--json` ends with one object, the safetensors embedding of the first fixture sentence
//! matches the numpy reference (`tools/refgen/gen_bert_minilm.py`), and bad input is a
//! one-line error with status 1. Without the model files the model checks print SKIP.

use rlx_fetched::{MINILM_L3_ONNX, MINILM_SAFETENSORS, MINILM_TOKENIZER, or_skip};
use serde_json::Value;

mod common;
use common::{last_json, one_error_line, rlx, stderr};

const SENTENCE: &str = "The quick brown fox jumps over the lazy dog.";

#[test]
fn embed_safetensors_minilm_json_matches_reference() {
    let Some(weights) = or_skip(MINILM_SAFETENSORS, "embed") else { return };
    let dir = weights.parent().unwrap();
    let d = dir.to_string_lossy();
    let v = last_json(&rlx(&["embed", "--model", &d, "--json", SENTENCE, "Hello!"]));
    assert_eq!(v["dim"], 384);
    let e = v["embeddings"].as_array().expect("embeddings");
    assert_eq!(e.len(), 2);
    let got: Vec<f64> = e[0].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    let fx: Value =
        serde_json::from_str(include_str!("../../../models/rlx-models/tests/fixtures/minilm_l6_embeddings.json"))
            .expect("fixture");
    assert_eq!(fx["sentences"][0], SENTENCE);
    let want: Vec<f64> = fx["embeddings"][0].as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect();
    let cos: f64 = got.iter().zip(&want).map(|(a, b)| a * b).sum();
    assert!(cos >= 0.9999, "cosine {cos}");
    // Human output: one line of 384 values per sentence.
    let o = rlx(&["embed", "--model", &d, SENTENCE]);
    assert!(o.status.success());
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(text.lines().count(), 1);
    assert_eq!(text.lines().next().unwrap().split(' ').count(), 384);
    // The directory's model.safetensors names the same model.
    let w = weights.to_string_lossy();
    let again = last_json(&rlx(&["embed", "--model", &w, "--json", SENTENCE, "Hello!"]));
    assert_eq!(again["embeddings"], v["embeddings"]);
    // So does its config.json (not "malformed ONNX protobuf").
    let c = dir.join("config.json").to_string_lossy().into_owned();
    let again = last_json(&rlx(&["embed", "--model", &c, "--json", SENTENCE, "Hello!"]));
    assert_eq!(again["embeddings"], v["embeddings"]);
    // More threads than cores: a note on stderr, the JSON alone on stdout.
    let o = rlx(&["embed", "--model", &d, "--threads", "100000", "--json", SENTENCE]);
    assert_eq!(last_json(&o)["dim"], 384);
    assert!(stderr(&o).starts_with("rlx: note: --threads 100000 is more than the "), "{}", stderr(&o));
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 1);
}

#[test]
fn embed_onnx_model_gives_unit_vectors() {
    let (Some(model), Some(tok)) = (or_skip(MINILM_L3_ONNX, "embed onnx"), or_skip(MINILM_TOKENIZER, "embed onnx"))
    else {
        return;
    };
    let (m, t) = (model.to_string_lossy(), tok.to_string_lossy());
    let v = last_json(&rlx(&["embed", "--model", &m, "--tokenizer", &t, "--json", SENTENCE, "Paris is the capital."]));
    assert_eq!(v["dim"], 384);
    for row in v["embeddings"].as_array().unwrap() {
        let n: f64 = row.as_array().unwrap().iter().map(|x| x.as_f64().unwrap().powi(2)).sum();
        assert!((n - 1.0).abs() < 1e-4, "norm² {n}");
    }
}

#[test]
fn embed_bad_inputs_are_one_line_errors() {
    let e = one_error_line(&rlx(&["embed", "--model", "/nonexistent/model.onnx", "hi"]), "/nonexistent/model.onnx");
    assert!(e.contains("No such file or directory"), "{e}");
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().to_string_lossy().into_owned();
    // The model is read first: an empty directory lacks its config.json (a tokenizer.json
    // missing beside a good model is checked in `truncation_follows_…`).
    let e = one_error_line(&rlx(&["embed", "--model", &d, "hi"]), &d);
    assert!(e.contains("is a directory without a config.json, but rlx embed needs a BERT directory"), "{e}");
    // A GGUF is named as one, not parsed as ONNX ("malformed ONNX protobuf").
    let gguf = tmp.path().join("model.gguf");
    std::fs::write(&gguf, b"GGUF\x03\x00\x00\x00").unwrap();
    let g = gguf.to_string_lossy().into_owned();
    let e = one_error_line(&rlx(&["embed", "--model", &g, "hi"]), &g);
    assert!(e.contains("is a GGUF file, but rlx embed needs a BERT directory") && !e.contains("ONNX protobuf"), "{e}");
    let st = tmp.path().join("model.safetensors");
    std::fs::write(&st, b"\x02\x00\x00\x00\x00\x00\x00\x00{}").unwrap();
    let s = st.to_string_lossy().into_owned();
    assert!(one_error_line(&rlx(&["embed", "--model", &s, "hi"]), &s).contains("without a config.json"));
    // A file of no known format is named as such, not as malformed ONNX.
    let txt = tmp.path().join("notes.txt");
    std::fs::write(&txt, b"hello world\n").unwrap();
    let t = txt.to_string_lossy().into_owned();
    let e = one_error_line(&rlx(&["embed", "--model", &t, "hi"]), &t);
    assert!(
        e.contains(
            "unknown model format (expected a BERT directory (config.json + model.safetensors) or an .onnx encoder)"
        ),
        "{e}"
    );
    // A JSON file outside a BERT directory is named as such, not parsed as ONNX.
    std::fs::create_dir(tmp.path().join("cfg")).unwrap();
    let json = tmp.path().join("cfg/config.json");
    std::fs::write(&json, b"{}").unwrap();
    let j = json.to_string_lossy().into_owned();
    let e = one_error_line(&rlx(&["embed", "--model", &j, "hi"]), &j);
    assert!(e.contains("is a JSON file, but rlx embed needs") && !e.contains("protobuf"), "{e}");
    let o = rlx(&["embed", "--model", &d]);
    assert_eq!(o.status.code(), Some(2), "no sentence is a usage error: {}", stderr(&o));
}

#[test]
fn a_tokenizer_that_is_not_a_tokenizer_json_is_named() {
    // `--tokenizer vocab.txt` (BERT's word list) printed serde's "invalid type: sequence,
    // expected struct Tokenizer at line 1 column 1".
    let Some(model) = or_skip(MINILM_L3_ONNX, "embed with a vocab.txt as --tokenizer") else { return };
    let m = model.to_string_lossy();
    let tmp = tempfile::tempdir().unwrap();
    let vocab = tmp.path().join("vocab.txt");
    std::fs::write(&vocab, "[PAD]\n[unused0]\n[UNK]\n[CLS]\n[SEP]\nthe\n").unwrap();
    let v = vocab.to_string_lossy().into_owned();
    let e = one_error_line(&rlx(&["embed", "--model", &m, "--tokenizer", &v, "hi"]), &m);
    assert!(e.contains(&format!("{v} is not a HuggingFace tokenizer.json (not JSON: ")), "{e}");
    assert!(!e.contains("expected struct Tokenizer"), "{e}");
    let cfg = tmp.path().join("tokenizer_config.json");
    std::fs::write(&cfg, r#"{"do_lower_case": true}"#).unwrap();
    let c = cfg.to_string_lossy().into_owned();
    let e = one_error_line(&rlx(&["embed", "--model", &m, "--tokenizer", &c, "hi"]), &m);
    assert!(e.contains(&format!("{c} is not a HuggingFace tokenizer.json (a JSON object without")), "{e}");
}

#[test]
fn a_corrupt_onnx_model_is_named_before_a_missing_tokenizer() {
    // No tokenizer.json beside cut.onnx: the error once named only the tokenizer.
    let tmp = tempfile::tempdir().unwrap();
    let cut = tmp.path().join("cut.onnx");
    // A ModelProto whose graph field (7) claims 128 bytes and has none: a truncated file.
    std::fs::write(&cut, [0x08, 0x07, 0x3a, 0x80, 0x01, 0x0a]).unwrap();
    let c = cut.to_string_lossy().into_owned();
    let e = one_error_line(&rlx(&["embed", "--model", &c, "hi"]), &c);
    assert!(e.contains("malformed ONNX") && !e.contains("tokenizer.json"), "{e}");
    if let Some(model) = or_skip(MINILM_L3_ONNX, "embed on a truncated MiniLM-L3") {
        std::fs::write(&cut, &std::fs::read(model).unwrap()[..1000]).unwrap();
        let e = one_error_line(&rlx(&["embed", "--model", &c, "hi"]), &c);
        assert!(e.contains("malformed ONNX") && !e.contains("tokenizer.json"), "{e}");
    }
}

#[test]
fn truncation_follows_sentence_bert_config_max_seq_length() {
    let Some(weights) = or_skip(MINILM_SAFETENSORS, "embed truncation") else { return };
    let dir = weights.parent().unwrap();
    let long = "word ".repeat(600); // 602 tokens with [CLS] and [SEP]
    let tokens = |d: &std::path::Path| {
        let v = last_json(&rlx(&["embed", "--model", &d.to_string_lossy(), "--json", &long, "Short."]));
        v["tokens"].clone()
    };
    // all-MiniLM-L6-v2: sentence_bert_config.json says 256 (sentence-transformers' length);
    // its tokenizer.json says 128, which rlx embed once used.
    assert_eq!(tokens(dir), serde_json::json!([256, 4]));
    // The same files without sentence_bert_config.json: the tokenizer's 128; with another
    // max_seq_length: that; with one past max_position_embeddings (512): 512.
    let tmp = tempfile::tempdir().unwrap();
    for f in ["config.json", "model.safetensors"] {
        std::os::unix::fs::symlink(dir.join(f), tmp.path().join(f)).unwrap();
    }
    let d = tmp.path().to_string_lossy().into_owned();
    let e = one_error_line(&rlx(&["embed", "--model", &d, "hi"]), &d);
    assert!(e.contains("no tokenizer.json next to the model"), "{e}");
    for f in ["tokenizer.json", "tokenizer_config.json"] {
        std::os::unix::fs::symlink(dir.join(f), tmp.path().join(f)).unwrap();
    }
    assert_eq!(tokens(tmp.path()), serde_json::json!([128, 4]));
    let cfg = tmp.path().join("sentence_bert_config.json");
    std::fs::write(&cfg, r#"{"max_seq_length": 200, "do_lower_case": false}"#).unwrap();
    assert_eq!(tokens(tmp.path()), serde_json::json!([200, 4]));
    std::fs::write(&cfg, r#"{"max_seq_length": 4096}"#).unwrap();
    assert_eq!(tokens(tmp.path()), serde_json::json!([512, 4]));
    // A bad value is named, not ignored.
    std::fs::write(&cfg, r#"{"max_seq_length": "long"}"#).unwrap();
    let e = one_error_line(&rlx(&["embed", "--model", &d, "hi"]), &d);
    assert!(e.contains("sentence_bert_config.json: max_seq_length is \"long\", not a positive integer"), "{e}");
}

#[test]
fn a_tokenizer_directory_is_named_as_a_directory() {
    // `--tokenizer DIR` was "tokenizer.json (DIR): Is a directory (os error 21)".
    let Some(model) = or_skip(MINILM_L3_ONNX, "embed with a directory as --tokenizer") else { return };
    let m = model.to_string_lossy();
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().to_string_lossy().into_owned();
    let e = one_error_line(&rlx(&["embed", "--model", &m, "--tokenizer", &d, "hi"]), &m);
    assert!(e.contains(&format!("--tokenizer {d} is a directory, not a tokenizer.json file\n")), "{e}");
    std::fs::write(tmp.path().join("tokenizer.json"), "{}").unwrap();
    let e = one_error_line(&rlx(&["embed", "--model", &m, "--tokenizer", &d, "hi"]), &m);
    assert!(e.contains(&format!("(its tokenizer.json is {d}/tokenizer.json)")), "{e}");
}

/// The shell words of `line` (double quotes group; no escapes), `~/.cache/rlx` as the cache.
fn shell_words(line: &str) -> Vec<String> {
    let cache = rlx_fetched::cache_dir().to_string_lossy().into_owned();
    let mut words = vec![];
    for (i, part) in line.split('"').enumerate() {
        if i % 2 == 1 {
            words.push(part.to_string());
        } else {
            words.extend(part.split_whitespace().map(|w| w.replace("~/.cache/rlx", &cache)));
        }
    }
    words
}

#[test]
fn the_readmes_onnx_embed_command_runs() {
    // The top-level README showed no way to embed with the ONNX model of `tools/fetch.sh
    // minilm-onnx`, which has no tokenizer.json beside it. Run its command as written.
    let readme = include_str!("../../../../README.md");
    let line = readme
        .lines()
        .find(|l| l.contains("rlx embed --model ~/.cache/rlx/minilm-onnx/"))
        .expect("README shows `rlx embed` on the minilm-onnx model");
    assert!(readme.contains("tools/fetch.sh minilm-onnx"), "README names the fetch step");
    let (Some(_), Some(_)) =
        (or_skip(MINILM_L3_ONNX, "README's onnx embed"), or_skip(MINILM_TOKENIZER, "README's onnx embed"))
    else {
        return;
    };
    let cmd = line.split(" # ").next().unwrap();
    let words = shell_words(&cmd[cmd.find("rlx embed").unwrap() + "rlx ".len()..]);
    let mut args = words.clone();
    args.push("--json".into());
    let v = last_json(&rlx(&args));
    assert_eq!(v["dim"], 384, "{words:?}");
    let n: f64 = v["embeddings"][0].as_array().unwrap().iter().map(|x| x.as_f64().unwrap().powi(2)).sum();
    assert!((n - 1.0).abs() < 1e-4, "unit norm: {n}");
}
