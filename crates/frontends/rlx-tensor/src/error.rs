//! The crate's error type: every failure names where in the caller's code it arose.

use std::panic::Location;
use thiserror::Error;

/// Errors of the `Tensor` DSL. Each carries the source location of the expression that
/// caused it (the builder call, the transform, or the `to_vec` / `try_to_vec` that ran it).
#[derive(Debug, Clone, Error, PartialEq)]
pub enum TensorError {
    /// An op's operands break its rule (a shape mismatch, a bad axis, a wrong data length):
    /// the message names the op and the shapes.
    #[error("{location}: {source}")]
    Build {
        /// Where the op was written.
        location: &'static Location<'static>,
        /// The IR's error.
        source: rlx_ir::IrError,
    },
    /// A transform (`grad`, `jvp`, `vmap`, ...) failed.
    #[error("{location}: {source}")]
    Transform {
        /// Where the transform was created.
        location: &'static Location<'static>,
        /// The transform's error.
        source: rlx_autodiff::AdError,
    },
    /// Compiling or running failed (device unavailable, backend error).
    #[error("{location}: {source}")]
    Run {
        /// Where evaluation was requested.
        location: &'static Location<'static>,
        /// The runtime's error.
        source: rlx_runtime::Error,
    },
    /// The value depends on a named input or param that has no data (`Tensor::input` /
    /// `Tensor::param` are for building graphs: export them with `to_graph`, or feed data
    /// through a transform such as `jit`).
    #[error("{location}: the value depends on {name:?}, which has no data (export it with to_graph, or pass data)")]
    Unbound {
        /// Where evaluation was requested.
        location: &'static Location<'static>,
        /// The input or param.
        name: String,
    },
    /// Two different tensors carry the same input / param name in one computation.
    #[error("{location}: two different tensors are named {name:?} in one computation")]
    DuplicateName {
        /// Where the graph was built.
        location: &'static Location<'static>,
        /// The name.
        name: String,
    },
}

impl TensorError {
    /// Where the error arose in the caller's code.
    pub fn location(&self) -> &'static Location<'static> {
        match self {
            TensorError::Build { location, .. }
            | TensorError::Transform { location, .. }
            | TensorError::Run { location, .. }
            | TensorError::Unbound { location, .. }
            | TensorError::DuplicateName { location, .. } => location,
        }
    }
}

/// `Result` with [`TensorError`].
pub type Result<T, E = TensorError> = std::result::Result<T, E>;
