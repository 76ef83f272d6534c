//! Buffer planning and the step loop.

use crate::fpenv;
use crate::inplace::{self, InPlaceKernel};
use crate::kernels::simd::SimdLevel;
use crate::kernels::spin::Team;
use crate::kernels::{self, Kernel};
use rlx_compile::lir::{LirModule, LirOptions, Reuse, Storage};
use rlx_ir::{DType, Graph, IrError, NodeId, Op, Tensor};
use std::time::{Duration, Instant};
use thiserror::Error;

/// Errors of the CPU backend.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CpuError {
    /// The graph is invalid or an op failed.
    #[error(transparent)]
    Ir(#[from] IrError),
    /// A shape is still symbolic at compile time.
    #[error("node %{node} ({op}) has symbolic type {ty}; specialize the graph first")]
    Symbolic {
        /// Node index.
        node: usize,
        /// Op name.
        op: String,
        /// The type.
        ty: String,
    },
    /// A fed tensor does not match the declaration.
    #[error("{what} {name:?}: expected {expected}, got {got}")]
    Feed {
        /// "input" or "param".
        what: &'static str,
        /// Its name.
        name: String,
        /// Declared type.
        expected: String,
        /// What was given.
        got: String,
    },
    /// The memory plan needs a buffer the allocator refused (a graph with absurd static
    /// shapes, e.g. an ONNX `Expand` to `[1e5, 1e5, 100]`).
    #[error("cannot allocate {bytes} bytes for a {dtype} buffer of {elems} elements")]
    OutOfMemory {
        /// Bytes requested.
        bytes: u128,
        /// Element dtype.
        dtype: DType,
        /// Elements requested.
        elems: usize,
    },
    /// Wrong number of inputs or params.
    #[error("expected {expected} {what}, got {got}")]
    Arity {
        /// "inputs" or "params".
        what: &'static str,
        /// Declared count.
        expected: usize,
        /// Given count.
        got: usize,
    },
}

/// Options of the CPU backend.
#[derive(Clone, Debug)]
pub struct CpuOptions {
    /// Worker threads for parallel kernels; `None` = rayon's global pool (or, with
    /// `flush_denormals`, an RLX pool of the same size); `Some(1)` runs every kernel on the
    /// calling thread, with no pool. At most the CPU's available parallelism
    /// (`std::thread::available_parallelism`): a larger count is clamped to it, since the
    /// kernels' worker team spins while it waits and more threads than cores would only
    /// take turns spinning.
    pub threads: Option<usize>,
    /// Fast mode of `dequant_matmul`: quantize the activations (Q8_0 blocks) and use integer
    /// dot products, as llama.cpp does, for the schemes that have such a kernel. Results then
    /// differ from the f32 reference by the activation quantization error. Default `false`:
    /// exact mode, `x · dequant(W)ᵀ` up to f32 rounding.
    pub quantized_activations: bool,
    /// Explicit SIMD code the kernels may use (default: the best the CPU has).
    pub simd: SimdLevel,
    /// Flush subnormal f32/f64 values to zero while kernels run: FTZ (subnormal results become
    /// ±0) and DAZ (subnormal operands read as ±0), as XLA/JAX and oneDNN do on the CPU.
    /// Default `true`. Set on the calling thread for the duration of each run (its previous
    /// floating-point control register is restored afterwards) and on the worker threads
    /// (the executable's own pool when `threads` is set, else one process-wide RLX pool of
    /// rayon's default size, not rayon's global pool). `false` keeps IEEE 754 gradual
    /// underflow, slow on x86 (each subnormal operand costs a microcode assist). Values
    /// computed at compile time (constant folding, constants) are IEEE either way. x86-64
    /// (MXCSR) and AArch64 (FPCR.FZ) only; elsewhere a no-op.
    pub flush_denormals: bool,
    /// Time every step of every run (wall clock, `std::time::Instant`, summed over runs) for
    /// [`CpuExecutable::profile`], as ONNX Runtime's `enable_profiling` does per node. Default
    /// `false`: no clock is read. Costs two clock reads per step (tens of nanoseconds).
    pub profile: bool,
}

