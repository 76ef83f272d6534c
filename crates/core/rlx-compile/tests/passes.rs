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

/// A transpose that moves only size-1 dims is the same row-major data: a reshape (which the
/// CPU plans as a view); one that swaps two dims of size > 1 stays, even next to 1s.
#[test]
fn simplify_degenerate_transpose_to_reshape() {
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[2, 1, 3, 4]));
    let a = g.transpose(x, &[0, 2, 1, 3]); // [2, 3, 1, 4]: only the 1 moves
    let b = g.transpose(x, &[1, 0, 3, 2]); // [1, 2, 4, 3]: 3 and 4 swap
    let c = g.reshape(a, [6, 4]); // reshape(reshape(x)) after the rewrite
    // Two real transposes whose composition moves only the 1: one reshape of x.
    let t1 = g.transpose(x, &[2, 0, 1, 3]); // [3, 2, 1, 4]
    let d = g.transpose(t1, &[1, 0, 2, 3]); // [2, 3, 1, 4]
    g.set_outputs(vec![a, b, c, d, t1]);
    let expected = "\
graph t(x: f32[2,1,3,4]) params() {
  %1 = reshape[new_sizes=[2,3,1,4]](%0) : f32[2,3,1,4]
  %2 = transpose[permutation=[1,0,3,2]](%0) : f32[1,2,4,3]
  %3 = reshape[new_sizes=[6,4]](%0) : f32[6,4]
  %4 = transpose[permutation=[2,0,1,3]](%0) : f32[3,2,1,4]
  %5 = reshape[new_sizes=[2,3,1,4]](%0) : f32[2,3,1,4]
  return %1, %2, %3, %5, %4
}
";
    assert_eq!(after(&g, passes::simplify::run), expected);
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
    assert_eq!(
        names,
        [
            "verify",
            "inline_composites",
            "legalize",
            "const_fold",
            "simplify",
            "cse",
            "dce",
            "attention",
            "fuse",
            "epilogue",
            "upcast"
        ]
    );
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

/// Run the fusion pass and return the graph (verified, numerics unchanged) and its stats.
fn fused(g: &Graph) -> (Graph, rlx_compile::PassStats) {
    let mut h = g.clone();
    let s = passes::fuse::run(&mut h, &PassOptions::default()).unwrap();
    rlx_ir::verify(&h).unwrap();
    assert_same_numerics(g, &h);
    (h, s)
}

fn count(g: &Graph, name: &str) -> usize {
    g.nodes().iter().filter(|n| n.op.name() == name).count()
}

#[test]
fn fuse_chain_with_broadcast_constants_and_inlined_gelu() {
    // gelu(x*a+b)*sigmoid(x)-c over [4, 8], `a` a row vector, `b` and `c` scalars.
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[4, 8]));
    let a = g.param("a", f32s(&[8]));
    let b = g.scalar(0.5, DType::F32);
    let c = g.scalar(0.25, DType::F32);
    let xa = g.mul(x, a);
    let xb = g.add(xa, b);
    let ge = g.gelu(xb, true);
    let sg = g.logistic(x);
    let p = g.mul(ge, sg);
    let y = g.sub(p, c);
    g.set_outputs(vec![y]);
    let g = rlx_ir::inline_composites(&g, &|_| false);
    let (h, s) = fused(&g);
    assert_eq!(s.changed, 1);
    let expected = "\
graph t(x: f32[4,8]) params(a: f32[8]) {
  %2 = fused_elementwise(%0, %1) : f32[4,8]
    graph fused_elementwise(arg0: f32[4,8], arg1: f32[8]) params() {
      %2 = mul(%0, %1) : f32[4,8]
      %3 = constant[0.5]() : f32[]
      %4 = add(%2, %3) : f32[4,8]
      %5 = mul(%4, %4) : f32[4,8]
      %6 = constant[0.07135481387376785]() : f32[]
      %7 = mul(%5, %6) : f32[4,8]
      %8 = constant[1.5957691669464111]() : f32[]
      %9 = add(%7, %8) : f32[4,8]
      %10 = mul(%4, %9) : f32[4,8]
      %11 = logistic(%10) : f32[4,8]
      %12 = mul(%4, %11) : f32[4,8]
      %13 = logistic(%0) : f32[4,8]
      %14 = mul(%12, %13) : f32[4,8]
      %15 = constant[0.25]() : f32[]
      %16 = sub(%14, %15) : f32[4,8]
      return %16
    }
  return %2
}
";
    assert_eq!(h.to_string(), expected);
}

