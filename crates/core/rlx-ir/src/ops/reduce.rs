//! Reduction family: `reduce_{sum,max,min,prod,and,or}`, `argmax`/`argmin`, cumulative scans
//! (`cumsum`, ...), and `reduce_window` (pooling).
//!
//! Semantics follow `jax.lax`:
//! - `reduce_*` removes the reduced axes; reducing a size-0 axis gives the monoid's identity
//!   (`sum` 0, `prod` 1, `max` -inf / the type's minimum / `false`, `min` +inf / the type's
//!   maximum / `true`, `and` all ones / `true`, `or` 0 / `false`). `max`/`min` propagate NaN
//!   (as `np.max`, not `np.nanmax`). `and`/`or` are logical on bool and bitwise on integers.
//!   Bool also accepts `max` (= or) and `min` (= and); `sum`/`prod` need a number type (as
//!   `lax.reduce_sum`; `jnp.sum` would first promote bool to int).
//! - `argmax`/`argmin` (`lax.argmax`) return the first index of the extreme value; a NaN counts
//!   as the extreme, so the first NaN's index is returned (NumPy's rule). A size-0 axis is an
//!   error, as is an axis longer than the index dtype can count.
//! - `cumsum`/`cumprod`/`cummax`/`cummin` keep the shape; `reverse` scans from the end.
//! - `reduce_window` starts from the op's identity (so padded positions read the identity and
//!   `Max` pooling ignores them); output size per dim is
//!   `floor((padded_dilated_in - dilated_window) / stride) + 1` (0 when the window does not fit)
//!   with `padded_dilated_in = (in - 1) * base_dilation + 1 + lo + hi` and
//!   `dilated_window = (window - 1) * window_dilation + 1`. Only `Sum`, `Max` and `Min` are
//!   accepted (pooling); padding may be negative (it crops).
//!
//! Reference evaluation accumulates floats in f64 and rounds once at the end (XLA accumulates
//! in the element type, so low-precision results can differ in the last bits); integers
//! accumulate in i64 with wrapping, which equals wrapping in the element type.

pub(crate) mod ad;

use super::{Op, arity};
use crate::shape::strides_of;
use crate::{DType, Dim, Elem, Graph, IrError, Node, NodeId, Shape, Tensor, normalize_axis, with_dtype};
use serde::{Deserialize, Serialize};

/// A reduction monoid.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum ReduceOp {
    Sum,
    Prod,
    Max,
    Min,
    /// Logical and (bool) / bitwise and (ints).
    And,
    /// Logical or (bool) / bitwise or (ints).
    Or,
}

impl ReduceOp {
    /// Name suffix (`reduce_sum` ...).
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::And => "and",
            ReduceOp::Or => "or",
        }
    }

    /// Which dtypes the reduction accepts: `sum`/`prod` numbers, `max`/`min` numbers and bool,
    /// `and`/`or` integers and bool.
    pub fn accepts(self, d: DType) -> bool {
        match self {
            ReduceOp::Sum | ReduceOp::Prod => d.is_float() || d.is_int(),
            ReduceOp::Max | ReduceOp::Min => d.is_float() || d.is_int() || d == DType::Bool,
            ReduceOp::And | ReduceOp::Or => d.is_int() || d == DType::Bool,
        }
    }

    /// The identity as f64 (for float dtypes): 0, 1, -inf, +inf; `and`/`or` are not float ops.
    pub fn identity_f64(self) -> f64 {
        match self {
            ReduceOp::Sum | ReduceOp::Or => 0.0,
            ReduceOp::Prod => 1.0,
            ReduceOp::Max => f64::NEG_INFINITY,
            ReduceOp::Min => f64::INFINITY,
            ReduceOp::And => f64::NAN,
        }
    }

    /// The identity for an integer or bool dtype, as the i64 the reference accumulates in
    /// (values of unsigned types are zero-extended, bool is 0/1).
    pub fn identity_i64(self, d: DType) -> i64 {
        let (lo, hi) = int_range(d);
        match self {
            ReduceOp::Sum | ReduceOp::Or => 0,
            ReduceOp::Prod => 1,
            ReduceOp::Max => lo,
            ReduceOp::Min => hi,
            ReduceOp::And => {
                if d == DType::Bool {
                    1
                } else {
                    hi | lo
                }
            }
        }
    }

    /// Combine two f64 values (NaN-propagating `max`/`min`).
    pub fn combine_f64(self, a: f64, b: f64) -> f64 {
        match self {
            ReduceOp::Sum => a + b,
            ReduceOp::Prod => a * b,
            ReduceOp::Max | ReduceOp::Min if a.is_nan() || b.is_nan() => f64::NAN,
            ReduceOp::Max => a.max(b),
            ReduceOp::Min => a.min(b),
            ReduceOp::And => ((a != 0.0) && (b != 0.0)) as u8 as f64,
            ReduceOp::Or => ((a != 0.0) || (b != 0.0)) as u8 as f64,
        }
    }

    /// Combine two i64 values (wrapping `sum`/`prod`, bitwise `and`/`or`).
    pub fn combine_i64(self, a: i64, b: i64) -> i64 {
        match self {
            ReduceOp::Sum => a.wrapping_add(b),
            ReduceOp::Prod => a.wrapping_mul(b),
            ReduceOp::Max => a.max(b),
            ReduceOp::Min => a.min(b),
            ReduceOp::And => a & b,
            ReduceOp::Or => a | b,
        }
    }
}

/// Value range of an integer or bool dtype as i64 (bool: 0..=1).
fn int_range(d: DType) -> (i64, i64) {
    match d {
        DType::I8 => (i8::MIN as i64, i8::MAX as i64),
        DType::I16 => (i16::MIN as i64, i16::MAX as i64),
        DType::I32 => (i32::MIN as i64, i32::MAX as i64),
        DType::I64 => (i64::MIN, i64::MAX),
        DType::U8 => (0, u8::MAX as i64),
        DType::U32 => (0, u32::MAX as i64),
        DType::U16 => (0, u16::MAX as i64),
        DType::I4 => (-8, 7),
        DType::U4 => (0, 15),
        DType::I2 => (-2, 1),
        DType::U2 => (0, 3),
        DType::Bool => (0, 1),
        // U64 runs in "order space" (see `order_flip`), where its range is i64's.
        _ => (i64::MIN, i64::MAX),
    }
}

