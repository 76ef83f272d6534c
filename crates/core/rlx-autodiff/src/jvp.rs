//! Forward mode: trace a graph into another one, emitting each node's primal copy and, where an
//! operand carries a tangent, the op's JVP rule.

use crate::Engine;
use crate::graphs::sources;
use rlx_ir::ops::ad::{AdError, Cx, Tan, check, float_only, lookup_vjp};
use rlx_ir::{Graph, Node, NodeId, Op, inline_composites};

/// `g` with its composites inlined, except (when `linearize`) those with a custom VJP.
pub(crate) fn inline(g: &Graph, linearize: bool) -> Graph {
    inline_composites(g, &|name| linearize && lookup_vjp(name).is_some())
}

/// Append `src`'s computation and its JVP to `dst`. `args[k]` / `tans[k]` bind `src`'s k-th
/// source ([`sources`] order). Returns the outputs and their tangents.
pub(crate) fn trace(
    src: &Graph,
    dst: &mut Graph,
    args: &[NodeId],
    tans: &[Tan],
    linearize: bool,
) -> Result<(Vec<NodeId>, Vec<Tan>), AdError> {
    let mut vals: Vec<Vec<NodeId>> = Vec::with_capacity(src.nodes().len());
    let mut tv: Vec<Vec<Tan>> = Vec::with_capacity(src.nodes().len());
    let mut k = 0;
    for n in src.nodes() {
        match &n.op {
            Op::Input { .. } | Op::Param { .. } => {
                vals.push(vec![args[k]]);
                tv.push(vec![float_only(tans[k], n.ty())]);
                k += 1;
            }
            Op::GetTupleElement { index } => {
                let s = n.inputs[0].index();
                vals.push(vec![vals[s][*index]]);
                tv.push(vec![tv[s][*index]]);
            }
            op => {
                let x: Vec<NodeId> = n.inputs.iter().map(|i| vals[i.index()][0]).collect();
                let t: Vec<Tan> = n.inputs.iter().map(|i| tv[i.index()][0]).collect();
                let id = dst.push_node(Node { op: op.clone(), inputs: x.clone(), outputs: n.outputs.clone() });
                let y: Vec<NodeId> = if n.is_tuple() {
                    (0..n.outputs.len())
                        .map(|j| {
                            dst.push_node(Node {
                                op: Op::GetTupleElement { index: j },
                                inputs: vec![id],
                                outputs: vec![n.outputs[j].clone()],
                            })
                        })
                        .collect()
                } else {
                    vec![id]
                };
                if t.iter().all(Option::is_none) {
                    tv.push(vec![None; y.len()]);
                    vals.push(y);
                    continue;
                }
                let mut cx = Cx { g: dst, sub: &Engine, linearize };
                let r = op.jvp(&mut cx, &x, &y, &t)?;
                check(dst)?;
                let y = r.primals.unwrap_or(y);
                let t: Vec<Tan> = r.tangents.iter().zip(&n.outputs).map(|(&t, s)| float_only(t, s)).collect();
                vals.push(y);
                tv.push(t);
            }
        }
    }
    let outs = src.outputs().iter().map(|o| vals[o.index()][0]).collect();
    let touts = src.outputs().iter().map(|o| tv[o.index()][0]).collect();
    Ok((outs, touts))
}

/// Zeros like `x` in `g`.
pub(crate) fn zeros_like(g: &mut Graph, x: NodeId) -> NodeId {
    let s = g.shape(x).clone();
    let z = g.scalar(0.0, s.dtype);
    if s.rank() == 0 { z } else { g.broadcast_in_dim(z, s.dims, &[]) }
}

/// The JVP graph of `g` (see `SubTransforms::jvp`); sources are `g`'s inputs and params in node
/// order, tangent inputs are named `tangent_<name>`.
pub(crate) fn jvp_graph(
    g: &Graph,
    tan_in: &[bool],
    force_out: &[bool],
    linearize: bool,
) -> Result<(Graph, Vec<bool>), AdError> {
    let src = inline(g, linearize);
    let srcs = sources(&src);
    if tan_in.len() != srcs.len() {
        return Err(AdError::Argument(format!(
            "jvp of {:?}: {} tangent flags for {} inputs",
            g.name,
            tan_in.len(),
            srcs.len()
        )));
    }
    let mut dst = Graph::new(format!("{}_jvp", g.name));
    let args: Vec<NodeId> = srcs.iter().map(|&s| dst.push_node(src.node(s).clone())).collect();
    let mut tans = vec![None; srcs.len()];
    for (i, &s) in srcs.iter().enumerate() {
        if tan_in[i] {
            let name = crate::graphs::fresh_name(&dst, &format!("tangent_{}", src.source_name(s).unwrap_or("x")));
            tans[i] = Some(dst.input(&name, src.shape(s).clone()));
        }
    }
    let (outs, touts) = trace(&src, &mut dst, &args, &tans, linearize)?;
    let mut mask = vec![];
    let mut all = outs.clone();
    for (i, t) in touts.iter().enumerate() {
        let f = force_out.get(i).copied().unwrap_or(false);
        mask.push(t.is_some() || f);
        match t {
            Some(t) => all.push(*t),
            None if f => {
                let z = zeros_like(&mut dst, outs[i]);
                all.push(z);
            }
            None => {}
        }
    }
    dst.set_outputs(all);
    check(&dst)?;
    Ok((dst, mask))
}
