//! Movement family: `broadcast_in_dim`, `reshape`, `transpose`, `rev`, `slice`,
//! `dynamic_slice`, `dynamic_update_slice`, `concatenate`, `pad`, `iota`, `gather`,
//! `scatter_add`.
//!
//! Semantics follow `jax.lax` (XLA's operation semantics):
//! - `broadcast_in_dim`: `broadcast_dimensions` strictly increasing; each operand dim is 1 or
//!   equals its target dim.
//! - `reshape`: row-major, no `-1` inference. With symbolic dims the operand and the new sizes
//!   must hold the same multiset of symbols and the same product of static dims: `[?, 6]` to
//!   `[?, 2, 3]` or `[6, ?]` is accepted, `[?]` to `[2, ?]` is not (no symbolic arithmetic).
//! - `slice`: static bounds, `start <= limit <= dim`, strides ≥ 1.
//! - `dynamic_slice` / `dynamic_update_slice`: one integer scalar start per dim (any integer
//!   dtype); a negative start first has the dim size added (as `jax.lax` does), then starts are
//!   clamped to `[0, dim - size]` so the window always fits, as in XLA.
//! - `pad`: negative `low`/`high` crop; `interior` inserts that many padding elements between
//!   neighbours; every resulting dim must be ≥ 0.
//! - `gather` / `scatter_add`: XLA `GatherDimensionNumbers` / `ScatterDimensionNumbers` with
//!   the index vector in the last dim of `indices` (see [`Graph::gather`](crate::Graph::gather) for the exact
//!   rules). `GatherMode::Clip` clamps each start index so the whole slice is in bounds (XLA's
//!   native behaviour, `GatherScatterMode.CLIP`). `GatherMode::FillOrDrop`: a gather slice whose
//!   start is out of bounds reads as **zero** (deviation: `jax.lax.gather`'s default fill is NaN
//!   for floats and the type's minimum for signed ints); a scatter window whose start is out of
//!   bounds is dropped whole (XLA / `FILL_OR_DROP`). `GatherMode::Checked` (not in `jax.lax`):
//!   an out-of-bounds start index is an evaluation error naming the index, for front ends whose
//!   semantics reject it; `GatherMode::CheckedWrap` first counts a negative start from the end
//!   once (ONNX `Gather` / `GatherElements` / `GatherND`, which fail as ONNX Runtime does).
//!
//! Symbolic dims are accepted wherever the rule can still be stated; checks that need a size
//! are repeated when the graph is specialized (`verify::specialize` re-runs every rule).

pub(crate) mod ad;
mod gather;
#[cfg(test)]
mod tests;

use super::{Op, arity};
use crate::shape::strides_of;
use crate::{DType, Dim, Elem, Graph, IntoDims, IrError, Node, NodeId, Shape, Tensor, normalize_axis, with_dtype};
use serde::{Deserialize, Serialize};

/// `lax.GatherDimensionNumbers` (the index vector is the last dim of `indices`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GatherDims {
    /// Output dims that hold the slice (offset) dims.
    pub offset_dims: Vec<usize>,
    /// Operand dims of slice size 1 that are dropped from the output.
    pub collapsed_slice_dims: Vec<usize>,
    /// For each index-vector component, the operand dim it indexes.
    pub start_index_map: Vec<usize>,
}

/// `lax.ScatterDimensionNumbers` (the index vector is the last dim of `indices`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ScatterDims {
    /// Dims of `updates` that are window dims.
    pub update_window_dims: Vec<usize>,
    /// Operand dims of window size 1 not present in `updates`.
    pub inserted_window_dims: Vec<usize>,
    /// For each index-vector component, the operand dim it indexes.
    pub scatter_dims_to_operand_dims: Vec<usize>,
}

/// Out-of-bounds index behaviour of gather / scatter (`lax.GatherScatterMode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum GatherMode {
    /// Clamp start indices so the whole slice is in bounds (XLA's native semantics).
    Clip,
    /// Gather: out-of-bounds slices read as zero. Scatter: out-of-bounds updates are dropped.
    FillOrDrop,
    /// An out-of-bounds start index is an error at evaluation (not a `jax.lax` mode: ONNX
    /// says out-of-range gather indices are invalid, and ONNX Runtime fails on them).
    Checked,
    /// ONNX `Gather` / `GatherElements` / `GatherND`: a start in `[-n, 0)` counts from the end
    /// (`n + s`, once, as NumPy), then `Checked`; the error names the index as given, with
    /// the range `[-n, n)`. Wrapping in the graph before a `Checked` gather would report the
    /// wrapped index (-69477 for -99999 in a vocabulary of 30522), not the user's.
    CheckedWrap,
}

