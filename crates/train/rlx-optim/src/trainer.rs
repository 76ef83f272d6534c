//! `Trainer`: forward graph + loss → `value_and_grad` (+ the optimizer update, in-graph) →
//! compiled once → one call per mini-batch, with params held inside the compiled graph.

use crate::in_graph::{self, Emitter, Scalar};
use crate::rule::{self, Rule};
use crate::{OptimError, Optimizer, Result, clip_grad_norm};
use rlx_ir::{DType, Elem, Graph, Shape, Tensor};
use rlx_runtime::{CompileOptions, CompiledGraph, Device, Session, StepInfo};
use smallvec::SmallVec;

/// Where a [`Trainer`] runs the optimizer update.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum UpdateMode {
    /// Inside the compiled training step when the optimizer is an [`crate::Optim`] (it exposes
    /// [`Optimizer::as_optim_mut`]) whose rule runs in-graph for every param — all but
    /// Adafactor's factored moments and Muon's Newton–Schulz; otherwise on the host.
    #[default]
    Auto,
    /// On the host, through [`Optimizer::try_step`] (f64 arithmetic): the reference path.
    Host,
}

/// Options of a [`Trainer`].
#[derive(Clone, Debug, Default)]
pub struct TrainerOptions {
    /// Clip the gradients to this global L2 norm before each update.
    pub clip_grad_norm: Option<f32>,
    /// Where the update runs (default: in-graph where the rule allows).
    pub update: UpdateMode,
    /// Compile options of the training step (threads, optimization).
    pub compile: CompileOptions,
}

/// What feeds one input of the compiled step.
#[derive(Clone, Copy, Debug)]
enum Feed {
    /// A batch input of the forward graph: `Trainer::feeds[k]`.
    Batch(usize),
    /// A step scalar of the in-graph update: `InGraph::scalars[k]`.
    Scalar(usize),
    /// Slot `slot` of trained param `param`, read from the optimizer's state.
    Slot { param: usize, slot: usize },
}

/// The named feeds of one run (on the stack for up to 32 inputs).
type Feeds<'a> = SmallVec<[(&'a str, &'a Tensor); 32]>;

/// The loss: the first element of the step's first output (NaN if it is not f32).
fn scalar(t: &Tensor) -> f32 {
    t.as_slice::<f32>().and_then(|s| s.first().copied()).unwrap_or(f32::NAN)
}

/// The in-graph update's bookkeeping.
struct InGraph {
    /// The rule every param uses (checked equal across params).
    rule: Rule,
    /// The step scalars and their (rank-0) input tensors.
    scalars: Vec<(Scalar, Tensor)>,
    /// Slots per trained param (outputs follow the new params in this order).
    slots_per_param: Vec<usize>,
}

/// A compiled training step.
///
/// `forward`'s first output must be a scalar f32 loss; every f32 param is trained. Inputs must
/// have static shapes (a fixed batch size: feed full batches). Per step, the batch is written
/// into buffers allocated once ([`Trainer::input_mut`]) and one compiled run computes the loss,
/// the gradients and — in-graph, by default — the clipped gradients and the optimizer update,
/// reading params from the compiled graph and the optimizer's slots from its state, and
/// returning their new values, which replace the old ones without a copy. With
/// [`UpdateMode::Host`] (or a rule that needs it) the run returns the gradients and the
/// optimizer updates each param in place on the host. No recompilation either way.
pub struct Trainer<O: Optimizer> {
    compiled: CompiledGraph,
    params: Vec<(String, Vec<usize>)>,
    /// Input names of the compiled step, in declaration order, and what feeds each.
    inputs: Vec<(String, Feed)>,
    /// Batch input buffers (the forward graph's inputs).
    feeds: Vec<Tensor>,
    /// The compiled step's outputs, reused from step to step (`CompiledGraph::run_into`).
    outputs: Vec<Tensor>,
    opt: O,
    opts: TrainerOptions,
    fused: Option<InGraph>,
}

