//! JVP, transpose and batching rules of control flow and composite regions.
//!
//! - `scan` (JAX's scan partial evaluation): the body's JVP is split into a *known* part run
//!   by a primal scan that also stacks the residuals the tangents need, and a *linear* tangent
//!   scan reading them. Carries whose tangent becomes non-zero inside the loop join the tangent
//!   carries (fixed point). The tangent scan's transpose is a scan the other way whose body
//!   is the transposed linear body; cotangents of constants accumulate in extra carries.
//! - `cond`: each branch is split the same way; residuals of all branches are returned by
//!   every branch (zeros for the others'), the tangent `cond` selects the matching linear
//!   branch, and its transpose is a `cond` of transposed branches.
//! - `while`: forward mode runs the JVP'd body in the loop. Reverse mode needs a static trip
//!   count: a counter carry starting at a constant, `cond` = `counter < constant`, body adds 1
//!   (`fori_loop`); such a loop is differentiated as the equivalent `scan`.
//! - composites differentiate through their decomposition, unless reverse mode finds a
//!   custom VJP registered for the name ([`super::super::ad::register_vjp`]): then the JVP
//!   emits the linearized composite `<name>.jvp` (operands: primal operands, primal results,
//!   tangents) whose transpose is that VJP.
//! - Batching vmaps the sub-graphs: carries and ys of `scan` are batched; `while` with a
//!   batched predicate runs until every member is done, freezing finished ones with `select`;
//!   `cond` with a batched index runs every branch and selects.

use super::super::ad::{
    AdError, Cx, JvpOut, RuleKind, Tan, differentiable, inline_call, lin_attrs, lookup_vjp, permute_inputs,
};
use super::{CondOp, ScanOp, WhileOp};
use crate::ops::{BinaryOp, CompareOp, Composite, ReduceOp, UnaryOp};
use crate::{Attr, DType, Dim, Graph, NodeId, Op, Shape};

/// Rules of the control family.
pub(crate) fn jvp(op: &Op, cx: &mut Cx, x: &[NodeId], y: &[NodeId], t: &[Tan]) -> Result<JvpOut, AdError> {
    if t.iter().all(Option::is_none) {
        return Ok(vec![None; y.len()].into());
    }
    match op {
        Op::Scan(s) => scan_jvp(s, cx, x, y, t),
        Op::Cond(c) => cond_jvp(c, cx, x, y, t),
        Op::While(w) => match static_trip_count(cx.g, w, x) {
            Some(n) => {
                let s = ScanOp { body: w.body.clone(), num_consts: 0, num_carry: x.len(), length: n, reverse: false };
                let ys = cx.g.push_multi(Op::Scan(s.clone()), x, None);
                let mut r = scan_jvp(&s, cx, x, &ys, t)?;
                r.primals.get_or_insert(ys);
                Ok(r)
            }
            None => while_jvp(w, cx, x, t),
        },
        Op::Composite(c) if cx.linearize && lookup_vjp(&c.name).is_some_and(|r| r.applies(&c.attrs)) => {
            custom_vjp_jvp(c, cx, x, y, t)
        }
        Op::Composite(c) => {
            let (jg, mask) = float_jvp(cx, &c.body, t, y)?;
            let args = jvp_args(x, t);
            let r = inline_call(cx.g, &jg, &args);
            Ok(split_results(&r, y.len(), &mask))
        }
        _ => unreachable!(),
    }
}

/// The JVP of a sub-graph with tangents where `t` has them, forcing a tangent for every
/// float output; returns it with the output mask.
fn float_jvp(cx: &Cx, g: &Graph, t: &[Tan], y: &[NodeId]) -> Result<(Graph, Vec<bool>), AdError> {
    let mask: Vec<bool> = t.iter().map(Option::is_some).collect();
    let force: Vec<bool> = y.iter().map(|&v| differentiable(cx.ty(v).dtype)).collect();
    cx.sub.jvp(g, &mask, &force)
}

