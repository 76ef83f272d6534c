//! Control flow and regions: `scan`, `while`, `cond`, and composite regions, each carrying
//! sub-graphs whose inputs are their operands in order.
//!
//! Semantics follow `jax.lax.scan`, `jax.lax.while_loop` and `jax.lax.switch` / `lax.cond`:
//! - `scan` with `reverse` visits slices from last to first but stores `ys[i]` at the index of
//!   the slice it came from (as JAX does), so `ys` is in the order of `xs` either way;
//! - `switch` clamps an integer index into `[0, n-1]`; a `bool` predicate needs exactly two
//!   branches and runs branch 0 on `false` (`lax.cond(pred, true_fn, false_fn)` is
//!   `switch(pred, [false_fn, true_fn])`).
//!
//! Sub-graphs are typed independently of the graph that holds them: their input dims may be
//! symbolic (`?`), bound from the operands when the op is typed (so a composite built on a
//! `?`-batched input still types once the outer graph is specialized). A static dim in a
//! sub-graph must equal the operand's; a symbolic one on either side matches anything.
//!
//! The reference evaluation runs the sub-graphs through [`crate::interp::evaluate_args`].

use super::{Attrs, Composite, Op};
use crate::{Bindings, Dim, Graph, IrError, NodeId, Shape, Tensor, with_dtype};
use serde::{Deserialize, Serialize};

/// `lax.scan`: operands are `[consts…, init carries…, xs…]`; the body maps
/// `(consts…, carries…, x slices…) -> (new carries…, ys…)`; results are
/// `[final carries…, stacked ys…]` (ys stacked along a new leading axis of size `length`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScanOp {
    /// The loop body.
    pub body: Box<Graph>,
    /// Number of constant operands.
    pub num_consts: usize,
    /// Number of carried values.
    pub num_carry: usize,
    /// Trip count (the leading dim of every x).
    pub length: usize,
    /// Iterate from the last slice to the first.
    pub reverse: bool,
}

/// `lax.while_loop`: operands are the initial carries; `cond(carries…) -> bool[]`,
/// `body(carries…) -> carries…`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WhileOp {
    /// The condition.
    pub cond: Box<Graph>,
    /// The body.
    pub body: Box<Graph>,
}

/// `lax.switch`: operands are `[index (int scalar, clamped) or bool pred, operands…]`; each
/// branch maps the operands to the results (`false` runs branch 0, as `lax.cond`'s false
/// branch).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CondOp {
    /// The branches.
    pub branches: Vec<Graph>,
}

/// True when two dim lists can describe the same value (equal, or symbolic on either side).
fn dims_compatible(a: &Shape, b: &Shape) -> bool {
    a.dtype == b.dtype
        && a.rank() == b.rank()
        && a.dims.iter().zip(&b.dims).all(|(x, y)| x == y || matches!(x, Dim::Sym(_)) || matches!(y, Dim::Sym(_)))
}

/// Check a sub-graph's inputs against the types given to it (`args`), binding the sub-graph's
/// symbols to the given dims. `what` names the sub-graph in errors ("scan body").
fn bind_inputs(what: &str, g: &Graph, args: &[Shape]) -> Result<Bindings, String> {
    if let Some(e) = g.error() {
        return Err(format!("{what} has an error: {e}"));
    }
    if !g.params().is_empty() {
        return Err(format!("{what} declares params; sub-graphs take everything as inputs"));
    }
    if g.inputs().len() != args.len() {
        return Err(format!("{what} takes {} inputs but is given {}", g.inputs().len(), args.len()));
    }
    let mut b = Bindings::new();
    for (k, (&id, given)) in g.inputs().iter().zip(args).enumerate() {
        let decl = g.shape(id);
        if !dims_compatible(decl, given) {
            return Err(format!("{what} input {k} is declared {decl} but is given {given}"));
        }
        for (d, n) in decl.dims.iter().zip(&given.dims) {
            if let (Dim::Sym(s), Dim::Static(n)) = (d, n) {
                if let Some(&prev) = b.get(s)
                    && prev != *n
                {
                    return Err(format!("{what} input {k}: symbol {s} is {n} here but {prev} in an earlier input"));
                }
                b.insert(s.clone(), *n);
            }
        }
    }
    Ok(b)
}

