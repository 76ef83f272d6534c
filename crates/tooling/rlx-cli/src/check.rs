//! `rlx check GRAPH.json`: static checks of a serialized graph — shapes and dtypes (the
//! verifier), the CPU dispatch report, and provable NaN/Inf (log, sqrt, rsqrt of a constant out
//! of domain, division by a constant zero, arithmetic on a constant holding NaN) as errors;
//! ops that a limitation of the fusion rules keeps out of a neighbour's fused loop
//! ([`rlx_compile::missed_fusions`]) and steps on the reference evaluator as hints.

use rlx_ir::ops::{BinaryOp, UnaryOp};
use rlx_ir::{Graph, NodeId, Op};
use serde_json::json;
use std::path::Path;

use crate::error::{CliError, err};

/// One finding.
pub struct Problem {
    /// `error` or `hint`.
    pub level: &'static str,
    /// `%id (op)` and the node's name where it has one.
    pub node: String,
    /// What is wrong.
    pub msg: String,
}

/// Findings and the dispatch report.
pub struct CheckReport {
    pub problems: Vec<Problem>,
    pub dispatch: Option<rlx_compile::DispatchReport>,
    /// What was assumed to read the graph (an ONNX model's dynamic dims taken as 1).
    pub notes: Vec<String>,
}

impl CheckReport {
    pub fn errors(&self) -> usize {
        self.problems.iter().filter(|p| p.level == "error").count()
    }
    /// The first error as `rlx check` prints it (`<node>: <message>`, without `error: `), and
    /// how many more there are; `None` when there are only hints.
    pub fn first_error(&self) -> Option<String> {
        let mut errors = self.problems.iter().filter(|p| p.level == "error");
        let first = errors.next()?;
        let more = match errors.count() {
            0 => String::new(),
            1 => " (and 1 more error; rlx check lists them)".into(),
            n => format!(" (and {n} more errors; rlx check lists them)"),
        };
        Some(format!("{}: {}{more}", first.node, first.msg))
    }
    pub fn human(&self) -> String {
        let mut s = String::new();
        for n in &self.notes {
            s += &format!("note: {n}\n");
        }
        for p in &self.problems {
            s += &format!("{}: {}: {}\n", p.level, p.node, p.msg);
        }
        if let Some(d) = &self.dispatch {
            s += &format!("dispatch (cpu):\n{d}");
        }
        s += &format!("{} error(s), {} hint(s)\n", self.errors(), self.problems.len() - self.errors());
        s
    }
    pub fn json(&self) -> String {
        let problems: Vec<_> =
            self.problems.iter().map(|p| json!({"level": p.level, "node": p.node, "message": p.msg})).collect();
        let dispatch: serde_json::Value = self
            .dispatch
            .as_ref()
            .map_or(serde_json::Value::Null, |d| serde_json::from_str(&d.to_json()).unwrap_or_default());
        let hints = self.problems.len() - self.errors();
        json!({"errors": self.errors(), "hints": hints, "problems": problems, "dispatch": dispatch, "notes": self.notes})
            .to_string()
    }
}

fn label(g: &Graph, id: NodeId) -> String {
    match g.source_name(id) {
        Some(n) => format!("{id} ({} {n:?})", g.node(id).op.name()),
        None => format!("{id} ({})", g.node(id).op.name()),
    }
}

/// Read a graph saved with `rlx_ir::hir_to_json`, or import an ONNX model (see
/// [`import_onnx`]), for `rlx check` and `rlx compile`. It is not verified here: `check`
/// reports a verifier error as a finding; `compile` verifies.
/// Errors: unreadable file, not UTF-8, not a graph's JSON, an ONNX model that does not import.
/// Besides the graph: notes on what was assumed to read it (an ONNX model's dynamic dims).
pub fn read_graph(path: &Path) -> Result<(Graph, Vec<String>), CliError> {
    let what = "a graph's JSON (written by rlx_ir::hir_to_json) or an ONNX model";
    let needs = "rlx check and rlx compile read a graph's JSON or an ONNX model";
    crate::error::not_a_directory(path)?;
    if crate::error::known_format(path)? == Some(crate::error::Format::Onnx) {
        return import_onnx(path, crate::error::load_onnx(path, needs, "an ONNX model, .onnx")?);
    }
    let bytes = std::fs::read(path)?;
    // An ONNX model under another name: protobuf, not JSON, and it holds a graph.
    let onnx = |bytes: &[u8]| rlx_onnx::parse(bytes).ok().filter(|m| m.graph.is_some());
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            if let Some(m) = onnx(e.as_bytes()) {
                return import_onnx(path, m);
            }
            // A model file given by mistake is named as such, as the other subcommands do.
            return Err(match crate::error::known_format(path) {
                Ok(Some(f)) => err(format!("is {}, but {needs}", f.describe())),
                _ => err(format!("binary data, not {what}")),
            });
        }
    };
    match serde_json::from_str(&text) {
        Ok(g) => specialize_symbols(g),
        Err(e) => match onnx(text.as_bytes()) {
            Some(m) => import_onnx(path, m),
            None => Err(err(format!("not {what}: {e}"))),
        },
    }
}

