//! The transforms' API and their composition: grad of grad, hvp, vmap of grad, jvp of vmap,
//! custom VJPs, stop_gradient, custom ops, control flow, and typed errors.

mod common;
use common::*;
use rlx_autodiff::{AdError, RuleKind, grad, hvp, jvp, try_grad, try_grad_with_loss, value_and_grad, vmap};
use rlx_ir::ops::CompareOp;
use rlx_ir::ops::ad::{Cx, Tan, VjpRule, register_vjp};
use rlx_ir::ops::custom::{CustomOp, register_op};
use rlx_ir::{Attrs, DType, Graph, IrError, NodeId, Op, Shape, Tensor, inline_composites};
use std::sync::Arc;

fn f64s(d: &[usize]) -> Shape {
    Shape::new(d, DType::F64)
}

fn t64(v: &[f64], d: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), d).unwrap()
}

/// `f(x) = sum(sin(x))`, one input `x` of `n` elements.
fn sum_sin(n: usize) -> (Graph, NodeId) {
    let mut g = Graph::new("sum_sin");
    let x = g.input("x", f64s(&[n]));
    let s = g.sin(x);
    let l = g.sum(s, &[0], false);
    g.set_outputs(vec![l]);
    (g, x)
}

#[test]
fn grad_of_grad_is_the_second_derivative() {
    // d/dx sin(x) = cos(x); grad of sum(cos(x)) is -sin(x).
    let (f, x) = sum_sin(1);
    let g1 = grad(&f, &[x]);
    let g1_sum = {
        let mut g = g1.clone();
        let o = g.outputs()[0];
        let s = g.sum(o, &[0], false);
        g.set_outputs(vec![s]);
        g
    };
    let x1 = g1_sum.input_by_name("x").unwrap();
    let g2 = grad(&g1_sum, &[x1]);
    let x3 = g2.input_by_name("x").unwrap();
    let mut s3 = g2.clone();
    let o = s3.outputs()[0];
    let s = s3.sum(o, &[0], false);
    s3.set_outputs(vec![s]);
    let g3 = grad(&s3, &[x3]);
    for v in [-1.3, 0.0, 0.4, 2.0] {
        let feeds = [("x", t64(&[v], &[1]))];
        assert_close("d/dx", &vals(&eval(&g1, &feeds)[0]), &[f64::cos(v)], Tol::Exact);
        assert_close("d2/dx2", &vals(&eval(&g2, &feeds)[0]), &[-f64::sin(v)], Tol::Exact);
        assert_close("d3/dx3", &vals(&eval(&g3, &feeds)[0]), &[-f64::cos(v)], Tol::Exact);
    }
}

#[test]
fn hvp_matches_the_analytic_hessian() {
    // f(x) = sum(x^3) + x0 * x1: H = diag(6x) + offdiag(1).
    let mut f = Graph::new("cubic");
    let x = f.input("x", f64s(&[3]));
    let c = f.mul(x, x);
    let c = f.mul(c, x);
    let s = f.sum(c, &[0], false);
    let a = f.slice(x, &[0], &[1], &[]);
    let b = f.slice(x, &[1], &[2], &[]);
    let ab = f.mul(a, b);
    let ab = f.sum(ab, &[0], false);
    let l = f.add(s, ab);
    f.set_outputs(vec![l]);
    let h = hvp(&f, &[x]).unwrap();
    let (xv, vv) = ([0.5, -1.0, 2.0], [1.0, 2.0, -3.0]);
    let out = eval(&h, &[("x", t64(&xv, &[3])), ("tangent_x", t64(&vv, &[3]))]);
    let want = [6.0 * xv[0] * vv[0] + vv[1], 6.0 * xv[1] * vv[1] + vv[0], 6.0 * xv[2] * vv[2]];
    assert_close("H v", &vals(&out[0]), &want, Tol::Close);
}

