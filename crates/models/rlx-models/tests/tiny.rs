//! A tiny random Llama written as a GGUF (Q/K rows permuted, adjacent-pair RoPE) and as HF
//! safetensors (unpermuted, rotate-half RoPE): both give the same logits; KV-cache decode
//! equals a full recompute (across cache growth and prefill padding); a batch of two equals
//! two single runs; bad input gives typed errors.

use rlx_gguf::{GgmlType, GgufFile, GgufWriter};
use rlx_ir::Tensor;
use rlx_models::{LlamaConfig, LlamaModel, ModelError, Weight, Weights};
use rlx_runtime::CompileOptions;
use std::collections::BTreeMap;

const L: usize = 2;
const E: usize = 64;
const H: usize = 4;
const HK: usize = 2;
const D: usize = 16;
const F: usize = 96;
const V: usize = 50;

fn rand(n: usize, seed: u64, scale: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 33) as f32 / (1u64 << 31) as f32 - 0.5) * 2.0 * scale
        })
        .collect()
}

/// HF-layout weights (name, row-major shape, values).
fn hf_weights() -> Vec<(String, Vec<usize>, Vec<f32>)> {
    let mut w = vec![
        ("model.embed_tokens.weight".to_string(), vec![V, E], rand(V * E, 1, 1.0)),
        ("model.norm.weight".to_string(), vec![E], rand(E, 2, 0.2).iter().map(|x| 1.0 + x).collect()),
    ];
    for i in 0..L {
        let p = |n: &str| format!("model.layers.{i}.{n}");
        let s = 100 * (i as u64 + 1);
        w.push((p("input_layernorm.weight"), vec![E], rand(E, s, 0.2).iter().map(|x| 1.0 + x).collect()));
        w.push((p("post_attention_layernorm.weight"), vec![E], rand(E, s + 1, 0.2).iter().map(|x| 1.0 + x).collect()));
        w.push((p("self_attn.q_proj.weight"), vec![H * D, E], rand(H * D * E, s + 2, 0.3)));
        w.push((p("self_attn.k_proj.weight"), vec![HK * D, E], rand(HK * D * E, s + 3, 0.3)));
        w.push((p("self_attn.v_proj.weight"), vec![HK * D, E], rand(HK * D * E, s + 4, 0.3)));
        w.push((p("self_attn.o_proj.weight"), vec![E, H * D], rand(E * H * D, s + 5, 0.2)));
        w.push((p("mlp.gate_proj.weight"), vec![F, E], rand(F * E, s + 6, 0.2)));
        w.push((p("mlp.up_proj.weight"), vec![F, E], rand(F * E, s + 7, 0.2)));
        w.push((p("mlp.down_proj.weight"), vec![E, F], rand(E * F, s + 8, 0.2)));
    }
    w
}

/// HF → GGUF row permutation of Q/K (llama.cpp's convert: rows of each head reordered so
/// rotate-half pairs become adjacent pairs).
fn permute(w: &[f32], heads: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; w.len()];
    for h in 0..heads {
        for i in 0..D / 2 {
            for t in 0..2 {
                let (dst, src) = (h * D + 2 * i + t, h * D + t * D / 2 + i);
                out[dst * cols..][..cols].copy_from_slice(&w[src * cols..][..cols]);
            }
        }
    }
    out
}

fn gguf_name(hf: &str) -> String {
    let map = [
        ("model.embed_tokens.weight", "token_embd.weight"),
        ("model.norm.weight", "output_norm.weight"),
        ("input_layernorm", "attn_norm"),
        ("post_attention_layernorm", "ffn_norm"),
        ("self_attn.q_proj", "attn_q"),
        ("self_attn.k_proj", "attn_k"),
        ("self_attn.v_proj", "attn_v"),
        ("self_attn.o_proj", "attn_output"),
        ("mlp.gate_proj", "ffn_gate"),
        ("mlp.up_proj", "ffn_up"),
        ("mlp.down_proj", "ffn_down"),
        ("model.layers.", "blk."),
    ];
    let mut s = hf.to_string();
    for (a, b) in map {
        s = s.replace(a, b);
    }
    s
}

fn gguf_bytes(arch: &str, matrix_type: GgmlType) -> Vec<u8> {
    gguf_bytes_with(arch, matrix_type, 10000.0, "")
}

