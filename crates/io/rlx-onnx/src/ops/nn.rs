//! Neural-network layers: MatMul, Gemm (alpha/beta/trans), Conv / ConvTranspose (auto_pad,
//! groups, dilations), pooling (ceil_mode, count_include_pad), and the normalizations.

use super::Ctx;
use crate::error::Result;
use rlx_ir::ops::{ConvGeneralDilated, ReduceOp as R};
use rlx_ir::{DType, NodeId};

pub(super) fn matmul(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (a, b) = (c.x(0)?, c.x(1)?);
    Ok(vec![c.g.mm(a, b)])
}

pub(super) fn gemm(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (mut a, mut b) = (c.x(0)?, c.x(1)?);
    if c.ai("transA", 0) != 0 {
        a = c.g.transpose(a, &[1, 0]);
    }
    if c.ai("transB", 0) != 0 {
        b = c.g.transpose(b, &[1, 0]);
    }
    let mut y = c.g.mm(a, b);
    let alpha = c.af("alpha", 1.0) as f64;
    if alpha != 1.0 {
        let k = c.scalar_like(alpha, y);
        y = c.g.mul(k, y);
    }
    if let Some(cc) = c.opt(2) {
        let beta = c.af("beta", 1.0) as f64;
        let mut cc = cc;
        if beta != 1.0 {
            let k = c.scalar_like(beta, cc);
            cc = c.g.mul(k, cc);
        }
        y = c.g.add(y, cc);
    }
    Ok(vec![y])
}

/// Explicit (low, high) padding per spatial dim from `pads` or `auto_pad`.
fn conv_pads(c: &Ctx, inp: &[usize], k: &[usize], s: &[usize], d: &[usize]) -> Result<Vec<(i64, i64)>> {
    let n = inp.len();
    let auto = c.astr("auto_pad", "NOTSET");
    match auto.as_str() {
        "SAME_UPPER" | "SAME_LOWER" => Ok((0..n)
            .map(|i| {
                let out = inp[i].div_ceil(s[i]);
                let total = ((out - 1) * s[i] + (k[i] - 1) * d[i] + 1).saturating_sub(inp[i]) as i64;
                if auto == "SAME_UPPER" { (total / 2, total - total / 2) } else { (total - total / 2, total / 2) }
            })
            .collect()),
        "VALID" => Ok(vec![(0, 0); n]),
        "NOTSET" | "" => {
            let p = c.aints("pads").unwrap_or_else(|| vec![0; 2 * n]);
            if p.len() != 2 * n {
                return Err(c.err(format!("pads {p:?} for {n} spatial dims")));
            }
            Ok((0..n).map(|i| (p[i], p[i + n])).collect())
        }
        other => Err(c.err(format!("auto_pad {other:?}"))),
    }
}

fn spatial_attr(c: &Ctx, name: &str, n: usize) -> Vec<usize> {
    c.aints(name).map(|v| v.iter().map(|&x| x.max(1) as usize).collect()).unwrap_or_else(|| vec![1; n])
}

/// Add a `[C]` bias along axis 1 of an `[N, C, ...]` value.
pub(super) fn add_channel_bias(c: &mut Ctx, y: NodeId, b: NodeId) -> NodeId {
    let dims = c.sdims(y);
    let bb = c.g.broadcast_in_dim(b, dims, &[1]);
    c.g.add(y, bb)
}

pub(super) fn conv(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, w) = (c.x(0)?, c.x(1)?);
    let mut y = conv_with_attrs(c, x, w)?;
    if let Some(b) = c.opt(2) {
        y = add_channel_bias(c, y, b);
    }
    Ok(vec![y])
}

