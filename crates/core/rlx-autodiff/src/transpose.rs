//! Reverse mode: transposing the linear part of a linearized graph, and partial evaluation
//! (splitting a JVP graph into its primal and linear halves).

use crate::Engine;
use crate::graphs::{depends_on, fresh_name, prune};
use crate::jvp::zeros_like;
use rlx_ir::ops::ad::{AdError, Cx, Split, Tan, check};
use rlx_ir::{Graph, Node, NodeId, Op};
use std::collections::HashMap;

fn add(g: &mut Graph, a: Tan, b: NodeId) -> Tan {
    Some(match a {
        Some(a) => g.add(a, b),
        None => b,
    })
}

/// Append to `g` the transpose of its linear nodes (`lin[i]`; nodes appended here are never
/// linear) seeded with cotangents `seeds` (node, cotangent). Returns the accumulated
/// cotangent of every linear node that got one, in particular of the linear roots.
pub(crate) fn transpose_into(
    g: &mut Graph,
    lin: &[bool],
    seeds: &[(NodeId, NodeId)],
) -> Result<HashMap<NodeId, NodeId>, AdError> {
    let n = lin.len();
    let mut ct: Vec<Tan> = vec![None; n];
    let mut tuple_ct: HashMap<usize, Vec<Tan>> = HashMap::new();
    for &(node, s) in seeds {
        ct[node.index()] = add(g, ct[node.index()], s);
    }
    for i in (0..n).rev() {
        if !lin[i] {
            continue;
        }
        let node = g.node(NodeId(i as u32)).clone();
        match &node.op {
            Op::Input { .. } | Op::Param { .. } => {}
            Op::GetTupleElement { index } => {
                if let Some(c) = ct[i] {
                    let src = node.inputs[0].index();
                    let e = tuple_ct.entry(src).or_insert_with(|| vec![None; g.node(node.inputs[0]).outputs.len()]);
                    e[*index] = add(g, e[*index], c);
                }
            }
            op => {
                let cts = if node.is_tuple() { tuple_ct.remove(&i).unwrap_or_default() } else { vec![ct[i]] };
                if cts.iter().all(Option::is_none) {
                    continue;
                }
                let mask: Vec<bool> = node.inputs.iter().map(|x| lin[x.index()]).collect();
                let mut cx = Cx { g, sub: &Engine, linearize: false };
                let r = op.transpose(&mut cx, &node.inputs, &mask, &node.outputs, &cts)?;
                check(g)?;
                for (j, &x) in node.inputs.iter().enumerate() {
                    let Some(c) = r.get(j).copied().flatten() else { continue };
                    if !mask[j] {
                        continue;
                    }
                    let (want, got) = (g.shape(x).clone(), g.shape(c).clone());
                    if want != got {
                        return Err(AdError::Unsupported {
                            op: op.name(),
                            msg: format!("internal: the transpose gave {got} for operand {j} of type {want}"),
                        });
                    }
                    ct[x.index()] = add(g, ct[x.index()], c);
                }
            }
        }
    }
    Ok((0..n).filter_map(|i| ct[i].map(|c| (NodeId(i as u32), c))).collect())
}

/// The transpose of `g` with respect to its linear inputs (see `SubTransforms::transpose`).
pub(crate) fn transpose_graph(g: &Graph, lin_in: &[bool]) -> Result<Graph, AdError> {
    let mut dst = Graph::new(format!("{}_transpose", g.name));
    let mut map = vec![NodeId(0); g.nodes().len()];
    let mut keep = vec![];
    let mut roots = vec![];
    for (k, &id) in g.inputs().iter().enumerate() {
        let v = dst.push_node(g.node(id).clone());
        map[id.index()] = v;
        if lin_in[k] { roots.push(v) } else { keep.push(v) }
    }
    for (i, n) in g.nodes().iter().enumerate() {
        if !matches!(n.op, Op::Input { .. }) {
            let inputs = n.inputs.iter().map(|x| map[x.index()]).collect();
            map[i] = dst.push_node(Node { op: n.op.clone(), inputs, outputs: n.outputs.clone() });
        }
    }
    let lin = depends_on(&dst, &roots);
    let mut seeds = vec![];
    for (k, o) in g.outputs().iter().enumerate() {
        let name = fresh_name(&dst, &format!("ct{k}"));
        let c = dst.input(&name, g.shape(*o).clone());
        keep.push(c);
        let m = map[o.index()];
        if lin[m.index()] {
            seeds.push((m, c));
        }
    }
    let cts = transpose_into(&mut dst, &lin, &seeds)?;
    let outs: Vec<NodeId> =
        roots.iter().map(|r| cts.get(r).copied().unwrap_or_else(|| zeros_like(&mut dst, *r))).collect();
    dst.set_outputs(outs);
    check(&dst)?;
    prune(&dst, &keep, "a linear")
}

