//! Products of an f16 / bf16 operand widened to f32 (`rlx_compile::passes::upcast` + the
//! `dot_general_upcast` / `dot_epilogue` kernels): a decode-attention step over an f16 KV cache
//! (`q·Kᵀ`, softmax, `p·V` plus the new block's share) against the reference interpreter and,
//! bit for bit, against the same graph over an f32 cache holding the same values (widening is
//! exact and the GEMV sums in the same order); prefill-sized products (widened into scratch),
//! bf16, and a narrow lhs.

mod common;

use common::{Tol, assert_close, check_graph, rand_tensor};
use rlx_compile::PassOptions;
use rlx_cpu::{CpuExecutable, CpuOptions};
use rlx_ir::ops::DotGeneral;
use rlx_ir::{DType, Graph, Shape, Tensor};

const TOL: Tol = Tol { abs: 1e-5, rel: 1e-5 };

fn batched(lc: usize, rc: usize) -> DotGeneral {
    DotGeneral {
        lhs_contracting: vec![lc],
        rhs_contracting: vec![rc],
        lhs_batch: vec![0, 1],
        rhs_batch: vec![0, 1],
        preferred_element_type: None,
    }
}

/// One layer's decode attention as `rlx-models` builds it: query rows `[1, hk, rows, d]`
/// against a cache `[1, hk, c, d]` of dtype `kv` (widened before each product when not f32),
/// plus the new block's share `o_n`. Outputs: the attention result and the raw scores.
fn attention(hk: usize, rows: usize, c: usize, d: usize, kv: DType) -> Graph {
    let mut g = Graph::new("decode_attention");
    let q = g.input("q", Shape::new(&[1, hk, rows, d], DType::F32));
    let kc = g.input("kc", Shape::new(&[1, hk, c, d], kv));
    let vc = g.input("vc", Shape::new(&[1, hk, c, d], kv));
    let on = g.input("o_n", Shape::new(&[1, hk, rows, d], DType::F32));
    let (kc, vc) = if kv == DType::F32 { (kc, vc) } else { (g.convert(kc, DType::F32), g.convert(vc, DType::F32)) };
    let sc = g.dot_general(q, kc, batched(3, 3));
    let p = g.softmax(sc, -1);
    let o = g.dot_general(p, vc, batched(3, 2));
    let o = g.add(o, on);
    g.set_outputs(vec![o, sc]);
    g
}

fn feeds(hk: usize, rows: usize, c: usize, d: usize, kv: DType, seed: u64) -> Vec<(&'static str, Tensor)> {
    vec![
        ("q", rand_tensor(&[1, hk, rows, d], DType::F32, seed, -1.0, 1.0)),
        ("kc", rand_tensor(&[1, hk, c, d], kv, seed + 1, -1.0, 1.0)),
        ("vc", rand_tensor(&[1, hk, c, d], kv, seed + 2, -1.0, 1.0)),
        ("o_n", rand_tensor(&[1, hk, rows, d], DType::F32, seed + 3, -1.0, 1.0)),
    ]
}

fn compiled(g: &Graph) -> Graph {
    let mut h = rlx_ir::inline_composites(g, &|_| false);
    rlx_compile::compile(&mut h, &PassOptions::default()).unwrap();
    h
}

fn run(g: &Graph, f: &[(&str, Tensor)], threads: usize) -> (Vec<Tensor>, Vec<String>) {
    let mut exe = CpuExecutable::compile(g, &CpuOptions { threads: Some(threads), ..Default::default() }).unwrap();
    let by = |id| &f.iter().find(|(k, _)| Some(*k) == g.source_name(id)).unwrap().1;
    let ins: Vec<&Tensor> = g.inputs().iter().map(|&i| by(i)).collect();
    let out = exe.run(&ins, &[]).unwrap();
    (out, exe.steps().into_iter().map(|s| s.kernel.to_string()).collect())
}

