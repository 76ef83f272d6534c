//! Fast `dot_general` kernels (gemm, GEMV) against the reference evaluation: plain, transposed
//! and batched layouts, size-0 and size-1 dims, f32 / f64 / f16 / bf16, preferred result types.

mod common;
use common::{Tol, check_graph, eps, rand_tensor};
use rlx_ir::ops::DotGeneral;
use rlx_ir::{DType, Graph, Shape};

/// Build `dot_general(a, b, dims)` with `a` an input and `b` a param, run it, return kernels.
fn run_dot(ad: &[usize], bd: &[usize], dims: DotGeneral, dt: DType, threads: Option<usize>) -> Vec<String> {
    let mut g = Graph::new("dot");
    let a = g.input("a", Shape::new(ad, dt));
    let b = g.param("b", Shape::new(bd, dt));
    let y = g.dot_general(a, b, dims.clone());
    g.set_outputs(vec![y]);
    let out_dt = g.shape(y).dtype;
    let k: usize = dims.lhs_contracting.iter().map(|&i| ad[i]).product();
    let compute = if [dt, out_dt].contains(&DType::F64) { DType::F64 } else { DType::F32 };
    // Inputs in [-1, 1): each product is at most 1, so a K-term sum errs by at most about
    // K · eps(compute); the result then rounds once more into its dtype.
    let tol = Tol { abs: 2.0 * (k.max(1) as f64) * eps(compute) + eps(out_dt), rel: 2.0 * eps(out_dt) };
    let feeds = [("a", rand_tensor(ad, dt, 1, -1.0, 1.0)), ("b", rand_tensor(bd, dt, 2, -1.0, 1.0))];
    check_graph(&g, &feeds, threads, tol, &format!("dot {ad:?}x{bd:?} {dims:?} {dt}"))
}

fn mm() -> DotGeneral {
    DotGeneral::contract(&[1], &[0])
}

#[test]
fn matmul_shapes_f32() {
    for &(m, k, n) in &[(3, 4, 5), (17, 33, 9), (64, 64, 64), (2, 1, 3), (1, 1, 1), (130, 70, 90)] {
        let ks = run_dot(&[m, k], &[k, n], mm(), DType::F32, None);
        let want = if m == 1 || n == 1 { "gemv" } else { "gemm" };
        assert_eq!(ks, vec![want], "{m}x{k}x{n}");
    }
}

#[test]
fn size_zero_dims() {
    for &(m, k, n) in &[(0, 3, 4), (3, 0, 4), (3, 4, 0), (1, 0, 5), (5, 0, 1), (0, 0, 0)] {
        run_dot(&[m, k], &[k, n], mm(), DType::F32, None);
        run_dot(&[m, k], &[k, n], mm(), DType::F64, None);
    }
}

#[test]
fn transposed_operands() {
    // lhs [K, M] (contract dim 0), rhs [N, K] (contract dim 1), and both.
    assert_eq!(run_dot(&[7, 5], &[7, 6], DotGeneral::contract(&[0], &[0]), DType::F32, None), vec!["gemm"]);
    assert_eq!(run_dot(&[5, 7], &[6, 7], DotGeneral::contract(&[1], &[1]), DType::F32, None), vec!["gemm"]);
    assert_eq!(run_dot(&[7, 5], &[6, 7], DotGeneral::contract(&[0], &[1]), DType::F32, None), vec!["gemm"]);
    // Two contracting dims in matching order collapse; in swapped order they fall back.
    assert_eq!(run_dot(&[3, 4, 5], &[4, 5, 6], DotGeneral::contract(&[1, 2], &[0, 1]), DType::F32, None), vec!["gemm"]);
    assert_eq!(
        run_dot(&[3, 4, 5], &[5, 4, 6], DotGeneral::contract(&[1, 2], &[1, 0]), DType::F32, None),
        vec!["reference"]
    );
    // Several free dims on each side.
    assert_eq!(run_dot(&[2, 3, 4], &[4, 5, 2], DotGeneral::contract(&[2], &[0]), DType::F32, None), vec!["gemm"]);
}

