//! ScatterND, ScatterElements and Scatter (opsets 9-18) with `reduction` `none` or `add`,
//! lowered onto `lax.scatter_add`:
//! - `add`: `x + scatter_add(0, idx, updates)`;
//! - `none` (ONNX requires distinct indices): the positions written are where
//!   `scatter_add(0, idx, 1) > 0`, and there the result is `scatter_add(0, idx, updates)`.
//!
//! `mul`, `max` and `min` reductions have no lowering yet and are refused with the node named.

use super::Ctx;
use super::shape::wrap_negative;
use crate::error::Result;
use rlx_ir::ops::{CompareOp as C, GatherMode, ScatterDims};
use rlx_ir::{DType, NodeId, Shape};

fn zeros(c: &mut Ctx, dims: &[usize], dt: DType) -> NodeId {
    let z = c.scalar(0.0, dt);
    c.g.broadcast_in_dim(z, dims.to_vec(), &[])
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
        r => Err(c.err(format!("reduction {r:?} is not supported (none and add are)"))),
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
