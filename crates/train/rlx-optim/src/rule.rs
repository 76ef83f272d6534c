//! `Rule`: the one general update rule every optimizer is a configuration of, and its math.
//!
//! One step on a param `p` with gradient `g` at iteration `t` (1-based) and learning rate `lr`:
//! 1. coupled L2: `g ← g + l2·p` (PyTorch's `weight_decay` of SGD / Adam / Adagrad / RMSprop);
//! 2. momentum ([`Momentum`]): the direction `d` from `g` and the first moment `m`;
//! 3. preconditioner ([`Precond`]): divide by a root of the second moment (with RAdam's
//!    rectification), take the sign, a factored RMS (Adafactor), or orthogonalize (Muon);
//! 4. block-RMS clip, `d ← d + wd·p` (decoupled weight decay), LAMB's trust ratio
//!    `‖p‖/‖d‖`, Adafactor's param scale `max(rms(p), min)`;
//! 5. `p ← p − lr·d`.
//!
//! The order of 4 is optax's chain order (`add_decayed_weights` before `scale_by_trust_ratio`).
//! Arithmetic is f64 with state stored as f32, so results track an f64 reference closely.

use crate::matrix::{factored_rms, newton_schulz};

/// How the first moment turns the gradient into a direction.
#[derive(Clone, Debug, PartialEq)]
pub enum Momentum {
    /// `d = g`.
    None,
    /// Heavy ball (PyTorch SGD, dampening 0; optax `trace`): `m ← μ·m + g`, `d = m`, or
    /// `d = g + μ·m` with Nesterov.
    Trace {
        /// μ.
        momentum: f32,
        /// Nesterov's look-ahead.
        nesterov: bool,
    },
    /// Exponential average (Adam): `m ← β₁·m + (1−β₁)·g`, `d = m̂ = m/(1−β₁ᵗ)` (without the
    /// divisor when [`Rule::bias_correction`] is off). Nesterov (NAdam, optax's form):
    /// `d = β₁·m/(1−β₁ᵗ⁺¹) + (1−β₁)·g/(1−β₁ᵗ)`.
    Ema {
        /// β₁.
        beta1: f32,
        /// NAdam's Nesterov term.
        nesterov: bool,
    },
    /// Lion: `d = β₁·m + (1−β₁)·g`, then `m ← β₂·m + (1−β₂)·g`.
    Interpolate {
        /// β₁ (direction).
        beta1: f32,
        /// β₂ (memory).
        beta2: f32,
    },
}

/// How the second moment accumulates `g²`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Accum {
    /// `v ← β₂·v + (1−β₂)·g²` (Adam, RMSprop), bias-corrected `v/(1−β₂ᵗ)` with
    /// [`Rule::bias_correction`].
    Ema {
        /// β₂.
        beta2: f32,
    },
    /// `v ← v + g²` (Adagrad).
    Sum,
}