/// Operands followed by the non-zero tangents.
fn jvp_args(x: &[NodeId], t: &[Tan]) -> Vec<NodeId> {
    x.iter().copied().chain(t.iter().flatten().copied()).collect()
}

/// Split `[primals…, tangents of the outputs in mask…]` into a [`JvpOut`].
fn split_results(r: &[NodeId], n: usize, mask: &[bool]) -> JvpOut {
    let mut tans = r[n..].iter();
    let tangents = mask.iter().map(|&m| if m { tans.next().copied() } else { None }).collect();
    JvpOut { primals: Some(r[..n].to_vec()), tangents }
}

fn scan_jvp(s: &ScanOp, cx: &mut Cx, x: &[NodeId], _y: &[NodeId], t: &[Tan]) -> Result<JvpOut, AdError> {
    let (nc, nk) = (s.num_consts, s.num_carry);
    let ny = s.body.outputs().len() - nk;
    let mut mask: Vec<bool> = t.iter().map(Option::is_some).collect();
    for (k, &xi) in x.iter().enumerate() {
        mask[k] &= differentiable(cx.ty(xi).dtype);
    }
    // Fixed point: a carry whose tangent becomes non-zero in the body carries a tangent.
    let (jb, out_mask) = loop {
        let force: Vec<bool> = (0..nk).map(|k| mask[nc + k]).chain(std::iter::repeat_n(false, ny)).collect();
        let (jb, om) = cx.sub.jvp(&s.body, &mask, &force)?;
        let mut changed = false;
        for k in 0..nk {
            if om[k] && !mask[nc + k] {
                mask[nc + k] = true;
                changed = true;
            }
        }
        if !changed {
            break (jb, om);
        }
    };
    let n_in = x.len();
    let n_t = mask.iter().filter(|&&m| m).count();
    let lin_in: Vec<bool> = std::iter::repeat_n(false, n_in).chain(std::iter::repeat_n(true, n_t)).collect();
    let split = cx.sub.partial_eval(&jb, &lin_in, nk + ny)?;
    let nr = split.n_res;
    // A residual that is a loop constant is passed to the linear scan as a constant, and one
    // that is an x slice as the original xs: neither is stacked again by the primal scan.
    let mut known_body = split.known;
    let kin = known_body.inputs().to_vec();
    let kout = known_body.outputs().to_vec();
    let src: Vec<Option<usize>> =
        (0..nr).map(|j| kin.iter().position(|&i| i == kout[nk + ny + j]).filter(|&p| p < nc || p >= nc + nk)).collect();
    let stacked: Vec<NodeId> = (0..nr).filter(|&j| src[j].is_none()).map(|j| kout[nk + ny + j]).collect();
    known_body.set_outputs(kout[..nk + ny].iter().chain(&stacked).copied().collect());
    let known = ScanOp { body: Box::new(known_body), ..s.clone() };
    let prim = cx.g.push_multi(Op::Scan(known), x, None);
    let (primals, res) = prim.split_at(nk + ny);
    // Linear scan: consts = tangent consts then constant residuals, carries = tangent carries,
    // xs = the other residuals then tangent xs. The unknown graph's inputs are [residuals,
    // tangents in operand order].
    let tan_idx: Vec<usize> = (0..n_in).filter(|&i| mask[i]).collect();
    let pos = |i: usize| nr + tan_idx.iter().position(|&j| j == i).expect("masked");
    let tc: Vec<usize> = tan_idx.iter().filter(|&&i| i < nc).map(|&i| pos(i)).collect();
    let tk: Vec<usize> = tan_idx.iter().filter(|&&i| i >= nc && i < nc + nk).map(|&i| pos(i)).collect();
    let tx: Vec<usize> = tan_idx.iter().filter(|&&i| i >= nc + nk).map(|&i| pos(i)).collect();
    let rc: Vec<usize> = (0..nr).filter(|&j| matches!(src[j], Some(p) if p < nc)).collect();
    let rx: Vec<usize> = (0..nr).filter(|&j| !rc.contains(&j)).collect();
    let order: Vec<usize> = tc.iter().chain(&rc).chain(&tk).chain(&rx).chain(&tx).copied().collect();
    let lin_body = permute_inputs(&split.unknown, &order);
    let mut ops: Vec<NodeId> = vec![];
    for &i in tan_idx.iter().filter(|&&i| i < nc) {
        let v = cx.materialize(t[i], x[i]);
        ops.push(v);
    }
    ops.extend(rc.iter().map(|&j| x[src[j].expect("constant residual")]));
    for &i in tan_idx.iter().filter(|&&i| i >= nc && i < nc + nk) {
        let v = cx.materialize(t[i], x[i]);
        ops.push(v);
    }
    let mut next_stacked = res.iter();
    for &j in &rx {
        ops.push(match src[j] {
            Some(p) => x[p],
            None => *next_stacked.next().expect("one stacked residual each"),
        });
    }
    for &i in tan_idx.iter().filter(|&&i| i >= nc + nk) {
        let v = cx.materialize(t[i], x[i]);
        ops.push(v);
    }
    let lin = ScanOp { body: Box::new(lin_body), num_consts: tc.len() + rc.len(), num_carry: tk.len(), ..s.clone() };
    let tr = cx.g.push_multi(Op::Scan(lin), &ops, None);
    let mut tans = tr.iter();
    let tangents = out_mask.iter().map(|&m| if m { tans.next().copied() } else { None }).collect();
    Ok(JvpOut { primals: Some(primals.to_vec()), tangents })
}

