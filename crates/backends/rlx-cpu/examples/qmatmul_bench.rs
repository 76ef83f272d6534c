//! Times `dequant_matmul` (`x[M, K] @ Wᵀ`, `W: [N, K]` packed GGUF blocks) through
//! `CpuExecutable` and prints the median time and the effective weight-streaming bandwidth
//! (packed weight bytes / median time). Driven by `bench/compare_qmatmul.py`.
//!
//! `cargo run --release -p rlx-cpu --example qmatmul_bench -- [THREADS] [MIN_REPS] [TYPES] [MS] [MODES] [COPIES] [K] [N]`
//!
//! Defaults: rayon's threads, 10 reps, `Q4_0,Q8_0,Q4_1,Q4_K,Q5_K,Q6_K`, `1,64`, `exact,fast`, 1.
//! With COPIES > 1 the weights are held in that many copies and each run reads the next one,
//! so with enough copies (more bytes than the last-level cache) every run reads its weights
//! from DRAM, as a model's decode step does; with 1 they stay in cache between runs
//! (`exact` = the default options, `fast` = `CpuOptions::quantized_activations`, both with
//! Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 weights in `Layout::SplitRows`, as `rlx generate` holds them;
//! `exact-blocks` / `fast-blocks` = the same on GGUF blocks). K = N = 4096 by default (the issue's
//! shapes); a model's shapes by the last two arguments, e.g. `576 1536` for SmolLM2's FFN. One warm-up run, then at least MIN_REPS runs and 1 s per
//! case. One line per case:
//! `RESULT <type> <M> <mode> <median ms> <GB/s weights> <GFLOP/s> <kernel>`, and per type the
//! read bandwidth over the same packed weight bytes, timed the same way (a plain sum of every
//! byte, the bound a decode product can reach with these weights where they are):
//! `STREAM <type> <median ms> <GB/s>`.

#[path = "common/args.rs"]
mod args;
#[path = "common/lcg.rs"]
mod lcg;