/// Partial evaluation of `g` (see `SubTransforms::partial_eval` and [`Split`]).
pub(crate) fn partial_eval(g: &Graph, lin_in: &[bool], n_known: usize) -> Result<Split, AdError> {
    let ins = g.inputs();
    let roots: Vec<NodeId> = ins.iter().zip(lin_in).filter(|(_, l)| **l).map(|(i, _)| *i).collect();
    let lin = depends_on(g, &roots);
    let nonlin_ins: Vec<NodeId> = ins.iter().zip(lin_in).filter(|(_, l)| !**l).map(|(i, _)| *i).collect();
    let data = depends_on(g, &nonlin_ins);
    for (k, o) in g.outputs()[..n_known].iter().enumerate() {
        if lin[o.index()] {
            return Err(AdError::Argument(format!(
                "internal: known output {k} of {:?} depends on a linear input",
                g.name
            )));
        }
    }
    // Residuals: input-dependent known values that linear nodes or unknown outputs read.
    // Values that depend on no input (constants, iotas, their broadcasts) are recomputed.
    let mut is_res = vec![false; g.nodes().len()];
    let mut res = vec![];
    let mut mark = |x: NodeId, is_res: &mut Vec<bool>| {
        if !lin[x.index()] && data[x.index()] && !is_res[x.index()] {
            is_res[x.index()] = true;
            res.push(x);
        }
    };
    for (i, n) in g.nodes().iter().enumerate() {
        if lin[i] && !matches!(n.op, Op::Input { .. }) {
            for &x in &n.inputs {
                mark(x, &mut is_res);
            }
        }
    }
    for &o in &g.outputs()[n_known..] {
        mark(o, &mut is_res);
    }
    // Known graph: the non-linear nodes, outputs [known outputs, residuals].
    let mut known = Graph::new(format!("{}_known", g.name));
    let mut kmap = vec![NodeId(0); g.nodes().len()];
    let mut kkeep = vec![];
    for &i in &nonlin_ins {
        kmap[i.index()] = known.push_node(g.node(i).clone());
        kkeep.push(kmap[i.index()]);
    }
    for (i, n) in g.nodes().iter().enumerate() {
        if !lin[i] && !matches!(n.op, Op::Input { .. }) {
            let inputs = n.inputs.iter().map(|x| kmap[x.index()]).collect();
            kmap[i] = known.push_node(Node { op: n.op.clone(), inputs, outputs: n.outputs.clone() });
        }
    }
    let kouts = g.outputs()[..n_known].iter().chain(&res).map(|o| kmap[o.index()]).collect();
    known.set_outputs(kouts);
    let known = prune(&known, &kkeep, "a known")?;
    // Unknown graph: inputs [residuals, linear inputs]; const-like and linear nodes.
    let mut unk = Graph::new(format!("{}_linear", g.name));
    let mut umap = vec![None; g.nodes().len()];
    let mut ukeep = vec![];
    for (k, &r) in res.iter().enumerate() {
        let v = unk.input(&format!("res{k}"), g.shape(r).clone());
        umap[r.index()] = Some(v);
        ukeep.push(v);
    }
    for &r in &roots {
        let v = unk.push_node(g.node(r).clone());
        umap[r.index()] = Some(v);
        ukeep.push(v);
    }
    for (i, n) in g.nodes().iter().enumerate() {
        if umap[i].is_some() || matches!(n.op, Op::Input { .. }) || (!lin[i] && data[i]) {
            continue;
        }
        let inputs: Option<Vec<NodeId>> = n.inputs.iter().map(|x| umap[x.index()]).collect();
        let inputs = inputs.ok_or_else(|| {
            AdError::Argument(format!(
                "internal: a linear node of {:?} reads a known value that is not a residual",
                g.name
            ))
        })?;
        umap[i] = Some(unk.push_node(Node { op: n.op.clone(), inputs, outputs: n.outputs.clone() }));
    }
    let uouts: Option<Vec<NodeId>> = g.outputs()[n_known..].iter().map(|o| umap[o.index()]).collect();
    unk.set_outputs(uouts.ok_or_else(|| AdError::Argument("internal: unknown output not computed".into()))?);
    let unknown = prune(&unk, &ukeep, "an unknown")?;
    Ok(Split { known, unknown, n_res: res.len() })
}
