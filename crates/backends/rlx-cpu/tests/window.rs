//! Fast f32 `reduce_window` (pooling) against the reference evaluation: max / min exactly,
//! sum within f32 rounding; strides, (negative) padding, base and window dilation, NaN.

mod common;
use common::{EXACT, Tol, check_graph, eps, rand_tensor};
use rlx_ir::ops::ReduceOp;
use rlx_ir::{DType, Graph, Shape, Tensor};

type Case =
    (&'static [usize], &'static [usize], &'static [usize], &'static [(i64, i64)], &'static [usize], &'static [usize]);

#[rustfmt::skip]
const CASES: &[Case] = &[
    // NCHW 2×2 / 2 max pooling (the CNN's), 3×3 / 2 with padding 1, odd sizes.
    (&[2, 3, 8, 8], &[1, 1, 2, 2], &[1, 1, 2, 2], &[(0, 0), (0, 0), (0, 0), (0, 0)], &[1, 1, 1, 1], &[1, 1, 1, 1]),
    (&[2, 2, 7, 9], &[1, 1, 3, 3], &[1, 1, 2, 2], &[(0, 0), (0, 0), (1, 1), (1, 1)], &[1, 1, 1, 1], &[1, 1, 1, 1]),
    // Negative padding, base and window dilation, windows over the batch dim, 1-D.
    (&[3, 10], &[2, 3], &[1, 2], &[(0, -1), (-2, 3)], &[1, 1], &[1, 1]),
    (&[2, 6], &[1, 3], &[1, 1], &[(0, 0), (1, 2)], &[1, 2], &[1, 2]),
    (&[11], &[4], &[3], &[(2, 2)], &[1], &[2]),
    // A window wholly in the padding reads the identity.
    (&[1, 2], &[1, 2], &[1, 1], &[(0, 0), (3, 0)], &[1, 1], &[1, 1]),
];

fn graph(c: &Case, op: ReduceOp) -> Graph {
    let mut g = Graph::new("pool");
    let x = g.input("x", Shape::new(c.0, DType::F32));
    let y = g.reduce_window_dilated(x, op, c.1, c.2, c.3, c.4, c.5);
    g.set_outputs(vec![y]);
    g
}

#[test]
fn matches_reference_table() {
    for c in CASES {
        for op in [ReduceOp::Max, ReduceOp::Min, ReduceOp::Sum] {
            let k: usize = c.1.iter().product();
            let tol = if op == ReduceOp::Sum { Tol { abs: 2.0 * k as f64 * eps(DType::F32), rel: 0.0 } } else { EXACT };
            let feeds = [("x", rand_tensor(c.0, DType::F32, 7, -1.0, 1.0))];
            let ks = check_graph(&graph(c, op), &feeds, None, tol, &format!("{op:?} {c:?}"));
            assert_eq!(ks, vec!["reduce_window_f32"], "{op:?} {c:?}");
        }
    }
}

#[test]
fn nan_propagates() {
    let c = &CASES[0];
    let mut v = rand_tensor(c.0, DType::F32, 9, -1.0, 1.0).to_f32_vec();
    v[5] = f32::NAN;
    let x = Tensor::from_vec(v, c.0).unwrap();
    for op in [ReduceOp::Max, ReduceOp::Min] {
        check_graph(&graph(c, op), &[("x", x.clone())], None, EXACT, "nan");
    }
}
