//! `rlx embed` as a process: all-MiniLM-L6-v2 from safetensors (`tools/fetch.sh minilm`) and
//! paraphrase-MiniLM-L3-v2 ONNX (`tools/fetch.sh minilm-onnx`) give unit-norm 384-d vectors,
//! `--json` ends with one object, the safetensors embedding of the first fixture sentence
//! matches the numpy reference (`tools/refgen/gen_bert_minilm.py`), and bad input is a
//! one-line error with status 1. Without the model files the model checks print SKIP.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

fn rlx(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rlx")).args(args).output().unwrap()
}

fn cache() -> PathBuf {
    std::env::var_os("RLX_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/rlx"))
}

fn last_json(o: &Output) -> Value {
    let text = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(text.lines().last().expect("a line")).expect("json")
}

const SENTENCE: &str = "The quick brown fox jumps over the lazy dog.";

#[test]
fn embed_safetensors_minilm_json_matches_reference() {
    let dir = cache().join("minilm");
    if !dir.join("model.safetensors").exists() {
        eprintln!("SKIP embed: {} is absent (run tools/fetch.sh minilm)", dir.display());
        return;
    }
    let d = dir.to_string_lossy();
    let o = rlx(&["embed", "--model", &d, "--json", SENTENCE, "Hello!"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = last_json(&o);
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
}

#[test]
fn embed_onnx_model_gives_unit_vectors() {
    let model = cache().join("minilm-onnx/paraphrase-MiniLM-L3-v2.onnx");
    let tok = cache().join("minilm/tokenizer.json");
    if !model.exists() || !tok.exists() {
        eprintln!(
            "SKIP embed onnx: {} or {} is absent (tools/fetch.sh minilm-onnx, minilm)",
            model.display(),
            tok.display()
        );
        return;
    }
    let (m, t) = (model.to_string_lossy(), tok.to_string_lossy());
    let o = rlx(&["embed", "--model", &m, "--tokenizer", &t, "--json", SENTENCE, "Paris is the capital of France."]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v = last_json(&o);
    assert_eq!(v["dim"], 384);
    for row in v["embeddings"].as_array().unwrap() {
        let n: f64 = row.as_array().unwrap().iter().map(|x| x.as_f64().unwrap().powi(2)).sum();
        assert!((n - 1.0).abs() < 1e-4, "norm² {n}");
    }
}

#[test]
fn embed_bad_inputs_are_one_line_errors() {
    let o = rlx(&["embed", "--model", "/nonexistent/model.onnx", "hi"]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("rlx: error: /nonexistent/model.onnx:"), "{err}");
    let tmp = tempfile::tempdir().unwrap();
    let o = rlx(&["embed", "--model", &tmp.path().to_string_lossy(), "hi"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("tokenizer.json"));
}
