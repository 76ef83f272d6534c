//! Structural and type checking of graphs, and specialization of symbolic shapes.

use crate::{Bindings, Dim, Graph, IrError, Node, NodeId, Op, Shape};
use std::collections::HashSet;

/// Check a graph: the builder's recorded error, operand ids, tuple use, unique names, the
/// declared inputs and params (existing nodes of that kind, each once, and every such node
/// declared), outputs, and that every node's recorded types equal what its op's rule infers (recursing
/// into sub-graphs).
pub fn verify(g: &Graph) -> Result<(), IrError> {
    if let Some(e) = &g.error {
        return Err(e.clone());
    }
    let mut names = HashSet::new();
    for (i, n) in g.nodes.iter().enumerate() {
        for inp in &n.inputs {
            if inp.index() >= i {
                let msg = format!("uses {inp}, which is not defined before it");
                return Err(IrError::Node { node: i, op: n.op.name(), msg });
            }
        }
        // A source op's operands would be ignored by every evaluator: a graph read from JSON
        // that gives it some is broken, not fed.
        if n.op.is_source() && !n.inputs.is_empty() {
            let ids: Vec<String> = n.inputs.iter().map(|x| x.to_string()).collect();
            let msg = format!("takes no operands, but has {} ({})", ids.len(), ids.join(", "));
            return Err(IrError::Node { node: i, op: n.op.name(), msg });
        }
        if let Op::Input { name } | Op::Param { name } = &n.op {
            // Inputs are fed and params set by name: "" cannot be given on a command line or in
            // a JSON feed (`--input =x.npy` names nothing).
            if name.is_empty() {
                let msg = "has an empty name; inputs and params are fed by name".into();
                return Err(IrError::Node { node: i, op: n.op.name(), msg });
            }
            if !names.insert(name.clone()) {
                let msg = format!("the name {name:?} is declared twice");
                return Err(IrError::Node { node: i, op: n.op.name(), msg });
            }
        }
        let expected = infer_node(g, i, n, &Bindings::new())?;
        if expected != n.outputs {
            return Err(IrError::Shape {
                node: i,
                op: n.op.name(),
                msg: format!("recorded type {} but the rule gives {}", fmt(&n.outputs), fmt(&expected)),
            });
        }
        for sub in n.op.subgraphs() {
            verify(sub).map_err(|e| IrError::Node {
                node: i,
                op: n.op.name(),
                msg: format!("in its sub-graph: {e}"),
            })?;
        }
    }
    // The declared inputs and params: existing nodes of that kind, each listed once (a graph
    // read from JSON can say anything here).
    for (list, what, a_what) in [(&g.inputs, "input", "an input"), (&g.params, "param", "a param")] {
        let mut seen = HashSet::new();
        for id in list {
            let n = g.nodes.get(id.index()).ok_or_else(|| IrError::Invalid(format!("{what} {id} does not exist")))?;
            let kind_ok = match n.op {
                Op::Input { .. } => what == "input",
                Op::Param { .. } => what == "param",
                _ => false,
            };
            let at = |msg: String| IrError::Node { node: id.index(), op: n.op.name(), msg };
            if !kind_ok {
                return Err(at(format!("in the {what}s list, but not {a_what} node")));
            }
            if !seen.insert(id.index()) {
                return Err(at(format!("listed twice in the {what}s list")));
            }
        }
    }
    // And the other way: every input and param node is listed (an unlisted one could never be
    // fed, and the runtimes look inputs and params up through these lists).
    // (Each list holds nodes of its own kind only, as checked above.)
    let listed: HashSet<usize> = g.inputs.iter().chain(&g.params).map(|id| id.index()).collect();
    for (i, n) in g.nodes.iter().enumerate() {
        let (what, name) = match &n.op {
            Op::Input { name } => ("input", name),
            Op::Param { name } => ("param", name),
            _ => continue,
        };
        if !listed.contains(&i) {
            let msg = format!("{name:?} is missing from the graph's {what}s list");
            return Err(IrError::Node { node: i, op: n.op.name(), msg });
        }
    }
    if g.outputs.is_empty() {
        return Err(IrError::Invalid(format!("graph {:?} has no outputs (call set_outputs)", g.name)));
    }
    for o in &g.outputs {
        if o.index() >= g.nodes.len() {
            return Err(IrError::Invalid(format!("output {o} does not exist")));
        }
        let n = &g.nodes[o.index()];
        if n.is_tuple() {
            let msg = "a graph output, but a tuple; output its get_tuple_element nodes".into();
            return Err(IrError::Node { node: o.index(), op: n.op.name(), msg });
        }
    }
    Ok(())
}

