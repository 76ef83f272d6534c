//! The named optimizers: each a [`Rule`] preset (optax's defaults) plus a `Name::new(lr)`
//! constructor, so the spec's `Adam::new(1e-3)` works. Which convention (optax or PyTorch)
//! each follows is listed in the crate README.

use crate::rule::{Accum, Momentum, Precond, Rule};
use crate::{Optim, Schedule};

fn adam_like(beta1: f32, beta2: f32, eps: f32, nesterov: bool) -> Rule {
    Rule {
        momentum: Momentum::Ema { beta1, nesterov },
        precond: Precond::Rms { accum: Accum::Ema { beta2 }, eps, eps_in_sqrt: false, initial: 0.0, rectify: None },
        bias_correction: true,
        ..Rule::default()
    }
}

impl Rule {
    /// SGD with heavy-ball momentum `μ` (0: plain SGD), optionally Nesterov.
    pub fn sgd(momentum: f32, nesterov: bool) -> Rule {
        let momentum =
            if momentum == 0.0 && !nesterov { Momentum::None } else { Momentum::Trace { momentum, nesterov } };
        Rule { momentum, ..Rule::default() }
    }
    /// Adam: β = (0.9, 0.999), ε = 1e-8 outside the root.
    pub fn adam() -> Rule {
        adam_like(0.9, 0.999, 1e-8, false)
    }
    /// AdamW: Adam with decoupled weight decay `wd` (optax default 1e-4, PyTorch 1e-2).
    pub fn adamw(wd: f32) -> Rule {
        Rule { weight_decay: wd, ..Rule::adam() }
    }
    /// NAdam in optax's form (Adam with a Nesterov first moment, no momentum-decay schedule).
    pub fn nadam() -> Rule {
        adam_like(0.9, 0.999, 1e-8, true)
    }
    /// RAdam: Adam rectified when `ρ_t ≥ 5`, plain `m̂` before.
    pub fn radam() -> Rule {
        let mut r = Rule::adam();
        if let Precond::Rms { rectify, .. } = &mut r.precond {
            *rectify = Some(5.0);
        }
        r
    }
    /// Adagrad, optax's convention: `v₀ = 0.1`, `g/√(v + 1e-7)`.
    pub fn adagrad() -> Rule {
        let precond = Precond::Rms { accum: Accum::Sum, eps: 1e-7, eps_in_sqrt: true, initial: 0.1, rectify: None };
        Rule { precond, ..Rule::default() }
    }
    /// RMSprop, optax's convention: decay 0.9, `g/√(v + 1e-8)`.
    pub fn rmsprop() -> Rule {
        let precond = Precond::Rms {
            accum: Accum::Ema { beta2: 0.9 },
            eps: 1e-8,
            eps_in_sqrt: true,
            initial: 0.0,
            rectify: None,
        };
        Rule { precond, ..Rule::default() }
    }
    /// Lion: β = (0.9, 0.99), sign update, decoupled weight decay `wd` (optax default 1e-3).
    pub fn lion(wd: f32) -> Rule {
        Rule {
            momentum: Momentum::Interpolate { beta1: 0.9, beta2: 0.99 },
            precond: Precond::Sign,
            weight_decay: wd,
            ..Rule::default()
        }
    }
    /// LAMB: Adam (ε = 1e-6) + decoupled weight decay `wd`, scaled by the trust ratio.
    pub fn lamb(wd: f32) -> Rule {
        Rule { weight_decay: wd, trust_ratio: true, ..adam_like(0.9, 0.999, 1e-6, false) }
    }
    /// Adafactor, optax's defaults: decay exponent 0.8, ε = 1e-30, factor matrices whose dims
    /// are ≥ `min_dim_size_to_factor` (optax: 128), block-RMS clip 1, param scale (min 1e-3).
    pub fn adafactor(min_dim_size_to_factor: usize) -> Rule {
        Rule {
            precond: Precond::Factored { decay_rate: 0.8, eps: 1e-30, min_dim_size_to_factor },
            clip_block_rms: Some(1.0),
            param_scale: Some(1e-3),
            ..Rule::default()
        }
    }
    /// Muon (optax `contrib.muon`): Nesterov EMA (β = 0.95, bias-corrected), 5 Newton–Schulz
    /// steps with `(3.4445, −4.7750, 2.0315)`, scale `√max(1, cols/rows)`, decoupled decay
    /// `wd`; non-matrix params use NAdam (ε = 1e-8).
    pub fn muon(wd: f32) -> Rule {
        Rule {
            momentum: Momentum::Ema { beta1: 0.95, nesterov: true },
            precond: Precond::NewtonSchulz { coeffs: [3.4445, -4.7750, 2.0315], steps: 5, eps: 1e-8 },
            bias_correction: true,
            weight_decay: wd,
            fallback: Some(Box::new(Rule::nadam())),
            ..Rule::default()
        }
    }
    /// Add coupled L2 (`g ← g + l2·p`, PyTorch's `weight_decay` of SGD / Adam).
    pub fn with_l2(self, l2: f32) -> Rule {
        Rule { l2, ..self }
    }
    /// Set decoupled weight decay (scaled by the rate with the update).
    pub fn with_weight_decay(self, wd: f32) -> Rule {
        Rule { weight_decay: wd, ..self }
    }
}