/// A graph's JSON with symbolic input dims (`[n, 4]`): each symbol taken as 1, as an ONNX
/// model's dynamic dims are, and named in the note (the compiler needs static shapes; `rlx
/// compile` said "specialize the graph first", which the CLI cannot do). A graph the verifier
/// rejects is returned as read, for `rlx check` to report.
fn specialize_symbols(g: Graph) -> Result<(Graph, Vec<String>), CliError> {
    // Only a verified graph's input list is safe to index.
    if rlx_ir::verify(&g).is_err() {
        return Ok((g, vec![]));
    }
    let mut syms: Vec<String> = vec![];
    for &i in g.inputs().iter().chain(g.params()) {
        for d in &g.shape(i).dims {
            if let rlx_ir::Dim::Sym(s) = d
                && !syms.contains(s)
            {
                syms.push(s.clone());
            }
        }
    }
    if syms.is_empty() {
        return Ok((g, vec![]));
    }
    let note = format!("symbolic dims taken as 1: {}", syms.join(", "));
    let b: rlx_ir::Bindings = syms.iter().map(|s| (s.clone(), 1)).collect();
    let h = rlx_ir::specialize(&g, &b).map_err(|e| err(format!("{e} ({note})")))?;
    Ok((h, vec![note]))
}

/// Import the ONNX model `proto` (read from `path`) with each graph input's dynamic dims
/// (named or unknown) taken as 1, as the graph `rlx check` / `rlx compile` examine; the note
/// names them (`dynamic dims taken as 1: input_ids [batch_size, sequence_length], …`).
fn import_onnx(path: &Path, proto: rlx_onnx::proto::ModelProto) -> Result<(Graph, Vec<String>), CliError> {
    use rlx_onnx::proto::tensor_shape_proto::dimension::Value as D;
    use rlx_onnx::proto::type_proto::Value as T;
    let mut input_shapes = std::collections::HashMap::new();
    let mut assumed = vec![];
    if let Some(g) = &proto.graph {
        let inits: Vec<&str> = g.initializer.iter().filter_map(|t| t.name.as_deref()).collect();
        for vi in g.input.iter().filter(|vi| !inits.contains(&vi.name.as_deref().unwrap_or_default())) {
            let Some(T::TensorType(tt)) = vi.r#type.as_ref().and_then(|t| t.value.as_ref()) else { continue };
            let name = vi.name.clone().unwrap_or_default();
            let Some(shape) = &tt.shape else {
                // The importer reads an input without a declared shape as a scalar.
                assumed.push(format!("{name} (no declared shape: a scalar)"));
                continue;
            };
            let mut dynamic = vec![];
            let dims = shape.dim.iter().map(|d| match &d.value {
                Some(D::DimValue(v)) if *v >= 0 => *v as usize,
                Some(D::DimParam(p)) if !p.is_empty() => {
                    dynamic.push(p.clone());
                    1
                }
                _ => {
                    dynamic.push("?".into());
                    1
                }
            });
            input_shapes.insert(name.clone(), dims.collect());
            if !dynamic.is_empty() {
                assumed.push(format!("{name} [{}]", dynamic.join(", ")));
            }
        }
    }
    let base_dir = path.parent().map(Path::to_path_buf);
    let opts = rlx_onnx::ImportOptions { input_shapes, base_dir, ..Default::default() };
    let notes =
        if assumed.is_empty() { vec![] } else { vec![format!("dynamic dims taken as 1: {}", assumed.join(", "))] };
    // A model that only some sizes fit fails here: say which sizes were assumed.
    let g = rlx_onnx::import(&proto, &opts).map_err(|e| match notes.first() {
        Some(n) => err(format!("{e} ({n})")),
        None => e.into(),
    })?;
    Ok((g.graph, notes))
}

/// Check the graph in `path`. Errors: as [`read_graph`]; the graph's own problems (a verifier
/// error included) are findings in the report, not errors.
pub fn check(path: &Path) -> Result<CheckReport, CliError> {
    let (g, notes) = read_graph(path)?;
    Ok(CheckReport { notes, ..check_graph(&g) })
}

