//! `ai.onnx.preview::FlexAttention`: scaled dot-product attention whose scores and
//! probabilities pass through user sub-graphs (`score_mod`, `prob_mod`), inlined here on the
//! `[B, Hq, L, S]` tensors.

use super::{Ctx, Val};
use crate::error::Result;
use rlx_ir::{DType, NodeId};

/// Inline the one-input, one-output graph attribute `attr` on `x`, converting its result to
/// `dt`.
fn apply_mod(c: &mut Ctx, attr: &str, x: NodeId, dt: DType) -> Result<NodeId> {
    let Some(g) = c.graph_attr(attr) else { return Ok(x) };
    if g.input.len() != 1 || g.output.len() != 1 {
        return Err(c.err(format!("{attr} must map one tensor to one tensor")));
    }
    let bind = vec![(g.input[0].name().to_string(), Val::of(c.g, x))];
    let out = c.inline(attr, g, bind)?;
    Ok(c.g.convert(out[0].id, dt))
}

/// `Q [B, Hq, L, E]`, `K [B, Hkv, S, E]`, `V [B, Hkv, S, Ev]` (`Hq` a multiple of `Hkv`; KV
/// head `h` serves query heads `h·r … h·r + r − 1`). As the ONNX reference: `scores = (Q·√s)
/// (K·√s)ᵀ` in the input dtype (`s = scale`, default `1/√E`), then in the softmax dtype
/// (`softmax_precision`, else f32 for 16-bit inputs): `score_mod`, softmax over S,
/// `prob_mod`, `· V`; the result `[B, Hq, L, Ev]` in V's dtype.
pub(super) fn flex_attention(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (q, mut k, mut v) = (c.x(0)?, c.x(1)?, c.x(2)?);
    let (qd, kd, vd) = (c.dims(q)?, c.dims(k)?, c.dims(v)?);
    if qd.len() != 4 || kd.len() != 4 || vd.len() != 4 || kd[3] != qd[3] || vd[1] != kd[1] || vd[2] != kd[2] {
        return Err(
            c.err(format!("Q {qd:?}, K {kd:?}, V {vd:?} must be [B, Hq, L, E], [B, Hkv, S, E], [B, Hkv, S, Ev]"))
        );
    }
    let (b, hq, hk, s) = (qd[0], qd[1], kd[1], kd[2]);
    if hk == 0 || hq % hk != 0 {
        return Err(c.err(format!("{hq} query heads are not a multiple of {hk} key/value heads")));
    }
    if hq != hk {
        let rep = hq / hk;
        let kb = c.g.broadcast_in_dim(k, [b, hk, rep, s, kd[3]], &[0, 1, 3, 4]);
        k = c.g.reshape(kb, [b, hq, s, kd[3]]);
        let vb = c.g.broadcast_in_dim(v, [b, hk, rep, s, vd[3]], &[0, 1, 3, 4]);
        v = c.g.reshape(vb, [b, hq, s, vd[3]]);
    }
    let dt = c.dtype(q);
    let scale = if c.has("scale") { c.af("scale", 1.0) } else { 1.0 / (qd[3] as f32).sqrt() };
    let cd = match c.has("softmax_precision") {
        true => c.adtype("softmax_precision", DType::F32)?,
        false if matches!(dt, DType::F16 | DType::BF16) => DType::F32,
        false => dt,
    };
    let sq = c.scalar(scale.sqrt() as f64, dt);
    let (qs, ks) = (c.g.mul(q, sq), c.g.mul(k, sq));
    let kt = c.g.transpose(ks, &[0, 1, 3, 2]);
    let scores = c.g.mm(qs, kt);
    let scores = c.g.convert(scores, cd);
    let scores = apply_mod(c, "score_mod", scores, cd)?;
    let m = c.g.reduce_max(scores, &[3], true);
    let d = c.g.sub(scores, m);
    let e = c.g.exp(d);
    let z = c.g.sum(e, &[3], true);
    let p = c.g.div(e, z);
    let p = apply_mod(c, "prob_mod", p, cd)?;
    let vf = c.g.convert(v, cd);
    let y = c.g.mm(p, vf);
    Ok(vec![c.g.convert(y, c.dtype(v))])
}
