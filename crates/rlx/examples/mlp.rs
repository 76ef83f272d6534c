//! The spec's "Simple example": a 2-layer MLP (4 -> 8 -> relu -> 2) compiled for the CPU.
//! Weights are deterministic so the printed output is reproducible; the test
//! `tests/examples.rs` checks the same graph against a hand-written loop.
//!
//! `cargo run --release -p rlx --example mlp`
use rlx::prelude::*;
use rlx_ir::op::Activation;

fn main() {
    let mut g = Graph::new("mlp");
    let x = g.input("x", Shape::new(&[1, 4], DType::F32));
    let w1 = g.param("w1", Shape::new(&[4, 8], DType::F32));
    let w2 = g.param("w2", Shape::new(&[8, 2], DType::F32));

    let h = g.matmul(x, w1, Shape::new(&[1, 8], DType::F32));
    let h = g.activation(Activation::Relu, h, Shape::new(&[1, 8], DType::F32));
    let y = g.matmul(h, w2, Shape::new(&[1, 2], DType::F32));
    g.set_outputs(vec![y]);

    // Deterministic weights with mixed signs, so relu actually clips some units.
    let w1_weights: Vec<f32> = (0..32).map(|i| ((i * 7 % 11) as f32 - 5.0) / 10.0).collect();
    let w2_weights: Vec<f32> = (0..16).map(|i| ((i * 3 % 7) as f32 - 2.0) / 10.0).collect();

    let mut net = Session::new(Device::Cpu).compile(g);
    net.set_param("w1", &w1_weights); // &[f32], len 4*8
    net.set_param("w2", &w2_weights); // &[f32], len 8*2
    let out = net.run(&[("x", &[1.0, 2.0, 3.0, 4.0])]);
    println!("{:?}", out[0]); // the 2 outputs
}