/// [`gguf_bytes`] with a given `rope.freq_base` and the HF tensor `nan_tensor` all NaN.
fn gguf_bytes_with(arch: &str, matrix_type: GgmlType, rope_base: f32, nan_tensor: &str) -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.add_metadata("general.architecture", arch).unwrap();
    let k = |n: &str| format!("{arch}.{n}");
    w.add_metadata(k("block_count"), L as u32).unwrap();
    w.add_metadata(k("embedding_length"), E as u32).unwrap();
    w.add_metadata(k("feed_forward_length"), F as u32).unwrap();
    w.add_metadata(k("attention.head_count"), H as u32).unwrap();
    w.add_metadata(k("attention.head_count_kv"), HK as u32).unwrap();
    w.add_metadata(k("context_length"), 64u32).unwrap();
    w.add_metadata(k("rope.freq_base"), rope_base).unwrap();
    w.add_metadata(k("attention.layer_norm_rms_epsilon"), 1e-5f32).unwrap();
    w.add_metadata("tokenizer.ggml.bos_token_id", 1u32).unwrap();
    for (name, shape, mut v) in hf_weights() {
        if name == nan_tensor {
            v.fill(f32::NAN);
        }
        let v = if name.contains("q_proj") {
            permute(&v, H, E)
        } else if name.contains("k_proj") {
            permute(&v, HK, E)
        } else {
            v
        };
        let ty = if shape.len() == 2 { matrix_type } else { GgmlType::F32 };
        let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
        w.add_f32_tensor(gguf_name(&name), &shape, ty, &v).unwrap();
    }
    w.to_bytes().unwrap()
}

fn gguf_model(ty: GgmlType) -> LlamaModel {
    let f = GgufFile::from_vec(gguf_bytes("llama", ty)).unwrap();
    LlamaModel::from_gguf(&f, CompileOptions::default()).unwrap()
}