/// Types as a list, `()` for none (a node read from JSON with `"outputs": []`: the message said
/// `recorded type  but the rule gives …`).
fn fmt(s: &[Shape]) -> String {
    if s.is_empty() {
        return "()".into();
    }
    s.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ")
}

/// The types node `i` should have, given its operands' recorded types (bound by `b`).
fn infer_node(g: &Graph, i: usize, n: &Node, b: &Bindings) -> Result<Vec<Shape>, IrError> {
    if let Op::GetTupleElement { index } = n.op {
        let src = n.inputs.first().ok_or_else(|| IrError::Node {
            node: i,
            op: "get_tuple_element".into(),
            msg: "has no operand".into(),
        })?;
        let outs = &g.nodes[src.index()].outputs;
        return outs.get(index).map(|s| vec![s.clone()]).ok_or_else(|| IrError::Shape {
            node: i,
            op: "get_tuple_element".into(),
            msg: format!("index {index} out of range for a {}-tuple", outs.len()),
        });
    }
    for inp in &n.inputs {
        if g.nodes[inp.index()].is_tuple() {
            return Err(IrError::Shape {
                node: i,
                op: n.op.name(),
                msg: format!("operand {inp} is a tuple; read it through get_tuple_element"),
            });
        }
    }
    let ins: Vec<Shape> = n.inputs.iter().map(|x| g.nodes[x.index()].ty().bind(b)).collect();
    let refs: Vec<&Shape> = ins.iter().collect();
    let hint = n.outputs.first().map(|s| s.bind(b));
    n.op.infer(&refs, hint.as_ref()).map_err(|msg| IrError::Shape {
        node: i,
        op: n.op.name(),
        msg: format!("{msg} (operands: {})", fmt(&ins)),
    })
}

/// Bind the symbols of `g`'s inputs from concrete input dims (`(name, dims)` pairs).
///
/// Errors on an unknown input name, a rank mismatch, a static dim that differs, or one symbol
/// bound to two sizes.
pub fn bind_symbols(g: &Graph, shapes: &[(&str, &[usize])]) -> Result<Bindings, IrError> {
    let mut b = Bindings::new();
    for (name, dims) in shapes {
        let id = g
            .input_by_name(name)
            .ok_or_else(|| IrError::Invalid(format!("{:?} is not an input of graph {:?}", name, g.name)))?;
        let decl = g.shape(id);
        if decl.rank() != dims.len() {
            return Err(IrError::Invalid(format!(
                "input {name:?}: declared {decl}, given dims {dims:?} (rank {})",
                dims.len()
            )));
        }
        for (d, &n) in decl.dims.iter().zip(dims.iter()) {
            match d {
                Dim::Static(s) if *s != n => {
                    return Err(IrError::Invalid(format!("input {name:?}: declared {decl}, given dims {dims:?}")));
                }
                Dim::Sym(s) => {
                    if let Some(&prev) = b.get(s)
                        && prev != n
                    {
                        return Err(IrError::Invalid(format!(
                            "input {name:?}: symbol {s} is {n} here but {prev} in another input"
                        )));
                    }
                    b.insert(s.clone(), n);
                }
                _ => {}
            }
        }
    }
    Ok(b)
}