/// Trip count of a `fori_loop`-shaped while: a carry starting at an integer constant, `cond`
/// exactly `carry < constant` and the body adding the constant 1 to it.
fn static_trip_count(g: &Graph, w: &WhileOp, x: &[NodeId]) -> Option<usize> {
    let const_int = |g: &Graph, id: NodeId| match &g.node(id).op {
        Op::Constant(t) if t.numel() == 1 && t.dtype().is_int() => Some(t.to_f64_vec()[0] as i64),
        _ => None,
    };
    let cond = &w.cond;
    let c = cond.node(*cond.outputs().first()?);
    let Op::Compare(CompareOp::Lt) = c.op else { return None };
    let k = cond.inputs().iter().position(|&i| i == c.inputs[0])?;
    let limit = const_int(cond, c.inputs[1])?;
    let start = const_int(g, x[k])?;
    let b = &w.body;
    let upd = b.node(b.outputs()[k]);
    let Op::Binary(BinaryOp::Add) = upd.op else { return None };
    let (l, r) = (upd.inputs[0], upd.inputs[1]);
    let bk = b.inputs()[k];
    let ok = (l == bk && const_int(b, r) == Some(1)) || (r == bk && const_int(b, l) == Some(1));
    ok.then(|| (limit - start).max(0) as usize)
}

fn while_jvp(w: &WhileOp, cx: &mut Cx, x: &[NodeId], t: &[Tan]) -> Result<JvpOut, AdError> {
    let n = x.len();
    let mut mask: Vec<bool> = (0..n).map(|i| t[i].is_some() && differentiable(cx.ty(x[i]).dtype)).collect();
    let jb = loop {
        let (jb, om) = cx.sub.jvp(&w.body, &mask, &mask)?;
        let grown: Vec<bool> = (0..n).map(|i| mask[i] || om[i]).collect();
        if grown == mask {
            break jb;
        }
        mask = grown;
    };
    // cond ignores the tangent carries.
    let mut cond = Graph::new("cond_jvp");
    let mut args = vec![];
    for &xi in x {
        args.push(cond.input(&format!("c{}", args.len()), cx.ty(xi)));
    }
    for i in (0..n).filter(|&i| mask[i]) {
        cond.input(&format!("t{i}"), cx.ty(x[i]));
    }
    let r = inline_call(&mut cond, &w.cond, &args);
    cond.set_outputs(r);
    let mut ops = x.to_vec();
    for i in (0..n).filter(|&i| mask[i]) {
        let v = cx.materialize(t[i], x[i]);
        ops.push(v);
    }
    let op = Op::While(WhileOp { cond: Box::new(cond), body: Box::new(jb) });
    let r = cx.g.push_multi(op, &ops, None);
    Ok(split_results(&r, n, &mask))
}

