//! `rlx-optim`: training-step optimizers, learning-rate schedules, gradient clipping, and a
//! compiled training driver.
//!
//! Every optimizer (SGD with momentum / Nesterov / weight decay, Adam, AdamW, NAdam, RAdam,
//! Adagrad, RMSprop, Lion, LAMB, Adafactor, Muon) is one [`Rule`] — a configuration of one
//! general update (see [`rule`]) — run by [`Optim`], which keeps per-param state and the step
//! count. The spec's surface:
//!
//! ```
//! use rlx_optim::{Adam, Optimizer};
//! let mut opt = Adam::new(1e-3);
//! let mut w = vec![0.5f32; 4];
//! let grad = vec![0.1f32; 4];
//! opt.step("w", &[4], &mut w, &grad); // in place
//! opt.end_iteration();
//! assert!(w[0] < 0.5);
//! ```
//!
//! [`Optimizer::step`] updates on the host, in f64 arithmetic over f32 params and state (the
//! reference). [`Trainer`] runs the same rule inside its compiled training step by default
//! ([`UpdateMode`]; see the crate README for why).
#![warn(missing_docs)]

mod clip;
pub mod data;
mod error;
mod in_graph;
mod matrix;
mod optim;
mod presets;
pub mod rule;
mod schedule;
mod trainer;

pub use clip::clip_grad_norm;
pub use error::{OptimError, Result};
pub use optim::{Optim, Optimizer, StateDict};
pub use presets::{
    Adafactor, Adagrad, Adam, AdamW, Lamb, Lion, Muon, NAdam, RAdam, RULE_NAMES, RmsProp, Sgd, rule_by_name,
};
pub use rule::Rule;
pub use schedule::Schedule;
pub use trainer::{Trainer, TrainerOptions, UpdateMode};
