//! Kernel selection and dispatch. Each fast kernel lives in its own module; everything else
//! runs the op's reference evaluation from `rlx-ir`.

use rlx_ir::{Graph, IrError, NodeId, Op, Tensor};

/// Composites with a native kernel here (others are inlined before compile).
pub const NATIVE_COMPOSITES: &[&str] = &[];

/// The kernel chosen for one node.
#[derive(Clone, Debug)]
pub enum Kernel {
    /// `Op::eval_into` from rlx-ir.
    Reference,
}

impl Kernel {
    /// Name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            Kernel::Reference => "reference",
        }
    }
}

/// Pick the kernel for node `id` (shapes are static).
pub fn select(_g: &Graph, _id: NodeId) -> Kernel {
    Kernel::Reference
}

/// Execute one kernel.
pub fn run(k: &Kernel, op: &Op, ins: &[&Tensor], outs: &mut [Tensor]) -> Result<(), IrError> {
    match k {
        Kernel::Reference => op.eval_into(ins, outs),
    }
}