fn hf_model() -> LlamaModel {
    let dir = std::env::temp_dir().join(format!("rlx_models_tiny_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ws = hf_weights();
    let ts: Vec<(String, Tensor)> = ws.into_iter().map(|(n, s, v)| (n, Tensor::from_vec(v, &s).unwrap())).collect();
    let bytes = rlx_safetensors::serialize(ts.iter().map(|(n, t)| (n.as_str(), t)), None).unwrap();
    std::fs::write(dir.join("model.safetensors"), bytes).unwrap();
    let cfg = serde_json::json!({
        "model_type": "llama", "hidden_size": E, "num_hidden_layers": L, "num_attention_heads": H,
        "num_key_value_heads": HK, "intermediate_size": F, "vocab_size": V, "max_position_embeddings": 64,
        "rope_theta": 10000.0, "rms_norm_eps": 1e-5, "tie_word_embeddings": true, "bos_token_id": 1
    });
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    let m = LlamaModel::from_hf_dir(&dir, CompileOptions::default()).unwrap();
    std::fs::remove_dir_all(&dir).ok();
    m
}

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    let (a, b) = (a.as_slice::<f32>().unwrap(), b.as_slice::<f32>().unwrap());
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

const PROMPT: [u32; 7] = [3, 17, 42, 5, 9, 11, 30];

#[test]
fn gguf_permuted_and_hf_layouts_agree() {
    let (mut a, mut b) = (gguf_model(GgmlType::F32), hf_model());
    assert_eq!(a.config().rope_style, rlx_ir::op::RopeStyle::AdjacentPairs);
    assert_eq!(b.config().rope_style, rlx_ir::op::RopeStyle::RotateHalf);
    let (mut ca, mut cb) = (a.new_cache(1), b.new_cache(1));
    let la = a.forward(&mut ca, &PROMPT).unwrap();
    let lb = b.forward(&mut cb, &PROMPT).unwrap();
    assert_eq!(la.shape(), &[1, V]);
    assert!(max_diff(&la, &lb) < 1e-4, "{}", max_diff(&la, &lb));
    let la = a.forward(&mut ca, &[7]).unwrap();
    let lb = b.forward(&mut cb, &[7]).unwrap();
    assert!(max_diff(&la, &lb) < 1e-4, "{}", max_diff(&la, &lb));
}

#[test]
fn cached_decode_equals_full_recompute() {
    let mut m = gguf_model(GgmlType::F32);
    // 41 tokens: the cache grows past its first capacities (16, 32), the full run pads to 48
    // (a bucket that is not a power of two, `runner::chunk_bucket`).
    let seq: Vec<u32> = (0..41).map(|i| (i * 7 + 3) % V as u32).collect();
    let mut full = m.new_cache(1);
    let want = m.forward(&mut full, &seq).unwrap();
    let mut inc = m.new_cache(1);
    m.forward(&mut inc, &seq[..3]).unwrap();
    let mut got = None;
    for &t in &seq[3..] {
        got = Some(m.forward(&mut inc, &[t]).unwrap());
    }
    assert_eq!(inc.len(), 41);
    assert!(inc.capacity() >= 41);
    let d = max_diff(&want, &got.unwrap());
    assert!(d < 1e-4, "{d}");
}

/// A prompt fed in chunks of 9, 21 and 11 tokens (the later chunks attend over the cache and
/// themselves in flash tiles, `attention_with_kvcache` with 8 or more new tokens) gives the
/// logits of the whole prompt run at once, for a batch of one and of two sequences.
#[test]
fn prompt_in_chunks_equals_full_recompute() {
    let mut m = gguf_model(GgmlType::F32);
    let seq: Vec<u32> = (0..41).map(|i| (i * 5 + 2) % V as u32).collect();
    let other: Vec<u32> = (0..41).map(|i| (i * 11 + 1) % V as u32).collect();
    for batch in [vec![seq.clone()], vec![seq.clone(), other.clone()]] {
        let b = batch.len();
        let cat = |r: std::ops::Range<usize>| batch.iter().flat_map(|s| s[r.clone()].to_vec()).collect::<Vec<u32>>();
        let mut full = m.new_cache(b);
        let want = m.forward(&mut full, &cat(0..41)).unwrap();
        let mut inc = m.new_cache(b);
        let mut got = None;
        for r in [0..9, 9..30, 30..41] {
            got = Some(m.forward(&mut inc, &cat(r)).unwrap());
        }
        assert_eq!(inc.len(), 41);
        let d = max_diff(&want, &got.unwrap());
        assert!(d < 1e-4, "batch {b}: {d}");
    }
}

#[test]
fn batch_of_two_equals_two_runs() {
    let mut m = gguf_model(GgmlType::F32);
    let (p, q) = (&PROMPT[..5], &[8u32, 1, 2, 40, 33][..]);
    let mut c2 = m.new_cache(2);
    let both: Vec<u32> = p.iter().chain(q).copied().collect();
    let l2 = m.forward(&mut c2, &both).unwrap();
    let l2b = m.forward(&mut c2, &[4, 6]).unwrap();
    for (r, seq, next) in [(0, p, 4u32), (1, q, 6u32)] {
        let mut c = m.new_cache(1);
        let l = m.forward(&mut c, seq).unwrap().to_f32_vec();
        let l_next = m.forward(&mut c, &[next]).unwrap().to_f32_vec();
        let row = |t: &Tensor| t.to_f32_vec()[r * V..][..V].to_vec();
        for (a, b) in [(row(&l2), l), (row(&l2b), l_next)] {
            let d = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
            assert!(d < 1e-4, "row {r}: {d}");
        }
    }
}

#[test]
fn packed_q8_0_weights_run_through_dequant_matmul() {
    // The packed model against a dense model holding the same weights dequantized: they differ
    // only by the kernel's arithmetic (activation quantization in the fast kernel's mode).
    let f = GgufFile::from_vec(gguf_bytes("llama", GgmlType::Q8_0)).unwrap();
    let cfg = LlamaConfig::from_gguf(&f).unwrap();
    let packed = Weights::from_gguf(&f, &cfg).unwrap();
    assert!(matches!(packed.get("blk.0.attn_q.weight"), Some(Weight::Packed { scheme, .. }) if scheme == "Q8_0"));
    let dense: BTreeMap<String, Weight> = packed
        .iter()
        .map(|(n, w)| {
            let t = match w {
                Weight::Dense(t) => t.clone(),
                Weight::Packed { .. } | Weight::PackedRows { .. } => {
                    Tensor::from_vec(f.dequantize(n).unwrap(), &w.shape()).unwrap()
                }
            };
            (n.to_string(), Weight::Dense(t))
        })
        .collect();
    let mut a = LlamaModel::new(cfg.clone(), packed, CompileOptions::default()).unwrap();
    let mut b = LlamaModel::new(cfg, Weights::from_map(dense), CompileOptions::default()).unwrap();
    prompt_logits_close(&mut a, &mut b, "Q8_0");
}

/// Weights moved into pools (`Weights::pool_packed`, here every group whatever its size; a
/// model pools groups of 4 MiB or more) give the same bits: a product over a pool's rows
/// reads the same bytes in place. Q4_0 (pooled as GGUF blocks, then converted to split rows
/// with the rows' layout following) and Q8_0, exact and fast, against the plain
/// weights (converted, Q/K/V and gate/up joined): the prompt's logits and 8 greedy tokens
/// bit-identical; each pooled weight's rows hold its own bytes; total bytes unchanged; a second
/// call makes no pool of pools.
#[test]
fn pooled_weights_give_the_same_bits() {
    for ty in [GgmlType::Q4_0, GgmlType::Q8_0] {
        for fast in [false, true] {
            let f = GgufFile::from_vec(gguf_bytes("llama", ty)).unwrap();
            let cfg = LlamaConfig::from_gguf(&f).unwrap();
            // Pooled as loaded (GGUF blocks): `LlamaModel::new` then converts the pools to split
            // rows (Q4_0) and joins nothing; the plain weights it converts and joins.
            let plain = Weights::from_gguf(&f, &cfg).unwrap();
            let mut pooled = plain.clone();
            let made = pooled.pool_packed(0);
            assert!(made >= 2, "{ty:?}: {made} pools");
            assert_eq!(pooled.pool_packed(0), 0, "{ty:?}: pools of pools");
            assert_eq!(pooled.bytes(), plain.bytes(), "{ty:?}");
            let mut rows_of = 0;
            for (name, w) in pooled.iter() {
                let Weight::PackedRows { pool, row_start, n, .. } = w else { continue };
                rows_of += 1;
                let pt = pooled.get(pool).unwrap().tensor().unwrap();
                let bpr = pt.shape()[1];
                let own = plain.get(name).unwrap().tensor().unwrap().as_slice::<u8>().unwrap();
                assert_eq!(&pt.as_slice::<u8>().unwrap()[row_start * bpr..(row_start + n) * bpr], own, "{name}");
            }
            assert!(rows_of > 2, "{ty:?}");
            let opts = CompileOptions { quantized_activations: fast, ..Default::default() };
            let mut a = LlamaModel::new(cfg.clone(), plain, opts.clone()).unwrap();
            let mut b = LlamaModel::new(cfg, pooled, opts).unwrap();
            let (mut ca, mut cb) = (a.new_cache(1), b.new_cache(1));
            let (la, lb) = (a.forward(&mut ca, &PROMPT).unwrap(), b.forward(&mut cb, &PROMPT).unwrap());
            let bits = |t: &Tensor| t.as_slice::<f32>().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&la), bits(&lb), "{ty:?} fast={fast}: logits");
            let gen_opts = rlx_models::GenerateOptions { max_tokens: 8, stop_tokens: vec![] };
            let ga =
                rlx_models::Generator::new(&mut a).generate(&PROMPT, &gen_opts, |l, _| rlx_models::argmax(l), |_| true);
            let gb =
                rlx_models::Generator::new(&mut b).generate(&PROMPT, &gen_opts, |l, _| rlx_models::argmax(l), |_| true);
            assert_eq!(ga.unwrap().tokens, gb.unwrap().tokens, "{ty:?} fast={fast}: greedy tokens");
        }
    }
    // A malformed packed weight (f32 bytes, or a shape other than `[n, bytes_per_row]`) is left
    // as it is, not pooled (and no panic).
    let packed = |data: Tensor, n: usize| Weight::Packed {
        data,
        scheme: "Q8_0".into(),
        n,
        k: 32,
        layout: rlx_gguf::Layout::Blocks,
    };
    let map: BTreeMap<String, Weight> = [
        ("a".to_string(), packed(Tensor::zeros(&[2, 34], rlx_ir::DType::F32), 2)),
        ("b".to_string(), packed(Tensor::zeros(&[68], rlx_ir::DType::U8), 2)),
        ("c".to_string(), packed(Tensor::zeros(&[3, 34], rlx_ir::DType::U8), 2)),
    ]
    .into_iter()
    .collect();
    let mut w = Weights::from_map(map);
    assert_eq!(w.pool_packed(0), 0);
    assert!(w.iter().all(|(_, x)| matches!(x, Weight::Packed { .. })));
}

