//! `Session`: a device plus its backend; compiles graphs.

use crate::cache::CompileCache;
use crate::{Backend, CompileOptions, CompiledGraph, Device, Error, Result};
use rlx_ir::Graph;
use std::sync::Arc;

/// Compiles graphs for one device.
#[derive(Clone)]
pub struct Session {
    backend: Arc<dyn Backend>,
    cache: Arc<CompileCache>,
}

impl Session {
    /// A session on `device`. Panics if the device is unavailable; see [`Session::try_new`].
    #[track_caller]
    pub fn new(device: Device) -> Session {
        Session::try_new(device).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A session on `device`, or `Error::DeviceUnavailable`.
    pub fn try_new(device: Device) -> Result<Session> {
        let backend: Arc<dyn Backend> = match device {
            #[cfg(feature = "cpu")]
            Device::Cpu => Arc::new(crate::cpu::CpuBackend),
            other => return Err(Error::DeviceUnavailable(other)),
        };
        Ok(Session { backend, cache: Arc::default() })
    }

    /// The session's device.
    pub fn device(&self) -> Device {
        self.backend.device()
    }

    /// Compile with default options (plus environment overrides). Panics with the error's
    /// message on an invalid graph; see [`Session::try_compile`].
    #[track_caller]
    pub fn compile(&self, g: Graph) -> CompiledGraph {
        self.try_compile(g).unwrap_or_else(|e| panic!("compile failed: {e}"))
    }

    /// Compile with default options (plus environment overrides).
    pub fn try_compile(&self, g: Graph) -> Result<CompiledGraph> {
        self.try_compile_with(g, &CompileOptions::default())
    }

    /// Compile with explicit options (environment overrides still apply). Panics on error.
    #[track_caller]
    pub fn compile_with(&self, g: Graph, opts: &CompileOptions) -> CompiledGraph {
        self.try_compile_with(g, opts).unwrap_or_else(|e| panic!("compile failed: {e}"))
    }

    /// Compile with explicit options (environment overrides still apply).
    ///
    /// Verifies the graph now; graphs with static input shapes are also compiled for the
    /// backend now, symbolic ones on the first run with each new set of input dims.
    pub fn try_compile_with(&self, g: Graph, opts: &CompileOptions) -> Result<CompiledGraph> {
        g.verify()?;
        CompiledGraph::new(g, self.backend.clone(), opts.clone().with_env_overrides(), self.cache.clone())
    }
}
