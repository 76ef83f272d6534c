//! JVP, transpose and batching rules of the contraction family.
//!
//! Both ops are bilinear (`defbilinear`): the JVP is `op(ta, b) + op(a, tb)`, and each operand
//! has a transpose given the other. The transposes are `jax.lax`'s: `dot_general` contracts
//! the cotangent with the other operand and permutes the result back; the convolution's lhs
//! transpose is a convolution of the cotangent with the flipped, in/out-swapped kernel (input
//! dilation = the forward strides), and its rhs transpose a convolution of the input with the
//! cotangent (window dilation = the forward strides), one per feature group.
//!
//! Batching: a batch dim on both `dot_general` operands becomes a batch dimension, on one a
//! free dimension. For convolutions a batched lhs folds into N, a batched rhs into the output
//! features, and both into feature groups (as JAX does).

use super::super::ad::{AdError, Cx, Tan, not_linear};
use super::{ConvGeneralDilated, DotGeneral};
use crate::{Dim, NodeId, Op, Shape};

/// Tangent of `op(a, b)`: `op(ta, b) + op(a, tb)`.
pub(crate) fn jvp(op: &Op, cx: &mut Cx, x: &[NodeId], t: &[Tan]) -> Result<Tan, AdError> {
    let l = t[0].map(|ta| cx.g.push(op.clone(), &[ta, x[1]]));
    let r = t[1].map(|tb| cx.g.push(op.clone(), &[x[0], tb]));
    Ok(cx.add_tan(l, r))
}

fn remaining(n: usize, a: &[usize], b: &[usize]) -> Vec<usize> {
    (0..n).filter(|i| !a.contains(i) && !b.contains(i)).collect()
}

fn argsort(v: &[usize]) -> Vec<usize> {
    let mut idx: Vec<usize> = (0..v.len()).collect();
    idx.sort_by_key(|&i| v[i]);
    idx
}

/// `jax.lax`'s `_dot_general_transpose_lhs`: the cotangent of `x` (type `xs`) in `dot(x, y)`,
/// or of `y` in `dot(y… )` with `swap_ans` when the roles are swapped.
fn dot_transpose_lhs(cx: &mut Cx, ct: NodeId, xs: &Shape, y: NodeId, dg: &DotGeneral, swap_ans: bool) -> NodeId {
    let (xc, yc, xb, yb) = (&dg.lhs_contracting, &dg.rhs_contracting, &dg.lhs_batch, &dg.rhs_batch);
    let x_kept = remaining(xs.rank(), xc, xb);
    let y_kept = remaining(cx.ty(y).rank(), yc, yb);
    let nb = xb.len();
    let ans_y: Vec<usize> = if swap_ans {
        (nb..nb + y_kept.len()).collect()
    } else {
        (nb + x_kept.len()..nb + x_kept.len() + y_kept.len()).collect()
    };
    let dims = DotGeneral {
        lhs_contracting: ans_y,
        rhs_contracting: y_kept,
        lhs_batch: (0..nb).collect(),
        rhs_batch: yb.clone(),
        preferred_element_type: None,
    };
    let ct = cx.g.convert(ct, xs.dtype);
    let by_y: Vec<usize> = argsort(yc).iter().map(|&i| xc[i]).collect();
    let identity = |p: &[usize]| p.iter().enumerate().all(|(i, &v)| i == v);
    // `dot(y, ct)` gives [batch, y's free dims, ct's free dims]: when that is already `x`'s
    // order (`xᵀ·dY` for a matmul's rhs), take it and skip the transpose `dot(ct, y)` needs.
    let swapped_order: Vec<usize> = xb.iter().chain(&by_y).chain(&x_kept).copied().collect();
    if identity(&argsort(&swapped_order)) {
        let d = DotGeneral {
            lhs_contracting: dims.rhs_contracting.clone(),
            rhs_contracting: dims.lhs_contracting.clone(),
            lhs_batch: dims.rhs_batch.clone(),
            rhs_batch: dims.lhs_batch.clone(),
            preferred_element_type: None,
        };
        return cx.g.push(Op::DotGeneral(d), &[y, ct]);
    }
    let r = cx.g.push(Op::DotGeneral(dims), &[ct, y]);
    let order: Vec<usize> = xb.iter().chain(&x_kept).chain(&by_y).copied().collect();
    let perm = argsort(&order);
    if identity(&perm) { r } else { cx.g.transpose(r, &perm) }
}

