//! Times fused / native-kernel workloads through the compile pipeline and `CpuExecutable`.
//!
//! `cargo run --release -p rlx-cpu --example fusion_bench -- WORKLOAD THREADS [MIN_REPS] [MIN_SECS] [profile]`
//! with WORKLOAD one of `chain` (`gelu_tanh(x*a+b)*sigmoid(x)-c` over 16M f32: 8 ops after
//! inlining gelu, one fused step), `chain-l2` (the same over 256K f32, which stay in L2: its
//! compute without the memory traffic), `softmax` / `layer_norm` (last axis of [4096, 4096] f32),
//! `encoder` (one pre-norm transformer encoder layer: hidden 384, 12 heads, seq 128, FFN 1536).
//! Times `run_into` with one reused output vector (no per-run output copy or allocation).
//! Prints `rlx WORKLOAD threads=T: median X ms steps=N kernels=[..] checksum=S`. Used by
//! `bench/compare_fusion.py`; one warm-up run, then at least MIN_REPS (5) runs and MIN_SECS (1 s).
//! With `profile`, also one line per step: its kernel and mean time per run
//! (`CpuOptions::profile`).

// The encoder layer is the one rlx-runtime's memory test plans (one definition for both).
#[path = "../../../core/rlx-runtime/tests/common/encoder.rs"]
mod encoder;

use rlx_cpu::{CpuExecutable, CpuOptions};
use rlx_ir::{DType, Graph, Shape, Tensor};
use std::time::Instant;

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() < 2 {
        eprintln!(
            "usage: fusion_bench chain|chain-l2|softmax|layer_norm|encoder THREADS [MIN_REPS] [MIN_SECS] [profile]"
        );
        std::process::exit(2);
    }
    let t: usize = a[1].parse().expect("threads");
    let min_reps = a.get(2).map_or(5, |s| s.parse().unwrap());
    let min_secs: f64 = a.get(3).map_or(1.0, |s| s.parse().unwrap());
    let profile = a.get(4).is_some_and(|s| s == "profile");
    let f32s = |d: &[usize]| Shape::new(d, DType::F32);
    let mut g = Graph::new(a[0].as_str());
    let dims: Vec<usize> = match a[0].as_str() {
        "chain" | "chain-l2" => {
            // `chain-l2`: 256K elements, in and out fit the L2 cache (the compute alone).
            let d = vec![if a[0] == "chain" { 1usize << 24 } else { 1 << 18 }];
            let x = g.input("x", f32s(&d));
            let (ca, cb, cc) = (g.scalar(1.25, DType::F32), g.scalar(0.5, DType::F32), g.scalar(0.25, DType::F32));
            let xa = g.mul(x, ca);
            let xb = g.add(xa, cb);
            let ge = g.gelu(xb, true);
            let sg = g.logistic(x);
            let p = g.mul(ge, sg);
            let y = g.sub(p, cc);
            g.set_outputs(vec![y]);
            d
        }
        "softmax" | "layer_norm" => {
            let d = vec![4096usize, 4096];
            let x = g.input("x", f32s(&d));
            let y = if a[0] == "softmax" { g.softmax(x, -1) } else { g.layer_norm(x, None, None, -1, 1e-5) };
            g.set_outputs(vec![y]);
            d
        }
        "encoder" => {
            let d = vec![128usize, 384];
            let x = g.input("x", f32s(&d));
            let y = encoder::encoder_layer(&mut g, x, "", 128, 384, 12, 1536);
            g.set_outputs(vec![y]);
            d
        }
        w => {
            eprintln!("unknown workload {w}");
            std::process::exit(2);
        }
    };
    // The encoder's weights: small deterministic values, frozen into constants (as ONNX
    // initializers are for ONNX Runtime), so the backend packs them once at compile time.
    let weights: Vec<(String, Tensor)> = g
        .params()
        .iter()
        .enumerate()
        .map(|(k, &p)| {
            let d = g.shape(p).static_dims().expect("static");
            let n: usize = d.iter().product();
            let v = (0..n).map(|i| (((i * 7919 + k * 104_729) % 2001) as f32 / 1000.0 - 1.0) * 0.05).collect();
            (g.source_name(p).expect("param").to_string(), Tensor::from_vec(v, &d).expect("dims"))
        })
        .collect();
    g.freeze_params(weights).expect("freeze");
    let params: Vec<&Tensor> = vec![];
    let opts = rlx_compile::PassOptions {
        native_composites: rlx_cpu::native_composites().iter().map(|s| s.to_string()).collect(),
        verify_each: false,
        ..Default::default()
    };
    rlx_compile::compile(&mut g, &opts).expect("compile");
    let mut exe =
        CpuExecutable::compile(&g, &CpuOptions { threads: Some(t), profile, ..Default::default() }).expect("compile");
    let steps = exe.steps();
    let kernels: Vec<&str> = steps.iter().map(|s| s.kernel).collect();
    let mut x = Tensor::zeros(&dims, DType::F32);
    rlx_cpu::advise_huge_pages(&x);
    let mut s = 7u64;
    for v in x.as_mut_slice::<f32>().unwrap() {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        *v = ((s >> 40) as f32 / (1u64 << 24) as f32) * 6.0 - 3.0;
    }
    // `run_into` with one reused output vector: after the warm-up the outputs are swapped
    // out of the memory plan, never copied or allocated (as a serving or training loop runs).
    let mut out = vec![];
    exe.run_into(&[&x], &params, &mut out).expect("run");
    let checksum: f64 = out[0].as_slice::<f32>().unwrap().iter().map(|&v| v as f64).sum();
    exe.run_into(&[&x], &params, &mut out).expect("run");
    exe.reset_profile();
    let mut ts = vec![];
    let st = Instant::now();
    while ts.len() < min_reps || st.elapsed().as_secs_f64() < min_secs {
        let t0 = Instant::now();
        exe.run_into(&[&x], &params, &mut out).expect("run");
        std::hint::black_box(&out);
        ts.push(t0.elapsed().as_secs_f64());
    }
    ts.sort_by(f64::total_cmp);
    for p in exe.profile().unwrap_or_default() {
        let ms = p.total.as_secs_f64() * 1e3 / p.calls.max(1) as f64;
        println!("step node={:<4} {:<24} {:<22} {ms:8.4} ms", p.step.node, p.step.op, p.step.kernel);
    }
    println!(
        "rlx {} threads={t}: median {:.4} ms steps={} kernels={kernels:?} checksum={checksum:.6e} reps={}",
        a[0],
        ts[ts.len() / 2] * 1e3,
        steps.len(),
        ts.len()
    );
}
