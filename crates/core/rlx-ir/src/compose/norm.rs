//! Normalization composites: `layer_norm`, `rms_norm`, `batch_norm` (inference).
//!
//! Semantics:
//! - `layer_norm` is PyTorch `F.layer_norm(x, normalized_shape=x.shape[axis:], weight,
//!   bias, eps)`: mean and *biased* variance over dims `axis..rank`, `(x - mean) /
//!   sqrt(var + eps) · gamma + beta`, gamma/beta shaped `x.shape[axis:]`;
//! - `rms_norm` is PyTorch `F.rms_norm` / Llama's `RMSNorm`: `x · rsqrt(mean(x²) + eps) ·
//!   gamma` over dims `axis..rank` (no mean subtraction, no bias);
//! - `batch_norm` is PyTorch `F.batch_norm(x, running_mean, running_var, weight, bias,
//!   training=False, eps)` (ONNX `BatchNormalization` inference): channel axis 1, statistics
//!   `[C]` given, `(x - mean) · rsqrt(var + eps) · gamma + beta`.
//!
//! The reduced dims must be static (the mean divides by their product).

use super::{attrs, need_float};
use crate::{Attr, Dim, Graph, NodeId, Shape, normalize_axis};

impl Graph {
    /// Check `x` and an optional per-feature parameter for layer/rms norm; returns the
    /// normalized axis.
    fn norm_args(&mut self, name: &str, x: NodeId, params: &[(&str, NodeId)], axis: i64) -> Option<usize> {
        let mut ids = vec![x];
        ids.extend(params.iter().map(|p| p.1));
        let t = self.compose_types(name, &ids)?;
        let fail = |g: &mut Graph, m: String| {
            g.compose_error(name, m);
            None
        };
        if let Err(m) = need_float(name, "operand", &t[0]) {
            return fail(self, m);
        }
        let Some(ax) = normalize_axis(axis, t[0].rank()) else {
            return fail(self, format!("axis {axis} is out of range for {}", t[0]));
        };
        let want = Shape::from_dims(&t[0].dims[ax..], t[0].dtype);
        for ((pname, _), s) in params.iter().zip(&t[1..]) {
            if *s != want {
                return fail(self, format!("{pname} is {s} but x {} normalized from axis {ax} needs {want}", t[0]));
            }
        }
        Some(ax)
    }

    /// PyTorch `F.layer_norm(x, x.shape[axis:], gamma, beta, epsilon)`: normalize over dims
    /// `axis..rank` (negative `axis` counts from the end) with the biased variance, then scale
    /// and shift. Composite `"layer_norm"`, attrs `{"axis": Int (first normalized axis,
    /// non-negative), "epsilon": Float}`; operands `[x]`, `[x, gamma]` or `[x, gamma, beta]`
    /// (a `beta` without `gamma` gets a `gamma` of ones). Shape and dtype of `x` (float).
    /// Errors: a non-float `x`, a bad axis, gamma/beta not of type `x.dims[axis..]`.
    pub fn layer_norm(
        &mut self,
        x: NodeId,
        gamma: Option<NodeId>,
        beta: Option<NodeId>,
        axis: i64,
        epsilon: f64,
    ) -> NodeId {
        let mut params = vec![];
        if let Some(g) = gamma {
            params.push(("gamma", g));
        }
        if let Some(b) = beta {
            params.push(("beta", b));
        }
        let Some(ax) = self.norm_args("layer_norm", x, &params, axis) else { return self.placeholder() };
        let gamma = match (gamma, beta) {
            (None, Some(b)) => {
                let one = self.scalar_like(1.0, x);
                let dims = self.shape(b).dims.clone();
                Some(self.broadcast_to(one, dims))
            }
            _ => gamma,
        };
        let ops: Vec<NodeId> = [Some(x), gamma, beta].into_iter().flatten().collect();
        let a = attrs([("axis", Attr::Int(ax as i64)), ("epsilon", Attr::Float(epsilon))]);
        self.composite_with("layer_norm", a, &ops, |g, a| {
            let rank = g.shape(a[0]).rank();
            let axes: Vec<i64> = (ax as i64..rank as i64).collect();
            let mean = g.mean(a[0], &axes, true);
            let d = g.sub(a[0], mean);
            let d2 = g.mul(d, d);
            let var = g.mean(d2, &axes, true);
            let eps = g.scalar_like(epsilon, a[0]);
            let ve = g.add(var, eps);
            let r = g.rsqrt(ve);
            let mut y = g.mul(d, r);
            if a.len() > 1 {
                y = g.mul(y, a[1]);
            }
            if a.len() > 2 {
                y = g.add(y, a[2]);
            }
            vec![y]
        })[0]
    }

