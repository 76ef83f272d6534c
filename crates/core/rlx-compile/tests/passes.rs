//! Before/after tests per pass: the printed IR after the pass, and numerics unchanged on
//! random inputs (reference interpreter).

mod common;

use common::assert_same_numerics;
use rlx_compile::{PassOptions, passes};
use rlx_ir::{DType, Graph, Shape, Tensor};

type Run = fn(&mut Graph, &PassOptions) -> Result<rlx_compile::PassStats, rlx_compile::CompileError>;

/// Run one pass, verify, check numerics, and return the printed graph.
fn after(g: &Graph, pass: Run) -> String {
    let mut h = g.clone();
    pass(&mut h, &PassOptions::default()).unwrap();
    rlx_ir::verify(&h).unwrap();
    assert!(h.nodes().len() <= g.nodes().len() + 1);
    assert_same_numerics(g, &h);
    h.to_string()
}

fn f32s(dims: &[usize]) -> Shape {
    Shape::new(dims, DType::F32)
}

#[test]
fn const_fold_folds_constant_subgraphs_only() {
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[2]));
    let a = g.constant(Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap());
    let b = g.scalar(3.0, DType::F32);
    let c = g.mul(a, b); // folds to [3, 6]
    let d = g.exp(c); // folds too (chained)
    let y = g.add(x, d); // stays: x is an input
    g.set_outputs(vec![y, c]);
    let expected = "\
graph t(x: f32[2]) params() {
  %1 = constant[[1, 2]]() : f32[2]
  %2 = constant[3]() : f32[]
  %3 = constant[[3, 6]]() : f32[2]
  %4 = constant[[20.08553695678711, 403.4288024902344]]() : f32[2]
  %5 = add(%0, %4) : f32[2]
  return %5, %3
}
";
    assert_eq!(after(&g, passes::const_fold::run), expected);
}

#[test]
fn const_fold_respects_budget_and_skips_rng_and_params() {
    let mut g = Graph::new("t");
    let p = g.param("w", f32s(&[2]));
    let a = g.constant(Tensor::from_vec(vec![1.0f32; 8], &[8]).unwrap());
    let big = g.exp(a);
    let q = g.exp(p);
    g.set_outputs(vec![big, q]);
    let mut h = g.clone();
    let opts = PassOptions { fold_budget: 4, ..Default::default() };
    let s = passes::const_fold::run(&mut h, &opts).unwrap();
    assert_eq!(s.changed, 0, "8 elements exceed a budget of 4; params never fold");
    assert_eq!(h, g);
}

#[test]
fn simplify_identities() {
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[2, 3]));
    let one = g.scalar(1.0, DType::F32);
    let zero = g.scalar(0.0, DType::F32);
    let a = g.mul(x, one);
    let b = g.mul(one, a);
    let c = g.add(b, zero);
    let d = g.sub(c, zero);
    let e = g.div(d, one);
    let n1 = g.neg(e);
    let n2 = g.neg(n1);
    let cv = g.push(rlx_ir::Op::ConvertElementType(DType::F32), &[n2]);
    let r = g.reshape(cv, [2, 3]);
    let bc = g.broadcast_in_dim(r, [2, 3], &[0, 1]);
    let y = g.exp(bc);
    g.set_outputs(vec![y, n1]);
    let expected = "\
graph t(x: f32[2,3]) params() {
  %1 = constant[1]() : f32[]
  %2 = constant[0]() : f32[]
  %3 = neg(%0) : f32[2,3]
  %4 = exp(%0) : f32[2,3]
  return %4, %3
}
";
    assert_eq!(after(&g, passes::simplify::run), expected);
}

#[test]
fn simplify_keeps_broadcasting_identities_and_signed_zero() {
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[3]));
    let ones = g.constant(Tensor::from_vec(vec![1.0f32; 6], &[2, 3]).unwrap());
    let nz = g.scalar(-0.0, DType::F32);
    let a = g.mul(x, ones); // result [2,3] is not x's type: kept
    let b = g.sub(x, nz); // x - (-0.0) is not exact for x = -0.0: kept
    g.set_outputs(vec![a, b]);
    let mut h = g.clone();
    let s = passes::simplify::run(&mut h, &PassOptions::default()).unwrap();
    assert_eq!(s.changed, 0);
}

#[test]
fn simplify_transpose_and_reshape_chains() {
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[2, 3, 4]));
    let t1 = g.transpose(x, &[1, 2, 0]);
    let t2 = g.transpose(t1, &[2, 0, 1]); // identity
    let t3 = g.transpose(t2, &[0, 2, 1]);
    let t4 = g.transpose(t3, &[2, 1, 0]); // composed: one transpose
    let r1 = g.reshape(x, [6, 4]);
    let r2 = g.reshape(r1, [24]);
    let r3 = g.reshape(r2, [2, 3, 4]); // back to x
    let y = g.add(t2, r3);
    g.set_outputs(vec![t4, y, t1]);
    let expected = "\
graph t(x: f32[2,3,4]) params() {
  %1 = transpose[permutation=[1,2,0]](%0) : f32[3,4,2]
  %2 = transpose[permutation=[0,2,1]](%0) : f32[2,4,3]
  %3 = transpose[permutation=[1,2,0]](%0) : f32[3,4,2]
  %4 = reshape[new_sizes=[6,4]](%0) : f32[6,4]
  %5 = reshape[new_sizes=[24]](%0) : f32[24]
  %6 = add(%0, %0) : f32[2,3,4]
  return %3, %6, %1
}
";
    assert_eq!(after(&g, passes::simplify::run), expected);
}

