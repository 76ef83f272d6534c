//! The fused elementwise kernel against the reference interpreter: hand-written regions
//! (broadcast patterns, shared values, middle outputs, trailing reductions, bool values,
//! several tasks) and proptest-generated chains, each fused by `rlx_compile::passes::fuse`
//! and run by `CpuExecutable`.

mod common;

use common::{Tol, check_graph, check_graph_bounded, rand_tensor};
use proptest::prelude::*;
use rlx_ir::ops::CompareOp;
use rlx_ir::{DType, Graph, NodeId, Shape, Tensor};

const TOL: Tol = Tol { abs: 1e-6, rel: 1e-5 };

fn f32s(d: &[usize]) -> Shape {
    Shape::new(d, DType::F32)
}

/// Fuse `g`, check it against the reference, and return the step kernels.
fn fused_check(g: &Graph, feeds: &[(&str, Tensor)], what: &str) -> Vec<String> {
    let mut h = g.clone();
    rlx_compile::passes::fuse::run(&mut h, &Default::default()).unwrap();
    rlx_ir::verify(&h).unwrap();
    let mut kernels = vec![];
    for threads in [Some(1), Some(2)] {
        kernels = check_graph(&h, feeds, threads, TOL, what);
    }
    kernels
}

/// `gelu(x*a+b)*sigmoid(x)-c` with `a` a row, `b` a column, `c` a scalar constant.
fn chain(g: &mut Graph, dims: &[usize]) -> NodeId {
    let x = g.input("x", f32s(dims));
    let a = g.input("a", f32s(&dims[1..]));
    let b = g.input("b", f32s(&[dims[0], 1]));
    let c = g.scalar(0.25, DType::F32);
    let xa = g.mul(x, a);
    let xb = g.add(xa, b);
    let ge = g.gelu(xb, true);
    let sg = g.logistic(x);
    let p = g.mul(ge, sg);
    g.sub(p, c)
}

fn chain_feeds(dims: &[usize]) -> Vec<(&'static str, Tensor)> {
    vec![
        ("x", rand_tensor(dims, DType::F32, 1, -3.0, 3.0)),
        ("a", rand_tensor(&dims[1..], DType::F32, 2, -2.0, 2.0)),
        ("b", rand_tensor(&[dims[0], 1], DType::F32, 3, -1.0, 1.0)),
    ]
}

#[test]
fn eight_op_chain_runs_as_one_step() {
    for dims in [vec![3usize, 5], vec![300, 257]] {
        let mut g = Graph::new("chain");
        let y = chain(&mut g, &dims);
        g.set_outputs(vec![y]);
        let g = rlx_ir::inline_composites(&g, &|_| false);
        let k = fused_check(&g, &chain_feeds(&dims), "chain");
        assert_eq!(k, ["fused_elementwise_f32"], "{dims:?}");
    }
}

#[test]
fn shared_values_middle_outputs_and_reductions() {
    // Several tasks (300 x 257 > one task), rows not a multiple of the block.
    for dims in [vec![4usize, 7], vec![300, 257], vec![2, 3000]] {
        let mut g = Graph::new("t");
        let y = chain(&mut g, &dims);
        let x = g.inputs()[0];
        let e = g.exp(y);
        let s = g.sum(e, &[-1], false);
        let m = g.reduce_max(e, &[-1], false);
        let t = g.tanh(x);
        g.set_outputs(vec![s, y, m, t]);
        let g = rlx_ir::inline_composites(&g, &|_| false);
        let k = fused_check(&g, &chain_feeds(&dims), "reduce rows");
        assert!(k.contains(&"fused_elementwise_reduce_f32".to_string()), "{k:?}");
        // A full reduction.
        let mut g = Graph::new("t");
        let y = chain(&mut g, &dims);
        let sq = g.mul(y, y);
        let s = g.sum(sq, &[0, 1], false);
        g.set_outputs(vec![s]);
        let g = rlx_ir::inline_composites(&g, &|_| false);
        let feeds = chain_feeds(&dims);
        let mut h = g.clone();
        rlx_compile::passes::fuse::run(&mut h, &Default::default()).unwrap();
        let k = check_graph_bounded(&g, &h, &feeds, Some(2), "full sum");
        assert_eq!(k, ["fused_elementwise_reduce_f32"]);
    }
}

