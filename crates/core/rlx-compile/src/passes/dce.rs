//! MIR: dead-code elimination. Keeps every node a graph output depends on, and every input and
//! param (the runtime feeds them by position, so their list never changes); drops the rest.

use crate::rebuild::{Rebuild, stats};
use crate::{CompileError, PassOptions, PassStats};
use rlx_ir::{Graph, Op};

/// Remove the nodes of `g` no output depends on; `changed` counts removed nodes.
pub fn run(g: &mut Graph, _opts: &PassOptions) -> Result<PassStats, CompileError> {
    let before = g.nodes().len();
    let mut live = vec![false; before];
    for o in g.outputs() {
        live[o.index()] = true;
    }
    for (i, n) in g.nodes().iter().enumerate().rev() {
        if matches!(n.op, Op::Input { .. } | Op::Param { .. }) {
            live[i] = true;
        }
        if live[i] {
            for x in &n.inputs {
                live[x.index()] = true;
            }
        }
    }
    if live.iter().all(|&l| l) {
        return Ok(stats(before, g, 0));
    }
    let mut rb = Rebuild::new(g);
    for (i, n) in g.nodes().iter().enumerate() {
        if live[i] {
            rb.copy(n);
        } else {
            // Never read: any id keeps the map aligned.
            rb.alias(rlx_ir::NodeId(0));
        }
    }
    *g = rb.finish(g);
    let after = g.nodes().len();
    Ok(stats(before, g, before - after))
}