/// Zeros of type `s` inside a sub-graph.
fn zeros(g: &mut Graph, s: &Shape) -> NodeId {
    let z = g.scalar(0.0, s.dtype);
    if s.rank() == 0 { z } else { g.broadcast_in_dim(z, s.dims.clone(), &[]) }
}

fn cond_jvp(c: &CondOp, cx: &mut Cx, x: &[NodeId], y: &[NodeId], t: &[Tan]) -> Result<JvpOut, AdError> {
    let ops = &x[1..];
    let mask: Vec<bool> =
        ops.iter().zip(&t[1..]).map(|(&v, t)| t.is_some() && differentiable(cx.ty(v).dtype)).collect();
    let mut union = vec![false; y.len()];
    for b in &c.branches {
        let (_, om) = cx.sub.jvp(b, &mask, &union.clone())?;
        union.iter_mut().zip(om).for_each(|(u, m)| *u |= m);
    }
    if !union.iter().any(|&u| u) {
        return Ok(vec![None; y.len()].into());
    }
    let n_t = mask.iter().filter(|&&m| m).count();
    let lin_in: Vec<bool> = std::iter::repeat_n(false, ops.len()).chain(std::iter::repeat_n(true, n_t)).collect();
    let mut splits = vec![];
    for b in &c.branches {
        let (jb, _) = cx.sub.jvp(b, &mask, &union)?;
        splits.push(cx.sub.partial_eval(&jb, &lin_in, y.len())?);
    }
    // Residual types of every branch, concatenated.
    let res_types: Vec<Vec<Shape>> = splits
        .iter()
        .map(|s| s.known.outputs()[y.len()..].iter().map(|&o| s.known.shape(o).clone()).collect())
        .collect();
    let all_res: Vec<Shape> = res_types.iter().flatten().cloned().collect();
    let (mut known, mut lin) = (vec![], vec![]);
    let mut offset = 0;
    for (k, s) in splits.iter().enumerate() {
        let mut kb = Graph::new(format!("branch{k}_known"));
        let args: Vec<NodeId> = ops.iter().enumerate().map(|(i, &o)| kb.input(&format!("x{i}"), cx.ty(o))).collect();
        let r = inline_call(&mut kb, &s.known, &args);
        let mut outs = r[..y.len()].to_vec();
        for (j, rt) in all_res.iter().enumerate() {
            let mine = j >= offset && j < offset + res_types[k].len();
            outs.push(if mine { r[y.len() + j - offset] } else { zeros(&mut kb, rt) });
        }
        kb.set_outputs(outs);
        known.push(kb);
        let mut lb = Graph::new(format!("branch{k}_linear"));
        let res: Vec<NodeId> = all_res.iter().enumerate().map(|(j, s)| lb.input(&format!("r{j}"), s.clone())).collect();
        let tans: Vec<NodeId> =
            (0..ops.len()).filter(|&i| mask[i]).map(|i| lb.input(&format!("t{i}"), cx.ty(ops[i]))).collect();
        let args: Vec<NodeId> = res[offset..offset + res_types[k].len()].iter().chain(&tans).copied().collect();
        let r = inline_call(&mut lb, &s.unknown, &args);
        lb.set_outputs(r);
        lin.push(lb);
        offset += res_types[k].len();
    }
    let prim = cx.g.push_multi(Op::Cond(CondOp { branches: known }), x, None);
    let (primals, res) = prim.split_at(y.len());
    let mut lops = vec![x[0]];
    lops.extend_from_slice(res);
    for i in (0..ops.len()).filter(|&i| mask[i]) {
        let v = cx.materialize(t[1 + i], ops[i]);
        lops.push(v);
    }
    let tr = cx.g.push_multi(Op::Cond(CondOp { branches: lin }), &lops, None);
    let mut tans = tr.iter();
    let tangents = union.iter().map(|&m| if m { tans.next().copied() } else { None }).collect();
    Ok(JvpOut { primals: Some(primals.to_vec()), tangents })
}