/// The compiler's options for the CPU backend, as `rlx compile` and the runtime use them.
pub fn cpu_pass_options() -> rlx_compile::PassOptions {
    rlx_compile::PassOptions {
        native_composites: rlx_cpu::native_composites().iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

/// `g` as the fusion pass sees it: after the HIR stage and the MIR passes before `fuse`, for
/// the CPU backend (node ids as `rlx compile --dump` prints them after `mir.attention`).
fn before_fusion(g: &Graph) -> Result<Graph, rlx_compile::CompileError> {
    let opts = cpu_pass_options();
    let mut h = g.clone();
    let mut report = rlx_compile::CompileReport::default();
    rlx_compile::run_stage(&mut h, &opts, "hir", &rlx_compile::hir_stage(), &mut report)?;
    let mir: Vec<_> = rlx_compile::mir_stage().into_iter().take_while(|p| p.name != "fuse").collect();
    rlx_compile::run_stage(&mut h, &opts, "mir", &mir, &mut report)?;
    Ok(h)
}

/// One hint for the steps of `h` (the graph before fusion) that the CPU runs on the reference
/// evaluator (much slower than a kernel) because it has no kernel for their op and dtype
/// (`reduce_prod`, f16 arithmetic, …): the rest of the compile (fusion, epilogues) is run on
/// `h` first, so a fused op is not counted. Graphs with symbolic dims are skipped (kernels are
/// picked for static shapes).
fn reference_steps(h: &Graph, problems: &mut Vec<Problem>) {
    let mut g = h.clone();
    let opts = cpu_pass_options();
    let rest: Vec<_> = rlx_compile::mir_stage().into_iter().skip_while(|p| p.name != "fuse").collect();
    if rlx_compile::run_stage(&mut g, &opts, "mir", &rest, &mut Default::default()).is_err() {
        return;
    }
    let cpu = rlx_cpu::CpuOptions::default();
    let mut kinds: Vec<(String, usize)> = vec![];
    let mut first = None;
    for (i, n) in g.nodes().iter().enumerate() {
        let runs = !matches!(
            n.op,
            Op::Input { .. } | Op::Param { .. } | Op::Constant(_) | Op::GetTupleElement { .. } | Op::Reshape { .. }
        );
        if !runs || n.outputs.iter().any(|t| t.static_dims().is_none()) {
            continue;
        }
        let id = NodeId(i as u32);
        if !matches!(rlx_cpu::kernels::select(&g, id, &cpu), rlx_cpu::kernels::Kernel::Reference) {
            continue;
        }
        first.get_or_insert(id);
        let kind = format!("{} {}", n.op.name(), n.ty().dtype);
        match kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, c)) => *c += 1,
            None => kinds.push((kind, 1)),
        }
    }
    if let Some(id) = first {
        let list: Vec<String> = kinds.iter().map(|(k, c)| format!("{k} x{c}")).collect();
        let n: usize = kinds.iter().map(|(_, c)| c).sum();
        let msg = format!(
            "{n} step(s) run on the reference evaluator, much slower than a kernel: the CPU has no kernel for {} (node ids of `rlx compile`'s step list)",
            list.join(", ")
        );
        problems.push(Problem { level: "hint", node: label(&g, id), msg });
    }
}

/// The fusion hints of `g` (computed on [`before_fusion`]'s graph, so ops that folding or
/// simplification remove get none and composites the CPU inlines are seen as their parts).
/// Elementwise ops on one non-f32 dtype are one hint, not one per op.
fn fusion_hints(g: &Graph, problems: &mut Vec<Problem>) {
    let h = match before_fusion(g) {
        Ok(h) => h,
        Err(e) => {
            problems.push(Problem { level: "error", node: "graph".into(), msg: format!("the compiler failed: {e}") });
            return;
        }
    };
    reference_steps(&h, problems);
    let missed = rlx_compile::missed_fusions(&h);
    let mut by_dtype: Vec<(rlx_ir::DType, Vec<&rlx_compile::MissedFusion>)> = vec![];
    for m in &missed {
        match m.reason {
            rlx_compile::MissReason::DType(d) => match by_dtype.iter_mut().find(|(e, _)| *e == d) {
                Some((_, v)) => v.push(m),
                None => by_dtype.push((d, vec![m])),
            },
            _ => problems.push(Problem { level: "hint", node: label(&h, m.node), msg: m.message(&h) }),
        }
    }
    for (d, ms) in by_dtype {
        let msg = match ms.len() {
            1 => ms[0].message(&h),
            n => {
                let more: Vec<String> = ms[1..].iter().take(4).map(|m| label(&h, m.node)).collect();
                let etc = if n > 5 { ", …" } else { "" };
                format!(
                    "it and {} more elementwise ops on {d} values ({}{etc}) run one pass each: fused loops hold f32 and bool only",
                    n - 1,
                    more.join(", ")
                )
            }
        };
        problems.push(Problem { level: "hint", node: label(&h, ms[0].node), msg });
    }
}

