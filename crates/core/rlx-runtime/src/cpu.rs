//! The CPU backend adapter (`rlx-cpu` behind the [`Backend`] trait).

use crate::{Backend, CompileOptions, Device, Error, Executable, Result, StepInfo, StepTime, Support};
use rlx_cpu::{CpuError, CpuExecutable, CpuOptions};
use rlx_ir::{Graph, Op, Tensor};

pub(crate) struct CpuBackend;

fn err(e: CpuError) -> Error {
    match e {
        CpuError::Ir(e) => Error::Ir(e),
        other => Error::Backend { device: Device::Cpu, msg: other.to_string() },
    }
}

impl Backend for CpuBackend {
    fn device(&self) -> Device {
        Device::Cpu
    }
    fn supports(&self, op: &Op) -> Support {
        match op {
            Op::Composite(c) if rlx_cpu::native_composites().contains(&c.name.as_str()) => Support::Native,
            Op::Composite(_) => Support::Decompose,
            _ => Support::Native,
        }
    }
    fn compile(&self, g: &Graph, opts: &CompileOptions) -> Result<Box<dyn Executable>> {
        let cpu = CpuOptions {
            threads: opts.threads,
            quantized_activations: opts.quantized_activations,
            flush_denormals: opts.flush_denormals,
            profile: opts.profile,
            ..Default::default()
        };
        let exe = CpuExecutable::compile(g, &cpu).map_err(err)?;
        Ok(Box::new(CpuExe(exe)))
    }
}

struct CpuExe(CpuExecutable);

impl Executable for CpuExe {
    fn run(&mut self, inputs: &[&Tensor], params: &[&Tensor]) -> Result<Vec<Tensor>> {
        self.0.run(inputs, params).map_err(err)
    }
    fn run_into(&mut self, inputs: &[&Tensor], params: &[&Tensor], outputs: &mut Vec<Tensor>) -> Result<()> {
        self.0.run_into(inputs, params, outputs).map_err(err)
    }
    fn lir(&self) -> Option<&rlx_compile::lir::LirModule> {
        Some(self.0.lir())
    }
    fn steps(&self) -> Vec<StepInfo> {
        self.0
            .steps()
            .into_iter()
            .map(|s| StepInfo { node: s.node, op: s.op, scheme: s.scheme, kernel: s.kernel })
            .collect()
    }
    fn profile(&self) -> Option<Vec<StepTime>> {
        let p = self.0.profile()?;
        Some(
            p.into_iter()
                .map(|s| StepTime {
                    step: StepInfo { node: s.step.node, op: s.step.op, scheme: s.step.scheme, kernel: s.step.kernel },
                    calls: s.calls,
                    total: s.total,
                })
                .collect(),
        )
    }
}
