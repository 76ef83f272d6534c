//! Control flow: `If` → RLX `cond` (`switch` on a bool), `Loop` → `scan` (known trip count,
//! no early exit) or `while`, `Scan` → `scan`.
//!
//! ONNX sub-graphs read values of enclosing graphs by name. Those names ([`free_vars`]) are
//! captured when a body is imported: a constant is copied into the body, any other value
//! becomes an extra operand (a `scan` const, a `cond` operand, a `while` carry passed
//! through unchanged). An `If` whose predicate is a constant is inlined (its branches may
//! even have different types then), and a `Loop` whose body needs per-iteration constants
//! (`Slice` bounds computed from the iteration number) is unrolled when its trip count is
//! known and at most [`UNROLL_LIMIT`].

use super::{Ctx, Val};
use crate::error::{OnnxError, Result};
use crate::import::{ImportOptions, Importer};
use crate::proto::{GraphProto, NodeProto};
use crate::tensor::to_tensor;
use rlx_ir::ops::CompareOp as C;
use rlx_ir::{DType, Dim, Graph, NodeId, Shape, Tensor};
use std::collections::{HashMap, HashSet};

/// Largest trip count a `Loop` is unrolled to when its body cannot be a `scan` body.
pub(crate) const UNROLL_LIMIT: usize = 256;

/// Names that `n`'s sub-graphs (at any depth) read from enclosing scopes, first use first;
/// empty for a node without sub-graphs.
pub(crate) fn free_vars(n: &NodeProto) -> Vec<String> {
    let mut out = vec![];
    let mut seen = HashSet::new();
    for a in &n.attribute {
        for g in a.g.iter().chain(a.graphs.iter()) {
            for name in graph_free_vars(g) {
                if seen.insert(name.clone()) {
                    out.push(name);
                }
            }
        }
    }
    out
}

/// Names `g` reads that it does not define (inputs, initializers, node outputs).
fn graph_free_vars(g: &GraphProto) -> Vec<String> {
    let mut defined: HashSet<&str> =
        g.input.iter().map(|v| v.name()).chain(g.initializer.iter().map(|t| t.name())).collect();
    let mut out = vec![];
    let mut seen = HashSet::new();
    let mut used = |name: &str, defined: &HashSet<&str>, out: &mut Vec<String>| {
        if !name.is_empty() && !defined.contains(name) && seen.insert(name.to_string()) {
            out.push(name.to_string());
        }
    };
    for n in &g.node {
        for i in &n.input {
            used(i, &defined, &mut out);
        }
        for name in free_vars(n) {
            used(&name, &defined, &mut out);
        }
        defined.extend(n.output.iter().map(String::as_str));
    }
    for o in &g.output {
        used(o.name(), &defined, &mut out);
    }
    out
}

/// A body under construction: its RLX graph, the scope its ONNX names resolve in, and the
/// outer nodes that feed its capture inputs (its first inputs, in order).
struct Sub {
    g: Graph,
    scope: HashMap<String, Val>,
    operands: Vec<NodeId>,
}

impl<'a> Ctx<'a> {
    /// Graph attribute `name`, if present.
    pub(super) fn graph_attr(&self, name: &str) -> Option<&'a GraphProto> {
        let node: &'a NodeProto = self.node;
        node.attribute.iter().find(|a| a.name() == name).and_then(|a| a.g.as_ref())
    }

    /// Required graph attribute `name`.
    fn agraph(&self, name: &str) -> Result<&'a GraphProto> {
        self.graph_attr(name).ok_or_else(|| self.err(format!("graph attribute {name} is required")))
    }
}

