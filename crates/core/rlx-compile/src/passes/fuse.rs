//! MIR: elementwise fusion. Maximal DAGs of elementwise ops over one output shape become one
//! composite named [`FUSED_ELEMENTWISE`] whose body is the original sub-graph, so a backend
//! with a fused kernel runs it in one pass over memory and every other consumer (the reference
//! interpreter, autodiff, other backends) runs the body unchanged.
//!
//! Rules:
//! - Members: `unary`, `binary`, `compare`, `select`, `convert_element_type`, `stop_gradient`
//!   and `broadcast_in_dim`, whose result has the region's dims (operands may be smaller and
//!   broadcast into it; they are read from outside the region), plus trailing reductions
//!   (`reduce_sum` / `reduce_max` over the last axis or over all axes) as terminal members: a
//!   region holds reductions over one axis set only, and nothing in the region reads them.
//! - Values are `f32` or `bool` only (the registers of the CPU kernel); other dtypes stay
//!   unfused. Scalar constants read by a region are copied into its body.
//! - A member read outside the region, or a graph output, is a result of the composite (it is
//!   materialized, never recomputed). A node joins a region only when none of its operands
//!   from outside depends on the region, and two regions merge only when neither depends on
//!   the other, so the fused graph stays acyclic.
//! - Regions of a single member stay as they are (their own kernel is already one pass).

use crate::{CompileError, PassOptions, PassStats};
use rlx_ir::ops::ReduceOp;
use rlx_ir::{DType, Graph, Node, NodeId, Op};
use std::collections::BTreeSet;

/// Name of the composite the pass emits.
pub const FUSED_ELEMENTWISE: &str = "fused_elementwise";

/// Regions under construction: union-find over region ids, with each root's members.
struct Regions<'g> {
    g: &'g Graph,
    parent: Vec<usize>,
    /// Per root: member node indices, ascending.
    members: Vec<Vec<usize>>,
    /// Per root: the reduced axes of its reductions, when it has any.
    red_axes: Vec<Option<Vec<usize>>>,
    /// Region of each node (possibly a stale id: go through `find`).
    region: Vec<Option<usize>>,
    /// Reductions: members nothing in their region may read.
    terminal: Vec<bool>,
}

impl Regions<'_> {
    fn find(&mut self, mut r: usize) -> usize {
        while self.parent[r] != r {
            self.parent[r] = self.parent[self.parent[r]];
            r = self.parent[r];
        }
        r
    }
    fn root_of(&mut self, x: usize) -> Option<usize> {
        self.region[x].map(|r| self.find(r))
    }
    fn new_region(&mut self) -> usize {
        self.parent.push(self.parent.len());
        self.members.push(vec![]);
        self.red_axes.push(None);
        self.parent.len() - 1
    }
    fn join(&mut self, i: usize, r: usize) {
        self.region[i] = Some(r);
        self.members[r].push(i);
    }
    /// Merge root `r` into root `t`.
    fn merge(&mut self, r: usize, t: usize) {
        self.parent[r] = t;
        let mut m = std::mem::take(&mut self.members[r]);
        self.members[t].append(&mut m);
        self.members[t].sort_unstable();
        if self.red_axes[t].is_none() {
            self.red_axes[t] = self.red_axes[r].take();
        }
    }
    /// Operands of root `r`'s members that lie outside it.
    fn outside_operands(&mut self, r: usize) -> Vec<usize> {
        let mut v = vec![];
        for m in self.members[r].clone() {
            for x in self.g.nodes()[m].inputs.iter().map(|x| x.index()) {
                if self.root_of(x) != Some(r) {
                    v.push(x);
                }
            }
        }
        v
    }
    /// True when computing any of `start` needs a member of root `target`, once regions are
    /// whole units (a node of region `q` needs every operand of every member of `q`).
    fn reaches(&mut self, start: &[usize], target: usize) -> bool {
        let n = self.g.nodes().len();
        let mut seen = vec![false; n];
        let mut seen_region = vec![false; self.parent.len()];
        let mut stack: Vec<usize> = start.to_vec();
        while let Some(v) = stack.pop() {
            if std::mem::replace(&mut seen[v], true) {
                continue;
            }
            match self.root_of(v) {
                Some(q) if q == target => return true,
                Some(q) if !seen_region[q] => {
                    seen_region[q] = true;
                    for &m in &self.members[q] {
                        stack.extend(self.g.nodes()[m].inputs.iter().map(|x| x.index()));
                    }
                }
                _ => stack.extend(self.g.nodes()[v].inputs.iter().map(|x| x.index())),
            }
        }
        false
    }
}

