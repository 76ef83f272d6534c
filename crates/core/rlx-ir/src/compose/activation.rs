//! Activation composites: `gelu`, `silu`, `softmax`, `log_softmax`, plus `relu` (a plain
//! `max`, not a region) and the spec's [`Graph::activation`].
//!
//! Semantics:
//! - `gelu` is PyTorch `F.gelu(x, approximate=…)`: `"none"` is `x/2 · (1 + erf(x/√2))`,
//!   `"tanh"` is `x/2 · (1 + tanh(√(2/π) · (x + 0.044715 x³)))` (= `jax.nn.gelu(x,
//!   approximate=True)`; note JAX's *default* is the tanh form, PyTorch's is erf);
//! - `silu` is `x · logistic(x)` (`F.silu`, `jax.nn.silu`);
//! - `softmax` / `log_softmax` follow `jax.nn.softmax` / `jax.nn.log_softmax`: the max along
//!   the axis (under `stop_gradient`) is subtracted first, so large logits do not overflow, a
//!   `-inf` entry gives 0 (log: `-inf`), and a row that is all `-inf` gives NaN, as JAX and
//!   PyTorch do;
//! - `relu` is `max(x, 0)`, NaN-propagating, for floats and ints (built with `select`, so its
//!   derivative at 0 is 0 as in JAX).

use super::{attrs, need_float};
use crate::{Attr, Attrs, Graph, NodeId, Shape, normalize_axis};
use serde::{Deserialize, Serialize};

/// Activation functions for [`Graph::activation`] (the spec's `rlx_ir::op::Activation`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Activation {
    /// `max(x, 0)`.
    Relu,
    /// Exact (erf) GELU, PyTorch's default.
    Gelu,
    /// Tanh-approximated GELU (`approximate="tanh"`).
    GeluTanh,
    /// `x · sigmoid(x)`.
    Silu,
    /// `1 / (1 + exp(-x))` (`lax.logistic`).
    Sigmoid,
    /// `tanh(x)`.
    Tanh,
    /// `x` unchanged.
    Identity,
}

impl Graph {
    /// `relu(x) = max(x, 0)` for float and int `x`, built as `select(x <= 0, 0, x)` (primitives,
    /// not a composite: there is nothing for a backend to gain from a named region). NaN stays
    /// NaN. Written with `select` so its derivative at 0 is 0, as `jax.nn.relu`'s (a plain
    /// `max` would split the tie and give ½).
    pub fn relu(&mut self, x: NodeId) -> NodeId {
        let zero = self.scalar_like(0.0, x);
        let off = self.compare(crate::ops::CompareOp::Le, x, zero);
        self.select(off, zero, x)
    }

    /// PyTorch `F.gelu(x, approximate="tanh" if approximate else "none")`, composite `"gelu"`
    /// with attrs `{"approximate": Str("none" | "tanh")}`. Shape and dtype of `x` (float).
    /// Errors: a non-float `x`.
    pub fn gelu(&mut self, x: NodeId, approximate: bool) -> NodeId {
        let Some(t) = self.compose_types("gelu", &[x]) else { return self.placeholder() };
        if let Err(m) = need_float("gelu", "operand", &t[0]) {
            return self.compose_fail("gelu", m);
        }
        let mode = if approximate { "tanh" } else { "none" };
        let a = attrs([("approximate", Attr::Str(mode.into()))]);
        self.composite_with("gelu", a, &[x], |g, a| {
            let x = a[0];
            if !approximate {
                let half = g.scalar_like(0.5, x);
                let hx = g.mul(half, x);
                // 0.5·x·erfc(-x/√2): the same function as 0.5·x·(1 + erf(x/√2)) without its
                // cancellation for x < -2 (the erf form loses all digits there in f32).
                let r = g.scalar_like(-std::f64::consts::FRAC_1_SQRT_2, x);
                let xr = g.mul(x, r);
                let e = g.unary(crate::ops::UnaryOp::Erfc, xr);
                return vec![g.mul(hx, e)];
            }
            // ½·(1 + tanh(u)) = logistic(2u): x·logistic(x·(c + c·0.044715·x²)), c = 2√(2/π),
            // is the same function with one transcendental instead of tanh's two branches,
            // without `1 + tanh(u)`'s cancellation for u ≪ 0 (it keeps relative accuracy
            // there), and with the cubic in four ops.
            let c = 2.0 * (2.0 / std::f64::consts::PI).sqrt();
            let (ck, c) = (g.scalar_like(c * 0.044715, x), g.scalar_like(c, x));
            let x2 = g.mul(x, x);
            let a = g.mul(x2, ck);
            let b = g.add(a, c);
            let cs = g.mul(x, b);
            let l = g.logistic(cs);
            vec![g.mul(x, l)]
        })[0]
    }