/// The two models' logits for [`PROMPT`] within 2% of the largest logit of `b`: what Q8
/// activations move them by on this model; a wrong weight or layout moves them by ~100%.
fn prompt_logits_close(a: &mut LlamaModel, b: &mut LlamaModel, what: &str) {
    let (mut ca, mut cb) = (a.new_cache(1), b.new_cache(1));
    let la = a.forward(&mut ca, &PROMPT).unwrap();
    let lb = b.forward(&mut cb, &PROMPT).unwrap();
    let scale = lb.as_slice::<f32>().unwrap().iter().fold(0f32, |m, x| m.max(x.abs()));
    let d = max_diff(&la, &lb);
    assert!(d <= 2e-2 * scale, "{what}: {d} (logit scale {scale})");
}

#[test]
fn bad_input_is_a_typed_error() {
    let f = GgufFile::from_vec(gguf_bytes("gpt2", GgmlType::F32)).unwrap();
    let e = LlamaConfig::from_gguf(&f).unwrap_err();
    assert!(matches!(&e, ModelError::UnsupportedArchitecture { arch, .. } if arch == "gpt2"), "{e}");
    assert!(e.to_string().contains("gpt2") && e.to_string().contains("llama"), "{e}");
    let mut m = gguf_model(GgmlType::F32);
    let mut c = m.new_cache(1);
    let long: Vec<u32> = vec![1; 65];
    assert!(matches!(m.forward(&mut c, &long), Err(ModelError::ContextOverflow { needed: 65, context: 64 })));
    assert!(matches!(m.forward(&mut c, &[V as u32]), Err(ModelError::BadToken { .. })));
    assert!(matches!(m.forward(&mut c, &[]), Err(ModelError::Batch { .. })));
    let mut g = rlx_models::Generator::new(&mut m);
    let opts = rlx_models::GenerateOptions { max_tokens: 3, stop_tokens: vec![] };
    let s = g.generate(&[], &opts, |l, _| rlx_models::argmax(l), |_| true).unwrap();
    assert_eq!((s.prompt_tokens, s.tokens.len()), (1, 3));
}

