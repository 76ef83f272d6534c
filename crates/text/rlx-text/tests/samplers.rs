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

/// Greedy with penalties picks the argmax of the penalized logits (llama.cpp's formula, written
/// out here) whether the winner is a penalized token or not, at either end of the vocabulary,
/// ties to the lowest id.
#[test]
fn greedy_with_penalties_is_the_penalized_argmax() {
    let cfg = SamplerConfig {
        repeat_penalty: 1.5,
        frequency_penalty: 0.25,
        presence_penalty: 0.5,
        ..SamplerConfig::greedy()
    };
    let pen = |l: f32, k: f32| (if l <= 0.0 { l * 1.5 } else { l / 1.5 }) - (k * 0.25 + 0.5);
    let want = |logits: &[f32], history: &[u32]| {
        let v: Vec<f32> = (0..logits.len())
            .map(|i| {
                let k = history.iter().filter(|&&t| t as usize == i).count() as f32;
                if k > 0.0 { pen(logits[i], k) } else { logits[i] }
            })
            .collect();
        (0..v.len()).fold(0, |b, i| if v[i] > v[b] { i } else { b }) as u32
    };
    let mut logits: Vec<f32> = (0..1000).map(|i| ((i * 7919 % 1000) as f32) / 100.0 - 5.0).collect();
    let mut s = Sampler::new(cfg);
    for (top, history) in [(999, vec![999u32, 5, 5]), (0, vec![0]), (500, vec![7, 500, 500, 500]), (3, vec![1, 2])] {
        logits[top] = 20.0;
        let got = s.sample(&logits, &history);
        assert_eq!(got, want(&logits, &history), "top {top}, history {history:?}");
        logits[top] = 0.0;
    }
    // A penalized token that stays the largest, and a tie created by the penalty (lowest id wins).
    let l = [1.0f32, 12.0, 2.0, 5.5]; // 12 / 1.5 - 0.75 = 7.25 > 5.5
    assert_eq!(s.sample(&l, &[1]), 1);
    assert_eq!(s.sample(&[6.0f32, 5.5, 10.125], &[2]), 0); // 10.125 / 1.5 - 0.75 = 6
}

/// A temperature so small that `logit / t` overflows (1e-38: every positive logit became +inf,
/// every probability NaN, and the draw fell through to the least likely token) samples the
/// most likely token, as the limit t -> 0 does; negative logits, and a tie at the top, too.
#[test]
fn a_tiny_temperature_samples_the_argmax() {
    for t in [1e-38f32, 1e-45, 1e-20] {
        for seed in 0..20 {
            let cfg =
                SamplerConfig { temperature: t, top_k: 0, top_p: 1.0, min_p: 0.0, seed, ..SamplerConfig::default() };
            let mut s = Sampler::new(cfg);
            assert_eq!(s.sample(&[3.0, 30.47, 30.33, -2.0, 12.0], &[]), 1, "t {t} seed {seed}");
            assert_eq!(s.sample(&[-7.5, -3.25, -9.0], &[]), 1, "t {t} seed {seed}");
            let c = s.candidates(&[1.0, 2.0, 2.0, 0.5], &[]);
            let p: Vec<(u32, f32)> = c.iter().filter(|x| x.p > 0.0).map(|x| (x.id, x.p)).collect();
            assert_eq!(p, [(1, 0.5), (2, 0.5)], "t {t}: a tie at the top splits evenly");
        }
    }
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
    for (cfg, field) in [
        (SamplerConfig { top_p: 0.0, ..SamplerConfig::default() }, "top_p"),
        (SamplerConfig { min_p: 1.5, ..SamplerConfig::default() }, "min_p"),
        (SamplerConfig { temperature: f32::NAN, ..SamplerConfig::default() }, "temperature"),
        (SamplerConfig { repeat_penalty: -1.0, ..SamplerConfig::default() }, "repeat_penalty"),
        (SamplerConfig { mirostat_v2: Some((0.0, 0.1)), ..SamplerConfig::default() }, "mirostat_tau"),
        (SamplerConfig { mirostat_v2: Some((5.0, f32::NAN)), ..SamplerConfig::default() }, "mirostat_eta"),
    ] {
        let e = Sampler::try_new(cfg).unwrap_err();
        assert!(matches!(e, rlx_text::TextError::Sampler { setting, .. } if setting == field), "{e:?}");
    }
    let e = Sampler::try_new(SamplerConfig { top_p: 1.5, ..SamplerConfig::default() }).unwrap_err();
    assert_eq!(e.to_string(), "invalid sampler setting: top_p must be in (0, 1], got 1.5");
}
