//! LIR: the memory plan of a compiled graph — a schedule, liveness intervals, and the
//! assignment of every intermediate value to a buffer of one arena.
//!
//! [`plan`] takes a verified graph with static shapes and returns a [`LirModule`]:
//!
//! 1. **Schedule** ([`schedule`]): a topological order chosen to lower peak memory. A greedy
//!    list scheduler picks, among the ready nodes, the one that frees the most bytes net of what
//!    it allocates; the plan keeps whichever of that order and the graph's own order has the
//!    lower peak.
//! 2. **Liveness**: each value lives from the step that defines it to its last reader (graph
//!    outputs to the end).
//! 3. **Aliasing**: a `reshape` (and a prefix slice, whose elements are the operand's first
//!    ones) becomes a *view* that reuses its operand's buffer, and an elementwise op writes
//!    *in place* over an operand of its own size and dtype — both only when that operand is
//!    read by nothing later (never while the source is still read). Aliased values form one
//!    group that shares a buffer.
//! 4. **Assignment**: groups get buffers of their dtype two ways, and the plan keeps the one
//!    with the smaller arena: best fit in order of birth (the smallest free buffer that is large
//!    enough, else the largest free one grown, else a new one), and greedy by size (largest
//!    group first, each into the smallest buffer free over its whole lifetime, else a new one;
//!    a small long-lived value then cannot pin a large buffer that later values need). Buffers
//!    are laid out in one arena at 64-byte aligned offsets, so each value has an offset.
//!
//! Why buffers of one dtype rather than free byte ranges split at will: the CPU backend keeps
//! each buffer as one typed host tensor that steps resize within its capacity, so the plan is
//! exactly what it allocates. A backend with raw device memory could split holes further.

mod assign;
mod report;
pub mod schedule;

use crate::CompileError;
use rlx_ir::{DType, Graph, NodeId, Op};

pub use report::LirStep;

/// Alignment of every buffer's offset in the arena, in bytes.
pub const ALIGN: usize = 64;

/// Options of the memory planner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LirOptions {
    /// Reorder steps to lower peak memory (else keep the graph's order).
    pub schedule: bool,
    /// Reuse dead buffers for later values (else one buffer per value, as unplanned).
    pub reuse: bool,
    /// Let `reshape` and prefix slices alias their operand's buffer.
    pub views: bool,
    /// Let elementwise ops overwrite an operand that dies at them.
    pub in_place: bool,
}

impl Default for LirOptions {
    fn default() -> LirOptions {
        LirOptions { schedule: true, reuse: true, views: true, in_place: true }
    }
}

/// Where a node's value lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Storage {
    /// An input or param: the caller's memory.
    External,
    /// Computed at compile time (constant, iota, rng) or a multi-result node's results: a
    /// buffer of its own for the whole run (outside the reusable buffers).
    Fixed,
    /// Buffer `k` of [`LirModule::buffers`].
    Buffer(usize),
    /// Element of a multi-result node (a `get_tuple_element`): no storage of its own.
    TupleElement,
}

/// How a planned value came to its buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reuse {
    /// Written by its step into its buffer.
    Fresh,
    /// Written over operand `operand` (its index in the node's inputs), which dies here.
    InPlace {
        /// Operand index.
        operand: usize,
    },
    /// Aliases its operand's buffer without a copy (reshape, prefix slice).
    View,
}

/// The plan of one node's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValuePlan {
    /// Where it lives.
    pub storage: Storage,
    /// How it got there.
    pub reuse: Reuse,
    /// Bytes of the value (all results for a multi-result node).
    pub bytes: usize,
    /// Byte offset in the arena (buffers only).
    pub offset: Option<usize>,
    /// Live interval `[def, last]` in schedule positions (buffers only).
    pub live: Option<(usize, usize)>,
}

/// One buffer of the arena.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buffer {
    /// Byte offset in the arena (a multiple of [`ALIGN`]).
    pub offset: usize,
    /// Capacity in bytes (the largest value it holds, rounded up to [`ALIGN`]).
    pub bytes: usize,
    /// Element type of every value it holds.
    pub dtype: DType,
    /// Capacity in elements.
    pub elems: usize,
}