impl Ctx<'_> {
    /// Start a body graph: captures of `caps` found in scope (constants copied in, the rest
    /// as inputs `cap0, cap1, …`).
    fn capture(&self, name: &str, caps: &[String]) -> Sub {
        let mut g = Graph::new(name);
        let mut scope = HashMap::new();
        let mut operands = vec![];
        for (k, c) in caps.iter().enumerate() {
            let Some(v) = self.scope.get(c) else { continue }; // an unknown name errors at its use
            let val = match &v.konst {
                Some(t) => Val { id: g.constant(t.clone()), konst: Some(t.clone()), demand: None },
                None => {
                    operands.push(v.id);
                    Val { id: g.input(&format!("cap{k}"), self.ty(v.id)), konst: None, demand: v.demand.clone() }
                }
            };
            scope.insert(c.clone(), val);
        }
        Sub { g, scope, operands }
    }

    /// Import body `sg` into `sub` with its declared inputs bound to `formals`; returns the
    /// nodes of its outputs.
    fn run_body(&self, attr: &str, sub: &mut Sub, sg: &GraphProto, formals: &[NodeId]) -> Result<Vec<NodeId>> {
        if sg.input.len() != formals.len() {
            return Err(self.err(format!("{attr} takes {} inputs, expected {}", sg.input.len(), formals.len())));
        }
        for (vi, &id) in sg.input.iter().zip(formals) {
            sub.scope.insert(vi.name().to_string(), Val::of(&sub.g, id));
        }
        let vals = import_body(self, attr, sg, &mut sub.g, &mut sub.scope)?;
        Ok(vals.into_iter().map(|v| v.id).collect())
    }

    /// Inline body `sg` into this graph, reading captured names from this node's scope plus
    /// `bind` (declared input name → value); returns its output values.
    pub(super) fn inline(&mut self, attr: &str, sg: &GraphProto, bind: Vec<(String, Val)>) -> Result<Vec<Val>> {
        let mut scope: HashMap<String, Val> =
            graph_free_vars(sg).into_iter().filter_map(|n| self.scope.get(&n).map(|v| (n, v.clone()))).collect();
        scope.extend(bind);
        let (opts, opset, prefix) = (self.opts, self.opset, format!("{}/{attr}", self.name));
        import_body_into(opts, opset, prefix, sg, self.g, &mut scope)
    }

    /// Konst-only value of input `i`.
    fn konst(&self, i: usize) -> Option<&Tensor> {
        self.ins.get(i)?.as_ref()?.konst.as_deref()
    }
}

fn import_body(
    cx: &Ctx,
    attr: &str,
    sg: &GraphProto,
    g: &mut Graph,
    scope: &mut HashMap<String, Val>,
) -> Result<Vec<Val>> {
    import_body_into(cx.opts, cx.opset, format!("{}/{attr}", cx.name), sg, g, scope)
}

/// Import the initializers and nodes of `sg` into `g` (names resolve through `scope`);
/// returns the values of its outputs.
fn import_body_into(
    opts: &ImportOptions,
    opset: i64,
    prefix: String,
    sg: &GraphProto,
    g: &mut Graph,
    scope: &mut HashMap<String, Val>,
) -> Result<Vec<Val>> {
    for init in &sg.initializer {
        let t = std::sync::Arc::new(to_tensor(init, opts.base_dir.as_deref())?);
        scope.insert(init.name().to_string(), Val { id: g.constant(t.clone()), konst: Some(t), demand: None });
    }
    Importer::new(opts, opset, prefix.clone()).body(sg, g, scope)?;
    sg.output
        .iter()
        .map(|o| {
            scope
                .get(o.name())
                .cloned()
                .ok_or_else(|| OnnxError::Invalid(format!("{prefix}: output {:?} is never produced", o.name())))
        })
        .collect()
}

/// True when a bool/int/float tensor's first element is nonzero.
fn truthy(t: &Tensor) -> bool {
    t.to_f64_vec().first().is_some_and(|&v| v != 0.0)
}

/// True when node `id` of `g` is a constant whose elements are all nonzero.
fn is_const_true(g: &Graph, id: NodeId) -> bool {
    matches!(&g.node(id).op, rlx_ir::Op::Constant(t) if t.to_f64_vec().iter().all(|&v| v != 0.0))
}

/// True when two types can describe the same value (symbolic dims match anything).
fn compatible(a: &Shape, b: &Shape) -> bool {
    a.dtype == b.dtype
        && a.rank() == b.rank()
        && a.dims.iter().zip(&b.dims).all(|(x, y)| x == y || matches!(x, Dim::Sym(_)) || matches!(y, Dim::Sym(_)))
}