/// A running (prefix) operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum CumulativeOp {
    Sum,
    Prod,
    Max,
    Min,
}

impl CumulativeOp {
    /// `jax.lax` name (`cumsum`, ...).
    pub fn name(self) -> &'static str {
        match self {
            CumulativeOp::Sum => "cumsum",
            CumulativeOp::Prod => "cumprod",
            CumulativeOp::Max => "cummax",
            CumulativeOp::Min => "cummin",
        }
    }

    /// The reduction monoid the scan runs.
    pub fn monoid(self) -> ReduceOp {
        match self {
            CumulativeOp::Sum => ReduceOp::Sum,
            CumulativeOp::Prod => ReduceOp::Prod,
            CumulativeOp::Max => ReduceOp::Max,
            CumulativeOp::Min => ReduceOp::Min,
        }
    }
}

fn check_axis(name: &str, axis: usize, s: &Shape) -> Result<(), String> {
    if axis >= s.rank() {
        return Err(format!("{name}: axis {axis} out of range for {s}"));
    }
    Ok(())
}

/// Output size of one windowed dim (`reduce_window`, convolution): `None` when the padded
/// size is negative.
pub(crate) fn window_out_size(
    input: usize,
    window: usize,
    stride: usize,
    pad: (i64, i64),
    base_dilation: usize,
    window_dilation: usize,
) -> Option<usize> {
    let dilated_in = if input == 0 { 0 } else { (input as i64 - 1) * base_dilation as i64 + 1 };
    let padded = dilated_in + pad.0 + pad.1;
    if padded < 0 {
        return None;
    }
    let dilated_window = (window as i64 - 1) * window_dilation as i64 + 1;
    if padded < dilated_window {
        return Some(0);
    }
    Some(((padded - dilated_window) / stride as i64 + 1) as usize)
}

/// Shape and dtype rule of the reduction family.
pub(crate) fn infer(op: &Op, ins: &[&Shape]) -> Result<Shape, String> {
    let name = op.name();
    arity(&name, ins, 1)?;
    let x = ins[0];
    match op {
        Op::Reduce { op: r, axes } => {
            if !r.accepts(x.dtype) {
                return Err(format!("{name} does not accept {}", x.dtype));
            }
            for (i, &a) in axes.iter().enumerate() {
                check_axis(&name, a, x)?;
                if i > 0 && axes[i - 1] >= a {
                    return Err(format!("{name}: axes {axes:?} must be sorted and unique"));
                }
            }
            let dims = x.dims.iter().enumerate().filter(|(i, _)| !axes.contains(i)).map(|(_, d)| d.clone());
            Ok(Shape { dims: dims.collect(), dtype: x.dtype })
        }
        Op::ArgReduce { op: r, axis, index_dtype } => {
            if !matches!(r, ReduceOp::Max | ReduceOp::Min) {
                return Err(format!("arg-reduction needs max or min, not {}", r.name()));
            }
            if !index_dtype.is_int() {
                return Err(format!("{name}: index dtype must be an integer type, not {index_dtype}"));
            }
            check_axis(&name, *axis, x)?;
            if let Dim::Static(n) = x.dims[*axis] {
                if n == 0 {
                    return Err(format!("{name} of a size-0 axis {axis} of {x}"));
                }
                if (n - 1) as u64 > int_range(*index_dtype).1 as u64 {
                    return Err(format!("{name}: axis {axis} of {x} has more elements than {index_dtype} can index"));
                }
            }
            let mut dims = x.dims.clone();
            dims.remove(*axis);
            Ok(Shape { dims, dtype: *index_dtype })
        }
        Op::Cumulative { op: c, axis, .. } => {
            if !c.monoid().accepts(x.dtype) {
                return Err(format!("{name} does not accept {}", x.dtype));
            }
            check_axis(&name, *axis, x)?;
            Ok(x.clone())
        }
        Op::ReduceWindow { op: r, window_dimensions, window_strides, padding, base_dilation, window_dilation } => {
            if !matches!(r, ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min) {
                return Err(format!("reduce_window supports sum, max and min, not {}", r.name()));
            }
            if !r.accepts(x.dtype) {
                return Err(format!("reduce_window {} does not accept {}", r.name(), x.dtype));
            }
            let rank = x.rank();
            let lens = [
                ("window_dimensions", window_dimensions.len()),
                ("window_strides", window_strides.len()),
                ("padding", padding.len()),
                ("base_dilation", base_dilation.len()),
                ("window_dilation", window_dilation.len()),
            ];
            for (what, n) in lens {
                if n != rank {
                    return Err(format!("reduce_window: {what} has {n} entries for rank-{rank} operand {x}"));
                }
            }
            let mut dims = Vec::with_capacity(rank);
            for i in 0..rank {
                let (w, s, p, bd, wd) =
                    (window_dimensions[i], window_strides[i], padding[i], base_dilation[i], window_dilation[i]);
                if w == 0 || s == 0 || bd == 0 || wd == 0 {
                    return Err(format!(
                        "reduce_window: dim {i} needs window, stride and dilations >= 1 (got window {w}, stride {s}, \
                         base dilation {bd}, window dilation {wd})"
                    ));
                }
                let d = match &x.dims[i] {
                    Dim::Static(n) => Dim::Static(
                        window_out_size(*n, w, s, p, bd, wd)
                            .ok_or_else(|| format!("reduce_window: padding {p:?} makes dim {i} of {x} negative"))?,
                    ),
                    sym if (w, s, p, bd, wd) == (1, 1, (0, 0), 1, 1) => sym.clone(),
                    sym => return Err(format!("reduce_window: windowed dim {i} ({sym}) of {x} must be static")),
                };
                dims.push(d);
            }
            Ok(Shape { dims, dtype: x.dtype })
        }
        _ => unreachable!(),
    }
}

