//! Matmul epilogues (`rlx_compile::passes::epilogue` + the `dot_epilogue` kernel): linear +
//! bias + activation + residual compiled with all passes against the same graph compiled with
//! `optimize` off and against the reference interpreter, on fixed and random shapes, on one and
//! two threads; a product that is also a graph output is never absorbed.

mod common;

use common::{Tol, assert_close, check_graph, rand_tensor};
use proptest::prelude::*;
use rlx_compile::PassOptions;
use rlx_cpu::{CpuExecutable, CpuOptions};
use rlx_ir::{DType, Graph, NodeId, Shape, Tensor};

const TOL: Tol = Tol { abs: 1e-5, rel: 1e-5 };
const ACTS: [&str; 5] = ["none", "relu", "gelu", "gelu_tanh", "silu"];

fn f32s(d: &[usize]) -> Shape {
    Shape::new(d, DType::F32)
}

fn act(g: &mut Graph, a: &str, y: NodeId) -> NodeId {
    match a {
        "relu" => g.relu(y),
        "gelu" => g.gelu(y, false),
        "gelu_tanh" => g.gelu(y, true),
        "silu" => g.silu(y),
        _ => y,
    }
}

/// `act(x @ w^T + b) + r` over x `[m, k]`, w `[n, k]`; also returns the pre-activation.
fn block(m: usize, k: usize, n: usize, a: &str, residual: bool) -> (Graph, NodeId, NodeId) {
    let mut g = Graph::new("epilogue");
    let x = g.input("x", f32s(&[m, k]));
    let w = g.input("w", f32s(&[n, k]));
    let b = g.input("b", f32s(&[n]));
    let r = g.input("r", f32s(&[m, n]));
    let y = g.linear(x, w, Some(b));
    let z = act(&mut g, a, y);
    let out = if residual { g.add(z, r) } else { g.mul(z, r) };
    (g, y, out)
}

fn feeds(m: usize, k: usize, n: usize, seed: u64) -> Vec<(&'static str, Tensor)> {
    vec![
        ("x", rand_tensor(&[m, k], DType::F32, seed, -1.0, 1.0)),
        ("w", rand_tensor(&[n, k], DType::F32, seed + 1, -1.0, 1.0)),
        ("b", rand_tensor(&[n], DType::F32, seed + 2, -1.0, 1.0)),
        ("r", rand_tensor(&[m, n], DType::F32, seed + 3, -1.0, 1.0)),
    ]
}

fn compiled(g: &Graph, optimize: bool) -> Graph {
    let mut h = rlx_ir::inline_composites(g, &|_| false);
    rlx_compile::compile(&mut h, &PassOptions { optimize, ..Default::default() }).unwrap();
    h
}

fn run(g: &Graph, f: &[(&str, Tensor)], threads: usize) -> Vec<Tensor> {
    let mut exe = CpuExecutable::compile(g, &CpuOptions { threads: Some(threads), ..Default::default() }).unwrap();
    let by = |id| &f.iter().find(|(k, _)| Some(*k) == g.source_name(id)).unwrap().1;
    let ins: Vec<&Tensor> = g.inputs().iter().map(|&i| by(i)).collect();
    exe.run(&ins, &[]).unwrap()
}

/// Compile with all passes, check against the reference and against `optimize` off; return
/// the fused graph's step kernels.
fn check(g: &Graph, f: &[(&str, Tensor)], what: &str) -> Vec<String> {
    let fused = compiled(g, true);
    let plain = compiled(g, false);
    let mut kernels = vec![];
    for threads in [1, 2] {
        kernels = check_graph(&fused, f, Some(threads), TOL, what);
        for (a, b) in run(&fused, f, threads).iter().zip(run(&plain, f, threads).iter()) {
            assert_close(a, b, TOL, &format!("{what}: fused vs unfused, {threads} threads"));
        }
    }
    kernels
}

#[test]
fn linear_bias_activation_residual_is_one_step() {
    for a in ACTS {
        // 300 x 300: several row blocks on one thread (each written to the same block-sized
        // start of the product buffer); 200 x 400 x 1400 (GELU only: large): also two K
        // blocks.
        for (m, k, n) in [(5, 7, 3), (300, 33, 300), (200, 400, 1400)] {
            if m == 200 && a != "gelu" {
                continue;
            }
            let (mut g, _, out) = block(m, k, n, a, true);
            g.set_outputs(vec![out]);
            let ks = check(&g, &feeds(m, k, n, 7), a);
            assert_eq!(ks, ["gemm_epilogue_f32"], "{a} {m}x{k}x{n}");
        }
    }
}

#[test]
fn middle_output_of_the_chain_stays_correct() {
    // The pre-activation is also a graph output: it is a result of the fused step.
    let (mut g, y, out) = block(9, 4, 6, "gelu", true);
    g.set_outputs(vec![y, out]);
    let ks = check(&g, &feeds(9, 4, 6, 3), "middle");
    assert!(ks.contains(&"gemm_epilogue_f32".to_string()), "{ks:?}");
    // The product itself is an output: it is never absorbed.
    let mut g = Graph::new("product_out");
    let x = g.input("x", f32s(&[9, 4]));
    let w = g.input("w", f32s(&[6, 4]));
    let b = g.input("b", f32s(&[6]));
    let p = g.linear(x, w, None);
    let s = g.add(p, b);
    let t = g.tanh(s);
    g.set_outputs(vec![p, t]);
    let f = &feeds(9, 4, 6, 5)[..3];
    let ks = check(&g, f, "product_out");
    assert!(!ks.iter().any(|k| k.contains("epilogue")), "{ks:?}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]
    #[test]
    fn random_shapes_match_unfused(m in 1usize..70, k in 1usize..40, n in 1usize..50, a in 0usize..5, res: bool) {
        let (mut g, _, out) = block(m, k, n, ACTS[a], res);
        g.set_outputs(vec![out]);
        let ks = check(&g, &feeds(m, k, n, (m * 131 + k * 7 + n) as u64), ACTS[a]);
        prop_assert!(ks.iter().any(|k| k.contains("epilogue")), "{:?}", ks);
    }
}

/// Weights that are graph constants (as ONNX initializers import) are packed once at compile
/// time; the results must equal the reference on every run, plain and transposed, on one and
/// two threads (with at least one row block per thread, each thread goes block by block).
#[test]
fn constant_weights_are_prepacked() {
    // 300, 500, 1001 rows: at 2 threads, each thread claims row blocks (4, 4 and 6 of them, the
    // last one short) and runs them one by one in its own part of the product buffer.
    for (m, k, n) in [(300, 260, 70), (13, 40, 33), (500, 136, 300), (1001, 24, 40)] {
        let mut g = Graph::new("const_w");
        let x = g.input("x", f32s(&[m, k]));
        let w = g.constant(rand_tensor(&[n, k], DType::F32, 11, -1.0, 1.0));
        let b = g.input("b", f32s(&[n]));
        let y = g.linear(x, w, Some(b));
        let out = g.relu(y);
        g.set_outputs(vec![out]);
        let f = &feeds(m, k, n, 9);
        let f = [f[0].clone(), f[2].clone()];
        let ks = check(&g, &f, "constant w");
        assert_eq!(ks, ["gemm_epilogue_f32"], "{m}x{k}x{n}");
    }
}