/// Why an op runs as its own pass over memory instead of inside a neighbour's fused loop: a
/// limitation of the fusion rules, not a dependence (an op that needs a whole reduction or a
/// matmul of the loop's values cannot join it in any compiler, and is not reported).
#[derive(Clone, Debug, PartialEq)]
pub enum MissReason {
    /// The op's values (result or operands) are of this floating dtype (f16, bf16, f64); fused
    /// loops hold f32 and bool. (Integer ops, mostly shape arithmetic, are not reported.)
    DType(DType),
    /// Only `reduce_sum` and `reduce_max` join the loop that produces their operand.
    ReduceKind(ReduceOp),
    /// Only a reduction over the last axis or over all axes joins its producer's loop.
    ReduceAxes(Vec<usize>),
    /// The producer's loop already ends in a reduction over other axes.
    ReduceAxesTaken {
        /// The axes the loop reduces.
        taken: Vec<usize>,
        /// The axes this reduction reduces.
        axes: Vec<usize>,
    },
    /// A `reshape` / `transpose` between two elementwise ops: each side is its own loop.
    Layout {
        /// The elementwise consumer on the other side.
        consumer: NodeId,
    },
    /// A `dot_general` whose elementwise consumer is not applied as its epilogue because the
    /// product is also read by this node (`None`: it is a graph output).
    ProductShared {
        /// The other reader.
        reader: Option<NodeId>,
    },
}

/// One op kept out of a fused loop ([`missed_fusions`]).
#[derive(Clone, Debug, PartialEq)]
pub struct MissedFusion {
    /// The op that runs on its own (for [`MissReason::ProductShared`]: the `dot_general`).
    pub node: NodeId,
    /// The neighbour whose loop it would have joined.
    pub next_to: NodeId,
    /// Why it did not.
    pub reason: MissReason,
}

impl MissedFusion {
    /// One line for `rlx check`, naming nodes as `%3 (exp)`.
    pub fn message(&self, g: &Graph) -> String {
        let at = |id: NodeId| format!("{id} ({})", g.node(id).op.name());
        let next = at(self.next_to);
        match &self.reason {
            MissReason::DType(d) => format!(
                "runs as its own pass instead of in one loop with {next}: its values are {d}, fused loops hold f32 and bool only"
            ),
            MissReason::ReduceKind(op) => format!(
                "reduce_{} makes its own pass over {next}: only reduce_sum and reduce_max join the loop that produces their operand",
                op.name()
            ),
            MissReason::ReduceAxes(axes) => format!(
                "reduces axes {axes:?} in its own pass over {next}: only a reduction over the last axis or over all axes joins the loop that produces its operand"
            ),
            MissReason::ReduceAxesTaken { taken, axes } => format!(
                "reduces axes {axes:?} in its own pass over {next}: that loop already ends in a reduction over axes {taken:?}"
            ),
            MissReason::Layout { consumer } => format!(
                "splits the elementwise ops {next} and {} into two passes over memory (fused loops do not reach through a reshape or transpose)",
                at(*consumer)
            ),
            MissReason::ProductShared { reader } => {
                let why = match reader {
                    Some(r) => format!("also read by {}", at(*r)),
                    None => "also a graph output".into(),
                };
                format!(
                    "the product is {why}, so it is written to memory and {next} runs as its own pass instead of as this matmul's epilogue"
                )
            }
        }
    }
}

