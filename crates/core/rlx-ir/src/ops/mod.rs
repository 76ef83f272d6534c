//! The closed set of primitives, nested by family, following `jax.lax` in name and semantics.
//!
//! Each family file holds, side by side, its ops' parameters, shape/dtype rule and reference
//! evaluation (autodiff and batching rules join them in the autodiff issue). This module holds
//! the enum, the per-concern `match` that delegates to the families, and op properties that
//! passes query (`is_elementwise`, `is_commutative`, ...).

pub mod ad;
pub mod control;
pub mod custom;
pub mod dot;
pub mod elementwise;
pub mod movement;
pub mod reduce;
pub mod rng;
pub mod sort;

use crate::{Graph, IrError, Shape, Tensor};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use control::{CondOp, ScanOp, WhileOp};
pub use dot::{ConvGeneralDilated, DotGeneral};
pub use elementwise::{BinaryOp, CompareOp, UnaryOp};
pub use movement::{GatherDims, GatherMode, ScatterDims};
pub use reduce::{CumulativeOp, ReduceOp};
pub use rng::RngDistribution;

/// A composite's attribute value (StableHLO `composite` attributes).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum Attr {
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    Ints(Vec<i64>),
    Floats(Vec<f64>),
}

/// Named attributes, ordered for deterministic printing and hashing.
pub type Attrs = BTreeMap<String, Attr>;

/// A named region: a composite op with attributes and its decomposition into primitives.
///
/// Like StableHLO's `composite`: a backend with a native kernel for `name` may run it directly;
/// everything else (other backends, autodiff) inlines `body`. `body`'s inputs are the
/// composite's operands in order, its outputs the composite's results.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Composite {
    /// ONNX / PyTorch name of the composite (`softmax`, `layer_norm`, ...).
    pub name: String,
    /// Attributes (axis, epsilon, ...).
    pub attrs: Attrs,
    /// The decomposition.
    pub body: Box<Graph>,
}