impl Default for CpuOptions {
    fn default() -> CpuOptions {
        CpuOptions {
            threads: None,
            quantized_activations: false,
            simd: SimdLevel::default(),
            flush_denormals: true,
            profile: false,
        }
    }
}

impl CpuOptions {
    /// Set the thread count.
    pub fn with_threads(mut self, n: usize) -> CpuOptions {
        self.threads = Some(n);
        self
    }
    /// Turn the quantized-activation fast mode of `dequant_matmul` on or off.
    pub fn with_quantized_activations(mut self, on: bool) -> CpuOptions {
        self.quantized_activations = on;
        self
    }
    /// Set the SIMD level.
    pub fn with_simd(mut self, simd: SimdLevel) -> CpuOptions {
        self.simd = simd;
        self
    }
    /// Flush denormals to zero while kernels run (default) or keep IEEE subnormals.
    pub fn with_flush_denormals(mut self, on: bool) -> CpuOptions {
        self.flush_denormals = on;
        self
    }
    /// Time each step of each run (see [`CpuOptions::profile`]).
    pub fn with_profile(mut self, on: bool) -> CpuOptions {
        self.profile = on;
        self
    }
}

/// The threads a [`CpuExecutable`]'s kernels run on.
enum Pool {
    /// Its own pool of `CpuOptions::threads` threads.
    Own(rayon::ThreadPool),
    /// The process-wide denormal-flushing pool ([`fpenv::shared_pool`]).
    Shared(&'static rayon::ThreadPool),
    /// No pool: `threads: Some(1)` runs every kernel on the calling thread.
    Serial,
    /// Rayon's global pool (the calling thread runs the steps).
    Global,
}

/// What one step runs, for reports.
#[derive(Clone, Debug, PartialEq)]
pub struct StepInfo {
    /// Node index.
    pub node: usize,
    /// Op name.
    pub op: String,
    /// The GGUF type of a quantized product's weights (`dequant_matmul`'s `scheme` attribute,
    /// e.g. `Q6_K`); `None` for other ops.
    pub scheme: Option<String>,
    /// Kernel name (`reference` for the rlx-ir reference evaluation, `custom_op` for a
    /// custom op's registered evaluation).
    pub kernel: &'static str,
}

/// Time one step took, summed over the runs since compile or [`CpuExecutable::reset_profile`].
#[derive(Clone, Debug, PartialEq)]
pub struct StepProfile {
    /// The step.
    pub step: StepInfo,
    /// Runs that executed it.
    pub calls: u64,
    /// Wall-clock time summed over those runs (the kernel's own threads included: a step's
    /// parallel work ends before the next step starts).
    pub total: Duration,
}

/// Where a node's value lives during a run.
#[derive(Clone, Copy, Debug)]
enum Loc {
    Input(usize),
    Param(usize),
    /// A planned buffer (shared over time with other values).
    Buf(usize),
    /// A node's own results (compile-time values, multi-result nodes).
    Fixed(usize),
    /// Element `k` of a multi-result node's results.
    TupleFixed(usize, usize),
}

/// How a step produces its value.
#[derive(Clone, Debug)]
enum How {
    /// Run `kernel` into the value's buffer (resized to the value's dims first).
    Kernel(Kernel),
    /// The value is its operand's buffer under new dims (reshape, prefix slice): no copy.
    View,
    /// Overwrite operand `operand` (which dies here) in its buffer.
    InPlace { operand: usize, kernel: InPlaceKernel },
}

struct Step {
    node: usize,
    how: How,
}

/// How [`CpuExecutable::run_into`] hands back one graph output.
#[derive(Clone, Copy, Debug)]
enum OutMode {
    /// The output is the only one in planned buffer `b`: swap the buffer with the caller's
    /// tensor (no copy).
    Swap(usize),
    /// The output is result `k` of the multi-result step whose results are `fixed[s]`, and no
    /// other output is: swap it with the caller's tensor, as [`OutMode::Swap`] (the step
    /// rewrites it on every run).
    SwapFixed(usize, usize),
    /// Input, param, compile-time value, or a second output in the same place: copy into the
    /// caller's tensor, reusing its storage.
    Copy,
}

/// A compiled graph for the CPU.
///
/// Memory follows the [`LirModule`] plan: one host tensor per planned buffer, allocated with
/// its full capacity at compile time and resized (within capacity) to each value it holds in
/// turn, so `run` allocates nothing but the returned outputs.
pub struct CpuExecutable {
    graph: Graph,
    steps: Vec<Step>,
    locs: Vec<Loc>,
    /// Per node, its result dims (set on its buffer before its step; no allocation in `run`).
    dims: Vec<Vec<usize>>,
    bufs: Vec<Vec<Tensor>>,
    fixed: Vec<Vec<Tensor>>,
    lir: LirModule,
    pool: Pool,
    flush: bool,
    /// The spinning team of this executable's thread count (`None` for one thread).
    team: Option<&'static Team>,
    /// The threads the kernels run on (`CpuOptions::threads`, clamped).
    threads: usize,
    out_modes: Vec<OutMode>,
    max_rank: usize,
    /// Per step, (runs, time) when `CpuOptions::profile` is on.
    timings: Option<Vec<(u64, Duration)>>,
}

impl CpuExecutable {
    /// Plan memory (default [`LirOptions`]) and choose kernels. The graph must verify and have
    /// static shapes.
    pub fn compile(g: &Graph, opts: &CpuOptions) -> Result<CpuExecutable, CpuError> {
        CpuExecutable::compile_with_plan(g, opts, &LirOptions::default())
    }

