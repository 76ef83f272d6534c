//! `rlx-runtime`: the user-facing runtime of RLX.
//!
//! [`Session::new`]`(Device::Cpu)` picks a backend; [`Session::compile`] / [`Session::try_compile`]
//! verify a graph and hand it to the backend; [`CompiledGraph`] holds parameters, specializes
//! symbolic dims per input shape (each specialization compiled once and cached), and runs.
//!
//! ```
//! use rlx_ir::{DType, Graph, Shape};
//! use rlx_runtime::{Device, Session};
//!
//! let mut g = Graph::new("hello");
//! let x = g.input("x", Shape::new(&[1, 4], DType::F32));
//! let w = g.param("w", Shape::new(&[4, 2], DType::F32));
//! let y = g.matmul(x, w, Shape::new(&[1, 2], DType::F32));
//! g.set_outputs(vec![y]);
//!
//! let mut compiled = Session::new(Device::Cpu).compile(g);
//! compiled.set_param("w", &[1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 1.0]);
//! let out = compiled.run(&[("x", &[1.0, 2.0, 3.0, 4.0])]);
//! assert_eq!(out[0], vec![4.0, 6.0]);
//! ```
#![warn(missing_docs)]

mod backend;
mod cache;
mod compiled;
#[cfg(feature = "cpu")]
mod cpu;
mod device;
mod error;
mod options;
mod session;

pub use backend::{Backend, Executable, StepInfo, StepTime, Support};
pub use cache::{Fingerprint, fingerprint};
pub use compiled::CompiledGraph;
pub use device::{Device, fastest_device};
pub use error::{Error, Result};
pub use options::CompileOptions;
pub use rlx_compile::lir::LirModule;
pub use rlx_compile::{CompileReport, Dispatch, DispatchEntry, DispatchReport, PassRecord};
pub use rlx_ir::Tensor;
pub use session::Session;
