//! Reduction family: `reduce_{sum,max,min,prod,and,or}`, `argmax`/`argmin`, cumulative scans
//! (`cumsum`, ...), and `reduce_window` (pooling).

use super::Op;
use crate::{IrError, Shape, Tensor};
use serde::{Deserialize, Serialize};

/// A reduction monoid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum ReduceOp {
    Sum,
    Prod,
    Max,
    Min,
    /// Logical and (bool) / bitwise and (ints).
    And,
    /// Logical or (bool) / bitwise or (ints).
    Or,
}

impl ReduceOp {
    /// Name suffix (`reduce_sum` ...).
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::And => "and",
            ReduceOp::Or => "or",
        }
    }
}

/// A running (prefix) operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum CumulativeOp {
    Sum,
    Prod,
    Max,
    Min,
}

impl CumulativeOp {
    /// `jax.lax` name (`cumsum`, ...).
    pub fn name(self) -> &'static str {
        match self {
            CumulativeOp::Sum => "cumsum",
            CumulativeOp::Prod => "cumprod",
            CumulativeOp::Max => "cummax",
            CumulativeOp::Min => "cummin",
        }
    }
}

pub(crate) fn infer(op: &Op, _ins: &[&Shape]) -> Result<Shape, String> {
    Err(format!("{} has no shape rule yet", op.name()))
}

pub(crate) fn eval(op: &Op, _ins: &[&Tensor], _out: &mut Tensor) -> Result<(), IrError> {
    Err(IrError::Eval { op: op.name(), msg: "no reference evaluation yet".into() })
}
