//! Helpers shared by the kernel tests: deterministic random tensors, running a graph through
//! `CpuExecutable` and the reference interpreter, and tolerant comparison.
#![allow(dead_code)]

use rlx_cpu::{CpuExecutable, CpuOptions};
use rlx_ir::{DType, Graph, NodeId, Shape, Tensor};
use std::collections::HashMap;

/// Uniform values in `[lo, hi)` from a 64-bit LCG, converted to `dtype`.
pub fn rand_tensor(dims: &[usize], dtype: DType, seed: u64, lo: f64, hi: f64) -> Tensor {
    let n: usize = dims.iter().product();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
    let vals: Vec<f64> = (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect();
    Tensor::from_f64s(dims, dtype, &vals).unwrap()
}

/// Absolute and relative tolerance: `|got - want| <= abs + rel * |want|`.
#[derive(Clone, Copy, Debug)]
pub struct Tol {
    pub abs: f64,
    pub rel: f64,
}

pub const EXACT: Tol = Tol { abs: 0.0, rel: 0.0 };

/// Compare two tensors elementwise (NaN matches NaN, infinities must be equal).
pub fn assert_close(got: &Tensor, want: &Tensor, tol: Tol, what: &str) {
    assert_eq!(got.shape(), want.shape(), "{what}: shape");
    assert_eq!(got.dtype(), want.dtype(), "{what}: dtype");
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        let ok = if b.is_nan() {
            a.is_nan()
        } else if b.is_infinite() || a.is_infinite() {
            a == b
        } else {
            (a - b).abs() <= tol.abs + tol.rel * b.abs()
        };
        assert!(ok, "{what}: element {i} of {:?}: got {a}, want {b} (tol {tol:?})", got.shape());
    }
}

/// Compile `g` (optionally with a thread count), run it on `feeds`, and compare every output
/// with the reference interpreter. Returns the kernel names of the steps. Kernels run with IEEE
/// subnormals (`flush_denormals: false`), as the reference computes: some cases check
/// subnormal results on purpose (`tests/denormals.rs` covers the flushing default).
pub fn check_graph(g: &Graph, feeds: &[(&str, Tensor)], threads: Option<usize>, tol: Tol, what: &str) -> Vec<String> {
    let mut exe = CpuExecutable::compile(g, &CpuOptions { threads, flush_denormals: false, ..Default::default() })
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let map: HashMap<String, Tensor> = feeds.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    let by_id = |id| &map[g.source_name(id).unwrap()];
    let ins: Vec<&Tensor> = g.inputs().iter().map(|&i| by_id(i)).collect();
    let params: Vec<&Tensor> = g.params().iter().map(|&i| by_id(i)).collect();
    let got = exe.run(&ins, &params).unwrap_or_else(|e| panic!("{what}: run: {e}"));
    // Run twice: kernels must not depend on state left by a previous run.
    let again = exe.run(&ins, &params).unwrap();
    let want = rlx_ir::interp::evaluate(g, &map).unwrap_or_else(|e| panic!("{what}: reference: {e}"));
    for (k, (a, b)) in got.iter().zip(&want).enumerate() {
        assert_close(a, b, tol, &format!("{what} output {k}"));
        assert_eq!(a.to_le_bytes(), again[k].to_le_bytes(), "{what}: second run differs");
    }
    exe.steps().into_iter().map(|s| s.kernel.to_string()).collect()
}

/// Machine epsilon of a float dtype.
pub fn eps(d: DType) -> f64 {
    match d {
        DType::F64 => f64::EPSILON,
        DType::F32 => f32::EPSILON as f64,
        DType::F16 => 9.765625e-4,
        DType::BF16 => 7.8125e-3,
        _ => 0.0,
    }
}