    /// [`CpuExecutable::compile`] with explicit planner options (`LirOptions { reuse: false,
    /// .. }` gives one buffer per value).
    pub fn compile_with_plan(g: &Graph, opts: &CpuOptions, plan: &LirOptions) -> Result<CpuExecutable, CpuError> {
        // The body of `dequant_matmul` (the fallback kernel) calls this custom op.
        rlx_gguf::register_ops();
        g.verify()?;
        for (i, n) in g.nodes().iter().enumerate() {
            if let Some(s) = n.outputs.iter().find(|s| !s.is_static()) {
                return Err(CpuError::Symbolic { node: i, op: n.op.name(), ty: s.to_string() });
            }
        }
        let can = |g: &Graph, id: NodeId, k: usize| inplace::plan(g, id, k).is_some();
        let mut lir = rlx_compile::lir::plan_with(g, plan, &can).map_err(|e| IrError::Invalid(e.to_string()))?;
        let max_rank = g.nodes().iter().flat_map(|n| n.outputs.iter().map(|s| s.rank())).max().unwrap_or(1);
        let bufs: Vec<Vec<Tensor>> = lir
            .buffers
            .iter()
            .map(|b| {
                let oom = || CpuError::OutOfMemory {
                    bytes: b.elems as u128 * b.dtype.size_bytes() as u128,
                    dtype: b.dtype,
                    elems: b.elems,
                };
                let mut t = Tensor::try_with_capacity(b.dtype, b.elems, max_rank).ok_or_else(oom)?;
                // Before `set_dims` writes the zeros: the pages fault in as huge pages.
                kernels::simd::advise_huge_pages(&t);
                t.set_dims(&[b.elems]);
                Ok(vec![t])
            })
            .collect::<Result<_, CpuError>>()?;
        let dims: Vec<Vec<usize>> =
            g.nodes().iter().map(|n| n.outputs[0].static_dims().expect("checked static")).collect();
        let mut locs = Vec::with_capacity(g.nodes().len());
        let mut fixed = vec![];
        let (mut n_in, mut n_par) = (0, 0);
        for (i, n) in g.nodes().iter().enumerate() {
            let loc = match (&n.op, lir.values[i].storage) {
                (Op::Input { .. }, _) => {
                    n_in += 1;
                    Loc::Input(n_in - 1)
                }
                (Op::Param { .. }, _) => {
                    n_par += 1;
                    Loc::Param(n_par - 1)
                }
                (Op::GetTupleElement { index }, _) => match locs[n.inputs[0].index()] {
                    Loc::Fixed(s) => Loc::TupleFixed(s, *index),
                    _ => unreachable!("verified: tuple sources are computed nodes"),
                },
                (_, Storage::Buffer(b)) => Loc::Buf(b),
                _ => {
                    let mut ts: Vec<Tensor> = n
                        .outputs
                        .iter()
                        .map(|s| Tensor::zeros(&s.static_dims().expect("checked static"), s.dtype))
                        .collect();
                    // Values that do not depend on inputs are computed once, here.
                    if matches!(n.op, Op::Constant(_) | Op::Iota { .. } | Op::Rng { .. }) {
                        n.op.eval_into(&[], &mut ts)?;
                    }
                    fixed.push(ts);
                    Loc::Fixed(fixed.len() - 1)
                }
            };
            locs.push(loc);
        }
        let mut steps = Vec::with_capacity(lir.steps.len());
        for s in &lir.steps {
            let id = s.node;
            let how = match s.reuse {
                Reuse::View => How::View,
                Reuse::InPlace { operand } => {
                    How::InPlace { operand, kernel: inplace::plan(g, id, operand).expect("planned with inplace::plan") }
                }
                Reuse::Fresh => How::Kernel(kernels::select(g, id, opts)),
            };
            steps.push(Step { node: id.index(), how });
        }
        kernels::share_constant_weights(steps.iter_mut().filter_map(|s| match &mut s.how {
            How::Kernel(k) => Some(k),
            _ => None,
        }));
        for st in &steps {
            lir.set_kernel(NodeId(st.node as u32), kernel_name(&st.how, &g.nodes()[st.node].op));
        }
        let pool_err = |e: String| IrError::Invalid(format!("thread pool: {e}"));
        let threads = opts.threads.map(|t| t.min(std::thread::available_parallelism().map_or(t, |c| c.get())));
        let pool = match (threads, opts.flush_denormals) {
            (Some(0 | 1), _) => Pool::Serial,
            (Some(t), flush) => {
                let mut b = rayon::ThreadPoolBuilder::new().num_threads(t.max(1));
                if flush {
                    b = b.start_handler(|_| fpenv::flush_this_thread());
                }
                Pool::Own(b.build().map_err(|e| pool_err(e.to_string()))?)
            }
            (None, true) => Pool::Shared(fpenv::shared_pool().map_err(pool_err)?),
            (None, false) => Pool::Global,
        };
        let threads = threads.unwrap_or_else(rayon::current_num_threads).max(1);
        let team = Team::shared(threads);
        // Custom ops split their work on the same threads as the kernels.
        rlx_ir::ops::custom::set_task_runner(|n, f| kernels::spin::for_each(n, f));
        let mut seen = vec![false; bufs.len()];
        // Fixed results a step writes on every run (not compile-time values), and which of
        // them an output has claimed.
        let mut step_fixed: Vec<Vec<bool>> = fixed.iter().map(|ts| vec![false; ts.len()]).collect();
        for st in &steps {
            if let Loc::Fixed(s) = locs[st.node] {
                step_fixed[s].iter_mut().for_each(|w| *w = true);
            }
        }
        let mut claim = |s: usize, k: usize| std::mem::replace(&mut step_fixed[s][k], false);
        let out_modes = g
            .outputs()
            .iter()
            .map(|o| match locs[o.index()] {
                Loc::Buf(b) if !std::mem::replace(&mut seen[b], true) => OutMode::Swap(b),
                Loc::Fixed(s) if claim(s, 0) => OutMode::SwapFixed(s, 0),
                Loc::TupleFixed(s, k) if claim(s, k) => OutMode::SwapFixed(s, k),
                _ => OutMode::Copy,
            })
            .collect();
        let timings = opts.profile.then(|| vec![(0, Duration::ZERO); steps.len()]);
        Ok(CpuExecutable {
            graph: g.clone(),
            steps,
            locs,
            dims,
            bufs,
            fixed,
            lir,
            pool,
            flush: opts.flush_denormals,
            team,
            threads,
            out_modes,
            max_rank,
            timings,
        })
    }

