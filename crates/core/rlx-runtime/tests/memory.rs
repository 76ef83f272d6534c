//! Memory planning figures: the spec's MLP and a transformer encoder block (hidden 384, 12
//! heads, seq 128, batch 1, FFN 1536) — arena bytes with planning vs the sum of every
//! intermediate buffer. Goal for the block: at most 50%.

use rlx_ir::op::MaskKind;
use rlx_ir::{DType, Graph, NodeId, Shape};
use rlx_runtime::{CompileOptions, Device, Session};

fn f32s(d: &[usize]) -> Shape {
    Shape::new(d, DType::F32)
}

/// The spec's MLP (4 -> 8 -> relu -> 2) at batch `b`.
pub fn mlp(b: usize) -> Graph {
    let mut g = Graph::new("mlp");
    let x = g.input("x", f32s(&[b, 4]));
    let w1 = g.param("w1", f32s(&[4, 8]));
    let w2 = g.param("w2", f32s(&[8, 2]));
    let h = g.mm(x, w1);
    let h = g.relu(h);
    let y = g.mm(h, w2);
    g.set_outputs(vec![y]);
    g
}

/// One pre-norm transformer encoder layer on `x` `[seq, hidden]`; params named `l{i}.*`.
pub fn encoder_layer(
    g: &mut Graph,
    x: NodeId,
    i: usize,
    seq: usize,
    hidden: usize,
    heads: usize,
    ffn: usize,
) -> NodeId {
    let p = |g: &mut Graph, n: &str, d: &[usize]| g.param(&format!("l{i}.{n}"), f32s(d));
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

/// A stack of `layers` encoder layers (hidden 384, 12 heads, seq 128, FFN 1536).
pub fn encoder(layers: usize) -> Graph {
    let mut g = Graph::new("encoder");
    let mut x = g.input("x", f32s(&[128, 384]));
    for i in 0..layers {
        x = encoder_layer(&mut g, x, i, 128, 384, 12, 1536);
    }
    g.set_outputs(vec![x]);
    g
}

fn figures(g: Graph) -> (usize, usize, usize) {
    let c = Session::new(Device::Cpu).compile_with(g, &CompileOptions::new());
    let lir = c.lir().expect("the CPU backend plans memory");
    eprintln!("{}: {}", c.graph().name, lir.summary_json());
    (lir.arena_bytes + lir.fixed_bytes, lir.peak_live_bytes, lir.unplanned_bytes)
}

/// With matmul epilogues the MLP is two steps (hidden = relu(x·w1 + b1) in one, the output in
/// the other), whose buffers are live together: the plan must be exactly its peak, and never
/// above the sum of intermediates.
#[test]
fn mlp_arena_is_its_peak_and_at_most_its_intermediates() {
    let (arena, peak, unplanned) = figures(mlp(256));
    assert!(arena <= unplanned && peak == arena, "arena {arena}, peak {peak}, unplanned {unplanned}");
}

#[test]
fn encoder_block_arena_is_at_most_half_its_intermediates() {
    let (arena, peak, unplanned) = figures(encoder(1));
    assert!(2 * arena <= unplanned, "arena {arena} B vs unplanned {unplanned} B");
    assert!(peak <= arena);
}
