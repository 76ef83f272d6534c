//! Attention composites: rotary position embedding (`rope`), `scaled_dot_product_attention`
//! and `attention_with_kvcache` (a decoder step over a KV cache).
//!
//! Semantics:
//! - `rope` is the Llama / Hugging Face "rotate-half" convention (`apply_rotary_pos_emb`):
//!   with `x = [x1, x2]` split in halves along the last (head) dim `D`,
//!   `out = x · cos + rotate_half(x) · sin`, `rotate_half(x) = [-x2, x1]`. `cos`/`sin` are
//!   `[S, D]` (each frequency repeated in both halves, as HF builds them). This is *not* the
//!   interleaved-pairs (GPT-J / original RoFormer) convention; that one is
//!   [`RopeStyle::AdjacentPairs`] of [`Graph::rope_with_style`]: pairs `(x[2i], x[2i+1])`
//!   rotate, `out[2i] = x[2i]·cos − x[2i+1]·sin`, `out[2i+1] = x[2i+1]·cos + x[2i]·sin`, with
//!   `cos`/`sin` `[S, D]` holding each frequency twice in adjacent slots. It is llama.cpp's
//!   `LLAMA_ROPE_TYPE_NORM`, the style GGUF Llama files need (their Q/K rows are stored
//!   permuted for it).
//! - `scaled_dot_product_attention` is PyTorch `F.scaled_dot_product_attention(q, k, v,
//!   attn_mask, is_causal, scale, enable_gqa=True)` on `[B, H, S, D]` tensors:
//!   `softmax(q kᵀ · scale + mask) v` with `scale = 1/√D` by default. Causal is PyTorch's
//!   `is_causal`: top-left aligned (`tril(ones(Sq, Sk))`, query `i` sees keys `j ≤ i`). A
//!   bool bias is PyTorch's boolean `attn_mask` (`true` = attend). Padding (key lengths per
//!   batch, not a PyTorch argument) masks keys `j ≥ len[b]`. Masked scores are `-inf`; a query
//!   that can see no key gets NaN (PyTorch's math backend does the same). When `k`/`v` have
//!   fewer heads than `q`, each is repeated `H / Hk` times along the head dim
//!   (`repeat_interleave`, PyTorch's `enable_gqa`). With [`AttentionLayout::Bshd`] the same
//!   attention reads `q`, `k`, `v` as `[B, S, H, D]` and writes `[B, Sq, H, Dv]`: the
//!   decomposition transposes dims 1 and 2 in and out, a native kernel reads with strides
//!   (ONNX Runtime's `MultiHeadAttention` / flash-attention's BSHD), so the head transposes
//!   around attention in a BERT export disappear.

use super::{attrs, need_float};
use crate::ops::{CompareOp, DotGeneral};
use crate::{Attr, DType, Dim, Graph, NodeId, Shape, Tensor};

/// Where the sequence and head dims sit in a `rope` operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RopeLayout {
    /// `x` is `[.., S, H, D]` (llama.cpp, the flash-attention "BSHD" layout); attr `"shd"`.
    Shd,
    /// `x` is `[.., H, S, D]` (Hugging Face after the head transpose, "BHSD"); attr `"hsd"`.
    Hsd,
}

/// Which elements of the head dim a `rope` rotates together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum RopeStyle {
    /// Hugging Face `rotate_half`: element `j` pairs with `j ± D/2` (GPT-NeoX, llama.cpp
    /// `NEOX`); attr `"rotate_half"`.
    #[default]
    RotateHalf,
    /// GPT-J / RoFormer / llama.cpp `NORM`: element `2i` pairs with `2i + 1`; attr
    /// `"adjacent_pairs"`.
    AdjacentPairs,
}

/// Where the sequence and head dims sit in the operands and result of
/// [`Graph::scaled_dot_product_attention_with_layout`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum AttentionLayout {
    /// `[B, H, S, D]` (PyTorch SDPA), the default: no `layout` attr.
    #[default]
    Bhsd,
    /// `[B, S, H, D]` (flash-attention's BSHD; a BERT export's `[B, S, H·D]` reshaped): attr
    /// `"layout": Str("bshd")`.
    Bshd,
}

impl AttentionLayout {
    /// The layout named by a composite's attrs (`Bhsd` when there is no `layout` attr);
    /// `None` for an unknown value.
    pub fn of_attrs(a: &crate::Attrs) -> Option<AttentionLayout> {
        match a.get("layout") {
            None => Some(AttentionLayout::Bhsd),
            Some(Attr::Str(s)) if s == "bhsd" => Some(AttentionLayout::Bhsd),
            Some(Attr::Str(s)) if s == "bshd" => Some(AttentionLayout::Bshd),
            _ => None,
        }
    }
}

/// The mask of [`Graph::scaled_dot_product_attention`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MaskKind {
    /// No mask.
    None,
    /// PyTorch `is_causal=True`: query `i` attends to keys `j ≤ i` (top-left aligned).
    Causal,
    /// Key lengths, integer `[B]`: batch `b` attends to keys `j < len[b]`.
    Padding(NodeId),
    /// PyTorch `attn_mask`, broadcastable to `[B, H, Sq, Sk]`: float (q's dtype) is added to
    /// the scores; bool masks (`true` = attend).
    Bias(NodeId),
}

impl MaskKind {
    fn name(self) -> &'static str {
        match self {
            MaskKind::None => "none",
            MaskKind::Causal => "causal",
            MaskKind::Padding(_) => "padding",
            MaskKind::Bias(_) => "bias",
        }
    }
}

/// `dot_general` dims contracting `lhs_c` with `rhs_c`, batch dims 0 and 1.
fn batched(lhs_c: usize, rhs_c: usize) -> DotGeneral {
    DotGeneral {
        lhs_contracting: vec![lhs_c],
        rhs_contracting: vec![rhs_c],
        lhs_batch: vec![0, 1],
        rhs_batch: vec![0, 1],
        preferred_element_type: None,
    }
}

