//! `missed_fusions`: each kind of hint on the smallest graph that shows it, checked against
//! what the pipeline then does (the op named really stays out of the fused loop), and graphs
//! whose ops cannot share a loop for a reason no compiler removes (a value that needs a whole
//! reduction or a matmul of the loop) get no hint.

use rlx_compile::{MissReason, MissedFusion, PassOptions, compile, missed_fusions};
use rlx_ir::ops::ReduceOp;
use rlx_ir::{DType, Graph, NodeId, Shape};

/// The top-level op names of `g` after the full pipeline (fusion on).
fn compiled_ops(g: &Graph) -> Vec<String> {
    let mut c = g.clone();
    compile(&mut c, &PassOptions::default()).unwrap();
    c.nodes().iter().map(|n| n.op.name()).collect()
}

fn count(ops: &[String], name: &str) -> usize {
    ops.iter().filter(|o| *o == name).count()
}

fn one(g: &Graph) -> MissedFusion {
    let m = missed_fusions(g);
    assert_eq!(m.len(), 1, "{m:?}");
    m[0].clone()
}

#[test]
fn a_reduction_over_a_leading_axis_is_its_own_pass() {
    let mut g = Graph::new("lead");
    let x = g.input("x", Shape::new(&[8, 16], DType::F32));
    let e = g.exp(x);
    let t = g.tanh(e);
    let s = g.sum(t, &[0], false);
    g.set_outputs(vec![s]);
    let m = one(&g);
    assert_eq!(m, MissedFusion { node: s, next_to: t, reason: MissReason::ReduceAxes(vec![0]) });
    assert!(m.message(&g).starts_with("reduces axes [0] in its own pass over %2 (tanh)"), "{}", m.message(&g));
    let ops = compiled_ops(&g);
    assert_eq!((count(&ops, "fused_elementwise"), count(&ops, "reduce_sum")), (1, 1), "{ops:?}");
    // Over the last axis the same reduction joins the loop: no hint, no reduce_sum outside.
    let mut h = Graph::new("last");
    let x = h.input("x", Shape::new(&[8, 16], DType::F32));
    let e = h.exp(x);
    let s = h.sum(e, &[1], false);
    h.set_outputs(vec![s]);
    assert!(missed_fusions(&h).is_empty());
    assert_eq!(count(&compiled_ops(&h), "reduce_sum"), 0);
}

#[test]
fn reduce_min_and_a_second_axis_set_are_their_own_passes() {
    let mut g = Graph::new("min");
    let x = g.input("x", Shape::new(&[8, 16], DType::F32));
    let e = g.exp(x);
    let s = g.reduce_min(e, &[1], false);
    g.set_outputs(vec![s]);
    assert_eq!(one(&g).reason, MissReason::ReduceKind(ReduceOp::Min));
    assert!(one(&g).message(&g).starts_with("reduce_min makes its own pass over %1 (exp)"));
    assert_eq!(count(&compiled_ops(&g), "reduce_min"), 1);

    let mut g = Graph::new("two");
    let x = g.input("x", Shape::new(&[8, 16], DType::F32));
    let e = g.exp(x);
    let a = g.sum(e, &[1], false);
    let b = g.reduce_max(e, &[0, 1], false);
    g.set_outputs(vec![a, b]);
    let m = one(&g);
    assert_eq!(
        m,
        MissedFusion { node: b, next_to: e, reason: MissReason::ReduceAxesTaken { taken: vec![1], axes: vec![0, 1] } }
    );
    let ops = compiled_ops(&g);
    assert_eq!((count(&ops, "reduce_sum"), count(&ops, "reduce_max")), (0, 1), "{ops:?}");
}

#[test]
fn elementwise_ops_on_f16_are_their_own_passes() {
    let mut g = Graph::new("half");
    let x = g.input("x", Shape::new(&[64], DType::F16));
    let e = g.exp(x);
    let t = g.tanh(e);
    g.set_outputs(vec![t]);
    let m = missed_fusions(&g);
    assert_eq!(
        m,
        vec![
            MissedFusion { node: e, next_to: t, reason: MissReason::DType(DType::F16) },
            MissedFusion { node: t, next_to: e, reason: MissReason::DType(DType::F16) },
        ]
    );
    assert!(
        m[0].message(&g).contains("its values are f16, fused loops hold f32 and bool only"),
        "{}",
        m[0].message(&g)
    );
    let ops = compiled_ops(&g);
    assert_eq!((count(&ops, "fused_elementwise"), count(&ops, "exp"), count(&ops, "tanh")), (0, 1, 1), "{ops:?}");
    // A lone f16 op has no neighbour to share a loop with; the convert at a boundary is the
    // expected way into an f32 loop: neither is a hint.
    let mut h = Graph::new("boundary");
    let x = h.input("x", Shape::new(&[64], DType::F16));
    let c = h.convert(x, DType::F32);
    let e = h.exp(c);
    let t = h.tanh(e);
    h.set_outputs(vec![t]);
    assert!(missed_fusions(&h).is_empty());
}