/// What the direction is divided by, or mapped through.
#[derive(Clone, Debug, PartialEq)]
pub enum Precond {
    /// Nothing.
    None,
    /// `d / (√v̂ + ε)`, or `d / √(v̂ + ε)` with `eps_in_sqrt` (optax's Adagrad / RMSprop).
    Rms {
        /// The accumulation.
        accum: Accum,
        /// ε.
        eps: f32,
        /// ε under the root (optax Adagrad, RMSprop) or outside (Adam; PyTorch everywhere).
        eps_in_sqrt: bool,
        /// `v`'s starting value (optax Adagrad 0.1, otherwise 0).
        initial: f32,
        /// RAdam: with `ρ_t ≥ threshold` the step is `r_t·m̂/(√v̂+ε)`, otherwise plain `m̂`.
        rectify: Option<f32>,
    },
    /// `sign(d)` (Lion; `sign(0) = 0`).
    Sign,
    /// Adafactor (optax `scale_by_factored_rms`): `v` from `g² + ε` with decay
    /// `1 − t^−decay_rate`; 2-D params whose smaller dim is `≥ min_dim_size_to_factor` keep
    /// only `v_row` (mean over the longer axis, one per index of the shorter) and `v_col` (mean
    /// over the shorter axis), and divide by `√(v_row/mean(v_row) · v_col)`.
    Factored {
        /// The decay exponent (0.8).
        decay_rate: f32,
        /// Added to `g²` (1e-30).
        eps: f32,
        /// Factor a matrix only if both dims reach this (optax default 128).
        min_dim_size_to_factor: usize,
    },
    /// Muon: orthogonalize a 2-D direction by `steps` quintic Newton–Schulz iterations with
    /// coefficients `(a, b, c)`, then scale by `√max(1, cols/rows)`. Non-2-D params use
    /// [`Rule::fallback`].
    NewtonSchulz {
        /// `(a, b, c)` of `X ← aX + (bA + cA²)X`, `A = XXᵀ`.
        coeffs: [f32; 3],
        /// Iterations.
        steps: usize,
        /// Added to `‖X‖_F` before the first normalization.
        eps: f32,
    },
}

/// The general update rule; see the module docs for the order of its stages.
#[derive(Clone, Debug, PartialEq)]
pub struct Rule {
    /// Coupled L2 (`g ← g + l2·p`).
    pub l2: f32,
    /// First-moment stage.
    pub momentum: Momentum,
    /// Preconditioner.
    pub precond: Precond,
    /// Divide moving averages by `1 − βᵗ`.
    pub bias_correction: bool,
    /// Adafactor's `clip_by_block_rms`: `d / max(1, rms(d)/threshold)`.
    pub clip_block_rms: Option<f32>,
    /// Decoupled weight decay, scaled by `lr` with the update (AdamW, Lion, LAMB, Muon).
    pub weight_decay: f32,
    /// LAMB's `‖p‖/‖d‖` (1 when either is 0).
    pub trust_ratio: bool,
    /// Adafactor's `multiply_by_parameter_scale`: `d · max(rms(p), min_scale)`.
    pub param_scale: Option<f32>,
    /// The rule for params the preconditioner does not apply to (Muon: non-2-D params).
    pub fallback: Option<Box<Rule>>,
}

impl Default for Rule {
    /// Plain SGD.
    fn default() -> Rule {
        Rule {
            l2: 0.0,
            momentum: Momentum::None,
            precond: Precond::None,
            bias_correction: false,
            clip_block_rms: None,
            weight_decay: 0.0,
            trust_ratio: false,
            param_scale: None,
            fallback: None,
        }
    }
}

/// The state slots a rule keeps for a param of `shape`: `(slot name, slot shape, initial)`.
pub(crate) fn slots(rule: &Rule, shape: &[usize]) -> Vec<(&'static str, Vec<usize>, f32)> {
    let rule = effective(rule, shape);
    let mut out = vec![];
    if !matches!(rule.momentum, Momentum::None) {
        out.push(("m", shape.to_vec(), 0.0));
    }
    match &rule.precond {
        Precond::Rms { initial, .. } => out.push(("v", shape.to_vec(), *initial)),
        Precond::Factored { min_dim_size_to_factor, .. } => match factored_dims(shape, *min_dim_size_to_factor) {
            Some((r, c)) => {
                out.push(("v_row", vec![r.min(c)], 0.0));
                out.push(("v_col", vec![r.max(c)], 0.0));
            }
            None => out.push(("v", shape.to_vec(), 0.0)),
        },
        _ => {}
    }
    out
}

/// The rule that applies to a param of `shape` (Muon hands non-matrices to its fallback).
pub(crate) fn effective<'r>(rule: &'r Rule, shape: &[usize]) -> &'r Rule {
    match (&rule.precond, &rule.fallback) {
        (Precond::NewtonSchulz { .. }, Some(fb)) if shape.len() != 2 => effective(fb, shape),
        _ => rule,
    }
}

