//! The front ends (feature `tensor`): the NumPy-style lazy `Tensor` DSL (crate `rlx-tensor`,
//! everything re-exported here) and the `rlx!` graph language ([`crate::rlx`], crate
//! `rlx-macros`). Both lower to the same IR as the `Graph` builder.
//!
//! The spec's three ways to write a model:
//!
//! The builder (quickstart):
//! ```
//! use rlx::prelude::*;
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
//! assert_eq!(out[0], vec![4.0, 6.0]); // `run` returns one Vec<f32> per graph output
//! ```
//!
//! Lazy `Tensor` handles: `(&a + &b).relu()` traces instead of executing, then compiles and
//! runs when read:
//! ```
//! use rlx_tensor::Tensor; // crate `rlx-tensor`, feature `eval`
//!
//! let a = Tensor::from_vec(vec![1.0, 2.0, 3.0], [3]);
//! let c = (&a + &Tensor::ones([3])).relu();
//! assert_eq!(c.to_vec(), vec![2.0, 3.0, 4.0]); // auto-picks the fastest backend
//! ```
//!
//! The `rlx!` language: `@` is matmul with NumPy precedence; shapes, wiring and outputs are
//! inferred:
//! ```
//! use rlx::rlx;
//!
//! let g = rlx! {
//!     graph "mlp";
//!     input x: [?, 784];              // `?` = dynamic batch
//!     param w1: [784, 256];  param b1: [256];
//!     param w2: [256, 10];   param b2: [10];
//!
//!     let h = gelu(x @ w1 + b1);
//!     let y = h @ w2 + b2;
//!     out y;                          // → rlx_ir::Graph
//! };
//! assert_eq!(g.name, "mlp");
//! assert_eq!(g.shape(g.outputs()[0]).to_string(), "f32[?,10]");
//! ```

pub use rlx_tensor::*;
