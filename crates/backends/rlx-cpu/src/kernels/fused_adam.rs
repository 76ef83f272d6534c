//! One-pass Adam / AdamW update for the fused elementwise kernel.
//!
//! `rlx-optim`'s in-graph update emits, per param, a region whose results are the new first
//! moment `m2 = b1·m + ob1·g`, the new second moment `v2 = b2·v + ob2·(g·g)` and the new param
//! `p2 = p − lr·q` with `q = (m2·ic1) / (√(v2·ic2) + eps)` (Adam) or `q = that + wd·p` (AdamW),
//! where `m, v, g, p` are full tensors and `b1, ob1, b2, ob2, ic1, ic2, eps, lr, wd` scalars.
//! [`match_body`] recognizes exactly that region; [`adam_block`] then computes all three results
//! in one pass over the elements, with the same f32 operations in the same order as the
//! register program (each op rounded once, no FMA), so results are bit-identical to it and to
//! the unfused kernels, without writing and re-reading eleven intermediate blocks.

use rlx_ir::ops::{BinaryOp, UnaryOp};
use rlx_ir::{DType, Graph, NodeId, Op};

/// The leaves of a matched update (body node ids) and its results' positions.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AdamMatch {
    /// Full tensors: `m, v, g, p`.
    pub full: [NodeId; 4],
    /// Scalars: `b1, ob1, b2, ob2, ic1, ic2, eps, lr`.
    pub scalars: [NodeId; 8],
    /// AdamW's decoupled decay scalar.
    pub wd: Option<NodeId>,
    /// Positions of `m2, v2, p2` among the body's outputs.
    pub outs: [usize; 3],
}

/// The f32 scalar operands of one block, in [`AdamMatch::scalars`] order, plus `wd`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AdamScalars {
    pub s: [f32; 8],
    pub wd: Option<f32>,
}

fn binary(g: &Graph, id: NodeId, op: BinaryOp) -> Option<(NodeId, NodeId)> {
    let n = g.node(id);
    (n.op == Op::Binary(op)).then(|| (n.inputs[0], n.inputs[1]))
}

fn is_scalar_leaf(g: &Graph, id: NodeId) -> bool {
    let s = g.shape(id);
    s.dtype == DType::F32 && s.numel() == Some(1) && matches!(&g.node(id).op, Op::Input { .. } | Op::Constant(_))
}

fn is_full_leaf(g: &Graph, id: NodeId, space: &[usize]) -> bool {
    let s = g.shape(id);
    s.dtype == DType::F32 && matches!(g.node(id).op, Op::Input { .. }) && s.static_dims().as_deref() == Some(space)
}

/// `mul(scalar leaf, x)` in either order: `(scalar, x)`.
fn scaled(g: &Graph, id: NodeId) -> Option<(NodeId, NodeId)> {
    let (a, b) = binary(g, id, BinaryOp::Mul)?;
    if is_scalar_leaf(g, a) && !is_scalar_leaf(g, b) {
        Some((a, b))
    } else if is_scalar_leaf(g, b) && !is_scalar_leaf(g, a) {
        Some((b, a))
    } else {
        None
    }
}

