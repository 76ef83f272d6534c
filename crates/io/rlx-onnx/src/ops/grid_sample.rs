//! GridSample (opset 16+; 2-D and volumetric): `mode` `linear`/`bilinear`, `nearest`,
//! `cubic`/`bicubic`; `padding_mode` `zeros`, `border`, `reflection`; `align_corners`. As the
//! ONNX reference (`onnx/reference/ops/op_grid_sample.py`): each spatial coordinate is
//! denormalized, rounded half-to-even for `nearest`, moved inside the border for `border` /
//! `reflection`, and interpolated separably over 1 (nearest), 2 (linear) or 4 (cubic, Keys
//! a = -0.75) taps per dim, each tap index mapped by the padding mode (zeros: out-of-range taps
//! read 0).
//!
//! Lowering: `X` `[N, C, *S]` becomes rows `[N·ΠS, C]`; every combination of taps is one
//! `take` of rows by a flat index computed from the grid, weighted and summed; the result
//! `[N, *O, C]` is transposed to `[N, C, *O]`.

use super::Ctx;
use crate::error::Result;
use rlx_ir::ops::{BinaryOp as B, CompareOp as C, UnaryOp as U};
use rlx_ir::{DType, NodeId};

/// Reflect `x` into `[lo, hi]` by the near border, as the reference's `_gs_reflect`.
fn reflect(c: &mut Ctx, x: NodeId, lo: f64, hi: f64) -> NodeId {
    let (lo_n, hi_n) = (c.scalar_like(lo, x), c.scalar_like(hi, x));
    let rng = c.scalar_like(hi - lo, x);
    let half = c.scalar_like(0.5, x);
    // Below: dx = lo - x; above: dx = x - hi.
    let below = c.g.compare(C::Lt, x, lo_n);
    let above = c.g.compare(C::Gt, x, hi_n);
    let d_lo = c.g.sub(lo_n, x);
    let d_hi = c.g.sub(x, hi_n);
    let dx = c.g.select(below, d_lo, d_hi);
    let q = c.g.div(dx, rng);
    let n = c.g.floor(q);
    let nr = c.g.mul(n, rng);
    let r = c.g.sub(dx, nr);
    // n even: n/2 == floor(n/2).
    let nh = c.g.mul(n, half);
    let nhf = c.g.floor(nh);
    let even = c.g.compare(C::Eq, nh, nhf);
    let lo_r = c.g.add(lo_n, r);
    let hi_r = c.g.sub(hi_n, r);
    let from_below = c.g.select(even, lo_r, hi_r);
    let from_above = c.g.select(even, hi_r, lo_r);
    let moved = c.g.select(below, from_below, from_above);
    let outside = c.g.binary(B::Or, below, above);
    c.g.select(outside, moved, x)
}

fn clamp(c: &mut Ctx, x: NodeId, lo: f64, hi: f64) -> NodeId {
    let (l, h) = (c.scalar_like(lo, x), c.scalar_like(hi, x));
    let y = c.g.max(x, l);
    c.g.min(y, h)
}

/// Keys cubic coefficients (a = -0.75) for the fractional offset `t` ∈ [0, 1).
fn cubic(c: &mut Ctx, t: NodeId) -> Vec<NodeId> {
    let a = -0.75;
    let one = c.scalar_like(1.0, t);
    let mut out = vec![];
    for (d, near) in [(1.0, false), (0.0, true), (-1.0, true), (-2.0, false)] {
        // Distance |t + d| (d = 1, 0, -1, -2 for taps -1, 0, 1, 2).
        let off = c.scalar_like(d, t);
        let s = c.g.add(t, off);
        let x = c.g.abs(s);
        let x2 = c.g.mul(x, x);
        let x3 = c.g.mul(x2, x);
        let k = |c: &mut Ctx, v: f64| c.scalar_like(v, t);
        let y = if near {
            let (p3, p2) = (k(c, a + 2.0), k(c, a + 3.0));
            let t3 = c.g.mul(p3, x3);
            let t2 = c.g.mul(p2, x2);
            let y = c.g.sub(t3, t2);
            c.g.add(y, one)
        } else {
            let (p3, p2, p1, p0) = (k(c, a), k(c, 5.0 * a), k(c, 8.0 * a), k(c, 4.0 * a));
            let t3 = c.g.mul(p3, x3);
            let t2 = c.g.mul(p2, x2);
            let t1 = c.g.mul(p1, x);
            let y = c.g.sub(t3, t2);
            let y = c.g.add(y, t1);
            c.g.sub(y, p0)
        };
        out.push(y);
    }
    out
}

