//! `gather` and `scatter_add`: shape rules and reference evaluation with XLA's dimension
//! numbers, the index vector being the last dim of `indices`.
//!
//! Gather (operand rank `R`, `indices` of dims `[B..., N]` with `N = len(start_index_map)`):
//! - `len(slice_sizes) == R`, `slice_sizes[d] <= operand.dims[d]`;
//! - `collapsed_slice_dims` sorted, unique, `< R`, each with slice size 1;
//! - `start_index_map` unique, `< R`;
//! - `offset_dims` sorted, unique, `len == R - len(collapsed_slice_dims)`, `< output rank`;
//! - output rank is `len(B) + len(offset_dims)`; output dim `offset_dims[k]` has the size of
//!   the `k`-th non-collapsed slice dim, the other output dims are `B` in order.
//! - Output element `Out`: the batch index `G` (the non-offset dims of `Out`) picks the index
//!   vector `indices[G, :]`; its component `k` is the start in operand dim
//!   `start_index_map[k]` (other dims start at 0); `Out[offset_dims[k]]` is the offset in the
//!   `k`-th non-collapsed operand dim. Clip clamps starts to `[0, dim - slice_size]`;
//!   FillOrDrop reads zero for a slice whose start is outside that range; Checked fails;
//!   CheckedWrap first adds `dim` to a start in `[-dim, 0)`, then fails like Checked.
//!
//! Scatter (`updates` of rank `len(update_window_dims) + len(B)`):
//! - `update_window_dims` sorted, unique, `< updates rank`; `inserted_window_dims` sorted,
//!   unique, `< R`; `len(update_window_dims) + len(inserted_window_dims) == R`;
//!   `scatter_dims_to_operand_dims` unique, `< R`, one per index-vector component;
//! - the non-window dims of `updates` equal `B` in order; window dim `k` of `updates` is at
//!   most the `k`-th non-inserted operand dim.
//! - Each update element goes to operand index `start + window offset` (inserted dims have
//!   offset 0) and is added there; Clip clamps starts to `[0, dim - window size]`, FillOrDrop
//!   drops a whole window whose start is outside that range, Checked fails, CheckedWrap
//!   counts a start in `[-dim, 0)` from the end first.

use super::{GatherDims, GatherMode, ScatterDims, check_axes, clamp_start, dot, for_each_index, int_at, typed};
use crate::shape::strides_of;
use crate::{DType, Dim, Elem, IrError, Op, Shape, Tensor};

/// The index tensor's checks shared by gather and scatter; returns the batch dims `B`.
fn check_indices<'a>(ix: &'a Shape, n: usize, map_name: &str) -> Result<&'a [Dim], String> {
    if !ix.dtype.is_int() {
        return Err(format!("indices must have an integer dtype, got {ix}"));
    }
    let Some((last, batch)) = ix.dims.split_last() else {
        return Err(format!("indices {ix} must have rank ≥ 1 (the index vector is the last dim)"));
    };
    if *last != Dim::Static(n) {
        return Err(format!("the last dim of indices {ix} must equal len({map_name}) = {n}"));
    }
    Ok(batch)
}

fn dims_compatible(a: &Dim, b: &Dim) -> bool {
    a == b || matches!(a, Dim::Sym(_)) || matches!(b, Dim::Sym(_))
}

pub(super) fn infer_gather(ins: &[&Shape], d: &GatherDims, slice_sizes: &[usize]) -> Result<Shape, String> {
    super::arity("gather", ins, 2)?;
    let (x, ix) = (ins[0], ins[1]);
    let r = x.rank();
    let batch = check_indices(ix, d.start_index_map.len(), "start_index_map")?;
    if slice_sizes.len() != r {
        return Err(format!("slice_sizes {slice_sizes:?} needs one entry per dim of the operand {x}"));
    }
    for (i, (&s, dim)) in slice_sizes.iter().zip(&x.dims).enumerate() {
        if let Dim::Static(n) = dim
            && s > *n
        {
            return Err(format!("slice_sizes {slice_sizes:?}: size {s} of dim {i} exceeds {n}"));
        }
    }
    check_axes("collapsed_slice_dims", &d.collapsed_slice_dims, r, true)?;
    if let Some(&c) = d.collapsed_slice_dims.iter().find(|&&c| slice_sizes[c] != 1) {
        return Err(format!("collapsed dim {c} needs slice size 1, got {}", slice_sizes[c]));
    }
    check_axes("start_index_map", &d.start_index_map, r, false)?;
    let window: Vec<usize> = (0..r).filter(|i| !d.collapsed_slice_dims.contains(i)).collect();
    if d.offset_dims.len() != window.len() {
        return Err(format!(
            "offset_dims {:?} must have one entry per non-collapsed operand dim ({})",
            d.offset_dims,
            window.len()
        ));
    }
    let out_rank = batch.len() + d.offset_dims.len();
    check_axes("offset_dims", &d.offset_dims, out_rank, true)?;
    let (mut b, mut w) = (batch.iter(), window.iter());
    let dims = (0..out_rank)
        .map(|o| match d.offset_dims.contains(&o) {
            true => Dim::Static(slice_sizes[*w.next().unwrap()]),
            false => b.next().unwrap().clone(),
        })
        .collect();
    Ok(Shape { dims, dtype: x.dtype })
}

