//! The rule vocabulary of the transforms: JVP, transpose and batching rules, and the small set
//! of helpers (in the spirit of JAX's `defjvp`, `deflinear`, `defbilinear`, `defvectorized`,
//! `defbroadcasting`, `defreducer`) that make most per-op rules one line.
//!
//! Each family keeps its rules beside its shape rule and reference evaluation
//! (`ops/<family>/ad.rs` where the family file would grow past ~800 lines). This module holds
//! the shared types and the dispatch `Op::jvp` / `Op::transpose` / `Op::batch`; the transforms
//! that apply the rules to whole graphs live in the `rlx-autodiff` crate, which hands rules of
//! ops carrying sub-graphs (`scan`, `cond`, `while`) a [`SubTransforms`] to recurse with.
//!
//! Conventions (JAX's):
//! - A tangent or cotangent is a [`Tan`]: `None` is a *symbolic zero* (nothing is emitted
//!   for it). Integer and bool values never carry tangents.
//! - A JVP rule gets the primal operands `x` and results `y` (nodes of the graph being built)
//!   and the operands' tangents, and returns the results' tangents. The tangents it emits must
//!   be *linear* in the input tangents, built from ops that are linear in their tangent
//!   operands: reverse mode linearizes (runs JVP rules) and then transposes those ops.
//! - Only linear ops have transpose rules. A transpose rule gets the operands (the linear ones
//!   only for their types), which operands are linear, the result types and the results'
//!   cotangents, and returns one cotangent per operand (`None` for non-linear or zero ones).
//! - A batching rule gets operands with their batch dim (`None` = not batched) and returns
//!   results with theirs. Rules are only called when some operand is batched.
//! - A missing rule is an [`AdError::NoRule`] naming the op, never a panic.

use crate::{Attr, Attrs, DType, Dim, Graph, IrError, Node, NodeId, Op, Shape};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, OnceLock, RwLock};
use thiserror::Error;

/// A tangent or cotangent: `None` is a symbolic zero.
pub type Tan = Option<NodeId>;

/// Which kind of rule was missing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleKind {
    /// Forward-mode derivative.
    Jvp,
    /// Transpose of a linear op (reverse mode).
    Transpose,
    /// Batching (vmap).
    Batch,
}

impl fmt::Display for RuleKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RuleKind::Jvp => "JVP",
            RuleKind::Transpose => "transpose",
            RuleKind::Batch => "batching",
        })
    }
}

