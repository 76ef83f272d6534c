//! Times one decode step's `attention_with_kvcache` (one new token) through `CpuExecutable`
//! and prints the median per call and the rate at which it reads the filled cache columns.
//!
//! `cargo run --release -p rlx-cpu --example kvcache_bench -- H HK D CAP LEN THREADS [COPIES] [MIN_REPS]`
//!
//! `q [1, 1, H, D]`, the new `k` / `v` `[1, 1, HK, D]`, f32 caches `[1, HK, CAP, D]` with `LEN`
//! filled columns. With COPIES > 1 (default 1) the caches are held in that many copies and each
//! run reads the next one, so with enough copies every run reads its cache from DRAM, as a
//! model's decode step does (its weights evict the cache between layers). Prints
//! `RESULT kvcache H=.. HK=.. D=.. LEN=.. threads=.. copies=..: median X us  Y GB/s`.
//! SmolLM2-135M's layers: `9 3 64 256 <len> 1 256`.

#[path = "common/args.rs"]
mod args;
#[path = "common/lcg.rs"]
mod lcg;

use rlx_cpu::{CpuExecutable, CpuOptions};
use rlx_ir::{DType, Graph, Shape, Tensor};
use std::time::Instant;

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    const USAGE: &str = "usage: kvcache_bench H HK D CAP LEN THREADS [COPIES] [MIN_REPS]";
    fn ok<T>(r: Result<T, String>) -> T {
        args::or_usage(r, "kvcache_bench", USAGE)
    }
    if !(6..=8).contains(&a.len()) {
        ok(Err(format!("expected 6 to 8 arguments, got {}", a.len())))
    }
    let num = |i: usize| ok(args::count(["H", "HK", "D", "CAP", "LEN", "THREADS", "COPIES", "MIN_REPS"][i], &a[i]));
    let (h, hk, d, cap, len, t) = (num(0), num(1), num(2), num(3), num(4), num(5));
    let copies = if a.len() > 6 { num(6) } else { 1 };
    let min_reps = if a.len() > 7 { num(7) } else { 2000 };
    if !h.is_multiple_of(hk) {
        ok(Err(format!("HK must divide H (got H={h} HK={hk})")))
    }
    if len > cap {
        ok(Err(format!("LEN must be at most CAP (got LEN={len} CAP={cap})")))
    }
    ok(args::elements("cache", &[copies, hk, cap, d]));

    let mut g = Graph::new("kvcache");
    let q = g.input("q", Shape::new(&[1, 1, h, d], DType::F32));
    let k = g.input("k", Shape::new(&[1, 1, hk, d], DType::F32));
    let v = g.input("v", Shape::new(&[1, 1, hk, d], DType::F32));
    let kc = g.input("k_cache", Shape::new(&[1, hk, cap, d], DType::F32));
    let vc = g.input("v_cache", Shape::new(&[1, hk, cap, d], DType::F32));
    let cl = g.input("cache_len", Shape::new(&[1], DType::I32));
    let y = g.attention_with_kvcache(q, k, v, kc, vc, cl, None);
    g.set_outputs(vec![y]);
    let mut exe = args::or_exit(
        CpuExecutable::compile(&g, &CpuOptions { threads: Some(t), ..Default::default() }),
        "kvcache_bench",
    );
    let mut rng = lcg::Lcg(1);
    let mut fill = |n: usize| rng.fill(n, -1.0, 1.0);
    let qt = Tensor::from_vec(fill(h * d), &[1, 1, h, d]).unwrap();
    let kt = Tensor::from_vec(fill(hk * d), &[1, 1, hk, d]).unwrap();
    let vt = Tensor::from_vec(fill(hk * d), &[1, 1, hk, d]).unwrap();
    let lt = Tensor::from_vec(vec![len as i32], &[1]).unwrap();
    let caches: Vec<(Tensor, Tensor)> = (0..copies)
        .map(|_| {
            let n = hk * cap * d;
            (Tensor::from_vec(fill(n), &[1, hk, cap, d]).unwrap(), Tensor::from_vec(fill(n), &[1, hk, cap, d]).unwrap())
        })
        .collect();
    let mut outs = vec![];
    let mut times = vec![];
    let start = Instant::now();
    let mut i = 0;
    while times.len() < min_reps || start.elapsed().as_secs_f64() < 1.0 {
        let (kc, vc) = &caches[i % copies];
        let feeds = [&qt, &kt, &vt, kc, vc, &lt];
        let t0 = Instant::now();
        exe.run_into(&feeds, &[], &mut outs).expect("run");
        if i > 0 {
            times.push(t0.elapsed().as_secs_f64());
        }
        i += 1;
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let med = times[times.len() / 2];
    let bytes = (2 * hk * len * d * 4) as f64;
    println!(
        "RESULT kvcache H={h} HK={hk} D={d} LEN={len} threads={t} copies={copies}: median {:.2} us  {:.1} GB/s",
        med * 1e6,
        bytes / med / 1e9
    );
}
