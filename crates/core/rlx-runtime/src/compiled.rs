//! `CompiledGraph`: parameters, per-shape specializations, and the run entry points.

use crate::cache::{CompileCache, fingerprint};
use crate::{Backend, CompileOptions, Error, Executable, Result, StepInfo, StepTime, Support};
use rlx_ir::{Dim, Graph, NodeId, Op, Tensor, bind_symbols, specialize};
use smallvec::SmallVec;
use std::collections::BTreeSet;
use std::collections::HashMap;
use std::sync::Arc;

/// Inputs or params passed to a run without a heap allocation for the list of references.
const INLINE_REFS: usize = 32;
type Refs<'a> = SmallVec<[&'a Tensor; INLINE_REFS]>;

/// A graph compiled for one backend: holds params, caches one executable per set of input
/// dims, and runs.
pub struct CompiledGraph {
    graph: Graph,
    backend: Arc<dyn Backend>,
    opts: CompileOptions,
    params: Vec<Option<Tensor>>,
    cache: HashMap<Vec<Vec<usize>>, Box<dyn Executable>>,
    /// The input dims of the previous run (its key in `cache`).
    last_dims: Option<Vec<Vec<usize>>>,
    report: Option<rlx_compile::CompileReport>,
    dispatch: Option<rlx_compile::DispatchReport>,
    compile_cache: Arc<CompileCache>,
}

impl CompiledGraph {
    pub(crate) fn new(
        graph: Graph,
        backend: Arc<dyn Backend>,
        opts: CompileOptions,
        compile_cache: Arc<CompileCache>,
    ) -> Result<CompiledGraph> {
        let params = vec![None; graph.params().len()];
        let mut c = CompiledGraph {
            graph,
            backend,
            opts,
            params,
            cache: HashMap::new(),
            last_dims: None,
            report: None,
            dispatch: None,
            compile_cache,
        };
        let ins: Option<Vec<Vec<usize>>> = c.graph.inputs().iter().map(|&i| c.graph.shape(i).static_dims()).collect();
        if let Some(dims) = ins {
            c.executable(&dims)?;
        }
        Ok(c)
    }

    /// The graph as given to `compile`.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// Set a param from f32 values (converted to the param's dtype). Panics on error; see
    /// [`CompiledGraph::try_set_param`].
    #[track_caller]
    pub fn set_param(&mut self, name: &str, values: &[f32]) {
        self.try_set_param(name, values).unwrap_or_else(|e| panic!("set_param failed: {e}"))
    }

    /// Set a param from f32 values (converted to the param's dtype, XLA conversion rules).
    /// Errors: unknown name, wrong element count.
    pub fn try_set_param(&mut self, name: &str, values: &[f32]) -> Result<()> {
        let k = self.param_index(name)?;
        let t = self.tensor_from_f32(self.graph.params()[k], name, values)?;
        self.params[k] = Some(t);
        Ok(())
    }

    /// Set a param from a typed tensor. Errors: unknown name, dtype or dims mismatch.
    pub fn set_param_tensor(&mut self, name: &str, t: Tensor) -> Result<()> {
        let k = self.param_index(name)?;
        self.check_tensor(self.graph.params()[k], name, &t)?;
        self.params[k] = Some(t);
        Ok(())
    }

    /// The current value of a param, if set.
    pub fn param(&self, name: &str) -> Option<&Tensor> {
        let k = self.graph.params().iter().position(|&p| self.graph.source_name(p) == Some(name))?;
        self.params[k].as_ref()
    }

    /// Mutable access to a param's stored value, if set (a training loop updates params in
    /// place this way, with no copy per step). Its dims and dtype must stay as declared.
    pub fn param_mut(&mut self, name: &str) -> Option<&mut Tensor> {
        let k = self.graph.params().iter().position(|&p| self.graph.source_name(p) == Some(name))?;
        self.params[k].as_mut()
    }

    /// Run with f32 data per name and get one `Vec<f32>` per output (the spec's convenience
    /// form). Names may be inputs or params (a param given here is stored, as `set_param`).
    /// Panics with the error's message on bad input; see [`CompiledGraph::try_run`].
    #[track_caller]
    pub fn run(&mut self, feeds: &[(&str, &[f32])]) -> Vec<Vec<f32>> {
        self.try_run(feeds).unwrap_or_else(|e| panic!("run failed: {e}"))
    }

