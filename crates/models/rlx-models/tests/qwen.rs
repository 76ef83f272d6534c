//! Qwen2 (Q/K/V biases, tied head) and Qwen3 (per-head Q/K RMSNorm, untied head) decoders
//! against an fp64 numpy forward (`tools/refgen/gen_qwen_tiny.py`, fixture
//! `tests/fixtures/qwen_tiny.json`): a tiny model of each, its weights given by a formula both
//! sides compute, written here into an in-memory GGUF. The prompt's logits and those of 8 more
//! steps, teacher-forced with the reference's greedy tokens (the random model's top-2 margins
//! are ~1e-4, too small for its greedy ids to be a stable check), in exact and fast mode.

use rlx_gguf::{GgmlType, GgufFile, GgufWriter};
use rlx_models::LlamaModel;
use rlx_runtime::CompileOptions;
use serde_json::Value;

const FIXTURE: &str = include_str!("fixtures/qwen_tiny.json");

/// `0.5 · sin(0.37 i + 1.91 t + 0.3)` rounded to f32 (norm weights `1 + 0.25 ·` that), as the
/// generator computes them.
fn tensor(t: usize, name: &str, n: usize) -> Vec<f32> {
    (0..n)
        .map(|i| {
            let v = (0.5 * (0.37 * i as f64 + 1.91 * t as f64 + 0.3).sin()) as f32;
            if name.ends_with("norm.weight") { (1.0 + 0.25 * v as f64) as f32 } else { v }
        })
        .collect()
}

fn model(arch: &str, spec: &Value, fast: bool) -> LlamaModel {
    let dims = &spec["dims"];
    let d = |k: &str| dims[k].as_u64().unwrap() as usize;
    let (e, h, hk, hd, f, v) = (d("E"), d("H"), d("HK"), d("D"), d("F"), d("V"));
    let mut w = GgufWriter::new();
    w.add_metadata("general.architecture", arch).unwrap();
    let k = |n: &str| format!("{arch}.{n}");
    w.add_metadata(k("block_count"), d("L") as u32).unwrap();
    w.add_metadata(k("embedding_length"), e as u32).unwrap();
    w.add_metadata(k("feed_forward_length"), f as u32).unwrap();
    w.add_metadata(k("attention.head_count"), h as u32).unwrap();
    w.add_metadata(k("attention.head_count_kv"), hk as u32).unwrap();
    w.add_metadata(k("context_length"), 64u32).unwrap();
    w.add_metadata(k("rope.freq_base"), dims["rope_base"].as_f64().unwrap() as f32).unwrap();
    w.add_metadata(k("attention.layer_norm_rms_epsilon"), dims["eps"].as_f64().unwrap() as f32).unwrap();
    for (t, name) in spec["archs"][arch]["tensors"].as_array().unwrap().iter().enumerate() {
        let name = name.as_str().unwrap();
        let stem = name.rsplit_once('.').map_or(name, |(s, _)| s);
        let shape: Vec<usize> = match stem.rsplit('.').next().unwrap() {
            "token_embd" | "output" => vec![v, e],
            "output_norm" | "attn_norm" | "ffn_norm" => vec![e],
            "attn_q" if name.ends_with("bias") => vec![h * hd],
            "attn_k" | "attn_v" if name.ends_with("bias") => vec![hk * hd],
            "attn_q" => vec![h * hd, e],
            "attn_k" | "attn_v" => vec![hk * hd, e],
            "attn_output" => vec![e, h * hd],
            "attn_q_norm" | "attn_k_norm" => vec![hd],
            "ffn_gate" | "ffn_up" => vec![f, e],
            "ffn_down" => vec![e, f],
            other => panic!("unexpected tensor {other}"),
        };
        let vals = tensor(t, name, shape.iter().product());
        let shape: Vec<u64> = shape.iter().map(|&x| x as u64).collect();
        w.add_f32_tensor(name, &shape, GgmlType::F32, &vals).unwrap();
    }
    let file = GgufFile::from_vec(w.to_bytes().unwrap()).unwrap();
    LlamaModel::from_gguf(&file, CompileOptions::default().with_quantized_activations(fast)).unwrap()
}

#[test]
fn qwen2_and_qwen3_match_the_fp64_reference() {
    let spec: Value = serde_json::from_str(FIXTURE).unwrap();
    for arch in ["qwen2", "qwen3"] {
        let want = &spec["archs"][arch];
        let ids =
            |k: &str| -> Vec<u32> { want[k].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect() };
        let (prompt, greedy) = (ids("prompt"), ids("greedy"));
        let logits: Vec<Vec<f64>> = want["logits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_array().unwrap().iter().map(|x| x.as_f64().unwrap()).collect())
            .collect();
        // Exact mode: f32 arithmetic against fp64 (a wrong bias, norm or RoPE pairing moves the
        // logits by ~0.1–1). Fast mode: llama.cpp's f32 numerics (no quantized products on f32
        // weights), the same bound.
        for (fast, tol) in [(false, 1e-4), (true, 1e-4)] {
            let mut m = model(arch, &spec, fast);
            assert_eq!(m.config().qkv_bias, arch == "qwen2");
            assert_eq!(m.config().qk_norm, arch == "qwen3");
            assert_eq!(m.config().tied_head, arch == "qwen2");
            let mut cache = m.new_cache(1);
            let mut got = m.forward(&mut cache, &prompt).unwrap().to_f32_vec();
            for (step, want) in logits.iter().enumerate() {
                let d = got.iter().zip(want).map(|(&a, &b)| (a as f64 - b).abs()).fold(0.0, f64::max);
                let scale = want.iter().fold(1f64, |s, x| s.max(x.abs()));
                assert!(d <= tol * scale, "{arch} fast={fast} step {step}: max |Δlogit| {d:e} (scale {scale})");
                if step < greedy.len() {
                    got = m.forward(&mut cache, &[greedy[step]]).unwrap().to_f32_vec();
                }
            }
        }
    }
}
