//! The decoder step graph: one forward over `S` new tokens of `B` sequences that attends to a
//! KV cache of capacity `C` plus the new block, built with static shapes per `(B, S, C)`
//! bucket and cache dtype.
//!
//! Inputs, in declaration order (the runner feeds them by reference, positionally):
//! - `tokens` i32 `[B, S]`; `rope_cos`, `rope_sin` f32 `[B·S, D]` (host-computed for each
//!   sequence's positions `len_r .. len_r + S`, in the model's RoPE pairing); `mask` f32
//!   `[B, S, C + S]` (0 where query `i` of sequence `r` may attend: cache columns `j < len_r`,
//!   new columns `j ≤ i`; `-inf` elsewhere; read by fast mode's decode attention only);
//!   `last` i32 `[B]` (flat row `r·S + i` of each
//!   sequence's last new token, whose logits are returned); `cache_len` i32 `[B]` (the tokens
//!   each sequence holds in the cache, `len_r`);
//! - `cache.{l}.k`, `cache.{l}.v` f32 or f16 `[B, Hk, C, D]` per layer (f16 is converted to f32
//!   inside attention, except by fast mode's attention op, which reads it as f16); none when
//!   `C = 0`, the graph of a first block over an empty cache;
//! - the weights, GGUF names in [`crate::weights::graph_weight_names`] order ([`crate::weights::expected`]'s,
//!   with `attn_qkv` / `ffn_gate_up` for the parts [`crate::Weights::fuse_projections`] joined).
//!
//! Outputs: `logits` f32 `[B, V]` of the rows `last`, then `k_new`, `v_new` f32
//! `[B, Hk, S, D]` per layer (after RoPE), which the host appends to the cache.
//!
//! Sequences of different lengths share the bucket: RoPE runs on `[B·S, H, D]` (the batch
//! folded into the position dim, so every row gets its own position), and attention sees each
//! sequence's cache columns below its `cache_len` (the padding of a shorter new block sits after
//! its real tokens, so causality hides it from them).
//!
//! Attention is `attention_with_kvcache` (`rlx_ir`; the cache is never copied), whose CPU kernel
//! reads only each sequence's filled cache columns: GEMVs in decode steps, flash tiles over the
//! cache and then the new block in prefill blocks (no `S × (C + S)` scores in memory). The first
//! block of every sequence (`C = 0`, the runner's graph for an empty cache) is causal
//! `scaled_dot_product_attention` over the block, the same flash-tiled kernel with key blocks
//! past the diagonal skipped, in a graph without cache inputs.
//! Alternative considered: one `scaled_dot_product_attention` over `concat(cache, new)`, which
//! copies the whole cache every step and repeats K/V `rep` times for GQA.

use crate::weights::{FUSED, Weight, Weights, expected, graph_weight_names};
use crate::{KvCacheDtype, LlamaConfig, ModelError, Result};
use rlx_gguf::GgmlType;
use rlx_ir::op::{AttentionLayout, MaskKind, RopeLayout};
use rlx_ir::ops::DotGeneral;
use rlx_ir::{Attr, Attrs, DType, Graph, NodeId, Shape};

/// Names of the non-weight inputs, in order.
pub const STEP_INPUTS: [&str; 6] = ["tokens", "rope_cos", "rope_sin", "mask", "last", "cache_len"];

/// Token rows (`B·S`) from which a step runs one product per part of a joined projection (see
/// `step_graph`'s `project`).
const PART_ROWS: usize = 64;