/// One IR operation. Every variant's semantics follow the `jax.lax` function of the same name
/// unless its docs say otherwise.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// A named graph input, fed per run.
    Input {
        /// Name used in `run(&[(name, data)])`.
        name: String,
    },
    /// A named parameter (weights), set once with `set_param`.
    Param {
        /// Name used in `set_param(name, data)`.
        name: String,
    },
    /// A literal tensor, shared: cloning the op (or a graph, as every rewriting pass does)
    /// does not copy the data (a model's weights are constants).
    Constant(std::sync::Arc<Tensor>),
    /// `lax.iota`: increasing integers along `dimension` of the output shape.
    Iota {
        /// Axis that counts.
        dimension: usize,
    },
    /// Elementwise unary math (`lax.exp`, `lax.neg`, ...).
    Unary(UnaryOp),
    /// Elementwise binary math with NumPy broadcasting; operands share one dtype.
    Binary(BinaryOp),
    /// Elementwise comparison with NumPy broadcasting; result is `Bool`.
    Compare(CompareOp),
    /// `lax.select(pred, on_true, on_false)` with NumPy broadcasting.
    Select,
    /// `lax.convert_element_type`.
    ConvertElementType(crate::DType),
    /// `lax.stop_gradient`: identity forward, zero derivative.
    StopGradient,
    /// `lax.reduce_{sum,max,min,prod,and,or}` over `axes` (removed from the shape).
    Reduce {
        /// The monoid.
        op: ReduceOp,
        /// Axes to reduce, sorted, unique, non-negative.
        axes: Vec<usize>,
    },
    /// `lax.argmax` / `lax.argmin` along `axis` (removed); first index wins ties, NaN wins.
    ArgReduce {
        /// `Max` or `Min`.
        op: ReduceOp,
        /// Axis to reduce.
        axis: usize,
        /// Integer dtype of the result.
        index_dtype: crate::DType,
    },
    /// `lax.cumsum` / `cumprod` / `cummax` / `cummin`.
    Cumulative {
        /// The running operation.
        op: CumulativeOp,
        /// Axis to scan.
        axis: usize,
        /// Scan from the end.
        reverse: bool,
    },
    /// `lax.reduce_window` with the op's identity as init value (pooling).
    ReduceWindow {
        /// `Sum`, `Max` or `Min`.
        op: ReduceOp,
        /// Window size per dim.
        window_dimensions: Vec<usize>,
        /// Stride per dim.
        window_strides: Vec<usize>,
        /// (low, high) padding per dim.
        padding: Vec<(i64, i64)>,
        /// Dilation of the operand per dim.
        base_dilation: Vec<usize>,
        /// Dilation of the window per dim.
        window_dilation: Vec<usize>,
    },
    /// `lax.broadcast_in_dim`.
    BroadcastInDim {
        /// Output dims.
        shape: Vec<crate::Dim>,
        /// For each operand dim, the output dim it maps to.
        broadcast_dimensions: Vec<usize>,
    },
    /// `lax.reshape` (row-major, no dimension permutation).
    Reshape {
        /// Output dims.
        new_sizes: Vec<crate::Dim>,
    },
    /// `lax.transpose`.
    Transpose {
        /// Output dim `i` is operand dim `permutation[i]`.
        permutation: Vec<usize>,
    },
    /// `lax.rev`: reverse the order of elements along `dimensions`.
    Rev {
        /// Dims to reverse.
        dimensions: Vec<usize>,
    },
    /// `lax.slice` with static bounds and positive strides.
    Slice {
        /// Inclusive start per dim.
        start_indices: Vec<usize>,
        /// Exclusive end per dim.
        limit_indices: Vec<usize>,
        /// Step per dim (≥ 1).
        strides: Vec<usize>,
    },
    /// `lax.dynamic_slice(operand, *start_indices)`; starts are clamped so the slice fits.
    DynamicSlice {
        /// Size of the slice per dim.
        slice_sizes: Vec<usize>,
    },
    /// `lax.dynamic_update_slice(operand, update, *start_indices)`; starts clamped.
    DynamicUpdateSlice,
    /// `lax.concatenate` along `dimension`.
    Concatenate {
        /// Axis to join.
        dimension: usize,
    },
    /// `lax.pad(operand, padding_value, [(low, high, interior)])`; negative low/high crop.
    Pad {
        /// Padding before each dim.
        low: Vec<i64>,
        /// Padding after each dim.
        high: Vec<i64>,
        /// Padding between elements of each dim.
        interior: Vec<usize>,
    },
    /// `lax.gather` (XLA semantics, index vector in the last dim of `indices`).
    Gather {
        /// Dimension numbers.
        dims: GatherDims,
        /// Slice size per operand dim.
        slice_sizes: Vec<usize>,
        /// Out-of-bounds behaviour.
        mode: GatherMode,
    },
    /// `lax.scatter_add` (XLA semantics, index vector in the last dim of `indices`).
    ScatterAdd {
        /// Dimension numbers.
        dims: ScatterDims,
        /// Out-of-bounds behaviour.
        mode: GatherMode,
    },
    /// `lax.dot_general`.
    DotGeneral(DotGeneral),
    /// `lax.conv_general_dilated`, NCHW / OIHW layout (ONNX's).
    ConvGeneralDilated(ConvGeneralDilated),
    /// `lax.sort` of one or more same-shape operands along `dimension`, keyed on the first
    /// `num_keys` operands (ascending; NaN last). One result per operand.
    Sort {
        /// Axis to sort.
        dimension: usize,
        /// Keep the order of equal keys.
        is_stable: bool,
        /// Number of leading operands used as keys.
        num_keys: usize,
    },
    /// `lax.top_k` along the last axis: results `[values, indices(i32)]`, descending,
    /// lower index first among equal values.
    TopK {
        /// Number of elements kept.
        k: usize,
    },
    /// Counter-based random numbers (Philox-4x64-10, NumPy's `Philox` stream), shape from the
    /// node's type.
    Rng {
        /// Key.
        seed: u64,
        /// What to draw.
        distribution: RngDistribution,
    },
    /// `lax.scan`.
    Scan(ScanOp),
    /// `lax.while_loop`.
    While(WhileOp),
    /// `lax.switch` / `lax.cond`.
    Cond(CondOp),
    /// A named region with its decomposition.
    Composite(Composite),
    /// A user op registered in [`custom`]'s registry.
    Custom {
        /// Registered name.
        name: String,
        /// Attributes passed to the registered rules.
        attrs: Attrs,
    },
    /// Element `index` of a multi-result node.
    GetTupleElement {
        /// Which result.
        index: usize,
    },
}

