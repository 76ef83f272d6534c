//! `rlx compile GRAPH.json --dump`: run the compiler pipeline for the CPU and print the IR
//! after each pass and the memory plan (arena bytes, peak, steps with kernels).

use serde_json::json;
use std::path::Path;

use crate::error::{CliError, err};

/// The pipeline's records and the memory plan.
pub struct CompileOut {
    report: rlx_compile::CompileReport,
    lir: rlx_compile::lir::LirModule,
    /// What was assumed to read the graph (an ONNX model's dynamic dims taken as 1).
    notes: Vec<String>,
}

impl CompileOut {
    pub fn human(&self, dump: bool) -> String {
        let mut s = String::new();
        for n in &self.notes {
            s += &format!("// note: {n}\n");
        }
        for r in &self.report.passes {
            s += &format!(
                "// {}.{}: {} changes, {} -> {} nodes\n",
                r.stage, r.pass, r.stats.changed, r.stats.nodes_before, r.stats.nodes_after
            );
            if dump && let Some(ir) = &r.ir {
                s += ir;
                s += "\n";
            }
        }
        s + &self.lir.to_string()
    }
    pub fn json(&self, dump: bool) -> String {
        let passes: Vec<_> = self
            .report
            .passes
            .iter()
            .map(|r| {
                json!({"stage": r.stage, "pass": r.pass, "changed": r.stats.changed,
                       "nodes": r.stats.nodes_after, "ir": if dump { r.ir.clone() } else { None }})
            })
            .collect();
        let lir: serde_json::Value = serde_json::from_str(&self.lir.summary_json()).unwrap_or_default();
        // One object per step, as the text lists them (the ids `rlx check`'s hints cite).
        let steps: Vec<_> = self
            .lir
            .steps
            .iter()
            .map(|st| {
                let reuse = match st.reuse {
                    rlx_compile::lir::Reuse::Fresh => json!("fresh"),
                    rlx_compile::lir::Reuse::InPlace { operand } => json!({"in_place": operand}),
                    rlx_compile::lir::Reuse::View => json!("view"),
                };
                json!({"node": st.node.to_string(), "op": st.op, "kernel": st.kernel, "bytes": st.bytes,
                       "reuse": reuse})
            })
            .collect();
        json!({"passes": passes, "lir": lir, "steps": steps, "notes": self.notes}).to_string()
    }
}

/// Compile the graph in `path` (static shapes) for the CPU. Errors: as
/// [`crate::check::read_graph`], and the first of the errors `rlx check` finds (a verifier error,
/// a provable NaN, an op no backend runs) in its words; its hints do not stop the compile.
pub fn compile(path: &Path) -> Result<CompileOut, CliError> {
    let (mut g, notes) = crate::check::read_graph(path)?;
    if let Some(e) = crate::check::check_errors(&g).first_error() {
        return Err(err(e));
    }
    let opts = rlx_compile::PassOptions { dump_ir: true, verify_each: true, ..crate::check::cpu_pass_options() };
    let report = rlx_compile::compile(&mut g, &opts)?;
    let exe = rlx_cpu::CpuExecutable::compile(&g, &rlx_cpu::CpuOptions::default())?;
    Ok(CompileOut { report, lir: exe.lir().clone(), notes })
}