/// ONNX `GridSample`.
pub(super) fn grid_sample(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, grid) = (c.x(0)?, c.x(1)?);
    let xd = c.dims(x)?;
    let gd = c.dims(grid)?;
    let nd = xd.len().saturating_sub(2);
    if nd == 0 || gd.len() != nd + 2 || gd[0] != xd[0] || gd[nd + 1] != nd {
        return Err(c.err(format!("needs X [N, C, *S] and grid [N, *O, {nd}], got {xd:?} and {gd:?}")));
    }
    let mode = match c.astr("mode", if c.opset < 20 { "bilinear" } else { "linear" }).as_str() {
        "linear" | "bilinear" => "linear",
        "cubic" | "bicubic" => "cubic",
        "nearest" => "nearest",
        m => return Err(c.err(format!("unknown mode {m:?}"))),
    };
    let padding = c.astr("padding_mode", "zeros");
    if !matches!(padding.as_str(), "zeros" | "border" | "reflection") {
        return Err(c.err(format!("unknown padding_mode {padding:?}")));
    }
    let align = c.ai("align_corners", 0) != 0;
    let (n, ch) = (xd[0], xd[1]);
    let sp = &xd[2..];
    let out_sp = &gd[1..nd + 1];
    let p: usize = out_sp.iter().product();
    let s_total: usize = sp.iter().product();
    let gt = c.dtype(grid);
    let grid = if gt.is_float() { grid } else { c.g.convert(grid, DType::F32) };
    let flat_grid = c.g.reshape(grid, vec![n, p, nd]);
    // Per spatial dim i: its taps as (index node i64 [N, P], weight node [N, P], valid bool or None).
    let mut taps_per_dim = vec![];
    for (i, &len) in sp.iter().enumerate() {
        let comp = c.g.slice_in_dim(flat_grid, nd - 1 - i, nd - i, 2);
        let comp = c.g.reshape(comp, vec![n, p]);
        let lf = len as f64;
        // Denormalize.
        let mut v = if align {
            let (one, k) = (c.scalar_like(1.0, comp), c.scalar_like((lf - 1.0) / 2.0, comp));
            let s = c.g.add(comp, one);
            c.g.mul(s, k)
        } else {
            let (one, k, h) = (c.scalar_like(1.0, comp), c.scalar_like(lf / 2.0, comp), c.scalar_like(0.5, comp));
            let s = c.g.add(comp, one);
            let s = c.g.mul(s, k);
            c.g.sub(s, h)
        };
        if mode == "nearest" {
            v = c.g.unary(U::RoundNearestEven, v);
        }
        let (bmin, bmax) = if align { (0.0, lf - 1.0) } else { (-0.5, lf - 0.5) };
        match padding.as_str() {
            "border" => {
                let (lo, hi) = (c.scalar_like(bmin, v), c.scalar_like(bmax, v));
                let below = c.g.compare(C::Lt, v, lo);
                let above = c.g.compare(C::Gt, v, hi);
                let out = c.g.binary(B::Or, below, above);
                let cl = clamp(c, v, 0.0, lf - 1.0);
                v = c.g.select(out, cl, v);
            }
            "reflection" => v = reflect(c, v, bmin, bmax),
            _ => {}
        }
        let (base, weights, offsets): (NodeId, Vec<NodeId>, Vec<f64>) = match mode {
            "nearest" => {
                let one = c.scalar_like(1.0, v);
                let w = c.g.broadcast_in_dim(one, vec![n, p], &[]);
                (v, vec![w], vec![0.0])
            }
            _ => {
                let f = c.g.floor(v);
                let t = c.g.sub(v, f);
                if mode == "linear" {
                    let one = c.scalar_like(1.0, t);
                    (f, vec![c.g.sub(one, t), t], vec![0.0, 1.0])
                } else {
                    (f, cubic(c, t), vec![-1.0, 0.0, 1.0, 2.0])
                }
            }
        };
        let mut taps = vec![];
        for (w, off) in weights.into_iter().zip(offsets) {
            let o = c.scalar_like(off, base);
            let idx = c.g.add(base, o);
            let (idx, valid) = match padding.as_str() {
                "zeros" => {
                    let (lo, hi) = (c.scalar_like(0.0, idx), c.scalar_like(lf - 1.0, idx));
                    let ge = c.g.compare(C::Ge, idx, lo);
                    let le = c.g.compare(C::Le, idx, hi);
                    (clamp(c, idx, 0.0, lf - 1.0), Some(c.g.binary(B::And, ge, le)))
                }
                "border" => (clamp(c, idx, 0.0, lf - 1.0), None),
                _ => {
                    let r = reflect(c, idx, bmin, bmax);
                    // int(): truncation toward zero.
                    let zero = c.scalar_like(0.0, r);
                    let neg = c.g.compare(C::Lt, r, zero);
                    let (fl, ce) = (c.g.floor(r), c.g.ceil(r));
                    let tr = c.g.select(neg, ce, fl);
                    (clamp(c, tr, 0.0, lf - 1.0), None)
                }
            };
            taps.push((c.g.convert(idx, DType::I64), w, valid));
        }
        taps_per_dim.push(taps);
    }
    // Rows of X: [N·ΠS, C].
    let mut perm = vec![0];
    perm.extend(2..nd + 2);
    perm.push(1);
    let xt = c.g.transpose(x, &perm);
    let rows = c.g.reshape(xt, vec![n * s_total, ch]);
    let xdt = c.dtype(x);
    let batch_off = {
        let io = c.g.iota(rlx_ir::Shape::new(&[n, p], DType::I64), 0);
        let k = c.scalar(s_total as f64, DType::I64);
        c.g.mul(io, k)
    };
    let mut acc: Option<NodeId> = None;
    let combos: usize = taps_per_dim.iter().map(Vec::len).product();
    for mut k in 0..combos {
        let (mut flat, mut w, mut valid): (NodeId, Option<NodeId>, Option<NodeId>) = (batch_off, None, None);
        let mut stride = s_total;
        for (i, taps) in taps_per_dim.iter().enumerate() {
            let (idx, wi, vi) = taps[k % taps.len()];
            k /= taps.len();
            stride /= sp[i];
            let st = c.scalar(stride as f64, DType::I64);
            let term = c.g.mul(idx, st);
            flat = c.g.add(flat, term);
            w = Some(match w {
                None => wi,
                Some(w) => c.g.mul(w, wi),
            });
            if let Some(vi) = vi {
                valid = Some(match valid {
                    None => vi,
                    Some(v) => c.g.binary(B::And, v, vi),
                });
            }
        }
        let mut w = w.expect("at least one spatial dim");
        if let Some(v) = valid {
            let zero = c.scalar_like(0.0, w);
            w = c.g.select(v, w, zero);
        }
        let w = if c.dtype(w) == xdt { w } else { c.g.convert(w, xdt) };
        let flat = c.g.reshape(flat, vec![n * p]);
        let picked = c.g.take(rows, flat, 0);
        let w = c.g.reshape(w, vec![n * p, 1]);
        let term = c.g.mul(picked, w);
        acc = Some(match acc {
            None => term,
            Some(a) => c.g.add(a, term),
        });
    }
    let acc = acc.expect("at least one tap");
    let mut od = vec![n];
    od.extend_from_slice(out_sp);
    od.push(ch);
    let y = c.g.reshape(acc, od);
    let mut back = vec![0, nd + 1];
    back.extend(1..nd + 1);
    Ok(vec![c.g.transpose(y, &back)])
}

