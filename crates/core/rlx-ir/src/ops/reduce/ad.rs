//! JVP, transpose and batching rules of the reduction family.
//!
//! - `reduce_sum`, `cumsum` and `reduce_window` sum are linear (`deflinear`); their transposes
//!   broadcast back, run the cumulative sum the other way, and pad-dilate-window-sum.
//! - `reduce_max`/`reduce_min` (`lax`'s chooser rule): the tangent is averaged over the
//!   positions equal to the result, so ties share it equally.
//! - `reduce_prod`: `∂/∂x_i = ∏_{j≠i} x_j`, built from exclusive cumulative products from both
//!   sides, exact where some `x_j` are zero (no division).
//! - `cumprod`/`cummax`/`cummin`: differentiated through the sequential scan they compute
//!   (`c' = c ⊗ x_i`), so ties in `cummax` split as `max` does at each step.
//! - `reduce_window` max/min (pooling): the window elements are gathered with one strided
//!   slice per window position; the first element (in row-major window order) equal to the
//!   result takes the tangent, as XLA's select-and-scatter and so JAX's pooling gradient
//!   (unlike `reduce_max`, whose ties share it). Needs static dims.
//! - `argmax`/`argmin`, `and`/`or`: zero (integer results).

use super::super::ad::{AdError, Cx, Tan, not_linear};
use super::super::control::ScanOp;
use super::{CumulativeOp, ReduceOp};
use crate::{Dim, Graph, NodeId, Op, Shape};

/// Tangent of `y = op(x)`.
pub(crate) fn jvp(op: &Op, cx: &mut Cx, x: &[NodeId], y: NodeId, t: &[Tan]) -> Result<Tan, AdError> {
    let Some(t) = t[0] else { return Ok(None) };
    let x = x[0];
    Ok(match op {
        Op::Reduce { op: ReduceOp::Sum, .. }
        | Op::Cumulative { op: CumulativeOp::Sum, .. }
        | Op::ReduceWindow { op: ReduceOp::Sum, .. } => Some(cx.g.push(op.clone(), &[t])),
        Op::Reduce { op: ReduceOp::Max | ReduceOp::Min, axes } => {
            let dims = cx.ty(x).dims;
            let kept: Vec<usize> = (0..dims.len()).filter(|i| !axes.contains(i)).collect();
            let yb = cx.g.broadcast_in_dim(y, dims, &kept);
            Some(chooser(cx, x, yb, t, |g, v| g.push(Op::Reduce { op: ReduceOp::Sum, axes: axes.clone() }, &[v])))
        }
        Op::Reduce { op: ReduceOp::Prod, axes } => Some(prod_jvp(cx, x, axes, t)?),
        Op::Reduce { .. } | Op::ArgReduce { .. } => None,
        Op::Cumulative { op: c, axis, reverse } => Some(cumulative_jvp(op, *c, *axis, *reverse, cx, x, t)?),
        Op::ReduceWindow { .. } => Some(window_chooser_jvp(op, cx, x, y, t)?),
        _ => unreachable!("{} is not a reduction", op.name()),
    })
}

/// `lax`'s chooser JVP: `sum(t · [x == y]) / sum([x == y])` with `reduce` the summation and
/// `yb` the result broadcast to `x`'s shape.
fn chooser(cx: &mut Cx, x: NodeId, yb: NodeId, t: NodeId, reduce: impl Fn(&mut Graph, NodeId) -> NodeId) -> NodeId {
    let d = cx.ty(x).dtype;
    let hit = cx.g.compare(super::super::CompareOp::Eq, x, yb);
    let ind = cx.g.convert(hit, d);
    let cnt = reduce(cx.g, ind);
    let ti = cx.g.mul(t, ind);
    let s = reduce(cx.g, ti);
    cx.g.div(s, cnt)
}

