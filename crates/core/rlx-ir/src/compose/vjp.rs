//! Built-in custom VJPs of composites: the memory-efficient backward passes reverse mode uses
//! instead of transposing the decomposition's linearization (forward mode still
//! differentiates the decomposition).
//!
//! - `cross_entropy`: `∂/∂logits = ct · (softmax(logits) − onehot(targets)) · valid / count`;
//!   one softmax is recomputed from the logits instead of keeping the log-softmax chain.
//! - `scaled_dot_product_attention` with mask `none` or `causal` (any head grouping): the
//!   FlashAttention backward. The probabilities `P` are recomputed from `q`, `k`; with
//!   `dO` the cotangent and `O` the result: `dV = Pᵀ dO`, `dS = P ∘ (dO Vᵀ − rowsum(dO ∘ O))`,
//!   `dQ = s · dS K`, `dK = s · dSᵀ Q`, key/value gradients summed over the query heads that
//!   share a key head. Nothing of size `Sq × Sk` is kept from the forward pass. Padding and
//!   bias masks and the `[B, S, H, D]` layout use the decomposition.

use crate::ops::ad::{AdError, Cx, Tan, VjpRule};
use crate::ops::{CompareOp, DotGeneral};
use crate::{Attr, Attrs, DType, Dim, Graph, NodeId, Shape};
use std::sync::Arc;

/// The built-in custom VJP of composites named `name`, if any.
pub fn builtin(name: &str) -> Option<Arc<dyn VjpRule>> {
    match name {
        "cross_entropy" => Some(Arc::new(CrossEntropy)),
        "scaled_dot_product_attention" => Some(Arc::new(Attention)),
        _ => None,
    }
}

struct CrossEntropy;

impl VjpRule for CrossEntropy {
    fn vjp(&self, _: &Attrs, cx: &mut Cx, x: &[NodeId], _y: &[NodeId], ct: &[Tan]) -> Result<Vec<Tan>, AdError> {
        let Some(c) = ct[0] else { return Ok(vec![None, None]) };
        let g = &mut *cx.g;
        let (logits, targets) = (x[0], x[1]);
        let ls = g.shape(logits).clone();
        let ts = g.shape(targets).clone();
        let sm = g.softmax(logits, 1);
        let cls = g.iota(Shape::from_dims(&ls.dims, DType::I64), 1);
        let tc = g.convert(targets, DType::I64);
        let tcol = g.expand_dims(tc, 1);
        let hit = g.compare(CompareOp::Eq, cls, tcol);
        let onehot = g.convert(hit, ls.dtype);
        let (weight, count) = if ts.dtype.is_signed_int() {
            let ign = g.scalar(-100.0, DType::I64);
            let valid = g.compare(CompareOp::Ne, tc, ign);
            let vf = g.convert(valid, ls.dtype);
            let n = g.sum(vf, &[0], false);
            (Some(vf), n)
        } else {
            let one = g.scalar(1.0, ls.dtype);
            let ones = g.broadcast_to(one, vec![ls.dims[0].clone()]);
            (None, g.sum(ones, &[0], false))
        };
        let scale = g.div(c, count);
        let d = g.sub(sm, onehot);
        let d = match weight {
            Some(w) => {
                let wc = g.expand_dims(w, 1);
                g.mul(d, wc)
            }
            None => d,
        };
        Ok(vec![Some(g.mul(d, scale)), None])
    }
}

struct Attention;

fn attr_str<'a>(a: &'a Attrs, k: &str) -> Option<&'a str> {
    match a.get(k) {
        Some(Attr::Str(s)) => Some(s),
        _ => None,
    }
}

/// Contract `lhs` dim `lc` with `rhs` dim `rc`, batched over dims 0 and 1.
fn bdot(g: &mut Graph, a: NodeId, b: NodeId, lc: usize, rc: usize) -> NodeId {
    let d = DotGeneral {
        lhs_contracting: vec![lc],
        rhs_contracting: vec![rc],
        lhs_batch: vec![0, 1],
        rhs_batch: vec![0, 1],
        preferred_element_type: None,
    };
    g.dot_general(a, b, d)
}