/// Corrupt files: a NaN `rope.freq_base` is refused when the config is read; NaN weights,
/// which make every logit NaN, stop generation with `NanLogits` instead of sampling an
/// arbitrary token (greedy over NaNs picked id 0).
#[test]
fn nan_metadata_and_nan_logits_are_errors() {
    let f = GgufFile::from_vec(gguf_bytes_with("llama", GgmlType::F32, f32::NAN, "")).unwrap();
    let e = LlamaConfig::from_gguf(&f).unwrap_err();
    assert!(e.to_string().contains("rope.freq_base") && e.to_string().contains("NaN"), "{e}");
    let f = GgufFile::from_vec(gguf_bytes_with("llama", GgmlType::F32, 10000.0, "model.norm.weight")).unwrap();
    let mut m = LlamaModel::from_gguf(&f, CompileOptions::default()).unwrap();
    let mut g = rlx_models::Generator::new(&mut m);
    let opts = rlx_models::GenerateOptions { max_tokens: 3, stop_tokens: vec![] };
    let e = g.generate(&PROMPT, &opts, |l, _| rlx_models::argmax(l), |_| true).unwrap_err();
    assert!(matches!(e, ModelError::NanLogits { step: 0, seq: 0 }), "{e}");
    assert!(e.to_string().contains("NaN logits"), "{e}");
}