#[test]
fn a_reshape_between_elementwise_ops_splits_the_loop() {
    let mut g = Graph::new("reshape");
    let x = g.input("x", Shape::new(&[8, 16], DType::F32));
    let e = g.exp(x);
    let t = g.tanh(e);
    let r = g.reshape(t, [128]);
    let n = g.neg(r);
    let s = g.sqrt(n);
    g.set_outputs(vec![s]);
    let m = one(&g);
    assert_eq!(m, MissedFusion { node: r, next_to: t, reason: MissReason::Layout { consumer: n } });
    assert!(m.message(&g).starts_with("splits the elementwise ops %2 (tanh) and %4 (neg) into two passes"));
    assert_eq!(count(&compiled_ops(&g), "fused_elementwise"), 2);
}

#[test]
fn a_product_read_twice_keeps_its_epilogue_out() {
    let mut g = Graph::new("shared");
    let a = g.input("a", Shape::new(&[4, 8], DType::F32));
    let w = g.param("w", Shape::new(&[8, 8], DType::F32));
    let b = g.param("b", Shape::new(&[8], DType::F32));
    let p = g.mm(a, w);
    let y = g.add(p, b);
    let z = g.tanh(y);
    let q = g.mm(p, w);
    g.set_outputs(vec![z, q]);
    let m = one(&g);
    assert_eq!(m, MissedFusion { node: p, next_to: y, reason: MissReason::ProductShared { reader: Some(q) } });
    assert!(m.message(&g).starts_with("the product is also read by %6 (dot_general)"), "{}", m.message(&g));
    let ops = compiled_ops(&g);
    assert_eq!((count(&ops, "dot_epilogue"), count(&ops, "dot_general")), (0, 2), "{ops:?}");
    // As a graph output too; read by its epilogue alone, it fuses.
    let mut h = g.clone();
    h.set_outputs(vec![z, p]);
    assert_eq!(one(&h).reason, MissReason::ProductShared { reader: None });
    h.set_outputs(vec![z]);
    assert!(missed_fusions(&h).is_empty());
    assert_eq!(count(&compiled_ops(&h), "dot_epilogue"), 1);
    // A consumer loop that ends in a reduction is no epilogue even when the product is not
    // shared: sharing is not the reason, so it is no hint.
    let mut k = Graph::new("reduces");
    let a = k.input("a", Shape::new(&[4, 8], DType::F32));
    let w = k.param("w", Shape::new(&[8, 8], DType::F32));
    let p = k.mm(a, w);
    let e = k.exp(p);
    let s = k.sum(e, &[1], false);
    k.set_outputs(vec![s, p]);
    assert!(missed_fusions(&k).is_empty(), "{:?}", missed_fusions(&k));
}

/// Dependences, not limitations: softmax's division needs the whole row's sum, and an add of
/// a loop value and a matmul of that loop must wait for the matmul.
#[test]
fn ops_that_need_a_whole_reduction_or_matmul_are_not_hints() {
    let mut g = Graph::new("softmax");
    let x = g.input("x", Shape::new(&[8, 16], DType::F32));
    let m = g.reduce_max(x, &[1], true);
    let d = g.sub(x, m);
    let e = g.exp(d);
    let s = g.sum(e, &[1], true);
    let y = g.div(e, s);
    g.set_outputs(vec![y]);
    assert!(missed_fusions(&g).is_empty(), "{:?}", missed_fusions(&g));

    let mut g = Graph::new("after_matmul");
    let x = g.input("x", Shape::new(&[8, 8], DType::F32));
    let e = g.exp(x);
    let t = g.tanh(e);
    let p = g.mm(t, x);
    let y = g.add(t, p);
    let z = g.neg(y);
    g.set_outputs(vec![z]);
    assert!(missed_fusions(&g).is_empty(), "{:?}", missed_fusions(&g));
}

/// Every hint names a real node and a neighbour the op really reads or is read by.
#[test]
fn hints_name_adjacent_nodes() {
    let mut g = Graph::new("adjacent");
    let x = g.input("x", Shape::new(&[8, 16], DType::F32));
    let e = g.exp(x);
    let t = g.tanh(e);
    let s = g.sum(t, &[0], false);
    let r = g.reshape(e, [128]);
    let n = g.neg(r);
    let a = g.abs(n);
    g.set_outputs(vec![s, a]);
    let m = missed_fusions(&g);
    assert_eq!(m.len(), 2, "{m:?}");
    for h in &m {
        let reads = |a: NodeId, b: NodeId| g.node(a).inputs.contains(&b);
        assert!(reads(h.node, h.next_to) || reads(h.next_to, h.node), "{h:?}");
    }
}

/// Integer elementwise ops (shape arithmetic in imported models) are not worth a hint.
#[test]
fn integer_elementwise_ops_are_not_hints() {
    let mut g = Graph::new("ints");
    let x = g.input("x", Shape::new(&[4], DType::I64));
    let y = g.add(x, x);
    let z = g.mul(y, x);
    g.set_outputs(vec![z]);
    assert!(missed_fusions(&g).is_empty(), "{:?}", missed_fusions(&g));
}

/// A reduction over no axes (an ONNX input without a declared shape is a scalar) reduces
/// nothing; it said "reduces axes [] … only a reduction over the last axis or over all axes".
#[test]
fn a_reduction_over_no_axes_is_not_a_hint() {
    let mut g = Graph::new("scalar");
    let x = g.input("x", Shape::new(&[], DType::F32));
    let e = g.exp(x);
    let s = g.sum(e, &[], false);
    g.set_outputs(vec![s]);
    assert!(missed_fusions(&g).is_empty(), "{:?}", missed_fusions(&g));
}