/// Errors of the transforms (`grad`, `jvp`, `vmap`, ...).
#[derive(Debug, Clone, Error, PartialEq)]
pub enum AdError {
    /// An op has no rule of this kind (or is not linear where a transpose was needed).
    #[error("{op} has no {kind} rule: {why}")]
    NoRule {
        /// Op name.
        op: String,
        /// Missing rule.
        kind: RuleKind,
        /// Why, and what to do instead.
        why: String,
    },
    /// The op has rules but not for this case (symbolic batch size, dynamic trip count, ...).
    #[error("{op}: {msg}")]
    Unsupported {
        /// Op name.
        op: String,
        /// What is not supported.
        msg: String,
    },
    /// A bad argument to a transform (`wrt` not an input or param, non-float loss, ...).
    #[error("{0}")]
    Argument(String),
    /// The graph (input or produced) is invalid.
    #[error(transparent)]
    Ir(#[from] IrError),
}

impl AdError {
    /// `NoRule` for `op`.
    pub fn no_rule(op: &Op, kind: RuleKind, why: impl Into<String>) -> AdError {
        AdError::NoRule { op: op.name(), kind, why: why.into() }
    }
    /// `Unsupported` for `op`.
    pub fn unsupported(op: &Op, msg: impl Into<String>) -> AdError {
        AdError::Unsupported { op: op.name(), msg: msg.into() }
    }
}

/// Result of a JVP rule: the results' tangents, and optionally replacement primal results
/// (a rule that recomputes the primal in a form it can differentiate, as `scan` does, returns
/// the new primal results so the old node becomes dead).
#[derive(Clone, Debug, Default)]
pub struct JvpOut {
    /// Replacement primal results, if any.
    pub primals: Option<Vec<NodeId>>,
    /// One tangent per result.
    pub tangents: Vec<Tan>,
}

impl From<Vec<Tan>> for JvpOut {
    fn from(tangents: Vec<Tan>) -> JvpOut {
        JvpOut { primals: None, tangents }
    }
}

/// A graph split by partial evaluation into a known (primal) part and an unknown (linear)
/// part, as `scan` and `cond` need for reverse mode.
#[derive(Clone, Debug)]
pub struct Split {
    /// Inputs: the non-linear inputs of the original graph in order. Outputs: its first
    /// `n_known` outputs, then the residuals.
    pub known: Graph,
    /// Inputs: the residuals, then the linear inputs in order. Outputs: the remaining outputs.
    pub unknown: Graph,
    /// Number of residuals.
    pub n_res: usize,
}

/// Whole-graph transforms that rules of ops carrying sub-graphs apply recursively.
/// Implemented by `rlx-autodiff`.
pub trait SubTransforms {
    /// JVP of a sub-graph. Inputs of the result: `g`'s inputs, then one tangent per input with
    /// `tan_in[i]`. Outputs: `g`'s outputs, then one tangent per output that has a non-zero
    /// tangent or `force_out[i]` (zeros materialized). Returns the graph and that output mask.
    fn jvp(&self, g: &Graph, tan_in: &[bool], force_out: &[bool]) -> Result<(Graph, Vec<bool>), AdError>;
    /// Partial evaluation of `g` with respect to linear inputs `lin_in`: the first `n_known`
    /// outputs must not depend on them. See [`Split`].
    fn partial_eval(&self, g: &Graph, lin_in: &[bool], n_known: usize) -> Result<Split, AdError>;
    /// Transpose of a graph linear in the inputs `lin_in`. Inputs of the result: the non-linear
    /// inputs in order, then one cotangent per output of `g`. Outputs: one cotangent per linear
    /// input (zeros materialized).
    fn transpose(&self, g: &Graph, lin_in: &[bool]) -> Result<Graph, AdError>;
    /// Batch a sub-graph: input `i` gains a batch dim at `in_dims[i]` (of size `size`); every
    /// output of the result is batched at dim 0.
    fn vmap(&self, g: &Graph, in_dims: &[Option<usize>], size: &Dim) -> Result<Graph, AdError>;
}

/// What a rule builds with: the graph under construction and the recursive transforms.
pub struct Cx<'a> {
    /// The graph rules emit into.
    pub g: &'a mut Graph,
    /// Transforms for sub-graphs.
    pub sub: &'a dyn SubTransforms,
    /// Reverse mode is linearizing: composites with a custom VJP emit their linearized form
    /// (see [`VjpRule`]) instead of differentiating their decomposition.
    pub linearize: bool,
}

