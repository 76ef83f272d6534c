//! Index-generating and selection ops: Trilu, EyeLike, OneHot, TopK; and Det.

use super::Ctx;
use crate::error::Result;
use rlx_ir::ops::CompareOp as C;
use rlx_ir::{DType, NodeId, Shape};

pub(super) fn trilu(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let s = c.ty(x);
    let r = s.rank();
    if r < 2 {
        return Err(c.err("input must have rank >= 2"));
    }
    let k = c.opt_ints_in(1)?.and_then(|v| v.first().copied()).unwrap_or(0);
    let i = c.g.iota(Shape::from_dims(&s.dims, DType::I64), r - 2);
    let j = c.g.iota(Shape::from_dims(&s.dims, DType::I64), r - 1);
    let diff = c.g.sub(j, i);
    let kk = c.scalar(k as f64, DType::I64);
    let keep = c.g.compare(if c.ai("upper", 1) != 0 { C::Ge } else { C::Le }, diff, kk);
    let zero = c.scalar_like(0.0, x);
    Ok(vec![c.g.select(keep, x, zero)])
}

pub(super) fn eye_like(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let dims = c.dims(x)?;
    if dims.len() != 2 {
        return Err(c.err("input must be 2-D"));
    }
    let dt = c.adtype("dtype", c.dtype(x))?;
    let i = c.g.iota(Shape::new(&dims, DType::I64), 0);
    let j = c.g.iota(Shape::new(&dims, DType::I64), 1);
    let diff = c.g.sub(j, i);
    let kk = c.scalar(c.ai("k", 0) as f64, DType::I64);
    let hit = c.g.compare(C::Eq, diff, kk);
    Ok(vec![c.g.convert(hit, dt)])
}

pub(super) fn one_hot(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (idx, vals) = (c.x(0)?, c.x(2)?);
    let depth = c.floats_in(1)?.first().copied().ok_or_else(|| c.err("depth is empty"))? as usize;
    let is = c.ty(idx);
    let ax = c.axis(c.ai("axis", -1), is.rank() + 1)?;
    let mut out = is.dims.clone();
    out.insert(ax, rlx_ir::Dim::Static(depth));
    let idx = c.g.convert(idx, DType::I64);
    let zero = c.scalar(0.0, DType::I64);
    let dk = c.scalar(depth as f64, DType::I64);
    let neg = c.g.compare(C::Lt, idx, zero);
    let wrapped = c.g.add(idx, dk);
    let idx = c.g.select(neg, wrapped, idx);
    let idx = c.g.expand_dims(idx, ax as i64);
    let io = c.g.iota(Shape::from_dims(&out, DType::I64), ax);
    let hit = c.g.compare(C::Eq, io, idx);
    let off = c.g.slice(vals, &[0], &[1], &[]);
    let on = c.g.slice(vals, &[1], &[2], &[]);
    let off = c.g.reshape(off, Vec::<usize>::new());
    let on = c.g.reshape(on, Vec::<usize>::new());
    Ok(vec![c.g.select(hit, on, off)])
}

pub(super) fn top_k(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let r = c.rank(x);
    let k = if c.opset < 10 { c.ai("k", 1) } else { c.ints_in(1)?.first().copied().unwrap_or(0) };
    let k = usize::try_from(k).map_err(|_| c.err(format!("k = {k} is negative")))?;
    let ax = c.axis(c.ai("axis", -1), r)?;
    let largest = c.ai("largest", 1) != 0;
    let mut perm: Vec<usize> = (0..r).collect();
    perm.swap(ax, r - 1);
    let xt = if ax == r - 1 { x } else { c.g.transpose(x, &perm) };
    let src = if largest { xt } else { c.g.neg(xt) };
    let (v, i) = c.g.top_k(src, k);
    let v = if largest { v } else { c.g.neg(v) };
    let i = c.g.convert(i, DType::I64);
    let (v, i) = if ax == r - 1 { (v, i) } else { (c.g.transpose(v, &perm), c.g.transpose(i, &perm)) };
    Ok(vec![v, i])
}

/// `Det` (opset 11): determinants of `[*, M, M]` float matrices by cofactor expansion along
/// the first row, for `M ≤ 4` (at most 24 products per matrix).
pub(super) fn det(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let d = c.dims(x)?;
    let r = d.len();
    if r < 2 || d[r - 1] != d[r - 2] || d[r - 1] == 0 || d[r - 1] > 4 {
        return Err(c.err(format!("input {d:?} must be [*, M, M] with 1 <= M <= 4")));
    }
    let m = d[r - 1];
    // Entry (i, j) of every matrix: [*].
    let mut e = vec![vec![x; m]; m];
    for (i, row) in e.iter_mut().enumerate() {
        for (j, slot) in row.iter_mut().enumerate() {
            let s = c.g.slice_in_dim(x, i, i + 1, (r - 2) as i64);
            let s = c.g.slice_in_dim(s, j, j + 1, (r - 1) as i64);
            *slot = c.g.squeeze(s, &[(r - 2) as i64, (r - 1) as i64]);
        }
    }
    Ok(vec![cofactor(c, &e, &(0..m).collect::<Vec<_>>(), 0)])
}

/// Determinant of the minor of `e` on rows `row..` and columns `cols`.
fn cofactor(c: &mut Ctx, e: &[Vec<NodeId>], cols: &[usize], row: usize) -> NodeId {
    if cols.len() == 1 {
        return e[row][cols[0]];
    }
    let mut acc: Option<NodeId> = None;
    for (k, &j) in cols.iter().enumerate() {
        let rest: Vec<usize> = cols.iter().copied().filter(|&cj| cj != j).collect();
        let minor = cofactor(c, e, &rest, row + 1);
        let term = c.g.mul(e[row][j], minor);
        acc = Some(match acc {
            None => term,
            Some(a) if k % 2 == 1 => c.g.sub(a, term),
            Some(a) => c.g.add(a, term),
        });
    }
    acc.expect("at least two columns")
}