impl Op {
    /// The `jax.lax`-style name used in errors, printing and dispatch reports.
    pub fn name(&self) -> String {
        match self {
            Op::Input { .. } => "input".into(),
            Op::Param { .. } => "param".into(),
            Op::Constant(_) => "constant".into(),
            Op::Iota { .. } => "iota".into(),
            Op::Unary(u) => u.name().into(),
            Op::Binary(b) => b.name().into(),
            Op::Compare(c) => c.name().into(),
            Op::Select => "select".into(),
            Op::ConvertElementType(_) => "convert_element_type".into(),
            Op::StopGradient => "stop_gradient".into(),
            Op::Reduce { op, .. } => format!("reduce_{}", op.name()),
            Op::ArgReduce { op: ReduceOp::Min, .. } => "argmin".into(),
            Op::ArgReduce { .. } => "argmax".into(),
            Op::Cumulative { op, .. } => op.name().into(),
            Op::ReduceWindow { .. } => "reduce_window".into(),
            Op::BroadcastInDim { .. } => "broadcast_in_dim".into(),
            Op::Reshape { .. } => "reshape".into(),
            Op::Transpose { .. } => "transpose".into(),
            Op::Rev { .. } => "rev".into(),
            Op::Slice { .. } => "slice".into(),
            Op::DynamicSlice { .. } => "dynamic_slice".into(),
            Op::DynamicUpdateSlice => "dynamic_update_slice".into(),
            Op::Concatenate { .. } => "concatenate".into(),
            Op::Pad { .. } => "pad".into(),
            Op::Gather { .. } => "gather".into(),
            Op::ScatterAdd { .. } => "scatter_add".into(),
            Op::DotGeneral(_) => "dot_general".into(),
            Op::ConvGeneralDilated(_) => "conv_general_dilated".into(),
            Op::Sort { .. } => "sort".into(),
            Op::TopK { .. } => "top_k".into(),
            Op::Rng { .. } => "rng".into(),
            Op::Scan(_) => "scan".into(),
            Op::While(_) => "while".into(),
            Op::Cond(_) => "cond".into(),
            Op::Composite(c) => c.name.clone(),
            Op::Custom { name, .. } => format!("custom.{name}"),
            Op::GetTupleElement { .. } => "get_tuple_element".into(),
        }
    }

    /// True for ops that map each output element from the same-index input elements
    /// (after NumPy broadcasting): unary, binary, compare, select, convert, stop_gradient.
    pub fn is_elementwise(&self) -> bool {
        matches!(
            self,
            Op::Unary(_) | Op::Binary(_) | Op::Compare(_) | Op::Select | Op::ConvertElementType(_) | Op::StopGradient
        )
    }

    /// True when swapping the two operands leaves the result unchanged.
    pub fn is_commutative(&self) -> bool {
        match self {
            Op::Binary(b) => b.is_commutative(),
            Op::Compare(c) => matches!(c, CompareOp::Eq | CompareOp::Ne),
            _ => false,
        }
    }

    /// True when the op is linear in operand `i` (the others held fixed); used by reverse mode
    /// (only linear ops need transpose rules).
    pub fn is_linear_in(&self, i: usize) -> bool {
        match self {
            Op::Unary(UnaryOp::Neg) | Op::ConvertElementType(_) => true,
            Op::Binary(BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul) => true,
            Op::Binary(BinaryOp::Div) => i == 0,
            Op::Select => i > 0,
            Op::Reduce { op: ReduceOp::Sum, .. } | Op::Cumulative { op: CumulativeOp::Sum, .. } => true,
            Op::BroadcastInDim { .. }
            | Op::Reshape { .. }
            | Op::Transpose { .. }
            | Op::Rev { .. }
            | Op::Slice { .. }
            | Op::Concatenate { .. } => true,
            Op::Pad { .. } | Op::DynamicSlice { .. } | Op::Gather { .. } => i == 0,
            Op::DynamicUpdateSlice => i <= 1,
            Op::ScatterAdd { .. } => i == 0 || i == 2,
            Op::DotGeneral(_) | Op::ConvGeneralDilated(_) => i < 2,
            Op::ReduceWindow { op: ReduceOp::Sum, .. } => true,
            _ => false,
        }
    }

    /// True for ops with no operands that read graph inputs or parameters.
    pub fn is_source(&self) -> bool {
        matches!(self, Op::Input { .. } | Op::Param { .. } | Op::Constant(_) | Op::Iota { .. } | Op::Rng { .. })
    }

    /// Output types from operand types (the op's shape and dtype rule).
    ///
    /// `out_hint` is the node's declared type for ops whose shape is a parameter of the node
    /// itself (`iota`, `rng`, `input`, `param`). Errors are plain messages; the graph wraps
    /// them with the node and op name. A result whose data could not exist in memory
    /// ([`Shape::check_size`]) is an error too.
    pub fn infer(&self, ins: &[&Shape], out_hint: Option<&Shape>) -> Result<Vec<Shape>, String> {
        let outs = self.infer_types(ins, out_hint)?;
        outs.iter().try_for_each(Shape::check_size)?;
        Ok(outs)
    }

