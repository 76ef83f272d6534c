//! MIR: matmul epilogues. A `dot_general` whose only consumer is an elementwise region (a
//! [`FUSED_ELEMENTWISE`] composite without reductions, or a single unary / binary op) over the
//! product's dims becomes one composite named [`DOT_EPILOGUE`], so a backend applies bias adds,
//! activations and residual adds to each block of the product while it is still in cache.
//!
//! The composite's operands are `(lhs, rhs, the region's other operands…)` and its body is the
//! `dot_general` followed by the region's members (so every other consumer runs it unchanged);
//! its results are the region's results. Rules: the product is f32 from f32 operands, read only
//! by that region and not a graph output (a product that is also an output or read elsewhere
//! stays materialized, unfused).

use super::fuse::{FUSED_ELEMENTWISE, MissReason, MissedFusion};
use crate::rebuild::{Rebuild, stats};
use crate::{CompileError, PassOptions, PassStats};
use rlx_ir::{DType, Graph, Node, NodeId, Op};

/// Name of the composite the pass emits.
pub const DOT_EPILOGUE: &str = "dot_epilogue";

/// Fuse matmul epilogues in `g`; `changed` counts the composites created.
pub fn run(g: &mut Graph, opts: &PassOptions) -> Result<PassStats, CompileError> {
    let before = g.nodes().len();
    if !opts.fuse {
        return Ok(stats(before, g, 0));
    }
    let nodes = g.nodes();
    // Consumer nodes of each value (distinct), and graph outputs.
    let mut consumers: Vec<Vec<usize>> = vec![vec![]; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for x in &n.inputs {
            if !consumers[x.index()].contains(&i) {
                consumers[x.index()].push(i);
            }
        }
    }
    let mut is_output = vec![false; nodes.len()];
    for o in g.outputs() {
        is_output[o.index()] = true;
    }
    // Consumer index -> the dot it absorbs.
    let mut absorb: Vec<Option<usize>> = vec![None; nodes.len()];
    for (d, n) in nodes.iter().enumerate() {
        let Op::DotGeneral(_) = n.op else { continue };
        let f32s = f32_product(g, n);
        if !f32s || n.is_tuple() || is_output[d] || consumers[d].len() != 1 {
            continue;
        }
        let c = consumers[d][0];
        if absorb[c].is_none() && region_body(g, c).is_some_and(|(b, _)| space_is(&b, &n.ty().dims)) {
            absorb[c] = Some(d);
        }
    }
    let changed = absorb.iter().flatten().count();
    if changed == 0 {
        return Ok(stats(before, g, 0));
    }
    let mut rb = Rebuild::new(g);
    for (i, n) in nodes.iter().enumerate() {
        let Some(d) = absorb[i] else {
            rb.copy(n);
            continue;
        };
        let (body, operands) = region_body(g, i).expect("checked above");
        let dn = &nodes[d];
        let mut ins = rb.inputs(dn);
        ins.extend(operands.iter().filter(|&&x| x.index() != d).map(|x| rb.map[x.index()]));
        let body = epilogue_body(g, dn, &body, &operands, d);
        let op = Op::Composite(rlx_ir::ops::Composite {
            name: DOT_EPILOGUE.into(),
            attrs: Default::default(),
            body: Box::new(body),
        });
        let id = rb.out.push_node(Node { op, inputs: ins, outputs: n.outputs.clone() });
        rb.alias(id);
    }
    *g = rb.finish(g);
    crate::passes::dce::run(g, opts)?;
    Ok(stats(before, g, changed))
}

