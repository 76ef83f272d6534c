//! Step order: the graph's own order, or a greedy order that lowers peak live memory.

use super::is_step;
use rlx_ir::{Graph, NodeId, Op};

/// The computation steps in node order (the order the graph was built in).
pub fn graph_order(g: &Graph) -> Vec<NodeId> {
    (0..g.nodes().len()).filter(|&i| is_step(&g.nodes()[i].op)).map(|i| NodeId(i as u32)).collect()
}

/// The step that produces node `id`'s storage: itself, or a tuple element's tuple node.
pub(crate) fn producer(g: &Graph, id: NodeId) -> NodeId {
    match g.node(id).op {
        Op::GetTupleElement { .. } => producer(g, g.node(id).inputs[0]),
        _ => id,
    }
}

/// Dependencies of each step: the distinct producing steps of its operands.
pub(crate) fn step_deps(g: &Graph) -> Vec<Vec<usize>> {
    g.nodes()
        .iter()
        .map(|n| {
            if !is_step(&n.op) {
                return vec![];
            }
            let mut d: Vec<usize> =
                n.inputs.iter().map(|&i| producer(g, i).index()).filter(|&p| is_step(&g.nodes()[p].op)).collect();
            d.sort_unstable();
            d.dedup();
            d
        })
        .collect()
}

/// Peak of the sum of live step results when steps run in `order` (a result lives from its
/// step to its last reader; graph outputs never die).
pub fn peak_bytes(g: &Graph, order: &[NodeId], bytes: &[usize]) -> usize {
    let deps = step_deps(g);
    let mut remaining = consumer_counts(g, &deps);
    let pinned = pinned(g);
    let (mut live, mut peak) = (0usize, 0usize);
    for &s in order {
        live += bytes[s.index()];
        peak = peak.max(live);
        for &p in &deps[s.index()] {
            remaining[p] -= 1;
            if remaining[p] == 0 && !pinned[p] {
                live -= bytes[p];
            }
        }
        if remaining[s.index()] == 0 && !pinned[s.index()] {
            live -= bytes[s.index()];
        }
    }
    peak
}

/// The greedy order (each time, the ready step that frees the most bytes net of what it
/// allocates; ties to the lower node id) or the graph's order, whichever peaks lower.
pub fn min_peak(g: &Graph, bytes: &[usize]) -> Vec<NodeId> {
    let base = graph_order(g);
    let greedy = greedy(g, bytes);
    if peak_bytes(g, &greedy, bytes) < peak_bytes(g, &base, bytes) { greedy } else { base }
}

fn consumer_counts(g: &Graph, deps: &[Vec<usize>]) -> Vec<usize> {
    let mut c = vec![0usize; g.nodes().len()];
    for d in deps.iter() {
        for &p in d {
            c[p] += 1;
        }
    }
    c
}

fn pinned(g: &Graph) -> Vec<bool> {
    let mut p = vec![false; g.nodes().len()];
    for &o in g.outputs() {
        p[producer(g, o).index()] = true;
    }
    p
}

fn greedy(g: &Graph, bytes: &[usize]) -> Vec<NodeId> {
    let n = g.nodes().len();
    let deps = step_deps(g);
    let mut remaining = consumer_counts(g, &deps);
    let pinned = pinned(g);
    let mut users: Vec<Vec<usize>> = vec![vec![]; n];
    let mut waiting: Vec<usize> = deps.iter().map(Vec::len).collect();
    for (i, d) in deps.iter().enumerate() {
        for &p in d {
            users[p].push(i);
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| is_step(&g.nodes()[i].op) && waiting[i] == 0).collect();
    let mut order = Vec::with_capacity(ready.len());
    while !ready.is_empty() {
        let score = |i: usize| -> i64 {
            let freed: usize = deps[i].iter().filter(|&&p| remaining[p] == 1 && !pinned[p]).map(|&p| bytes[p]).sum();
            freed as i64 - bytes[i] as i64
        };
        let (k, _) = ready
            .iter()
            .enumerate()
            .max_by(|x, y| score(*x.1).cmp(&score(*y.1)).then(y.1.cmp(x.1)))
            .expect("ready is not empty");
        let s = ready.swap_remove(k);
        order.push(NodeId(s as u32));
        for &p in &deps[s] {
            remaining[p] -= 1;
        }
        for &u in &users[s] {
            waiting[u] -= 1;
            if waiting[u] == 0 {
                ready.push(u);
            }
        }
    }
    order
}