/// Call `f` with every multi-index of `dims` in row-major order.
pub(crate) fn for_each_index(dims: &[usize], mut f: impl FnMut(&[usize])) {
    if dims.contains(&0) {
        return;
    }
    let mut idx = vec![0usize; dims.len()];
    loop {
        f(&idx);
        let mut ax = dims.len();
        loop {
            if ax == 0 {
                return;
            }
            ax -= 1;
            idx[ax] += 1;
            if idx[ax] < dims[ax] {
                break;
            }
            idx[ax] = 0;
        }
    }
}

/// What to xor a `d` value (as i64) with so that i64 order is `d`'s order when `r` compares:
/// u64 values above i64::MAX read as negative i64, and flipping the top bit fixes that.
/// Wrapping sums, products and bitwise ops need no flip (their bits are the same).
pub(crate) fn order_flip(d: DType, r: ReduceOp) -> i64 {
    if d == DType::U64 && matches!(r, ReduceOp::Max | ReduceOp::Min) { i64::MIN } else { 0 }
}

/// Values of one buffer as the reference computes with them: f64 for floats, i64 for
/// integers and bool (u64 max/min in order space, see [`order_flip`]).
enum Buf {
    F(Vec<f64>),
    I(Vec<i64>),
}

impl Buf {
    /// `n` copies of `r`'s identity for dtype `d`.
    fn identity(r: ReduceOp, d: DType, n: usize) -> Buf {
        if d.is_float() { Buf::F(vec![r.identity_f64(); n]) } else { Buf::I(vec![r.identity_i64(d); n]) }
    }

    /// Every element of `t`, widened for reducing with `r`.
    fn read(t: &Tensor, r: ReduceOp) -> Buf {
        let flip = order_flip(t.dtype(), r);
        with_dtype!(t.dtype(), T, {
            let x = t.as_slice::<T>().unwrap();
            if t.dtype().is_float() {
                Buf::F(x.iter().map(|v| v.to_f64()).collect())
            } else {
                Buf::I(x.iter().map(|v| v.to_i64() ^ flip).collect())
            }
        })
    }

    /// `self[o] = r(self[o], src[i])`.
    fn combine(&mut self, r: ReduceOp, o: usize, src: &Buf, i: usize) {
        match (self, src) {
            (Buf::F(a), Buf::F(v)) => a[o] = r.combine_f64(a[o], v[i]),
            (Buf::I(a), Buf::I(v)) => a[o] = r.combine_i64(a[o], v[i]),
            _ => unreachable!("accumulator and operand share a dtype"),
        }
    }

    /// Round into `out`'s dtype (the values were reduced with `r`).
    fn store(&self, out: &mut Tensor, r: ReduceOp) {
        let flip = order_flip(out.dtype(), r);
        with_dtype!(out.dtype(), T, {
            let o = out.as_mut_slice::<T>().unwrap();
            match self {
                Buf::F(a) => o.iter_mut().zip(a).for_each(|(o, &v)| *o = T::of_f64(v)),
                Buf::I(a) => o.iter_mut().zip(a).for_each(|(o, &v)| *o = T::of_i64(v ^ flip)),
            }
        })
    }
}

fn eval_err(op: &Op, msg: impl Into<String>) -> IrError {
    IrError::Eval { op: op.name(), msg: msg.into() }
}

/// Reference evaluation of the reduction family.
pub(crate) fn eval(op: &Op, ins: &[&Tensor], out: &mut Tensor) -> Result<(), IrError> {
    let x = ins[0];
    let dims = x.shape().to_vec();
    let d = x.dtype();
    match op {
        Op::Reduce { op: r, axes } => {
            // Output stride of each input dim (0 on reduced dims).
            let out_st = strides_of(out.shape());
            let mut k = 0;
            let mut st = vec![0usize; dims.len()];
            for (i, s) in st.iter_mut().enumerate() {
                if !axes.contains(&i) {
                    *s = out_st[k];
                    k += 1;
                }
            }
            let src = Buf::read(x, *r);
            let mut acc = Buf::identity(*r, d, out.numel());
            let mut i = 0;
            for_each_index(&dims, |idx| {
                acc.combine(*r, idx.iter().zip(&st).map(|(i, s)| i * s).sum(), &src, i);
                i += 1;
            });
            acc.store(out, *r);
            Ok(())
        }
        Op::ArgReduce { op: r, axis, .. } => {
            let n = dims[*axis];
            if n == 0 {
                return Err(eval_err(op, format!("size-0 axis {axis} of {dims:?}")));
            }
            let inner: usize = dims[axis + 1..].iter().product();
            let outer: usize = dims[..*axis].iter().product();
            let want_max = *r == ReduceOp::Max;
            let mut best = vec![0i64; outer * inner];
            with_dtype!(d, T, {
                let v = x.as_slice::<T>().unwrap();
                for o in 0..outer {
                    for i in 0..inner {
                        let at = |j: usize| v[(o * n + j) * inner + i];
                        let mut b = 0usize;
                        for j in 1..n {
                            let (cur, cand) = (at(b), at(j));
                            let better = if d.is_float() {
                                let (cur, cand) = (cur.to_f64(), cand.to_f64());
                                !cur.is_nan() && (cand.is_nan() || if want_max { cand > cur } else { cand < cur })
                            } else {
                                let flip = order_flip(d, ReduceOp::Max);
                                let (cur, cand) = (cur.to_i64() ^ flip, cand.to_i64() ^ flip);
                                if want_max { cand > cur } else { cand < cur }
                            };
                            if better {
                                b = j;
                            }
                        }
                        best[o * inner + i] = b as i64;
                    }
                }
            });
            with_dtype!(out.dtype(), O, {
                let y = out.as_mut_slice::<O>().unwrap();
                y.iter_mut().zip(&best).for_each(|(y, &b)| *y = O::of_i64(b));
            });
            Ok(())
        }
        Op::Cumulative { op: c, axis, reverse } => {
            let r = c.monoid();
            let n = dims[*axis];
            let inner: usize = dims[axis + 1..].iter().product();
            let outer: usize = dims[..*axis].iter().product();
            let order: Vec<usize> = if *reverse { (0..n).rev().collect() } else { (0..n).collect() };
            with_dtype!(d, T, {
                let v = x.as_slice::<T>().unwrap();
                let y = out.as_mut_slice::<T>().unwrap();
                for o in 0..outer {
                    for i in 0..inner {
                        let at = |j: usize| (o * n + j) * inner + i;
                        if d.is_float() {
                            let mut a = r.identity_f64();
                            for &j in &order {
                                a = r.combine_f64(a, v[at(j)].to_f64());
                                y[at(j)] = T::of_f64(a);
                            }
                        } else {
                            let (mut a, flip) = (r.identity_i64(d), order_flip(d, r));
                            for &j in &order {
                                a = r.combine_i64(a, v[at(j)].to_i64() ^ flip);
                                y[at(j)] = T::of_i64(a ^ flip);
                            }
                        }
                    }
                }
            });
            Ok(())
        }
        Op::ReduceWindow { op: r, window_dimensions, window_strides, padding, base_dilation, window_dilation } => {
            let out_dims = out.shape().to_vec();
            let in_st = strides_of(&dims);
            let src = Buf::read(x, *r);
            let mut acc = Buf::identity(*r, d, out.numel());
            let mut o_flat = 0;
            for_each_index(&out_dims, |o| {
                for_each_index(window_dimensions, |w| {
                    // Position in the padded, base-dilated operand; padding and dilation holes
                    // read the identity, i.e. contribute nothing.
                    let mut at = 0usize;
                    for ax in 0..dims.len() {
                        let p = (o[ax] * window_strides[ax] + w[ax] * window_dilation[ax]) as i64 - padding[ax].0;
                        let bd = base_dilation[ax] as i64;
                        if p < 0 || p % bd != 0 || p / bd >= dims[ax] as i64 {
                            return;
                        }
                        at += (p / bd) as usize * in_st[ax];
                    }
                    acc.combine(*r, o_flat, &src, at);
                });
                o_flat += 1;
            });
            acc.store(out, *r);
            Ok(())
        }
        _ => unreachable!(),
    }
}

