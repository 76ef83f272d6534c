//! Elementwise ops and activations: ONNX semantics over `jax.lax` primitives.

use super::Ctx;
use crate::error::Result;
use rlx_ir::ops::{BinaryOp as B, CompareOp as C, UnaryOp as U};
use rlx_ir::{DType, NodeId};

pub(super) fn unary(c: &mut Ctx, op: U) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    Ok(vec![c.g.unary(op, x)])
}

pub(super) fn binary(c: &mut Ctx, op: B) -> Result<Vec<NodeId>> {
    let (a, b) = (c.x(0)?, c.x(1)?);
    Ok(vec![c.g.binary(op, a, b)])
}

pub(super) fn cmp(c: &mut Ctx, op: C) -> Result<Vec<NodeId>> {
    let (a, b) = (c.x(0)?, c.x(1)?);
    Ok(vec![c.g.compare(op, a, b)])
}

/// `Max`, `Min`, `Sum`: fold a binary op over every input (broadcasting).
pub(super) fn variadic(c: &mut Ctx, op: B) -> Result<Vec<NodeId>> {
    let xs = c.all();
    let mut acc = *xs.first().ok_or_else(|| c.err("needs at least one input"))?;
    for &x in &xs[1..] {
        acc = c.g.binary(op, acc, x);
    }
    Ok(vec![acc])
}

pub(super) fn mean(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let n = c.all().len();
    let s = variadic(c, B::Add)?[0];
    let k = c.scalar_like(n as f64, s);
    Ok(vec![c.g.div(s, k)])
}

/// `Div`: integer division truncates toward zero (C, and ONNX Runtime).
pub(super) fn div(c: &mut Ctx) -> Result<Vec<NodeId>> {
    binary(c, B::Div)
}

/// `Pow(X, Y)`: `Y` may have another dtype; the result has `X`'s.
pub(super) fn pow(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, y) = (c.x(0)?, c.x(1)?);
    let d = c.dtype(x);
    if d.is_int() && c.dtype(y).is_float() {
        let xf = c.g.convert(x, c.dtype(y));
        let p = c.g.pow(xf, y);
        return Ok(vec![c.g.convert(p, d)]);
    }
    let y = c.g.convert(y, d);
    Ok(vec![c.g.pow(x, y)])
}

/// `Mod`: `fmod = 1` is C's `fmod` (`lax.rem`); `fmod = 0` takes the divisor's sign (Python).
pub(super) fn modulo(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (a, b) = (c.x(0)?, c.x(1)?);
    let r = c.g.rem(a, b);
    if c.ai("fmod", 0) == 1 {
        return Ok(vec![r]);
    }
    let zero = c.scalar_like(0.0, r);
    let r_nz = c.g.compare(C::Ne, r, zero);
    let r_neg = c.g.compare(C::Lt, r, zero);
    let b_neg = c.g.compare(C::Lt, b, zero);
    let differ = c.g.compare(C::Ne, r_neg, b_neg);
    let fix = c.g.binary(B::And, r_nz, differ);
    let rb = c.g.add(r, b);
    Ok(vec![c.g.select(fix, rb, r)])
}

pub(super) fn bit_shift(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let op = match c.astr("direction", "").as_str() {
        "LEFT" => B::ShiftLeft,
        "RIGHT" => B::ShiftRightLogical,
        d => return Err(c.err(format!("direction {d:?} is neither LEFT nor RIGHT"))),
    };
    binary(c, op)
}

pub(super) fn where_(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (p, a, b) = (c.x(0)?, c.x(1)?, c.x(2)?);
    Ok(vec![c.g.select(p, a, b)])
}

pub(super) fn is_nan(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    Ok(vec![c.g.compare(C::Ne, x, x)])
}

pub(super) fn is_inf(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let (pos, neg) = (c.ai("detect_positive", 1) != 0, c.ai("detect_negative", 1) != 0);
    let pinf = c.scalar_like(f64::INFINITY, x);
    let ninf = c.scalar_like(f64::NEG_INFINITY, x);
    let p = c.g.compare(C::Eq, x, pinf);
    let n = c.g.compare(C::Eq, x, ninf);
    Ok(vec![match (pos, neg) {
        (true, true) => c.g.binary(B::Or, p, n),
        (true, false) => p,
        (false, true) => n,
        (false, false) => c.g.compare(C::Ne, p, p),
    }])
}

/// `convert_element_type`, except that a FLOAT8 target with `saturate=1` (the default)
/// clamps to the target's finite range first (∞ → ±max, NaN stays NaN), as ONNX specifies;
/// with `saturate=0` the conversion follows the type (overflow → ∞ or NaN).
fn cast_to(c: &mut Ctx, x: NodeId, to: DType) -> Result<NodeId> {
    let float8 = matches!(to, DType::F8E4M3FN | DType::F8E4M3FNUZ | DType::F8E5M2 | DType::F8E5M2FNUZ);
    if float8 && c.ai("saturate", 1) != 0 && c.dtype(x) != to {
        return super::quant::saturate(c, x, to);
    }
    Ok(c.g.convert(x, to))
}

pub(super) fn cast(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let to = c.adtype("to", DType::F32)?;
    Ok(vec![cast_to(c, x, to)?])
}

pub(super) fn cast_like(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, like) = (c.x(0)?, c.x(1)?);
    let to = c.dtype(like);
    Ok(vec![cast_to(c, x, to)?])
}

