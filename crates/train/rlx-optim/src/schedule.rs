//! Learning-rate schedules, evaluated at the 0-based iteration count (as optax schedules).

/// A learning rate as a function of the iteration count `t` (0 for the first step).
#[derive(Clone, Debug, PartialEq)]
pub enum Schedule {
    /// `lr` (optax `constant_schedule`).
    Constant(f32),
    /// `lr · γ^⌊t / step_size⌋` (PyTorch `StepLR`; optax `exponential_decay` with
    /// `staircase=True`).
    Step {
        /// Starting rate.
        lr: f32,
        /// Iterations between decays (0 is treated as 1).
        step_size: u64,
        /// Factor per decay.
        gamma: f32,
    },
    /// `lr · ((1−α)·½(1 + cos(π·min(t, T)/T)) + α)` (optax `cosine_decay_schedule`,
    /// PyTorch `CosineAnnealingLR` with `eta_min = α·lr` up to `T`).
    Cosine {
        /// Starting rate.
        lr: f32,
        /// `T`, the iterations to decay over (0 is treated as 1).
        decay_steps: u64,
        /// Final fraction of `lr`.
        alpha: f32,
    },
    /// Linear warmup from `init` to `then`'s first value over `steps` iterations, then `then`
    /// with its count restarted (optax `join_schedules([linear_schedule, then], [steps])`, as
    /// `warmup_cosine_decay_schedule`).
    Warmup {
        /// Rate at `t = 0`.
        init: f32,
        /// Warmup length.
        steps: u64,
        /// The schedule after warmup.
        then: Box<Schedule>,
    },
}

impl Schedule {
    /// The rate at iteration `t` (0-based).
    pub fn at(&self, t: u64) -> f64 {
        match self {
            Schedule::Constant(lr) => *lr as f64,
            &Schedule::Step { lr, step_size, gamma } => lr as f64 * (gamma as f64).powi((t / step_size.max(1)) as i32),
            &Schedule::Cosine { lr, decay_steps, alpha } => {
                let big_t = decay_steps.max(1) as f64;
                let cos = 0.5 * (1.0 + (std::f64::consts::PI * (t as f64).min(big_t) / big_t).cos());
                lr as f64 * ((1.0 - alpha as f64) * cos + alpha as f64)
            }
            Schedule::Warmup { init, steps, then } => {
                if t < *steps {
                    let peak = then.at(0);
                    let frac = 1.0 - t as f64 / *steps as f64;
                    (*init as f64 - peak) * frac + peak
                } else {
                    then.at(t - steps)
                }
            }
        }
    }
}

impl From<f32> for Schedule {
    fn from(lr: f32) -> Schedule {
        Schedule::Constant(lr)
    }
}
