//! Evaluation: extract the graph of some tensors, compile it once per structure (a per-thread
//! cache keyed by device and the graph's JSON, in which data tensors are inputs, so new data
//! reuses the compiled code), and run it.

use crate::Tensor;
use crate::error::{Result, TensorError};
use crate::expr::{self, DataAs, Expr};
use rlx_ir::{Graph, Tensor as HostTensor};
use rlx_runtime::{CompiledGraph, Device, Session, fastest_device};
use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::Location;
use std::rc::Rc;

/// Compiled graphs kept per thread; the cache is emptied when it reaches this many.
const CACHE_CAPACITY: usize = 256;

thread_local! {
    static CACHE: RefCell<HashMap<(Device, String), CompiledGraph>> = RefCell::new(HashMap::new());
}

/// Number of compiled graphs in this thread's cache (each distinct graph structure and device
/// compiles once).
pub fn cache_len() -> usize {
    CACHE.with(|c| c.borrow().len())
}

/// Empty this thread's compile cache.
pub fn clear_cache() {
    CACHE.with(|c| c.borrow_mut().clear());
}

/// Compile `g` (keyed by `key`) unless cached, then run it with `feeds`.
pub(crate) fn run_cached(
    device: Device,
    g: Graph,
    key: String,
    feeds: &[(&str, &HostTensor)],
) -> Result<Vec<HostTensor>, rlx_runtime::Error> {
    CACHE.with(|c| {
        let mut cache = c.borrow_mut();
        let k = (device, key);
        if !cache.contains_key(&k) {
            if cache.len() >= CACHE_CAPACITY {
                cache.clear();
            }
            let compiled = Session::try_new(device)?.try_compile(g)?;
            cache.insert(k.clone(), compiled);
        }
        let compiled = cache.get_mut(&k).expect("inserted above");
        let feeds: Vec<(&str, HostTensor)> = feeds.iter().map(|(n, t)| (*n, (*t).clone())).collect();
        compiled.run_tensors(&feeds)
    })
}

/// The device to run `ts` on: the first one set with `on`, else the fastest available.
pub(crate) fn device_of(ts: &[&Tensor]) -> Device {
    ts.iter().find_map(|t| t.device).unwrap_or_else(fastest_device)
}

/// Evaluate several tensors in one compiled graph (shared work computed once); host tensors
/// in the order given. Errors: an error carried by an input tensor, a named input or param
/// without data, a compile or run failure.
#[track_caller]
pub fn eval(ts: &[&Tensor]) -> Result<Vec<HostTensor>> {
    let location = Location::caller();
    if let Some(e) = Tensor::first_error(ts) {
        return Err((*e).clone());
    }
    let exprs: Vec<Rc<Expr>> = ts.iter().map(|t| t.expr.clone()).collect();
    let ex = expr::extract("tensor", &exprs, &[], DataAs::Inputs)
        .map_err(|name| TensorError::DuplicateName { location, name })?;
    if let Some(name) = ex.unbound() {
        return Err(TensorError::Unbound { location, name: name.to_string() });
    }
    let run = |source| TensorError::Run { location, source };
    let key = rlx_ir::hir_to_json(&ex.graph).map_err(|e| run(e.into()))?;
    let feeds = ex.data_feeds();
    run_cached(device_of(ts), ex.graph.clone(), key, &feeds).map_err(run)
}

impl Tensor {
    /// Compile (cached) and run, returning the values as f32 in row-major order. This is the
    /// spec's panicking convenience: it panics with the error's message and the caller's
    /// location; see [`Tensor::try_to_vec`].
    #[track_caller]
    pub fn to_vec(&self) -> Vec<f32> {
        self.try_to_vec().unwrap_or_else(|e| panic!("Tensor::to_vec failed: {e}"))
    }

    /// [`Tensor::to_vec`] returning the error: one carried from an op (with that op's
    /// location), a named input without data, or a compile / run failure.
    #[track_caller]
    pub fn try_to_vec(&self) -> Result<Vec<f32>> {
        Ok(self.try_to_tensor()?.to_f32_vec())
    }

    /// Compile (cached) and run, returning a host tensor of this tensor's dtype. Panics on
    /// error; see [`Tensor::try_to_tensor`].
    #[track_caller]
    pub fn to_tensor(&self) -> HostTensor {
        self.try_to_tensor().unwrap_or_else(|e| panic!("Tensor::to_tensor failed: {e}"))
    }

    /// [`Tensor::to_tensor`] returning the error.
    #[track_caller]
    pub fn try_to_tensor(&self) -> Result<HostTensor> {
        Ok(eval(&[self])?.remove(0))
    }

    /// Evaluate now and return a tensor holding the result (later ops start from data, so the
    /// expression behind this one is not recompiled into their graphs).
    #[track_caller]
    pub fn realize(&self) -> Tensor {
        match self.try_to_tensor() {
            Ok(t) => Tensor { device: self.device, ..Tensor::from_host(t) },
            Err(e) => Tensor::poisoned(e, self.device),
        }
    }
}