/// `x` with the reduced `axes` moved last and flattened into one: `[kept…, n]`.
fn flatten_reduced(cx: &mut Cx, op: &Op, x: NodeId, axes: &[usize]) -> Result<NodeId, AdError> {
    let s = cx.ty(x);
    let kept: Vec<usize> = (0..s.rank()).filter(|i| !axes.contains(i)).collect();
    let perm: Vec<usize> = kept.iter().chain(axes).copied().collect();
    let xt = if perm.iter().enumerate().all(|(i, &p)| i == p) { x } else { cx.g.transpose(x, &perm) };
    let mut n = 1;
    for &a in axes {
        n *= s.dims[a].as_static().ok_or_else(|| AdError::unsupported(op, "the reduced dims must be static"))?;
    }
    let mut dims: Vec<Dim> = kept.iter().map(|&i| s.dims[i].clone()).collect();
    dims.push(Dim::Static(n));
    Ok(cx.g.reshape(xt, dims))
}

/// Shift `v` by one along its last dim, filling with `fill` (toward the end, or toward the
/// start when `back`).
fn shift_last(g: &mut Graph, v: NodeId, fill: NodeId, back: bool) -> NodeId {
    let r = g.shape(v).rank();
    let (mut lo, mut hi) = (vec![0i64; r], vec![0i64; r]);
    if back {
        (lo[r - 1], hi[r - 1]) = (-1, 1);
    } else {
        (lo[r - 1], hi[r - 1]) = (1, -1);
    }
    g.pad(v, fill, &lo, &hi, &[])
}

fn prod_jvp(cx: &mut Cx, x: NodeId, axes: &[usize], t: NodeId) -> Result<NodeId, AdError> {
    let op = Op::Reduce { op: ReduceOp::Prod, axes: axes.to_vec() };
    let xf = flatten_reduced(cx, &op, x, axes)?;
    let tf = flatten_reduced(cx, &op, t, axes)?;
    let last = cx.ty(xf).rank() as i64 - 1;
    let one = cx.g.scalar_like(1.0, x);
    let left = cx.g.cumulative(CumulativeOp::Prod, xf, last, false);
    let left = shift_last(cx.g, left, one, false);
    let right = cx.g.cumulative(CumulativeOp::Prod, xf, last, true);
    let right = shift_last(cx.g, right, one, true);
    let others = cx.g.mul(left, right);
    let p = cx.g.mul(tf, others);
    Ok(cx.g.sum(p, &[last], false))
}

/// The sequential scan computing a cumulative op along dim 0 of `xt` (`[n, rest…]`).
fn cumulative_scan(cx: &mut Cx, c: CumulativeOp, xt: NodeId, reverse: bool, op: &Op) -> Result<Op, AdError> {
    let s = cx.ty(xt);
    let n = s.dims[0].as_static().ok_or_else(|| AdError::unsupported(op, "the scanned dim must be static"))?;
    let rest = Shape::from_dims(&s.dims[1..], s.dtype);
    let mut body = Graph::new(c.name());
    let carry = body.input("carry", rest.clone());
    let xi = body.input("x", rest);
    let nc = match c {
        CumulativeOp::Sum => body.add(carry, xi),
        CumulativeOp::Prod => body.mul(carry, xi),
        CumulativeOp::Max => body.max(carry, xi),
        CumulativeOp::Min => body.min(carry, xi),
    };
    body.set_outputs(vec![nc, nc]);
    Ok(Op::Scan(ScanOp { body: Box::new(body), num_consts: 0, num_carry: 1, length: n, reverse }))
}

fn cumulative_jvp(
    op: &Op,
    c: CumulativeOp,
    axis: usize,
    reverse: bool,
    cx: &mut Cx,
    x: NodeId,
    t: NodeId,
) -> Result<NodeId, AdError> {
    let xt = cx.moveaxis(x, axis, 0);
    let tt = cx.moveaxis(t, axis, 0);
    let scan = cumulative_scan(cx, c, xt, reverse, op)?;
    let s = cx.ty(xt);
    let init_v = match c.monoid() {
        ReduceOp::Max => f64::NEG_INFINITY,
        ReduceOp::Min => f64::INFINITY,
        r => r.identity_f64(),
    };
    let init = cx.g.scalar(init_v, s.dtype);
    let init = cx.g.broadcast_in_dim(init, s.dims[1..].to_vec(), &[]);
    let ys = cx.g.push_multi(scan.clone(), &[init, xt], None);
    let tans = scan.jvp(cx, &[init, xt], &ys, &[None, Some(tt)])?.tangents;
    let ty = tans[1].unwrap_or_else(|| cx.zeros_like(xt));
    Ok(cx.moveaxis(ty, 0, axis))
}

