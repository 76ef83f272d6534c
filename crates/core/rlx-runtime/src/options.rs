//! Typed compile options. Environment variables only override fields (listed in docs/env.md).

/// Options for [`crate::Session::compile_with`].
#[derive(Clone, Debug, PartialEq)]
pub struct CompileOptions {
    /// Worker threads for parallel kernels; `None` = all cores (rayon's default).
    /// Override: `RLX_NUM_THREADS`.
    pub threads: Option<usize>,
    /// Log the kernel chosen for every step at `info` level (tracing) after compiling.
    /// Override: `RLX_DISPATCH_REPORT=1`.
    pub dispatch_report: bool,
    /// Run the optimizing (MIR) passes of `rlx-compile`: constant folding, algebraic
    /// simplification, CSE, DCE. Default `true`; `false` keeps the graph as built (after
    /// specialization and inlining). No override.
    pub optimize: bool,
    /// Print the IR after every compiler pass (tracing, `info` level, target `rlx_compile`).
    /// Override: `RLX_DUMP_IR=1`.
    pub dump_ir: bool,
    /// Fast mode of the CPU `dequant_matmul` kernel: quantize the activations to Q8_0 blocks
    /// and use integer dot products (as llama.cpp) for the schemes that have such a kernel;
    /// results then differ from the f32 reference by the activation quantization error.
    /// Default `false` (exact: `x · dequant(W)ᵀ` up to f32 rounding).
    /// Override: `RLX_QUANTIZED_ACTIVATIONS=1`.
    pub quantized_activations: bool,
    /// Flush subnormal floats to zero while CPU kernels run (FTZ + DAZ), as XLA/JAX do on the
    /// CPU: faster when values underflow (e.g. Adam moments of dead units), and results differ
    /// from IEEE 754 only where a value or operand is below f32's smallest normal (1.18e-38).
    /// Default `true`; `false` keeps IEEE gradual underflow. See `rlx_cpu::CpuOptions::
    /// flush_denormals`. Override: `RLX_FLUSH_DENORMALS=0` or `=1`.
    pub flush_denormals: bool,
    /// Time every step (calls and wall time, two clock reads per step) for
    /// [`crate::CompiledGraph::profile`]. Default `false`. No override.
    pub profile: bool,
}

impl Default for CompileOptions {
    fn default() -> CompileOptions {
        CompileOptions {
            threads: None,
            dispatch_report: false,
            optimize: true,
            dump_ir: false,
            quantized_activations: false,
            flush_denormals: true,
            profile: false,
        }
    }
}

impl CompileOptions {
    /// Defaults.
    pub fn new() -> CompileOptions {
        CompileOptions::default()
    }
    /// Set the thread count.
    pub fn with_threads(mut self, n: usize) -> CompileOptions {
        self.threads = Some(n);
        self
    }
    /// Turn the optimizing passes on or off.
    pub fn with_optimize(mut self, on: bool) -> CompileOptions {
        self.optimize = on;
        self
    }
    /// Turn IR dumps after every pass on or off.
    pub fn with_dump_ir(mut self, on: bool) -> CompileOptions {
        self.dump_ir = on;
        self
    }
    /// Turn the quantized-activation fast mode of `dequant_matmul` on or off.
    pub fn with_quantized_activations(mut self, on: bool) -> CompileOptions {
        self.quantized_activations = on;
        self
    }
    /// Flush denormals to zero while kernels run (default) or keep IEEE subnormals.
    pub fn with_flush_denormals(mut self, on: bool) -> CompileOptions {
        self.flush_denormals = on;
        self
    }
    /// These options with the environment overrides applied.
    pub fn with_env_overrides(mut self) -> CompileOptions {
        if let Some(n) = std::env::var("RLX_NUM_THREADS").ok().and_then(|v| v.parse().ok()) {
            self.threads = Some(n);
        }
        if std::env::var("RLX_DISPATCH_REPORT").is_ok_and(|v| v == "1") {
            self.dispatch_report = true;
        }
        if std::env::var("RLX_DUMP_IR").is_ok_and(|v| v == "1") {
            self.dump_ir = true;
        }
        if std::env::var("RLX_QUANTIZED_ACTIVATIONS").is_ok_and(|v| v == "1") {
            self.quantized_activations = true;
        }
        match std::env::var("RLX_FLUSH_DENORMALS").as_deref() {
            Ok("1") => self.flush_denormals = true,
            Ok("0") => self.flush_denormals = false,
            _ => {}
        }
        self
    }
}
