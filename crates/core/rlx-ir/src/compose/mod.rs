//! Composites: builder functions that emit primitives wrapped in a named region
//! ([`crate::ops::Composite`]) with attributes. Names follow ONNX / PyTorch.
//!
//! Each composite is built with [`Graph::composite_with`]: the decomposition is a sub-graph
//! whose inputs are the composite's operands (named `arg0, arg1, …`), so a backend with a
//! native kernel for the name reads the operands and the attributes, and every other backend
//! (and autodiff) inlines the body ([`crate::inline_composites`]). Attributes are exactly those
//! documented on each builder (axes stored non-negative) because native kernels read them.
//!
//! Arguments a composite can check itself (axes, ranks, dtypes, parameter shapes) are checked
//! before the body is built, and a violation is recorded on the graph naming the composite and
//! the shapes; a placeholder `f32[]` node is returned then (see [`Graph::error`]).
//!
//! - [`activation`]: `relu`, `gelu`, `silu`, `softmax`, `log_softmax`, and the spec's
//!   [`Graph::activation`] with [`Activation`];
//! - [`norm`]: `layer_norm`, `rms_norm`, `batch_norm`;
//! - [`nn`]: `linear`, `embedding`, `conv2d`, `max_pool2d`, `avg_pool2d`, `cross_entropy`;
//! - [`attention`]: `rope`, `scaled_dot_product_attention` with [`MaskKind`];
//! - [`quant`]: `dequant_matmul` (packed GGUF weights).

pub mod activation;
pub mod attention;
pub mod nn;
pub mod norm;
pub mod quant;
pub mod vjp;

pub use activation::Activation;
pub use attention::{AttentionLayout, MaskKind, RopeLayout, RopeStyle};

use crate::{Attr, Attrs, DType, Graph, IrError, Node, NodeId, Op, Shape, Tensor};

