//! `rlx-autodiff`: JAX-style transforms of `rlx-ir` graphs, graph to graph.
//!
//! - [`grad`] / [`try_grad`], [`value_and_grad`], [`grad_with_loss`] / [`try_grad_with_loss`]
//!   (reverse mode), [`jvp`] (forward mode), [`hvp`] (forward-over-reverse), [`vmap`];
//!   they compose: the results are ordinary graphs, so `grad` of a `grad`, `vmap` of a `grad`
//!   or `jvp` of a `vmap` work like any other graph.
//! - Reverse mode is JAX's *linearize then transpose*: the JVP rules kept beside each op in
//!   `rlx-ir` (`rlx_ir::ops::ad` and `ops/<family>/ad.rs`) emit the tangent computation, and
//!   the linear part is transposed with the transpose rules of the (few) linear primitives.
//!   Zero tangents are symbolic; no backward ops exist in the IR.
//! - Composites are differentiated through their decomposition, except that reverse mode uses
//!   a registered custom VJP (`rlx_ir::ops::ad::register_vjp`; built in for `cross_entropy` and
//!   `scaled_dot_product_attention`). User ops (`Op::Custom`) bring `custom_jvp` /
//!   batching rules through `rlx_ir::ops::custom::CustomOp`.
//! - Every failure is an [`AdError`]; a missing rule names the op.
//!
//! Conventions at non-differentiable points follow JAX: see `docs/autodiff.md`.
#![warn(missing_docs)]

mod graphs;
mod jvp;
mod transpose;
mod vmap;

pub use rlx_ir::ops::ad::{AdError, RuleKind};

use graphs::{depends_on, prune, sources, verified};
use rlx_ir::ops::ad::{Split, SubTransforms};
use rlx_ir::{Dim, Graph, NodeId, Op};

/// The transforms, as the rules of ops with sub-graphs see them.
pub(crate) struct Engine;

impl SubTransforms for Engine {
    fn jvp(&self, g: &Graph, tan_in: &[bool], force_out: &[bool]) -> Result<(Graph, Vec<bool>), AdError> {
        jvp::jvp_graph(g, tan_in, force_out, false)
    }
    fn partial_eval(&self, g: &Graph, lin_in: &[bool], n_known: usize) -> Result<Split, AdError> {
        transpose::partial_eval(g, lin_in, n_known)
    }
    fn transpose(&self, g: &Graph, lin_in: &[bool]) -> Result<Graph, AdError> {
        transpose::transpose_graph(g, lin_in)
    }
    fn vmap(&self, g: &Graph, in_dims: &[Option<usize>], size: &Dim) -> Result<Graph, AdError> {
        vmap::vmap_graph(g, in_dims, &[], size, true)
    }
}

/// How reverse mode seeds the loss cotangent.
#[derive(Clone, Copy, PartialEq)]
enum Seed {
    /// A constant 1 (the loss must be a scalar).
    One,
    /// An input named `d_output` of the loss's type.
    Input,
}

/// Check `wrt` against `f` and return the names of the sources.
fn wrt_names(f: &Graph, wrt: &[NodeId]) -> Result<Vec<String>, AdError> {
    wrt.iter()
        .map(|&w| {
            let n = f
                .nodes()
                .get(w.index())
                .ok_or_else(|| AdError::Argument(format!("wrt {w} is not a node of {:?}", f.name)))?;
            match &n.op {
                Op::Input { name } | Op::Param { name } if n.ty().dtype.is_float() => Ok(name.clone()),
                Op::Input { name } | Op::Param { name } => Err(AdError::Argument(format!(
                    "wrt {name:?} has type {}; only float values have gradients",
                    n.ty()
                ))),
                op => Err(AdError::Argument(format!(
                    "wrt {w} is a {} node; differentiate with respect to inputs or params",
                    op.name()
                ))),
            }
        })
        .collect()
}

