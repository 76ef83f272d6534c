//! The sampler chain against a float64 numpy reference (tools/refgen/gen_samplers.py ->
//! tests/fixtures/samplers.json): each configuration's kept set and renormalized
//! probabilities; greedy; determinism; and a chi-square check that draws follow the
//! probabilities.

use rlx_text::{Sampler, SamplerConfig};
use serde_json::Value;

fn fixture() -> Value {
    serde_json::from_str(include_str!("fixtures/samplers.json")).expect("fixture")
}

fn config(c: &Value) -> SamplerConfig {
    let f = |k: &str| c[k].as_f64().unwrap() as f32;
    SamplerConfig {
        temperature: f("temperature"),
        top_k: c["top_k"].as_i64().unwrap() as i32,
        top_p: f("top_p"),
        min_p: f("min_p"),
        typical_p: f("typical_p"),
        repeat_penalty: f("repeat_penalty"),
        repeat_last_n: c["repeat_last_n"].as_i64().unwrap() as i32,
        presence_penalty: f("presence_penalty"),
        frequency_penalty: f("frequency_penalty"),
        mirostat_v2: c["mirostat_v2"]
            .as_array()
            .map(|a| (a[0].as_f64().unwrap() as f32, a[1].as_f64().unwrap() as f32)),
        seed: 1,
    }
}

#[test]
fn kept_sets_and_probabilities_match_numpy() {
    let fx = fixture();
    let logits: Vec<f32> = fx["logits"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
    let history: Vec<u32> = fx["history"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
    for case in fx["cases"].as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let s = Sampler::try_new(config(&case["config"])).expect("valid config");
        let got = s.candidates(&logits, &history);
        let ids: Vec<u32> = got.iter().map(|c| c.id).collect();
        let want_ids: Vec<u32> = case["ids"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as u32).collect();
        assert_eq!(ids, want_ids, "{name}: kept set");
        for (c, p) in got.iter().zip(case["probs"].as_array().unwrap()) {
            let p = p.as_f64().unwrap() as f32;
            assert!((c.p - p).abs() <= 1e-5, "{name}: token {} p {} vs numpy {}", c.id, c.p, p);
        }
    }
}

#[test]
fn greedy_is_argmax_with_ties_to_lowest_id() {
    let mut s = Sampler::new(SamplerConfig::greedy());
    assert_eq!(s.sample(&[0.1, 3.0, -1.0, 3.0, 2.9], &[]), 1);
    assert_eq!(s.sample(&[5.0, 5.0], &[]), 0);
    assert_eq!(s.sample(&[-2.0, -1.0, -3.0], &[]), 1);
}

#[test]
fn same_seed_same_tokens() {
    let logits: Vec<f32> = (0..100).map(|i| ((i * 37 % 17) as f32) * 0.3).collect();
    let run = |seed| {
        let mut s = Sampler::new(SamplerConfig { seed, ..SamplerConfig::default() });
        (0..50).map(|_| s.sample(&logits, &[])).collect::<Vec<_>>()
    };
    assert_eq!(run(42), run(42));
    assert_ne!(run(42), run(43));
}

/// Pearson chi-square of 10k draws against the chain's probabilities (6 categories, 5 degrees
/// of freedom: the 0.999 quantile is 20.5).
#[test]
fn draws_follow_the_distribution() {
    let logits = [2.0f32, 1.5, 1.0, 0.5, 0.0, -0.5];
    let cfg =
        SamplerConfig { top_k: 0, top_p: 1.0, min_p: 0.0, temperature: 1.0, seed: 12345, ..SamplerConfig::default() };
    let mut s = Sampler::new(cfg);
    let cands = s.candidates(&logits, &[]);
    let n = 10_000;
    let mut counts = [0usize; 6];
    for _ in 0..n {
        counts[s.sample(&logits, &[]) as usize] += 1;
    }
    let chi2: f64 = cands
        .iter()
        .map(|c| {
            let e = c.p as f64 * n as f64;
            (counts[c.id as usize] as f64 - e).powi(2) / e
        })
        .sum();
    assert!(chi2 < 20.5, "chi-square {chi2:.2} too large: counts {counts:?}");
}

#[test]
fn bad_settings_are_typed_errors() {
    for cfg in [
        SamplerConfig { top_p: 0.0, ..SamplerConfig::default() },
        SamplerConfig { min_p: 1.5, ..SamplerConfig::default() },
        SamplerConfig { temperature: f32::NAN, ..SamplerConfig::default() },
        SamplerConfig { mirostat_v2: Some((0.0, 0.1)), ..SamplerConfig::default() },
    ] {
        assert!(matches!(Sampler::try_new(cfg), Err(rlx_text::TextError::Sampler(_))));
    }
}
