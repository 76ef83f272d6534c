//! Fast f32 reductions (`reduce_sum` / `reduce_max` / `reduce_min`) over one contiguous run of
//! axes: the operand is viewed as `[outer, red, inner]`. With `inner == 1` (the last axes) each
//! output is a vectorized pass over a contiguous row; otherwise the kernel accumulates whole
//! inner rows at once. Sums accumulate in f64 like the reference, so they match it to the
//! final rounding; `max`/`min` propagate NaN (`jnp.max`) and return `-inf`/`+inf` for an empty
//! reduction (the monoid identity).

use super::simd::{PAR_THRESHOLD, dispatch, threads};
use rayon::prelude::*;
use rlx_ir::ops::ReduceOp;
use rlx_ir::{IrError, Tensor};

/// A reduction of `[outer, red, inner]` to `[outer, inner]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReduceKernel {
    /// Sum, Max or Min.
    pub op: ReduceOp,
    /// Product of the dims before the reduced axes.
    pub outer: usize,
    /// Product of the reduced dims.
    pub red: usize,
    /// Product of the dims after the reduced axes.
    pub inner: usize,
}

/// Plan a reduction of `dims` over `axes` (sorted, unique); `None` unless the axes are one
/// contiguous run and `op` is sum / max / min.
pub fn plan(op: ReduceOp, dims: &[usize], axes: &[usize]) -> Option<ReduceKernel> {
    if !matches!(op, ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min) || axes.is_empty() {
        return None;
    }
    let (a0, a1) = (axes[0], *axes.last()?);
    if a1 >= dims.len() || axes.iter().enumerate().any(|(i, &a)| a != a0 + i) {
        return None;
    }
    Some(ReduceKernel {
        op,
        outer: dims[..a0].iter().product(),
        red: dims[a0..=a1].iter().product(),
        inner: dims[a1 + 1..].iter().product(),
    })
}

/// Run the reduction into the preallocated `out`.
pub fn run(k: &ReduceKernel, x: &Tensor, out: &mut Tensor) -> Result<(), IrError> {
    let err = || IrError::Eval { op: format!("reduce_{}", k.op.name()), msg: "expected f32 operand and result".into() };
    let x = x.as_slice::<f32>().ok_or_else(err)?;
    let o = out.as_mut_slice::<f32>().ok_or_else(err)?;
    let (red, inner) = (k.red, k.inner);
    if o.is_empty() {
        return Ok(());
    }
    if red == 0 {
        o.fill(match k.op {
            ReduceOp::Sum => 0.0,
            ReduceOp::Max => f32::NEG_INFINITY,
            _ => f32::INFINITY,
        });
        return Ok(());
    }
    let par = x.len() >= PAR_THRESHOLD && threads() > 1;
    if inner == 1 {
        let row = |(i, o): (usize, &mut f32)| *o = reduce_row(k.op, &x[i * red..(i + 1) * red]);
        if par {
            o.par_iter_mut().enumerate().with_min_len((PAR_THRESHOLD / red.max(1)).max(1)).for_each(row);
        } else {
            o.iter_mut().enumerate().for_each(row);
        }
    } else {
        // One task per (outer index, tile of `TILE` output columns).
        const TILE: usize = 64;
        let work = |oi: usize, ti: usize, dst: &mut [f32]| {
            let c0 = ti * TILE;
            let w = dst.len();
            let mut acc = [0f64; TILE];
            let mut accf = [0f32; TILE];
            let mut nan = [false; TILE];
            let src = &x[oi * red * inner + c0..];
            dispatch(
                #[inline(always)]
                || reduce_cols(k.op, src, red, inner, w, &mut acc, &mut accf, &mut nan),
            );
            for j in 0..w {
                dst[j] = match k.op {
                    ReduceOp::Sum => acc[j] as f32,
                    _ if nan[j] => f32::NAN,
                    _ => accf[j],
                };
            }
        };
        if par {
            o.par_chunks_mut(inner)
                .enumerate()
                .for_each(|(oi, row)| row.par_chunks_mut(TILE).enumerate().for_each(|(ti, dst)| work(oi, ti, dst)));
        } else {
            for (oi, row) in o.chunks_mut(inner).enumerate() {
                for (ti, dst) in row.chunks_mut(TILE).enumerate() {
                    work(oi, ti, dst);
                }
            }
        }
    }
    Ok(())
}

