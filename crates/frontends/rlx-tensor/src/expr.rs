//! The lazy expression DAG behind `Tensor`: each node mirrors an `rlx_ir::Node` (op, operands,
//! result types) with reference-counted operands, so a value lives exactly as long as some
//! tensor needs it. Ops are recorded by running the ordinary `Graph` builder on a scratch graph
//! ([`record`]), and a set of outputs is turned back into one `Graph` by [`extract`].
//!
//! Design note: the alternative, one growing per-thread `Graph` shared by every tensor, never
//! frees nodes of dead tensors and keeps the first builder error forever; the DAG frees both.

use rlx_ir::{Graph, IrError, Node, NodeId, Op, Shape, Tensor as HostTensor};
use std::collections::HashMap;
use std::rc::Rc;

/// A source of the DAG.
pub(crate) enum Leaf {
    /// Concrete data (`from_vec`, results of `jit`).
    Data(HostTensor),
    /// A named input without data (`Tensor::input`, transform placeholders).
    Input(String),
    /// A named param without data (`Tensor::param`).
    Param(String),
}

/// What a node computes.
pub(crate) enum Kind {
    Leaf(Leaf),
    Op { op: Op, inputs: Vec<Rc<Expr>> },
}

/// One node: what it computes and its result types (several for tuple ops).
pub(crate) struct Expr {
    pub kind: Kind,
    pub outputs: Vec<Shape>,
}

impl Expr {
    pub fn leaf(leaf: Leaf, shape: Shape) -> Rc<Expr> {
        Rc::new(Expr { kind: Kind::Leaf(leaf), outputs: vec![shape] })
    }
    pub fn shape(&self) -> &Shape {
        &self.outputs[0]
    }
}

impl Drop for Expr {
    // Iterative, so dropping a chain of many thousand ops does not overflow the stack.
    fn drop(&mut self) {
        let Kind::Op { inputs, .. } = &mut self.kind else { return };
        let mut stack = std::mem::take(inputs);
        while let Some(e) = stack.pop() {
            if let Ok(mut inner) = Rc::try_unwrap(e)
                && let Kind::Op { inputs, .. } = &mut inner.kind
            {
                stack.append(inputs);
            }
        }
    }
}

fn key(e: &Expr) -> *const Expr {
    e as *const Expr
}

/// Turn every node of `g` into an expression; sources (inputs, params) come from `source`.
/// Returns the expressions of `g`'s outputs.
pub(crate) fn import<E>(
    g: &Graph,
    mut source: impl FnMut(NodeId, &Node) -> Result<Rc<Expr>, E>,
) -> Result<Vec<Rc<Expr>>, E> {
    let mut vals: Vec<Rc<Expr>> = Vec::with_capacity(g.nodes().len());
    for (i, n) in g.nodes().iter().enumerate() {
        let e = match &n.op {
            Op::Input { .. } | Op::Param { .. } => source(NodeId(i as u32), n)?,
            op => {
                let inputs = n.inputs.iter().map(|x| vals[x.index()].clone()).collect();
                Rc::new(Expr { kind: Kind::Op { op: op.clone(), inputs }, outputs: n.outputs.clone() })
            }
        };
        vals.push(e);
    }
    Ok(g.outputs().iter().map(|o| vals[o.index()].clone()).collect())
}

/// Run builder `f` on a scratch graph whose inputs are typed like `operands`, and return the
/// expressions of the nodes it returns. Errors: the first error the builder recorded.
pub(crate) fn record(
    operands: &[Rc<Expr>],
    f: impl FnOnce(&mut Graph, &[NodeId]) -> Vec<NodeId>,
) -> Result<Vec<Rc<Expr>>, IrError> {
    let mut g = Graph::new("op");
    let ins: Vec<NodeId> =
        operands.iter().enumerate().map(|(i, e)| g.input(&format!("operand{i}"), e.shape().clone())).collect();
    let outs = f(&mut g, &ins);
    if let Some(e) = g.error() {
        return Err(e.clone());
    }
    g.set_outputs(outs);
    import(&g, |id, _| Ok(operands[id.index()].clone()))
}

