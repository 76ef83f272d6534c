//! HIR: replace every composite the backend has no native kernel for by its decomposition
//! (recursively), with [`rlx_ir::inline_composites`]. Composites named in
//! [`PassOptions::native_composites`] stay.

use crate::{CompileError, PassOptions, PassStats};
use rlx_ir::{Graph, Op};

/// Inline the non-native composites of `g`. `changed` counts top-level composites inlined.
pub fn run(g: &mut Graph, opts: &PassOptions) -> Result<PassStats, CompileError> {
    let before = g.nodes().len();
    let changed = g
        .nodes()
        .iter()
        .filter(|n| matches!(&n.op, Op::Composite(c) if !opts.native_composites.contains(&c.name)))
        .count();
    if changed > 0 {
        *g = rlx_ir::inline_composites(g, &|name| opts.native_composites.contains(name));
    }
    Ok(crate::rebuild::stats(before, g, changed))
}
