//! Buffer planning and the step loop.

use crate::kernels::simd::SimdLevel;
use crate::kernels::{self, Kernel};
use rlx_ir::{Graph, IrError, NodeId, Op, Tensor};
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
#[derive(Clone, Debug, Default)]
pub struct CpuOptions {
    /// Worker threads for parallel kernels; `None` = rayon's global pool.
    pub threads: Option<usize>,
    /// Fast mode of `dequant_matmul`: quantize the activations (Q8_0 blocks) and use integer
    /// dot products, as llama.cpp does, for the schemes that have such a kernel. Results then
    /// differ from the f32 reference by the activation quantization error. Default `false`:
    /// exact mode, `x · dequant(W)ᵀ` up to f32 rounding.
    pub quantized_activations: bool,
    /// Explicit SIMD code the kernels may use (default: the best the CPU has).
    pub simd: SimdLevel,
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
}

/// What one step runs, for reports.
#[derive(Clone, Debug, PartialEq)]
pub struct StepInfo {
    /// Node index.
    pub node: usize,
    /// Op name.
    pub op: String,
    /// Kernel name (`reference` for the rlx-ir reference evaluation).
    pub kernel: &'static str,
}

/// Where a node's value lives during a run.
#[derive(Clone, Copy, Debug)]
enum Loc {
    Input(usize),
    Param(usize),
    Slot(usize),
    /// Element `k` of a tuple slot.
    TupleSlot(usize, usize),
}

struct Step {
    node: usize,
    kernel: Kernel,
}

/// A compiled graph for the CPU.
pub struct CpuExecutable {
    graph: Graph,
    steps: Vec<Step>,
    locs: Vec<Loc>,
    slots: Vec<Vec<Tensor>>,
    pool: Option<rayon::ThreadPool>,
}

impl CpuExecutable {
    /// Plan buffers and choose kernels. The graph must verify and have static shapes.
    pub fn compile(g: &Graph, opts: &CpuOptions) -> Result<CpuExecutable, CpuError> {
        // The body of `dequant_matmul` (the fallback kernel) calls this custom op.
        rlx_gguf::register_ops();
        g.verify()?;
        let mut locs = Vec::with_capacity(g.nodes().len());
        let mut slots = Vec::with_capacity(g.nodes().len());
        let mut steps = vec![];
        let (mut n_in, mut n_par) = (0, 0);
        for (i, n) in g.nodes().iter().enumerate() {
            let mut bufs = vec![];
            for s in &n.outputs {
                let d = s.static_dims().ok_or_else(|| CpuError::Symbolic {
                    node: i,
                    op: n.op.name(),
                    ty: s.to_string(),
                })?;
                if !matches!(n.op, Op::Input { .. } | Op::Param { .. } | Op::GetTupleElement { .. }) {
                    let t = Tensor::zeros(&d, s.dtype);
                    kernels::simd::advise_huge_pages(&t);
                    bufs.push(t);
                }
            }
            let loc = match &n.op {
                Op::Input { .. } => {
                    n_in += 1;
                    Loc::Input(n_in - 1)
                }
                Op::Param { .. } => {
                    n_par += 1;
                    Loc::Param(n_par - 1)
                }
                Op::GetTupleElement { index } => match locs[n.inputs[0].index()] {
                    Loc::Slot(s) => Loc::TupleSlot(s, *index),
                    _ => unreachable!("verified: tuple sources are computed nodes"),
                },
                // Values that do not depend on inputs are computed once, here.
                Op::Constant(_) | Op::Iota { .. } | Op::Rng { .. } => {
                    n.op.eval_into(&[], &mut bufs)?;
                    Loc::Slot(i)
                }
                _ => {
                    steps.push(Step { node: i, kernel: kernels::select(g, NodeId(i as u32), opts) });
                    Loc::Slot(i)
                }
            };
            locs.push(loc);
            slots.push(bufs);
        }
        let pool = match opts.threads {
            Some(t) => Some(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(t.max(1))
                    .build()
                    .map_err(|e| IrError::Invalid(format!("thread pool: {e}")))?,
            ),
            None => None,
        };
        Ok(CpuExecutable { graph: g.clone(), steps, locs, slots, pool })
    }

    /// The compiled (static) graph.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The kernel chosen for each step, in execution order.
    pub fn steps(&self) -> Vec<StepInfo> {
        self.steps
            .iter()
            .map(|s| StepInfo { node: s.node, op: self.graph.nodes()[s.node].op.name(), kernel: s.kernel.name() })
            .collect()
    }

    /// Bytes held by the planned buffers.
    pub fn buffer_bytes(&self) -> usize {
        self.slots.iter().flatten().map(|t| t.numel() * t.dtype().size_bytes()).sum()
    }

    /// Run with inputs and params in declaration order (`graph.inputs()`, `graph.params()`).
    /// Checks every dtype and shape; returns one tensor per graph output.
    pub fn run(&mut self, inputs: &[&Tensor], params: &[&Tensor]) -> Result<Vec<Tensor>, CpuError> {
        self.check_feeds(inputs, params)?;
        match self.pool.take() {
            Some(pool) => {
                let r = pool.install(|| self.run_steps(inputs, params));
                self.pool = Some(pool);
                r
            }
            None => self.run_steps(inputs, params),
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

    fn run_steps(&mut self, inputs: &[&Tensor], params: &[&Tensor]) -> Result<Vec<Tensor>, CpuError> {
        for si in 0..self.steps.len() {
            let node = self.steps[si].node;
            let mut outs = std::mem::take(&mut self.slots[node]);
            let r = {
                let n = &self.graph.nodes()[node];
                // Operand refs live on the stack (heap only past 8 operands): no allocation per step.
                let ins: smallvec::SmallVec<[&Tensor; 8]> =
                    n.inputs.iter().map(|&i| value(&self.locs, &self.slots, inputs, params, i)).collect();
                kernels::run(&mut self.steps[si].kernel, &n.op, &ins, &mut outs)
            };
            self.slots[node] = outs;
            r?;
        }
        Ok(self.graph.outputs().iter().map(|&o| value(&self.locs, &self.slots, inputs, params, o).clone()).collect())
    }
}

fn value<'a>(
    locs: &[Loc],
    slots: &'a [Vec<Tensor>],
    inputs: &[&'a Tensor],
    params: &[&'a Tensor],
    id: NodeId,
) -> &'a Tensor {
    match locs[id.index()] {
        Loc::Input(k) => inputs[k],
        Loc::Param(k) => params[k],
        Loc::Slot(s) => &slots[s][0],
        Loc::TupleSlot(s, k) => &slots[s][k],
    }
}