/// `AffineGrid` (opset 20): `theta [N, 2, 3]` (2-D) or `[N, 3, 4]` (3-D) and `size` `[N, C, H,
/// W]` / `[N, C, D, H, W]` (known at import time) give the sampling grid `[N, H, W, 2]` /
/// `[N, D, H, W, 3]`: `theta` times the homogeneous base grid `(x, y[, z], 1)`, whose
/// coordinates are the pixel centers in `[-1, 1]` (`align_corners = 0`) or run from -1 to 1
/// (`align_corners = 1`), as the ONNX reference.
pub(super) fn affine_grid(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let theta = c.x(0)?;
    let size = c.ints_in(1)?;
    let spatial: Vec<usize> = size.iter().skip(2).map(|&s| s.max(0) as usize).collect();
    let nd = spatial.len();
    let td = c.dims(theta)?;
    if !(nd == 2 || nd == 3) || td.len() != 3 || td[1] != nd || td[2] != nd + 1 {
        return Err(c.err(format!("theta {td:?} and size {size:?} must be [N, 2, 3] with 4 sizes or [N, 3, 4] with 5")));
    }
    let align = c.ai("align_corners", 0) != 0;
    let coords = |n: usize| -> Vec<f64> {
        (0..n)
            .map(|i| {
                if align {
                    if n == 1 { -1.0 } else { -1.0 + i as f64 * 2.0 / (n - 1) as f64 }
                } else {
                    -1.0 + (2 * i + 1) as f64 / n as f64
                }
            })
            .collect()
    };
    let axes: Vec<Vec<f64>> = spatial.iter().map(|&n| coords(n)).collect();
    let count: usize = spatial.iter().product();
    // Rows (x, y[, z], 1) in row-major order over the spatial dims; x runs along the last.
    let mut base = Vec::with_capacity(count * (nd + 1));
    for flat in 0..count {
        let mut rem = flat;
        let mut idx = vec![0; nd];
        for d in (0..nd).rev() {
            idx[d] = rem % spatial[d];
            rem /= spatial[d];
        }
        for d in (0..nd).rev() {
            base.push(axes[d][idx[d]]);
        }
        base.push(1.0);
    }
    let base = rlx_ir::Tensor::from_vec(base, &[count, nd + 1]).map_err(|e| c.err(e.to_string()))?;
    let base = c.g.constant(base.cast(c.dtype(theta)));
    let dims = rlx_ir::ops::DotGeneral::contract(&[2], &[1]);
    let g = c.g.dot_general(theta, base, dims); // [N, nd, count]
    let g = c.g.transpose(g, &[0, 2, 1]);
    let mut out = vec![td[0]];
    out.extend(&spatial);
    out.push(nd);
    Ok(vec![c.g.reshape(g, out)])
}
