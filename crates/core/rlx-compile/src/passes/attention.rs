//! MIR: recognize attention written out as primitives — `dot_general(q, kᵀ)`, an optional
//! scale (`mul` / `div` by a scalar constant), an optional additive mask (`add` of a tensor
//! that broadcasts to the scores), `softmax` over the last axis, `dot_general(·, v)` — and
//! replace it with one `scaled_dot_product_attention` composite (mask `bias` or `none`), so a
//! backend with a native attention kernel runs it without the `Sq × Sk` scores in memory.
//! ONNX exports of BERT-style encoders (and hand-built graphs) have exactly this shape.
//!
//! Matched: f32 `[B, H, Sq, D]` queries; keys either `[B, H, D, Sk]` (the transposed operand of
//! `q @ kᵀ`; a `transpose` [0, 1, 3, 2] is added, folded into the transpose that produced it
//! when there is one) or `[B, H, Sk, D]` contracted on their last axis; values `[B, H, Sk, Dv]`;
//! both products batched over dims 0 and 1. The scores, the scaled and masked scores and the
//! probabilities must each be read only by the next step and not be graph outputs (otherwise
//! they stay materialized and nothing changes). Runs only when the backend has a native kernel
//! for the composite ([`crate::PassOptions::native_composites`]): the composite is not inlined
//! again after the HIR stage.
//!
//! Then the head transposes: an f32 `[B, H, S, D]` attention (matched here or built with the
//! builder) whose operands come from `transpose(·, [0, 2, 1, 3])` (a BERT export's
//! `[B, S, H·D]` → reshape `[B, S, H, D]` → transpose) and whose result is read only by such a
//! transpose becomes the same attention in the `[B, S, H, D]` layout
//! ([`rlx_ir::compose::AttentionLayout::Bshd`]) on the transposes' operands, and the result
//! transpose disappears: the kernel reads and writes with strides instead of four copies per
//! layer (as ONNX Runtime's fused `MultiHeadAttention`). Done when at least three of the four
//! transposes go away; an operand or result that is not transposed gets a transpose instead.

use crate::rebuild::{Rebuild, stats};
use crate::{CompileError, PassOptions, PassStats};
use rlx_ir::compose::{AttentionLayout, MaskKind};
use rlx_ir::ops::{BinaryOp, DotGeneral};
use rlx_ir::{Attr, DType, Graph, NodeId, Op};

/// Name of the composite the pass emits.
pub const SDPA: &str = "scaled_dot_product_attention";

/// One matched attention, in the old graph's ids.
#[derive(Clone, Debug)]
struct Match {
    q: NodeId,
    /// Keys and whether they are `[B, H, D, Sk]` (need a transpose).
    k: NodeId,
    k_transposed: bool,
    v: NodeId,
    bias: Option<NodeId>,
    scale: f64,
}

/// Rewrite attention patterns of `g` into `scaled_dot_product_attention`; `changed` counts them.
pub fn run(g: &mut Graph, opts: &PassOptions) -> Result<PassStats, CompileError> {
    let before = g.nodes().len();
    if !opts.native_composites.contains(SDPA) {
        return Ok(stats(before, g, 0));
    }
    let nodes = g.nodes();
    let uses = crate::rebuild::reader_counts(g);
    let single = |id: NodeId| uses[id.index()] == 1;
    let found: Vec<Option<Match>> = (0..nodes.len()).map(|i| match_at(g, i, &single)).collect();
    let matched = found.iter().flatten().count();
    if matched > 0 {
        let mut rb = Rebuild::new(g);
        for (i, n) in nodes.iter().enumerate() {
            let Some(m) = &found[i] else {
                rb.copy(n);
                continue;
            };
            let q = rb.map[m.q.index()];
            let mut k = rb.map[m.k.index()];
            if m.k_transposed {
                k = match &nodes[m.k.index()].op {
                    // Fold [0, 1, 3, 2] into the transpose that made kᵀ.
                    Op::Transpose { permutation } => {
                        let p = permutation;
                        rb.out.transpose(rb.map[nodes[m.k.index()].inputs[0].index()], &[p[0], p[1], p[3], p[2]])
                    }
                    _ => rb.out.transpose(k, &[0, 1, 3, 2]),
                };
            }
            let v = rb.map[m.v.index()];
            let mask = m.bias.map_or(MaskKind::None, |b| MaskKind::Bias(rb.map[b.index()]));
            let y = rb.out.scaled_dot_product_attention(q, k, v, mask, Some(m.scale));
            rb.alias(y);
        }
        finish(g, rb, "attention")?;
        crate::passes::dce::run(g, opts)?;
    }
    let absorbed = absorb_head_transposes(g)?;
    if absorbed > 0 {
        crate::passes::dce::run(g, opts)?;
    }
    Ok(stats(before, g, matched + absorbed))
}