#[test]
fn batched() {
    let bmm = DotGeneral {
        lhs_contracting: vec![2],
        rhs_contracting: vec![1],
        lhs_batch: vec![0],
        rhs_batch: vec![0],
        preferred_element_type: None,
    };
    assert_eq!(run_dot(&[4, 12, 8], &[4, 8, 5], bmm.clone(), DType::F32, None), vec!["gemm"]);
    assert_eq!(run_dot(&[4, 12, 8], &[4, 8, 5], bmm.clone(), DType::F32, Some(2)), vec!["gemm"]);
    assert_eq!(run_dot(&[0, 6, 8], &[0, 8, 5], bmm.clone(), DType::F32, None), vec!["gemm"]);
    // Prefill attention's shape class (3 products of 2M+ multiply-adds, past the size `gemm`
    // would split itself) on 2 threads: one product per thread, the third on whichever is free.
    assert_eq!(run_dot(&[3, 160, 64], &[3, 64, 200], bmm.clone(), DType::F32, Some(2)), vec!["gemm"]);
    // At most 8 lhs rows against a small rhs: one GEMV per row, both matrix layouts.
    assert_eq!(run_dot(&[4, 6, 8], &[4, 8, 5], bmm.clone(), DType::F32, None), vec!["gemv"]);
    assert_eq!(run_dot(&[4, 6, 8], &[4, 8, 5], bmm.clone(), DType::F32, Some(2)), vec!["gemv"]);
    let bmm_t = DotGeneral { rhs_contracting: vec![2], ..bmm.clone() };
    // Decode attention's q·Kᵀ (3 query rows per KV head) on 2 threads: tasks of 64 keys × all
    // query rows.
    assert_eq!(run_dot(&[3, 3, 64], &[3, 256, 64], bmm_t, DType::F32, Some(2)), vec!["gemv"]);
    assert_eq!(run_dot(&[3, 3, 256], &[3, 256, 64], bmm.clone(), DType::F32, Some(2)), vec!["gemv"]);
    // Attention-style: batch dims (b, h) with the rhs's batch dims in another position.
    let attn = DotGeneral {
        lhs_contracting: vec![3],
        rhs_contracting: vec![3],
        lhs_batch: vec![0, 1],
        rhs_batch: vec![1, 0],
        preferred_element_type: None,
    };
    assert_eq!(run_dot(&[2, 3, 12, 8], &[3, 2, 7, 8], attn.clone(), DType::F32, None), vec!["gemm"]);
    assert_eq!(run_dot(&[2, 3, 5, 8], &[3, 2, 7, 8], attn.clone(), DType::F32, None), vec!["gemv"]);
    // Enough GEMVs in total (>= 32K multiply-adds) that they run in parallel over (batch, row)
    // on 2 threads: each form, with permuted batch dims, and 5 or 9 tasks (uneven split); the
    // first also in key chunks of 64 with a short last one (200 keys).
    assert_eq!(run_dot(&[2, 3, 5, 64], &[3, 2, 200, 64], attn, DType::F32, Some(2)), vec!["gemv"]);
    assert_eq!(run_dot(&[6, 300, 64], &[6, 64, 1], bmm.clone(), DType::F32, Some(2)), vec!["gemv"]);
    assert_eq!(run_dot(&[5, 1, 300], &[5, 300, 70], bmm.clone(), DType::F32, Some(2)), vec!["gemv"]);
    // Batched GEMV.
    assert_eq!(run_dot(&[4, 1, 8], &[4, 8, 33], bmm.clone(), DType::F32, None), vec!["gemv"]);
    assert_eq!(run_dot(&[4, 6, 8], &[4, 8, 1], bmm, DType::F32, None), vec!["gemv"]);
}

#[test]
fn gemv_forms() {
    // x[1,K] @ W[K,N] (axpy form) incl. tails that are not a multiple of 16, and large
    // enough to split across threads.
    for &(k, n) in &[(1, 1), (3, 17), (37, 129), (513, 600), (1024, 1024)] {
        assert_eq!(run_dot(&[1, k], &[k, n], mm(), DType::F32, Some(2)), vec!["gemv"], "{k}x{n}");
        assert_eq!(run_dot(&[1, k], &[k, n], mm(), DType::F32, Some(1)), vec!["gemv"], "{k}x{n}");
    }
    // A[M,K] @ v[K,1] (dot form), x @ W^T (dot form), A^T v (axpy form with the lhs).
    for &(m, k) in &[(1, 5), (7, 33), (600, 513)] {
        assert_eq!(run_dot(&[m, k], &[k, 1], mm(), DType::F32, Some(2)), vec!["gemv"]);
        assert_eq!(run_dot(&[1, k], &[m, k], DotGeneral::contract(&[1], &[1]), DType::F32, None), vec!["gemv"]);
        assert_eq!(run_dot(&[k, m], &[k, 1], DotGeneral::contract(&[0], &[0]), DType::F32, None), vec!["gemv"]);
    }
    // Vector operands: [K] . [K] and [K] @ [K, N].
    assert_eq!(run_dot(&[300], &[300], DotGeneral::contract(&[0], &[0]), DType::F32, None), vec!["gemv"]);
    assert_eq!(run_dot(&[30], &[30, 20], DotGeneral::contract(&[0], &[0]), DType::F32, None), vec!["gemv"]);
}

