//! The README quickstart: a 1x4 @ 4x2 matmul on the CPU. Prints `[4.0, 6.0]`.
//!
//! `cargo run --release -p rlx --example quickstart`
use rlx::prelude::*;

fn main() {
    let mut g = Graph::new("hello");
    let x = g.input("x", Shape::new(&[1, 4], DType::F32));
    let w = g.param("w", Shape::new(&[4, 2], DType::F32));
    let y = g.matmul(x, w, Shape::new(&[1, 2], DType::F32));
    g.set_outputs(vec![y]);

    let mut compiled = Session::new(Device::Cpu).compile(g);
    compiled.set_param("w", &[1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0]);
    let out = compiled.run(&[("x", &[1.0, 2.0, 3.0, 4.0])]);
    assert_eq!(out[0], vec![4.0, 6.0]); // `run` returns one Vec<f32> per graph output
    println!("{:?}", out[0]);
}
