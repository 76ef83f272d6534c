//! Loss ops: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (weights, ignore_index,
//! reduction none / sum / mean).

use super::Ctx;
use crate::error::Result;
use rlx_ir::NodeId;
use rlx_ir::ops::CompareOp as C;
use rlx_ir::ops::sort::take_along_axis;

/// `-x[n, t[n, …], …] · w[t]` with ignored targets weighted 0, then reduced.
fn nll(c: &mut Ctx, x: NodeId, t: NodeId, w: Option<NodeId>) -> Result<NodeId> {
    let reduction = c.astr("reduction", "mean");
    let tdims = c.sdims(t);
    let mut idx = t;
    let mut mask = None;
    if c.has("ignore_index") {
        let ig = c.scalar_like(c.ai("ignore_index", 0) as f64, t);
        let keep = c.g.compare(C::Ne, t, ig);
        let zero = c.scalar_like(0.0, t);
        idx = c.g.select(keep, t, zero);
        mask = Some(keep);
    }
    let ie = c.g.expand_dims(idx, 1);
    let picked = take_along_axis(c.g, x, ie, 1);
    let picked = c.g.squeeze(picked, &[1]);
    let mut wt = match w {
        Some(w) => c.g.take(w, idx, 0),
        None => {
            let one = c.scalar_like(1.0, x);
            c.g.broadcast_to(one, tdims)
        }
    };
    if let Some(m) = mask {
        let zero = c.scalar_like(0.0, wt);
        wt = c.g.select(m, wt, zero);
    }
    let l = c.g.mul(picked, wt);
    let loss = c.g.neg(l);
    let all: Vec<i64> = (0..c.rank(loss) as i64).collect();
    Ok(match reduction.as_str() {
        "none" => loss,
        "sum" => c.g.sum(loss, &all, false),
        "mean" => {
            let s = c.g.sum(loss, &all, false);
            let n = c.g.sum(wt, &all, false);
            c.g.div(s, n)
        }
        r => return Err(c.err(format!("reduction {r:?}"))),
    })
}

pub(super) fn nll_loss(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, t) = (c.x(0)?, c.x(1)?);
    let w = c.opt(2);
    Ok(vec![nll(c, x, t, w)?])
}

pub(super) fn softmax_cross_entropy(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (x, t) = (c.x(0)?, c.x(1)?);
    let w = c.opt(2);
    let lp = c.g.log_softmax(x, 1);
    Ok(vec![nll(c, lp, t, w)?, lp])
}