#[test]
fn repeated_intermediate_operand_frees_its_register_once() {
    // `t·t` with `t` a register: freeing `t` twice gave the next two values one register (an
    // Adam update's `v` came out wrong in the in-graph optimizer of rlx-optim).
    let mut g = Graph::new("square_of_intermediate");
    let (x, s) = (g.input("x", f32s(&[4, 6])), g.input("s", f32s(&[])));
    let v = g.input("v", f32s(&[4, 6]));
    let t = g.mul(x, s);
    let t2 = g.mul(t, t);
    let (b, ob) = (g.scalar(0.999, DType::F32), g.scalar(1e-3, DType::F32));
    let bv = g.mul(b, v);
    let o = g.mul(ob, t2);
    let v2 = g.add(bv, o);
    g.set_outputs(vec![v2]);
    let feeds = [
        ("x", rand_tensor(&[4, 6], DType::F32, 1, -2.0, 2.0)),
        ("s", rand_tensor(&[], DType::F32, 2, 0.5, 1.5)),
        ("v", rand_tensor(&[4, 6], DType::F32, 3, 0.0, 1.0)),
    ];
    let k = fused_check(&g, &feeds, "t*t");
    assert_eq!(k, ["fused_elementwise_f32"]);
}

#[test]
fn bool_values_strided_broadcasts_and_broadcast_in_dim() {
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[4, 3, 5]));
    let m = g.input("m", f32s(&[4, 1, 5])); // a middle broadcast: strided
    let v = g.input("v", f32s(&[3]));
    let pb = g.input("p", Shape::new(&[4, 3, 5], DType::Bool));
    let bv = g.broadcast_in_dim(v, [4, 3, 5], &[1]);
    let d = g.sub(x, m);
    let e = g.mul(d, bv);
    let gt = g.compare(CompareOp::Gt, e, x);
    let s = g.select(gt, e, x);
    let s2 = g.select(pb, s, d);
    let n = g.neg(s2);
    g.set_outputs(vec![n, gt]);
    let feeds = vec![
        ("x", rand_tensor(&[4, 3, 5], DType::F32, 1, -1.0, 1.0)),
        ("m", rand_tensor(&[4, 1, 5], DType::F32, 2, -1.0, 1.0)),
        ("v", rand_tensor(&[3], DType::F32, 3, -2.0, 2.0)),
        ("p", rand_tensor(&[4, 3, 5], DType::F32, 4, -1.0, 1.0).cast(DType::Bool)),
    ];
    let k = fused_check(&g, &feeds, "bool");
    assert_eq!(k, ["fused_elementwise_f32"]);
}

/// Random chains: op `kind` on operands picked from the pool; dims [R, C] with row, column

#[test]
fn results_written_in_place_are_read_back_and_stored_twice() {
    // Values computed straight into a result's block (the kernel's store-through): `y` is a
    // result that later steps read, stored twice (two outputs); `z` is computed into its
    // result, then its register is reused by `w`; `b` is a bool result (still copied).
    // 3 x 5000 runs several blocks and tasks.
    for dims in [vec![4usize, 7], vec![3, 5000]] {
        let mut g = Graph::new("t");
        let x = g.input("x", f32s(&dims));
        let c = g.input("c", f32s(&[dims[1]]));
        let y = g.mul(x, c);
        let z = g.tanh(y);
        let w = g.add(z, y);
        let w2 = g.mul(w, w);
        let b = g.compare(CompareOp::Gt, w2, y);
        g.set_outputs(vec![y, z, w2, y, b]);
        let feeds = vec![
            ("x", rand_tensor(&dims, DType::F32, 1, -2.0, 2.0)),
            ("c", rand_tensor(&[dims[1]], DType::F32, 2, -1.0, 1.0)),
        ];
        let k = fused_check(&g, &feeds, "store-through");
        assert_eq!(k, ["fused_elementwise_f32"], "{dims:?}");
    }
}