/// Checks that a body gives its carried values back with their types.
fn check_carries(c: &Ctx, g: &Graph, outs: &[NodeId], init: &[NodeId]) -> Result<()> {
    for (k, (&o, &i)) in outs.iter().zip(init).enumerate() {
        let (got, want) = (g.shape(o), c.g.shape(i));
        if !compatible(got, want) {
            return Err(c.err(format!(
                "the body turns carried value {k} from {want} into {got}; RLX loops keep carried types"
            )));
        }
    }
    Ok(())
}

/// The results of a region op just built, or the error its shape rule recorded.
fn built(c: &Ctx, ids: Vec<NodeId>, expected: usize) -> Result<Vec<NodeId>> {
    if let Some(e) = c.g.error() {
        return Err(c.err(e.to_string()));
    }
    if ids.len() != expected {
        return Err(c.err(format!("built {} results, expected {expected}", ids.len())));
    }
    Ok(ids)
}

/// A one-element value as a rank-0 one of `dtype`.
fn scalar_of(c: &mut Ctx, x: NodeId, dtype: DType, what: &str) -> Result<NodeId> {
    let s = c.ty(x);
    if s.numel() != Some(1) {
        return Err(c.err(format!("{what} must hold one element, got {s}")));
    }
    let x = if s.rank() == 0 { x } else { c.g.reshape(x, Vec::<usize>::new()) };
    Ok(if s.dtype == dtype { x } else { c.g.convert(x, dtype) })
}

/// Stack values of one type along a new leading axis.
fn stack(g: &mut Graph, xs: &[NodeId]) -> NodeId {
    let ex: Vec<NodeId> = xs.iter().map(|&x| g.expand_dims(x, 0)).collect();
    if ex.len() == 1 { ex[0] } else { g.concatenate(&ex, 0) }
}

/// ONNX `If`: the branch graphs take no inputs and read the enclosing scope. A constant
/// predicate inlines its branch; otherwise both branches become a `switch` on the predicate
/// (their results must have one type). A predicate known only from
/// `ImportOptions::input_values` inlines its branch when the branches' types differ.
pub(super) fn if_(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let (then_g, else_g) = (c.agraph("then_branch")?, c.agraph("else_branch")?);
    let pick = |p: bool| if p { ("then_branch", then_g) } else { ("else_branch", else_g) };
    if let Some(p) = c.konst(0).map(truthy) {
        let (attr, g) = pick(p);
        return Ok(c.inline(attr, g, vec![])?.into_iter().map(|v| v.id).collect());
    }
    match cond(c, then_g, else_g) {
        Ok(ids) => Ok(ids),
        Err(e) => match c.value(0).map(truthy) {
            Some(p) => {
                let (attr, g) = pick(p);
                Ok(c.inline(attr, g, vec![])?.into_iter().map(|v| v.id).collect())
            }
            None => Err(e),
        },
    }
}

fn cond(c: &mut Ctx, then_g: &GraphProto, else_g: &GraphProto) -> Result<Vec<NodeId>> {
    let pred = c.x(0)?;
    if c.dtype(pred) != DType::Bool {
        return Err(c.err(format!("cond must be bool, got {}", c.ty(pred))));
    }
    let caps = free_vars(c.node);
    let mut subs = vec![];
    for (attr, sg) in [("else_branch", else_g), ("then_branch", then_g)] {
        let mut sub = c.capture(attr, &caps);
        let outs = c.run_body(attr, &mut sub, sg, &[])?;
        sub.g.set_outputs(outs);
        if let Some(e) = sub.g.error() {
            return Err(c.err(format!("{attr}: {e}")));
        }
        subs.push(sub);
    }
    let (e, t) = (&subs[0].g, &subs[1].g);
    if e.outputs().len() != t.outputs().len() {
        return Err(c.err(format!(
            "then_branch returns {} values, else_branch {}",
            t.outputs().len(),
            e.outputs().len()
        )));
    }
    for (k, (&a, &b)) in e.outputs().iter().zip(t.outputs()).enumerate() {
        let (a, b) = (e.shape(a), t.shape(b));
        if !compatible(a, b) {
            return Err(c.err(format!(
                "output {k} is {b} in then_branch but {a} in else_branch; a run-time cond needs one type"
            )));
        }
    }
    let pred = scalar_of(c, pred, DType::Bool, "cond")?;
    let operands = subs[0].operands.clone();
    let n = subs[0].g.outputs().len();
    let branches = subs.into_iter().map(|s| s.g).collect();
    let res = c.g.switch(pred, branches, &operands);
    built(c, res, n)
}