#[test]
fn value_and_grad_and_grad_with_loss_agree() {
    let (f, x) = sum_sin(4);
    let xv = t64(&[0.1, 0.2, -0.3, 1.0], &[4]);
    let vg = value_and_grad(&f, &[x]).unwrap();
    let gl = try_grad_with_loss(&f, &[x]).unwrap();
    let a = eval(&vg, &[("x", xv.clone())]);
    let b = eval(&gl, &[("x", xv.clone()), ("d_output", Tensor::scalar(1.0f64))]);
    assert_eq!(a, b);
    assert_eq!(gl.inputs().len(), 2);
    assert_eq!(gl.source_name(gl.inputs()[1]), Some("d_output"));
    // A seed of 2 doubles the gradient; the loss is unchanged.
    let c = eval(&gl, &[("x", xv), ("d_output", Tensor::scalar(2.0f64))]);
    assert_eq!(vals(&c[0]), vals(&a[0]));
    assert_close("2 x grad", &vals(&c[1]), &vals(&a[1]).iter().map(|v| 2.0 * v).collect::<Vec<_>>(), Tol::Exact);
}

#[test]
fn stop_gradient_blocks_the_tangent() {
    // f = sum(x * stop_gradient(x)): df/dx = stop_gradient(x) = x (not 2x).
    let mut f = Graph::new("sg");
    let x = f.input("x", f64s(&[3]));
    let s = f.stop_gradient(x);
    let m = f.mul(x, s);
    let l = f.sum(m, &[0], false);
    f.set_outputs(vec![l]);
    let g = grad(&f, &[x]);
    let xv = [1.0, -2.0, 0.5];
    assert_eq!(vals(&eval(&g, &[("x", t64(&xv, &[3]))])[0]), xv);
    let j = jvp(&f, &[x]).unwrap();
    let o = eval(&j, &[("x", t64(&xv, &[3])), ("tangent_x", t64(&[1.0, 1.0, 1.0], &[3]))]);
    assert_close("jvp", &vals(&o[1]), &[xv.iter().sum()], Tol::Exact);
}

#[test]
fn vmap_of_grad_gives_per_example_gradients() {
    // Per-example gradient of sum(tanh(w * x)) w.r.t. w, batched over x at axis 1.
    let mut f = Graph::new("per_example");
    let x = f.input("x", f64s(&[3]));
    let w = f.param("w", f64s(&[3]));
    let m = f.mul(w, x);
    let t = f.tanh(m);
    let l = f.sum(t, &[0], false);
    f.set_outputs(vec![l]);
    let g = grad(&f, &[w]);
    let vg = vmap(&g, &[Some(1), None], &[Some(0)], 2usize).unwrap();
    let xs = [0.1, 0.5, -0.2, 0.3, 1.0, 2.0]; // [3, 2]: column b is example b
    let wv = [0.7, -0.4, 1.5];
    let out = eval(&vg, &[("x", t64(&xs, &[3, 2])), ("w", t64(&wv, &[3]))]);
    assert_eq!(out[0].shape(), &[2, 3]);
    for b in 0..2 {
        let xb: Vec<f64> = (0..3).map(|i| xs[i * 2 + b]).collect();
        let want: Vec<f64> = (0..3).map(|i| xb[i] * (1.0 - (wv[i] * xb[i]).tanh().powi(2))).collect();
        assert_close("per-example grad", &vals(&out[0])[b * 3..b * 3 + 3], &want, Tol::Close);
    }
}

#[test]
fn jvp_and_grad_of_vmap() {
    // vmap then jvp; vmap then grad of the summed batch: both against the unbatched rules.
    let mut f = Graph::new("f");
    let x = f.input("x", f64s(&[2]));
    let e = f.exp(x);
    let s = f.sum(e, &[0], false);
    f.set_outputs(vec![s]);
    let vf = vmap(&f, &[Some(0)], &[Some(0)], 3usize).unwrap();
    let xv = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6];
    let vx = vf.input_by_name("x").unwrap();
    let j = jvp(&vf, &[vx]).unwrap();
    let tv = [1.0, 0.0, 0.0, 1.0, 1.0, 1.0];
    let o = eval(&j, &[("x", t64(&xv, &[3, 2])), ("tangent_x", t64(&tv, &[3, 2]))]);
    let want: Vec<f64> = (0..3).map(|b| xv[2 * b].exp() * tv[2 * b] + xv[2 * b + 1].exp() * tv[2 * b + 1]).collect();
    assert_close("jvp of vmap", &vals(&o[1]), &want, Tol::Exact);
    let mut summed = vf.clone();
    let o0 = summed.outputs()[0];
    let t = summed.sum(o0, &[0], false);
    summed.set_outputs(vec![t]);
    let g = grad(&summed, &[summed.input_by_name("x").unwrap()]);
    let o = eval(&g, &[("x", t64(&xv, &[3, 2]))]);
    assert_close("grad of vmap", &vals(&o[0]), &xv.iter().map(|v| v.exp()).collect::<Vec<_>>(), Tol::Exact);
}