    fn infer_types(&self, ins: &[&Shape], out_hint: Option<&Shape>) -> Result<Vec<Shape>, String> {
        let one = |r: Result<Shape, String>| r.map(|s| vec![s]);
        match self {
            Op::Input { .. } | Op::Param { .. } | Op::Iota { .. } | Op::Rng { .. } => {
                let s = out_hint.ok_or("source op needs a declared shape")?;
                if let Op::Iota { dimension } = self
                    && *dimension >= s.rank()
                {
                    return Err(format!("iota dimension {dimension} out of range for {s}"));
                }
                if let Op::Rng { .. } = self
                    && !s.dtype.is_float()
                {
                    return Err(format!("rng produces floats, not {}", s.dtype));
                }
                Ok(vec![s.clone()])
            }
            Op::Constant(t) => Ok(vec![Shape::new(t.shape(), t.dtype())]),
            Op::Unary(_)
            | Op::Binary(_)
            | Op::Compare(_)
            | Op::Select
            | Op::ConvertElementType(_)
            | Op::StopGradient => one(elementwise::infer(self, ins)),
            Op::Reduce { .. } | Op::ArgReduce { .. } | Op::Cumulative { .. } | Op::ReduceWindow { .. } => {
                one(reduce::infer(self, ins))
            }
            Op::BroadcastInDim { .. }
            | Op::Reshape { .. }
            | Op::Transpose { .. }
            | Op::Rev { .. }
            | Op::Slice { .. }
            | Op::DynamicSlice { .. }
            | Op::DynamicUpdateSlice
            | Op::Concatenate { .. }
            | Op::Pad { .. }
            | Op::Gather { .. }
            | Op::ScatterAdd { .. } => one(movement::infer(self, ins)),
            Op::DotGeneral(_) | Op::ConvGeneralDilated(_) => one(dot::infer(self, ins)),
            Op::Sort { .. } | Op::TopK { .. } => sort::infer(self, ins),
            Op::Scan(_) | Op::While(_) | Op::Cond(_) | Op::Composite(_) => control::infer(self, ins),
            Op::Custom { name, attrs } => custom::infer(name, attrs, ins),
            Op::GetTupleElement { .. } => Err("get_tuple_element is typed by the graph".into()),
        }
    }

    /// Reference evaluation into preallocated outputs (shapes and dtypes already correct).
    ///
    /// Plain, obviously-correct loops: this is the oracle the CPU backend's fast kernels are
    /// tested against, and the CPU backend's implementation for ops without a fast kernel.
    pub fn eval_into(&self, ins: &[&Tensor], outs: &mut [Tensor]) -> Result<(), IrError> {
        match self {
            Op::Input { .. } | Op::Param { .. } | Op::GetTupleElement { .. } => {
                Err(IrError::Eval { op: self.name(), msg: "fed by the executor, not evaluated".into() })
            }
            Op::Constant(t) => {
                outs[0].copy_from(t);
                Ok(())
            }
            Op::Iota { dimension } => movement::eval_iota(*dimension, &mut outs[0]),
            Op::Rng { seed, distribution } => rng::eval(*seed, distribution, &mut outs[0]),
            Op::Unary(_)
            | Op::Binary(_)
            | Op::Compare(_)
            | Op::Select
            | Op::ConvertElementType(_)
            | Op::StopGradient => elementwise::eval(self, ins, &mut outs[0]),
            Op::Reduce { .. } | Op::ArgReduce { .. } | Op::Cumulative { .. } | Op::ReduceWindow { .. } => {
                reduce::eval(self, ins, &mut outs[0])
            }
            Op::BroadcastInDim { .. }
            | Op::Reshape { .. }
            | Op::Transpose { .. }
            | Op::Rev { .. }
            | Op::Slice { .. }
            | Op::DynamicSlice { .. }
            | Op::DynamicUpdateSlice
            | Op::Concatenate { .. }
            | Op::Pad { .. }
            | Op::Gather { .. }
            | Op::ScatterAdd { .. } => movement::eval(self, ins, &mut outs[0]),
            Op::DotGeneral(_) | Op::ConvGeneralDilated(_) => dot::eval(self, ins, &mut outs[0]),
            Op::Sort { .. } | Op::TopK { .. } => sort::eval(self, ins, outs),
            Op::Scan(_) | Op::While(_) | Op::Cond(_) | Op::Composite(_) => control::eval(self, ins, outs),
            Op::Custom { name, attrs } => custom::eval(name, attrs, ins, outs),
        }
    }

    /// Sub-graphs this op carries (composite bodies, loop bodies, branches).
    pub fn subgraphs(&self) -> Vec<&Graph> {
        match self {
            Op::Composite(c) => vec![&c.body],
            Op::Scan(s) => vec![&s.body],
            Op::While(w) => vec![&w.cond, &w.body],
            Op::Cond(c) => c.branches.iter().collect(),
            _ => vec![],
        }
    }
}

/// Format a shape list for error messages: `f32[2,3], f32[4]`.
pub(crate) fn fmt_shapes(ins: &[&Shape]) -> String {
    ins.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")
}

/// Check the operand count of an op.
pub(crate) fn arity(name: &str, ins: &[&Shape], n: usize) -> Result<(), String> {
    if ins.len() != n {
        return Err(format!("{name} takes {n} operands, got {}", ins.len()));
    }
    Ok(())
}