#[test]
fn results_of_16_mib_stream_out_and_large_operands_are_prefetched() {
    // Results of at least 16 MiB are written with non-temporal stores from a register (no
    // store-through) and operands of at least 1 MiB are prefetched blocks ahead: `y` is a
    // result read back later and stored twice, `r` a row reduction beside them, `b` a bool
    // result; 1027 x 4099 f32 = 16.8 MB, rows not a multiple of the block, several tasks.
    let dims = [1027usize, 4099];
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&dims));
    let c = g.input("c", f32s(&[dims[1]]));
    let y = g.mul(x, c);
    let z = g.tanh(y);
    let w = g.add(z, x);
    let w2 = g.mul(w, w);
    let b = g.compare(CompareOp::Gt, w2, y);
    let r = g.sum(w2, &[-1], false);
    g.set_outputs(vec![y, w2, r, y, b]);
    let feeds = vec![
        ("x", rand_tensor(&dims, DType::F32, 1, -2.0, 2.0)),
        ("c", rand_tensor(&[dims[1]], DType::F32, 2, -1.0, 1.0)),
    ];
    let mut h = g.clone();
    rlx_compile::passes::fuse::run(&mut h, &Default::default()).unwrap();
    let k = check_graph_bounded(&g, &h, &feeds, Some(2), "16 MiB results");
    assert_eq!(k, ["fused_elementwise_reduce_f32"]);
    let mut g = Graph::new("t");
    let y = chain(&mut g, &dims);
    g.set_outputs(vec![y]);
    let g = rlx_ir::inline_composites(&g, &|_| false);
    assert_eq!(fused_check(&g, &chain_feeds(&dims), "16 MiB chain"), ["fused_elementwise_f32"]);
}
/// and scalar operands; random outputs in the middle.
fn build(steps: &[(u8, usize, usize)], outs: &[usize], rows: usize) -> Graph {
    let mut g = Graph::new("random");
    let c = 33;
    let mut pool: Vec<NodeId> = vec![
        g.input("x", f32s(&[rows, c])),
        g.input("r", f32s(&[c])),
        g.input("k", f32s(&[rows, 1])),
        g.scalar(0.5, DType::F32),
    ];
    for &(kind, a, b) in steps {
        let (a, b) = (pool[a % pool.len()], pool[b % pool.len()]);
        let id = match kind {
            0 => g.tanh(a),
            1 => g.logistic(a),
            2 => g.add(a, b),
            3 => g.mul(a, b),
            4 => g.sub(a, b),
            5 => {
                let p = g.compare(CompareOp::Lt, a, b);
                g.select(p, a, b)
            }
            6 => g.binary(rlx_ir::ops::BinaryOp::Max, a, b),
            7 => g.sin(a),
            8 if g.shape(a).rank() == 2 => g.sum(a, &[-1], true),
            _ => g.neg(a),
        };
        pool.push(id);
    }
    let mut o: Vec<NodeId> = outs.iter().map(|&i| pool[4 + i % (pool.len() - 4)]).collect();
    o.push(*pool.last().unwrap());
    g.set_outputs(o);
    g
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_chains_match_reference(
        steps in prop::collection::vec((0u8..10, 0usize..64, 0usize..64), 1..20),
        outs in prop::collection::vec(0usize..64, 0..3),
        rows in prop::sample::select(vec![1usize, 5, 40]),
    ) {
        let g = build(&steps, &outs, rows);
        let feeds = vec![
            ("x", rand_tensor(&[rows, 33], DType::F32, 1, -2.0, 2.0)),
            ("r", rand_tensor(&[33], DType::F32, 2, -2.0, 2.0)),
            ("k", rand_tensor(&[rows, 1], DType::F32, 3, -2.0, 2.0)),
        ];
        let mut h = g.clone();
        rlx_compile::compile(&mut h, &Default::default()).unwrap();
        // Within the rounding-error bound of the source graph, not a fixed tolerance: a row
        // sum with cancellation (sum |terms| >> |sum|) is correct to n u sum |terms| only, in
        // whatever order the kernel adds (the regression seed is such a row).
        check_graph_bounded(&g, &h, &feeds, Some(2), "random");
    }
}