    /// [`CompiledGraph::run`] returning errors: unknown name, missing input or param, wrong
    /// element count. A symbolic dim of an input is inferred from the element count when it is
    /// the input's only symbolic dim.
    pub fn try_run(&mut self, feeds: &[(&str, &[f32])]) -> Result<Vec<Vec<f32>>> {
        let mut tensors = Vec::with_capacity(feeds.len());
        for (name, v) in feeds {
            let id = self.lookup(name)?;
            tensors.push((*name, self.tensor_from_f32(id, name, v)?));
        }
        let out = self.run_tensors(&tensors)?;
        Ok(out.iter().map(Tensor::to_f32_vec).collect())
    }

    /// Run with typed tensors (any dtype, dims checked against the declaration; symbolic dims
    /// bound from them). Names may be inputs or params.
    pub fn run_tensors(&mut self, feeds: &[(&str, Tensor)]) -> Result<Vec<Tensor>> {
        let refs: Vec<(&str, &Tensor)> = feeds.iter().map(|(n, t)| (*n, t)).collect();
        self.run_refs(&refs)
    }

    /// [`CompiledGraph::run_tensors`] with borrowed tensors: inputs are read in place, never
    /// copied (for large inputs that live across runs, e.g. a KV cache or weights fed as
    /// inputs). A param given here is cloned into the graph, as `set_param_tensor`.
    /// Errors: unknown name, dtype or dims mismatch, a missing input or param.
    pub fn run_refs(&mut self, feeds: &[(&str, &Tensor)]) -> Result<Vec<Tensor>> {
        let (exe, ins, params) = self.prepare(feeds)?;
        exe.run(&ins, &params)
    }

    /// [`CompiledGraph::run_refs`] writing into `outputs`, a vector the caller keeps and passes
    /// again on every run (training steps, decode loops): on return it holds one tensor per
    /// output. On the CPU backend, outputs are handed over from the memory plan without a copy
    /// and the caller's previous tensors become the plan's buffers again, so a warm call with
    /// the same vector allocates and copies nothing for them (see `rlx_cpu::CpuExecutable::
    /// run_into`; a second output in the same buffer, or an input or param passed through, is
    /// copied into the caller's tensor). The previous contents of `outputs` are consumed.
    /// Errors: as `run_refs`.
    pub fn run_into(&mut self, feeds: &[(&str, &Tensor)], outputs: &mut Vec<Tensor>) -> Result<()> {
        let (exe, ins, params) = self.prepare(feeds)?;
        exe.run_into(&ins, &params, outputs)
    }

