//! Ordering family: `sort` (multi-operand, keyed) and `top_k`.
//!
//! Semantics follow `jax.lax`:
//! - `sort(operands, dimension, is_stable, num_keys)`: every operand has the same dims (dtypes
//!   may differ); along `dimension` all operands are permuted together so that the first
//!   `num_keys` operands are in ascending lexicographic order. Floats use NumPy's / JAX's
//!   order: `-inf < ... < -0.0 == +0.0 < ... < inf < NaN`, every NaN equal and last; ints and
//!   bools in their natural order. The reference is always stable (a valid result for
//!   `is_stable = false` too). One result per operand.
//! - `top_k(x, k)` along the last axis: results `[values (x's dtype), indices (i32)]` with the
//!   last dim replaced by `k`; values descending, NaN treated as larger than every number
//!   (`jax.lax.top_k`), equal values in increasing index order.

use super::ad::{AdError, Cx, Tan, all_to_front};
use super::{GatherDims, GatherMode, Op};
use crate::{DType, Dim, Elem, Graph, IrError, NodeId, Shape, Tensor, normalize_axis, with_dtype};
use std::cmp::Ordering;

pub(crate) fn infer(op: &Op, ins: &[&Shape]) -> Result<Vec<Shape>, String> {
    match op {
        Op::Sort { dimension, num_keys, .. } => {
            let x = *ins.first().ok_or("sort needs at least one operand")?;
            if *dimension >= x.rank() {
                return Err(format!("dimension {dimension} is out of range for {x}"));
            }
            if let Some((k, s)) = ins.iter().enumerate().find(|(_, s)| s.dims != x.dims) {
                return Err(format!("operand {k} ({s}) must have the dims of operand 0 ({x})"));
            }
            if *num_keys == 0 || *num_keys > ins.len() {
                return Err(format!("num_keys {num_keys} must be in 1..={}", ins.len()));
            }
            Ok(ins.iter().map(|s| (*s).clone()).collect())
        }
        Op::TopK { k } => {
            super::arity("top_k", ins, 1)?;
            let x = ins[0];
            let Some(last) = x.dims.last() else { return Err(format!("top_k needs rank ≥ 1, got {x}")) };
            if let Dim::Static(n) = last
                && k > n
            {
                return Err(format!("k = {k} exceeds the last dim {n} of {x}"));
            }
            let mut dims = x.dims.clone();
            *dims.last_mut().unwrap() = Dim::Static(*k);
            Ok(vec![Shape { dims: dims.clone(), dtype: x.dtype }, Shape { dims, dtype: DType::I32 }])
        }
        _ => unreachable!("{} is not an ordering op", op.name()),
    }
}

/// One operand's values in a comparable form.
enum Keys {
    F(Vec<f64>),
    I(Vec<i64>),
}

impl Keys {
    fn of(t: &Tensor) -> Keys {
        if t.dtype().is_float() {
            Keys::F(t.to_f64_vec())
        } else {
            let flip = crate::ops::reduce::order_flip(t.dtype(), crate::ops::ReduceOp::Max);
            with_dtype!(t.dtype(), T, Keys::I(t.as_slice::<T>().unwrap().iter().map(|v| v.to_i64() ^ flip).collect()))
        }
    }
    /// Ascending order with every NaN equal and last, `-0.0 == +0.0`.
    fn cmp(&self, a: usize, b: usize) -> Ordering {
        match self {
            Keys::F(v) => nan_last(v[a], v[b]),
            Keys::I(v) => v[a].cmp(&v[b]),
        }
    }
}

fn nan_last(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        _ => a.partial_cmp(&b).unwrap(),
    }
}

/// `(outer, n, inner)`: the dims before, at and after `axis` as a 3-d view.
fn split(dims: &[usize], axis: usize) -> (usize, usize, usize) {
    (dims[..axis].iter().product(), dims[axis], dims[axis + 1..].iter().product())
}

