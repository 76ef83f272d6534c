//! User extension ops: a process-wide registry of named ops with their shape rule and
//! reference evaluation.
//!
//! A custom op is `Op::Custom { name, attrs }`; its rules live in the registry, not in the IR,
//! so a serialized graph names the op and the process that loads it must have registered it
//! (an unregistered name is an error naming it, at build, verify and evaluation time).
//! Registering a name again replaces the earlier registration.

use super::ad::{AdError, Cx, RuleKind, Tan};
use super::{Attrs, Op};
use crate::{Dim, Graph, IrError, NodeId, Shape, Tensor};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock, RwLock};

/// The rules of a registered custom op.
///
/// An [`CustomOp::eval`] may split its work into independent tasks with [`parallel_for`],
/// which runs them on the threads of the backend evaluating the op.
pub trait CustomOp: Send + Sync {
    /// Result types from the operand types (one or more results). Errors are plain
    /// messages naming the problem; the graph adds the node and op name.
    fn infer(&self, attrs: &Attrs, ins: &[&Shape]) -> Result<Vec<Shape>, String>;
    /// Reference evaluation into `outs`, preallocated (zeroed) with the types `infer` gave.
    fn eval(&self, attrs: &Attrs, ins: &[&Tensor], outs: &mut [Tensor]) -> Result<(), IrError>;

    /// `custom_jvp`: the results' tangents given the operands `x`, results `y` and operand
    /// tangents `t` (see [`super::ad`]); they must be linear in `t`, built from ops that have
    /// transpose rules (or this op's [`CustomOp::transpose`]), for reverse mode to work.
    /// Default: no rule (an [`AdError::NoRule`] naming the op).
    fn jvp(&self, attrs: &Attrs, cx: &mut Cx, x: &[NodeId], y: &[NodeId], t: &[Tan]) -> Result<Vec<Tan>, AdError> {
        let _ = (attrs, cx, x, y, t);
        Err(no_rule(RuleKind::Jvp))
    }

    /// Transpose, for a custom op that is linear in the operands marked `lin`: one cotangent
    /// per operand. Default: no rule.
    fn transpose(
        &self,
        attrs: &Attrs,
        cx: &mut Cx,
        x: &[NodeId],
        lin: &[bool],
        ct: &[Tan],
    ) -> Result<Vec<Tan>, AdError> {
        let _ = (attrs, cx, x, lin, ct);
        Err(no_rule(RuleKind::Transpose))
    }

    /// Batching: results with their batch dims given operands with theirs (some batched).
    /// Default: no rule.
    fn batch(
        &self,
        attrs: &Attrs,
        cx: &mut Cx,
        x: &[NodeId],
        bd: &[Option<usize>],
        size: &Dim,
    ) -> Result<Vec<(NodeId, Option<usize>)>, AdError> {
        let _ = (attrs, cx, x, bd, size);
        Err(no_rule(RuleKind::Batch))
    }
}

/// The default "no rule" error; the dispatcher fills in the op's name.
fn no_rule(kind: RuleKind) -> AdError {
    AdError::NoRule { op: String::new(), kind, why: format!("the custom op registered no {kind} rule") }
}

/// Name the op in a rule error from a registered op.
fn named(op: &Op, e: AdError) -> AdError {
    match e {
        AdError::NoRule { op: o, kind, why } if o.is_empty() => AdError::NoRule { op: op.name(), kind, why },
        e => e,
    }
}

fn registered(op: &Op, name: &str, kind: RuleKind) -> Result<Arc<dyn CustomOp>, AdError> {
    lookup_op(name).ok_or_else(|| AdError::no_rule(op, kind, format!("custom op {name:?} is not registered")))
}

