//! Fast elementwise kernels: f32 unary / binary / compare, `select` (any dtype), float
//! conversions, and allocation-free copies (`reshape`, `stop_gradient`, same-dtype convert).
//!
//! Operands are contiguous and either the output's shape, a scalar, a "row" (the output's
//! trailing dims, repeated) or a "column" (the output's leading dims, each value repeated over
//! the trailing dims). Other broadcasts run the reference evaluation. Results equal the
//! reference's (which computes in f64 and rounds) within f32 rounding: `add`..`div`, `max`,
//! `min`, `sqrt`, `abs`, `neg`, `floor`, `ceil`, comparisons and `select` are bit-identical;
//! `exp` and `logistic` use [`super::simd::exp_f32`] (about 1 ulp), `tanh` uses
//! [`super::simd::tanh_f32`] (about 2 ulp), `erf` uses [`super::simd::erf_f32`] (about 1e-7
//! absolute); every other unary op
//! evaluates the reference's f64 formula per element (bit-identical, parallel, not
//! vectorized).

use super::simd::{PAR_THRESHOLD, dispatch, erf_f32, exp_f32, has_avx512, tanh_f32, threads};
use super::spin;
use rlx_ir::ops::{BinaryOp, CompareOp, UnaryOp};
use rlx_ir::{DType, Elem, IrError, Op, Tensor, with_dtype};

/// How one operand is read for output element `i` (contiguous storage).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Same shape as the output: element `i`.
    Full,
    /// One element.
    Scalar,
    /// The output's trailing dims of total size `r`: element `i % r`.
    Row(usize),
    /// The output's leading dims, constant over trailing blocks of size `c`: element `i / c`.
    Col(usize),
}

/// Per-operand access modes plus the block size every mode is valid within.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bcast {
    /// One mode per operand.
    pub access: Vec<Access>,
    /// Every `Row(r)` and `Col(c)` is a multiple of `block`, so within one aligned block each
    /// operand is a contiguous slice or a single value.
    pub block: usize,
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

/// Classify each operand's broadcast against the output dims; `None` when one is not
/// full / scalar / row / column.
pub fn plan_bcast(out: &[usize], ins: &[&[usize]]) -> Option<Bcast> {
    let n: usize = out.iter().product();
    let mut block = 0usize;
    let mut access = Vec::with_capacity(ins.len());
    for d in ins {
        if d.len() > out.len() {
            return None;
        }
        let pad: Vec<usize> = std::iter::repeat_n(1, out.len() - d.len()).chain(d.iter().copied()).collect();
        let numel: usize = pad.iter().product();
        let a = if pad == out {
            Access::Full
        } else if numel == 1 {
            Access::Scalar
        } else {
            // Axes where the operand matches the output (ignoring out dims of size 1).
            let matches: Vec<bool> = pad.iter().zip(out).map(|(&p, &o)| p == o).collect();
            if pad.iter().zip(out).any(|(&p, &o)| p != o && p != 1) {
                return None;
            }
            let rel: Vec<usize> = (0..out.len()).filter(|&i| out[i] != 1).collect();
            let first_bcast = rel.iter().position(|&i| !matches[i]).unwrap_or(rel.len());
            let last_bcast = rel.iter().rposition(|&i| !matches[i]).unwrap_or(0);
            let suffix_matches = rel[last_bcast + 1..].iter().all(|&i| matches[i]);
            let prefix_all_bcast = rel[..=last_bcast].iter().all(|&i| !matches[i]);
            let prefix_matches = rel[..first_bcast].iter().all(|&i| matches[i]);
            let suffix_all_bcast = rel[first_bcast..].iter().all(|&i| !matches[i]);
            if suffix_matches && prefix_all_bcast {
                Access::Row(numel)
            } else if prefix_matches && suffix_all_bcast {
                Access::Col(n / numel.max(1))
            } else {
                return None;
            }
        };
        match a {
            Access::Row(r) => block = gcd(block, r),
            Access::Col(c) => block = gcd(block, c),
            _ => {}
        }
        access.push(a);
    }
    Some(Bcast { access, block: if block == 0 { n.max(1) } else { block } })
}

