//! `rlx`: the umbrella crate. `use rlx::prelude::*;` brings in the graph types, `Session`,
//! `Device`, the op enums and `Result`; every workspace crate is reachable as a module
//! (`rlx::ir`, `rlx::runtime`, `rlx::autodiff`).
#![warn(missing_docs)]

pub use rlx_autodiff as autodiff;
pub use rlx_ir as ir;
/// The `rlx!` graph language (feature `tensor`).
#[cfg(feature = "tensor")]
pub use rlx_macros::rlx;
pub use rlx_runtime as runtime;
#[cfg(feature = "tensor")]
pub mod tensor;

/// Any RLX error: the IR's, the runtime's or a transform's.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Building, verifying or serializing a graph failed.
    #[error(transparent)]
    Ir(#[from] rlx_ir::IrError),
    /// Compiling or running failed.
    #[error(transparent)]
    Runtime(#[from] rlx_runtime::Error),
    /// A transform (`grad`, `jvp`, `vmap`, ...) failed.
    #[error(transparent)]
    Autodiff(#[from] rlx_autodiff::AdError),
    /// A `Tensor` DSL expression failed (with the caller's source location).
    #[cfg(feature = "tensor")]
    #[error(transparent)]
    Tensor(#[from] rlx_tensor::TensorError),
}

/// `Result` with [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// IR helper enums (ops, attributes).
pub mod ops {
    pub use rlx_ir::ops::*;
}

/// The common surface in one import.
pub mod prelude {
    pub use crate::{Error, Result};
    pub use rlx_ir::op::Activation;
    pub use rlx_ir::ops::{BinaryOp, CompareOp, ReduceOp, UnaryOp};
    pub use rlx_ir::{DType, Dim, Graph, NodeId, Shape, Tensor};
    #[cfg(feature = "tensor")]
    pub use rlx_macros::rlx;
    pub use rlx_runtime::{CompileOptions, CompiledGraph, Device, Session, fastest_device};
}