/// ONNX `Loop(M, cond, v…)`, body `(iter, cond_in, v…) -> (cond_out, v…, scan_outputs…)`.
///
/// With `M` known at import time and a body whose `cond_out` is constant true (or no `cond`
/// input, when `cond_out` is ignored) it is a `scan` of length `M` over the iteration
/// numbers; else, without scan outputs, a `while` on `cond && iter < M`. A body that needs
/// per-iteration constants, or scan outputs of a loop that may end early, unroll when `M` is
/// known and at most [`UNROLL_LIMIT`].
pub(super) fn loop_(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let body = c.agraph("body")?;
    let v_init: Vec<NodeId> = (2..c.ins.len()).map(|i| c.x(i)).collect::<Result<_>>()?;
    let nv = v_init.len();
    if body.input.len() != nv + 2 {
        return Err(c.err(format!("body takes {} inputs; {nv} carried values need {}", body.input.len(), nv + 2)));
    }
    let nscan = body.output.len().checked_sub(nv + 1).ok_or_else(|| {
        c.err(format!("body returns {} values; {nv} carried values need {}", body.output.len(), nv + 1))
    })?;
    let has_cond = c.opt(1).is_some();
    let trip = if c.opt(0).is_some() { c.value(0).and_then(|t| t.to_f64_vec().first().copied()) } else { None };
    let Some(m) = trip else { return while_loop(c, body, &v_init, nscan) };
    let len = if has_cond && c.value(1).is_some_and(|t| !truthy(t)) { 0 } else { m.max(0.0) as usize };
    match fixed_loop(c, body, &v_init, len, has_cond) {
        Ok(Some(ids)) => Ok(ids),
        Ok(None) if nscan == 0 => while_loop(c, body, &v_init, nscan),
        Ok(None) if len <= UNROLL_LIMIT => unroll(c, body, len, has_cond, nv, nscan),
        Ok(None) => while_loop(c, body, &v_init, nscan),
        Err(_) if len <= UNROLL_LIMIT => unroll(c, body, len, has_cond, nv, nscan),
        Err(e) => Err(e),
    }
}

/// The `scan` form of a loop that runs exactly `len` times; `None` when `cond_out` may end it
/// early.
fn fixed_loop(
    c: &mut Ctx,
    body: &GraphProto,
    v_init: &[NodeId],
    len: usize,
    has_cond: bool,
) -> Result<Option<Vec<NodeId>>> {
    let mut sub = c.capture("body", &free_vars(c.node));
    let vs: Vec<NodeId> = v_init.iter().enumerate().map(|(k, &v)| sub.g.input(&format!("v{k}"), c.ty(v))).collect();
    let iter = sub.g.input("iter", Shape::scalar(DType::I64));
    let tru = sub.g.scalar(1.0, DType::Bool);
    let mut formals = vec![iter, tru];
    formals.extend(&vs);
    let outs = c.run_body("body", &mut sub, body, &formals)?;
    if has_cond && !is_const_true(&sub.g, outs[0]) {
        return Ok(None);
    }
    check_carries(c, &sub.g, &outs[1..=v_init.len()], v_init)?;
    sub.g.set_outputs(outs[1..].to_vec());
    if let Some(e) = sub.g.error() {
        return Err(c.err(format!("body: {e}")));
    }
    let iters = c.g.iota(Shape::new(&[len], DType::I64), 0);
    let n = outs.len() - 1;
    let res = c.g.scan(sub.g, &sub.operands, v_init, &[iters], len, false);
    built(c, res, n).map(Some)
}