fn dilate(n: usize, d: usize) -> i64 {
    if n == 0 { 0 } else { 1 + d as i64 * (n as i64 - 1) }
}

fn stat(op: &Op, s: &Shape, i: usize) -> Result<usize, AdError> {
    s.dims[i].as_static().ok_or_else(|| AdError::unsupported(op, format!("dim {i} of {s} must be static")))
}

/// `[lo, hi]` crop of dim 1 (channels) of `v` to `start..start + n` (negative padding, so the
/// other dims may stay symbolic).
fn channels(cx: &mut Cx, v: NodeId, start: usize, n: usize) -> NodeId {
    let s = cx.ty(v);
    let total = s.dims[1].as_static().unwrap_or(0);
    let (mut lo, mut hi) = (vec![0i64; s.rank()], vec![0i64; s.rank()]);
    lo[1] = -(start as i64);
    hi[1] = -((total - start - n) as i64);
    let z = cx.g.scalar_like(0.0, v);
    cx.g.pad(v, z, &lo, &hi, &[])
}

fn conv_transpose_lhs(
    cx: &mut Cx,
    op: &Op,
    c: &ConvGeneralDilated,
    ct: NodeId,
    xs: &Shape,
    w: NodeId,
) -> Result<NodeId, AdError> {
    let ws = cx.ty(w);
    let ns = ws.rank() - 2;
    let (o, i, g) = (stat(op, &ws, 0)?, stat(op, &ws, 1)?, c.feature_group_count);
    let ks: Vec<usize> = (0..ns).map(|s| stat(op, &ws, s + 2)).collect::<Result<_, _>>()?;
    let cts = cx.ty(ct);
    let mut padding = vec![];
    for (s, &k) in ks.iter().enumerate() {
        let (n_in, n_out) = (stat(op, xs, s + 2)?, stat(op, &cts, s + 2)?);
        let lhs_d = dilate(n_in, c.lhs_dilation[s]);
        let rhs_d = dilate(k, c.rhs_dilation[s]);
        let out_d = dilate(n_out, c.window_strides[s]);
        let before = rhs_d - c.padding[s].0 - 1;
        padding.push((before, lhs_d + rhs_d - 1 - out_d - before));
    }
    // [O, I, k] -> [G, O/G, I, k] -> [G, I, O/G, k] -> [G·I, O/G, k], flipped in space.
    let og = o / g;
    let mut d: Vec<Dim> = vec![Dim::Static(g), Dim::Static(og), Dim::Static(i)];
    d.extend(ks.iter().map(|&k| Dim::Static(k)));
    let w = cx.g.reshape(w, d);
    let mut perm = vec![0, 2, 1];
    perm.extend(3..3 + ns);
    let w = cx.g.transpose(w, &perm);
    let mut d: Vec<Dim> = vec![Dim::Static(g * i), Dim::Static(og)];
    d.extend(ks.iter().map(|&k| Dim::Static(k)));
    let w = cx.g.reshape(w, d);
    let w = cx.g.rev(w, &(2..2 + ns).collect::<Vec<_>>());
    let p = ConvGeneralDilated {
        window_strides: c.lhs_dilation.clone(),
        padding,
        lhs_dilation: c.window_strides.clone(),
        rhs_dilation: c.rhs_dilation.clone(),
        feature_group_count: g,
    };
    let ct = cx.g.convert(ct, xs.dtype);
    Ok(cx.g.push(Op::ConvGeneralDilated(p), &[ct, w]))
}

