//! The runtime's error type: every failure a user can cause, with the names and shapes needed
//! to fix it.

use crate::Device;
use rlx_ir::{DType, IrError};
use thiserror::Error;

/// Errors from compiling or running a graph.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum Error {
    /// The graph is invalid (shape mismatch, bad axis, ...): names the node, op and shapes.
    #[error(transparent)]
    Ir(#[from] IrError),
    /// A name passed to `run` / `set_param` is neither an input nor a param.
    #[error("{name:?} is not an input or param of graph {graph:?} (inputs: {inputs:?}, params: {params:?})")]
    UnknownName {
        /// The name given.
        name: String,
        /// Graph name.
        graph: String,
        /// Declared inputs.
        inputs: Vec<String>,
        /// Declared params.
        params: Vec<String>,
    },
    /// `set_param` was given the name of an input (inputs are fed to `run`).
    #[error("{name:?} is an input, not a param: pass it to run (params: {params:?})")]
    NotAParam {
        /// The name given.
        name: String,
        /// Declared params.
        params: Vec<String>,
    },
    /// An input was not fed.
    #[error("input {0:?} was not given to run")]
    MissingInput(String),
    /// A param was never set.
    #[error("param {0:?} was never set (call set_param, or pass it to run)")]
    MissingParam(String),
    /// A buffer's length does not match the declared shape.
    #[error("{name:?}: declared {declared} needs {}{expected} elements, got {got}", if *multiple { "a multiple of " } else { "" })]
    BufferLength {
        /// Input or param name.
        name: String,
        /// Declared type.
        declared: String,
        /// Elements needed.
        expected: usize,
        /// Elements given.
        got: usize,
        /// True when a symbolic dim makes any multiple of `expected` valid.
        multiple: bool,
    },
    /// A tensor's dtype differs from the declaration.
    #[error("{name:?}: declared dtype {expected}, got {got}")]
    DTypeMismatch {
        /// Input or param name.
        name: String,
        /// Declared dtype.
        expected: DType,
        /// Given dtype.
        got: DType,
    },
    /// A tensor's dims differ from the declaration.
    #[error("{name:?}: declared {declared}, got dims {got:?}")]
    ShapeMismatch {
        /// Input or param name.
        name: String,
        /// Declared type.
        declared: String,
        /// Given dims.
        got: Vec<usize>,
    },
    /// A compiler pass broke the graph (a compiler bug; the message names the pass).
    #[error("compiler: {0}")]
    Compile(String),
    /// The device is not built in or not present.
    #[error("device {0} is not available in this build or on this machine")]
    DeviceUnavailable(Device),
    /// The backend failed.
    #[error("{device} backend: {msg}")]
    Backend {
        /// The device.
        device: Device,
        /// What failed.
        msg: String,
    },
}

/// Shorthand result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<rlx_compile::CompileError> for Error {
    fn from(e: rlx_compile::CompileError) -> Error {
        match e {
            rlx_compile::CompileError::Ir(e) => Error::Ir(e),
            other => Error::Compile(other.to_string()),
        }
    }
}