#[test]
fn fuse_keeps_shared_values_and_middle_outputs() {
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[3, 4]));
    let w = g.param("w", f32s(&[4, 2]));
    let e = g.exp(x);
    let t = g.tanh(e);
    let n = g.neg(t);
    let mm = g.mm(e, w); // `e` is read outside the region too
    g.set_outputs(vec![n, t, mm]);
    let (h, s) = fused(&g);
    assert_eq!(s.changed, 1);
    let expected = "\
graph t(x: f32[3,4]) params(w: f32[4,2]) {
  %2 = fused_elementwise(%0) : f32[3,4], f32[3,4], f32[3,4]
    graph fused_elementwise(arg0: f32[3,4]) params() {
      %1 = exp(%0) : f32[3,4]
      %2 = tanh(%1) : f32[3,4]
      %3 = neg(%2) : f32[3,4]
      return %1, %2, %3
    }
  %3 = get_tuple_element[index=0](%2) : f32[3,4]
  %4 = get_tuple_element[index=1](%2) : f32[3,4]
  %5 = get_tuple_element[index=2](%2) : f32[3,4]
  %6 = dot_general[lhs_batch=[], lhs_contracting=[1], rhs_batch=[], rhs_contracting=[0]](%3, %1) : f32[3,2]
  return %5, %4, %6
}
";
    assert_eq!(h.to_string(), expected);
}

#[test]
fn fuse_absorbs_trailing_reduction_but_never_makes_a_cycle() {
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[3, 4]));
    let e = g.exp(x);
    let d = g.mul(e, x);
    let s = g.sum(d, &[-1], false); // trailing: absorbed
    let m = g.sum(e, &[0], false); // axis 0: stays outside, reads the region
    let y = g.mul(e, m); // reads `m`, which needs the region: may not join it
    let z = g.tanh(y);
    g.set_outputs(vec![s, z]);
    let (h, st) = fused(&g);
    assert_eq!(st.changed, 2);
    assert_eq!(count(&h, "fused_elementwise"), 2);
    assert_eq!(count(&h, "reduce_sum"), 1, "the axis-0 sum stays outside");
    let body = h.nodes().iter().find_map(|n| match &n.op {
        rlx_ir::Op::Composite(c) => Some(c.body.to_string()),
        _ => None,
    });
    assert!(body.unwrap().contains("reduce_sum"), "the trailing sum is in the first region");
}

#[test]
fn fuse_leaves_single_ops_and_other_dtypes() {
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[4]));
    let i = g.input("i", Shape::new(&[4], DType::I32));
    let e = g.exp(x);
    let j = g.add(i, i);
    let k = g.mul(j, i);
    g.set_outputs(vec![e, k]);
    let (h, st) = fused(&g);
    assert_eq!(st.changed, 0);
    assert_eq!(h.to_string(), g.to_string());
}

#[test]
fn epilogue_absorbs_bias_activation_residual_but_not_an_output_product() {
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[4, 3]));
    let w = g.param("w", f32s(&[5, 3]));
    let b = g.param("b", f32s(&[5]));
    let r = g.input("r", f32s(&[4, 5]));
    let y = g.linear(x, w, Some(b));
    let a = g.relu(y);
    let z = g.add(a, r);
    g.set_outputs(vec![z]);
    let mut g = rlx_ir::inline_composites(&g, &|_| false);
    rlx_compile::compile(&mut g, &PassOptions { dump_ir: false, ..Default::default() }).unwrap();
    let expected = "\
graph t(x: f32[4,3], r: f32[4,5]) params(w: f32[5,3], b: f32[5]) {
  %4 = dot_epilogue(%0, %1, %2, %3) : f32[4,5]
    graph dot_epilogue(lhs: f32[4,3], rhs: f32[5,3], arg1: f32[5], arg2: f32[4,5]) params() {
      %4 = dot_general[lhs_batch=[], lhs_contracting=[1], rhs_batch=[], rhs_contracting=[1]](%0, %1) : f32[4,5]
      %5 = add(%4, %2) : f32[4,5]
      %6 = constant[0]() : f32[]
      %7 = le(%5, %6) : bool[4,5]
      %8 = select(%7, %6, %5) : f32[4,5]
      %9 = add(%8, %3) : f32[4,5]
      return %9
    }
  return %4
}
";
    assert_eq!(g.to_string(), expected);
    // The product is also an output: nothing is absorbed.
    let mut g = Graph::new("t");
    let x = g.input("x", f32s(&[4, 3]));
    let w = g.param("w", f32s(&[5, 3]));
    let b = g.param("b", f32s(&[5]));
    let p = g.linear(x, w, None);
    let y = g.add(p, b);
    g.set_outputs(vec![p, y]);
    let g = rlx_ir::inline_composites(&g, &|_| false);
    let mut h = g.clone();
    let s = rlx_compile::passes::epilogue::run(&mut h, &PassOptions::default()).unwrap();
    assert_eq!(s.changed, 0);
    assert_eq!(h.to_string(), g.to_string());
}