impl<O: Optimizer> Trainer<O> {
    /// Differentiate `forward` with respect to all its f32 params, add the optimizer update
    /// (see [`UpdateMode`]) and compile for the CPU. Params start at zero; set them with
    /// [`Trainer::set_param`]. Errors: no params, a symbolic input or param, anything
    /// `value_and_grad` or compile rejects.
    pub fn new(forward: &Graph, mut opt: O, opts: TrainerOptions) -> Result<Trainer<O>> {
        let wrt: Vec<_> = forward.params().iter().copied().filter(|&p| forward.shape(p).dtype == DType::F32).collect();
        if wrt.is_empty() {
            return Err(OptimError::Trainer("the forward graph has no f32 params to train".into()));
        }
        let name = |g: &Graph, id| g.source_name(id).unwrap_or("?").to_string();
        let mut params = vec![];
        for &p in &wrt {
            let dims = forward
                .shape(p)
                .static_dims()
                .ok_or_else(|| OptimError::Trainer(format!("param {} is symbolic", name(forward, p))))?;
            params.push((name(forward, p), dims));
        }
        let mut step = rlx_autodiff::value_and_grad(forward, &wrt)?;
        let rule = match (opts.update, opt.as_optim_mut()) {
            (UpdateMode::Auto, Some(o)) => in_graph_rule(o.rule(), &params),
            _ => None,
        };
        let mut slot_inputs = vec![];
        let mut fused = None;
        if let Some(rule) = rule {
            let outs = step.outputs().to_vec();
            let mut grads = outs[1..].to_vec();
            if let Some(max) = opts.clip_grad_norm {
                in_graph::clip(&mut step, &mut grads, max);
            }
            let (mut em, mut new_params, mut new_slots, mut slots_per_param) =
                (Emitter::default(), vec![], vec![], vec![]);
            for (k, (pname, dims)) in params.iter().enumerate() {
                let p = step.param_by_name(pname).expect("value_and_grad keeps every param");
                let mut ids = vec![];
                for (j, (slot, sh, _)) in rule::slots(&rule, dims).into_iter().enumerate() {
                    let id = step.input(&format!("__optim.{pname}.{slot}"), Shape::new(&sh, DType::F32));
                    slot_inputs.push((id, Feed::Slot { param: k, slot: j }));
                    ids.push(id);
                }
                let (np, ns) = em.update(&mut step, &rule, p, grads[k], &ids);
                slots_per_param.push(ns.len());
                new_params.push(np);
                new_slots.extend(ns);
            }
            let outputs = [outs[0]].into_iter().chain(new_params).chain(new_slots).collect();
            step.set_outputs(outputs);
            for (j, &(_, id)) in em.scalars.iter().enumerate() {
                slot_inputs.push((id, Feed::Scalar(j)));
            }
            let scalars = em.scalars.iter().map(|&(s, _)| (s, Tensor::zeros(&[], DType::F32))).collect();
            fused = Some(InGraph { rule, scalars, slots_per_param });
        }
        let (mut inputs, mut feeds) = (vec![], vec![]);
        for &i in step.inputs() {
            let n = name(&step, i);
            let feed = match slot_inputs.iter().find(|(id, _)| *id == i) {
                Some(&(_, f)) => f,
                None => {
                    let s = step.shape(i);
                    let dims = s
                        .static_dims()
                        .ok_or_else(|| OptimError::Trainer(format!("input {n} has symbolic dims {s}")))?;
                    feeds.push(Tensor::zeros(&dims, s.dtype));
                    Feed::Batch(feeds.len() - 1)
                }
            };
            inputs.push((n, feed));
        }
        if let Some(g) = step.error() {
            return Err(OptimError::Trainer(format!("building the training step: {g}")));
        }
        let mut compiled = Session::try_new(Device::Cpu)?.try_compile_with(step, &opts.compile)?;
        for (n, dims) in &params {
            compiled.set_param_tensor(n, Tensor::zeros(dims, DType::F32))?;
        }
        Ok(Trainer { compiled, params, inputs, feeds, outputs: vec![], opt, opts, fused })
    }

    /// The trained params: `(name, dims)` in the forward graph's order.
    pub fn params(&self) -> &[(String, Vec<usize>)] {
        &self.params
    }

    /// Whether the optimizer update runs inside the compiled step (see [`UpdateMode`]).
    pub fn in_graph(&self) -> bool {
        self.fused.is_some()
    }

    /// The kernel of each step of the compiled training graph (for profiling).
    pub fn steps(&self) -> Vec<StepInfo> {
        self.compiled.steps()
    }

    /// The compiled training step (its compile report, memory plan, dispatch report).
    pub fn compiled(&self) -> &CompiledGraph {
        &self.compiled
    }

    /// Set a param's values. Errors: unknown name, wrong length.
    pub fn set_param(&mut self, name: &str, values: &[f32]) -> Result<()> {
        Ok(self.compiled.try_set_param(name, values)?)
    }

    /// A param's current values.
    pub fn param(&self, name: &str) -> Option<&[f32]> {
        self.compiled.param(name)?.as_slice::<f32>()
    }

    /// The batch buffer of input `name` (its declared dtype `T`), to fill before
    /// [`Trainer::step`]. Errors: unknown input, another dtype.
    pub fn input_mut<T: Elem>(&mut self, name: &str) -> Result<&mut [T]> {
        let k = self.inputs.iter().find_map(|(n, f)| match f {
            Feed::Batch(k) if n == name => Some(*k),
            _ => None,
        });
        let t = k.map(|k| &mut self.feeds[k]).ok_or_else(|| OptimError::Trainer(format!("no input named {name:?}")))?;
        let dt = t.dtype();
        t.as_mut_slice::<T>().ok_or_else(|| OptimError::Trainer(format!("input {name:?} is {dt:?}")))
    }

