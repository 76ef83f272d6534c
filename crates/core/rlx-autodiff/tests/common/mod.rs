//! Shared helpers of the autodiff tests: evaluation, deterministic random tensors, finite
//! differences, and the gradient checks (`check_grads`) the op table drives.
#![allow(dead_code)]

use rlx_autodiff::{jvp, try_grad_with_loss};
use rlx_ir::interp::evaluate;
use rlx_ir::{DType, Graph, NodeId, Tensor};
use std::collections::HashMap;

/// Named tolerance levels (absolute + relative).
#[derive(Clone, Copy, Debug)]
pub enum Tol {
    /// Same computation, different order of rounding.
    Exact,
    /// f64 analytic vs f64 analytic through different graphs.
    Close,
    /// Analytic vs central finite differences in f64.
    FiniteDiff,
    /// f32 results vs a reference.
    F32,
}

impl Tol {
    /// The bound.
    pub fn eps(self) -> f64 {
        match self {
            Tol::Exact => 1e-12,
            Tol::Close => 1e-9,
            Tol::FiniteDiff => 2e-5,
            Tol::F32 => 2e-4,
        }
    }
}

/// `|a - b| <= tol (1 + |b|)` elementwise, NaN matching NaN.
pub fn assert_close(what: &str, got: &[f64], want: &[f64], tol: Tol) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol.eps() * (1.0 + b.abs());
        assert!(ok, "{what}: element {i}: got {a}, want {b} (tol {tol:?})\n got {got:?}\nwant {want:?}");
    }
}

/// A small deterministic generator (splitmix64).
pub struct Rng(pub u64);

impl Rng {
    /// Next value uniform in [0, 1).
    pub fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
    /// `n` values uniform in [lo, hi).
    pub fn vec(&mut self, n: usize, lo: f64, hi: f64) -> Vec<f64> {
        (0..n).map(|_| lo + (hi - lo) * self.uniform()).collect()
    }
    /// A tensor of `shape` / `dtype` with values in [lo, hi).
    pub fn tensor(&mut self, shape: &[usize], dtype: DType, lo: f64, hi: f64) -> Tensor {
        let n = shape.iter().product();
        Tensor::from_f64s(shape, dtype, &self.vec(n, lo, hi)).unwrap()
    }
}

/// Evaluate with named feeds.
pub fn eval(g: &Graph, feeds: &[(&str, Tensor)]) -> Vec<Tensor> {
    let f: HashMap<String, Tensor> = feeds.iter().map(|(k, t)| (k.to_string(), t.clone())).collect();
    evaluate(g, &f).unwrap_or_else(|e| panic!("evaluating {:?}: {e}\n{g}", g.name))
}

/// Flattened values.
pub fn vals(t: &Tensor) -> Vec<f64> {
    t.to_f64_vec()
}

pub fn dot(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn axpy(x: &Tensor, v: &[f64], e: f64) -> Tensor {
    let xs = x.to_f64_vec();
    let y: Vec<f64> = xs.iter().zip(v).map(|(a, b)| a + e * b).collect();
    Tensor::from_f64s(x.shape(), x.dtype(), &y).unwrap()
}

/// The sources of `f` (`names`) that get tangents, with all feeds.
pub struct Point<'a> {
    pub f: &'a Graph,
    pub feeds: Vec<(String, Tensor)>,
    pub wrt: Vec<String>,
}

fn feeds_ref(f: &[(String, Tensor)]) -> Vec<(&str, Tensor)> {
    f.iter().map(|(k, t)| (k.as_str(), t.clone())).collect()
}

fn source(g: &Graph, name: &str) -> NodeId {
    g.input_by_name(name).or_else(|| g.param_by_name(name)).unwrap_or_else(|| panic!("no source {name}"))
}

/// Results of one first-order check: the per-output `c`/`v` pairing values.
pub struct Checked {
    /// The forward-mode graph.
    pub jvp: Graph,
    /// The reverse-mode graph.
    pub vjp: Graph,
}

