//! Contraction family: `dot_general` and `conv_general_dilated`.

use super::Op;
use crate::{DType, IrError, Shape, Tensor};
use serde::{Deserialize, Serialize};

/// `lax.dot_general` dimension numbers. Output dims: batch, then lhs free, then rhs free.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DotGeneral {
    /// Contracting dims of the lhs.
    pub lhs_contracting: Vec<usize>,
    /// Contracting dims of the rhs (paired with `lhs_contracting`).
    pub rhs_contracting: Vec<usize>,
    /// Batch dims of the lhs.
    pub lhs_batch: Vec<usize>,
    /// Batch dims of the rhs (paired with `lhs_batch`).
    pub rhs_batch: Vec<usize>,
    /// Result dtype (`preferred_element_type`); `None` = operand dtype.
    pub preferred_element_type: Option<DType>,
}

/// `lax.conv_general_dilated` with layout fixed to NC… / OI… (ONNX's): lhs `[N, C, *spatial]`,
/// rhs `[O, C / feature_group_count, *window]`, output `[N, O, *spatial_out]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConvGeneralDilated {
    /// Stride per spatial dim.
    pub window_strides: Vec<usize>,
    /// (low, high) padding per spatial dim.
    pub padding: Vec<(i64, i64)>,
    /// Input dilation per spatial dim (transposed convolution).
    pub lhs_dilation: Vec<usize>,
    /// Kernel dilation per spatial dim (atrous convolution).
    pub rhs_dilation: Vec<usize>,
    /// Number of channel groups (depthwise = C).
    pub feature_group_count: usize,
}

pub(crate) fn infer(op: &Op, _ins: &[&Shape]) -> Result<Shape, String> {
    Err(format!("{} has no shape rule yet", op.name()))
}

pub(crate) fn eval(op: &Op, _ins: &[&Tensor], _out: &mut Tensor) -> Result<(), IrError> {
    Err(IrError::Eval { op: op.name(), msg: "no reference evaluation yet".into() })
}