#[test]
fn other_float_dtypes() {
    for dt in [DType::F64, DType::F16, DType::BF16] {
        assert_eq!(run_dot(&[9, 20], &[20, 7], mm(), dt, None), vec!["gemm"], "{dt}");
        run_dot(&[1, 20], &[20, 7], mm(), dt, None);
        run_dot(&[9, 20], &[20, 1], mm(), dt, None);
    }
    // f16 operands with an f32 result, f32 operands with an f64 result.
    let mut d = mm();
    d.preferred_element_type = Some(DType::F32);
    assert_eq!(run_dot(&[9, 20], &[20, 7], d.clone(), DType::F16, None), vec!["gemm"]);
    d.preferred_element_type = Some(DType::F64);
    assert_eq!(run_dot(&[9, 20], &[20, 7], d, DType::F32, None), vec!["gemm"]);
}

#[test]
fn ints_use_the_reference() {
    let mut g = Graph::new("dot");
    let a = g.input("a", Shape::new(&[3, 4], DType::I32));
    let b = g.input("b", Shape::new(&[4, 2], DType::I32));
    let y = g.dot_general(a, b, mm());
    g.set_outputs(vec![y]);
    let feeds =
        [("a", rand_tensor(&[3, 4], DType::I32, 1, -9.0, 9.0)), ("b", rand_tensor(&[4, 2], DType::I32, 2, -9.0, 9.0))];
    assert_eq!(check_graph(&g, &feeds, None, common::EXACT, "int dot"), vec!["reference"]);
}

#[test]
fn large_parallel_gemm() {
    assert_eq!(run_dot(&[256, 300], &[300, 200], mm(), DType::F32, Some(2)), vec!["gemm"]);
    assert_eq!(run_dot(&[200, 300], &[300, 256], mm(), DType::F64, Some(2)), vec!["gemm"]);
}

/// `a[m, k] · w` with `w` a graph constant (`[k, n]`, or `[n, k]` contracted on its dim 1 when
/// `tr`): packed once at compile time and run on our AVX-512 kernel (`sgemm`) where the CPU has
/// it; every run must equal the reference.
fn run_const(m: usize, k: usize, n: usize, tr: bool, threads: Option<usize>) -> Vec<String> {
    let mut g = Graph::new("const_rhs");
    let a = g.input("a", Shape::new(&[m, k], DType::F32));
    let (wd, dims) = if tr { ([n, k], DotGeneral::contract(&[1], &[1])) } else { ([k, n], mm()) };
    let w = g.constant(rand_tensor(&wd, DType::F32, 5, -1.0, 1.0));
    let y = g.dot_general(a, w, dims);
    g.set_outputs(vec![y]);
    let tol = Tol { abs: 2.0 * k as f64 * eps(DType::F32), rel: 2.0 * eps(DType::F32) };
    let feeds = [("a", rand_tensor(&[m, k], DType::F32, 1, -1.0, 1.0))];
    check_graph(&g, &feeds, threads, tol, &format!("constant rhs {m}x{k}x{n} tr={tr}"))
}

/// Shapes around the pre-packed kernel's blocking (tiles of 12 × 32, `K` blocks of 128, row
/// blocks of 192): partial tiles, several `K` blocks, several row blocks, a transposed
/// constant, split across threads by rows and by columns.
#[test]
fn constant_rhs_blocking_edges() {
    let shapes = [(13, 257, 33), (25, 600, 17), (200, 40, 100), (385, 513, 65), (12, 256, 32), (11, 31, 15), (7, 5, 3)];
    for &(m, k, n) in &shapes {
        for t in [Some(1), Some(2)] {
            for tr in [false, true] {
                assert_eq!(run_const(m, k, n, tr, t), vec!["gemm"], "{m}x{k}x{n}");
            }
        }
    }
}

/// A rhs that changes per run (a param) is packed during each product, `K` block by `K` block:
/// every combination of transposed operands (the transposed packings use 16 × 16 register
/// transposes, with element-wise edges), shapes around the blocking, split across threads by
/// rows (packed first, in parallel) and by columns (each task packs its own panels).
#[test]
fn per_run_rhs_every_layout() {
    let shapes = [(13, 257, 33), (200, 40, 100), (385, 300, 65), (16, 16, 16), (33, 48, 47), (7, 5, 3), (600, 64, 40)];
    for &(m, k, n) in &shapes {
        for t in [Some(1), Some(2)] {
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                let ad: Vec<usize> = if ta { vec![k, m] } else { vec![m, k] };
                let bd: Vec<usize> = if tb { vec![n, k] } else { vec![k, n] };
                let dims = DotGeneral::contract(&[if ta { 0 } else { 1 }], &[if tb { 1 } else { 0 }]);
                assert_eq!(run_dot(&ad, &bd, dims, DType::F32, t), vec!["gemm"], "{m}x{k}x{n} {ta} {tb} {t:?}");
            }
        }
    }
}