/// Replace `g` by the rebuilt graph, or report the builder error the rewrite caused.
fn finish(g: &mut Graph, rb: Rebuild, pass: &'static str) -> Result<(), CompileError> {
    let out = rb.finish(g);
    if let Some(e) = out.error().filter(|_| g.error().is_none()) {
        return Err(CompileError::PassBroke { pass, source: e.clone() });
    }
    *g = out;
    Ok(())
}

/// The permutation between `[B, H, S, D]` and `[B, S, H, D]` (its own inverse).
const SWAP: [usize; 4] = [0, 2, 1, 3];

/// One `[B, H, S, D]` attention to move to `[B, S, H, D]`.
struct Relayout {
    /// Per q, k, v: the operand was `transpose(x, SWAP)` (read `x` instead).
    from_transpose: [bool; 3],
    /// Every reader of the result is `transpose(·, SWAP)` (they become the attention).
    out_transposed: bool,
    mask: &'static str,
    scale: f64,
}

/// Move attentions whose head transposes can be absorbed to the `[B, S, H, D]` layout (see
/// the module docs); returns how many moved.
fn absorb_head_transposes(g: &mut Graph) -> Result<usize, CompileError> {
    let nodes = g.nodes();
    let mut readers: Vec<Vec<NodeId>> = vec![vec![]; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for x in &n.inputs {
            readers[x.index()].push(NodeId(i as u32));
        }
    }
    let is_swap = |id: NodeId| matches!(&g.node(id).op, Op::Transpose { permutation } if permutation[..] == SWAP);
    let plan: Vec<Option<Relayout>> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let Op::Composite(c) = &n.op else { return None };
            if c.name != SDPA || AttentionLayout::of_attrs(&c.attrs)? != AttentionLayout::Bhsd || n.is_tuple() {
                return None;
            }
            if n.inputs[..3].iter().chain([&NodeId(i as u32)]).any(|&x| {
                let s = g.shape(x);
                s.dtype != DType::F32 || s.rank() != 4
            }) {
                return None;
            }
            let mask = match (c.attrs.get("mask"), n.inputs.len()) {
                (Some(Attr::Str(m)), 3) if m == "none" => "none",
                (Some(Attr::Str(m)), 3) if m == "causal" => "causal",
                (Some(Attr::Str(m)), 4) if m == "padding" => "padding",
                (Some(Attr::Str(m)), 4) if m == "bias" => "bias",
                _ => return None,
            };
            let Some(Attr::Float(scale)) = c.attrs.get("scale") else { return None };
            let from_transpose = [0, 1, 2].map(|j| is_swap(n.inputs[j]));
            let r = &readers[i];
            let out_transposed =
                !g.outputs().contains(&NodeId(i as u32)) && !r.is_empty() && r.iter().all(|&u| is_swap(u));
            let gone = from_transpose.iter().filter(|&&t| t).count() + out_transposed as usize;
            (gone >= 3).then_some(Relayout { from_transpose, out_transposed, mask, scale: *scale })
        })
        .collect();
    let moved = plan.iter().flatten().count();
    if moved == 0 {
        return Ok(0);
    }
    let mut rb = Rebuild::new(g);
    for (i, n) in nodes.iter().enumerate() {
        // A result transpose of a moved attention is the attention itself now.
        if is_swap(NodeId(i as u32)) && plan[n.inputs[0].index()].as_ref().is_some_and(|p| p.out_transposed) {
            rb.alias(rb.map[n.inputs[0].index()]);
            continue;
        }
        let Some(p) = &plan[i] else {
            rb.copy(n);
            continue;
        };
        let qkv = [0, 1, 2].map(|j| {
            let x = n.inputs[j];
            if p.from_transpose[j] {
                rb.map[g.node(x).inputs[0].index()]
            } else {
                rb.out.transpose(rb.map[x.index()], &SWAP)
            }
        });
        let extra = n.inputs.get(3).map(|m| rb.map[m.index()]);
        let mask = match (p.mask, extra) {
            ("causal", _) => MaskKind::Causal,
            ("padding", Some(m)) => MaskKind::Padding(m),
            ("bias", Some(m)) => MaskKind::Bias(m),
            _ => MaskKind::None,
        };
        let [q, k, v] = qkv;
        let y = rb.out.scaled_dot_product_attention_with_layout(q, k, v, mask, Some(p.scale), AttentionLayout::Bshd);
        // With the result transposes absorbed, nothing reads this node's old value: its image
        // is the [B, S, H, D] result that those transposes now alias.
        let y = if p.out_transposed { y } else { rb.out.transpose(y, &SWAP) };
        rb.alias(y);
    }
    finish(g, rb, "attention")?;
    Ok(moved)
}