/// Ops of `g` that a limitation of the fusion rules keeps out of a neighbour's fused loop (or
/// a matmul's epilogue), in node order per kind: what `rlx check` reports as hints (it passes
/// the graph the fusion pass would see: the HIR stage and the MIR passes before `fuse` run
/// first, so folded or simplified ops are not reported). Node ids are `g`'s. `g` must pass
/// [`rlx_ir::verify`].
pub fn missed_fusions(g: &Graph) -> Vec<MissedFusion> {
    let mut missed = vec![];
    let region = plan(g, &mut missed);
    let nodes = g.nodes();
    // Dead nodes never run (DCE removes them): they neither get nor cause a hint.
    let mut live = vec![false; nodes.len()];
    let mut stack: Vec<usize> = g.outputs().iter().map(|o| o.index()).collect();
    while let Some(i) = stack.pop() {
        if !std::mem::replace(&mut live[i], true) {
            stack.extend(nodes[i].inputs.iter().map(|x| x.index()));
        }
    }
    let mut consumers: Vec<Vec<usize>> = vec![vec![]; nodes.len()];
    for (i, n) in nodes.iter().enumerate().filter(|&(i, _)| live[i]) {
        for x in &n.inputs {
            if !consumers[x.index()].contains(&i) {
                consumers[x.index()].push(i);
            }
        }
    }
    let ew = |i: usize| !nodes[i].is_tuple() && elementwise_member(&nodes[i]);
    let fusible = |i: usize| ew(i) && fusible_values(g, &nodes[i]);
    for (i, n) in nodes.iter().enumerate() {
        let id = NodeId(i as u32);
        if ew(i) && !fusible(i) && !matches!(n.op, Op::ConvertElementType(_)) {
            // A neighbour over the same dims that is elementwise too.
            let dims = &n.ty().dims;
            let next = n.inputs.iter().map(|x| x.index()).chain(consumers[i].iter().copied());
            let d = std::iter::once(n.ty().dtype).chain(n.inputs.iter().map(|&x| g.shape(x).dtype));
            // Integer ops are mostly shape arithmetic on a few elements: only floats are hints.
            let d = d.filter(|&d| !fusible_dtype(d)).find(|d| d.is_float());
            let mut next = next.filter(|&j| ew(j) && &nodes[j].ty().dims == dims);
            if let (Some(d), Some(j)) = (d, next.next()) {
                missed.push(MissedFusion { node: id, next_to: NodeId(j as u32), reason: MissReason::DType(d) });
            }
        }
        let layout = matches!(n.op, Op::Reshape { .. } | Op::Transpose { .. }) && fusible(n.inputs[0].index());
        if let Some(&c) = consumers[i].iter().find(|&&c| layout && fusible(c)) {
            let reason = MissReason::Layout { consumer: NodeId(c as u32) };
            missed.push(MissedFusion { node: id, next_to: n.inputs[0], reason });
        }
    }
    super::epilogue::missed(g, &region, &consumers, &mut missed);
    missed.retain(|m| live[m.node.index()]);
    missed
}

fn fusible_dtype(d: DType) -> bool {
    matches!(d, DType::F32 | DType::Bool)
}

/// True when `n`'s result and operands are values a fused loop holds (f32 / bool, no tuples).
fn fusible_values(g: &Graph, n: &Node) -> bool {
    fusible_dtype(n.ty().dtype) && n.inputs.iter().all(|&x| !g.node(x).is_tuple() && fusible_dtype(g.shape(x).dtype))
}

/// True for the non-reduction members of a region: elementwise ops and `broadcast_in_dim`.
fn elementwise_member(n: &Node) -> bool {
    n.op.is_elementwise() || matches!(n.op, Op::BroadcastInDim { .. })
}

/// Fuse elementwise regions of `g`; `changed` counts the composites created.
pub fn run(g: &mut Graph, opts: &PassOptions) -> Result<PassStats, CompileError> {
    let before = g.nodes().len();
    if !opts.fuse {
        return Ok(crate::rebuild::stats(before, g, 0));
    }
    let root = plan(g, &mut vec![]);
    let regions: BTreeSet<usize> = root.iter().flatten().copied().collect();
    if regions.is_empty() {
        return Ok(crate::rebuild::stats(before, g, 0));
    }
    *g = emit(g, &root);
    crate::passes::dce::run(g, opts)?;
    Ok(crate::rebuild::stats(before, g, regions.len()))
}

