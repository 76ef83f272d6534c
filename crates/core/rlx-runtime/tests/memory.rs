//! Memory planning figures: the spec's MLP and a transformer encoder block (hidden 384, 12
//! heads, seq 128, batch 1, FFN 1536) — arena bytes with planning vs the sum of every
//! intermediate buffer. Goal for the block: at most 50%.

#[path = "common/encoder.rs"]
mod encoder;

use rlx_ir::{DType, Graph, Shape};
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
    let (arena, peak, unplanned) = figures(encoder::stack(1));
    assert!(2 * arena <= unplanned, "arena {arena} B vs unplanned {unplanned} B");
    assert!(peak <= arena);
}