/// `x` convolved with `w` as the node's `strides`, `dilations`, `pads` / `auto_pad` and
/// `group` say (shared by Conv, ConvInteger and QLinearConv).
pub(super) fn conv_with_attrs(c: &mut Ctx, x: NodeId, w: NodeId) -> Result<NodeId> {
    let (xd, wd) = (c.dims(x)?, c.dims(w)?);
    if xd.len() < 3 || wd.len() != xd.len() {
        return Err(c.err(format!("input {xd:?} and weight {wd:?} must be [N, C, *] and [O, C/g, *]")));
    }
    let n = xd.len() - 2;
    let k = &wd[2..];
    let s = spatial_attr(c, "strides", n);
    let d = spatial_attr(c, "dilations", n);
    let padding = conv_pads(c, &xd[2..], k, &s, &d)?;
    let p = ConvGeneralDilated {
        window_strides: s,
        padding,
        lhs_dilation: vec![1; n],
        rhs_dilation: d,
        feature_group_count: c.ai("group", 1).max(1) as usize,
    };
    Ok(c.g.conv_general_dilated(x, w, p))
}

/// `ConvTranspose` as a convolution over the stride-dilated input with the flipped,
/// group-transposed kernel.
pub(super) fn conv_transpose(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, w) = (c.x(0)?, c.x(1)?);
    let (xd, wd) = (c.dims(x)?, c.dims(w)?);
    if xd.len() < 3 || wd.len() != xd.len() {
        return Err(c.err(format!("input {xd:?} and weight {wd:?} must be [N, C, *] and [C, O/g, *]")));
    }
    let n = xd.len() - 2;
    let g = c.ai("group", 1).max(1) as usize;
    let k = wd[2..].to_vec();
    let s = spatial_attr(c, "strides", n);
    let d = spatial_attr(c, "dilations", n);
    let op: Vec<i64> = c.aints("output_padding").unwrap_or_else(|| vec![0; n]);
    let auto = c.astr("auto_pad", "NOTSET");
    let out_shape = c.aints("output_shape");
    let pads: Vec<(i64, i64)> = if out_shape.is_some() || auto.starts_with("SAME") {
        let os: Vec<i64> = match &out_shape {
            Some(o) => o[o.len() - n..].to_vec(),
            None => (0..n).map(|i| (xd[2 + i] * s[i]) as i64).collect(),
        };
        (0..n)
            .map(|i| {
                let full = (s[i] * (xd[2 + i] - 1)) as i64 + op[i] + ((k[i] - 1) * d[i] + 1) as i64;
                // Python's floor division, as the ONNX reference (a negative total pads the output).
                let total = full - os[i];
                let half = total.div_euclid(2);
                if auto == "SAME_UPPER" { (half, total - half) } else { (total - half, half) }
            })
            .collect()
    } else if auto == "VALID" {
        vec![(0, 0); n]
    } else {
        let p = c.aints("pads").unwrap_or_else(|| vec![0; 2 * n]);
        (0..n).map(|i| (p[i], p[i + n])).collect()
    };
    // Output padding beyond what output_shape already accounts for.
    let extra: Vec<i64> = if out_shape.is_some() { vec![0; n] } else { op.clone() };
    let (ci, og) = (wd[0], wd[1]);
    let mut wt = c.g.reshape(w, [vec![g, ci / g, og], k.clone()].concat());
    let mut perm = vec![0, 2, 1];
    perm.extend(3..3 + n);
    wt = c.g.transpose(wt, &perm);
    wt = c.g.reshape(wt, [vec![og * g, ci / g], k.clone()].concat());
    wt = c.g.rev(wt, &(2..2 + n).collect::<Vec<_>>());
    let padding = (0..n)
        .map(|i| {
            let e = ((k[i] - 1) * d[i]) as i64;
            let op_i = if out_shape.is_some() { op[i] } else { extra[i] };
            (e - pads[i].0, e - pads[i].1 + op_i)
        })
        .collect();
    let p = ConvGeneralDilated {
        window_strides: vec![1; n],
        padding,
        lhs_dilation: s,
        rhs_dilation: d,
        feature_group_count: g,
    };
    let mut y = c.g.conv_general_dilated(x, wt, p);
    if let Some(b) = c.opt(2) {
        y = add_channel_bias(c, y, b);
    }
    Ok(vec![y])
}