use rlx_cpu::{CpuExecutable, CpuOptions};
use rlx_gguf::{GgmlType, Layout};
use rlx_ir::{DType, Graph, Shape, Tensor};
use std::time::Instant;

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.iter().any(|s| s == "-h" || s == "--help") {
        println!(
            "usage: qmatmul_bench [THREADS] [MIN_REPS] [TYPES] [MS] [MODES] [COPIES] [K] [N] (\"-\" keeps a default)"
        );
        return;
    }
    let arg = |i: usize| a.get(i).filter(|s| s.as_str() != "-");
    // A count of at least 1, or the usage line and exit 2.
    let count = |s: &str, what: &str| -> usize { args::count(what, s).unwrap_or_else(|e| usage(&e)) };
    let threads = arg(0).map(|s| count(s, "THREADS"));
    let min_reps = arg(1).map_or(10, |s| count(s, "MIN_REPS"));
    let types: Vec<GgmlType> = arg(2)
        .map_or("Q4_0,Q8_0,Q4_1,Q4_K,Q5_K,Q6_K", |s| s.as_str())
        .split(',')
        .map(|t| GgmlType::from_name(t).unwrap_or_else(|| usage(&format!("unknown ggml type {t:?}"))))
        .collect();
    let ms: Vec<usize> = arg(3).map_or("1,64", |s| s.as_str()).split(',').map(|v| count(v, "M")).collect();
    let modes: Vec<String> = arg(4).map_or("exact,fast", |s| s.as_str()).split(',').map(String::from).collect();
    if let Some(m) = modes.iter().find(|m| !["exact", "exact-blocks", "fast", "fast-blocks"].contains(&m.as_str())) {
        usage(&format!("unknown mode {m:?} (exact, exact-blocks, fast, fast-blocks)"));
    }
    let copies: usize = arg(5).map_or(1, |s| count(s, "COPIES"));
    rlx_gguf::register_ops();
    let k: usize = arg(6).map_or(4096, |s| count(s, "K"));
    let n: usize = arg(7).map_or(4096, |s| count(s, "N"));
    if a.len() > 8 {
        usage(&format!("{} arguments, at most 8", a.len()));
    }
    let size = |what: &str, dims: &[usize]| args::elements(what, dims).unwrap_or_else(|e| usage(&e));
    size("the weights", &[copies, n, k]);
    for &m in &ms {
        size("the activations", &[m, k]);
        size("the result", &[m, n]);
    }
    if let Some(ty) = types.iter().find(|t| !k.is_multiple_of(t.block_size())) {
        usage(&format!("K = {k} is not a multiple of {ty}'s block size {}", ty.block_size()));
    }
    println!(
        "# RESULT <type> <M> <mode> <median ms> <GB/s weights> <GFLOP/s> <kernel>; STREAM <type> <median ms> <GB/s>"
    );
    let fill = |len: usize, seed: u64| lcg::uniform(seed, len, -1.0, 1.0);
    let wf = fill(n * k, 7);
    for ty in types {
        let packed = rlx_gguf::quants::quantize(ty, &wf).expect("quantize");
        let ws: Vec<Tensor> = (0..copies)
            .map(|_| {
                let mut w = Tensor::zeros(&[packed.len()], DType::U8);
                rlx_cpu::advise_huge_pages(&w);
                w.as_mut_slice::<u8>().unwrap().copy_from_slice(&packed);
                w
            })
            .collect();
        // The same copies in `Layout::SplitRows` (modes `exact` and `fast` on Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0,
        // as the model runner holds them).
        let split = modes.iter().any(|m| m == "fast" || m == "exact") && Layout::SplitRows.supports(ty);
        let ws_split: Vec<Tensor> = if split {
            ws.iter()
                .map(|w| {
                    let mut s = Tensor::zeros(&[packed.len()], DType::U8);
                    rlx_cpu::advise_huge_pages(&s);
                    let sb = s.as_mut_slice::<u8>().unwrap();
                    sb.copy_from_slice(w.as_slice::<u8>().unwrap());
                    rlx_gguf::layout::to_split_rows(ty, sb, k).expect("split rows");
                    s
                })
                .collect()
        } else {
            vec![]
        };
        // The copy each run reads: the next one.
        let mut turn = 0usize;
        let mut next = || {
            turn += 1;
            turn % copies
        };
        let med = median_secs(min_reps, || {
            let wb = ws[next()].as_slice::<u8>().unwrap();
            let sum = wb.chunks_exact(8).fold(0u64, |a, c| a.wrapping_add(u64::from_le_bytes(c.try_into().unwrap())));
            std::hint::black_box(sum);
        });
        println!("STREAM {} {:.4} {:.2}", ty.name(), med * 1e3, packed.len() as f64 / med / 1e9);
        for &m in &ms {
            for mode in &modes {
                let fast = mode == "fast" || mode == "fast-blocks";
                let blocks = mode.ends_with("-blocks");
                let (set, layout) =
                    if !blocks && split { (&ws_split, Layout::SplitRows) } else { (&ws, Layout::Blocks) };
                let mut g = Graph::new("qmm");
                let x = g.input("x", Shape::new(&[m, k], DType::F32));
                let wi = g.param("w", Shape::new(&[packed.len()], DType::U8));
                let y = g.dequant_matmul_layout(x, wi, ty.name(), layout.name(), n, k);
                g.set_outputs(vec![y]);
                let opts = CpuOptions { threads, quantized_activations: fast, ..Default::default() };
                let mut exe = CpuExecutable::compile(&g, &opts).expect("compile");
                let kernel = exe.steps().iter().find(|s| s.op.contains("dequant_matmul")).map_or("?", |s| s.kernel);
                let xt = Tensor::from_vec(fill(m * k, 3), &[m, k]).unwrap();
                exe.run(&[&xt], &[&set[next()]]).expect("run");
                let med = median_secs(min_reps, || {
                    std::hint::black_box(exe.run(&[&xt], &[&set[next()]]).expect("run"));
                });
                println!(
                    "RESULT {} {m} {mode} {:.4} {:.2} {:.1} {kernel}",
                    ty.name(),
                    med * 1e3,
                    packed.len() as f64 / med / 1e9,
                    2.0 * (m * n * k) as f64 / med / 1e9,
                );
            }
        }
    }
}

/// Print `msg` and the usage line to stderr and exit with status 2.
fn usage(msg: &str) -> ! {
    eprintln!("qmatmul_bench: {msg}\nusage: qmatmul_bench [THREADS] [MIN_REPS] [TYPES] [MS] [MODES] [COPIES] [K] [N]");
    std::process::exit(2)
}

/// Median seconds of `f` after one warm-up call, over at least `min_reps` calls and 1 s.
fn median_secs(min_reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    let mut times = vec![];
    let start = Instant::now();
    while times.len() < min_reps || start.elapsed().as_secs_f64() < 1.0 {
        let t = Instant::now();
        f();
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
