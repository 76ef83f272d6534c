//! The sampler chain, with llama.cpp's semantics (`src/llama-sampler.cpp`,
//! `common/sampling.cpp`): penalties -> top-k -> typical-p -> top-p -> min-p -> temperature ->
//! a seeded draw from the renormalized distribution; or, with mirostat v2, temperature ->
//! mirostat v2. Temperature <= 0 is greedy: the argmax of the penalized logits (ties: lowest
//! id).
//!
//! Randomness: ChaCha8 (`rand_chacha::ChaCha8Rng::seed_from_u64(seed)`), one `u64` per draw
//! turned into a uniform `f64` in [0, 1) from its top 53 bits. Same seed, same logits, same
//! history: same tokens, on every platform. (llama.cpp uses `std::mt19937`, so its draws
//! differ; the distributions are the same.)

use std::collections::HashMap;

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};

use crate::TextError;

/// Sampler settings. `Default` gives llama.cpp's defaults (`common_params_sampling`), except
/// that the seed is a fixed number (llama.cpp's default seed means "random").
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerConfig {
    /// Logits are divided by this; `<= 0` means greedy. Default 0.8.
    pub temperature: f32,
    /// Keep the `top_k` most likely tokens; `<= 0` disables. Default 40.
    pub top_k: i32,
    /// Keep the smallest most-likely set with probability mass `>= top_p`; `1.0` disables.
    /// Default 0.95.
    pub top_p: f32,
    /// Keep tokens with probability `>= min_p * p_max`; `0.0` disables. Default 0.05.
    pub min_p: f32,
    /// Locally typical sampling mass; `1.0` disables. Default 1.0.
    pub typical_p: f32,
    /// Repetition penalty on tokens seen in the last `repeat_last_n` (logit divided by it when
    /// positive, multiplied when not); `1.0` disables. Default 1.0.
    pub repeat_penalty: f32,
    /// How many recent tokens the penalties look at; `0` disables, `-1` means all. Default 64.
    pub repeat_last_n: i32,
    /// Subtracted once from the logit of every token seen. Default 0.0.
    pub presence_penalty: f32,
    /// Subtracted per occurrence from the logit of every token seen. Default 0.0.
    pub frequency_penalty: f32,
    /// Mirostat v2 `(tau, eta)` (llama.cpp defaults 5.0, 0.1); replaces the filters. Default off.
    pub mirostat_v2: Option<(f32, f32)>,
    /// RNG seed. Default `0xFFFF_FFFF`.
    pub seed: u64,
}

impl Default for SamplerConfig {
    fn default() -> Self {
        SamplerConfig {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            typical_p: 1.0,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            mirostat_v2: None,
            seed: 0xFFFF_FFFF,
        }
    }
}

impl SamplerConfig {
    /// Greedy decoding: temperature 0, everything else default.
    pub fn greedy() -> SamplerConfig {
        SamplerConfig { temperature: 0.0, ..SamplerConfig::default() }
    }

    /// Check the settings.
    ///
    /// Errors: [`TextError::Sampler`] naming the first bad field: NaN values, `top_p`/`typical_p`
    /// outside `(0, 1]`, `min_p` outside `[0, 1]`, a negative repeat penalty, or mirostat
    /// `tau`/`eta` not positive.
    pub fn validate(&self) -> Result<(), TextError> {
        let check = |setting: &'static str, value: f32, must: &'static str, ok: bool| {
            if ok { Ok(()) } else { Err(TextError::Sampler { setting, must, value }) }
        };
        // The range tests are false for NaN, so NaN fails them too.
        check("temperature", self.temperature, "a number", !self.temperature.is_nan())?;
        check("top_p", self.top_p, "in (0, 1]", self.top_p > 0.0 && self.top_p <= 1.0)?;
        check("typical_p", self.typical_p, "in (0, 1]", self.typical_p > 0.0 && self.typical_p <= 1.0)?;
        check("min_p", self.min_p, "in [0, 1]", (0.0..=1.0).contains(&self.min_p))?;
        check("repeat_penalty", self.repeat_penalty, "a number >= 0", self.repeat_penalty >= 0.0)?;
        check("presence_penalty", self.presence_penalty, "a number", !self.presence_penalty.is_nan())?;
        check("frequency_penalty", self.frequency_penalty, "a number", !self.frequency_penalty.is_nan())?;
        if let Some((tau, eta)) = self.mirostat_v2 {
            check("mirostat_tau", tau, "> 0", tau > 0.0)?;
            check("mirostat_eta", eta, "> 0", eta > 0.0)?;
        }
        Ok(())
    }
}

/// A token candidate: id, (transformed) logit, probability after the last softmax.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    /// Token id.
    pub id: u32,
    /// Logit after the chain's transforms.
    pub logit: f32,
    /// Probability (meaningful after a softmax stage).
    pub p: f32,
}

/// A stateful sampler (RNG and mirostat's `mu`).
#[derive(Clone, Debug)]
pub struct Sampler {
    cfg: SamplerConfig,
    rng: ChaCha8Rng,
    mu: f32,
}

