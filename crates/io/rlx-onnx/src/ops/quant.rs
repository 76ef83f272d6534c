//! Linear quantization: QuantizeLinear / DequantizeLinear (per-tensor and per-axis),
//! DynamicQuantizeLinear, MatMulInteger, QLinearMatMul, ConvInteger, QLinearConv.

use super::Ctx;
use crate::error::Result;
use rlx_ir::ops::UnaryOp as U;
use rlx_ir::{DType, NodeId};

/// A per-axis (1-D) scale or zero point aligned to `axis` of `like`, or a blocked one (rank
/// of `like`, `⌈n / block_size⌉` along `axis`) repeated `block_size` times along it; scalars
/// pass through.
fn per_axis(c: &mut Ctx, t: NodeId, like: NodeId) -> Result<NodeId> {
    let (rt, rl) = (c.rank(t), c.rank(like));
    let block = c.ai("block_size", 0);
    if block > 0 {
        let ax = c.axis(c.ai("axis", 1), rl)?;
        let (td, xd) = (c.dims(t)?, c.dims(like)?);
        let bs = block as usize;
        if td.len() != rl || td[ax] * bs < xd[ax] {
            return Err(c.err(format!("blocked scale {td:?} does not cover {xd:?} with block_size {bs} on axis {ax}")));
        }
        let mut big = td.clone();
        big.insert(ax + 1, bs);
        let keep: Vec<usize> = (0..rl).map(|i| if i <= ax { i } else { i + 1 }).collect();
        let e = c.g.broadcast_in_dim(t, big, &keep);
        let mut flat = td.clone();
        flat[ax] = td[ax] * bs;
        let e = c.g.reshape(e, flat);
        return Ok(c.g.slice_in_dim(e, 0, xd[ax], ax as i64));
    }
    if rt == 1 && rl > 1 {
        let ax = c.axis(c.ai("axis", 1), rl)?;
        let dims = c.sdims(like);
        return Ok(c.g.broadcast_in_dim(t, dims, &[ax]));
    }
    Ok(t)
}

/// Clamp `x` to `to`'s finite range (NaN stays NaN) and convert: ONNX's saturating store.
pub(super) fn saturate(c: &mut Ctx, x: NodeId, to: DType) -> Result<NodeId> {
    let Some((lo, hi)) = to.finite_range().filter(|_| to != DType::I64 && to != DType::U64) else {
        return Err(c.err(format!("quantizing to {to} is not supported")));
    };
    let (l, h) = (c.scalar_like(lo, x), c.scalar_like(hi, x));
    let y = c.g.max(x, l);
    let y = c.g.min(y, h);
    Ok(c.g.convert(y, to))
}

/// `round_half_even(x / scale) + zero_point` saturated to the output type. For a float output
/// (FLOAT8, FLOAT4E2M1) there is no integer rounding: `x / scale + zero_point` is converted
/// with one rounding, saturating unless the node says `saturate=0`.
fn quantize(c: &mut Ctx, x: NodeId, scale: NodeId, zp: Option<NodeId>, to: DType) -> Result<NodeId> {
    let xf = if c.dtype(x) == DType::F32 { x } else { c.g.convert(x, DType::F32) };
    let s = c.g.convert(scale, DType::F32);
    let mut q = c.g.div(xf, s);
    if !to.is_float() {
        q = c.g.unary(U::RoundNearestEven, q);
    }
    if let Some(z) = zp {
        let z = c.g.convert(z, DType::F32);
        q = c.g.add(q, z);
    }
    if to.is_float() && c.ai("saturate", 1) == 0 {
        return Ok(c.g.convert(q, to));
    }
    saturate(c, q, to)
}

pub(super) fn quantize_linear(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, s) = (c.x(0)?, c.x(1)?);
    let s = per_axis(c, s, x)?;
    let zp = match c.opt(2) {
        Some(z) => Some(per_axis(c, z, x)?),
        None => None,
    };
    let to = match c.opt(2) {
        Some(z) => c.dtype(z),
        None => c.adtype("output_dtype", DType::U8)?,
    };
    Ok(vec![quantize(c, x, s, zp, to)?])
}

pub(super) fn dequantize_linear(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, s) = (c.x(0)?, c.x(1)?);
    let sd = c.dtype(s);
    let s = per_axis(c, s, x)?;
    let mut xf = c.g.convert(x, DType::F32);
    if let Some(z) = c.opt(2) {
        let z = per_axis(c, z, x)?;
        let z = c.g.convert(z, DType::F32);
        xf = c.g.sub(xf, z);
    }
    let s = c.g.convert(s, DType::F32);
    let y = c.g.mul(xf, s);
    Ok(vec![c.g.convert(y, sd)])
}

