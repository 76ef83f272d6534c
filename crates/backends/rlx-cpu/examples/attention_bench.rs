//! Times one f32 `scaled_dot_product_attention` through `CpuExecutable` and prints the median.
//!
//! `cargo run --release -p rlx-cpu --example attention_bench -- B S H D THREADS [MASK] [MIN_REPS] [MIN_SECS]`
//! with `MASK` one of `none`, `causal`, `bias` (an f32 `[B, 1, 1, S]` key bias, as BERT-style
//! encoders imported from ONNX pass it; the default). Layout `[B, S, H, D]` (`bshd`). Prints
//! `rlx attention B=.. S=.. H=.. D=.. threads=..: median X ms  Y GFLOP/s` (the two products'
//! FLOPs) and, at 1 thread, the run thread's CPU-time median on stderr.

#[path = "common/args.rs"]
mod args;
#[path = "common/lcg.rs"]
mod lcg;
#[path = "common/thread_time.rs"]
mod thread_time;
use thread_time::thread_cpu_secs;

use rlx_cpu::{CpuExecutable, CpuOptions};
use rlx_ir::op::{AttentionLayout, MaskKind};
use rlx_ir::{DType, Graph, Shape, Tensor};
use std::time::Instant;

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    const USAGE: &str = "usage: attention_bench B S H D THREADS [none|causal|bias (default)] [MIN_REPS] [MIN_SECS]";
    fn ok<T>(r: Result<T, String>) -> T {
        args::or_usage(r, "attention_bench", USAGE)
    }
    if !(5..=8).contains(&a.len()) {
        ok(Err(format!("expected 5 to 8 arguments, got {}", a.len())))
    }
    let num = |i: usize| ok(args::count(["B", "S", "H", "D", "THREADS"][i], &a[i]));
    let (b, s, h, d, t) = (num(0), num(1), num(2), num(3), num(4));
    let mask_name = a.get(5).map_or("bias", |s| s.as_str());
    if !["none", "causal", "bias"].contains(&mask_name) {
        ok(Err(format!("unknown mask {mask_name:?}")))
    }
    let min_reps = a.get(6).map_or(5, |s| ok(args::count("MIN_REPS", s)));
    let min_secs: f64 = a.get(7).map_or(1.0, |s| ok(args::secs("MIN_SECS", s)));
    ok(args::elements("q", &[b, s, h, d]));

    let mut g = Graph::new("attention");
    let dims = [b, s, h, d];
    let q = g.input("q", Shape::new(&dims, DType::F32));
    let k = g.input("k", Shape::new(&dims, DType::F32));
    let v = g.input("v", Shape::new(&dims, DType::F32));
    let mask = match mask_name {
        "none" => MaskKind::None,
        "causal" => MaskKind::Causal,
        "bias" => MaskKind::Bias(g.input("bias", Shape::new(&[b, 1, 1, s], DType::F32))),
        _ => unreachable!("checked above"),
    };
    let y = g.scaled_dot_product_attention_with_layout(q, k, v, mask, None, AttentionLayout::Bshd);
    g.set_outputs(vec![y]);
    let mut exe = args::or_exit(
        CpuExecutable::compile(&g, &CpuOptions { threads: Some(t), ..Default::default() }),
        "attention_bench",
    );
    let kernel = exe.steps().iter().map(|s| s.kernel).collect::<Vec<_>>().join(",");

    let fill = |len: usize, seed: u64| lcg::uniform(seed, len, -1.0, 1.0);
    let n: usize = dims.iter().product();
    let (qt, kt, vt) = (
        Tensor::from_vec(fill(n, 1), &dims).unwrap(),
        Tensor::from_vec(fill(n, 2), &dims).unwrap(),
        Tensor::from_vec(fill(n, 3), &dims).unwrap(),
    );
    // Bias: the last 8 keys of each batch hidden (BERT's padding as an additive -10000 bias).
    let bias: Vec<f32> = (0..b * s).map(|i| if i % s >= s.saturating_sub(8) { -10000.0 } else { 0.0 }).collect();
    let bt = Tensor::from_vec(bias, &[b, 1, 1, s]).unwrap();
    let mut inputs = vec![&qt, &kt, &vt];
    if mask_name == "bias" {
        inputs.push(&bt);
    }
    exe.run(&inputs, &[]).expect("run");
    let (mut times, mut cpu) = (vec![], vec![]);
    let start = Instant::now();
    while times.len() < min_reps || start.elapsed().as_secs_f64() < min_secs {
        let (t0, c0) = (Instant::now(), thread_cpu_secs());
        let out = exe.run(&inputs, &[]).expect("run");
        times.push(t0.elapsed().as_secs_f64());
        cpu.push(thread_cpu_secs() - c0);
        std::hint::black_box(out);
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    cpu.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let med = times[times.len() / 2];
    if t == 1 {
        eprintln!("thread cpu median {:.3} ms", cpu[cpu.len() / 2] * 1e3);
    }
    let flops = 4.0 * (b * h * s * s * d) as f64;
    println!(
        "rlx attention B={b} S={s} H={h} D={d} mask={mask_name} threads={t}: median {:.3} ms  {:.1} GFLOP/s  kernel={kernel} reps={}",
        med * 1e3,
        flops / med / 1e9,
        times.len()
    );
}
