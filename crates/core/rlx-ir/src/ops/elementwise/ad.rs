//! JVP, transpose and batching rules of the elementwise family.
//!
//! Derivatives follow `jax.lax` (see `docs/autodiff.md` for the points where a function is
//! not differentiable): `abs'(0) = 1`; `max`/`min` split the tangent equally between tied
//! operands (`lax.max`'s `_balanced_eq`); `pow(x, y)` has `∂/∂x = 0` where `y == 0` (JAX does
//! this for integer exponents only and gives NaN at `0⁰` for float ones) and `∂/∂y = 0` where
//! `x == 0`; `sqrt'(0) = +inf`; `sign`, `floor`, `ceil`, `round`,
//! comparisons and integer ops have zero derivative; `stop_gradient` blocks tangents.

use super::super::ad::{AdError, Cx, Tan, broadcasting_operands, not_linear};
use super::{BinaryOp, CompareOp, UnaryOp};
use crate::{Graph, NodeId, Op};

/// Tangent of `y = op(x…)`.
pub(crate) fn jvp(op: &Op, cx: &mut Cx, x: &[NodeId], y: NodeId, t: &[Tan]) -> Result<Tan, AdError> {
    Ok(match op {
        Op::Unary(u) => unary_jvp(*u, cx, x[0], y, t[0]),
        Op::Binary(b) => binary_jvp(*b, cx, x, y, t),
        Op::Compare(_) | Op::StopGradient => None,
        Op::Select => {
            if t[1].is_none() && t[2].is_none() {
                return Ok(None);
            }
            let a = t[1].unwrap_or_else(|| cx.g.scalar_like(0.0, x[1]));
            let b = t[2].unwrap_or_else(|| cx.g.scalar_like(0.0, x[2]));
            let s = cx.g.push(Op::Select, &[x[0], a, b]);
            Some(cx.broadcast_like(s, y))
        }
        Op::ConvertElementType(d) if d.is_float() => cx.linear(op, x, t, |_| true),
        Op::ConvertElementType(_) => None,
        _ => unreachable!("{} is not elementwise", op.name()),
    })
}

fn unary_jvp(u: UnaryOp, cx: &mut Cx, x: NodeId, y: NodeId, t: Tan) -> Tan {
    use UnaryOp::*;
    let t = t?;
    let g = &mut *cx.g;
    let k = |g: &mut Graph, v: f64| g.scalar_like(v, x);
    // `d` is f'(x); a few rules are cheaper written directly.
    let d = match u {
        Neg => return Some(g.neg(t)),
        Abs => {
            let z = k(g, 0.0);
            let pos = g.compare(CompareOp::Ge, x, z);
            let n = g.neg(t);
            return Some(g.select(pos, t, n));
        }
        Sign | Floor | Ceil | Round | RoundNearestEven | Not | IsFinite => return None,
        Exp => y,
        Exp2 => {
            let l = k(g, std::f64::consts::LN_2);
            g.mul(y, l)
        }
        Expm1 => {
            let one = k(g, 1.0);
            g.add(y, one)
        }
        Log => return Some(g.div(t, x)),
        Log1p => {
            let one = k(g, 1.0);
            let d = g.add(x, one);
            return Some(g.div(t, d));
        }
        Sqrt => {
            let h = k(g, 0.5);
            g.div(h, y)
        }
        Rsqrt => {
            let h = k(g, -0.5);
            let r = g.div(y, x);
            g.mul(h, r)
        }
        Cbrt => {
            let third = k(g, 1.0 / 3.0);
            let y2 = g.mul(y, y);
            g.div(third, y2)
        }
        Square => {
            let two = k(g, 2.0);
            g.mul(two, x)
        }
        Reciprocal => {
            let y2 = g.mul(y, y);
            g.neg(y2)
        }
        Sin => g.cos(x),
        Cos => {
            let s = g.sin(x);
            g.neg(s)
        }
        Tan => {
            let one = k(g, 1.0);
            let y2 = g.mul(y, y);
            g.add(one, y2)
        }
        Asin | Acos => {
            let one = k(g, 1.0);
            let x2 = g.mul(x, x);
            let r = g.sub(one, x2);
            let d = g.rsqrt(r);
            if u == Acos { g.neg(d) } else { d }
        }
        Atan => {
            let one = k(g, 1.0);
            let x2 = g.mul(x, x);
            let d = g.add(one, x2);
            return Some(g.div(t, d));
        }
        Sinh => g.unary(Cosh, x),
        Cosh => g.unary(Sinh, x),
        Tanh => {
            let one = k(g, 1.0);
            let y2 = g.mul(y, y);
            g.sub(one, y2)
        }
        Asinh => {
            let one = k(g, 1.0);
            let x2 = g.mul(x, x);
            let r = g.add(x2, one);
            g.rsqrt(r)
        }
        Acosh => {
            let one = k(g, 1.0);
            let a = g.sub(x, one);
            let b = g.add(x, one);
            let r = g.mul(a, b);
            g.rsqrt(r)
        }
        Atanh => {
            let one = k(g, 1.0);
            let x2 = g.mul(x, x);
            let d = g.sub(one, x2);
            return Some(g.div(t, d));
        }
        Logistic => {
            let one = k(g, 1.0);
            let c = g.sub(one, y);
            g.mul(y, c)
        }
        Erf | Erfc => {
            let c = k(g, if u == Erf { 2.0 } else { -2.0 } / std::f64::consts::PI.sqrt());
            let x2 = g.mul(x, x);
            let n = g.neg(x2);
            let e = g.exp(n);
            g.mul(c, e)
        }
        ErfInv => {
            let c = k(g, std::f64::consts::PI.sqrt() / 2.0);
            let y2 = g.mul(y, y);
            let e = g.exp(y2);
            g.mul(c, e)
        }
    };
    Some(g.mul(t, d))
}

