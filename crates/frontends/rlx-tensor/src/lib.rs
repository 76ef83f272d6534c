//! `rlx-tensor`: the NumPy-style lazy `Tensor` DSL of RLX.
//!
//! Operations on [`Tensor`] handles (`&a + &b`, `x.matmul(&w)`, `h.gelu()`, ...) record IR
//! through the ordinary `rlx_ir::Graph` builder instead of computing; [`Tensor::to_vec`]
//! extracts the graph of the value, compiles it (once per graph structure and device, cached
//! per thread), runs it on [`rlx_runtime::fastest_device`] (or the device chosen with
//! [`Tensor::on`]) and returns the values. Transforms on functions ([`grad`],
//! [`value_and_grad`], [`jvp`], [`vmap`], [`jit`]) go through `rlx-autodiff`.
//!
//! ```
//! use rlx_tensor::Tensor; // crate `rlx-tensor`, feature `eval`
//!
//! let a = Tensor::from_vec(vec![1.0, 2.0, 3.0], [3]);
//! let c = (&a + &Tensor::ones([3])).relu();
//! assert_eq!(c.to_vec(), vec![2.0, 3.0, 4.0]); // auto-picks the fastest backend
//! ```
//!
//! Shapes follow NumPy broadcasting; dtypes JAX's promotion lattice (Python scalars are weak:
//! `&x * 2.0` keeps `x`'s dtype). Errors are lazy and located: see [`Tensor`] and
//! [`TensorError`]. [`Tensor::to_graph`] exports the IR of named inputs and params
//! ([`Tensor::input`], [`Tensor::param`]) as an `rlx_ir::Graph`.
#![warn(missing_docs)]

mod error;
mod eval;
mod expr;
mod ops;
mod overload;
mod tensor;
mod transforms;

pub use error::{Result, TensorError};
pub use eval::{cache_len, clear_cache, eval};
pub use rlx_runtime::Device;
pub use tensor::Tensor;
pub use transforms::{grad, jit, jvp, value_and_grad, vmap};