/// Per-element bounds on the rounding error of every output of `g`, from a first-order forward
/// error analysis (Higham, *Accuracy and Stability of Numerical Algorithms*, ch. 3–4) run by
/// the reference interpreter itself: a mirror graph in f64 carries, for each value `v` of `g`,
/// the value (`V`) and a bound `E` on `|computed - exact|` for a kernel whose ops have these
/// local errors (`u` = unit roundoff of the node's dtype, `tiny` = its smallest normal, below
/// which relative bounds do not hold):
///
/// - add / sub: `Ea + Eb + u|V|`; mul: `|Vb| Ea + |Va| Eb + Ea Eb + u|V|`; max / min, neg,
///   movement (reshape, broadcast, transpose, slice): the operands' bounds, moved alike.
/// - tanh / logistic / sin / exp: `L Ea + r|V| + tiny` with `L` the Lipschitz constant (1, 1/4,
///   1; `e^{Ea}|V|` for exp) and `r` the kernel's accuracy relative to the exact value: `u`
///   more than what `tests/elementwise.rs` allows against the rounded reference.
/// - sum over `n` terms: `ΣE + γ(n-1) Σ|V| + u|V|`, `γ(k) = k u / (1 - k u)`: the bound for
///   any summation order (each term goes through at most `n - 1` roundings), so a kernel that
///   blocks or splits a row sums within it. This is the term a fixed `abs + rel |want|`
///   misses: with cancellation `Σ|terms|` is much larger than `|sum|`.
/// - compare: 1 where the operands are within their errors of each other (the result may
///   flip), else 0; select: the branches' larger bound, plus `|Vt - Vf|` where the predicate
///   may flip.
///
/// The reference interpreter is such a computation too (each op exact in f64, rounded once, a
/// local error of `u|V|`, no more than the kernel's), so `|got - want| <= 2 E`.
///
/// Errors: an op without a rule here (the caller keeps a plain [`Tol`] for such graphs).
pub fn error_bounds(g: &Graph, feeds: &[(&str, Tensor)]) -> Result<Vec<Tensor>, String> {
    use rlx_ir::Op;
    use rlx_ir::ops::{BinaryOp, ReduceOp, UnaryOp};
    let mut b = Graph::new("error_bounds");
    let f = DType::F64;
    // (value, bound) per node of `g`.
    let mut m: Vec<(NodeId, NodeId)> = Vec::with_capacity(g.nodes().len());
    for n in g.nodes() {
        let ty = n.ty();
        let dims = ty.static_dims().ok_or("symbolic dims")?;
        let u = eps(ty.dtype) / 2.0;
        // Floats are mirrored in f64; bool and integer values keep their dtype (exact).
        let vd = if ty.dtype.is_float() { f } else { ty.dtype };
        let tiny = match ty.dtype {
            DType::F32 => f32::MIN_POSITIVE as f64,
            DType::F64 => f64::MIN_POSITIVE,
            _ => 0.0,
        };
        let ins: Vec<(NodeId, NodeId)> = n.inputs.iter().map(|i| m[i.index()]).collect();
        let zero = |b: &mut Graph| {
            let z = b.scalar(0.0, f);
            b.broadcast_in_dim(z, dims.clone(), &[])
        };
        // `r |V| + tiny`: a local error relative to the result.
        let local = |b: &mut Graph, v: NodeId, r: f64| {
            let a = b.unary(UnaryOp::Abs, v);
            let r = b.scalar(r, f);
            let ra = b.mul(r, a);
            let t = b.scalar(tiny, f);
            b.add(ra, t)
        };
        let scaled = |b: &mut Graph, x: NodeId, s: f64| {
            let s = b.scalar(s, f);
            b.mul(s, x)
        };
        let pair = match &n.op {
            Op::Input { name } | Op::Param { name } => {
                let v = b.input(name, Shape::new(&dims, vd));
                (v, zero(&mut b))
            }
            Op::Constant(t) => (b.constant(t.cast(vd)), zero(&mut b)),
            Op::Unary(op) => {
                let (va, ea) = ins[0];
                let v = b.unary(*op, va);
                let e = match op {
                    UnaryOp::Neg | UnaryOp::Abs => ea,
                    UnaryOp::Tanh | UnaryOp::Sin | UnaryOp::Logistic => {
                        let (lip, r) = match op {
                            UnaryOp::Tanh => (1.0, 5e-7),
                            UnaryOp::Logistic => (0.25, 3e-7),
                            _ => (1.0, 0.0),
                        };
                        let l = local(&mut b, v, r + u);
                        let p = scaled(&mut b, ea, lip);
                        b.add(p, l)
                    }
                    UnaryOp::Exp => {
                        let grow = b.unary(UnaryOp::Exp, ea);
                        let av = b.unary(UnaryOp::Abs, v);
                        let s = b.mul(av, grow);
                        let p = b.mul(s, ea);
                        let l = local(&mut b, v, 3e-7 + u);
                        b.add(p, l)
                    }
                    _ => return Err(format!("no error rule for {}", op.name())),
                };
                (v, e)
            }
            Op::Binary(op) => {
                let ((va, ea), (vb, eb)) = (ins[0], ins[1]);
                let v = b.binary(*op, va, vb);
                let e = match op {
                    BinaryOp::Add | BinaryOp::Sub => {
                        let s = b.add(ea, eb);
                        let l = local(&mut b, v, u);
                        b.add(s, l)
                    }
                    BinaryOp::Mul => {
                        let (aa, ab) = (b.unary(UnaryOp::Abs, va), b.unary(UnaryOp::Abs, vb));
                        let (p, q, r) = (b.mul(ab, ea), b.mul(aa, eb), b.mul(ea, eb));
                        let s = b.add(p, q);
                        let s = b.add(s, r);
                        let l = local(&mut b, v, u);
                        b.add(s, l)
                    }
                    BinaryOp::Max | BinaryOp::Min => b.binary(BinaryOp::Max, ea, eb),
                    _ => return Err(format!("no error rule for {}", op.name())),
                };
                (v, e)
            }
            Op::Compare(op) => {
                let ((va, ea), (vb, eb)) = (ins[0], ins[1]);
                let v = b.compare(*op, va, vb);
                let d = b.sub(va, vb);
                let d = b.unary(UnaryOp::Abs, d);
                let s = b.add(ea, eb);
                let flip = b.compare(rlx_ir::ops::CompareOp::Lt, d, s);
                (v, b.convert(flip, f))
            }
            Op::Select => {
                let ((vp, ep), (vt, et), (vf, ef)) = (ins[0], ins[1], ins[2]);
                let v = b.select(vp, vt, vf);
                let d = b.sub(vt, vf);
                let d = b.unary(UnaryOp::Abs, d);
                let flip = b.mul(ep, d);
                let e = b.binary(BinaryOp::Max, et, ef);
                let e = b.add(e, flip);
                // Broadcast to the result's dims (the branches may be narrower).
                let z = zero(&mut b);
                (v, b.add(e, z))
            }
            Op::Reduce { op, axes } => {
                let (va, ea) = ins[0];
                let v = b.push(n.op.clone(), &[va]);
                let e = match op {
                    ReduceOp::Sum => {
                        let ad = g.shape(n.inputs[0]).static_dims().ok_or("symbolic dims")?;
                        let k = axes.iter().map(|&a| ad[a]).product::<usize>().saturating_sub(1) as f64;
                        let gamma = k * u / (1.0 - k * u);
                        let se = b.push(n.op.clone(), &[ea]);
                        let av = b.unary(UnaryOp::Abs, va);
                        let sa = b.push(n.op.clone(), &[av]);
                        let ga = scaled(&mut b, sa, gamma);
                        let s = b.add(se, ga);
                        let l = local(&mut b, v, u);
                        b.add(s, l)
                    }
                    ReduceOp::Max | ReduceOp::Min => {
                        b.push(Op::Reduce { op: ReduceOp::Max, axes: axes.clone() }, &[ea])
                    }
                    _ => return Err(format!("no error rule for reduce_{op:?}")),
                };
                (v, e)
            }
            Op::Reshape { .. } | Op::BroadcastInDim { .. } | Op::Transpose { .. } | Op::Slice { .. } => {
                let (va, ea) = ins[0];
                (b.push(n.op.clone(), &[va]), b.push(n.op.clone(), &[ea]))
            }
            op => return Err(format!("no error rule for {}", op.name())),
        };
        m.push(pair);
    }
    b.set_outputs(g.outputs().iter().map(|o| m[o.index()].1).collect());
    let map: HashMap<String, Tensor> =
        feeds.iter().map(|(k, v)| (k.to_string(), if v.dtype().is_float() { v.cast(f) } else { v.clone() })).collect();
    rlx_ir::interp::evaluate(&b, &map).map_err(|e| e.to_string())
}

