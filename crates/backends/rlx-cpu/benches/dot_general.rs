//! f32 `dot_general` through `CpuExecutable`: 512³, 2048³ (gemm) and 1x4096x4096 (GEMV), on
//! rayon's global pool. `cargo bench -p rlx-cpu --bench dot_general`.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rlx_cpu::{CpuExecutable, CpuOptions};
use rlx_ir::ops::DotGeneral;
use rlx_ir::{DType, Graph, Shape, Tensor};
use std::time::Duration;

fn setup(m: usize, k: usize, n: usize) -> (CpuExecutable, Tensor, Tensor) {
    let mut g = Graph::new("gemm");
    let x = g.input("x", Shape::new(&[m, k], DType::F32));
    let w = g.param("w", Shape::new(&[k, n], DType::F32));
    let y = g.dot_general(x, w, DotGeneral::contract(&[1], &[0]));
    g.set_outputs(vec![y]);
    let exe = CpuExecutable::compile(&g, &CpuOptions::default()).expect("compile");
    let fill =
        |len: usize| Tensor::from_vec((0..len).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect(), &[len]);
    let xt = fill(m * k).unwrap().reshape(&[m, k]).unwrap();
    let wt = fill(k * n).unwrap().reshape(&[k, n]).unwrap();
    (exe, xt, wt)
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("dot_general_f32");
    for &(m, k, n) in &[(512, 512, 512), (2048, 2048, 2048), (1, 4096, 4096)] {
        let (mut exe, x, w) = setup(m, k, n);
        group.throughput(Throughput::Elements((2 * m * k * n) as u64));
        if m * k * n > 1 << 30 {
            group.sample_size(10).measurement_time(Duration::from_secs(8));
        } else {
            group.sample_size(30).measurement_time(Duration::from_secs(3));
        }
        group.bench_function(format!("{m}x{k}x{n}"), |b| b.iter(|| exe.run(&[&x], &[&w]).unwrap()));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
