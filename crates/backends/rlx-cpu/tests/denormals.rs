//! `CpuOptions::flush_denormals`: with the flag (the default) kernels flush subnormal operands
//! and results to zero on every thread that runs them, without it they give the IEEE 754
//! result; the caller's floating-point control register is the same after a run as before.

use rlx_cpu::{CpuExecutable, CpuOptions, flushes_denormals};
use rlx_ir::{DType, Graph, Shape, Tensor};

/// Above the kernels' parallel threshold (64K elements), so pool threads run chunks too.
const N: usize = 1 << 17;

/// `[a * b, (a * b) summed]` and an `[8, 8] x [8, 8]` product of two inputs.
fn graph() -> Graph {
    let mut g = Graph::new("denormals");
    let a = g.input("a", Shape::new(&[N], DType::F32));
    let b = g.input("b", Shape::new(&[N], DType::F32));
    let x = g.input("x", Shape::new(&[8, 8], DType::F32));
    let w = g.input("w", Shape::new(&[8, 8], DType::F32));
    let p = g.mul(a, b);
    let s = g.sum(p, &[0], false);
    let m = g.mm(x, w);
    g.set_outputs(vec![p, s, m]);
    g
}

fn run(opts: &CpuOptions, a: &[f32], b: &[f32]) -> Vec<Tensor> {
    let mut exe = CpuExecutable::compile(&graph(), opts).unwrap();
    // A subnormal operand (1e-40) times 1, and normal operands whose product is subnormal.
    let x = Tensor::from_vec(vec![1e-40f32; 64], &[8, 8]).unwrap();
    let w = Tensor::from_vec((0..64).map(|i| if i % 9 == 0 { 1.0f32 } else { 0.0 }).collect(), &[8, 8]).unwrap();
    let (a, b) = (Tensor::from_vec(a.to_vec(), &[N]).unwrap(), Tensor::from_vec(b.to_vec(), &[N]).unwrap());
    let before = flushes_denormals();
    let out = exe.run(&[&a, &b, &x, &w], &[]).unwrap();
    assert_eq!(flushes_denormals(), before, "the caller's control register is restored");
    out
}

#[test]
fn subnormals_flush_to_zero_with_the_flag_and_stay_ieee_without() {
    assert!(!flushes_denormals(), "test threads start with IEEE semantics");
    // Even elements: a subnormal operand (DAZ); odd: a subnormal product of normals (FTZ).
    let a: Vec<f32> = (0..N).map(|i| if i % 2 == 0 { 1e-40 } else { 1e-20 }).collect();
    let b: Vec<f32> = (0..N).map(|i| if i % 2 == 0 { 1.0 } else { 1e-20 }).collect();
    let ieee: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
    assert!(ieee.iter().all(|v| v.is_subnormal()), "the IEEE products are subnormal");
    for threads in [None, Some(1), Some(2)] {
        let flushed = run(&CpuOptions { threads, ..Default::default() }, &a, &b);
        let p = flushed[0].as_slice::<f32>().unwrap();
        assert!(p.iter().all(|&v| v == 0.0), "threads {threads:?}: flushed products are 0");
        assert_eq!(flushed[1].as_slice::<f32>().unwrap(), &[0.0], "threads {threads:?}: sum");
        assert!(flushed[2].as_slice::<f32>().unwrap().iter().all(|&v| v == 0.0), "threads {threads:?}: gemm");

        let exact = run(&CpuOptions { threads, flush_denormals: false, ..Default::default() }, &a, &b);
        assert_eq!(exact[0].as_slice::<f32>().unwrap(), &ieee[..], "threads {threads:?}: IEEE products");
        assert!(exact[1].as_slice::<f32>().unwrap()[0] > 0.0, "threads {threads:?}: IEEE sum");
        let m = exact[2].as_slice::<f32>().unwrap();
        assert!(m.iter().all(|&v| v == 1e-40), "threads {threads:?}: IEEE gemm {m:?}");
    }
}

#[test]
fn default_options_flush() {
    assert!(CpuOptions::default().flush_denormals);
    assert!(!CpuOptions::default().with_flush_denormals(false).flush_denormals);
}
