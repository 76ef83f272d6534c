//! `Graph`: an append-only SSA arena of nodes with named inputs, params and outputs, plus the
//! core builder methods every op family's builders go through.

use crate::{DType, IrError, Op, Shape, Tensor};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Index of a node in its graph. Nodes are topologically ordered by construction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The index as `usize`.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// One operation applied to earlier nodes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// The operation.
    pub op: Op,
    /// Operands, all with smaller ids.
    pub inputs: Vec<NodeId>,
    /// Result types: one for ordinary ops, several for tuple ops (`sort`, `top_k`, `scan`,
    /// `while`, `cond`), whose results are read through `get_tuple_element` nodes.
    pub outputs: Vec<Shape>,
}

impl Node {
    /// The type of the first (usually only) result.
    pub fn ty(&self) -> &Shape {
        &self.outputs[0]
    }
    /// True when the node has several results.
    pub fn is_tuple(&self) -> bool {
        self.outputs.len() != 1
    }
}

/// A computation graph.
///
/// Builder methods (`g.input`, `g.matmul`, `g.add`, ...) return [`NodeId`]s and never fail:
/// the first error (a shape mismatch, a bad axis) is recorded with its node and shapes, and
/// [`Graph::verify`] and compilation report it. `try_*` helpers return it at once.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Graph {
    /// Name, for printing and reports.
    pub name: String,
    pub(crate) nodes: Vec<Node>,
    pub(crate) inputs: Vec<NodeId>,
    pub(crate) params: Vec<NodeId>,
    pub(crate) outputs: Vec<NodeId>,
    #[serde(skip)]
    pub(crate) error: Option<IrError>,
}

impl Graph {
    /// An empty graph.
    pub fn new(name: impl Into<String>) -> Graph {
        Graph { name: name.into(), nodes: vec![], inputs: vec![], params: vec![], outputs: vec![], error: None }
    }

    /// All nodes in topological order.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }
    /// One node.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }
    /// The type of a (single-result) node.
    pub fn shape(&self, id: NodeId) -> &Shape {
        self.nodes[id.index()].ty()
    }
    /// Input nodes in declaration order.
    pub fn inputs(&self) -> &[NodeId] {
        &self.inputs
    }
    /// Param nodes in declaration order.
    pub fn params(&self) -> &[NodeId] {
        &self.params
    }
    /// Output nodes.
    pub fn outputs(&self) -> &[NodeId] {
        &self.outputs
    }
    /// The first error recorded while building, if any.
    pub fn error(&self) -> Option<&IrError> {
        self.error.as_ref()
    }
    /// Name of an input or param node.
    pub fn source_name(&self, id: NodeId) -> Option<&str> {
        match &self.node(id).op {
            Op::Input { name } | Op::Param { name } => Some(name),
            _ => None,
        }
    }
    /// Find an input by name.
    pub fn input_by_name(&self, name: &str) -> Option<NodeId> {
        self.inputs.iter().copied().find(|&i| self.source_name(i) == Some(name))
    }
    /// Find a param by name.
    pub fn param_by_name(&self, name: &str) -> Option<NodeId> {
        self.params.iter().copied().find(|&i| self.source_name(i) == Some(name))
    }