/// A sub-graph's output types with its symbols bound.
fn output_types(what: &str, g: &Graph, b: &Bindings) -> Result<Vec<Shape>, String> {
    g.outputs()
        .iter()
        .map(|&o| {
            let n = g.nodes().get(o.index()).ok_or_else(|| format!("{what} output {o} does not exist"))?;
            if n.is_tuple() {
                return Err(format!("{what} output {o} is a tuple"));
            }
            Ok(n.ty().bind(b))
        })
        .collect()
}

/// Types a sub-graph returns when given `args`.
fn call_types(what: &str, g: &Graph, args: &[Shape]) -> Result<Vec<Shape>, String> {
    let b = bind_inputs(what, g, args)?;
    output_types(what, g, &b)
}

fn owned(ins: &[&Shape]) -> Vec<Shape> {
    ins.iter().map(|s| (*s).clone()).collect()
}

/// Shape rule of the control family.
pub(crate) fn infer(op: &Op, ins: &[&Shape]) -> Result<Vec<Shape>, String> {
    match op {
        Op::Scan(s) => infer_scan(s, ins),
        Op::While(w) => {
            let carries = owned(ins);
            let c = call_types("while cond", &w.cond, &carries)?;
            if c.len() != 1 || c[0].rank() != 0 || c[0].dtype != crate::DType::Bool {
                let got = c.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", ");
                return Err(format!("while cond must return one bool[] but returns ({got})"));
            }
            let out = call_types("while body", &w.body, &carries)?;
            if out.len() != carries.len() {
                return Err(format!("while body returns {} values for {} carries", out.len(), carries.len()));
            }
            for (k, (o, c)) in out.iter().zip(&carries).enumerate() {
                if !dims_compatible(o, c) {
                    return Err(format!("while body carry {k} returns {o} but the carry is {c}"));
                }
            }
            Ok(carries)
        }
        Op::Cond(c) => {
            let (first, rest) = ins.split_first().ok_or("cond needs an index operand")?;
            let is_bool = first.dtype == crate::DType::Bool;
            if first.rank() != 0 || !(is_bool || first.dtype.is_int()) {
                return Err(format!("cond index must be an int or bool scalar, got {first}"));
            }
            if c.branches.is_empty() {
                return Err("cond needs at least one branch".into());
            }
            if is_bool && c.branches.len() != 2 {
                return Err(format!("cond with a bool predicate needs 2 branches, got {}", c.branches.len()));
            }
            let args = owned(rest);
            let first_out = call_types("cond branch 0", &c.branches[0], &args)?;
            for (k, br) in c.branches.iter().enumerate().skip(1) {
                let out = call_types(&format!("cond branch {k}"), br, &args)?;
                if out.len() != first_out.len() {
                    return Err(format!(
                        "cond branch {k} returns {} values but branch 0 returns {}",
                        out.len(),
                        first_out.len()
                    ));
                }
                for (j, (o, f)) in out.iter().zip(&first_out).enumerate() {
                    if !dims_compatible(o, f) {
                        return Err(format!("cond branch {k} result {j} is {o} but branch 0 gives {f}"));
                    }
                }
            }
            Ok(first_out)
        }
        Op::Composite(c) => call_types(&format!("composite {} body", c.name), &c.body, &owned(ins)),
        _ => unreachable!("not a control op"),
    }
}

fn infer_scan(s: &ScanOp, ins: &[&Shape]) -> Result<Vec<Shape>, String> {
    let (nc, nk) = (s.num_consts, s.num_carry);
    if ins.len() < nc + nk {
        return Err(format!("scan with {nc} consts and {nk} carries got only {} operands", ins.len()));
    }
    let mut args = owned(&ins[..nc + nk]);
    for (k, x) in ins[nc + nk..].iter().enumerate() {
        match x.dims.first() {
            Some(Dim::Static(n)) if *n == s.length => {}
            Some(Dim::Sym(_)) => {}
            _ => return Err(format!("scan x {k} is {x} but needs a leading dim of length {}", s.length)),
        }
        args.push(Shape::from_dims(&x.dims[1..], x.dtype));
    }
    let out = call_types("scan body", &s.body, &args)?;
    if out.len() < nk {
        return Err(format!("scan body returns {} values but there are {nk} carries", out.len()));
    }
    let mut res = Vec::with_capacity(out.len());
    for (k, (o, c)) in out.iter().zip(&ins[nc..nc + nk]).enumerate() {
        if !dims_compatible(o, c) {
            return Err(format!("scan body carry {k} returns {o} but the carry is {c}"));
        }
        res.push((*c).clone());
    }
    for y in &out[nk..] {
        let mut dims = vec![Dim::Static(s.length)];
        dims.extend(y.dims.iter().cloned());
        res.push(Shape::from_dims(&dims, y.dtype));
    }
    Ok(res)
}

