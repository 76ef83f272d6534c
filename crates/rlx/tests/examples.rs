//! The spec's Quickstart and Simple example, checked against hand-written loops.

use rlx::prelude::*;
use rlx_ir::op::Activation;

#[test]
fn quickstart() {
    let mut g = Graph::new("hello");
    let x = g.input("x", Shape::new(&[1, 4], DType::F32));
    let w = g.param("w", Shape::new(&[4, 2], DType::F32));
    let y = g.matmul(x, w, Shape::new(&[1, 2], DType::F32));
    g.set_outputs(vec![y]);
    let mut compiled = Session::new(Device::Cpu).compile(g);
    compiled.set_param("w", &[1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0]);
    let out = compiled.run(&[("x", &[1.0, 2.0, 3.0, 4.0])]);
    assert_eq!(out[0], vec![4.0, 6.0]);
}

fn matvec(x: &[f32], w: &[f32], n: usize) -> Vec<f32> {
    let mut y = vec![0.0f32; n];
    for (k, &xk) in x.iter().enumerate() {
        for j in 0..n {
            y[j] += xk * w[k * n + j];
        }
    }
    y
}

#[test]
fn simple_mlp_matches_hand_loop() {
    let mut g = Graph::new("mlp");
    let x = g.input("x", Shape::new(&[1, 4], DType::F32));
    let w1 = g.param("w1", Shape::new(&[4, 8], DType::F32));
    let w2 = g.param("w2", Shape::new(&[8, 2], DType::F32));
    let h = g.matmul(x, w1, Shape::new(&[1, 8], DType::F32));
    let h = g.activation(Activation::Relu, h, Shape::new(&[1, 8], DType::F32));
    let y = g.matmul(h, w2, Shape::new(&[1, 2], DType::F32));
    g.set_outputs(vec![y]);

    let w1v: Vec<f32> = (0..32).map(|i| ((i * 7 % 11) as f32 - 5.0) / 10.0).collect();
    let w2v: Vec<f32> = (0..16).map(|i| ((i * 3 % 7) as f32 - 2.0) / 10.0).collect();
    let xv = [1.0f32, 2.0, 3.0, 4.0];
    let mut net = Session::new(Device::Cpu).compile(g);
    net.set_param("w1", &w1v);
    net.set_param("w2", &w2v);
    let out = net.run(&[("x", &xv)]);

    let h: Vec<f32> = matvec(&xv, &w1v, 8).into_iter().map(|v| v.max(0.0)).collect();
    assert!(h.contains(&0.0) && h.iter().any(|&v| v > 0.0), "relu must clip some units");
    let want = matvec(&h, &w2v, 2);
    for (a, b) in out[0].iter().zip(&want) {
        assert!((a - b).abs() <= 1e-5 * b.abs().max(1.0), "{a} vs {b}");
    }
}

#[test]
fn declared_shape_mismatch_is_reported() {
    let mut g = Graph::new("bad");
    let x = g.input("x", Shape::new(&[1, 4], DType::F32));
    let w = g.param("w", Shape::new(&[4, 2], DType::F32));
    let y = g.matmul(x, w, Shape::new(&[1, 3], DType::F32));
    g.set_outputs(vec![y]);
    let e = Session::new(Device::Cpu).try_compile(g).err().expect("declared [1,3] but the product is [1,2]");
    let msg = e.to_string();
    assert!(msg.contains("f32[1,3]") && msg.contains("f32[1,2]"), "{msg}");
}