pub(crate) fn jvp(
    op: &Op,
    name: &str,
    attrs: &Attrs,
    cx: &mut Cx,
    x: &[NodeId],
    y: &[NodeId],
    t: &[Tan],
) -> Result<Vec<Tan>, AdError> {
    registered(op, name, RuleKind::Jvp)?.jvp(attrs, cx, x, y, t).map_err(|e| named(op, e))
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn transpose(
    op: &Op,
    name: &str,
    attrs: &Attrs,
    cx: &mut Cx,
    x: &[NodeId],
    lin: &[bool],
    _outs: &[Shape],
    ct: &[Tan],
) -> Result<Vec<Tan>, AdError> {
    registered(op, name, RuleKind::Transpose)?.transpose(attrs, cx, x, lin, ct).map_err(|e| named(op, e))
}

pub(crate) fn batch(
    op: &Op,
    name: &str,
    attrs: &Attrs,
    cx: &mut Cx,
    x: &[NodeId],
    bd: &[Option<usize>],
    size: &Dim,
) -> Result<Vec<(NodeId, Option<usize>)>, AdError> {
    registered(op, name, RuleKind::Batch)?.batch(attrs, cx, x, bd, size).map_err(|e| named(op, e))
}

/// How a backend runs `n` independent tasks: `run(n, f)` calls `f(i)` once for every `i < n`,
/// in any order, possibly on several threads, and returns when all are done.
pub type TaskRunner = fn(usize, &(dyn Fn(usize) + Sync));

static RUNNER: OnceLock<TaskRunner> = OnceLock::new();

/// Install the process's [`TaskRunner`] for [`parallel_for`] (a backend does this once, e.g.
/// `rlx-cpu` its thread team; the first installation stays).
pub fn set_task_runner(run: TaskRunner) {
    let _ = RUNNER.set(run);
}

/// `f(i)` for every `i < n`: on the installed [`TaskRunner`] (the CPU backend runs the tasks
/// on the threads of the graph run that evaluates the op), else one after another. For a
/// custom op's [`CustomOp::eval`] whose work splits into independent parts (disjoint slices
/// of its results); `f` must not assume any order.
pub fn parallel_for(n: usize, f: &(dyn Fn(usize) + Sync)) {
    match RUNNER.get() {
        Some(run) => run(n, f),
        None => (0..n).for_each(f),
    }
}

type Registry = RwLock<HashMap<String, Arc<dyn CustomOp>>>;

fn registry() -> &'static Registry {
    static R: OnceLock<Registry> = OnceLock::new();
    R.get_or_init(|| RwLock::new(HashMap::new()))
}

/// Register (or replace) the custom op `name` for this process.
pub fn register_op(name: &str, op: Arc<dyn CustomOp>) {
    // A poisoned lock only means another thread panicked mid-insert; the map is still usable.
    let mut m = registry().write().unwrap_or_else(|e| e.into_inner());
    m.insert(name.to_string(), op);
}

/// The registered op `name`, if any.
pub fn lookup_op(name: &str) -> Option<Arc<dyn CustomOp>> {
    registry().read().unwrap_or_else(|e| e.into_inner()).get(name).cloned()
}

pub(crate) fn infer(name: &str, attrs: &Attrs, ins: &[&Shape]) -> Result<Vec<Shape>, String> {
    let op = lookup_op(name).ok_or_else(|| format!("custom op {name:?} is not registered (call register_op)"))?;
    op.infer(attrs, ins)
}

pub(crate) fn eval(name: &str, attrs: &Attrs, ins: &[&Tensor], outs: &mut [Tensor]) -> Result<(), IrError> {
    let op = lookup_op(name).ok_or_else(|| IrError::Eval {
        op: format!("custom.{name}"),
        msg: format!("custom op {name:?} is not registered (call register_op)"),
    })?;
    op.eval(attrs, ins, outs)
}

