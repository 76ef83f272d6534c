//! JVP, transpose and batching rules of the movement family.
//!
//! Every movement op is linear in its data operands (`deflinear`: the JVP applies the op to
//! the tangents; index operands get none). Transposes: `broadcast_in_dim` sums, `reshape`
//! and `transpose` invert, `slice` pads, `pad` slices (its padding value gets the sum of the
//! padded-in positions), `concatenate` crops, `dynamic_slice` and `dynamic_update_slice`
//! swap, `gather` scatter-adds and `scatter_add` gathers (same index mode, so out-of-bounds
//! slices that read zero receive nothing back).
//!
//! Batching moves the batch dim to the front; a batched start index turns `dynamic_slice` /
//! `dynamic_update_slice` into `gather` / `scatter_add` (negative starts wrapped first, as the
//! dynamic slices do), and batched indices of `gather` /
//! `scatter_add` gain an iota component that selects the batch element (as JAX does).

use super::super::ad::{AdError, Cx, Tan, not_linear};
use super::{GatherDims, GatherMode, ScatterDims};
use crate::{DType, Dim, NodeId, Op, Shape};

/// Tangent of a movement op (linear in its data operands).
pub(crate) fn jvp(op: &Op, cx: &mut Cx, x: &[NodeId], t: &[Tan]) -> Result<Tan, AdError> {
    Ok(match op {
        Op::DynamicSlice { .. } | Op::Gather { .. } => cx.linear(op, x, t, |i| i == 0),
        Op::DynamicUpdateSlice => cx.linear(op, x, t, |i| i <= 1),
        Op::ScatterAdd { .. } => cx.linear(op, x, t, |i| i != 1),
        _ => cx.linear(op, x, t, |_| true),
    })
}

fn static_dims(op: &Op, s: &Shape) -> Result<Vec<usize>, AdError> {
    s.static_dims().ok_or_else(|| AdError::unsupported(op, format!("needs static dims, got {s}")))
}

