//! Native composite kernels (softmax, log_softmax, layer_norm, rms_norm) and the composite-body
//! fallback against the reference evaluation of the inlined decomposition.
//!
//! The composite nodes are built here with `push_node` and a hand-written body in the same
//! form as `rlx_ir::compose` (so this file does not depend on the compose builders), and run
//! through `kernels::select` / `kernels::run` directly.

mod common;
use common::{Tol, assert_close, rand_tensor};
use rlx_cpu::kernels::{self, Kernel};
use rlx_ir::ops::Composite;
use rlx_ir::{Attr, Attrs, DType, Graph, Node, NodeId, Op, Shape, Tensor};
use std::collections::HashMap;

/// The decomposition of `name` for operand types `ins`.
fn body(name: &str, ins: &[Shape], axis: usize, eps: f64) -> Graph {
    let mut g = Graph::new(name);
    let a: Vec<NodeId> = ins.iter().enumerate().map(|(i, s)| g.input(&format!("arg{i}"), s.clone())).collect();
    let x = a[0];
    let rank = ins[0].rank();
    let axes: Vec<i64> = (axis as i64..rank as i64).collect();
    let y = match name {
        "softmax" | "log_softmax" => {
            let m = g.reduce_max(x, &axes, true);
            let m = g.stop_gradient(m);
            let d = g.sub(x, m);
            let e = g.exp(d);
            let s = g.sum(e, &axes, true);
            if name == "softmax" {
                g.div(e, s)
            } else {
                let l = g.log(s);
                g.sub(d, l)
            }
        }
        "layer_norm" => {
            let mean = g.mean(x, &axes, true);
            let d = g.sub(x, mean);
            let d2 = g.mul(d, d);
            let var = g.mean(d2, &axes, true);
            let e = g.scalar_like(eps, x);
            let ve = g.add(var, e);
            let r = g.rsqrt(ve);
            let mut y = g.mul(d, r);
            if a.len() > 1 {
                y = g.mul(y, a[1]);
            }
            if a.len() > 2 {
                y = g.add(y, a[2]);
            }
            y
        }
        "rms_norm" => {
            let x2 = g.mul(x, x);
            let ms = g.mean(x2, &axes, true);
            let e = g.scalar_like(eps, x);
            let s = g.add(ms, e);
            let r = g.rsqrt(s);
            let mut y = g.mul(x, r);
            if a.len() > 1 {
                y = g.mul(y, a[1]);
            }
            y
        }
        _ => unreachable!(),
    };
    g.set_outputs(vec![y]);
    assert!(g.error().is_none(), "{name}: {:?}", g.error());
    g
}

/// Run composite `name` natively (or by its fallback) and compare with the reference; returns
/// the kernel name.
fn check(name: &str, operands: &[Tensor], axis: usize, eps: f64, tol: Tol) -> &'static str {
    let shapes: Vec<Shape> = operands.iter().map(|t| Shape::new(t.shape(), t.dtype())).collect();
    let mut g = Graph::new("c");
    let ins: Vec<NodeId> = shapes.iter().enumerate().map(|(i, s)| g.input(&format!("x{i}"), s.clone())).collect();
    let mut attrs = Attrs::new();
    attrs.insert("axis".into(), Attr::Int(axis as i64));
    if name.ends_with("norm") {
        attrs.insert("epsilon".into(), Attr::Float(eps));
    }
    let c = Composite { name: name.into(), attrs, body: Box::new(body(name, &shapes, axis, eps)) };
    let id = g.push_node(Node { op: Op::Composite(c), inputs: ins, outputs: vec![shapes[0].clone()] });
    g.set_outputs(vec![id]);

    let mut k = kernels::select(&g, id, &rlx_cpu::CpuOptions::default());
    let refs: Vec<&Tensor> = operands.iter().collect();
    let mut outs = vec![Tensor::zeros(operands[0].shape(), operands[0].dtype())];
    kernels::run(&mut k, &g.node(id).op, &refs, &mut outs).unwrap();

    let inlined = rlx_ir::inline_composites(&g, &|_| false);
    let feeds: HashMap<String, Tensor> =
        operands.iter().enumerate().map(|(i, t)| (format!("x{i}"), t.clone())).collect();
    let want = rlx_ir::interp::evaluate(&inlined, &feeds).unwrap();
    assert_close(&outs[0], &want[0], tol, &format!("{name} {:?} axis {axis}", operands[0].shape()));
    k.name()
}

const SM_TOL: Tol = Tol { abs: 1e-7, rel: 1e-6 };
const LN_TOL: Tol = Tol { abs: 2e-6, rel: 1e-5 };

