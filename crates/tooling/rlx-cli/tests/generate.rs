//! `rlx generate` run as a process: greedy text and the `--json` line on the real SmolLM2 GGUF
//! (SKIP on stderr when `tools/fetch.sh smollm2` has not run), an empty prompt, `--fast` with
//! `--kv-type f16`, `--max-tokens 0` (no made-up speeds), a full context (`--ctx-size`, a
//! note and `"stop": "context"`), and bad input — a prompt longer than the context, a missing
//! file, a directory, an ONNX file, a bad `--ctx-size` or sampler flag — as one stderr line
//! with status 1; `--profile` (per-step calls and times of both phases); a stdout that cannot
//! be written, on a tiny random Llama written by the test.

use serde_json::json;

mod common;
use common::{last_json, one_error_line, rlx, stderr};

fn model() -> Option<String> {
    let p = rlx_fetched::or_skip(rlx_fetched::SMOLLM2_GGUF, "rlx generate on SmolLM2")?;
    Some(p.to_string_lossy().into_owned())
}

#[test]
fn greedy_json_and_empty_prompt() {
    let Some(m) = model() else { return };
    let m = m.as_str();
    let out = rlx(&["generate", "--model", m, "--prompt", "The capital of France is", "--max-tokens", "4", "--json"]);
    let j = last_json(&out);
    assert_eq!(j["tokens"], json!([7042, 30, 198, 198]));
    assert_eq!(j["text"], " Paris.\n\n");
    assert_eq!(j["stop"], "max_tokens");
    // The default prompt's greedy text ends with the end token (id 2) as token 30 (the fp64
    // reference's too): at --max-tokens 30 the model finished, and `stop` says so (it said
    // max_tokens).
    let j = last_json(&rlx(&["generate", "--model", m, "--max-tokens", "30", "--json"]));
    assert_eq!((j["tokens"].as_array().unwrap().len(), &j["tokens"][29]), (30, &json!(2)), "{j}");
    assert_eq!(j["stop"], "end_token");
    // The end token is counted as generated (as the README says) but not rendered as text.
    assert!(!j["text"].as_str().unwrap().contains("<|im_end|>"), "{j}");
    assert!(j["prompt_tokens_per_s"].as_f64().unwrap() > 0.0 && j["gen_tokens_per_s"].as_f64().unwrap() > 0.0);
    assert!(stderr(&out).contains("tok/s"));
    assert_eq!((j["mode"].as_str(), j["kv_type"].as_str()), (Some("exact"), Some("f32")));
    // SmolLM2 adds no BOS (add_bos_token = false): an empty prompt is no token at all, and
    // llama.cpp refuses it ("input is empty"); rlx generated after a BOS the user never gave.
    for max in ["2", "0"] {
        let e = one_error_line(&rlx(&["generate", "--model", m, "--prompt", "", "--max-tokens", max]), m);
        assert!(e.contains("the prompt is empty and this model adds no BOS token (add_bos_token = false)"), "{e}");
    }
    let fast = ["--fast", "--kv-type", "f16", "--threads", "1", "--max-tokens", "4", "--json"];
    let out = rlx(&[&["generate", "--model", m, "--prompt", "The capital of France is"][..], &fast].concat());
    let j = last_json(&out);
    assert_eq!((j["mode"].as_str(), j["kv_type"].as_str()), (Some("fast"), Some("f16")));
    // Fast mode's logits differ by the activation quantization; this prompt's top token has a
    // wide margin, so it stays.
    assert_eq!(j["tokens"][0], 7042);
}

