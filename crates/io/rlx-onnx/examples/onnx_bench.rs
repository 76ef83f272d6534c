//! Time an ONNX BERT-style encoder (inputs `input_ids`, `attention_mask`, optional
//! `token_type_ids`, all int64 [batch, seq]) imported with rlx-onnx and run on the RLX CPU
//! backend. Run by `bench/compare_onnx.py`.
//!
//!     cargo run --release -p rlx-onnx --example onnx_bench -- MODEL.onnx BATCH SEQ THREADS
//!
//! One warm-up run, then at least 5 runs and at least 1 s; prints
//! `rlx import <ms> ms compile <ms> ms first_run <ms> ms steps <n> (transpose <n>)` (compile: a cold compile
//! for the static input shapes — specialize, fingerprint, passes, CPU plan) and then
//! `rlx median <ms> ms reps=<n>`.

#[path = "../../../backends/rlx-cpu/examples/common/thread_time.rs"]
mod thread_time;
use thread_time::thread_cpu_secs;

use rlx_ir::Tensor;
use rlx_onnx::{ImportOptions, import_file};
use rlx_runtime::{CompileOptions, Device, Session};
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [model, batch, seq, threads] = args.as_slice() else {
        return Err("usage: onnx_bench MODEL.onnx BATCH SEQ THREADS".into());
    };
    let (b, s, t): (usize, usize, usize) = (batch.parse()?, seq.parse()?, threads.parse()?);
    let m = rlx_onnx::load(Path::new(model))?;
    let names: Vec<String> =
        m.graph.as_ref().map(|g| g.input.iter().map(|i| i.name().to_string()).collect()).unwrap_or_default();
    // Deterministic token ids in the BERT vocab: [CLS] ... [SEP], all positions attended.
    let ids: Vec<i64> = (0..b * s)
        .map(|i| {
            if i % s == 0 {
                101
            } else if i % s == s - 1 {
                102
            } else {
                1000 + (i as i64 * 7919) % 28000
            }
        })
        .collect();
    let mut feeds: Vec<(String, Tensor)> = vec![];
    for n in &names {
        let v = match n.as_str() {
            "input_ids" => ids.clone(),
            "attention_mask" => vec![1i64; b * s],
            "token_type_ids" => vec![0i64; b * s],
            other => return Err(format!("unexpected model input {other:?}").into()),
        };
        feeds.push((n.clone(), Tensor::from_vec(v, &[b, s])?));
    }
    let shapes: HashMap<String, Vec<usize>> = names.iter().map(|n| (n.clone(), vec![b, s])).collect();
    let t_import = Instant::now();
    let (_, im) = import_file(Path::new(model), ImportOptions { input_shapes: shapes, ..Default::default() })?;
    let import_ms = t_import.elapsed().as_secs_f64() * 1e3;
    let opts = CompileOptions::default().with_threads(t);
    let t_compile = Instant::now();
    let mut compiled = Session::try_new(Device::Cpu)?.try_compile_with(im.graph, &opts)?;
    let refs: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    let compile_ms = t_compile.elapsed().as_secs_f64() * 1e3;
    let t_first = Instant::now();
    compiled.run_tensors(&refs)?;
    let first_ms = t_first.elapsed().as_secs_f64() * 1e3;
    let steps = compiled.steps();
    let transposes = steps.iter().filter(|s| s.kernel == "transpose").count();
    println!(
        "rlx import {import_ms:.1} ms compile {compile_ms:.1} ms first_run {first_ms:.1} ms steps {} (transpose {transposes})",
        steps.len()
    );
    let (mut ts, mut cpu) = (vec![], vec![]);
    let start = Instant::now();
    while ts.len() < 5 || start.elapsed().as_secs_f64() < 1.0 {
        let (t0, c0) = (Instant::now(), thread_cpu_secs() * 1e3);
        compiled.run_tensors(&refs)?;
        ts.push(t0.elapsed().as_secs_f64() * 1e3);
        cpu.push(thread_cpu_secs() * 1e3 - c0);
    }
    ts.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    // With one thread every kernel runs on this thread: its CPU time leaves out the waits of a
    // loaded machine (steadier for A/B runs; wall time stays the figure compared with peers).
    if t == 1 {
        eprintln!("thread cpu median {:.3} ms", cpu[cpu.len() / 2]);
    }
    println!("rlx median {:.4} ms reps={}", ts[ts.len() / 2], ts.len());
    Ok(())
}