/// One operand's view over an output segment.
#[derive(Clone, Copy)]
pub(crate) enum Src<'a, T> {
    Slice(&'a [T]),
    Scalar(T),
}

impl<'a, T: Copy> Src<'a, T> {
    /// The view of `x` for output elements `[s, s + len)` (within one block).
    #[inline(always)]
    pub(crate) fn at(x: &'a [T], a: Access, s: usize, len: usize) -> Src<'a, T> {
        match a {
            Access::Full => Src::Slice(&x[s..s + len]),
            Access::Scalar => Src::Scalar(x[0]),
            Access::Row(r) => {
                let o = s % r;
                Src::Slice(&x[o..o + len])
            }
            Access::Col(c) => Src::Scalar(x[s / c]),
        }
    }
}

/// Split the output into parallel chunks, then into segments that stay within one block, and
/// call `seg(start, out_segment)` for each.
fn for_segments<O: Send>(out: &mut [O], block: usize, seg: impl Fn(usize, &mut [O]) + Sync) {
    let n = out.len();
    let run = |base: usize, chunk: &mut [O]| {
        let mut p = 0;
        while p < chunk.len() {
            let s = base + p;
            let end = ((s / block + 1) * block).min(base + chunk.len());
            seg(s, &mut chunk[p..end - base]);
            p = end - base;
        }
    };
    let t = threads();
    if n >= PAR_THRESHOLD && t > 1 {
        let chunk = n.div_ceil(t * 4).max(PAR_THRESHOLD / 4).next_multiple_of(64);
        // On the executor's spinning team (a rayon hand-off wakes sleeping workers: tens of µs,
        // the whole of a small step's op).
        spin::for_chunks_mut(out, chunk, |i, c| run(i * chunk, c));
    } else {
        run(0, out);
    }
}

/// The fast elementwise kernels (see the module docs for what each covers).
#[derive(Clone, Debug)]
pub enum EwKernel {
    /// f32 unary op (output f32, or bool for `is_finite`).
    Unary(UnaryOp),
    /// f32 binary op with the given broadcast plan.
    Binary(BinaryOp, Bcast),
    /// f32 comparison with the given broadcast plan.
    Compare(CompareOp, Bcast),
    /// Integer comparison (any int dtype; e.g. labels against an iota in cross-entropy's one-hot)
    /// with the given broadcast plan.
    CompareInt(CompareOp, Bcast),
    /// `select` of any dtype with the given broadcast plan (pred, on_true, on_false).
    Select(Bcast),
    /// Contiguous same-dtype copy (`reshape`, `stop_gradient`, identity convert).
    Copy,
    /// `convert_element_type` into the preallocated output (floats via f32, else the `Elem`
    /// conversion rules).
    Convert,
}

impl EwKernel {
    /// Name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            EwKernel::Unary(_) => "ew_unary_f32",
            EwKernel::Binary(..) => "ew_binary_f32",
            EwKernel::Compare(..) => "ew_compare_f32",
            EwKernel::CompareInt(..) => "ew_compare_int",
            EwKernel::Select(_) => "ew_select",
            EwKernel::Copy => "copy",
            EwKernel::Convert => "convert",
        }
    }
}

/// Pick an elementwise kernel for `op` on operands of `in_shapes` (dims, dtype) giving `out`.
pub fn select(op: &Op, ins: &[(Vec<usize>, DType)], out: &(Vec<usize>, DType)) -> Option<EwKernel> {
    let dims: Vec<&[usize]> = ins.iter().map(|(d, _)| d.as_slice()).collect();
    match op {
        Op::Unary(u) if ins[0].1 == DType::F32 => Some(EwKernel::Unary(*u)),
        Op::Binary(b) if ins[0].1 == DType::F32 && out.1 == DType::F32 => {
            Some(EwKernel::Binary(*b, plan_bcast(&out.0, &dims)?))
        }
        Op::Compare(c) if ins[0].1 == DType::F32 => Some(EwKernel::Compare(*c, plan_bcast(&out.0, &dims)?)),
        Op::Compare(c) if ins[0].1.is_int() => Some(EwKernel::CompareInt(*c, plan_bcast(&out.0, &dims)?)),
        Op::Select => Some(EwKernel::Select(plan_bcast(&out.0, &dims)?)),
        Op::ConvertElementType(d) if *d == ins[0].1 => Some(EwKernel::Copy),
        Op::ConvertElementType(_) => Some(EwKernel::Convert),
        Op::StopGradient | Op::Reshape { .. } if ins[0].1 == out.1 => Some(EwKernel::Copy),
        _ => None,
    }
}