/// The findings of `rlx check` on `g`: [`check_errors`], then the hints (which run the
/// compile pipeline and the CPU's kernel selection on a copy of `g`).
pub fn check_graph(g: &Graph) -> CheckReport {
    let mut r = check_errors(g);
    if r.dispatch.is_some() {
        fusion_hints(g, &mut r.problems);
    }
    r
}

/// The errors `rlx check` finds in `g` (verifier, provable NaN/Inf, an op no backend runs) and
/// the dispatch report, without the hints: what `rlx compile` stops on, so it does not run the
/// pipeline twice. `dispatch` is `None` when the verifier rejected `g`.
pub fn check_errors(g: &Graph) -> CheckReport {
    // The checks below index nodes by their inputs: only a verified graph is safe to walk.
    if let Err(e) = rlx_ir::verify(g) {
        return CheckReport { problems: vec![verify_problem(g, e)], dispatch: None, notes: vec![] };
    }
    let mut problems = vec![];
    for (i, n) in g.nodes().iter().enumerate() {
        let id = NodeId(i as u32);
        let constant = |k: usize| match n.inputs.get(k).map(|&j| &g.node(j).op) {
            Some(Op::Constant(t)) => Some(t.to_f64_vec()),
            _ => None,
        };
        let msg = match &n.op {
            Op::Unary(UnaryOp::Log) if constant(0).is_some_and(|v| v.iter().any(|&x| x <= 0.0)) => {
                Some("log of a constant <= 0 gives -inf or NaN")
            }
            Op::Unary(UnaryOp::Sqrt) if constant(0).is_some_and(|v| v.iter().any(|&x| x < 0.0)) => {
                Some("sqrt of a constant < 0 gives NaN")
            }
            Op::Unary(UnaryOp::Rsqrt) if constant(0).is_some_and(|v| v.iter().any(|&x| x <= 0.0)) => {
                Some("rsqrt of a constant <= 0 gives inf or NaN")
            }
            Op::Binary(BinaryOp::Div) if constant(1).is_some_and(|v| v.contains(&0.0)) => {
                Some("division by a constant zero gives inf or NaN")
            }
            // An importer folds an out-of-domain op on constants (ONNX `Log` of -1) into a NaN
            // constant before these checks see the op; arithmetic carries the NaN on.
            Op::Unary(_) | Op::Binary(_)
                if (0..n.inputs.len()).any(|k| constant(k).is_some_and(|v| v.iter().any(|x| x.is_nan()))) =>
            {
                Some("reads a constant holding NaN, so its result is NaN there (a folded out-of-domain op?)")
            }
            _ => None,
        };
        if let Some(m) = msg {
            problems.push(Problem { level: "error", node: label(g, id), msg: m.into() });
        }
    }
    let dispatch = Some(rlx_compile::DispatchReport::new(g, &|name| rlx_cpu::native_composites().contains(&name)));
    if let Some(d) = &dispatch {
        for e in d.entries.iter().filter(|e| e.dispatch == rlx_compile::Dispatch::Missing) {
            problems.push(Problem { level: "error", node: e.kind.clone(), msg: "no backend can run it".into() });
        }
    }
    CheckReport { problems, dispatch, notes: vec![] }
}

/// A verifier error as a finding: every variant that carries a node index (a shape error, a
/// structural error such as an operand defined after its use) is reported under the node's
/// label, as the other findings are (`%2 (add)`); the rest under `graph`.
fn verify_problem(g: &Graph, e: rlx_ir::IrError) -> Problem {
    use rlx_ir::IrError;
    // A builder's recorded error may name the node it would have added (past the end).
    let at = |node: usize, msg: String| {
        if node < g.nodes().len() {
            Problem { level: "error", node: label(g, NodeId(node as u32)), msg }
        } else {
            Problem { level: "error", node: "graph".into(), msg: e.to_string() }
        }
    };
    match &e {
        IrError::Shape { node, msg, .. } | IrError::Node { node, msg, .. } => at(*node, msg.clone()),
        IrError::DeclaredShape { node, declared, inferred, .. } => {
            at(*node, format!("declared shape {declared} but the operands give {inferred}"))
        }
        _ => Problem { level: "error", node: "graph".into(), msg: e.to_string() },
    }
}