#[test]
fn vmap_out_axes_and_unbatched_outputs() {
    let mut f = Graph::new("f");
    let x = f.input("x", f64s(&[2, 3]));
    let y = f.input("y", f64s(&[3]));
    let a = f.add(x, y);
    let n = f.neg(y);
    f.set_outputs(vec![a, n]);
    let v = vmap(&f, &[Some(2), None], &[Some(1), None], 4usize).unwrap();
    assert_eq!(v.shape(v.outputs()[0]), &f64s(&[2, 4, 3]));
    assert_eq!(v.shape(v.outputs()[1]), &f64s(&[3]));
    // A batched output with out_axes None is an error naming it.
    let e = vmap(&f, &[None, Some(0)], &[Some(0), None], 4usize).unwrap_err();
    assert!(e.to_string().contains("output 1 is batched"), "{e}");
    let e = vmap(&f, &[Some(3)], &[], 4usize).unwrap_err();
    assert!(e.to_string().contains("in_axis 3 is out of range"), "{e}");
}

/// The forward graph of attention (causal, grouped heads) followed by a weighted sum.
fn attention_loss() -> Graph {
    let mut g = Graph::new("attn");
    let q = g.input("q", f64s(&[1, 4, 3, 2]));
    let k = g.input("k", f64s(&[1, 2, 3, 2]));
    let v = g.input("v", f64s(&[1, 2, 3, 2]));
    let w = g.input("w", f64s(&[1, 4, 3, 2]));
    let o = g.scaled_dot_product_attention(q, k, v, rlx_ir::op::MaskKind::Causal, None);
    let p = g.mul(o, w);
    let l = g.sum(p, &[0, 1, 2, 3], false);
    g.set_outputs(vec![l]);
    g
}

fn has_composite(g: &Graph, name: &str) -> bool {
    g.nodes().iter().any(|n| matches!(&n.op, Op::Composite(c) if c.name == name))
}

#[test]
fn custom_vjps_equal_the_decomposition() {
    let mut rng = Rng(3);
    let f = attention_loss();
    let flat = inline_composites(&f, &|_| false);
    let wrt = |g: &Graph| ["q", "k", "v"].map(|n| g.input_by_name(n).unwrap());
    let (a, b) = (grad(&f, &wrt(&f)), grad(&flat, &wrt(&flat)));
    // The custom backward recomputes the probabilities (a softmax region in the backward graph).
    assert!(has_composite(&a, "softmax") && !has_composite(&b, "softmax"));
    let feeds: Vec<(&str, Tensor)> =
        [("q", [1, 4, 3, 2]), ("k", [1, 2, 3, 2]), ("v", [1, 2, 3, 2]), ("w", [1, 4, 3, 2])]
            .map(|(n, d)| (n, rng.tensor(&d, DType::F64, -1.0, 1.0)))
            .to_vec();
    let (ra, rb) = (eval(&a, &feeds), eval(&b, &feeds));
    for k in 0..3 {
        assert_close("attention grads", &vals(&ra[k]), &vals(&rb[k]), Tol::Close);
    }
    // cross_entropy with an ignored target.
    let mut f = Graph::new("ce");
    let l = f.input("logits", f64s(&[3, 4]));
    let t = f.input("t", Shape::new(&[3], DType::I64));
    let c = f.cross_entropy(l, t);
    f.set_outputs(vec![c]);
    let flat = inline_composites(&f, &|_| false);
    let (a, b) = (grad(&f, &[l]), grad(&flat, &[flat.input_by_name("logits").unwrap()]));
    let feeds = [
        ("logits", rng.tensor(&[3, 4], DType::F64, -2.0, 2.0)),
        ("t", Tensor::from_vec(vec![2i64, -100, 0], &[3]).unwrap()),
    ];
    assert_close("cross_entropy grads", &vals(&eval(&a, &feeds)[0]), &vals(&eval(&b, &feeds)[0]), Tol::Close);
    assert_eq!(vals(&eval(&a, &feeds)[0])[4..8], [0.0; 4], "the ignored row gets no gradient");
}