    /// PyTorch `F.rms_norm(x, x.shape[axis:], gamma, epsilon)`: `x · rsqrt(mean(x², dims
    /// axis..rank) + epsilon) · gamma`. Composite `"rms_norm"`, attrs `{"axis": Int,
    /// "epsilon": Float}`; operands `[x]` or `[x, gamma]`. Shape and dtype of `x` (float).
    /// Errors as [`Graph::layer_norm`].
    pub fn rms_norm(&mut self, x: NodeId, gamma: Option<NodeId>, axis: i64, epsilon: f64) -> NodeId {
        let params: Vec<(&str, NodeId)> = gamma.map(|g| ("gamma", g)).into_iter().collect();
        let Some(ax) = self.norm_args("rms_norm", x, &params, axis) else { return self.placeholder() };
        let ops: Vec<NodeId> = [Some(x), gamma].into_iter().flatten().collect();
        let a = attrs([("axis", Attr::Int(ax as i64)), ("epsilon", Attr::Float(epsilon))]);
        self.composite_with("rms_norm", a, &ops, |g, a| {
            let rank = g.shape(a[0]).rank();
            let axes: Vec<i64> = (ax as i64..rank as i64).collect();
            let x2 = g.mul(a[0], a[0]);
            let ms = g.mean(x2, &axes, true);
            let eps = g.scalar_like(epsilon, a[0]);
            let s = g.add(ms, eps);
            let r = g.rsqrt(s);
            let mut y = g.mul(a[0], r);
            if a.len() > 1 {
                y = g.mul(y, a[1]);
            }
            vec![y]
        })[0]
    }