/// `MaxPool` / `AveragePool` / `LpPool` as `reduce_window`.
pub(super) fn pool(c: &mut Ctx, kind: &str) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let want_indices = kind == "Max" && c.node.output.len() > 1 && !c.node.output[1].is_empty();
    let xd = c.dims(x)?;
    if xd.len() < 3 {
        return Err(c.err(format!("input {xd:?} must be [N, C, *spatial]")));
    }
    let n = xd.len() - 2;
    let k: Vec<usize> =
        c.aints("kernel_shape").ok_or_else(|| c.err("kernel_shape is required"))?.iter().map(|&v| v as usize).collect();
    let s = spatial_attr(c, "strides", n);
    let d = spatial_attr(c, "dilations", n);
    let mut pads = conv_pads(c, &xd[2..], &k, &s, &d)?;
    let explicit = pads.clone();
    if c.ai("ceil_mode", 0) != 0 {
        for i in 0..n {
            let eff = ((k[i] - 1) * d[i] + 1) as i64;
            let span = xd[2 + i] as i64 + pads[i].0 + pads[i].1 - eff;
            let mut out = (span + s[i] as i64 - 1) / s[i] as i64 + 1;
            if (out - 1) * s[i] as i64 >= xd[2 + i] as i64 + pads[i].0 {
                out -= 1;
            }
            let need = (out - 1) * s[i] as i64 + eff - (xd[2 + i] as i64 + pads[i].0 + pads[i].1);
            pads[i].1 += need.max(0);
        }
    }
    let win: Vec<usize> = [vec![1, 1], k.clone()].concat();
    let strides = s.clone();
    let st: Vec<usize> = [vec![1, 1], s].concat();
    let dl: Vec<usize> = [vec![1, 1], d.clone()].concat();
    let ones = vec![1; n + 2];
    let pad_all: Vec<(i64, i64)> = [vec![(0, 0); 2], pads.clone()].concat();
    let y = match kind {
        "Max" => c.g.reduce_window_dilated(x, R::Max, &win, &st, &pad_all, &ones, &dl),
        "Avg" => {
            let sum = c.g.reduce_window_dilated(x, R::Sum, &win, &st, &pad_all, &ones, &dl);
            // Count of the elements each window averages.
            let dt = c.dtype(x);
            let one = c.scalar(1.0, dt);
            let count = if c.ai("count_include_pad", 0) != 0 {
                let padded: Vec<usize> = (0..n + 2)
                    .map(
                        |i| if i < 2 { xd[i] } else { (xd[i] as i64 + explicit[i - 2].0 + explicit[i - 2].1) as usize },
                    )
                    .collect();
                let ones_t = c.g.broadcast_to(one, padded);
                let rest: Vec<(i64, i64)> =
                    [vec![(0, 0); 2], (0..n).map(|i| (0, pads[i].1 - explicit[i].1)).collect()].concat();
                c.g.reduce_window_dilated(ones_t, R::Sum, &win, &st, &rest, &ones, &dl)
            } else {
                let ones_t = c.g.broadcast_to(one, xd.clone());
                c.g.reduce_window_dilated(ones_t, R::Sum, &win, &st, &pad_all, &ones, &dl)
            };
            c.g.div(sum, count)
        }
        _ => {
            let p = c.ai("p", 2) as f64;
            let a = c.g.abs(x);
            let pk = c.scalar_like(p, x);
            let ap = c.g.pow(a, pk);
            let sum = c.g.reduce_window_dilated(ap, R::Sum, &win, &st, &pad_all, &ones, &dl);
            let ip = c.scalar_like(1.0 / p, x);
            c.g.pow(sum, ip)
        }
    };
    if want_indices {
        let geo = Window { k: &k, s: &strides, d: &d, pads: &pads };
        let idx = max_pool_indices(c, x, y, &geo)?;
        return Ok(vec![y, idx]);
    }
    Ok(vec![y])
}

