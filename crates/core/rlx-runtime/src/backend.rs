//! The backend contract: a backend turns a specialized, verified graph into an executable.

use crate::{CompileOptions, Device, Result};
use rlx_ir::{Graph, Op, Tensor};

/// How a backend handles an op or composite.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Support {
    /// A native kernel runs it.
    Native,
    /// It is decomposed (composite body inlined) and its primitives run.
    Decompose,
    /// It cannot run.
    Missing,
}

/// What one compiled step runs, for reports.
#[derive(Clone, Debug, PartialEq)]
pub struct StepInfo {
    /// Node index in the compiled graph.
    pub node: usize,
    /// Op name.
    pub op: String,
    /// The GGUF type of a quantized product's weights (`dequant_matmul`'s `scheme` attribute,
    /// e.g. `Q6_K`); `None` for other ops.
    pub scheme: Option<String>,
    /// Kernel name.
    pub kernel: &'static str,
}

/// Calls and wall time of one compiled step, summed over runs (see
/// [`crate::CompileOptions::profile`]).
#[derive(Clone, Debug, PartialEq)]
pub struct StepTime {
    /// The step.
    pub step: StepInfo,
    /// Runs that executed it.
    pub calls: u64,
    /// Wall-clock time summed over those runs (a step's parallel work included).
    pub total: std::time::Duration,
}

/// A compute backend.
pub trait Backend: Send + Sync {
    /// The device it runs on.
    fn device(&self) -> Device;
    /// Whether it runs `op` natively.
    fn supports(&self, op: &Op) -> Support;
    /// Compile a graph with static shapes whose unsupported composites are already inlined.
    fn compile(&self, g: &Graph, opts: &CompileOptions) -> Result<Box<dyn Executable>>;
}

/// A compiled graph on one backend.
pub trait Executable: Send {
    /// Run with inputs and params in the graph's declaration order.
    fn run(&mut self, inputs: &[&Tensor], params: &[&Tensor]) -> Result<Vec<Tensor>>;
    /// [`Executable::run`] into caller-owned tensors that are reused from run to run (resized
    /// to one per output). A backend that plans memory hands its output buffers over without a
    /// copy and takes the caller's previous tensors back as buffers (see
    /// `rlx_cpu::CpuExecutable::run_into`); the default copies `run`'s result.
    fn run_into(&mut self, inputs: &[&Tensor], params: &[&Tensor], outputs: &mut Vec<Tensor>) -> Result<()> {
        *outputs = self.run(inputs, params)?;
        Ok(())
    }
    /// The kernel of each step.
    fn steps(&self) -> Vec<StepInfo>;
    /// The memory plan (schedule, buffers, per-step kernels), when the backend plans one.
    fn lir(&self) -> Option<&rlx_compile::lir::LirModule> {
        None
    }
    /// Per-step calls and time since compiling, when compiled with
    /// [`crate::CompileOptions::profile`] on a backend that times its steps; else `None`.
    fn profile(&self) -> Option<Vec<StepTime>> {
        None
    }
}