fn eval_err(op: &Op, msg: impl Into<String>) -> IrError {
    IrError::Eval { op: op.name(), msg: msg.into() }
}

/// Slice `i` of `t` along its leading dim.
fn leading_slice(t: &Tensor, i: usize) -> Result<Tensor, IrError> {
    let dims = &t.shape()[1..];
    let chunk: usize = dims.iter().product();
    with_dtype!(t.dtype(), T, {
        let s = t.as_slice::<T>().unwrap_or_default();
        Tensor::from_vec(s[i * chunk..(i + 1) * chunk].to_vec(), dims)
    })
}

/// Write `y` into slice `i` of `out` along its leading dim.
fn write_leading(op: &Op, out: &mut Tensor, i: usize, y: &Tensor) -> Result<(), IrError> {
    if out.dtype() != y.dtype() || out.shape()[1..] != *y.shape() {
        return Err(eval_err(
            op,
            format!("body gives {}{:?} for ys of {}{:?}", y.dtype(), y.shape(), out.dtype(), out.shape()),
        ));
    }
    let chunk = y.numel();
    with_dtype!(y.dtype(), T, {
        let src = y.as_slice::<T>().unwrap_or_default();
        if let Some(dst) = out.as_mut_slice::<T>() {
            dst[i * chunk..(i + 1) * chunk].copy_from_slice(src);
        }
    });
    Ok(())
}

/// Move sub-graph results into the preallocated outputs, checking their types.
fn store(op: &Op, outs: &mut [Tensor], vals: Vec<Tensor>) -> Result<(), IrError> {
    if vals.len() != outs.len() {
        return Err(eval_err(op, format!("sub-graph returned {} values for {} results", vals.len(), outs.len())));
    }
    for (k, (o, v)) in outs.iter_mut().zip(vals).enumerate() {
        if o.dtype() != v.dtype() || o.shape() != v.shape() {
            return Err(eval_err(
                op,
                format!("result {k} is {}{:?} but {}{:?} was expected", v.dtype(), v.shape(), o.dtype(), o.shape()),
            ));
        }
        *o = v;
    }
    Ok(())
}

/// Reference evaluation of the control family (outputs preallocated by the caller).
pub(crate) fn eval(op: &Op, ins: &[&Tensor], outs: &mut [Tensor]) -> Result<(), IrError> {
    use crate::interp::evaluate_args;
    match op {
        Op::Scan(s) => {
            let (nc, nk) = (s.num_consts, s.num_carry);
            let mut carries: Vec<Tensor> = ins[nc..nc + nk].iter().map(|t| (*t).clone()).collect();
            let xs = &ins[nc + nk..];
            for step in 0..s.length {
                let i = if s.reverse { s.length - 1 - step } else { step };
                let slices = xs.iter().map(|x| leading_slice(x, i)).collect::<Result<Vec<_>, _>>()?;
                let mut args: Vec<&Tensor> = ins[..nc].to_vec();
                args.extend(carries.iter());
                args.extend(slices.iter());
                let mut res = evaluate_args(&s.body, &args)?;
                let ys = res.split_off(nk.min(res.len()));
                carries = res;
                for (k, y) in ys.iter().enumerate() {
                    let o = outs.get_mut(nk + k).ok_or_else(|| eval_err(op, "body returns too many ys"))?;
                    write_leading(op, o, i, y)?;
                }
            }
            store(op, &mut outs[..nk], carries)
        }
        Op::While(w) => {
            let mut carries: Vec<Tensor> = ins.iter().map(|t| (*t).clone()).collect();
            loop {
                let args: Vec<&Tensor> = carries.iter().collect();
                let c = evaluate_args(&w.cond, &args)?;
                let go = c.first().and_then(|t| t.as_slice::<bool>()).and_then(|s| s.first().copied());
                match go {
                    Some(true) => carries = evaluate_args(&w.body, &args)?,
                    Some(false) => break,
                    None => return Err(eval_err(op, "cond did not return a bool scalar")),
                }
            }
            store(op, outs, carries)
        }
        Op::Cond(c) => {
            let n = c.branches.len();
            let idx = ins[0].to_f64_vec().first().copied().ok_or_else(|| eval_err(op, "empty index"))?;
            let k = if ins[0].dtype() == crate::DType::Bool {
                idx as usize
            } else {
                (idx as i64).clamp(0, n as i64 - 1) as usize
            };
            let vals = evaluate_args(&c.branches[k], &ins[1..])?;
            store(op, outs, vals)
        }
        Op::Composite(c) => {
            let vals = evaluate_args(&c.body, ins)?;
            store(op, outs, vals)
        }
        _ => unreachable!("not a control op"),
    }
}