/// JAX's `_balanced_eq(a, z, b)`: 1 where `a == z != b`, ½ where all three agree, else 0.
fn balanced_eq(g: &mut Graph, a: NodeId, z: NodeId, b: NodeId) -> NodeId {
    let (one, half, zero) = (g.scalar_like(1.0, a), g.scalar_like(0.5, a), g.scalar_like(0.0, a));
    let az = g.compare(CompareOp::Eq, a, z);
    let bz = g.compare(CompareOp::Eq, b, z);
    let tie = g.select(bz, half, one);
    g.select(az, tie, zero)
}

fn binary_jvp(b: BinaryOp, cx: &mut Cx, x: &[NodeId], y: NodeId, t: &[Tan]) -> Tan {
    use BinaryOp::*;
    let (a, c) = (x[0], x[1]);
    let (ta, tc) = (t[0], t[1]);
    let r = match b {
        Add | Sub => {
            let tc = match (b, tc) {
                (Sub, Some(tc)) => Some(cx.g.neg(tc)),
                (_, tc) => tc,
            };
            cx.add_tan(ta, tc)
        }
        Mul => {
            let l = cx.chain(ta, |_| c);
            let r = cx.chain(tc, |_| a);
            cx.add_tan(l, r)
        }
        Div => {
            let l = ta.map(|ta| cx.g.div(ta, c));
            let r = cx.chain(tc, |g| {
                let q = g.div(y, c);
                g.neg(q)
            });
            cx.add_tan(l, r)
        }
        Rem => {
            let r = cx.chain(tc, |g| {
                let q = g.div(a, c);
                let s = g.sign(q);
                let aq = g.abs(q);
                let f = g.floor(aq);
                let m = g.mul(s, f);
                g.neg(m)
            });
            cx.add_tan(ta, r)
        }
        Pow => {
            let l = cx.chain(ta, |g| {
                let (zero, one) = (g.scalar_like(0.0, c), g.scalar_like(1.0, c));
                let c0 = g.compare(CompareOp::Eq, c, zero);
                let cm1 = g.sub(c, one);
                let p = g.pow(a, cm1);
                let j = g.mul(c, p);
                g.select(c0, zero, j)
            });
            let r = cx.chain(tc, |g| {
                let (zero, one) = (g.scalar_like(0.0, a), g.scalar_like(1.0, a));
                let a0 = g.compare(CompareOp::Eq, a, zero);
                let safe = g.select(a0, one, a);
                let l = g.log(safe);
                g.mul(l, y)
            });
            cx.add_tan(l, r)
        }
        Max | Min => {
            let l = cx.chain(ta, |g| balanced_eq(g, a, y, c));
            let r = cx.chain(tc, |g| balanced_eq(g, c, y, a));
            cx.add_tan(l, r)
        }
        Atan2 => {
            let den = |g: &mut Graph| {
                let a2 = g.mul(a, a);
                let c2 = g.mul(c, c);
                g.add(a2, c2)
            };
            let l = cx.chain(ta, |g| {
                let d = den(g);
                g.div(c, d)
            });
            let r = cx.chain(tc, |g| {
                let d = den(g);
                let q = g.div(a, d);
                g.neg(q)
            });
            cx.add_tan(l, r)
        }
        And | Or | Xor | ShiftLeft | ShiftRightArithmetic | ShiftRightLogical => None,
    };
    // An operand that was broadcast gives a tangent of its own shape: widen it.
    r.map(|r| if cx.ty(r).dims == cx.ty(y).dims { r } else { cx.broadcast_like(r, y) })
}