#[test]
fn error_bound_of_a_sum_scales_with_the_magnitude_of_its_terms() {
    // 1e4 + 1 - 1e4 over 3 terms: |sum| = 1 but the f32 roundings are relative to the terms, so
    // the bound is gamma(2) * 20001 + u * 1 + tiny (u = 2^-24), not a fraction of |sum|.
    let mut g = Graph::new("cancel");
    let x = g.input("x", f32s(&[1, 3]));
    let s = g.sum(x, &[-1], false);
    g.set_outputs(vec![s]);
    let feeds = [("x", Tensor::from_vec(vec![1e4f32, 1.0, -1e4], &[1, 3]).unwrap())];
    let e = common::error_bounds(&g, &feeds).unwrap()[0].to_f64_vec()[0];
    let u = f32::EPSILON as f64 / 2.0;
    let want = 2.0 * u / (1.0 - 2.0 * u) * 20001.0 + u + f32::MIN_POSITIVE as f64;
    assert!((e - want).abs() <= 1e-12 * want, "{e} vs {want}");
    // Errors carried into the sum add up: tanh's bound per term (|tanh| r + tiny) is summed.
    let mut g = Graph::new("tanh_sum");
    let x = g.input("x", f32s(&[1, 3]));
    let t = g.tanh(x);
    let s = g.sum(t, &[-1], false);
    g.set_outputs(vec![s, t]);
    let e = common::error_bounds(&g, &feeds).unwrap();
    let (es, et) = (e[0].to_f64_vec()[0], e[1].to_f64_vec());
    let terms: f64 = [1e4f64, 1.0, -1e4].iter().map(|v| v.tanh().abs()).sum();
    assert!(es > et.iter().sum::<f64>() + 2.0 * u * terms * 0.99, "{es} {et:?}");
    // An op without a rule is reported, not guessed.
    let mut g = Graph::new("div");
    let x = g.input("x", f32s(&[1, 3]));
    let d = g.div(x, x);
    g.set_outputs(vec![d]);
    assert!(common::error_bounds(&g, &feeds).unwrap_err().contains("div"));
}

/// The in-graph Adam / AdamW update as `rlx-optim` emits it (rank-0 inputs for the step
/// scalars, constants for the betas and eps): results `m2, v2, p2`.
fn adam_region(n: usize, wd: Option<f64>) -> Graph {
    let mut g = Graph::new("adam");
    let [m, v, gr, p] = ["m", "v", "g", "p"].map(|s| g.input(s, f32s(&[n / 8, 8])));
    let [lr, ic1, ic2] = ["lr", "ic1", "ic2"].map(|s| g.input(s, f32s(&[])));
    let k = |g: &mut Graph, x: f64| g.scalar(x, DType::F32);
    let (b1, ob1, b2, ob2, eps) = (k(&mut g, 0.9), k(&mut g, 0.1), k(&mut g, 0.999), k(&mut g, 0.001), k(&mut g, 1e-8));
    let (bm, og) = (g.mul(b1, m), g.mul(ob1, gr));
    let m2 = g.add(bm, og);
    let d = g.mul(m2, ic1);
    let gg = g.mul(gr, gr);
    let (bv, og2) = (g.mul(b2, v), g.mul(ob2, gg));
    let v2 = g.add(bv, og2);
    let vh = g.mul(v2, ic2);
    let s = g.sqrt(vh);
    let den = g.add(s, eps);
    let mut q = g.div(d, den);
    if let Some(wd) = wd {
        let wd = k(&mut g, wd);
        let wp = g.mul(wd, p);
        q = g.add(q, wp);
    }
    let st = g.mul(lr, q);
    let p2 = g.sub(p, st);
    g.set_outputs(vec![m2, v2, p2]);
    g
}

#[test]
fn adam_region_runs_in_one_pass_bit_identical_to_unfused_kernels() {
    use rlx_cpu::{CpuExecutable, CpuOptions};
    for (n, wd) in [(8, None), (3000, None), (3000, Some(0.01)), (40_000, Some(0.01))] {
        let g = adam_region(n, wd);
        let dims = [n / 8, 8];
        let mut feeds: Vec<(&str, Tensor)> = vec![
            ("m", rand_tensor(&dims, DType::F32, 1, -0.1, 0.1)),
            ("v", rand_tensor(&dims, DType::F32, 2, 0.0, 0.01)),
            ("g", rand_tensor(&dims, DType::F32, 3, -1.0, 1.0)),
            ("p", rand_tensor(&dims, DType::F32, 4, -1.0, 1.0)),
        ];
        for (name, v) in [("lr", 0.01f32), ("ic1", 1.0 / 0.19), ("ic2", 1.0 / 0.001999)] {
            feeds.push((name, Tensor::from_vec(vec![v], &[]).unwrap()));
        }
        let what = format!("adam n={n} wd={wd:?}");
        let kernels = fused_check(&g, &feeds, &what);
        assert_eq!(kernels, ["fused_adam_f32"], "{what}");
        // Bit-identical to the unfused elementwise kernels, at one and two threads.
        let by_name = |g: &Graph, ids: &[rlx_ir::NodeId]| -> Vec<Tensor> {
            ids.iter().map(|&i| feeds.iter().find(|(k, _)| Some(*k) == g.source_name(i)).unwrap().1.clone()).collect()
        };
        let mut fused = g.clone();
        rlx_compile::passes::fuse::run(&mut fused, &Default::default()).unwrap();
        let run = |g: &Graph, threads| {
            let opts = CpuOptions { threads, flush_denormals: false, ..Default::default() };
            let ins = by_name(g, g.inputs());
            let refs: Vec<&Tensor> = ins.iter().collect();
            CpuExecutable::compile(g, &opts).unwrap().run(&refs, &[]).unwrap()
        };
        let want = run(&g, Some(1));
        for threads in [Some(1), Some(2)] {
            let got = run(&fused, threads);
            for (k, (a, b)) in got.iter().zip(&want).enumerate() {
                assert_eq!(a.to_le_bytes(), b.to_le_bytes(), "{what}: output {k} differs from the unfused kernels");
            }
        }
    }
}

