mod common;
use common::*;
use rlx_ir::{DType, Graph, Shape};

#[test]
fn tanh_mul_sum() {
    let mut g = Graph::new("f");
    let x = g.input("x", Shape::new(&[3], DType::F64));
    let w = g.param("w", Shape::new(&[3], DType::F64));
    let t = g.tanh(x);
    let m = g.mul(t, w);
    let s = g.sum(m, &[0], false);
    g.set_outputs(vec![s]);
    let mut rng = Rng(1);
    let p = Point {
        f: &g,
        feeds: vec![
            ("x".into(), rng.tensor(&[3], DType::F64, -1., 1.)),
            ("w".into(), rng.tensor(&[3], DType::F64, -1., 1.)),
        ],
        wrt: vec!["x".into(), "w".into()],
    };
    check_first_order(&p, &mut rng, 1e-6, Tol::FiniteDiff);
}