/// Cotangents of the linear elementwise ops: `neg`, `add`, `sub`, `mul` and `div` (in one
/// operand), `convert_element_type`, and `select`'s branches.
pub(crate) fn transpose(op: &Op, cx: &mut Cx, x: &[NodeId], lin: &[bool], ct: Tan) -> Result<Vec<Tan>, AdError> {
    let ct = ct.expect("checked by the dispatcher");
    let ty = |cx: &Cx, i: usize| cx.ty(x[i]);
    let mut out = vec![None; x.len()];
    match op {
        Op::Unary(UnaryOp::Neg) => out[0] = Some(cx.g.neg(ct)),
        Op::ConvertElementType(_) => out[0] = Some(cx.g.convert(ct, ty(cx, 0).dtype)),
        Op::Binary(BinaryOp::Add | BinaryOp::Sub) => {
            for i in 0..2 {
                if lin[i] {
                    let c = if i == 1 && *op == Op::Binary(BinaryOp::Sub) { cx.g.neg(ct) } else { ct };
                    out[i] = Some(cx.unbroadcast(c, &ty(cx, i)));
                }
            }
        }
        Op::Binary(BinaryOp::Mul) if lin[0] != lin[1] => {
            let i = if lin[0] { 0 } else { 1 };
            let p = cx.g.mul(ct, x[1 - i]);
            out[i] = Some(cx.unbroadcast(p, &ty(cx, i)));
        }
        Op::Binary(BinaryOp::Div) if lin[0] && !lin[1] => {
            let p = cx.g.div(ct, x[1]);
            out[0] = Some(cx.unbroadcast(p, &ty(cx, 0)));
        }
        Op::Select if !lin[0] => {
            for i in 1..3 {
                if lin[i] {
                    let z = cx.g.scalar_like(0.0, ct);
                    let s = if i == 1 { cx.g.select(x[0], ct, z) } else { cx.g.select(x[0], z, ct) };
                    out[i] = Some(cx.unbroadcast(s, &ty(cx, i)));
                }
            }
        }
        _ => return Err(not_linear(op, lin)),
    }
    Ok(out)
}

/// `defvectorized` for unary ops, `defbroadcasting` for the NumPy-broadcasting ones.
pub(crate) fn batch(
    op: &Op,
    cx: &mut Cx,
    x: &[NodeId],
    bd: &[Option<usize>],
) -> Result<(NodeId, Option<usize>), AdError> {
    match op {
        Op::Unary(_) | Op::ConvertElementType(_) | Op::StopGradient => Ok((cx.g.push(op.clone(), x), bd[0])),
        _ => {
            let ins = broadcasting_operands(cx, x, bd);
            Ok((cx.g.push(op.clone(), &ins), Some(0)))
        }
    }
}