/// Shape and dtype rule of the movement family.
pub(crate) fn infer(op: &Op, ins: &[&Shape]) -> Result<Shape, String> {
    match op {
        Op::BroadcastInDim { shape, broadcast_dimensions } => infer_broadcast(ins, shape, broadcast_dimensions),
        Op::Reshape { new_sizes } => infer_reshape(ins, new_sizes),
        Op::Transpose { permutation } => {
            arity("transpose", ins, 1)?;
            let x = ins[0];
            if !is_permutation(permutation, x.rank()) {
                return Err(format!("permutation {permutation:?} is not a permutation of 0..{}", x.rank()));
            }
            Ok(Shape { dims: permutation.iter().map(|&p| x.dims[p].clone()).collect(), dtype: x.dtype })
        }
        Op::Rev { dimensions } => {
            arity("rev", ins, 1)?;
            check_axes("rev dimensions", dimensions, ins[0].rank(), false)?;
            Ok(ins[0].clone())
        }
        Op::Slice { start_indices, limit_indices, strides } => infer_slice(ins, start_indices, limit_indices, strides),
        Op::DynamicSlice { slice_sizes } => infer_dynamic_slice(ins, slice_sizes),
        Op::DynamicUpdateSlice => infer_dynamic_update_slice(ins),
        Op::Concatenate { dimension } => infer_concatenate(ins, *dimension),
        Op::Pad { low, high, interior } => infer_pad(ins, low, high, interior),
        Op::Gather { dims, slice_sizes, .. } => gather::infer_gather(ins, dims, slice_sizes),
        Op::ScatterAdd { dims, .. } => gather::infer_scatter(ins, dims),
        _ => unreachable!("{} is not a movement op", op.name()),
    }
}

fn is_permutation(p: &[usize], rank: usize) -> bool {
    let mut seen = vec![false; rank];
    p.len() == rank && p.iter().all(|&i| i < rank && !std::mem::replace(&mut seen[i], true))
}

/// Check that `axes` are `< rank`, unique, and (if `sorted`) strictly increasing.
fn check_axes(what: &str, axes: &[usize], rank: usize, sorted: bool) -> Result<(), String> {
    for (i, &a) in axes.iter().enumerate() {
        if a >= rank {
            return Err(format!("{what} {axes:?}: {a} is out of range for rank {rank}"));
        }
        if axes[..i].contains(&a) {
            return Err(format!("{what} {axes:?}: {a} appears twice"));
        }
        if sorted && i > 0 && axes[i - 1] > a {
            return Err(format!("{what} {axes:?} must be sorted"));
        }
    }
    Ok(())
}

fn fmt_dims(d: &[Dim]) -> String {
    format!("[{}]", d.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(","))
}

fn infer_broadcast(ins: &[&Shape], shape: &[Dim], bd: &[usize]) -> Result<Shape, String> {
    arity("broadcast_in_dim", ins, 1)?;
    let x = ins[0];
    if bd.len() != x.rank() {
        return Err(format!(
            "broadcast_dimensions {bd:?} has {} entries but the operand {x} has rank {}",
            bd.len(),
            x.rank()
        ));
    }
    for (i, &d) in bd.iter().enumerate() {
        if d >= shape.len() {
            return Err(format!("broadcast_dimensions {bd:?}: {d} is out of range for target {}", fmt_dims(shape)));
        }
        if i > 0 && d <= bd[i - 1] {
            return Err(format!("broadcast_dimensions {bd:?} must be strictly increasing"));
        }
        let (a, b) = (&x.dims[i], &shape[d]);
        let ok = a == b || *a == Dim::Static(1) || matches!(a, Dim::Sym(_)) || matches!(b, Dim::Sym(_));
        if !ok {
            return Err(format!(
                "operand dim {i} (size {a}) cannot broadcast to target dim {d} (size {b}) of {}",
                fmt_dims(shape)
            ));
        }
    }
    Ok(Shape::from_dims(shape, x.dtype))
}

/// Product of the static dims and the sorted list of symbols.
fn split_dims(d: &[Dim]) -> (usize, Vec<&str>) {
    let mut p = 1usize;
    let mut syms = vec![];
    for x in d {
        match x {
            Dim::Static(n) => p = p.saturating_mul(*n),
            Dim::Sym(s) => syms.push(s.as_str()),
        }
    }
    syms.sort_unstable();
    (p, syms)
}

