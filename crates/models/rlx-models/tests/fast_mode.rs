//! Fast mode (`CompileOptions::quantized_activations`: Q8_0 activations inside the quantized
//! matmuls, llama.cpp's numerics) against llama.cpp itself: teacher-forced top-1 agreement on
//! the real SmolLM2-135M Q4_1 GGUF over 4 texts of 107–157 tokens (543 positions), fixture
//! `tests/fixtures/smollm2_llama_top1.json` from `tools/refgen/gen_llama_top1.py` (libllama,
//! 1 thread, every position's argmax). Fast mode with the f32 cache must agree with llama.cpp
//! run with an f32 KV cache (attention in f32 on both sides, in llama.cpp's order on RLX's
//! side: `rlx_models::ggml_numerics`) at ≥ 98% of positions, with its top-1 logits within
//! 1e-3 of the fixture's (printed to 4 decimals). The
//! reference that counts is llama.cpp fed one token per `llama_decode` call (`argmax_step`),
//! as this test feeds RLX; llama.cpp's one-batch-per-text run (`argmax`) is reported beside it.
//! Fast mode with an f16 cache must agree the same way with llama.cpp's default context (f16
//! cache, flash attention on) fed one token per step (`argmax_default_step`): there fast mode's
//! attention is `rlx_models::ggml_numerics`' flash-attention path over f16 K/V.
//! The report-only numbers — exact mode against the f32-cache reference — assert nothing and
//! cost another pass over the texts, so they live in an ignored test:
//! `cargo test --release -p rlx-models --test fast_mode -- --include-ignored --nocapture`.
//! The 4 texts run as one batch (different lengths; a finished text takes no more tokens).
//! Needs `tools/fetch.sh smollm2`; prints SKIP to stderr when the model is absent.

use rlx_models::{KvCacheDtype, LlamaModel, argmax};
use rlx_runtime::CompileOptions;
use std::path::PathBuf;

fn model_path() -> Option<PathBuf> {
    rlx_fetched::or_skip(rlx_fetched::SMOLLM2_GGUF, "smollm2 fast mode vs llama.cpp")
}

fn ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect()
}

/// Agreement of one RLX pass with one llama.cpp reference run of the fixture.
struct Agreement {
    agree: usize,
    total: usize,
    /// Largest |RLX − llama.cpp| on llama.cpp's top-1 logit (0 where the run has no logits).
    worst_logit: f64,
}

/// Teacher-forced: feed the texts' ids one position at a time (the 4 texts as one batch)
/// and count, for each `(argmax key, top-5 logits key or "")` of the fixture's texts, the
/// positions whose argmax equals that reference run's.
fn agreement(model: &mut LlamaModel, fx: &serde_json::Value, keys: &[(&str, &str)], label: &str) -> Vec<Agreement> {
    let texts = fx["texts"].as_array().unwrap();
    let toks: Vec<Vec<u32>> = texts.iter().map(|t| ids(&t["ids"])).collect();
    let v = model.config().vocab;
    let mut cache = model.new_cache(texts.len());
    let mut out: Vec<Agreement> =
        keys.iter().map(|_| Agreement { agree: 0, total: toks.iter().map(Vec::len).sum(), worst_logit: 0.0 }).collect();
    let mut per_text = vec![vec![0usize; texts.len()]; keys.len()];
    for p in 0..toks.iter().map(Vec::len).max().unwrap() {
        let step: Vec<&[u32]> = toks.iter().map(|t| t.get(p..p + 1).unwrap_or(&[])).collect();
        let logits = model.forward_seqs(&mut cache, &step).unwrap();
        let l = logits.as_slice::<f32>().unwrap();
        for r in (0..texts.len()).filter(|&r| p < toks[r].len()) {
            let row = &l[r * v..][..v];
            let top1 = argmax(row);
            for (k, &(key, logits_key)) in keys.iter().enumerate() {
                let want = texts[r][key][p].as_u64().unwrap() as u32;
                let hit = usize::from(top1 == want);
                out[k].agree += hit;
                per_text[k][r] += hit;
                if !logits_key.is_empty() {
                    let top = texts[r][logits_key][p][0].as_f64().unwrap();
                    out[k].worst_logit = out[k].worst_logit.max((row[want as usize] as f64 - top).abs());
                }
            }
        }
    }
    for (k, &(key, _)) in keys.iter().enumerate() {
        for (r, t) in texts.iter().enumerate() {
            let head = &t["text"].as_str().unwrap()[..30];
            eprintln!("{label} vs {key}: {}/{} top-1 agree on {head:?}…", per_text[k][r], toks[r].len());
        }
    }
    out
}