#[test]
fn zero_tokens_and_a_full_context_are_reported_as_such() {
    let Some(m) = model() else { return };
    let out = rlx(&["generate", "--model", &m, "--max-tokens", "0", "--json"]);
    let j = last_json(&out);
    assert_eq!((j["tokens"].clone(), j["stop"].clone()), (json!([]), json!("max_tokens")));
    assert!(j["gen_tokens_per_s"].is_null() && j["prompt_tokens_per_s"].is_null(), "{j}");
    let err = stderr(&out);
    assert!(err.contains("generated: 0 tokens") && !err.contains("tok/s"), "no speed without a timing: {err}");
    // Nothing runs at 0 (prompt_secs is 0) and nothing is compiled (the prompt's graph was),
    // as llama.cpp's -n 0; --help says so (it said "process the prompt only").
    assert_eq!((j["prompt_secs"].as_f64(), j["compile_secs"].as_f64()), (Some(0.0), Some(0.0)), "{j}");
    assert_eq!(
        (j["text"].as_str(), j["prompt_tokens"].as_u64(), j["gen_secs"].as_f64()),
        (Some(""), Some(5), Some(0.0))
    );
    for key in ["model", "mode", "kv_type", "context"] {
        assert!(!j[key].is_null(), "{key} in {j}");
    }
    // The mode is the one the model runs in: the documented override turns fast mode on
    // without `--fast` (the JSON said "exact" while the fast kernels ran).
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_rlx"))
        .args(["generate", "--model", &m, "--max-tokens", "0", "--json"])
        .env("RLX_QUANTIZED_ACTIVATIONS", "1")
        .output()
        .unwrap();
    assert_eq!(last_json(&out)["mode"], "fast");
    let help = String::from_utf8_lossy(&rlx(&["generate", "--help"]).stdout).into_owned();
    assert!(help.contains("0: load the model, tokenize the prompt and stop; nothing is compiled or run"), "{help}");

    // The cache holds 8 positions: the prompt's, then one per decode step; the last token
    // sampled needs none, so 8 - prompt + 1 tokens come out.
    let out = rlx(&["generate", "--model", &m, "--ctx-size", "8", "--max-tokens", "64", "--ignore-eos", "--json"]);
    let j = last_json(&out);
    assert_eq!((j["stop"].as_str(), j["context"].as_u64()), (Some("context"), Some(8)), "{j}");
    let want = 8 - j["prompt_tokens"].as_u64().unwrap() as usize + 1;
    assert_eq!(j["tokens"].as_array().unwrap().len(), want, "{j}");
    let err = stderr(&out);
    assert!(err.contains("note: stopped at the context limit of 8 tokens"), "{err}");
    let p = j["prompt_tokens"].as_u64().unwrap();
    let n = j["tokens"].as_array().unwrap().len();
    assert!(
        err.contains(&format!("({p} prompt + {} generated fill it; the last of the {n} generated was", 8 - p)),
        "{err}"
    );
    // More threads than cores: a note on stderr, nothing on stdout but the JSON; a failure
    // before anything is compiled has no note (the one error line).
    let out = rlx(&["generate", "--model", &m, "--max-tokens", "0", "--threads", "100000", "--json"]);
    last_json(&out);
    assert!(stderr(&out).starts_with("rlx: note: --threads 100000 is more than the "), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    one_error_line(&rlx(&["generate", "--model", &m, "--threads", "100000", "--ctx-size", "100000"]), &m);
    // --threads 0 names the bound, not the parser's type.
    let e = stderr(&rlx(&["generate", "--model", &m, "--threads", "0"]));
    assert!(e.contains("invalid value '0' for '--threads <THREADS>': must be at least 1"), "{e}");

    let e = one_error_line(&rlx(&["generate", "--model", &m, "--ctx-size", "100000"]), &m);
    assert!(e.contains("more than the model's context of 8192"), "{e}");
}

#[test]
fn bad_sampler_flags_are_usage_errors_before_any_file_is_read() {
    // The model does not exist: each flag is refused first, as clap's usage error (status 2)
    // naming the flag as typed. `--temperature inf` was accepted, and `--top-p -nan` was taken
    // for flags (clap's "unexpected argument '-n'"); a negative --top-p reaches the range check.
    for (flags, want) in [
        (&["--top-p", "1.5"][..], "invalid value '1.5' for '--top-p <TOP_P>': must be in (0, 1]"),
        (&["--top-p", "-1", "--temperature", "0.5"], "invalid value '-1' for '--top-p <TOP_P>': must be in (0, 1]"),
        (&["--top-p", "0"], "invalid value '0' for '--top-p <TOP_P>': must be in (0, 1]"),
        (&["--top-p", "nan"], "invalid value 'nan' for '--top-p <TOP_P>': must be in (0, 1]"),
        (&["--top-p", "-nan"], "invalid value '-nan' for '--top-p <TOP_P>': must be in (0, 1]"),
        (&["--top-p", "inf"], "invalid value 'inf' for '--top-p <TOP_P>': must be in (0, 1]"),
        (&["--top-p", "x"], "invalid value 'x' for '--top-p <TOP_P>': \"x\" is not a number"),
        (&["--temperature", "nan"], "invalid value 'nan' for '--temperature <TEMPERATURE>': must be a finite number"),
        (&["--temperature", "inf"], "invalid value 'inf' for '--temperature <TEMPERATURE>': must be a finite number"),
        (&["--temperature", "-inf"], "invalid value '-inf' for '--temperature <TEMPERATURE>': must be a finite number"),
        (&["--temperature", "-nan"], "invalid value '-nan' for '--temperature <TEMPERATURE>': must be a finite number"),
        (&["--top-k", "-nan"], "invalid value '-nan' for '--top-k <TOP_K>'"),
        // In range as written, not as the sampler's f32 (the messages said "must be in (0, 1]"
        // and "must be a finite number").
        (&["--top-p", "1e-50"], "invalid value '1e-50' for '--top-p <TOP_P>': 1e-50 rounds to 0 in f32"),
        (
            &["--temperature", "1e39"],
            "invalid value '1e39' for '--temperature <TEMPERATURE>': 1e39 is beyond f32's range",
        ),
        // llama.cpp's -1 ("until the context is full", "a random seed") got clap's "invalid
        // digit found in string".
        (
            &["--max-tokens", "-1"],
            "invalid value '-1' for '--max-tokens <MAX_TOKENS>': must be 0 or more (for llama.cpp's -n -1",
        ),
        (&["--seed", "-1"], "invalid value '-1' for '--seed <SEED>': must be 0 or more (every run is seeded"),
        (&["--max-tokens", "x"], "invalid value 'x' for '--max-tokens <MAX_TOKENS>': \"x\" is not a whole number"),
        // A whole number past 64 bits is named as too large, not as "not a whole number".
        (
            &["--seed", "99999999999999999999"],
            "invalid value '99999999999999999999' for '--seed <SEED>': 99999999999999999999 is too large (more than 64 bits)",
        ),
    ] {
        let out = rlx(&[&["generate", "--model", "/nonexistent/model.gguf"][..], flags].concat());
        let e = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{flags:?}: {e}");
        assert!(e.starts_with(&format!("error: {want}")), "{flags:?}: {e}");
        assert!(out.stdout.is_empty() && !e.contains("panicked"), "{flags:?}: {e}");
    }
    // A zero count is a usage error (status 2), as `--threads 0` and a negative count are.
    let out = rlx(&["generate", "--model", "/nonexistent/model.gguf", "--ctx-size", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("invalid value '0' for '--ctx-size <N>': must be at least 1"), "{}", stderr(&out));
    // As llama.cpp: a temperature <= 0 is greedy and a top-k <= 0 disables top-k; neither is
    // an error, so the missing model is what is reported.
    for flags in [["--temperature", "-1"], ["--top-k", "-5"]] {
        let out = rlx(&[&["generate", "--model", "/nonexistent/model.gguf"][..], &flags].concat());
        one_error_line(&out, "/nonexistent/model.gguf");
    }
}

#[test]
fn bad_model_files_are_one_line_errors() {
    let out = rlx(&["generate", "--kv-type", "q8"]);
    assert_eq!(out.status.code(), Some(2), "a bad --kv-type is a usage error");
    // A negative count is named as a bad value (it was clap's "unexpected argument '-1'").
    for flag in ["--max-tokens", "--ctx-size", "--seed"] {
        let out = rlx(&["generate", flag, "-1"]);
        assert_eq!(out.status.code(), Some(2), "a negative {flag} is a usage error");
        let e = stderr(&out);
        assert!(e.contains(&format!("invalid value '-1' for '{flag}")), "{e}");
    }

    // The path is printed once, by the CLI, not again by the reader's I/O error.
    let e = one_error_line(&rlx(&["generate", "--model", "/nonexistent/model.gguf"]), "/nonexistent/model.gguf");
    assert_eq!(e.trim_end(), "rlx: error: /nonexistent/model.gguf: No such file or directory (os error 2)");

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_string_lossy().into_owned();
    let e = one_error_line(&rlx(&["generate", "--model", &d]), &d);
    assert!(e.contains("is a directory") && !e.contains("No such device"), "{e}");

    let onnx = dir.path().join("model.onnx");
    std::fs::write(&onnx, b"\x08\x07\x12\x04test").unwrap();
    let o = onnx.to_string_lossy().into_owned();
    let e = one_error_line(&rlx(&["generate", "--model", &o]), &o);
    assert!(e.contains("is an ONNX model, but rlx generate needs a Llama-family GGUF"), "{e}");

    // A file of no known format (it was the GGUF reader's "bad magic").
    let junk = dir.path().join("foo.bin");
    std::fs::write(&junk, b"hello world\n").unwrap();
    let j = junk.to_string_lossy().into_owned();
    let e = one_error_line(&rlx(&["generate", "--model", &j]), &j);
    assert!(e.contains("unknown model format (expected a GGUF model, .gguf): no GGUF magic"), "{e}");
    // Only what `generate` reads is named (the other formats' probes confused a first user).
    assert!(!e.contains(".onnx") && !e.contains("safetensors"), "{e}");
    // Its first bytes as text and hex, as the GGUF reader's bad-magic error shows them.
    assert!(e.contains(r#"(first bytes "hell" (68 65 6c 6c))"#), "{e}");

    let cut = dir.path().join("cut.gguf");
    std::fs::write(&cut, b"GGUF\x03\x00\x00\x00").unwrap();
    let c = cut.to_string_lossy().into_owned();
    let e = one_error_line(&rlx(&["generate", "--model", &c]), &c);
    assert!(e.contains("truncated"), "{e}");
    // Cut inside the tensor data (an interrupted download): it said only that a tensor's bytes
    // "reach past the end of the file" (fresh-user finding).
    let tiny = dir.path().join("tiny.gguf");
    tiny_llama(&tiny);
    let bytes = std::fs::read(&tiny).unwrap();
    std::fs::write(&cut, &bytes[..bytes.len() - 64]).unwrap();
    let e = one_error_line(&rlx(&["generate", "--model", &c]), &c);
    assert!(e.contains("reach past the end of the file") && e.contains("the file is truncated"), "{e}");

    let Some(m) = model() else { return };
    let long = "the ".repeat(9000);
    let e = one_error_line(&rlx(&["generate", "--model", &m, "--prompt", &long, "--max-tokens", "1"]), &m);
    assert!(e.contains("more than the context of 8192"), "{e}");
}

#[test]
fn an_empty_prompt_is_the_bos_alone_on_a_model_that_adds_one() {
    // SmolLM2 with add_bos_token = true (a copy, tensors unchanged): llama.cpp tokenizes "" to
    // [BOS] and generates from it; the stats say the one prompt token is the BOS.
    let Some(m) = model() else { return };
    let src = rlx_gguf::GgufFile::open(&m).unwrap();
    let mut w = rlx_gguf::GgufWriter::new();
    for (k, v) in src.metadata() {
        let v = if k == "tokenizer.ggml.add_bos_token" { true.into() } else { v.clone() };
        w.add_metadata(k.as_str(), v).unwrap();
    }
    for t in src.tensors() {
        w.add_tensor(t.name.as_str(), &t.shape(), t.ty, src.tensor_data(&t.name).unwrap().to_vec()).unwrap();
    }
    let tmp = tempfile::tempdir().unwrap();
    let bos = tmp.path().join("smollm2-bos.gguf");
    w.write_file(&bos).unwrap();
    let b = bos.to_string_lossy().into_owned();
    let out = rlx(&["generate", "--model", &b, "--prompt", "", "--max-tokens", "3", "--json"]);
    let j = last_json(&out);
    assert_eq!(j["prompt_tokens"], 1, "{j}");
    assert_eq!(j["tokens"].as_array().unwrap().len(), 3, "{j}");
    let err = stderr(&out);
    assert!(err.contains("prompt: 1 token (the BOS; --prompt is empty)"), "{err}");
    // A non-empty prompt gets the BOS in front: one token more than on the original model.
    let n = |model: &str| {
        let out = rlx(&["generate", "--model", model, "--prompt", "Hello", "--max-tokens", "0", "--json"]);
        last_json(&out)["prompt_tokens"].as_u64().unwrap()
    };
    assert_eq!(n(&b), n(&m) + 1);
}

#[test]
fn a_one_token_prompt_is_counted_in_the_singular() {
    // " " is one token on SmolLM2; the stats line said "prompt: 1 tokens".
    let Some(m) = model() else { return };
    let out = rlx(&["generate", "--model", &m, "--prompt", " ", "--max-tokens", "0", "--json"]);
    let j = last_json(&out);
    assert_eq!(j["prompt_tokens"], 1, "{j}");
    let err = stderr(&out);
    assert!(err.contains("prompt: 1 token | generated: 0 tokens"), "{err}");
    // A context of one token: the note said "the context limit of 1 tokens".
    let out = rlx(&["generate", "--model", &m, "--prompt", " ", "--ctx-size", "1", "--ignore-eos", "--json"]);
    assert_eq!(last_json(&out)["stop"], "context");
    let err = stderr(&out);
    assert!(
        err.contains(
            "note: stopped at the context limit of 1 token (1 prompt + 0 generated fill it; the one generated token"
        ),
        "{err}"
    );
}

#[test]
fn profile_reports_every_step_of_both_phases() {
    // One prompt chunk, then 3 decode steps (the 4th token is sampled from the 3rd step's
    // logits): SmolLM2 has 30 layers of 4 quantized products (Q/K/V joined, output, gate/up
    // joined, down) plus the Q8_0 LM head.
    let Some(m) = model() else { return };
    let out = rlx(&["generate", "--model", &m, "--max-tokens", "4", "--threads", "1", "--profile", "--json"]);
    let j = last_json(&out);
    let rows = j["profile"].as_array().expect("a profile array");
    let calls = |phase: &str, op: &str| -> u64 {
        rows.iter().filter(|r| r["phase"] == phase && r["op"] == op).map(|r| r["calls"].as_u64().unwrap()).sum()
    };
    assert_eq!(calls("prompt", "dequant_matmul"), 30 * 4 + 1, "{j}");
    assert_eq!(calls("generation", "dequant_matmul"), 3 * (30 * 4 + 1), "{j}");
    let ms =
        |phase: &str| -> f64 { rows.iter().filter(|r| r["phase"] == phase).map(|r| r["ms"].as_f64().unwrap()).sum() };
    let gen_ms = j["gen_secs"].as_f64().unwrap() * 1e3;
    assert!(ms("generation") > 0.0 && ms("generation") <= gen_ms, "steps {} ms of {gen_ms} ms", ms("generation"));
    let err = stderr(&out);
    assert!(err.contains("profile, prompt processing:") && err.contains("profile, generation:"), "{err}");
    // Each header says how many graph runs its calls are summed over.
    assert!(err.contains("wall, 1 graph run (") && err.contains("wall, 3 decode steps ("), "{err}");
    // Each product's row names its weights' GGUF type (SmolLM2: Q4_1 projections, Q8_0 head).
    assert!(err.contains("dequant_matmul Q4_1  [dequant_matmul_fused_") || !rlx_cpu_vector(), "{err}");
    let schemes: std::collections::BTreeSet<&str> =
        rows.iter().filter(|r| r["op"] == "dequant_matmul").map(|r| r["scheme"].as_str().unwrap_or("none")).collect();
    assert_eq!(schemes.into_iter().collect::<Vec<_>>(), ["Q4_1", "Q8_0"], "{j}");
    // Steps are booked by when they ran: a one-token prompt runs the one-token graph, and is
    // still prompt processing (it was booked to generation by graph shape).
    let out = rlx(&["generate", "--model", &m, "--prompt", " ", "--max-tokens", "2", "--profile", "--json"]);
    let j = last_json(&out);
    let rows = j["profile"].as_array().expect("a profile array");
    let calls = |phase: &str| -> u64 {
        rows.iter()
            .filter(|r| r["phase"] == phase && r["op"] == "dequant_matmul")
            .map(|r| r["calls"].as_u64().unwrap())
            .sum()
    };
    assert_eq!((j["prompt_tokens"].as_u64(), calls("prompt"), calls("generation")), (Some(1), 121, 121), "{j}");
    // One token: the prompt's table, and a line saying why generation has none.
    let out = rlx(&["generate", "--model", &m, "--max-tokens", "1", "--profile"]);
    let err = stderr(&out);
    assert!(err.contains("profile, prompt processing:"), "{err}");
    assert!(err.contains("profile, generation: no decode step ran"), "{err}");
    // Nothing ran: no rows, no table.
    let out = rlx(&["generate", "--model", &m, "--max-tokens", "0", "--profile", "--json"]);
    assert_eq!(last_json(&out)["profile"], json!([]));
    assert!(!stderr(&out).contains("profile,"), "{}", stderr(&out));
    // Without --profile there is no profile key.
    let out = rlx(&["generate", "--model", &m, "--max-tokens", "1", "--json"]);
    assert!(last_json(&out).get("profile").is_none());
}

/// The machine has the vector decode kernels, AVX-512 or AVX2 (the fused decode kernel's name
/// says so).
fn rlx_cpu_vector() -> bool {
    rlx_cpu::SimdLevel::Native.avx512() || rlx_cpu::SimdLevel::Native.avx2()
}

#[test]
fn a_gguf_without_tensors_is_called_vocabulary_only() {
    // llama.cpp's ggml-vocab-*.gguf hold a tokenizer and hyperparameters but no tensors: the
    // error was the first missing weight (`token_embd.weight`).
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.gguf");
    // GGUF v3, 0 tensors, 0 metadata entries.
    std::fs::write(&empty, [&b"GGUF"[..], &3u32.to_le_bytes(), &0u64.to_le_bytes(), &0u64.to_le_bytes()].concat())
        .unwrap();
    let mut files = vec![empty];
    if let Some(models) = rlx_fetched::or_skip(rlx_fetched::LLAMA_CPP_MODELS, "generate on ggml-vocab-llama-bpe.gguf") {
        files.push(models.join("ggml-vocab-llama-bpe.gguf"));
    }
    for f in files {
        let f = f.to_string_lossy();
        let e = one_error_line(&rlx(&["generate", "--model", &f, "--max-tokens", "1"]), &f);
        assert!(e.contains("has no model weights (0 tensors): a tokenizer/vocabulary-only GGUF"), "{e}");
        assert!(!e.contains("token_embd"), "{e}");
    }
}

/// A tiny random Llama GGUF (1 layer, width 32, 50 byte-level BPE tokens `a`, `b`, `ab`, `Ġ`,
/// `t4` … `t49`): enough for `rlx generate` to run without a fetched model.
fn tiny_llama(path: &std::path::Path) {
    use rlx_gguf::{GgmlType, GgufWriter, MetadataValue};
    let (e, h, hk, d, f, v) = (32usize, 2usize, 1usize, 16usize, 32usize, 50usize);
    let mut w = GgufWriter::new();
    let meta: Vec<(&str, MetadataValue)> = vec![
        ("general.architecture", "llama".into()),
        ("llama.block_count", 1u32.into()),
        ("llama.embedding_length", (e as u32).into()),
        ("llama.feed_forward_length", (f as u32).into()),
        ("llama.attention.head_count", (h as u32).into()),
        ("llama.attention.head_count_kv", (hk as u32).into()),
        ("llama.context_length", 64u32.into()),
        ("llama.rope.freq_base", 10000f32.into()),
        ("llama.attention.layer_norm_rms_epsilon", 1e-5f32.into()),
        ("tokenizer.ggml.model", "gpt2".into()),
        ("tokenizer.ggml.pre", "gpt-2".into()),
    ];
    for (k, val) in meta {
        w.add_metadata(k, val).unwrap();
    }
    let mut tokens: Vec<String> = ["a", "b", "ab", "Ġ"].iter().map(|s| s.to_string()).collect();
    tokens.extend((4..v).map(|i| format!("t{i}")));
    w.add_metadata("tokenizer.ggml.tokens", tokens).unwrap();
    w.add_metadata("tokenizer.ggml.merges", MetadataValue::from(vec!["a b"])).unwrap();
    let mut seed = 1u64;
    let mut tensor = |name: String, shape: &[usize]| {
        let n: usize = shape.iter().product();
        let vals: Vec<f32> = (0..n)
            .map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 0.5
            })
            .collect();
        let dims: Vec<u64> = shape.iter().map(|&x| x as u64).collect();
        w.add_f32_tensor(name, &dims, GgmlType::F32, &vals).unwrap();
    };
    tensor("token_embd.weight".into(), &[v, e]);
    tensor("output_norm.weight".into(), &[e]);
    for (n, shape) in [
        ("attn_norm", vec![e]),
        ("ffn_norm", vec![e]),
        ("attn_q", vec![h * d, e]),
        ("attn_k", vec![hk * d, e]),
        ("attn_v", vec![hk * d, e]),
        ("attn_output", vec![e, h * d]),
        ("ffn_gate", vec![f, e]),
        ("ffn_up", vec![f, e]),
        ("ffn_down", vec![e, f]),
    ] {
        tensor(format!("blk.0.{n}.weight"), &shape);
    }
    w.write_file(path).unwrap();
}

/// Streamed tokens that cannot be written (`> /dev/full`) are a failed write to stdout, said as
/// every other subcommand says it (`writing output: …`); it named the model file, as if the
/// model were at fault.
#[test]
fn an_unwritable_stdout_is_named_as_such_not_as_the_model() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("SKIP: no /dev/full");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let m = dir.path().join("tiny.gguf");
    tiny_llama(&m);
    let m = m.to_string_lossy().into_owned();
    let args = ["generate", "--model", &m, "--prompt", "ab", "--max-tokens", "4", "--ignore-eos", "--threads", "1"];
    // The model runs and streams text when stdout can be written.
    let o = rlx(&args);
    assert!(o.status.success() && !o.stdout.is_empty(), "{o:?}");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_rlx")).args(args).stdout(full).output().expect("run rlx");
    let e = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{e}");
    assert_eq!(e.trim_end().lines().count(), 1, "one line: {e}");
    assert!(e.starts_with("rlx: error: writing output: "), "{e}");
    assert!(!e.contains(&m) && !e.contains("panicked"), "{e}");
}