impl Cx<'_> {
    /// The type of a single-result node.
    pub fn ty(&self, x: NodeId) -> Shape {
        self.g.type_or_placeholder(x)
    }

    /// A node appended with known types (rules build with the graph's builders or this).
    pub fn node(&mut self, op: Op, inputs: &[NodeId]) -> NodeId {
        self.g.push(op, inputs)
    }

    /// Zeros of type `s` (a broadcast scalar; symbolic dims allowed).
    pub fn zeros(&mut self, s: &Shape) -> NodeId {
        let z = self.g.scalar(0.0, s.dtype);
        if s.rank() == 0 { z } else { self.g.broadcast_in_dim(z, s.dims.clone(), &[]) }
    }

    /// Zeros with `x`'s type.
    pub fn zeros_like(&mut self, x: NodeId) -> NodeId {
        let s = self.ty(x);
        self.zeros(&s)
    }

    /// `t`, or zeros like `like` when `t` is a symbolic zero.
    pub fn materialize(&mut self, t: Tan, like: NodeId) -> NodeId {
        t.unwrap_or_else(|| self.zeros_like(like))
    }

    /// Symbolic-zero-aware sum.
    pub fn add_tan(&mut self, a: Tan, b: Tan) -> Tan {
        match (a, b) {
            (Some(a), Some(b)) => Some(self.g.add(a, b)),
            (a, None) => a,
            (None, b) => b,
        }
    }

    /// `defjvp`: `t · f'` with the derivative built by `d` (not built for a zero tangent).
    pub fn chain(&mut self, t: Tan, d: impl FnOnce(&mut Graph) -> NodeId) -> Tan {
        let t = t?;
        let d = d(self.g);
        Some(self.g.mul(t, d))
    }

    /// `deflinear`'s JVP: the op itself applied to the tangents in the positions where it is
    /// linear (`lin(i)`), with zeros for zero tangents there and the primal operands
    /// elsewhere; a symbolic zero when every linear position has a zero tangent.
    pub fn linear(&mut self, op: &Op, x: &[NodeId], t: &[Tan], lin: impl Fn(usize) -> bool) -> Tan {
        if !(0..x.len()).any(|i| lin(i) && t[i].is_some()) {
            return None;
        }
        let ins: Vec<NodeId> = (0..x.len()).map(|i| if lin(i) { self.materialize(t[i], x[i]) } else { x[i] }).collect();
        Some(self.g.push(op.clone(), &ins))
    }

    /// Broadcast `t` to `like`'s dims (NumPy rules), the JVP of an operand that was broadcast.
    pub fn broadcast_like(&mut self, t: NodeId, like: NodeId) -> NodeId {
        let d = self.ty(like).dims;
        self.g.broadcast_to(t, d)
    }

    /// The transpose of NumPy broadcasting: sum `ct` over the dims broadcasting added or
    /// stretched so it gets `to`'s dims.
    pub fn unbroadcast(&mut self, ct: NodeId, to: &Shape) -> NodeId {
        let from = self.ty(ct);
        if from.dims == to.dims {
            return ct;
        }
        let lead = from.rank() - to.rank().min(from.rank());
        let axes: Vec<i64> = (0..from.rank())
            .filter(|&i| i < lead || (to.dims[i - lead] == Dim::Static(1) && from.dims[i] != Dim::Static(1)))
            .map(|i| i as i64)
            .collect();
        let s = if axes.is_empty() { ct } else { self.g.sum(ct, &axes, false) };
        if self.ty(s).dims == to.dims { s } else { self.g.reshape(s, to.dims.clone()) }
    }

    /// `x` with dim `from` moved to position `to` (as `np.moveaxis`).
    pub fn moveaxis(&mut self, x: NodeId, from: usize, to: usize) -> NodeId {
        if from == to {
            return x;
        }
        let r = self.ty(x).rank();
        let mut perm: Vec<usize> = (0..r).filter(|&i| i != from).collect();
        perm.insert(to, from);
        self.g.transpose(x, &perm)
    }

    /// `x` batched at dim 0: its batch dim moved there, or a new one of `size` broadcast in.
    pub fn to_front(&mut self, x: NodeId, bd: Option<usize>, size: &Dim) -> NodeId {
        match bd {
            Some(b) => self.moveaxis(x, b, 0),
            None => {
                let s = self.ty(x);
                let mut dims = vec![size.clone()];
                dims.extend(s.dims.iter().cloned());
                let bdims: Vec<usize> = (1..=s.rank()).collect();
                self.g.broadcast_in_dim(x, dims, &bdims)
            }
        }
    }

    /// Insert `n` size-1 dims at position `at` (a reshape).
    pub fn expand(&mut self, x: NodeId, at: usize, n: usize) -> NodeId {
        if n == 0 {
            return x;
        }
        let mut d = self.ty(x).dims;
        for _ in 0..n {
            d.insert(at, Dim::Static(1));
        }
        self.g.reshape(x, d)
    }

    /// A static batch size, or `Unsupported` naming `op`.
    pub fn static_size(&self, op: &Op, size: &Dim) -> Result<usize, AdError> {
        size.as_static()
            .ok_or_else(|| AdError::unsupported(op, format!("batching needs a static batch size, got {size}")))
    }
}

/// `defvectorized` / `defreducer` style helper: result dims after moving the batch dim of
/// every batched operand to the front (unbatched ones are broadcast).
pub fn all_to_front(cx: &mut Cx, x: &[NodeId], bd: &[Option<usize>], size: &Dim) -> Vec<NodeId> {
    x.iter().zip(bd).map(|(&x, &b)| cx.to_front(x, b, size)).collect()
}