/// The fused region of each node of `g` (`None`: the node runs as its own kernel; regions of
/// one member are `None` too), by the rules in the module docs; `missed` gets the ops a
/// limitation of those rules keeps out of a neighbour's region (see [`MissReason`]).
pub fn plan(g: &Graph, missed: &mut Vec<MissedFusion>) -> Vec<Option<usize>> {
    let n = g.nodes().len();
    let mut rs = Regions {
        g,
        parent: vec![],
        members: vec![],
        red_axes: vec![],
        region: vec![None; n],
        terminal: vec![false; n],
    };
    for (i, node) in g.nodes().iter().enumerate() {
        if node.is_tuple() || !fusible_values(g, node) {
            continue;
        }
        let is_ew = elementwise_member(node);
        if let Op::Reduce { op, axes } = &node.op {
            // A reduction joins its operand's region when it reduces the last axis or all axes.
            let x = node.inputs[0].index();
            let rank = g.shape(node.inputs[0]).rank();
            let trailing = rank > 0 && (axes.as_slice() == [rank - 1] || axes.len() == rank);
            let Some(r) = rs.root_of(x) else { continue };
            if rs.terminal[x] || node.ty().dtype != DType::F32 {
                continue;
            }
            let miss = |reason| MissedFusion { node: NodeId(i as u32), next_to: NodeId(x as u32), reason };
            if !matches!(op, ReduceOp::Sum | ReduceOp::Max) {
                missed.push(miss(MissReason::ReduceKind(*op)));
                continue;
            }
            if !trailing {
                // A reduction over no axes (of a scalar, say) reduces nothing: no hint.
                if !axes.is_empty() {
                    missed.push(miss(MissReason::ReduceAxes(axes.clone())));
                }
                continue;
            }
            if let Some(taken) = rs.red_axes[r].as_ref().filter(|a| *a != axes) {
                missed.push(miss(MissReason::ReduceAxesTaken { taken: taken.clone(), axes: axes.clone() }));
                continue;
            }
            rs.red_axes[r] = Some(axes.clone());
            rs.join(i, r);
            rs.terminal[i] = true;
            continue;
        }
        if !is_ew {
            continue;
        }
        let ops: Vec<usize> = node.inputs.iter().map(|x| x.index()).collect();
        // Candidates: regions of non-terminal operands with this node's dims.
        let mut legal: Vec<usize> = vec![];
        for &x in &ops {
            let Some(r) = rs.root_of(x) else { continue };
            if rs.terminal[x] || g.nodes()[x].ty().dims != node.ty().dims || legal.contains(&r) {
                continue;
            }
            // Legal: no terminal of `r` is read here, and no outside operand needs `r`.
            let mut ok = true;
            for &y in &ops {
                let inside = rs.root_of(y) == Some(r);
                if (inside && rs.terminal[y]) || (!inside && rs.reaches(&[y], r)) {
                    ok = false;
                    break;
                }
            }
            if ok {
                legal.push(r);
            }
        }
        // Merge the legal candidates that are mutually independent into the first.
        let mut target: Option<usize> = None;
        for r in legal {
            let Some(t) = target else {
                target = Some(r);
                continue;
            };
            let (t, r) = (rs.find(t), rs.find(r));
            if t == r {
                continue;
            }
            let same_red = rs.red_axes[t].is_none() || rs.red_axes[r].is_none() || rs.red_axes[t] == rs.red_axes[r];
            let (ot, or) = (rs.outside_operands(t), rs.outside_operands(r));
            if same_red && !rs.reaches(&ot, r) && !rs.reaches(&or, t) {
                rs.merge(r, t);
            }
        }
        let r = match target {
            Some(t) => rs.find(t),
            None => rs.new_region(),
        };
        rs.join(i, r);
    }
    // Resolve regions; drop those with one member.
    let roots: Vec<Option<usize>> = (0..n).map(|i| rs.root_of(i)).collect();
    roots.into_iter().map(|r| r.filter(|&r| rs.members[r].len() >= 2)).collect()
}

