//! `run` allocates nothing beyond its returned outputs, and a warm `run_into` nothing at all: a counting global allocator watches a
//! warm run of a graph of our own kernels (elementwise, broadcast, relu, softmax, reduce,
//! transpose, GEMV, the fused elementwise kernel). Known exception, not covered here: the `gemm` crate allocates its packing
//! workspace inside each matrix-matrix call.

use rlx_cpu::{CpuExecutable, CpuOptions};
use rlx_ir::{DType, Graph, Shape, Tensor};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// Counts the allocations of the thread that makes them. The executables here run on one
/// thread (`threads: Some(1)` runs every kernel on the calling thread), so the calling thread's
/// count is the run's; a global count also saw the test harness's own thread reporting another
/// test's result during the counted window (9 allocations instead of 5, once under load).
struct Counting;
thread_local! {
    static ALLOCS: Cell<usize> = const { Cell::new(0) };
}

fn allocs() -> usize {
    ALLOCS.with(Cell::get)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // `try_with`: a thread's allocations while its thread-locals are being torn down are
        // not counted (and must not panic).
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn warm_run_allocates_only_the_outputs() {
    let mut g = Graph::new("mlp");
    let x = g.input("x", Shape::new(&[4, 16], DType::F32));
    let w1 = g.param("w1", Shape::new(&[16, 32], DType::F32));
    let b1 = g.param("b1", Shape::new(&[32], DType::F32));
    let w2 = g.param("w2", Shape::new(&[32, 8], DType::F32));
    let h = g.mul(x, x);
    let h = g.transpose(h, &[1, 0]);
    let h = g.transpose(h, &[1, 0]);
    let row = g.slice(h, &[0, 0], &[1, 16], &[]);
    let h = g.mm(row, w1); // M = 1: our GEMV
    let h = g.add(h, b1);
    let h = g.relu(h);
    let y = g.mm(h, w2);
    let p = g.softmax(y, -1);
    let s = g.sum(p, &[-1], false);
    g.set_outputs(vec![p, s]);
    let mut g = rlx_ir::inline_composites(&g, &|n| rlx_cpu::native_composites().contains(&n));
    // Fused regions (bias + relu) run the fused kernel, which must not allocate either.
    rlx_compile::passes::fuse::run(&mut g, &Default::default()).unwrap();
    let mut exe = CpuExecutable::compile(&g, &CpuOptions { threads: Some(1), ..Default::default() }).unwrap();
    let t = |d: &[usize]| {
        Tensor::from_vec((0..d.iter().product::<usize>()).map(|i| (i % 7) as f32 * 0.1).collect(), d).unwrap()
    };
    let (xt, w1t, b1t, w2t) = (t(&[4, 16]), t(&[16, 32]), t(&[32]), t(&[32, 8]));
    exe.run(&[&xt], &[&w1t, &b1t, &w2t]).unwrap();

    assert!(exe.steps().iter().any(|s| s.kernel.starts_with("fused_elementwise")), "{:?}", exe.steps());
    let before = allocs();
    let out = exe.run(&[&xt], &[&w1t, &b1t, &w2t]).unwrap();
    let n = allocs() - before;
    // The returned Vec, plus per output tensor its data and its shape.
    assert!(n <= 1 + 2 * out.len(), "{n} allocations in a warm run for {} outputs", out.len());
    assert!(n >= out.len(), "the counter sees this thread's allocations: {n} for {} new outputs", out.len());
    let sums = out[1].as_slice::<f32>().unwrap();
    assert!(sums.iter().all(|v| (v - 1.0).abs() < 1e-5), "softmax rows sum to 1: {sums:?}");

    // `run_into` with the previous call's vector: outputs swapped out of the plan, the old
    // tensors swapped back in, no allocation and the same values.
    let mut outs = vec![];
    exe.run_into(&[&xt], &[&w1t, &b1t, &w2t], &mut outs).unwrap();
    exe.run_into(&[&xt], &[&w1t, &b1t, &w2t], &mut outs).unwrap();
    let before = allocs();
    exe.run_into(&[&xt], &[&w1t, &b1t, &w2t], &mut outs).unwrap();
    let n = allocs() - before;
    assert_eq!(n, 0, "allocations in a warm run_into");
    assert_eq!(outs, out, "run_into gives run's values");
}

#[test]
fn warm_run_into_copies_pass_through_outputs_without_allocating() {
    // Outputs that are an input, a param, a constant, and the same value twice: copied into the
    // caller's tensors (reusing them); the planned one is swapped.
    let mut g = Graph::new("pass");
    let x = g.input("x", Shape::new(&[64], DType::F32));
    let w = g.param("w", Shape::new(&[64], DType::F32));
    let c = g.scalar(2.0, DType::F32);
    let y = g.mul(x, w);
    g.set_outputs(vec![y, x, w, c, y]);
    let mut exe = CpuExecutable::compile(&g, &CpuOptions { threads: Some(1), ..Default::default() }).unwrap();
    let xt = Tensor::from_vec((0..64).map(|i| i as f32).collect(), &[64]).unwrap();
    let wt = Tensor::from_vec(vec![0.5f32; 64], &[64]).unwrap();
    let want = exe.run(&[&xt], &[&wt]).unwrap();
    let mut outs = vec![Tensor::scalar(1i32)];
    exe.run_into(&[&xt], &[&wt], &mut outs).unwrap();
    assert_eq!(outs, want);
    exe.run_into(&[&xt], &[&wt], &mut outs).unwrap();
    let before = allocs();
    exe.run_into(&[&xt], &[&wt], &mut outs).unwrap();
    assert_eq!(allocs() - before, 0, "allocations in a warm run_into");
    assert_eq!(outs, want);
}

/// A warm decode step of `attention_with_kvcache` (lengths read in place, per-thread scores,
/// the chunks' partial sums in a per-thread buffer) allocates nothing in `run_into`.
#[test]
fn warm_kvcache_attention_allocates_nothing() {
    let (b, h, hk, c, d) = (2, 6, 2, 1024, 32);
    let mut g = Graph::new("kv");
    let q = g.input("q", Shape::new(&[b, 1, h, d], DType::F32));
    let k = g.input("k", Shape::new(&[b, 1, hk, d], DType::F32));
    let kc = g.input("kc", Shape::new(&[b, hk, c, d], DType::F32));
    let l = g.input("l", Shape::new(&[b], DType::I32));
    let y = g.attention_with_kvcache(q, k, k, kc, kc, l, None);
    g.set_outputs(vec![y]);
    let mut exe = CpuExecutable::compile(&g, &CpuOptions { threads: Some(1), ..Default::default() }).unwrap();
    assert!(exe.steps().iter().any(|s| s.kernel.starts_with("attention_kvcache")), "{:?}", exe.steps());
    let t = |dims: &[usize]| {
        Tensor::from_vec((0..dims.iter().product::<usize>()).map(|i| (i % 11) as f32 * 0.05).collect(), dims).unwrap()
    };
    let (qt, kt, kct) = (t(&[b, 1, h, d]), t(&[b, 1, hk, d]), t(&[b, hk, c, d]));
    // Several 256-column chunks in one sequence, one in the other.
    let lt = Tensor::from_vec(vec![700i32, 100], &[b]).unwrap();
    let mut outs = vec![];
    exe.run_into(&[&qt, &kt, &kct, &lt], &[], &mut outs).unwrap();
    exe.run_into(&[&qt, &kt, &kct, &lt], &[], &mut outs).unwrap();
    let before = allocs();
    exe.run_into(&[&qt, &kt, &kct, &lt], &[], &mut outs).unwrap();
    assert_eq!(allocs() - before, 0, "allocations in a warm run_into");
    assert!(outs[0].as_slice::<f32>().unwrap().iter().all(|v| v.is_finite()));
}
