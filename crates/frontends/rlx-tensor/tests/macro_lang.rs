//! The rest of the `rlx!` syntax: literals, precedence, calls with axes and optional operands,
//! dtypes, symbolic dims, several outputs — each graph equals the builder's.

use rlx_ir::{DType, Dim, Graph, Shape};
use rlx_macros::rlx;

#[test]
fn syntax_lowers_to_the_builder_graph() {
    let g = rlx! {
        graph "block";
        input x: [batch, 6];
        input ids: i64[batch];
        param w: [6, 6];  param gamma: [6];  param beta: [6];
        let h = layer_norm(x, gamma, beta);
        let s = -(h @ w * 0.5 + 1) / 2;        // `@` binds like `*`, left to right
        let p = softmax(s, -1);
        let loss = cross_entropy(s, ids);
        let m = max(transpose(p), 1);
        out p, loss, m;
    };
    rlx_ir::verify(&g).unwrap();

    let mut b = Graph::new("block");
    let batch = Dim::Sym("batch".into());
    let x = b.input("x", Shape::from_dims(&[batch.clone(), Dim::Static(6)], DType::F32));
    let ids = b.input("ids", Shape::from_dims(&[batch], DType::I64));
    let w = b.param("w", Shape::new(&[6, 6], DType::F32));
    let gamma = b.param("gamma", Shape::new(&[6], DType::F32));
    let beta = b.param("beta", Shape::new(&[6], DType::F32));
    let h = b.layer_norm(x, Some(gamma), Some(beta), -1, 1e-5);
    let hw = b.mm(h, w);
    let half = b.scalar_like(0.5, hw);
    let t = b.mul(hw, half);
    let one = b.scalar_like(1.0, t);
    let t = b.add(t, one);
    let t = b.neg(t);
    let two = b.scalar_like(2.0, t);
    let s = b.div(t, two);
    let p = b.softmax(s, -1);
    let loss = b.cross_entropy(s, ids);
    let pt = b.transpose(p, &[1, 0]);
    let m = b.reduce_max(pt, &[1], false);
    b.set_outputs(vec![p, loss, m]);
    assert_eq!(rlx_ir::hir_to_json(&g).unwrap(), rlx_ir::hir_to_json(&b).unwrap());
    assert_eq!(g.shape(g.outputs()[2]).to_string(), "f32[6]");
}