/// `Clip`: bounds are attributes before opset 11, optional inputs after.
pub(super) fn clip(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let mut x = c.x(0)?;
    let (lo, hi) = if c.opset < 11 {
        let lo = c.has("min").then(|| c.af("min", 0.0) as f64);
        let hi = c.has("max").then(|| c.af("max", 0.0) as f64);
        (lo.map(|v| c.scalar_like(v, x)), hi.map(|v| c.scalar_like(v, x)))
    } else {
        (c.opt(1), c.opt(2))
    };
    if let Some(lo) = lo {
        x = c.g.max(x, lo);
    }
    if let Some(hi) = hi {
        x = c.g.min(x, hi);
    }
    Ok(vec![x])
}

/// `Dropout` in inference: identity, mask all true. Training mode with a nonzero ratio draws
/// random numbers and is not supported.
pub(super) fn dropout(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let training = c.opt(2).is_some() && c.ints_in(2)?.first().copied().unwrap_or(0) != 0;
    let ratio = if c.opt(1).is_some() { c.floats_in(1)?.first().copied().unwrap_or(0.5) } else { 0.5 };
    if training && ratio != 0.0 {
        return Err(c.err("training_mode with a nonzero ratio (random masks) is not supported"));
    }
    let t = c.scalar(1.0, DType::Bool);
    let dims = c.sdims(x);
    let mask = c.g.broadcast_to(t, dims);
    Ok(vec![x, mask])
}

pub(super) fn prelu(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, slope) = (c.x(0)?, c.x(1)?);
    let zero = c.scalar_like(0.0, x);
    let neg = c.g.compare(C::Lt, x, zero);
    let sx = c.g.mul(x, slope);
    let dims = c.sdims(sx);
    let xb = c.g.broadcast_to(x, dims.clone());
    let nb = c.g.broadcast_to(neg, dims);
    Ok(vec![c.g.select(nb, sx, xb)])
}

/// Activations with attributes, as ONNX defines them.
pub(super) fn act(c: &mut Ctx, name: &str) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let k = |c: &mut Ctx, v: f64| c.scalar_like(v, x);
    let zero = k(c, 0.0);
    let one = k(c, 1.0);
    let y = match name {
        "Relu" => c.g.max(x, zero),
        "LeakyRelu" => {
            let a = k(c, c.af("alpha", 0.01) as f64);
            let ax = c.g.mul(a, x);
            let neg = c.g.compare(C::Lt, x, zero);
            c.g.select(neg, ax, x)
        }
        "Elu" | "Selu" => {
            let (da, dg) = if name == "Elu" { (1.0, 1.0) } else { (1.673_263_2, 1.050_701) };
            let a = k(c, c.af("alpha", da) as f64);
            let em1 = c.g.unary(U::Expm1, x);
            let neg = c.g.mul(a, em1);
            let le = c.g.compare(if name == "Elu" { C::Lt } else { C::Le }, x, zero);
            let y = c.g.select(le, neg, x);
            if name == "Elu" {
                y
            } else {
                let gm = k(c, c.af("gamma", dg) as f64);
                c.g.mul(gm, y)
            }
        }
        "Celu" => {
            let a = k(c, c.af("alpha", 1.0) as f64);
            let xa = c.g.div(x, a);
            let em1 = c.g.unary(U::Expm1, xa);
            let n = c.g.mul(a, em1);
            let n = c.g.min(zero, n);
            let p = c.g.max(zero, x);
            c.g.add(p, n)
        }
        "HardSigmoid" | "HardSwish" => {
            let (da, db) = if name == "HardSigmoid" { (0.2, 0.5) } else { (1.0 / 6.0, 0.5) };
            let a = k(c, if name == "HardSigmoid" { c.af("alpha", da as f32) as f64 } else { da });
            let b = k(c, if name == "HardSigmoid" { c.af("beta", db as f32) as f64 } else { db });
            let ax = c.g.mul(a, x);
            let t = c.g.add(ax, b);
            let t = c.g.min(t, one);
            let h = c.g.max(t, zero);
            if name == "HardSigmoid" { h } else { c.g.mul(x, h) }
        }
        "Softplus" => softplus(c, x),
        "Softsign" => {
            let a = c.g.abs(x);
            let d = c.g.add(one, a);
            c.g.div(x, d)
        }
        "ThresholdedRelu" => {
            let a = k(c, c.af("alpha", 1.0) as f64);
            let gt = c.g.compare(C::Gt, x, a);
            c.g.select(gt, x, zero)
        }
        "Mish" => {
            let sp = softplus(c, x);
            let t = c.g.tanh(sp);
            c.g.mul(x, t)
        }
        "Gelu" => {
            let approx = c.astr("approximate", "none") == "tanh";
            c.g.gelu(x, approx)
        }
        "Swish" => {
            let a = k(c, c.af("alpha", 1.0) as f64);
            let ax = c.g.mul(a, x);
            let s = c.g.logistic(ax);
            c.g.mul(x, s)
        }
        "Shrink" => {
            let l = c.af("lambd", 0.5) as f64;
            let b = k(c, c.af("bias", 0.0) as f64);
            let (lp, ln) = (k(c, l), k(c, -l));
            let lo = c.g.compare(C::Lt, x, ln);
            let hi = c.g.compare(C::Gt, x, lp);
            let xpb = c.g.add(x, b);
            let xmb = c.g.sub(x, b);
            let t = c.g.select(hi, xmb, zero);
            c.g.select(lo, xpb, t)
        }
        other => return Err(c.err(format!("no activation {other}"))),
    };
    Ok(vec![y])
}

/// `log(1 + exp(x))`, stable for large `x`: `max(x, 0) + log1p(exp(-|x|))`.
fn softplus(c: &mut Ctx, x: NodeId) -> NodeId {
    let zero = c.scalar_like(0.0, x);
    let a = c.g.abs(x);
    let na = c.g.neg(a);
    let e = c.g.exp(na);
    let l = c.g.log1p(e);
    let m = c.g.max(x, zero);
    c.g.add(m, l)
}
