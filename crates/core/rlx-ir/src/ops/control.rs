//! Control flow and regions: `scan`, `while`, `cond`, and composite regions, each carrying
//! sub-graphs whose inputs are their operands in order.

use super::Op;
use crate::{Graph, IrError, Shape, Tensor};
use serde::{Deserialize, Serialize};

/// `lax.scan`: operands are `[consts…, init carries…, xs…]`; the body maps
/// `(consts…, carries…, x slices…) -> (new carries…, ys…)`; results are
/// `[final carries…, stacked ys…]` (ys stacked along a new leading axis of size `length`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScanOp {
    /// The loop body.
    pub body: Box<Graph>,
    /// Number of constant operands.
    pub num_consts: usize,
    /// Number of carried values.
    pub num_carry: usize,
    /// Trip count (the leading dim of every x).
    pub length: usize,
    /// Iterate from the last slice to the first.
    pub reverse: bool,
}

/// `lax.while_loop`: operands are the initial carries; `cond(carries…) -> bool[]`,
/// `body(carries…) -> carries…`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WhileOp {
    /// The condition.
    pub cond: Box<Graph>,
    /// The body.
    pub body: Box<Graph>,
}

/// `lax.switch`: operands are `[index (int scalar, clamped) or bool pred, operands…]`; each
/// branch maps the operands to the results (`false` runs branch 0, as `lax.cond`'s false
/// branch).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CondOp {
    /// The branches.
    pub branches: Vec<Graph>,
}

pub(crate) fn infer(op: &Op, _ins: &[&Shape]) -> Result<Vec<Shape>, String> {
    Err(format!("{} has no shape rule yet", op.name()))
}

pub(crate) fn eval(op: &Op, _ins: &[&Tensor], _outs: &mut [Tensor]) -> Result<(), IrError> {
    Err(IrError::Eval { op: op.name(), msg: "no reference evaluation yet".into() })
}
