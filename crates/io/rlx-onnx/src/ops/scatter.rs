//! ScatterND, ScatterElements and Scatter (opsets 9-18) with `reduction` `none` or `add`,
//! lowered onto `lax.scatter_add`:
//! - `add`: `x + scatter_add(0, idx, updates)`;
//! - `none` (ONNX requires distinct indices): the positions written are where
//!   `scatter_add(0, idx, 1) > 0`, and there the result is `scatter_add(0, idx, updates)`.
//!
//! - `mul`, `max`, `min`: with the indices known at import time, applied in rounds of distinct
//!   targets (`scatter_known`); unknown indices are refused with the node named.

use super::Ctx;
use super::shape::wrap_negative;
use crate::error::Result;
use rlx_ir::ops::{CompareOp as C, GatherMode, ScatterDims};
use rlx_ir::{DType, NodeId, Shape, Tensor};

fn zeros(c: &mut Ctx, dims: &[usize], dt: DType) -> NodeId {
    let z = c.scalar(0.0, dt);
    c.g.broadcast_in_dim(z, dims.to_vec(), &[])
}

/// `mul` / `max` / `min` scatter with every update element's flat target in `x` known at
/// import time (`targets[e]` for update element `e` in row-major order): the updates hitting
/// each element are applied in rounds (round k holds each target's k-th update, so targets
/// within a round are distinct), each a 1-D scatter of those updates and a select.
fn scatter_known(c: &mut Ctx, x: NodeId, upd: NodeId, targets: &[usize], op: &str) -> Result<NodeId> {
    let xd = c.dims(x)?;
    let p: usize = xd.iter().product();
    let mut out = c.g.reshape(x, [p]);
    let flat_u = c.g.reshape(upd, [targets.len()]);
    if targets.len() != c.ty(upd).numel().unwrap_or(0) || targets.iter().any(|&t| t >= p) {
        return Err(c.err(format!("indices address outside data {xd:?}")));
    }
    let mut seen = vec![0usize; p];
    let mut rounds: Vec<Vec<(usize, usize)>> = vec![];
    for (e, &t) in targets.iter().enumerate() {
        let k = seen[t];
        seen[t] += 1;
        if rounds.len() <= k {
            rounds.push(vec![]);
        }
        rounds[k].push((e, t));
    }
    let dims1 = ScatterDims {
        update_window_dims: vec![],
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
    };
    for round in rounds {
        let es: Vec<i64> = round.iter().map(|&(e, _)| e as i64).collect();
        let ts: Vec<i64> = round.iter().map(|&(_, t)| t as i64).collect();
        let (ei, n) = (c.i64s(&es), ts.len());
        let vals = c.g.take(flat_u, ei, 0);
        let ti = c.g.constant(Tensor::from_vec(ts.clone(), &[n, 1]).map_err(|e| c.err(e.to_string()))?);
        let zero = zeros(c, &[p], c.dtype(x));
        let placed = c.g.scatter_add(zero, ti, vals, dims1.clone(), GatherMode::FillOrDrop);
        let mut mask = vec![false; p];
        ts.iter().for_each(|&t| mask[t as usize] = true);
        let mask = c.g.constant(Tensor::from_vec(mask, &[p]).map_err(|e| c.err(e.to_string()))?);
        let comb = match op {
            "mul" => c.g.mul(out, placed),
            "max" => c.g.max(out, placed),
            _ => c.g.min(out, placed),
        };
        out = c.g.select(mask, comb, out);
    }
    Ok(c.g.reshape(out, xd))
}

/// Row-major strides of `dims`.
fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for d in (0..dims.len().saturating_sub(1)).rev() {
        s[d] = s[d + 1] * dims[d + 1];
    }
    s
}

/// An index value wrapped into `[0, n)`, or an error.
fn wrap(c: &Ctx, i: i64, n: usize) -> Result<usize> {
    let j = if i < 0 { i + n as i64 } else { i };
    usize::try_from(j).ok().filter(|&j| j < n).ok_or_else(|| c.err(format!("index {i} is out of range for {n}")))
}

/// Scatter `updates` into `x` at `idx` with `dims`, as the node's `reduction` says.
fn scatter(c: &mut Ctx, x: NodeId, idx: NodeId, upd: NodeId, dims: ScatterDims) -> Result<NodeId> {
    let reduction = c.astr("reduction", "none");
    let xd = c.dims(x)?;
    let zero_x = zeros(c, &xd, c.dtype(x));
    let placed = c.g.scatter_add(zero_x, idx, upd, dims.clone(), GatherMode::FillOrDrop);
    match reduction.as_str() {
        "add" => Ok(c.g.add(x, placed)),
        "none" => {
            let ud = c.dims(upd)?;
            let one = c.scalar(1.0, DType::I32);
            let ones = c.g.broadcast_in_dim(one, ud, &[]);
            let count0 = zeros(c, &xd, DType::I32);
            let count = c.g.scatter_add(count0, idx, ones, dims, GatherMode::FillOrDrop);
            let zero = c.scalar(0.0, DType::I32);
            let hit = c.g.compare(C::Gt, count, zero);
            Ok(c.g.select(hit, placed, x))
        }
        r => Err(c.err(format!(
            "reduction {r:?} needs indices known at import time (a constant, or given in ImportOptions::input_values)"
        ))),
    }
}