/// A pooling window: kernel, strides, dilations and (begin, end) pads per spatial dim.
struct Window<'a> {
    k: &'a [usize],
    s: &'a [usize],
    d: &'a [usize],
    pads: &'a [(i64, i64)],
}

/// MaxPool's `Indices`: for each window the flat input index (`(n·C + c)·ΠS + spatial`,
/// spatial row-major, or column-major with `storage_order = 1`) of its first maximum in
/// row-major window order, as the ONNX reference. Each window offset compares a strided slice
/// of the input with the pooled maximum; in-bounds masks and spatial indices are constants.
fn max_pool_indices(c: &mut Ctx, x: NodeId, y: NodeId, w: &Window) -> Result<NodeId> {
    let (xd, yd) = (c.dims(x)?, c.dims(y)?);
    let n = xd.len() - 2;
    let (sp_in, sp_out) = (&xd[2..], &yd[2..]);
    let col_major = c.ai("storage_order", 0) != 0;
    let mut place = vec![1usize; n]; // multiplier of each spatial coordinate in the flat index
    for i in 0..n {
        place[i] = if col_major { sp_in[..i].iter().product() } else { sp_in[i + 1..].iter().product() };
    }
    let zero = c.scalar_like(0.0, x);
    let low: Vec<i64> = [vec![0, 0], w.pads.iter().map(|p| p.0.max(0)).collect()].concat();
    let high: Vec<i64> = [vec![0, 0], w.pads.iter().map(|p| p.1.max(0)).collect()].concat();
    let padded = c.g.pad(x, zero, &low, &high, &vec![0; n + 2]);
    let out_n: usize = sp_out.iter().product();
    let kn: usize = w.k.iter().product();
    let (mut res, mut found) = (None::<NodeId>, None::<NodeId>);
    for kf in 0..kn {
        let mut koff = vec![0; n];
        let mut r = kf;
        for i in (0..n).rev() {
            koff[i] = r % w.k[i];
            r /= w.k[i];
        }
        // Constant in-bounds mask and spatial index over the output positions.
        let (mut mask, mut idx) = (Vec::with_capacity(out_n), Vec::with_capacity(out_n));
        for of in 0..out_n {
            let (mut r, mut ok, mut flat) = (of, true, 0i64);
            let mut pos = vec![0; n];
            for i in (0..n).rev() {
                pos[i] = r % sp_out[i];
                r /= sp_out[i];
            }
            for i in 0..n {
                let h = (pos[i] * w.s[i] + koff[i] * w.d[i]) as i64 - w.pads[i].0;
                ok &= h >= 0 && h < sp_in[i] as i64;
                flat += h.max(0) * place[i] as i64;
            }
            mask.push(ok);
            idx.push(flat);
        }
        let bc = |c: &mut Ctx, t: rlx_ir::Tensor| -> Result<NodeId> {
            let t = c.g.constant(t);
            Ok(c.g.broadcast_in_dim(t, yd.clone(), &(2..n + 2).collect::<Vec<_>>()))
        };
        let mask = bc(c, rlx_ir::Tensor::from_vec(mask, sp_out).map_err(|e| c.err(e.to_string()))?)?;
        let idx = bc(c, rlx_ir::Tensor::from_vec(idx, sp_out).map_err(|e| c.err(e.to_string()))?)?;
        let start: Vec<usize> = (0..n + 2).map(|i| if i < 2 { 0 } else { koff[i - 2] * w.d[i - 2] }).collect();
        let limit: Vec<usize> =
            (0..n + 2).map(|i| if i < 2 { xd[i] } else { start[i] + (sp_out[i - 2] - 1) * w.s[i - 2] + 1 }).collect();
        let step: Vec<usize> = (0..n + 2).map(|i| if i < 2 { 1 } else { w.s[i - 2] }).collect();
        let v = c.g.slice(padded, &start, &limit, &step);
        let eq = c.g.compare(rlx_ir::ops::CompareOp::Eq, v, y);
        let mut hit = c.g.binary(rlx_ir::ops::BinaryOp::And, eq, mask);
        if let Some(f) = found {
            let nf = c.g.unary(rlx_ir::ops::UnaryOp::Not, f);
            hit = c.g.binary(rlx_ir::ops::BinaryOp::And, hit, nf);
        }
        res = Some(match res {
            Some(r) => c.g.select(hit, idx, r),
            None => {
                let z = c.scalar(0.0, DType::I64);
                let z = c.g.broadcast_in_dim(z, yd.clone(), &[]);
                c.g.select(hit, idx, z)
            }
        });
        found = Some(match found {
            Some(f) => c.g.binary(rlx_ir::ops::BinaryOp::Or, f, hit),
            None => hit,
        });
    }
    let res = res.ok_or_else(|| c.err("empty kernel"))?;
    // (n·C + c) · ΠS.
    let nc = c.g.iota(rlx_ir::Shape::new(&yd, DType::I64), 0);
    let cc = c.g.iota(rlx_ir::Shape::new(&yd, DType::I64), 1);
    let chans = c.scalar(xd[1] as f64, DType::I64);
    let base = c.g.mul(nc, chans);
    let base = c.g.add(base, cc);
    let per = c.scalar(sp_in.iter().product::<usize>() as f64, DType::I64);
    let base = c.g.mul(base, per);
    Ok(c.g.add(res, base))
}

