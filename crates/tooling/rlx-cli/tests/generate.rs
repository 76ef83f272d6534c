//! `rlx generate` run as a process: greedy text and the `--json` line on the real SmolLM2 GGUF
//! (SKIP on stderr when `tools/fetch.sh smollm2` has not run), an empty prompt, `--fast` with
//! `--kv-type f16`, a prompt longer than the context and a missing model file (exit 1, one
//! stderr line, never a panic).

use std::path::PathBuf;
use std::process::{Command, Output};

fn model() -> Option<PathBuf> {
    let cache = std::env::var_os("RLX_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/rlx"));
    let p = cache.join("smollm2/SmolLM2-135M-Instruct.Q4_1.gguf");
    if p.exists() {
        Some(p)
    } else {
        eprintln!("SKIP rlx generate on SmolLM2: {} not found; run tools/fetch.sh smollm2", p.display());
        None
    }
}

fn rlx(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rlx")).args(args).output().unwrap()
}

#[test]
fn greedy_json_and_empty_prompt() {
    let Some(m) = model() else { return };
    let m = m.to_str().unwrap();
    let out = rlx(&["generate", "--model", m, "--prompt", "The capital of France is", "--max-tokens", "4", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let j: serde_json::Value = serde_json::from_str(stdout.trim().lines().last().unwrap()).unwrap();
    assert_eq!(j["tokens"], serde_json::json!([7042, 30, 198, 198]));
    assert_eq!(j["text"], " Paris.\n\n");
    assert!(j["prompt_tokens_per_s"].as_f64().unwrap() > 0.0 && j["gen_tokens_per_s"].as_f64().unwrap() > 0.0);
    assert!(String::from_utf8_lossy(&out.stderr).contains("tok/s"));
    assert_eq!((j["mode"].as_str(), j["kv_type"].as_str()), (Some("exact"), Some("f32")));
    let out = rlx(&["generate", "--model", m, "--prompt", "", "--max-tokens", "2"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let fast = ["--fast", "--kv-type", "f16", "--threads", "1", "--max-tokens", "4", "--json"];
    let out = rlx(&[&["generate", "--model", m, "--prompt", "The capital of France is"][..], &fast].concat());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let j: serde_json::Value = serde_json::from_str(stdout.trim().lines().last().unwrap()).unwrap();
    assert_eq!((j["mode"].as_str(), j["kv_type"].as_str()), (Some("fast"), Some("f16")));
    // Fast mode's logits differ by the activation quantization; this prompt's top token has a
    // wide margin, so it stays.
    assert_eq!(j["tokens"][0], 7042);
}

#[test]
fn too_long_prompt_and_missing_model_are_errors() {
    let out = rlx(&["generate", "--kv-type", "q8"]);
    assert_eq!(out.status.code(), Some(2), "a bad --kv-type is a usage error");
    let out = rlx(&["generate", "--model", "/nonexistent/model.gguf"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("rlx: error: /nonexistent/model.gguf"));
    let Some(m) = model() else { return };
    let long = "the ".repeat(9000);
    let out = rlx(&["generate", "--model", m.to_str().unwrap(), "--prompt", &long, "--max-tokens", "1"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("more than the context of 8192"), "{err}");
}
