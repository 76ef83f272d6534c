//! Graph plumbing shared by the transforms: sources, dependence marking, dead-code removal.

use rlx_ir::ops::ad::AdError;
use rlx_ir::{Graph, Node, NodeId, Op};

/// Input and param nodes in node order (the order transforms bind them in).
pub(crate) fn sources(g: &Graph) -> Vec<NodeId> {
    g.nodes()
        .iter()
        .enumerate()
        .filter(|(_, n)| matches!(n.op, Op::Input { .. } | Op::Param { .. }))
        .map(|(i, _)| NodeId(i as u32))
        .collect()
}

/// `dep[i]`: node `i` is one of `roots` or uses a node that is.
pub(crate) fn depends_on(g: &Graph, roots: &[NodeId]) -> Vec<bool> {
    let mut dep = vec![false; g.nodes().len()];
    for r in roots {
        dep[r.index()] = true;
    }
    for (i, n) in g.nodes().iter().enumerate() {
        if !dep[i] {
            dep[i] = n.inputs.iter().any(|x| dep[x.index()]);
        }
    }
    dep
}

/// A name not yet declared in `g`, starting from `base`.
pub(crate) fn fresh_name(g: &Graph, base: &str) -> String {
    let mut name = base.to_string();
    while g.input_by_name(&name).is_some() || g.param_by_name(&name).is_some() {
        name.push('_');
    }
    name
}

/// Copy of `g` without nodes the outputs do not need. Params and the inputs in `keep` stay
/// (in node order) even when unused; any other input is dropped, and it is an error for an
/// output to need one (`what` names such inputs in the message).
pub(crate) fn prune(g: &Graph, keep: &[NodeId], what: &str) -> Result<Graph, AdError> {
    let n = g.nodes().len();
    let mut live = vec![false; n];
    for o in g.outputs() {
        live[o.index()] = true;
    }
    for k in keep {
        live[k.index()] = true;
    }
    for i in (0..n).rev() {
        let node = g.node(NodeId(i as u32));
        if matches!(node.op, Op::Param { .. }) {
            live[i] = true;
        }
        if live[i] {
            for x in &node.inputs {
                live[x.index()] = true;
            }
        }
    }
    let mut out = Graph::new(g.name.clone());
    let mut map = vec![NodeId(u32::MAX); n];
    for (i, node) in g.nodes().iter().enumerate() {
        if !live[i] {
            continue;
        }
        if matches!(node.op, Op::Input { .. }) && !keep.contains(&NodeId(i as u32)) {
            let name = g.source_name(NodeId(i as u32)).unwrap_or("?");
            return Err(AdError::Argument(format!("internal: the result still needs {what} input {name:?}")));
        }
        let inputs = node.inputs.iter().map(|x| map[x.index()]).collect();
        map[i] = out.push_node(Node { op: node.op.clone(), inputs, outputs: node.outputs.clone() });
    }
    out.set_outputs(g.outputs().iter().map(|o| map[o.index()]).collect());
    if let Some(e) = g.error() {
        out.record_error(e.clone());
    }
    Ok(out)
}

/// Check a produced graph with the IR verifier.
pub(crate) fn verified(g: Graph) -> Result<Graph, AdError> {
    rlx_ir::verify(&g)?;
    Ok(g)
}
