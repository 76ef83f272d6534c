//! Gradients against JAX (float64) for the fixtures `tools/refgen/gen_grads.py` writes: each
//! case builds the same loss with RLX builders, takes `value_and_grad`, and compares the loss
//! and every gradient within `Tol::Close` (1e-9 relative + absolute).

mod common;
use common::*;
use rlx_autodiff::value_and_grad;
use rlx_ir::op::MaskKind;
use rlx_ir::{DType, Graph, NodeId, Shape, Tensor, inline_composites};
use std::path::PathBuf;

fn fixture(case: &str, name: &str) -> Tensor {
    let p: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "fixtures", case, &format!("{name}.npy")].iter().collect();
    let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let npy = npyz::NpyFile::new(&bytes[..]).unwrap();
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let descr = npy.dtype().descr();
    if descr.contains('f') {
        Tensor::from_vec(npy.into_vec::<f64>().unwrap(), &shape).unwrap()
    } else {
        Tensor::from_vec(npy.into_vec::<i32>().unwrap(), &shape).unwrap()
    }
}

/// Declare an input per fixture name (typed from the fixture), build the loss, check
/// `value_and_grad` with respect to `wrt` against JAX. With `flat`, composites are inlined
/// first (so their decomposition is differentiated instead of a custom VJP).
fn check(case: &str, names: &[&str], wrt: &[&str], flat: bool, build: impl FnOnce(&mut Graph, &[NodeId]) -> NodeId) {
    let feeds: Vec<(&str, Tensor)> = names.iter().map(|&n| (n, fixture(case, &format!("in_{n}")))).collect();
    let mut g = Graph::new(case);
    let ids: Vec<NodeId> = feeds.iter().map(|(n, t)| g.input(n, Shape::new(t.shape(), t.dtype()))).collect();
    let loss = build(&mut g, &ids);
    g.set_outputs(vec![loss]);
    if flat {
        g = inline_composites(&g, &|_| false);
    }
    let w: Vec<NodeId> = wrt.iter().map(|n| g.input_by_name(n).unwrap()).collect();
    let vg = value_and_grad(&g, &w).unwrap_or_else(|e| panic!("{case}: {e}"));
    let out = eval(&vg, &feeds);
    assert_close(&format!("{case}: loss"), &vals(&out[0]), &vals(&fixture(case, "loss")), Tol::Close);
    for (k, n) in wrt.iter().enumerate() {
        let want = fixture(case, &format!("grad_{n}"));
        assert_eq!(out[1 + k].shape(), want.shape(), "{case}: shape of d{n}");
        assert_close(&format!("{case}: d{n}"), &vals(&out[1 + k]), &vals(&want), Tol::Close);
    }
}

fn weighted_sum(g: &mut Graph, y: NodeId, w: NodeId) -> NodeId {
    let p = g.mul(y, w);
    let r = g.shape(p).rank() as i64;
    g.sum(p, &(0..r).collect::<Vec<_>>(), false)
}

#[test]
fn mlp_softmax_cross_entropy() {
    for flat in [false, true] {
        check("mlp_ce", &["x", "w1", "b1", "w2", "b2", "t"], &["x", "w1", "b1", "w2", "b2"], flat, |g, a| {
            let h = g.mm(a[0], a[1]);
            let h = g.add(h, a[2]);
            let h = g.relu(h);
            let o = g.mm(h, a[3]);
            let o = g.add(o, a[4]);
            g.cross_entropy(o, a[5])
        });
    }
}

#[test]
fn layer_norm() {
    check("layer_norm", &["x", "gamma", "beta", "w"], &["x", "gamma", "beta"], false, |g, a| {
        let y = g.layer_norm(a[0], Some(a[1]), Some(a[2]), -1, 1e-5);
        weighted_sum(g, y, a[3])
    });
}

#[test]
fn rms_norm() {
    check("rms_norm", &["x", "gamma", "w"], &["x", "gamma"], false, |g, a| {
        let y = g.rms_norm(a[0], Some(a[1]), -1, 1e-6);
        weighted_sum(g, y, a[2])
    });
}

#[test]
fn attention_with_causal_mask() {
    // Custom (FlashAttention-style) VJP and the decomposition's gradient.
    for flat in [false, true] {
        check("attention_causal", &["q", "k", "v", "w"], &["q", "k", "v"], flat, |g, a| {
            let y = g.scaled_dot_product_attention(a[0], a[1], a[2], MaskKind::Causal, None);
            weighted_sum(g, y, a[3])
        });
    }
}

#[test]
fn conv2d_and_max_pool() {
    check("conv_maxpool", &["x", "w", "b", "wgt"], &["x", "w", "b"], false, |g, a| {
        let y = g.conv2d(a[0], a[1], Some(a[2]), [1, 1], [1, 1], [1, 1], 1);
        let p = g.max_pool2d(y, [2, 2], [2, 2], [0, 0]);
        weighted_sum(g, p, a[3])
    });
}

#[test]
fn embedding_gather_with_repeated_ids() {
    check("embedding", &["table", "ids", "wgt"], &["table"], false, |g, a| {
        let e = g.embedding(a[0], a[1]);
        let t = g.tanh(e);
        weighted_sum(g, t, a[2])
    });
}

#[test]
fn rnn_cell_scanned_over_sixteen_steps() {
    check("rnn_scan", &["w", "u", "b", "h0", "xs", "wgt"], &["w", "u", "b", "h0", "xs"], false, |g, a| {
        let f = |d: &[usize]| Shape::new(d, DType::F64);
        let mut cell = Graph::new("cell");
        let (w, u, b) = (cell.input("w", f(&[4, 4])), cell.input("u", f(&[3, 4])), cell.input("b", f(&[4])));
        let (h, x) = (cell.input("h", f(&[4])), cell.input("x", f(&[3])));
        let hw = cell.mm(h, w);
        let xu = cell.mm(x, u);
        let s = cell.add(hw, xu);
        let s = cell.add(s, b);
        let h2 = cell.tanh(s);
        cell.set_outputs(vec![h2, h2]);
        let r = g.scan(cell, &[a[0], a[1], a[2]], &[a[3]], &[a[4]], 16, false);
        weighted_sum(g, r[1], a[5])
    });
}