    /// Resolve feeds by name, store any params given, build the specialization for the input
    /// dims if needed, and return it with inputs and params in declaration order. A warm call
    /// (the same input dims as the previous one, at most [`INLINE_REFS`] inputs and params)
    /// allocates nothing.
    #[allow(clippy::type_complexity)]
    fn prepare<'a>(
        &'a mut self,
        feeds: &[(&str, &'a Tensor)],
    ) -> Result<(&'a mut Box<dyn Executable>, Refs<'a>, Refs<'a>)> {
        let n_in = self.graph.inputs().len();
        let mut inputs: SmallVec<[Option<&Tensor>; INLINE_REFS]> = smallvec::smallvec![None; n_in];
        for (pos, &(name, t)) in feeds.iter().enumerate() {
            // Feeds in declaration order (the common case for long input lists) skip the search.
            let in_order = self.graph.inputs().get(pos).copied().filter(|&i| self.graph.source_name(i) == Some(name));
            let id = match in_order {
                Some(id) => id,
                None => self.lookup(name)?,
            };
            self.check_tensor(id, name, t)?;
            let slot = if in_order.is_some() { Some(pos) } else { self.graph.inputs().iter().position(|&i| i == id) };
            if let Some(k) = slot {
                inputs[k] = Some(t);
            } else {
                let k = self.param_index(name)?;
                self.params[k] = Some(t.clone());
            }
        }
        let mut ins = Refs::with_capacity(n_in);
        for (k, t) in inputs.into_iter().enumerate() {
            let name = self.graph.source_name(self.graph.inputs()[k]).unwrap_or("?");
            ins.push(t.ok_or_else(|| Error::MissingInput(name.to_string()))?);
        }
        let same = self.last_dims.as_ref().is_some_and(|last| {
            last.len() == ins.len() && last.iter().zip(&ins).all(|(d, t)| d.as_slice() == t.shape())
        });
        if !same {
            let dims: Vec<Vec<usize>> = ins.iter().map(|t| t.shape().to_vec()).collect();
            if !self.cache.contains_key(&dims) {
                self.build(&dims)?;
            }
            self.last_dims = Some(dims);
        }
        let mut params = Refs::with_capacity(self.params.len());
        for (k, p) in self.params.iter().enumerate() {
            let name = self.graph.source_name(self.graph.params()[k]).unwrap_or("?");
            params.push(p.as_ref().ok_or_else(|| Error::MissingParam(name.to_string()))?);
        }
        let key = self.last_dims.as_ref().expect("set above");
        let exe = self.cache.get_mut(key).expect("built above");
        Ok((exe, ins, params))
    }

    /// What the compiler passes did for the most recently compiled specialization (pass by
    /// pass, with the printed IR when `CompileOptions::dump_ir` is set).
    pub fn compile_report(&self) -> Option<&rlx_compile::CompileReport> {
        self.report.as_ref()
    }

    /// Per op kind and composite: native, decomposed or missing on this backend (for the most
    /// recently compiled specialization). Computed when `CompileOptions::dispatch_report` is set
    /// (override `RLX_DISPATCH_REPORT=1`), else `None`.
    pub fn dispatch_report(&self) -> Option<&rlx_compile::DispatchReport> {
        self.dispatch.as_ref()
    }

    /// The memory plan of a compiled specialization (arena bytes, peak live bytes, per-step
    /// kernels), when the backend plans memory.
    pub fn lir(&self) -> Option<&rlx_compile::lir::LirModule> {
        self.cache.values().next().and_then(|e| e.lir())
    }

    /// Per-step calls and wall time, summed over every compiled specialization's runs, when
    /// compiled with [`crate::CompileOptions::profile`] (`None` otherwise, or when the backend
    /// does not time its steps). Steps of different specializations are listed separately.
    pub fn profile(&self) -> Option<Vec<StepTime>> {
        let mut all = vec![];
        for e in self.cache.values() {
            all.extend(e.profile()?);
        }
        Some(all)
    }

    /// The kernel of each step for the most recently compiled specialization.
    pub fn steps(&self) -> Vec<StepInfo> {
        self.cache.values().next().map(|e| e.steps()).unwrap_or_default()
    }

    fn executable(&mut self, dims: &[Vec<usize>]) -> Result<&mut Box<dyn Executable>> {
        if !self.cache.contains_key(dims) {
            self.build(dims)?;
        }
        Ok(self.cache.get_mut(dims).expect("built above"))
    }

    fn build(&mut self, dims: &[Vec<usize>]) -> Result<()> {
        let named: Vec<(&str, &[usize])> = self
            .graph
            .inputs()
            .iter()
            .zip(dims)
            .map(|(&i, d)| (self.graph.source_name(i).unwrap_or("?"), d.as_slice()))
            .collect();
        let b = bind_symbols(&self.graph, &named)?;
        let mut g = specialize(&self.graph, &b)?;
        let mut names = BTreeSet::new();
        composite_names(&g, &mut names);
        // Composites the MIR passes create (attention) need the backend's answer too.
        names.extend(rlx_compile::PASS_COMPOSITES.iter().map(|s| s.to_string()));
        let native_composites = names
            .into_iter()
            .filter(|name| {
                let probe = Op::Composite(rlx_ir::ops::Composite {
                    name: name.to_string(),
                    attrs: Default::default(),
                    body: Box::new(Graph::new(name.as_str())),
                });
                self.backend.supports(&probe) == Support::Native
            })
            .collect();
        let popts = rlx_compile::PassOptions {
            optimize: self.opts.optimize,
            native_composites,
            dump_ir: self.opts.dump_ir,
            ..Default::default()
        };
        if self.opts.dispatch_report {
            let native = |name: &str| popts.native_composites.contains(name);
            let d = rlx_compile::DispatchReport::new(&g, &native);
            tracing::info!(graph = %self.graph.name, "dispatch report:\n{d}");
            self.dispatch = Some(d);
        }
        let key = fingerprint(&g, &popts, &self.backend.device().to_string())?;
        match self.compile_cache.get(&key) {
            Some((cached, mut report)) => {
                g = cached;
                report.cache_hit = true;
                self.report = Some(report);
            }
            None => {
                let report = rlx_compile::compile(&mut g, &popts)?;
                self.compile_cache.insert(key, (g.clone(), report.clone()));
                self.report = Some(report);
            }
        }
        let exe = self.backend.compile(&g, &self.opts)?;
        if self.opts.dispatch_report {
            for s in exe.steps() {
                tracing::info!(node = s.node, op = %s.op, kernel = s.kernel, "dispatch");
            }
        }
        self.cache.insert(dims.to_vec(), exe);
        Ok(())
    }

    fn names(&self, ids: &[NodeId]) -> Vec<String> {
        ids.iter().filter_map(|&i| self.graph.source_name(i).map(str::to_string)).collect()
    }

    fn lookup(&self, name: &str) -> Result<NodeId> {
        self.graph.input_by_name(name).or_else(|| self.graph.param_by_name(name)).ok_or_else(|| Error::UnknownName {
            name: name.to_string(),
            graph: self.graph.name.clone(),
            inputs: self.names(self.graph.inputs()),
            params: self.names(self.graph.params()),
        })
    }

    fn param_index(&self, name: &str) -> Result<usize> {
        let id = self.lookup(name)?;
        self.graph
            .params()
            .iter()
            .position(|&p| p == id)
            .ok_or_else(|| Error::NotAParam { name: name.to_string(), params: self.names(self.graph.params()) })
    }

    fn check_tensor(&self, id: NodeId, name: &str, t: &Tensor) -> Result<()> {
        let decl = self.graph.shape(id);
        if t.dtype() != decl.dtype {
            return Err(Error::DTypeMismatch { name: name.into(), expected: decl.dtype, got: t.dtype() });
        }
        let ok = decl.rank() == t.shape().len()
            && decl.dims.iter().zip(t.shape()).all(|(d, &n)| matches!(d, Dim::Sym(_)) || *d == Dim::Static(n));
        if !ok {
            return Err(Error::ShapeMismatch {
                name: name.into(),
                declared: decl.to_string(),
                got: t.shape().to_vec(),
            });
        }
        Ok(())
    }

    /// Build a tensor of the declared dtype from f32 values; a single symbolic dim is inferred
    /// from the length.
    fn tensor_from_f32(&self, id: NodeId, name: &str, v: &[f32]) -> Result<Tensor> {
        let decl = self.graph.shape(id);
        let known: usize = decl.dims.iter().filter_map(Dim::as_static).product();
        let n_sym = decl.dims.iter().filter(|d| d.as_static().is_none()).count();
        let dims: Vec<usize> = match n_sym {
            0 if v.len() == known => decl.static_dims().expect("no symbolic dims"),
            1 if known > 0 && v.len().is_multiple_of(known) => {
                decl.dims.iter().map(|d| d.as_static().unwrap_or(v.len() / known)).collect()
            }
            _ => {
                return Err(Error::BufferLength {
                    name: name.into(),
                    declared: decl.to_string(),
                    expected: known,
                    got: v.len(),
                    multiple: n_sym == 1,
                });
            }
        };
        let t = Tensor::from_vec(v.to_vec(), &dims)?;
        Ok(t.cast(decl.dtype))
    }
}

/// Names of the composites in `g`, nested ones included.
fn composite_names(g: &Graph, out: &mut BTreeSet<String>) {
    for n in g.nodes() {
        if let Op::Composite(c) = &n.op {
            out.insert(c.name.clone());
        }
        for b in n.op.subgraphs() {
            composite_names(b, out);
        }
    }
}