/// The f16 cache is read in place: both products run on the GEMV reading f16, results equal
/// the reference within f32 rounding and the f32-cache graph's bit for bit, at 1 and 2 threads
/// (2 threads split the key rows across tasks), for cache lengths with and without a 16-lane
/// tail, one cached key, and head dims of 64 (SmolLM2) and 72 (a 16-lane tail).
#[test]
fn f16_cache_attention_reads_the_cache_in_place() {
    for (hk, rows, c, d) in [(3, 3, 256, 64), (3, 3, 17, 64), (2, 1, 300, 72), (1, 4, 1, 64), (3, 3, 1024, 64)] {
        let what = format!("hk={hk} rows={rows} c={c} d={d}");
        let f16 = compiled(&attention(hk, rows, c, d, DType::F16));
        let f32 = compiled(&attention(hk, rows, c, d, DType::F32));
        let f = feeds(hk, rows, c, d, DType::F16, c as u64);
        let wide: Vec<(&str, Tensor)> =
            f.iter().map(|(k, t)| (*k, if t.dtype() == DType::F16 { t.cast(DType::F32) } else { t.clone() })).collect();
        for threads in [1, 2] {
            let ks = check_graph(&f16, &f, Some(threads), TOL, &what);
            // One cached key (c = 1) makes `q·Kᵀ` a GEMV over the query rows and `p·V` a K = 1
            // product: both widen the single row instead.
            let direct = ks.contains(&"gemv_f16".into()) && ks.contains(&"gemv_f16_epilogue_f32".into());
            assert!(direct || c == 1, "{what}: {ks:?}");
            assert!(!ks.contains(&"convert".into()), "{what}: the cache is still converted: {ks:?}");
            let (got, _) = run(&f16, &f, threads);
            let (want, wks) = run(&f32, &wide, threads);
            assert!(wks.contains(&"gemv".into()), "{what}: f32 graph kernels {wks:?}");
            for (a, b) in got.iter().zip(&want) {
                assert_eq!(a.to_le_bytes(), b.to_le_bytes(), "{what}, {threads} threads: f16 vs f32 cache");
            }
        }
    }
}

/// Products the GEMV does not take (many query rows: a prefill chunk; a bf16 cache; a narrow
/// lhs) widen into scratch inside the product's step: still one step, no separate convert.
#[test]
fn other_narrow_operands_are_widened_inside_the_product() {
    for (rows, kv) in [(40, DType::F16), (3, DType::BF16), (40, DType::BF16)] {
        let what = format!("rows={rows} kv={kv}");
        let g = compiled(&attention(3, rows, 96, 64, kv));
        let f = feeds(3, rows, 96, 64, kv, 11);
        for threads in [1, 2] {
            let ks = check_graph(&g, &f, Some(threads), TOL, &what);
            assert!(!ks.contains(&"convert".into()), "{what}: {ks:?}");
        }
    }
    // f16 lhs: x_f16 [5, 24] · w [24, 7].
    let mut g = Graph::new("narrow_lhs");
    let x = g.input("x", Shape::new(&[5, 24], DType::F16));
    let w = g.input("w", Shape::new(&[24, 7], DType::F32));
    let xw = g.convert(x, DType::F32);
    let y = g.dot_general(xw, w, DotGeneral::contract(&[1], &[0]));
    g.set_outputs(vec![y]);
    let f = vec![
        ("x", rand_tensor(&[5, 24], DType::F16, 3, -2.0, 2.0)),
        ("w", rand_tensor(&[24, 7], DType::F32, 4, -1.0, 1.0)),
    ];
    let ks = check_graph(&compiled(&g), &f, Some(1), TOL, "narrow lhs");
    assert_eq!(ks, ["gemm"], "narrow lhs");
}

/// A widened value read by two products, or also a graph output, stays one convert step.
#[test]
fn a_shared_widened_value_is_not_folded() {
    let mut g = Graph::new("shared");
    let q = g.input("q", Shape::new(&[1, 2, 3, 16], DType::F32));
    let kc = g.input("kc", Shape::new(&[1, 2, 40, 16], DType::F16));
    let k = g.convert(kc, DType::F32);
    let a = g.dot_general(q, k, batched(3, 3));
    let b = g.dot_general(q, k, batched(3, 3));
    let s = g.sub(a, b);
    g.set_outputs(vec![s, k]);
    let f = vec![
        ("q", rand_tensor(&[1, 2, 3, 16], DType::F32, 5, -1.0, 1.0)),
        ("kc", rand_tensor(&[1, 2, 40, 16], DType::F16, 6, -1.0, 1.0)),
    ];
    let h = compiled(&g);
    let ks = check_graph(&h, &f, Some(1), TOL, "shared");
    assert!(ks.contains(&"convert".into()), "{ks:?}");
    let (got, _) = run(&h, &f, 1);
    assert_close(&got[1], &f[1].1.cast(DType::F32), Tol { abs: 0.0, rel: 0.0 }, "widened output");
}