#[test]
fn config_json_names_what_is_missing() {
    let e = LlamaConfig::from_hf_config(r#"{"model_type": "bert"}"#).unwrap_err();
    assert!(e.to_string().contains("bert"), "{e}");
    let e = LlamaConfig::from_hf_config(r#"{"model_type": "llama", "hidden_size": 8}"#).unwrap_err();
    assert!(e.to_string().contains("num_attention_heads"), "{e}");
}

#[test]
fn batch_of_different_lengths_equals_one_at_a_time() {
    let mut m = gguf_model(GgmlType::F32);
    // 20 tokens grow the cache past its first capacity (16) during decode of the batch; the
    // empty prompt starts from BOS.
    let long: Vec<u32> = (0..20).map(|i| (i * 5 + 2) % V as u32).collect();
    let prompts: [&[u32]; 3] = [&long, &PROMPT[..3], &[]];
    let opts = rlx_models::GenerateOptions { max_tokens: 8, stop_tokens: vec![] };
    let mut g = rlx_models::Generator::new(&mut m);
    let batch = g.generate_batch(&prompts, &opts, |_, l, _| rlx_models::argmax(l), |_, _| true).unwrap();
    assert_eq!(g.cache().lens(), &[27, 10, 8]);
    for (p, got) in prompts.iter().zip(&batch) {
        let one = g.generate(p, &opts, |l, _| rlx_models::argmax(l), |_| true).unwrap();
        assert_eq!(got.tokens, one.tokens, "prompt {p:?}");
        assert_eq!(got.prompt_tokens, one.prompt_tokens);
    }
    // The logits themselves: per-sequence positions and padding masks, against single runs.
    let mut c3 = m.new_cache(3);
    let l3 = m.forward_seqs(&mut c3, &[&long, &PROMPT[..3], &[9]]).unwrap().to_f32_vec();
    let l3b = m.forward_seqs(&mut c3, &[&[4], &[], &[5, 6]]).unwrap().to_f32_vec();
    for (r, (first, next)) in
        [(&long[..], &[4u32][..]), (&PROMPT[..3], &[][..]), (&[9u32][..], &[5, 6][..])].into_iter().enumerate()
    {
        let mut c = m.new_cache(1);
        let mut want = vec![(&l3, m.forward(&mut c, first).unwrap().to_f32_vec())];
        if !next.is_empty() {
            want.push((&l3b, m.forward(&mut c, next).unwrap().to_f32_vec()));
        }
        for (got, w) in want {
            let d = got[r * V..][..V].iter().zip(&w).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max);
            assert!(d < 1e-4, "row {r}: {d}");
        }
    }
    assert_eq!(c3.lens(), &[21, 3, 3]);
    let mut c2 = m.new_cache(2);
    assert!(matches!(m.forward_seqs(&mut c2, &[&[1]]), Err(ModelError::Batch { .. })));
    assert!(matches!(m.forward_seqs(&mut c2, &[&[], &[]]), Err(ModelError::Batch { .. })));
}

#[test]
fn f16_cache_halves_memory_and_stays_close() {
    use rlx_models::KvCacheDtype;
    let mut m = gguf_model(GgmlType::F32);
    let (mut c32, mut c16) = (m.new_cache(1), rlx_models::KvCache::with_dtype(m.config(), 1, KvCacheDtype::F16));
    let seq: Vec<u32> = (0..23).map(|i| (i * 7 + 3) % V as u32).collect();
    let (mut worst, mut scale) = (0f32, 0f32);
    for (i, &t) in seq.iter().enumerate() {
        let a = m.forward(&mut c32, &[t]).unwrap();
        let b = m.forward(&mut c16, &[t]).unwrap();
        scale = a.as_slice::<f32>().unwrap().iter().fold(scale, |s, x| s.max(x.abs()));
        if i == 0 {
            // Nothing cached yet: the step attends to the new (f32) row only.
            assert_eq!(a.to_f32_vec(), b.to_f32_vec());
        }
        worst = worst.max(max_diff(&a, &b));
    }
    assert_eq!((c32.capacity(), c16.capacity()), (32, 32));
    assert_eq!(c16.bytes() * 2, c32.bytes());
    assert_eq!(c32.bytes(), 2 * L * HK * 32 * D * 4);
    // K/V rounded to f16 (relative 2^-11 ≈ 5e-4); through 2 layers the logits move by a few
    // times that relative to their scale.
    assert!(worst > 0.0 && worst < 5e-3 * scale, "{worst} (logit scale {scale})");
    assert_eq!("f16".parse::<KvCacheDtype>().unwrap(), KvCacheDtype::F16);
    assert!(matches!("q8".parse::<KvCacheDtype>(), Err(ModelError::BadOption(_))));
    m.set_kv_dtype(KvCacheDtype::F16);
    assert_eq!(m.new_cache(2).dtype(), KvCacheDtype::F16);
}

/// Both modes hold Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 weights (the token embedding too) in split rows; fast
/// mode's prompt logits stay within the activation quantization error of the exact mode's, as
/// `packed_q8_0_weights_run_through_dequant_matmul`'s (a wrong row or scale order in the
/// layout, the embedding gather or a kernel would be off by the weights' size). The kernels'
/// bit-identity across layouts, in both modes, is `rlx-cpu`'s `tests/qmatmul.rs`. (A decode step
/// differs from exact mode by more, ~3% of the logit scale here, for Q8_0 weights in blocks
/// too: fast mode's llama.cpp attention and norms, not the layout.)
#[test]
fn split_rows_in_both_modes_fast_close_to_exact() {
    for ty in [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0] {
        let f = GgufFile::from_vec(gguf_bytes("llama", ty)).unwrap();
        let mut exact = LlamaModel::from_gguf(&f, CompileOptions::default()).unwrap();
        let mut fast = LlamaModel::from_gguf(&f, CompileOptions::default().with_quantized_activations(true)).unwrap();
        for (model, want) in [(&exact, rlx_gguf::Layout::SplitRows), (&fast, rlx_gguf::Layout::SplitRows)] {
            for name in ["token_embd.weight", "blk.1.ffn_down.weight"] {
                let layout = match model.weights().get(name) {
                    Some(Weight::Packed { layout, .. }) => *layout,
                    _ => panic!("{name} is not packed"),
                };
                assert_eq!(layout, want, "{ty} {name}");
            }
        }
        prompt_logits_close(&mut fast, &mut exact, ty.name());
    }
}

/// Random `cache.{l}.k` / `cache.{l}.v` feeds `[b, HK, c, D]` of magnitude up to `scale`.
fn cache_feeds(b: usize, c: usize, scale: f32) -> Vec<(String, Tensor)> {
    let mut feeds = vec![];
    for l in 0..L {
        for kv in ["k", "v"] {
            let t = Tensor::from_vec(rand(b * HK * c * D, 7 + l as u64, scale), &[b, HK, c, D]).unwrap();
            feeds.push((format!("cache.{l}.{kv}"), t));
        }
    }
    feeds
}

/// One run of a compiled step graph on `feeds` (the non-weight inputs) plus `w`'s weights.
fn run_step(
    exe: &mut rlx_runtime::CompiledGraph,
    mut feeds: Vec<(String, Tensor)>,
    cfg: &LlamaConfig,
    w: &Weights,
) -> Vec<Tensor> {
    for n in rlx_models::weights::graph_weight_names(cfg, w) {
        feeds.push((n.clone(), w.get(&n).unwrap().tensor().unwrap().clone()));
    }
    let refs: Vec<(&str, &Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t)).collect();
    let mut out = vec![];
    exe.run_into(&refs, &mut out).unwrap();
    out
}