/// ONNX `ScatterND`.
pub(super) fn scatter_nd(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, idx, upd) = (c.x(0)?, c.x(1)?, c.x(2)?);
    let xd = c.dims(x)?;
    let id = c.dims(idx)?;
    let k = *id.last().ok_or_else(|| c.err("indices must have rank >= 1"))?;
    if k > xd.len() {
        return Err(c.err(format!("index depth {k} exceeds data rank {}", xd.len())));
    }
    let red = c.astr("reduction", "none");
    if matches!(red.as_str(), "mul" | "max" | "min") && k > 0 && c.value(1).is_some() {
        // Update element (i, w) lands on data index (idx[i], w).
        let iv = c.ints_in(1)?;
        let (xs, win) = (strides(&xd), xd[k..].iter().product::<usize>());
        let mut targets = Vec::with_capacity(iv.len() / k * win);
        for row in iv.chunks(k) {
            let mut base = 0;
            for (d, &i) in row.iter().enumerate() {
                base += wrap(c, i, xd[d])? * xs[d];
            }
            targets.extend((0..win).map(|w| base + w));
        }
        return Ok(vec![scatter_known(c, x, upd, &targets, &red)?]);
    }
    let bound: Vec<i64> = xd[..k].iter().map(|&d| d as i64).collect();
    let bound = c.i64s(&bound);
    let idx = wrap_negative(c, idx, bound);
    let q = id.len() - 1;
    let dims = ScatterDims {
        update_window_dims: (q..q + xd.len() - k).collect(),
        inserted_window_dims: (0..k).collect(),
        scatter_dims_to_operand_dims: (0..k).collect(),
    };
    Ok(vec![scatter(c, x, idx, upd, dims)?])
}

/// ONNX `ScatterElements` (and the deprecated `Scatter`).
pub(super) fn scatter_elements(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, idx, upd) = (c.x(0)?, c.x(1)?, c.x(2)?);
    let xd = c.dims(x)?;
    let id = c.dims(idx)?;
    let r = xd.len();
    let ax = c.axis(c.ai("axis", 0), r)?;
    if id.len() != r {
        return Err(c.err(format!("indices {id:?} must have the rank of data {xd:?}")));
    }
    let red = c.astr("reduction", "none");
    if matches!(red.as_str(), "mul" | "max" | "min") && c.value(1).is_some() {
        // Update element u lands on data index u with its axis coordinate replaced by idx[u].
        let iv = c.ints_in(1)?;
        let (xs, us) = (strides(&xd), strides(&id));
        let mut targets = Vec::with_capacity(iv.len());
        for (e, &i) in iv.iter().enumerate() {
            let mut t = 0;
            for d in 0..r {
                let coord = if d == ax { wrap(c, i, xd[ax])? } else { e / us[d] % id[d] };
                t += coord * xs[d];
            }
            targets.push(t);
        }
        return Ok(vec![scatter_known(c, x, upd, &targets, &red)?]);
    }
    let n = c.scalar(xd[ax] as f64, c.dtype(idx));
    let idx = wrap_negative(c, idx, n);
    let idx = c.g.convert(idx, DType::I64);
    // Full coordinates [.., r]: iota along every dim but `axis`, whose coordinate is `idx`.
    let mut cols = Vec::with_capacity(r);
    for d in 0..r {
        let col = if d == ax { idx } else { c.g.iota(Shape::new(&id, DType::I64), d) };
        cols.push(c.g.expand_dims(col, r as i64));
    }
    let coords = c.g.concatenate(&cols, r as i64);
    let dims = ScatterDims {
        update_window_dims: vec![],
        inserted_window_dims: (0..r).collect(),
        scatter_dims_to_operand_dims: (0..r).collect(),
    };
    Ok(vec![scatter(c, x, coords, upd, dims)?])
}