impl Graph {
    /// Rotary position embedding, rotate-half convention, `x` laid out `[.., S, H, D]`:
    /// `rope_with_layout(x, cos, sin, RopeLayout::Shd)`.
    pub fn rope(&mut self, x: NodeId, cos: NodeId, sin: NodeId) -> NodeId {
        self.rope_with_layout(x, cos, sin, RopeLayout::Shd)
    }

    /// Rotary position embedding (Llama / HF `rotate_half`, see the module docs): `x` float
    /// `[.., S, H, D]` ([`RopeLayout::Shd`]) or `[.., H, S, D]` ([`RopeLayout::Hsd`]), rank
    /// ≥ 3, `D` static and even; `cos`, `sin` `[S, D]` of `x`'s dtype. Result: shape and dtype
    /// of `x`. Composite `"rope"`, attrs `{"layout": Str("shd" | "hsd")}`, operands
    /// `[x, cos, sin]`. Leading dims may be symbolic.
    /// Errors: rank < 3, odd or symbolic `D`, `cos`/`sin` not `[S, D]`.
    pub fn rope_with_layout(&mut self, x: NodeId, cos: NodeId, sin: NodeId, layout: RopeLayout) -> NodeId {
        self.rope_with_style(x, cos, sin, layout, RopeStyle::RotateHalf)
    }

    /// [`Graph::rope_with_layout`] with an explicit pairing [`RopeStyle`] (see the module
    /// docs); `cos`/`sin` hold each frequency in the slots that style pairs (both halves for
    /// `RotateHalf`, adjacent slots for `AdjacentPairs`). Attrs `{"layout", "style":
    /// Str("rotate_half" | "adjacent_pairs")}`. Errors as `rope_with_layout`.
    pub fn rope_with_style(
        &mut self,
        x: NodeId,
        cos: NodeId,
        sin: NodeId,
        layout: RopeLayout,
        style: RopeStyle,
    ) -> NodeId {
        const NAME: &str = "rope";
        let Some(t) = self.compose_types(NAME, &[x, cos, sin]) else { return self.placeholder() };
        let xs = &t[0];
        if let Err(m) = need_float(NAME, "operand", xs) {
            return self.compose_fail(NAME, m);
        }
        let r = xs.rank();
        if r < 3 {
            return self
                .compose_fail(NAME, format!("x must have rank >= 3 ([.., S, H, D] or [.., H, S, D]), got {xs}"));
        }
        let d = match xs.dims[r - 1] {
            Dim::Static(d) if d % 2 == 0 => d,
            ref other => return self.compose_fail(NAME, format!("head dim {other} of {xs} must be static and even")),
        };
        let s = match layout {
            RopeLayout::Shd => xs.dims[r - 3].clone(),
            RopeLayout::Hsd => xs.dims[r - 2].clone(),
        };
        let want = Shape::from_dims(&[s.clone(), Dim::Static(d)], xs.dtype);
        for (name, c) in ["cos", "sin"].iter().zip(&t[1..]) {
            if *c != want {
                return self.compose_fail(NAME, format!("{name} is {c} but x {xs} needs {want}"));
            }
        }
        let xs_dtype = xs.dtype;
        let tag = match layout {
            RopeLayout::Shd => "shd",
            RopeLayout::Hsd => "hsd",
        };
        let (style_tag, split_as, sign_dims) = match style {
            RopeStyle::RotateHalf => ("rotate_half", [2, d / 2], [2, 1]),
            RopeStyle::AdjacentPairs => ("adjacent_pairs", [d / 2, 2], [1, 2]),
        };
        let a = attrs([("layout", Attr::Str(tag.into())), ("style", Attr::Str(style_tag.into()))]);
        self.composite_with(NAME, a, &[x, cos, sin], |g, a| {
            // The rotation without slicing (so symbolic leading dims work): view the head dim
            // as [2, D/2] (rotate_half) or [D/2, 2] (adjacent pairs), swap the partners with
            // `rev` on the axis of size 2, negate the (new) first partner.
            let dims = g.shape(a[0]).dims.clone();
            let mut split = dims[..r - 1].to_vec();
            split.extend(split_as.map(Dim::Static));
            let halves = g.reshape(a[0], split);
            let pair_axis = if style == RopeStyle::RotateHalf { r - 1 } else { r };
            let swapped = g.rev(halves, &[pair_axis]);
            let sign = Tensor::from_f64s(&sign_dims, xs_dtype, &[-1.0, 1.0]).unwrap_or_else(|_| Tensor::scalar(0f32));
            let sign = g.constant(sign);
            let signed = g.mul(swapped, sign);
            let rot = g.reshape(signed, dims);
            let (c, sn) = match layout {
                // [S, D] -> [S, 1, D] to skip the head dim.
                RopeLayout::Shd => {
                    let dims = vec![s.clone(), Dim::Static(1), Dim::Static(d)];
                    (g.reshape(a[1], dims.clone()), g.reshape(a[2], dims))
                }
                RopeLayout::Hsd => (a[1], a[2]),
            };
            let xc = g.mul(a[0], c);
            let rs = g.mul(rot, sn);
            vec![g.add(xc, rs)]
        })[0]
    }

    /// PyTorch `F.scaled_dot_product_attention` (see the module docs): `q` `[B, H, Sq, D]`,
    /// `k` `[B, Hk, Sk, D]`, `v` `[B, Hk, Sk, Dv]`, one float dtype, `H % Hk == 0`; result
    /// `[B, H, Sq, Dv]`. `scale` defaults to `1/√D`. Composite
    /// `"scaled_dot_product_attention"`, attrs `{"mask": Str("none" | "causal" | "padding" |
    /// "bias"), "scale": Float (the scale used)}`, operands `[q, k, v]` plus the lengths or
    /// the bias for `Padding` / `Bias`.
    /// Errors: ranks other than 4, mismatched B / D / Sk / dtypes, heads that do not divide,
    /// padding lengths not integer `[B]`, a bias neither bool nor `q`'s dtype (or that does
    /// not broadcast to `[B, H, Sq, Sk]`).
    pub fn scaled_dot_product_attention(
        &mut self,
        q: NodeId,
        k: NodeId,
        v: NodeId,
        mask: MaskKind,
        scale: Option<f64>,
    ) -> NodeId {
        self.scaled_dot_product_attention_with_layout(q, k, v, mask, scale, AttentionLayout::Bhsd)
    }

