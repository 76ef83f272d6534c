//! Forward + backward of an MLP 784-512-512-10 (relu, softmax cross-entropy) at batch 256 on
//! the CPU: `value_and_grad` with respect to every weight and bias, compiled once, timed over
//! repeated runs. Prints `rlx median <ms> ms reps=<n>`; `bench/compare_grad.py` runs it next to
//! JAX (`jax.jit(jax.value_and_grad)`) and prints the ratio.
//!
//! `RAYON_NUM_THREADS=1 cargo run --release -p rlx --example grad_bench`
use rlx::prelude::*;
use rlx_autodiff::value_and_grad;
use std::time::Instant;

fn main() {
    let (b, sizes) = (256usize, [784usize, 512, 512, 10]);
    let mut g = Graph::new("mlp");
    let x = g.input("x", Shape::new(&[b, sizes[0]], DType::F32));
    let t = g.input("t", Shape::new(&[b], DType::I32));
    let mut h = x;
    let mut wrt = vec![];
    for l in 0..3 {
        let w = g.param(&format!("w{l}"), Shape::new(&[sizes[l], sizes[l + 1]], DType::F32));
        let bias = g.param(&format!("b{l}"), Shape::new(&[sizes[l + 1]], DType::F32));
        wrt.extend([w, bias]);
        let y = g.mm(h, w);
        let y = g.add(y, bias);
        h = if l < 2 { g.relu(y) } else { y };
    }
    let loss = g.cross_entropy(h, t);
    g.set_outputs(vec![loss]);
    let vg = value_and_grad(&g, &wrt).expect("value_and_grad");
    let mut c = Session::new(Device::Cpu).compile(vg);
    let mut seed = 1u64;
    let mut rnd = |n: usize, s: f32| -> Vec<f32> {
        (0..n)
            .map(|_| {
                seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((seed >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * s
            })
            .collect()
    };
    for l in 0..3 {
        let s = (2.0 / sizes[l] as f32).sqrt();
        c.set_param(&format!("w{l}"), &rnd(sizes[l] * sizes[l + 1], s));
        c.set_param(&format!("b{l}"), &vec![0.0; sizes[l + 1]]);
    }
    let xv = Tensor::from_vec(rnd(b * sizes[0], 2.0), &[b, sizes[0]]).unwrap();
    let tv = Tensor::from_vec((0..b as i32).map(|i| i % 10).collect::<Vec<_>>(), &[b]).unwrap();
    let feeds = [("x", &xv), ("t", &tv)];
    // Outputs into a vector reused across runs (`run_into`), as a training loop does: the
    // gradients are handed over from the memory plan, not copied into fresh tensors.
    let mut out = vec![];
    c.run_into(&feeds, &mut out).expect("run");
    let first = out.clone();
    let mut ts = vec![];
    let start = Instant::now();
    while ts.len() < 5 || start.elapsed().as_secs_f64() < 2.0 {
        let t0 = Instant::now();
        c.run_into(&feeds, &mut out).expect("run");
        ts.push(t0.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(&out);
    }
    ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!("loss {:.6}", first[0].to_f64_vec()[0]);
    if std::env::var("GRAD_BENCH_STEPS").is_ok() {
        for s in c.steps() {
            println!("step {s:?}");
        }
    }
    println!("rlx median {:.3} ms reps={}", ts[ts.len() / 2], ts.len());
}
