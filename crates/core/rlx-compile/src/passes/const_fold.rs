//! MIR: constant folding. A node whose operands are all constants is evaluated at compile time
//! with its op's reference evaluation (`Op::eval_into`, the same oracle the interpreter uses)
//! and replaced by the resulting constant.
//!
//! Not folded: nodes without operands (inputs, params, `iota`, `rng` stay as they are), `rng`
//! and `custom` (never, whatever their operands), control flow (`scan`, `while`, `cond`: their
//! trip counts are unbounded at compile time), tuple results, `broadcast_in_dim` (folding it
//! only materializes a larger copy of a smaller constant), results with more than
//! [`PassOptions::fold_budget`] elements, results whose type is still symbolic, and nodes whose
//! evaluation fails (the error is left for run time, where it names the inputs).

use crate::rebuild::{Rebuild, stats};
use crate::{CompileError, PassOptions, PassStats};
use rlx_ir::{Graph, Node, Op, Tensor};

/// Fold the constant subgraphs of `g`; `changed` counts folded nodes.
pub fn run(g: &mut Graph, opts: &PassOptions) -> Result<PassStats, CompileError> {
    let before = g.nodes().len();
    let mut rb = Rebuild::new(g);
    let mut changed = 0;
    for n in g.nodes() {
        let ins = rb.inputs(n);
        let consts: Option<Vec<&Tensor>> = ins
            .iter()
            .map(|&i| match &rb.out.node(i).op {
                Op::Constant(t) => Some(&**t),
                _ => None,
            })
            .collect();
        let folded = match consts {
            Some(c) if foldable(n, opts.fold_budget) => eval(n, &c),
            _ => None,
        };
        match folded {
            Some(t) => {
                let id = rb.out.constant(t);
                rb.alias(id);
                changed += 1;
            }
            None => {
                rb.copy(n);
            }
        }
    }
    *g = rb.finish(g);
    Ok(stats(before, g, changed))
}

fn foldable(n: &Node, budget: usize) -> bool {
    let excluded = matches!(
        n.op,
        Op::Input { .. }
            | Op::Param { .. }
            | Op::Constant(_)
            | Op::Rng { .. }
            | Op::Custom { .. }
            | Op::Scan(_)
            | Op::While(_)
            | Op::Cond(_)
            | Op::GetTupleElement { .. }
            | Op::BroadcastInDim { .. }
    );
    !excluded && !n.inputs.is_empty() && !n.is_tuple() && n.ty().numel().is_some_and(|k| k <= budget)
}

fn eval(n: &Node, ins: &[&Tensor]) -> Option<Tensor> {
    let ty = n.ty();
    let mut outs = vec![Tensor::zeros(&ty.static_dims()?, ty.dtype)];
    n.op.eval_into(ins, &mut outs).ok()?;
    let t = outs.pop()?;
    (t.dtype() == ty.dtype && Some(t.shape().to_vec()) == ty.static_dims()).then_some(t)
}
