//! Inlining of composite regions: replace a composite node by its decomposition, for backends
//! (and transforms) that have no native kernel for it.

use crate::{Graph, Node, NodeId, Op, Shape};

/// A copy of `g` where every composite for which `keep(name)` is false is replaced by its body
/// (recursively, so composites nested in bodies are handled too). Node ids change; the result
/// computes the same values.
pub fn inline_composites(g: &Graph, keep: &dyn Fn(&str) -> bool) -> Graph {
    let mut out = Graph::new(g.name.clone());
    let mut map: Vec<Vec<NodeId>> = Vec::with_capacity(g.nodes.len());
    for n in &g.nodes {
        let ins: Vec<NodeId> = n.inputs.iter().map(|i| map[i.index()][0]).collect();
        match &n.op {
            Op::Composite(c) if !keep(&c.name) => {
                let body = inline_composites(&c.body, keep);
                let results = splice(&mut out, &body, &ins);
                map.push(results);
            }
            Op::GetTupleElement { index } => {
                // The tuple source may have been an inlined composite: its results are the
                // spliced body outputs.
                let src = &map[n.inputs[0].index()];
                if src.len() > 1 {
                    map.push(vec![src[*index]]);
                } else {
                    let id = out.push_node(Node { op: n.op.clone(), inputs: ins, outputs: n.outputs.clone() });
                    map.push(vec![id]);
                }
            }
            op => {
                let op = match op {
                    Op::Composite(c) => {
                        let mut c = c.clone();
                        c.body = Box::new(inline_composites(&c.body, keep));
                        Op::Composite(c)
                    }
                    other => other.clone(),
                };
                let id = out.push_node(Node { op, inputs: ins, outputs: n.outputs.clone() });
                // A tuple node keeps its own id; its get_tuple_element nodes follow.
                map.push(vec![id]);
            }
        }
    }
    out.outputs = g.outputs.iter().map(|o| map[o.index()][0]).collect();
    out.error = g.error.clone();
    out
}

/// Copy `body`'s nodes into `out` with its inputs replaced by `args`; returns its outputs.
fn splice(out: &mut Graph, body: &Graph, args: &[NodeId]) -> Vec<NodeId> {
    let mut map: Vec<NodeId> = Vec::with_capacity(body.nodes.len());
    let mut next_arg = 0;
    for n in &body.nodes {
        let id = match &n.op {
            Op::Input { .. } => {
                let a = args[next_arg];
                next_arg += 1;
                a
            }
            op => {
                let ins: Vec<NodeId> = n.inputs.iter().map(|i| map[i.index()]).collect();
                // Re-type from the actual operands: a body built for symbolic dims (`?`) is
                // spliced at concrete (or differently named) dims. Where the rule cannot say
                // (shape-parameter ops), the recorded type stands.
                let shapes: Vec<&Shape> = ins.iter().map(|&i| out.shape(i)).collect();
                let outputs = op.infer(&shapes, n.outputs.first()).unwrap_or_else(|_| n.outputs.clone());
                out.push_node(Node { op: op.clone(), inputs: ins, outputs })
            }
        };
        map.push(id);
    }
    body.outputs.iter().map(|o| map[o.index()]).collect()
}
