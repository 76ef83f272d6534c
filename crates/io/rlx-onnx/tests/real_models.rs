//! Real models against ONNX Runtime: paraphrase-MiniLM-L3-v2 (fp32) and an int8-quantized
//! MiniLM, imported with rlx-onnx and run on the CPU, give sentence embeddings (last hidden
//! state mean-pooled over the attention mask, L2-normalized) whose cosine with ONNX Runtime
//! 1.32's is ≥ 0.9999 (fp32) / ≥ 0.999 (int8) on 16 sentences. The reference (token ids,
//! masks, embeddings) comes from `tools/refgen/gen_onnx_models.py`; the models from
//! `tools/fetch.sh minilm-onnx`. Without the model files the test prints SKIP to stderr.
//! The fp32 model's attention (MatMul, Div, Add mask, Softmax, MatMul per layer) must reach
//! the CPU's native attention kernel through the compiler's `attention` pass: one
//! `attention_f32*` step per layer, and no separate softmax step; the head transposes around it
//! (3 in, 1 out per layer) are absorbed into the kernel's `[B, S, H, D]` layout, so no
//! `transpose` step is left.

use rlx_ir::{DType, Tensor};
use rlx_onnx::{ImportOptions, import_file};
use rlx_runtime::{Device, Session};
use serde_json::Value;
use std::collections::HashMap;

const FIXTURE: &str = include_str!("fixtures/minilm_onnx_embeddings.json");

fn int_matrix(v: &Value) -> (Vec<i64>, usize, usize) {
    let rows = v.as_array().expect("rows");
    let cols = rows[0].as_array().expect("cols").len();
    let flat = rows.iter().flat_map(|r| r.as_array().expect("row").iter().map(|x| x.as_i64().expect("int"))).collect();
    (flat, rows.len(), cols)
}

/// Mean of `hidden` [b, s, d] over the positions where `mask` [b, s] is 1, L2-normalized.
fn mean_pool_normalize(hidden: &Tensor, mask: &[i64]) -> Vec<Vec<f64>> {
    let (b, s, d) = (hidden.shape()[0], hidden.shape()[1], hidden.shape()[2]);
    let h = hidden.to_f64_vec();
    (0..b)
        .map(|i| {
            let mut acc = vec![0.0; d];
            let mut n = 0.0;
            for j in 0..s {
                if mask[i * s + j] != 0 {
                    n += 1.0;
                    for (a, x) in acc.iter_mut().zip(&h[(i * s + j) * d..(i * s + j + 1) * d]) {
                        *a += x;
                    }
                }
            }
            let norm = acc.iter().map(|a| (a / n) * (a / n)).sum::<f64>().sqrt();
            acc.iter().map(|a| a / n / norm).collect()
        })
        .collect()
}

fn check(model: &str, min_cos: f64, attention_steps: Option<usize>) {
    let fx: Value = serde_json::from_str(FIXTURE).expect("fixture");
    let m = &fx["models"][model];
    let path = rlx_fetched::cache_dir().join("minilm-onnx").join(m["file"].as_str().expect("file"));
    if !path.exists() {
        eprintln!("SKIP real_models::{model}: {} is absent (run tools/fetch.sh minilm-onnx)", path.display());
        return;
    }
    let (ids, b, s) = int_matrix(&fx["input_ids"]);
    let (mask, _, _) = int_matrix(&fx["attention_mask"]);
    let mut feeds = vec![
        ("input_ids".to_string(), Tensor::from_vec(ids, &[b, s]).expect("ids")),
        ("attention_mask".to_string(), Tensor::from_vec(mask.clone(), &[b, s]).expect("mask")),
    ];
    if m["token_type_ids"].as_bool() == Some(true) {
        feeds.push(("token_type_ids".to_string(), Tensor::from_vec(vec![0i64; b * s], &[b, s]).expect("types")));
    }
    let shapes: HashMap<String, Vec<usize>> = feeds.iter().map(|(n, _)| (n.clone(), vec![b, s])).collect();
    let (_, im) = import_file(&path, ImportOptions { input_shapes: shapes, ..Default::default() })
        .unwrap_or_else(|e| panic!("{model}: import: {e}"));
    let hidden_name = m["hidden_output"].as_str().expect("hidden_output");
    let k = im.outputs.iter().position(|o| o == hidden_name).unwrap_or_else(|| panic!("{model}: no {hidden_name}"));
    let mut compiled = Session::try_new(Device::Cpu)
        .expect("cpu")
        .try_compile(im.graph)
        .unwrap_or_else(|e| panic!("{model}: compile: {e}"));
    let refs: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let outs = compiled.run_tensors(&refs).unwrap_or_else(|e| panic!("{model}: run: {e}"));
    let steps = compiled.steps();
    let n_attn = steps.iter().filter(|s| s.kernel.starts_with("attention_f32")).count();
    let n_softmax = steps.iter().filter(|s| s.kernel == "softmax_f32").count();
    let n_transpose = steps.iter().filter(|s| s.kernel == "transpose").count();
    eprintln!(
        "{model}: {} steps, {n_attn} attention_f32, {n_softmax} softmax_f32, {n_transpose} transpose",
        steps.len()
    );
    if let Some(want) = attention_steps {
        assert_eq!((n_attn, n_softmax), (want, 0), "{model}: attention steps (native kernel, no softmax left)");
        assert_eq!(n_transpose, 0, "{model}: head transposes absorbed into the attention layout");
    }
    let hidden = outs[k].cast(DType::F32);
    assert_eq!(&hidden.shape()[..2], &[b, s], "{model}: hidden state shape");
    let got = mean_pool_normalize(&hidden, &mask);
    let want = m["embeddings"].as_array().expect("embeddings");
    let mut worst = f64::INFINITY;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let w: Vec<f64> = w.as_array().expect("row").iter().map(|x| x.as_f64().expect("f64")).collect();
        let wn = w.iter().map(|x| x * x).sum::<f64>().sqrt();
        let cos = g.iter().zip(&w).map(|(a, b)| a * b).sum::<f64>() / wn;
        assert!(cos >= min_cos, "{model}: sentence {i}: cosine {cos} < {min_cos}");
        worst = worst.min(cos);
    }
    eprintln!("{model}: worst cosine vs ONNX Runtime over {b} sentences: {worst:.9} (1 - cos = {:.2e})", 1.0 - worst);
}

#[test]
fn paraphrase_minilm_l3_fp32_matches_onnxruntime() {
    check("paraphrase-MiniLM-L3-v2", 0.9999, Some(3));
}

#[test]
fn minilm_int8_matches_onnxruntime() {
    check("minilm-int8", 0.999, None);
}