/// Cotangents of the movement ops.
pub(crate) fn transpose(op: &Op, cx: &mut Cx, x: &[NodeId], lin: &[bool], ct: Tan) -> Result<Vec<Tan>, AdError> {
    let ct = ct.expect("checked by the dispatcher");
    let xs = cx.ty(x[0]);
    let mut out = vec![None; x.len()];
    let zero = cx.g.scalar_like(0.0, ct);
    match op {
        Op::BroadcastInDim { shape, broadcast_dimensions: bd } => {
            let axes: Vec<i64> = (0..shape.len())
                .filter(|d| match bd.iter().position(|b| b == d) {
                    None => true,
                    Some(i) => xs.dims[i] == Dim::Static(1) && shape[*d] != Dim::Static(1),
                })
                .map(|d| d as i64)
                .collect();
            let s = if axes.is_empty() { ct } else { cx.g.sum(ct, &axes, false) };
            out[0] = Some(if cx.ty(s).dims == xs.dims { s } else { cx.g.reshape(s, xs.dims.clone()) });
        }
        Op::Reshape { .. } => out[0] = Some(cx.g.reshape(ct, xs.dims.clone())),
        Op::Transpose { permutation } => {
            let mut inv = vec![0; permutation.len()];
            for (i, &p) in permutation.iter().enumerate() {
                inv[p] = i;
            }
            out[0] = Some(cx.g.transpose(ct, &inv));
        }
        Op::Rev { dimensions } => out[0] = Some(cx.g.rev(ct, dimensions)),
        Op::Slice { start_indices, strides, .. } => {
            let xd = static_dims(op, &xs)?;
            let od = static_dims(op, &cx.ty(ct))?;
            if od.contains(&0) {
                out[0] = Some(cx.zeros(&xs));
            } else {
                let r = xd.len();
                let s = |i: usize| strides.get(i).copied().unwrap_or(1);
                let lo: Vec<i64> = start_indices.iter().map(|&v| v as i64).collect();
                let hi: Vec<i64> =
                    (0..r).map(|i| xd[i] as i64 - (start_indices[i] + (od[i] - 1) * s(i) + 1) as i64).collect();
                let interior: Vec<usize> = (0..r).map(|i| s(i) - 1).collect();
                out[0] = Some(cx.g.pad(ct, zero, &lo, &hi, &interior));
            }
        }
        Op::DynamicSlice { .. } => {
            let z = cx.zeros(&xs);
            out[0] = Some(cx.g.dynamic_update_slice(z, ct, &x[1..]));
        }
        Op::DynamicUpdateSlice => {
            let us = cx.ty(x[1]);
            if lin[0] {
                let z = cx.zeros(&us);
                out[0] = Some(cx.g.dynamic_update_slice(ct, z, &x[2..]));
            }
            if lin[1] {
                let sizes = static_dims(op, &us)?;
                out[1] = Some(cx.g.dynamic_slice(ct, &x[2..], &sizes));
            }
        }
        Op::Concatenate { dimension } => {
            let d = *dimension;
            let total = cx.ty(ct).dims[d].as_static().ok_or_else(|| AdError::unsupported(op, "symbolic concat dim"))?;
            let mut offset = 0usize;
            for (i, &xi) in x.iter().enumerate() {
                let s = cx.ty(xi);
                let n = s.dims[d].as_static().unwrap_or(0);
                if lin[i] {
                    // Crop with negative padding, which keeps symbolic dims elsewhere.
                    let (mut lo, mut hi) = (vec![0i64; s.rank()], vec![0i64; s.rank()]);
                    lo[d] = -(offset as i64);
                    hi[d] = -((total - offset - n) as i64);
                    out[i] = Some(cx.g.pad(ct, zero, &lo, &hi, &[]));
                }
                offset += n;
            }
        }
        Op::Pad { low, high, interior } => {
            let nlo: Vec<i64> = low.iter().map(|v| -v).collect();
            let nhi: Vec<i64> = high.iter().map(|v| -v).collect();
            let un = cx.g.pad(ct, zero, &nlo, &nhi, &[]);
            let tx = if interior.iter().all(|&i| i == 0) {
                un
            } else {
                let lim = static_dims(op, &cx.ty(un))?;
                let st: Vec<usize> = interior.iter().map(|i| i + 1).collect();
                cx.g.slice(un, &vec![0; lim.len()], &lim, &st)
            };
            if lin[1] {
                let all: Vec<i64> = (0..xs.rank() as i64).collect();
                let a = cx.g.sum(ct, &all, false);
                let b = cx.g.sum(tx, &all, false);
                out[1] = Some(cx.g.sub(a, b));
            }
            if lin[0] {
                out[0] = Some(tx);
            }
        }
        Op::Gather { dims, mode, .. } => {
            let sd = ScatterDims {
                update_window_dims: dims.offset_dims.clone(),
                inserted_window_dims: dims.collapsed_slice_dims.clone(),
                scatter_dims_to_operand_dims: dims.start_index_map.clone(),
            };
            let z = cx.zeros(&xs);
            out[0] = Some(cx.g.scatter_add(z, x[1], ct, sd, *mode));
        }
        Op::ScatterAdd { dims, mode } => {
            if lin[0] {
                out[0] = Some(ct);
            }
            if lin[2] {
                let us = cx.ty(x[2]);
                let mut sizes = vec![1usize; xs.rank()];
                let window = (0..xs.rank()).filter(|i| !dims.inserted_window_dims.contains(i));
                for (k, o) in window.enumerate() {
                    sizes[o] = us.dims[dims.update_window_dims[k]]
                        .as_static()
                        .ok_or_else(|| AdError::unsupported(op, "symbolic update window dim"))?;
                }
                let gd = GatherDims {
                    offset_dims: dims.update_window_dims.clone(),
                    collapsed_slice_dims: dims.inserted_window_dims.clone(),
                    start_index_map: dims.scatter_dims_to_operand_dims.clone(),
                };
                out[2] = Some(cx.g.gather(ct, x[1], gd, &sizes, *mode));
            }
        }
        _ => return Err(not_linear(op, lin)),
    }
    Ok(out)
}

fn shift(v: &[usize]) -> Vec<usize> {
    v.iter().map(|a| a + 1).collect()
}

fn front<T: Clone>(first: T, v: &[T]) -> Vec<T> {
    std::iter::once(first).chain(v.iter().cloned()).collect()
}

/// `indices` (batched at `bd` or not) as `[B, …, n + 1]` with an iota over the batch as the
/// first index component.
fn batch_indices(cx: &mut Cx, idx: NodeId, bd: Option<usize>, size: &Dim) -> NodeId {
    let ib = cx.to_front(idx, bd, size);
    let s = cx.ty(ib);
    let mut dims = s.dims.clone();
    *dims.last_mut().expect("indices have rank >= 1") = Dim::Static(1);
    let iota = cx.g.iota(Shape::from_dims(&dims, s.dtype), 0);
    let r = s.rank() as i64;
    cx.g.concatenate(&[iota, ib], r - 1)
}

