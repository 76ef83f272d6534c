//! A warm `Trainer::step` allocates nothing of its own: a counting global allocator watches
//! steps of a small MLP with the in-graph and the host update; the only allocations left are
//! the `gemm` crate's per-call workspace (bounded per matrix-matrix step; `examples/train_step.rs`
//! reports the count for the batch-32 digits model: 10 per step, 2 per product).
//!
//! One test per file binary: the counter is process-wide.

use rlx_ir::{DType, Graph, Shape};
use rlx_optim::{Adam, Trainer, TrainerOptions, UpdateMode};
use rlx_runtime::CompileOptions;
#[path = "common/counting_alloc.rs"]
mod counting_alloc;

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

/// Allocations during `steps` warm steps, and the number of compiled steps whose product runs
/// on `gemm`'s matrix-matrix kernel (which allocates its packing workspace per call).
fn allocs_per_steps(update: UpdateMode, compile: CompileOptions, steps: usize) -> (usize, usize) {
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
    let before = counting_alloc::allocs();
    let mut last = first;
    for s in 3..3 + steps {
        last = step(s);
    }
    let n = counting_alloc::allocs() - before;
    assert!(last.is_finite() && first.is_finite());
    let gemm = tr.steps().iter().filter(|s| s.kernel.starts_with("gemm")).count();
    (n, gemm)
}

#[test]
fn warm_training_steps_allocate_only_inside_gemm() {
    // Without the gemm crate's per-call workspace (at most 2 allocations per matrix-matrix
    // call, measured), a warm step allocates nothing: no output, input or state tensor.
    let caller = CompileOptions { threads: None, flush_denormals: false, ..Default::default() };
    for (update, compile) in [
        (UpdateMode::Auto, caller.clone()),
        (UpdateMode::Host, caller),
        (UpdateMode::Auto, CompileOptions::default().with_threads(1)),
        (UpdateMode::Auto, CompileOptions::default()),
    ] {
        let steps = 63;
        let (n, gemm) = allocs_per_steps(update, compile.clone(), steps);
        // The default runs in the denormal-flushing pool: rayon's injector queue allocates
        // one block per 63 runs handed to it.
        let bound = steps * 2 * gemm + 2;
        assert!(n <= bound, "{update:?} {compile:?}: {n} allocations in {steps} warm steps ({gemm} gemm steps)");
    }
}