    /// [`Graph::scaled_dot_product_attention`] with the operands and the result in `layout`:
    /// for [`AttentionLayout::Bshd`], `q` `[B, Sq, H, D]`, `k` `[B, Sk, Hk, D]`, `v`
    /// `[B, Sk, Hk, Dv]`, result `[B, Sq, H, Dv]`, attr `"layout": Str("bshd")`; the values
    /// are those of the `[B, H, S, D]` attention on the operands with dims 1 and 2 swapped
    /// (the mask still broadcasts to `[B, H, Sq, Sk]`). Errors as
    /// `scaled_dot_product_attention`, on the swapped shapes.
    pub fn scaled_dot_product_attention_with_layout(
        &mut self,
        q: NodeId,
        k: NodeId,
        v: NodeId,
        mask: MaskKind,
        scale: Option<f64>,
        layout: AttentionLayout,
    ) -> NodeId {
        const NAME: &str = "scaled_dot_product_attention";
        let mut ops = vec![q, k, v];
        if let MaskKind::Padding(m) | MaskKind::Bias(m) = mask {
            ops.push(m);
        }
        let Some(mut t) = self.compose_types(NAME, &ops) else { return self.placeholder() };
        let bad = |g: &mut Graph, m: String| g.compose_fail(NAME, m);
        if t[..3].iter().any(|s| s.rank() != 4) {
            let want = if layout == AttentionLayout::Bshd { "[B, S, H, D]" } else { "[B, H, S, D]" };
            return bad(self, format!("q, k, v must be {want}, got {}, {}, {}", t[0], t[1], t[2]));
        }
        let bshd = layout == AttentionLayout::Bshd;
        if bshd {
            // Check the [B, H, S, D] view.
            for s in &mut t[..3] {
                s.dims.swap(1, 2);
            }
        }
        let (qs, ks, vs) = (&t[0], &t[1], &t[2]);
        if let Err(m) = need_float(NAME, "q", qs) {
            return bad(self, m);
        }
        let same = |a: &Dim, b: &Dim| a == b || a.as_static().is_none() || b.as_static().is_none();
        if qs.dtype != ks.dtype
            || qs.dtype != vs.dtype
            || !same(&qs.dims[0], &ks.dims[0])
            || !same(&ks.dims[0], &vs.dims[0])
            || !same(&qs.dims[3], &ks.dims[3])
            || !same(&ks.dims[1], &vs.dims[1])
            || !same(&ks.dims[2], &vs.dims[2])
        {
            return bad(self, format!("q {qs}, k {ks}, v {vs} do not fit [B,H,Sq,D], [B,Hk,Sk,D], [B,Hk,Sk,Dv]"));
        }
        let rep = match (&qs.dims[1], &ks.dims[1]) {
            (a, b) if a == b => 1,
            (Dim::Static(h), Dim::Static(hk)) if *hk > 0 && h % hk == 0 => h / hk,
            (h, hk) => return bad(self, format!("q has {h} heads, k/v {hk}: q's heads must be a multiple of k's")),
        };
        let scale = match (scale, &qs.dims[3]) {
            (Some(s), _) => s,
            (None, Dim::Static(d)) => 1.0 / (*d as f64).sqrt(),
            (None, d) => return bad(self, format!("the default scale needs a static head dim, got {d}")),
        };
        match (mask, t.get(3)) {
            (MaskKind::Padding(_), Some(ls))
                if ls.rank() != 1 || !ls.dtype.is_int() || !same(&ls.dims[0], &qs.dims[0]) =>
            {
                return bad(self, format!("padding lengths must be integer [B] for q {qs}, got {ls}"));
            }
            (MaskKind::Bias(_), Some(bs)) if bs.dtype != DType::Bool && bs.dtype != qs.dtype => {
                return bad(self, format!("bias must be bool or {} like q, got {bs}", qs.dtype));
            }
            _ => {}
        }
        let (sq, sk) = (qs.dims[2].clone(), ks.dims[2].clone());
        let mut a = attrs([("mask", Attr::Str(mask.name().into())), ("scale", Attr::Float(scale))]);
        if bshd {
            a.insert("layout".into(), Attr::Str("bshd".into()));
        }
        self.composite_with(NAME, a, &ops, |g, a| {
            let swap = |g: &mut Graph, x: NodeId| if bshd { g.transpose(x, &[0, 2, 1, 3]) } else { x };
            let qq = swap(g, a[0]);
            let (mut kk, mut vv) = (swap(g, a[1]), swap(g, a[2]));
            if rep > 1 {
                for x in [&mut kk, &mut vv] {
                    let s = g.shape(*x).dims.clone();
                    let wide = vec![s[0].clone(), s[1].clone(), Dim::Static(rep), s[2].clone(), s[3].clone()];
                    let b = g.broadcast_in_dim(*x, wide, &[0, 1, 3, 4]);
                    let h = Dim::Static(s[1].as_static().unwrap_or(0) * rep);
                    *x = g.reshape(b, vec![s[0].clone(), h, s[2].clone(), s[3].clone()]);
                }
            }
            let sc = g.dot_general(qq, kk, batched(3, 3));
            let c = g.scalar_like(scale, a[0]);
            let mut sc = g.mul(sc, c);
            let ninf = g.scalar_like(f64::NEG_INFINITY, a[0]);
            match mask {
                MaskKind::None => {}
                MaskKind::Causal => {
                    let sh = Shape::from_dims(&[sq.clone(), sk.clone()], DType::I64);
                    let row = g.iota(sh.clone(), 0);
                    let col = g.iota(sh, 1);
                    let ok = g.compare(CompareOp::Le, col, row);
                    sc = g.select(ok, sc, ninf);
                }
                MaskKind::Padding(_) => {
                    let one = Dim::Static(1);
                    let col =
                        g.iota(Shape::from_dims(&[one.clone(), one.clone(), one.clone(), sk.clone()], DType::I64), 3);
                    let lens = g.convert(a[3], DType::I64);
                    let b = g.shape(lens).dims[0].clone();
                    let lens = g.reshape(lens, vec![b, one.clone(), one.clone(), one]);
                    let ok = g.compare(CompareOp::Lt, col, lens);
                    sc = g.select(ok, sc, ninf);
                }
                MaskKind::Bias(_) => {
                    sc = if g.shape(a[3]).dtype == DType::Bool { g.select(a[3], sc, ninf) } else { g.add(sc, a[3]) };
                }
            }
            let p = g.softmax(sc, -1);
            let o = g.dot_general(p, vv, batched(3, 2));
            vec![swap(g, o)]
        })[0]
    }