fn infer_reshape(ins: &[&Shape], new_sizes: &[Dim]) -> Result<Shape, String> {
    arity("reshape", ins, 1)?;
    let x = ins[0];
    let (pa, sa) = split_dims(&x.dims);
    let (pb, sb) = split_dims(new_sizes);
    if sa.is_empty() && sb.is_empty() {
        if pa != pb {
            return Err(format!("cannot reshape {x} ({pa} elements) to {} ({pb} elements)", fmt_dims(new_sizes)));
        }
    } else if sa != sb || pa != pb {
        return Err(format!(
            "cannot reshape {x} to {}: with symbolic dims both sides need the same symbols and the same \
             product of static dims",
            fmt_dims(new_sizes)
        ));
    }
    Ok(Shape::from_dims(new_sizes, x.dtype))
}

fn infer_slice(ins: &[&Shape], start: &[usize], limit: &[usize], strides: &[usize]) -> Result<Shape, String> {
    arity("slice", ins, 1)?;
    let x = ins[0];
    let r = x.rank();
    if start.len() != r || limit.len() != r || !(strides.is_empty() || strides.len() == r) {
        return Err(format!("start {start:?}, limit {limit:?} and strides {strides:?} need one entry per dim of {x}"));
    }
    let mut dims = Vec::with_capacity(r);
    for i in 0..r {
        let s = strides.get(i).copied().unwrap_or(1);
        if s == 0 {
            return Err(format!("strides {strides:?}: stride of dim {i} must be ≥ 1"));
        }
        if start[i] > limit[i] {
            return Err(format!("dim {i}: start {} > limit {} (start {start:?}, limit {limit:?})", start[i], limit[i]));
        }
        if let Dim::Static(n) = x.dims[i]
            && limit[i] > n
        {
            return Err(format!("dim {i}: limit {} exceeds size {n} of {x}", limit[i]));
        }
        dims.push(Dim::Static((limit[i] - start[i]).div_ceil(s)));
    }
    Ok(Shape { dims, dtype: x.dtype })
}

/// Check that `ins` are integer scalars (start indices of the dynamic slices).
fn check_scalar_starts(ins: &[&Shape], first: usize) -> Result<(), String> {
    for (k, s) in ins.iter().enumerate() {
        if s.rank() != 0 || !s.dtype.is_int() {
            return Err(format!("start index {k} (operand {}) must be an integer scalar, got {s}", first + k));
        }
    }
    Ok(())
}

fn infer_dynamic_slice(ins: &[&Shape], sizes: &[usize]) -> Result<Shape, String> {
    let x = *ins.first().ok_or("dynamic_slice needs an operand")?;
    let r = x.rank();
    if ins.len() != 1 + r {
        return Err(format!("dynamic_slice of {x} takes one start index per dim ({r}), got {}", ins.len() - 1));
    }
    check_scalar_starts(&ins[1..], 1)?;
    if sizes.len() != r {
        return Err(format!("slice_sizes {sizes:?} needs one entry per dim of {x}"));
    }
    for (i, (&s, d)) in sizes.iter().zip(&x.dims).enumerate() {
        if let Dim::Static(n) = d
            && s > *n
        {
            return Err(format!("slice_sizes {sizes:?}: size {s} of dim {i} exceeds {n}"));
        }
    }
    Ok(Shape::new(sizes, x.dtype))
}

fn infer_dynamic_update_slice(ins: &[&Shape]) -> Result<Shape, String> {
    if ins.len() < 2 {
        return Err(format!("dynamic_update_slice takes an operand, an update and start indices, got {}", ins.len()));
    }
    let (x, u) = (ins[0], ins[1]);
    if u.rank() != x.rank() || u.dtype != x.dtype {
        return Err(format!("update {u} must have the rank and dtype of the operand {x}"));
    }
    if ins.len() != 2 + x.rank() {
        return Err(format!(
            "dynamic_update_slice of {x} takes one start index per dim ({}), got {}",
            x.rank(),
            ins.len() - 2
        ));
    }
    check_scalar_starts(&ins[2..], 2)?;
    for (i, (a, b)) in u.dims.iter().zip(&x.dims).enumerate() {
        if let (Dim::Static(a), Dim::Static(b)) = (a, b)
            && a > b
        {
            return Err(format!("update {u} is larger than the operand {x} in dim {i}"));
        }
    }
    Ok(x.clone())
}

