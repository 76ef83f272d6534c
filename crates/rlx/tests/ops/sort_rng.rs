//! Records of the ordering family (`sort`, `top_k`) and of `rng` (checked bit-for-bit against
//! NumPy's Philox stream; the normal transform is transcendental, hence `Close`).

use crate::Rec;
use crate::common::Tol;
use rlx_ir::Shape;

pub fn records() -> Vec<Rec> {
    vec![
        Rec::new("sort", Tol::Exact, |g, x, a| g.sort(x, a.i64("dimension"), a.bool("is_stable"), a.usize("num_keys"))),
        Rec::new("top_k", Tol::Exact, |g, x, a| {
            let (v, i) = g.top_k(x[0], a.usize("k"));
            vec![v, i]
        }),
        Rec::new("rng_uniform", Tol::Exact, |g, _, a| {
            let s = Shape::new(&a.usizes("shape"), a.dtype("dtype"));
            vec![g.rng_uniform(s, a.u64("seed"), a.f64("low"), a.f64("high"))]
        }),
        Rec::new("rng_normal", Tol::Close, |g, _, a| {
            let s = Shape::new(&a.usizes("shape"), a.dtype("dtype"));
            vec![g.rng_normal(s, a.u64("seed"), a.f64("mean"), a.f64("std"))]
        }),
    ]
}
