//! Times fused / native-kernel workloads through the compile pipeline and `CpuExecutable`.
//!
//! `cargo run --release -p rlx-cpu --example fusion_bench -- WORKLOAD THREADS [MIN_REPS] [MIN_SECS] [profile]`
//! with WORKLOAD one of `chain` (`gelu_tanh(x*a+b)*sigmoid(x)-c` over 16M f32: 8 ops after
//! inlining gelu, one fused step), `chain-l2` (the same over 256K f32, which stay in L2: its
//! compute without the memory traffic), `erfc` (over [128, 1536] f32: MiniLM's exact-GELU
//! activations, in L2), `softmax` / `layer_norm` (last axis of [4096, 4096] f32; `softmax-l2` /
//! `layer_norm-l2` the same rows, 16 of them: 256 KiB in and out, in L2, the compute alone),
//! `encoder` (one pre-norm transformer encoder layer: hidden 384, 12 heads, seq 128, FFN 1536).
//! Times `run_into` with one reused output vector (no per-run output copy or allocation).
//! Prints `rlx WORKLOAD threads=T: median X ms steps=N kernels=[..] checksum=S`. Used by
//! `bench/compare_fusion.py`; one warm-up run, then at least MIN_REPS (5) runs and MIN_SECS (1 s).
//! With `profile`, also one line per step: its kernel and mean time per run
//! (`CpuOptions::profile`).

// The encoder layer is the one rlx-runtime's memory test plans (one definition for both).
#[path = "../../../core/rlx-runtime/tests/common/encoder.rs"]
mod encoder;

#[path = "common/args.rs"]
mod args;
#[path = "common/lcg.rs"]
mod lcg;

use rlx_cpu::{CpuExecutable, CpuOptions};
use rlx_ir::{DType, Graph, Shape, Tensor};
use std::time::Instant;

const USAGE: &str = "usage: fusion_bench chain|chain-l2|erfc|softmax|softmax-l2|layer_norm|layer_norm-l2|encoder THREADS [MIN_REPS] [MIN_SECS] [profile]";

/// The command line, checked.
#[derive(Debug, PartialEq)]
struct Args {
    workload: String,
    threads: usize,
    min_reps: usize,
    min_secs: f64,
    profile: bool,
}

/// Parse the arguments after the program name; `Err` says what is wrong (the caller prints it
/// with [`USAGE`] and exits 2: a bad value such as `THREADS abc` panicked in `parse().expect`).
fn parse_args(a: &[String]) -> Result<Args, String> {
    let (workload, threads) = match a {
        [w, t, ..] if a.len() <= 5 => (w.as_str(), t.as_str()),
        _ => return Err(format!("expected 2 to 5 arguments, got {}", a.len())),
    };
    if !["chain", "chain-l2", "softmax", "softmax-l2", "layer_norm", "layer_norm-l2", "encoder", "erfc"]
        .contains(&workload)
    {
        return Err(format!("unknown workload {workload:?}"));
    }
    use args::count;
    let min_secs = a.get(3).map_or(Ok(1.0), |s| args::secs("MIN_SECS", s))?;
    let profile = match a.get(4).map(String::as_str) {
        None => false,
        Some("profile") => true,
        Some(other) => return Err(format!("the fifth argument can only be `profile`, got {other:?}")),
    };
    Ok(Args {
        workload: workload.to_string(),
        threads: count("THREADS", threads)?,
        min_reps: a.get(2).map_or(Ok(5), |s| count("MIN_REPS", s))?,
        min_secs,
        profile,
    })
}

fn main() {
    let a: Vec<String> = std::env::args().skip(1).collect();
    let Args { workload, threads: t, min_reps, min_secs, profile } =
        args::or_usage(parse_args(&a), "fusion_bench", USAGE);
    let f32s = |d: &[usize]| Shape::new(d, DType::F32);
    let mut g = Graph::new(workload.as_str());
    let dims: Vec<usize> = match workload.as_str() {
        "chain" | "chain-l2" => {
            // `chain-l2`: 256K elements, in and out fit the L2 cache (the compute alone).
            let d = vec![if workload == "chain" { 1usize << 24 } else { 1 << 18 }];
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
        "erfc" => {
            let d = vec![128usize, 1536];
            let x = g.input("x", f32s(&d));
            let y = g.unary(rlx_ir::ops::UnaryOp::Erfc, x);
            g.set_outputs(vec![y]);
            d
        }
        "softmax" | "layer_norm" | "softmax-l2" | "layer_norm-l2" => {
            let d = vec![if workload.ends_with("-l2") { 16usize } else { 4096 }, 4096];
            let x = g.input("x", f32s(&d));
            let y =
                if workload.starts_with("softmax") { g.softmax(x, -1) } else { g.layer_norm(x, None, None, -1, 1e-5) };
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
        w => unreachable!("parse_args accepts no workload {w:?}"),
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
    let mut rng = lcg::Lcg(7);
    for v in x.as_mut_slice::<f32>().unwrap() {
        *v = rng.next(-3.0, 3.0);
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
        workload,
        ts[ts.len() / 2] * 1e3,
        steps.len(),
        ts.len()
    );
}

#[cfg(test)]
mod tests {
    use super::{Args, parse_args};

    fn parse(a: &[&str]) -> Result<Args, String> {
        parse_args(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    /// A bad argument is an `Err` for `main` to print with the usage line (status 2); `THREADS
    /// abc` panicked in `parse().expect("threads")`.
    #[test]
    fn bad_arguments_are_errors_not_panics() {
        let e = parse(&["chain-l2", "abc"]).unwrap_err();
        assert_eq!(e, r#"THREADS must be a whole number of at least 1, got "abc""#);
        for bad in [
            &["chain-l2"][..],
            &["chain-l2", "0"],
            &["chain-l2", "1", "x"],
            &["chain-l2", "1", "5", "soon"],
            &["chain-l2", "1", "5", "1", "prof"],
            &["chain-l2", "1", "5", "1", "profile", "extra"],
            &["chain-l3", "1"],
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
        let ok = parse(&["chain-l2", "2", "7", "0.5", "profile"]).unwrap();
        let want = Args { workload: "chain-l2".into(), threads: 2, min_reps: 7, min_secs: 0.5, profile: true };
        assert_eq!(ok, want);
        assert_eq!(parse(&["encoder", "1"]).unwrap().min_reps, 5);
    }
}