fn infer_concatenate(ins: &[&Shape], dim: usize) -> Result<Shape, String> {
    let x = *ins.first().ok_or("concatenate needs at least one operand")?;
    if dim >= x.rank() {
        return Err(format!("dimension {dim} is out of range for {x}"));
    }
    let mut dims = x.dims.clone();
    let mut total = 0usize;
    let mut symbolic = false;
    for (k, s) in ins.iter().enumerate() {
        if s.rank() != x.rank() || s.dtype != x.dtype {
            return Err(format!("operand {k} ({s}) must have the rank and dtype of operand 0 ({x})"));
        }
        for (i, d) in s.dims.iter().enumerate() {
            if i == dim {
                match d {
                    Dim::Static(n) => total += n,
                    Dim::Sym(_) => symbolic = true,
                }
                continue;
            }
            dims[i] = match (&dims[i], d) {
                (a, b) if a == b => a.clone(),
                (Dim::Sym(_), Dim::Static(n)) | (Dim::Static(n), Dim::Sym(_)) => Dim::Static(*n),
                (a, b) => return Err(format!("operand {k} differs in dim {i} ({b} vs {a}) outside the concat dim")),
            };
        }
    }
    dims[dim] = match (symbolic, ins.len()) {
        (false, _) => Dim::Static(total),
        (true, 1) => x.dims[dim].clone(),
        (true, _) => return Err(format!("cannot concatenate along symbolic dim {dim}")),
    };
    Ok(Shape { dims, dtype: x.dtype })
}

/// Size of one padded dim: `low + high + n + (n - 1) * interior`.
fn padded(n: usize, low: i64, high: i64, interior: usize) -> i64 {
    low + high + n as i64 + n.saturating_sub(1) as i64 * interior as i64
}

fn infer_pad(ins: &[&Shape], low: &[i64], high: &[i64], interior: &[usize]) -> Result<Shape, String> {
    arity("pad", ins, 2)?;
    let (x, v) = (ins[0], ins[1]);
    if v.rank() != 0 || v.dtype != x.dtype {
        return Err(format!("padding value must be a scalar of the operand's dtype {}, got {v}", x.dtype));
    }
    let r = x.rank();
    if low.len() != r || high.len() != r || interior.len() != r {
        return Err(format!("low {low:?}, high {high:?}, interior {interior:?} need one entry per dim of {x}"));
    }
    let mut dims = Vec::with_capacity(r);
    for i in 0..r {
        dims.push(match &x.dims[i] {
            Dim::Static(n) => {
                let m = padded(*n, low[i], high[i], interior[i]);
                if m < 0 {
                    return Err(format!("dim {i} of {x} would have negative size {m} after padding"));
                }
                Dim::Static(m as usize)
            }
            d if low[i] == 0 && high[i] == 0 && interior[i] == 0 => d.clone(),
            d => return Err(format!("cannot pad symbolic dim {i} ({d})")),
        });
    }
    Ok(Shape { dims, dtype: x.dtype })
}

/// Visit every multi-index of `dims` in row-major order with its flat position.
pub(crate) fn for_each_index(dims: &[usize], mut f: impl FnMut(usize, &[usize])) {
    let n: usize = dims.iter().product();
    let mut idx = vec![0usize; dims.len()];
    for k in 0..n {
        f(k, &idx);
        for ax in (0..dims.len()).rev() {
            idx[ax] += 1;
            if idx[ax] < dims[ax] {
                break;
            }
            idx[ax] = 0;
        }
    }
}

fn dot(idx: &[usize], strides: &[usize]) -> usize {
    idx.iter().zip(strides).map(|(a, b)| a * b).sum()
}

fn eval_err(op: &Op, msg: impl Into<String>) -> IrError {
    IrError::Eval { op: op.name(), msg: msg.into() }
}

/// Typed view of a tensor, or an evaluation error naming the op.
fn typed<'a, T: Elem>(op: &Op, t: &'a Tensor) -> Result<&'a [T], IrError> {
    t.as_slice::<T>().ok_or_else(|| eval_err(op, format!("expected {} data, got {}", T::DTYPE, t.dtype())))
}

/// Element `k` of an integer tensor as i64.
fn int_at(op: &Op, t: &Tensor, k: usize) -> Result<i64, IrError> {
    if !t.dtype().is_int() {
        return Err(eval_err(op, format!("indices must be integers, got {}", t.dtype())));
    }
    with_dtype!(t.dtype(), T, Ok(typed::<T>(op, t)?[k].to_i64()))
}

/// The error of a checked gather / scatter (`op`, [`GatherMode::Checked`] or
/// [`GatherMode::CheckedWrap`]) whose start `s` in operand dim `dim` (of size `n`, window
/// `size`) is out of bounds: `s` as given (before `CheckedWrap` counts it from the end), the
/// range of `mode` (`[-n, n)` for a `CheckedWrap` index). Backends use it so every path says
/// the same.
pub fn out_of_range(op: &str, s: i64, dim: usize, n: usize, size: usize, mode: GatherMode) -> IrError {
    let last = n.saturating_sub(size);
    let range = match (size, mode) {
        (1, GatherMode::CheckedWrap) => format!("[-{n}, {n})"),
        (1, _) => format!("[0, {n})"),
        (_, GatherMode::CheckedWrap) => format!("[0, {last}] (or [-{n}, -{size}] from the end) for a window of {size}"),
        _ => format!("[0, {last}] for a window of {size}"),
    };
    IrError::Eval {
        op: op.into(),
        msg: format!("index {s} is out of range {range} in operand dim {dim} (of size {n})"),
    }
}