macro_rules! named {
    ($($(#[$doc:meta])* $name:ident => $rule:expr;)*) => {$(
        $(#[$doc])*
        #[derive(Clone, Copy, Debug)]
        pub struct $name;
        impl $name {
            /// This optimizer at a constant rate `lr` (or any [`Schedule`]).
            #[allow(clippy::new_ret_no_self)] // the spec's `Adam::new(lr)`; all share `Optim`
            pub fn new(lr: impl Into<Schedule>) -> Optim {
                Optim::new(Self::rule(), lr)
            }
            /// The preset rule (edit its fields, then `Optim::new(rule, lr)`).
            pub fn rule() -> Rule {
                $rule
            }
        }
    )*};
}

named! {
    /// Plain SGD ([`Rule::sgd`]`(0, false)`).
    Sgd => Rule::sgd(0.0, false);
    /// Adam ([`Rule::adam`]).
    Adam => Rule::adam();
    /// AdamW ([`Rule::adamw`]`(1e-4)`).
    AdamW => Rule::adamw(1e-4);
    /// NAdam ([`Rule::nadam`]).
    NAdam => Rule::nadam();
    /// RAdam ([`Rule::radam`]).
    RAdam => Rule::radam();
    /// Adagrad ([`Rule::adagrad`]).
    Adagrad => Rule::adagrad();
    /// RMSprop ([`Rule::rmsprop`]).
    RmsProp => Rule::rmsprop();
    /// Lion ([`Rule::lion`]`(1e-3)`).
    Lion => Rule::lion(1e-3);
    /// LAMB ([`Rule::lamb`]`(0)`).
    Lamb => Rule::lamb(0.0);
    /// Adafactor ([`Rule::adafactor`]`(128)`).
    Adafactor => Rule::adafactor(128);
    /// Muon ([`Rule::muon`]`(0)`).
    Muon => Rule::muon(0.0);
}

/// The rule for a CLI / config name: `sgd`, `momentum` (0.9), `nesterov` (0.9), `adam`,
/// `adamw`, `nadam`, `radam`, `adagrad`, `rmsprop`, `lion`, `lamb`, `adafactor`, `muon`.
pub fn rule_by_name(name: &str) -> Option<Rule> {
    Some(match name.to_ascii_lowercase().as_str() {
        "sgd" => Rule::sgd(0.0, false),
        "momentum" => Rule::sgd(0.9, false),
        "nesterov" => Rule::sgd(0.9, true),
        "adam" => Rule::adam(),
        "adamw" => Rule::adamw(1e-4),
        "nadam" => Rule::nadam(),
        "radam" => Rule::radam(),
        "adagrad" => Rule::adagrad(),
        "rmsprop" => Rule::rmsprop(),
        "lion" => Rule::lion(1e-3),
        "lamb" => Rule::lamb(0.0),
        "adafactor" => Rule::adafactor(128),
        "muon" => Rule::muon(0.0),
        _ => return None,
    })
}

/// The names [`rule_by_name`] knows.
pub const RULE_NAMES: &[&str] = &[
    "sgd",
    "momentum",
    "nesterov",
    "adam",
    "adamw",
    "nadam",
    "radam",
    "adagrad",
    "rmsprop",
    "lion",
    "lamb",
    "adafactor",
    "muon",
];
