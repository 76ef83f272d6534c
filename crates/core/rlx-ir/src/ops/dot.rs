//! Contraction family: `dot_general` and `conv_general_dilated`.
//!
//! Semantics follow `jax.lax`:
//! - `dot_general`: the result dims are the batch dims (in `lhs_batch` order), then the lhs's
//!   free dims in order, then the rhs's free dims in order. Paired contracting and batch dims
//!   must have equal sizes. Both operands share one dtype (builders promote first); bool is not
//!   accepted. `preferred_element_type` sets the result dtype under `lax`'s rule: integer
//!   inputs may ask for any integer or float type, float inputs only for a float type, and
//!   never for one narrower than the inputs.
//! - `conv_general_dilated` with the layout fixed to ONNX's: lhs `[N, C, *spatial]`, rhs
//!   `[O, C / feature_group_count, *window]`, result `[N, O, *spatial_out]`, one or more
//!   spatial dims. Per spatial dim the result size is
//!   `floor((dilated_in + lo + hi - dilated_window) / stride) + 1` (0 when the window does not
//!   fit), with `dilated_in = (in - 1) * lhs_dilation + 1` and
//!   `dilated_window = (k - 1) * rhs_dilation + 1`; padding may be negative (it crops). Output
//!   channel `o` belongs to group `o / (O / g)` and reads input channels
//!   `group * C/g .. (group + 1) * C/g`. Like `lax`, it is a cross-correlation (the kernel is
//!   not flipped).
//!
//! Reference evaluation uses direct loops; floats accumulate in f64 and round once, integers
//! accumulate in i64 with wrapping (equal to wrapping in the result type).
//!
//! Symbolic dims: batch and free dims may be symbolic; a symbolic dim paired with a static one
//! takes the static size. Convolution needs static channel and window dims; a symbolic
//! spatial dim is only kept where that dim's window is the identity (size 1, stride 1, no
//! padding or dilation).

pub(crate) mod ad;

use super::elementwise::broadcast_dims;
use super::reduce::{bad_argument, for_each_index, operand_type, window_out_size};
use super::{Op, arity};
use crate::shape::strides_of;
use crate::{DType, Dim, Elem, Graph, IrError, NodeId, Shape, Tensor, with_dtype};
use serde::{Deserialize, Serialize};

/// `lax.dot_general` dimension numbers. Output dims: batch, then lhs free, then rhs free.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DotGeneral {
    /// Contracting dims of the lhs.
    pub lhs_contracting: Vec<usize>,
    /// Contracting dims of the rhs (paired with `lhs_contracting`).
    pub rhs_contracting: Vec<usize>,
    /// Batch dims of the lhs.
    pub lhs_batch: Vec<usize>,
    /// Batch dims of the rhs (paired with `lhs_batch`).
    pub rhs_batch: Vec<usize>,
    /// Result dtype (`preferred_element_type`); `None` = operand dtype.
    pub preferred_element_type: Option<DType>,
}

impl DotGeneral {
    /// Plain contraction of `lhs_contracting` with `rhs_contracting`, no batch dims, result in
    /// the operand dtype.
    pub fn contract(lhs_contracting: &[usize], rhs_contracting: &[usize]) -> DotGeneral {
        DotGeneral {
            lhs_contracting: lhs_contracting.to_vec(),
            rhs_contracting: rhs_contracting.to_vec(),
            lhs_batch: vec![],
            rhs_batch: vec![],
            preferred_element_type: None,
        }
    }
}

/// `lax.conv_general_dilated` with layout fixed to NC… / OI… (ONNX's): lhs `[N, C, *spatial]`,
/// rhs `[O, C / feature_group_count, *window]`, output `[N, O, *spatial_out]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConvGeneralDilated {
    /// Stride per spatial dim.
    pub window_strides: Vec<usize>,
    /// (low, high) padding per spatial dim.
    pub padding: Vec<(i64, i64)>,
    /// Input dilation per spatial dim (transposed convolution).
    pub lhs_dilation: Vec<usize>,
    /// Kernel dilation per spatial dim (atrous convolution).
    pub rhs_dilation: Vec<usize>,
    /// Number of channel groups (depthwise = C).
    pub feature_group_count: usize,
}

impl ConvGeneralDilated {
    /// Stride 1, no padding, no dilation, one group, for `spatial` spatial dims.
    pub fn simple(spatial: usize) -> ConvGeneralDilated {
        ConvGeneralDilated {
            window_strides: vec![1; spatial],
            padding: vec![(0, 0); spatial],
            lhs_dilation: vec![1; spatial],
            rhs_dilation: vec![1; spatial],
            feature_group_count: 1,
        }
    }
}

/// The size two paired dims agree on: equal dims, or the static one of a static/symbolic
/// pair (two different symbols are taken as equal; binding checks them later).
fn agree(x: &Dim, y: &Dim) -> Option<Dim> {
    match (x, y) {
        (Dim::Static(a), Dim::Static(b)) => (a == b).then(|| x.clone()),
        (Dim::Sym(_), Dim::Static(_)) => Some(y.clone()),
        _ => Some(x.clone()),
    }
}

/// `lax`'s rule for `preferred_element_type`.
fn check_preferred(input: DType, pref: DType) -> Result<(), String> {
    let ok = match (input.is_float(), pref.is_float(), pref.is_int()) {
        (true, true, _) | (false, _, true) | (false, true, _) => pref.size_bytes() >= input.size_bytes(),
        _ => false,
    };
    if !ok {
        return Err(format!(
            "preferred_element_type {pref} is incompatible with {input} operands (allowed: int -> int or float, \
             float -> float, never narrower)"
        ));
    }
    Ok(())
}

fn check_dims(side: &str, what: &str, dims: &[usize], s: &Shape, used: &mut Vec<usize>) -> Result<(), String> {
    for &d in dims {
        if d >= s.rank() {
            return Err(format!("{side} {what} dim {d} out of range for {s}"));
        }
        if used.contains(&d) {
            return Err(format!("{side} dim {d} of {s} is used twice in batch/contracting dims"));
        }
        used.push(d);
    }
    Ok(())
}