/// Build an [`Attrs`] map from `(name, value)` pairs.
pub(crate) fn attrs<const N: usize>(kv: [(&str, Attr); N]) -> Attrs {
    kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

impl Graph {
    /// The types of `xs`, or `None` after recording an error naming `name` when one does not
    /// exist or is a tuple.
    pub(crate) fn compose_types(&mut self, name: &str, xs: &[NodeId]) -> Option<Vec<Shape>> {
        let mut out = Vec::with_capacity(xs.len());
        for &x in xs {
            match self.nodes.get(x.index()) {
                Some(n) if !n.is_tuple() => out.push(n.ty().clone()),
                Some(_) => {
                    let msg = format!("operand {x} is a tuple; read it through get_tuple_element");
                    self.compose_error(name, msg);
                    return None;
                }
                None => {
                    self.compose_error(name, format!("operand {x} does not exist"));
                    return None;
                }
            }
        }
        Some(out)
    }

    /// Record a composite argument error naming `name`.
    pub(crate) fn compose_error(&mut self, name: &str, msg: String) {
        self.record_error(IrError::Shape { node: self.nodes.len(), op: name.into(), msg });
    }

    /// Record a composite argument error and return an `f32[]` placeholder node.
    pub(crate) fn compose_fail(&mut self, name: &str, msg: String) -> NodeId {
        self.compose_error(name, msg);
        self.placeholder()
    }

    /// An `f32[]` constant that keeps the graph buildable after an error.
    pub(crate) fn placeholder(&mut self) -> NodeId {
        self.push_node(Node {
            op: Op::Constant(Tensor::scalar(0f32).into()),
            inputs: vec![],
            outputs: vec![Shape::scalar(DType::F32)],
        })
    }

    /// Check `id`'s type against a declared one (as [`Graph::push_declared`]): a difference is
    /// recorded as [`IrError::DeclaredShape`]; when building `id` (from node index `start` on)
    /// already failed, a node made here is given the declared type so later builders see it.
    pub(crate) fn check_declared(&mut self, id: NodeId, start: usize, had_error: bool, declared: &Shape) -> NodeId {
        if !had_error && self.error.is_some() {
            if id.index() >= start && id.index() < self.nodes.len() && !self.nodes[id.index()].is_tuple() {
                self.nodes[id.index()].outputs = vec![declared.clone()];
            }
            return id;
        }
        let inferred = self.type_or_placeholder(id);
        if &inferred != declared {
            let op = self.nodes.get(id.index()).map(|n| n.op.name()).unwrap_or_default();
            self.record_error(IrError::DeclaredShape { node: id.index(), op, declared: declared.clone(), inferred });
        }
        id
    }
}

/// `Err` unless `s` is a float type.
pub(crate) fn need_float(name: &str, what: &str, s: &Shape) -> Result<(), String> {
    if s.dtype.is_float() { Ok(()) } else { Err(format!("{name} needs a float {what}, got {s}")) }
}

/// Shared helpers of the composite tests.
#[cfg(test)]
pub(crate) mod testing {
    use crate::interp::evaluate;
    use crate::{Graph, Op, Tensor, inline_composites, verify};
    use std::collections::HashMap;

    /// Named feeds.
    pub fn feeds(v: &[(&str, Tensor)]) -> HashMap<String, Tensor> {
        v.iter().map(|(k, t)| (k.to_string(), t.clone())).collect()
    }

    /// Verify `g`, evaluate it with composites kept and inlined, check both agree exactly
    /// and that inlining removed every composite; return the values.
    pub fn run_both(g: &Graph, f: &HashMap<String, Tensor>) -> Vec<Tensor> {
        verify(g).unwrap();
        let kept = evaluate(g, f).unwrap();
        let inl = inline_composites(g, &|_| false);
        assert!(inl.nodes().iter().all(|n| !matches!(n.op, Op::Composite(_))));
        verify(&inl).unwrap();
        let flat = evaluate(&inl, f).unwrap();
        assert_eq!(kept.len(), flat.len());
        for (a, b) in kept.iter().zip(&flat) {
            assert_eq!(a.to_le_bytes(), b.to_le_bytes(), "composite and inlined graph differ");
        }
        kept
    }

    /// Assert `got` is within `tol` (absolute + relative) of `want`, NaN matching NaN.
    pub fn close(got: &Tensor, want: &[f64], tol: f64) {
        let g = got.to_f64_vec();
        assert_eq!(g.len(), want.len(), "length: got {g:?} want {want:?}");
        for (i, (a, b)) in g.iter().zip(want).enumerate() {
            let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol * (1.0 + b.abs());
            assert!(ok, "element {i}: got {a}, want {b}\n got {g:?}\nwant {want:?}");
        }
    }

    /// An f32 tensor.
    pub fn f32t(v: &[f32], d: &[usize]) -> Tensor {
        Tensor::from_vec(v.to_vec(), d).unwrap()
    }

    /// A deterministic pseudo-random f64 sequence in (-1, 1).
    pub fn wavy(n: usize, seed: f64) -> Vec<f64> {
        (0..n).map(|i| ((i as f64 + 1.0) * 0.7311 + seed).sin() * 0.9).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use crate::interp::evaluate;
    use crate::{DType, Graph, Shape, Tensor, hir_from_json, hir_to_json};

    /// A small transformer-ish block survives JSON and evaluates to the same values, with the
    /// composites kept and inlined.
    #[test]
    fn composite_graph_round_trips_through_json() {
        let mut g = Graph::new("block");
        let x = g.input("x", Shape::new(&[1, 2, 3, 4], DType::F32));
        let ga = g.param("ln", Shape::new(&[4], DType::F32));
        let h = g.rms_norm(x, Some(ga), -1, 1e-6);
        let a = g.scaled_dot_product_attention(h, h, h, super::MaskKind::Causal, None);
        let w = g.param("w", Shape::new(&[5, 4], DType::F32));
        let y = g.linear(a, w, None);
        let y = g.gelu(y, true);
        let y = g.softmax(y, -1);
        g.set_outputs(vec![y]);
        let back = hir_from_json(&hir_to_json(&g).unwrap()).unwrap();
        assert_eq!(back, g);
        let f = feeds(&[
            ("x", Tensor::from_f64s(&[1, 2, 3, 4], DType::F32, &wavy(24, 0.3)).unwrap()),
            ("ln", Tensor::from_f64s(&[4], DType::F32, &wavy(4, 1.0)).unwrap()),
            ("w", Tensor::from_f64s(&[5, 4], DType::F32, &wavy(20, 2.0)).unwrap()),
        ]);
        let a = run_both(&g, &f);
        assert_eq!(a, evaluate(&back, &f).unwrap());
        assert_eq!(a[0].shape(), &[1, 2, 3, 5]);
    }
}
