//! User extension ops: a process-wide registry of named ops with their shape rule and
//! reference evaluation.

use super::Attrs;
use crate::{IrError, Shape, Tensor};

pub(crate) fn infer(name: &str, _attrs: &Attrs, _ins: &[&Shape]) -> Result<Vec<Shape>, String> {
    Err(format!("custom op {name:?} is not registered"))
}

pub(crate) fn eval(name: &str, _attrs: &Attrs, _ins: &[&Tensor], _outs: &mut [Tensor]) -> Result<(), IrError> {
    Err(IrError::Eval { op: format!("custom.{name}"), msg: "not registered".into() })
}