fn infer_dot(dg: &DotGeneral, a: &Shape, b: &Shape) -> Result<Shape, String> {
    if a.dtype != b.dtype {
        return Err(format!("dot_general needs operands of one dtype, got {a} and {b}"));
    }
    if a.dtype == DType::Bool {
        return Err(format!("dot_general does not accept bool operands ({a}, {b})"));
    }
    if dg.lhs_contracting.len() != dg.rhs_contracting.len() || dg.lhs_batch.len() != dg.rhs_batch.len() {
        return Err(format!(
            "dot_general pairs dims one to one: lhs contracting {:?} / rhs contracting {:?}, lhs batch {:?} / rhs \
             batch {:?} for {a} and {b}",
            dg.lhs_contracting, dg.rhs_contracting, dg.lhs_batch, dg.rhs_batch
        ));
    }
    let (mut used_a, mut used_b) = (vec![], vec![]);
    check_dims("lhs", "batch", &dg.lhs_batch, a, &mut used_a)?;
    check_dims("lhs", "contracting", &dg.lhs_contracting, a, &mut used_a)?;
    check_dims("rhs", "batch", &dg.rhs_batch, b, &mut used_b)?;
    check_dims("rhs", "contracting", &dg.rhs_contracting, b, &mut used_b)?;
    let mut dims = Vec::new();
    for (&i, &j) in dg.lhs_batch.iter().zip(&dg.rhs_batch) {
        let d = agree(&a.dims[i], &b.dims[j]).ok_or_else(|| {
            format!("batch dim {i} of {a} ({}) does not match dim {j} of {b} ({})", a.dims[i], b.dims[j])
        })?;
        dims.push(d);
    }
    for (&i, &j) in dg.lhs_contracting.iter().zip(&dg.rhs_contracting) {
        if agree(&a.dims[i], &b.dims[j]).is_none() {
            return Err(format!(
                "contracting dim {i} of {a} ({}) does not match dim {j} of {b} ({})",
                a.dims[i], b.dims[j]
            ));
        }
    }
    dims.extend((0..a.rank()).filter(|i| !used_a.contains(i)).map(|i| a.dims[i].clone()));
    dims.extend((0..b.rank()).filter(|i| !used_b.contains(i)).map(|i| b.dims[i].clone()));
    let dtype = match dg.preferred_element_type {
        Some(p) => {
            check_preferred(a.dtype, p)?;
            p
        }
        None => a.dtype,
    };
    Ok(Shape { dims, dtype })
}

fn infer_conv(c: &ConvGeneralDilated, x: &Shape, w: &Shape) -> Result<Shape, String> {
    if x.dtype != w.dtype {
        return Err(format!("conv_general_dilated needs operands of one dtype, got {x} and {w}"));
    }
    if x.dtype == DType::Bool {
        return Err(format!("conv_general_dilated does not accept bool operands ({x}, {w})"));
    }
    if x.rank() < 3 || x.rank() != w.rank() {
        return Err(format!(
            "conv_general_dilated needs lhs [N, C, *spatial] and rhs [O, I, *window] of equal rank >= 3, got {x} and {w}"
        ));
    }
    let ns = x.rank() - 2;
    let lens = [
        ("window_strides", c.window_strides.len()),
        ("padding", c.padding.len()),
        ("lhs_dilation", c.lhs_dilation.len()),
        ("rhs_dilation", c.rhs_dilation.len()),
    ];
    for (what, n) in lens {
        if n != ns {
            return Err(format!("conv_general_dilated: {what} has {n} entries for {ns} spatial dims of {x}"));
        }
    }
    let g = c.feature_group_count;
    let stat = |s: &Shape, i: usize, what: &str| {
        s.dims[i].as_static().ok_or_else(|| format!("conv_general_dilated: {what} dim {i} of {s} must be static"))
    };
    let (ch, o, ich) = (stat(x, 1, "channel")?, stat(w, 0, "output-feature")?, stat(w, 1, "input-feature")?);
    if g == 0 || ch % g != 0 || o % g != 0 || ich * g != ch {
        return Err(format!(
            "conv_general_dilated with feature_group_count {g} needs C % g == 0, O % g == 0 and rhs I == C / g; \
             got lhs {x} (C = {ch}) and rhs {w} (O = {o}, I = {ich})"
        ));
    }
    let mut dims = vec![x.dims[0].clone(), Dim::Static(o)];
    for i in 0..ns {
        let (s, p, ld, rd) = (c.window_strides[i], c.padding[i], c.lhs_dilation[i], c.rhs_dilation[i]);
        let k = stat(w, i + 2, "window")?;
        if s == 0 || ld == 0 || rd == 0 || k == 0 {
            return Err(format!(
                "conv_general_dilated: spatial dim {i} needs window, stride and dilations >= 1 (window {k}, stride {s}, \
                 lhs dilation {ld}, rhs dilation {rd}; operands {x}, {w})"
            ));
        }
        let d =
            match &x.dims[i + 2] {
                Dim::Static(n) => Dim::Static(window_out_size(*n, k, s, p, ld, rd).ok_or_else(|| {
                    format!("conv_general_dilated: padding {p:?} makes spatial dim {i} of {x} negative")
                })?),
                sym if (k, s, p, ld, rd) == (1, 1, (0, 0), 1, 1) => sym.clone(),
                sym => return Err(format!("conv_general_dilated: spatial dim {i} ({sym}) of {x} must be static")),
            };
        dims.push(d);
    }
    Ok(Shape { dims, dtype: x.dtype })
}

/// Shape and dtype rule of the contraction family.
pub(crate) fn infer(op: &Op, ins: &[&Shape]) -> Result<Shape, String> {
    arity(&op.name(), ins, 2)?;
    match op {
        Op::DotGeneral(dg) => infer_dot(dg, ins[0], ins[1]),
        Op::ConvGeneralDilated(c) => infer_conv(c, ins[0], ins[1]),
        _ => unreachable!(),
    }
}

