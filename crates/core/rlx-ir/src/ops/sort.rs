//! Ordering family: `sort` (multi-operand, keyed) and `top_k`.

use super::Op;
use crate::{IrError, Shape, Tensor};

pub(crate) fn infer(op: &Op, _ins: &[&Shape]) -> Result<Vec<Shape>, String> {
    Err(format!("{} has no shape rule yet", op.name()))
}

pub(crate) fn eval(op: &Op, _ins: &[&Tensor], _outs: &mut [Tensor]) -> Result<(), IrError> {
    Err(IrError::Eval { op: op.name(), msg: "no reference evaluation yet".into() })
}
