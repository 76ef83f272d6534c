//! A warm `Trainer::step` allocates nothing: a counting global allocator watches steps of a
//! small MLP (batch 1, so every matrix product runs on RLX's own GEMV or on `gemm`'s
//! allocation-free rank-1 path; `gemm`'s general kernel allocates its packing workspace per
//! call, which `examples/train_step.rs` reports for the batch-32 digits model), with the
//! in-graph update and with the host update.
//!
//! One test per file binary: the counter is process-wide.

use rlx_ir::{DType, Graph, Shape};
use rlx_optim::{Adam, Trainer, TrainerOptions, UpdateMode};
use rlx_runtime::CompileOptions;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn forward() -> Graph {
    let mut g = Graph::new("mlp");
    let x = g.input("x", Shape::new(&[1, 16], DType::F32));
    let y = g.input("y", Shape::new(&[1], DType::I32));
    let w1 = g.param("w1", Shape::new(&[32, 16], DType::F32));
    let b1 = g.param("b1", Shape::new(&[32], DType::F32));
    let w2 = g.param("w2", Shape::new(&[10, 32], DType::F32));
    let b2 = g.param("b2", Shape::new(&[10], DType::F32));
    let h = g.linear(x, w1, Some(b1));
    let h = g.relu(h);
    let logits = g.linear(h, w2, Some(b2));
    let loss = g.cross_entropy(logits, y);
    g.set_outputs(vec![loss]);
    g
}

/// Allocations during `steps` warm steps.
fn allocs_per_steps(update: UpdateMode, compile: CompileOptions, steps: usize) -> usize {
    let opts = TrainerOptions { update, compile, ..Default::default() };
    let mut tr = Trainer::new(&forward(), Adam::new(1e-2), opts).unwrap();
    assert_eq!(tr.in_graph(), update == UpdateMode::Auto);
    for (k, (n, d)) in tr.params().to_vec().iter().enumerate() {
        let v: Vec<f32> = (0..d.iter().product()).map(|i| ((i * 5 + k * 11) as f32 * 0.71).sin() * 0.3).collect();
        tr.set_param(n, &v).unwrap();
    }
    let mut step = |s: usize| {
        for (i, v) in tr.input_mut::<f32>("x").unwrap().iter_mut().enumerate() {
            *v = ((s * 37 + i * 3) as f32 * 0.53).cos();
        }
        tr.input_mut::<i32>("y").unwrap()[0] = (s % 10) as i32;
        tr.step().unwrap()
    };
    // Warm-up: the first steps allocate the output tensors once (outputs, then the plan's
    // buffers that the swapped-in params and slots replace).
    let first = step(0);
    for s in 1..3 {
        step(s);
    }
    let before = ALLOCS.load(Ordering::Relaxed);
    let mut last = first;
    for s in 3..3 + steps {
        last = step(s);
    }
    let n = ALLOCS.load(Ordering::Relaxed) - before;
    assert!(last.is_finite() && first.is_finite());
    n
}

#[test]
fn warm_training_steps_do_not_allocate() {
    // On the calling thread: rayon's global pool without denormal flushing (the small kernels
    // here never call into it), and one thread (no pool at all, denormals flushed).
    let caller = CompileOptions { threads: None, flush_denormals: false, ..Default::default() };
    for (update, compile) in [
        (UpdateMode::Auto, caller.clone()),
        (UpdateMode::Host, caller),
        (UpdateMode::Auto, CompileOptions::default().with_threads(1)),
    ] {
        let n = allocs_per_steps(update, compile.clone(), 20);
        assert_eq!(n, 0, "{update:?} {compile:?}: {n} allocations in 20 warm steps");
    }
    // The default (the denormal-flushing pool): handing the run to the pool goes through
    // rayon's injector queue, which allocates one block per 63 jobs, so at most 2 allocations
    // in 63 steps and none of RLX's own.
    let n = allocs_per_steps(UpdateMode::Auto, CompileOptions::default(), 63);
    assert!(n <= 2, "{n} allocations in 63 warm steps");
}
