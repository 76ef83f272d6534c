//! MIR: common-subexpression elimination on a structural hash.
//!
//! Two nodes are merged when they have the same op (parameters included), the same operand ids
//! (after earlier merges) and the same result types. The hash is computed from the op's
//! structure (its name, its parameters for the common ops, a constant's dtype, dims and bytes),
//! the operand ids and the result types; candidates with equal hashes are then compared
//! exactly (`Op` equality, constants bit for bit, so `0.0` and `-0.0` or two NaN payloads are
//! told apart). No `Debug` or printed string is ever used as a key.
//!
//! Never merged: inputs and params (two params holding equal values are distinct weights),
//! `rng` (two draws are distinct streams), `custom` ops and anything whose body contains one
//! (a user op may have effects).

use crate::rebuild::{Rebuild, stats};
use crate::{CompileError, PassOptions, PassStats};
use rlx_ir::{Graph, Node, NodeId, Op};
use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

/// Merge the structurally equal nodes of `g`; `changed` counts nodes merged away.
pub fn run(g: &mut Graph, _opts: &PassOptions) -> Result<PassStats, CompileError> {
    let before = g.nodes().len();
    let mut rb = Rebuild::new(g);
    let mut table: HashMap<u64, Vec<NodeId>> = HashMap::new();
    let mut changed = 0;
    for n in g.nodes() {
        if !mergeable(&n.op) {
            rb.copy(n);
            continue;
        }
        let ins = rb.inputs(n);
        let h = structural_hash(&n.op, &ins, n);
        let found = table.get(&h).and_then(|c| {
            c.iter().copied().find(|&k| {
                let m = rb.out.node(k);
                m.inputs == ins && m.outputs == n.outputs && ops_equal(&m.op, &n.op)
            })
        });
        match found {
            Some(k) => {
                rb.alias(k);
                changed += 1;
            }
            None => {
                let id = rb.copy(n);
                table.entry(h).or_default().push(id);
            }
        }
    }
    *g = rb.finish(g);
    Ok(stats(before, g, changed))
}

/// False for ops that must never be merged (see the module docs).
pub fn mergeable(op: &Op) -> bool {
    match op {
        Op::Input { .. } | Op::Param { .. } | Op::Rng { .. } | Op::Custom { .. } => false,
        other => other.subgraphs().iter().all(|b| b.nodes().iter().all(|n| mergeable(&n.op))),
    }
}

/// Hash of (op structure, operand ids, result types). Equal nodes hash equally; unequal nodes
/// may collide, which [`ops_equal`] then resolves.
pub fn structural_hash(op: &Op, inputs: &[NodeId], n: &Node) -> u64 {
    let mut h = DefaultHasher::new();
    std::mem::discriminant(op).hash(&mut h);
    op.name().hash(&mut h);
    match op {
        Op::Constant(t) => {
            t.dtype().hash(&mut h);
            t.shape().hash(&mut h);
            t.to_le_bytes().hash(&mut h);
        }
        Op::Iota { dimension } => dimension.hash(&mut h),
        Op::ConvertElementType(d) => d.hash(&mut h),
        Op::Reduce { axes, .. } => axes.hash(&mut h),
        Op::ArgReduce { axis, index_dtype, .. } => (axis, index_dtype).hash(&mut h),
        Op::BroadcastInDim { shape, broadcast_dimensions } => (shape, broadcast_dimensions).hash(&mut h),
        Op::Reshape { new_sizes } => new_sizes.hash(&mut h),
        Op::Transpose { permutation } => permutation.hash(&mut h),
        Op::Slice { start_indices, limit_indices, strides } => (start_indices, limit_indices, strides).hash(&mut h),
        Op::GetTupleElement { index } => index.hash(&mut h),
        // Other ops hash by name only here; `ops_equal` compares their parameters.
        _ => {}
    }
    inputs.hash(&mut h);
    n.outputs.hash(&mut h);
    h.finish()
}

/// Exact equality of two ops: constants bit for bit (dtype, dims, bytes), everything else by
/// `Op`'s structural equality.
pub fn ops_equal(a: &Op, b: &Op) -> bool {
    match (a, b) {
        (Op::Constant(x), Op::Constant(y)) => {
            x.dtype() == y.dtype() && x.shape() == y.shape() && x.to_le_bytes() == y.to_le_bytes()
        }
        _ => a == b,
    }
}
