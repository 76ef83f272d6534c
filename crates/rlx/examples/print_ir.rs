//! Prints the IR of a small MLP block with a layer norm and softmax: what `Display` on a
//! `Graph` shows, and its JSON size.
//!
//! `cargo run -p rlx --example print_ir`
use rlx::prelude::*;

fn main() {
    let mut g = Graph::new("block");
    let x = g.input("x", Shape::from_dims(&[Dim::dynamic(), Dim::Static(4)], DType::F32));
    let w = g.param("w", Shape::new(&[4, 3], DType::F32));
    let h = g.mm(x, w);
    let h = g.layer_norm(h, None, None, -1, 1e-5);
    let y = g.softmax(h, -1);
    g.set_outputs(vec![y]);
    println!("{g}");
    println!("json: {} bytes", rlx_ir::hir_to_json(&g).expect("valid graph").len());
}
