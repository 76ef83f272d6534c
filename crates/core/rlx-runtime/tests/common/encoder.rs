//! One pre-norm transformer encoder layer as builder calls: the workload shared by
//! `rlx-runtime`'s memory-planning test (`tests/memory.rs`, via `#[path]`) and `rlx-cpu`'s
//! `examples/fusion_bench.rs` (via `#[path]` across the crates: a dev-only crate for one
//! function was the alternative), so the bench times the graph whose memory the test checks.

use rlx_ir::op::MaskKind;
use rlx_ir::{DType, Graph, NodeId, Shape};

/// One pre-norm encoder layer on `x` `[seq, hidden]` (f32): layer_norm, q/k/v projections,
/// attention over `heads` heads (no mask), output projection + residual, layer_norm, FFN of
/// width `ffn` with exact gelu + residual. Params are named `{prefix}ln1.g`, `{prefix}q.w`, …
/// Returns the `[seq, hidden]` output. `hidden` must be a multiple of `heads`.
pub fn encoder_layer(
    g: &mut Graph,
    x: NodeId,
    prefix: &str,
    seq: usize,
    hidden: usize,
    heads: usize,
    ffn: usize,
) -> NodeId {
    let p = |g: &mut Graph, n: &str, d: &[usize]| g.param(&format!("{prefix}{n}"), Shape::new(d, DType::F32));
    let (g1, b1) = (p(g, "ln1.g", &[hidden]), p(g, "ln1.b", &[hidden]));
    let h = g.layer_norm(x, Some(g1), Some(b1), -1, 1e-5);
    let dh = hidden / heads;
    let proj = |g: &mut Graph, n: &str| {
        let w = p(g, &format!("{n}.w"), &[hidden, hidden]);
        let b = p(g, &format!("{n}.b"), &[hidden]);
        let y = g.linear(h, w, Some(b));
        let y = g.reshape(y, [1, seq, heads, dh]);
        g.transpose(y, &[0, 2, 1, 3])
    };
    let (q, k, v) = (proj(g, "q"), proj(g, "k"), proj(g, "v"));
    let a = g.scaled_dot_product_attention(q, k, v, MaskKind::None, None);
    let a = g.transpose(a, &[0, 2, 1, 3]);
    let a = g.reshape(a, [seq, hidden]);
    let (wo, bo) = (p(g, "o.w", &[hidden, hidden]), p(g, "o.b", &[hidden]));
    let o = g.linear(a, wo, Some(bo));
    let x1 = g.add(x, o);
    let (g2, b2) = (p(g, "ln2.g", &[hidden]), p(g, "ln2.b", &[hidden]));
    let h2 = g.layer_norm(x1, Some(g2), Some(b2), -1, 1e-5);
    let (w1, c1) = (p(g, "ff1.w", &[ffn, hidden]), p(g, "ff1.b", &[ffn]));
    let f = g.linear(h2, w1, Some(c1));
    let f = g.gelu(f, false);
    let (w2, c2) = (p(g, "ff2.w", &[hidden, ffn]), p(g, "ff2.b", &[hidden]));
    let f = g.linear(f, w2, Some(c2));
    g.add(x1, f)
}

/// A stack of `layers` encoder layers (hidden 384, 12 heads, seq 128, FFN 1536), params
/// `l{i}.…`: the memory test's block and the compile-time test's 24 layers.
#[allow(dead_code)] // fusion_bench uses only `encoder_layer`
pub fn stack(layers: usize) -> Graph {
    let mut g = Graph::new("encoder");
    let mut x = g.input("x", Shape::new(&[128, 384], DType::F32));
    for i in 0..layers {
        x = encoder_layer(&mut g, x, &format!("l{i}."), 128, 384, 12, 1536);
    }
    g.set_outputs(vec![x]);
    g
}