#[test]
fn cse_merges_structurally_equal_nodes() {
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[2]));
    let a = g.exp(x);
    let b = g.exp(x);
    let c1 = g.scalar(2.0, DType::F32);
    let c2 = g.scalar(2.0, DType::F32);
    let pz = g.scalar(0.0, DType::F32);
    let nz = g.scalar(-0.0, DType::F32);
    let m1 = g.mul(a, c1);
    let m2 = g.mul(b, c2);
    let s1 = g.add(m1, pz);
    let s2 = g.add(m2, nz);
    let y = g.add(s1, s2);
    g.set_outputs(vec![y, m2]);
    let expected = "\
graph t(x: f32[2]) params() {
  %1 = exp(%0) : f32[2]
  %2 = constant[2]() : f32[]
  %3 = constant[0]() : f32[]
  %4 = constant[-0]() : f32[]
  %5 = mul(%1, %2) : f32[2]
  %6 = add(%5, %3) : f32[2]
  %7 = add(%5, %4) : f32[2]
  %8 = add(%6, %7) : f32[2]
  return %8, %5
}
";
    assert_eq!(after(&g, passes::cse::run), expected);
}

#[test]
fn cse_never_merges_params_inputs_or_rng() {
    let mut g = Graph::new("t");
    let p = g.param("p", f32s(&[2]));
    let q = g.param("q", f32s(&[2]));
    let r1 = g.push_multi(
        rlx_ir::Op::Rng { seed: 1, distribution: rlx_ir::ops::RngDistribution::Uniform { low: 0.0, high: 1.0 } },
        &[],
        Some(&f32s(&[2])),
    )[0];
    let r2 = g.push_multi(
        rlx_ir::Op::Rng { seed: 1, distribution: rlx_ir::ops::RngDistribution::Uniform { low: 0.0, high: 1.0 } },
        &[],
        Some(&f32s(&[2])),
    )[0];
    let a = g.add(p, q);
    let b = g.add(r1, r2);
    g.set_outputs(vec![a, b]);
    let mut h = g.clone();
    let s = passes::cse::run(&mut h, &PassOptions::default()).unwrap();
    assert_eq!(s.changed, 0);
    assert_eq!(h, g);
}

#[test]
fn dce_drops_dead_nodes_but_keeps_inputs_and_params() {
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[2]));
    let _unused_input = g.input("u", f32s(&[2]));
    let _unused_param = g.param("w", f32s(&[2]));
    let _dead = g.exp(x);
    let y = g.tanh(x);
    g.set_outputs(vec![y, x]);
    let expected = "\
graph t(x: f32[2], u: f32[2]) params(w: f32[2]) {
  %3 = tanh(%0) : f32[2]
  return %3, %0
}
";
    assert_eq!(after(&g, passes::dce::run), expected);
}

#[test]
fn inline_and_pipeline_report() {
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[2, 3]));
    let s = g.softmax(x, -1);
    let s2 = g.softmax(x, -1);
    let y = g.add(s, s2);
    g.set_outputs(vec![y]);
    let mut h = g.clone();
    let opts = PassOptions { dump_ir: true, ..Default::default() };
    let report = rlx_compile::compile(&mut h, &opts).unwrap();
    let names: Vec<&str> = report.passes.iter().map(|r| r.pass).collect();
    assert_eq!(names, ["verify", "inline_composites", "legalize", "const_fold", "simplify", "cse", "dce"]);
    assert_eq!(report.passes[1].stats.changed, 2);
    assert!(report.passes.iter().all(|r| r.ir.is_some()));
    assert!(!h.to_string().contains("softmax"));
    let merged = report.passes[5].stats.changed;
    assert!(merged > 0, "the two inlined softmax bodies are merged");
    assert_same_numerics(&g, &h);

    // A native composite stays.
    let mut k = g.clone();
    let opts = PassOptions { native_composites: ["softmax".to_string()].into(), ..Default::default() };
    rlx_compile::compile(&mut k, &opts).unwrap();
    assert!(k.nodes().iter().any(|n| n.op.name() == "softmax"));
    assert!(!k.nodes().iter().any(|n| n.op.name() == "exp"), "the native composite is not inlined");
}

#[test]
fn invalid_graph_is_an_ir_error() {
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[2]));
    let y = g.input("y", f32s(&[3]));
    let z = g.add(x, y);
    g.set_outputs(vec![z]);
    let e = rlx_compile::compile(&mut g, &PassOptions::default()).unwrap_err();
    assert!(matches!(e, rlx_compile::CompileError::Ir(_)), "{e}");
}