/// A row lookup in a table dequantized per row (`(convert(q) - zero_point) * scale + bias`,
/// ONNX `DequantizeLinear` then an add) sinks below the dequantization: only the looked-up
/// rows of `q`, the zero points and the scales are read and converted. A value that is also
/// read elsewhere stays whole and is gathered from.
#[test]
fn simplify_sinks_a_row_gather_below_the_dequantization() {
    let mut g = Graph::new("embed");
    let idx = g.input("idx", Shape::new(&[2, 3], DType::I64));
    let q = g.param("q", Shape::new(&[10, 4], DType::I8));
    let zp = g.param("zp", f32s(&[10, 1]));
    let s = g.param("s", f32s(&[10, 1]));
    let b = g.param("b", f32s(&[4]));
    let qf = g.convert(q, DType::F32);
    let d = g.sub(qf, zp);
    let m = g.mul(d, s);
    let t = g.add(m, b);
    let y = g.take(t, idx, 0);
    g.set_outputs(vec![y]);
    let mut h = g.clone();
    let stats = passes::simplify::run(&mut h, &PassOptions::default()).unwrap();
    passes::dce::run(&mut h, &PassOptions::default()).unwrap();
    rlx_ir::verify(&h).unwrap();
    assert_same_numerics(&g, &h);
    assert_eq!(stats.changed, 1);
    let ir = h.to_string();
    // Three gathers (q, zp, s), each of [2, 3] rows; every elementwise op is over them.
    assert_eq!(ir.matches("gather[").count(), 3, "{ir}");
    assert!(ir.contains("convert_element_type[new_dtype=f32](%") && ir.contains(") : f32[2,3,4]"), "{ir}");
    assert!(!ir.contains("f32[10,4]"), "the whole table is still dequantized:\n{ir}");

    // The dequantized table is also an output: it is computed whole anyway, and the lookup
    // sinks below the bias add only (one gather, of the table).
    g.set_outputs(vec![y, m]);
    let mut h = g.clone();
    assert_eq!(passes::simplify::run(&mut h, &PassOptions::default()).unwrap().changed, 1);
    passes::dce::run(&mut h, &PassOptions::default()).unwrap();
    rlx_ir::verify(&h).unwrap();
    assert_same_numerics(&g, &h);
    let ir = h.to_string();
    assert_eq!(ir.matches("gather[").count(), 1, "{ir}");
    assert!(ir.contains("mul(%") && ir.contains(") : f32[10,4]"), "{ir}");
}

/// An f16 cache widened to f32 for its two attention products moves into them: `q·Kᵀ` becomes
/// a `dot_general_upcast` reading the f16 keys, and `p·V` (a `dot_epilogue` with the residual
/// add) reads the f16 values, widened at the start of its body. A widened value read twice stays
/// one convert.
#[test]
fn upcast_moves_a_widened_operand_into_its_product() {
    let dg = |lc: usize, rc: usize| rlx_ir::ops::DotGeneral {
        lhs_contracting: vec![lc],
        rhs_contracting: vec![rc],
        lhs_batch: vec![0],
        rhs_batch: vec![0],
        preferred_element_type: None,
    };
    let mut g = Graph::new("t");
    let q = g.input("q", f32s(&[2, 3, 4]));
    let kc = g.input("kc", Shape::new(&[2, 5, 4], DType::F16));
    let vc = g.input("vc", Shape::new(&[2, 5, 4], DType::F16));
    let r = g.input("r", f32s(&[2, 3, 4]));
    let k = g.convert(kc, DType::F32);
    let v = g.convert(vc, DType::F32);
    let s = g.dot_general(q, k, dg(2, 2));
    let o = g.dot_general(s, v, dg(2, 1));
    let y = g.add(o, r);
    g.set_outputs(vec![y]);
    let mut h = g.clone();
    passes::epilogue::run(&mut h, &PassOptions::default()).unwrap();
    let expected = "\
graph t(q: f32[2,3,4], kc: f16[2,5,4], vc: f16[2,5,4], r: f32[2,3,4]) params() {
  %4 = dot_general_upcast(%0, %1) : f32[2,3,5]
    graph dot_general_upcast(lhs: f32[2,3,4], rhs: f16[2,5,4]) params() {
      %2 = convert_element_type[new_dtype=f32](%1) : f32[2,5,4]
      %3 = dot_general[lhs_batch=[0], lhs_contracting=[2], rhs_batch=[0], rhs_contracting=[2]](%0, %2) : f32[2,3,5]
      return %3
    }
  %5 = dot_epilogue(%4, %2, %3) : f32[2,3,4]
    graph dot_epilogue(lhs: f32[2,3,5], rhs: f16[2,5,4], arg1: f32[2,3,4]) params() {
      %3 = convert_element_type[new_dtype=f32](%1) : f32[2,5,4]
      %4 = dot_general[lhs_batch=[0], lhs_contracting=[2], rhs_batch=[0], rhs_contracting=[1]](%0, %3) : f32[2,3,4]
      %5 = add(%4, %2) : f32[2,3,4]
      return %5
    }
  return %5
}
";
    assert_eq!(after(&h, passes::upcast::run), expected);
    // Read by two products: nothing moves.
    let mut g = Graph::new("t");
    let q = g.input("q", f32s(&[2, 3, 4]));
    let kc = g.input("kc", Shape::new(&[2, 5, 4], DType::F16));
    let k = g.convert(kc, DType::F32);
    let a = g.dot_general(q, k, dg(2, 2));
    let b = g.dot_general(q, k, dg(2, 2));
    let y = g.sub(a, b);
    g.set_outputs(vec![y]);
    assert_eq!(after(&g, passes::upcast::run), g.to_string());
}
