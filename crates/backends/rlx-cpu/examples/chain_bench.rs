//! Times a chain of `LAYERS` FFN-shaped product pairs `x[M,D] · W1[D,F] · W2[F,D]` with every
//! weight a graph constant (as an imported encoder's), 1 thread, and prints the median time per
//! layer. With many layers the weights no longer stay in L2 between runs, as in a real model.
//!
//! `cargo run --release -p rlx-cpu --example chain_bench -- M D F LAYERS`
//! (bench/RESULTS.md: `128 384 1536 6` vs `... 1`).

#[path = "common/args.rs"]
mod args;
#[path = "common/lcg.rs"]
mod lcg;

use rlx_cpu::{CpuExecutable, CpuOptions};
use rlx_ir::ops::DotGeneral;
use rlx_ir::{DType, Graph, Shape, Tensor};
use std::time::Instant;
fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    const USAGE: &str = "usage: chain_bench M D F LAYERS";
    if a.len() != 4 {
        args::or_usage(Err(format!("expected 4 arguments, got {}", a.len())), "chain_bench", USAGE)
    }
    let num = |i: usize| args::or_usage(args::count(["M", "D", "F", "LAYERS"][i], &a[i]), "chain_bench", USAGE);
    let (m, d, f, layers) = (num(0), num(1), num(2), num(3));
    for (what, dims) in [("x", [m, d]), ("each weight", [d, f]), ("the hidden activations", [m, f])] {
        args::or_usage(args::elements(what, &dims), "chain_bench", USAGE);
    }
    args::or_usage(args::elements("all the weights", &[2 * layers, d, f]), "chain_bench", USAGE);
    let mut rng = lcg::Lcg(7);
    let mut fill = |len: usize| rng.fill(len, -0.05, 0.05);
    let mut g = Graph::new("chain");
    let mut x = g.input("x", Shape::new(&[m, d], DType::F32));
    for _ in 0..layers {
        let w1 = g.constant(Tensor::from_vec(fill(d * f), &[d, f]).unwrap());
        let w2 = g.constant(Tensor::from_vec(fill(d * f), &[f, d]).unwrap());
        let h = g.dot_general(x, w1, DotGeneral::contract(&[1], &[0]));
        x = g.dot_general(h, w2, DotGeneral::contract(&[1], &[0]));
    }
    g.set_outputs(vec![x]);
    let mut exe = args::or_exit(
        CpuExecutable::compile(&g, &CpuOptions { threads: Some(1), ..Default::default() }),
        "chain_bench",
    );
    let xt = Tensor::from_vec(fill(m * d), &[m, d]).unwrap();
    exe.run(&[&xt], &[]).unwrap();
    let mut ts = vec![];
    let st = Instant::now();
    while ts.len() < 20 || st.elapsed().as_secs_f64() < 2.0 {
        let t0 = Instant::now();
        std::hint::black_box(exe.run(&[&xt], &[]).unwrap());
        ts.push(t0.elapsed().as_secs_f64());
    }
    ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let per = ts[ts.len() / 2] / layers as f64;
    println!("layers={layers} per-layer {:.3} ms  {:.1} GFLOP/s", per * 1e3, 4.0 * (m * d * f) as f64 / per / 1e9);
}