/// The `while` form: carries `(captures…, M, iter, cond, v…)`.
fn while_loop(c: &mut Ctx, body: &GraphProto, v_init: &[NodeId], nscan: usize) -> Result<Vec<NodeId>> {
    if nscan > 0 {
        return Err(c.err(
            "scan outputs need a trip count known at import time (a constant, or given in \
             ImportOptions::input_values) and a body that cannot end the loop early",
        ));
    }
    let nv = v_init.len();
    let m0 = match c.opt(0) {
        Some(m) => scalar_of(c, m, DType::I64, "M")?,
        None => c.g.constant(Tensor::from_vec(vec![i64::MAX], &[]).map_err(|e| c.err(e.to_string()))?),
    };
    let c0 = match c.opt(1) {
        Some(x) => scalar_of(c, x, DType::Bool, "cond")?,
        None => c.g.scalar(1.0, DType::Bool),
    };
    let i0 = c.scalar(0.0, DType::I64);
    let mut sub = c.capture("body", &free_vars(c.node));
    let nk = sub.operands.len();
    let (i64s, bools) = (Shape::scalar(DType::I64), Shape::scalar(DType::Bool));
    let m_in = sub.g.input("trip_count", i64s.clone());
    let i_in = sub.g.input("iter", i64s.clone());
    let c_in = sub.g.input("cond", bools.clone());
    let mut formals = vec![i_in, c_in];
    formals.extend(v_init.iter().enumerate().map(|(k, &v)| sub.g.input(&format!("v{k}"), c.ty(v))));
    let outs = c.run_body("body", &mut sub, body, &formals)?;
    check_carries(c, &sub.g, &outs[1..=nv], v_init)?;
    let cs = sub.g.shape(outs[0]).clone();
    if cs.dtype != DType::Bool || cs.numel() != Some(1) {
        return Err(c.err(format!("body's cond output must be one bool, got {cs}")));
    }
    let c_out = if cs.rank() == 0 { outs[0] } else { sub.g.reshape(outs[0], Vec::<usize>::new()) };
    let one = sub.g.scalar(1.0, DType::I64);
    let i_next = sub.g.add(i_in, one);
    let mut res: Vec<NodeId> = sub.g.inputs()[..nk].to_vec();
    res.extend([m_in, i_next, c_out]);
    res.extend(&outs[1..=nv]);
    sub.g.set_outputs(res);
    if let Some(e) = sub.g.error() {
        return Err(c.err(format!("body: {e}")));
    }
    let mut cg = Graph::new("loop_cond");
    for (k, &o) in sub.operands.iter().enumerate() {
        cg.input(&format!("cap{k}"), c.ty(o));
    }
    let (cm, ci, cc) = (cg.input("trip_count", i64s.clone()), cg.input("iter", i64s), cg.input("cond", bools));
    for (k, &v) in v_init.iter().enumerate() {
        cg.input(&format!("v{k}"), c.ty(v));
    }
    let below = cg.compare(C::Lt, ci, cm);
    let go = cg.binary(rlx_ir::ops::BinaryOp::And, cc, below);
    cg.set_outputs(vec![go]);
    let mut init = sub.operands.clone();
    init.extend([m0, i0, c0]);
    init.extend(v_init);
    let n = init.len();
    let res = c.g.while_loop(cg, sub.g, &init);
    Ok(built(c, res, n)?[nk + 3..].to_vec())
}