/// Reverse mode of a composite with a custom VJP: the linearized composite `<name>.jvp`.
fn custom_vjp_jvp(c: &Composite, cx: &mut Cx, x: &[NodeId], y: &[NodeId], t: &[Tan]) -> Result<JvpOut, AdError> {
    let (jg, out_mask) = float_jvp(cx, &c.body, t, y)?;
    let tan_idx: Vec<usize> = (0..x.len()).filter(|&i| t[i].is_some()).collect();
    let mut body = Graph::new(format!("{}.jvp", c.name));
    let xs: Vec<NodeId> = x.iter().enumerate().map(|(i, &v)| body.input(&format!("x{i}"), cx.ty(v))).collect();
    for (i, &v) in y.iter().enumerate() {
        body.input(&format!("y{i}"), cx.ty(v));
    }
    let ts: Vec<NodeId> = tan_idx.iter().map(|&i| body.input(&format!("t{i}"), cx.ty(x[i]))).collect();
    let args: Vec<NodeId> = xs.iter().chain(&ts).copied().collect();
    let r = inline_call(&mut body, &jg, &args);
    body.set_outputs(r[y.len()..].to_vec());
    let mut attrs = c.attrs.clone();
    attrs.insert(lin_attrs::OF.into(), Attr::Str(c.name.clone()));
    attrs.insert(lin_attrs::N_IN.into(), Attr::Int(x.len() as i64));
    attrs.insert(lin_attrs::N_OUT.into(), Attr::Int(y.len() as i64));
    attrs.insert(lin_attrs::TAN.into(), Attr::Ints(tan_idx.iter().map(|&i| i as i64).collect()));
    let mut ops: Vec<NodeId> = x.iter().chain(y).copied().collect();
    ops.extend(tan_idx.iter().map(|&i| t[i].expect("masked")));
    let name = format!("{}.jvp", c.name);
    let op = Op::Composite(Composite { name, attrs, body: Box::new(body) });
    let r = cx.g.push_multi(op, &ops, None);
    let mut it = r.iter();
    Ok(out_mask.iter().map(|&m| if m { it.next().copied() } else { None }).collect::<Vec<_>>().into())
}

/// Transposes of the linear `scan`, `cond` and linearized composites.
pub(crate) fn transpose(
    op: &Op,
    cx: &mut Cx,
    x: &[NodeId],
    lin: &[bool],
    outs: &[Shape],
    ct: &[Tan],
) -> Result<Vec<Tan>, AdError> {
    match op {
        Op::Scan(s) => scan_transpose(s, cx, x, lin, outs, ct),
        Op::Cond(c) => {
            if lin[0] {
                return Err(super::super::ad::not_linear(op, lin));
            }
            let lin_ops = &lin[1..];
            let branches =
                c.branches.iter().map(|b| cx.sub.transpose(b, lin_ops)).collect::<Result<Vec<_>, AdError>>()?;
            let mut ops = vec![x[0]];
            ops.extend((1..x.len()).filter(|&i| !lin[i]).map(|i| x[i]));
            for (k, s) in outs.iter().enumerate() {
                let v = ct[k].unwrap_or_else(|| cx.zeros(s));
                ops.push(v);
            }
            let r = cx.g.push_multi(Op::Cond(CondOp { branches }), &ops, None);
            Ok(scatter_lin(lin, &r))
        }
        Op::Composite(c) => composite_transpose(op, c, cx, x, lin, outs, ct),
        Op::While(_) => Err(AdError::no_rule(
            op,
            RuleKind::Transpose,
            "reverse mode of a while loop needs a static trip count (a counter carry from a constant, cond `i < \
             constant`, body `i + 1`), or use scan",
        )),
        _ => unreachable!(),
    }
}