    /// Attention of a block of new tokens over a KV cache plus themselves, FlashAttention's
    /// `flash_attn_with_kvcache(q, k_cache, v_cache, k, v, cache_seqlens, causal=True)` except
    /// that the cache is only read (the caller appends `k`, `v` to it afterwards):
    /// `q` `[B, S, H, D]`, the new keys / values `k` `[B, S, Hk, D]`, `v` `[B, S, Hk, Dv]`,
    /// `k_cache` `[B, Hk, C, D]`, `v_cache` `[B, Hk, C, Dv]` (q's dtype, or f16 widened to it),
    /// `cache_len` integer `[B]`; result `[B, S, H, Dv]` in q's dtype. Query `i` of sequence
    /// `b` attends the cache columns `j < cache_len[b]` and the new keys `j ≤ i` (causal,
    /// aligned at the end of the cache), query head `h` reading key / value head `h / (H /
    /// Hk)`; scores `q·k · scale` (`scale` defaults to `1/√D`), softmax over the visible keys.
    /// Composite `"attention_with_kvcache"`, attrs `{"scale": Float}`, operands
    /// `[q, k, v, k_cache, v_cache, cache_len]`. The decomposition scores the cache and the new
    /// block separately (the cache is never copied), masks columns past `cache_len[b]`; a
    /// native kernel reads only the visible columns. A `cache_len[b]` above `C` is an error at
    /// run time in native kernels; the decomposition then sees the first `C` columns.
    /// Errors: ranks other than 4, mismatched B / D / Dv / Hk / C, heads that do not divide,
    /// a cache neither q's dtype nor f16, `cache_len` not integer `[B]`.
    #[allow(clippy::too_many_arguments)]
    pub fn attention_with_kvcache(
        &mut self,
        q: NodeId,
        k: NodeId,
        v: NodeId,
        k_cache: NodeId,
        v_cache: NodeId,
        cache_len: NodeId,
        scale: Option<f64>,
    ) -> NodeId {
        let ops = [q, k, v, k_cache, v_cache, cache_len];
        let Some(dims) = self.kvcache_dims(&ops, scale) else { return self.placeholder() };
        let a = attrs([("scale", Attr::Float(dims.scale))]);
        self.composite_with(KVCACHE, a, &ops, |g, a| vec![kvcache_body(g, a, &dims)])[0]
    }

    /// The checked dims of an `attention_with_kvcache` on `ops`, or `None` after recording the
    /// error.
    fn kvcache_dims(&mut self, ops: &[NodeId; 6], scale: Option<f64>) -> Option<KvDims> {
        const NAME: &str = KVCACHE;
        let t = self.compose_types(NAME, ops)?;
        let bad = |g: &mut Graph, m: String| {
            g.compose_error(NAME, m);
            None
        };
        let dims: Option<Vec<Vec<usize>>> = t[..5].iter().map(|s| s.static_dims().filter(|d| d.len() == 4)).collect();
        let Some(dims) = dims else {
            return bad(
                self,
                format!(
                    "q, k, v, k_cache, v_cache must be static rank 4, got {}, {}, {}, {}, {}",
                    t[0], t[1], t[2], t[3], t[4]
                ),
            );
        };
        let (qd, kd, vd, kcd, vcd) = (&dims[0], &dims[1], &dims[2], &dims[3], &dims[4]);
        let (b, s, h, d) = (qd[0], qd[1], qd[2], qd[3]);
        let (hk, dv, c) = (kd[2], vd[3], kcd[2]);
        let fits = kd[..] == [b, s, hk, d]
            && vd[..] == [b, s, hk, dv]
            && kcd[..] == [b, hk, c, d]
            && vcd[..] == [b, hk, c, dv];
        if !fits {
            return bad(
                self,
                format!(
                    "q {}, k {}, v {}, k_cache {}, v_cache {} do not fit [B,S,H,D], [B,S,Hk,D], [B,S,Hk,Dv], [B,Hk,C,D], [B,Hk,C,Dv]",
                    t[0], t[1], t[2], t[3], t[4]
                ),
            );
        }
        if let Err(m) = need_float(NAME, "q", &t[0]) {
            return bad(self, m);
        }
        let dt = t[0].dtype;
        if t[1].dtype != dt || t[2].dtype != dt {
            return bad(self, format!("k {} and v {} must have q's dtype {dt}", t[1], t[2]));
        }
        if t[3].dtype != t[4].dtype || (t[3].dtype != dt && t[3].dtype != DType::F16) {
            return bad(self, format!("k_cache {} and v_cache {} must both be {dt} or both f16", t[3], t[4]));
        }
        if t[5].rank() != 1 || !t[5].dtype.is_int() || t[5].static_dims().is_some_and(|l| l[0] != b) {
            return bad(self, format!("cache_len must be integer [{b}], got {}", t[5]));
        }
        if hk == 0 || h % hk != 0 {
            return bad(self, format!("q has {h} heads, k/v {hk}: q's heads must be a multiple of k's"));
        }
        let rep = h / hk;
        Some(KvDims { b, s, h, hk, c, d, dv, rep, dt, scale: scale.unwrap_or(1.0 / (d as f64).sqrt()) })
    }
}