/// Reverse mode: outputs `[loss, d loss / d wrt…]`.
fn vjp_graph(f: &Graph, wrt: &[NodeId], seed: Seed) -> Result<Graph, AdError> {
    rlx_ir::verify(f)?;
    let names = wrt_names(f, wrt)?;
    let &loss_id = f.outputs().first().ok_or_else(|| AdError::Argument("the graph has no outputs".into()))?;
    let lt = f.shape(loss_id).clone();
    if !lt.dtype.is_float() {
        return Err(AdError::Argument(format!("the loss (first output) must be float, got {lt}")));
    }
    if seed == Seed::One && lt.rank() != 0 {
        return Err(AdError::Argument(format!(
            "grad needs a scalar loss (first output), got {lt}; use grad_with_loss to seed a non-scalar one"
        )));
    }
    let src = jvp::inline(f, true);
    let srcs = sources(&src);
    let mut dst = Graph::new(format!("{}_grad", f.name));
    let args: Vec<NodeId> = srcs.iter().map(|&s| dst.push_node(src.node(s).clone())).collect();
    let mut tans = vec![None; srcs.len()];
    let mut roots = vec![];
    for name in &names {
        let k = srcs.iter().position(|&s| src.source_name(s) == Some(name)).expect("wrt source survives inlining");
        let r = match tans[k] {
            Some(r) => r,
            None => {
                let r = dst.input(&graphs::fresh_name(&dst, &format!("__tangent_{name}")), src.shape(srcs[k]).clone());
                tans[k] = Some(r);
                r
            }
        };
        roots.push(r);
    }
    let (outs, touts) = jvp::trace(&src, &mut dst, &args, &tans, true)?;
    let s = match seed {
        Seed::Input => dst.input(&graphs::fresh_name(&dst, "d_output"), lt.clone()),
        Seed::One => dst.scalar(1.0, lt.dtype),
    };
    let lin = depends_on(&dst, &roots);
    let seeds: Vec<(NodeId, NodeId)> = touts[0].map(|t| (t, s)).into_iter().collect();
    let cts = transpose::transpose_into(&mut dst, &lin, &seeds)?;
    let mut res = vec![outs[0]];
    for r in &roots {
        let g = match cts.get(r) {
            Some(&c) => c,
            None => jvp::zeros_like(&mut dst, *r),
        };
        res.push(g);
    }
    dst.set_outputs(res);
    let mut keep = args.clone();
    if seed == Seed::Input {
        keep.push(s);
    }
    verified(prune(&dst, &keep, "a tangent")?)
}

/// Drop the first output of a graph (and what only it needed).
fn drop_first_output(g: Graph) -> Result<Graph, AdError> {
    let mut g = g;
    let outs = g.outputs()[1..].to_vec();
    g.set_outputs(outs);
    let keep: Vec<NodeId> = g.inputs().to_vec();
    prune(&g, &keep, "an")
}

/// `jax.grad`: a graph with `f`'s inputs and params whose outputs are `∂loss/∂w` for each
/// `w` in `wrt` (inputs or params of `f`, float), `loss` being `f`'s first output, which must
/// be a scalar. Node ids of the result differ from `f`'s; find sources by name
/// (`input_by_name`, `param_by_name`) to transform it again.
///
/// Errors: `wrt` not a float input or param, a non-scalar or non-float loss, an op without a
/// rule ([`AdError::NoRule`] naming it), an invalid `f`.
pub fn try_grad(f: &Graph, wrt: &[NodeId]) -> Result<Graph, AdError> {
    drop_first_output(vjp_graph(f, wrt, Seed::One)?)
}

/// [`try_grad`] that panics with the error's message (the spec's convenience form).
pub fn grad(f: &Graph, wrt: &[NodeId]) -> Graph {
    try_grad(f, wrt).unwrap_or_else(|e| panic!("grad failed: {e}"))
}

/// `jax.value_and_grad`: outputs `[loss, ∂loss/∂w…]` (scalar loss, seeded with 1).
pub fn value_and_grad(f: &Graph, wrt: &[NodeId]) -> Result<Graph, AdError> {
    vjp_graph(f, wrt, Seed::One)
}