/// Operand values widened: f64 for floats, i64 for integers.
enum Vals {
    F(Vec<f64>),
    I(Vec<i64>),
}

fn read(t: &Tensor) -> Vals {
    with_dtype!(t.dtype(), T, {
        let x = t.as_slice::<T>().unwrap();
        if t.dtype().is_float() {
            Vals::F(x.iter().map(|v| v.to_f64()).collect())
        } else {
            Vals::I(x.iter().map(|v| v.to_i64()).collect())
        }
    })
}

/// Compute every output element as a sum of products `a[i] * b[j]` over the `(i, j)` pairs
/// `terms(o, push)` yields for output flat index `o`, then round into `out`'s dtype.
fn sum_of_products(a: &Tensor, b: &Tensor, out: &mut Tensor, mut terms: impl FnMut(usize, &mut Vec<(usize, usize)>)) {
    let (va, vb) = (read(a), read(b));
    let mut pairs = Vec::new();
    with_dtype!(out.dtype(), O, {
        let y = out.as_mut_slice::<O>().unwrap();
        for (o, y) in y.iter_mut().enumerate() {
            pairs.clear();
            terms(o, &mut pairs);
            *y = match (&va, &vb) {
                (Vals::F(x), Vals::F(w)) => O::of_f64(pairs.iter().map(|&(i, j)| x[i] * w[j]).sum()),
                (Vals::I(x), Vals::I(w)) => {
                    O::of_i64(pairs.iter().fold(0i64, |s, &(i, j)| s.wrapping_add(x[i].wrapping_mul(w[j]))))
                }
                _ => unreachable!("operands share a dtype"),
            };
        }
    })
}

/// Row-major multi-index of flat index `k` in `dims`.
fn unravel(mut k: usize, dims: &[usize], idx: &mut [usize]) {
    for ax in (0..dims.len()).rev() {
        idx[ax] = k % dims[ax];
        k /= dims[ax];
    }
}

fn eval_dot(dg: &DotGeneral, a: &Tensor, b: &Tensor, out: &mut Tensor) {
    let (da, db) = (a.shape().to_vec(), b.shape().to_vec());
    let (sa, sb) = (strides_of(&da), strides_of(&db));
    let free = |rank: usize, batch: &[usize], con: &[usize]| -> Vec<usize> {
        (0..rank).filter(|i| !batch.contains(i) && !con.contains(i)).collect()
    };
    let fa = free(da.len(), &dg.lhs_batch, &dg.lhs_contracting);
    let fb = free(db.len(), &dg.rhs_batch, &dg.rhs_contracting);
    // Offsets of every contracting multi-index into each operand.
    let con_dims: Vec<usize> = dg.lhs_contracting.iter().map(|&i| da[i]).collect();
    let mut con_offs = Vec::new();
    for_each_index(&con_dims, |c| {
        let oa: usize = c.iter().zip(&dg.lhs_contracting).map(|(&k, &i)| k * sa[i]).sum();
        let ob: usize = c.iter().zip(&dg.rhs_contracting).map(|(&k, &j)| k * sb[j]).sum();
        con_offs.push((oa, ob));
    });
    let out_dims = out.shape().to_vec();
    let nbatch = dg.lhs_batch.len();
    let mut idx = vec![0; out_dims.len()];
    sum_of_products(a, b, out, |o, pairs| {
        unravel(o, &out_dims, &mut idx);
        let (bi, rest) = idx.split_at(nbatch);
        let (ia, ib) = rest.split_at(fa.len());
        let base_a: usize = bi.iter().zip(&dg.lhs_batch).chain(ia.iter().zip(&fa)).map(|(&k, &d)| k * sa[d]).sum();
        let base_b: usize = bi.iter().zip(&dg.rhs_batch).chain(ib.iter().zip(&fb)).map(|(&k, &d)| k * sb[d]).sum();
        pairs.extend(con_offs.iter().map(|&(oa, ob)| (base_a + oa, base_b + ob)));
    });
}

fn eval_conv(c: &ConvGeneralDilated, x: &Tensor, w: &Tensor, out: &mut Tensor) {
    let (dx, dw, dout) = (x.shape().to_vec(), w.shape().to_vec(), out.shape().to_vec());
    let (sx, sw) = (strides_of(&dx), strides_of(&dw));
    let ns = dx.len() - 2;
    let cg = dw[1];
    let og = dout[1] / c.feature_group_count.max(1);
    let mut idx = vec![0; dout.len()];
    sum_of_products(x, w, out, |o, pairs| {
        unravel(o, &dout, &mut idx);
        let (n, oc) = (idx[0], idx[1]);
        let group = oc / og.max(1);
        for ci in 0..cg {
            let ic = group * cg + ci;
            for_each_index(&dw[2..], |k| {
                // Position in the padded, lhs-dilated input; holes and padding read zero.
                let mut at = n * sx[0] + ic * sx[1];
                for s in 0..ns {
                    let p = (idx[s + 2] * c.window_strides[s] + k[s] * c.rhs_dilation[s]) as i64 - c.padding[s].0;
                    let ld = c.lhs_dilation[s] as i64;
                    if p < 0 || p % ld != 0 || p / ld >= dx[s + 2] as i64 {
                        return;
                    }
                    at += (p / ld) as usize * sx[s + 2];
                }
                let wat = oc * sw[0] + ci * sw[1] + k.iter().zip(&sw[2..]).map(|(k, s)| k * s).sum::<usize>();
                pairs.push((at, wat));
            });
        }
    });
}

/// Reference evaluation of the contraction family.
pub(crate) fn eval(op: &Op, ins: &[&Tensor], out: &mut Tensor) -> Result<(), IrError> {
    match op {
        Op::DotGeneral(dg) => eval_dot(dg, ins[0], ins[1], out),
        Op::ConvGeneralDilated(c) => eval_conv(c, ins[0], ins[1], out),
        _ => unreachable!(),
    }
    Ok(())
}