pub(crate) fn eval(op: &Op, ins: &[&Tensor], outs: &mut [Tensor]) -> Result<(), IrError> {
    let err = |msg: String| IrError::Eval { op: op.name(), msg };
    match op {
        Op::Sort { dimension, num_keys, .. } => {
            let dims = ins.first().ok_or_else(|| err("no operands".into()))?.shape().to_vec();
            if outs.len() != ins.len() || *dimension >= dims.len() || *num_keys > ins.len() {
                return Err(err(format!("{} operands, {} results, dims {dims:?}", ins.len(), outs.len())));
            }
            let keys: Vec<Keys> = ins[..*num_keys].iter().map(|t| Keys::of(t)).collect();
            let (outer, n, inner) = split(&dims, *dimension);
            // perm[p] = source flat index of destination flat index p.
            let mut perm = vec![0usize; dims.iter().product()];
            let mut line: Vec<usize> = Vec::with_capacity(n);
            for a in 0..outer {
                for c in 0..inner {
                    let at = |j: usize| (a * n + j) * inner + c;
                    line.clear();
                    line.extend((0..n).map(at));
                    line.sort_by(|&p, &q| {
                        keys.iter().map(|k| k.cmp(p, q)).find(|o| o.is_ne()).unwrap_or(Ordering::Equal)
                    });
                    for (j, &src) in line.iter().enumerate() {
                        perm[at(j)] = src;
                    }
                }
            }
            for (t, o) in ins.iter().zip(outs.iter_mut()) {
                if t.dtype() != o.dtype() || t.shape() != o.shape() {
                    return Err(err(format!("result {o:?} does not match operand type")));
                }
                with_dtype!(t.dtype(), T, {
                    let src = t.as_slice::<T>().unwrap();
                    let dst = o.as_mut_slice::<T>().unwrap();
                    for (d, &p) in dst.iter_mut().zip(&perm) {
                        *d = src[p];
                    }
                });
            }
            Ok(())
        }
        Op::TopK { k } => {
            let x = ins.first().ok_or_else(|| err("no operand".into()))?;
            let dims = x.shape();
            let n = *dims.last().ok_or_else(|| err("rank 0 operand".into()))?;
            if outs.len() != 2 || *k > n || outs[1].dtype() != DType::I32 || outs[0].dtype() != x.dtype() {
                return Err(err(format!("bad result types for k = {k} and dims {dims:?}")));
            }
            let keys = Keys::of(x);
            let rows = x.numel() / n.max(1);
            let (vals, idxs) = outs.split_at_mut(1);
            let oi = idxs[0].as_mut_slice::<i32>().unwrap();
            let mut order: Vec<usize> = Vec::with_capacity(n);
            with_dtype!(x.dtype(), T, {
                let src = x.as_slice::<T>().unwrap();
                let ov = vals[0].as_mut_slice::<T>().unwrap();
                for r in 0..rows {
                    order.clear();
                    order.extend(0..n);
                    // Stable sort, descending: equal values keep increasing index order.
                    order.sort_by(|&p, &q| keys.cmp(r * n + q, r * n + p));
                    for (j, &i) in order[..*k].iter().enumerate() {
                        ov[r * k + j] = src[r * n + i];
                        oi[r * k + j] = i as i32;
                    }
                }
            });
            Ok(())
        }
        _ => unreachable!("{} is not an ordering op", op.name()),
    }
}

/// Builders of the ordering family (tuple ops: results come back as `get_tuple_element`
/// nodes, or the node itself when there is a single result).
impl Graph {
    /// `lax.sort(operands, dimension, is_stable, num_keys)`: sort same-dims operands together
    /// along `dimension` (negative counts from the end), keyed lexicographically on the first
    /// `num_keys`; one result per operand. Bad arguments are recorded and placeholders
    /// returned.
    pub fn sort(&mut self, operands: &[NodeId], dimension: i64, is_stable: bool, num_keys: usize) -> Vec<NodeId> {
        let rank =
            operands.first().and_then(|x| self.nodes.get(x.index())).filter(|n| !n.is_tuple()).map(|n| n.ty().rank());
        let dim = match rank {
            Some(r) => match normalize_axis(dimension, r) {
                Some(d) => d,
                None => {
                    self.record_error(IrError::Shape {
                        node: self.nodes.len(),
                        op: "sort".into(),
                        msg: format!("dimension {dimension} is out of range for rank {r}"),
                    });
                    r // out of range: `infer` rejects it and a placeholder is pushed
                }
            },
            None => 0,
        };
        self.push_multi(Op::Sort { dimension: dim, is_stable, num_keys }, operands, None)
    }

    /// `lax.top_k(x, k)` along the last axis: `(values, indices as i32)`, descending, lower
    /// index first among equal values, NaN largest.
    pub fn top_k(&mut self, x: NodeId, k: usize) -> (NodeId, NodeId) {
        let r = self.push_multi(Op::TopK { k }, &[x], None);
        if r.len() == 2 {
            (r[0], r[1])
        } else {
            // The rule failed (error recorded): both results are the placeholder.
            (r[0], r[0])
        }
    }
}

/// `t[…, idx, …]` along `axis` (`np.take_along_axis`) as a full-index `gather`; `idx` has
/// `t`'s dims except possibly along `axis`. Linear in `t` (its transpose is a scatter-add).
pub fn take_along_axis(g: &mut Graph, t: NodeId, idx: NodeId, axis: usize) -> NodeId {
    take_along_axis_with_mode(g, t, idx, axis, GatherMode::Clip)
}