/// Reduce `x[r * inner + j]` over `r` for `j < w` into the accumulators.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn reduce_cols(
    op: ReduceOp,
    x: &[f32],
    red: usize,
    inner: usize,
    w: usize,
    acc: &mut [f64; 64],
    accf: &mut [f32; 64],
    nan: &mut [bool; 64],
) {
    let init = if op == ReduceOp::Max { f32::NEG_INFINITY } else { f32::INFINITY };
    accf.fill(init);
    for r in 0..red {
        let row = &x[r * inner..r * inner + w];
        match op {
            ReduceOp::Sum => acc[..w].iter_mut().zip(row).for_each(|(a, &v)| *a += v as f64),
            ReduceOp::Max => accf[..w].iter_mut().zip(nan[..w].iter_mut()).zip(row).for_each(|((a, n), &v)| {
                *n |= v.is_nan();
                *a = if v > *a { v } else { *a };
            }),
            _ => accf[..w].iter_mut().zip(nan[..w].iter_mut()).zip(row).for_each(|((a, n), &v)| {
                *n |= v.is_nan();
                *a = if v < *a { v } else { *a };
            }),
        }
    }
}

/// Reduce one contiguous row.
pub(crate) fn reduce_row(op: ReduceOp, x: &[f32]) -> f32 {
    match op {
        ReduceOp::Sum => dispatch(
            #[inline(always)]
            || sum_f64(x),
        ) as f32,
        ReduceOp::Max => dispatch(
            #[inline(always)]
            || max_row(x),
        ),
        _ => dispatch(
            #[inline(always)]
            || min_row(x),
        ),
    }
}

/// Sum of a row, accumulated in f64 with 16 independent lanes.
#[inline(always)]
pub(crate) fn sum_f64(x: &[f32]) -> f64 {
    let mut acc = [0f64; 16];
    let mut chunks = x.chunks_exact(16);
    for c in &mut chunks {
        for j in 0..16 {
            acc[j] += c[j] as f64;
        }
    }
    let mut s = 0.0;
    for v in chunks.remainder() {
        s += *v as f64;
    }
    s + acc.iter().sum::<f64>()
}

macro_rules! extreme_row {
    ($name:ident, $init:expr, $better:tt) => {
        /// NaN-propagating extreme of a row (identity for an empty row).
        #[inline(always)]
        pub(crate) fn $name(x: &[f32]) -> f32 {
            let mut acc = [$init; 16];
            let mut nan = [false; 16];
            let mut chunks = x.chunks_exact(16);
            for c in &mut chunks {
                for j in 0..16 {
                    nan[j] |= c[j].is_nan();
                    acc[j] = if c[j] $better acc[j] { c[j] } else { acc[j] };
                }
            }
            let mut m = $init;
            let mut any_nan = false;
            for &v in chunks.remainder().iter().chain(acc.iter()) {
                any_nan |= v.is_nan();
                m = if v $better m { v } else { m };
            }
            if any_nan || nan.iter().any(|&n| n) { f32::NAN } else { m }
        }
    };
}
extreme_row!(max_row, f32::NEG_INFINITY, >);
extreme_row!(min_row, f32::INFINITY, <);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_contiguous_runs_only() {
        let k = plan(ReduceOp::Sum, &[2, 3, 4, 5], &[1, 2]).unwrap();
        assert_eq!((k.outer, k.red, k.inner), (2, 12, 5));
        assert!(plan(ReduceOp::Sum, &[2, 3, 4], &[0, 2]).is_none());
        assert!(plan(ReduceOp::Prod, &[2, 3], &[1]).is_none());
    }

    #[test]
    fn rows() {
        let x: Vec<f32> = (0..37).map(|i| i as f32 - 5.0).collect();
        assert_eq!(reduce_row(ReduceOp::Sum, &x), x.iter().sum::<f32>());
        assert_eq!(reduce_row(ReduceOp::Max, &x), 31.0);
        assert_eq!(reduce_row(ReduceOp::Min, &x), -5.0);
        assert_eq!(reduce_row(ReduceOp::Max, &[]), f32::NEG_INFINITY);
        let mut y = x.clone();
        y[20] = f32::NAN;
        assert!(reduce_row(ReduceOp::Max, &y).is_nan());
        assert!(reduce_row(ReduceOp::Min, &y[..21]).is_nan());
    }
}