/// `Weights::fuse_projections` joins Q/K/V and gate/up rows: the step graph over the joined
/// weights gives bit-identical logits and new K/V rows to the graph over the separate ones (dense
/// weights without AVX-512: within f32 reordering, see below), for
/// dense and packed weights, prefill and decode shapes, both modes, and with Qwen2's Q/K/V
/// biases and Qwen3's Q/K norms (added to each part after the slice).
#[test]
fn joined_projections_are_bit_identical() {
    use rlx_models::{KvCacheDtype, graph, weights};
    let session = rlx_runtime::Session::try_new(rlx_runtime::Device::Cpu).unwrap();
    for (ty, extras) in
        [(GgmlType::F32, false), (GgmlType::Q8_0, false), (GgmlType::Q4_1, false), (GgmlType::Q4_1, true)]
    {
        let f = GgufFile::from_vec(gguf_bytes("llama", ty)).unwrap();
        let mut cfg = LlamaConfig::from_gguf(&f).unwrap();
        let mut apart = Weights::from_gguf(&f, &cfg).unwrap();
        if extras {
            (cfg.qkv_bias, cfg.qk_norm) = (true, true);
            let mut map: BTreeMap<String, Weight> = apart.iter().map(|(n, w)| (n.to_string(), w.clone())).collect();
            for l in 0..L {
                for (n, len, seed) in
                    [("attn_q.bias", H * D, 1), ("attn_k.bias", HK * D, 2), ("attn_v.bias", HK * D, 3)]
                {
                    let t = Tensor::from_vec(rand(len, 40 + seed + l as u64, 0.5), &[len]).unwrap();
                    map.insert(format!("blk.{l}.{n}"), Weight::Dense(t));
                }
                for (n, seed) in [("attn_q_norm.weight", 4), ("attn_k_norm.weight", 5)] {
                    let v: Vec<f32> = rand(D, 40 + seed + l as u64, 0.5).iter().map(|x| 1.0 + x).collect();
                    map.insert(format!("blk.{l}.{n}"), Weight::Dense(Tensor::from_vec(v, &[D]).unwrap()));
                }
            }
            apart = Weights::from_map(map);
        }
        apart.to_split_rows().unwrap();
        let mut joined = apart.clone();
        assert_eq!(joined.fuse_projections(&cfg).unwrap(), 2 * L, "{ty}");
        assert!(joined.get("blk.1.attn_k.weight").is_none() && joined.get("blk.1.ffn_up.weight").is_none());
        assert_eq!(joined.get("blk.1.attn_qkv.weight").unwrap().shape(), vec![(H + 2 * HK) * D, E]);
        assert_eq!(joined.get("blk.0.ffn_gate_up.weight").unwrap().shape(), vec![2 * F, E]);
        let names = weights::graph_weight_names(&cfg, &joined);
        assert_eq!(names.len(), weights::expected(&cfg).len() - 3 * L, "{ty}: {names:?}");
        assert_eq!(names.iter().any(|n| n.ends_with("attn_k_norm.weight")), extras);
        for ggml in [false, true] {
            for s in [1usize, 7, 64] {
                let c = 8;
                let (mut outs, mut products) = (vec![], vec![]);
                for w in [&apart, &joined] {
                    let g = graph::step_graph(&cfg, w, (1, s, c, KvCacheDtype::F32), ggml).unwrap();
                    let opts = CompileOptions::default().with_quantized_activations(ggml);
                    let mut exe = session.try_compile_with(g, &opts).unwrap();
                    products.push(exe.steps().iter().filter(|st| st.op == "dequant_matmul").count());
                    let (cos, sin) = rlx_models::runner::rope_tables(&cfg, 3, s);
                    let (cos, sin) = if ggml {
                        let (mut c2, mut s2) = (vec![0.0; s * D], vec![0.0; s * D]);
                        rlx_models::ggml_numerics::rope_tables_ggml(
                            10000.0,
                            1.0,
                            cfg.rope_style,
                            D,
                            3,
                            &mut c2,
                            &mut s2,
                        );
                        (c2, s2)
                    } else {
                        (cos, sin)
                    };
                    // Three cached positions, then the new block (causal).
                    let mask: Vec<f32> = (0..s * (c + s))
                        .map(|ij| {
                            let (i, j) = (ij / (c + s), ij % (c + s));
                            if j < 3 || (j >= c && j - c <= i) { 0.0 } else { f32::NEG_INFINITY }
                        })
                        .collect();
                    let toks: Vec<i32> = (0..s).map(|i| PROMPT[i % PROMPT.len()] as i32).collect();
                    let mut feeds: Vec<(String, Tensor)> = vec![
                        ("tokens".into(), Tensor::from_vec(toks, &[1, s]).unwrap()),
                        ("rope_cos".into(), Tensor::from_vec(cos, &[s, D]).unwrap()),
                        ("rope_sin".into(), Tensor::from_vec(sin, &[s, D]).unwrap()),
                        ("mask".into(), Tensor::from_vec(mask, &[1, s, c + s]).unwrap()),
                        ("last".into(), Tensor::from_vec(vec![s as i32 - 1], &[1]).unwrap()),
                        ("cache_len".into(), Tensor::from_vec(vec![3i32], &[1]).unwrap()),
                    ];
                    feeds.extend(cache_feeds(1, c, 1.0));
                    outs.push(run_step(&mut exe, feeds, &cfg, w));
                }
                assert_eq!(outs[0].len(), 1 + 2 * L);
                // Packed weights: a block of 64 tokens runs one product per part on the
                // joined weight's rows (`dequant_matmul_rows`), fewer tokens one per joined
                // weight.
                if ty != GgmlType::F32 {
                    let want = if s >= 64 { products[0] } else { products[0] - 3 * L };
                    assert_eq!(products[1], want, "{ty} s={s}: products apart / joined {products:?}");
                }
                for (k, (a, b)) in outs[0].iter().zip(&outs[1]).enumerate() {
                    let (a, b) = (a.as_slice::<f32>().unwrap(), b.as_slice::<f32>().unwrap());
                    let what = format!("{ty} extras={extras} ggml={ggml} s={s} output {k}");
                    assert!(a.iter().all(|x| x.is_finite()), "{what}");
                    if ty == GgmlType::F32 && !rlx_cpu::SimdLevel::Native.avx512() {
                        // Without AVX-512, f32 products of a few rows run on the `gemm` crate,
                        // whose blocking of K depends on N: the joined product sums in another
                        // order (measured on AMD Zen 3: up to 7e-6 relative at s = 7). A wrong
                        // row or a lost bias moves outputs by far more than the bound.
                        let close = |x: f32, y: f32| (x - y).abs() <= 1e-4 * x.abs().max(1.0);
                        assert!(a.iter().zip(b).all(|(&x, &y)| close(x, y)), "{what}");
                        continue;
                    }
                    assert!(a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits()), "{what}");
                }
            }
        }
    }
}