/// [`take_along_axis`] with the out-of-range behaviour `mode` (`Clip` clamps;
/// [`GatherMode::Checked`] makes an out-of-range index an evaluation error).
pub fn take_along_axis_with_mode(g: &mut Graph, t: NodeId, idx: NodeId, axis: usize, mode: GatherMode) -> NodeId {
    let is = g.type_or_placeholder(idx);
    let rank = is.rank();
    let mut col = is.dims.clone();
    col.push(Dim::Static(1));
    let cols: Vec<NodeId> = (0..rank)
        .map(|d| {
            let v = if d == axis { idx } else { g.iota(Shape::from_dims(&is.dims, is.dtype), d) };
            g.reshape(v, col.clone())
        })
        .collect();
    let full = g.concatenate(&cols, rank as i64);
    let dims = GatherDims {
        offset_dims: vec![],
        collapsed_slice_dims: (0..rank).collect(),
        start_index_map: (0..rank).collect(),
    };
    g.gather(t, full, dims, &vec![1; rank], mode)
}

/// JVP of `sort` / `top_k`: the tangents are permuted like the values (`sort` is re-run with
/// an iota operand to get the permutation; `top_k` returns it).
pub(crate) fn jvp(op: &Op, cx: &mut Cx, x: &[NodeId], y: &[NodeId], t: &[Tan]) -> Result<Vec<Tan>, AdError> {
    if t.iter().all(Option::is_none) {
        return Ok(vec![None; y.len()]);
    }
    match op {
        Op::Sort { dimension, num_keys, .. } => {
            let s = cx.ty(x[0]);
            let iota = cx.g.iota(Shape::from_dims(&s.dims, DType::I32), *dimension);
            let mut ops = x.to_vec();
            ops.push(iota);
            let r =
                cx.g.push_multi(Op::Sort { dimension: *dimension, is_stable: true, num_keys: *num_keys }, &ops, None);
            let perm = *r.last().expect("sort has results");
            Ok(t.iter().map(|t| t.map(|t| take_along_axis(cx.g, t, perm, *dimension))).collect())
        }
        Op::TopK { .. } => {
            let last = cx.ty(x[0]).rank() - 1;
            Ok(vec![t[0].map(|t| take_along_axis(cx.g, t, y[1], last)), None])
        }
        _ => unreachable!(),
    }
}