fn fixture() -> serde_json::Value {
    let p = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/smollm2_llama_top1.json");
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn pct(a: usize, n: usize) -> f64 {
    100.0 * a as f64 / n as f64
}

#[test]
fn fast_mode_top1_agrees_with_llama_cpp() {
    let Some(path) = model_path() else { return };
    let fx = fixture();
    let mut fast =
        LlamaModel::from_gguf_path(&path, CompileOptions::default().with_quantized_activations(true)).unwrap();
    let keys = [("argmax_step", "top5_logits_step"), ("argmax", "top5_logits")];
    let [step, batch] = <[Agreement; 2]>::try_from(agreement(&mut fast, &fx, &keys, "fast, f32 cache")).ok().unwrap();
    let n = step.total;
    eprintln!(
        "top-1 agreement with llama.cpp over {n} positions: fast vs llama.cpp one token per step {:.2}% \
         (top-1 logit within {:.4}); vs llama.cpp one batch per text {:.2}% (within {:.4})",
        pct(step.agree, n),
        step.worst_logit,
        pct(batch.agree, n),
        batch.worst_logit
    );
    // The issue asks for >= 98%. With llama.cpp's f32 arithmetic between the matmuls
    // (`rlx_models::ggml_numerics`) fast mode measured 100% (543/543) against the token-by-token
    // run, its top-1 logits equal to the fixture's 4 decimals; the batch run sums attention in
    // another order and agrees with llama.cpp's own step run at 98.16%, as RLX does.
    assert_agrees(&step, "llama.cpp (f32 cache, one token per step)");
}

/// The bar for fast mode: top-1 equal to llama.cpp's at >= 98% of the positions, and
/// llama.cpp's top-1 logit matched within 1e-3 (the fixture prints 4 decimals).
fn assert_agrees(a: &Agreement, reference: &str) {
    let n = a.total;
    assert!(
        a.agree * 100 >= 98 * n,
        "fast mode agrees with {reference} at {}/{n} positions ({:.2}%), want >= 98%",
        a.agree,
        pct(a.agree, n)
    );
    assert!(a.worst_logit < 1e-3, "top-1 logits differ from {reference}'s by up to {}", a.worst_logit);
}

#[test]
fn fast_mode_f16_cache_agrees_with_llama_cpp_default() {
    let Some(path) = model_path() else { return };
    let fx = fixture();
    let mut fast =
        LlamaModel::from_gguf_path(&path, CompileOptions::default().with_quantized_activations(true)).unwrap();
    fast.set_kv_dtype(KvCacheDtype::F16);
    let keys = [("argmax_default_step", "top5_logits_default_step"), ("argmax_default", "")];
    let [step, batch] = <[Agreement; 2]>::try_from(agreement(&mut fast, &fx, &keys, "fast, f16 cache")).ok().unwrap();
    let n = step.total;
    eprintln!(
        "top-1 agreement with llama.cpp's default context (f16 cache, flash attention) over {n} positions: \
         one token per step {:.2}% (top-1 logit within {:.4}); one batch per text {:.2}% (that run prints no \
         logits)",
        pct(step.agree, n),
        step.worst_logit,
        pct(batch.agree, n)
    );
    assert_agrees(&step, "llama.cpp's default context (f16 cache, one token per step)");
}

/// Exact mode's agreement numbers (README); prints only (nothing here is a pass/fail claim).
#[test]
#[ignore = "report only, no assertion; another pass over the texts: run with --include-ignored --nocapture"]
fn fast_mode_report_exact() {
    let Some(path) = model_path() else { return };
    let fx = fixture();
    let mut exact = LlamaModel::from_gguf_path(&path, CompileOptions::default()).unwrap();
    let keys = [("argmax_step", "top5_logits_step"), ("argmax", "top5_logits")];
    let [es, eb] = <[Agreement; 2]>::try_from(agreement(&mut exact, &fx, &keys, "exact, f32 cache")).ok().unwrap();
    let n = es.total;
    eprintln!(
        "top-1 agreement with llama.cpp over {n} positions: exact vs step {:.2}% (within {:.3}), vs batch {:.2}% \
         (within {:.3})",
        pct(es.agree, n),
        es.worst_logit,
        pct(eb.agree, n),
        eb.worst_logit
    );
}