    /// The threads the kernels run on: `CpuOptions::threads` clamped to the CPU's available
    /// parallelism, else the size of rayon's default pool.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// The compiled (static) graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The memory plan, with each step's kernel filled in.
    pub fn lir(&self) -> &LirModule {
        &self.lir
    }

    /// The kernel chosen for each step, in execution order.
    pub fn steps(&self) -> Vec<StepInfo> {
        self.steps
            .iter()
            .map(|s| {
                let op = &self.graph.nodes()[s.node].op;
                let scheme = match op {
                    Op::Composite(c) => match c.attrs.get(rlx_ir::compose::quant::SCHEME_ATTR) {
                        Some(rlx_ir::Attr::Str(s)) => Some(s.clone()),
                        _ => None,
                    },
                    _ => None,
                };
                StepInfo { node: s.node, op: op.name(), scheme, kernel: kernel_name(&s.how, op) }
            })
            .collect()
    }

    /// Per step (execution order), its runs and the wall-clock time they took, when compiled
    /// with [`CpuOptions::profile`]; `None` otherwise. Steps that are views cost ~0.
    pub fn profile(&self) -> Option<Vec<StepProfile>> {
        let t = self.timings.as_ref()?;
        Some(
            self.steps().into_iter().zip(t).map(|(step, &(calls, total))| StepProfile { step, calls, total }).collect(),
        )
    }