/// A user `custom_vjp`: identity forward, gradient clipped to [-1, 1] backward.
struct ClipGrad;
impl VjpRule for ClipGrad {
    fn vjp(&self, _: &Attrs, cx: &mut Cx, _x: &[NodeId], _y: &[NodeId], ct: &[Tan]) -> Result<Vec<Tan>, AdError> {
        Ok(vec![ct[0].map(|c| {
            let (lo, hi) = (cx.g.scalar_like(-1.0, c), cx.g.scalar_like(1.0, c));
            let m = cx.g.max(c, lo);
            cx.g.min(m, hi)
        })])
    }
}

#[test]
fn user_custom_vjp_is_used_in_reverse_mode_only() {
    register_vjp("test.clip_grad", Arc::new(ClipGrad));
    let mut f = Graph::new("f");
    let x = f.input("x", f64s(&[2]));
    let y = f.composite_with("test.clip_grad", Attrs::new(), &[x], |_, a| vec![a[0]])[0];
    let three = f.scalar(3.0, DType::F64);
    let z = f.mul(y, three);
    let l = f.sum(z, &[0], false);
    f.set_outputs(vec![l]);
    let g = grad(&f, &[x]);
    assert_eq!(vals(&eval(&g, &[("x", t64(&[1.0, 2.0], &[2]))])[0]), [1.0, 1.0]);
    let j = jvp(&f, &[x]).unwrap();
    let o = eval(&j, &[("x", t64(&[1.0, 2.0], &[2])), ("tangent_x", t64(&[1.0, 0.0], &[2]))]);
    assert_eq!(vals(&o[1]), [3.0], "forward mode differentiates the decomposition");
}

/// A user op `y = x³` with a `custom_jvp` and no batching rule.
struct Cube;
impl CustomOp for Cube {
    fn infer(&self, _: &Attrs, ins: &[&Shape]) -> Result<Vec<Shape>, String> {
        Ok(vec![ins[0].clone()])
    }
    fn eval(&self, _: &Attrs, ins: &[&Tensor], outs: &mut [Tensor]) -> Result<(), IrError> {
        let v: Vec<f64> = ins[0].to_f64_vec().iter().map(|x| x * x * x).collect();
        outs[0] = Tensor::from_f64s(ins[0].shape(), ins[0].dtype(), &v).unwrap();
        Ok(())
    }
    fn jvp(&self, _: &Attrs, cx: &mut Cx, x: &[NodeId], _: &[NodeId], t: &[Tan]) -> Result<Vec<Tan>, AdError> {
        Ok(vec![cx.chain(t[0], |g| {
            let x2 = g.mul(x[0], x[0]);
            let three = g.scalar_like(3.0, x[0]);
            g.mul(three, x2)
        })])
    }
}

#[test]
fn custom_op_jvp_works_in_both_modes_and_missing_rules_are_typed_errors() {
    register_op("test.cube", Arc::new(Cube));
    let mut f = Graph::new("f");
    let x = f.input("x", f64s(&[2]));
    let y = f.custom("test.cube", Attrs::new(), &[x])[0];
    let l = f.sum(y, &[0], false);
    f.set_outputs(vec![l]);
    let g = grad(&f, &[x]);
    assert_eq!(vals(&eval(&g, &[("x", t64(&[1.0, -2.0], &[2]))])[0]), [3.0, 12.0]);
    match vmap(&f, &[Some(0)], &[Some(0)], 3usize) {
        Err(AdError::NoRule { op, kind: RuleKind::Batch, .. }) => assert_eq!(op, "custom.test.cube"),
        other => panic!("expected a missing batching rule, got {other:?}"),
    }
    // An op without a JVP rule: the error names it.
    struct Opaque;
    impl CustomOp for Opaque {
        fn infer(&self, _: &Attrs, ins: &[&Shape]) -> Result<Vec<Shape>, String> {
            Ok(vec![ins[0].clone()])
        }
        fn eval(&self, _: &Attrs, ins: &[&Tensor], outs: &mut [Tensor]) -> Result<(), IrError> {
            outs[0] = ins[0].clone();
            Ok(())
        }
    }
    register_op("test.opaque", Arc::new(Opaque));
    let mut f = Graph::new("f");
    let x = f.input("x", f64s(&[2]));
    let y = f.custom("test.opaque", Attrs::new(), &[x])[0];
    let l = f.sum(y, &[0], false);
    f.set_outputs(vec![l]);
    match try_grad(&f, &[x]) {
        Err(AdError::NoRule { op, kind: RuleKind::Jvp, .. }) => assert_eq!(op, "custom.test.opaque"),
        other => panic!("expected a missing JVP rule, got {other:?}"),
    }
}

