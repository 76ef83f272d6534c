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
    /// These options with the environment overrides applied (a value an override does not
    /// take is ignored; [`CompileOptions::ignored_env_overrides`] names those).
    pub fn with_env_overrides(mut self) -> CompileOptions {
        self.apply_env();
        self
    }

    /// The environment overrides set to a value they do not take, which
    /// [`CompileOptions::with_env_overrides`] ignores, one sentence each
    /// (`RLX_NUM_THREADS="abc" is not a whole number; ignored (docs/env.md)`), for a front end
    /// to show.
    pub fn ignored_env_overrides() -> Vec<String> {
        CompileOptions::default().apply_env()
    }

    /// Apply every override that is set to a value it takes; return the others. The one place
    /// each override's rule is written (docs/env.md lists them).
    fn apply_env(&mut self) -> Vec<String> {
        let mut ignored = Vec::new();
        let mut read = |name: &str, takes: &str, ok: &mut dyn FnMut(&str) -> bool| {
            if let Ok(v) = std::env::var(name)
                && !ok(&v)
            {
                ignored.push(format!("{name}={v:?} is not {takes}; ignored (docs/env.md)"));
            }
        };
        read("RLX_NUM_THREADS", "a whole number", &mut |v| v.parse().map(|n| self.threads = Some(n)).is_ok());
        read("RLX_DISPATCH_REPORT", "1", &mut |v| {
            v == "1" && {
                self.dispatch_report = true;
                true
            }
        });
        read("RLX_DUMP_IR", "1", &mut |v| {
            v == "1" && {
                self.dump_ir = true;
                true
            }
        });
        read("RLX_QUANTIZED_ACTIVATIONS", "1", &mut |v| {
            v == "1" && {
                self.quantized_activations = true;
                true
            }
        });
        read("RLX_FLUSH_DENORMALS", "0 or 1", &mut |v| match v {
            "1" | "0" => {
                self.flush_denormals = v == "1";
                true
            }
            _ => false,
        });
        ignored
    }
}