/// Start scalars as one `[B, 1 + n]` index tensor (iota first), for the gather / scatter form
/// of a dynamic slice with batched starts. A negative start first has its dim size added
/// (`dims`: the unbatched operand's), as the dynamic slices do before clamping.
fn starts_as_indices(
    cx: &mut Cx,
    op: &Op,
    starts: &[NodeId],
    bd: &[Option<usize>],
    size: &Dim,
    dims: &[Dim],
) -> Result<NodeId, AdError> {
    let col = vec![size.clone(), Dim::Static(1)];
    let mut cols = vec![cx.g.iota(Shape::from_dims(&col, DType::I64), 0)];
    for (k, (&s, &b)) in starts.iter().zip(bd).enumerate() {
        let n = dims[k].as_static().ok_or_else(|| AdError::unsupported(op, "batched starts need static dims"))?;
        let v = cx.to_front(s, b, size);
        let v = cx.g.convert(v, DType::I64);
        let zero = cx.g.scalar(0.0, DType::I64);
        let neg = cx.g.compare(super::super::CompareOp::Lt, v, zero);
        let dim = cx.g.scalar(n as f64, DType::I64);
        let wrapped = cx.g.add(v, dim);
        let v = cx.g.select(neg, wrapped, v);
        cols.push(cx.g.reshape(v, col.clone()));
    }
    Ok(cx.g.concatenate(&cols, 1))
}

/// The operand's dims without its batch dim.
fn unbatched_dims(cx: &Cx, x: NodeId, bd: Option<usize>) -> Vec<Dim> {
    let mut d = cx.ty(x).dims;
    if let Some(b) = bd {
        d.remove(b);
    }
    d
}