/// `(rows, cols)` when Adafactor factors this shape (2-D only; see the crate README).
pub(crate) fn factored_dims(shape: &[usize], min: usize) -> Option<(usize, usize)> {
    (shape.len() == 2 && shape[0].min(shape[1]) >= min).then(|| (shape[0], shape[1]))
}

/// Mutable views of one param's state slots, in [`slots`] order.
pub(crate) struct Slots<'a> {
    pub m: Option<&'a mut [f32]>,
    pub v: Option<&'a mut [f32]>,
    pub v_row: Option<&'a mut [f32]>,
    pub v_col: Option<&'a mut [f32]>,
}

/// One update of `p` in place. `t` is the 1-based iteration, `d` a scratch buffer of
/// `p.len()`, `work` scratch for the matrix preconditioners.
#[allow(clippy::too_many_arguments)] // the stage inputs, each used once
pub(crate) fn apply(
    rule: &Rule,
    shape: &[usize],
    t: u64,
    lr: f64,
    p: &mut [f32],
    grad: &[f32],
    s: Slots<'_>,
    d: &mut Vec<f64>,
    work: &mut Vec<f64>,
) {
    let n = p.len();
    d.clear();
    d.extend(grad.iter().zip(p.iter()).map(|(&g, &w)| g as f64 + rule.l2 as f64 * w as f64));
    let ti = t as i32;
    let bc = |beta: f32, k: i32| bias_correction(rule, beta, k);
    // 2. momentum: `d` becomes the direction, `g` stays readable as `grad + l2·p` via `gi`.
    let gi = |i: usize, p: &[f32]| grad[i] as f64 + rule.l2 as f64 * p[i] as f64;
    match (&rule.momentum, s.m) {
        (Momentum::None, _) => {}
        (&Momentum::Trace { momentum, nesterov }, Some(m)) => {
            let mu = momentum as f64;
            for i in 0..n {
                let mi = mu * m[i] as f64 + d[i];
                m[i] = mi as f32;
                d[i] = if nesterov { d[i] + mu * m[i] as f64 } else { m[i] as f64 };
            }
        }
        (&Momentum::Ema { beta1, nesterov }, Some(m)) => {
            let b = beta1 as f64;
            let (c1, c1n) = (bc(beta1, ti), bc(beta1, ti + 1));
            for i in 0..n {
                m[i] = (b * m[i] as f64 + (1.0 - b) * d[i]) as f32;
                d[i] = if nesterov { b * m[i] as f64 / c1n + (1.0 - b) * d[i] / c1 } else { m[i] as f64 / c1 };
            }
        }
        (&Momentum::Interpolate { beta1, beta2 }, Some(m)) => {
            let (b1, b2) = (beta1 as f64, beta2 as f64);
            for i in 0..n {
                let g = d[i];
                d[i] = b1 * m[i] as f64 + (1.0 - b1) * g;
                m[i] = (b2 * m[i] as f64 + (1.0 - b2) * g) as f32;
            }
        }
        (_, None) => debug_assert!(false, "momentum slot missing"),
    }
    // 3. preconditioner.
    match &rule.precond {
        Precond::None => {}
        &Precond::Rms { accum, eps, eps_in_sqrt, rectify, .. } => {
            let v = s.v.expect("v slot");
            let (eps, mut scale) = (eps as f64, 1.0);
            let c2 = match accum {
                Accum::Ema { beta2 } => bc(beta2, ti),
                Accum::Sum => 1.0,
            };
            if let (Some(thr), Accum::Ema { beta2 }) = (rectify, accum) {
                scale = rectification(beta2, thr, t); // 0: unrectified, plain m̂ below
            }
            for i in 0..n {
                let g = gi(i, p);
                let vi = match accum {
                    Accum::Ema { beta2 } => beta2 as f64 * v[i] as f64 + (1.0 - beta2 as f64) * g * g,
                    Accum::Sum => v[i] as f64 + g * g,
                };
                v[i] = vi as f32;
                let vh = v[i] as f64 / c2;
                let denom = if eps_in_sqrt { (vh + eps).sqrt() } else { vh.sqrt() + eps };
                if scale != 0.0 {
                    d[i] = scale * d[i] / denom;
                }
            }
        }
        Precond::Sign => {
            for x in d.iter_mut() {
                *x = if *x == 0.0 { 0.0 } else { x.signum() };
            }
        }
        &Precond::Factored { decay_rate, eps, min_dim_size_to_factor } => {
            let decay = 1.0 - (t as f64).powf(-(decay_rate as f64));
            let rc = factored_dims(shape, min_dim_size_to_factor);
            let (v, vr, vc) = (s.v, s.v_row, s.v_col);
            factored_rms(d, rc, decay, eps as f64, v, vr, vc, work);
        }
        &Precond::NewtonSchulz { coeffs, steps, eps } => {
            debug_assert_eq!(shape.len(), 2, "Muon sees matrices only (fallback handles the rest)");
            let (r, c) = (shape[0], shape[1]);
            newton_schulz(d, r, c, coeffs.map(f64::from), steps, eps as f64, work);
            let k = (c as f64 / r as f64).max(1.0).sqrt();
            d.iter_mut().for_each(|x| *x *= k);
        }
    }
    // 4. block-wise rescalings and decoupled decay.
    if let Some(thr) = rule.clip_block_rms {
        let denom = (rms(d.iter().copied()) / thr as f64).max(1.0);
        d.iter_mut().for_each(|x| *x /= denom);
    }
    if rule.weight_decay != 0.0 {
        let wd = rule.weight_decay as f64;
        d.iter_mut().zip(p.iter()).for_each(|(x, &w)| *x += wd * w as f64);
    }
    if rule.trust_ratio {
        let pn = norm(p.iter().map(|&x| x as f64));
        let un = norm(d.iter().copied());
        if pn != 0.0 && un != 0.0 {
            d.iter_mut().for_each(|x| *x *= pn / un);
        }
    }
    if let Some(min) = rule.param_scale {
        let k = rms(p.iter().map(|&x| x as f64)).max(min as f64);
        d.iter_mut().for_each(|x| *x *= k);
    }
    // 5. apply.
    for (w, &x) in p.iter_mut().zip(d.iter()) {
        *w = (*w as f64 - lr * x) as f32;
    }
}