    /// PyTorch `F.silu(x) = x · sigmoid(x)`, composite `"silu"` with no attrs. Shape and dtype
    /// of `x` (float). Errors: a non-float `x`.
    pub fn silu(&mut self, x: NodeId) -> NodeId {
        let Some(t) = self.compose_types("silu", &[x]) else { return self.placeholder() };
        if let Err(m) = need_float("silu", "operand", &t[0]) {
            return self.compose_fail("silu", m);
        }
        self.composite_with("silu", Attrs::new(), &[x], |g, a| {
            let s = g.logistic(a[0]);
            vec![g.mul(a[0], s)]
        })[0]
    }

    /// Normalize `axis` of a float operand for softmax-like composites; `Err` names the axis.
    fn softmax_axis(&mut self, name: &str, x: NodeId, axis: i64) -> Option<usize> {
        let t = self.compose_types(name, &[x])?;
        if let Err(m) = need_float(name, "operand", &t[0]) {
            self.compose_error(name, m);
            return None;
        }
        let ax = normalize_axis(axis, t[0].rank());
        if ax.is_none() {
            self.compose_error(name, format!("axis {axis} is out of range for {}", t[0]));
        }
        ax
    }

    /// `jax.nn.softmax(x, axis)` / PyTorch `F.softmax(x, dim)`: `exp(x - max) / sum(exp(x -
    /// max))` along `axis` (negative counts from the end). Composite `"softmax"`, attrs
    /// `{"axis": Int}` (non-negative). Shape and dtype of `x` (float).
    /// Errors: a non-float `x`, an axis out of range.
    pub fn softmax(&mut self, x: NodeId, axis: i64) -> NodeId {
        let Some(ax) = self.softmax_axis("softmax", x, axis) else { return self.placeholder() };
        self.composite_with("softmax", attrs([("axis", Attr::Int(ax as i64))]), &[x], |g, a| {
            let m = g.reduce_max(a[0], &[ax as i64], true);
            let m = g.stop_gradient(m);
            let d = g.sub(a[0], m);
            let e = g.exp(d);
            let s = g.sum(e, &[ax as i64], true);
            vec![g.div(e, s)]
        })[0]
    }

    /// `jax.nn.log_softmax(x, axis)` / PyTorch `F.log_softmax(x, dim)`: `(x - max) - log(sum(
    /// exp(x - max)))` along `axis`. Composite `"log_softmax"`, attrs `{"axis": Int}`.
    /// Shape and dtype of `x` (float). Errors as [`Graph::softmax`].
    pub fn log_softmax(&mut self, x: NodeId, axis: i64) -> NodeId {
        let Some(ax) = self.softmax_axis("log_softmax", x, axis) else { return self.placeholder() };
        self.composite_with("log_softmax", attrs([("axis", Attr::Int(ax as i64))]), &[x], |g, a| {
            let m = g.reduce_max(a[0], &[ax as i64], true);
            let m = g.stop_gradient(m);
            let d = g.sub(a[0], m);
            let e = g.exp(d);
            let s = g.sum(e, &[ax as i64], true);
            let l = g.log(s);
            vec![g.sub(d, l)]
        })[0]
    }

    /// The spec's activation builder: apply `act` to `x` and check the result against the
    /// declared `shape` (a difference is recorded as [`crate::IrError::DeclaredShape`]).
    /// `Gelu`/`GeluTanh`/`Silu` are composites; `Relu`, `Sigmoid`, `Tanh` primitives;
    /// `Identity` returns `x` itself.
    pub fn activation(&mut self, act: Activation, x: NodeId, shape: Shape) -> NodeId {
        let (start, had_error) = (self.nodes.len(), self.error.is_some());
        let y = match act {
            Activation::Relu => self.relu(x),
            Activation::Gelu => self.gelu(x, false),
            Activation::GeluTanh => self.gelu(x, true),
            Activation::Silu => self.silu(x),
            Activation::Sigmoid => self.logistic(x),
            Activation::Tanh => self.tanh(x),
            Activation::Identity => x,
        };
        self.check_declared(y, start, had_error, &shape)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::{DType, Dim, Tensor};

    fn unary(t: &Tensor, f: impl FnOnce(&mut Graph, NodeId) -> NodeId) -> Tensor {
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(t.shape(), t.dtype()));
        let y = f(&mut g, x);
        g.set_outputs(vec![y]);
        run_both(&g, &feeds(&[("x", t.clone())])).remove(0)
    }

