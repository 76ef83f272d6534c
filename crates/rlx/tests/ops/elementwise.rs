//! Records of the elementwise family: unary, binary, compare, select, convert_element_type,
//! stop_gradient. One record per op; the fixtures hold one case per accepted dtype plus shape
//! variants (rank 0, size-0 and size-1 dims, broadcasting, non-contiguous operands).

use crate::Rec;
use crate::common::Tol;
use rlx_ir::Tensor;
use rlx_ir::ops::{BinaryOp, CompareOp, UnaryOp};

/// Unary ops whose result is exactly defined (no transcendental rounding).
fn unary_tol(u: UnaryOp) -> Tol {
    use UnaryOp::*;
    match u {
        Neg | Abs | Sign | Floor | Ceil | Round | RoundNearestEven | Sqrt | Square | Reciprocal | Not | IsFinite => {
            Tol::Exact
        }
        _ => Tol::Close,
    }
}

/// Binary ops: IEEE-exact arithmetic is `Exact`; `pow` and `atan2` are transcendental.
fn binary_tol(b: BinaryOp) -> Tol {
    match b {
        BinaryOp::Pow | BinaryOp::Atan2 => Tol::Close,
        _ => Tol::Exact,
    }
}

pub fn records() -> Vec<Rec> {
    let mut v = vec![];
    for u in UnaryOp::ALL {
        v.push(Rec::new(u.name(), unary_tol(u), move |g, x, _| vec![g.unary(u, x[0])]));
    }
    for b in BinaryOp::ALL {
        v.push(Rec::new(b.name(), binary_tol(b), move |g, x, _| vec![g.binary(b, x[0], x[1])]));
    }
    for c in CompareOp::ALL {
        v.push(Rec::new(c.name(), Tol::Exact, move |g, x, _| vec![g.compare(c, x[0], x[1])]));
    }
    v.push(Rec::new("select", Tol::Exact, |g, x, _| vec![g.select(x[0], x[1], x[2])]));
    v.push(Rec::new("convert_element_type", Tol::Exact, |g, x, a| vec![g.convert(x[0], a.dtype("dtype"))]));
    v.push(Rec::new("constant", Tol::Exact, |g, _, a| {
        let t = Tensor::from_f64s(&a.usizes("shape"), a.dtype("dtype"), &a.f64s("values")).expect("shape fits values");
        vec![g.constant(t)]
    }));
    v.push(Rec::new("stop_gradient", Tol::Exact, |g, x, _| vec![g.stop_gradient(x[0])]));
    v
}