/// The type of `x` if it is an existing single-result node of `g`.
pub(crate) fn operand_type(g: &Graph, x: NodeId) -> Option<Shape> {
    (x.index() < g.nodes.len() && !g.nodes[x.index()].is_tuple()).then(|| g.shape(x).clone())
}

/// Record a bad builder argument for `op` and return a placeholder node (`f32[]`) carrying
/// `op`, so the graph stays buildable; the recorded error is what `verify` reports.
pub(crate) fn bad_argument(g: &mut Graph, op: Op, inputs: &[NodeId], msg: String) -> NodeId {
    let name = op.name();
    let node = g.nodes.len();
    let msg = match inputs.iter().map(|&i| operand_type(g, i)).collect::<Option<Vec<_>>>() {
        Some(s) if !s.is_empty() => {
            format!("{msg} (operands: {})", s.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(", "))
        }
        _ => msg,
    };
    g.record_error(IrError::Shape { node, op: name, msg });
    let inputs = inputs.iter().copied().filter(|i| i.index() < node).collect();
    g.push_node(Node { op, inputs, outputs: vec![Shape::scalar(DType::F32)] })
}

/// Normalize one NumPy-style axis against `x`'s rank; `Err` names the axis and shape.
fn builder_axis(g: &Graph, x: NodeId, axis: i64) -> Result<usize, String> {
    let Some(s) = operand_type(g, x) else { return Ok(0) };
    normalize_axis(axis, s.rank()).ok_or_else(|| format!("axis {axis} out of range for {s}"))
}

fn arg_reduce(g: &mut Graph, x: NodeId, op: ReduceOp, axis: i64, index_dtype: DType) -> NodeId {
    match builder_axis(g, x, axis) {
        Ok(axis) => g.push(Op::ArgReduce { op, axis, index_dtype }, &[x]),
        Err(msg) => bad_argument(g, Op::ArgReduce { op, axis: 0, index_dtype }, &[x], msg),
    }
}

/// Builders of the reduction family. Axes may be negative (NumPy convention); a bad or
/// repeated axis records an [`IrError::Shape`] and returns a placeholder node.
impl Graph {
    /// `lax.reduce_{op}` of `x` over `axes` (negative allowed, order free, no duplicates).
    ///
    /// Shape: `x`'s dims without `axes`, or with them set to 1 when `keepdims` (NumPy's
    /// `keepdims=True`, emitted as a following `reshape`). Dtype: `x`'s. Errors: an axis out of
    /// range or repeated, a dtype the op does not accept (see [`ReduceOp::accepts`]).
    pub fn reduce(&mut self, x: NodeId, op: ReduceOp, axes: &[i64], keepdims: bool) -> NodeId {
        if operand_type(self, x).is_none() {
            // A missing or tuple operand: `push` records that error.
            return self.push(Op::Reduce { op, axes: vec![] }, &[x]);
        }
        let mut norm = Vec::with_capacity(axes.len());
        for &a in axes {
            match builder_axis(self, x, a) {
                Ok(n) if norm.contains(&n) => {
                    let op = Op::Reduce { op, axes: vec![] };
                    return bad_argument(self, op, &[x], format!("axis {a} repeated in {axes:?}"));
                }
                Ok(n) => norm.push(n),
                Err(msg) => return bad_argument(self, Op::Reduce { op, axes: vec![] }, &[x], msg),
            }
        }
        norm.sort_unstable();
        let y = self.push(Op::Reduce { op, axes: norm.clone() }, &[x]);
        match operand_type(self, x) {
            Some(s) if keepdims => {
                let new_sizes =
                    s.dims.iter().enumerate().map(|(i, d)| if norm.contains(&i) { Dim::Static(1) } else { d.clone() });
                self.push(Op::Reshape { new_sizes: new_sizes.collect() }, &[y])
            }
            _ => y,
        }
    }

    /// `lax.reduce_sum` (NumPy `sum`); see [`Graph::reduce`].
    pub fn sum(&mut self, x: NodeId, axes: &[i64], keepdims: bool) -> NodeId {
        self.reduce(x, ReduceOp::Sum, axes, keepdims)
    }

