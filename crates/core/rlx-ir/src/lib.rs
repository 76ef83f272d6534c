//! `rlx-ir`: the RLX tensor IR.
//!
//! - [`DType`], [`Shape`] (static and symbolic dims), the host [`Tensor`];
//! - [`Op`]: a closed set of `jax.lax`-style primitives nested by family (`ops/<family>.rs`
//!   holds each family's parameters, shape rule and reference evaluation side by side);
//! - [`Graph`]: an append-only SSA arena with a builder API that infers shapes and records the
//!   first error; composites (`compose/`) are named regions with their decomposition;
//! - [`verify`], JSON serialization ([`hir_to_json`] / [`hir_from_json`]), a pretty-printer
//!   (`Display` on `Graph`), and a reference interpreter ([`interp`]).
#![warn(missing_docs)]

pub mod compose;
mod dtype;
mod error;
mod freeze;
mod graph;
pub mod inline;
pub mod interp;
pub mod narrow;
pub mod ops;
mod print;
mod serialize;
mod shape;
mod tensor;
mod verify;

pub use dtype::DType;
pub use error::{IrError, Result};
pub use graph::{Graph, Node, NodeId};
pub use inline::inline_composites;
pub use ops::{Attr, Attrs, Op};
pub use serialize::{hir_from_json, hir_to_json};
pub use shape::{Bindings, Dim, IntoDims, Shape, normalize_axis, numel_of, strides_of};
pub use tensor::{Data, Elem, Tensor, convert_elem};
pub use verify::{bind_symbols, specialize, verify};

/// Helper enums of the builder API, at the path the spec imports (`rlx_ir::op::Activation`).
pub mod op {
    pub use crate::compose::{Activation, AttentionLayout, MaskKind, RopeLayout, RopeStyle};
}

/// Re-export so `with_dtype!` works in downstream crates.
pub use half;
