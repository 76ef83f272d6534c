//! Shared test helpers: deterministic random feeds and a numerics comparison.
#![allow(dead_code)]

use rlx_ir::{Graph, Tensor, interp};
use std::collections::HashMap;

/// Relative-plus-absolute tolerance for comparing an optimized graph with the reference: the
/// passes reorder nothing, so results agree to rounding of folded constants.
pub const TOL: f64 = 1e-5;

/// Feeds with values in [-2, 2) from a fixed LCG for every input and param of `g`.
pub fn feeds(g: &Graph, seed: u64) -> HashMap<String, Tensor> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut f = HashMap::new();
    for &id in g.inputs().iter().chain(g.params()) {
        let ty = g.shape(id);
        let dims = ty.static_dims().expect("static test graph");
        let n: usize = dims.iter().product();
        let v: Vec<f64> = (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 2.0
            })
            .collect();
        f.insert(g.source_name(id).unwrap().to_string(), Tensor::from_f64s(&dims, ty.dtype, &v).unwrap());
    }
    f
}

/// Assert `a` and `b` compute the same outputs on random feeds within [`TOL`].
pub fn assert_same_numerics(a: &Graph, b: &Graph) {
    for seed in 0..3 {
        let f = feeds(a, seed);
        let ra = interp::evaluate(a, &f).expect("reference graph evaluates");
        let rb = interp::evaluate(b, &f).expect("optimized graph evaluates");
        assert_eq!(ra.len(), rb.len());
        for (k, (x, y)) in ra.iter().zip(&rb).enumerate() {
            assert_eq!(x.shape(), y.shape(), "output {k} dims");
            assert_eq!(x.dtype(), y.dtype(), "output {k} dtype");
            for (i, (p, q)) in x.to_f64_vec().iter().zip(y.to_f64_vec()).enumerate() {
                let ok = (p.is_nan() && q.is_nan()) || (p - q).abs() <= TOL * (1.0 + p.abs());
                assert!(ok, "output {k} element {i}: reference {p}, optimized {q}");
            }
        }
    }
}
