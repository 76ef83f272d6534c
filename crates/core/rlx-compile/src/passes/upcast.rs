//! MIR: mixed-precision products (XLA's convert-operand folding). An f32 product whose
//! operand is `convert_element_type` of an f16 or bf16 value to f32, read by nothing else,
//! takes the narrow value itself:
//! - a `dot_general` becomes one composite named [`DOT_GENERAL_UPCAST`] whose body is the
//!   convert(s) and the `dot_general`;
//! - a [`DOT_EPILOGUE`] composite's lhs / rhs operand is replaced by the narrow value and its
//!   body starts with the convert.
//!
//! A backend may then read the narrow elements inside its product loop: half the bytes, and no
//! widened copy written and read back (a decoder step over an f16 KV cache converted the
//! whole cache to f32 every step before its two attention products). The body stays the
//! definition, and widening f16 / bf16 to f32 is exact, so results do not change. Runs after
//! [`super::epilogue`] (which only takes plain f32 `dot_general`s).

use super::epilogue::DOT_EPILOGUE;
use crate::rebuild::{Rebuild, reader_counts, stats};
use crate::{CompileError, PassOptions, PassStats};
use rlx_ir::ops::Composite;
use rlx_ir::{DType, Graph, Node, NodeId, Op};

/// Name of the composite the pass makes of a plain `dot_general`.
pub const DOT_GENERAL_UPCAST: &str = "dot_general_upcast";

/// Fold operand upcasts into products; `changed` counts the products rewritten.
pub fn run(g: &mut Graph, opts: &PassOptions) -> Result<PassStats, CompileError> {
    let before = g.nodes().len();
    if !opts.fuse {
        return Ok(stats(before, g, 0));
    }
    let nodes = g.nodes();
    let readers = reader_counts(g);
    // The convert feeding operand `k` (0 = lhs, 1 = rhs) of node `i`, when it folds.
    let upcast = |i: usize, k: usize| -> Option<usize> {
        let x = *nodes[i].inputs.get(k)?;
        let c = &nodes[x.index()];
        let from = g.shape(*c.inputs.first()?).dtype;
        let folds = matches!(c.op, Op::ConvertElementType(DType::F32))
            && matches!(from, DType::F16 | DType::BF16)
            && readers[x.index()] == 1;
        folds.then_some(x.index())
    };
    let product = |n: &Node| match &n.op {
        Op::DotGeneral(_) => !n.is_tuple() && n.ty().dtype == DType::F32 && n.inputs.len() == 2,
        Op::Composite(c) => c.name == DOT_EPILOGUE && n.inputs.len() >= 2,
        _ => false,
    };
    let folds: Vec<[Option<usize>; 2]> = (0..nodes.len())
        .map(|i| if product(&nodes[i]) { [upcast(i, 0), upcast(i, 1)] } else { [None, None] })
        .collect();
    let changed = folds.iter().filter(|f| f.iter().any(Option::is_some)).count();
    if changed == 0 {
        return Ok(stats(before, g, 0));
    }
    let mut rb = Rebuild::new(g);
    for (i, n) in nodes.iter().enumerate() {
        let f = folds[i];
        if f.iter().all(Option::is_none) {
            rb.copy(n);
            continue;
        }
        // Operands: the narrow values in place of the folded converts.
        let mut ins = rb.inputs(n);
        for (k, c) in f.iter().enumerate() {
            if let Some(c) = c {
                ins[k] = rb.map[nodes[*c].inputs[0].index()];
            }
        }
        let narrow = |k: usize| f[k].map(|c| g.shape(nodes[c].inputs[0]).dtype);
        let body = match &n.op {
            Op::Composite(c) => with_converts(&c.body, [narrow(0), narrow(1)]),
            _ => upcast_body(g, n, [narrow(0), narrow(1)]),
        };
        let name = match &n.op {
            Op::Composite(c) => c.name.clone(),
            _ => DOT_GENERAL_UPCAST.into(),
        };
        let op = Op::Composite(Composite { name, attrs: Default::default(), body: Box::new(body) });
        let id = rb.out.push_node(Node { op, inputs: ins, outputs: n.outputs.clone() });
        rb.alias(id);
    }
    *g = rb.finish(g);
    crate::passes::dce::run(g, opts)?;
    Ok(stats(before, g, changed))
}

/// The body of a [`DOT_GENERAL_UPCAST`] replacing `dot_general` node `dn`: inputs `lhs`,
/// `rhs` (in `narrow` dtypes where given), the converts, the product.
fn upcast_body(g: &Graph, dn: &Node, narrow: [Option<DType>; 2]) -> Graph {
    let mut body = Graph::new(DOT_GENERAL_UPCAST);
    let ops: Vec<NodeId> = ["lhs", "rhs"]
        .iter()
        .enumerate()
        .map(|(k, name)| {
            let s = g.shape(dn.inputs[k]);
            body.input(name, rlx_ir::Shape { dims: s.dims.clone(), dtype: narrow[k].unwrap_or(s.dtype) })
        })
        .collect();
    let ops: Vec<NodeId> =
        ops.iter().zip(narrow).map(|(&x, n)| if n.is_some() { body.convert(x, DType::F32) } else { x }).collect();
    let dot = body.push_node(Node { op: dn.op.clone(), inputs: ops, outputs: dn.outputs.clone() });
    body.set_outputs(vec![dot]);
    body
}

/// `body` (a [`DOT_EPILOGUE`]'s) with its inputs 0 / 1 retyped to `narrow` where given and
/// widened by a convert that every former reader of the input reads instead.
fn with_converts(body: &Graph, narrow: [Option<DType>; 2]) -> Graph {
    let nodes = body.nodes();
    let mut out = Graph::new(body.name.clone());
    let mut map = vec![NodeId(0); nodes.len()];
    for (k, &x) in body.inputs().iter().enumerate() {
        let s = body.shape(x);
        let dtype = narrow.get(k).copied().flatten().unwrap_or(s.dtype);
        let name = body.source_name(x).unwrap_or("arg");
        map[x.index()] = out.input(name, rlx_ir::Shape { dims: s.dims.clone(), dtype });
    }
    for (k, &x) in body.inputs().iter().take(2).enumerate() {
        if narrow[k].is_some() {
            map[x.index()] = out.convert(map[x.index()], DType::F32);
        }
    }
    for (i, n) in nodes.iter().enumerate() {
        if matches!(n.op, Op::Input { .. }) {
            continue;
        }
        let inputs = n.inputs.iter().map(|x| map[x.index()]).collect();
        map[i] = out.push_node(Node { op: n.op.clone(), inputs, outputs: n.outputs.clone() });
    }
    out.set_outputs(body.outputs().iter().map(|o| map[o.index()]).collect());
    out
}