/// `[B, Hk, S, D]` repeated to `[B, Hk·rep, S, D]` (head `h` reads key head `h / rep`).
fn repeat_heads(g: &mut Graph, x: NodeId, rep: usize) -> NodeId {
    if rep == 1 {
        return x;
    }
    let s = g.shape(x).dims.clone();
    let wide = vec![s[0].clone(), s[1].clone(), Dim::Static(rep), s[2].clone(), s[3].clone()];
    let b = g.broadcast_in_dim(x, wide, &[0, 1, 3, 4]);
    let h = Dim::Static(s[1].as_static().unwrap_or(0) * rep);
    g.reshape(b, vec![s[0].clone(), h, s[2].clone(), s[3].clone()])
}

/// The transpose of [`repeat_heads`]: sum each group of `rep` heads.
fn sum_heads(g: &mut Graph, x: NodeId, rep: usize) -> NodeId {
    if rep == 1 {
        return x;
    }
    let s = g.shape(x).dims.clone();
    let hk = Dim::Static(s[1].as_static().unwrap_or(0) / rep);
    let r = g.reshape(x, vec![s[0].clone(), hk, Dim::Static(rep), s[2].clone(), s[3].clone()]);
    g.sum(r, &[2], false)
}

impl VjpRule for Attention {
    fn applies(&self, attrs: &Attrs) -> bool {
        // The `[B, S, H, D]` layout (a compiler rewrite for inference) uses the decomposition.
        matches!(attr_str(attrs, "mask"), Some("none" | "causal"))
            && crate::compose::AttentionLayout::of_attrs(attrs) == Some(crate::compose::AttentionLayout::Bhsd)
    }

    fn vjp(&self, attrs: &Attrs, cx: &mut Cx, x: &[NodeId], y: &[NodeId], ct: &[Tan]) -> Result<Vec<Tan>, AdError> {
        let Some(d_o) = ct[0] else { return Ok(vec![None; x.len()]) };
        let scale = match attrs.get("scale") {
            Some(Attr::Float(s)) => *s,
            _ => return Err(AdError::Argument("scaled_dot_product_attention without a scale attribute".into())),
        };
        let causal = attr_str(attrs, "mask") == Some("causal");
        let g = &mut *cx.g;
        let (q, k, v, o) = (x[0], x[1], x[2], y[0]);
        let (qs, ks) = (g.shape(q).clone(), g.shape(k).clone());
        let rep = match (qs.dims[1].as_static(), ks.dims[1].as_static()) {
            (Some(h), Some(hk)) if hk > 0 => h / hk,
            _ => 1,
        };
        let (kk, vv) = (repeat_heads(g, k, rep), repeat_heads(g, v, rep));
        let sc = bdot(g, q, kk, 3, 3);
        let c = g.scalar_like(scale, q);
        let mut s = g.mul(sc, c);
        if causal {
            let sh = Shape::from_dims(&[qs.dims[2].clone(), ks.dims[2].clone()], DType::I64);
            let row = g.iota(sh.clone(), 0);
            let col = g.iota(sh, 1);
            let ok = g.compare(CompareOp::Le, col, row);
            let ninf = g.scalar_like(f64::NEG_INFINITY, q);
            s = g.select(ok, s, ninf);
        }
        let p = g.softmax(s, -1);
        let dv = bdot(g, p, d_o, 2, 2);
        let dp = bdot(g, d_o, vv, 3, 3);
        let od = g.mul(d_o, o);
        let rows = g.sum(od, &[3], true);
        let centered = g.sub(dp, rows);
        let ds = g.mul(p, centered);
        let ds = g.mul(ds, c);
        let dq = bdot(g, ds, kk, 3, 2);
        let dk = bdot(g, ds, q, 2, 2);
        let (dk, dv) = (sum_heads(g, dk, rep), sum_heads(g, dv, rep));
        Ok(vec![Some(dq), Some(dk), Some(dv)])
    }
}
