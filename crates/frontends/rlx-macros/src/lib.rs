//! `rlx-macros`: the `rlx!` graph language of RLX.
//!
//! ```ignore
//! // (Runs as a doc test of `rlx::tensor` and in rlx-tensor's tests/three_ways.rs.)
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
//!
//! # Syntax
//! - `graph "name";` names the graph (default `"rlx"`).
//! - `input x: [?, 784];` / `param w: [784, 256];` declare inputs and params; a dim is an
//!   integer size, `?` (the dynamic batch symbol) or a symbol name (`batch`); an optional dtype
//!   goes before the brackets (`input ids: i64[?];`, default f32).
//! - `let h = EXPR;` binds a value; `out y, z;` names the outputs (required).
//! - Expressions: `+ - * /` (NumPy broadcasting), `@` (`numpy.matmul`, same precedence as `*`,
//!   left-associative, as in NumPy), unary `-`, parentheses, number literals (scalars of the
//!   other operand's dtype), and calls: `relu gelu gelu_tanh silu sigmoid tanh exp log sqrt
//!   rsqrt abs neg square erf sin cos` (one operand), `softmax(x, axis = -1)`,
//!   `log_softmax(x, axis = -1)`, `layer_norm(x, gamma?, beta?)` (last dim, eps 1e-5),
//!   `rms_norm(x, gamma?)` (last dim, eps 1e-6), `matmul maximum minimum pow` (two operands),
//!   `sum(x, axis)`, `mean(x, axis)`, `max(x, axis)`, `transpose(x)` (last two dims),
//!   `cross_entropy(logits, targets)`.
//!
//! Each statement lowers to the `rlx_ir::Graph` builder call of the same name, so the graph is
//! exactly what the builder would produce. Unknown names, bad dims, a missing `out`, and shape
//! mismatches between static dims (`@`'s contracted dims, broadcasting) are compile errors at
//! the offending span; everything else the builder checks when the graph is verified.
//!
//! The expansion names the IR crate as `rlx_ir` when the calling crate depends on `rlx-ir`,
//! else as `rlx::ir`.

mod ast;
mod lower;

use proc_macro::TokenStream;
use proc_macro_crate::{FoundCrate, crate_name};
use quote::{format_ident, quote};

/// Build an `rlx_ir::Graph` from the `rlx!` language (see the crate docs).
#[proc_macro]
pub fn rlx(input: TokenStream) -> TokenStream {
    let program = syn::parse_macro_input!(input as ast::Program);
    match lower::lower(&program, ir_path()) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// The path of the `rlx_ir` crate as the calling crate sees it.
fn ir_path() -> proc_macro2::TokenStream {
    match crate_name("rlx-ir") {
        Ok(FoundCrate::Itself) => quote! { crate },
        Ok(FoundCrate::Name(n)) => {
            let n = format_ident!("{n}");
            quote! { ::#n }
        }
        Err(_) => match crate_name("rlx") {
            Ok(FoundCrate::Name(n)) => {
                let n = format_ident!("{n}");
                quote! { ::#n::ir }
            }
            _ => quote! { ::rlx::ir },
        },
    }
}