/// Batching rules of the movement family (batch dim moved to the front).
pub(crate) fn batch(
    op: &Op,
    cx: &mut Cx,
    x: &[NodeId],
    bd: &[Option<usize>],
    size: &Dim,
) -> Result<(NodeId, Option<usize>), AdError> {
    let f = |cx: &mut Cx, i: usize| cx.to_front(x[i], bd[i], size);
    let r = match op {
        Op::BroadcastInDim { shape, broadcast_dimensions } => {
            let xb = f(cx, 0);
            cx.g.broadcast_in_dim(xb, front(size.clone(), shape), &front(0, &shift(broadcast_dimensions)))
        }
        Op::Reshape { new_sizes } => {
            let xb = f(cx, 0);
            cx.g.reshape(xb, front(size.clone(), new_sizes))
        }
        Op::Transpose { permutation } => {
            let xb = f(cx, 0);
            cx.g.transpose(xb, &front(0, &shift(permutation)))
        }
        Op::Rev { dimensions } => {
            let xb = f(cx, 0);
            cx.g.rev(xb, &shift(dimensions))
        }
        Op::Slice { start_indices, limit_indices, strides } => {
            let b = cx.static_size(op, size)?;
            let xb = f(cx, 0);
            let st = if strides.is_empty() { vec![1; start_indices.len()] } else { strides.clone() };
            cx.g.slice(xb, &front(0, start_indices), &front(b, limit_indices), &front(1, &st))
        }
        Op::Concatenate { dimension } => {
            let xs: Vec<NodeId> = (0..x.len()).map(|i| f(cx, i)).collect();
            cx.g.push(Op::Concatenate { dimension: dimension + 1 }, &xs)
        }
        Op::Pad { low, high, interior } => {
            let xb = f(cx, 0);
            let (lo, hi, int) = (front(0, low), front(0, high), front(0, interior));
            match bd[1] {
                None => cx.g.pad(xb, x[1], &lo, &hi, &int),
                Some(vb) => {
                    // A batched padding value: pad with zero, then select the value where a
                    // padded-in mask is true.
                    let z = cx.g.scalar_like(0.0, x[0]);
                    let padded = cx.g.pad(xb, z, &lo, &hi, &int);
                    let s = cx.ty(xb);
                    let f_ = cx.g.scalar(0.0, DType::Bool);
                    let t_ = cx.g.scalar(1.0, DType::Bool);
                    let inside = cx.g.broadcast_in_dim(f_, s.dims.clone(), &[]);
                    let mask = cx.g.pad(inside, t_, &lo, &hi, &int);
                    let v = cx.moveaxis(x[1], vb, 0);
                    let rank = cx.ty(padded).rank();
                    let v = cx.expand(v, 1, rank - 1);
                    cx.g.select(mask, v, padded)
                }
            }
        }
        Op::DynamicSlice { slice_sizes } => {
            let xb = f(cx, 0);
            if bd[1..].iter().all(Option::is_none) {
                let zero = cx.g.scalar(0.0, cx.ty(x.get(1).copied().unwrap_or(xb)).dtype.max_int());
                let b = cx.static_size(op, size)?;
                let starts: Vec<NodeId> = front(zero, &x[1..]);
                cx.g.dynamic_slice(xb, &starts, &front(b, slice_sizes))
            } else {
                let dims = unbatched_dims(cx, x[0], bd[0]);
                let idx = starts_as_indices(cx, op, &x[1..], &bd[1..], size, &dims)?;
                let r = slice_sizes.len();
                let gd = GatherDims {
                    offset_dims: (1..=r).collect(),
                    collapsed_slice_dims: vec![0],
                    start_index_map: (0..=r).collect(),
                };
                cx.g.gather(xb, idx, gd, &front(1, slice_sizes), GatherMode::Clip)
            }
        }
        Op::DynamicUpdateSlice => {
            let (xb, ub) = (f(cx, 0), f(cx, 1));
            if bd[2..].iter().all(Option::is_none) {
                let zero = cx.g.scalar(0.0, cx.ty(x.get(2).copied().unwrap_or(xb)).dtype.max_int());
                let starts: Vec<NodeId> = front(zero, &x[2..]);
                cx.g.dynamic_update_slice(xb, ub, &starts)
            } else {
                if cx.ty(xb).dtype == DType::Bool {
                    return Err(AdError::unsupported(op, "batched start indices with bool operands"));
                }
                let dims = unbatched_dims(cx, x[0], bd[0]);
                let idx = starts_as_indices(cx, op, &x[2..], &bd[2..], size, &dims)?;
                let r = cx.ty(x[0]).rank() - bd[0].is_some() as usize;
                let sd = ScatterDims {
                    update_window_dims: (1..=r).collect(),
                    inserted_window_dims: vec![0],
                    scatter_dims_to_operand_dims: (0..=r).collect(),
                };
                let z = cx.zeros_like(xb);
                let scat = cx.g.scatter_add(z, idx, ub, sd.clone(), GatherMode::Clip);
                let one = cx.g.scalar_like(1.0, ub);
                let ones = cx.broadcast_like(one, ub);
                let cnt = cx.g.scatter_add(z, idx, ones, sd, GatherMode::Clip);
                let zs = cx.g.scalar_like(0.0, xb);
                let hit = cx.g.compare(super::super::CompareOp::Ne, cnt, zs);
                cx.g.select(hit, scat, xb)
            }
        }
        Op::Gather { dims, slice_sizes, mode } => match (bd[0], bd[1]) {
            (Some(_), None) => {
                let b = cx.static_size(op, size)?;
                let xb = f(cx, 0);
                let gd = GatherDims {
                    offset_dims: front(0, &shift(&dims.offset_dims)),
                    collapsed_slice_dims: shift(&dims.collapsed_slice_dims),
                    start_index_map: shift(&dims.start_index_map),
                };
                cx.g.gather(xb, x[1], gd, &front(b, slice_sizes), *mode)
            }
            (None, Some(_)) => {
                let ib = f(cx, 1);
                let gd = GatherDims { offset_dims: shift(&dims.offset_dims), ..dims.clone() };
                cx.g.gather(x[0], ib, gd, slice_sizes, *mode)
            }
            _ => {
                let xb = f(cx, 0);
                let ib = batch_indices(cx, x[1], bd[1], size);
                let gd = GatherDims {
                    offset_dims: shift(&dims.offset_dims),
                    collapsed_slice_dims: front(0, &shift(&dims.collapsed_slice_dims)),
                    start_index_map: front(0, &shift(&dims.start_index_map)),
                };
                cx.g.gather(xb, ib, gd, &front(1, slice_sizes), *mode)
            }
        },
        Op::ScatterAdd { dims, mode } => {
            let (xb, ub) = (f(cx, 0), f(cx, 2));
            let ib = batch_indices(cx, x[1], bd[1], size);
            let sd = ScatterDims {
                update_window_dims: shift(&dims.update_window_dims),
                inserted_window_dims: front(0, &shift(&dims.inserted_window_dims)),
                scatter_dims_to_operand_dims: front(0, &shift(&dims.scatter_dims_to_operand_dims)),
            };
            cx.g.scatter_add(xb, ib, ub, sd, *mode)
        }
        _ => unreachable!("{} is not a batched movement op", op.name()),
    };
    Ok((r, Some(0)))
}

trait IntDtype {
    /// An integer dtype for a new start index next to starts of dtype `self`.
    fn max_int(self) -> DType;
}

impl IntDtype for DType {
    fn max_int(self) -> DType {
        if self.is_int() { self } else { DType::I32 }
    }
}