    /// Zero the times [`CpuExecutable::profile`] reports (e.g. after warm-up runs).
    pub fn reset_profile(&mut self) {
        if let Some(t) = &mut self.timings {
            t.fill((0, Duration::ZERO));
        }
    }

    /// Bytes held by the planned buffers and fixed values.
    pub fn buffer_bytes(&self) -> usize {
        self.bufs.iter().chain(&self.fixed).flatten().map(|t| t.numel() * t.dtype().size_bytes()).sum()
    }

    /// Run with inputs and params in declaration order (`graph.inputs()`, `graph.params()`).
    /// Checks every dtype and shape; returns one tensor per graph output (each a fresh copy).
    /// A loop that runs the same graph many times should use [`CpuExecutable::run_into`].
    pub fn run(&mut self, inputs: &[&Tensor], params: &[&Tensor]) -> Result<Vec<Tensor>, CpuError> {
        self.check_feeds(inputs, params)?;
        self.in_pool(|e| e.run_steps(inputs, params))?;
        let store = Store { locs: &self.locs, bufs: &self.bufs, fixed: &self.fixed, inputs, params };
        Ok(self.graph.outputs().iter().map(|&o| store.get(o).clone()).collect())
    }

    /// [`CpuExecutable::run`] writing the outputs into `outputs` (resized to one tensor per
    /// graph output) without copying them and, when warm, without allocating.
    ///
    /// An output that is the only one in its planned buffer is *swapped* with the caller's
    /// tensor at that position: the caller gets the buffer holding the result, and the tensor
    /// it passed in becomes that buffer for the next run if it can hold the buffer's dtype and
    /// capacity (as one returned by the previous `run_into` can); otherwise a new buffer is
    /// allocated. Other outputs (inputs, params, constants, tuple elements, a second output
    /// in the same buffer) are copied into the caller's tensor, reusing its storage. So a loop
    /// that passes the same `Vec` every time (training steps, decode) neither allocates nor
    /// copies outputs after its first call. The previous contents of `outputs` are consumed.
    ///
    /// Errors: as [`CpuExecutable::run`]; on error `outputs` keeps the right length but its
    /// contents are unspecified.
    pub fn run_into(
        &mut self,
        inputs: &[&Tensor],
        params: &[&Tensor],
        outputs: &mut Vec<Tensor>,
    ) -> Result<(), CpuError> {
        self.check_feeds(inputs, params)?;
        self.in_pool(|e| e.run_steps(inputs, params))?;
        let n_out = self.out_modes.len();
        outputs.truncate(n_out);
        while outputs.len() < n_out {
            outputs.push(Tensor::with_capacity(rlx_ir::DType::F32, 0, 0));
        }
        // Copies first: a copied output may live in a buffer that a swap below hands over.
        let store = Store { locs: &self.locs, bufs: &self.bufs, fixed: &self.fixed, inputs, params };
        for (k, &o) in self.graph.outputs().iter().enumerate() {
            if let OutMode::Copy = self.out_modes[k] {
                outputs[k].copy_from(store.get(o));
            }
        }
        for (k, mode) in self.out_modes.iter().enumerate() {
            let dst = &mut outputs[k];
            match *mode {
                OutMode::Swap(b) => {
                    let spec = &self.lir.buffers[b];
                    if !dst.can_hold(spec.dtype, spec.elems, self.max_rank) {
                        *dst = Tensor::with_capacity(spec.dtype, spec.elems, self.max_rank);
                        // Unwritten until the step writes it next run: on huge pages, as the
                        // buffer it replaces.
                        kernels::simd::advise_huge_pages(dst);
                    }
                    std::mem::swap(&mut self.bufs[b][0], dst);
                }
                OutMode::SwapFixed(s, r) => {
                    // The step writes into this tensor next run: give it the result's dims.
                    let t = &mut self.fixed[s][r];
                    let (dtype, numel) = (t.dtype(), t.numel());
                    if !dst.can_hold(dtype, numel, self.max_rank) {
                        *dst = Tensor::with_capacity(dtype, numel, self.max_rank);
                        kernels::simd::advise_huge_pages(dst);
                    }
                    dst.set_dims(t.shape());
                    std::mem::swap(t, dst);
                }
                OutMode::Copy => {}
            }
        }
        Ok(())
    }