/// Clamp a start index into `[0, dim - size]` (XLA's dynamic-slice rule).
fn clamp_start(s: i64, dim: usize, size: usize) -> usize {
    s.clamp(0, dim.saturating_sub(size) as i64) as usize
}

/// Start of a `dynamic_slice` / `dynamic_update_slice` window: `jax.lax` first wraps a negative
/// start once (numpy-style), then clamps like XLA.
fn dynamic_start(s: i64, dim: usize, size: usize) -> usize {
    clamp_start(if s < 0 { s.saturating_add(dim as i64) } else { s }, dim, size)
}

/// Reference evaluation of the movement family (everything but `iota`).
pub(crate) fn eval(op: &Op, ins: &[&Tensor], out: &mut Tensor) -> Result<(), IrError> {
    let dt = ins.first().ok_or_else(|| eval_err(op, "no operands"))?.dtype();
    if dt != out.dtype() {
        return Err(eval_err(op, format!("operand is {dt} but the result is {}", out.dtype())));
    }
    with_dtype!(dt, T, eval_typed::<T>(op, ins, out))
}

fn eval_typed<T: Elem>(op: &Op, ins: &[&Tensor], out: &mut Tensor) -> Result<(), IrError> {
    let od = out.shape().to_vec();
    let xd = ins[0].shape().to_vec();
    let x = typed::<T>(op, ins[0])?;
    let xs = strides_of(&xd);
    let o = out.as_mut_slice::<T>().ok_or_else(|| eval_err(op, "result dtype mismatch"))?;
    match op {
        Op::BroadcastInDim { broadcast_dimensions: bd, .. } => {
            for (i, &d) in bd.iter().enumerate() {
                if xd[i] != 1 && xd[i] != od[d] {
                    return Err(eval_err(op, format!("operand dims {xd:?} do not broadcast to {od:?}")));
                }
            }
            for_each_index(&od, |k, idx| {
                let src: usize = bd.iter().enumerate().map(|(i, &d)| if xd[i] == 1 { 0 } else { idx[d] * xs[i] }).sum();
                o[k] = x[src];
            });
        }
        Op::Reshape { .. } => o.copy_from_slice(x),
        Op::Transpose { permutation: p } => {
            for_each_index(&od, |k, idx| o[k] = x[idx.iter().zip(p).map(|(&i, &pi)| i * xs[pi]).sum::<usize>()]);
        }
        Op::Rev { dimensions } => {
            for_each_index(&od, |k, idx| {
                let src: usize = (0..xd.len())
                    .map(|i| if dimensions.contains(&i) { xd[i] - 1 - idx[i] } else { idx[i] } * xs[i])
                    .sum();
                o[k] = x[src];
            });
        }
        Op::Slice { start_indices: st, strides, .. } => {
            for_each_index(&od, |k, idx| {
                let src: usize =
                    (0..xd.len()).map(|i| (st[i] + idx[i] * strides.get(i).copied().unwrap_or(1)) * xs[i]).sum();
                o[k] = x[src];
            });
        }
        Op::DynamicSlice { slice_sizes } => {
            let mut start = vec![0; xd.len()];
            for i in 0..xd.len() {
                start[i] = dynamic_start(int_at(op, ins[1 + i], 0)?, xd[i], slice_sizes[i]);
            }
            for_each_index(&od, |k, idx| {
                o[k] = x[(0..xd.len()).map(|i| (start[i] + idx[i]) * xs[i]).sum::<usize>()];
            });
        }
        Op::DynamicUpdateSlice => {
            let ud = ins[1].shape().to_vec();
            let u = typed::<T>(op, ins[1])?;
            let mut start = vec![0; xd.len()];
            for i in 0..xd.len() {
                start[i] = dynamic_start(int_at(op, ins[2 + i], 0)?, xd[i], ud[i]);
            }
            o.copy_from_slice(x);
            for_each_index(&ud, |k, idx| {
                o[(0..xd.len()).map(|i| (start[i] + idx[i]) * xs[i]).sum::<usize>()] = u[k];
            });
        }
        Op::Concatenate { dimension } => {
            let os = strides_of(&od);
            let mut offset = 0;
            for t in ins {
                let td = t.shape().to_vec();
                let v = typed::<T>(op, t)?;
                for_each_index(&td, |k, idx| {
                    let dst: usize =
                        (0..td.len()).map(|i| (idx[i] + if i == *dimension { offset } else { 0 }) * os[i]).sum();
                    o[dst] = v[k];
                });
                offset += td[*dimension];
            }
        }
        Op::Pad { low, interior, .. } => {
            let pv = typed::<T>(op, ins[1])?[0];
            for_each_index(&od, |k, idx| {
                let mut src = 0usize;
                for i in 0..xd.len() {
                    let p = idx[i] as i64 - low[i];
                    let step = interior[i] as i64 + 1;
                    if p < 0 || p % step != 0 || p / step >= xd[i] as i64 {
                        o[k] = pv;
                        return;
                    }
                    src += (p / step) as usize * xs[i];
                }
                o[k] = x[src];
            });
        }
        Op::Gather { dims, slice_sizes, mode } => {
            gather::eval_gather(op, dims, slice_sizes, *mode, x, &xd, ins[1], o, &od)?
        }
        Op::ScatterAdd { dims, mode } => {
            o.copy_from_slice(x);
            gather::eval_scatter_add(op, dims, *mode, &xd, ins[1], ins[2], o)?
        }
        _ => unreachable!("{} is not a movement op", op.name()),
    }
    Ok(())
}

