//! Times one f32 `dot_general` `[M,K] @ [K,N]` through `CpuExecutable` and prints the median.
//!
//! `cargo run --release -p rlx-cpu --example gemm_bench -- M K N THREADS [MIN_REPS] [MIN_SECS]`
//! prints `rlx M=.. K=.. N=.. threads=..: median X ms  Y GFLOP/s  kernel=..`. Used by
//! `bench/compare_gemm.py`; one warm-up run, then at least MIN_REPS (5) runs and MIN_SECS (1 s).

#[path = "common/args.rs"]
mod args;
#[path = "common/lcg.rs"]
mod lcg;
#[path = "common/thread_time.rs"]
mod thread_time;
use thread_time::thread_cpu_secs;

use rlx_cpu::{CpuExecutable, CpuOptions};
use rlx_ir::ops::DotGeneral;
use rlx_ir::{DType, Graph, Shape, Tensor};
use std::time::Instant;

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    const USAGE: &str = "usage: gemm_bench M K N THREADS [MIN_REPS] [MIN_SECS] [const]";
    if !(4..=7).contains(&a.len()) {
        args::or_usage(Err(format!("expected 4 to 7 arguments, got {}", a.len())), "gemm_bench", USAGE)
    }
    let num = |i: usize| args::or_usage(args::count(["M", "K", "N", "THREADS"][i], &a[i]), "gemm_bench", USAGE);
    let (m, k, n, t) = (num(0), num(1), num(2), num(3));
    let min_reps = a.get(4).map_or(5, |s| args::or_usage(args::count("MIN_REPS", s), "gemm_bench", USAGE));
    let min_secs: f64 = a.get(5).map_or(1.0, |s| args::or_usage(args::secs("MIN_SECS", s), "gemm_bench", USAGE));
    if a.get(6).is_some_and(|s| s != "const") {
        args::or_usage(Err(format!("the seventh argument can only be `const`, got {:?}", a[6])), "gemm_bench", USAGE)
    }
    for (what, dims) in [("x", [m, k]), ("w", [k, n]), ("y", [m, n])] {
        args::or_usage(args::elements(what, &dims), "gemm_bench", USAGE);
    }

    let mut g = Graph::new("gemm");
    let x = g.input("x", Shape::new(&[m, k], DType::F32));
    // `const` as the 7th argument: the weight is a graph constant (packed once at compile time,
    // as imported ONNX initializers are), else a param passed on every run.
    let constant = a.get(6).is_some_and(|s| s == "const");
    let w = if constant {
        g.constant(Tensor::zeros(&[k, n], DType::F32))
    } else {
        g.param("w", Shape::new(&[k, n], DType::F32))
    };
    let y = g.dot_general(x, w, DotGeneral::contract(&[1], &[0]));
    g.set_outputs(vec![y]);
    let mut exe =
        args::or_exit(CpuExecutable::compile(&g, &CpuOptions { threads: Some(t), ..Default::default() }), "gemm_bench");
    let kernel = exe.steps()[0].kernel;

    // Deterministic pseudo-random data in [-1, 1).
    let fill = |len: usize, seed: u64| lcg::uniform(seed, len, -1.0, 1.0);
    // Allocate as numpy does: large buffers on transparent huge pages (advised before the
    // first write), then fill.
    let alloc = |dims: &[usize], seed: u64| {
        let mut t = Tensor::zeros(dims, DType::F32);
        rlx_cpu::advise_huge_pages(&t);
        t.as_mut_slice::<f32>().unwrap().copy_from_slice(&fill(dims.iter().product(), seed));
        t
    };
    let (xt, wt) = (alloc(&[m, k], 1), alloc(&[k, n], 2));
    let params: Vec<&Tensor> = if constant { vec![] } else { vec![&wt] };
    exe.run(&[&xt], &params).expect("run");
    let (mut times, mut cpu) = (vec![], vec![]);
    let start = Instant::now();
    while times.len() < min_reps || start.elapsed().as_secs_f64() < min_secs {
        let (t0, c0) = (Instant::now(), thread_cpu_secs());
        let out = exe.run(&[&xt], &params).expect("run");
        times.push(t0.elapsed().as_secs_f64());
        cpu.push(thread_cpu_secs() - c0);
        std::hint::black_box(out);
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    cpu.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let med = times[times.len() / 2];
    // With one thread the product runs on this thread, so its CPU time is the kernel's time
    // without the waits of a loaded machine (a steadier figure there; wall time stays the one
    // compared with peers).
    if t == 1 {
        eprintln!("thread cpu median {:.3} ms", cpu[cpu.len() / 2] * 1e3);
    }
    println!(
        "rlx M={m} K={k} N={n} threads={t}: median {:.3} ms  {:.1} GFLOP/s  kernel={kernel} reps={}",
        med * 1e3,
        2.0 * (m * k * n) as f64 / med / 1e9,
        times.len()
    );
}