/// `reduce_window` max/min: stack the `K` window elements of every output position as a new
/// leading dim (one strided slice each), then apply the chooser rule over it.
fn window_chooser_jvp(op: &Op, cx: &mut Cx, x: NodeId, y: NodeId, t: NodeId) -> Result<NodeId, AdError> {
    let Op::ReduceWindow { op: r, window_dimensions: wd, window_strides: ws, padding, base_dilation, window_dilation } =
        op
    else {
        unreachable!()
    };
    let xs = cx.ty(x);
    let xd = xs.static_dims().ok_or_else(|| AdError::unsupported(op, "max/min pooling gradients need static dims"))?;
    let od = cx.ty(y).static_dims().ok_or_else(|| AdError::unsupported(op, "static dims needed"))?;
    let ident = if *r == ReduceOp::Max { f64::NEG_INFINITY } else { f64::INFINITY };
    let rank = xd.len();
    let lo: Vec<i64> = padding.iter().map(|p| p.0).collect();
    let hi: Vec<i64> = padding.iter().map(|p| p.1).collect();
    let interior: Vec<usize> = base_dilation.iter().map(|b| b - 1).collect();
    let plain = lo.iter().chain(&hi).all(|&p| p == 0) && interior.iter().all(|&i| i == 0);
    let padded = |cx: &mut Cx, v: NodeId, fill: f64| {
        if plain {
            return v;
        }
        let f = cx.g.scalar(fill, xs.dtype);
        cx.g.pad(v, f, &lo, &hi, &interior)
    };
    let (xp, tp) = (padded(cx, x, ident), padded(cx, t, 0.0));
    let mut one = od.clone();
    one.insert(0, 1);
    let (mut px, mut pt) = (vec![], vec![]);
    let mut offsets = vec![];
    super::for_each_index(wd, |wi| offsets.push(wi.to_vec()));
    for w in offsets {
        let start: Vec<usize> = (0..rank).map(|i| w[i] * window_dilation[i]).collect();
        let limit: Vec<usize> =
            (0..rank).map(|i| if od[i] == 0 { start[i] } else { start[i] + (od[i] - 1) * ws[i] + 1 }).collect();
        for (src, dst) in [(xp, &mut px), (tp, &mut pt)] {
            let s = cx.g.slice(src, &start, &limit, ws);
            dst.push(cx.g.reshape(s, one.clone()));
        }
    }
    let (px, pt) = (cx.g.concatenate(&px, 0), cx.g.concatenate(&pt, 0));
    let mut full = od.clone();
    full.insert(0, px_len(cx, px));
    let bdims: Vec<usize> = (1..=rank).collect();
    let yb = cx.g.broadcast_in_dim(y, full, &bdims);
    // The first window element equal to the result takes the whole tangent (XLA's
    // select-and-scatter order, as JAX's max pooling gradient).
    let d = xs.dtype;
    let hit = cx.g.compare(super::super::CompareOp::Eq, px, yb);
    let hf = cx.g.convert(hit, d);
    let seen = cx.g.cumsum(hf, 0, false);
    let one = cx.g.scalar(1.0, d);
    let first = cx.g.compare(super::super::CompareOp::Eq, seen, one);
    let first = cx.g.push(Op::Binary(super::super::BinaryOp::And), &[first, hit]);
    let ind = cx.g.convert(first, d);
    let p = cx.g.mul(pt, ind);
    Ok(cx.g.sum(p, &[0], false))
}

fn px_len(cx: &Cx, p: NodeId) -> usize {
    cx.ty(p).dims[0].as_static().unwrap_or(0)
}