/// Reference evaluation of `iota`: element `idx` is `idx[dimension]` converted to the dtype.
pub(crate) fn eval_iota(dimension: usize, out: &mut Tensor) -> Result<(), IrError> {
    let od = out.shape().to_vec();
    if dimension >= od.len() {
        return Err(IrError::Eval { op: "iota".into(), msg: format!("dimension {dimension} out of range for {od:?}") });
    }
    with_dtype!(out.dtype(), T, {
        let o = out.as_mut_slice::<T>().unwrap();
        for_each_index(&od, |k, idx| o[k] = T::of_i64(idx[dimension] as i64));
    });
    Ok(())
}

/// The operand's type when `x` is a valid single-result node (builders that need it).
fn operand_shape(g: &Graph, x: NodeId) -> Option<Shape> {
    g.nodes.get(x.index()).filter(|n| !n.is_tuple()).map(|n| n.ty().clone())
}

/// Record a builder error and return an `f32[]` placeholder constant.
fn fail(g: &mut Graph, op: &str, msg: String) -> NodeId {
    g.record_error(IrError::Shape { node: g.nodes.len(), op: op.into(), msg });
    g.push_node(Node {
        op: Op::Constant(Tensor::scalar(0f32).into()),
        inputs: vec![],
        outputs: vec![Shape::scalar(DType::F32)],
    })
}

/// Builders of the movement family. Axes given as `i64` follow NumPy (negative counts from the
/// end); the IR ops store non-negative axes. Bad arguments are recorded on the graph (see
/// [`Graph::error`]) and a placeholder node is returned.
impl Graph {
    /// `lax.broadcast_in_dim(x, shape, broadcast_dimensions)`: operand dim `i` becomes output
    /// dim `broadcast_dimensions[i]` (strictly increasing); each operand dim is 1 or equal to
    /// its target. Dtype of `x`.
    pub fn broadcast_in_dim(&mut self, x: NodeId, shape: impl IntoDims, broadcast_dimensions: &[usize]) -> NodeId {
        let op = Op::BroadcastInDim { shape: shape.into_dims(), broadcast_dimensions: broadcast_dimensions.to_vec() };
        self.push(op, &[x])
    }

    /// NumPy `broadcast_to`: align `x`'s dims to the right of `shape`; each is 1 or equal.
    /// Returns `x` itself when it already has that shape.
    pub fn broadcast_to(&mut self, x: NodeId, shape: impl IntoDims) -> NodeId {
        let dims = shape.into_dims();
        let Some(xs) = operand_shape(self, x) else {
            return self.push(Op::BroadcastInDim { shape: dims, broadcast_dimensions: vec![] }, &[x]);
        };
        if xs.dims == dims {
            return x;
        }
        if xs.rank() > dims.len() {
            return fail(self, "broadcast_in_dim", format!("cannot broadcast {xs} to lower rank {}", fmt_dims(&dims)));
        }
        let bd: Vec<usize> = (dims.len() - xs.rank()..dims.len()).collect();
        self.broadcast_in_dim(x, dims, &bd)
    }

    /// `lax.reshape` to `new_sizes` (row-major; no `-1`). Symbolic dims allowed when both
    /// sides hold the same symbols and the same static product.
    pub fn reshape(&mut self, x: NodeId, new_sizes: impl IntoDims) -> NodeId {
        self.push(Op::Reshape { new_sizes: new_sizes.into_dims() }, &[x])
    }