/// The spec's `grad_with_loss`: outputs `[loss, ∂loss/∂w…]`, with an extra input named
/// `d_output` (the loss's type; feed 1 for the plain gradient) that seeds the loss cotangent,
/// so a non-scalar first output gets its vector-Jacobian product (`jax.vjp`). Errors as
/// [`try_grad`], except that the loss may have any float type.
pub fn try_grad_with_loss(f: &Graph, wrt: &[NodeId]) -> Result<Graph, AdError> {
    vjp_graph(f, wrt, Seed::Input)
}

/// [`try_grad_with_loss`] that panics with the error's message (the spec's convenience form).
pub fn grad_with_loss(f: &Graph, wrt: &[NodeId]) -> Graph {
    try_grad_with_loss(f, wrt).unwrap_or_else(|e| panic!("grad_with_loss failed: {e}"))
}

/// `jax.jvp`: `f`'s inputs and params plus one input `tangent_<name>` (same type) per source
/// in `wrt`; outputs `f`'s outputs followed by one tangent per output (zeros for outputs that
/// do not depend on `wrt`, and for non-float ones). Errors as [`try_grad`].
pub fn jvp(f: &Graph, wrt: &[NodeId]) -> Result<Graph, AdError> {
    rlx_ir::verify(f)?;
    let names = wrt_names(f, wrt)?;
    let srcs = sources(f);
    let mask: Vec<bool> = srcs.iter().map(|&s| names.iter().any(|n| f.source_name(s) == Some(n.as_str()))).collect();
    let force = vec![true; f.outputs().len()];
    let (g, _) = jvp::jvp_graph(f, &mask, &force, false)?;
    verified(g)
}

/// Hessian-vector product (forward-over-reverse, `jax.jvp(jax.grad(f))`): `f`'s inputs and
/// params plus `tangent_<name>` per source in `wrt` (the vector `v`); outputs `H·v`, one per
/// `wrt`, with `H` the Hessian of the scalar first output with respect to `wrt`.
pub fn hvp(f: &Graph, wrt: &[NodeId]) -> Result<Graph, AdError> {
    let names = wrt_names(f, wrt)?;
    let g = try_grad(f, wrt)?;
    let w2: Vec<NodeId> = names
        .iter()
        .map(|n| g.input_by_name(n).or_else(|| g.param_by_name(n)).expect("grad keeps every source"))
        .collect();
    let mut j = jvp(&g, &w2)?;
    let n = wrt.len();
    let outs = j.outputs()[n..2 * n].to_vec();
    j.set_outputs(outs);
    let keep = j.inputs().to_vec();
    verified(prune(&j, &keep, "an")?)
}

/// `jax.vmap` over a graph: source `k` (the inputs, then the params, in declaration order)
/// gains a batch dim of size `size` at `in_axes[k]` (`None` or a missing entry: not batched;
/// any axis `0..=rank`); output `j` has its batch dim at `out_axes[j]` (`None`: the output
/// must not depend on a batched input; a missing entry means 0). Errors: axes out of range,
/// a batched output with `None`, an op without a batching rule, and ops that need a static
/// `size` given a symbolic one.
pub fn vmap(
    f: &Graph,
    in_axes: &[Option<usize>],
    out_axes: &[Option<usize>],
    size: impl Into<Dim>,
) -> Result<Graph, AdError> {
    rlx_ir::verify(f)?;
    // Sources in node order: inputs and params interleave; map the documented order onto it.
    let srcs = sources(f);
    let declared: Vec<NodeId> = f.inputs().iter().chain(f.params()).copied().collect();
    let in_dims: Vec<Option<usize>> = srcs
        .iter()
        .map(|s| declared.iter().position(|d| d == s).and_then(|k| in_axes.get(k).copied().flatten()))
        .collect();
    let out_dims: Vec<Option<usize>> =
        (0..f.outputs().len()).map(|j| if j < out_axes.len() { out_axes[j] } else { Some(0) }).collect();
    verified(vmap::vmap_graph(f, &in_dims, &out_dims, &size.into(), false)?)
}