/// A per-run rhs above sgemm's per-run limit (1M elements) runs on the `gemm` crate.
#[test]
fn large_per_run_rhs() {
    for t in [Some(1), Some(2)] {
        assert_eq!(run_dot(&[8, 1100], &[1100, 1000], mm(), DType::F32, t), vec!["gemm"]);
    }
}

/// Constant weights totalling more than 1 MiB are moved into one shared buffer on huge pages
/// after packing: a chain of two such products equals the reference, and equals bit for bit the
/// same chain with the weights passed as params (packed during each product: the same f32
/// FMAs in the same order), at 1 and 2 threads.
#[test]
fn constant_weights_in_one_arena() {
    use rlx_cpu::{CpuExecutable, CpuOptions};
    let (m, k1, k2, n) = (64, 600, 520, 300);
    let (w1, w2) = (rand_tensor(&[k1, k2], DType::F32, 7, -1.0, 1.0), rand_tensor(&[k2, n], DType::F32, 8, -1.0, 1.0));
    let x = rand_tensor(&[m, k1], DType::F32, 9, -1.0, 1.0);
    let chain = |constant: bool| {
        let mut g = Graph::new("arena");
        let a = g.input("a", Shape::new(&[m, k1], DType::F32));
        let (b1, b2) = if constant {
            (g.constant(w1.clone()), g.constant(w2.clone()))
        } else {
            (g.param("w1", Shape::new(&[k1, k2], DType::F32)), g.param("w2", Shape::new(&[k2, n], DType::F32)))
        };
        let h = g.dot_general(a, b1, mm());
        let y = g.dot_general(h, b2, mm());
        g.set_outputs(vec![y]);
        g
    };
    // |h| ≤ k1 and each sum errs by at most 2·K·eps of its magnitude bound: k2·(2·k1·eps)·1 from
    // h's error plus 2·k2·eps·k1 from the second sum.
    let tol = Tol { abs: 4.0 * (k1 * k2) as f64 * eps(DType::F32), rel: 0.0 };
    for t in [Some(1), Some(2)] {
        let g = chain(true);
        assert_eq!(check_graph(&g, &[("a", x.clone())], t, tol, "arena chain"), vec!["gemm", "gemm"]);
        let opts = CpuOptions { threads: t, flush_denormals: false, ..Default::default() };
        let got = CpuExecutable::compile(&g, &opts).unwrap().run(&[&x], &[]).unwrap();
        let per_run = CpuExecutable::compile(&chain(false), &opts).unwrap().run(&[&x], &[&w1, &w2]).unwrap();
        assert_eq!(got[0].to_le_bytes(), per_run[0].to_le_bytes(), "threads {t:?}");
    }
}

/// A wide product whose `K` spans several blocks: 200 × 400 × 1400 has two row blocks, two
/// `K` blocks (the second accumulating into prefetched tiles of `C`) and a masked last panel.
/// Equal to the reference with the weights as a param (packed during the product) and as a
/// constant (packed at compile time), bit-identical between the two, at 1 and 2 threads.
#[test]
fn wide_products_over_several_k_blocks() {
    use rlx_cpu::{CpuExecutable, CpuOptions};
    let (m, k, n) = (200, 400, 1400);
    let w = rand_tensor(&[k, n], DType::F32, 11, -1.0, 1.0);
    let x = rand_tensor(&[m, k], DType::F32, 12, -1.0, 1.0);
    let product = |constant: bool| {
        let mut g = Graph::new("wide");
        let a = g.input("a", Shape::new(&[m, k], DType::F32));
        let b = if constant { g.constant(w.clone()) } else { g.param("w", Shape::new(&[k, n], DType::F32)) };
        let y = g.dot_general(a, b, mm());
        g.set_outputs(vec![y]);
        g
    };
    let tol = Tol { abs: 2.0 * k as f64 * eps(DType::F32), rel: 0.0 };
    for t in [Some(1), Some(2)] {
        assert_eq!(check_graph(&product(true), &[("a", x.clone())], t, tol, "wide constant"), vec!["gemm"]);
        let opts = CpuOptions { threads: t, flush_denormals: false, ..Default::default() };
        let got = CpuExecutable::compile(&product(true), &opts).unwrap().run(&[&x], &[]).unwrap();
        let per_run = CpuExecutable::compile(&product(false), &opts).unwrap().run(&[&x], &[&w]).unwrap();
        assert_eq!(got[0].to_le_bytes(), per_run[0].to_le_bytes(), "threads {t:?}");
    }
}