    /// `lax.transpose`: output dim `i` is operand dim `permutation[i]`.
    pub fn transpose(&mut self, x: NodeId, permutation: &[usize]) -> NodeId {
        self.push(Op::Transpose { permutation: permutation.to_vec() }, &[x])
    }

    /// `lax.rev`: reverse `x` along `dimensions`.
    pub fn rev(&mut self, x: NodeId, dimensions: &[usize]) -> NodeId {
        self.push(Op::Rev { dimensions: dimensions.to_vec() }, &[x])
    }

    /// `lax.slice(x, start, limit, strides)`; empty `strides` means all 1. Output dim `i` is
    /// `ceil((limit[i] - start[i]) / strides[i])`.
    pub fn slice(&mut self, x: NodeId, start: &[usize], limit: &[usize], strides: &[usize]) -> NodeId {
        let strides = if strides.is_empty() { vec![1; start.len()] } else { strides.to_vec() };
        self.push(Op::Slice { start_indices: start.to_vec(), limit_indices: limit.to_vec(), strides }, &[x])
    }

    /// `lax.slice_in_dim`: `x[.., start..limit, ..]` along `axis` (negative counts from the
    /// end). The other dims must be static.
    pub fn slice_in_dim(&mut self, x: NodeId, start: usize, limit: usize, axis: i64) -> NodeId {
        let Some(xs) = operand_shape(self, x) else { return self.slice(x, &[start], &[limit], &[]) };
        let Some(ax) = normalize_axis(axis, xs.rank()) else {
            return fail(self, "slice", format!("axis {axis} is out of range for {xs}"));
        };
        let mut st = vec![0; xs.rank()];
        let mut lim = vec![0; xs.rank()];
        for (i, d) in xs.dims.iter().enumerate() {
            if i == ax {
                (st[i], lim[i]) = (start, limit);
            } else if let Dim::Static(n) = d {
                lim[i] = *n;
            } else {
                return fail(self, "slice", format!("slice_in_dim needs static dims besides axis {ax}: {xs}"));
            }
        }
        self.slice(x, &st, &lim, &[])
    }

    /// `lax.dynamic_slice(x, *starts, slice_sizes=sizes)`: `starts` are integer scalars, one
    /// per dim, clamped so the slice fits.
    pub fn dynamic_slice(&mut self, x: NodeId, starts: &[NodeId], sizes: &[usize]) -> NodeId {
        let ins: Vec<NodeId> = std::iter::once(x).chain(starts.iter().copied()).collect();
        self.push(Op::DynamicSlice { slice_sizes: sizes.to_vec() }, &ins)
    }

    /// `lax.dynamic_update_slice(x, update, *starts)`: `x` with `update` written at the
    /// (clamped) integer scalar `starts`.
    pub fn dynamic_update_slice(&mut self, x: NodeId, update: NodeId, starts: &[NodeId]) -> NodeId {
        let ins: Vec<NodeId> = [x, update].into_iter().chain(starts.iter().copied()).collect();
        self.push(Op::DynamicUpdateSlice, &ins)
    }

    /// `lax.concatenate(xs, axis)` (negative `axis` counts from the end); operands share rank,
    /// dtype and every dim but `axis`.
    pub fn concatenate(&mut self, xs: &[NodeId], axis: i64) -> NodeId {
        let Some(&first) = xs.first() else {
            return fail(self, "concatenate", "needs at least one operand".into());
        };
        let Some(s) = operand_shape(self, first) else { return self.push(Op::Concatenate { dimension: 0 }, xs) };
        match normalize_axis(axis, s.rank()) {
            Some(dimension) => self.push(Op::Concatenate { dimension }, xs),
            None => fail(self, "concatenate", format!("axis {axis} is out of range for {s}")),
        }
    }

    /// `lax.pad(x, value, [(low, high, interior)])`: `value` is a scalar of `x`'s dtype;
    /// negative `low`/`high` crop; empty `interior` means no interior padding.
    pub fn pad(&mut self, x: NodeId, value: NodeId, low: &[i64], high: &[i64], interior: &[usize]) -> NodeId {
        let interior = if interior.is_empty() { vec![0; low.len()] } else { interior.to_vec() };
        self.push(Op::Pad { low: low.to_vec(), high: high.to_vec(), interior }, &[x, value])
    }

    /// `lax.iota(dtype, shape)` along `dimension` (`shape` carries the dtype).
    pub fn iota(&mut self, shape: Shape, dimension: usize) -> NodeId {
        self.push_multi(Op::Iota { dimension }, &[], Some(&shape))[0]
    }