/// How data leaves appear in an extracted graph.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum DataAs {
    /// Inputs named `__data0`, `__data1`, ... (fed at run time: the graph's structure, and so
    /// its compile-cache key, does not depend on the data).
    Inputs,
    /// `constant` nodes (a self-contained graph).
    Constants,
}

/// A graph extracted from expressions.
pub(crate) struct Extracted {
    pub graph: Graph,
    /// Each input / param of `graph` by name, with the leaf it came from.
    pub sources: Vec<(String, Rc<Expr>)>,
}

impl Extracted {
    /// Data to feed for the `__data*` inputs.
    pub fn data_feeds(&self) -> Vec<(&str, &HostTensor)> {
        self.sources
            .iter()
            .filter_map(|(n, e)| match &e.kind {
                Kind::Leaf(Leaf::Data(t)) => Some((n.as_str(), t)),
                _ => None,
            })
            .collect()
    }
    /// The first named input or param that has no data.
    pub fn unbound(&self) -> Option<&str> {
        self.sources.iter().find(|(_, e)| !matches!(e.kind, Kind::Leaf(Leaf::Data(_)))).map(|(n, _)| n.as_str())
    }
}

/// Build the graph computing `outputs`: nodes in depth-first post-order from the outputs
/// (operands in order), so two expressions of the same computation give the same graph.
/// `declare` leaves become the first sources, in order, even when unused.
/// Errors: two different leaves with the same name (the name).
pub(crate) fn extract(
    name: &str,
    outputs: &[Rc<Expr>],
    declare: &[Rc<Expr>],
    data: DataAs,
) -> Result<Extracted, String> {
    let mut g = Graph::new(name);
    let mut ids: HashMap<*const Expr, NodeId> = HashMap::new();
    let mut names: HashMap<String, *const Expr> = HashMap::new();
    let mut sources = vec![];
    let mut n_data = 0;
    let mut leaf = |g: &mut Graph, e: &Rc<Expr>, l: &Leaf| -> Result<NodeId, String> {
        let (op, name) = match l {
            Leaf::Data(t) if data == DataAs::Constants => (Op::Constant(t.clone().into()), None),
            Leaf::Data(_) => {
                n_data += 1;
                let n = format!("__data{}", n_data - 1);
                (Op::Input { name: n.clone() }, Some(n))
            }
            Leaf::Input(n) => (Op::Input { name: n.clone() }, Some(n.clone())),
            Leaf::Param(n) => (Op::Param { name: n.clone() }, Some(n.clone())),
        };
        if let Some(n) = name {
            if names.insert(n.clone(), key(e)).is_some() {
                return Err(n);
            }
            sources.push((n, e.clone()));
        }
        Ok(g.push_node(Node { op, inputs: vec![], outputs: e.outputs.clone() }))
    };
    for e in declare {
        if let Kind::Leaf(l) = &e.kind
            && !ids.contains_key(&key(e))
        {
            let id = leaf(&mut g, e, l)?;
            ids.insert(key(e), id);
        }
    }
    let mut stack: Vec<(&Rc<Expr>, bool)> = outputs.iter().rev().map(|e| (e, false)).collect();
    while let Some((e, expanded)) = stack.pop() {
        if ids.contains_key(&key(e)) {
            continue;
        }
        let id = match &e.kind {
            Kind::Leaf(l) => leaf(&mut g, e, l)?,
            Kind::Op { op, inputs } if expanded => {
                let ins = inputs.iter().map(|i| ids[&key(i)]).collect();
                g.push_node(Node { op: op.clone(), inputs: ins, outputs: e.outputs.clone() })
            }
            Kind::Op { inputs, .. } => {
                stack.push((e, true));
                stack.extend(inputs.iter().rev().filter(|i| !ids.contains_key(&key(i))).map(|i| (i, false)));
                continue;
            }
        };
        ids.insert(key(e), id);
    }
    g.set_outputs(outputs.iter().map(|e| ids[&key(e)]).collect());
    Ok(Extracted { graph: g, sources })
}
