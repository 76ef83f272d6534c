//! Transforms of functions on tensors, as in JAX: [`grad`], [`value_and_grad`], [`jvp`],
//! [`vmap`], [`jit`]. Each traces the function once on placeholder inputs typed like the
//! arguments, hands the traced `rlx_ir::Graph` to `rlx-autodiff`, and splices the transformed
//! graph back onto the arguments, so its results are lazy tensors like any other (and
//! transforms compose). Tensors the function captures are constants of the transform.
//!
//! Errors (a missing rule, a non-scalar loss, a non-float argument) become a
//! [`TensorError::Transform`] carried by the results, located where the transform was created.

use crate::Tensor;
use crate::error::{Result, TensorError};
use crate::eval::{device_of, eval, run_cached};
use crate::expr::{self, DataAs, Expr, Extracted, Kind, Leaf};
use rlx_ir::{Dim, Graph, NodeId, Shape, Tensor as HostTensor};
use std::cell::RefCell;
use std::collections::HashMap;
use std::panic::Location;
use std::rc::Rc;

fn arg_name(i: usize) -> String {
    format!("__arg{i}")
}

/// A traced function: the graph (placeholders first, as inputs `__arg{i}`) and how to bind
/// its sources back to tensors.
struct Traced {
    ex: Extracted,
    device: Option<rlx_runtime::Device>,
}

fn trace(
    f: &dyn Fn(&[Tensor]) -> Tensor,
    args: &[Tensor],
    shapes: Vec<Shape>,
    location: &'static Location<'static>,
) -> Result<Traced> {
    let refs: Vec<&Tensor> = args.iter().collect();
    if let Some(e) = Tensor::first_error(&refs) {
        return Err((*e).clone());
    }
    let ph: Vec<Tensor> = shapes
        .into_iter()
        .enumerate()
        .map(|(i, s)| Tensor::from_expr(Expr::leaf(Leaf::Input(arg_name(i)), s), None))
        .collect();
    let out = f(&ph);
    out.check()?;
    let declare: Vec<Rc<Expr>> = ph.iter().map(|t| t.expr.clone()).collect();
    let ex = expr::extract("f", std::slice::from_ref(&out.expr), &declare, DataAs::Inputs)
        .map_err(|name| TensorError::DuplicateName { location, name })?;
    Ok(Traced { ex, device: refs.iter().find_map(|t| t.device) })
}

impl Traced {
    /// Splice `g` (a transform of the traced graph) onto `args`: its sources are bound by
    /// name (`__arg{i}` to `args[i]`, `extra` names to their tensors, the rest to the leaves
    /// they came from).
    fn splice(&self, g: &Graph, args: &[Tensor], extra: &[(String, &Tensor)]) -> Vec<Tensor> {
        let bind = |_: NodeId, n: &rlx_ir::Node| -> std::result::Result<Rc<Expr>, String> {
            let name = match &n.op {
                rlx_ir::Op::Input { name } | rlx_ir::Op::Param { name } => name.as_str(),
                _ => unreachable!("import only asks for sources"),
            };
            if let Some(i) = (0..args.len()).find(|&i| arg_name(i) == name) {
                return Ok(args[i].expr.clone());
            }
            if let Some((_, t)) = extra.iter().find(|(n, _)| n == name) {
                return Ok(t.expr.clone());
            }
            self.ex.sources.iter().find(|(n, _)| n == name).map(|(_, e)| e.clone()).ok_or_else(|| name.to_string())
        };
        let outs = expr::import(g, bind).expect("a transform only adds sources the caller names");
        outs.into_iter().map(|e| Tensor::from_expr(e, self.device)).collect()
    }
}

fn poison_all(e: TensorError, n: usize) -> Vec<Tensor> {
    (0..n).map(|_| Tensor::poisoned(e.clone(), None)).collect()
}

fn shapes_of(args: &[Tensor]) -> Vec<Shape> {
    args.iter().map(|a| a.shape().clone()).collect()
}