/// One entry per operand: the next result for linear ones, `None` for the others.
fn scatter_lin(lin: &[bool], r: &[NodeId]) -> Vec<Tan> {
    let mut it = r.iter();
    lin.iter().map(|&l| if l { it.next().copied() } else { None }).collect()
}

fn scan_transpose(
    s: &ScanOp,
    cx: &mut Cx,
    x: &[NodeId],
    lin_ops: &[bool],
    outs: &[Shape],
    ct: &[Tan],
) -> Result<Vec<Tan>, AdError> {
    let (nc, nk) = (s.num_consts, s.num_carry);
    // Every carry is transposed as linear: a carry operand that is not (zeros the JVP
    // materialized for a constant initial carry) only contributes an affine offset, whose
    // cotangent is dropped.
    let mut body_lin = lin_ops.to_vec();
    body_lin[nc..nc + nk].iter_mut().for_each(|l| *l = true);
    let lin = &body_lin[..];
    let ny = outs.len() - nk;
    let tb = cx.sub.transpose(&s.body, lin)?;
    // tb: inputs [non-linear consts, non-linear xs, ct carries, ct ys]; outputs [ct linear
    // consts, ct carries, ct linear xs].
    let cl: Vec<usize> = (0..nc).filter(|&i| lin[i]).collect();
    let cn: Vec<usize> = (0..nc).filter(|&i| !lin[i]).collect();
    let xl: Vec<usize> = (nc + nk..x.len()).filter(|&i| lin[i]).collect();
    let xn: Vec<usize> = (nc + nk..x.len()).filter(|&i| !lin[i]).collect();
    let slice_ty = |cx: &Cx, v: NodeId| {
        let t = cx.ty(v);
        Shape::from_dims(&t.dims[1..], t.dtype)
    };
    // Body of the transposed scan: [cn consts, ct carries, const accumulators, xn, ct ys].
    let mut b = Graph::new(format!("{}_transpose", s.body.name));
    let consts: Vec<NodeId> = cn.iter().map(|&i| b.input(&format!("c{i}"), cx.ty(x[i]))).collect();
    let cts: Vec<NodeId> = (0..nk).map(|k| b.input(&format!("ct{k}"), cx.ty(x[nc + k]))).collect();
    let accs: Vec<NodeId> = cl.iter().map(|&i| b.input(&format!("acc{i}"), cx.ty(x[i]))).collect();
    let xs: Vec<NodeId> = xn.iter().map(|&i| b.input(&format!("x{i}"), slice_ty(cx, x[i]))).collect();
    let cys: Vec<NodeId> = (0..ny)
        .map(|j| b.input(&format!("cty{j}"), Shape::from_dims(&outs[nk + j].dims[1..], outs[nk + j].dtype)))
        .collect();
    let args: Vec<NodeId> = consts.iter().chain(&xs).chain(&cts).chain(&cys).copied().collect();
    let r = inline_call(&mut b, &tb, &args);
    let (r_consts, rest) = r.split_at(cl.len());
    let (r_carries, r_xs) = rest.split_at(nk);
    let mut bo: Vec<NodeId> = r_carries.to_vec();
    for (a, &c) in accs.iter().zip(r_consts) {
        bo.push(b.add(*a, c));
    }
    bo.extend_from_slice(r_xs);
    b.set_outputs(bo);
    // Operands.
    let mut ops: Vec<NodeId> = cn.iter().map(|&i| x[i]).collect();
    for k in 0..nk {
        let v = ct[k].unwrap_or_else(|| cx.zeros(&outs[k]));
        ops.push(v);
    }
    for &i in &cl {
        let z = cx.zeros_like(x[i]);
        ops.push(z);
    }
    ops.extend(xn.iter().map(|&i| x[i]));
    for j in 0..ny {
        let v = ct[nk + j].unwrap_or_else(|| cx.zeros(&outs[nk + j]));
        ops.push(v);
    }
    let ts = ScanOp {
        body: Box::new(b),
        num_consts: cn.len(),
        num_carry: nk + cl.len(),
        length: s.length,
        reverse: !s.reverse,
    };
    let r = cx.g.push_multi(Op::Scan(ts), &ops, None);
    let mut out = vec![None; x.len()];
    for k in 0..nk {
        out[nc + k] = Some(r[k]).filter(|_| lin_ops[nc + k]);
    }
    for (j, &i) in cl.iter().enumerate() {
        out[i] = Some(r[nk + j]);
    }
    for (j, &i) in xl.iter().enumerate() {
        out[i] = Some(r[nk + cl.len() + j]);
    }
    Ok(out)
}