/// Cotangents of `reduce_sum`, `cumsum` and `reduce_window` sum.
pub(crate) fn transpose(op: &Op, cx: &mut Cx, x: &[NodeId], lin: &[bool], ct: Tan) -> Result<Vec<Tan>, AdError> {
    let ct = ct.expect("checked by the dispatcher");
    let xs = cx.ty(x[0]);
    let r = match op {
        Op::Reduce { op: ReduceOp::Sum, axes } => {
            let kept: Vec<usize> = (0..xs.rank()).filter(|i| !axes.contains(i)).collect();
            cx.g.broadcast_in_dim(ct, xs.dims.clone(), &kept)
        }
        Op::Cumulative { op: CumulativeOp::Sum, axis, reverse } => {
            cx.g.push(Op::Cumulative { op: CumulativeOp::Sum, axis: *axis, reverse: !reverse }, &[ct])
        }
        Op::ReduceWindow {
            op: ReduceOp::Sum,
            window_dimensions,
            window_strides,
            padding,
            base_dilation,
            window_dilation,
        } => {
            let xd =
                xs.static_dims().ok_or_else(|| AdError::unsupported(op, "window sum transpose needs static dims"))?;
            let od = cx.ty(ct).static_dims().unwrap_or_default();
            let rank = xd.len();
            // ct_xpad = window_sum(pad(dilate(ct, stride), K - 1, P - span)), then undo the
            // operand's padding and take every base_dilation-th element.
            let (mut lo, mut hi, mut interior) = (vec![0i64; rank], vec![0i64; rank], vec![0usize; rank]);
            for i in 0..rank {
                let k = (window_dimensions[i] as i64 - 1) * window_dilation[i] as i64 + 1;
                let p = if xd[i] == 0 { 0 } else { (xd[i] as i64 - 1) * base_dilation[i] as i64 + 1 }
                    + padding[i].0
                    + padding[i].1;
                let span = if od[i] == 0 { 0 } else { (od[i] as i64 - 1) * window_strides[i] as i64 + 1 };
                (lo[i], hi[i], interior[i]) = (k - 1, p - span, window_strides[i] - 1);
            }
            let zero = cx.g.scalar_like(0.0, ct);
            let z = cx.g.pad(ct, zero, &lo, &hi, &interior);
            let ones = vec![1; rank];
            let s = cx.g.reduce_window_dilated(
                z,
                ReduceOp::Sum,
                window_dimensions,
                &ones,
                &vec![(0, 0); rank],
                &ones,
                window_dilation,
            );
            let (nlo, nhi): (Vec<i64>, Vec<i64>) = padding.iter().map(|p| (-p.0, -p.1)).unzip();
            let s = cx.g.pad(s, zero, &nlo, &nhi, &[]);
            if base_dilation.iter().all(|&b| b == 1) {
                s
            } else {
                let lim: Vec<usize> = cx.ty(s).static_dims().unwrap_or_default();
                cx.g.slice(s, &vec![0; rank], &lim, base_dilation)
            }
        }
        _ => return Err(not_linear(op, lin)),
    };
    Ok(vec![Some(r)])
}

/// `defreducer`: the batch dim moves to the front and the reduced axes shift by one.
pub(crate) fn batch(
    op: &Op,
    cx: &mut Cx,
    x: &[NodeId],
    bd: &[Option<usize>],
) -> Result<(NodeId, Option<usize>), AdError> {
    let xb = cx.moveaxis(x[0], bd[0].expect("batched"), 0);
    let op = match op.clone() {
        Op::Reduce { op, axes } => Op::Reduce { op, axes: axes.iter().map(|a| a + 1).collect() },
        Op::ArgReduce { op, axis, index_dtype } => Op::ArgReduce { op, axis: axis + 1, index_dtype },
        Op::Cumulative { op, axis, reverse } => Op::Cumulative { op, axis: axis + 1, reverse },
        Op::ReduceWindow { op, window_dimensions, window_strides, padding, base_dilation, window_dilation } => {
            let front = |v: &[usize]| std::iter::once(1).chain(v.iter().copied()).collect::<Vec<_>>();
            Op::ReduceWindow {
                op,
                window_dimensions: front(&window_dimensions),
                window_strides: front(&window_strides),
                padding: std::iter::once((0, 0)).chain(padding).collect(),
                base_dilation: front(&base_dilation),
                window_dilation: front(&window_dilation),
            }
        }
        _ => unreachable!(),
    };
    Ok((cx.g.push(op, &[xb]), Some(0)))
}