/// `jax.value_and_grad(f, argnums)`: a function returning `(f(args), [∂f/∂args[k] for k in
/// argnums])`. `f` must return a float scalar; `argnums` must name float arguments.
#[track_caller]
pub fn value_and_grad<F>(f: F, argnums: &[usize]) -> impl Fn(&[Tensor]) -> (Tensor, Vec<Tensor>)
where
    F: Fn(&[Tensor]) -> Tensor,
{
    let location = Location::caller();
    let argnums = argnums.to_vec();
    move |args: &[Tensor]| {
        let run = || -> Result<Vec<Tensor>> {
            let t = trace(&f, args, shapes_of(args), location)?;
            let mut wrt = vec![];
            for &k in &argnums {
                let id = t.ex.graph.input_by_name(&arg_name(k)).ok_or_else(|| TensorError::Transform {
                    location,
                    source: rlx_autodiff::AdError::Argument(format!(
                        "argnums names argument {k}, but only {} were passed",
                        args.len()
                    )),
                })?;
                wrt.push(id);
            }
            let vg = rlx_autodiff::value_and_grad(&t.ex.graph, &wrt)
                .map_err(|source| TensorError::Transform { location, source })?;
            Ok(t.splice(&vg, args, &[]))
        };
        let mut v = run().unwrap_or_else(|e| poison_all(e, argnums.len() + 1));
        let value = v.remove(0);
        (value, v)
    }
}

/// `jax.grad(f, argnums)`: a function returning `[∂f/∂args[k] for k in argnums]` (lazy
/// tensors). `f` must return a float scalar.
///
/// ```
/// use rlx_tensor::{Tensor, grad};
/// let df = grad(|x: &[Tensor]| (&x[0] * &x[0]).sum_all(), &[0]);
/// let g = df(&[Tensor::from_vec(vec![1.0, -2.0], [2])]);
/// assert_eq!(g[0].to_vec(), vec![2.0, -4.0]);
/// ```
#[track_caller]
pub fn grad<F>(f: F, argnums: &[usize]) -> impl Fn(&[Tensor]) -> Vec<Tensor>
where
    F: Fn(&[Tensor]) -> Tensor,
{
    let vg = value_and_grad(f, argnums);
    move |args: &[Tensor]| vg(args).1
}

/// `jax.jvp(f, primals, tangents)`: `(f(primals), ∂f(primals)·tangents)`, one tangent per
/// primal (same types).
#[track_caller]
pub fn jvp<F>(f: F, primals: &[Tensor], tangents: &[Tensor]) -> (Tensor, Tensor)
where
    F: Fn(&[Tensor]) -> Tensor,
{
    let location = Location::caller();
    let run = || -> Result<Vec<Tensor>> {
        if primals.len() != tangents.len() {
            let msg = format!("{} primals but {} tangents", primals.len(), tangents.len());
            return Err(TensorError::Transform { location, source: rlx_autodiff::AdError::Argument(msg) });
        }
        let t = trace(&f, primals, shapes_of(primals), location)?;
        let wrt: Vec<NodeId> = (0..primals.len()).map(|i| t.ex.graph.inputs()[i]).collect();
        let j = rlx_autodiff::jvp(&t.ex.graph, &wrt).map_err(|source| TensorError::Transform { location, source })?;
        let extra: Vec<(String, &Tensor)> =
            tangents.iter().enumerate().map(|(i, tg)| (format!("tangent_{}", arg_name(i)), tg)).collect();
        Ok(t.splice(&j, primals, &extra))
    };
    let mut v = run().unwrap_or_else(|e| poison_all(e, 2));
    let tan = v.remove(1);
    (v.remove(0), tan)
}

