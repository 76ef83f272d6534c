//! Memory planning end to end: random graphs (elementwise with broadcasting, reshape chains,
//! prefix and middle slices, reductions, matmul, a tuple op, several consumers, outputs in the
//! middle) run through the planned executor agree with the reference interpreter and with the
//! unplanned executor (to f32 rounding); the plan really reuses buffers, runs in place and aliases.
//! Also the per-step profile (`CpuOptions::profile`).

mod common;

use common::{Tol, assert_close, rand_tensor};
use proptest::prelude::*;
use rlx_cpu::{CpuExecutable, CpuOptions, LirOptions};
use rlx_ir::{DType, Graph, NodeId, Shape, Tensor};
use std::collections::HashMap;

const TOL: Tol = Tol { abs: 1e-5, rel: 1e-5 };

fn random_graph(steps: &[(u8, usize, usize)], outs: &[usize]) -> Graph {
    let mut g = Graph::new("random");
    let x = g.input("x", Shape::new(&[4, 8], DType::F32));
    let w = g.param("w", Shape::new(&[8, 8], DType::F32));
    let row = g.input("row", Shape::new(&[8], DType::F32));
    let mut pool = vec![x, row];
    for &(kind, a, b) in steps {
        let (a, b) = (pool[a % pool.len()], pool[b % pool.len()]);
        let sa = g.shape(a).static_dims().unwrap();
        let sb = g.shape(b).static_dims().unwrap();
        let bcast = sa == sb || sb == [8] || sa == [8];
        let id = match kind {
            0 => g.tanh(a),
            1 => g.neg(a),
            2 if bcast => g.add(a, b),
            // Magnitudes stay bounded (|a · tanh b| ≤ |a|, exp of a tanh ≤ e), so products of
            // computed values cannot amplify f32 rounding without bound.
            3 if bcast => {
                let t = g.tanh(b);
                g.mul(a, t)
            }
            4 if sa == [4, 8] => {
                let r = g.reshape(a, [32]);
                g.reshape(r, [4, 8])
            }
            5 if sa == [4, 8] => {
                let s = g.slice(a, &[0, 0], &[1, 8], &[]);
                g.sub(a, s)
            }
            6 if sa == [4, 8] => {
                let s = g.slice(a, &[2, 0], &[3, 8], &[]);
                g.reshape(s, [8])
            }
            7 if sa == [4, 8] => g.sum(a, &[0], false),
            8 if sa == [4, 8] => g.mm(a, w),
            9 if sa == [4, 8] => {
                let (v, _) = g.top_k(a, 2);
                let z = g.sum(v, &[1], true);
                g.add(a, z)
            }
            _ => {
                let t = g.tanh(a);
                g.exp(t)
            }
        };
        pool.push(id);
    }
    let mut o: Vec<NodeId> = outs.iter().map(|&i| pool[i % pool.len()]).collect();
    o.push(*pool.last().unwrap());
    g.set_outputs(o);
    g
}