/// `d` batched over dims 0 and 1, contracting lhs dim 3 with rhs dim `rc`.
fn is_batched(d: &DotGeneral, rc: usize) -> bool {
    d.lhs_batch == [0, 1]
        && d.rhs_batch == [0, 1]
        && d.lhs_contracting == [3]
        && d.rhs_contracting == [rc]
        && d.preferred_element_type.is_none()
}

/// The value of a scalar f32 constant (rank 0 or every dim 1).
fn scalar_const(g: &Graph, id: NodeId) -> Option<f64> {
    match &g.node(id).op {
        Op::Constant(t) if t.numel() == 1 && t.dtype() == DType::F32 => t.to_f64_vec().first().copied(),
        _ => None,
    }
}

/// The attention ending at node `i` (the `P · V` product), if the pattern matches.
fn match_at(g: &Graph, i: usize, single: &dyn Fn(NodeId) -> bool) -> Option<Match> {
    let f32_4 = |id: NodeId| g.shape(id).dtype == DType::F32 && g.shape(id).rank() == 4;
    let n = &g.nodes()[i];
    let Op::DotGeneral(pv) = &n.op else { return None };
    let (p, v) = (n.inputs[0], n.inputs[1]);
    if !is_batched(pv, 2) || !f32_4(p) || !f32_4(v) || n.is_tuple() || !single(p) {
        return None;
    }
    // softmax over the last axis.
    let pn = g.node(p);
    let Op::Composite(c) = &pn.op else { return None };
    if c.name != "softmax" || !matches!(c.attrs.get("axis"), Some(Attr::Int(3))) {
        return None;
    }
    let mut x = pn.inputs[0];
    // Optional additive mask: add(x, bias) or add(bias, x), bias f32 broadcasting to x.
    let mut bias = None;
    if let Op::Binary(BinaryOp::Add) = g.node(x).op {
        let an = g.node(x);
        let is_scores = |id: NodeId| g.shape(id) == g.shape(x) && producer_is_scale_or_dot(g, id);
        let (s, b) = if is_scores(an.inputs[0]) { (an.inputs[0], an.inputs[1]) } else { (an.inputs[1], an.inputs[0]) };
        if !is_scores(s) || !single(x) || g.shape(b).dtype != DType::F32 || g.shape(b).rank() > 4 {
            return None;
        }
        bias = Some(b);
        x = s;
    }
    // Optional scale.
    let mut scale = 1.0;
    if let Op::Binary(op @ (BinaryOp::Mul | BinaryOp::Div)) = g.node(x).op {
        let sn = g.node(x);
        let (s, c) = match (scalar_const(g, sn.inputs[0]), scalar_const(g, sn.inputs[1])) {
            (_, Some(c)) => (sn.inputs[0], c),
            (Some(c), None) if op == BinaryOp::Mul => (sn.inputs[1], c),
            _ => return None,
        };
        if !single(x) || g.shape(s) != g.shape(x) {
            return None;
        }
        scale = if op == BinaryOp::Div { 1.0 / c } else { c };
        x = s;
    }
    // The score product.
    let sn = g.node(x);
    let Op::DotGeneral(qk) = &sn.op else { return None };
    let (q, k) = (sn.inputs[0], sn.inputs[1]);
    if !single(x) || !f32_4(q) || !f32_4(k) {
        return None;
    }
    let k_transposed = if is_batched(qk, 2) {
        true
    } else if is_batched(qk, 3) {
        false
    } else {
        return None;
    };
    // The composite requires matching batch and heads (no GQA broadcast here) and Sk of v.
    let (qd, kd, vd) = (&g.shape(q).dims, &g.shape(k).dims, &g.shape(v).dims);
    let sk = if k_transposed { &kd[3] } else { &kd[2] };
    if qd[..2] != kd[..2] || qd[..2] != vd[..2] || *sk != vd[2] {
        return None;
    }
    Some(Match { q, k, k_transposed, v, bias, scale })
}