/// `defbroadcasting`: operands of an elementwise op with NumPy broadcasting, batched ones
/// moved to dim 0 and padded with size-1 dims to the result's rank + 1, so that unbatched
/// operands still right-align. The result is batched at 0.
pub fn broadcasting_operands(cx: &mut Cx, x: &[NodeId], bd: &[Option<usize>]) -> Vec<NodeId> {
    let rank = x.iter().zip(bd).map(|(&x, b)| cx.ty(x).rank() - b.is_some() as usize).max().unwrap_or(0);
    x.iter()
        .zip(bd)
        .map(|(&x, &b)| match b {
            None => x,
            Some(b) => {
                let y = cx.moveaxis(x, b, 0);
                let r = cx.ty(y).rank() - 1;
                cx.expand(y, 1, rank - r)
            }
        })
        .collect()
}

/// The user-facing rule of a `custom_vjp` composite: the operands' cotangents from the
/// operands `x`, the results `y` and the results' cotangents `ct` (`None` = zero). It is used
/// in reverse mode in place of transposing the decomposition's linearization; forward mode
/// still differentiates the decomposition. Return `None` for operands without a cotangent.
pub trait VjpRule: Send + Sync {
    /// Whether the rule handles a composite with these attributes (otherwise reverse mode
    /// differentiates the decomposition). Default: always.
    fn applies(&self, attrs: &Attrs) -> bool {
        let _ = attrs;
        true
    }
    /// Emit the backward pass into `cx.g`.
    fn vjp(&self, attrs: &Attrs, cx: &mut Cx, x: &[NodeId], y: &[NodeId], ct: &[Tan]) -> Result<Vec<Tan>, AdError>;
}

type VjpRegistry = RwLock<HashMap<String, Arc<dyn VjpRule>>>;

fn vjp_registry() -> &'static VjpRegistry {
    static R: OnceLock<VjpRegistry> = OnceLock::new();
    R.get_or_init(|| RwLock::new(HashMap::new()))
}

/// Register (or replace) the custom VJP of composites named `name` (`custom_vjp`). Built-in
/// custom VJPs (`cross_entropy`, `scaled_dot_product_attention`) are used unless replaced.
pub fn register_vjp(name: &str, rule: Arc<dyn VjpRule>) {
    vjp_registry().write().unwrap_or_else(|e| e.into_inner()).insert(name.to_string(), rule);
}

/// The custom VJP of composites named `name`, if any (registered, else built in).
pub fn lookup_vjp(name: &str) -> Option<Arc<dyn VjpRule>> {
    let user = vjp_registry().read().unwrap_or_else(|e| e.into_inner()).get(name).cloned();
    user.or_else(|| crate::compose::vjp::builtin(name))
}

/// Attribute keys the linearized form of a custom-VJP composite carries besides the
/// composite's own attributes.
pub mod lin_attrs {
    /// The composite's name.
    pub const OF: &str = "__vjp_of";
    /// Number of primal operands.
    pub const N_IN: &str = "__n_in";
    /// Number of primal results.
    pub const N_OUT: &str = "__n_out";
    /// Indices of the operands that have tangent operands.
    pub const TAN: &str = "__tangents";
}

/// Read an integer attribute of a linearized composite.
pub(crate) fn attr_int(a: &Attrs, k: &str) -> Option<usize> {
    match a.get(k) {
        Some(Attr::Int(v)) => Some(*v as usize),
        _ => None,
    }
}