/// Add to `missed` each f32 `dot_general` of `g` with an elementwise consumer over its dims
/// that is not applied as its epilogue because the product is also a graph output or read by
/// another op (the rule in the module docs). `region`: the fused region of each node
/// ([`super::fuse::plan`]); `consumers`: the distinct readers of each node.
pub(crate) fn missed(g: &Graph, region: &[Option<usize>], consumers: &[Vec<usize>], missed: &mut Vec<MissedFusion>) {
    let nodes = g.nodes();
    // After fusion, a consumer in a region is that region's composite.
    let unit = |c: usize| region[c].map_or((false, c), |r| (true, r));
    // A region that ends in a reduction is no epilogue, shared product or not.
    let reduces = |r: usize| (0..nodes.len()).any(|m| region[m] == Some(r) && matches!(nodes[m].op, Op::Reduce { .. }));
    for (d, n) in nodes.iter().enumerate() {
        let Op::DotGeneral(_) = n.op else { continue };
        let f32s = f32_product(g, n);
        if !f32s || n.is_tuple() {
            continue;
        }
        let candidate = consumers[d].iter().copied().find(|&c| {
            let m = &nodes[c];
            m.ty().dims == n.ty().dims
                && m.ty().dtype == DType::F32
                && match region[c] {
                    Some(r) => !reduces(r),
                    None => matches!(m.op, Op::Unary(_) | Op::Binary(_)),
                }
        });
        let Some(c) = candidate else { continue };
        let other = consumers[d].iter().copied().find(|&o| unit(o) != unit(c));
        let output = g.outputs().iter().any(|o| o.index() == d);
        if output || other.is_some() {
            let reader = if output { None } else { other.map(|o| NodeId(o as u32)) };
            missed.push(MissedFusion {
                node: NodeId(d as u32),
                next_to: NodeId(c as u32),
                reason: MissReason::ProductShared { reader },
            });
        }
    }
}

/// True when `n` computes f32 from f32 operands (the products an epilogue may take).
fn f32_product(g: &Graph, n: &Node) -> bool {
    n.inputs.iter().all(|&x| g.shape(x).dtype == DType::F32) && n.ty().dtype == DType::F32
}

/// Node `c` as an elementwise region: its body and operands (a `fused_elementwise` composite
/// without reductions, or a unary / binary op wrapped in a one-member body).
fn region_body(g: &Graph, c: usize) -> Option<(Graph, Vec<NodeId>)> {
    let n = &g.nodes()[c];
    match &n.op {
        Op::Composite(comp) if comp.name == FUSED_ELEMENTWISE => {
            let reduces = comp.body.nodes().iter().any(|m| matches!(m.op, Op::Reduce { .. }));
            (!reduces).then(|| ((*comp.body).clone(), n.inputs.clone()))
        }
        Op::Unary(_) | Op::Binary(_) if n.ty().dtype == DType::F32 => {
            let mut body = Graph::new(FUSED_ELEMENTWISE);
            let args: Vec<NodeId> =
                n.inputs.iter().enumerate().map(|(k, &x)| body.input(&format!("arg{k}"), g.shape(x).clone())).collect();
            let id = body.push_node(Node { op: n.op.clone(), inputs: args, outputs: n.outputs.clone() });
            body.set_outputs(vec![id]);
            Some((body, n.inputs.clone()))
        }
        _ => None,
    }
}

/// True when every non-input member of `body` has dims `dims` (the product's).
fn space_is(body: &Graph, dims: &[rlx_ir::Dim]) -> bool {
    body.nodes().iter().all(|m| matches!(m.op, Op::Input { .. } | Op::Constant(_)) || m.ty().dims == dims)
}

/// The composite body: inputs `lhs, rhs`, then the region's operands other than the product
/// (in order), the `dot_general`, then the region's members reading the product.
fn epilogue_body(g: &Graph, dn: &Node, region: &Graph, operands: &[NodeId], d: usize) -> Graph {
    let mut body = Graph::new(DOT_EPILOGUE);
    let lhs = body.input("lhs", g.shape(dn.inputs[0]).clone());
    let rhs = body.input("rhs", g.shape(dn.inputs[1]).clone());
    let mut arg = vec![];
    for (k, x) in operands.iter().enumerate() {
        arg.push((x.index() != d).then(|| body.input(&format!("arg{k}"), g.shape(*x).clone())));
    }
    let dot = body.push_node(Node { op: dn.op.clone(), inputs: vec![lhs, rhs], outputs: dn.outputs.clone() });
    let mut map: Vec<NodeId> = Vec::with_capacity(region.nodes().len());
    for (i, m) in region.nodes().iter().enumerate() {
        let id = match region.inputs().iter().position(|&x| x.index() == i) {
            Some(k) => arg[k].unwrap_or(dot),
            None => {
                let inputs = m.inputs.iter().map(|x| map[x.index()]).collect();
                body.push_node(Node { op: m.op.clone(), inputs, outputs: m.outputs.clone() })
            }
        };
        map.push(id);
    }
    body.set_outputs(region.outputs().iter().map(|o| map[o.index()]).collect());
    body
}
