//! Time `Trainer::step` on the digits MLP of `rlx train` (64-128-10, relu, softmax
//! cross-entropy, Adam, batch 32): prints `train_step median <µs> us reps=<n>
//! allocs_per_step=<a>` (heap allocations per timed step, counted by a global allocator), and
//! with `--steps` the kernel of every step of the compiled training graph. For profiling
//! (`perf record ... target/release/examples/train_step`), not a pass/fail check.
//!
//! `RLX_NUM_THREADS=1 cargo run --release -p rlx-optim --example train_step [-- --steps] [-- --host] [-- --ir]`
//! (`--ir`: print the compiled training graph after the last compiler pass).
use rlx_ir::{DType, Graph, Shape};
use rlx_optim::data::{self, epoch_order};
use rlx_optim::{Adam, Trainer, TrainerOptions, UpdateMode};
#[path = "../tests/common/counting_alloc.rs"]
mod counting_alloc;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let ds = data::digits().expect("embedded data set");
    let (b, f) = (32, ds.features());
    let mut g = Graph::new("mlp");
    let x = g.input("x", Shape::new(&[b, f], DType::F32));
    let w1 = g.param("fc1.weight", Shape::new(&[128, f], DType::F32));
    let b1 = g.param("fc1.bias", Shape::new(&[128], DType::F32));
    let w2 = g.param("fc2.weight", Shape::new(&[10, 128], DType::F32));
    let b2 = g.param("fc2.bias", Shape::new(&[10], DType::F32));
    let h = g.linear(x, w1, Some(b1));
    let h = g.relu(h);
    let logits = g.linear(h, w2, Some(b2));
    let y = g.input("y", Shape::new(&[b], DType::I32));
    let loss = g.cross_entropy(logits, y);
    g.set_outputs(vec![loss]);
    let mode = if args.iter().any(|a| a == "--host") { UpdateMode::Host } else { UpdateMode::Auto };
    let dump = args.iter().any(|a| a == "--ir");
    let compile = rlx_runtime::CompileOptions::default().with_dump_ir(dump);
    let opts = TrainerOptions { update: mode, compile, ..Default::default() };
    let mut tr = Trainer::new(&g, Adam::new(1e-2), opts).expect("trainer");
    for (k, (name, dims)) in tr.params().to_vec().iter().enumerate() {
        let n: usize = dims.iter().product();
        let v: Vec<f32> = (0..n).map(|i| ((i * 7 + k * 13) as f32 * 0.37).sin() * 0.1).collect();
        tr.set_param(name, &v).expect("set");
    }
    if args.iter().any(|a| a == "--steps") {
        for s in tr.steps() {
            println!("step {s:?}");
        }
    }
    if dump {
        let report = tr.compiled().compile_report().expect("compiled");
        println!("{}", report.passes.last().and_then(|p| p.ir.as_deref()).unwrap_or(""));
    }
    println!("in-graph update: {}", tr.in_graph());
    let mut ts = Vec::with_capacity(1 << 20);
    let start = Instant::now();
    let mut epoch = 0;
    let mut allocs = 0;
    while ts.len() < 200 || start.elapsed().as_secs_f64() < 2.0 {
        let order = epoch_order(ds.train.len(), 0, epoch);
        for batch in order.chunks_exact(b) {
            let a0 = counting_alloc::allocs();
            let t0 = Instant::now();
            let x = tr.input_mut::<f32>("x").expect("x");
            for (k, &i) in batch.iter().enumerate() {
                x[k * f..(k + 1) * f].copy_from_slice(&ds.train.x[i * f..(i + 1) * f]);
            }
            let y = tr.input_mut::<i32>("y").expect("y");
            for (k, &i) in batch.iter().enumerate() {
                y[k] = ds.train.y[i];
            }
            std::hint::black_box(tr.step().expect("step"));
            ts.push(t0.elapsed().as_secs_f64() * 1e6);
            if ts.len() > 3 {
                allocs += counting_alloc::allocs() - a0;
            }
        }
        epoch += 1;
    }
    ts.sort_by(|a, b| a.total_cmp(b));
    let per_step = allocs as f64 / (ts.len() - 3) as f64;
    println!("train_step median {:.1} us reps={} allocs_per_step={per_step:.2}", ts[ts.len() / 2], ts.len());
}