/// JAX's `check_grads(f, args, order=1, modes=("fwd", "rev"))` plus `check_vjp`, for the float
/// outputs of `p.f`: with a random direction `v` (per `wrt` source) and cotangent `c`:
/// forward `jvp(v)` ≈ central differences, reverse `⟨c, J v⟩` ≈ `⟨vjp(c), v⟩` from FD, and
/// the dot-product test `⟨c, jvp(v)⟩ = ⟨vjp(c), v⟩` exactly (Close).
pub fn check_first_order(p: &Point, rng: &mut Rng, eps: f64, tol: Tol) -> Checked {
    let f = p.f;
    let base = feeds_ref(&p.feeds);
    let outs0 = eval(f, &base);
    let float_outs: Vec<usize> = (0..outs0.len()).filter(|&j| outs0[j].dtype().is_float()).collect();
    let wrt_ids: Vec<NodeId> = p.wrt.iter().map(|n| source(f, n)).collect();
    let v: Vec<Tensor> = p
        .wrt
        .iter()
        .map(|n| {
            let t = &p.feeds.iter().find(|(k, _)| k == n).unwrap().1;
            rng.tensor(t.shape(), t.dtype(), -1.0, 1.0)
        })
        .collect();
    // Forward mode.
    let jg = jvp(f, &wrt_ids).unwrap_or_else(|e| panic!("jvp of {:?}: {e}", f.name));
    let mut jf = base.clone();
    // The tangent inputs are the last inputs of the JVP graph, one per `wrt`, in order.
    let tin = &jg.inputs()[jg.inputs().len() - v.len()..];
    for (&id, t) in tin.iter().zip(&v) {
        jf.push((jg.source_name(id).unwrap(), t.clone()));
    }
    let jo = eval(&jg, &jf);
    let nout = outs0.len();
    // Central differences.
    let shifted = |e: f64| {
        let mut fe = base.clone();
        for (n, t) in p.wrt.iter().zip(&v) {
            let k = fe.iter().position(|(k, _)| k == n).unwrap();
            fe[k].1 = axpy(&fe[k].1, &vals(t), e);
        }
        eval(f, &fe)
    };
    let (plus, minus) = (shifted(eps), shifted(-eps));
    for &j in &float_outs {
        let fd: Vec<f64> = vals(&plus[j]).iter().zip(vals(&minus[j])).map(|(a, b)| (a - b) / (2.0 * eps)).collect();
        assert_close(&format!("{}: jvp of output {j} vs finite differences", f.name), &vals(&jo[nout + j]), &fd, tol);
    }
    // Reverse mode, one float output at a time (the loss is the first output of a graph).
    let mut vg = None;
    for &j in &float_outs {
        let mut fj = f.clone();
        let mut outs = vec![f.outputs()[j]];
        outs.extend(f.outputs().iter().enumerate().filter(|(k, _)| *k != j).map(|(_, o)| *o));
        fj.set_outputs(outs);
        let g = try_grad_with_loss(&fj, &wrt_ids).unwrap_or_else(|e| panic!("grad of {:?}: {e}", f.name));
        let c = rng.tensor(outs0[j].shape(), outs0[j].dtype(), -1.0, 1.0);
        let mut gf = base.clone();
        // The seed is the last input (`d_output`, or a fresh name when `f` already has one).
        let seed = *g.inputs().last().unwrap();
        gf.push((g.source_name(seed).unwrap(), c.clone()));
        let go = eval(&g, &gf);
        let lhs: f64 = (0..v.len()).map(|k| dot(&vals(&go[1 + k]), &vals(&v[k]))).sum();
        let cj = dot(&vals(&c), &vals(&jo[nout + j]));
        let fd: f64 = dot(&vals(&c), &vals(&plus[j])) - dot(&vals(&c), &vals(&minus[j]));
        let fd = fd / (2.0 * eps);
        assert_close(&format!("{}: <vjp(c), v> vs <c, jvp(v)> for output {j}", f.name), &[lhs], &[cj], Tol::Close);
        assert_close(&format!("{}: <vjp(c), v> vs finite differences for output {j}", f.name), &[lhs], &[fd], tol);
        for (k, n) in p.wrt.iter().enumerate() {
            let want = p.feeds.iter().find(|(kk, _)| kk == n).unwrap();
            assert_eq!(go[1 + k].shape(), want.1.shape(), "{}: gradient shape of {n}", f.name);
        }
        vg.get_or_insert(g);
    }
    Checked { jvp: jg, vjp: vg.unwrap_or_else(|| f.clone()) }
}