fn run(g: &Graph, plan: &LirOptions, feeds: &[Tensor]) -> Vec<Tensor> {
    let mut exe =
        CpuExecutable::compile_with_plan(g, &CpuOptions { threads: Some(1), ..Default::default() }, plan).unwrap();
    let first = exe.run(&[&feeds[0], &feeds[1]], &[&feeds[2]]).unwrap();
    let again = exe.run(&[&feeds[0], &feeds[1]], &[&feeds[2]]).unwrap();
    assert_eq!(first, again, "a second run differs: state leaked between runs");
    // `run_into` with one reused vector: buffers swapped back and forth, same values each time.
    let mut outs = vec![];
    for k in 0..3 {
        exe.run_into(&[&feeds[0], &feeds[1]], &[&feeds[2]], &mut outs).unwrap();
        assert_eq!(outs, first, "run_into call {k} differs from run");
    }
    first
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn planned_matches_reference_and_unplanned(
        steps in prop::collection::vec((0u8..11, 0usize..64, 0usize..64), 1..30),
        outs in prop::collection::vec(0usize..64, 0..4),
    ) {
        let g = random_graph(&steps, &outs);
        prop_assert!(g.error().is_none(), "{:?}", g.error());
        let feeds = vec![
            rand_tensor(&[4, 8], DType::F32, 1, -1.0, 1.0),
            rand_tensor(&[8], DType::F32, 2, -1.0, 1.0),
            rand_tensor(&[8, 8], DType::F32, 3, -0.5, 0.5),
        ];
        let planned = run(&g, &LirOptions::default(), &feeds);
        let unplanned = run(&g, &LirOptions { schedule: false, reuse: false, views: false, in_place: false }, &feeds);
        let map: HashMap<String, Tensor> =
            [("x", &feeds[0]), ("row", &feeds[1]), ("w", &feeds[2])].iter().map(|(k, v)| (k.to_string(), (*v).clone())).collect();
        let want = rlx_ir::interp::evaluate(&g, &map).unwrap();
        for (k, (p, w)) in planned.iter().zip(&want).enumerate() {
            assert_close(p, w, TOL, &format!("output {k}"));
            assert_close(p, &unplanned[k], TOL, &format!("output {k} vs unplanned"));
        }
    }
}

#[test]
fn plan_reuses_aliases_and_runs_in_place() {
    let mut g = Graph::new("chain");
    let x = g.input("x", Shape::new(&[64, 64], DType::F32));
    let mut h = g.exp(x);
    for _ in 0..4 {
        let t = g.tanh(h);
        let r = g.reshape(t, [4096]);
        let s = g.neg(r);
        h = g.reshape(s, [64, 64]);
        let c = g.exp(h);
        h = g.add(h, c);
    }
    g.set_outputs(vec![h]);
    let exe = CpuExecutable::compile(&g, &CpuOptions { threads: Some(1), ..Default::default() }).unwrap();
    let lir = exe.lir();
    let kernels: Vec<&str> = lir.steps.iter().map(|s| s.kernel.as_str()).collect();
    assert!(kernels.contains(&"view") && kernels.contains(&"in_place_f32"), "{lir}");
    assert!(lir.buffers.len() <= 2, "{lir}");
    assert!(lir.arena_bytes * 4 <= lir.unplanned_bytes, "{lir}");
}

/// A graph whose static shapes need more memory than the allocator gives (a 4 PB broadcast,
/// as an ONNX `Expand` to absurd dims) is a `CpuError::OutOfMemory` at compile time, naming
/// the request, not an allocation abort.
#[test]
fn absurd_buffers_are_an_error_not_an_abort() {
    let mut g = Graph::new("huge");
    let x = g.input("x", Shape::new(&[1], DType::F32));
    let y = g.broadcast_in_dim(x, vec![1_000_000usize, 1_000_000, 1000], &[2]);
    let y = g.exp(y);
    g.set_outputs(vec![y]);
    let e = rlx_cpu::CpuExecutable::compile(&g, &rlx_cpu::CpuOptions::default()).err().expect("must not compile");
    assert!(matches!(e, rlx_cpu::CpuError::OutOfMemory { elems: 1_000_000_000_000_000, .. }), "{e}");
    assert!(e.to_string().contains("cannot allocate 4000000000000000 bytes"), "{e}");
}