    /// Record the first error; later ones are usually consequences of it.
    pub fn record_error(&mut self, e: IrError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    /// Append a node whose types are already known (used by transforms and deserialization
    /// paths that have verified them). No checking beyond operand ids.
    pub fn push_node(&mut self, node: Node) -> NodeId {
        let id = NodeId(self.nodes.len() as u32);
        if let Some(bad) = node.inputs.iter().find(|i| i.index() >= self.nodes.len()) {
            self.record_error(IrError::Invalid(format!("node {id} uses {bad}, which does not exist yet")));
        }
        match &node.op {
            Op::Input { .. } => self.inputs.push(id),
            Op::Param { .. } => self.params.push(id),
            _ => {}
        }
        self.nodes.push(node);
        id
    }

    /// Append an op, inferring its result types. On a rule violation the error is recorded and
    /// a placeholder node (of `fallback` type, or `f32[]`) keeps the graph buildable.
    pub fn push_multi(&mut self, op: Op, inputs: &[NodeId], hint: Option<&Shape>) -> Vec<NodeId> {
        let id = self.nodes.len();
        let mut bad_input = false;
        for i in inputs {
            if i.index() >= id {
                self.record_error(IrError::Invalid(format!("{} at node %{id}: operand {i} does not exist", op.name())));
                bad_input = true;
            } else if self.nodes[i.index()].is_tuple() {
                self.record_error(IrError::Shape {
                    node: id,
                    op: op.name(),
                    msg: format!("operand {i} is a tuple; read it through get_tuple_element"),
                });
                bad_input = true;
            }
        }
        let outputs = if bad_input {
            vec![hint.cloned().unwrap_or(Shape::scalar(DType::F32))]
        } else {
            let shapes: Vec<&Shape> = inputs.iter().map(|&i| self.shape(i)).collect();
            match op.infer(&shapes, hint) {
                Ok(o) => o,
                Err(msg) => {
                    let name = op.name();
                    let msg = if shapes.is_empty() {
                        msg
                    } else {
                        format!("{msg} (operands: {})", crate::ops::fmt_shapes(&shapes))
                    };
                    self.record_error(IrError::Shape { node: id, op: name, msg });
                    vec![hint.cloned().unwrap_or(Shape::scalar(DType::F32))]
                }
            }
        };
        let n_out = outputs.len();
        let nid = self.push_node(Node { op, inputs: inputs.to_vec(), outputs: outputs.clone() });
        if n_out == 1 {
            return vec![nid];
        }
        (0..n_out)
            .map(|k| {
                self.push_node(Node {
                    op: Op::GetTupleElement { index: k },
                    inputs: vec![nid],
                    outputs: vec![outputs[k].clone()],
                })
            })
            .collect()
    }

    /// Append a single-result op, inferring its type.
    pub fn push(&mut self, op: Op, inputs: &[NodeId]) -> NodeId {
        self.push_multi(op, inputs, None)[0]
    }

    /// Append a single-result op and check its inferred type against a declared one.
    pub fn push_declared(&mut self, op: Op, inputs: &[NodeId], declared: &Shape) -> NodeId {
        let before = self.error.is_some();
        let name = op.name();
        let id = self.push(op, inputs);
        if !before && self.error.is_some() {
            // Operand rule already failed: make the node carry the declared type.
            self.nodes[id.index()].outputs = vec![declared.clone()];
            return id;
        }
        let inferred = self.shape(id).clone();
        if &inferred != declared {
            self.record_error(IrError::DeclaredShape {
                node: id.index(),
                op: name,
                declared: declared.clone(),
                inferred,
            });
        }
        id
    }

    /// Declare a named input fed at each run. Dims may be symbolic (`Dim::dynamic()`).
    pub fn input(&mut self, name: &str, shape: Shape) -> NodeId {
        self.check_name_free(name);
        self.push_multi(Op::Input { name: name.into() }, &[], Some(&shape))[0]
    }

    /// Declare a named parameter (weights), set with `set_param`.
    pub fn param(&mut self, name: &str, shape: Shape) -> NodeId {
        self.check_name_free(name);
        self.push_multi(Op::Param { name: name.into() }, &[], Some(&shape))[0]
    }

    fn check_name_free(&mut self, name: &str) {
        if self.input_by_name(name).is_some() || self.param_by_name(name).is_some() {
            self.record_error(IrError::Invalid(format!("the name {name:?} is declared twice")));
        }
    }

    /// A literal tensor (a `Tensor`, or an `Arc<Tensor>` to share its data with the caller).
    pub fn constant(&mut self, t: impl Into<std::sync::Arc<Tensor>>) -> NodeId {
        self.push(Op::Constant(t.into()), &[])
    }

    /// A rank-0 constant of `dtype` holding `v` (converted with XLA rules).
    pub fn scalar(&mut self, v: f64, dtype: DType) -> NodeId {
        let t = Tensor::from_f64s(&[], dtype, &[v]).expect("rank-0 tensor has one element");
        self.constant(t)
    }

    /// Set the graph's outputs.
    pub fn set_outputs(&mut self, outputs: Vec<NodeId>) {
        for o in &outputs {
            if o.index() >= self.nodes.len() {
                self.record_error(IrError::Invalid(format!("output {o} does not exist")));
            }
        }
        self.outputs = outputs;
    }
}