/// The graph of a first block over an empty cache (`C = 0`: no cache inputs, causal
/// `scaled_dot_product_attention` over the block) gives the logits and new K/V rows of the
/// general prefill graph (`C = 8`, `attention_with_kvcache` over cache + block) with
/// `cache_len = 0`, to f32 rounding (flash tiles sum in another order), batch of one and two.
#[test]
fn first_block_graph_equals_the_cache_graph_on_an_empty_cache() {
    use rlx_models::{KvCacheDtype, graph, weights};
    let session = rlx_runtime::Session::try_new(rlx_runtime::Device::Cpu).unwrap();
    let f = GgufFile::from_vec(gguf_bytes("llama", GgmlType::Q8_0)).unwrap();
    let cfg = LlamaConfig::from_gguf(&f).unwrap();
    let w = Weights::from_gguf(&f, &cfg).unwrap();
    for (b, s) in [(1usize, 7usize), (2, 16)] {
        let mut outs = vec![];
        for c in [0usize, 8] {
            let g = graph::step_graph(&cfg, &w, (b, s, c, KvCacheDtype::F32), false).unwrap();
            let ops: Vec<String> = g.nodes().iter().map(|n| n.op.name()).collect();
            let sdpa = ops.iter().filter(|o| o.contains("scaled_dot_product_attention")).count();
            assert_eq!(sdpa, if c == 0 { L } else { 0 }, "c={c}: {ops:?}");
            assert_eq!(g.inputs().len(), 6 + 2 * L * usize::from(c > 0) + weights::graph_weight_names(&cfg, &w).len());
            let mut exe = session.try_compile_with(g, &CompileOptions::default()).unwrap();
            let (cos, sin) = rlx_models::runner::rope_tables(&cfg, 0, s);
            let rep = |v: Vec<f32>| v.repeat(b);
            let toks: Vec<i32> = (0..b * s).map(|i| ((i * 7 + 3) % V) as i32).collect();
            let mut feeds: Vec<(String, Tensor)> = vec![
                ("tokens".into(), Tensor::from_vec(toks, &[b, s]).unwrap()),
                ("rope_cos".into(), Tensor::from_vec(rep(cos), &[b * s, D]).unwrap()),
                ("rope_sin".into(), Tensor::from_vec(rep(sin), &[b * s, D]).unwrap()),
                ("mask".into(), Tensor::zeros(&[b, s, c + s], rlx_ir::DType::F32)),
                ("last".into(), Tensor::from_vec((0..b).map(|r| (r * s + s - 1) as i32).collect(), &[b]).unwrap()),
                ("cache_len".into(), Tensor::from_vec(vec![0i32; b], &[b]).unwrap()),
            ];
            // Garbage past cache_len = 0: never read.
            feeds.extend(cache_feeds(b, c, 1e3).into_iter().filter(|_| c > 0));
            outs.push(run_step(&mut exe, feeds, &cfg, &w));
        }
        assert_eq!(outs[0].len(), 1 + 2 * L);
        for (k, (a, c)) in outs[0].iter().zip(&outs[1]).enumerate() {
            assert_eq!(a.shape(), c.shape());
            let d = max_diff(a, c);
            let mag = c.to_f32_vec().iter().fold(0f32, |m, x| m.max(x.abs()));
            assert!(d <= 1e-5 * mag.max(1.0), "b={b} s={s} output {k}: {d} (max |x| {mag})");
        }
    }
}
