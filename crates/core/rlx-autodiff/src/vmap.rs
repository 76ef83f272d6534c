//! Batching: trace a graph with a batch dim on some inputs, applying each op's batching rule
//! where an operand is batched and copying the node otherwise.

use crate::Engine;
use crate::graphs::sources;
use rlx_ir::ops::ad::{AdError, Cx, check};
use rlx_ir::{Dim, Graph, Node, NodeId, Op, inline_composites};

/// Batch `g`: source `k` (inputs then params in node order) gains a batch dim of `size` at
/// `in_dims[k]` (missing entries: unbatched). Output `j` is moved to `out_dims[j]`, or must be
/// unbatched where that is `None` (`force_all` batches every output at 0 instead).
pub(crate) fn vmap_graph(
    g: &Graph,
    in_dims: &[Option<usize>],
    out_dims: &[Option<usize>],
    size: &Dim,
    force_all: bool,
) -> Result<Graph, AdError> {
    let src = inline_composites(g, &|_| false);
    let srcs = sources(&src);
    if in_dims.len() > srcs.len() {
        return Err(AdError::Argument(format!("vmap: {} in_axes for {} inputs and params", in_dims.len(), srcs.len())));
    }
    let mut dst = Graph::new(format!("{}_vmap", g.name));
    let mut vals: Vec<Vec<(NodeId, Option<usize>)>> = Vec::with_capacity(src.nodes().len());
    let mut k = 0;
    for n in src.nodes() {
        let v = match &n.op {
            Op::Input { .. } | Op::Param { .. } => {
                let b = in_dims.get(k).copied().flatten();
                k += 1;
                let mut ty = n.ty().clone();
                if let Some(b) = b {
                    if b > ty.rank() {
                        return Err(AdError::Argument(format!(
                            "vmap: in_axis {b} is out of range for input {:?} of type {ty}",
                            src.source_name(NodeId(vals.len() as u32)).unwrap_or("?")
                        )));
                    }
                    ty.dims.insert(b, size.clone());
                }
                let id = dst.push_node(Node { op: n.op.clone(), inputs: vec![], outputs: vec![ty] });
                vec![(id, b)]
            }
            Op::GetTupleElement { index } => vec![vals[n.inputs[0].index()][*index]],
            op => {
                let x: Vec<NodeId> = n.inputs.iter().map(|i| vals[i.index()][0].0).collect();
                let bd: Vec<Option<usize>> = n.inputs.iter().map(|i| vals[i.index()][0].1).collect();
                if bd.iter().all(Option::is_none) {
                    let id = dst.push_node(Node { op: op.clone(), inputs: x, outputs: n.outputs.clone() });
                    if n.is_tuple() {
                        (0..n.outputs.len())
                            .map(|j| {
                                let o = Node {
                                    op: Op::GetTupleElement { index: j },
                                    inputs: vec![id],
                                    outputs: vec![n.outputs[j].clone()],
                                };
                                (dst.push_node(o), None)
                            })
                            .collect()
                    } else {
                        vec![(id, None)]
                    }
                } else {
                    let mut cx = Cx { g: &mut dst, sub: &Engine, linearize: false };
                    let r = op.batch(&mut cx, &x, &bd, size)?;
                    check(&dst)?;
                    r
                }
            }
        };
        vals.push(v);
    }
    let mut outs = vec![];
    for (j, o) in src.outputs().iter().enumerate() {
        let (v, b) = vals[o.index()][0];
        let want = if force_all { Some(0) } else { out_dims.get(j).copied().flatten() };
        let mut cx = Cx { g: &mut dst, sub: &Engine, linearize: false };
        outs.push(match (b, want) {
            (Some(b), Some(w)) => cx.moveaxis(v, b, w),
            (None, Some(w)) => {
                let f = cx.to_front(v, None, size);
                cx.moveaxis(f, 0, w)
            }
            (None, None) => v,
            (Some(_), None) => {
                return Err(AdError::Argument(format!("vmap: output {j} is batched but its out_axis is None")));
            }
        });
    }
    dst.set_outputs(outs);
    check(&dst)?;
    Ok(dst)
}