fn bad(op: &str, msg: &str) -> IrError {
    IrError::Eval { op: op.into(), msg: msg.into() }
}

/// Execute an elementwise kernel into the preallocated `out`.
pub fn run(k: &EwKernel, ins: &[&Tensor], out: &mut Tensor) -> Result<(), IrError> {
    fn f32s<'a>(k: &EwKernel, t: &'a Tensor) -> Result<&'a [f32], IrError> {
        t.as_slice::<f32>().ok_or_else(|| bad(k.name(), "expected f32 operands"))
    }
    match k {
        EwKernel::Unary(u) => {
            let x = f32s(k, ins[0])?;
            match out.dtype() {
                DType::F32 => unary(*u, x, out.as_mut_slice::<f32>().unwrap()),
                DType::Bool => {
                    let o = out.as_mut_slice::<bool>().unwrap();
                    for_segments(o, o.len().max(1), |s, seg| {
                        dispatch(
                            #[inline(always)]
                            || seg.iter_mut().zip(&x[s..]).for_each(|(o, &v)| *o = v.is_finite()),
                        )
                    });
                }
                _ => return Err(bad(u.name(), "unexpected output dtype")),
            }
        }
        EwKernel::Binary(b, p) => {
            let (x, y) = (f32s(k, ins[0])?, f32s(k, ins[1])?);
            let o = out.as_mut_slice::<f32>().ok_or_else(|| bad(b.name(), "expected f32 output"))?;
            binary(*b, p, x, y, o);
        }
        EwKernel::Compare(c, p) => {
            let (x, y) = (f32s(k, ins[0])?, f32s(k, ins[1])?);
            let o = out.as_mut_slice::<bool>().ok_or_else(|| bad(c.name(), "expected bool output"))?;
            compare(*c, p, x, y, o);
        }
        EwKernel::CompareInt(c, p) => {
            let o = out.as_mut_slice::<bool>().ok_or_else(|| bad(c.name(), "expected bool output"))?;
            let dt = ins[0].dtype();
            if !dt.is_int() || ins[1].dtype() != dt {
                return Err(bad(k.name(), "expected integer operands of one dtype"));
            }
            with_dtype!(dt, T, {
                compare::<T>(*c, p, ins[0].as_slice::<T>().unwrap(), ins[1].as_slice::<T>().unwrap(), o)
            });
        }
        EwKernel::Select(p) => {
            let pred = ins[0].as_slice::<bool>().ok_or_else(|| bad("select", "predicate must be bool"))?;
            with_dtype!(out.dtype(), T, {
                let (a, b) = (ins[1].as_slice::<T>().unwrap(), ins[2].as_slice::<T>().unwrap());
                select_into::<T>(p, pred, a, b, out.as_mut_slice::<T>().unwrap());
            });
        }
        EwKernel::Copy => copy_into(ins[0], out)?,
        EwKernel::Convert => convert_into(ins[0], out),
    }
    Ok(())
}

/// Copy `x`'s storage into `out` (same dtype and element count).
pub fn copy_into(x: &Tensor, out: &mut Tensor) -> Result<(), IrError> {
    if x.dtype() != out.dtype() || x.numel() != out.numel() {
        return Err(bad("copy", "operand and result differ in dtype or size"));
    }
    with_dtype!(out.dtype(), T, {
        let (s, d) = (x.as_slice::<T>().unwrap(), out.as_mut_slice::<T>().unwrap());
        for_segments(d, s.len().max(1), |st, seg| seg.copy_from_slice(&s[st..st + seg.len()]));
    });
    Ok(())
}