    /// PyTorch `F.batch_norm(x, mean, var, gamma, beta, training=False, eps=epsilon)`
    /// (inference): `x` `[N, C, *]` (rank ≥ 2), `mean`, `var`, `gamma`, `beta` `[C]`, all of
    /// `x`'s float dtype. `(x - mean) · rsqrt(var + epsilon) · gamma + beta` with the `[C]`
    /// operands aligned to axis 1. Composite `"batch_norm"`, attrs `{"epsilon": Float}`,
    /// operands `[x, mean, var, gamma, beta]`. Shape and dtype of `x`.
    /// Errors: rank < 2, a non-float `x`, a statistic not of type `[C]`.
    pub fn batch_norm(
        &mut self,
        x: NodeId,
        mean: NodeId,
        var: NodeId,
        gamma: NodeId,
        beta: NodeId,
        epsilon: f64,
    ) -> NodeId {
        const NAME: &str = "batch_norm";
        let Some(t) = self.compose_types(NAME, &[x, mean, var, gamma, beta]) else { return self.placeholder() };
        if let Err(m) = need_float(NAME, "operand", &t[0]) {
            return self.compose_fail(NAME, m);
        }
        if t[0].rank() < 2 {
            return self.compose_fail(NAME, format!("x must be [N, C, ...], got {}", t[0]));
        }
        let c = t[0].dims[1].clone();
        let want = Shape::from_dims(std::slice::from_ref(&c), t[0].dtype);
        for (name, s) in ["mean", "var", "gamma", "beta"].iter().zip(&t[1..]) {
            if *s != want {
                return self.compose_fail(NAME, format!("{name} is {s} but x {} needs {want}", t[0]));
            }
        }
        let rank = t[0].rank();
        let a = attrs([("epsilon", Attr::Float(epsilon))]);
        self.composite_with(NAME, a, &[x, mean, var, gamma, beta], |g, a| {
            // [C] -> [C, 1, …, 1] so it broadcasts against [N, C, *spatial].
            let mut col = vec![c.clone()];
            col.extend(std::iter::repeat_n(Dim::Static(1), rank - 2));
            let mut p: Vec<NodeId> = a[1..].iter().map(|&v| g.reshape(v, col.clone())).collect();
            let eps = g.scalar_like(epsilon, a[0]);
            let ve = g.add(p[1], eps);
            let r = g.rsqrt(ve);
            p[1] = g.mul(r, p[2]);
            let d = g.sub(a[0], p[0]);
            let y = g.mul(d, p[1]);
            vec![g.add(y, p[3])]
        })[0]
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use crate::{DType, Graph, Shape, Tensor};

    fn ln_ref(x: &[f64], rows: usize, gamma: &[f64], beta: &[f64], eps: f64) -> Vec<f64> {
        let n = x.len() / rows;
        let mut out = vec![];
        for r in x.chunks(n) {
            let m = r.iter().sum::<f64>() / n as f64;
            let v = r.iter().map(|a| (a - m) * (a - m)).sum::<f64>() / n as f64;
            for (j, a) in r.iter().enumerate() {
                out.push((a - m) / (v + eps).sqrt() * gamma[j] + beta[j]);
            }
        }
        out
    }

    #[test]
    fn layer_norm_over_last_two_dims() {
        let xv = wavy(24, 0.1);
        let gv = wavy(12, 0.7);
        let bv = wavy(12, 1.3);
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[2, 3, 4], DType::F64));
        let ga = g.input("g", Shape::new(&[3, 4], DType::F64));
        let be = g.input("b", Shape::new(&[3, 4], DType::F64));
        let y = g.layer_norm(x, Some(ga), Some(be), -2, 1e-5);
        let y0 = g.layer_norm(x, None, None, 2, 1e-5);
        let yb = g.layer_norm(x, None, Some(be), 1, 1e-5);
        g.set_outputs(vec![y, y0, yb]);
        let t = |v: &[f64], d: &[usize]| Tensor::from_vec(v.to_vec(), d).unwrap();
        let out = run_both(&g, &feeds(&[("x", t(&xv, &[2, 3, 4])), ("g", t(&gv, &[3, 4])), ("b", t(&bv, &[3, 4]))]));
        close(&out[0], &ln_ref(&xv, 2, &gv, &bv, 1e-5), 1e-12);
        close(&out[1], &ln_ref(&xv, 6, &[1.0; 4], &[0.0; 4], 1e-5), 1e-12);
        close(&out[2], &ln_ref(&xv, 2, &[1.0; 12], &bv, 1e-5), 1e-12);
    }

    #[test]
    fn layer_norm_errors_name_shapes() {
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[2, 4], DType::F32));
        let ga = g.input("g", Shape::new(&[3], DType::F32));
        g.layer_norm(x, Some(ga), None, -1, 1e-5);
        let e = g.error().unwrap().to_string();
        assert!(e.contains("layer_norm") && e.contains("gamma is f32[3]") && e.contains("needs f32[4]"), "{e}");
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[2, 4], DType::F32));
        g.rms_norm(x, None, 2, 1e-5);
        assert!(g.error().unwrap().to_string().contains("axis 2 is out of range for f32[2,4]"));
    }

    #[test]
    fn rms_norm_matches_hand_loop() {
        let xv = wavy(8, 0.4);
        let gv = wavy(4, 2.0);
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[2, 4], DType::F32));
        let ga = g.input("g", Shape::new(&[4], DType::F32));
        let y = g.rms_norm(x, Some(ga), -1, 1e-6);
        g.set_outputs(vec![y]);
        let f32v = |v: &[f64]| v.iter().map(|&a| a as f32).collect::<Vec<_>>();
        let out = run_both(&g, &feeds(&[("x", f32t(&f32v(&xv), &[2, 4])), ("g", f32t(&f32v(&gv), &[4]))]));
        let mut want = vec![];
        for r in xv.chunks(4) {
            let ms = r.iter().map(|a| a * a).sum::<f64>() / 4.0;
            want.extend(r.iter().zip(&gv).map(|(a, g)| a / (ms + 1e-6).sqrt() * g));
        }
        close(&out[0], &want, 1e-5);
    }

    #[test]
    fn batch_norm_inference() {
        let xv = wavy(2 * 3 * 2, 0.2);
        let (m, v, ga, be) = ([0.1, -0.2, 0.3], [1.0, 0.5, 2.0], [1.5, 1.0, -1.0], [0.0, 0.25, 1.0]);
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[2, 3, 2], DType::F64));
        let ids: Vec<_> =
            ["m", "v", "g", "b"].iter().map(|n| g.input(n, Shape::new(&[3], DType::F64))).collect::<Vec<_>>();
        let y = g.batch_norm(x, ids[0], ids[1], ids[2], ids[3], 1e-5);
        g.set_outputs(vec![y]);
        let t = |v: &[f64], d: &[usize]| Tensor::from_vec(v.to_vec(), d).unwrap();
        let out = run_both(
            &g,
            &feeds(&[
                ("x", t(&xv, &[2, 3, 2])),
                ("m", t(&m, &[3])),
                ("v", t(&v, &[3])),
                ("g", t(&ga, &[3])),
                ("b", t(&be, &[3])),
            ]),
        );
        let want: Vec<f64> = (0..12)
            .map(|i| {
                let c = (i / 2) % 3;
                (xv[i] - m[c]) / (v[c] + 1e-5f64).sqrt() * ga[c] + be[c]
            })
            .collect();
        close(&out[0], &want, 1e-12);
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[2, 3], DType::F64));
        let s = g.input("s", Shape::new(&[2], DType::F64));
        g.batch_norm(x, s, s, s, s, 1e-5);
        assert!(g.error().unwrap().to_string().contains("mean is f64[2] but x f64[2,3] needs f64[3]"));
    }
}
