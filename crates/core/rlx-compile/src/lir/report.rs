//! The printable summary of a [`LirModule`]: memory figures and one line per step.

use super::{LirModule, Reuse};
use rlx_ir::NodeId;
use std::fmt;

/// One step of the schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LirStep {
    /// The node it computes.
    pub node: NodeId,
    /// Op name.
    pub op: String,
    /// Kernel chosen by the backend (empty until a backend fills it in).
    pub kernel: String,
    /// Fresh buffer, in place over an operand, or a view of one.
    pub reuse: Reuse,
    /// The buffer it writes (`None` for fixed storage: multi-result nodes).
    pub buffer: Option<usize>,
    /// Bytes of its result(s).
    pub bytes: usize,
}

impl LirModule {
    /// The memory figures as one JSON object (no dependency on a JSON crate: numbers only).
    pub fn summary_json(&self) -> String {
        format!(
            "{{\"steps\":{},\"buffers\":{},\"arena_bytes\":{},\"fixed_bytes\":{},\"peak_live_bytes\":{},\"unplanned_bytes\":{},\"in_place\":{},\"views\":{}}}",
            self.steps.len(),
            self.buffers.len(),
            self.arena_bytes,
            self.fixed_bytes,
            self.peak_live_bytes,
            self.unplanned_bytes,
            self.count(|r| matches!(r, Reuse::InPlace { .. })),
            self.count(|r| r == Reuse::View),
        )
    }

    fn count(&self, f: impl Fn(Reuse) -> bool) -> usize {
        self.steps.iter().filter(|s| f(s.reuse)).count()
    }
}

impl fmt::Display for LirModule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "lir: {} steps, {} buffers, arena {} B + fixed {} B (unplanned {} B, {:.1}%), peak live {} B, {} in place, {} views",
            self.steps.len(),
            self.buffers.len(),
            self.arena_bytes,
            self.fixed_bytes,
            self.unplanned_bytes,
            100.0 * self.ratio(),
            self.peak_live_bytes,
            self.count(|r| matches!(r, Reuse::InPlace { .. })),
            self.count(|r| r == Reuse::View),
        )?;
        for s in &self.steps {
            let at = match (s.buffer, s.buffer.map(|b| self.buffers[b].offset)) {
                (Some(b), Some(off)) => format!("buf{b}@{off}"),
                _ => "fixed".to_string(),
            };
            let how = match s.reuse {
                Reuse::Fresh => String::new(),
                Reuse::InPlace { operand } => format!(" in-place(#{operand})"),
                Reuse::View => " view".to_string(),
            };
            let kernel = if s.kernel.is_empty() { "-" } else { &s.kernel };
            writeln!(f, "  {} {} [{kernel}] {} B {at}{how}", s.node, s.op, s.bytes)?;
        }
        Ok(())
    }
}