    /// `lax.reduce_prod` (NumPy `prod`); see [`Graph::reduce`].
    pub fn prod(&mut self, x: NodeId, axes: &[i64], keepdims: bool) -> NodeId {
        self.reduce(x, ReduceOp::Prod, axes, keepdims)
    }

    /// `lax.reduce_max` (NumPy `max`, NaN-propagating); see [`Graph::reduce`].
    pub fn reduce_max(&mut self, x: NodeId, axes: &[i64], keepdims: bool) -> NodeId {
        self.reduce(x, ReduceOp::Max, axes, keepdims)
    }

    /// `lax.reduce_min` (NumPy `min`, NaN-propagating); see [`Graph::reduce`].
    pub fn reduce_min(&mut self, x: NodeId, axes: &[i64], keepdims: bool) -> NodeId {
        self.reduce(x, ReduceOp::Min, axes, keepdims)
    }

    /// NumPy `mean`: `sum(x, axes) / count` where `count` is the product of the reduced dims
    /// (a mean over size 0 is NaN, as NumPy). Float dtypes only; the reduced dims must be
    /// static. Shape as [`Graph::reduce`].
    pub fn mean(&mut self, x: NodeId, axes: &[i64], keepdims: bool) -> NodeId {
        let Some(s) = operand_type(self, x) else { return self.sum(x, axes, keepdims) };
        let op = Op::Reduce { op: ReduceOp::Sum, axes: vec![] };
        if !s.dtype.is_float() {
            return bad_argument(self, op, &[x], format!("mean needs a float dtype, not {}", s.dtype));
        }
        let mut count = 1usize;
        for &a in axes {
            match normalize_axis(a, s.rank()).map(|n| &s.dims[n]) {
                Some(Dim::Static(n)) => count *= n,
                Some(sym) => return bad_argument(self, op, &[x], format!("mean over symbolic dim {sym} of {s}")),
                None => return bad_argument(self, op, &[x], format!("axis {a} out of range for {s}")),
            }
        }
        let total = self.sum(x, axes, keepdims);
        let c = self.scalar(count as f64, s.dtype);
        self.div(total, c)
    }

    /// `lax.argmax(x, axis, index_dtype)`: index of the first maximum along `axis` (removed);
    /// NaN counts as the maximum. Errors: bad axis, size-0 axis, non-integer `index_dtype`.
    pub fn argmax(&mut self, x: NodeId, axis: i64, index_dtype: DType) -> NodeId {
        arg_reduce(self, x, ReduceOp::Max, axis, index_dtype)
    }

    /// `lax.argmin(x, axis, index_dtype)`: index of the first minimum along `axis` (removed);
    /// NaN counts as the minimum. Errors as [`Graph::argmax`].
    pub fn argmin(&mut self, x: NodeId, axis: i64, index_dtype: DType) -> NodeId {
        arg_reduce(self, x, ReduceOp::Min, axis, index_dtype)
    }

    /// `lax.cumsum(x, axis, reverse)`: running sum along `axis`; shape and dtype of `x`.
    pub fn cumsum(&mut self, x: NodeId, axis: i64, reverse: bool) -> NodeId {
        self.cumulative(CumulativeOp::Sum, x, axis, reverse)
    }

    /// `lax.cumsum` / `cumprod` / `cummax` / `cummin` along `axis` (negative allowed), from the
    /// end when `reverse`. Shape and dtype of `x`; bool is accepted by `cummax`/`cummin` only.
    pub fn cumulative(&mut self, op: CumulativeOp, x: NodeId, axis: i64, reverse: bool) -> NodeId {
        match builder_axis(self, x, axis) {
            Ok(axis) => self.push(Op::Cumulative { op, axis, reverse }, &[x]),
            Err(msg) => bad_argument(self, Op::Cumulative { op, axis: 0, reverse }, &[x], msg),
        }
    }

    /// `lax.reduce_window` with the op's identity as init and no dilation (pooling).
    ///
    /// `window`, `strides` and `padding` (low, high; negative crops) have one entry per dim of
    /// `x`. Output dims: `floor((in + lo + hi - window) / stride) + 1`. Errors: wrong list
    /// lengths, zero window or stride, op other than sum/max/min.
    pub fn reduce_window(
        &mut self,
        x: NodeId,
        op: ReduceOp,
        window: &[usize],
        strides: &[usize],
        padding: &[(i64, i64)],
    ) -> NodeId {
        let ones = vec![1; window.len()];
        self.reduce_window_dilated(x, op, window, strides, padding, &ones, &ones)
    }

    /// `lax.reduce_window` with base (operand) and window dilation; see the module docs for
    /// the output size. Errors as [`Graph::reduce_window`], plus zero dilations.
    #[allow(clippy::too_many_arguments)]
    pub fn reduce_window_dilated(
        &mut self,
        x: NodeId,
        op: ReduceOp,
        window: &[usize],
        strides: &[usize],
        padding: &[(i64, i64)],
        base_dilation: &[usize],
        window_dilation: &[usize],
    ) -> NodeId {
        let op = Op::ReduceWindow {
            op,
            window_dimensions: window.to_vec(),
            window_strides: strides.to_vec(),
            padding: padding.to_vec(),
            base_dilation: base_dilation.to_vec(),
            window_dilation: window_dilation.to_vec(),
        };
        self.push(op, &[x])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::evaluate_args;

    /// Build `f(g, x)` over one input of `t`'s type and evaluate it on `t`.
    fn run1(t: &Tensor, f: impl FnOnce(&mut Graph, NodeId) -> NodeId) -> Result<Tensor, IrError> {
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::new(t.shape(), t.dtype()));
        let y = f(&mut g, x);
        g.set_outputs(vec![y]);
        crate::verify(&g)?;
        Ok(evaluate_args(&g, &[t])?.remove(0))
    }

    fn f32s(v: &[f32], shape: &[usize]) -> Tensor {
        Tensor::from_vec(v.to_vec(), shape).unwrap()
    }

    fn build_err(t: &Shape, f: impl FnOnce(&mut Graph, NodeId) -> NodeId) -> String {
        let mut g = Graph::new("t");
        let x = g.input("x", t.clone());
        f(&mut g, x);
        g.error().expect("expected a recorded error").to_string()
    }