/// A copy of `g` with symbols bound and every node re-typed by its rule (so a binding that
/// makes an op invalid is reported here, naming the node).
pub fn specialize(g: &Graph, b: &Bindings) -> Result<Graph, IrError> {
    if let Some(e) = &g.error {
        return Err(e.clone());
    }
    let mut out = Graph::new(g.name.clone());
    for (i, n) in g.nodes.iter().enumerate() {
        let mut op = n.op.clone();
        // Reshape / broadcast targets may mention symbols: bind them in the parameters too.
        if let Op::Reshape { new_sizes: d } | Op::BroadcastInDim { shape: d, .. } = &mut op {
            for x in d.iter_mut() {
                if let Dim::Sym(s) = x
                    && let Some(&v) = b.get(s.as_str())
                {
                    *x = Dim::Static(v);
                }
            }
        }
        let node = Node { op, inputs: n.inputs.clone(), outputs: n.outputs.iter().map(|s| s.bind(b)).collect() };
        let outputs =
            if node.op.is_source() { node.outputs.clone() } else { infer_node(&out, i, &node, &Bindings::new())? };
        out.push_node(Node { outputs, ..node });
    }
    out.outputs = g.outputs.clone();
    Ok(out)
}

impl Graph {
    /// [`verify`] as a method.
    pub fn verify(&self) -> Result<(), IrError> {
        verify(self)
    }
    /// Ids of all nodes.
    pub fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        (0..self.nodes.len() as u32).map(NodeId)
    }
}

#[cfg(test)]
mod tests {
    use super::verify;
    use crate::{DType, Graph, Shape};

    /// An `Input` / `Param` node that its graph's list leaves out (possible in a graph read from
    /// JSON) is an error naming the node; builder-made graphs list every such node.
    #[test]
    fn unlisted_input_and_param_nodes_are_errors() {
        let mut g = Graph::new("g");
        let x = g.input("x", Shape::new(&[2], DType::F32));
        let w = g.param("w", Shape::new(&[2], DType::F32));
        let y = g.add(x, w);
        g.set_outputs(vec![y]);
        verify(&g).unwrap();
        let mut no_input = g.clone();
        no_input.inputs.clear();
        let e = verify(&no_input).unwrap_err().to_string();
        assert_eq!(e, r#"invalid graph: input at node %0: "x" is missing from the graph's inputs list"#);
        let mut no_param = g.clone();
        no_param.params.clear();
        let e = verify(&no_param).unwrap_err().to_string();
        assert_eq!(e, r#"invalid graph: param at node %1: "w" is missing from the graph's params list"#);
    }

    /// A node with no recorded type reads `()`, not an empty string.
    #[test]
    fn an_empty_recorded_type_reads_as_unit() {
        let mut g = Graph::new("g");
        let x = g.input("x", Shape::new(&[4], DType::F32));
        let y = g.exp(x);
        g.set_outputs(vec![y]);
        g.nodes[1].outputs.clear();
        let e = verify(&g).unwrap_err().to_string();
        assert!(e.contains("recorded type () but the rule gives f32[4]"), "{e}");
    }

    /// An `Input` node with operands, or named "" (both possible in a graph read from JSON), is
    /// a typed error naming the node; `verify` passed both.
    #[test]
    fn an_input_with_operands_or_an_empty_name_is_an_error_naming_it() {
        use crate::{IrError, NodeId};
        let mut g = Graph::new("g");
        let x = g.input("x", Shape::new(&[2], DType::F32));
        let y = g.input("y", Shape::new(&[2], DType::F32));
        let s = g.add(x, y);
        g.set_outputs(vec![s]);
        verify(&g).unwrap();
        let mut operands = g.clone();
        operands.nodes[1].inputs = vec![NodeId(0)];
        let e = verify(&operands).unwrap_err();
        assert_eq!(
            e,
            IrError::Node { node: 1, op: "input".into(), msg: "takes no operands, but has 1 (%0)".into() },
            "{e}"
        );
        assert_eq!(e.to_string(), "invalid graph: input at node %1: takes no operands, but has 1 (%0)");
        let mut unnamed = g.clone();
        unnamed.nodes[1].op = crate::Op::Input { name: String::new() };
        let e = verify(&unnamed).unwrap_err();
        assert!(matches!(&e, IrError::Node { node: 1, op, msg } if op == "input" && msg.contains("empty name")), "{e}");
        // A param too: both are looked up by name.
        let mut p = Graph::new("p");
        let w = p.param("", Shape::new(&[2], DType::F32));
        let n = p.add(w, w);
        p.set_outputs(vec![n]);
        assert!(matches!(verify(&p), Err(IrError::Node { node: 0, .. })), "{:?}", verify(&p));
    }
}