pub(super) fn global_pool(c: &mut Ctx, op: R) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let axes: Vec<i64> = (2..c.rank(x) as i64).collect();
    Ok(vec![if op == R::Max { c.g.reduce_max(x, &axes, true) } else { c.g.mean(x, &axes, true) }])
}

/// Normalize `x` over `axes` (biased variance): `(x - mean) · rsqrt(var + eps)`; also returns
/// the mean and the inverse std (keepdims).
fn normalize(c: &mut Ctx, x: NodeId, axes: &[i64], eps: f64) -> (NodeId, NodeId, NodeId) {
    let m = c.g.mean(x, axes, true);
    let dx = c.g.sub(x, m);
    let sq = c.g.mul(dx, dx);
    let var = c.g.mean(sq, axes, true);
    let e = c.scalar_like(eps, var);
    let ve = c.g.add(var, e);
    let inv = c.g.rsqrt(ve);
    (c.g.mul(dx, inv), m, inv)
}

/// Run in f32 for 16-bit inputs, as ONNX's `stash_type = 1` does.
fn stash(c: &mut Ctx, x: NodeId) -> (NodeId, DType) {
    let d = c.dtype(x);
    if matches!(d, DType::F16 | DType::BF16) { (c.g.convert(x, DType::F32), d) } else { (x, d) }
}

pub(super) fn layer_norm(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x0 = c.x(0)?;
    let r = c.rank(x0);
    let ax = c.axis(c.ai("axis", -1), r)?;
    let eps = c.af("epsilon", 1e-5) as f64;
    // Only `Y` wanted from f32 `X` with a scale (and bias) of type `X.dims[axis..]`: the
    // `layer_norm` composite, one native CPU kernel (the primitives below ran as three fused
    // passes with two row reductions: 5x slower on MiniLM's [1, 128, 384]).
    let only_y = c.node.output.iter().skip(1).all(|o| o.is_empty());
    let feature = |c: &Ctx, p: Option<NodeId>| {
        p.is_none_or(|p| {
            let (xs, ps) = (c.g.shape(x0), c.g.shape(p));
            ps.dtype == xs.dtype && ps.dims[..] == xs.dims[ax..]
        })
    };
    if only_y && c.dtype(x0) == DType::F32 && c.opt(1).is_some() && feature(c, c.opt(1)) && feature(c, c.opt(2)) {
        return Ok(vec![c.g.layer_norm(x0, c.opt(1), c.opt(2), ax as i64, eps)]);
    }
    let axes: Vec<i64> = (ax as i64..r as i64).collect();
    let (x, d) = stash(c, x0);
    let (mut y, m, inv) = normalize(c, x, &axes, eps);
    y = c.g.convert(y, d);
    if let Some(s) = c.opt(1) {
        y = c.g.mul(y, s);
    }
    if let Some(b) = c.opt(2) {
        y = c.g.add(y, b);
    }
    Ok(vec![y, m, inv])
}

