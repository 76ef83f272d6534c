//! `rlx-cpu`: the CPU backend and numerical oracle of RLX.
//!
//! [`CpuExecutable::compile`] takes a verified graph with static shapes (the runtime
//! specializes symbolic dims and inlines composites without a native kernel first), plans one
//! preallocated buffer per value, and picks a kernel per node: a fast kernel where one exists
//! (see [`kernels`]), else the op's reference evaluation from `rlx-ir`. [`CpuExecutable::run`]
//! then executes the steps without allocating beyond the returned outputs.
#![warn(missing_docs)]
// The kernel modules' docs are for contributors: they link to the private helpers they describe.
#![allow(rustdoc::private_intra_doc_links)]

mod executor;
mod fpenv;
mod inplace;
pub mod kernels;

pub use executor::{CpuError, CpuExecutable, CpuOptions, StepInfo, StepProfile};
pub use fpenv::flushes_denormals;
pub use kernels::simd::{SimdLevel, advise_huge_pages};
pub use rlx_compile::lir::{LirModule, LirOptions};

/// Composites this backend runs with a native kernel (all others are inlined).
pub fn native_composites() -> &'static [&'static str] {
    kernels::NATIVE_COMPOSITES
}
