//! `Optim` (a [`Rule`] + a [`Schedule`] + per-param state), the spec's `Optimizer` surface,
//! and `StateDict` for bit-exact resume.

use crate::rule::{self, Rule, Slots};
use crate::{OptimError, Result, Schedule};
use rlx_ir::Tensor;
use std::collections::BTreeMap;
use std::path::Path;

/// The spec's optimizer surface: one `step` per param per iteration, then `end_iteration`.
pub trait Optimizer {
    /// Update `param` (`shape`, f32, row-major) in place from `grad` (same length). Its state
    /// is created on the first call for `name`. Panics on bad input; see
    /// [`Optimizer::try_step`].
    #[track_caller]
    fn step(&mut self, name: &str, shape: &[usize], param: &mut [f32], grad: &[f32]) {
        self.try_step(name, shape, param, grad).unwrap_or_else(|e| panic!("optimizer step failed: {e}"))
    }
    /// [`Optimizer::step`] returning errors: lengths that disagree with `shape`
    /// ([`OptimError::Length`]), a shape other than the one the state was built for
    /// ([`OptimError::ShapeChanged`]).
    fn try_step(&mut self, name: &str, shape: &[usize], param: &mut [f32], grad: &[f32]) -> Result<()>;
    /// Finish an iteration: the step count `t` (bias corrections, schedules) advances.
    fn end_iteration(&mut self);
    /// A copy of the state (step count and every slot), enough to resume bit for bit.
    fn state_dict(&self) -> StateDict;
    /// Replace the state by `sd`. Errors: slots that do not fit this optimizer's rule.
    fn load_state_dict(&mut self, sd: &StateDict) -> Result<()>;
    /// The general optimizer behind this one, if it is one: [`crate::Trainer`] then runs its
    /// rule inside the compiled training step (see the crate README). Default `None`.
    fn as_optim_mut(&mut self) -> Option<&mut Optim> {
        None
    }
}

/// An optimizer's state: completed iterations, each param's shape and its slots (`m`, `v`,
/// `v_row`, `v_col`), as f32 tensors named `<param>.<slot>`.
#[derive(Clone, Debug, PartialEq)]
pub struct StateDict {
    /// Completed iterations (`end_iteration` calls).
    pub step: u64,
    /// Param name → its shape.
    pub shapes: BTreeMap<String, Vec<usize>>,
    /// `<param>.<slot>` → state tensor (f32).
    pub tensors: BTreeMap<String, Tensor>,
}

impl StateDict {
    /// Write as safetensors: the tensors, with `step` and `shape.<param>` in the metadata.
    /// Errors: I/O.
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        let mut meta = BTreeMap::from([("step".to_string(), self.step.to_string())]);
        for (name, shape) in &self.shapes {
            let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
            meta.insert(format!("shape.{name}"), dims.join(","));
        }
        rlx_safetensors::save(path, self.tensors.iter(), Some(&meta))?;
        Ok(())
    }

    /// Read a file written by [`StateDict::save`]. Errors: I/O, not safetensors, missing or
    /// malformed `step` / `shape.*` metadata.
    pub fn load(path: impl AsRef<Path>) -> Result<StateDict> {
        let f = rlx_safetensors::SafetensorsFile::open(path)?;
        let bad = |m: &str| OptimError::StateDict(m.to_string());
        let step = f.metadata().get("step").and_then(|s| s.parse().ok()).ok_or_else(|| bad("no `step` metadata"))?;
        let mut shapes = BTreeMap::new();
        for (k, v) in f.metadata() {
            if let Some(name) = k.strip_prefix("shape.") {
                let dims: std::result::Result<Vec<usize>, _> =
                    v.split(',').filter(|s| !s.is_empty()).map(str::parse).collect();
                shapes.insert(name.to_string(), dims.map_err(|_| bad(&format!("bad shape {v:?} for {name}")))?);
            }
        }
        let mut tensors = BTreeMap::new();
        for name in f.names() {
            tensors.insert(name.to_string(), f.tensor_as(name, rlx_ir::DType::F32)?);
        }
        Ok(StateDict { step, shapes, tensors })
    }
}

/// One param's state: its shape and its slots (f32 tensors of the slot shapes, in
/// [`rule::slots`] order). Tensors rather than `Vec`s so the in-graph update of
/// [`crate::Trainer`] can feed them to the compiled step and take the new values back
/// without a copy.
struct ParamState {
    shape: Vec<usize>,
    slots: Vec<(&'static str, Tensor)>,
}

/// The general optimizer: [`Rule`] (the math), [`Schedule`] (the rate), and per-param state.
/// Every named optimizer ([`crate::Adam`], [`crate::Sgd`], …) is one of these.
pub struct Optim {
    rule: Rule,
    schedule: Schedule,
    t: u64,
    state: BTreeMap<String, ParamState>,
    d: Vec<f64>,
    work: Vec<f64>,
}

impl Optim {
    /// An optimizer applying `rule` at rate `schedule` (an `f32` converts to a constant).
    pub fn new(rule: Rule, schedule: impl Into<Schedule>) -> Optim {
        Optim { rule, schedule: schedule.into(), t: 0, state: BTreeMap::new(), d: vec![], work: vec![] }
    }
    /// Replace the schedule.
    pub fn with_schedule(mut self, schedule: impl Into<Schedule>) -> Optim {
        self.schedule = schedule.into();
        self
    }
    /// The rule.
    pub fn rule(&self) -> &Rule {
        &self.rule
    }
    /// Completed iterations.
    pub fn iteration(&self) -> u64 {
        self.t
    }
    /// The rate the next step uses.
    pub fn lr(&self) -> f64 {
        self.schedule.at(self.t)
    }

