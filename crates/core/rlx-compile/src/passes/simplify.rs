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
//! | `reshape(reshape(x))` | `reshape(x)`, or `x` when the shape is `x`'s |
//! | `reshape(x)` to `x`'s shape | `x` |
//! | `convert_element_type(x)` to `x`'s dtype | `x` |
//! | `broadcast_in_dim(x)` to `x`'s shape with identity dimensions | `x` |
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
    let mut rb = Rebuild::new(g);
    let mut changed = 0;
    for n in g.nodes() {
        let ins = rb.inputs(n);
        match rewrite(&mut rb.out, n, &ins) {
            Some(id) => {
                rb.alias(id);
                changed += 1;
            }
            None => {
                rb.copy(n);
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
        Op::Transpose { permutation } => {
            let identity = permutation.iter().enumerate().all(|(i, &d)| i == d);
            if identity { Some(ins[0]) } else { None }
        }
        _ => None,
    };
    if let Some(x) = found
        && same(out, x)
    {
        return Some(x);
    }
    // Chains that collapse into one new node.
    if !matches!(n.op, Op::Transpose { .. } | Op::Reshape { .. }) {
        return None;
    }
    let inner = out.node(ins[0]);
    let x = *inner.inputs.first()?;
    match (&n.op, &inner.op) {
        (Op::Transpose { permutation: q }, Op::Transpose { permutation: p }) => {
            // Output dim i of the outer is inner dim q[i], which is x's dim p[q[i]].
            let composed: Vec<usize> = q.iter().map(|&i| p[i]).collect();
            if composed.iter().enumerate().all(|(i, &d)| i == d) && same(out, x) {
                return Some(x);
            }
            Some(push(out, Op::Transpose { permutation: composed }, x, &ty))
        }
        (Op::Reshape { new_sizes }, Op::Reshape { .. }) => {
            if same(out, x) {
                return Some(x);
            }
            Some(push(out, Op::Reshape { new_sizes: new_sizes.clone() }, x, &ty))
        }
        _ => None,
    }
}

fn push(out: &mut Graph, op: Op, x: NodeId, ty: &rlx_ir::Shape) -> NodeId {
    out.push_node(Node { op, inputs: vec![x], outputs: vec![ty.clone()] })
}
