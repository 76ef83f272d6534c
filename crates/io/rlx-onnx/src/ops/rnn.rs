//! The RNN family (RNN, GRU, LSTM; opsets 7-22), unrolled over the (static) sequence length:
//! forward, reverse and bidirectional; `layout` 0 and 1; biases, initial states, LSTM
//! peepholes, GRU `linear_before_reset`, `clip`, `sequence_lens` (steps at or beyond a row's
//! length keep its state and write zeros to `Y`), and `activations` among Sigmoid, Tanh, Relu.
//!
//! The input projection `X·Wᵀ + Wb` of every step is one `linear` over `[seq, batch, input]`;
//! each step adds `H·Rᵀ + Rb` and applies the gate equations of the ONNX operator docs.

use super::Ctx;
use crate::error::Result;
use rlx_ir::ops::CompareOp as C;
use rlx_ir::{DType, NodeId};

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Rnn,
    Gru,
    Lstm,
}

#[derive(Clone, Copy)]
enum Act {
    Sigmoid,
    Tanh,
    Relu,
}

fn act(c: &mut Ctx, a: Act, x: NodeId) -> NodeId {
    match a {
        Act::Sigmoid => c.g.logistic(x),
        Act::Tanh => c.g.tanh(x),
        Act::Relu => {
            let z = c.scalar_like(0.0, x);
            c.g.max(x, z)
        }
    }
}

/// Rows `k·h .. (k+1)·h` of the last axis.
fn part(c: &mut Ctx, x: NodeId, k: usize, h: usize) -> NodeId {
    c.g.slice_in_dim(x, k * h, (k + 1) * h, -1)
}

/// `x[d]` of a `[num_dir, ..]` input, without the leading axis.
fn dir_slice(c: &mut Ctx, x: NodeId, d: usize) -> NodeId {
    let s = c.g.slice_in_dim(x, d, d + 1, 0);
    c.g.squeeze(s, &[0])
}

