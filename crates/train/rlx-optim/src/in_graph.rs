//! The in-graph form of [`Rule`]: the stages of `rule::apply`, in the same order and with the
//! same formulas, emitted as f32 IR ops, so one compiled training step computes the forward
//! pass, the loss, the gradients and the update (the elementwise stages fuse into one loop per
//! param). The step-dependent scalars (rate, bias corrections, RAdam's rectification) are
//! computed on the host in f64 by the functions `apply` uses and fed as rank-0 inputs; the
//! bias corrections are fed as their reciprocals, so the graph multiplies where `apply`
//! divides (a vector division costs about ten multiplications, and Adam had three per element).
//!
//! Differences from the host path: arithmetic is f32 (the host computes in f64 and rounds the
//! stored values), so results agree to a few f32 ulps per step (tested: 10 steps within 1e-6
//! relative); Adafactor's factored moments and Muon's Newton–Schulz stay on the host
//! ([`supported`]).

use crate::rule::{self, Accum, Momentum, Precond, Rule};
use rlx_ir::ops::CompareOp;
use rlx_ir::{DType, Graph, NodeId, Shape};

/// Whether `rule` runs in-graph for a param of `shape`: every stage except Adafactor's
/// factored second moment and Muon's orthogonalization (matrix loops kept on the host).
pub(crate) fn supported(rule: &Rule, shape: &[usize]) -> bool {
    !matches!(rule::effective(rule, shape).precond, Precond::Factored { .. } | Precond::NewtonSchulz { .. })
}

/// A step-dependent scalar input of the in-graph update.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scalar {
    /// The rate of this step.
    Lr,
    /// `1 / (1 − β₁ᵗ)` (1 without bias correction).
    InvC1,
    /// `1 / (1 − β₁ᵗ⁺¹)` (NAdam's look-ahead).
    InvC1Next,
    /// `1 / (1 − β₂ᵗ)`.
    InvC2,
    /// RAdam's rectification `r_t` (0: unrectified step).
    Rect,
}

impl Scalar {
    /// The input's name in the step graph.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Scalar::Lr => "__optim.lr",
            Scalar::InvC1 => "__optim.inv_c1",
            Scalar::InvC1Next => "__optim.inv_c1_next",
            Scalar::InvC2 => "__optim.inv_c2",
            Scalar::Rect => "__optim.rect",
        }
    }

    /// Its value for `rule` at the 1-based iteration `t` with rate `lr` (f64 on the host, as
    /// `rule::apply`, then rounded to f32).
    pub(crate) fn value(self, rule: &Rule, t: u64, lr: f64) -> f32 {
        let ti = t as i32;
        let (beta1, accum) = match (&rule.momentum, &rule.precond) {
            (&Momentum::Ema { beta1, .. }, Precond::Rms { accum, .. }) => (Some(beta1), Some(*accum)),
            (&Momentum::Ema { beta1, .. }, _) => (Some(beta1), None),
            (_, Precond::Rms { accum, .. }) => (None, Some(*accum)),
            _ => (None, None),
        };
        let beta2 = match accum {
            Some(Accum::Ema { beta2 }) => Some(beta2),
            _ => None,
        };
        let v = match self {
            Scalar::Lr => lr,
            Scalar::InvC1 => 1.0 / beta1.map_or(1.0, |b| rule::bias_correction(rule, b, ti)),
            Scalar::InvC1Next => 1.0 / beta1.map_or(1.0, |b| rule::bias_correction(rule, b, ti + 1)),
            Scalar::InvC2 => 1.0 / beta2.map_or(1.0, |b| rule::bias_correction(rule, b, ti)),
            Scalar::Rect => match (&rule.precond, beta2) {
                (Precond::Rms { rectify: Some(thr), .. }, Some(b2)) => rule::rectification(b2, *thr, t),
                _ => 1.0,
            },
        };
        v as f32
    }
}

/// Emits update ops into a step graph; the scalar inputs are created on first use.
#[derive(Default)]
pub(crate) struct Emitter {
    /// The scalar inputs created so far.
    pub scalars: Vec<(Scalar, NodeId)>,
}