pub(super) fn rms_norm(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x0 = c.x(0)?;
    let r = c.rank(x0);
    let ax = c.axis(c.ai("axis", -1), r)?;
    let eps = c.af("epsilon", 1e-5) as f64;
    let axes: Vec<i64> = (ax as i64..r as i64).collect();
    let (x, d) = stash(c, x0);
    let sq = c.g.mul(x, x);
    let ms = c.g.mean(sq, &axes, true);
    let e = c.scalar_like(eps, ms);
    let ms = c.g.add(ms, e);
    let inv = c.g.rsqrt(ms);
    let mut y = c.g.mul(x, inv);
    y = c.g.convert(y, d);
    if let Some(s) = c.opt(1) {
        y = c.g.mul(y, s);
    }
    Ok(vec![y])
}

pub(super) fn batch_norm(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, sc, b, m0, v0) = (c.x(0)?, c.x(1)?, c.x(2)?, c.x(3)?, c.x(4)?);
    let eps = c.af("epsilon", 1e-5) as f64;
    let dims = c.sdims(x);
    // training_mode: normalize by the batch statistics (population variance over every axis
    // but 1) and also return the running statistics `running · momentum + batch · (1 −
    // momentum)`, as the ONNX reference.
    let training = c.ai("training_mode", 0) != 0;
    let (m, v) = if training {
        let axes: Vec<i64> = (0..dims.len() as i64).filter(|&a| a != 1).collect();
        let bm = c.g.mean(x, &axes, false);
        let bmb = c.g.broadcast_in_dim(bm, dims.clone(), &[1]);
        let d = c.g.sub(x, bmb);
        let d2 = c.g.mul(d, d);
        (bm, c.g.mean(d2, &axes, false))
    } else {
        (m0, v0)
    };
    let bc = |c: &mut Ctx, t: NodeId| c.g.broadcast_in_dim(t, dims.clone(), &[1]);
    let (scb, bb, mb, vb) = (bc(c, sc), bc(c, b), bc(c, m), bc(c, v));
    let e = c.scalar_like(eps, vb);
    let ve = c.g.add(vb, e);
    let inv = c.g.rsqrt(ve);
    let dx = c.g.sub(x, mb);
    let y = c.g.mul(dx, inv);
    let y = c.g.mul(y, scb);
    let y = c.g.add(y, bb);
    if !training {
        return Ok(vec![y]);
    }
    let mom = c.af("momentum", 0.9) as f64;
    let run = |c: &mut Ctx, old: NodeId, batch: NodeId| {
        let (k, k1) = (c.scalar_like(mom, old), c.scalar_like(1.0 - mom, batch));
        let a = c.g.mul(old, k);
        let b = c.g.mul(batch, k1);
        c.g.add(a, b)
    };
    let (rm, rv) = (run(c, m0, m), run(c, v0, v));
    Ok(vec![y, rm, rv])
}

pub(super) fn instance_norm(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, sc, b) = (c.x(0)?, c.x(1)?, c.x(2)?);
    let eps = c.af("epsilon", 1e-5) as f64;
    let axes: Vec<i64> = (2..c.rank(x) as i64).collect();
    let (y, _, _) = normalize(c, x, &axes, eps);
    let dims = c.sdims(x);
    let sc = c.g.broadcast_in_dim(sc, dims.clone(), &[1]);
    let b = c.g.broadcast_in_dim(b, dims, &[1]);
    let y = c.g.mul(y, sc);
    Ok(vec![c.g.add(y, b)])
}

