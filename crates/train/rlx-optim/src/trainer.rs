//! `Trainer`: forward graph + loss → `grad_with_loss` → compiled once → one call per
//! mini-batch, with params held inside the compiled graph and updated there in place.

use crate::{OptimError, Optimizer, Result, clip_grad_norm};
use rlx_ir::{DType, Elem, Graph, Tensor};
use rlx_runtime::{CompileOptions, CompiledGraph, Device, Session};

/// Options of a [`Trainer`].
#[derive(Clone, Debug, Default)]
pub struct TrainerOptions {
    /// Clip the gradients to this global L2 norm before each update.
    pub clip_grad_norm: Option<f32>,
    /// Compile options of the backward graph (threads, optimization).
    pub compile: CompileOptions,
}

/// A compiled training step.
///
/// `forward`'s first output must be a scalar f32 loss; every f32 param is trained. Inputs must
/// have static shapes (a fixed batch size: feed full batches). Per step, the batch is written
/// into buffers allocated once ([`Trainer::input_mut`]), the backward graph runs, and the
/// optimizer updates each param in place inside the compiled graph (no param copy, no
/// recompilation; the backend allocates only its outputs, the loss and the gradients).
pub struct Trainer<O: Optimizer> {
    compiled: CompiledGraph,
    params: Vec<(String, Vec<usize>)>,
    names: Vec<String>,
    feeds: Vec<Tensor>,
    opt: O,
    opts: TrainerOptions,
}

impl<O: Optimizer> Trainer<O> {
    /// Differentiate `forward` with respect to all its f32 params and compile for the CPU.
    /// Params start at zero; set them with [`Trainer::set_param`]. Errors: no params, a
    /// non-static input, anything `grad_with_loss` or compile rejects.
    pub fn new(forward: &Graph, opt: O, opts: TrainerOptions) -> Result<Trainer<O>> {
        let wrt: Vec<_> = forward.params().iter().copied().filter(|&p| forward.shape(p).dtype == DType::F32).collect();
        if wrt.is_empty() {
            return Err(OptimError::Trainer("the forward graph has no f32 params to train".into()));
        }
        let name = |id| forward.source_name(id).unwrap_or("?").to_string();
        let mut params = vec![];
        for &p in &wrt {
            let dims = forward
                .shape(p)
                .static_dims()
                .ok_or_else(|| OptimError::Trainer(format!("param {} is symbolic", name(p))))?;
            params.push((name(p), dims));
        }
        let backward = rlx_autodiff::try_grad_with_loss(forward, &wrt)?;
        let (mut names, mut feeds) = (vec![], vec![]);
        for &i in backward.inputs() {
            let s = backward.shape(i);
            let dims = s
                .static_dims()
                .ok_or_else(|| OptimError::Trainer(format!("input {} has symbolic dims {s}", name(i))))?;
            let n = backward.source_name(i).unwrap_or("?").to_string();
            let mut t = Tensor::zeros(&dims, s.dtype);
            if n == "d_output" {
                t = Tensor::from_f64s(&dims, s.dtype, &[1.0]).map_err(|e| OptimError::Trainer(e.to_string()))?;
            }
            names.push(n);
            feeds.push(t);
        }
        let mut compiled = Session::try_new(Device::Cpu)?.try_compile_with(backward, &opts.compile)?;
        for (n, dims) in &params {
            compiled.set_param_tensor(n, Tensor::zeros(dims, DType::F32))?;
        }
        Ok(Trainer { compiled, params, names, feeds, opt, opts })
    }

    /// The trained params: `(name, dims)` in the forward graph's order.
    pub fn params(&self) -> &[(String, Vec<usize>)] {
        &self.params
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
        let k = self.names.iter().position(|n| n == name && n != "d_output");
        let t = k.map(|k| &mut self.feeds[k]).ok_or_else(|| OptimError::Trainer(format!("no input named {name:?}")))?;
        let dt = t.dtype();
        t.as_mut_slice::<T>().ok_or_else(|| OptimError::Trainer(format!("input {name:?} is {dt:?}")))
    }

    /// One training step on the current input buffers: gradients, optional clipping, one
    /// optimizer step per param, `end_iteration`. Returns the loss (before the update).
    pub fn step(&mut self) -> Result<f32> {
        let feeds: Vec<(&str, Tensor)> = self.names.iter().map(String::as_str).zip(self.feeds.drain(..)).collect();
        let out = self.compiled.run_tensors(&feeds);
        self.feeds.extend(feeds.into_iter().map(|(_, t)| t));
        let mut out = out?;
        let loss = out[0].to_f32_vec().first().copied().unwrap_or(f32::NAN);
        let mut grads: Vec<&mut [f32]> =
            out[1..].iter_mut().map(|t| t.as_mut_slice::<f32>().expect("f32 param has an f32 gradient")).collect();
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

    /// The optimizer (its state dict, its iteration).
    pub fn optimizer(&self) -> &O {
        &self.opt
    }

    /// The optimizer, mutably (to load a state dict).
    pub fn optimizer_mut(&mut self) -> &mut O {
        &mut self.opt
    }
}
