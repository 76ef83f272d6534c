//! MIR: algebraic simplification. Rewrites (each only when the result has exactly the node's
//! type, so a broadcasting operand never shrinks a result):
//!
//! | pattern | becomes |
//! |---|---|
//! | `x * 1`, `1 * x`, `x / 1` | `x` |
//! | `x + 0`, `0 + x` | `x` (floats: `-0.0 + 0.0` is `+0.0` in IEEE but `-0.0` after the rewrite; XLA's simplifier makes the same trade) |
//! | `x - 0` | `x` (floats: only for `+0.0`, which is exact) |
//! | `neg(neg(x))` | `x` |
//! | `transpose(transpose(x, p), q)` | `transpose(x, p∘q)`, or `x` when that is the identity |
//! | `transpose(x, identity)` | `x` |
//! | `transpose(x, p)` moving only dims of size 1 | `reshape(x)` (the same row-major order: a view, not a copy; XLA's "transpose is a bitcast") |
//! | `reshape(reshape(x))` | `reshape(x)`, or `x` when the shape is `x`'s |
//! | `reshape(x)` to `x`'s shape | `x` |
//! | `convert_element_type(x)` to `x`'s dtype | `x` |
//! | `broadcast_in_dim(x)` to `x`'s shape with identity dimensions | `x` |
//! | `gather(f(a, s), i)` of whole rows (`take` along axis 0), `f` unary / binary / convert read by the gather alone | `f(gather(a, i), gather(s, i))` (operands with one row or fewer dims are not gathered) |
//!
//! The last sinks a row lookup below the elementwise ops that produce the table, so an
//! embedding table dequantized per row (ONNX `DequantizeLinear`: `convert(q) * scale[N, 1]`)
//! is dequantized for the looked-up rows only, not whole on every run (int8 MiniLM: 30522 x
//! 384 floats, 47 MB written per run). It adds a gather per table operand, so the node count
//! may grow by the operands' number while the work shrinks to the rows read.
//!
//! "1" and "0" are constants whose every element is that value (any shape, any dtype).
//! Operands are looked up in the rewritten graph, so chains collapse in one pass. A rewritten
//! node that is also a graph output or has several consumers is replaced everywhere by the
//! same value, so outputs stay correct.

use crate::rebuild::{Rebuild, stats};
use crate::{CompileError, PassOptions, PassStats};
use rlx_ir::ops::{BinaryOp, UnaryOp};
use rlx_ir::{Graph, Node, NodeId, Op};

/// Apply the rewrites above to `g`; `changed` counts rewritten nodes.
pub fn run(g: &mut Graph, _opts: &PassOptions) -> Result<PassStats, CompileError> {
    let before = g.nodes().len();
    // Readers of each node, for the gather rule.
    let uses = crate::rebuild::reader_counts(g);
    let mut rb = Rebuild::new(g);
    // New ids of plain copies of nodes with one reader (what the gather rule may sink below).
    let mut single: std::collections::HashSet<NodeId> = Default::default();
    let mut changed = 0;
    for (i, n) in g.nodes().iter().enumerate() {
        let ins = rb.inputs(n);
        let found = rewrite(&mut rb.out, n, &ins).or_else(|| sink_gather(&mut rb.out, n, &ins, &single));
        match found {
            Some(id) => {
                rb.alias(id);
                changed += 1;
            }
            None => {
                let id = rb.copy(n);
                if uses[i] == 1 {
                    single.insert(id);
                }
            }
        }
    }
    *g = rb.finish(g);
    Ok(stats(before, g, changed))
}

/// What a constant operand holds in every element, if it is a constant.
#[derive(Clone, Copy, PartialEq)]
enum Splat {
    One,
    PosZero,
    AnyZero,
}