fn conv_transpose_rhs(
    cx: &mut Cx,
    op: &Op,
    c: &ConvGeneralDilated,
    ct: NodeId,
    x: NodeId,
    ws: &Shape,
) -> Result<NodeId, AdError> {
    let xs = cx.ty(x);
    let cts = cx.ty(ct);
    let ns = ws.rank() - 2;
    let (o, i, g) = (stat(op, ws, 0)?, stat(op, ws, 1)?, c.feature_group_count);
    let mut padding = vec![];
    for s in 0..ns {
        let (n_in, n_out, k) = (stat(op, &xs, s + 2)?, stat(op, &cts, s + 2)?, stat(op, ws, s + 2)?);
        let lhs_d = dilate(n_in, c.lhs_dilation[s]);
        let rhs_d = dilate(k, c.rhs_dilation[s]);
        let out_d = dilate(n_out, c.window_strides[s]);
        let lo = c.padding[s].0;
        padding.push((lo, (out_d - lhs_d) + (rhs_d - lo - 1)));
    }
    let p = ConvGeneralDilated {
        window_strides: c.rhs_dilation.clone(),
        padding,
        lhs_dilation: c.lhs_dilation.clone(),
        rhs_dilation: c.window_strides.clone(),
        feature_group_count: 1,
    };
    let mut swap = vec![1, 0];
    swap.extend(2..2 + ns);
    let ct = cx.g.convert(ct, ws.dtype);
    let og = o / g;
    let mut parts = vec![];
    for k in 0..g {
        let (xg, cg) = if g == 1 { (x, ct) } else { (channels(cx, x, k * i, i), channels(cx, ct, k * og, og)) };
        let lhs = cx.g.transpose(xg, &swap);
        let rhs = cx.g.transpose(cg, &swap);
        let r = cx.g.push(Op::ConvGeneralDilated(p.clone()), &[lhs, rhs]);
        parts.push(cx.g.transpose(r, &swap));
    }
    Ok(if g == 1 { parts[0] } else { cx.g.concatenate(&parts, 0) })
}

/// Cotangents of `dot_general` / `conv_general_dilated` in their one linear operand.
pub(crate) fn transpose(op: &Op, cx: &mut Cx, x: &[NodeId], lin: &[bool], ct: Tan) -> Result<Vec<Tan>, AdError> {
    let ct = ct.expect("checked by the dispatcher");
    if lin[0] == lin[1] {
        return Err(not_linear(op, lin));
    }
    let mut out = vec![None, None];
    match op {
        Op::DotGeneral(dg) if lin[0] => out[0] = Some(dot_transpose_lhs(cx, ct, &cx.ty(x[0]), x[1], dg, false)),
        Op::DotGeneral(dg) => {
            let swapped = DotGeneral {
                lhs_contracting: dg.rhs_contracting.clone(),
                rhs_contracting: dg.lhs_contracting.clone(),
                lhs_batch: dg.rhs_batch.clone(),
                rhs_batch: dg.lhs_batch.clone(),
                preferred_element_type: None,
            };
            out[1] = Some(dot_transpose_lhs(cx, ct, &cx.ty(x[1]), x[0], &swapped, true));
        }
        Op::ConvGeneralDilated(c) if lin[0] => out[0] = Some(conv_transpose_lhs(cx, op, c, ct, &cx.ty(x[0]), x[1])?),
        Op::ConvGeneralDilated(c) => out[1] = Some(conv_transpose_rhs(cx, op, c, ct, x[0], &cx.ty(x[1]))?),
        _ => return Err(not_linear(op, lin)),
    }
    Ok(out)
}

fn shift(v: &[usize]) -> Vec<usize> {
    v.iter().map(|a| a + 1).collect()
}

/// Batching rules of the contraction family.
pub(crate) fn batch(
    op: &Op,
    cx: &mut Cx,
    x: &[NodeId],
    bd: &[Option<usize>],
    size: &Dim,
) -> Result<(NodeId, Option<usize>), AdError> {
    match op {
        Op::DotGeneral(dg) => {
            let shifted = |v: &[usize]| shift(v);
            match (bd[0], bd[1]) {
                (Some(ba), Some(bb)) => {
                    let a = cx.moveaxis(x[0], ba, 0);
                    let b = cx.moveaxis(x[1], bb, 0);
                    let d = DotGeneral {
                        lhs_contracting: shifted(&dg.lhs_contracting),
                        rhs_contracting: shifted(&dg.rhs_contracting),
                        lhs_batch: std::iter::once(0).chain(shifted(&dg.lhs_batch)).collect(),
                        rhs_batch: std::iter::once(0).chain(shifted(&dg.rhs_batch)).collect(),
                        preferred_element_type: dg.preferred_element_type,
                    };
                    Ok((cx.g.push(Op::DotGeneral(d), &[a, b]), Some(0)))
                }
                (Some(ba), None) => {
                    let a = cx.moveaxis(x[0], ba, 0);
                    let d = DotGeneral {
                        lhs_contracting: shifted(&dg.lhs_contracting),
                        lhs_batch: shifted(&dg.lhs_batch),
                        ..dg.clone()
                    };
                    Ok((cx.g.push(Op::DotGeneral(d), &[a, x[1]]), Some(dg.lhs_batch.len())))
                }
                (None, Some(bb)) => {
                    let b = cx.moveaxis(x[1], bb, 0);
                    let d = DotGeneral {
                        rhs_contracting: shifted(&dg.rhs_contracting),
                        rhs_batch: shifted(&dg.rhs_batch),
                        ..dg.clone()
                    };
                    let ra = cx.ty(x[0]).rank();
                    let lhs_free = ra - dg.lhs_batch.len() - dg.lhs_contracting.len();
                    Ok((cx.g.push(Op::DotGeneral(d), &[x[0], b]), Some(dg.lhs_batch.len() + lhs_free)))
                }
                (None, None) => unreachable!(),
            }
        }
        Op::ConvGeneralDilated(c) => conv_batch(op, c, cx, x, bd, size),
        _ => unreachable!(),
    }
}

