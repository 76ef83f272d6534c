//! `ai.onnx.preview.training` optimizer steps: `Adagrad`, `Adam`, `Momentum` (standard and
//! Nesterov), following the ONNX reference formulas. Inputs are `R` (learning rate), `T`
//! (update count), then `n` tensors each of X, G and the optimizer's states; results are the
//! new X's then the new states, each in its input's dtype.

use super::Ctx;
use crate::error::Result;
use rlx_ir::ops::CompareOp as C;
use rlx_ir::{DType, NodeId};

/// The scalars `R`, `T` (as f32), `T > 0`, and for each optimized tensor its `k` inputs (X,
/// G, states).
fn split(c: &mut Ctx, k: usize) -> Result<(NodeId, NodeId, NodeId, Vec<Vec<NodeId>>)> {
    let all = c.all();
    if all.len() < 2 + k || !(all.len() - 2).is_multiple_of(k) {
        return Err(c.err(format!("needs R, T and {k} equally long groups of tensors, got {} inputs", all.len())));
    }
    let n = (all.len() - 2) / k;
    let r = c.g.convert(all[0], DType::F32);
    let t = c.g.convert(all[1], DType::F32);
    let zero = c.scalar(0.0, DType::F32);
    let started = c.g.compare(C::Gt, t, zero);
    // Per optimized tensor i: [x_i, g_i, states_i…].
    let groups = (0..n).map(|i| (0..k).map(|j| all[2 + j * n + i]).collect()).collect();
    Ok((r, t, started, groups))
}

/// `norm_coefficient · x + g` in f32.
fn regularized(c: &mut Ctx, x: NodeId, g: NodeId) -> NodeId {
    let (xf, gf) = (c.g.convert(x, DType::F32), c.g.convert(g, DType::F32));
    let nc = c.scalar(c.af("norm_coefficient", 0.0) as f64, DType::F32);
    let t = c.g.mul(xf, nc);
    c.g.add(t, gf)
}

fn f(c: &mut Ctx, v: f64) -> NodeId {
    c.scalar(v, DType::F32)
}

/// `r · num / (√h + ε)`: Adagrad's and Adam's step.
fn rms_step(c: &mut Ctx, r: NodeId, num: NodeId, h: NodeId, eps: NodeId) -> NodeId {
    let sq = c.g.sqrt(h);
    let sq = c.g.add(sq, eps);
    let step = c.g.div(num, sq);
    c.g.mul(r, step)
}

/// `x − step` in f32 (`x` converted from its dtype): the update every optimizer ends with.
fn descend(c: &mut Ctx, x: NodeId, step: NodeId) -> NodeId {
    let xf = c.g.convert(x, DType::F32);
    c.g.sub(xf, step)
}

/// `v` (f32) back in the dtype of the input `like` it updates.
fn back(c: &mut Ctx, v: NodeId, like: NodeId) -> NodeId {
    let dt = c.dtype(like);
    c.g.convert(v, dt)
}

/// `a · x + b · y`.
fn lin(c: &mut Ctx, a: NodeId, x: NodeId, b: NodeId, y: NodeId) -> NodeId {
    let (p, q) = (c.g.mul(a, x), c.g.mul(b, y));
    c.g.add(p, q)
}

/// `Adagrad`: `r' = R / (1 + T·decay_factor)`, `h' = h + g²`, `x' = x − r' g / (√h' + ε)`.
pub(super) fn adagrad(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (r, t, _, gr) = split(c, 3)?;
    let (decay, eps) = (f(c, c.af("decay_factor", 0.0) as f64), f(c, c.af("epsilon", 1e-6) as f64));
    let one = f(c, 1.0);
    let td = c.g.mul(t, decay);
    let den = c.g.add(one, td);
    let ra = c.g.div(r, den);
    let (mut xs, mut hs) = (vec![], vec![]);
    for io in &gr {
        let (x, g, h) = (io[0], io[1], io[2]);
        let gg = regularized(c, x, g);
        let hf = c.g.convert(h, DType::F32);
        let g2 = c.g.mul(gg, gg);
        let hn = c.g.add(hf, g2);
        let step = rms_step(c, ra, gg, hn, eps);
        let xn = descend(c, x, step);
        xs.push(back(c, xn, x));
        hs.push(back(c, hn, h));
    }
    xs.extend(hs);
    Ok(xs)
}