pub(super) fn group_norm(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x0, sc, b) = (c.x(0)?, c.x(1)?, c.x(2)?);
    let eps = c.af("epsilon", 1e-5) as f64;
    let groups = c.ai("num_groups", 1).max(1) as usize;
    let xd = c.dims(x0)?;
    let ch = xd[1];
    if ch % groups != 0 {
        return Err(c.err(format!("{ch} channels are not divisible into {groups} groups")));
    }
    let (x, d) = stash(c, x0);
    let rest: usize = xd[2..].iter().product();
    let xr = c.g.reshape(x, [xd[0], groups, ch / groups * rest]);
    let (y, _, _) = normalize(c, xr, &[2], eps);
    let y = c.g.reshape(y, xd.clone());
    let y = c.g.convert(y, d);
    // Opset 18 takes per-group scale and bias; 21 per-channel.
    let per_channel = |c: &mut Ctx, t: NodeId| -> Result<NodeId> {
        let n = c.dims(t)?[0];
        if n == ch {
            return Ok(t);
        }
        let bb = c.g.broadcast_in_dim(t, [groups, ch / groups], &[0]);
        Ok(c.g.reshape(bb, [ch]))
    };
    let (sc, b) = (per_channel(c, sc)?, per_channel(c, b)?);
    let sc = c.g.broadcast_in_dim(sc, xd.clone(), &[1]);
    let b = c.g.broadcast_in_dim(b, xd, &[1]);
    let y = c.g.mul(y, sc);
    Ok(vec![c.g.add(y, b)])
}

pub(super) fn lp_norm(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let ax = c.axis(c.ai("axis", -1), c.rank(x))? as i64;
    let n = if c.ai("p", 2) == 1 {
        let a = c.g.abs(x);
        c.g.sum(a, &[ax], true)
    } else {
        let sq = c.g.mul(x, x);
        let s = c.g.sum(sq, &[ax], true);
        c.g.sqrt(s)
    };
    // A zero norm gives 0, not NaN (the ONNX reference).
    let zero = c.scalar_like(0.0, n);
    let is0 = c.g.compare(rlx_ir::ops::CompareOp::Eq, n, zero);
    let q = c.g.div(x, n);
    let dims = c.sdims(q);
    let is0 = c.g.broadcast_to(is0, dims);
    let z = c.scalar_like(0.0, q);
    Ok(vec![c.g.select(is0, z, q)])
}

pub(super) fn mvn(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let axes = c.aints("axes").unwrap_or_else(|| vec![0, 2, 3]);
    let m = c.g.mean(x, &axes, true);
    let sq = c.g.mul(x, x);
    let msq = c.g.mean(sq, &axes, true);
    let m2 = c.g.mul(m, m);
    let var = c.g.sub(msq, m2);
    let std = c.g.sqrt(var);
    let e = c.scalar_like(1e-9, std);
    let den = c.g.add(std, e);
    let dx = c.g.sub(x, m);
    Ok(vec![c.g.div(dx, den)])
}

pub(super) fn lrn(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let size = c.ai("size", 1).max(1) as usize;
    let (alpha, beta, bias) = (c.af("alpha", 1e-4) as f64, c.af("beta", 0.75) as f64, c.af("bias", 1.0) as f64);
    let r = c.rank(x);
    let sq = c.g.mul(x, x);
    let mut win = vec![1; r];
    win[1] = size;
    let mut pad = vec![(0i64, 0i64); r];
    pad[1] = (((size - 1) / 2) as i64, (size - 1).div_ceil(2) as i64);
    let s = c.g.reduce_window(sq, R::Sum, &win, &vec![1; r], &pad);
    let k = c.scalar_like(alpha / size as f64, x);
    let b = c.scalar_like(bias, x);
    let p = c.scalar_like(beta, x);
    let t = c.g.mul(k, s);
    let t = c.g.add(b, t);
    let t = c.g.pow(t, p);
    Ok(vec![c.g.div(x, t)])
}