/// The unrolled form: the body inlined `len` times with the iteration number a constant,
/// stopping after an iteration whose `cond_out` is known false.
fn unroll(c: &mut Ctx, body: &GraphProto, len: usize, has_cond: bool, nv: usize, nscan: usize) -> Result<Vec<NodeId>> {
    let mut vs: Vec<Val> = c.ins.iter().skip(2).flatten().cloned().collect();
    let mut scans: Vec<Vec<NodeId>> = vec![vec![]; nscan];
    let lit = |g: &mut Graph, t: Tensor| {
        let t = std::sync::Arc::new(t);
        Val { id: g.constant(t.clone()), konst: Some(t), demand: None }
    };
    for i in 0..len {
        let it = lit(c.g, Tensor::from_vec(vec![i as i64], &[]).map_err(|e| c.err(e.to_string()))?);
        let tru = lit(c.g, Tensor::from_vec(vec![true], &[]).map_err(|e| c.err(e.to_string()))?);
        let mut bind = vec![(body.input[0].name().to_string(), it), (body.input[1].name().to_string(), tru)];
        bind.extend(body.input[2..].iter().map(|vi| vi.name().to_string()).zip(vs.iter().cloned()));
        let outs = c.inline("body", body, bind)?;
        vs = outs[1..=nv].to_vec();
        for (s, v) in scans.iter_mut().zip(&outs[1 + nv..]) {
            s.push(v.id);
        }
        if has_cond {
            match outs[0].konst.as_deref().or(outs[0].demand.as_ref()) {
                Some(t) if !truthy(t) => break,
                Some(_) => {}
                None => {
                    return Err(
                        c.err("the body's cond output is only known at run time, so the loop cannot be unrolled")
                    );
                }
            }
        }
    }
    let mut res: Vec<NodeId> = vs.iter().map(|v| v.id).collect();
    for s in &scans {
        if s.is_empty() {
            return Err(c.err("the loop runs zero times, so its scan outputs have no type"));
        }
        res.push(stack(c.g, s));
    }
    Ok(res)
}

/// ONNX `Scan` (opset 9+: per-input axes and directions; opset 8: a leading batch axis and
/// `sequence_lens`, which must equal the scan length).
pub(super) fn scan(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let body = c.agraph("body")?;
    let m = usize::try_from(c.ai("num_scan_inputs", 0)).unwrap_or(0);
    if c.opset < 9 {
        return scan8(c, body, m);
    }
    let ins: Vec<NodeId> = (0..c.ins.len()).map(|i| c.x(i)).collect::<Result<_>>()?;
    if m == 0 || m > ins.len() {
        return Err(c.err(format!("num_scan_inputs = {m} with {} inputs", ins.len())));
    }
    let (states, xs) = ins.split_at(ins.len() - m);
    let in_axes = c.aints("scan_input_axes").unwrap_or(vec![0; m]);
    let in_dirs = c.aints("scan_input_directions").unwrap_or(vec![0; m]);
    if in_axes.len() != m || in_dirs.len() != m {
        return Err(c.err("scan_input_axes / scan_input_directions need one entry per scan input"));
    }
    let mut lead = vec![];
    for (k, &x) in xs.iter().enumerate() {
        let r = c.rank(x);
        let ax = c.axis(in_axes[k], r)?;
        let mut x = x;
        if ax != 0 {
            let perm: Vec<usize> = std::iter::once(ax).chain((0..r).filter(|&i| i != ax)).collect();
            x = c.g.transpose(x, &perm);
        }
        lead.push(if in_dirs[k] != 0 { c.g.rev(x, &[0]) } else { x });
    }
    let (mut res, ys) = scan_core(c, body, states, &lead)?;
    let k = ys.len();
    let out_axes = c.aints("scan_output_axes").unwrap_or(vec![0; k]);
    let out_dirs = c.aints("scan_output_directions").unwrap_or(vec![0; k]);
    if out_axes.len() != k || out_dirs.len() != k {
        return Err(c.err("scan_output_axes / scan_output_directions need one entry per scan output"));
    }
    for (j, y) in ys.into_iter().enumerate() {
        let y = if out_dirs[j] != 0 { c.g.rev(y, &[0]) } else { y };
        let r = c.rank(y);
        let ax = c.axis(out_axes[j], r)?;
        let perm: Vec<usize> = (1..=ax).chain(std::iter::once(0)).chain(ax + 1..r).collect();
        res.push(if ax == 0 { y } else { c.g.transpose(y, &perm) });
    }
    Ok(res)
}