pub(super) fn infer_scatter(ins: &[&Shape], d: &ScatterDims) -> Result<Shape, String> {
    super::arity("scatter_add", ins, 3)?;
    let (x, ix, up) = (ins[0], ins[1], ins[2]);
    if up.dtype != x.dtype {
        return Err(format!("updates {up} must have the operand's dtype {}", x.dtype));
    }
    if x.dtype == DType::Bool {
        return Err("scatter_add does not accept bool".into());
    }
    let r = x.rank();
    let batch = check_indices(ix, d.scatter_dims_to_operand_dims.len(), "scatter_dims_to_operand_dims")?;
    check_axes("scatter_dims_to_operand_dims", &d.scatter_dims_to_operand_dims, r, false)?;
    check_axes("inserted_window_dims", &d.inserted_window_dims, r, true)?;
    if d.update_window_dims.len() + d.inserted_window_dims.len() != r {
        return Err(format!(
            "update_window_dims {:?} and inserted_window_dims {:?} must together number the operand rank {r}",
            d.update_window_dims, d.inserted_window_dims
        ));
    }
    if up.rank() != d.update_window_dims.len() + batch.len() {
        return Err(format!(
            "updates {up} must have rank len(update_window_dims) + rank(indices) - 1 = {}",
            d.update_window_dims.len() + batch.len()
        ));
    }
    check_axes("update_window_dims", &d.update_window_dims, up.rank(), true)?;
    let scatter_dims = (0..up.rank()).filter(|i| !d.update_window_dims.contains(i));
    for (k, u) in scatter_dims.enumerate() {
        if !dims_compatible(&up.dims[u], &batch[k]) {
            return Err(format!("updates dim {u} ({}) must equal indices dim {k} ({})", up.dims[u], batch[k]));
        }
    }
    let window = (0..r).filter(|i| !d.inserted_window_dims.contains(i));
    for (&u, o) in d.update_window_dims.iter().zip(window) {
        if let (Dim::Static(a), Dim::Static(b)) = (&up.dims[u], &x.dims[o])
            && a > b
        {
            return Err(format!("update window dim {u} (size {a}) exceeds operand dim {o} (size {b})"));
        }
    }
    Ok(x.clone())
}

/// Start indices of one index vector, placed in operand dims (others 0).
fn starts(op: &Op, ix: &Tensor, base: usize, map: &[usize], r: usize) -> Result<Vec<i64>, IrError> {
    let mut s = vec![0i64; r];
    for (k, &dim) in map.iter().enumerate() {
        s[dim] = int_at(op, ix, base + k)?;
    }
    Ok(s)
}