#[test]
fn a_region_that_only_resembles_adam_runs_the_register_program() {
    // Reading m2 a second time (as an extra result) breaks the one-pass pattern.
    let mut g = adam_region(64, None);
    let outs = g.outputs().to_vec();
    let extra = g.unary(rlx_ir::ops::UnaryOp::Neg, outs[0]);
    g.set_outputs(vec![outs[0], outs[1], outs[2], extra]);
    let dims = [8, 8];
    let mut feeds: Vec<(&str, Tensor)> = ["m", "v", "g", "p"]
        .iter()
        .enumerate()
        .map(|(k, &s)| (s, rand_tensor(&dims, DType::F32, k as u64, 0.0, 1.0)))
        .collect();
    for name in ["lr", "ic1", "ic2"] {
        feeds.push((name, Tensor::from_vec(vec![0.5f32], &[]).unwrap()));
    }
    assert_eq!(fused_check(&g, &feeds, "adam + extra"), ["fused_elementwise_f32"]);
}

/// Run `g` unfused (one kernel per op) and fused, at one and two threads, and require
/// bit-identical results: the fused kernel's register tiles compute each op as the unfused
/// kernel does.
fn assert_fused_bit_identical(g: &Graph, feeds: &[(&str, Tensor)], fused_only: bool, what: &str) {
    use rlx_cpu::{CpuExecutable, CpuOptions};
    let mut fused = g.clone();
    rlx_compile::passes::fuse::run(&mut fused, &Default::default()).unwrap();
    let run = |g: &Graph, threads| {
        let opts = CpuOptions { threads, flush_denormals: false, ..Default::default() };
        let ins: Vec<Tensor> = g
            .inputs()
            .iter()
            .map(|&i| feeds.iter().find(|(k, _)| Some(*k) == g.source_name(i)).unwrap().1.clone())
            .collect();
        let refs: Vec<&Tensor> = ins.iter().collect();
        let mut exe = CpuExecutable::compile(g, &opts).unwrap();
        let kernels: Vec<String> = exe.steps().iter().map(|s| s.kernel.to_string()).collect();
        (exe.run(&refs, &[]).unwrap(), kernels)
    };
    let (want, _) = run(g, Some(1));
    for threads in [Some(1), Some(2)] {
        let (got, kernels) = run(&fused, threads);
        assert!(
            !fused_only || kernels.iter().any(|k| k.starts_with("fused_elementwise")),
            "{what}: not fused: {kernels:?}"
        );
        for (k, (a, b)) in got.iter().zip(&want).enumerate() {
            assert_eq!(nan_blind_bits(a), nan_blind_bits(b), "{what}: output {k} differs from the unfused kernels");
        }
    }
}

/// The bytes of `t` with every f32 NaN written as the one quiet NaN `0x7fc00000`: which NaN an
/// operation on two NaNs returns (the sign and payload of either, or the default NaN) is left
/// open by IEEE 754 and by LLVM, which may swap the operands of an `fadd` in the unfused
/// kernels' compiled loops (a CI run met `x + (-x)` at x = NaN giving 0xffc00000 fused and
/// 0x7fc00000 unfused, in a partial vector). Every other bit, ±0 and subnormals included, must
/// still match.
fn nan_blind_bits(t: &Tensor) -> Vec<u8> {
    match t.as_slice::<f32>() {
        Some(v) => v.iter().flat_map(|x| if x.is_nan() { 0x7fc0_0000u32 } else { x.to_bits() }.to_le_bytes()).collect(),
        None => t.to_le_bytes(),
    }
}