    /// One training step on the current input buffers: gradients, optional clipping, one
    /// optimizer step per param, `end_iteration`. Returns the loss (before the update).
    ///
    /// Allocates nothing of its own once warm (from the third step on; `tests/no_alloc.rs`): the compiled
    /// run writes into output tensors the trainer keeps ([`CompiledGraph::run_into`]), and the
    /// in-graph update's new params and slots are swapped with the old ones, which go back to
    /// the compiled step as its buffers for the next run. (The `gemm` crate still allocates its
    /// packing workspace inside large matrix products.)
    ///
    /// Errors: the run fails, the optimizer rejects a param (e.g. a loaded state of another
    /// shape).
    pub fn step(&mut self) -> Result<f32> {
        if self.fused.is_some() {
            return self.step_in_graph();
        }
        {
            let refs: Feeds<'_> = self
                .inputs
                .iter()
                .map(|(n, f)| match *f {
                    Feed::Batch(k) => (n.as_str(), &self.feeds[k]),
                    _ => unreachable!("host steps have batch inputs only"),
                })
                .collect();
            self.compiled.run_into(&refs, &mut self.outputs)?;
        }
        let loss = scalar(&self.outputs[0]);
        let mut grads: SmallVec<[&mut [f32]; 16]> = self.outputs[1..]
            .iter_mut()
            .map(|t| t.as_mut_slice::<f32>().expect("f32 param has an f32 gradient"))
            .collect();
        if let Some(max) = self.opts.clip_grad_norm {
            clip_grad_norm(&mut grads, max);
        }
        for ((name, dims), g) in self.params.iter().zip(grads) {
            let p = self.compiled.param_mut(name).and_then(|t| t.as_mut_slice::<f32>()).expect("params set at new");
            self.opt.try_step(name, dims, p, g)?;
        }
        self.opt.end_iteration();
        Ok(loss)
    }

    fn step_in_graph(&mut self) -> Result<f32> {
        let fused = self.fused.as_mut().expect("in-graph trainer");
        let optim = self.opt.as_optim_mut().expect("in-graph trainers hold an Optim");
        for (name, dims) in &self.params {
            optim.ensure_state(name, dims)?;
        }
        let (t, lr) = (optim.iteration() + 1, optim.lr());
        for (s, v) in fused.scalars.iter_mut() {
            v.as_mut_slice::<f32>().expect("f32 scalar")[0] = s.value(&fused.rule, t, lr);
        }
        {
            let (optim, fused) = (&*optim, &*fused);
            let refs: Feeds<'_> = self
                .inputs
                .iter()
                .map(|(n, f)| {
                    let t = match *f {
                        Feed::Batch(k) => &self.feeds[k],
                        Feed::Scalar(k) => &fused.scalars[k].1,
                        Feed::Slot { param, slot } => {
                            optim.slot(&self.params[param].0, slot).expect("state ensured above")
                        }
                    };
                    (n.as_str(), t)
                })
                .collect();
            self.compiled.run_into(&refs, &mut self.outputs)?;
        }
        let loss = scalar(&self.outputs[0]);
        // Outputs: loss, the new params, then each param's new slots. Swap them in; the old
        // tensors become the step's output buffers on the next run.
        let mut out = self.outputs[1..].iter_mut();
        for (name, _) in &self.params {
            let new = out.next().expect("one new value per param");
            std::mem::swap(self.compiled.param_mut(name).expect("params set at new"), new);
        }
        for ((name, _), &n) in self.params.iter().zip(&fused.slots_per_param) {
            for k in 0..n {
                let new = out.next().expect("one new value per slot");
                std::mem::swap(optim.slot_mut(name, k).expect("state ensured above"), new);
            }
        }
        optim.end_iteration();
        Ok(loss)
    }

    /// The optimizer (its state dict, its iteration).
    pub fn optimizer(&self) -> &O {
        &self.opt
    }

    /// The optimizer, mutably (to load a state dict).
    pub fn optimizer_mut(&mut self) -> &mut O {
        &mut self.opt
    }
}

/// The rule the in-graph update runs: `rule` as it applies to every param, when that is one
/// rule and it runs in-graph ([`in_graph::supported`]); `None` sends the update to the host.
fn in_graph_rule(rule: &Rule, params: &[(String, Vec<usize>)]) -> Option<Rule> {
    let first = rule::effective(rule, &params.first()?.1);
    let same = params.iter().all(|(_, d)| in_graph::supported(rule, d) && rule::effective(rule, d) == first);
    same.then(|| first.clone())
}