/// Apply the mode to starts for a window of `sizes`; `Ok(None)` means out of bounds
/// (FillOrDrop); an out-of-bounds start in Checked mode is an error naming the index.
fn place(op: &Op, s: &[i64], xd: &[usize], sizes: &[usize], mode: GatherMode) -> Result<Option<Vec<usize>>, IrError> {
    let fits = |i: usize| s[i] >= 0 && s[i] as u64 + sizes[i] as u64 <= xd[i] as u64;
    match mode {
        GatherMode::Clip => Ok(Some((0..xd.len()).map(|i| clamp_start(s[i], xd[i], sizes[i])).collect())),
        GatherMode::FillOrDrop => Ok((0..xd.len()).all(fits).then(|| s.iter().map(|&v| v as usize).collect())),
        GatherMode::Checked | GatherMode::CheckedWrap => {
            // CheckedWrap counts a start in [-n, 0) from the end once; the error names the
            // start as given.
            let wrap = mode == GatherMode::CheckedWrap;
            let w: Vec<i64> = (0..xd.len())
                .map(|i| if wrap && (-(xd[i] as i64)..0).contains(&s[i]) { s[i] + xd[i] as i64 } else { s[i] })
                .collect();
            let fits = |i: usize| w[i] >= 0 && w[i] as u64 + sizes[i] as u64 <= xd[i] as u64;
            match (0..xd.len()).find(|&i| !fits(i)) {
                None => Ok(Some(w.iter().map(|&v| v as usize).collect())),
                Some(i) => Err(super::out_of_range(&op.name(), s[i], i, xd[i], sizes[i], mode)),
            }
        }
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn eval_gather<T: Elem>(
    op: &Op,
    d: &GatherDims,
    slice_sizes: &[usize],
    mode: GatherMode,
    x: &[T],
    xd: &[usize],
    ix: &Tensor,
    o: &mut [T],
    od: &[usize],
) -> Result<(), IrError> {
    let r = xd.len();
    let xs = strides_of(xd);
    let ixs = strides_of(ix.shape());
    let window: Vec<usize> = (0..r).filter(|i| !d.collapsed_slice_dims.contains(i)).collect();
    let batch_pos: Vec<usize> = (0..od.len()).filter(|i| !d.offset_dims.contains(i)).collect();
    let mut res = Ok(());
    for_each_index(od, |k, idx| {
        if res.is_err() {
            return;
        }
        let g: Vec<usize> = batch_pos.iter().map(|&p| idx[p]).collect();
        let base = dot(&g, &ixs[..g.len()]);
        let s = match starts(op, ix, base, &d.start_index_map, r) {
            Ok(s) => s,
            Err(e) => return res = Err(e),
        };
        let at = match place(op, &s, xd, slice_sizes, mode) {
            Ok(at) => at,
            Err(e) => return res = Err(e),
        };
        o[k] = match at {
            None => T::zero(),
            Some(mut at) => {
                for (j, &wd) in window.iter().enumerate() {
                    at[wd] += idx[d.offset_dims[j]];
                }
                x[dot(&at, &xs)]
            }
        };
    });
    res
}

/// Add `b` to `a` with the dtype's arithmetic (floats in f64 then rounded, ints wrapping).
fn add<T: Elem>(a: T, b: T) -> T {
    if T::DTYPE.is_float() {
        T::of_f64(a.to_f64() + b.to_f64())
    } else {
        T::of_i64(a.to_i64().wrapping_add(b.to_i64()))
    }
}

pub(super) fn eval_scatter_add<T: Elem>(
    op: &Op,
    d: &ScatterDims,
    mode: GatherMode,
    xd: &[usize],
    ix: &Tensor,
    updates: &Tensor,
    o: &mut [T],
) -> Result<(), IrError> {
    let r = xd.len();
    let xs = strides_of(xd);
    let ixs = strides_of(ix.shape());
    let ud = updates.shape().to_vec();
    let u = typed::<T>(op, updates)?;
    let window: Vec<usize> = (0..r).filter(|i| !d.inserted_window_dims.contains(i)).collect();
    let mut sizes = vec![1; r];
    for (j, &wd) in window.iter().enumerate() {
        sizes[wd] = ud[d.update_window_dims[j]];
    }
    let scatter_pos: Vec<usize> = (0..ud.len()).filter(|i| !d.update_window_dims.contains(i)).collect();
    let mut res = Ok(());
    for_each_index(&ud, |k, idx| {
        if res.is_err() {
            return;
        }
        let g: Vec<usize> = scatter_pos.iter().map(|&p| idx[p]).collect();
        let base = dot(&g, &ixs[..g.len()]);
        let s = match starts(op, ix, base, &d.scatter_dims_to_operand_dims, r) {
            Ok(s) => s,
            Err(e) => return res = Err(e),
        };
        let at = match place(op, &s, xd, &sizes, mode) {
            Ok(at) => at,
            Err(e) => return res = Err(e),
        };
        if let Some(mut at) = at {
            for (j, &wd) in window.iter().enumerate() {
                at[wd] += idx[d.update_window_dims[j]];
            }
            let f = dot(&at, &xs);
            o[f] = add(o[f], u[k]);
        }
    });
    res
}