fn dims_with(first: &[Dim], rest: &[Dim]) -> Vec<Dim> {
    first.iter().chain(rest).cloned().collect()
}

fn conv_batch(
    op: &Op,
    c: &ConvGeneralDilated,
    cx: &mut Cx,
    x: &[NodeId],
    bd: &[Option<usize>],
    size: &Dim,
) -> Result<(NodeId, Option<usize>), AdError> {
    let b = cx.static_size(op, size)?;
    let g = c.feature_group_count;
    match (bd[0], bd[1]) {
        (Some(bl), None) => {
            // [B, N, C, …] -> [B·N, C, …] -> conv -> [B, N, O, …].
            let xb = cx.moveaxis(x[0], bl, 0);
            let s = cx.ty(xb);
            let n = stat(op, &s, 1)?;
            let xm = cx.g.reshape(xb, dims_with(&[Dim::Static(b * n)], &s.dims[2..]));
            let y = cx.g.push(op.clone(), &[xm, x[1]]);
            let ys = cx.ty(y);
            Ok((cx.g.reshape(y, dims_with(&[Dim::Static(b), Dim::Static(n)], &ys.dims[1..])), Some(0)))
        }
        (None, Some(br)) => {
            // Kernel [B, O, I, k] ordered (group, batch, o) so feature groups stay intact.
            let wb = cx.moveaxis(x[1], br, 0);
            let ws = cx.ty(wb);
            let o = stat(op, &ws, 1)?;
            let og = o / g;
            let k = &ws.dims[2..];
            let w5 = cx.g.reshape(wb, dims_with(&[Dim::Static(b), Dim::Static(g), Dim::Static(og)], k));
            let mut perm = vec![1, 0, 2];
            perm.extend(3..3 + k.len());
            let w5 = cx.g.transpose(w5, &perm);
            let wm = cx.g.reshape(w5, dims_with(&[Dim::Static(g * b * og)], k));
            let y = cx.g.push(op.clone(), &[x[0], wm]);
            let ys = cx.ty(y);
            let sp = &ys.dims[2..];
            let y5 =
                cx.g.reshape(y, dims_with(&[ys.dims[0].clone(), Dim::Static(g), Dim::Static(b), Dim::Static(og)], sp));
            let mut perm = vec![0, 2, 1, 3];
            perm.extend(4..4 + sp.len());
            let y5 = cx.g.transpose(y5, &perm);
            Ok((cx.g.reshape(y5, dims_with(&[ys.dims[0].clone(), Dim::Static(b), Dim::Static(o)], sp)), Some(1)))
        }
        _ => {
            // Both: [B, N, C, …] -> [N, B·C, …]; kernel [B·O, I, k] with B·G groups.
            let xb = cx.moveaxis(x[0], bd[0].unwrap_or(0), 1);
            let s = cx.ty(xb);
            let ch = stat(op, &s, 2)?;
            let xm = cx.g.reshape(xb, dims_with(&[s.dims[0].clone(), Dim::Static(b * ch)], &s.dims[3..]));
            let wb = cx.moveaxis(x[1], bd[1].unwrap_or(0), 0);
            let ws = cx.ty(wb);
            let o = stat(op, &ws, 1)?;
            let wm = cx.g.reshape(wb, dims_with(&[Dim::Static(b * o)], &ws.dims[2..]));
            let p = ConvGeneralDilated { feature_group_count: g * b, ..c.clone() };
            let y = cx.g.push(Op::ConvGeneralDilated(p), &[xm, wm]);
            let ys = cx.ty(y);
            Ok((
                cx.g.reshape(y, dims_with(&[ys.dims[0].clone(), Dim::Static(b), Dim::Static(o)], &ys.dims[2..])),
                Some(1),
            ))
        }
    }
}
