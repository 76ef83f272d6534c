//! Helpers shared by the kernel tests: deterministic random tensors, running a graph through
//! `CpuExecutable` and the reference interpreter, and tolerant comparison.
#![allow(dead_code)]

use rlx_cpu::{CpuExecutable, CpuOptions};
use rlx_ir::{DType, Graph, Tensor};
use std::collections::HashMap;

/// Uniform values in `[lo, hi)` from a 64-bit LCG, converted to `dtype`.
pub fn rand_tensor(dims: &[usize], dtype: DType, seed: u64, lo: f64, hi: f64) -> Tensor {
    let n: usize = dims.iter().product();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
    let vals: Vec<f64> = (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect();
    Tensor::from_f64s(dims, dtype, &vals).unwrap()
}

/// Absolute and relative tolerance: `|got - want| <= abs + rel * |want|`.
#[derive(Clone, Copy, Debug)]
pub struct Tol {
    pub abs: f64,
    pub rel: f64,
}

pub const EXACT: Tol = Tol { abs: 0.0, rel: 0.0 };

/// Compare two tensors elementwise (NaN matches NaN, infinities must be equal).
pub fn assert_close(got: &Tensor, want: &Tensor, tol: Tol, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        let ok = if b.is_nan() {
            a.is_nan()
        } else if b.is_infinite() || a.is_infinite() {
            a == b
        } else {
            (a - b).abs() <= tol.abs + tol.rel * b.abs()
        };
        assert!(ok, "{what}: element {i} of {:?}: got {a}, want {b} (tol {tol:?})", got.shape());
    }
}

/// Compile `g` (optionally with a thread count), run it on `feeds`, and compare every output
/// with the reference interpreter. Returns the kernel names of the steps. Kernels run with IEEE
/// subnormals (`flush_denormals: false`), as the reference computes: some cases check
/// subnormal results on purpose (`tests/denormals.rs` covers the flushing default).
pub fn check_graph(g: &Graph, feeds: &[(&str, Tensor)], threads: Option<usize>, tol: Tol, what: &str) -> Vec<String> {
    let mut exe = CpuExecutable::compile(g, &CpuOptions { threads, flush_denormals: false, ..Default::default() })
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let map: HashMap<String, Tensor> = feeds.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    let by_id = |id| &map[g.source_name(id).unwrap()];
    let ins: Vec<&Tensor> = g.inputs().iter().map(|&i| by_id(i)).collect();
    let params: Vec<&Tensor> = g.params().iter().map(|&i| by_id(i)).collect();
    let got = exe.run(&ins, &params).unwrap_or_else(|e| panic!("{what}: run: {e}"));
    // Run twice: kernels must not depend on state left by a previous run.
    let again = exe.run(&ins, &params).unwrap();
    let want = rlx_ir::interp::evaluate(g, &map).unwrap_or_else(|e| panic!("{what}: reference: {e}"));
    for (k, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_close(a, b, tol, &format!("{what} output {k}"));
        assert_eq!(a.to_le_bytes(), again[k].to_le_bytes(), "{what}: second run differs");
    }
    exe.steps().into_iter().map(|s| s.kernel.to_string()).collect()
}

/// Machine epsilon of a float dtype.
pub fn eps(d: DType) -> f64 {
    match d {
        DType::F64 => f64::EPSILON,
        DType::F32 => f32::EPSILON as f64,
        DType::F16 => 9.765625e-4,
        DType::BF16 => 7.8125e-3,
        _ => 0.0,
    }
}