/// Expand `x` (type `s`, rank >= 2) to `batch ++ s.dims[-2..]` with `broadcast_in_dim`.
fn broadcast_batch(g: &mut Graph, x: NodeId, s: &Shape, batch: &[Dim]) -> NodeId {
    let (r, nb) = (s.rank(), batch.len());
    let mut shape = batch.to_vec();
    shape.extend_from_slice(&s.dims[r - 2..]);
    let broadcast_dimensions = (nb + 2 - r..nb + 2).collect();
    g.push(Op::BroadcastInDim { shape, broadcast_dimensions }, &[x])
}

/// Builders of the contraction family. Operands are first promoted to a common dtype
/// ([`DType::promote`]).
impl Graph {
    /// `lax.dot_general(a, b, dims)`: result dims batch, lhs free, rhs free (see the module
    /// docs). Errors: mismatched paired sizes (naming both shapes), dims out of range or used
    /// twice, bool operands, an incompatible `preferred_element_type`.
    pub fn dot_general(&mut self, a: NodeId, b: NodeId, dims: DotGeneral) -> NodeId {
        let (a, b) = self.promote_pair(a, b);
        self.push(Op::DotGeneral(dims), &[a, b])
    }

    /// `numpy.matmul(a, b)` (`a @ b`) as `dot_general`.
    ///
    /// Shapes: `[.., m, k] @ [.., k, n] -> [broadcast(..), m, n]`; a 1-D `a` is a row `[k]`
    /// (its dim dropped from the result), a 1-D `b` a column (likewise), so `[k] @ [k]` is a
    /// scalar. Batch dims broadcast NumPy-style; an operand whose batch dims differ from the
    /// broadcast ones is first expanded with `broadcast_in_dim`. Dtypes are promoted. Errors:
    /// a rank-0 operand, mismatched `k`, batch dims that do not broadcast.
    pub fn mm(&mut self, a: NodeId, b: NodeId) -> NodeId {
        let (a, b) = self.promote_pair(a, b);
        let empty = DotGeneral::contract(&[], &[]);
        let (Some(sa), Some(sb)) = (operand_type(self, a), operand_type(self, b)) else {
            return self.push(Op::DotGeneral(empty), &[a, b]);
        };
        let (ra, rb) = (sa.rank(), sb.rank());
        if ra == 0 || rb == 0 {
            return bad_argument(self, Op::DotGeneral(empty), &[a, b], "matmul needs operands of rank >= 1".into());
        }
        if ra == 1 || rb == 1 {
            // A vector contracts directly with the other operand's k dim; the remaining dims
            // already come out in NumPy's order.
            let rc = if rb == 1 { 0 } else { rb - 2 };
            return self.push(Op::DotGeneral(DotGeneral::contract(&[ra - 1], &[rc])), &[a, b]);
        }
        let (ba, bb) = (&sa.dims[..ra - 2], &sb.dims[..rb - 2]);
        if bb.is_empty() {
            // [.., m, k] @ [k, n]: the lhs's batch dims are free dims, already in front.
            return self.push(Op::DotGeneral(DotGeneral::contract(&[ra - 1], &[0])), &[a, b]);
        }
        let batch = match broadcast_dims(ba, bb) {
            Ok(d) => d,
            Err(msg) => return bad_argument(self, Op::DotGeneral(empty), &[a, b], format!("matmul batch dims: {msg}")),
        };
        let nb = batch.len();
        let a = if ba != batch.as_slice() { broadcast_batch(self, a, &sa, &batch) } else { a };
        let b = if bb != batch.as_slice() { broadcast_batch(self, b, &sb, &batch) } else { b };
        let batch_dims: Vec<usize> = (0..nb).collect();
        let dims = DotGeneral {
            lhs_contracting: vec![nb + 1],
            rhs_contracting: vec![nb],
            lhs_batch: batch_dims.clone(),
            rhs_batch: batch_dims,
            preferred_element_type: None,
        };
        self.push(Op::DotGeneral(dims), &[a, b])
    }

    /// [`Graph::mm`] with the result type declared, as in the spec's quickstart
    /// (`g.matmul(x, w, Shape::new(&[1, 2], DType::F32))`). A declared type that differs from
    /// the inferred one records [`IrError::DeclaredShape`]; when an operand rule already failed,
    /// the result node carries the declared type so later builders see it.
    pub fn matmul(&mut self, a: NodeId, b: NodeId, shape: Shape) -> NodeId {
        let before = self.error.is_some();
        let id = self.mm(a, b);
        if !before && self.error.is_some() {
            self.nodes[id.index()].outputs = vec![shape];
            return id;
        }
        let inferred = self.shape(id).clone();
        if inferred != shape {
            let op = self.node(id).op.name();
            self.record_error(IrError::DeclaredShape { node: id.index(), op, declared: shape, inferred });
        }
        id
    }