fn splat(g: &Graph, id: NodeId) -> Option<Splat> {
    let Op::Constant(t) = &g.node(id).op else { return None };
    let v = t.to_f64_vec();
    let all = |f: &dyn Fn(f64) -> bool| !v.is_empty() && v.iter().all(|&x| f(x));
    if all(&|x| x == 1.0) {
        Some(Splat::One)
    } else if all(&|x| x == 0.0 && x.is_sign_positive()) {
        Some(Splat::PosZero)
    } else if all(&|x| x == 0.0) {
        Some(Splat::AnyZero)
    } else {
        None
    }
}

/// The replacement of `n` (operands `ins`, already in `out`), if a rule applies. New nodes it
/// needs are pushed to `out`.
fn rewrite(out: &mut Graph, n: &Node, ins: &[NodeId]) -> Option<NodeId> {
    if n.is_tuple() {
        return None;
    }
    let ty = n.ty().clone();
    // `x` may replace the node only when it has the node's exact type.
    let same = |out: &Graph, x: NodeId| !out.node(x).is_tuple() && out.shape(x) == &ty;
    let zero = |s: Option<Splat>| matches!(s, Some(Splat::PosZero | Splat::AnyZero));
    let found = match &n.op {
        Op::Binary(b) => {
            let (l, r) = (ins[0], ins[1]);
            let (sl, sr) = (splat(out, l), splat(out, r));
            match b {
                BinaryOp::Mul if sr == Some(Splat::One) => Some(l),
                BinaryOp::Mul if sl == Some(Splat::One) => Some(r),
                BinaryOp::Div if sr == Some(Splat::One) => Some(l),
                BinaryOp::Add if zero(sr) => Some(l),
                BinaryOp::Add if zero(sl) => Some(r),
                BinaryOp::Sub if sr == Some(Splat::PosZero) => Some(l),
                _ => None,
            }
        }
        Op::Unary(UnaryOp::Neg) => match &out.node(ins[0]).op {
            Op::Unary(UnaryOp::Neg) => Some(out.node(ins[0]).inputs[0]),
            _ => None,
        },
        Op::ConvertElementType(_) | Op::Reshape { .. } => Some(ins[0]),
        Op::BroadcastInDim { broadcast_dimensions, .. } => {
            let identity = broadcast_dimensions.iter().enumerate().all(|(i, &d)| i == d);
            identity.then_some(ins[0])
        }
        Op::Transpose { permutation } => return transpose(out, ins[0], permutation, &ty),
        _ => None,
    };
    if let Some(x) = found
        && same(out, x)
    {
        return Some(x);
    }
    // A reshape chain collapses into one reshape.
    if !matches!(n.op, Op::Reshape { .. }) {
        return None;
    }
    let inner = out.node(ins[0]);
    let x = *inner.inputs.first()?;
    match (&n.op, &inner.op) {
        (Op::Reshape { new_sizes }, Op::Reshape { .. }) => {
            if same(out, x) {
                return Some(x);
            }
            Some(push(out, Op::Reshape { new_sizes: new_sizes.clone() }, x, &ty))
        }
        _ => None,
    }
}

/// The replacement of `transpose(a, q)` of type `ty`, if any: over a transpose `a =
/// transpose(x, p)` the composed `transpose(x, p∘q)`; then `x` itself when that is the
/// identity, or `reshape(x)` when the permutation moves only static size-1 dims (no element
/// moves: XLA's transpose-is-bitcast; one-token decode steps transpose `[B, 1, H, D]` to
/// `[B, H, 1, D]` four times a layer). `None` when `transpose(a, q)` stays as it is.
fn transpose(out: &mut Graph, a: NodeId, q: &[usize], ty: &rlx_ir::Shape) -> Option<NodeId> {
    let (x, perm) = match &out.node(a).op {
        // Output dim i of the outer is inner dim q[i], which is x's dim p[q[i]].
        Op::Transpose { permutation: p } => (out.node(a).inputs[0], q.iter().map(|&i| p[i]).collect()),
        _ => (a, q.to_vec()),
    };
    let dims = &out.shape(x).dims;
    let kept: Vec<usize> = perm.iter().copied().filter(|&d| dims[d] != rlx_ir::Dim::Static(1)).collect();
    if kept.windows(2).all(|w| w[0] < w[1]) {
        if perm.iter().enumerate().all(|(i, &d)| i == d) {
            return Some(x);
        }
        return Some(push(out, Op::Reshape { new_sizes: ty.dims.clone() }, x, ty));
    }
    (x != a).then(|| push(out, Op::Transpose { permutation: perm }, x, ty))
}