/// Opset-8 `Scan`: every state and scan input has a leading batch axis; the scan runs once
/// per batch entry (scan axis 1, `directions` per input) and the results are stacked.
fn scan8(c: &mut Ctx, body: &GraphProto, m: usize) -> Result<Vec<NodeId>> {
    let total = c.ins.len();
    if m == 0 || m + 1 > total {
        return Err(c.err(format!("num_scan_inputs = {m} with {total} inputs")));
    }
    let states: Vec<NodeId> = (1..total - m).map(|i| c.x(i)).collect::<Result<_>>()?;
    let xs: Vec<NodeId> = (total - m..total).map(|i| c.x(i)).collect::<Result<_>>()?;
    let dirs = c.aints("directions").unwrap_or(vec![0; m]);
    let dims = c.dims(xs[0])?;
    if dims.len() < 2 || dirs.len() != m {
        return Err(c.err("scan inputs need [batch, sequence, ...] dims and one direction each"));
    }
    if let Some(lens) = c.opt_ints_in(0)?
        && lens.iter().any(|&l| l != dims[1] as i64)
    {
        return Err(c.err(format!("sequence_lens {lens:?} shorter than the scan axis ({}) are not supported", dims[1])));
    }
    let mut per_batch: Vec<Vec<NodeId>> = vec![];
    for b in 0..dims[0] {
        let pick = |c: &mut Ctx, x: NodeId| {
            let s = c.g.slice_in_dim(x, b, b + 1, 0);
            c.g.squeeze(s, &[0])
        };
        let sb: Vec<NodeId> = states.iter().map(|&s| pick(c, s)).collect();
        let mut xb = vec![];
        for (k, &x) in xs.iter().enumerate() {
            let x = pick(c, x);
            xb.push(if dirs[k] != 0 { c.g.rev(x, &[0]) } else { x });
        }
        let (mut fin, ys) = scan_core(c, body, &sb, &xb)?;
        fin.extend(ys);
        per_batch.push(fin);
    }
    let n = per_batch.first().map_or(0, Vec::len);
    Ok((0..n).map(|j| stack(c.g, &per_batch.iter().map(|r| r[j]).collect::<Vec<_>>())).collect())
}

/// A `scan` over leading-axis inputs `xs` (all the same length) with carried `states`;
/// returns the final states and the stacked scan outputs.
fn scan_core(c: &mut Ctx, body: &GraphProto, states: &[NodeId], xs: &[NodeId]) -> Result<(Vec<NodeId>, Vec<NodeId>)> {
    let mut len = None;
    for &x in xs {
        let s = c.ty(x);
        match (s.dims.first(), len) {
            (Some(Dim::Static(n)), None) => len = Some(*n),
            (Some(Dim::Static(n)), Some(l)) if *n == l => {}
            _ => return Err(c.err(format!("scan inputs need one static scan length, got {s}"))),
        }
    }
    let len = len.ok_or_else(|| c.err("needs at least one scan input"))?;
    let mut sub = c.capture("body", &free_vars(c.node));
    let mut formals: Vec<NodeId> =
        states.iter().enumerate().map(|(k, &s)| sub.g.input(&format!("state{k}"), c.ty(s))).collect();
    for (k, &x) in xs.iter().enumerate() {
        let s = c.ty(x);
        formals.push(sub.g.input(&format!("x{k}"), Shape::from_dims(&s.dims[1..], s.dtype)));
    }
    let outs = c.run_body("body", &mut sub, body, &formals)?;
    let n = states.len();
    if outs.len() < n {
        return Err(c.err(format!("body returns {} values for {n} states", outs.len())));
    }
    check_carries(c, &sub.g, &outs[..n], states)?;
    sub.g.set_outputs(outs);
    if let Some(e) = sub.g.error() {
        return Err(c.err(format!("body: {e}")));
    }
    let total = sub.g.outputs().len();
    let res = c.g.scan(sub.g, &sub.operands, states, xs, len, false);
    let mut res = built(c, res, total)?;
    let ys = res.split_off(n);
    Ok((res, ys))
}