    /// `lax.conv_general_dilated(x, w, ...)` with NC… / OI… layout: `x` `[N, C, *spatial]`,
    /// `w` `[O, C / g, *window]`, result `[N, O, *spatial_out]` (see the module docs for the
    /// sizes). Errors: ranks, parameter list lengths, channel / group mismatches (naming both
    /// shapes), zero strides or dilations, padding that makes a dim negative.
    pub fn conv_general_dilated(&mut self, x: NodeId, w: NodeId, params: ConvGeneralDilated) -> NodeId {
        let (x, w) = self.promote_pair(x, w);
        self.push(Op::ConvGeneralDilated(params), &[x, w])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::{evaluate, evaluate_args};
    use std::collections::HashMap;

    fn run2(a: &Tensor, b: &Tensor, f: impl FnOnce(&mut Graph, NodeId, NodeId) -> NodeId) -> Result<Tensor, IrError> {
        let mut g = Graph::new("t");
        let x = g.input("a", Shape::new(a.shape(), a.dtype()));
        let y = g.input("b", Shape::new(b.shape(), b.dtype()));
        let z = f(&mut g, x, y);
        g.set_outputs(vec![z]);
        crate::verify(&g)?;
        Ok(evaluate_args(&g, &[a, b])?.remove(0))
    }

    fn err2(a: &Shape, b: &Shape, f: impl FnOnce(&mut Graph, NodeId, NodeId) -> NodeId) -> IrError {
        let mut g = Graph::new("t");
        let x = g.input("a", a.clone());
        let y = g.input("b", b.clone());
        f(&mut g, x, y);
        g.error().expect("expected a recorded error").clone()
    }

    fn t<T: Elem>(v: &[T], shape: &[usize]) -> Tensor {
        Tensor::from_vec(v.to_vec(), shape).unwrap()
    }

    fn f32s(shape: &[usize]) -> Shape {
        Shape::new(shape, DType::F32)
    }

    #[test]
    fn quickstart_matmul() {
        let mut g = Graph::new("quickstart");
        let x = g.input("x", Shape::new(&[1, 4], DType::F32));
        let w = g.param("w", Shape::new(&[4, 2], DType::F32));
        let y = g.matmul(x, w, Shape::new(&[1, 2], DType::F32));
        g.set_outputs(vec![y]);
        crate::verify(&g).unwrap();
        let feeds = HashMap::from([
            ("x".to_string(), t(&[1.0f32, 2., 3., 4.], &[1, 4])),
            ("w".to_string(), t(&[1.0f32, 0., 0., 1., 1., 0., 0., 1.], &[4, 2])),
        ]);
        let out = evaluate(&g, &feeds).unwrap();
        assert_eq!(out[0].shape(), &[1, 2]);
        assert_eq!(out[0].as_slice::<f32>().unwrap(), &[4.0, 6.0]);
    }

    #[test]
    fn matmul_declared_shape_mismatch() {
        let mut g = Graph::new("t");
        let x = g.input("x", f32s(&[1, 4]));
        let w = g.param("w", f32s(&[4, 2]));
        let y = g.matmul(x, w, f32s(&[2, 1]));
        match g.error() {
            Some(IrError::DeclaredShape { node, declared, inferred, .. }) => {
                assert_eq!((*node, declared, inferred), (y.index(), &f32s(&[2, 1]), &f32s(&[1, 2])));
            }
            e => panic!("expected DeclaredShape, got {e:?}"),
        }
        // An operand error: the node carries the declared type.
        let mut g = Graph::new("t");
        let x = g.input("x", f32s(&[1, 3]));
        let w = g.param("w", f32s(&[4, 2]));
        let y = g.matmul(x, w, f32s(&[1, 2]));
        assert!(matches!(g.error(), Some(IrError::Shape { .. })));
        assert_eq!(g.shape(y), &f32s(&[1, 2]));
    }

    #[test]
    fn mm_vector_and_batch_cases() {
        let a = t(&[1.0f64, 2., 3.], &[3]);
        let m = t(&[1.0f64, 2., 3., 4., 5., 6.], &[3, 2]);
        let r = run2(&a, &a, |g, x, y| g.mm(x, y)).unwrap();
        assert_eq!((r.shape(), r.to_f64_vec()), (&[][..], vec![14.]));
        let r = run2(&a, &m, |g, x, y| g.mm(x, y)).unwrap();
        assert_eq!((r.shape(), r.to_f64_vec()), (&[2][..], vec![22., 28.]));
        let mt = t(&[1.0f64, 3., 5., 2., 4., 6.], &[2, 3]);
        let r = run2(&mt, &a, |g, x, y| g.mm(x, y)).unwrap();
        assert_eq!((r.shape(), r.to_f64_vec()), (&[2][..], vec![22., 28.]));
        // [2, 1, 3] @ [3, 2] -> [2, 1, 2] with no broadcast node.
        let b3 = t(&[1.0f64, 2., 3., 0., 1., 0.], &[2, 1, 3]);
        let r = run2(&b3, &m, |g, x, y| g.mm(x, y)).unwrap();
        assert_eq!((r.shape(), r.to_f64_vec()), (&[2, 1, 2][..], vec![22., 28., 3., 4.]));
        // [2, 1, 3] @ [2, 3, 1] -> [2, 1, 1] (same batch dims: no broadcast node).
        let c3 = t(&[1.0f64, 1., 1., 2., 0., 0.], &[2, 3, 1]);
        let r = run2(&b3, &c3, |g, x, y| g.mm(x, y)).unwrap();
        assert_eq!((r.shape(), r.to_f64_vec()), (&[2, 1, 1][..], vec![6., 0.]));
        // [3] @ [2, 3, 1] -> [2, 1].
        let r = run2(&a, &c3, |g, x, y| g.mm(x, y)).unwrap();
        assert_eq!((r.shape(), r.to_f64_vec()), (&[2, 1][..], vec![6., 2.]));
    }

    #[test]
    fn mm_promotes_dtypes() {
        let a = t(&[1i32, 2], &[1, 2]);
        let b = t(&[0.5f32, 0.25], &[2, 1]);
        let r = run2(&a, &b, |g, x, y| g.mm(x, y)).unwrap();
        assert_eq!((r.dtype(), r.to_f64_vec()), (DType::F32, vec![1.0]));
    }

    #[test]
    fn mm_broadcasts_batch_dims_with_broadcast_in_dim() {
        let mut g = Graph::new("t");
        let a = g.input("a", f32s(&[4, 3]));
        let b = g.input("b", Shape::from_dims(&[Dim::dynamic(), Dim::Static(3), Dim::Static(5)], DType::F32));
        let y = g.mm(a, b);
        let n = g.node(y);
        assert_eq!(
            n.op,
            Op::DotGeneral(DotGeneral {
                lhs_contracting: vec![2],
                rhs_contracting: vec![1],
                lhs_batch: vec![0],
                rhs_batch: vec![0],
                preferred_element_type: None,
            })
        );
        assert_eq!(n.inputs[1], b);
        let bc = g.node(n.inputs[0]);
        assert_eq!(
            bc.op,
            Op::BroadcastInDim {
                shape: vec![Dim::dynamic(), Dim::Static(4), Dim::Static(3)],
                broadcast_dimensions: vec![1, 2]
            }
        );
        // Batch dims that do not broadcast.
        let e = err2(&f32s(&[2, 4, 3]), &f32s(&[5, 3, 1]), |g, x, y| g.mm(x, y)).to_string();
        assert!(e.contains("batch") && e.contains("f32[2,4,3]") && e.contains("f32[5,3,1]"), "{e}");
        let e = err2(&f32s(&[]), &f32s(&[3]), |g, x, y| g.mm(x, y)).to_string();
        assert!(e.contains("rank >= 1"), "{e}");
    }

    #[test]
    fn dot_general_batch_and_free_order() {
        // lhs [2(batch), 2, 3], rhs [2(batch), 3, 1]: contract 2 with 1 -> [2, 2, 1].
        let a = t(&[1i32, 2, 3, 4, 5, 6, 1, 0, 0, 0, 1, 0], &[2, 2, 3]);
        let b = t(&[1i32, 1, 1, 7, 8, 9], &[2, 3, 1]);
        let dims = DotGeneral {
            lhs_contracting: vec![2],
            rhs_contracting: vec![1],
            lhs_batch: vec![0],
            rhs_batch: vec![0],
            preferred_element_type: None,
        };
        let r = run2(&a, &b, |g, x, y| g.dot_general(x, y, dims)).unwrap();
        assert_eq!((r.shape(), r.as_slice::<i32>().unwrap()), (&[2, 2, 1][..], &[6, 15, 7, 8][..]));
        // aᵀ b: lhs [3, 2] contract 0, rhs [3, 1] contract 0 -> [2, 1].
        let a = t(&[1.0f32, 2., 3., 4., 5., 6.], &[3, 2]);
        let b = t(&[1.0f32, 0., 2.], &[3, 1]);
        let r = run2(&a, &b, |g, x, y| g.dot_general(x, y, DotGeneral::contract(&[0], &[0]))).unwrap();
        assert_eq!((r.shape(), r.to_f64_vec()), (&[2, 1][..], vec![11., 14.]));
        // Outer product (no contraction): free dims lhs then rhs.
        let a = t(&[1.0f32, 2.], &[2]);
        let b = t(&[3.0f32, 4., 5.], &[3]);
        let r = run2(&a, &b, |g, x, y| g.dot_general(x, y, DotGeneral::contract(&[], &[]))).unwrap();
        assert_eq!((r.shape(), r.to_f64_vec()), (&[2, 3][..], vec![3., 4., 5., 6., 8., 10.]));
        // Batch dim not leading in rhs: lhs [2, 3] batch 0, rhs [3, 2] batch 1, contract 1 / 0.
        let a = t(&[1.0f32, 2., 3., 4., 5., 6.], &[2, 3]);
        let b = t(&[1.0f32, 10., 1., 10., 1., 10.], &[3, 2]);
        let dims = DotGeneral {
            lhs_contracting: vec![1],
            rhs_contracting: vec![0],
            lhs_batch: vec![0],
            rhs_batch: vec![1],
            preferred_element_type: None,
        };
        let r = run2(&a, &b, |g, x, y| g.dot_general(x, y, dims)).unwrap();
        assert_eq!((r.shape(), r.to_f64_vec()), (&[2][..], vec![6., 150.]));
    }

    #[test]
    fn dot_general_int_wrapping_and_preferred_type() {
        let a = t(&[100i8, 100], &[1, 2]);
        let b = t(&[100i8, 100], &[2, 1]);
        let r = run2(&a, &b, |g, x, y| g.mm(x, y)).unwrap();
        assert_eq!(r.as_slice::<i8>().unwrap(), &[(20000i32 as i8)]);
        let mut dims = DotGeneral::contract(&[1], &[0]);
        dims.preferred_element_type = Some(DType::I32);
        let r = run2(&a, &b, |g, x, y| g.dot_general(x, y, dims.clone())).unwrap();
        assert_eq!(r.as_slice::<i32>().unwrap(), &[20000]);
        dims.preferred_element_type = Some(DType::F32);
        let r = run2(&a, &b, |g, x, y| g.dot_general(x, y, dims.clone())).unwrap();
        assert_eq!(r.as_slice::<f32>().unwrap(), &[20000.0]);
        let h = Tensor::from_f64s(&[1, 2], DType::F16, &[1000.0, 1000.0]).unwrap();
        let hb = Tensor::from_f64s(&[2, 1], DType::F16, &[100.0, 100.0]).unwrap();
        let r = run2(&h, &hb, |g, x, y| g.dot_general(x, y, dims.clone())).unwrap();
        assert_eq!((r.dtype(), r.to_f64_vec()), (DType::F32, vec![200000.0])); // overflows f16
        let r = run2(&h, &hb, |g, x, y| g.mm(x, y)).unwrap();
        assert_eq!(r.to_f64_vec(), vec![f64::INFINITY]);
        let u = t(&[u32::MAX, 2], &[2]);
        let r = run2(&u, &u, |g, x, y| g.mm(x, y)).unwrap();
        assert_eq!(r.as_slice::<u32>().unwrap(), &[1u32.wrapping_add(4)]); // (2^32-1)^2 = 1 mod 2^32
    }

    #[test]
    fn dot_general_size_zero() {
        let a = Tensor::zeros(&[2, 0], DType::F32);
        let b = Tensor::zeros(&[0, 3], DType::F32);
        let r = run2(&a, &b, |g, x, y| g.mm(x, y)).unwrap();
        assert_eq!((r.shape(), r.to_f64_vec()), (&[2, 3][..], vec![0.0; 6]));
        let a = Tensor::zeros(&[0, 4], DType::I64);
        let b = Tensor::zeros(&[4, 3], DType::I64);
        let r = run2(&a, &b, |g, x, y| g.mm(x, y)).unwrap();
        assert_eq!(r.shape(), &[0, 3]);
    }

    #[test]
    fn dot_general_errors_name_shapes() {
        let e = err2(&f32s(&[2, 3]), &f32s(&[4, 5]), |g, x, y| g.mm(x, y)).to_string();
        assert!(e.contains("contracting") && e.contains("f32[2,3]") && e.contains("f32[4,5]"), "{e}");
        let batch = DotGeneral {
            lhs_contracting: vec![2],
            rhs_contracting: vec![1],
            lhs_batch: vec![0],
            rhs_batch: vec![0],
            preferred_element_type: None,
        };
        let e = err2(&f32s(&[2, 1, 3]), &f32s(&[4, 3, 1]), |g, x, y| g.dot_general(x, y, batch)).to_string();
        assert!(e.contains("batch dim 0") && e.contains("f32[2,1,3]") && e.contains("f32[4,3,1]"), "{e}");
        let e = err2(&f32s(&[2, 3]), &f32s(&[3]), |g, x, y| g.dot_general(x, y, DotGeneral::contract(&[2], &[0])));
        assert!(e.to_string().contains("out of range"), "{e}");
        let e = err2(&f32s(&[3, 3]), &f32s(&[3, 3]), |g, x, y| {
            g.dot_general(
                x,
                y,
                DotGeneral { lhs_batch: vec![0], rhs_batch: vec![0], ..DotGeneral::contract(&[0], &[1]) },
            )
        });
        assert!(e.to_string().contains("used twice"), "{e}");
        let b2 = Shape::new(&[2, 2], DType::Bool);
        let e = err2(&b2, &b2, |g, x, y| g.mm(x, y));
        assert!(e.to_string().contains("bool"), "{e}");
        let mut dims = DotGeneral::contract(&[1], &[0]);
        dims.preferred_element_type = Some(DType::I32);
        let e = err2(&f32s(&[2, 2]), &f32s(&[2, 2]), |g, x, y| g.dot_general(x, y, dims.clone()));
        assert!(e.to_string().contains("preferred_element_type"), "{e}");
        dims.preferred_element_type = Some(DType::F16);
        let e = err2(&f32s(&[2, 2]), &f32s(&[2, 2]), |g, x, y| g.dot_general(x, y, dims));
        assert!(e.to_string().contains("preferred_element_type"), "{e}");
        // The op itself (no promotion) rejects mixed dtypes.
        let (a, b) = (f32s(&[2]), Shape::new(&[2], DType::F64));
        let e = Op::DotGeneral(DotGeneral::contract(&[0], &[0])).infer(&[&a, &b], None).unwrap_err();
        assert!(e.contains("f32[2]") && e.contains("f64[2]"), "{e}");
    }

    #[test]
    fn dot_general_symbolic_dims() {
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::from_dims(&[Dim::dynamic(), Dim::Static(4)], DType::F32));
        let w = g.param("w", f32s(&[4, 2]));
        let y = g.matmul(x, w, Shape::from_dims(&[Dim::dynamic(), Dim::Static(2)], DType::F32));
        assert!(g.error().is_none(), "{:?}", g.error());
        assert_eq!(g.shape(y).dims[0], Dim::dynamic());
    }

