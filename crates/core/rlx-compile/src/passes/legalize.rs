//! HIR: broadcast and dtype legalization. A no-op for now, on purpose:
//!
//! - binary, compare and select broadcast NumPy-style in the IR itself and the CPU kernels
//!   broadcast with strides, so no `broadcast_in_dim` needs to be materialized;
//! - the builders already insert `convert_element_type` for dtype promotion (JAX's lattice),
//!   and `verify` rejects mixed-dtype operands, so every graph reaching this pass is
//!   dtype-legal.
//!
//! Backends that need explicit broadcasts or narrower dtypes (GPU, low precision) add their
//! rewrites here.

use crate::{CompileError, PassOptions, PassStats};
use rlx_ir::Graph;

/// Leave `g` unchanged (see the module docs).
pub fn run(g: &mut Graph, _opts: &PassOptions) -> Result<PassStats, CompileError> {
    let n = g.nodes().len();
    Ok(PassStats { changed: 0, nodes_before: n, nodes_after: n })
}
