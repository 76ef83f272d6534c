//! Typed compile options. Environment variables only override fields (listed in docs/env.md).

/// Options for [`crate::Session::compile_with`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompileOptions {
    /// Worker threads for parallel kernels; `None` = all cores (rayon's default).
    /// Override: `RLX_NUM_THREADS`.
    pub threads: Option<usize>,
    /// Log the kernel chosen for every step at `info` level (tracing) after compiling.
    /// Override: `RLX_DISPATCH_REPORT=1`.
    pub dispatch_report: bool,
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
    /// These options with the environment overrides applied.
    pub fn with_env_overrides(mut self) -> CompileOptions {
        if let Some(n) = std::env::var("RLX_NUM_THREADS").ok().and_then(|v| v.parse().ok()) {
            self.threads = Some(n);
        }
        if std::env::var("RLX_DISPATCH_REPORT").is_ok_and(|v| v == "1") {
            self.dispatch_report = true;
        }
        self
    }
}