/// Recognize the Adam / AdamW update region (see the module docs) in `body`, whose element
/// space is `space`; `None` for anything else, including a region with any further member.
pub(crate) fn match_body(body: &Graph, space: &[usize]) -> Option<AdamMatch> {
    let outs = body.outputs();
    // One element: its "full" operands would classify as scalars; the register program runs it.
    if outs.len() != 3 || space.iter().product::<usize>() < 2 {
        return None;
    }
    let pos = |op: BinaryOp| -> Vec<usize> {
        (0..3).filter(|&k| matches!(body.node(outs[k]).op, Op::Binary(b) if b == op)).collect()
    };
    let (subs, adds) = (pos(BinaryOp::Sub), pos(BinaryOp::Add));
    let ([k_p], 2) = (subs.as_slice(), adds.len()) else { return None };
    // p2 = p − lr·q
    let (p, st) = binary(body, outs[*k_p], BinaryOp::Sub)?;
    let (lr, q) = scaled(body, st)?;
    // q = d / den (+ wd·p)
    let (div, wd) = match binary(body, q, BinaryOp::Add) {
        Some((a, b)) => {
            let (div, decay) = if binary(body, a, BinaryOp::Div).is_some() { (a, b) } else { (b, a) };
            let (wd, p_again) = scaled(body, decay)?;
            (p_again == p).then_some((div, Some((wd, decay))))?
        }
        None => (q, None),
    };
    let (d, den) = binary(body, div, BinaryOp::Div)?;
    let (ic1, m2) = scaled(body, d)?;
    let (s, eps) = binary(body, den, BinaryOp::Add)?;
    let (s, eps) = if is_scalar_leaf(body, eps) { (s, eps) } else { (eps, s) };
    if !is_scalar_leaf(body, eps) || body.node(s).op != Op::Unary(UnaryOp::Sqrt) {
        return None;
    }
    let (ic2, v2) = scaled(body, body.node(s).inputs[0])?;
    // v2 = b2·v + ob2·(g·g); m2 = b1·m + ob1·g
    let (vx, vy) = binary(body, v2, BinaryOp::Add)?;
    let square = |id: NodeId| {
        let (ob, gg) = scaled(body, id)?;
        let (g1, g2) = binary(body, gg, BinaryOp::Mul)?;
        (g1 == g2).then_some((ob, gg, g1))
    };
    let ((ob2, gg, g), sq, bv) = match (square(vx), square(vy)) {
        (Some(t), None) => (t, vx, vy),
        (None, Some(t)) => (t, vy, vx),
        _ => return None,
    };
    let (b2, v) = scaled(body, bv)?;
    let (x, y) = binary(body, m2, BinaryOp::Add)?;
    let (bm, og) = if scaled(body, y).is_some_and(|(_, t)| t == g) { (x, y) } else { (y, x) };
    let (ob1, g_again) = scaled(body, og)?;
    let (b1, m) = scaled(body, bm)?;
    let ([k_m, k_v], true) = ([outs[adds[0]], outs[adds[1]]], g_again == g) else { return None };
    let (k_m, k_v) = match (k_m == m2, k_v == v2, k_m == v2, k_v == m2) {
        (true, true, _, _) => (adds[0], adds[1]),
        (_, _, true, true) => (adds[1], adds[0]),
        _ => return None,
    };
    if ![m, v, g, p].iter().all(|&x| is_full_leaf(body, x, space)) {
        return None;
    }
    // Every computed member is one of these, each read only where the update reads it.
    let mut members = vec![outs[*k_p], st, q, div, d, den, s, body.node(s).inputs[0], v2, bv, sq, gg, m2, bm, og];
    members.extend(wd.map(|(_, decay)| decay));
    let computed = body.nodes().iter().filter(|n| !matches!(n.op, Op::Input { .. } | Op::Constant(_))).count();
    members.sort();
    members.dedup();
    if members.len() != computed {
        return None;
    }
    let reads = |id: NodeId| body.nodes().iter().flat_map(|n| &n.inputs).filter(|&&i| i == id).count();
    let once = members.iter().filter(|&&id| id != outs[*k_p]).all(|&id| reads(id) == 1);
    if !once || reads(outs[*k_p]) != 0 {
        return None;
    }
    Some(AdamMatch {
        full: [m, v, g, p],
        scalars: [b1, ob1, b2, ob2, ic1, ic2, eps, lr],
        wd: wd.map(|(w, _)| w),
        outs: [k_m, k_v, *k_p],
    })
}

/// One pass of the update over a block: reads `m, v, g, p`, writes `m2, v2, p2` (all of one
/// length). Same operations, operand order and rounding as the register program.
// One index over seven slices cut to one length (so the bounds checks vanish and the loop
// vectorizes); a seven-way `zip` would say the same less readably.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
pub(crate) fn adam_block(full: [&[f32]; 4], sc: AdamScalars, om: &mut [f32], ov: &mut [f32], op: &mut [f32]) {
    let [m, v, g, p] = full;
    let [b1, ob1, b2, ob2, ic1, ic2, eps, lr] = sc.s;
    let n = om.len();
    let (m, v, g, p, ov, op) = (&m[..n], &v[..n], &g[..n], &p[..n], &mut ov[..n], &mut op[..n]);
    let step = |i: usize| {
        let gi = g[i];
        let m2 = b1 * m[i] + ob1 * gi;
        let v2 = b2 * v[i] + ob2 * (gi * gi);
        let q = (m2 * ic1) / ((v2 * ic2).sqrt() + eps);
        (m2, v2, q)
    };
    match sc.wd {
        None => {
            for i in 0..n {
                let (m2, v2, q) = step(i);
                om[i] = m2;
                ov[i] = v2;
                op[i] = p[i] - lr * q;
            }
        }
        Some(wd) => {
            for i in 0..n {
                let (m2, v2, q) = step(i);
                om[i] = m2;
                ov[i] = v2;
                op[i] = p[i] - lr * (q + wd * p[i]);
            }
        }
    }
}