    #[test]
    fn gelu_both_forms() {
        let xs = [-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 3.0];
        let t = Tensor::from_vec(xs.to_vec(), &[7]).unwrap();
        let exact: Vec<f64> = xs.iter().map(|&x| 0.5 * x * libm::erfc(-x / 2f64.sqrt())).collect();
        close(&unary(&t, |g, x| g.gelu(x, false)), &exact, 1e-15);
        // torch.nn.functional.gelu(torch.tensor([1.0], dtype=float64), approximate="tanh")
        let tanh: Vec<f64> = xs
            .iter()
            .map(|&x: &f64| 0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh()))
            .collect();
        close(&unary(&t, |g, x| g.gelu(x, true)), &tanh, 1e-15);
        assert!((tanh[5] - 0.841_191_990_607_477_2).abs() < 1e-12);
        assert!((exact[5] - 0.841_344_746_068_542_9).abs() < 1e-12);
        // The tanh form's negative tail in f32 keeps its relative accuracy (`1 + tanh(u)`
        // rounds to 0 or one ulp of 1 there; the logistic form does not cancel).
        let xs = [-4.0f32, -5.0, -6.0, -7.0];
        let got = unary(&f32t(&xs, &[4]), |g, x| g.gelu(x, true)).to_f64_vec();
        for (&x, g) in xs.iter().zip(got) {
            let x = x as f64;
            let want = x / (1.0 + (-2.0 * (2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).exp());
            assert!(((g - want) / want).abs() < 1e-5, "gelu_tanh({x}) = {g:e}, want {want:e}");
        }
    }

    #[test]
    fn silu_relu_f32_and_ints() {
        let t = f32t(&[-2.0, 0.0, 1.5], &[3]);
        let want: Vec<f64> = [-2.0f64, 0.0, 1.5].iter().map(|x| x / (1.0 + (-x).exp())).collect();
        close(&unary(&t, |g, x| g.silu(x)), &want, 1e-6);
        close(&unary(&t, |g, x| g.relu(x)), &[0.0, 0.0, 1.5], 0.0);
        let i = Tensor::from_vec(vec![-3i32, 4], &[2]).unwrap();
        assert_eq!(unary(&i, |g, x| g.relu(x)).as_slice::<i32>().unwrap(), &[0, 4]);
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[2], DType::I32));
        g.silu(x);
        assert!(g.error().unwrap().to_string().contains("silu needs a float operand, got i32[2]"));
    }

    #[test]
    fn softmax_rows_and_infinities() {
        let ninf = f32::NEG_INFINITY;
        let t = f32t(&[1.0, 2.0, 3.0, 1000.0, 1000.0, ninf, ninf, ninf, ninf], &[3, 3]);
        let got = unary(&t, |g, x| g.softmax(x, -1));
        let e = [(-2f64).exp(), (-1f64).exp(), 1.0];
        let s: f64 = e.iter().sum();
        let n = f64::NAN;
        close(&got, &[e[0] / s, e[1] / s, e[2] / s, 0.5, 0.5, 0.0, n, n, n], 1e-6);
        let got = unary(&t, |g, x| g.log_softmax(x, 1));
        let ls = s.ln();
        close(&got, &[-2.0 - ls, -1.0 - ls, -ls, -(2f64.ln()), -(2f64.ln()), f64::NEG_INFINITY, n, n, n], 1e-6);
        // Along axis 0 of a column vector every entry is 1.
        let c = f32t(&[5.0, 5.0], &[2, 1]);
        close(&unary(&c, |g, x| g.softmax(x, 1)), &[1.0, 1.0], 0.0);
    }

    #[test]
    fn softmax_size_zero_and_errors() {
        let t = Tensor::zeros(&[0, 3], DType::F64);
        assert_eq!(unary(&t, |g, x| g.softmax(x, 1)).shape(), &[0, 3]);
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[2, 3], DType::F32));
        let y = g.softmax(x, 2);
        assert_eq!(g.shape(y), &Shape::scalar(DType::F32));
        let e = g.error().unwrap().to_string();
        assert!(e.contains("softmax") && e.contains("axis 2 is out of range for f32[2,3]"), "{e}");
    }

    #[test]
    fn softmax_stores_non_negative_axis_and_keeps_symbolic_batch() {
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::from_dims(&[Dim::dynamic(), 4.into()], DType::F32));
        let y = g.softmax(x, -1);
        assert_eq!(g.shape(y).dims, vec![Dim::dynamic(), Dim::Static(4)]);
        match &g.node(y).op {
            crate::Op::Composite(c) => assert_eq!(c.attrs["axis"], Attr::Int(1)),
            other => panic!("{other:?}"),
        }
        g.set_outputs(vec![y]);
        let v = wavy(8, 0.3).iter().map(|&v| v as f32).collect::<Vec<_>>();
        let out = run_both(&g, &feeds(&[("x", f32t(&v, &[2, 4]))]));
        let s: f64 = out[0].to_f64_vec()[..4].iter().sum();
        assert!((s - 1.0).abs() < 1e-6);
    }

    #[test]
    fn activation_checks_declared_shape() {
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[1, 8], DType::F32));
        for act in [
            Activation::Relu,
            Activation::Gelu,
            Activation::GeluTanh,
            Activation::Silu,
            Activation::Sigmoid,
            Activation::Tanh,
            Activation::Identity,
        ] {
            g.activation(act, x, Shape::new(&[1, 8], DType::F32));
        }
        assert!(g.error().is_none());
        let y = g.activation(Activation::Relu, x, Shape::new(&[1, 9], DType::F32));
        assert!(g.error().unwrap().to_string().contains("declared shape f32[1,9]"));
        let _ = y;
    }
}