    #[test]
    fn sum_over_axes_and_negative_axes() {
        let x = f32s(&[1., 2., 3., 4., 5., 6.], &[2, 3]);
        let r = run1(&x, |g, x| g.sum(x, &[0], false)).unwrap();
        assert_eq!((r.shape(), r.to_f64_vec()), (&[3][..], vec![5., 7., 9.]));
        let r = run1(&x, |g, x| g.sum(x, &[-1], false)).unwrap();
        assert_eq!((r.shape(), r.to_f64_vec()), (&[2][..], vec![6., 15.]));
        let r = run1(&x, |g, x| g.sum(x, &[1, 0], false)).unwrap();
        assert_eq!((r.shape(), r.to_f64_vec()), (&[][..], vec![21.]));
        let r = run1(&x, |g, x| g.sum(x, &[], false)).unwrap();
        assert_eq!(r, x);
    }

    #[test]
    fn reduce_middle_axis_of_rank3() {
        let v: Vec<i32> = (0..24).collect();
        let x = Tensor::from_vec(v, &[2, 3, 4]).unwrap();
        let r = run1(&x, |g, x| g.sum(x, &[1], false)).unwrap();
        assert_eq!(r.shape(), &[2, 4]);
        // [0..4]+[4..8]+[8..12] = 12,15,18,21; second block +36 each.
        assert_eq!(r.as_slice::<i32>().unwrap(), &[12, 15, 18, 21, 48, 51, 54, 57]);
        let r = run1(&x, |g, x| g.reduce_max(x, &[0, 2], false)).unwrap();
        assert_eq!(r.as_slice::<i32>().unwrap(), &[15, 19, 23]);
    }

    #[test]
    fn prod_max_min_and_or_across_dtypes() {
        let x = Tensor::from_vec(vec![2i8, -3, 4, 100, 2, 1], &[2, 3]).unwrap();
        let r = run1(&x, |g, x| g.prod(x, &[1], false)).unwrap();
        // 100*2*1 = 200 wraps in i8 to -56.
        assert_eq!(r.as_slice::<i8>().unwrap(), &[-24, -56]);
        let r = run1(&x, |g, x| g.reduce_min(x, &[0], false)).unwrap();
        assert_eq!(r.as_slice::<i8>().unwrap(), &[2, -3, 1]);
        let u = Tensor::from_vec(vec![u32::MAX, 7, 6, 14], &[4]).unwrap();
        let r = run1(&u, |g, x| g.sum(x, &[0], false)).unwrap();
        assert_eq!(r.as_slice::<u32>().unwrap(), &[26]); // wraps mod 2^32
        let r = run1(&u, |g, x| g.reduce(x, ReduceOp::And, &[0], false)).unwrap();
        assert_eq!(r.as_slice::<u32>().unwrap(), &[6]);
        let r = run1(&u, |g, x| g.reduce(x, ReduceOp::Or, &[0], false)).unwrap();
        assert_eq!(r.as_slice::<u32>().unwrap(), &[u32::MAX]);
        let b = Tensor::from_vec(vec![true, false, true, true], &[2, 2]).unwrap();
        let r = run1(&b, |g, x| g.reduce(x, ReduceOp::And, &[1], false)).unwrap();
        assert_eq!(r.as_slice::<bool>().unwrap(), &[false, true]);
        let r = run1(&b, |g, x| g.reduce(x, ReduceOp::Or, &[1], false)).unwrap();
        assert_eq!(r.as_slice::<bool>().unwrap(), &[true, true]);
        let r = run1(&b, |g, x| g.reduce_max(x, &[0], false)).unwrap();
        assert_eq!(r.as_slice::<bool>().unwrap(), &[true, true]);
        let h = Tensor::from_f64s(&[3], DType::F16, &[0.5, 0.25, 2.0]).unwrap();
        let r = run1(&h, |g, x| g.prod(x, &[0], false)).unwrap();
        assert_eq!((r.dtype(), r.to_f64_vec()), (DType::F16, vec![0.25]));
    }

    #[test]
    fn float_sum_accumulates_in_f64() {
        // In f32, 1e8 + 1 + ... loses the ones; the f64 reference keeps them and rounds once.
        let mut v = vec![1e8f32];
        v.extend(std::iter::repeat_n(1.0f32, 16));
        v.push(-1e8);
        let r = run1(&f32s(&v, &[18]), |g, x| g.sum(x, &[0], false)).unwrap();
        assert_eq!(r.to_f64_vec(), vec![16.0]);
    }

    #[test]
    fn max_min_propagate_nan() {
        let x = f32s(&[1., f32::NAN, 3., 4., 5., 6.], &[2, 3]);
        let r = run1(&x, |g, x| g.reduce_max(x, &[1], false)).unwrap();
        let v = r.to_f64_vec();
        assert!(v[0].is_nan() && v[1] == 6.0);
        let r = run1(&x, |g, x| g.reduce_min(x, &[1], false)).unwrap();
        let v = r.to_f64_vec();
        assert!(v[0].is_nan() && v[1] == 4.0);
    }

    #[test]
    fn size_zero_axis_gives_identity() {
        let x = Tensor::zeros(&[2, 0], DType::F32);
        let r = |op| run1(&x, |g, x| g.reduce(x, op, &[1], false)).unwrap().to_f64_vec();
        assert_eq!(r(ReduceOp::Sum), vec![0.0, 0.0]);
        assert_eq!(r(ReduceOp::Prod), vec![1.0, 1.0]);
        assert_eq!(r(ReduceOp::Max), vec![f64::NEG_INFINITY; 2]);
        assert_eq!(r(ReduceOp::Min), vec![f64::INFINITY; 2]);
        let x = Tensor::zeros(&[0, 3], DType::I16);
        let r = run1(&x, |g, x| g.reduce_max(x, &[0], false)).unwrap();
        assert_eq!(r.as_slice::<i16>().unwrap(), &[i16::MIN; 3]);
        let r = run1(&x, |g, x| g.reduce_min(x, &[0], false)).unwrap();
        assert_eq!(r.as_slice::<i16>().unwrap(), &[i16::MAX; 3]);
        let x = Tensor::zeros(&[0], DType::U8);
        let r = run1(&x, |g, x| g.reduce(x, ReduceOp::And, &[0], false)).unwrap();
        assert_eq!(r.as_slice::<u8>().unwrap(), &[255]);
        let x = Tensor::zeros(&[0], DType::Bool);
        let r = run1(&x, |g, x| g.reduce(x, ReduceOp::And, &[0], false)).unwrap();
        assert_eq!(r.as_slice::<bool>().unwrap(), &[true]);
        // Reducing a non-empty axis of an empty tensor gives an empty result.
        let x = Tensor::zeros(&[0, 3], DType::F32);
        let r = run1(&x, |g, x| g.sum(x, &[1], false)).unwrap();
        assert_eq!(r.shape(), &[0]);
    }