#[test]
fn bad_arguments_are_errors_not_panics() {
    let (f, x) = sum_sin(2);
    let e = try_grad(&f, &[NodeId(99)]).unwrap_err();
    assert!(e.to_string().contains("not a node"), "{e}");
    let mut g = f.clone();
    let s = g.sin(x);
    g.set_outputs(vec![s]);
    let e = try_grad(&g, &[x]).unwrap_err();
    assert!(e.to_string().contains("scalar loss"), "{e}");
    let e = try_grad(&g, &[s]).unwrap_err();
    assert!(e.to_string().contains("inputs or params"), "{e}");
    let mut h = Graph::new("int");
    let i = h.input("i", Shape::new(&[2], DType::I32));
    let c = h.convert(i, DType::F64);
    let l = h.sum(c, &[0], false);
    h.set_outputs(vec![l]);
    let e = try_grad(&h, &[i]).unwrap_err();
    assert!(e.to_string().contains("only float values have gradients"), "{e}");
    // grad_with_loss seeds a non-scalar first output (a VJP).
    let gl = try_grad_with_loss(&g, &[x]).unwrap();
    let o = eval(&gl, &[("x", t64(&[0.3, 0.4], &[2])), ("d_output", t64(&[1.0, 2.0], &[2]))]);
    assert_close("vjp", &vals(&o[1]), &[0.3f64.cos(), 2.0 * 0.4f64.cos()], Tol::Exact);
}

/// `while i < n: x = x * 0.5 + sin(x)` with `n` an input: a dynamic trip count.
fn dynamic_while() -> (Graph, NodeId) {
    let mut c = Graph::new("cond");
    let i = c.input("i", Shape::new(&[], DType::I32));
    let n = c.input("n", Shape::new(&[], DType::I32));
    c.input("x", f64s(&[2]));
    let p = c.compare(CompareOp::Lt, i, n);
    c.set_outputs(vec![p]);
    let mut b = Graph::new("body");
    let i = b.input("i", Shape::new(&[], DType::I32));
    let n = b.input("n", Shape::new(&[], DType::I32));
    let x = b.input("x", f64s(&[2]));
    let one = b.scalar(1.0, DType::I32);
    let i2 = b.add(i, one);
    let h = b.scalar(0.5, DType::F64);
    let a = b.mul(x, h);
    let s = b.sin(x);
    let x2 = b.add(a, s);
    b.set_outputs(vec![i2, n, x2]);
    let mut f = Graph::new("f");
    let n = f.input("n", Shape::new(&[], DType::I32));
    let x = f.input("x", f64s(&[2]));
    let i0 = f.scalar(0.0, DType::I32);
    let r = f.while_loop(c, b, &[i0, n, x]);
    let l = f.sum(r[2], &[0], false);
    f.set_outputs(vec![l]);
    (f, x)
}

#[test]
fn while_forward_mode_and_reverse_needs_a_static_trip_count() {
    let (f, x) = dynamic_while();
    // Forward mode against finite differences.
    let j = jvp(&f, &[x]).unwrap();
    let base = [("n", Tensor::scalar(3i32)), ("x", t64(&[0.2, -0.7], &[2])), ("tangent_x", t64(&[1.0, 0.5], &[2]))];
    let o = eval(&j, &base);
    let e = 1e-6;
    let fx =
        |d: f64| vals(&eval(&f, &[("n", Tensor::scalar(3i32)), ("x", t64(&[0.2 + d, -0.7 + 0.5 * d], &[2]))])[0])[0];
    assert_close("while jvp", &vals(&o[1]), &[(fx(e) - fx(-e)) / (2.0 * e)], Tol::FiniteDiff);
    match try_grad(&f, &[x]) {
        Err(AdError::NoRule { op, kind: RuleKind::Transpose, why }) => {
            assert_eq!(op, "while");
            assert!(why.contains("static trip count"), "{why}");
        }
        other => panic!("expected the while error, got {other:?}"),
    }
}