/// `rand_tensor` with NaN, ±inf, ±0 and subnormals planted every 7th element.
fn with_specials(dims: &[usize], seed: u64) -> Tensor {
    let mut t = rand_tensor(dims, DType::F32, seed, -4.0, 4.0);
    let sp = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 1e-40, -3e-39, 0.625, -0.625, 88.9];
    for (i, v) in t.as_mut_slice::<f32>().unwrap().iter_mut().enumerate().step_by(7) {
        *v = sp[(i / 7 + seed as usize) % sp.len()];
    }
    t
}

/// Step kinds of the tile proptest: every tile op, and `x * x` twice as often as another.
const TILE_KINDS: u8 = (rlx_cpu::kernels::TILE_UNARY_OPS.len() + rlx_cpu::kernels::TILE_BINARY_OPS.len() + 2) as u8;

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Chains of the ops the register tiles run (every unary and binary op they cover, on
    /// special values too), with shared values, repeated operands and outputs in the middle,
    /// over sizes with partial tiles and several blocks: bit-identical to the unfused kernels.
    #[test]
    fn register_tiles_are_bit_identical_to_unfused_kernels(
        steps in prop::collection::vec((0u8..TILE_KINDS, 0usize..64, 0usize..64), 1..24),
        outs in prop::collection::vec(0usize..64, 0..3),
        rows in prop::sample::select(vec![1usize, 3, 70]),
    ) {
        use rlx_ir::ops::BinaryOp;
        let c = 37;
        let mut g = Graph::new("tiles");
        let mut pool: Vec<NodeId> = vec![
            g.input("x", f32s(&[rows, c])),
            g.input("y", f32s(&[rows, c])),
            g.input("r", f32s(&[c])),
            g.scalar(0.75, DType::F32),
        ];
        let (un, bin) = (rlx_cpu::kernels::TILE_UNARY_OPS, rlx_cpu::kernels::TILE_BINARY_OPS);
        for &(kind, a, b) in &steps {
            let (a, b) = (pool[a % pool.len()], pool[b % pool.len()]);
            let k = kind as usize;
            let id = if k < un.len() { g.unary(un[k], a) } else if k - un.len() < bin.len() {
                g.binary(bin[k - un.len()], a, b)
            } else {
                g.binary(BinaryOp::Mul, a, a)
            };
            pool.push(id);
        }
        let mut o: Vec<NodeId> = outs.iter().map(|&i| pool[4 + i % (pool.len() - 4)]).collect();
        o.push(*pool.last().unwrap());
        g.set_outputs(o);
        let feeds = vec![
            ("x", with_specials(&[rows, c], 1)),
            ("y", with_specials(&[rows, c], 2)),
            ("r", rand_tensor(&[c], DType::F32, 3, -2.0, 2.0)),
        ];
        assert_fused_bit_identical(&g, &feeds, false, "random tile chain");
    }
}

#[test]
fn streamed_chain_is_bit_identical_to_unfused_kernels() {
    // 16.8 MB results stream from the tiles (non-temporal stores); rows not a multiple of a
    // tile or a block; a value read again after the streamed result.
    let dims = [1027usize, 4099];
    let mut g = Graph::new("t");
    let y = chain(&mut g, &dims);
    let x = g.inputs()[0];
    let t = g.tanh(x);
    let w = g.mul(t, y);
    g.set_outputs(vec![y, w]);
    let g = rlx_ir::inline_composites(&g, &|_| false);
    let mut feeds = chain_feeds(&dims);
    feeds[0].1 = with_specials(&dims, 5);
    assert_fused_bit_identical(&g, &feeds, true, "16 MiB chain");
}

/// Every op the tiles cover, in one region that must fuse (the proptest above also meets
/// graphs the pass leaves unfused, which compare unfused with unfused): bit-identical.
#[test]
fn every_tile_op_in_one_fused_region_is_bit_identical() {
    let dims = [3usize, 1000];
    let mut g = Graph::new("all ops");
    let (x, y) = (g.input("x", f32s(&dims)), g.input("y", f32s(&dims)));
    // One output per op (a NaN from one op would otherwise hide the others' lanes).
    let mut outs = vec![];
    for &u in rlx_cpu::kernels::TILE_UNARY_OPS {
        let t = g.unary(u, x);
        outs.push(g.mul(t, y));
    }
    for &b in rlx_cpu::kernels::TILE_BINARY_OPS {
        let t = g.binary(b, y, x);
        outs.push(g.binary(b, t, x));
    }
    g.set_outputs(outs);
    let feeds = vec![("x", with_specials(&dims, 7)), ("y", with_specials(&dims, 8))];
    assert_fused_bit_identical(&g, &feeds, true, "every tile op");
}