/// A planned graph: the schedule, each value's storage, and memory figures.
#[derive(Clone, Debug, PartialEq)]
pub struct LirModule {
    /// Computation steps (every node but inputs, params, constants and tuple elements), in
    /// execution order.
    pub steps: Vec<LirStep>,
    /// The plan of each node's value, indexed by node id.
    pub values: Vec<ValuePlan>,
    /// The reusable buffers.
    pub buffers: Vec<Buffer>,
    /// Bytes of the reusable buffers (their arena's size).
    pub arena_bytes: usize,
    /// Bytes of [`Storage::Fixed`] values (constants, multi-result nodes).
    pub fixed_bytes: usize,
    /// Largest sum of the bytes of simultaneously live planned values (a lower bound on any
    /// arena for this schedule).
    pub peak_live_bytes: usize,
    /// What one buffer per value costs: every planned value's bytes rounded up to [`ALIGN`]
    /// (as the arena's buffers are), plus [`LirModule::fixed_bytes`]. At least
    /// `arena_bytes + fixed_bytes`.
    pub unplanned_bytes: usize,
}

impl LirModule {
    /// Memory with planning over memory without: `(arena + fixed) / unplanned`.
    pub fn ratio(&self) -> f64 {
        (self.arena_bytes + self.fixed_bytes) as f64 / self.unplanned_bytes.max(1) as f64
    }
    /// The step that computes `node`, if any.
    pub fn step_of(&self, node: NodeId) -> Option<&LirStep> {
        self.steps.iter().find(|s| s.node == node)
    }
    /// Set the kernel name of the step computing `node` (backends fill these in).
    pub fn set_kernel(&mut self, node: NodeId, kernel: &str) {
        if let Some(s) = self.steps.iter_mut().find(|s| s.node == node) {
            s.kernel = kernel.to_string();
        }
    }
}

/// Decides whether a backend can run node `id` in place over operand `operand`.
pub type InPlaceFn<'a> = &'a dyn Fn(&Graph, NodeId, usize) -> bool;

/// The default in-place rule: unary and binary elementwise ops whose operand has the
/// output's dims and dtype.
pub fn elementwise_in_place(g: &Graph, id: NodeId, operand: usize) -> bool {
    let n = g.node(id);
    matches!(n.op, Op::Unary(_) | Op::Binary(_)) && g.shape(n.inputs[operand]) == n.ty()
}

/// Plan `g` (verified, static shapes) with the default in-place rule.
///
/// Errors: [`CompileError::Ir`] when a shape is symbolic.
pub fn plan(g: &Graph, opts: &LirOptions) -> Result<LirModule, CompileError> {
    plan_with(g, opts, &elementwise_in_place)
}

/// Plan `g` asking `can_in_place` which elementwise steps the backend can run in place.
///
/// Errors: [`CompileError::Ir`] when a shape is symbolic.
pub fn plan_with(g: &Graph, opts: &LirOptions, can_in_place: InPlaceFn<'_>) -> Result<LirModule, CompileError> {
    let bytes = value_bytes(g)?;
    let order = if opts.schedule { schedule::min_peak(g, &bytes) } else { schedule::graph_order(g) };
    Ok(assign::assign(g, &order, &bytes, opts, can_in_place))
}

/// Bytes of each node's value(s); errors on a symbolic shape.
fn value_bytes(g: &Graph) -> Result<Vec<usize>, CompileError> {
    g.nodes()
        .iter()
        .enumerate()
        .map(|(i, n)| {
            n.outputs.iter().try_fold(0usize, |acc, s| {
                let numel = s.numel().ok_or_else(|| {
                    rlx_ir::IrError::Invalid(format!(
                        "node %{i} ({}) has symbolic type {s}; specialize the graph before planning memory",
                        n.op.name()
                    ))
                })?;
                Ok(acc + numel * s.dtype.size_bytes())
            })
        })
        .collect()
}

/// True for nodes that are not steps: inputs, params, compile-time values, tuple elements.
pub(crate) fn is_step(op: &Op) -> bool {
    !matches!(
        op,
        Op::Input { .. }
            | Op::Param { .. }
            | Op::Constant(_)
            | Op::Iota { .. }
            | Op::Rng { .. }
            | Op::GetTupleElement { .. }
    )
}

#[cfg(test)]
mod tests;