#[test]
fn scan_rnn_of_sixteen_steps_in_both_modes() {
    let mut b = Graph::new("cell");
    let w = b.input("w", f64s(&[3, 3]));
    let h = b.input("h", f64s(&[3]));
    let x = b.input("x", f64s(&[3]));
    let wh = b.mm(w, h);
    let a = b.add(wh, x);
    let h2 = b.tanh(a);
    b.set_outputs(vec![h2, h2]);
    let mut f = Graph::new("rnn");
    let w = f.input("w", f64s(&[3, 3]));
    let h0 = f.input("h0", f64s(&[3]));
    let xs = f.input("xs", f64s(&[16, 3]));
    let r = f.scan(b, &[w], &[h0], &[xs], 16, false);
    let sq = f.mul(r[1], r[1]);
    let l = f.sum(sq, &[0, 1], false);
    f.set_outputs(vec![l]);
    let mut rng = Rng(9);
    let feeds = vec![
        ("w".to_string(), rng.tensor(&[3, 3], DType::F64, -0.8, 0.8)),
        ("h0".to_string(), rng.tensor(&[3], DType::F64, -1.0, 1.0)),
        ("xs".to_string(), rng.tensor(&[16, 3], DType::F64, -1.0, 1.0)),
    ];
    let p = Point { f: &f, feeds, wrt: vec!["w".into(), "h0".into(), "xs".into()] };
    check_first_order(&p, &mut rng, 1e-6, Tol::FiniteDiff);
    // The loop constant `w` reaches the linear scans directly: nothing of type [16, 3, 3]
    // (`w` stacked once per step) is built.
    let g = value_and_grad(&f, &[w]).unwrap();
    let stacked_w = Shape::new(&[16, 3, 3], DType::F64);
    assert!(g.nodes().iter().all(|n| !n.outputs.contains(&stacked_w)), "w is stacked per step:\n{g}");
}

#[test]
fn symbolic_batch_dims_differentiate_and_specialize() {
    // An MLP with a `?` batch: grad, then evaluate at two batch sizes against the static graph.
    let build = |batch: rlx_ir::Dim| {
        let mut g = Graph::new("mlp");
        let x = g.input("x", Shape::from_dims(&[batch.clone(), 3.into()], DType::F64));
        let t = g.input("t", Shape::from_dims(&[batch], DType::I32));
        let w = g.param("w", f64s(&[3, 4]));
        let b = g.param("b", f64s(&[4]));
        let h = g.mm(x, w);
        let h = g.add(h, b);
        let h = g.tanh(h);
        let l = g.cross_entropy(h, t);
        g.set_outputs(vec![l]);
        let (w, b) = (g.param_by_name("w").unwrap(), g.param_by_name("b").unwrap());
        (g, w, b)
    };
    let (sym, w, b) = build(rlx_ir::Dim::dynamic());
    let gs = value_and_grad(&sym, &[w, b]).unwrap();
    let mut rng = Rng(21);
    for n in [2usize, 5] {
        let (stat, w2, b2) = build(n.into());
        let gt = value_and_grad(&stat, &[w2, b2]).unwrap();
        let feeds = [
            ("x", rng.tensor(&[n, 3], DType::F64, -1.0, 1.0)),
            ("t", Tensor::from_vec((0..n as i32).map(|i| i % 4).collect::<Vec<_>>(), &[n]).unwrap()),
            ("w", rng.tensor(&[3, 4], DType::F64, -1.0, 1.0)),
            ("b", rng.tensor(&[4], DType::F64, -1.0, 1.0)),
        ];
        let (a, c) = (eval(&gs, &feeds), eval(&gt, &feeds));
        for k in 0..3 {
            assert_close("symbolic vs static", &vals(&a[k]), &vals(&c[k]), Tol::Exact);
        }
    }
}