/// Composite name of [`Graph::attention_with_kvcache`].
const KVCACHE: &str = "attention_with_kvcache";

/// Checked dims of an `attention_with_kvcache`.
struct KvDims {
    b: usize,
    s: usize,
    h: usize,
    hk: usize,
    c: usize,
    d: usize,
    dv: usize,
    rep: usize,
    dt: DType,
    scale: f64,
}

/// The decomposition of `attention_with_kvcache` on `a` (`[q, k, v, k_cache, v_cache,
/// cache_len]` in `g`): the group's query heads scored against the cache and the new block
/// separately (the cache is never copied), masked, one softmax, two products added.
fn kvcache_body(g: &mut Graph, a: &[NodeId], x: &KvDims) -> NodeId {
    let &KvDims { b, s, h, hk, c, d, dv, rep, dt, scale } = x;
    let (kc, vc) = if g.shape(a[3]).dtype == dt { (a[3], a[4]) } else { (g.convert(a[3], dt), g.convert(a[4], dt)) };
    let k_new = g.transpose(a[1], &[0, 2, 1, 3]); // [B, Hk, S, D]
    let v_new = g.transpose(a[2], &[0, 2, 1, 3]);
    // q [B, S, H, D] -> [B, Hk, rep, S, D] -> [B, Hk, rep·S, D]: a group's query heads
    // share its keys.
    let q5 = g.reshape(a[0], vec![b, s, hk, rep, d]);
    let q5 = g.transpose(q5, &[0, 2, 3, 1, 4]);
    let qg = g.reshape(q5, vec![b, hk, rep * s, d]);
    let sc_c = g.dot_general(qg, kc, batched(3, 3)); // [B, Hk, rep·S, C]
    let sc_n = g.dot_general(qg, k_new, batched(3, 3)); // [B, Hk, rep·S, S]
    let sc = g.concatenate(&[sc_c, sc_n], 3);
    let sc = g.reshape(sc, vec![b, hk, rep, s, c + s]);
    let k_scale = g.scalar_like(scale, sc);
    let sc = g.mul(sc, k_scale);
    // Column j is visible to query i of sequence r when j < cache_len[r] (a cache
    // column, j < C) or C ≤ j ≤ C + i (a new key up to the query's own).
    let col = g.iota(Shape::new(&[1, 1, 1, 1, c + s], DType::I64), 4);
    let row = g.iota(Shape::new(&[1, 1, 1, s, 1], DType::I64), 3);
    let lens = g.convert(a[5], DType::I64);
    let lens = g.reshape(lens, vec![b, 1, 1, 1, 1]);
    let cap = g.scalar_like(c as f64, col);
    let in_cache = g.compare(CompareOp::Lt, col, lens);
    let past_cache = g.compare(CompareOp::Ge, col, cap);
    let first = g.binary(crate::ops::BinaryOp::Or, in_cache, past_cache);
    let last = g.add(row, cap);
    let causal = g.compare(CompareOp::Le, col, last);
    let ok = g.binary(crate::ops::BinaryOp::And, first, causal);
    let ninf = g.scalar_like(f64::NEG_INFINITY, sc);
    let sc = g.select(ok, sc, ninf);
    let pr = g.softmax(sc, -1);
    let pr = g.reshape(pr, vec![b, hk, rep * s, c + s]);
    let p_c = g.slice(pr, &[0, 0, 0, 0], &[b, hk, rep * s, c], &[]);
    let p_n = g.slice(pr, &[0, 0, 0, c], &[b, hk, rep * s, c + s], &[]);
    let o_c = g.dot_general(p_c, vc, batched(3, 2)); // [B, Hk, rep·S, Dv]
    let o_n = g.dot_general(p_n, v_new, batched(3, 2));
    let o = g.add(o_c, o_n);
    let o = g.reshape(o, vec![b, hk, rep, s, dv]);
    let o = g.transpose(o, &[0, 3, 1, 2, 4]); // [B, S, Hk, rep, Dv]
    g.reshape(o, vec![b, s, h, dv])
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;

    fn t64(v: &[f64], d: &[usize]) -> Tensor {
        Tensor::from_vec(v.to_vec(), d).unwrap()
    }

    #[test]
    fn rope_rotate_half_both_layouts() {
        // x [S=2, H=2, D=4]; HF: cos/sin [S, D] with the frequency repeated in both halves.
        let (s, h, d) = (2, 2, 4);
        let xv = wavy(s * h * d, 0.9);
        let mut cv = vec![];
        let mut sv = vec![];
        for p in 0..s {
            for j in 0..d {
                let f = (p as f64) / 10000f64.powf((2 * (j % 2)) as f64 / d as f64);
                cv.push(f.cos());
                sv.push(f.sin());
            }
        }
        let mut want = vec![0.0; s * h * d];
        for p in 0..s {
            for hh in 0..h {
                let base = (p * h + hh) * d;
                for j in 0..d {
                    let rot = if j < d / 2 { -xv[base + j + d / 2] } else { xv[base + j - d / 2] };
                    want[base + j] = xv[base + j] * cv[p * d + j] + rot * sv[p * d + j];
                }
            }
        }
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[s, h, d], DType::F64));
        let c = g.input("c", Shape::new(&[s, d], DType::F64));
        let sn = g.input("s", Shape::new(&[s, d], DType::F64));
        let y = g.rope(x, c, sn);
        // The same values in [H, S, D] layout: transpose in and out.
        let xt = g.transpose(x, &[1, 0, 2]);
        let yt = g.rope_with_layout(xt, c, sn, RopeLayout::Hsd);
        let yb = g.transpose(yt, &[1, 0, 2]);
        g.set_outputs(vec![y, yb]);
        let out =
            run_both(&g, &feeds(&[("x", t64(&xv, &[s, h, d])), ("c", t64(&cv, &[s, d])), ("s", t64(&sv, &[s, d]))]));
        close(&out[0], &want, 1e-14);
        close(&out[1], &want, 1e-14);
        // Position 0 leaves x unchanged.
        close(&Tensor::from_vec(out[0].to_f64_vec()[..h * d].to_vec(), &[h * d]).unwrap(), &xv[..h * d], 1e-15);
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[2, 2, 3], DType::F64));
        g.rope(x, x, x);
        assert!(g.error().unwrap().to_string().contains("must be static and even"));
    }

    #[test]
    fn rope_adjacent_pairs_both_layouts() {
        // GPT-J / llama.cpp NORM: pairs (2i, 2i+1), cos/sin hold each frequency twice, adjacent.
        let (s, h, d) = (3, 2, 6);
        let xv = wavy(s * h * d, 0.4);
        let (mut cv, mut sv) = (vec![], vec![]);
        for p in 0..s {
            for j in 0..d {
                let f = (p as f64) * 10000f64.powf(-((2 * (j / 2)) as f64) / d as f64);
                cv.push(f.cos());
                sv.push(f.sin());
            }
        }
        let mut want = vec![0.0; s * h * d];
        for p in 0..s {
            for hh in 0..h {
                let b = (p * h + hh) * d;
                for i in 0..d / 2 {
                    let (x0, x1) = (xv[b + 2 * i], xv[b + 2 * i + 1]);
                    let (c, sn) = (cv[p * d + 2 * i], sv[p * d + 2 * i]);
                    want[b + 2 * i] = x0 * c - x1 * sn;
                    want[b + 2 * i + 1] = x1 * c + x0 * sn;
                }
            }
        }
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[s, h, d], DType::F64));
        let c = g.input("c", Shape::new(&[s, d], DType::F64));
        let sn = g.input("s", Shape::new(&[s, d], DType::F64));
        let y = g.rope_with_style(x, c, sn, RopeLayout::Shd, RopeStyle::AdjacentPairs);
        let xt = g.transpose(x, &[1, 0, 2]);
        let yt = g.rope_with_style(xt, c, sn, RopeLayout::Hsd, RopeStyle::AdjacentPairs);
        let yb = g.transpose(yt, &[1, 0, 2]);
        g.set_outputs(vec![y, yb]);
        let out =
            run_both(&g, &feeds(&[("x", t64(&xv, &[s, h, d])), ("c", t64(&cv, &[s, d])), ("s", t64(&sv, &[s, d]))]));
        close(&out[0], &want, 1e-14);
        close(&out[1], &want, 1e-14);
    }

    #[test]
    fn rope_and_sdpa_with_symbolic_batch() {
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::from_dims(&[Dim::dynamic(), 2.into(), 1.into(), 4.into()], DType::F32));
        let c = g.input("c", Shape::new(&[2, 4], DType::F32));
        let y = g.rope(x, c, c);
        assert_eq!(g.shape(y), g.shape(x));
        let q = g.input("q", Shape::from_dims(&[Dim::dynamic(), 2.into(), 3.into(), 4.into()], DType::F32));
        let l = g.input("l", Shape::from_dims(&[Dim::dynamic()], DType::I64));
        let a = g.scaled_dot_product_attention(q, q, q, MaskKind::Padding(l), None);
        assert_eq!(g.shape(a), g.shape(q));
        g.set_outputs(vec![y, a]);
        let xv: Vec<f32> = wavy(16, 0.0).iter().map(|&v| v as f32).collect();
        let qv: Vec<f32> = wavy(48, 0.5).iter().map(|&v| v as f32).collect();
        let f = feeds(&[
            ("x", f32t(&xv, &[2, 2, 1, 4])),
            ("c", f32t(&[1.0; 8], &[2, 4])),
            ("q", f32t(&qv, &[2, 2, 3, 4])),
            ("l", Tensor::from_vec(vec![3i64, 1], &[2]).unwrap()),
        ]);
        let out = run_both(&g, &f);
        // cos = sin = 1: out = x + rotate_half(x).
        let want: Vec<f64> = (0..16)
            .map(|i| {
                let (base, j) = (i / 4 * 4, i % 4);
                let rot = if j < 2 { -xv[base + j + 2] } else { xv[base + j - 2] };
                (xv[i] + rot) as f64
            })
            .collect();
        close(&out[0], &want, 1e-6);
        // Batch 1 sees only key 0: every query returns v[.., 0, :].
        let o = out[1].to_f64_vec();
        for hh in 0..2 {
            for i in 0..3 {
                for e in 0..4 {
                    let v0 = qv[((2 + hh) * 3) * 4 + e] as f64;
                    assert!((o[((2 + hh) * 3 + i) * 4 + e] - v0).abs() < 1e-6);
                }
            }
        }
    }

    /// Reference attention on [B, H, Sq, D] with an explicit additive mask [B, Sq, Sk].
    #[allow(clippy::too_many_arguments)]
    fn attn_ref(
        q: &[f64],
        k: &[f64],
        v: &[f64],
        [b, h, sq, d]: [usize; 4],
        hk: usize,
        sk: usize,
        scale: f64,
        mask: impl Fn(usize, usize, usize) -> f64,
    ) -> Vec<f64> {
        let mut out = vec![0.0; b * h * sq * d];
        for bi in 0..b {
            for hi in 0..h {
                let kh = hi / (h / hk);
                for i in 0..sq {
                    let sc: Vec<f64> = (0..sk)
                        .map(|j| {
                            let dot: f64 = (0..d)
                                .map(|e| q[((bi * h + hi) * sq + i) * d + e] * k[((bi * hk + kh) * sk + j) * d + e])
                                .sum();
                            dot * scale + mask(bi, i, j)
                        })
                        .collect();
                    let m = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let e: Vec<f64> = sc.iter().map(|s| (s - m).exp()).collect();
                    let z: f64 = e.iter().sum();
                    for dd in 0..d {
                        out[((bi * h + hi) * sq + i) * d + dd] =
                            (0..sk).map(|j| e[j] / z * v[((bi * hk + kh) * sk + j) * d + dd]).sum();
                    }
                }
            }
        }
        out
    }

    #[test]
    fn sdpa_masks_and_gqa() {
        let (b, h, hk, sq, sk, d) = (2, 4, 2, 3, 4, 2);
        let qv = wavy(b * h * sq * d, 0.1);
        let kv = wavy(b * hk * sk * d, 1.1);
        let vv = wavy(b * hk * sk * d, 2.1);
        let bias = wavy(sq * sk, 3.1);
        let mut g = Graph::new("t");
        let q = g.input("q", Shape::new(&[b, h, sq, d], DType::F64));
        let k = g.input("k", Shape::new(&[b, hk, sk, d], DType::F64));
        let v = g.input("v", Shape::new(&[b, hk, sk, d], DType::F64));
        let lens = g.input("lens", Shape::new(&[b], DType::I32));
        let bi = g.input("bias", Shape::new(&[sq, sk], DType::F64));
        let outs = vec![
            g.scaled_dot_product_attention(q, k, v, MaskKind::None, None),
            g.scaled_dot_product_attention(q, k, v, MaskKind::Causal, Some(0.5)),
            g.scaled_dot_product_attention(q, k, v, MaskKind::Padding(lens), None),
            g.scaled_dot_product_attention(q, k, v, MaskKind::Bias(bi), None),
        ];
        assert_eq!(g.shape(outs[0]), &Shape::new(&[b, h, sq, d], DType::F64));
        g.set_outputs(outs);
        let f = feeds(&[
            ("q", t64(&qv, &[b, h, sq, d])),
            ("k", t64(&kv, &[b, hk, sk, d])),
            ("v", t64(&vv, &[b, hk, sk, d])),
            ("lens", Tensor::from_vec(vec![4i32, 2], &[b]).unwrap()),
            ("bias", t64(&bias, &[sq, sk])),
        ]);
        let out = run_both(&g, &f);
        let dims = [b, h, sq, d];
        let s = 1.0 / (d as f64).sqrt();
        let ninf = f64::NEG_INFINITY;
        close(&out[0], &attn_ref(&qv, &kv, &vv, dims, hk, sk, s, |_, _, _| 0.0), 1e-12);
        close(&out[1], &attn_ref(&qv, &kv, &vv, dims, hk, sk, 0.5, |_, i, j| if j <= i { 0.0 } else { ninf }), 1e-12);
        let lens = [4, 2];
        close(
            &out[2],
            &attn_ref(&qv, &kv, &vv, dims, hk, sk, s, |bb, _, j| if j < lens[bb] { 0.0 } else { ninf }),
            1e-12,
        );
        close(&out[3], &attn_ref(&qv, &kv, &vv, dims, hk, sk, s, |_, i, j| bias[i * sk + j]), 1e-12);
    }

    #[test]
    fn sdpa_bshd_layout_is_the_transposed_bhsd() {
        // [B, S, H, D] operands; every mask kind, grouped heads (H = 4, Hk = 2), Sq ≠ Sk.
        let (b, h, hk, sq, sk, d) = (2, 4, 2, 3, 5, 2);
        let mut g = Graph::new("t");
        let q = g.input("q", Shape::new(&[b, sq, h, d], DType::F64));
        let k = g.input("k", Shape::new(&[b, sk, hk, d], DType::F64));
        let v = g.input("v", Shape::new(&[b, sk, hk, d], DType::F64));
        let lens = g.input("lens", Shape::new(&[b], DType::I32));
        let bias = g.input("bias", Shape::new(&[b, 1, sq, sk], DType::F64));
        let masks = [MaskKind::None, MaskKind::Causal, MaskKind::Padding(lens), MaskKind::Bias(bias)];
        let mut outs = vec![];
        for mask in masks {
            let y = g.scaled_dot_product_attention_with_layout(q, k, v, mask, None, AttentionLayout::Bshd);
            assert_eq!(g.shape(y), &Shape::new(&[b, sq, h, d], DType::F64));
            let (qt, kt, vt) =
                (g.transpose(q, &[0, 2, 1, 3]), g.transpose(k, &[0, 2, 1, 3]), g.transpose(v, &[0, 2, 1, 3]));
            let r = g.scaled_dot_product_attention(qt, kt, vt, mask, None);
            outs.extend([y, g.transpose(r, &[0, 2, 1, 3])]);
        }
        g.set_outputs(outs);
        let f = feeds(&[
            ("q", t64(&wavy(b * h * sq * d, 0.1), &[b, sq, h, d])),
            ("k", t64(&wavy(b * hk * sk * d, 1.1), &[b, sk, hk, d])),
            ("v", t64(&wavy(b * hk * sk * d, 2.1), &[b, sk, hk, d])),
            ("lens", Tensor::from_vec(vec![5i32, 2], &[b]).unwrap()),
            ("bias", t64(&wavy(b * sq * sk, 3.1), &[b, 1, sq, sk])),
        ]);
        let out = run_both(&g, &f);
        for pair in out.chunks(2) {
            close(&pair[0], &pair[1].to_f64_vec(), 0.0);
        }
        let mut g = Graph::new("t");
        let q = g.input("q", Shape::new(&[1, 2, 3, 2], DType::F32));
        let k = g.input("k", Shape::new(&[1, 2, 2, 2], DType::F32));
        g.scaled_dot_product_attention_with_layout(q, k, k, MaskKind::None, None, AttentionLayout::Bshd);
        assert!(g.error().unwrap().to_string().contains("q has 3 heads, k/v 2"), "{:?}", g.error());
    }

    #[test]
    fn sdpa_bool_bias_and_errors() {
        let mut g = Graph::new("t");
        let q = g.input("q", Shape::new(&[1, 1, 2, 2], DType::F32));
        let m = g.input("m", Shape::new(&[2, 2], DType::Bool));
        let y = g.scaled_dot_product_attention(q, q, q, MaskKind::Bias(m), None);
        g.set_outputs(vec![y]);
        let f = feeds(&[
            ("q", f32t(&[1.0, 0.0, 0.0, 1.0], &[1, 1, 2, 2])),
            ("m", Tensor::from_vec(vec![true, false, false, false], &[2, 2]).unwrap()),
        ]);
        let out = run_both(&g, &f);
        let n = f64::NAN;
        close(&out[0], &[1.0, 0.0, n, n], 0.0);
        let mut g = Graph::new("t");
        let q = g.input("q", Shape::new(&[1, 3, 2, 2], DType::F32));
        let k = g.input("k", Shape::new(&[1, 2, 2, 2], DType::F32));
        g.scaled_dot_product_attention(q, k, k, MaskKind::Causal, None);
        assert!(g.error().unwrap().to_string().contains("q has 3 heads, k/v 2"));
    }

    /// `attention_with_kvcache` against attention written out in f64 loops over the visible
    /// keys (cache columns below each sequence's length, then the new keys up to the query's
    /// own), with GQA, sequences of different cache lengths (0, partial, full) and an f16
    /// cache; bad operands are named.
    #[test]
    fn attention_with_kvcache_matches_loops() {
        let (b, s, h, hk, c, d, dv) = (3, 2, 4, 2, 5, 3, 2);
        let rep = h / hk;
        let lens = [0usize, 3, 5];
        let qv = wavy(b * s * h * d, 0.1);
        let kv = wavy(b * s * hk * d, 0.7);
        let vv = wavy(b * s * hk * dv, 1.3);
        let kcv = wavy(b * hk * c * d, 2.1);
        let vcv = wavy(b * hk * c * dv, 2.9);
        let scale = 0.8;
        let reference = |kcv: &[f64], vcv: &[f64]| {
            let mut want = vec![0.0; b * s * h * dv];
            for r in 0..b {
                for i in 0..s {
                    for hh in 0..h {
                        let g = hh / rep;
                        let qr = &qv[((r * s + i) * h + hh) * d..][..d];
                        // (key, value) rows visible to this query.
                        let mut keys: Vec<(&[f64], &[f64])> = (0..lens[r])
                            .map(|j| {
                                (&kcv[((r * hk + g) * c + j) * d..][..d], &vcv[((r * hk + g) * c + j) * dv..][..dv])
                            })
                            .collect();
                        keys.extend((0..=i).map(|j| {
                            (&kv[((r * s + j) * hk + g) * d..][..d], &vv[((r * s + j) * hk + g) * dv..][..dv])
                        }));
                        let sc: Vec<f64> = keys
                            .iter()
                            .map(|(kr, _)| kr.iter().zip(qr).map(|(a, b)| a * b).sum::<f64>() * scale)
                            .collect();
                        let m = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                        let e: Vec<f64> = sc.iter().map(|x| (x - m).exp()).collect();
                        let z: f64 = e.iter().sum();
                        for dd in 0..dv {
                            want[((r * s + i) * h + hh) * dv + dd] =
                                keys.iter().zip(&e).map(|((_, vr), p)| vr[dd] * p / z).sum();
                        }
                    }
                }
            }
            want
        };
        for cache in [DType::F64, DType::F16] {
            let mut g = Graph::new("t");
            let q = g.input("q", Shape::new(&[b, s, h, d], DType::F64));
            let k = g.input("k", Shape::new(&[b, s, hk, d], DType::F64));
            let v = g.input("v", Shape::new(&[b, s, hk, dv], DType::F64));
            let kc = g.input("kc", Shape::new(&[b, hk, c, d], cache));
            let vc = g.input("vc", Shape::new(&[b, hk, c, dv], cache));
            let l = g.input("l", Shape::new(&[b], DType::I32));
            let o = g.attention_with_kvcache(q, k, v, kc, vc, l, Some(scale));
            assert_eq!(g.shape(o), &Shape::new(&[b, s, h, dv], DType::F64));
            g.set_outputs(vec![o]);
            // An f16 cache holds the values rounded to f16; the reference reads the same.
            let round = |x: &[f64]| -> Vec<f64> {
                if cache == DType::F16 {
                    x.iter().map(|&v| crate::half::f16::from_f64(v).to_f64()).collect()
                } else {
                    x.to_vec()
                }
            };
            let (kcr, vcr) = (round(&kcv), round(&vcv));
            let cached = |x: &[f64], dims: &[usize]| {
                if cache == DType::F16 {
                    Tensor::from_vec(x.iter().map(|&v| crate::half::f16::from_f64(v)).collect::<Vec<_>>(), dims)
                        .unwrap()
                } else {
                    t64(x, dims)
                }
            };
            let (kc16, vc16) = (cached(&kcv, &[b, hk, c, d]), cached(&vcv, &[b, hk, c, dv]));
            let f = feeds(&[
                ("q", t64(&qv, &[b, s, h, d])),
                ("k", t64(&kv, &[b, s, hk, d])),
                ("v", t64(&vv, &[b, s, hk, dv])),
                ("kc", kc16),
                ("vc", vc16),
                ("l", Tensor::from_vec(lens.iter().map(|&x| x as i32).collect::<Vec<_>>(), &[b]).unwrap()),
            ]);
            let out = run_both(&g, &f);
            close(&out[0], &reference(&kcr, &vcr), 1e-13);
        }
        // Bad operands: (query heads, length dtype, cache head dim).
        for (h, lt, dc, want) in [
            (3, DType::I32, 4, "multiple of k's"),
            (2, DType::F32, 4, "cache_len must be integer"),
            (2, DType::I32, 5, "do not fit"),
        ] {
            let mut g = Graph::new("t");
            let q = g.input("q", Shape::new(&[1, 1, h, 4], DType::F32));
            let k = g.input("k", Shape::new(&[1, 1, 2, 4], DType::F32));
            let kc = g.input("kc", Shape::new(&[1, 2, 8, dc], DType::F32));
            let l = g.input("l", Shape::new(&[1], lt));
            g.attention_with_kvcache(q, k, k, kc, kc, l, None);
            assert!(g.error().unwrap().to_string().contains(want), "{:?}", g.error());
        }
    }
}