fn composite_transpose(
    op: &Op,
    c: &Composite,
    cx: &mut Cx,
    x: &[NodeId],
    lin: &[bool],
    outs: &[Shape],
    ct: &[Tan],
) -> Result<Vec<Tan>, AdError> {
    let rule = match c.attrs.get(lin_attrs::OF) {
        Some(Attr::Str(of)) => lookup_vjp(of.as_str()),
        _ => None,
    };
    if let (Some(rule), Some(n_in), Some(n_out), Some(Attr::Ints(tans))) = (
        rule,
        super::super::ad::attr_int(&c.attrs, lin_attrs::N_IN),
        super::super::ad::attr_int(&c.attrs, lin_attrs::N_OUT),
        c.attrs.get(lin_attrs::TAN),
    ) {
        if lin[..n_in + n_out].iter().any(|&l| l) {
            return Err(super::super::ad::not_linear(op, lin));
        }
        // The composite's results are the tangents of its float primal results, in order.
        let mut cts = vec![None; n_out];
        let mut it = ct.iter();
        for (k, &yv) in x[n_in..n_in + n_out].iter().enumerate() {
            if differentiable(cx.ty(yv).dtype) {
                cts[k] = *it.next().unwrap_or(&None);
            }
        }
        let r = rule.vjp(&c.attrs, cx, &x[..n_in], &x[n_in..n_in + n_out], &cts)?;
        let mut out = vec![None; x.len()];
        for (j, &i) in tans.iter().enumerate() {
            out[n_in + n_out + j] = r.get(i as usize).copied().flatten();
        }
        return Ok(out);
    }
    let tb = cx.sub.transpose(&c.body, lin)?;
    let mut args: Vec<NodeId> = (0..x.len()).filter(|&i| !lin[i]).map(|i| x[i]).collect();
    for (k, s) in outs.iter().enumerate() {
        let v = ct[k].unwrap_or_else(|| cx.zeros(s));
        args.push(v);
    }
    let r = inline_call(cx.g, &tb, &args);
    Ok(scatter_lin(lin, &r))
}