/// The gather rule: `n` is a gather of whole rows of an elementwise value read only by it
/// (`single`: ids of such values in `out`); returns the elementwise ops rebuilt over gathered
/// operands, when that has `n`'s exact type.
fn sink_gather(
    out: &mut Graph,
    n: &Node,
    ins: &[NodeId],
    single: &std::collections::HashSet<NodeId>,
) -> Option<NodeId> {
    let Op::Gather { dims, slice_sizes, mode } = &n.op else { return None };
    let table = out.shape(ins[0]).static_dims()?;
    let r = table.len();
    let out_rank = n.ty().rank();
    // Whole rows: index axis 0 only, collapse it, keep every other dim whole, at the end.
    let rows = r >= 1
        && dims.collapsed_slice_dims == [0]
        && dims.start_index_map == [0]
        && slice_sizes[0] == 1
        && slice_sizes[1..] == table[1..]
        && out_rank + 1 >= r
        && dims.offset_dims == ((out_rank + 1 - r)..out_rank).collect::<Vec<_>>();
    if !rows || table[0] < 2 || !sinkable(out, ins[0], single) {
        return None;
    }
    let id = gathered(out, ins[0], ins[1], table[0], dims, *mode, single);
    (out.shape(id) == n.ty()).then_some(id)
}

/// True when `x` is a unary / binary / convert node read only by the gather being sunk.
fn sinkable(out: &Graph, x: NodeId, single: &std::collections::HashSet<NodeId>) -> bool {
    let n = out.node(x);
    single.contains(&x)
        && !n.is_tuple()
        && matches!(n.op, Op::Unary(_) | Op::Binary(_) | Op::ConvertElementType(_))
        && n.inputs.iter().all(|&i| out.shape(i).static_dims().is_some())
}

/// `gather(x, idx)` of whole rows (`x` has `rows` rows), sunk below `x`'s elementwise ops.
fn gathered(
    out: &mut Graph,
    x: NodeId,
    idx: NodeId,
    rows: usize,
    dims: &rlx_ir::ops::GatherDims,
    mode: rlx_ir::ops::GatherMode,
    single: &std::collections::HashSet<NodeId>,
) -> NodeId {
    let xd = out.shape(x).static_dims().unwrap_or_default();
    let r = out.shape(x).rank();
    // An operand with the table's rank and its rows is gathered; one with fewer dims or a
    // single row broadcasts over the rows and stays as is.
    let spans_rows =
        |out: &Graph, v: NodeId| out.shape(v).rank() == r && out.shape(v).static_dims().unwrap()[0] == rows;
    if rows > 1 && xd.first() == Some(&rows) && sinkable(out, x, single) {
        let n = out.node(x).clone();
        let ins: Vec<NodeId> = n
            .inputs
            .iter()
            .map(|&v| if spans_rows(out, v) { gathered(out, v, idx, rows, dims, mode, single) } else { v })
            .collect();
        return out.push(n.op.clone(), &ins);
    }
    let mut sizes = xd;
    if let Some(s) = sizes.first_mut() {
        *s = 1;
    }
    out.push(Op::Gather { dims: dims.clone(), slice_sizes: sizes, mode }, &[x, idx])
}

fn push(out: &mut Graph, op: Op, x: NodeId, ty: &rlx_ir::Shape) -> NodeId {
    out.push_node(Node { op, inputs: vec![x], outputs: vec![ty.clone()] })
}