pub(super) fn dynamic_quantize_linear(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let axes: Vec<i64> = (0..c.rank(x) as i64).collect();
    let zero = c.scalar_like(0.0, x);
    let mx = c.g.reduce_max(x, &axes, false);
    let mn = c.g.reduce_min(x, &axes, false);
    let mx = c.g.max(mx, zero);
    let mn = c.g.min(mn, zero);
    let range = c.g.sub(mx, mn);
    let k = c.scalar_like(255.0, x);
    let scale = c.g.div(range, k);
    let nmn = c.g.neg(mn);
    let zpf = c.g.div(nmn, scale);
    let zpf = c.g.unary(U::RoundNearestEven, zpf);
    let zp = saturate(c, zpf, DType::U8)?;
    let y = quantize(c, x, scale, Some(zp), DType::U8)?;
    Ok(vec![y, scale, zp])
}

/// `(x - zero_point)` in i32; a 1-D zero point of `a` is per row (`[M]` → `[M, 1]`).
fn centered(c: &mut Ctx, x: NodeId, zp: Option<NodeId>, row: bool) -> NodeId {
    let xi = c.g.convert(x, DType::I32);
    let Some(z) = zp else { return xi };
    let mut zi = c.g.convert(z, DType::I32);
    if row && c.rank(z) == 1 {
        zi = c.g.expand_dims(zi, -1);
    }
    c.g.sub(xi, zi)
}

pub(super) fn matmul_integer(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (a, b) = (c.x(0)?, c.x(1)?);
    let a = centered(c, a, c.opt(2), true);
    let b = centered(c, b, c.opt(3), false);
    Ok(vec![c.g.mm(a, b)])
}

pub(super) fn qlinear_matmul(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (a, sa, za, b, sb, zb, sy) = (c.x(0)?, c.x(1)?, c.opt(2), c.x(3)?, c.x(4)?, c.opt(5), c.x(6)?);
    let zy = c.opt(7);
    let to = zy.map(|z| c.dtype(z)).unwrap_or(DType::U8);
    let ai = centered(c, a, za, true);
    let bi = centered(c, b, zb, false);
    let acc = c.g.mm(ai, bi);
    let accf = c.g.convert(acc, DType::F32);
    let (sa, sb, sy) = (c.g.convert(sa, DType::F32), c.g.convert(sb, DType::F32), c.g.convert(sy, DType::F32));
    let m = c.g.mul(sa, sb);
    let m = c.g.div(m, sy);
    let y = c.g.mul(accf, m);
    let one = c.scalar(1.0, DType::F32);
    Ok(vec![quantize(c, y, one, zy, to)?])
}

/// `x − zero_point` in f64 (exact for 8- and 16-bit integers); a 1-D zero point of a weight
/// applies per output channel (axis 0).
fn centered_f64(c: &mut Ctx, x: NodeId, zp: Option<NodeId>) -> NodeId {
    let xf = c.g.convert(x, DType::F64);
    let Some(z) = zp else { return xf };
    let mut zf = c.g.convert(z, DType::F64);
    if c.rank(z) == 1 && c.rank(x) > 1 {
        let dims = c.sdims(x);
        zf = c.g.broadcast_in_dim(zf, dims, &[0]);
    }
    c.g.sub(xf, zf)
}

/// A per-output-channel (1-D) factor aligned to axis 1 of `y`; scalars pass through.
fn per_channel(c: &mut Ctx, t: NodeId, y: NodeId) -> NodeId {
    if c.rank(t) != 1 {
        return t;
    }
    let dims = c.sdims(y);
    c.g.broadcast_in_dim(t, dims, &[1])
}

/// `ConvInteger`: `conv(x − x_zero_point, w − w_zero_point)` accumulated exactly (f64) and
/// returned as int32.
pub(super) fn conv_integer(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, w) = (c.x(0)?, c.x(1)?);
    let xc = centered_f64(c, x, c.opt(2));
    let wc = centered_f64(c, w, c.opt(3));
    let y = super::nn::conv_with_attrs(c, xc, wc)?;
    Ok(vec![c.g.convert(y, DType::I32)])
}

/// `QLinearConv`: the integer convolution (plus the int32 bias `B`) rescaled by `x_scale ·
/// w_scale / y_scale` (per output channel when `w_scale` is 1-D) and quantized with
/// `y_zero_point`.
pub(super) fn qlinear_conv(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, sx, zx, w, sw, zw, sy) = (c.x(0)?, c.x(1)?, c.opt(2), c.x(3)?, c.x(4)?, c.opt(5), c.x(6)?);
    let zy = c.opt(7);
    let to = zy.map(|z| c.dtype(z)).unwrap_or(DType::U8);
    let xc = centered_f64(c, x, zx);
    let wc = centered_f64(c, w, zw);
    let mut acc = super::nn::conv_with_attrs(c, xc, wc)?;
    if let Some(b) = c.opt(8) {
        let b = c.g.convert(b, DType::F64);
        acc = super::nn::add_channel_bias(c, acc, b);
    }
    let (sx, sw, sy) = (c.g.convert(sx, DType::F32), c.g.convert(sw, DType::F32), c.g.convert(sy, DType::F32));
    let m = c.g.mul(sx, sw);
    let m = c.g.div(m, sy);
    let accf = c.g.convert(acc, DType::F32);
    let m = per_channel(c, m, accf);
    let y = c.g.mul(accf, m);
    let one = c.scalar(1.0, DType::F32);
    Ok(vec![quantize(c, y, one, zy, to)?])
}