/// `1 − βᵏ` when the rule bias-corrects, else 1 (the divisor of a moving average at step `k`).
pub(crate) fn bias_correction(rule: &Rule, beta: f32, k: i32) -> f64 {
    if rule.bias_correction { 1.0 - (beta as f64).powi(k) } else { 1.0 }
}

/// RAdam's rectification factor `r_t` at the 1-based iteration `t` when `ρ_t ≥ threshold`,
/// else 0 (the step is then the plain bias-corrected first moment).
pub(crate) fn rectification(beta2: f32, threshold: f32, t: u64) -> f64 {
    let b2 = beta2 as f64;
    let rho_inf = 2.0 / (1.0 - b2) - 1.0;
    let b2t = b2.powi(t as i32);
    let rho = rho_inf - 2.0 * t as f64 * b2t / (1.0 - b2t);
    if rho >= threshold as f64 {
        ((rho - 4.0) * (rho - 2.0) * rho_inf / ((rho_inf - 4.0) * (rho_inf - 2.0) * rho)).sqrt()
    } else {
        0.0
    }
}

fn norm(x: impl Iterator<Item = f64>) -> f64 {
    x.map(|v| v * v).sum::<f64>().sqrt()
}

fn rms(x: impl ExactSizeIterator<Item = f64>) -> f64 {
    let n = x.len().max(1) as f64;
    (x.map(|v| v * v).sum::<f64>() / n).sqrt()
}
