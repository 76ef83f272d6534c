//! The generation loop: prefill the prompt, then decode one token at a time with a
//! caller-chosen sampler, streaming each token to a callback.

use crate::{KvCache, LlamaModel, ModelError, Phase, Result};
use std::time::Instant;

/// Options of [`Generator::generate`].
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateOptions {
    /// Most tokens to generate.
    pub max_tokens: usize,
    /// Stop after generating any of these (it is included in the output). Defaults to the
    /// model's declared EOS tokens when built with [`GenerateOptions::for_model`].
    pub stop_tokens: Vec<u32>,
}

impl GenerateOptions {
    /// `max_tokens` with the model's EOS tokens as stop tokens.
    pub fn for_model(model: &LlamaModel, max_tokens: usize) -> GenerateOptions {
        GenerateOptions { max_tokens, stop_tokens: model.config().eos_token_ids.clone() }
    }
}

/// What a generation produced and how long it took.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GenerationStats {
    /// Generated token ids (the prompt excluded).
    pub tokens: Vec<u32>,
    /// Prompt tokens processed.
    pub prompt_tokens: usize,
    /// Seconds spent on the prompt (prefill, including first-use graph compiles).
    pub prompt_secs: f64,
    /// Seconds spent generating (decode steps and sampling).
    pub gen_secs: f64,
}

impl GenerationStats {
    /// Prompt tokens per second.
    pub fn prompt_tokens_per_s(&self) -> f64 {
        rate(self.prompt_tokens, self.prompt_secs)
    }
    /// Generated tokens per second (each generated token after the first costs one decode
    /// step; the first comes from the prefill's logits).
    pub fn gen_tokens_per_s(&self) -> f64 {
        rate(self.tokens.len().saturating_sub(1), self.gen_secs)
    }
}

fn rate(n: usize, s: f64) -> f64 {
    if s > 0.0 { n as f64 / s } else { 0.0 }
}

/// Index of the largest value (the first on ties); greedy sampling.
pub fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in logits.iter().enumerate() {
        if v > logits[best] {
            best = i;
        }
    }
    best as u32
}

/// Runs generation on one model with its own KV cache (of the model's
/// [`LlamaModel::kv_dtype`]).
pub struct Generator<'m> {
    model: &'m mut LlamaModel,
    cache: KvCache,
}