/// `jax.vmap(f, in_axes)` with `out_axes=0`: a function mapping `f` over axis `in_axes[i]` of
/// argument `i` (`None`: not mapped), stacking results on a new leading axis. `f` is traced on
/// one slice. Errors: no mapped argument, mapped sizes that differ, an axis out of range.
#[track_caller]
pub fn vmap<F>(f: F, in_axes: &[Option<usize>]) -> impl Fn(&[Tensor]) -> Tensor
where
    F: Fn(&[Tensor]) -> Tensor,
{
    let location = Location::caller();
    let in_axes = in_axes.to_vec();
    move |args: &[Tensor]| {
        let run = || -> Result<Tensor> {
            let bad = |msg: String| TensorError::Transform { location, source: rlx_autodiff::AdError::Argument(msg) };
            let mut size: Option<Dim> = None;
            let mut shapes = vec![];
            for (i, a) in args.iter().enumerate() {
                let mut s = a.shape().clone();
                if let Some(ax) = in_axes.get(i).copied().flatten() {
                    if ax >= s.rank() {
                        return Err(bad(format!("in_axes[{i}] = {ax} is out of range for {s}")));
                    }
                    let d = s.dims.remove(ax);
                    if size.as_ref().is_some_and(|n| *n != d) {
                        return Err(bad(format!("mapped sizes differ: {} and {d}", size.unwrap())));
                    }
                    size = Some(d);
                }
                shapes.push(s);
            }
            let size = size.ok_or_else(|| bad("vmap needs at least one mapped argument".into()))?;
            let t = trace(&f, args, shapes, location)?;
            let v = rlx_autodiff::vmap(&t.ex.graph, &in_axes, &[Some(0)], size)
                .map_err(|source| TensorError::Transform { location, source })?;
            Ok(t.splice(&v, args, &[]).remove(0))
        };
        run().unwrap_or_else(|e| Tensor::poisoned(e, None))
    }
}

/// A function compiled once per argument types, as `jax.jit`.
struct Jitted {
    graph: Graph,
    key: String,
    /// Data of the tensors `f` captured, baked at trace time (as JAX does).
    baked: Vec<(String, HostTensor)>,
}

/// `jax.jit(f)`: a function that traces `f` once per list of argument types, compiles it
/// (cached), evaluates the arguments, runs, and returns a tensor holding the result (not a
/// lazy expression). Tensors `f` captures are read once, when it is traced.
#[track_caller]
pub fn jit<F>(f: F) -> impl Fn(&[Tensor]) -> Tensor
where
    F: Fn(&[Tensor]) -> Tensor,
{
    let location = Location::caller();
    let traces: RefCell<HashMap<Vec<Shape>, Rc<Jitted>>> = RefCell::new(HashMap::new());
    move |args: &[Tensor]| {
        let run = || -> Result<Tensor> {
            let shapes = shapes_of(args);
            let cached = traces.borrow().get(&shapes).cloned();
            let j = match cached {
                Some(j) => j,
                None => {
                    let t = trace(&f, args, shapes.clone(), location)?;
                    let sources = &t.ex.sources[args.len()..];
                    if let Some((name, _)) = sources.iter().find(|(_, e)| !matches!(e.kind, Kind::Leaf(Leaf::Data(_))))
                    {
                        return Err(TensorError::Unbound { location, name: name.clone() });
                    }
                    let baked = t.ex.data_feeds().into_iter().map(|(n, d)| (n.to_string(), d.clone())).collect();
                    let run = |source| TensorError::Run { location, source };
                    let key = rlx_ir::hir_to_json(&t.ex.graph).map_err(|e| run(e.into()))?;
                    let j = Rc::new(Jitted { graph: t.ex.graph, key, baked });
                    traces.borrow_mut().insert(shapes, j.clone());
                    j
                }
            };
            let refs: Vec<&Tensor> = args.iter().collect();
            let values = eval(&refs)?;
            let names: Vec<String> = (0..args.len()).map(arg_name).collect();
            let mut feeds: Vec<(&str, &HostTensor)> = names.iter().map(String::as_str).zip(values.iter()).collect();
            feeds.extend(j.baked.iter().map(|(n, d)| (n.as_str(), d)));
            let device = device_of(&refs);
            let mut out = run_cached(device, j.graph.clone(), j.key.clone(), &feeds)
                .map_err(|source| TensorError::Run { location, source })?;
            Ok(Tensor::from_host(out.remove(0)).on(device))
        };
        run().unwrap_or_else(|e| Tensor::poisoned(e, None))
    }
}
