//! Rewriting an append-only graph: copy nodes into a new graph through a node map.

use rlx_ir::{Graph, Node, NodeId};

/// How many times each node of `g` is read: once per operand use, once per graph output that
/// names it (a rewrite may fold a node into its reader only where the count is 1).
pub(crate) fn reader_counts(g: &Graph) -> Vec<usize> {
    let mut uses = vec![0usize; g.nodes().len()];
    for x in g.nodes().iter().flat_map(|n| &n.inputs).chain(g.outputs()) {
        uses[x.index()] += 1;
    }
    uses
}

/// A graph under reconstruction: `map[old]` is the new id standing for old node `old`.
pub(crate) struct Rebuild {
    pub out: Graph,
    pub map: Vec<NodeId>,
}

impl Rebuild {
    /// Start rebuilding `g` (same name, no nodes yet).
    pub fn new(g: &Graph) -> Rebuild {
        Rebuild { out: Graph::new(g.name.clone()), map: Vec::with_capacity(g.nodes().len()) }
    }

    /// The new ids of `n`'s operands.
    pub fn inputs(&self, n: &Node) -> Vec<NodeId> {
        n.inputs.iter().map(|i| self.map[i.index()]).collect()
    }

    /// Copy `n` unchanged (operands remapped) and record it as the next old node's image.
    pub fn copy(&mut self, n: &Node) -> NodeId {
        let inputs = self.inputs(n);
        let id = self.out.push_node(Node { op: n.op.clone(), inputs, outputs: n.outputs.clone() });
        self.map.push(id);
        id
    }

    /// Record `id` (already in the new graph) as the next old node's image.
    pub fn alias(&mut self, id: NodeId) {
        self.map.push(id);
    }

    /// The rebuilt graph, with `g`'s outputs mapped and its recorded error kept.
    pub fn finish(mut self, g: &Graph) -> Graph {
        let outs = g.outputs().iter().map(|o| self.map[o.index()]).collect();
        self.out.set_outputs(outs);
        if let Some(e) = g.error() {
            self.out.record_error(e.clone());
        }
        self.out
    }
}

/// Structural node count of the graph (what "never larger" is measured in).
pub(crate) fn stats(before: usize, after: &Graph, changed: usize) -> crate::PassStats {
    crate::PassStats { changed, nodes_before: before, nodes_after: after.nodes().len() }
}