    #[test]
    fn reduce_errors_name_axes_and_shapes() {
        let s = Shape::new(&[2, 3], DType::F32);
        let e = build_err(&s, |g, x| g.sum(x, &[2], false));
        assert!(e.contains("axis 2") && e.contains("f32[2,3]"), "{e}");
        let e = build_err(&s, |g, x| g.sum(x, &[1, -1], false));
        assert!(e.contains("repeated") && e.contains("f32[2,3]"), "{e}");
        let e = build_err(&s, |g, x| g.reduce(x, ReduceOp::And, &[0], false));
        assert!(e.contains("does not accept f32"), "{e}");
        let e = build_err(&Shape::new(&[2], DType::Bool), |g, x| g.sum(x, &[0], false));
        assert!(e.contains("does not accept bool"), "{e}");
        // The op itself insists on sorted, unique, in-range axes.
        let s = Shape::new(&[2, 3], DType::F32);
        assert!(Op::Reduce { op: ReduceOp::Sum, axes: vec![1, 0] }.infer(&[&s], None).is_err());
        assert!(Op::Reduce { op: ReduceOp::Sum, axes: vec![3] }.infer(&[&s], None).is_err());
    }

    #[test]
    fn keepdims_emits_a_reshape() {
        let mut g = Graph::new("t");
        let x = g.input("x", Shape::from_dims(&[Dim::dynamic(), Dim::Static(3)], DType::F32));
        let y = g.sum(x, &[-1], true);
        let n = g.node(y);
        assert_eq!(n.op, Op::Reshape { new_sizes: vec![Dim::dynamic(), Dim::Static(1)] });
        assert_eq!(g.node(n.inputs[0]).ty(), &Shape::from_dims(&[Dim::dynamic()], DType::F32));
    }

    #[test]
    fn mean_divides_by_count() {
        let x = f32s(&[1., 2., 3., 4., 5., 6.], &[2, 3]);
        let r = run1(&x, |g, x| g.mean(x, &[1], false)).unwrap();
        assert_eq!(r.to_f64_vec(), vec![2.0, 5.0]);
        let r = run1(&x, |g, x| g.mean(x, &[0, 1], false)).unwrap();
        assert_eq!(r.to_f64_vec(), vec![3.5]);
        let e = build_err(&Shape::new(&[2], DType::I32), |g, x| g.mean(x, &[0], false));
        assert!(e.contains("float"), "{e}");
    }

    #[test]
    fn argmax_argmin_first_index_and_nan() {
        let x = f32s(&[1., 3., 3., 0., 0., -1., f32::NAN, 2., f32::NAN], &[3, 3]);
        let r = run1(&x, |g, x| g.argmax(x, 1, DType::I32)).unwrap();
        assert_eq!(r.as_slice::<i32>().unwrap(), &[1, 0, 0]);
        let r = run1(&x, |g, x| g.argmin(x, -1, DType::I64)).unwrap();
        assert_eq!(r.as_slice::<i64>().unwrap(), &[0, 2, 0]);
        let r = run1(&x, |g, x| g.argmax(x, 0, DType::U8)).unwrap();
        assert_eq!(r.as_slice::<u8>().unwrap(), &[2, 0, 2]);
        let i = Tensor::from_vec(vec![i64::MAX - 1, i64::MAX, i64::MAX], &[3]).unwrap();
        let r = run1(&i, |g, x| g.argmax(x, 0, DType::I32)).unwrap();
        assert_eq!(r.as_slice::<i32>().unwrap(), &[1]);
        let b = Tensor::from_vec(vec![false, true, true], &[3]).unwrap();
        let r = run1(&b, |g, x| g.argmin(x, 0, DType::I32)).unwrap();
        assert_eq!(r.as_slice::<i32>().unwrap(), &[0]);
    }

    #[test]
    fn argmax_errors() {
        let e = build_err(&Shape::new(&[2, 0], DType::F32), |g, x| g.argmax(x, 1, DType::I32));
        assert!(e.contains("size-0") && e.contains("f32[2,0]"), "{e}");
        let e = build_err(&Shape::new(&[2], DType::F32), |g, x| g.argmax(x, 1, DType::I32));
        assert!(e.contains("axis 1") && e.contains("f32[2]"), "{e}");
        let e = build_err(&Shape::new(&[2], DType::F32), |g, x| g.argmax(x, 0, DType::F32));
        assert!(e.contains("index dtype"), "{e}");
        let e = build_err(&Shape::new(&[300], DType::F32), |g, x| g.argmax(x, 0, DType::I8));
        assert!(e.contains("i8"), "{e}");
        // An empty operand is fine as long as the reduced axis is not size 0.
        let r = run1(&Tensor::zeros(&[0, 2], DType::F32), |g, x| g.argmax(x, 1, DType::I32)).unwrap();
        assert_eq!(r.shape(), &[0]);
    }