/// Build the step graph for batch `b`, `s` new tokens, cache capacity `c` and cache element
/// type `kv`; `c = 0` builds the graph of a first block over an empty cache (no cache inputs,
/// causal attention over the block; see the module docs).
///
/// Errors: a weight of `cfg` missing from `w`, or a graph-building error (reported by
/// `verify`).
///
/// With `ggml` (fast mode), RMSNorm and SwiGLU are [`crate::ggml_numerics`]'s ops (llama.cpp's
/// f32 arithmetic, to go with the quantized matmuls'), and in one-token steps (`s == 1`, every
/// decode step) RoPE and attention are its one attention op per layer: a single query row is
/// where llama.cpp sums in `ggml_vec_dot_f32`'s order, which that op follows. Steps of several
/// tokens (prefill) keep the native attention: llama.cpp sums a batch in tinyBLAS's order, which
/// is not emulated, and the op's single-threaded quadratic work was a third of a 1008-token
/// prefill at 2 threads. The `rope_cos` / `rope_sin` tables fed in fast mode are
/// [`crate::ggml_numerics::rope_tables_ggml`]'s.
pub fn step_graph(
    cfg: &LlamaConfig,
    w: &Weights,
    (b, s, c, kv): (usize, usize, usize, KvCacheDtype),
    ggml: bool,
) -> Result<Graph> {
    let (e, d, hk) = (cfg.d_model, cfg.head_dim, cfg.n_kv_head);
    // `dequant_matmul` and the packed embedding use the `gguf_dequantize` custom op.
    rlx_gguf::register_ops();
    crate::ggml_numerics::register();
    // `c == 0`: the first block of every sequence, over an empty cache (no cache inputs).
    let fresh = c == 0;
    let ggml_attention = ggml && s == 1 && !fresh;
    let mut g = Graph::new(format!("{}_b{b}_s{s}_c{c}_{kv:?}", cfg.arch));
    let tokens = g.input("tokens", Shape::new(&[b, s], DType::I32));
    let cos = g.input("rope_cos", Shape::new(&[b * s, d], DType::F32));
    let sin = g.input("rope_sin", Shape::new(&[b * s, d], DType::F32));
    let mask = g.input("mask", Shape::new(&[b, s, c + s], DType::F32));
    let last = g.input("last", Shape::new(&[b], DType::I32));
    let cache_len = g.input("cache_len", Shape::new(&[b], DType::I32));
    let mut caches = Vec::with_capacity(cfg.n_layer);
    for l in (0..cfg.n_layer).filter(|_| !fresh) {
        let k = g.input(&format!("cache.{l}.k"), Shape::new(&[b, hk, c, d], kv.dtype()));
        let v = g.input(&format!("cache.{l}.v"), Shape::new(&[b, hk, c, d], kv.dtype()));
        caches.push((k, v));
    }
    let mut ws = std::collections::HashMap::new();
    for name in graph_weight_names(cfg, w) {
        let wt = w.get(&name).ok_or_else(|| ModelError::MissingTensor(name.clone()))?;
        let t = wt.tensor().ok_or_else(|| ModelError::BadTensor {
            name: name.clone(),
            msg: "rows of a pool that is not itself a packed tensor".into(),
        })?;
        let id = g.input(&name, Shape::new(t.shape(), t.dtype()));
        ws.insert(name, (id, wt));
    }
    // A weight and the input that holds it (a pooled weight's pool, `Weights::pool_packed`);
    // every name the builder asks for is one of `expected`'s, or a joined one, checked above.
    let wopt = |n: &str| {
        let wt = w.get(n)?;
        let holder = match wt {
            Weight::PackedRows { pool, .. } => pool.as_str(),
            _ => n,
        };
        Some((ws.get(holder)?.0, wt))
    };
    let wget = |n: &str| wopt(n).expect("a graph weight, checked above");
    let rows: std::collections::HashMap<String, usize> = expected(cfg).into_iter().map(|(n, sh)| (n, sh[0])).collect();
    // `h [B, S, E] @ Wᵀ` for each part of the joined projection `(fused, stems)` of layer `l`
    // (`[B, S, rows]` each, in `stems` order), when the weights were joined
    // (`Weights::fuse_projections`): one product and a slice per part, except in steps of at
    // least `PART_ROWS` token rows (`B·S`) over packed parts of at least `K / 2` weight rows
    // each, which run one product per part on its rows of the joined weight, read in place
    // (`dequant_matmul_rows`). Not joined: one product per part.
    //
    // Why: slicing the columns of a `[B·S, Σ rows]` product is a strided copy of the whole
    // result (Qwen2.5-0.5B's gate / up, 128-token prefill, 1 thread: 2% of the steps), a cost
    // per row of the part; a product per part re-packs (exact) or re-quantizes (fast) the
    // `[B·S, K]` activations, a cost per column of `K` that small parts do not repay: `--fast`,
    // 128 × 896, Q / K / V of 896 / 128 / 128 rows as three products 1.25 ms, joined 1.00;
    // gate / up of 2 × 4864 rows 7.7 vs 8.4. Few token rows keep the joined product: its slices
    // are short, and one product splits across threads better than two (2 threads, Qwen2.5 /
    // SmolLM2 prompts of 6–24 tokens: 1–2% slower as two products; 40 tokens even).
    let project = |g: &mut Graph, h: NodeId, l: usize, (fused, stems): (&str, &[&str])| -> Vec<NodeId> {
        let p = |n: &str| format!("blk.{l}.{n}.weight");
        let Some(wf) = wopt(&p(fused)) else {
            return stems.iter().map(|st| linear(g, h, wget(&p(st)))).collect();
        };
        let packed = match wf.1 {
            Weight::Packed { scheme, k, layout, .. } => Some((scheme, k, layout, 0)),
            Weight::PackedRows { scheme, k, layout, row_start, .. } => Some((scheme, k, layout, *row_start)),
            Weight::Dense(_) => None,
        };
        if let (true, Some((scheme, k, layout, base))) = (b * s >= PART_ROWS, packed)
            && stems.iter().all(|st| 2 * rows[&p(st)] >= *k)
        {
            let mut start = base;
            return stems
                .iter()
                .map(|st| {
                    let n = rows[&p(st)];
                    start += n;
                    g.dequant_matmul_rows(h, wf.0, scheme, layout.name(), start - n, n, *k)
                })
                .collect();
        }
        let y = linear(g, h, wf); // [B, S, Σ rows]
        // Sliced last part first: in a one-token step the first part is a prefix of the product,
        // which the memory plan lets alias it (no copy) when that slice is its last reader.
        let mut end: usize = stems.iter().map(|st| rows[&p(st)]).sum();
        let mut parts: Vec<NodeId> = stems
            .iter()
            .rev()
            .map(|st| {
                end -= rows[&p(st)];
                g.slice(y, &[0, 0, end], &[b, s, end + rows[&p(st)]], &[])
            })
            .collect();
        parts.reverse();
        parts
    };
    // RMSNorm with weight `w`: ggml's arithmetic in fast mode.
    let norm = |g: &mut Graph, x: NodeId, w: NodeId| -> NodeId {
        if ggml {
            let a: Attrs = [("eps".to_string(), Attr::Float(cfg.rms_eps))].into_iter().collect();
            g.custom(crate::ggml_numerics::GGML_RMS_NORM, a, &[x, w])[0]
        } else {
            g.rms_norm(x, Some(w), -1, cfg.rms_eps)
        }
    };
    // The feed-forward half of layer `l` with its residual.
    let ffn = |g: &mut Graph, x: NodeId, l: usize| -> NodeId {
        let p = |n: &str| format!("blk.{l}.{n}");
        let h = norm(g, x, wget(&p("ffn_norm.weight")).0);
        let gu = project(g, h, l, FUSED[1]); // ffn_gate, ffn_up
        let (gate, up) = (gu[0], gu[1]);
        let act = if ggml {
            g.custom(crate::ggml_numerics::GGML_SWIGLU, Attrs::new(), &[gate, up])[0]
        } else {
            let s = g.silu(gate);
            g.mul(s, up)
        };
        let down = linear(g, act, wget(&p("ffn_down.weight")));
        g.add(x, down)
    };

    // Embedding: gather rows (packed rows stay packed), then dequantize just those rows.
    let (emb, emb_w) = wget("token_embd.weight");
    let flat = g.reshape(tokens, vec![b * s]);
    let rows = g.take(emb, flat, 0);
    let x = match emb_w {
        Weight::Dense(_) => rows,
        Weight::PackedRows { .. } => {
            return Err(ModelError::BadTensor {
                name: "token_embd.weight".into(),
                msg: "the embedding's rows are gathered: it cannot be a pool's rows".into(),
            });
        }
        Weight::Packed { scheme, layout, .. } => {
            // Split rows are self-contained too: a gathered row dequantizes in its layout.
            let a: Attrs = [
                (rlx_ir::compose::quant::SCHEME_ATTR.to_string(), Attr::Str(scheme.clone())),
                ("n".to_string(), Attr::Int((b * s) as i64)),
                ("k".to_string(), Attr::Int(e as i64)),
                (rlx_gguf::Layout::ATTR.to_string(), Attr::Str(layout.name().into())),
            ]
            .into_iter()
            .collect();
            g.custom(rlx_ir::compose::quant::GGUF_DEQUANTIZE, a, &[rows])[0]
        }
    };
    let mut x = g.reshape(x, vec![b, s, e]);
    let mut kv_out = Vec::with_capacity(2 * cfg.n_layer);
    let scale = 1.0 / (d as f64).sqrt();
    for l in 0..cfg.n_layer {
        let p = |n: &str| format!("blk.{l}.{n}");
        let h = norm(&mut g, x, wget(&p("attn_norm.weight")).0);
        let qkv = project(&mut g, h, l, FUSED[0]); // attn_q, attn_k, attn_v
        let proj = |g: &mut Graph, n: &str, mut y: NodeId, heads: usize| {
            if cfg.qkv_bias {
                y = g.add(y, wget(&p(&format!("{n}.bias"))).0);
            }
            // [B·S, heads, D]: RoPE sees one position per (sequence, token) row.
            let mut y = g.reshape(y, vec![b * s, heads, d]);
            if cfg.qk_norm && n != "attn_v" {
                y = norm(g, y, wget(&p(&format!("{n}_norm.weight"))).0);
            }
            if n != "attn_v" && !ggml_attention {
                y = g.rope_with_style(y, cos, sin, RopeLayout::Shd, cfg.rope_style);
            }
            g.reshape(y, vec![b, s, heads, d])
        };
        let q = proj(&mut g, "attn_q", qkv[0], cfg.n_head);
        let k = proj(&mut g, "attn_k", qkv[1], hk);
        let v = proj(&mut g, "attn_v", qkv[2], hk);
        if let (true, Some(&(kc, vc))) = (ggml_attention, caches.get(l)) {
            // The cache as it is: an f16 cache takes llama.cpp's default attention (flash
            // attention over f16 K/V), an f32 one its f32 attention.
            // ggml's scale: 1.0f / sqrtf(D), two f32 roundings.
            let a = crate::ggml_numerics::attrs(1.0 / (d as f32).sqrt(), cfg.rope_style);
            let r = g.custom(crate::ggml_numerics::GGML_ATTENTION, a, &[q, k, v, cos, sin, kc, vc, mask]);
            kv_out.extend([r[1], r[2]]);
            let o = linear(&mut g, r[0], wget(&p("attn_output.weight")));
            x = g.add(x, o);
            x = ffn(&mut g, x, l);
            continue;
        }
        let k_new = g.transpose(k, &[0, 2, 1, 3]); // [B, Hk, S, D]
        let v_new = g.transpose(v, &[0, 2, 1, 3]);
        kv_out.extend([k_new, v_new]);
        // One op that reads only each sequence's filled cache columns (flash tiles for a
        // prefill block, GEMVs for a decode step); a first block (empty cache) is causal
        // attention over itself, the flash-tiled `scaled_dot_product_attention`.
        let o = match caches.get(l) {
            None => g.scaled_dot_product_attention_with_layout(
                q,
                k,
                v,
                MaskKind::Causal,
                Some(scale),
                AttentionLayout::Bshd,
            ),
            Some(&(kc, vc)) => g.attention_with_kvcache(q, k, v, kc, vc, cache_len, Some(scale)),
        };
        let o = g.reshape(o, vec![b, s, cfg.n_head * d]);
        let o = linear(&mut g, o, wget(&p("attn_output.weight")));
        x = g.add(x, o);
        x = ffn(&mut g, x, l);
    }
    let xf = g.reshape(x, vec![b * s, e]);
    let xl = g.take(xf, last, 0); // [B, E]
    let xl = norm(&mut g, xl, wget("output_norm.weight").0);
    let head = if cfg.tied_head { wget("token_embd.weight") } else { wget("output.weight") };
    let logits = linear(&mut g, xl, head);
    let mut outs = vec![logits];
    outs.extend(kv_out);
    g.set_outputs(outs);
    g.verify()?;
    Ok(g)
}

/// `x[.., K] @ Wᵀ` for `W [N, K]`, packed (`dequant_matmul`) or dense (`dot_general`).
fn linear(g: &mut Graph, x: NodeId, (w, wt): (NodeId, &Weight)) -> NodeId {
    // A placeholder after an earlier builder error has rank 0; verify reports that error.
    let last = g.shape(x).rank().saturating_sub(1);
    match wt {
        Weight::Dense(_) => g.dot_general(x, w, DotGeneral::contract(&[last], &[1])),
        Weight::Packed { scheme, n, k, layout, .. } => {
            debug_assert!(GgmlType::from_name(scheme).is_some());
            g.dequant_matmul_layout(x, w, scheme, layout.name(), *n, *k)
        }
        // Its rows of the pool `w`, read in place.
        Weight::PackedRows { scheme, row_start, n, k, layout, .. } => {
            g.dequant_matmul_rows(x, w, scheme, layout.name(), *row_start, *n, *k)
        }
    }
}