fn softmax(c: &mut [Candidate]) {
    let max = c.iter().map(|x| x.logit).fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0.0f32;
    for x in c.iter_mut() {
        x.p = (x.logit - max).exp();
        sum += x.p;
    }
    for x in c.iter_mut() {
        x.p /= sum;
    }
}

/// Sort by logit descending, ties by id ascending.
fn sort_desc(c: &mut [Candidate]) {
    c.sort_by(desc);
}

/// Most likely first (by logit, `total_cmp`), ties to the lowest id.
fn desc(a: &Candidate, b: &Candidate) -> std::cmp::Ordering {
    b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id))
}

impl Sampler {
    /// A sampler with `cfg` (not validated; see [`Sampler::try_new`]).
    pub fn new(cfg: SamplerConfig) -> Sampler {
        let rng = ChaCha8Rng::seed_from_u64(cfg.seed);
        let mu = cfg.mirostat_v2.map_or(0.0, |(tau, _)| 2.0 * tau);
        Sampler { cfg, rng, mu }
    }

    /// [`Sampler::new`] after [`SamplerConfig::validate`].
    pub fn try_new(cfg: SamplerConfig) -> Result<Sampler, TextError> {
        cfg.validate()?;
        Ok(Sampler::new(cfg))
    }

    /// The settings.
    pub fn config(&self) -> &SamplerConfig {
        &self.cfg
    }