/// A step without operands is planned like any other: the view check read its first operand
/// and panicked. Found with an ONNX `Expand` of a constant to [2^20, 2^20] then `ReduceSum`:
/// too large to fold, so fusion made one `fused_elementwise` step that reads only constants.
#[test]
fn steps_without_operands_are_planned() {
    let mut g = Graph::new("splat");
    let c = g.scalar(0.5, DType::F32);
    let b = g.broadcast_in_dim(c, vec![512usize, 512], &[]);
    let e = g.exp(b);
    let s = g.sum(e, &[0, 1], false);
    g.set_outputs(vec![s]);
    rlx_compile::compile(&mut g, &Default::default()).unwrap();
    assert!(g.nodes().iter().any(|n| n.inputs.is_empty() && n.op.name().starts_with("fused")), "{g}");
    let mut exe = CpuExecutable::compile(&g, &CpuOptions::default()).unwrap();
    let out = exe.run(&[], &[]).unwrap();
    // f32 sum of 2^18 equal terms: blocked summation keeps the error near log2(n) ulps.
    let want = 512.0 * 512.0 * 0.5f64.exp();
    assert!((out[0].as_slice::<f32>().unwrap()[0] as f64 - want).abs() < want * 1e-5, "{:?}", out[0]);
}

/// More threads than cores (`rlx generate --threads 1000` on 2 cores once ran a 1000-thread
/// spinning team for minutes) are clamped to the available parallelism; results are unchanged.
#[test]
fn thread_counts_above_the_cores_are_clamped() {
    let mut g = Graph::new("mm");
    let x = g.input("x", Shape::new(&[64, 96], DType::F32));
    let w = g.input("w", Shape::new(&[96, 80], DType::F32));
    let y = g.dot_general(x, w, rlx_ir::ops::DotGeneral::contract(&[1], &[0]));
    let z = g.tanh(y);
    g.set_outputs(vec![z]);
    let cores = std::thread::available_parallelism().unwrap().get();
    let feeds = [rand_tensor(&[64, 96], DType::F32, 1, -1.0, 1.0), rand_tensor(&[96, 80], DType::F32, 2, -1.0, 1.0)];
    let run = |t: usize| {
        let mut exe = CpuExecutable::compile(&g, &CpuOptions::default().with_threads(t)).unwrap();
        let out = exe.run(&[&feeds[0], &feeds[1]], &[]).unwrap();
        (exe.threads(), out)
    };
    let (t1, base) = run(1);
    let (tn, many) = run(cores + 1000);
    assert_eq!((t1, tn), (1, cores));
    assert_close(&many[0], &base[0], TOL, "clamped threads");
}

/// `CpuOptions::profile` counts every step of every run and sums its time; `reset_profile`
/// zeroes both; without the option there is no profile.
#[test]
fn profile_counts_each_step_per_run() {
    let mut g = Graph::new("profiled");
    let x = g.input("x", Shape::new(&[256, 256], DType::F32));
    let e = g.exp(x);
    let r = g.reshape(e, [65536]);
    let s = g.sum(r, &[0], false);
    g.set_outputs(vec![s]);
    let x = Tensor::from_vec(vec![0.5f32; 65536], &[256, 256]).unwrap();
    let opts = CpuOptions { threads: Some(1), ..Default::default() };
    let mut plain = CpuExecutable::compile(&g, &opts).unwrap();
    plain.run(&[&x], &[]).unwrap();
    assert!(plain.profile().is_none());
    let mut exe = CpuExecutable::compile(&g, &opts.with_profile(true)).unwrap();
    for _ in 0..3 {
        let y = exe.run(&[&x], &[]).unwrap();
        assert!((y[0].as_slice::<f32>().unwrap()[0] - 65536.0 * 0.5f32.exp()).abs() < 1.0);
    }
    let p = exe.profile().unwrap();
    assert_eq!(p.iter().map(|s| &s.step).collect::<Vec<_>>(), exe.steps().iter().collect::<Vec<_>>());
    assert!(p.iter().all(|s| s.calls == 3), "{p:?}");
    // The exp over 64K floats takes microseconds; a view takes next to nothing.
    assert!(p.iter().any(|s| s.step.kernel != "view" && s.total.as_nanos() > 0), "{p:?}");
    exe.reset_profile();
    assert!(exe.profile().unwrap().iter().all(|s| s.calls == 0 && s.total.is_zero()));
}