fn family(c: &mut Ctx, kind: Kind) -> Result<Vec<NodeId>> {
    let (x, w, r) = (c.x(0)?, c.x(1)?, c.x(2)?);
    let (b, seq_lens, h0, c0, p) = (c.opt(3), c.opt(4), c.opt(5), c.opt(6), c.opt(7));
    let layout = c.ai("layout", 0);
    let x = if layout == 1 { c.g.transpose(x, &[1, 0, 2]) } else { x };
    let xd = c.dims(x)?;
    if xd.len() != 3 {
        return Err(c.err(format!("X must be rank 3, got {xd:?}")));
    }
    let (seq, batch) = (xd[0], xd[1]);
    let h = c.ai("hidden_size", 0) as usize;
    if h == 0 {
        return Err(c.err("hidden_size is required"));
    }
    let dirs = match c.astr("direction", "forward").as_str() {
        "forward" => vec![false],
        "reverse" => vec![true],
        "bidirectional" => vec![false, true],
        d => return Err(c.err(format!("unknown direction {d:?}"))),
    };
    let (gates, n_act) = match kind {
        Kind::Rnn => (1, 1),
        Kind::Gru => (3, 2),
        Kind::Lstm => (4, 3),
    };
    let defaults = match kind {
        Kind::Rnn => vec![Act::Tanh],
        Kind::Gru => vec![Act::Sigmoid, Act::Tanh],
        Kind::Lstm => vec![Act::Sigmoid, Act::Tanh, Act::Tanh],
    };
    let acts: Vec<Act> = match c.node.attribute.iter().find(|a| a.name() == "activations") {
        None => defaults.iter().cycle().take(n_act * dirs.len()).copied().collect(),
        Some(a) => a
            .strings
            .iter()
            .map(|s| match String::from_utf8_lossy(s).to_ascii_lowercase().as_str() {
                "sigmoid" => Ok(Act::Sigmoid),
                "tanh" => Ok(Act::Tanh),
                "relu" => Ok(Act::Relu),
                other => Err(c.err(format!("activation {other:?} is not supported (Sigmoid, Tanh, Relu are)"))),
            })
            .collect::<Result<_>>()?,
    };
    if acts.len() != n_act * dirs.len() {
        return Err(c.err(format!("{} activations given, {} needed", acts.len(), n_act * dirs.len())));
    }
    let clip = c.has("clip").then(|| c.af("clip", 0.0) as f64);
    let lbr = c.ai("linear_before_reset", 0) != 0;
    let dt = c.dtype(x);
    let zeros = |c: &mut Ctx, dims: Vec<usize>| {
        let z = c.scalar(0.0, dt);
        c.g.broadcast_in_dim(z, dims, &[])
    };
    // Step masks from sequence_lens: [batch, 1] bool per step.
    let lens = seq_lens.map(|l| {
        let l = c.g.convert(l, DType::I64);
        c.g.reshape(l, vec![batch, 1])
    });
    let mut ys = vec![];
    let (mut yh, mut yc) = (vec![], vec![]);
    for (d, &reverse) in dirs.iter().enumerate() {
        let a = &acts[d * n_act..(d + 1) * n_act];
        let wd = dir_slice(c, w, d);
        let rd = dir_slice(c, r, d);
        let (wb, rb) = match b {
            Some(b) => {
                let bd = dir_slice(c, b, d);
                (Some(part(c, bd, 0, gates * h)), Some(part(c, bd, 1, gates * h)))
            }
            None => (None, None),
        };
        let xw = c.g.linear(x, wd, wb);
        let mut hs = match h0 {
            Some(h0) => dir_slice(c, h0, d),
            None => zeros(c, vec![batch, h]),
        };
        let mut cs = match c0 {
            Some(c0) if kind == Kind::Lstm => dir_slice(c, c0, d),
            _ => zeros(c, vec![batch, h]),
        };
        let peep = match p {
            Some(p) if kind == Kind::Lstm => {
                let pd = dir_slice(c, p, d);
                Some([part(c, pd, 0, h), part(c, pd, 1, h), part(c, pd, 2, h)])
            }
            _ => None,
        };
        let clipped = |c: &mut Ctx, v: NodeId| match clip {
            Some(k) => {
                let (lo, hi) = (c.scalar_like(-k, v), c.scalar_like(k, v));
                let v = c.g.max(v, lo);
                c.g.min(v, hi)
            }
            None => v,
        };
        let mut out = vec![None; seq];
        let order: Vec<usize> = if reverse { (0..seq).rev().collect() } else { (0..seq).collect() };
        for t in order {
            let xt = c.g.slice_in_dim(xw, t, t + 1, 0);
            let xt = c.g.squeeze(xt, &[0]);
            let (hn, cn) = match kind {
                Kind::Rnn => {
                    let hr = c.g.linear(hs, rd, rb);
                    let g = c.g.add(xt, hr);
                    let g = clipped(c, g);
                    (act(c, a[0], g), None)
                }
                Kind::Gru => {
                    let (xz, xr, xh) = (part(c, xt, 0, h), part(c, xt, 1, h), part(c, xt, 2, h));
                    let rw: Vec<NodeId> = (0..3).map(|k| c.g.slice_in_dim(rd, k * h, (k + 1) * h, 0)).collect();
                    let rbs: Vec<Option<NodeId>> = (0..3).map(|k| rb.map(|rb| part(c, rb, k, h))).collect();
                    let hz = c.g.linear(hs, rw[0], rbs[0]);
                    let hr = c.g.linear(hs, rw[1], rbs[1]);
                    let zs = c.g.add(xz, hz);
                    let zs = clipped(c, zs);
                    let z = act(c, a[0], zs);
                    let rs = c.g.add(xr, hr);
                    let rs = clipped(c, rs);
                    let rg = act(c, a[0], rs);
                    let hh = if lbr {
                        let lin = c.g.linear(hs, rw[2], rbs[2]);
                        c.g.mul(rg, lin)
                    } else {
                        let rh = c.g.mul(rg, hs);
                        c.g.linear(rh, rw[2], rbs[2])
                    };
                    let hs_in = c.g.add(xh, hh);
                    let hs_in = clipped(c, hs_in);
                    let ht = act(c, a[1], hs_in);
                    let one = c.scalar_like(1.0, z);
                    let omz = c.g.sub(one, z);
                    let l = c.g.mul(omz, ht);
                    let rr = c.g.mul(z, hs);
                    (c.g.add(l, rr), None)
                }
                Kind::Lstm => {
                    let hr = c.g.linear(hs, rd, rb);
                    let g = c.g.add(xt, hr);
                    let g = clipped(c, g);
                    let (gi, go, gf, gc) = (part(c, g, 0, h), part(c, g, 1, h), part(c, g, 2, h), part(c, g, 3, h));
                    let (gi, gf) = match peep {
                        Some([pi, _, pf]) => {
                            let a1 = c.g.mul(pi, cs);
                            let a2 = c.g.mul(pf, cs);
                            (c.g.add(gi, a1), c.g.add(gf, a2))
                        }
                        None => (gi, gf),
                    };
                    let i = act(c, a[0], gi);
                    let f = act(c, a[0], gf);
                    let ct = act(c, a[1], gc);
                    let fc = c.g.mul(f, cs);
                    let ic = c.g.mul(i, ct);
                    let cn = c.g.add(fc, ic);
                    let go = match peep {
                        Some([_, po, _]) => {
                            let a3 = c.g.mul(po, cn);
                            c.g.add(go, a3)
                        }
                        None => go,
                    };
                    let o = act(c, a[0], go);
                    let hc = act(c, a[2], cn);
                    (c.g.mul(o, hc), Some(cn))
                }
            };
            let (hn, cn, y) = match lens {
                Some(l) => {
                    let tt = c.scalar(t as f64, DType::I64);
                    let live = c.g.compare(C::Gt, l, tt);
                    let live = c.g.broadcast_in_dim(live, vec![batch, h], &[0, 1]);
                    let z = zeros(c, vec![batch, h]);
                    let y = c.g.select(live, hn, z);
                    let hn = c.g.select(live, hn, hs);
                    let cn = cn.map(|cn| c.g.select(live, cn, cs));
                    (hn, cn, y)
                }
                None => (hn, cn, hn),
            };
            hs = hn;
            if let Some(cn) = cn {
                cs = cn;
            }
            out[t] = Some(y);
        }
        let steps: Vec<NodeId> = out.into_iter().map(|y| y.expect("every step ran")).collect();
        let steps: Vec<NodeId> = steps.iter().map(|&y| c.g.reshape(y, vec![1, 1, batch, h])).collect();
        ys.push(c.g.concatenate(&steps, 0));
        yh.push(c.g.reshape(hs, vec![1, batch, h]));
        yc.push(c.g.reshape(cs, vec![1, batch, h]));
    }
    let y = c.g.concatenate(&ys, 1);
    let yh = c.g.concatenate(&yh, 0);
    let yc = c.g.concatenate(&yc, 0);
    if layout == 1 {
        let y = c.g.transpose(y, &[2, 0, 1, 3]);
        let yh = c.g.transpose(yh, &[1, 0, 2]);
        let yc = c.g.transpose(yc, &[1, 0, 2]);
        return Ok(vec![y, yh, yc]);
    }
    Ok(vec![y, yh, yc])
}

/// ONNX `RNN`.
pub(super) fn rnn(c: &mut Ctx) -> Result<Vec<NodeId>> {
    family(c, Kind::Rnn).map(|mut v| {
        v.truncate(2);
        v
    })
}

/// ONNX `GRU`.
pub(super) fn gru(c: &mut Ctx) -> Result<Vec<NodeId>> {
    family(c, Kind::Gru).map(|mut v| {
        v.truncate(2);
        v
    })
}

/// ONNX `LSTM`.
pub(super) fn lstm(c: &mut Ctx) -> Result<Vec<NodeId>> {
    family(c, Kind::Lstm)
}