/// Builders of the control family. Each returns one id per result (for a single result, the
/// node itself; for several, its `get_tuple_element` nodes). On a rule violation the error is
/// recorded and placeholders are returned, one per expected result.
impl Graph {
    fn push_region(&mut self, op: Op, inputs: &[NodeId], expected: usize) -> Vec<NodeId> {
        let r = self.push_multi(op, inputs, None);
        if r.len() == expected || r.is_empty() { r } else { vec![r[0]; expected] }
    }

    /// The type of `id`, or `f32[]` when it does not exist or is a tuple (the op that uses it
    /// records that error).
    pub(crate) fn type_or_placeholder(&self, id: NodeId) -> Shape {
        match self.nodes.get(id.index()) {
            Some(n) if !n.is_tuple() => n.ty().clone(),
            _ => Shape::scalar(crate::DType::F32),
        }
    }

    /// `lax.scan(body, init, xs, length, reverse)` with constants passed explicitly.
    ///
    /// `body` takes `(consts…, carries…, x slices…)` (an x slice is `x` without its leading
    /// `length` dim) and returns `(new carries…, ys…)`; new carries must have the carries'
    /// types. Results: the final carries, then each y stacked to `[length, …]`.
    /// Errors (recorded): input count or types that do not match, an x whose leading dim is
    /// not `length`, a carry whose type changes.
    pub fn scan(
        &mut self,
        body: Graph,
        consts: &[NodeId],
        init: &[NodeId],
        xs: &[NodeId],
        length: usize,
        reverse: bool,
    ) -> Vec<NodeId> {
        let expected = body.outputs().len().max(init.len());
        let op =
            Op::Scan(ScanOp { body: Box::new(body), num_consts: consts.len(), num_carry: init.len(), length, reverse });
        let inputs: Vec<NodeId> = consts.iter().chain(init).chain(xs).copied().collect();
        self.push_region(op, &inputs, expected)
    }

    /// `lax.while_loop(cond, body, init)`: `cond(carries…) -> bool[]`, `body(carries…) ->
    /// carries…` (same types). Results: the carries once `cond` is false.
    pub fn while_loop(&mut self, cond: Graph, body: Graph, init: &[NodeId]) -> Vec<NodeId> {
        let op = Op::While(WhileOp { cond: Box::new(cond), body: Box::new(body) });
        self.push_region(op, init, init.len())
    }

    /// `lax.switch(index, branches, *operands)`: runs `branches[clamp(index, 0, n-1)]` on
    /// `operands`. `index` is an int scalar, or a bool scalar with two branches (`false` runs
    /// branch 0, `true` branch 1: `lax.cond(p, t, f)` is `switch(p, [f, t])`). Every branch
    /// takes the operands and returns the same types.
    pub fn switch(&mut self, index: NodeId, branches: Vec<Graph>, operands: &[NodeId]) -> Vec<NodeId> {
        let expected = branches.first().map(|b| b.outputs().len()).unwrap_or(1);
        let mut inputs = vec![index];
        inputs.extend_from_slice(operands);
        self.push_region(Op::Cond(CondOp { branches }), &inputs, expected)
    }