    /// A uniform draw in [0, 1).
    fn uniform(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Occurrences of each token in the penalty window of `history` (its last `repeat_last_n`
    /// tokens); `None` when no penalty is set.
    fn penalty_counts(&self, history: &[u32]) -> Option<HashMap<u32, u32>> {
        let cfg = &self.cfg;
        if cfg.repeat_last_n == 0
            || (cfg.repeat_penalty == 1.0 && cfg.frequency_penalty == 0.0 && cfg.presence_penalty == 0.0)
        {
            return None;
        }
        let n = if cfg.repeat_last_n < 0 { history.len() } else { (cfg.repeat_last_n as usize).min(history.len()) };
        let mut counts: HashMap<u32, u32> = HashMap::new();
        for &t in &history[history.len() - n..] {
            *counts.entry(t).or_default() += 1;
        }
        Some(counts)
    }

    /// `logit` of a token seen `k` times in the window, after the penalties (llama.cpp's order:
    /// repetition, then frequency and presence).
    fn penalize(&self, logit: f32, k: u32) -> f32 {
        let cfg = &self.cfg;
        let l = if logit <= 0.0 { logit * cfg.repeat_penalty } else { logit / cfg.repeat_penalty };
        l - (k as f32 * cfg.frequency_penalty + cfg.presence_penalty)
    }

    /// Apply the penalties for `history` (its last `repeat_last_n` tokens). Touches only the
    /// seen tokens: direct when `c` is in id order (as [`Sampler::candidates`] builds it),
    /// else found by id.
    pub fn apply_penalties(&self, c: &mut [Candidate], history: &[u32]) {
        let Some(counts) = self.penalty_counts(history) else { return };
        for (&id, &k) in &counts {
            let at = match c.get(id as usize) {
                Some(x) if x.id == id => Some(id as usize),
                _ => c.iter().position(|x| x.id == id),
            };
            if let Some(i) = at {
                c[i].logit = self.penalize(c[i].logit, k);
            }
        }
    }

    /// The greedy pick (penalties applied, ties to the lowest id) straight from `logits`,
    /// without a candidate per vocabulary entry (a decode step's sampler ran a 49K-entry
    /// vector through the allocator per token).
    fn greedy_from(&self, logits: &[f32], history: &[u32]) -> Candidate {
        let pen: Vec<(usize, f32)> = self
            .penalty_counts(history)
            .unwrap_or_default()
            .into_iter()
            .filter(|&(id, _)| (id as usize) < logits.len())
            .map(|(id, k)| (id as usize, self.penalize(logits[id as usize], k)))
            .collect();
        argmax_with(logits, pen)
    }

    /// The candidate set the chain leaves before the final draw (filters and temperature
    /// applied), with renormalized probabilities, most likely first. Greedy (temperature <= 0)
    /// leaves the single argmax; mirostat v2 leaves its truncated set without updating `mu`.
    pub fn candidates(&self, logits: &[f32], history: &[u32]) -> Vec<Candidate> {
        let cfg = &self.cfg;
        if logits.is_empty() {
            return vec![];
        }
        if cfg.temperature <= 0.0 {
            // Mirostat applies no penalties.
            let best =
                if cfg.mirostat_v2.is_some() { argmax_with(logits, vec![]) } else { self.greedy_from(logits, history) };
            return vec![best];
        }
        let mut c: Vec<Candidate> =
            logits.iter().enumerate().map(|(i, &l)| Candidate { id: i as u32, logit: l, p: 0.0 }).collect();
        if cfg.mirostat_v2.is_some() {
            c.iter_mut().for_each(|x| x.logit /= cfg.temperature);
            self.mirostat_truncate(&mut c);
            return c;
        }
        self.apply_penalties(&mut c, history);
        // top-k: the k best by selection, then sorted (a full sort of the vocabulary per token
        // took milliseconds); the same set and order as sorting everything.
        if cfg.top_k > 0 && (cfg.top_k as usize) < c.len() {
            let k = cfg.top_k as usize;
            c.select_nth_unstable_by(k - 1, desc);
            c.truncate(k);
            sort_desc(&mut c);
        }
        // typical-p
        if cfg.typical_p < 1.0 {
            sort_desc(&mut c);
            softmax(&mut c);
            let entropy: f32 = c.iter().map(|x| -x.p * x.p.ln()).sum();
            let mut idx: Vec<(f32, usize)> =
                c.iter().enumerate().map(|(i, x)| ((-x.p.ln() - entropy).abs(), i)).collect();
            idx.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let mut cum = 0.0f32;
            let mut last = idx.len();
            for (i, &(_, k)) in idx.iter().enumerate() {
                cum += c[k].p;
                if cum > cfg.typical_p {
                    last = i + 1;
                    break;
                }
            }
            c = idx[..last].iter().map(|&(_, k)| c[k]).collect();
        }
        // top-p
        if cfg.top_p < 1.0 {
            sort_desc(&mut c);
            softmax(&mut c);
            let mut cum = 0.0f32;
            let mut last = c.len();
            for (i, x) in c.iter().enumerate() {
                cum += x.p;
                if cum >= cfg.top_p {
                    last = i + 1;
                    break;
                }
            }
            c.truncate(last);
        }
        // min-p
        if cfg.min_p > 0.0 {
            let max = c.iter().map(|x| x.logit).fold(f32::NEG_INFINITY, f32::max);
            let min_logit = max + cfg.min_p.ln();
            c.retain(|x| x.logit >= min_logit);
        }
        // temperature (llama.cpp's `logit / t`; where that overflows, as a temperature of
        // 1e-38 makes every positive logit +inf and every probability NaN, the same
        // distribution as `(logit - max) / t`, which tends to greedy as `t` goes to 0)
        let max = c.iter().map(|x| x.logit).fold(f32::NEG_INFINITY, f32::max);
        if max.is_finite() && !(max / cfg.temperature).is_finite() {
            c.iter_mut().for_each(|x| x.logit = (x.logit - max) / cfg.temperature);
        } else {
            c.iter_mut().for_each(|x| x.logit /= cfg.temperature);
        }
        sort_desc(&mut c);
        softmax(&mut c);
        c
    }

    fn mirostat_truncate(&self, c: &mut Vec<Candidate>) {
        sort_desc(c);
        softmax(c);
        let keep = c.iter().position(|x| -x.p.log2() > self.mu).unwrap_or(c.len()).max(1);
        c.truncate(keep);
        softmax(c);
    }

    /// Draw an index from `c`'s probabilities.
    fn draw(&mut self, c: &[Candidate]) -> usize {
        if c.len() == 1 {
            self.uniform();
            return 0;
        }
        let u = self.uniform() * c.iter().map(|x| x.p as f64).sum::<f64>();
        let mut cum = 0.0f64;
        for (i, x) in c.iter().enumerate() {
            cum += x.p as f64;
            if u < cum {
                return i;
            }
        }
        c.len() - 1
    }

    /// Choose the next token from `logits` (one per vocabulary entry) given `history` (the
    /// tokens so far, prompt included; the penalties use its tail). Empty `logits` give 0.
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> u32 {
        let c = self.candidates(logits, history);
        if c.is_empty() {
            return 0;
        }
        if self.cfg.temperature <= 0.0 {
            return c[0].id;
        }
        let i = self.draw(&c);
        if let Some((tau, eta)) = self.cfg.mirostat_v2 {
            let surprise = -c[i].p.log2();
            self.mu -= eta * (surprise - tau);
        }
        c[i].id
    }
}

/// Argmax of `logits` with the values of some ids replaced (`pen`: (id, value)), ties to the
/// lowest id; a NaN never wins over the first entry.
fn argmax_with(logits: &[f32], mut pen: Vec<(usize, f32)>) -> Candidate {
    pen.sort_unstable_by_key(|p| p.0);
    let mut best = Candidate { id: 0, logit: logits[0], p: 1.0 };
    let mut consider = |i: usize, v: f32| {
        // Strictly greater: the lowest id wins ties, and a NaN never replaces the first.
        if i == 0 || v > best.logit {
            best = Candidate { id: i as u32, logit: v, p: 1.0 };
        }
    };
    let mut from = 0;
    for &(id, v) in &pen {
        logits[from..id].iter().enumerate().for_each(|(j, &l)| consider(from + j, l));
        consider(id, v);
        from = id + 1;
    }
    logits[from..].iter().enumerate().for_each(|(j, &l)| consider(from + j, l));
    best
}