    /// Run `f` where the kernels run: in the executable's pool (the pool's threads flush
    /// denormals when the option is on), with the calling thread flushing too for the duration,
    /// and with its spinning team entered (if any; its helpers copy the caller's flush state per
    /// job), so kernels see both.
    fn in_pool<R: Send>(&mut self, f: impl FnOnce(&mut Self) -> R + Send) -> R {
        let _flush = fpenv::FlushGuard::new(self.flush);
        let team = self.team;
        let f = move |e: &mut Self| match team {
            Some(t) => t.enter(|| f(e)),
            None => f(e),
        };
        match std::mem::replace(&mut self.pool, Pool::Global) {
            Pool::Own(pool) => {
                let r = pool.install(|| f(self));
                self.pool = Pool::Own(pool);
                r
            }
            Pool::Shared(pool) => {
                self.pool = Pool::Shared(pool);
                pool.install(|| f(self))
            }
            Pool::Serial => {
                self.pool = Pool::Serial;
                kernels::simd::serial(|| f(self))
            }
            Pool::Global => f(self),
        }
    }

    fn check_feeds(&self, inputs: &[&Tensor], params: &[&Tensor]) -> Result<(), CpuError> {
        let g = &self.graph;
        for (what, ids, given) in [("inputs", g.inputs(), inputs), ("params", g.params(), params)] {
            if ids.len() != given.len() {
                return Err(CpuError::Arity { what, expected: ids.len(), got: given.len() });
            }
            for (&id, t) in ids.iter().zip(given) {
                let want = g.shape(id);
                let dims_ok = want.rank() == t.shape().len()
                    && want.dims.iter().zip(t.shape()).all(|(d, &n)| d.as_static() == Some(n));
                if t.dtype() != want.dtype || !dims_ok {
                    return Err(CpuError::Feed {
                        what: if what == "inputs" { "input" } else { "param" },
                        name: g.source_name(id).unwrap_or("?").to_string(),
                        expected: want.to_string(),
                        got: format!("{}{:?}", t.dtype(), t.shape()),
                    });
                }
            }
        }
        Ok(())
    }