#[test]
fn softmax_and_log_softmax_shapes() {
    for name in ["softmax", "log_softmax"] {
        let want = if name == "softmax" { "softmax_f32" } else { "log_softmax_f32" };
        for (i, d) in [&[4usize, 7][..], &[3, 5, 130], &[1], &[0, 5], &[5, 0], &[300, 301], &[2, 1000], &[2, 3001]]
            .iter()
            .enumerate()
        {
            let x = rand_tensor(d, DType::F32, i as u64, -8.0, 8.0);
            assert_eq!(check(name, &[x], d.len() - 1, 0.0, SM_TOL), want, "{name} {d:?}");
        }
        // Not the last axis, or not f32: the body runs.
        let x = rand_tensor(&[4, 7], DType::F32, 9, -8.0, 8.0);
        assert_eq!(check(name, &[x], 0, 0.0, SM_TOL), "composite_body");
        let x = rand_tensor(&[4, 7], DType::F64, 9, -8.0, 8.0);
        assert_eq!(check(name, &[x], 1, 0.0, SM_TOL), "composite_body");
    }
}

#[test]
fn softmax_special_values() {
    let ninf = f32::NEG_INFINITY;
    #[rustfmt::skip]
    let rows: Vec<f32> = vec![
        ninf, ninf, ninf, ninf, ninf,          // all -inf -> NaN (as jax)
        ninf, 1.0, ninf, 2.0, ninf,            // -inf entries get weight 0
        1e30, -1e30, 1e30, 0.0, 3e38,          // large magnitudes
        f32::NAN, 1.0, 2.0, 3.0, 4.0,          // NaN -> NaN row
        f32::INFINITY, 1.0, 2.0, 3.0, 4.0,     // +inf -> NaN row (inf - inf)
        -1e-45, 0.0, 1e-45, -0.0, 5.0,
    ];
    let x = Tensor::from_vec(rows, &[6, 5]).unwrap();
    for name in ["softmax", "log_softmax"] {
        check(name, std::slice::from_ref(&x), 1, 0.0, SM_TOL);
    }
}

#[test]
fn layer_norm_variants() {
    for (i, (d, axis)) in
        [(&[4usize, 7][..], 1), (&[2, 3, 40], 1), (&[2, 3, 40], 2), (&[300, 301], 1), (&[3, 1], 1), (&[2, 2500], 1)]
            .into_iter()
            .enumerate()
    {
        let x = rand_tensor(d, DType::F32, i as u64, -3.0, 5.0);
        let gamma = rand_tensor(&d[axis..], DType::F32, 10 + i as u64, 0.5, 1.5);
        let beta = rand_tensor(&d[axis..], DType::F32, 20 + i as u64, -1.0, 1.0);
        assert_eq!(check("layer_norm", std::slice::from_ref(&x), axis, 1e-5, LN_TOL), "layer_norm_f32");
        assert_eq!(check("layer_norm", &[x.clone(), gamma.clone()], axis, 1e-5, LN_TOL), "layer_norm_f32");
        assert_eq!(check("layer_norm", &[x.clone(), gamma.clone(), beta], axis, 1e-3, LN_TOL), "layer_norm_f32");
        assert_eq!(check("rms_norm", std::slice::from_ref(&x), axis, 1e-6, LN_TOL), "rms_norm_f32");
        assert_eq!(check("rms_norm", &[x, gamma], axis, 1e-6, LN_TOL), "rms_norm_f32");
    }
    // A mean far from zero (no E[x^2] - E[x]^2 cancellation), and empty batches.
    let x = rand_tensor(&[5, 64], DType::F32, 3, 1000.0, 1001.0);
    check("layer_norm", &[x], 1, 1e-5, Tol { abs: 2e-4, rel: 1e-4 });
    let x = rand_tensor(&[0, 8], DType::F32, 3, -1.0, 1.0);
    check("layer_norm", &[x], 1, 1e-5, LN_TOL);
    // f64: the body runs.
    let x = rand_tensor(&[4, 8], DType::F64, 3, -1.0, 1.0);
    assert_eq!(check("rms_norm", &[x], 1, 1e-6, LN_TOL), "composite_body");
}

#[test]
fn native_list() {
    assert_eq!(
        rlx_cpu::native_composites(),
        &[
            "softmax",
            "log_softmax",
            "layer_norm",
            "rms_norm",
            "dequant_matmul",
            "scaled_dot_product_attention",
            "attention_with_kvcache",
            "rope"
        ]
    );
    assert!(matches!(Kernel::CompositeBody, Kernel::CompositeBody));
}