/// True when `id` is a `dot_general` or a scalar `mul` / `div` (the scores before the mask).
fn producer_is_scale_or_dot(g: &Graph, id: NodeId) -> bool {
    matches!(g.node(id).op, Op::DotGeneral(_) | Op::Binary(BinaryOp::Mul | BinaryOp::Div))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rlx_ir::interp::evaluate;
    use rlx_ir::{Shape, Tensor};
    use std::collections::HashMap;

    fn opts() -> PassOptions {
        PassOptions { native_composites: [SDPA.to_string(), "softmax".into()].into(), ..Default::default() }
    }

    fn rand(dims: &[usize], seed: u64) -> Tensor {
        let n: usize = dims.iter().product();
        let v: Vec<f64> = (0..n).map(|i| ((i as f64 + 1.0) * 0.7311 + seed as f64).sin()).collect();
        Tensor::from_f64s(dims, DType::F32, &v).unwrap()
    }

    /// ONNX-style: heads split by reshape + transpose, kᵀ via transpose [0, 2, 3, 1], divide
    /// by √D, add a [B, 1, 1, S] mask, softmax, product, merge heads.
    fn onnx_style(div: bool, with_mask: bool) -> Graph {
        let (b, s, h, d) = (2, 5, 3, 4);
        let mut g = Graph::new("attn");
        let x = g.input("x", Shape::new(&[b, s, h * d], DType::F32));
        let m = g.input("mask", Shape::new(&[b, 1, 1, s], DType::F32));
        let split = |g: &mut Graph, w: &str, perm: &[usize]| {
            let w = g.param(w, Shape::new(&[h * d, h * d], DType::F32));
            let y = g.mm(x, w);
            let y = g.reshape(y, [b, s, h, d]);
            g.transpose(y, perm)
        };
        let q = split(&mut g, "wq", &[0, 2, 1, 3]);
        let kt = split(&mut g, "wk", &[0, 2, 3, 1]);
        let v = split(&mut g, "wv", &[0, 2, 1, 3]);
        let sc = g.mm(q, kt);
        let sc = if div {
            let c = g.scalar(2.0, DType::F32);
            g.div(sc, c)
        } else {
            let c = g.scalar(0.5, DType::F32);
            g.mul(c, sc)
        };
        let sc = if with_mask { g.add(sc, m) } else { sc };
        let p = g.softmax(sc, -1);
        let o = g.mm(p, v);
        let o = g.transpose(o, &[0, 2, 1, 3]);
        let o = g.reshape(o, [b, s, h * d]);
        g.set_outputs(vec![o]);
        assert!(g.error().is_none(), "{:?}", g.error());
        g
    }

    fn count(g: &Graph, name: &str) -> usize {
        g.nodes().iter().filter(|n| matches!(&n.op, Op::Composite(c) if c.name == name)).count()
    }

    #[test]
    fn onnx_pattern_becomes_one_composite_with_equal_values() {
        for (div, mask) in [(true, true), (false, true), (true, false)] {
            let g0 = onnx_style(div, mask);
            let mut g = g0.clone();
            let st = run(&mut g, &opts()).unwrap();
            assert_eq!(st.changed, 2, "one attention matched, then moved to [B, S, H, D]");
            rlx_ir::verify(&g).unwrap();
            assert_eq!(count(&g, SDPA), 1);
            assert_eq!(count(&g, "softmax"), 0, "the softmax is inside the composite now");
            // kᵀ's transpose is folded and the head transposes are absorbed: the attention
            // reads the reshaped projections in [B, S, H, D] and none is left.
            assert!(!g.nodes().iter().any(|n| matches!(n.op, Op::Transpose { .. })), "{g}");
            let c = g.nodes().iter().find_map(|n| match &n.op {
                Op::Composite(c) if c.name == SDPA => Some(c),
                _ => None,
            });
            assert_eq!(AttentionLayout::of_attrs(&c.unwrap().attrs), Some(AttentionLayout::Bshd));
            let mut mask = rand(&[2, 1, 1, 5], 9).to_f64_vec();
            mask[3] = -1e9;
            let feeds: HashMap<String, Tensor> = [
                ("x", rand(&[2, 5, 12], 1)),
                ("mask", Tensor::from_f64s(&[2, 1, 1, 5], DType::F32, &mask).unwrap()),
                ("wq", rand(&[12, 12], 2)),
                ("wk", rand(&[12, 12], 3)),
                ("wv", rand(&[12, 12], 4)),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            let want = evaluate(&g0, &feeds).unwrap()[0].to_f64_vec();
            let got = evaluate(&g, &feeds).unwrap()[0].to_f64_vec();
            for (a, b) in got.iter().zip(&want) {
                assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{a} vs {b}");
            }
        }
    }

    /// A builder-made `[B, H, S, D]` attention on inputs `[B, S, H, D]`: `transposed` says
    /// which of q, k, v go through a head transpose, `out_t` whether the result does.
    fn heads(transposed: [bool; 3], out_t: bool, mask: &str) -> Graph {
        let (b, s, h, d) = (2, 5, 3, 4);
        let mut g = Graph::new("heads");
        let bias = g.input("bias", Shape::new(&[b, 1, 1, s], DType::F32));
        let lens = g.input("lens", Shape::new(&[b], DType::I64));
        // A transposed operand is declared [B, S, H, D], the others [B, H, S, D].
        let qkv = [0, 1, 2].map(|j| {
            let dims = if transposed[j] { [b, s, h, d] } else { [b, h, s, d] };
            g.input(["q", "k", "v"][j], Shape::new(&dims, DType::F32))
        });
        let [q, k, v] = [0, 1, 2].map(|j| if transposed[j] { g.transpose(qkv[j], &SWAP) } else { qkv[j] });
        let mask = match mask {
            "causal" => MaskKind::Causal,
            "padding" => MaskKind::Padding(lens),
            "bias" => MaskKind::Bias(bias),
            _ => MaskKind::None,
        };
        let y = g.scaled_dot_product_attention(q, k, v, mask, None);
        let y = if out_t { g.transpose(y, &SWAP) } else { y };
        let z = g.exp(y);
        g.set_outputs(vec![z]);
        g
    }

    #[test]
    fn head_transposes_are_absorbed_for_every_mask() {
        let transposes = |g: &Graph| g.nodes().iter().filter(|n| matches!(n.op, Op::Transpose { .. })).count();
        let cases = [([true; 3], true, 4, 0), ([true, true, false], true, 3, 1), ([true, false, true], false, 2, 2)];
        for mask in ["none", "causal", "padding", "bias"] {
            for (tr, out_t, before, after) in cases {
                let g0 = heads(tr, out_t, mask);
                let dims = |n: &str| g0.shape(g0.input_by_name(n).unwrap()).static_dims().unwrap();
                let feeds: HashMap<String, Tensor> = [
                    ("bias", rand(&[2, 1, 1, 5], 5)),
                    ("lens", Tensor::from_vec(vec![5i64, 2], &[2]).unwrap()),
                    ("q", rand(&dims("q"), 1)),
                    ("k", rand(&dims("k"), 2)),
                    ("v", rand(&dims("v"), 3)),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect();
                assert_eq!(transposes(&g0), before);
                let mut g = g0.clone();
                let st = run(&mut g, &opts()).unwrap();
                rlx_ir::verify(&g).unwrap();
                assert_eq!(transposes(&g), after, "{mask} {tr:?} {out_t}: {g}");
                assert_eq!(st.changed, usize::from(after < before));
                let want = evaluate(&g0, &feeds).unwrap()[0].to_f64_vec();
                let got = evaluate(&g, &feeds).unwrap()[0].to_f64_vec();
                for (a, b) in got.iter().zip(&want) {
                    assert!((a - b).abs() <= 1e-5 * (1.0 + b.abs()), "{mask}: {a} vs {b}");
                }
            }
        }
    }

    #[test]
    fn shared_scores_or_missing_kernel_leave_the_graph_alone() {
        // The probabilities are also an output: nothing to fuse.
        let mut g = onnx_style(true, true);
        let p = g.nodes().iter().position(|n| matches!(&n.op, Op::Composite(c) if c.name == "softmax")).unwrap();
        let mut outs = g.outputs().to_vec();
        outs.push(NodeId(p as u32));
        g.set_outputs(outs);
        let before = g.clone();
        assert_eq!(run(&mut g, &opts()).unwrap().changed, 0);
        assert_eq!(g, before);
        // The backend has no attention kernel.
        let mut g = onnx_style(true, true);
        let o = PassOptions { native_composites: ["softmax".to_string()].into(), ..Default::default() };
        assert_eq!(run(&mut g, &o).unwrap().changed, 0);
    }
}