    /// Create `name`'s state (slots at their initial values) unless it exists. Errors: it
    /// exists for another shape ([`OptimError::ShapeChanged`]).
    pub(crate) fn ensure_state(&mut self, name: &str, shape: &[usize]) -> Result<()> {
        match self.state.get(name) {
            Some(st) if st.shape != shape => {
                Err(OptimError::ShapeChanged { name: name.into(), was: st.shape.clone(), now: shape.to_vec() })
            }
            Some(_) => Ok(()),
            None => {
                let slots = rule::slots(&self.rule, shape)
                    .into_iter()
                    .map(|(s, sh, init)| (s, Tensor::from_vec(vec![init; sh.iter().product()], &sh).expect("dims")))
                    .collect();
                self.state.insert(name.to_string(), ParamState { shape: shape.to_vec(), slots });
                Ok(())
            }
        }
    }

    /// `name`'s `k`-th slot tensor in [`rule::slots`] order (after [`Optim::ensure_state`]).
    pub(crate) fn slot(&self, name: &str, k: usize) -> Option<&Tensor> {
        self.state.get(name)?.slots.get(k).map(|(_, t)| t)
    }

    /// `name`'s `k`-th slot, mutably: the in-graph update swaps the new value in (same shape
    /// and dtype) and hands the old tensor back to the compiled step as an output buffer.
    pub(crate) fn slot_mut(&mut self, name: &str, k: usize) -> Option<&mut Tensor> {
        self.state.get_mut(name)?.slots.get_mut(k).map(|(_, t)| t)
    }
}

impl Optimizer for Optim {
    fn try_step(&mut self, name: &str, shape: &[usize], param: &mut [f32], grad: &[f32]) -> Result<()> {
        let want: usize = shape.iter().product();
        if param.len() != want || grad.len() != want {
            return Err(OptimError::Length {
                name: name.into(),
                shape: shape.to_vec(),
                want,
                param: param.len(),
                grad: grad.len(),
            });
        }
        self.ensure_state(name, shape)?;
        let st = self.state.get_mut(name).expect("ensured above");
        let mut views = Slots { m: None, v: None, v_row: None, v_col: None };
        for (slot, t) in st.slots.iter_mut() {
            let buf = t.as_mut_slice::<f32>().expect("slots are f32");
            let at = match *slot {
                "m" => &mut views.m,
                "v" => &mut views.v,
                "v_row" => &mut views.v_row,
                _ => &mut views.v_col,
            };
            *at = Some(buf);
        }
        let lr = self.schedule.at(self.t);
        let r = rule::effective(&self.rule, shape);
        rule::apply(r, shape, self.t + 1, lr, param, grad, views, &mut self.d, &mut self.work);
        Ok(())
    }

    fn end_iteration(&mut self) {
        self.t += 1;
    }

    fn as_optim_mut(&mut self) -> Option<&mut Optim> {
        Some(self)
    }

    fn state_dict(&self) -> StateDict {
        let mut sd = StateDict { step: self.t, shapes: BTreeMap::new(), tensors: BTreeMap::new() };
        for (name, st) in &self.state {
            sd.shapes.insert(name.clone(), st.shape.clone());
            for (slot, t) in &st.slots {
                sd.tensors.insert(format!("{name}.{slot}"), t.clone());
            }
        }
        sd
    }

    fn load_state_dict(&mut self, sd: &StateDict) -> Result<()> {
        let mut state = BTreeMap::new();
        let mut used = 0;
        for (name, shape) in &sd.shapes {
            let mut slots = vec![];
            for (slot, sh, _) in rule::slots(&self.rule, shape) {
                let key = format!("{name}.{slot}");
                let t = sd.tensors.get(&key).ok_or_else(|| OptimError::StateDict(format!("missing {key:?}")))?;
                t.as_slice::<f32>().filter(|_| t.shape() == sh.as_slice()).ok_or_else(|| {
                    OptimError::StateDict(format!(
                        "{key:?} is {:?} {:?}, this rule needs f32 {sh:?}",
                        t.dtype(),
                        t.shape()
                    ))
                })?;
                slots.push((slot, t.clone()));
                used += 1;
            }
            state.insert(name.clone(), ParamState { shape: shape.clone(), slots });
        }
        if used != sd.tensors.len() {
            return Err(OptimError::StateDict(format!(
                "{} tensors but this rule uses {used} (a state dict of another optimizer?)",
                sd.tensors.len()
            )));
        }
        self.state = state;
        self.t = sd.step;
        Ok(())
    }
}
