//! Reference interpreter: runs a graph node by node with each op's reference evaluation.
//! Slow and simple on purpose; it is the oracle for backends and passes.

use crate::{Graph, IrError, Op, Tensor, bind_symbols, specialize};
use std::collections::HashMap;

/// Evaluate `g` with named feeds for every input and param.
///
/// Errors: a missing or unknown name, a feed whose dtype or dims differ from the declaration,
/// and any op's evaluation error.
pub fn evaluate(g: &Graph, feeds: &HashMap<String, Tensor>) -> Result<Vec<Tensor>, IrError> {
    for k in feeds.keys() {
        if g.input_by_name(k).is_none() && g.param_by_name(k).is_none() {
            return Err(IrError::Invalid(format!("{k:?} is neither an input nor a param of {:?}", g.name)));
        }
    }
    let dims: Vec<(&str, &[usize])> = g
        .inputs()
        .iter()
        .filter_map(|&i| {
            let name = g.source_name(i)?;
            feeds.get(name).map(|t| (name, t.shape()))
        })
        .collect();
    let b = bind_symbols(g, &dims)?;
    let sg = specialize(g, &b)?;
    run(&sg, |name| feeds.get(name).cloned())
}

/// Evaluate a sub-graph with positional arguments for its inputs (params are not allowed).
pub fn evaluate_args(g: &Graph, args: &[&Tensor]) -> Result<Vec<Tensor>, IrError> {
    if args.len() != g.inputs().len() || !g.params().is_empty() {
        return Err(IrError::Invalid(format!(
            "sub-graph {:?} takes {} inputs and no params; given {} arguments",
            g.name,
            g.inputs().len(),
            args.len()
        )));
    }
    let mut feeds = HashMap::new();
    for (&id, a) in g.inputs().iter().zip(args) {
        feeds.insert(g.source_name(id).unwrap_or_default().to_string(), (*a).clone());
    }
    evaluate(g, &feeds)
}

fn run(g: &Graph, feed: impl Fn(&str) -> Option<Tensor>) -> Result<Vec<Tensor>, IrError> {
    let mut vals: Vec<Vec<Tensor>> = Vec::with_capacity(g.nodes().len());
    for n in g.nodes() {
        let v = match &n.op {
            Op::Input { name } | Op::Param { name } => {
                let t = feed(name).ok_or_else(|| IrError::Invalid(format!("no value fed for {name:?}")))?;
                let want = n.ty();
                if t.dtype() != want.dtype || Some(t.shape().to_vec()) != want.static_dims() {
                    return Err(IrError::Invalid(format!(
                        "{name:?}: declared {want}, fed {}{:?}",
                        t.dtype(),
                        t.shape()
                    )));
                }
                vec![t]
            }
            Op::GetTupleElement { index } => vec![vals[n.inputs[0].index()][*index].clone()],
            op => {
                let ins: Vec<&Tensor> = n.inputs.iter().map(|i| &vals[i.index()][0]).collect();
                let mut outs = n
                    .outputs
                    .iter()
                    .map(|s| {
                        let d = s.static_dims().ok_or_else(|| IrError::Eval {
                            op: op.name(),
                            msg: format!("result type {s} is still symbolic"),
                        })?;
                        Ok(Tensor::zeros(&d, s.dtype))
                    })
                    .collect::<Result<Vec<_>, IrError>>()?;
                op.eval_into(&ins, &mut outs)?;
                outs
            }
        };
        vals.push(v);
    }
    Ok(g.outputs().iter().map(|o| vals[o.index()][0].clone()).collect())
}