/// `convert_element_type` into `out` without allocating. Float-to-float conversions go through
/// f32 (exact, since f16/bf16 widen exactly into f32) except from f64, which rounds once
/// directly to the target; everything else uses the [`Elem`] rules the reference uses.
pub fn convert_into(x: &Tensor, out: &mut Tensor) {
    use rlx_ir::half::{bf16, f16};
    let (sd, dd) = (x.dtype(), out.dtype());
    macro_rules! conv {
        ($S:ty, $D:ty, $f:expr) => {{
            let (s, d) = (x.as_slice::<$S>().unwrap(), out.as_mut_slice::<$D>().unwrap());
            for_segments(d, s.len().max(1), |st, seg| {
                dispatch(
                    #[inline(always)]
                    || seg.iter_mut().zip(&s[st..]).for_each(|(o, &v)| *o = $f(v)),
                )
            });
        }};
    }
    // f16 <-> f32 through the `half` crate's slice conversions, which use F16C when the CPU has
    // it (detected at run time); per element, `f16::to_f32` is a software conversion (a
    // decode step's f16 KV cache took 3.4 ms per token to widen that way).
    use rlx_ir::half::slice::HalfFloatSliceExt;
    match (sd, dd) {
        (DType::F16, DType::F32) => {
            let (s, d) = (x.as_slice::<f16>().unwrap(), out.as_mut_slice::<f32>().unwrap());
            let avx512 = has_avx512();
            for_segments(d, s.len().max(1), |st, seg| {
                let src = &s[st..st + seg.len()];
                if avx512 {
                    // SAFETY: AVX-512F checked above.
                    unsafe { super::avx512::widen_f16_slice(src, seg) }
                } else {
                    src.convert_to_f32_slice(seg)
                }
            });
        }
        (DType::F32, DType::F16) => {
            let (s, d) = (x.as_slice::<f32>().unwrap(), out.as_mut_slice::<f16>().unwrap());
            for_segments(d, s.len().max(1), |st, seg| seg.convert_from_f32_slice(&s[st..st + seg.len()]));
        }
        (DType::F32, DType::BF16) => conv!(f32, bf16, bf16::from_f32),
        (DType::BF16, DType::F32) => conv!(bf16, f32, bf16::to_f32),
        (DType::F32, DType::F64) => conv!(f32, f64, |v: f32| v as f64),
        (DType::F64, DType::F32) => conv!(f64, f32, |v: f64| v as f32),
        (DType::F16, DType::BF16) => conv!(f16, bf16, |v: f16| bf16::from_f32(v.to_f32())),
        (DType::BF16, DType::F16) => conv!(bf16, f16, |v: bf16| f16::from_f32(v.to_f32())),
        (DType::F16, DType::F64) => conv!(f16, f64, |v: f16| v.to_f32() as f64),
        (DType::BF16, DType::F64) => conv!(bf16, f64, |v: bf16| v.to_f32() as f64),
        (DType::F64, DType::F16) => conv!(f64, f16, <f16 as Elem>::of_f64),
        (DType::F64, DType::BF16) => conv!(f64, bf16, <bf16 as Elem>::of_f64),
        _ => with_dtype!(dd, D, {
            with_dtype!(sd, S, {
                // One rounding per conversion (`convert_elem`: ints go to floats through `of_i64`).
                let (s, d) = (x.as_slice::<S>().unwrap(), out.as_mut_slice::<D>().unwrap());
                for_segments(d, s.len().max(1), |st, seg| {
                    for (o, &v) in seg.iter_mut().zip(&s[st..]) {
                        *o = rlx_ir::convert_elem::<S, D>(v);
                    }
                });
            })
        }),
    }
}

fn unary(u: UnaryOp, x: &[f32], o: &mut [f32]) {
    for_segments(o, x.len().max(1), |s, seg| unary_block(u, &x[s..s + seg.len()], seg));
}