    fn conv(params: ConvGeneralDilated) -> impl FnOnce(&mut Graph, NodeId, NodeId) -> NodeId {
        move |g, x, w| g.conv_general_dilated(x, w, params)
    }

    #[test]
    fn conv_1d_and_2d() {
        let x = t(&[1.0f32, 2., 3., 4., 5.], &[1, 1, 5]);
        let w = t(&[1.0f32, 0., -1.], &[1, 1, 3]);
        let r = run2(&x, &w, conv(ConvGeneralDilated::simple(1))).unwrap();
        assert_eq!((r.shape(), r.to_f64_vec()), (&[1, 1, 3][..], vec![-2., -2., -2.]));
        let v: Vec<f32> = (1..=9).map(|i| i as f32).collect();
        let x = t(&v, &[1, 1, 3, 3]);
        let w = t(&[1.0f32; 4], &[1, 1, 2, 2]);
        let r = run2(&x, &w, conv(ConvGeneralDilated::simple(2))).unwrap();
        assert_eq!((r.shape(), r.to_f64_vec()), (&[1, 1, 2, 2][..], vec![12., 16., 24., 28.]));
        // Padding 1 and stride 2 on the 3x3: output 2x2 reading corners' neighbourhoods.
        let p = ConvGeneralDilated {
            window_strides: vec![2, 2],
            padding: vec![(1, 1); 2],
            ..ConvGeneralDilated::simple(2)
        };
        let r = run2(&x, &w, conv(p)).unwrap();
        assert_eq!((r.shape(), r.to_f64_vec()), (&[1, 1, 2, 2][..], vec![1., 5., 11., 28.]));
    }