fn k(g: &mut Graph, v: f64) -> NodeId {
    g.scalar(v, DType::F32)
}

fn sum_all(g: &mut Graph, x: NodeId) -> NodeId {
    let axes: Vec<i64> = (0..g.shape(x).rank() as i64).collect();
    g.sum(x, &axes, false)
}

fn sum_sq(g: &mut Graph, x: NodeId) -> NodeId {
    let sq = g.mul(x, x);
    sum_all(g, sq)
}

/// `√(Σx² / n)`.
fn rms(g: &mut Graph, x: NodeId) -> NodeId {
    let n = g.shape(x).static_dims().map_or(1, |d| d.iter().product::<usize>()).max(1);
    let s = sum_sq(g, x);
    let n = k(g, n as f64);
    let m = g.div(s, n);
    g.sqrt(m)
}

impl Emitter {
    fn scalar(&mut self, g: &mut Graph, s: Scalar) -> NodeId {
        if let Some(&(_, id)) = self.scalars.iter().find(|(k, _)| *k == s) {
            return id;
        }
        let id = g.input(s.name(), Shape::new(&[], DType::F32));
        self.scalars.push((s, id));
        id
    }

    /// The new value of param `p` (f32) and of its slots (`slots` in `rule::slots` order)
    /// after one step of `rule` (the rule that applies to `p`'s shape; [`supported`]) with
    /// gradient `grad`. Stage for stage `rule::apply`.
    pub(crate) fn update(
        &mut self,
        g: &mut Graph,
        rule: &Rule,
        p: NodeId,
        grad: NodeId,
        slots: &[NodeId],
    ) -> (NodeId, Vec<NodeId>) {
        let mut slots = slots.iter().copied();
        let mut next = vec![];
        // 1. coupled L2.
        let gl = if rule.l2 != 0.0 {
            let l2 = k(g, rule.l2 as f64);
            let wp = g.mul(l2, p);
            g.add(grad, wp)
        } else {
            grad
        };
        // 2. momentum.
        let mut d = gl;
        match rule.momentum {
            Momentum::None => {}
            Momentum::Trace { momentum, nesterov } => {
                let m = slots.next().expect("m slot");
                let mu = k(g, momentum as f64);
                let mm = g.mul(mu, m);
                let m2 = g.add(mm, gl);
                next.push(m2);
                d = if nesterov {
                    let t = g.mul(mu, m2);
                    g.add(gl, t)
                } else {
                    m2
                };
            }
            Momentum::Ema { beta1, nesterov } => {
                let m = slots.next().expect("m slot");
                let (b, ob) = (k(g, beta1 as f64), k(g, 1.0 - beta1 as f64));
                let bm = g.mul(b, m);
                let og = g.mul(ob, gl);
                let m2 = g.add(bm, og);
                next.push(m2);
                let inv_c1 = self.scalar(g, Scalar::InvC1);
                d = if nesterov {
                    let inv_c1n = self.scalar(g, Scalar::InvC1Next);
                    let bm2 = g.mul(b, m2);
                    let t1 = g.mul(bm2, inv_c1n);
                    let t2 = g.mul(og, inv_c1);
                    g.add(t1, t2)
                } else {
                    g.mul(m2, inv_c1)
                };
            }
            Momentum::Interpolate { beta1, beta2 } => {
                let m = slots.next().expect("m slot");
                let (b1, ob1) = (k(g, beta1 as f64), k(g, 1.0 - beta1 as f64));
                let (b2, ob2) = (k(g, beta2 as f64), k(g, 1.0 - beta2 as f64));
                let (x, y) = (g.mul(b1, m), g.mul(ob1, gl));
                d = g.add(x, y);
                let (x, y) = (g.mul(b2, m), g.mul(ob2, gl));
                next.push(g.add(x, y));
            }
        }
        // 3. preconditioner.
        match rule.precond {
            Precond::None => {}
            Precond::Rms { accum, eps, eps_in_sqrt, rectify, .. } => {
                let v = slots.next().expect("v slot");
                let g2 = g.mul(gl, gl);
                let v2 = match accum {
                    Accum::Ema { beta2 } => {
                        let (b, ob) = (k(g, beta2 as f64), k(g, 1.0 - beta2 as f64));
                        let bv = g.mul(b, v);
                        let og = g.mul(ob, g2);
                        g.add(bv, og)
                    }
                    Accum::Sum => g.add(v, g2),
                };
                next.push(v2);
                let vh = match accum {
                    Accum::Ema { .. } => {
                        let inv_c2 = self.scalar(g, Scalar::InvC2);
                        g.mul(v2, inv_c2)
                    }
                    Accum::Sum => v2,
                };
                let e = k(g, eps as f64);
                let denom = if eps_in_sqrt {
                    let s = g.add(vh, e);
                    g.sqrt(s)
                } else {
                    let s = g.sqrt(vh);
                    g.add(s, e)
                };
                d = match (rectify, accum) {
                    (Some(_), Accum::Ema { .. }) => {
                        let r = self.scalar(g, Scalar::Rect);
                        let rd = g.mul(r, d);
                        let rect = g.div(rd, denom);
                        let zero = k(g, 0.0);
                        let plain = g.compare(CompareOp::Eq, r, zero);
                        g.select(plain, d, rect)
                    }
                    _ => g.div(d, denom),
                };
            }
            Precond::Sign => d = g.sign(d),
            Precond::Factored { .. } | Precond::NewtonSchulz { .. } => {
                debug_assert!(false, "host-only preconditioner reached the in-graph update")
            }
        }
        // 4. block-wise rescalings and decoupled decay.
        if let Some(thr) = rule.clip_block_rms {
            let r = rms(g, d);
            let t = k(g, thr as f64);
            let q = g.div(r, t);
            let one = k(g, 1.0);
            let denom = g.max(q, one);
            d = g.div(d, denom);
        }
        if rule.weight_decay != 0.0 {
            let wd = k(g, rule.weight_decay as f64);
            let wp = g.mul(wd, p);
            d = g.add(d, wp);
        }
        if rule.trust_ratio {
            let (sp, sd) = (sum_sq(g, p), sum_sq(g, d));
            let (pn, un) = (g.sqrt(sp), g.sqrt(sd));
            let ratio = g.div(pn, un);
            let (zero, one) = (k(g, 0.0), k(g, 1.0));
            let (pz, uz) = (g.compare(CompareOp::Eq, pn, zero), g.compare(CompareOp::Eq, un, zero));
            let r = g.select(uz, one, ratio);
            let r = g.select(pz, one, r);
            d = g.mul(d, r);
        }
        if let Some(min) = rule.param_scale {
            let r = rms(g, p);
            let lo = k(g, min as f64);
            let s = g.max(r, lo);
            d = g.mul(d, s);
        }
        // 5. apply.
        let lr = self.scalar(g, Scalar::Lr);
        let step = g.mul(lr, d);
        (g.sub(p, step), next)
    }
}

/// Global-norm clipping in the graph (`clip_grad_norm`'s rule): scale every gradient by
/// `max_norm / ‖g‖` when the global norm `‖g‖` is finite and above `max_norm`.
pub(crate) fn clip(g: &mut Graph, grads: &mut [NodeId], max_norm: f32) {
    let mut total = None;
    for &x in grads.iter() {
        let s = sum_sq(g, x);
        total = Some(match total {
            Some(t) => g.add(t, s),
            None => s,
        });
    }
    let Some(total) = total else { return };
    let norm = g.sqrt(total);
    let max = k(g, max_norm as f64);
    let one = k(g, 1.0);
    let scale = g.div(max, norm);
    let over = g.compare(CompareOp::Gt, norm, max);
    let finite = g.unary(rlx_ir::ops::UnaryOp::IsFinite, norm);
    let s = g.select(over, scale, one);
    let s = g.select(finite, s, one);
    for x in grads.iter_mut() {
        *x = g.mul(*x, s);
    }
}