impl Graph {
    /// Apply the registered custom op `name` to `operands`. Returns one id per result (the
    /// node itself for one result, its `get_tuple_element` nodes for several).
    ///
    /// Errors (recorded): an unregistered name, or whatever the op's `infer` rejects; a single
    /// placeholder id is returned then.
    pub fn custom(&mut self, name: &str, attrs: Attrs, operands: &[NodeId]) -> Vec<NodeId> {
        self.push_multi(super::Op::Custom { name: name.into(), attrs }, operands, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::evaluate;
    use crate::{Attr, DType, verify};

    /// With no backend's runner installed (none in this crate), `parallel_for` runs every
    /// task once, in order.
    #[test]
    fn parallel_for_without_a_runner_is_a_loop() {
        let seen = std::sync::Mutex::new(vec![]);
        parallel_for(5, &|i| seen.lock().unwrap().push(i));
        assert_eq!(*seen.lock().unwrap(), [0, 1, 2, 3, 4]);
        parallel_for(0, &|_| panic!("no task expected"));
    }

    /// `y = x * k` and `x + 1`: two results, `k` from the attributes.
    struct ScaleAndShift;
    impl CustomOp for ScaleAndShift {
        fn infer(&self, attrs: &Attrs, ins: &[&Shape]) -> Result<Vec<Shape>, String> {
            if ins.len() != 1 || ins[0].dtype != DType::F32 {
                return Err("test.scale takes one f32 operand".into());
            }
            if !matches!(attrs.get("k"), Some(Attr::Float(_))) {
                return Err("test.scale needs a float attribute k".into());
            }
            Ok(vec![ins[0].clone(), ins[0].clone()])
        }
        fn eval(&self, attrs: &Attrs, ins: &[&Tensor], outs: &mut [Tensor]) -> Result<(), IrError> {
            let Some(Attr::Float(k)) = attrs.get("k") else { unreachable!() };
            let x = ins[0].as_slice::<f32>().unwrap();
            let (a, b) = outs.split_at_mut(1);
            for ((o1, o2), &v) in
                a[0].as_mut_slice::<f32>().unwrap().iter_mut().zip(b[0].as_mut_slice().unwrap()).zip(x)
            {
                *o1 = v * *k as f32;
                *o2 = v + 1.0;
            }
            Ok(())
        }
    }

    #[test]
    fn registered_op_types_and_runs() {
        register_op("test.scale", Arc::new(ScaleAndShift));
        let mut g = Graph::new("g");
        let x = g.input("x", Shape::new(&[3], DType::F32));
        let mut attrs = Attrs::new();
        attrs.insert("k".into(), Attr::Float(3.0));
        let r = g.custom("test.scale", attrs, &[x]);
        assert_eq!(r.len(), 2);
        g.set_outputs(r);
        verify(&g).unwrap();
        let feeds = [("x".to_string(), Tensor::from_vec(vec![1.0f32, 2.0, -1.0], &[3]).unwrap())].into();
        let out = evaluate(&g, &feeds).unwrap();
        assert_eq!(out[0].as_slice::<f32>().unwrap(), &[3.0, 6.0, -3.0]);
        assert_eq!(out[1].as_slice::<f32>().unwrap(), &[2.0, 3.0, 0.0]);
        // The op's own rule rejects a missing attribute.
        let mut g = Graph::new("g");
        let x = g.input("x", Shape::new(&[3], DType::F32));
        g.custom("test.scale", Attrs::new(), &[x]);
        assert!(g.error().unwrap().to_string().contains("needs a float attribute k"));
    }

    #[test]
    fn unregistered_name_is_an_error_naming_it() {
        let mut g = Graph::new("g");
        let x = g.input("x", Shape::new(&[3], DType::F32));
        let r = g.custom("test.nope", Attrs::new(), &[x]);
        assert_eq!(r.len(), 1);
        let e = g.error().unwrap().to_string();
        assert!(e.contains("\"test.nope\" is not registered"), "{e}");
        let t = Tensor::zeros(&[3], DType::F32);
        let mut outs = vec![t.clone()];
        let e = eval("test.nope", &Attrs::new(), &[&t], &mut outs).unwrap_err();
        assert!(e.to_string().contains("test.nope"));
    }
}