    /// `lax.gather(x, indices, dims, slice_sizes, mode)`; the index vector is the last dim of
    /// `indices` (any integer dtype). See the module docs for the out-of-bounds modes.
    pub fn gather(
        &mut self,
        x: NodeId,
        indices: NodeId,
        dims: GatherDims,
        slice_sizes: &[usize],
        mode: GatherMode,
    ) -> NodeId {
        self.push(Op::Gather { dims, slice_sizes: slice_sizes.to_vec(), mode }, &[x, indices])
    }

    /// `lax.scatter_add(x, indices, updates, dims, mode)`: `x` with each update window added
    /// at its index (duplicates accumulate). Result has `x`'s type.
    pub fn scatter_add(
        &mut self,
        x: NodeId,
        indices: NodeId,
        updates: NodeId,
        dims: ScatterDims,
        mode: GatherMode,
    ) -> NodeId {
        self.push(Op::ScatterAdd { dims, mode }, &[x, indices, updates])
    }

    /// `numpy.take(x, indices, axis)` / embedding lookup: result dims are
    /// `x.shape[:axis] + indices.shape + x.shape[axis+1:]`. Built from `gather` in `Clip`
    /// mode, so out-of-range indices (negative ones too) are clamped, as
    /// `jnp.take(mode="clip")`. `x`'s dims other than `axis` must be static.
    pub fn take(&mut self, x: NodeId, indices: NodeId, axis: i64) -> NodeId {
        self.take_with_mode(x, indices, axis, GatherMode::Clip)
    }

    /// [`take`](Self::take) with the out-of-range behaviour `mode` (`jnp.take(mode=…)`;
    /// [`GatherMode::Checked`] makes an out-of-range index an evaluation error,
    /// [`GatherMode::CheckedWrap`] also counts negative indices from the end as ONNX).
    pub fn take_with_mode(&mut self, x: NodeId, indices: NodeId, axis: i64, mode: GatherMode) -> NodeId {
        let (Some(xs), Some(is)) = (operand_shape(self, x), operand_shape(self, indices)) else {
            return self.push(Op::Reshape { new_sizes: vec![] }, &[x, indices]);
        };
        let Some(ax) = normalize_axis(axis, xs.rank()) else {
            return fail(self, "take", format!("axis {axis} is out of range for {xs}"));
        };
        let mut slice_sizes = vec![1; xs.rank()];
        for (i, d) in xs.dims.iter().enumerate() {
            match d {
                _ if i == ax => {}
                Dim::Static(n) => slice_sizes[i] = *n,
                Dim::Sym(_) => return fail(self, "take", format!("dims besides axis {ax} must be static: {xs}")),
            }
        }
        let q = is.rank();
        let mut idx_dims = is.dims.clone();
        idx_dims.push(Dim::Static(1));
        let idx = self.reshape(indices, idx_dims);
        let offset_dims = (0..xs.rank() + q - 1).filter(|&o| o < ax || o >= ax + q).collect();
        let dims = GatherDims { offset_dims, collapsed_slice_dims: vec![ax], start_index_map: vec![ax] };
        self.gather(x, idx, dims, &slice_sizes, mode)
    }

    /// `jnp.expand_dims`: insert a size-1 dim at `axis` (in `-(rank+1)..=rank`), via reshape.
    pub fn expand_dims(&mut self, x: NodeId, axis: i64) -> NodeId {
        let Some(xs) = operand_shape(self, x) else { return self.reshape(x, Vec::<Dim>::new()) };
        let Some(ax) = normalize_axis(axis, xs.rank() + 1) else {
            return fail(self, "reshape", format!("expand_dims axis {axis} is out of range for {xs}"));
        };
        let mut d = xs.dims.clone();
        d.insert(ax, Dim::Static(1));
        self.reshape(x, d)
    }

    /// `jnp.squeeze`: drop the size-1 dims `axes` (negative count from the end), via
    /// reshape; empty `axes` drops every static size-1 dim. A listed dim that is not 1 is an
    /// error.
    pub fn squeeze(&mut self, x: NodeId, axes: &[i64]) -> NodeId {
        let Some(xs) = operand_shape(self, x) else { return self.reshape(x, Vec::<Dim>::new()) };
        let mut drop = vec![axes.is_empty(); xs.rank()];
        for &a in axes {
            match normalize_axis(a, xs.rank()) {
                Some(i) => drop[i] = true,
                None => return fail(self, "reshape", format!("squeeze axis {a} is out of range for {xs}")),
            }
        }
        let mut d = vec![];
        for (i, dim) in xs.dims.iter().enumerate() {
            match (drop[i], dim) {
                (true, Dim::Static(1)) => {}
                (true, _) if !axes.is_empty() => {
                    return fail(self, "reshape", format!("squeeze axis {i} of {xs} has size {dim}, not 1"));
                }
                _ => d.push(dim.clone()),
            }
        }
        self.reshape(x, d)
    }
}
