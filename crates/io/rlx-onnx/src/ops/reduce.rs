//! Reductions, arg-reductions, cumulative ops and the softmax family, with ONNX's axes
//! conventions (attribute before opset 13/18, input after; `keepdims`; `noop_with_empty_axes`).

use super::Ctx;
use crate::error::Result;
use rlx_ir::ops::{CompareOp as C, CumulativeOp, ReduceOp as R, UnaryOp as U};
use rlx_ir::{DType, NodeId, Shape};

/// Reduction axes: the `axes` attribute, else input 1, else every axis (or none with
/// `noop_with_empty_axes`).
fn axes(c: &Ctx, rank: usize) -> Result<Option<Vec<i64>>> {
    let given = match c.aints("axes") {
        Some(a) => Some(a),
        None => c.opt_ints_in(1)?,
    };
    match given {
        Some(a) if !a.is_empty() => Ok(Some(a)),
        _ if c.ai("noop_with_empty_axes", 0) != 0 => Ok(None),
        _ => Ok(Some((0..rank as i64).collect())),
    }
}

pub(super) fn reduce(c: &mut Ctx, kind: &str) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let r = c.rank(x);
    let keep = c.ai("keepdims", 1) != 0;
    let ax = axes(c, r)?;
    let pre = match kind {
        "L1" => c.g.abs(x),
        "L2" | "SumSquare" => c.g.mul(x, x),
        _ => x,
    };
    let Some(ax) = ax else {
        // No reduction: the elementwise part of the op only.
        return Ok(vec![match kind {
            "L2" => c.g.sqrt(pre),
            "LogSum" => c.g.log(pre),
            _ => pre,
        }]);
    };
    let y = match kind {
        "Sum" | "L1" | "SumSquare" => c.g.sum(pre, &ax, keep),
        "Mean" if !c.dtype(x).is_float() => {
            let s = c.g.sum(x, &ax, keep);
            let dims = c.dims(x)?;
            let n: usize =
                ax.iter().map(|&a| c.axis(a, r).map(|a| dims[a])).collect::<Result<Vec<_>>>()?.iter().product();
            let k = c.scalar_like(n as f64, s);
            c.g.div(s, k)
        }
        "Mean" => c.g.mean(x, &ax, keep),
        "Max" => c.g.reduce_max(x, &ax, keep),
        "Min" => c.g.reduce_min(x, &ax, keep),
        "Prod" => c.g.prod(x, &ax, keep),
        "L2" => {
            let s = c.g.sum(pre, &ax, keep);
            c.g.sqrt(s)
        }
        "LogSum" => {
            let s = c.g.sum(x, &ax, keep);
            c.g.log(s)
        }
        "LogSumExp" => {
            // max-shifted for stability; an infinite max (empty set, all -inf) shifts by 0.
            let m = c.g.reduce_max(x, &ax, true);
            let fin = c.g.unary(U::IsFinite, m);
            let zero = c.scalar_like(0.0, m);
            let m = c.g.select(fin, m, zero);
            let d = c.g.sub(x, m);
            let e = c.g.exp(d);
            let s = c.g.sum(e, &ax, keep);
            let l = c.g.log(s);
            let m = if keep { m } else { c.g.squeeze(m, &ax) };
            c.g.add(l, m)
        }
        other => return Err(c.err(format!("no reduction {other}"))),
    };
    Ok(vec![y])
}

/// `ArgMax` / `ArgMin`: int64 indices; `select_last_index` picks the last of equal values.
pub(super) fn arg(c: &mut Ctx, op: R) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let r = c.rank(x);
    let ax = c.axis(c.ai("axis", 0), r)?;
    let last = c.ai("select_last_index", 0) != 0;
    let src = if last { c.g.rev(x, &[ax]) } else { x };
    let mut i =
        if op == R::Max { c.g.argmax(src, ax as i64, DType::I64) } else { c.g.argmin(src, ax as i64, DType::I64) };
    if last {
        let n = c.dims(x)?[ax];
        let k = c.scalar((n as f64) - 1.0, DType::I64);
        i = c.g.sub(k, i);
    }
    if c.ai("keepdims", 1) != 0 {
        i = c.g.expand_dims(i, ax as i64);
    }
    Ok(vec![i])
}

fn cumulative(c: &mut Ctx, op: CumulativeOp, ident: f64) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let r = c.rank(x);
    let a = *c.ints_in(1)?.first().ok_or_else(|| c.err("axis input is empty"))?;
    let ax = c.axis(a, r)?;
    let rev = c.ai("reverse", 0) != 0;
    let mut src = x;
    if c.ai("exclusive", 0) != 0 {
        // Shift by one along the axis, filling with the identity.
        let (mut lo, mut hi) = (vec![0i64; r], vec![0i64; r]);
        if rev {
            (lo[ax], hi[ax]) = (-1, 1);
        } else {
            (lo[ax], hi[ax]) = (1, -1);
        }
        let v = c.scalar_like(ident, x);
        src = c.g.pad(x, v, &lo, &hi, &[]);
    }
    Ok(vec![c.g.cumulative(op, src, ax as i64, rev)])
}

pub(super) fn cumsum(c: &mut Ctx) -> Result<Vec<NodeId>> {
    cumulative(c, CumulativeOp::Sum, 0.0)
}

pub(super) fn cumprod(c: &mut Ctx) -> Result<Vec<NodeId>> {
    cumulative(c, CumulativeOp::Prod, 1.0)
}

/// `Softmax`, `LogSoftmax`, `Hardmax`: before opset 13 the input is coerced to 2-D at `axis`
/// (default 1) and normalized over the flattened tail; from 13 over the one `axis` (default -1).
pub(super) fn softmax(c: &mut Ctx, kind: &str) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let r = c.rank(x);
    if c.opset < 13 {
        let ax = c.axis(c.ai("axis", 1), r.max(1))?;
        let dims = c.dims(x)?;
        let (outer, inner): (usize, usize) = (dims[..ax].iter().product(), dims[ax..].iter().product());
        let flat = c.g.reshape(x, [outer, inner]);
        let y = one_axis(c, kind, flat, 1)?;
        return Ok(vec![c.g.reshape(y, dims)]);
    }
    let ax = c.axis(c.ai("axis", -1), r)?;
    Ok(vec![one_axis(c, kind, x, ax)?])
}

fn one_axis(c: &mut Ctx, kind: &str, x: NodeId, ax: usize) -> Result<NodeId> {
    Ok(match kind {
        "Softmax" => c.g.softmax(x, ax as i64),
        "LogSoftmax" => c.g.log_softmax(x, ax as i64),
        _ => {
            let i = c.g.argmax(x, ax as i64, DType::I64);
            let i = c.g.expand_dims(i, ax as i64);
            let s = c.ty(x);
            let io = c.g.iota(Shape::from_dims(&s.dims, DType::I64), ax);
            let hit = c.g.compare(C::Eq, io, i);
            c.g.convert(hit, s.dtype)
        }
    })
}
