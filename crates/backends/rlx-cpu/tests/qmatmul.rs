//! `dequant_matmul` on the CPU: the native kernel (packed weights) against llama.cpp's formula
//! (exact up to f32 rounding) and against the composite's f32 body (within the activation
//! quantization error), for every supported scheme and several shapes.

mod common;

use common::rand_tensor;
use rlx_cpu::{CpuExecutable, CpuOptions};
use rlx_gguf::GgmlType;
use rlx_gguf::quants::{dequantize, quantize};
use rlx_ir::{DType, Graph, Shape, Tensor};
use std::collections::HashMap;

/// Schemes with the integer (Q8_0-activation) path.
const Q8_PATH: &[GgmlType] = &[GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1];
/// Schemes run by dequantizing one row at a time.
const ROWWISE: &[GgmlType] =
    &[GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q5_0, GgmlType::Q2_K, GgmlType::Q8_K];

/// `(leading dims of x, k, n)`: decode (M = 1) and prefill (M = 7) shapes; N never a multiple
/// of the 16-row chunk; the larger ones run on several threads.
const SHAPES: &[(&[usize], usize, usize)] =
    &[(&[1], 256, 67), (&[7], 256, 45), (&[1, 7], 1024, 37), (&[7], 1024, 45), (&[1], 4096, 67)];

fn run_case(ty: GgmlType, lead: &[usize], k: usize, n: usize, seed: u64) -> String {
    rlx_gguf::register_ops();
    let what = format!("{} x{lead:?} k={k} n={n}", ty.name());
    let m: usize = lead.iter().product();
    let wf = rand_tensor(&[n, k], DType::F32, seed, -1.0, 1.0);
    let packed = quantize(ty, wf.as_slice::<f32>().unwrap()).unwrap();
    let mut xdims = lead.to_vec();
    xdims.push(k);
    let x = rand_tensor(&xdims, DType::F32, seed + 1, -2.0, 2.0);
    let mut g = Graph::new("qmm");
    let xi = g.input("x", Shape::new(&xdims, DType::F32));
    let wi = g.input("w", Shape::new(&[packed.len()], DType::U8));
    let y = g.dequant_matmul(xi, wi, ty.name(), n, k);
    g.set_outputs(vec![y]);
    let wt = Tensor::from_vec(packed.clone(), &[packed.len()]).unwrap();
    let mut exe = CpuExecutable::compile(&g, &CpuOptions { threads: Some(2) }).unwrap();
    let kernel = exe.steps().iter().find(|s| s.op.contains("dequant_matmul")).unwrap().kernel.to_string();
    assert!(kernel.starts_with("dequant_matmul_"), "{what}: kernel {kernel}");
    let got = exe.run(&[&x, &wt], &[]).unwrap().remove(0);
    assert_eq!(got.to_f64_vec(), exe.run(&[&x, &wt], &[]).unwrap()[0].to_f64_vec(), "{what}: rerun");
    let feeds: HashMap<String, Tensor> = [("x".into(), x.clone()), ("w".into(), wt)].into();
    let reference = rlx_ir::interp::evaluate(&g, &feeds).unwrap().remove(0);
    let mut want_dims = lead.to_vec();
    want_dims.push(n);
    assert_eq!(got.shape(), &want_dims[..], "{what}");

    let wd = dequantize(ty, &packed).unwrap();
    let (got, reference, xs) = (got.to_f64_vec(), reference.to_f64_vec(), x.as_slice::<f32>().unwrap());
    let eps = f32::EPSILON as f64;
    let q8 = Q8_PATH.contains(&ty);
    for mi in 0..m {
        let xr = &xs[mi * k..(mi + 1) * k];
        let xq = dequantize(GgmlType::Q8_0, &quantize(GgmlType::Q8_0, xr).unwrap()).unwrap();
        for j in 0..n {
            let wr = &wd[j * k..(j + 1) * k];
            let (o, r) = (got[mi * n + j], reference[mi * n + j]);
            // f32 accumulation: at most one rounding per block sum and per partial sum.
            let mag: f64 = wr.iter().zip(xr).map(|(&a, &b)| (a as f64 * b as f64).abs()).sum();
            let round = (k as f64 / 16.0 + 8.0) * eps * mag;
            if q8 {
                // llama.cpp's result: dequant(W) · dequant(quantize_q8_0(x)), in f64.
                let llama: f64 = wr.iter().zip(&xq).map(|(&a, &b)| a as f64 * b as f64).sum();
                assert!((o - llama).abs() <= round, "{what}: [{mi},{j}] {o} vs llama.cpp formula {llama}");
                // Activation quantization error: |x - xq| <= amax(block) / 254 per element.
                let qerr: f64 = (0..k)
                    .map(|i| {
                        let b = i / 32 * 32;
                        let amax = xr[b..b + 32].iter().fold(0f32, |a, v| a.max(v.abs())) as f64;
                        (wr[i] as f64).abs() * amax / 254.0 * (1.0 + 1e-3)
                    })
                    .sum();
                assert!((o - r).abs() <= qerr + 2.0 * round, "{what}: [{mi},{j}] {o} vs f32 reference {r}");
            } else {
                assert!((o - r).abs() <= 2.0 * round, "{what}: [{mi},{j}] {o} vs reference {r}");
            }
        }
    }
    kernel
}

#[test]
fn every_scheme_matches_reference() {
    let mut seed = 10;
    for &ty in Q8_PATH.iter().chain(ROWWISE) {
        for &(lead, k, n) in SHAPES {
            seed += 3;
            let kernel = run_case(ty, lead, k, n, seed);
            let want = if Q8_PATH.contains(&ty) { "dequant_matmul_q8" } else { "dequant_matmul_rowwise" };
            assert!(kernel.starts_with(want), "{}: {kernel}", ty.name());
            if std::env::var_os("RLX_CPU_NO_AVX512").is_some() {
                assert!(!kernel.contains("vnni") && !kernel.contains("avx"), "{kernel}");
            }
        }
    }
}

/// The portable fallback: rerun the test above in a child process with AVX-512 disabled.
#[test]
fn scalar_fallback_matches_reference() {
    if std::env::var_os("RLX_CPU_NO_AVX512").is_some() {
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "every_scheme_matches_reference", "--test-threads=1"])
        .env("RLX_CPU_NO_AVX512", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
}

#[test]
fn bad_operands_fall_back_or_error() {
    rlx_gguf::register_ops();
    // Wrong byte count: the registered op's shape rule rejects it, naming the sizes.
    let mut g = Graph::new("g");
    let x = g.input("x", Shape::new(&[1, 32], DType::F32));
    let w = g.input("w", Shape::new(&[33], DType::U8));
    g.dequant_matmul(x, w, "Q8_0", 1, 32);
    assert!(g.error().unwrap().to_string().contains("needs 34 bytes"), "{:?}", g.error());
    // k not a multiple of the block size.
    let mut g = Graph::new("g");
    let x = g.input("x", Shape::new(&[1, 48], DType::F32));
    let w = g.input("w", Shape::new(&[51], DType::U8));
    g.dequant_matmul(x, w, "Q8_0", 1, 48);
    assert!(g.error().unwrap().to_string().contains("not a multiple"), "{:?}", g.error());
    let mut g = Graph::new("g");
    let x = g.input("x", Shape::new(&[1, 32], DType::F32));
    let w = g.input("w", Shape::new(&[34], DType::U8));
    g.dequant_matmul(x, w, "Q9_9", 1, 32);
    assert!(g.error().unwrap().to_string().contains("unknown ggml type"), "{:?}", g.error());
}