/// Batching rules of the control family; sub-graph results are batched at dim 0.
pub(crate) fn batch(
    op: &Op,
    cx: &mut Cx,
    x: &[NodeId],
    bd: &[Option<usize>],
    size: &Dim,
) -> Result<Vec<(NodeId, Option<usize>)>, AdError> {
    match op {
        Op::Composite(c) => {
            let vb = cx.sub.vmap(&c.body, bd, size)?;
            let r = inline_call(cx.g, &vb, x);
            Ok(r.into_iter().map(|v| (v, Some(0))).collect())
        }
        Op::Scan(s) => {
            let (nc, nk) = (s.num_consts, s.num_carry);
            let mut ops = x[..nc].to_vec();
            let mut in_dims = bd[..nc].to_vec();
            for k in nc..nc + nk {
                let v = cx.to_front(x[k], bd[k], size);
                ops.push(v);
                in_dims.push(Some(0));
            }
            for k in nc + nk..x.len() {
                match bd[k] {
                    Some(b) => {
                        let v = cx.moveaxis(x[k], b, 1);
                        ops.push(v);
                        in_dims.push(Some(0));
                    }
                    None => {
                        ops.push(x[k]);
                        in_dims.push(None);
                    }
                }
            }
            let vb = cx.sub.vmap(&s.body, &in_dims, size)?;
            let r = cx.g.push_multi(Op::Scan(ScanOp { body: Box::new(vb), ..s.clone() }), &ops, None);
            Ok(r.iter().enumerate().map(|(i, &v)| (v, Some(if i < nk { 0 } else { 1 }))).collect())
        }
        Op::While(w) => {
            let ops: Vec<NodeId> = x.iter().zip(bd).map(|(&v, &b)| cx.to_front(v, b, size)).collect();
            let dims = vec![Some(0); x.len()];
            let vc = cx.sub.vmap(&w.cond, &dims, size)?;
            let vbody = cx.sub.vmap(&w.body, &dims, size)?;
            let types: Vec<Shape> = ops.iter().map(|&v| cx.ty(v)).collect();
            let mut cond = Graph::new("cond_any");
            let args: Vec<NodeId> =
                types.iter().enumerate().map(|(i, s)| cond.input(&format!("c{i}"), s.clone())).collect();
            let p = inline_call(&mut cond, &vc, &args)[0];
            let any = cond.reduce(p, ReduceOp::Or, &[0], false);
            cond.set_outputs(vec![any]);
            let mut body = Graph::new("body_masked");
            let args: Vec<NodeId> =
                types.iter().enumerate().map(|(i, s)| body.input(&format!("c{i}"), s.clone())).collect();
            let p = inline_call(&mut body, &vc, &args)[0];
            let new = inline_call(&mut body, &vbody, &args);
            let outs: Vec<NodeId> = new
                .iter()
                .zip(&args)
                .zip(&types)
                .map(|((&n, &o), s)| {
                    let mut d = vec![s.dims[0].clone()];
                    d.extend(std::iter::repeat_n(Dim::Static(1), s.rank() - 1));
                    let pm = body.reshape(p, d);
                    body.select(pm, n, o)
                })
                .collect();
            body.set_outputs(outs);
            let r = cx.g.push_multi(Op::While(WhileOp { cond: Box::new(cond), body: Box::new(body) }), &ops, None);
            Ok(r.into_iter().map(|v| (v, Some(0))).collect())
        }
        Op::Cond(c) => {
            let ops = &x[1..];
            let vbs = c.branches.iter().map(|b| cx.sub.vmap(b, &bd[1..], size)).collect::<Result<Vec<_>, AdError>>()?;
            match bd[0] {
                None => {
                    let mut all = vec![x[0]];
                    all.extend_from_slice(ops);
                    let r = cx.g.push_multi(Op::Cond(CondOp { branches: vbs }), &all, None);
                    Ok(r.into_iter().map(|v| (v, Some(0))).collect())
                }
                Some(b) => {
                    // Every branch runs; the batched index selects per member.
                    let outs: Vec<Vec<NodeId>> = vbs.iter().map(|vb| inline_call(cx.g, vb, ops)).collect();
                    let idx = cx.moveaxis(x[0], b, 0);
                    let is_bool = cx.ty(idx).dtype == DType::Bool;
                    let n = outs.len();
                    let mut res = outs[n - 1].clone();
                    for k in (0..n - 1).rev() {
                        for (j, r) in res.iter_mut().enumerate() {
                            let rank = cx.ty(*r).rank();
                            let p = if is_bool {
                                cx.g.unary(UnaryOp::Not, idx)
                            } else {
                                let kk = cx.g.scalar(k as f64, cx.ty(idx).dtype);
                                cx.g.compare(CompareOp::Le, idx, kk)
                            };
                            let p = cx.expand(p, 1, rank - 1);
                            *r = cx.g.select(p, outs[k][j], *r);
                        }
                    }
                    Ok(res.into_iter().map(|v| (v, Some(0))).collect())
                }
            }
        }
        _ => unreachable!(),
    }
}