/// [`check_graph`] for a compiled graph whose source is `source`, comparing each output
/// element within `2 E` of the reference, `E` from [`error_bounds`] on `source` (see there why
/// twice). Panics when `source` has an op without an error rule.
pub fn check_graph_bounded(
    source: &Graph,
    compiled: &Graph,
    feeds: &[(&str, Tensor)],
    threads: Option<usize>,
    what: &str,
) -> Vec<String> {
    let bounds = error_bounds(source, feeds).unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut exe =
        CpuExecutable::compile(compiled, &CpuOptions { threads, flush_denormals: false, ..Default::default() })
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    let map: HashMap<String, Tensor> = feeds.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    let by_id = |id| &map[compiled.source_name(id).unwrap()];
    let ins: Vec<&Tensor> = compiled.inputs().iter().map(|&i| by_id(i)).collect();
    let params: Vec<&Tensor> = compiled.params().iter().map(|&i| by_id(i)).collect();
    let got = exe.run(&ins, &params).unwrap_or_else(|e| panic!("{what}: run: {e}"));
    let again = exe.run(&ins, &params).unwrap();
    let want = rlx_ir::interp::evaluate(compiled, &map).unwrap_or_else(|e| panic!("{what}: reference: {e}"));
    for (k, ((a, b), e)) in got.iter().zip(&want).zip(&bounds).enumerate() {
        assert_eq!(a.shape(), b.shape(), "{what} output {k}: shape");
        assert_eq!(a.dtype(), b.dtype(), "{what} output {k}: dtype");
        assert_eq!(a.to_le_bytes(), again[k].to_le_bytes(), "{what}: second run differs");
        let (g, w, e) = (a.to_f64_vec(), b.to_f64_vec(), e.to_f64_vec());
        for (i, ((&x, &y), &e)) in g.iter().zip(&w).zip(&e).enumerate() {
            let ok = if y.is_nan() {
                x.is_nan()
            } else if x.is_infinite() || y.is_infinite() {
                x == y
            } else {
                (x - y).abs() <= 2.0 * e
            };
            assert!(ok, "{what} output {k}: element {i} of {:?}: got {x}, want {y}, error bound 2 x {e}", a.shape());
        }
    }
    exe.steps().into_iter().map(|s| s.kernel.to_string()).collect()
}