    /// A composite region named `name` (ONNX / PyTorch name) with attributes and its
    /// decomposition `body`, whose inputs are `operands` in order; results are `body`'s
    /// outputs.
    pub fn composite(&mut self, name: &str, attrs: Attrs, body: Graph, operands: &[NodeId]) -> Vec<NodeId> {
        let expected = body.outputs().len();
        let op = Op::Composite(Composite { name: name.into(), attrs, body: Box::new(body) });
        self.push_region(op, operands, expected)
    }

    /// Build a composite in place: a sub-graph named `name` with inputs `arg0, arg1, …` typed
    /// like `operands` is handed to `build`, whose returned ids become the body's outputs.
    pub fn composite_with(
        &mut self,
        name: &str,
        attrs: Attrs,
        operands: &[NodeId],
        build: impl FnOnce(&mut Graph, &[NodeId]) -> Vec<NodeId>,
    ) -> Vec<NodeId> {
        let mut body = Graph::new(name);
        let args: Vec<NodeId> = operands
            .iter()
            .enumerate()
            .map(|(k, &o)| body.input(&format!("arg{k}"), self.type_or_placeholder(o)))
            .collect();
        let outs = build(&mut body, &args);
        body.set_outputs(outs);
        self.composite(name, attrs, body, operands)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::evaluate;
    use crate::ops::CompareOp;
    use crate::{DType, inline_composites, verify};
    use std::collections::HashMap;

    fn feeds(v: &[(&str, Tensor)]) -> HashMap<String, Tensor> {
        v.iter().map(|(k, t)| (k.to_string(), t.clone())).collect()
    }
    fn f32s(v: &[f32], d: &[usize]) -> Tensor {
        Tensor::from_vec(v.to_vec(), d).unwrap()
    }

    #[test]
    fn scan_cumulative_sum() {
        for reverse in [false, true] {
            let mut body = Graph::new("step");
            let c = body.input("c", Shape::new(&[2], DType::F32));
            let x = body.input("x", Shape::new(&[2], DType::F32));
            let s = body.add(c, x);
            body.set_outputs(vec![s, s]);
            let mut g = Graph::new("g");
            let init = g.input("init", Shape::new(&[2], DType::F32));
            let xs = g.input("xs", Shape::new(&[5, 2], DType::F32));
            let r = g.scan(body, &[], &[init], &[xs], 5, reverse);
            assert_eq!(r.len(), 2);
            assert_eq!(g.shape(r[1]), &Shape::new(&[5, 2], DType::F32));
            g.set_outputs(r);
            verify(&g).unwrap();
            let xv: Vec<f32> = (0..10).map(|v| v as f32).collect();
            let out = evaluate(&g, &feeds(&[("init", f32s(&[100.0, 0.0], &[2])), ("xs", f32s(&xv, &[5, 2]))])).unwrap();
            // Hand loop.
            let mut c = [100.0f32, 0.0];
            let mut ys = [0.0f32; 10];
            let order: Vec<usize> = if reverse { (0..5).rev().collect() } else { (0..5).collect() };
            for i in order {
                for j in 0..2 {
                    c[j] += xv[i * 2 + j];
                    ys[i * 2 + j] = c[j];
                }
            }
            assert_eq!(out[0].as_slice::<f32>().unwrap(), &c);
            assert_eq!(out[1].as_slice::<f32>().unwrap(), &ys[..]);
        }
    }

    #[test]
    fn scan_rnn_step_with_const() {
        // h' = tanh(w * h + x), y = 2 h'
        let mut body = Graph::new("rnn");
        let w = body.input("w", Shape::new(&[3], DType::F64));
        let h = body.input("h", Shape::new(&[3], DType::F64));
        let x = body.input("x", Shape::new(&[3], DType::F64));
        let wh = body.mul(w, h);
        let a = body.add(wh, x);
        let h2 = body.tanh(a);
        let two = body.scalar(2.0, DType::F64);
        let y = body.mul(h2, two);
        body.set_outputs(vec![h2, y]);
        let mut g = Graph::new("g");
        let w = g.input("w", Shape::new(&[3], DType::F64));
        let h0 = g.input("h0", Shape::new(&[3], DType::F64));
        let xs = g.input("xs", Shape::new(&[5, 3], DType::F64));
        let r = g.scan(body, &[w], &[h0], &[xs], 5, false);
        g.set_outputs(r);
        verify(&g).unwrap();
        let wv = [0.5, -0.3, 1.1];
        let xv: Vec<f64> = (0..15).map(|i| (i as f64 * 0.37).sin()).collect();
        let mut h = [0.1, 0.2, -0.4];
        let f = feeds(&[
            ("w", Tensor::from_vec(wv.to_vec(), &[3]).unwrap()),
            ("h0", Tensor::from_vec(h.to_vec(), &[3]).unwrap()),
            ("xs", Tensor::from_vec(xv.clone(), &[5, 3]).unwrap()),
        ]);
        let out = evaluate(&g, &f).unwrap();
        let mut ys = vec![];
        for i in 0..5 {
            for j in 0..3 {
                h[j] = (wv[j] * h[j] + xv[i * 3 + j]).tanh();
            }
            ys.extend(h.iter().map(|v| v * 2.0));
        }
        assert_eq!(out[0].as_slice::<f64>().unwrap(), &h);
        assert_eq!(out[1].as_slice::<f64>().unwrap(), &ys[..]);
    }

    #[test]
    fn scan_zero_length_returns_init() {
        let mut body = Graph::new("step");
        let c = body.input("c", Shape::new(&[], DType::I32));
        let x = body.input("x", Shape::new(&[], DType::I32));
        let s = body.add(c, x);
        body.set_outputs(vec![s, s]);
        let mut g = Graph::new("g");
        let init = g.input("init", Shape::new(&[], DType::I32));
        let xs = g.input("xs", Shape::new(&[0], DType::I32));
        let r = g.scan(body, &[], &[init], &[xs], 0, false);
        g.set_outputs(r);
        let out = evaluate(
            &g,
            &feeds(&[("init", Tensor::scalar(7i32)), ("xs", Tensor::from_vec(Vec::<i32>::new(), &[0]).unwrap())]),
        )
        .unwrap();
        assert_eq!(out[0].as_slice::<i32>().unwrap(), &[7]);
        assert_eq!(out[1].shape(), &[0]);
    }

    #[test]
    fn scan_type_errors_name_the_mismatch() {
        let mut body = Graph::new("step");
        let c = body.input("c", Shape::new(&[4], DType::F32));
        let x = body.input("x", Shape::new(&[3], DType::F32));
        body.set_outputs(vec![x]);
        let mut g = Graph::new("g");
        let init = g.input("init", Shape::new(&[4], DType::F32));
        let xs = g.input("xs", Shape::new(&[2, 3], DType::F32));
        let r = g.scan(body.clone(), &[], &[init], &[xs], 2, false);
        assert_eq!(r.len(), 1);
        let e = g.error().unwrap().to_string();
        assert!(e.contains("scan body carry 0 returns f32[3] but the carry is f32[4]"), "{e}");
        let _ = c;

        let mut g = Graph::new("g");
        let init = g.input("init", Shape::new(&[4], DType::F32));
        let xs = g.input("xs", Shape::new(&[3, 3], DType::F32));
        g.scan(body.clone(), &[], &[init], &[xs], 2, false);
        assert!(g.error().unwrap().to_string().contains("leading dim of length 2"));

        let mut g = Graph::new("g");
        let init = g.input("init", Shape::new(&[5], DType::F32));
        let xs = g.input("xs", Shape::new(&[2, 3], DType::F32));
        g.scan(body, &[], &[init], &[xs], 2, false);
        let e = g.error().unwrap().to_string();
        assert!(e.contains("scan body input 0 is declared f32[4] but is given f32[5]"), "{e}");
    }

    fn counter_graphs(limit: f64) -> (Graph, Graph) {
        let mut cond = Graph::new("cond");
        let i = cond.input("i", Shape::new(&[], DType::I32));
        let _acc = cond.input("acc", Shape::new(&[2], DType::F32));
        let lim = cond.scalar(limit, DType::I32);
        let c = cond.compare(CompareOp::Lt, i, lim);
        cond.set_outputs(vec![c]);
        let mut body = Graph::new("body");
        let i = body.input("i", Shape::new(&[], DType::I32));
        let acc = body.input("acc", Shape::new(&[2], DType::F32));
        let one = body.scalar(1.0, DType::I32);
        let i2 = body.add(i, one);
        let half = body.scalar(0.5, DType::F32);
        let acc2 = body.add(acc, half);
        body.set_outputs(vec![i2, acc2]);
        (cond, body)
    }

    #[test]
    fn while_counts_to_ten() {
        let (cond, body) = counter_graphs(10.0);
        let mut g = Graph::new("g");
        let i0 = g.input("i0", Shape::new(&[], DType::I32));
        let a0 = g.input("a0", Shape::new(&[2], DType::F32));
        let r = g.while_loop(cond, body, &[i0, a0]);
        assert_eq!(r.len(), 2);
        g.set_outputs(r);
        verify(&g).unwrap();
        let out = evaluate(&g, &feeds(&[("i0", Tensor::scalar(0i32)), ("a0", f32s(&[0.0, 1.0], &[2]))])).unwrap();
        assert_eq!(out[0].as_slice::<i32>().unwrap(), &[10]);
        assert_eq!(out[1].as_slice::<f32>().unwrap(), &[5.0, 6.0]);
        // Already past the limit: zero iterations.
        let out = evaluate(&g, &feeds(&[("i0", Tensor::scalar(12i32)), ("a0", f32s(&[0.0, 1.0], &[2]))])).unwrap();
        assert_eq!(out[0].as_slice::<i32>().unwrap(), &[12]);
        assert_eq!(out[1].as_slice::<f32>().unwrap(), &[0.0, 1.0]);
    }

    #[test]
    fn while_errors() {
        let (_, body) = counter_graphs(10.0);
        let mut bad_cond = Graph::new("cond");
        let i = bad_cond.input("i", Shape::new(&[], DType::I32));
        let _ = bad_cond.input("acc", Shape::new(&[2], DType::F32));
        bad_cond.set_outputs(vec![i]);
        let mut g = Graph::new("g");
        let i0 = g.input("i0", Shape::new(&[], DType::I32));
        let a0 = g.input("a0", Shape::new(&[2], DType::F32));
        let r = g.while_loop(bad_cond, body.clone(), &[i0, a0]);
        assert_eq!(r.len(), 2);
        assert!(g.error().unwrap().to_string().contains("must return one bool[] but returns (i32[])"));
        let (cond, _) = counter_graphs(3.0);
        let mut g = Graph::new("g");
        let i0 = g.input("i0", Shape::new(&[], DType::I64));
        let a0 = g.input("a0", Shape::new(&[2], DType::F32));
        g.while_loop(cond, body, &[i0, a0]);
        assert!(g.error().unwrap().to_string().contains("input 0 is declared i32[] but is given i64[]"));
    }

    fn branch(k: f64) -> Graph {
        let mut b = Graph::new(format!("b{k}"));
        let x = b.input("x", Shape::new(&[2], DType::F32));
        let c = b.scalar(k, DType::F32);
        let y = b.mul(x, c);
        b.set_outputs(vec![y]);
        b
    }

    #[test]
    fn switch_three_branches_clamps() {
        let mut g = Graph::new("g");
        let i = g.input("i", Shape::new(&[], DType::I32));
        let x = g.input("x", Shape::new(&[2], DType::F32));
        let r = g.switch(i, vec![branch(1.0), branch(10.0), branch(100.0)], &[x]);
        assert_eq!(r.len(), 1);
        g.set_outputs(r);
        verify(&g).unwrap();
        for (idx, want) in [(-3, 1.0), (0, 1.0), (1, 10.0), (2, 100.0), (9, 100.0)] {
            let out = evaluate(&g, &feeds(&[("i", Tensor::scalar(idx)), ("x", f32s(&[1.0, 2.0], &[2]))])).unwrap();
            assert_eq!(out[0].as_slice::<f32>().unwrap(), &[want, 2.0 * want], "index {idx}");
        }
    }

    #[test]
    fn cond_with_bool_pred() {
        let mut g = Graph::new("g");
        let p = g.input("p", Shape::new(&[], DType::Bool));
        let x = g.input("x", Shape::new(&[2], DType::F32));
        let r = g.switch(p, vec![branch(-1.0), branch(3.0)], &[x]);
        g.set_outputs(r);
        for (pv, want) in [(false, -1.0), (true, 3.0)] {
            let out = evaluate(&g, &feeds(&[("p", Tensor::scalar(pv)), ("x", f32s(&[1.0, 2.0], &[2]))])).unwrap();
            assert_eq!(out[0].as_slice::<f32>().unwrap(), &[want, 2.0 * want]);
        }
        // A bool predicate needs two branches; branches must agree on types.
        let mut g = Graph::new("g");
        let p = g.input("p", Shape::new(&[], DType::Bool));
        let x = g.input("x", Shape::new(&[2], DType::F32));
        g.switch(p, vec![branch(1.0)], &[x]);
        assert!(g.error().unwrap().to_string().contains("needs 2 branches"));
        let mut other = Graph::new("o");
        let xi = other.input("x", Shape::new(&[2], DType::F32));
        let s = other.square(xi);
        let s = other.convert(s, DType::F64);
        other.set_outputs(vec![s]);
        let mut g = Graph::new("g");
        let i = g.input("i", Shape::new(&[], DType::I32));
        let x = g.input("x", Shape::new(&[2], DType::F32));
        g.switch(i, vec![branch(1.0), other], &[x]);
        let e = g.error().unwrap().to_string();
        assert!(e.contains("cond branch 1 result 0 is f64[2] but branch 0 gives f32[2]"), "{e}");
        let mut g = Graph::new("g");
        let i = g.input("i", Shape::new(&[2], DType::I32));
        let x = g.input("x", Shape::new(&[2], DType::F32));
        g.switch(i, vec![branch(1.0)], &[x]);
        assert!(g.error().unwrap().to_string().contains("index must be an int or bool scalar"));
    }

    #[test]
    fn composite_round_trips_through_inlining() {
        let mut g = Graph::new("g");
        let x = g.input("x", Shape::from_dims(&[Dim::dynamic(), 3.into()], DType::F32));
        let y = g.input("y", Shape::new(&[3], DType::F32));
        let mut attrs = Attrs::new();
        attrs.insert("alpha".into(), crate::Attr::Float(2.0));
        let r = g.composite_with("axpy2", attrs, &[x, y], |b, a| {
            let two = b.scalar(2.0, DType::F32);
            let ax = b.mul(a[0], two);
            let s = b.add(ax, a[1]);
            let t = b.tanh(s);
            vec![s, t]
        });
        assert_eq!(r.len(), 2);
        assert_eq!(g.shape(r[0]), &Shape::from_dims(&[Dim::dynamic(), 3.into()], DType::F32));
        let single = g.composite_with("neg", Attrs::new(), &[r[1]], |b, a| vec![b.neg(a[0])]);
        assert_eq!(single.len(), 1);
        g.set_outputs(vec![r[0], single[0]]);
        verify(&g).unwrap();
        let f =
            feeds(&[("x", f32s(&[1.0, 2.0, 3.0, -1.0, -2.0, -3.0], &[2, 3])), ("y", f32s(&[0.5, 0.25, 0.125], &[3]))]);
        let a = evaluate(&g, &f).unwrap();
        let inl = inline_composites(&g, &|_| false);
        assert!(inl.nodes().iter().all(|n| !matches!(n.op, Op::Composite(_))));
        verify(&inl).unwrap();
        let b = evaluate(&inl, &f).unwrap();
        assert_eq!(a, b);
        assert_eq!(a[0].as_slice::<f32>().unwrap(), &[2.5, 4.25, 6.125, -1.5, -3.75, -5.875]);
    }

    #[test]
    fn composite_body_error_surfaces() {
        let mut g = Graph::new("g");
        let x = g.input("x", Shape::new(&[3], DType::F32));
        let y = g.input("y", Shape::new(&[4], DType::F32));
        let r = g.composite_with("bad", Attrs::new(), &[x, y], |b, a| vec![b.add(a[0], a[1])]);
        assert_eq!(r.len(), 1);
        let e = g.error().unwrap().to_string();
        assert!(e.contains("composite bad body has an error") && e.contains("do not broadcast"), "{e}");
    }
}
