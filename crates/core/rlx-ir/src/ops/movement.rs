//! Movement family: `broadcast_in_dim`, `reshape`, `transpose`, `rev`, `slice`,
//! `dynamic_slice`, `dynamic_update_slice`, `concatenate`, `pad`, `iota`, `gather`,
//! `scatter_add`.

use super::Op;
use crate::{IrError, Shape, Tensor};
use serde::{Deserialize, Serialize};

/// `lax.GatherDimensionNumbers` (the index vector is the last dim of `indices`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GatherDims {
    /// Output dims that hold the slice (offset) dims.
    pub offset_dims: Vec<usize>,
    /// Operand dims of slice size 1 that are dropped from the output.
    pub collapsed_slice_dims: Vec<usize>,
    /// For each index-vector component, the operand dim it indexes.
    pub start_index_map: Vec<usize>,
}

/// `lax.ScatterDimensionNumbers` (the index vector is the last dim of `indices`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ScatterDims {
    /// Dims of `updates` that are window dims.
    pub update_window_dims: Vec<usize>,
    /// Operand dims of window size 1 not present in `updates`.
    pub inserted_window_dims: Vec<usize>,
    /// For each index-vector component, the operand dim it indexes.
    pub scatter_dims_to_operand_dims: Vec<usize>,
}

/// Out-of-bounds index behaviour of gather / scatter (`lax.GatherScatterMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum GatherMode {
    /// Clamp start indices so the whole slice is in bounds (XLA's native semantics).
    Clip,
    /// Gather: out-of-bounds slices read as zero. Scatter: out-of-bounds updates are dropped.
    FillOrDrop,
}

pub(crate) fn infer(op: &Op, _ins: &[&Shape]) -> Result<Shape, String> {
    Err(format!("{} has no shape rule yet", op.name()))
}

pub(crate) fn eval(op: &Op, _ins: &[&Tensor], _out: &mut Tensor) -> Result<(), IrError> {
    Err(IrError::Eval { op: op.name(), msg: "no reference evaluation yet".into() })
}

pub(crate) fn eval_iota(_dimension: usize, _out: &mut Tensor) -> Result<(), IrError> {
    Err(IrError::Eval { op: "iota".into(), msg: "no reference evaluation yet".into() })
}