    fn run_steps(&mut self, inputs: &[&Tensor], params: &[&Tensor]) -> Result<(), CpuError> {
        for si in 0..self.steps.len() {
            let start = self.timings.is_some().then(Instant::now);
            let node = self.steps[si].node;
            let n = &self.graph.nodes()[node];
            let mut outs = match self.locs[node] {
                Loc::Buf(b) => std::mem::take(&mut self.bufs[b]),
                Loc::Fixed(s) => std::mem::take(&mut self.fixed[s]),
                l => unreachable!("step {node} ({}) writes {l:?}", n.op.name()),
            };
            let r = {
                let store = Store { locs: &self.locs, bufs: &self.bufs, fixed: &self.fixed, inputs, params };
                match &mut self.steps[si].how {
                    How::View => {
                        outs[0].set_dims(&self.dims[node]);
                        Ok(())
                    }
                    How::InPlace { operand, kernel } => {
                        let other = (n.inputs.len() == 2).then(|| store.get(n.inputs[1 - *operand]));
                        inplace::run(*kernel, &mut outs[0], other)
                    }
                    How::Kernel(k) => {
                        if matches!(self.locs[node], Loc::Buf(_)) {
                            outs[0].set_dims(&self.dims[node]);
                        }
                        // Operand refs live on the stack (heap only past 8 operands): no allocation per step.
                        let ins: smallvec::SmallVec<[&Tensor; 8]> = n.inputs.iter().map(|&i| store.get(i)).collect();
                        kernels::run(k, &n.op, &ins, &mut outs)
                    }
                }
            };
            match self.locs[node] {
                Loc::Buf(b) => self.bufs[b] = outs,
                Loc::Fixed(s) => self.fixed[s] = outs,
                _ => unreachable!(),
            }
            r?;
            if let (Some(t), Some(start)) = (&mut self.timings, start) {
                t[si].0 += 1;
                t[si].1 += start.elapsed();
            }
        }
        Ok(())
    }
}

/// The name a report gives step `h` of `op`: a custom op's evaluation is its registered
/// implementation (often vectorized), not rlx-ir's reference, so it reports `custom_op`.
fn kernel_name(h: &How, op: &Op) -> &'static str {
    match h {
        How::Kernel(Kernel::Reference) if matches!(op, Op::Custom { .. }) => "custom_op",
        How::Kernel(k) => k.name(),
        How::View => "view",
        How::InPlace { .. } => "in_place_f32",
    }
}

/// Read access to every value during a run.
struct Store<'a> {
    locs: &'a [Loc],
    bufs: &'a [Vec<Tensor>],
    fixed: &'a [Vec<Tensor>],
    inputs: &'a [&'a Tensor],
    params: &'a [&'a Tensor],
}

impl<'a> Store<'a> {
    fn get(&self, id: NodeId) -> &'a Tensor {
        match self.locs[id.index()] {
            Loc::Input(k) => self.inputs[k],
            Loc::Param(k) => self.params[k],
            Loc::Buf(b) => &self.bufs[b][0],
            Loc::Fixed(s) => &self.fixed[s][0],
            Loc::TupleFixed(s, k) => &self.fixed[s][k],
        }
    }
}