/// `o[i] = u(x[i])` for one f32 segment (`x` and `o` of equal length), vectorized where the
/// op allows: the one implementation of f32 unary math, shared by the fused kernel.
#[inline(always)]
pub(crate) fn unary_block(u: UnaryOp, x: &[f32], o: &mut [f32]) {
    use UnaryOp::*;
    macro_rules! map {
        ($f:expr) => {
            dispatch(
                // An index loop, not `zip().for_each()`: core's `Zip::fold` is not always
                // inlined into the AVX-512 function, and then compiles for baseline SSE
                // (profile of MiniLM's GELU: `erf` ran 4 lanes wide).
                #[inline(always)]
                || {
                    let n = o.len().min(x.len());
                    let (o, x) = (&mut o[..n], &x[..n]);
                    for i in 0..n {
                        o[i] = $f(x[i]);
                    }
                },
            )
        };
    }
    match u {
        Neg => map!(|v: f32| -v),
        Abs => map!(f32::abs),
        Floor => map!(f32::floor),
        Ceil => map!(f32::ceil),
        Sqrt => map!(f32::sqrt),
        Square => map!(|v: f32| v * v),
        Reciprocal => map!(|v: f32| 1.0 / v),
        Rsqrt => map!(|v: f32| 1.0 / v.sqrt()),
        // SAFETY (these five): `best` lists only functions the CPU runs.
        #[cfg(target_arch = "x86_64")]
        Exp | Erf | Erfc | Tanh | Logistic if let Some(m) = super::math_vec::MathKernels::best() => unsafe {
            match u {
                Exp => (m.exp)(x, o),
                Erf => (m.erf)(x, o),
                Erfc => (m.erfc)(x, o),
                Tanh => (m.tanh)(x, o),
                _ => (m.logistic)(x, o),
            }
        },
        Exp => map!(exp_f32),
        Tanh => map!(tanh_f32),
        Erf => map!(erf_f32),
        Logistic => map!(|v: f32| {
            let e = exp_f32(-v.abs());
            let r = 1.0 / (1.0 + e);
            if v >= 0.0 { r } else { e * r }
        }),
        other => o.iter_mut().zip(x).for_each(|(o, &v)| *o = other.apply_f64(v as f64) as f32),
    }
}

/// Apply `f` over one segment with operands resolved to slices or scalars; each of the four
/// shapes is its own monomorphized, bounds-check-free loop.
#[inline(always)]
pub(crate) fn zip2<T: Copy, O>(a: Src<'_, T>, b: Src<'_, T>, o: &mut [O], f: impl Fn(T, T) -> O) {
    // Index loops (see `unary_block`: iterator adapters may stay out of line, compiled for
    // the baseline target).
    let n = o.len();
    match (a, b) {
        (Src::Slice(a), Src::Slice(b)) => {
            let (a, b) = (&a[..n], &b[..n]);
            for i in 0..n {
                o[i] = f(a[i], b[i]);
            }
        }
        (Src::Slice(a), Src::Scalar(b)) => {
            let a = &a[..n];
            for i in 0..n {
                o[i] = f(a[i], b);
            }
        }
        (Src::Scalar(a), Src::Slice(b)) => {
            let b = &b[..n];
            for i in 0..n {
                o[i] = f(a, b[i]);
            }
        }
        (Src::Scalar(a), Src::Scalar(b)) => o.iter_mut().for_each(|o| *o = f(a, b)),
    }
}

fn binary(b: BinaryOp, p: &Bcast, x: &[f32], y: &[f32], o: &mut [f32]) {
    let (ax, ay) = (p.access[0], p.access[1]);
    for_segments(o, p.block, |s, seg| {
        let (a, c) = (Src::at(x, ax, s, seg.len()), Src::at(y, ay, s, seg.len()));
        binary_block(b, a, c, seg)
    })
}