/// ONNX `TensorScatter` (opset 24, KV-cache update): `present = past` with `update`'s
/// `sequence_length` slices written along `axis` from `write_indices[b]` of each batch entry
/// (0 when absent), wrapping modulo the cache length in `circular` mode. Lowered without
/// knowing the indices: each cache slot reads update slot `p − w[b]` (wrapped when circular)
/// when that is in `[0, sequence_length)`, else keeps `past`.
pub(super) fn tensor_scatter(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (past, upd) = (c.x(0)?, c.x(1)?);
    let (pd, ud) = (c.dims(past)?, c.dims(upd)?);
    let r = pd.len();
    let ax = c.axis(c.ai("axis", -2), r)?;
    let circular = match c.astr("mode", "linear").as_str() {
        "linear" => false,
        "circular" => true,
        m => return Err(c.err(format!("mode {m:?} is not linear or circular"))),
    };
    if ax == 0 || ud.len() != r || (0..r).any(|d| d != ax && ud[d] != pd[d]) || ud[ax] > pd[ax] {
        return Err(c.err(format!("update {ud:?} must match past_cache {pd:?} except along axis {ax} (not 0)")));
    }
    let (m, l) = (pd[ax] as f64, ud[ax] as f64);
    let shape = Shape::new(&pd, DType::I64);
    let p = c.g.iota(shape, ax);
    let mut j = match c.opt(2) {
        Some(w) => {
            let w = c.g.convert(w, DType::I64);
            let wb = c.g.broadcast_in_dim(w, pd.clone(), &[0]);
            c.g.sub(p, wb)
        }
        None => p,
    };
    if circular {
        let mm = c.scalar(m, DType::I64);
        let r1 = c.g.rem(j, mm);
        let r2 = c.g.add(r1, mm);
        j = c.g.rem(r2, mm);
    }
    let (zero, len) = (c.scalar(0.0, DType::I64), c.scalar(l, DType::I64));
    let (ge, lt) = (c.g.compare(C::Ge, j, zero), c.g.compare(C::Lt, j, len));
    let valid = c.g.binary(rlx_ir::ops::BinaryOp::And, ge, lt);
    let top = c.scalar(l - 1.0, DType::I64);
    let jc = c.g.max(j, zero);
    let jc = c.g.min(jc, top);
    let got = rlx_ir::ops::sort::take_along_axis(c.g, upd, jc, ax);
    Ok(vec![c.g.select(valid, got, past)])
}

/// ONNX `MaxUnpool` (opset 11): `X [N, C, *S]` written at the flat positions `I` (as MaxPool
/// returns them) of a zero tensor of the inferred shape `(S − 1)·stride − pads + kernel`;
/// with `output_shape`, that result is zero-padded at the end of each dim to it (as the ONNX
/// reference).
pub(super) fn max_unpool(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, i) = (c.x(0)?, c.x(1)?);
    let xd = c.dims(x)?;
    let nsp = xd.len().saturating_sub(2);
    let k = c.aints("kernel_shape").ok_or_else(|| c.err("kernel_shape is required"))?;
    let s = c.aints("strides").unwrap_or(vec![1; nsp]);
    let p = c.aints("pads").unwrap_or(vec![0; 2 * nsp]);
    if nsp == 0 || k.len() != nsp || s.len() != nsp || p.len() != 2 * nsp || c.dims(i)? != xd {
        return Err(c.err(format!("X {xd:?}, indices, kernel_shape {k:?}, strides {s:?}, pads {p:?} do not fit")));
    }
    let mut inferred = xd[..2].to_vec();
    for d in 0..nsp {
        let v = (xd[d + 2] as i64 - 1) * s[d] - (p[d] + p[nsp + d]) + k[d];
        inferred.push(usize::try_from(v).map_err(|_| c.err(format!("spatial dim {d} would be {v}")))?);
    }
    let total: usize = inferred.iter().product();
    let n: usize = xd.iter().product();
    let zero = zeros(c, &[total], c.dtype(x));
    let idx = c.g.reshape(i, [n, 1]);
    let idx = c.g.convert(idx, DType::I64);
    let upd = c.g.reshape(x, [n]);
    let dims1 = ScatterDims {
        update_window_dims: vec![],
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
    };
    let y = scatter(c, zero, idx, upd, dims1)?;
    let y = c.g.reshape(y, inferred.clone());
    let Some(out) = c.opt_ints_in(2)? else { return Ok(vec![y]) };
    if out.len() != inferred.len() || out.iter().zip(&inferred).any(|(&o, &f)| o < f as i64) {
        return Err(c.err(format!("output_shape {out:?} is smaller than the unpooled shape {inferred:?}")));
    }
    let high: Vec<i64> = out.iter().zip(&inferred).map(|(&o, &f)| o - f as i64).collect();
    let z = c.scalar_like(0.0, x);
    Ok(vec![c.g.pad(y, z, &vec![0; high.len()], &high, &vec![0; high.len()])])
}