    #[test]
    fn cumulative_ops() {
        let x = Tensor::from_vec(vec![1i32, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
        let r = run1(&x, |g, x| g.cumsum(x, 1, false)).unwrap();
        assert_eq!(r.as_slice::<i32>().unwrap(), &[1, 3, 6, 4, 9, 15]);
        let r = run1(&x, |g, x| g.cumsum(x, -1, true)).unwrap();
        assert_eq!(r.as_slice::<i32>().unwrap(), &[6, 5, 3, 15, 11, 6]);
        let r = run1(&x, |g, x| g.cumulative(CumulativeOp::Prod, x, 0, false)).unwrap();
        assert_eq!(r.as_slice::<i32>().unwrap(), &[1, 2, 3, 4, 10, 18]);
        let y = f32s(&[1., 3., 2., f32::NAN, 0.], &[5]);
        let r = run1(&y, |g, x| g.cumulative(CumulativeOp::Max, x, 0, false)).unwrap().to_f64_vec();
        assert_eq!(&r[..3], &[1., 3., 3.]);
        assert!(r[3].is_nan() && r[4].is_nan());
        let r = run1(&y, |g, x| g.cumulative(CumulativeOp::Min, x, 0, true)).unwrap().to_f64_vec();
        assert!(r[0].is_nan() && r[3].is_nan());
        assert_eq!(r[4], 0.0);
        let r = run1(&Tensor::zeros(&[0, 2], DType::F32), |g, x| g.cumsum(x, 0, false)).unwrap();
        assert_eq!(r.shape(), &[0, 2]);
        let e = build_err(&Shape::new(&[2], DType::F32), |g, x| g.cumsum(x, -2, false));
        assert!(e.contains("axis -2") && e.contains("f32[2]"), "{e}");
        let e = build_err(&Shape::new(&[2], DType::Bool), |g, x| g.cumsum(x, 0, false));
        assert!(e.contains("bool"), "{e}");
    }

    #[test]
    fn reduce_window_pooling() {
        // 1x4x4 max pool 2x2 stride 2.
        let v: Vec<f32> = (0..16).map(|i| i as f32).collect();
        let x = f32s(&v, &[1, 4, 4]);
        let r = run1(&x, |g, x| g.reduce_window(x, ReduceOp::Max, &[1, 2, 2], &[1, 2, 2], &[(0, 0); 3])).unwrap();
        assert_eq!((r.shape(), r.to_f64_vec()), (&[1, 2, 2][..], vec![5., 7., 13., 15.]));
        // Sum with padding 1 each side, window 3, stride 1 on [1,2,3]: padded reads 0.
        let x = Tensor::from_vec(vec![1i32, 2, 3], &[3]).unwrap();
        let r = run1(&x, |g, x| g.reduce_window(x, ReduceOp::Sum, &[3], &[1], &[(1, 1)])).unwrap();
        assert_eq!(r.as_slice::<i32>().unwrap(), &[3, 6, 5]);
        // Max with padding: the identity (-inf) never wins.
        let x = f32s(&[-5., -2., -7.], &[3]);
        let r = run1(&x, |g, x| g.reduce_window(x, ReduceOp::Max, &[2], &[2], &[(1, 0)])).unwrap();
        assert_eq!(r.to_f64_vec(), vec![-5., -2.]);
        // Negative padding crops; stride leaves a remainder (floor).
        let x = Tensor::from_vec(vec![1i64, 2, 3, 4, 5, 6], &[6]).unwrap();
        let r = run1(&x, |g, x| g.reduce_window(x, ReduceOp::Min, &[2], &[3], &[(-1, 0)])).unwrap();
        assert_eq!(r.as_slice::<i64>().unwrap(), &[2, 5]);
    }

    #[test]
    fn reduce_window_dilations() {
        let x = Tensor::from_vec(vec![1i32, 2, 3, 4, 5], &[5]).unwrap();
        // Window dilation 2: window of 2 covers positions i, i+2.
        let r = run1(&x, |g, x| g.reduce_window_dilated(x, ReduceOp::Sum, &[2], &[1], &[(0, 0)], &[1], &[2])).unwrap();
        assert_eq!(r.as_slice::<i32>().unwrap(), &[4, 6, 8]);
        // Base dilation 2: [1,_,2,_,3], window 2 stride 1 -> holes read 0.
        let x = Tensor::from_vec(vec![1i32, 2, 3], &[3]).unwrap();
        let r = run1(&x, |g, x| g.reduce_window_dilated(x, ReduceOp::Sum, &[2], &[1], &[(0, 0)], &[2], &[1])).unwrap();
        assert_eq!(r.as_slice::<i32>().unwrap(), &[1, 2, 2, 3]);
    }

    #[test]
    fn reduce_window_shapes_and_errors() {
        let ty = |x: &Shape, w: &[usize], s: &[usize], p: &[(i64, i64)]| {
            let n = x.rank();
            let op = Op::ReduceWindow {
                op: ReduceOp::Sum,
                window_dimensions: w.to_vec(),
                window_strides: s.to_vec(),
                padding: p.to_vec(),
                base_dilation: vec![1; n],
                window_dilation: vec![1; n],
            };
            op.infer(&[x], None)
        };
        let x = Shape::new(&[5, 0], DType::F32);
        assert_eq!(ty(&x, &[2, 1], &[2, 1], &[(0, 0); 2]).unwrap()[0], Shape::new(&[2, 0], DType::F32));
        // Window larger than the input: empty output.
        assert_eq!(ty(&x, &[6, 1], &[1, 1], &[(0, 0); 2]).unwrap()[0], Shape::new(&[0, 0], DType::F32));
        let e = ty(&x, &[2], &[1], &[(0, 0)]).unwrap_err();
        assert!(e.contains("f32[5,0]"), "{e}");
        assert!(ty(&x, &[0, 1], &[1, 1], &[(0, 0); 2]).is_err());
        assert!(ty(&x, &[1, 1], &[1, 1], &[(-6, 0), (0, 0)]).is_err());
        let sym = Shape::from_dims(&[Dim::dynamic(), Dim::Static(4)], DType::F32);
        let out = ty(&sym, &[1, 2], &[1, 2], &[(0, 0); 2]).unwrap();
        assert_eq!(out[0], Shape::from_dims(&[Dim::dynamic(), Dim::Static(2)], DType::F32));
        assert!(ty(&sym, &[2, 2], &[1, 2], &[(0, 0); 2]).is_err());
        let e =
            build_err(&Shape::new(&[4], DType::F32), |g, x| g.reduce_window(x, ReduceOp::Prod, &[2], &[1], &[(0, 0)]));
        assert!(e.contains("sum, max and min"), "{e}");
    }
}
