//! The IR's error type.

use crate::Shape;
use thiserror::Error;

/// Errors from building, verifying, serializing or evaluating a graph.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum IrError {
    /// An op's operands do not satisfy its shape or dtype rule.
    #[error("{op} at node %{node}: {msg}")]
    Shape {
        /// Node index the op was (or would have been) given.
        node: usize,
        /// Op name (`dot_general`, `add`, ...).
        op: String,
        /// What is wrong, naming the shapes involved.
        msg: String,
    },
    /// A shape given explicitly to a builder differs from the inferred one.
    #[error("{op} at node %{node}: declared shape {declared} but the operands give {inferred}")]
    DeclaredShape {
        /// Node index.
        node: usize,
        /// Op name.
        op: String,
        /// Shape the caller declared.
        declared: Shape,
        /// Shape inferred from the operands.
        inferred: Shape,
    },
    /// A buffer's element count does not match its shape.
    #[error("{what}: expected {expected} elements for shape {shape:?}, got {got}")]
    BufferLength {
        /// What the buffer is.
        what: String,
        /// Elements the shape needs.
        expected: usize,
        /// Elements given.
        got: usize,
        /// The shape.
        shape: Vec<usize>,
    },
    /// The graph's structure is broken at one node (an `input` with operands, an empty
    /// name, ...).
    #[error("invalid graph: {op} at node %{node}: {msg}")]
    Node {
        /// Node index.
        node: usize,
        /// Op name.
        op: String,
        /// What is wrong.
        msg: String,
    },
    /// The graph's structure is broken (bad node id, duplicate name, no outputs, ...).
    #[error("invalid graph: {0}")]
    Invalid(String),
    /// Evaluation failed (unsupported dtype for an op, symbolic shape at run time, ...).
    #[error("evaluating {op}: {msg}")]
    Eval {
        /// Op name.
        op: String,
        /// What went wrong.
        msg: String,
    },
    /// JSON (de)serialization failed.
    #[error("serialization: {0}")]
    Serde(String),
}

/// Shorthand result type.
pub type Result<T, E = IrError> = std::result::Result<T, E>;
