//! State-carrying sequence ops of linear-attention models (Gated DeltaNet, Mamba):
//! `LinearAttention` (the recurrence as an RLX `scan` over time) and `CausalConvWithState`
//! (a depthwise causal 1-D convolution continuing from a carried window).

use super::Ctx;
use crate::error::Result;
use rlx_ir::ops::DotGeneral;
use rlx_ir::{DType, Graph, NodeId, Shape};

/// `dot_general` with batch dims 0, 1 on both sides, contracting `lc` with `rc`.
fn bdot(g: &mut Graph, a: NodeId, b: NodeId, lc: usize, rc: usize) -> NodeId {
    let dims = DotGeneral {
        lhs_contracting: vec![lc],
        rhs_contracting: vec![rc],
        lhs_batch: vec![0, 1],
        rhs_batch: vec![0, 1],
        preferred_element_type: None,
    };
    g.dot_general(a, b, dims)
}

/// ONNX `LinearAttention` (opset 27): `query [B, T, Hq·dk]`, `key [B, T, Hkv·dk]`, `value
/// [B, T, Hkv·dv]`, optional `past_state [B, Hkv, dk, dv]`, `decay [B, T, Hkv·dk | Hkv]`
/// (log-space, for `gated` / `gated_delta`), `beta [B, T, Hkv | 1]` (for `delta` /
/// `gated_delta`). Per step, in f32 as the ONNX reference: `S *= exp(g)` (gated), `v ← β (v −
/// Sᵀk)` (delta), `S += k ⊗ v`, `o = scale · qᵀ S` with query head `h` reading KV head
/// `h / (Hq / Hkv)`. Results: `output [B, T, Hq·dv]` in the query dtype and `present_state`
/// in the dtype of `past_state` (else the query's).
pub(super) fn linear_attention(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (q, k, v) = (c.x(0)?, c.x(1)?, c.x(2)?);
    let rule = c.astr("update_rule", "gated_delta");
    let (gating, delta) = match rule.as_str() {
        "linear" => (false, false),
        "gated" => (true, false),
        "delta" => (false, true),
        "gated_delta" => (true, true),
        r => return Err(c.err(format!("update_rule {r:?} is not one of linear, gated, delta, gated_delta"))),
    };
    let (hq, hkv) = (c.ai("q_num_heads", 0), c.ai("kv_num_heads", 0));
    if hq <= 0 || hkv <= 0 || hq % hkv != 0 {
        return Err(c.err(format!("q_num_heads ({hq}) must be a positive multiple of kv_num_heads ({hkv})")));
    }
    let (hq, hkv) = (hq as usize, hkv as usize);
    let (qd, kd, vd) = (c.dims(q)?, c.dims(k)?, c.dims(v)?);
    if qd.len() != 3 || kd.len() != 3 || vd.len() != 3 || qd[2] % hq != 0 || vd[2] % hkv != 0 {
        return Err(c.err(format!("query/key/value must be [B, T, H·D], got {qd:?} {kd:?} {vd:?}")));
    }
    let (b, t, dk, dv, grp) = (qd[0], qd[1], qd[2] / hq, vd[2] / hkv, hq / hkv);
    if kd != [b, t, hkv * dk] || vd[..2] != [b, t] {
        return Err(c.err(format!("key {kd:?} / value {vd:?} do not fit query {qd:?} with {hkv} kv heads")));
    }
    let (decay, beta) = (c.opt(4), c.opt(5));
    if gating != decay.is_some() || delta != beta.is_some() {
        return Err(c.err(format!("update_rule {rule:?} needs decay: {gating}, beta: {delta}")));
    }
    let out_dt = c.dtype(q);
    let state_dt = c.opt(3).map_or(out_dt, |s| c.dtype(s));
    let scale = match c.af("scale", 0.0) {
        0.0 => 1.0 / (dk as f64).sqrt(),
        s => s as f64,
    };
    // Time-major f32 operands: [T, B, …].
    let time_major = |c: &mut Ctx, x: NodeId, inner: &[usize]| {
        let x = c.g.convert(x, DType::F32);
        let mut dims = vec![b, t];
        dims.extend(inner);
        let x = c.g.reshape(x, dims.clone());
        let mut perm: Vec<usize> = (0..dims.len()).collect();
        perm.swap(0, 1);
        c.g.transpose(x, &perm)
    };
    let mut xs = vec![time_major(c, q, &[hkv, grp, dk]), time_major(c, k, &[hkv, dk]), time_major(c, v, &[hkv, dv])];
    let dg = match decay {
        Some(d) => {
            let last = *c.dims(d)?.last().unwrap_or(&0);
            let dg = if last == hkv * dk {
                dk
            } else if last == hkv {
                1
            } else {
                0
            };
            if dg == 0 {
                return Err(c.err(format!("decay's last dim {last} must be {hkv} or {}", hkv * dk)));
            }
            xs.push(time_major(c, d, &[hkv, dg]));
            dg
        }
        None => 0,
    };
    let hb = match beta {
        Some(bt) => {
            let hb = *c.dims(bt)?.last().unwrap_or(&0);
            if hb != hkv && hb != 1 {
                return Err(c.err(format!("beta's last dim {hb} must be {hkv} or 1")));
            }
            xs.push(time_major(c, bt, &[hb]));
            hb
        }
        None => 0,
    };
    let s_dims = [b, hkv, dk, dv];
    let s0 = match c.opt(3) {
        Some(s) => {
            if c.dims(s)? != s_dims {
                return Err(c.err(format!("past_state is {:?}, expected {s_dims:?}", c.dims(s)?)));
            }
            c.g.convert(s, DType::F32)
        }
        None => c.g.constant(rlx_ir::Tensor::zeros(&s_dims, DType::F32)),
    };

    let mut body = Graph::new("linear_attention_step");
    let f = |d: &[usize]| Shape::new(d, DType::F32);
    let mut s = body.input("state", f(&s_dims));
    let qt = body.input("q", f(&[b, hkv, grp, dk]));
    let kt = body.input("k", f(&[b, hkv, dk]));
    let mut vt = body.input("v", f(&[b, hkv, dv]));
    if gating {
        let g = body.input("decay", f(&[b, hkv, dg]));
        let e = body.exp(g);
        let e = body.broadcast_in_dim(e, s_dims, &[0, 1, 2]);
        s = body.mul(s, e);
    }
    if delta {
        let bt = body.input("beta", f(&[b, hb]));
        let got = bdot(&mut body, s, kt, 2, 2); // [B, Hkv, dv]
        let diff = body.sub(vt, got);
        let bt = body.broadcast_in_dim(bt, [b, hkv, dv], &[0, 1]);
        vt = body.mul(bt, diff);
    }
    let kb = body.broadcast_in_dim(kt, s_dims, &[0, 1, 2]);
    let vb = body.broadcast_in_dim(vt, s_dims, &[0, 1, 3]);
    let outer = body.mul(kb, vb);
    let s = body.add(s, outer);
    let o = bdot(&mut body, qt, s, 3, 2); // [B, Hkv, G, dv]
    let sc = body.scalar(scale, DType::F32);
    let o = body.mul(o, sc);
    body.set_outputs(vec![s, o]);

    let res = c.g.scan(body, &[], &[s0], &xs, t, false);
    if let Some(e) = c.g.error() {
        return Err(c.err(e.to_string()));
    }
    // ys: [T, B, Hkv, G, dv].
    let [s_fin, ys] = <[NodeId; 2]>::try_from(res).map_err(|_| c.err("the scan did not build"))?;
    let ys = c.g.transpose(ys, &[1, 0, 2, 3, 4]);
    let ys = c.g.reshape(ys, [b, t, hq * dv]);
    Ok(vec![c.g.convert(ys, out_dt), c.g.convert(s_fin, state_dt)])
}

