//! HIR: check the graph (a recorded builder error, operand ids, every node's type against its
//! op's rule) before anything rewrites it.

use crate::{CompileError, PassOptions, PassStats};
use rlx_ir::Graph;

/// Verify `g`; changes nothing. Errors: [`CompileError::Ir`] naming the node, op and shapes.
pub fn run(g: &mut Graph, _opts: &PassOptions) -> Result<PassStats, CompileError> {
    rlx_ir::verify(g)?;
    let n = g.nodes().len();
    Ok(PassStats { changed: 0, nodes_before: n, nodes_after: n })
}