impl Op {
    /// Forward-mode rule: the results' tangents given the operands' (see the module docs).
    pub fn jvp(&self, cx: &mut Cx, x: &[NodeId], y: &[NodeId], t: &[Tan]) -> Result<JvpOut, AdError> {
        use super::{control, custom, dot, elementwise, movement, reduce, rng, sort};
        let one = |r: Result<Tan, AdError>| r.map(|t| JvpOut::from(vec![t]));
        match self {
            Op::Input { .. } | Op::Param { .. } | Op::GetTupleElement { .. } => {
                Err(AdError::no_rule(self, RuleKind::Jvp, "handled by the transform"))
            }
            Op::Constant(_) | Op::Iota { .. } => Ok(vec![None].into()),
            Op::Rng { .. } => rng::jvp(self),
            Op::Unary(_)
            | Op::Binary(_)
            | Op::Compare(_)
            | Op::Select
            | Op::ConvertElementType(_)
            | Op::StopGradient => one(elementwise::ad::jvp(self, cx, x, y[0], t)),
            Op::Reduce { .. } | Op::ArgReduce { .. } | Op::Cumulative { .. } | Op::ReduceWindow { .. } => {
                one(reduce::ad::jvp(self, cx, x, y[0], t))
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
            | Op::ScatterAdd { .. } => one(movement::ad::jvp(self, cx, x, t)),
            Op::DotGeneral(_) | Op::ConvGeneralDilated(_) => one(dot::ad::jvp(self, cx, x, t)),
            Op::Sort { .. } | Op::TopK { .. } => sort::jvp(self, cx, x, y, t).map(JvpOut::from),
            Op::Scan(_) | Op::While(_) | Op::Cond(_) | Op::Composite(_) => control::ad::jvp(self, cx, x, y, t),
            Op::Custom { name, attrs } => custom::jvp(self, name, attrs, cx, x, y, t).map(JvpOut::from),
        }
    }

    /// Reverse-mode rule of a linear op: the operands' cotangents (see the module docs).
    pub fn transpose(
        &self,
        cx: &mut Cx,
        x: &[NodeId],
        lin: &[bool],
        outs: &[Shape],
        ct: &[Tan],
    ) -> Result<Vec<Tan>, AdError> {
        use super::{control, dot, elementwise, movement, reduce};
        if ct.iter().all(Option::is_none) {
            return Ok(vec![None; x.len()]);
        }
        match self {
            Op::Unary(_) | Op::Binary(_) | Op::Select | Op::ConvertElementType(_) => {
                elementwise::ad::transpose(self, cx, x, lin, ct[0])
            }
            Op::Reduce { .. } | Op::Cumulative { .. } | Op::ReduceWindow { .. } => {
                reduce::ad::transpose(self, cx, x, lin, ct[0])
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
            | Op::ScatterAdd { .. } => movement::ad::transpose(self, cx, x, lin, ct[0]),
            Op::DotGeneral(_) | Op::ConvGeneralDilated(_) => dot::ad::transpose(self, cx, x, lin, ct[0]),
            Op::Scan(_) | Op::While(_) | Op::Cond(_) | Op::Composite(_) => {
                control::ad::transpose(self, cx, x, lin, outs, ct)
            }
            Op::Custom { name, attrs } => super::custom::transpose(self, name, attrs, cx, x, lin, outs, ct),
            _ => Err(not_linear(self, lin)),
        }
    }

    /// Batching rule: results with their batch dims, given operands with theirs (at least one
    /// batched) and the batch size (see the module docs).
    pub fn batch(
        &self,
        cx: &mut Cx,
        x: &[NodeId],
        bd: &[Option<usize>],
        size: &Dim,
    ) -> Result<Vec<(NodeId, Option<usize>)>, AdError> {
        use super::{control, custom, dot, elementwise, movement, reduce, sort};
        let one = |r: Result<(NodeId, Option<usize>), AdError>| r.map(|p| vec![p]);
        match self {
            Op::Input { .. }
            | Op::Param { .. }
            | Op::GetTupleElement { .. }
            | Op::Constant(_)
            | Op::Iota { .. }
            | Op::Rng { .. } => Err(AdError::no_rule(self, RuleKind::Batch, "an op without operands is never batched")),
            Op::Unary(_)
            | Op::Binary(_)
            | Op::Compare(_)
            | Op::Select
            | Op::ConvertElementType(_)
            | Op::StopGradient => one(elementwise::ad::batch(self, cx, x, bd)),
            Op::Reduce { .. } | Op::ArgReduce { .. } | Op::Cumulative { .. } | Op::ReduceWindow { .. } => {
                one(reduce::ad::batch(self, cx, x, bd))
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
            | Op::ScatterAdd { .. } => one(movement::ad::batch(self, cx, x, bd, size)),
            Op::DotGeneral(_) | Op::ConvGeneralDilated(_) => one(dot::ad::batch(self, cx, x, bd, size)),
            Op::Sort { .. } | Op::TopK { .. } => sort::batch(self, cx, x, bd, size),
            Op::Scan(_) | Op::While(_) | Op::Cond(_) | Op::Composite(_) => control::ad::batch(self, cx, x, bd, size),
            Op::Custom { name, attrs } => custom::batch(self, name, attrs, cx, x, bd, size),
        }
    }
}

/// The error for a transpose asked of an op that is not linear in the operands marked linear
/// (a JVP rule emitted a non-linear op on tangents: a bug in that rule).
pub fn not_linear(op: &Op, lin: &[bool]) -> AdError {
    let which: Vec<usize> = (0..lin.len()).filter(|&i| lin[i]).collect();
    AdError::no_rule(op, RuleKind::Transpose, format!("it is not linear in operands {which:?}"))
}

/// True for dtypes that carry tangents.
pub fn differentiable(d: DType) -> bool {
    d.is_float()
}

/// Keep `t` only where the primal type is differentiable.
pub fn float_only(t: Tan, s: &Shape) -> Tan {
    if differentiable(s.dtype) { t } else { None }
}

/// Wrap an [`IrError`] recorded on the graph while a rule was building.
pub fn check(g: &Graph) -> Result<(), AdError> {
    match g.error() {
        Some(e) => Err(AdError::Ir(e.clone())),
        None => Ok(()),
    }
}

/// Copy `body`'s nodes into `g` with its inputs bound to `args` (in order), re-inferring
/// types from the actual operands (so a body typed with symbolic dims specializes); returns
/// the body's outputs in `g`.
pub fn inline_call(g: &mut Graph, body: &Graph, args: &[NodeId]) -> Vec<NodeId> {
    let mut vals: Vec<Vec<NodeId>> = Vec::with_capacity(body.nodes().len());
    let mut next = 0;
    for n in body.nodes() {
        let v = match &n.op {
            Op::Input { .. } => {
                next += 1;
                vec![args[next - 1]]
            }
            Op::GetTupleElement { index } => vec![vals[n.inputs[0].index()][*index]],
            op => {
                let ins: Vec<NodeId> = n.inputs.iter().map(|i| vals[i.index()][0]).collect();
                let hint = if op.is_source() { n.outputs.first() } else { None };
                let r = g.push_multi(op.clone(), &ins, hint);
                if n.is_tuple() { r } else { vec![r[0]] }
            }
        };
        vals.push(v);
    }
    body.outputs().iter().map(|o| vals[o.index()][0]).collect()
}

/// `g` with its inputs re-declared in the order `order` (indices into `g.inputs()`); every
/// other node keeps its relative order.
pub fn permute_inputs(g: &Graph, order: &[usize]) -> Graph {
    let mut out = Graph::new(g.name.clone());
    let mut map = vec![NodeId(0); g.nodes().len()];
    for &k in order {
        let id = g.inputs()[k];
        map[id.index()] = out.push_node(g.node(id).clone());
    }
    for (i, n) in g.nodes().iter().enumerate() {
        if !matches!(n.op, Op::Input { .. }) {
            let inputs = n.inputs.iter().map(|x| map[x.index()]).collect();
            map[i] = out.push_node(Node { op: n.op.clone(), inputs, outputs: n.outputs.clone() });
        }
    }
    out.set_outputs(g.outputs().iter().map(|o| map[o.index()]).collect());
    if let Some(e) = g.error() {
        out.record_error(e.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tensor;
    use crate::interp::evaluate_args;
    use crate::ops::UnaryOp;

    /// Sub-graph transforms are not needed by the rules tested here.
    struct NoSub;
    impl SubTransforms for NoSub {
        fn jvp(&self, _: &Graph, _: &[bool], _: &[bool]) -> Result<(Graph, Vec<bool>), AdError> {
            Err(AdError::Argument("no sub-graphs here".into()))
        }
        fn partial_eval(&self, _: &Graph, _: &[bool], _: usize) -> Result<Split, AdError> {
            Err(AdError::Argument("no sub-graphs here".into()))
        }
        fn transpose(&self, _: &Graph, _: &[bool]) -> Result<Graph, AdError> {
            Err(AdError::Argument("no sub-graphs here".into()))
        }
        fn vmap(&self, _: &Graph, _: &[Option<usize>], _: &Dim) -> Result<Graph, AdError> {
            Err(AdError::Argument("no sub-graphs here".into()))
        }
    }

    #[test]
    fn unbroadcast_sums_the_broadcast_dims() {
        let mut g = Graph::new("t");
        let ct = g.input("ct", Shape::new(&[2, 3], DType::F64));
        let mut cx = Cx { g: &mut g, sub: &NoSub, linearize: false };
        let a = cx.unbroadcast(ct, &Shape::new(&[3], DType::F64));
        let b = cx.unbroadcast(ct, &Shape::new(&[2, 1], DType::F64));
        let c = cx.unbroadcast(ct, &Shape::scalar(DType::F64));
        g.set_outputs(vec![a, b, c]);
        let t = Tensor::from_vec(vec![1.0f64, 2., 3., 4., 5., 6.], &[2, 3]).unwrap();
        let r = evaluate_args(&g, &[&t]).unwrap();
        assert_eq!((r[0].shape(), r[0].to_f64_vec()), (&[3][..], vec![5., 7., 9.]));
        assert_eq!((r[1].shape(), r[1].to_f64_vec()), (&[2, 1][..], vec![6., 15.]));
        assert_eq!(r[2].to_f64_vec(), vec![21.]);
    }

    #[test]
    fn missing_rules_are_typed_errors_naming_the_op() {
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[2], DType::F64));
        let mut cx = Cx { g: &mut g, sub: &NoSub, linearize: false };
        let ct = Some(x);
        let e = Op::Unary(UnaryOp::Exp).transpose(&mut cx, &[x], &[true], &[], &[ct]).unwrap_err();
        assert_eq!(
            e,
            AdError::NoRule {
                op: "exp".into(),
                kind: RuleKind::Transpose,
                why: "it is not linear in operands [0]".into()
            }
        );
        let e = Op::Iota { dimension: 0 }.batch(&mut cx, &[], &[], &Dim::Static(2)).unwrap_err();
        assert!(matches!(e, AdError::NoRule { ref op, kind: RuleKind::Batch, .. } if op == "iota"), "{e}");
        assert!(e.to_string().starts_with("iota has no batching rule"), "{e}");
    }

    #[test]
    fn defjvp_and_deflinear_helpers() {
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[3], DType::F64));
        let t = g.input("t", Shape::new(&[3], DType::F64));
        let mut cx = Cx { g: &mut g, sub: &NoSub, linearize: false };
        // exp: t · exp(x); neg is linear; a zero tangent stays symbolic.
        let y = cx.g.exp(x);
        let te = Op::Unary(UnaryOp::Exp).jvp(&mut cx, &[x], &[y], &[Some(t)]).unwrap().tangents[0].unwrap();
        let tn = cx.linear(&Op::Unary(UnaryOp::Neg), &[x], &[Some(t)], |_| true).unwrap();
        assert!(cx.linear(&Op::Unary(UnaryOp::Neg), &[x], &[None], |_| true).is_none());
        assert!(cx.chain(None, |g| g.cos(x)).is_none());
        g.set_outputs(vec![te, tn]);
        let xv = Tensor::from_vec(vec![0.0f64, 1.0, -1.0], &[3]).unwrap();
        let tv = Tensor::from_vec(vec![1.0f64, 2.0, 3.0], &[3]).unwrap();
        let r = evaluate_args(&g, &[&xv, &tv]).unwrap();
        assert_eq!(r[0].to_f64_vec(), vec![1.0, 2.0 * 1f64.exp(), 3.0 * (-1f64).exp()]);
        assert_eq!(r[1].to_f64_vec(), vec![-1.0, -2.0, -3.0]);
    }
}
