//! Random numbers: counter-based Philox-4x32-10, so results depend only on (seed, index).

use crate::{IrError, Tensor};
use serde::{Deserialize, Serialize};

/// What `rng` draws.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum RngDistribution {
    /// Uniform on `[low, high)`.
    Uniform {
        /// Inclusive lower bound.
        low: f64,
        /// Exclusive upper bound.
        high: f64,
    },
    /// Normal with the given mean and standard deviation.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        std: f64,
    },
}

pub(crate) fn eval(_seed: u64, _d: &RngDistribution, _out: &mut Tensor) -> Result<(), IrError> {
    Err(IrError::Eval { op: "rng".into(), msg: "no reference evaluation yet".into() })
}
