//! `Attention` (opset 23): 3-D `[B, S, H·D]` or 4-D `[B, H, S, D]` Q/K/V, grouped K/V heads,
//! past key/value concatenation, boolean or additive masks, `nonpad_kv_seqlen` (opset 24),
//! `is_causal`, `scale`, `softcap` and the optional `qk_matmul_output` (modes 0–3), following
//! the ONNX reference.

use super::Ctx;
use crate::error::Result;
use rlx_ir::ops::CompareOp as C;
use rlx_ir::{DType, NodeId, Shape};

/// `[B, S, H·D]` → `[B, H, S, D]`.
pub(super) fn heads(c: &mut Ctx, x: NodeId, h: usize) -> Result<NodeId> {
    let d = c.dims(x)?;
    if d.len() == 4 {
        return Ok(x);
    }
    if d.len() != 3 || h == 0 || d[2] % h != 0 {
        return Err(c.err(format!("3-D input {d:?} needs a num_heads attribute dividing its last dim")));
    }
    let r = c.g.reshape(x, [d[0], d[1], h, d[2] / h]);
    Ok(c.g.transpose(r, &[0, 2, 1, 3]))
}

pub(super) fn attention(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (q0, k0, v0) = (c.x(0)?, c.x(1)?, c.x(2)?);
    let three_d = c.rank(q0) == 3;
    let q = heads(c, q0, c.ai("q_num_heads", 0) as usize)?;
    let mut k = heads(c, k0, c.ai("kv_num_heads", 0) as usize)?;
    let mut v = heads(c, v0, c.ai("kv_num_heads", 0) as usize)?;
    if let Some(pk) = c.opt(4) {
        k = c.g.concatenate(&[pk, k], 2);
    }
    if let Some(pv) = c.opt(5) {
        v = c.g.concatenate(&[pv, v], 2);
    }
    let (present_k, present_v) = (k, v);
    let (qd, kd, vd) = (c.dims(q)?, c.dims(k)?, c.dims(v)?);
    let (b, hq, s, dh) = (qd[0], qd[1], qd[2], qd[3]);
    let (hk, l) = (kd[1], kd[2]);
    if hk == 0 || hq % hk != 0 {
        return Err(c.err(format!("{hq} query heads are not a multiple of {hk} key/value heads")));
    }
    if hq != hk {
        let rep = hq / hk;
        let kb = c.g.broadcast_in_dim(k, [b, hk, rep, l, kd[3]], &[0, 1, 3, 4]);
        k = c.g.reshape(kb, [b, hq, l, kd[3]]);
        let vb = c.g.broadcast_in_dim(v, [b, hk, rep, l, vd[3]], &[0, 1, 3, 4]);
        v = c.g.reshape(vb, [b, hq, l, vd[3]]);
    }
    let dt = c.dtype(q);
    let scale = if c.has("scale") { c.af("scale", 1.0) as f64 } else { 1.0 / (dh as f64).sqrt() };
    let kt = c.g.transpose(k, &[0, 1, 3, 2]);
    let qk = c.g.mm(q, kt);
    let sc = c.scalar(scale, dt);
    let qk = c.g.mul(qk, sc);
    // Softcap before the mask, so -inf stays -inf (the ONNX reference).
    let cap = c.af("softcap", 0.0) as f64;
    let capped = if cap > 0.0 {
        let k = c.scalar(cap, dt);
        let t = c.g.div(qk, k);
        let t = c.g.tanh(t);
        c.g.mul(t, k)
    } else {
        qk
    };
    let mut scores = capped;
    let ninf = c.scalar(f64::NEG_INFINITY, dt);
    let zero = c.scalar(0.0, dt);
    if let Some(mut m) = c.opt(3) {
        // A mask shorter than the keys is padded with "masked out".
        let md = c.dims(m)?;
        if let Some(&ml) = md.last()
            && ml < l
        {
            let fill = if c.dtype(m) == DType::Bool { c.scalar(0.0, DType::Bool) } else { ninf };
            let mut hi = vec![0i64; md.len()];
            hi[md.len() - 1] = (l - ml) as i64;
            m = c.g.pad(m, fill, &vec![0; md.len()], &hi, &[]);
        }
        let bias = if c.dtype(m) == DType::Bool { c.g.select(m, zero, ninf) } else { m };
        scores = c.g.add(scores, bias);
    }
    if let Some(nl) = c.opt(6) {
        // `nonpad_kv_seqlen` [B]: keys at or past a batch's count are padding (masked out).
        if c.dims(nl)? != [b] {
            return Err(c.err(format!("nonpad_kv_seqlen must have shape [{b}]")));
        }
        let j = c.g.iota(Shape::new(&[b, 1, 1, l], DType::I64), 3);
        let n64 = c.g.convert(nl, DType::I64);
        let n = c.g.reshape(n64, [b, 1, 1, 1]);
        let keep = c.g.compare(C::Lt, j, n);
        let bias = c.g.select(keep, zero, ninf);
        scores = c.g.add(scores, bias);
    }
    if c.ai("is_causal", 0) != 0 {
        // Query i sees keys j <= i + past (upper-left aligned after the past keys).
        let past = match c.opt(4) {
            Some(pk) => c.dims(pk)?[2] as f64,
            None => 0.0,
        };
        let i = c.g.iota(Shape::new(&[s, l], DType::I64), 0);
        let j = c.g.iota(Shape::new(&[s, l], DType::I64), 1);
        let off = c.scalar(past, DType::I64);
        let ip = c.g.add(i, off);
        let ok = c.g.compare(C::Le, j, ip);
        let bias = c.g.select(ok, zero, ninf);
        scores = c.g.add(scores, bias);
    }
    let p = c.g.softmax(scores, -1);
    let mut y = c.g.mm(p, v);
    if three_d {
        let t = c.g.transpose(y, &[0, 2, 1, 3]);
        y = c.g.reshape(t, [b, s, hq * vd[3]]);
    }
    let qk_out = match c.ai("qk_matmul_output_mode", 0) {
        0 | 1 => capped,
        2 => scores,
        _ => p,
    };
    Ok(vec![y, present_k, present_v, qk_out])
}