/// Batching: every operand batched at dim 0, the sorted dim shifted (`top_k` works on the
/// last dim, which the batch dim never is).
pub(crate) fn batch(
    op: &Op,
    cx: &mut Cx,
    x: &[NodeId],
    bd: &[Option<usize>],
    size: &Dim,
) -> Result<Vec<(NodeId, Option<usize>)>, AdError> {
    let ops = all_to_front(cx, x, bd, size);
    let op = match op {
        Op::Sort { dimension, is_stable, num_keys } => {
            Op::Sort { dimension: dimension + 1, is_stable: *is_stable, num_keys: *num_keys }
        }
        other => other.clone(),
    };
    Ok(cx.g.push_multi(op, &ops, None).into_iter().map(|v| (v, Some(0))).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::evaluate_args;

    fn run(g: &mut Graph, outs: Vec<NodeId>, args: &[&Tensor]) -> Vec<Tensor> {
        g.set_outputs(outs);
        g.verify().unwrap();
        evaluate_args(g, args).unwrap()
    }

    #[test]
    fn sort_floats_nan_last_and_carries_payload() {
        let mut g = Graph::new("s");
        let x = g.input("x", Shape::new(&[5], DType::F32));
        let y = g.input("y", Shape::new(&[5], DType::I32));
        let r = g.sort(&[x, y], -1, true, 1);
        let xt = Tensor::from_vec(vec![3.0f32, f32::NAN, -0.0, 0.0, f32::NEG_INFINITY], &[5]).unwrap();
        let yt = Tensor::from_vec(vec![0i32, 1, 2, 3, 4], &[5]).unwrap();
        let o = run(&mut g, r, &[&xt, &yt]);
        let v = o[0].as_slice::<f32>().unwrap();
        assert_eq!(&v[..4], &[f32::NEG_INFINITY, -0.0, 0.0, 3.0]);
        assert!(v[4].is_nan());
        // -0.0 and 0.0 are equal keys: stable order keeps 2 before 3.
        assert_eq!(o[1].as_slice::<i32>().unwrap(), &[4, 2, 3, 0, 1]);
    }

    #[test]
    fn sort_lexicographic_two_keys_along_axis0() {
        let mut g = Graph::new("s");
        let a = g.input("a", Shape::new(&[4, 1], DType::I64));
        let b = g.input("b", Shape::new(&[4, 1], DType::U8));
        let r = g.sort(&[a, b], 0, false, 2);
        let at = Tensor::from_vec(vec![2i64, 1, 2, 1], &[4, 1]).unwrap();
        let bt = Tensor::from_vec(vec![0u8, 9, 255, 3], &[4, 1]).unwrap();
        let o = run(&mut g, r, &[&at, &bt]);
        assert_eq!(o[0].as_slice::<i64>().unwrap(), &[1, 1, 2, 2]);
        assert_eq!(o[1].as_slice::<u8>().unwrap(), &[3, 9, 0, 255]);
    }

    #[test]
    fn sort_single_operand_rows() {
        let mut g = Graph::new("s");
        let x = g.input("x", Shape::new(&[2, 3], DType::BF16));
        let r = g.sort(&[x], 1, true, 1);
        assert_eq!(r.len(), 1);
        let xt = Tensor::from_f64s(&[2, 3], DType::BF16, &[3.0, 1.0, 2.0, -1.0, -5.0, 0.5]).unwrap();
        let o = run(&mut g, r, &[&xt]);
        assert_eq!(o[0].to_f64_vec(), vec![1.0, 2.0, 3.0, -5.0, -1.0, 0.5]);
    }

    #[test]
    fn sort_errors() {
        let mut g = Graph::new("s");
        let x = g.input("x", Shape::new(&[2, 3], DType::F32));
        let y = g.input("y", Shape::new(&[3, 2], DType::F32));
        g.sort(&[x, y], 0, true, 1);
        let e = g.error().unwrap().to_string();
        assert!(e.contains("f32[3,2]") && e.contains("f32[2,3]"), "{e}");
        let mut g = Graph::new("s");
        let x = g.input("x", Shape::new(&[2, 3], DType::F32));
        g.sort(&[x], 2, true, 1);
        assert!(g.error().unwrap().to_string().contains("dimension 2"));
        let mut g = Graph::new("s");
        let x = g.input("x", Shape::new(&[2], DType::F32));
        g.sort(&[x], 0, true, 2);
        assert!(g.error().unwrap().to_string().contains("num_keys"));
        let mut g = Graph::new("s");
        g.sort(&[], 0, true, 1);
        assert!(g.error().is_some());
    }

    #[test]
    fn top_k_descending_ties_and_nan() {
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[2, 4], DType::F64));
        let (v, i) = g.top_k(x, 3);
        assert_eq!(g.shape(v), &Shape::new(&[2, 3], DType::F64));
        assert_eq!(g.shape(i), &Shape::new(&[2, 3], DType::I32));
        let xt = Tensor::from_vec(vec![1.0, 5.0, 1.0, 5.0, 2.0, f64::NAN, 7.0, -1.0], &[2, 4]).unwrap();
        let o = run(&mut g, vec![v, i], &[&xt]);
        let vals = o[0].as_slice::<f64>().unwrap();
        assert_eq!(&vals[..3], &[5.0, 5.0, 1.0]);
        assert!(vals[3].is_nan());
        assert_eq!(&vals[4..], &[7.0, 2.0]);
        assert_eq!(o[1].as_slice::<i32>().unwrap(), &[1, 3, 0, 1, 2, 0]);
    }

    #[test]
    fn top_k_ints_and_k_zero() {
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[5], DType::I8));
        let (v, i) = g.top_k(x, 2);
        let (v0, _) = g.top_k(x, 0);
        let xt = Tensor::from_vec(vec![-3i8, 100, 7, 100, -128], &[5]).unwrap();
        let o = run(&mut g, vec![v, i, v0], &[&xt]);
        assert_eq!(o[0].as_slice::<i8>().unwrap(), &[100, 100]);
        assert_eq!(o[1].as_slice::<i32>().unwrap(), &[1, 3]);
        assert_eq!(o[2].shape(), &[0]);
    }

    #[test]
    fn top_k_errors() {
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(&[2, 3], DType::F32));
        g.top_k(x, 4);
        let e = g.error().unwrap().to_string();
        assert!(e.contains("k = 4") && e.contains("f32[2,3]"), "{e}");
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::scalar(DType::F32));
        g.top_k(x, 1);
        assert!(g.error().unwrap().to_string().contains("rank"));
    }

    #[test]
    fn top_k_symbolic_batch() {
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::from_dims(&[Dim::dynamic(), Dim::Static(4)], DType::F32));
        let (v, _) = g.top_k(x, 2);
        assert_eq!(g.shape(v).dims, vec![Dim::dynamic(), Dim::Static(2)]);
    }
}