/// `o[i] = a[i] ∘ b[i]` for one f32 segment with operands resolved to slices or scalars: the
/// one implementation of f32 binary math, shared by the fused kernel.
#[inline(always)]
pub(crate) fn binary_block(b: BinaryOp, x: Src<'_, f32>, y: Src<'_, f32>, o: &mut [f32]) {
    use BinaryOp::*;
    macro_rules! go {
        ($f:expr) => {
            dispatch(
                #[inline(always)]
                || zip2(x, y, o, $f),
            )
        };
    }
    match b {
        Add => go!(|a: f32, b: f32| a + b),
        Sub => go!(|a: f32, b: f32| a - b),
        Mul => go!(|a: f32, b: f32| a * b),
        Div => go!(|a: f32, b: f32| a / b),
        // NaN-propagating, as the reference (`np.maximum`).
        Max => go!(|a: f32, b: f32| if a > b || a.is_nan() { a } else { b }),
        Min => go!(|a: f32, b: f32| if a < b || a.is_nan() { a } else { b }),
        other => zip2(x, y, o, |a: f32, b: f32| other.apply_f64(a as f64, b as f64) as f32),
    }
}

fn compare<T: Copy + PartialOrd + Sync>(c: CompareOp, p: &Bcast, x: &[T], y: &[T], o: &mut [bool]) {
    let (ax, ay) = (p.access[0], p.access[1]);
    macro_rules! go {
        ($f:expr) => {
            for_segments(o, p.block, |s, seg| {
                let (a, b) = (Src::at(x, ax, s, seg.len()), Src::at(y, ay, s, seg.len()));
                dispatch(
                    #[inline(always)]
                    || zip2(a, b, seg, $f),
                )
            })
        };
    }
    match c {
        CompareOp::Eq => go!(|a: T, b: T| a == b),
        CompareOp::Ne => go!(|a: T, b: T| a != b),
        CompareOp::Lt => go!(|a: T, b: T| a < b),
        CompareOp::Le => go!(|a: T, b: T| a <= b),
        CompareOp::Gt => go!(|a: T, b: T| a > b),
        CompareOp::Ge => go!(|a: T, b: T| a >= b),
    }
}

fn select_into<T: Elem>(p: &Bcast, pred: &[bool], a: &[T], b: &[T], o: &mut [T]) {
    let (ap, aa, ab) = (p.access[0], p.access[1], p.access[2]);
    for_segments(o, p.block, |s, seg| {
        let n = seg.len();
        let (pv, av, bv) = (Src::at(pred, ap, s, n), Src::at(a, aa, s, n), Src::at(b, ab, s, n));
        match pv {
            Src::Scalar(c) => match if c { av } else { bv } {
                Src::Slice(v) => seg.copy_from_slice(v),
                Src::Scalar(v) => seg.fill(v),
            },
            Src::Slice(pr) => dispatch(
                #[inline(always)]
                || match (av, bv) {
                    (Src::Slice(x), Src::Slice(y)) => {
                        for (((o, &c), &x), &y) in seg.iter_mut().zip(pr).zip(x).zip(y) {
                            *o = if c { x } else { y };
                        }
                    }
                    // One loop per operand shape (a per-element `match` kept it scalar).
                    (Src::Slice(x), Src::Scalar(b)) => {
                        seg.iter_mut().zip(pr).zip(x).for_each(|((o, &c), &a)| *o = if c { a } else { b })
                    }
                    (Src::Scalar(a), Src::Slice(y)) => {
                        seg.iter_mut().zip(pr).zip(y).for_each(|((o, &c), &b)| *o = if c { a } else { b })
                    }
                    (Src::Scalar(a), Src::Scalar(b)) => {
                        seg.iter_mut().zip(pr).for_each(|(o, &c)| *o = if c { a } else { b })
                    }
                },
            ),
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bcast_modes() {
        let p = plan_bcast(&[2, 3, 4], &[&[2, 3, 4], &[4], &[], &[2, 3, 1], &[1, 3, 4], &[2, 1, 1]]).unwrap();
        assert_eq!(
            p.access,
            vec![Access::Full, Access::Row(4), Access::Scalar, Access::Col(4), Access::Row(12), Access::Col(12)]
        );
        assert_eq!(p.block, 4);
        // A middle broadcast ([2,1,4] against [2,3,4]) is neither row nor column.
        assert!(plan_bcast(&[2, 3, 4], &[&[2, 1, 4]]).is_none());
        // Size-1 output dims are ignored.
        let p = plan_bcast(&[1, 3, 1], &[&[3, 1]]).unwrap();
        assert_eq!(p.access, vec![Access::Full]);
    }
}