impl<'m> Generator<'m> {
    /// A generator with an empty cache (batch 1; [`Generator::generate_batch`] resizes it).
    pub fn new(model: &'m mut LlamaModel) -> Generator<'m> {
        let cache = model.new_cache(1);
        Generator { model, cache }
    }

    /// The cache (tokens processed so far).
    pub fn cache(&self) -> &KvCache {
        &self.cache
    }

    /// Generate after `prompt` (token ids; an empty prompt starts from the model's BOS).
    /// `sample(logits, history)` picks each next token (`history` = prompt + generated so
    /// far; use [`argmax`] for greedy); `on_token(id)` sees each token as it is chosen and
    /// may return `false` to stop. The cache is cleared first. Stops at `max_tokens`, a stop
    /// token, or the end of the context (not an error once the prompt fits).
    ///
    /// Errors: the prompt does not fit the context ([`ModelError::ContextOverflow`]), an id
    /// outside the vocabulary, an empty prompt for a model without BOS, NaN logits
    /// ([`ModelError::NanLogits`]), run errors.
    pub fn generate(
        &mut self,
        prompt: &[u32],
        opts: &GenerateOptions,
        mut sample: impl FnMut(&[f32], &[u32]) -> u32,
        mut on_token: impl FnMut(u32) -> bool,
    ) -> Result<GenerationStats> {
        let mut stats = self.generate_batch(&[prompt], opts, |_, l, h| sample(l, h), |_, t| on_token(t))?;
        Ok(stats.pop().expect("one prompt, one result"))
    }

    /// Generate after each of `prompts` at once, as one batch of `B = prompts.len()`
    /// sequences: the prompts may have different lengths (the shorter ones are padded and
    /// masked inside each step, each sequence at its own positions), then all decode in
    /// lockstep, one token per sequence per step, until each has stopped (a finished sequence
    /// takes no more tokens). `sample(r, logits, history)` and `on_token(r, id)` are as in
    /// [`Generator::generate`] for sequence `r`; each sequence's tokens equal what
    /// [`Generator::generate`] gives for its prompt alone, up to f32 rounding of the batched
    /// kernels. Returns one [`GenerationStats`] per prompt; the timings are the whole batch's.
    ///
    /// Errors: no prompts ([`ModelError::Batch`]), otherwise as [`Generator::generate`].
    pub fn generate_batch(
        &mut self,
        prompts: &[&[u32]],
        opts: &GenerateOptions,
        mut sample: impl FnMut(usize, &[f32], &[u32]) -> u32,
        mut on_token: impl FnMut(usize, u32) -> bool,
    ) -> Result<Vec<GenerationStats>> {
        let b = prompts.len();
        if b == 0 {
            return Err(ModelError::Batch { batch: 0, got: 0 });
        }
        let ctx = self.model.config().context_length;
        let mut history = Vec::with_capacity(b);
        for p in prompts {
            let h = if p.is_empty() {
                vec![self.model.config().bos_token_id.ok_or(ModelError::EmptyPrompt)?]
            } else {
                p.to_vec()
            };
            if h.len() > ctx {
                return Err(ModelError::ContextOverflow { needed: h.len(), context: ctx });
            }
            history.push(h);
        }
        if self.cache.batch() != b || self.cache.dtype() != self.model.kv_dtype() {
            self.cache = self.model.new_cache(b);
        }
        self.cache.clear();
        let mut stats: Vec<GenerationStats> =
            history.iter().map(|h| GenerationStats { prompt_tokens: h.len(), ..Default::default() }).collect();
        if opts.max_tokens == 0 {
            return Ok(stats);
        }
        let v = self.model.config().vocab;
        let t0 = Instant::now();
        let seqs: Vec<&[u32]> = history.iter().map(Vec::as_slice).collect();
        let mut logits = self.model.forward_seqs_ref(&mut self.cache, &seqs)?;
        let prompt_secs = t0.elapsed().as_secs_f64();
        // The step time run so far is the prompt's (booked once the logits are no longer held).
        let mut phase = Phase::Prompt;
        let t1 = Instant::now();
        let mut active = vec![true; b];
        let mut next = vec![0u32; b];
        loop {
            let rows = logits.as_slice::<f32>().expect("logits are f32");
            for r in 0..b {
                if !active[r] {
                    continue;
                }
                let row = &rows[r * v..][..v];
                // A vectorized pass (microseconds per 49K-entry row; a decode step takes ms).
                if row.iter().fold(false, |nan, x| nan | x.is_nan()) {
                    return Err(ModelError::NanLogits { step: stats[r].tokens.len(), seq: r });
                }
                let id = sample(r, row, &history[r]);
                history[r].push(id);
                stats[r].tokens.push(id);
                next[r] = id;
                let go = on_token(r, id);
                active[r] = go
                    && stats[r].tokens.len() < opts.max_tokens
                    && !opts.stop_tokens.contains(&id)
                    && self.cache.lens()[r] < ctx;
            }
            if !active.contains(&true) {
                break;
            }
            let seqs: Vec<&[u32]> =
                (0..b).map(|r| if active[r] { std::slice::from_ref(&next[r]) } else { &[][..] }).collect();
            if phase == Phase::Prompt {
                self.model.end_profile_phase(Phase::Prompt);
                phase = Phase::Generation;
            }
            logits = self.model.forward_seqs_ref(&mut self.cache, &seqs)?;
        }
        let gen_secs = t1.elapsed().as_secs_f64();
        self.model.end_profile_phase(phase);
        for s in &mut stats {
            (s.prompt_secs, s.gen_secs) = (prompt_secs, gen_secs);
        }
        Ok(stats)
    }
}