/// ONNX `CausalConvWithState` (opset 27): `input [B, C, L]`, `weight [C, 1, K]`, optional
/// `bias [C]` and `past_state [B, C, K−1]` (zeros when absent). With `x = concat(past,
/// input)` along L: `output[b, c, t] = act(bias[c] + Σ_j weight[c, 0, j] · x[b, c, t + j])`
/// (`activation` `none`, or `silu` / `swish` for `y · sigmoid(y)`), and `present_state` the
/// last K−1 positions of `x`.
pub(super) fn causal_conv_with_state(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, w) = (c.x(0)?, c.x(1)?);
    let (xd, wd) = (c.dims(x)?, c.dims(w)?);
    if xd.len() != 3 || wd.len() != 3 || wd[0] != xd[1] || wd[1] != 1 || wd[2] == 0 {
        return Err(c.err(format!("input must be [B, C, L] and weight [C, 1, K], got {xd:?} and {wd:?}")));
    }
    let (b, ch, l, k) = (xd[0], xd[1], xd[2], wd[2]);
    let act = c.astr("activation", "none");
    if !matches!(act.as_str(), "none" | "silu" | "swish") {
        return Err(c.err(format!("activation {act:?} is not one of none, silu, swish")));
    }
    let past = match c.opt(3) {
        Some(p) => {
            if c.dims(p)? != [b, ch, k - 1] {
                return Err(c.err(format!("past_state is {:?}, expected {:?}", c.dims(p)?, [b, ch, k - 1])));
            }
            p
        }
        None => c.g.constant(rlx_ir::Tensor::zeros(&[b, ch, k - 1], c.dtype(x))),
    };
    let full = c.g.concatenate(&[past, x], 2);
    // Half-precision inputs accumulate in f32 and round once, then the activation runs in
    // f32 on the rounded value (as the ONNX reference).
    let dt = c.dtype(x);
    let wide = if matches!(dt, DType::F16 | DType::BF16) { DType::F32 } else { dt };
    let (fw, ww) = (c.g.convert(full, wide), c.g.convert(w, wide));
    let mut y = None;
    for j in 0..k {
        let win = c.g.slice_in_dim(fw, j, j + l, 2);
        let wj = c.g.slice_in_dim(ww, j, j + 1, 2);
        let wj = c.g.reshape(wj, [ch]);
        let wj = c.g.broadcast_in_dim(wj, [b, ch, l], &[1]);
        let term = c.g.mul(win, wj);
        y = Some(match y {
            Some(acc) => c.g.add(acc, term),
            None => term,
        });
    }
    let mut y = y.expect("k > 0");
    if let Some(bias) = c.opt(2) {
        let bias = c.g.convert(bias, wide);
        let bb = c.g.broadcast_in_dim(bias, [b, ch, l], &[1]);
        y = c.g.add(y, bb);
    }
    y = c.g.convert(y, dt);
    if act != "none" {
        let yw = c.g.convert(y, wide);
        let s = c.g.logistic(yw);
        let act = c.g.mul(yw, s);
        y = c.g.convert(act, dt);
    }
    let present = c.g.slice_in_dim(full, l, l + k - 1, 2);
    Ok(vec![y, present])
}