    #[test]
    fn conv_batch_channels_and_groups() {
        // N=2, C=2, W=3; c0 = [1,2,3], c1 = [10,20,30]; second image doubled.
        let x = t(&[1i32, 2, 3, 10, 20, 30, 2, 4, 6, 20, 40, 60], &[2, 2, 3]);
        // g = 1, O = 2: o0 sums channels, o1 takes c1 - c0.
        let w = t(&[1i32, 1, -1, 1], &[2, 2, 1]);
        let r = run2(&x, &w, conv(ConvGeneralDilated::simple(1))).unwrap();
        assert_eq!(r.shape(), &[2, 2, 3]);
        assert_eq!(r.as_slice::<i32>().unwrap(), &[11, 22, 33, 9, 18, 27, 22, 44, 66, 18, 36, 54]);
        // Depthwise g = 2, O = 2, I = 1.
        let w = t(&[2i32, 3], &[2, 1, 1]);
        let p = ConvGeneralDilated { feature_group_count: 2, ..ConvGeneralDilated::simple(1) };
        let r = run2(&x, &w, conv(p)).unwrap();
        assert_eq!(r.as_slice::<i32>().unwrap(), &[2, 4, 6, 30, 60, 90, 4, 8, 12, 60, 120, 180]);
        // g = 2, O = 4: outputs 0,1 read c0; 2,3 read c1.
        let w = t(&[1i32, -1, 1, 2], &[4, 1, 1]);
        let p = ConvGeneralDilated { feature_group_count: 2, ..ConvGeneralDilated::simple(1) };
        let r = run2(&x, &w, conv(p)).unwrap();
        assert_eq!(&r.as_slice::<i32>().unwrap()[..12], &[1, 2, 3, -1, -2, -3, 10, 20, 30, 20, 40, 60]);
    }

