//! `rlx check GRAPH.json`: static checks of a serialized graph — shapes and dtypes (the
//! verifier), the CPU dispatch report, and provable NaN/Inf (log, sqrt, rsqrt of a constant out
//! of domain, division by a constant zero).

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
        json!({"errors": self.errors(), "problems": problems, "dispatch": dispatch}).to_string()
    }
}

fn label(g: &Graph, id: NodeId) -> String {
    match g.source_name(id) {
        Some(n) => format!("{id} ({} {n:?})", g.node(id).op.name()),
        None => format!("{id} ({})", g.node(id).op.name()),
    }
}

/// Read a graph saved with `rlx_ir::hir_to_json`, for `rlx check` and `rlx compile`. It is
/// not verified here: `check` reports a verifier error as a finding; `compile` verifies.
/// Errors: unreadable file, not UTF-8, not a graph's JSON.
pub fn read_graph(path: &Path) -> Result<Graph, CliError> {
    let what = "a graph's JSON (written by rlx_ir::hir_to_json)";
    crate::error::not_a_directory(path)?;
    let text = String::from_utf8(std::fs::read(path)?).map_err(|_| {
        // A model file given by mistake is named as such, as the other subcommands do.
        match crate::error::known_format(path) {
            Ok(Some(f)) => err(format!("is {}, but rlx check and rlx compile read {what}", f.describe())),
            _ => err(format!("binary data, not {what}")),
        }
    })?;
    serde_json::from_str(&text).map_err(|e| err(format!("not {what}: {e}")))
}

/// Check the graph in `path`. Errors: as [`read_graph`]; the graph's own problems (a verifier
/// error included) are findings in the report, not errors.
pub fn check(path: &Path) -> Result<CheckReport, CliError> {
    Ok(check_graph(&read_graph(path)?))
}

/// The findings of `rlx check` on `g` (`rlx compile` stops on its errors).
pub fn check_graph(g: &Graph) -> CheckReport {
    // The checks below index nodes by their inputs: only a verified graph is safe to walk.
    if let Err(e) = rlx_ir::verify(g) {
        return CheckReport { problems: vec![verify_problem(g, e)], dispatch: None };
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
    CheckReport { problems, dispatch }
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
