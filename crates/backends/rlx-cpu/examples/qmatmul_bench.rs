//! Times `dequant_matmul` (`x[M, 4096] @ Wᵀ`, `W: [4096, 4096]` packed GGUF blocks) through
//! `CpuExecutable` and prints the median time and the effective weight-streaming bandwidth
//! (packed weight bytes / median time).
//!
//! `cargo run --release -p rlx-cpu --example qmatmul_bench -- [THREADS] [MIN_REPS]`
//! runs M = 1 (decode) and M = 64 (prefill) for Q4_0, Q8_0 and Q4_K (Q4_K uses the row-wise
//! dequantize path until its integer kernel exists). One warm-up run, then at least MIN_REPS
//! (10) runs and 1 s per case.

use rlx_cpu::{CpuExecutable, CpuOptions};
use rlx_gguf::GgmlType;
use rlx_ir::{DType, Graph, Shape, Tensor};
use std::time::Instant;

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let threads = a.first().map(|s| s.parse::<usize>().expect("THREADS"));
    let min_reps = a.get(1).map_or(10, |s| s.parse().expect("MIN_REPS"));
    rlx_gguf::register_ops();
    let (k, n) = (4096, 4096);
    let fill = |len: usize, seed: u64| -> Vec<f32> {
        let mut s = seed;
        (0..len)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    };
    let wf = fill(n * k, 7);
    for ty in [GgmlType::Q4_0, GgmlType::Q8_0, GgmlType::Q4_K] {
        let packed = rlx_gguf::quants::quantize(ty, &wf).expect("quantize");
        let w = Tensor::zeros(&[packed.len()], DType::U8);
        rlx_cpu::advise_huge_pages(&w);
        let mut w = w;
        w.as_mut_slice::<u8>().unwrap().copy_from_slice(&packed);
        for m in [1usize, 64] {
            let mut g = Graph::new("qmm");
            let x = g.input("x", Shape::new(&[m, k], DType::F32));
            let wi = g.param("w", Shape::new(&[packed.len()], DType::U8));
            let y = g.dequant_matmul(x, wi, ty.name(), n, k);
            g.set_outputs(vec![y]);
            let mut exe = CpuExecutable::compile(&g, &CpuOptions { threads }).expect("compile");
            let kernel = exe.steps().iter().find(|s| s.op.contains("dequant_matmul")).map_or("?", |s| s.kernel);
            let xt = Tensor::from_vec(fill(m * k, 3), &[m, k]).unwrap();
            exe.run(&[&xt], &[&w]).expect("run");
            let mut times = vec![];
            let start = Instant::now();
            while times.len() < min_reps || start.elapsed().as_secs_f64() < 1.0 {
                let t = Instant::now();
                std::hint::black_box(exe.run(&[&xt], &[&w]).expect("run"));
                times.push(t.elapsed().as_secs_f64());
            }
            times.sort_by(f64::total_cmp);
            let med = times[times.len() / 2];
            println!(
                "{:5} {m:>2}x{k} . {n}x{k}: median {:8.3} ms  {:6.1} GB/s weights  {:7.1} GFLOP/s  kernel={kernel}",
                ty.name(),
                med * 1e3,
                packed.len() as f64 / med / 1e9,
                2.0 * (m * n * k) as f64 / med / 1e9,
            );
        }
    }
}