/// Rebuild `g` with each region replaced by one composite, in an order where every value is
/// defined before use (a region is emitted once all its outside operands are).
fn emit(g: &Graph, root: &[Option<usize>]) -> Graph {
    let nodes = g.nodes();
    let n = nodes.len();
    let mut out = Graph::new(g.name.clone());
    let mut map: Vec<Option<NodeId>> = vec![None; n];
    // Inputs and params first, in order (the runtime feeds them by position).
    for (i, node) in nodes.iter().enumerate() {
        if matches!(node.op, Op::Input { .. } | Op::Param { .. }) {
            map[i] = Some(out.push_node(node.clone()));
        }
    }
    let mut members: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
    for (i, r) in root.iter().enumerate() {
        if let Some(r) = r {
            members.entry(*r).or_default().push(i);
        }
    }
    // Consumers outside each node's region, and graph outputs.
    let mut used_outside = vec![false; n];
    for (i, node) in nodes.iter().enumerate() {
        for &x in &node.inputs {
            if root[x.index()].is_some() && root[x.index()] != root[i] {
                used_outside[x.index()] = true;
            }
        }
    }
    for o in g.outputs() {
        used_outside[o.index()] = true;
    }
    let ctx = Ctx { g, root, members: &members, used_outside: &used_outside };
    for i in 0..n {
        ctx.emit_node(i, &mut out, &mut map);
    }
    let outs = g.outputs().iter().map(|o| map[o.index()].expect("emitted")).collect();
    out.set_outputs(outs);
    if let Some(e) = g.error() {
        out.record_error(e.clone());
    }
    out
}

struct Ctx<'a> {
    g: &'a Graph,
    root: &'a [Option<usize>],
    members: &'a std::collections::BTreeMap<usize, Vec<usize>>,
    used_outside: &'a [bool],
}

impl Ctx<'_> {
    fn is_scalar_const(&self, x: usize) -> bool {
        matches!(&self.g.nodes()[x].op, Op::Constant(t) if t.numel() == 1)
    }

    fn emit_node(&self, i: usize, out: &mut Graph, map: &mut Vec<Option<NodeId>>) {
        if map[i].is_some() {
            return;
        }
        let node = &self.g.nodes()[i];
        let Some(r) = self.root[i] else {
            for &x in &node.inputs {
                self.emit_node(x.index(), out, map);
            }
            let inputs = node.inputs.iter().map(|x| map[x.index()].expect("emitted")).collect();
            map[i] = Some(out.push_node(Node { op: node.op.clone(), inputs, outputs: node.outputs.clone() }));
            return;
        };
        let mem = &self.members[&r];
        // Outside operands, in first-use order; scalar constants are copied into the body.
        let mut ext: Vec<usize> = vec![];
        for &m in mem {
            for &x in &self.g.nodes()[m].inputs {
                let x = x.index();
                if self.root[x] != Some(r) && !self.is_scalar_const(x) && !ext.contains(&x) {
                    ext.push(x);
                }
            }
        }
        for &x in &ext {
            self.emit_node(x, out, map);
        }
        let mut body = Graph::new(FUSED_ELEMENTWISE);
        let mut bmap: std::collections::HashMap<usize, NodeId> = Default::default();
        for (k, &x) in ext.iter().enumerate() {
            bmap.insert(x, body.input(&format!("arg{k}"), self.g.shape(NodeId(x as u32)).clone()));
        }
        let mut results = vec![];
        for &m in mem {
            let mn = &self.g.nodes()[m];
            let mut inputs = vec![];
            for &x in &mn.inputs {
                let x = x.index();
                // Absent: a scalar constant (members are in topological order).
                let id = *bmap.entry(x).or_insert_with(|| body.push_node(self.g.nodes()[x].clone()));
                inputs.push(id);
            }
            let id = body.push_node(Node { op: mn.op.clone(), inputs, outputs: mn.outputs.clone() });
            bmap.insert(m, id);
            if self.used_outside[m] {
                results.push(m);
            }
        }
        body.set_outputs(results.iter().map(|m| bmap[m]).collect());
        let operands: Vec<NodeId> = ext.iter().map(|&x| map[x].expect("emitted")).collect();
        let ids = out.composite(FUSED_ELEMENTWISE, Default::default(), body, &operands);
        for (&m, id) in results.iter().zip(ids) {
            map[m] = Some(id);
        }
        // Members not read outside are never looked up; mark them so they are not re-emitted.
        for &m in mem {
            if map[m].is_none() {
                map[m] = Some(NodeId(0));
            }
        }
    }
}