    #[test]
    fn conv_padding_and_dilations() {
        let x = t(&[1.0f64, 2., 3.], &[1, 1, 3]);
        let ones3 = t(&[1.0f64; 3], &[1, 1, 3]);
        let p = ConvGeneralDilated { padding: vec![(1, 1)], ..ConvGeneralDilated::simple(1) };
        let r = run2(&x, &ones3, conv(p)).unwrap();
        assert_eq!(r.to_f64_vec(), vec![3., 6., 5.]);
        // lhs dilation 2: [1,0,2,0,3] with window [1,1] -> [1,2,2,3].
        let ones2 = t(&[1.0f64; 2], &[1, 1, 2]);
        let p = ConvGeneralDilated { lhs_dilation: vec![2], ..ConvGeneralDilated::simple(1) };
        let r = run2(&x, &ones2, conv(p)).unwrap();
        assert_eq!(r.to_f64_vec(), vec![1., 2., 2., 3.]);
        // rhs dilation 2 on [1..5]: window reads i and i+2.
        let x5 = t(&[1.0f64, 2., 3., 4., 5.], &[1, 1, 5]);
        let p = ConvGeneralDilated { rhs_dilation: vec![2], ..ConvGeneralDilated::simple(1) };
        let r = run2(&x5, &ones2, conv(p)).unwrap();
        assert_eq!(r.to_f64_vec(), vec![4., 6., 8.]);
        // Negative padding crops.
        let one = t(&[1.0f64], &[1, 1, 1]);
        let p = ConvGeneralDilated { padding: vec![(-1, -1)], ..ConvGeneralDilated::simple(1) };
        let r = run2(&x5, &one, conv(p)).unwrap();
        assert_eq!(r.to_f64_vec(), vec![2., 3., 4.]);
        // Asymmetric kernel is not flipped (cross-correlation).
        let k = t(&[1.0f64, 10.], &[1, 1, 2]);
        let r = run2(&x, &k, conv(ConvGeneralDilated::simple(1))).unwrap();
        assert_eq!(r.to_f64_vec(), vec![21., 32.]);
    }

    #[test]
    fn conv_shapes_size_zero_and_errors() {
        let ty = |x: &[usize], w: &[usize], p: ConvGeneralDilated| {
            Op::ConvGeneralDilated(p).infer(&[&f32s(x), &f32s(w)], None).map(|s| s[0].clone())
        };
        let s1 = ConvGeneralDilated::simple(1);
        assert_eq!(ty(&[0, 2, 5], &[3, 2, 2], s1.clone()).unwrap(), f32s(&[0, 3, 4]));
        assert_eq!(ty(&[1, 2, 1], &[3, 2, 2], s1.clone()).unwrap(), f32s(&[1, 3, 0]));
        let strided = ConvGeneralDilated {
            window_strides: vec![2, 3],
            padding: vec![(1, 0), (0, 2)],
            ..ConvGeneralDilated::simple(2)
        };
        // H: (7 + 1 - 3) / 2 + 1 = 3; W: (8 + 2 - 2) / 3 + 1 = 3.
        assert_eq!(ty(&[1, 1, 7, 8], &[1, 1, 3, 2], strided).unwrap(), f32s(&[1, 1, 3, 3]));
        let r = run2(&Tensor::zeros(&[0, 1, 3], DType::F32), &t(&[1.0f32], &[1, 1, 1]), conv(s1.clone())).unwrap();
        assert_eq!(r.shape(), &[0, 1, 3]);

        let e = ty(&[1, 3, 5], &[2, 2, 1], s1.clone()).unwrap_err();
        assert!(e.contains("f32[1,3,5]") && e.contains("f32[2,2,1]"), "{e}");
        let g2 = ConvGeneralDilated { feature_group_count: 2, ..ConvGeneralDilated::simple(1) };
        let e = ty(&[1, 3, 5], &[2, 1, 1], g2.clone()).unwrap_err();
        assert!(e.contains("feature_group_count 2"), "{e}");
        let e = ty(&[1, 4, 5], &[3, 2, 1], g2).unwrap_err();
        assert!(e.contains("O = 3"), "{e}");
        assert!(ty(&[1, 1, 5], &[1, 1, 1, 1], s1.clone()).unwrap_err().contains("equal rank"));
        assert!(ty(&[1, 1], &[1, 1], s1.clone()).is_err());
        assert!(ty(&[1, 1, 5, 5], &[1, 1, 1, 1], s1.clone()).unwrap_err().contains("spatial dims"));
        let zero_stride = ConvGeneralDilated { window_strides: vec![0], ..ConvGeneralDilated::simple(1) };
        assert!(ty(&[1, 1, 5], &[1, 1, 1], zero_stride).is_err());
        let crop = ConvGeneralDilated { padding: vec![(-4, -4)], ..ConvGeneralDilated::simple(1) };
        assert!(ty(&[1, 1, 5], &[1, 1, 1], crop).unwrap_err().contains("negative"));
        let e = err2(&Shape::new(&[1, 1, 2], DType::Bool), &Shape::new(&[1, 1, 1], DType::Bool), conv(s1));
        assert!(e.to_string().contains("bool"), "{e}");
        // Symbolic batch dim is kept; symbolic windowed spatial dim is an error.
        let xs = Shape::from_dims(&[Dim::dynamic(), Dim::Static(1), Dim::Static(5)], DType::F32);
        let out = Op::ConvGeneralDilated(ConvGeneralDilated::simple(1)).infer(&[&xs, &f32s(&[2, 1, 3])], None).unwrap();
        assert_eq!(out[0], Shape::from_dims(&[Dim::dynamic(), Dim::Static(2), Dim::Static(3)], DType::F32));
        let xs = Shape::from_dims(&[Dim::Static(1), Dim::Static(1), Dim::dynamic()], DType::F32);
        assert!(Op::ConvGeneralDilated(ConvGeneralDilated::simple(1)).infer(&[&xs, &f32s(&[2, 1, 3])], None).is_err());
    }
}