/// `Adam`: `v' = α v + (1−α) g`, `h' = β h + (1−β) g²`, `r' = R √(1−β^T) / (1−α^T)` when `T
/// > 0` (else `R`), `x' = (1 − norm_coefficient_post)(x − r' v' / (√h' + ε))`.
pub(super) fn adam(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (r, t, started, gr) = split(c, 4)?;
    let (alpha, beta) = (c.af("alpha", 0.9) as f64, c.af("beta", 0.999) as f64);
    let (a, a1, b, b1) = (f(c, alpha), f(c, 1.0 - alpha), f(c, beta), f(c, 1.0 - beta));
    let (eps, post) = (f(c, c.af("epsilon", 1e-6) as f64), f(c, 1.0 - c.af("norm_coefficient_post", 0.0) as f64));
    let one = f(c, 1.0);
    let (at, bt) = (c.g.pow(a, t), c.g.pow(b, t));
    let (na, nb) = (c.g.sub(one, at), c.g.sub(one, bt));
    let sb = c.g.sqrt(nb);
    let corr = c.g.div(sb, na);
    let rc = c.g.mul(r, corr);
    let ra = c.g.select(started, rc, r);
    let (mut xs, mut vs, mut hs) = (vec![], vec![], vec![]);
    for io in &gr {
        let (x, g, v, h) = (io[0], io[1], io[2], io[3]);
        let gg = regularized(c, x, g);
        let (vf, hf) = (c.g.convert(v, DType::F32), c.g.convert(h, DType::F32));
        let vn = lin(c, a, vf, a1, gg);
        let g2 = c.g.mul(gg, gg);
        let hn = lin(c, b, hf, b1, g2);
        let step = rms_step(c, ra, vn, hn, eps);
        let xn = descend(c, x, step);
        let xn = c.g.mul(post, xn);
        xs.push(back(c, xn, x));
        vs.push(back(c, vn, v));
        hs.push(back(c, hn, h));
    }
    xs.extend(vs);
    xs.extend(hs);
    Ok(xs)
}

/// `Momentum`: `v' = α v + β' g` (`β' = β` when `T > 0`, else 1); `standard`: `x' = x − R v'`,
/// `nesterov`: `x' = x − R (g + α v')`.
pub(super) fn momentum(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (r, _, started, gr) = split(c, 3)?;
    let mode = c.astr("mode", "standard");
    if !matches!(mode.as_str(), "standard" | "nesterov") {
        return Err(c.err(format!("mode {mode:?} is not standard or nesterov")));
    }
    let (a, b, one) = (f(c, c.af("alpha", 0.0) as f64), f(c, c.af("beta", 0.0) as f64), f(c, 1.0));
    let ba = c.g.select(started, b, one);
    let (mut xs, mut vs) = (vec![], vec![]);
    for io in &gr {
        let (x, g, v) = (io[0], io[1], io[2]);
        let gg = regularized(c, x, g);
        let vf = c.g.convert(v, DType::F32);
        let vn = lin(c, a, vf, ba, gg);
        let dir = if mode == "nesterov" {
            let av = c.g.mul(a, vn);
            c.g.add(gg, av)
        } else {
            vn
        };
        let step = c.g.mul(r, dir);
        let xn = descend(c, x, step);
        xs.push(back(c, xn, x));
        vs.push(back(c, vn, v));
    }
    xs.extend(vs);
    Ok(xs)
}
