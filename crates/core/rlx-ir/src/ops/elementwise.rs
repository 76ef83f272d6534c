//! Elementwise family: unary math, binary math, comparisons, `select`, `convert_element_type`,
//! `stop_gradient`. Binary, compare and select broadcast their operands NumPy-style.
//!
//! Semantics follow `jax.lax` (which follows XLA) where it differs from NumPy:
//! - integer `div` truncates toward zero; `x / 0` is `-1` (all bits set), `MIN / -1` is `MIN`;
//!   `rem` takes the sign of the dividend and `x % 0` is `x` (XLA's defined results);
//! - `max`/`min` propagate NaN (as `np.maximum`, not `np.fmax`);
//! - `round` rounds half away from zero (`lax.round` default); `round_nearest_even` is NumPy's
//!   `np.round` / ONNX `Round`;
//! - shifts by ≥ the bit width give 0 (`shift_right_arithmetic`: the sign fill); like `lax`,
//!   `shift_right_arithmetic` sign-fills unsigned operands too (u8 `0x80 >> 1` is `0xC0`).

pub(crate) mod ad;

use super::{Op, arity};
use crate::shape::strides_of;
use crate::{DType, Dim, Elem, Graph, IrError, NodeId, Shape, Tensor, with_dtype};
use serde::{Deserialize, Serialize};

/// Elementwise unary ops (names as in `jax.lax`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum UnaryOp {
    Neg,
    Abs,
    Sign,
    Floor,
    Ceil,
    Round,
    RoundNearestEven,
    Exp,
    Exp2,
    Expm1,
    Log,
    Log1p,
    Sqrt,
    Rsqrt,
    Cbrt,
    Square,
    Reciprocal,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Tanh,
    Asinh,
    Acosh,
    Atanh,
    /// `lax.logistic`: 1 / (1 + exp(-x)).
    Logistic,
    Erf,
    Erfc,
    ErfInv,
    /// Logical not for bool, bitwise not for integers.
    Not,
    /// True where the value is neither infinite nor NaN.
    IsFinite,
}

impl UnaryOp {
    /// `jax.lax` name.
    pub fn name(self) -> &'static str {
        use UnaryOp::*;
        match self {
            Neg => "neg",
            Abs => "abs",
            Sign => "sign",
            Floor => "floor",
            Ceil => "ceil",
            Round => "round",
            RoundNearestEven => "round_nearest_even",
            Exp => "exp",
            Exp2 => "exp2",
            Expm1 => "expm1",
            Log => "log",
            Log1p => "log1p",
            Sqrt => "sqrt",
            Rsqrt => "rsqrt",
            Cbrt => "cbrt",
            Square => "square",
            Reciprocal => "reciprocal",
            Sin => "sin",
            Cos => "cos",
            Tan => "tan",
            Asin => "asin",
            Acos => "acos",
            Atan => "atan",
            Sinh => "sinh",
            Cosh => "cosh",
            Tanh => "tanh",
            Asinh => "asinh",
            Acosh => "acosh",
            Atanh => "atanh",
            Logistic => "logistic",
            Erf => "erf",
            Erfc => "erfc",
            ErfInv => "erf_inv",
            Not => "not",
            IsFinite => "is_finite",
        }
    }

    /// Every unary op.
    pub const ALL: [UnaryOp; 35] = {
        use UnaryOp::*;
        [
            Neg,
            Abs,
            Sign,
            Floor,
            Ceil,
            Round,
            RoundNearestEven,
            Exp,
            Exp2,
            Expm1,
            Log,
            Log1p,
            Sqrt,
            Rsqrt,
            Cbrt,
            Square,
            Reciprocal,
            Sin,
            Cos,
            Tan,
            Asin,
            Acos,
            Atan,
            Sinh,
            Cosh,
            Tanh,
            Asinh,
            Acosh,
            Atanh,
            Logistic,
            Erf,
            Erfc,
            ErfInv,
            Not,
            IsFinite,
        ]
    };

    /// Which dtypes the op accepts.
    pub fn accepts(self, d: DType) -> bool {
        use UnaryOp::*;
        match self {
            Neg | Abs | Sign | Square => d.is_float() || d.is_int(),
            Not => d.is_int() || d == DType::Bool,
            _ => d.is_float(),
        }
    }

    /// Apply to one f64 value (the float reference).
    pub fn apply_f64(self, x: f64) -> f64 {
        use UnaryOp::*;
        match self {
            Neg => -x,
            Abs => x.abs(),
            Sign => {
                if x.is_nan() || x == 0.0 {
                    x
                } else {
                    x.signum()
                }
            }
            Floor => x.floor(),
            Ceil => x.ceil(),
            Round => x.round(),
            RoundNearestEven => x.round_ties_even(),
            Exp => x.exp(),
            Exp2 => x.exp2(),
            Expm1 => x.exp_m1(),
            Log => x.ln(),
            Log1p => x.ln_1p(),
            Sqrt => x.sqrt(),
            Rsqrt => 1.0 / x.sqrt(),
            Cbrt => x.cbrt(),
            Square => x * x,
            Reciprocal => 1.0 / x,
            Sin => x.sin(),
            Cos => x.cos(),
            Tan => x.tan(),
            Asin => x.asin(),
            Acos => x.acos(),
            Atan => x.atan(),
            Sinh => x.sinh(),
            Cosh => x.cosh(),
            Tanh => x.tanh(),
            Asinh => x.asinh(),
            Acosh => x.acosh(),
            Atanh => libm::atanh(x),
            Logistic => {
                // Stable for large |x|: never evaluates exp of a large positive number.
                if x >= 0.0 {
                    1.0 / (1.0 + (-x).exp())
                } else {
                    let e = x.exp();
                    e / (1.0 + e)
                }
            }
            Erf => libm::erf(x),
            Erfc => libm::erfc(x),
            ErfInv => erf_inv(x),
            Not => (x == 0.0) as u8 as f64,
            IsFinite => x.is_finite() as u8 as f64,
        }
    }

    fn apply_i64(self, x: i64) -> i64 {
        use UnaryOp::*;
        match self {
            Neg => x.wrapping_neg(),
            Abs => x.wrapping_abs(),
            Sign => x.signum(),
            Square => x.wrapping_mul(x),
            Not => !x,
            _ => unreachable!("{} is float-only", self.name()),
        }
    }
}

/// Inverse error function on (-1, 1); ±1 → ±inf, outside → NaN.
///
/// Giles' single-precision polynomial ("Approximating the erfinv function", 2010) as a start,
/// then Newton steps to f64 accuracy. Near ±1 the residual is taken as
/// `erfc(|y|) - (1 - |x|)`, which keeps the digits that `erf(y) - x` cancels.
pub fn erf_inv(x: f64) -> f64 {
    if x.is_nan() || !(-1.0..=1.0).contains(&x) {
        return f64::NAN;
    }
    if x == 1.0 {
        return f64::INFINITY;
    }
    if x == -1.0 {
        return f64::NEG_INFINITY;
    }
    let w = -((1.0 - x) * (1.0 + x)).ln();
    let mut y = if w < 5.0 {
        let w = w - 2.5;
        let mut p = 2.810_226_36e-08;
        for c in [
            3.432_739_39e-07,
            -3.523_387_7e-06,
            -4.391_506_54e-06,
            0.000_218_580_87,
            -0.001_253_725_03,
            -0.004_177_681_64,
            0.246_640_727,
            1.501_409_41,
        ] {
            p = c + p * w;
        }
        p * x
    } else {
        let w = w.sqrt() - 3.0;
        let mut p = -0.000_200_214_257;
        for c in [
            0.000_100_950_558,
            0.001_349_343_22,
            -0.003_673_428_44,
            0.005_739_507_73,
            -0.007_622_461_3,
            0.009_438_870_47,
            1.001_674_06,
            2.832_976_82,
        ] {
            p = c + p * w;
        }
        p * x
    };
    // Newton converges quadratically, but the tail is so curved (f''/f' = -2y) that the
    // polynomial's ~1e-3 start near ±1 needs up to 4 steps; stop once the step is negligible.
    for _ in 0..6 {
        let err = if x.abs() > 0.5 { x.signum() * ((1.0 - x.abs()) - libm::erfc(y.abs())) } else { libm::erf(y) - x };
        let step = err / (2.0 / std::f64::consts::PI.sqrt() * (-y * y).exp());
        y -= step;
        if step.abs() <= 1e-16 * y.abs() {
            break;
        }
    }
    y
}

/// Elementwise binary ops (names as in `jax.lax`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Pow,
    Max,
    Min,
    Atan2,
    And,
    Or,
    Xor,
    ShiftLeft,
    ShiftRightArithmetic,
    ShiftRightLogical,
}

impl BinaryOp {
    /// `jax.lax` name.
    pub fn name(self) -> &'static str {
        use BinaryOp::*;
        match self {
            Add => "add",
            Sub => "sub",
            Mul => "mul",
            Div => "div",
            Rem => "rem",
            Pow => "pow",
            Max => "max",
            Min => "min",
            Atan2 => "atan2",
            And => "and",
            Or => "or",
            Xor => "xor",
            ShiftLeft => "shift_left",
            ShiftRightArithmetic => "shift_right_arithmetic",
            ShiftRightLogical => "shift_right_logical",
        }
    }
    /// Every binary op.
    pub const ALL: [BinaryOp; 15] = {
        use BinaryOp::*;
        [
            Add,
            Sub,
            Mul,
            Div,
            Rem,
            Pow,
            Max,
            Min,
            Atan2,
            And,
            Or,
            Xor,
            ShiftLeft,
            ShiftRightArithmetic,
            ShiftRightLogical,
        ]
    };
    /// True when `a op b == b op a`.
    pub fn is_commutative(self) -> bool {
        use BinaryOp::*;
        matches!(self, Add | Mul | Max | Min | And | Or | Xor)
    }
    /// Which dtypes the op accepts.
    pub fn accepts(self, d: DType) -> bool {
        use BinaryOp::*;
        match self {
            Add | Sub | Mul | Div | Rem | Max | Min | Pow => d.is_float() || d.is_int(),
            Atan2 => d.is_float(),
            And | Or | Xor => d.is_int() || d == DType::Bool,
            ShiftLeft | ShiftRightArithmetic | ShiftRightLogical => d.is_int(),
        }
    }

    /// Apply to f64 values (the float reference).
    pub fn apply_f64(self, a: f64, b: f64) -> f64 {
        use BinaryOp::*;
        match self {
            Add => a + b,
            Sub => a - b,
            Mul => a * b,
            Div => a / b,
            Rem => a % b,
            Pow => a.powf(b),
            Max => {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.max(b)
                }
            }
            Min => {
                if a.is_nan() || b.is_nan() {
                    f64::NAN
                } else {
                    a.min(b)
                }
            }
            Atan2 => a.atan2(b),
            And => ((a != 0.0) && (b != 0.0)) as u8 as f64,
            Or => ((a != 0.0) || (b != 0.0)) as u8 as f64,
            Xor => ((a != 0.0) ^ (b != 0.0)) as u8 as f64,
            _ => f64::NAN,
        }
    }

    /// Apply to integers of `bits` width (values sign- or zero-extended into i64).
    fn apply_int(self, a: i64, b: i64, bits: u32, signed: bool) -> i64 {
        use BinaryOp::*;
        let mask: u64 = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
        let min = if signed { i64::MIN >> (64 - bits) } else { 0 };
        if bits == 64 && !signed {
            // u64 values above i64::MAX arrive as negative i64: order and divide them unsigned.
            let (ua, ub) = (a as u64, b as u64);
            match self {
                Div if b != 0 => return (ua / ub) as i64,
                Rem if b != 0 => return (ua % ub) as i64,
                Max => return ua.max(ub) as i64,
                Min => return ua.min(ub) as i64,
                _ => {}
            }
        }
        match self {
            Add => a.wrapping_add(b),
            Sub => a.wrapping_sub(b),
            Mul => a.wrapping_mul(b),
            Div => {
                if b == 0 {
                    -1
                } else if signed && a == min && b == -1 {
                    min
                } else {
                    a.wrapping_div(b)
                }
            }
            Rem => {
                if b == 0 {
                    a
                } else if signed && a == min && b == -1 {
                    0
                } else {
                    a.wrapping_rem(b)
                }
            }
            Pow => int_pow(a, b),
            Max => a.max(b),
            Min => a.min(b),
            And => a & b,
            Or => a | b,
            Xor => a ^ b,
            ShiftLeft => {
                if b < 0 || b >= bits as i64 {
                    0
                } else {
                    a.wrapping_shl(b as u32)
                }
            }
            ShiftRightArithmetic => {
                // lax sign-fills unsigned operands too: shift the bits read as signed.
                let s = if b < 0 || b >= bits as i64 { bits as i64 - 1 } else { b };
                let v = if signed || bits == 64 { a } else { (a << (64 - bits)) >> (64 - bits) };
                (v >> s) & mask as i64
            }
            ShiftRightLogical => {
                if b < 0 || b >= bits as i64 {
                    0
                } else {
                    (((a as u64) & mask) >> b) as i64
                }
            }
            Atan2 => unreachable!(),
        }
    }
}

fn int_pow(base: i64, exp: i64) -> i64 {
    if exp < 0 {
        return match base {
            1 => 1,
            -1 => {
                if exp % 2 == 0 {
                    1
                } else {
                    -1
                }
            }
            _ => 0,
        };
    }
    let (mut r, mut b, mut e) = (1i64, base, exp as u64);
    while e > 0 {
        if e & 1 == 1 {
            r = r.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        e >>= 1;
    }
    r
}

/// Comparisons (`lax.eq`, `lax.lt`, ...); results are `Bool`. NaN compares unequal to
/// everything (IEEE).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[allow(missing_docs)]
pub enum CompareOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl CompareOp {
    /// `jax.lax` name.
    pub fn name(self) -> &'static str {
        match self {
            CompareOp::Eq => "eq",
            CompareOp::Ne => "ne",
            CompareOp::Lt => "lt",
            CompareOp::Le => "le",
            CompareOp::Gt => "gt",
            CompareOp::Ge => "ge",
        }
    }
    /// Every comparison.
    pub const ALL: [CompareOp; 6] =
        [CompareOp::Eq, CompareOp::Ne, CompareOp::Lt, CompareOp::Le, CompareOp::Gt, CompareOp::Ge];

    /// Compare two values of one type.
    pub fn apply<T: PartialOrd>(self, a: T, b: T) -> bool {
        match self {
            CompareOp::Eq => a == b,
            CompareOp::Ne => a != b,
            CompareOp::Lt => a < b,
            CompareOp::Le => a <= b,
            CompareOp::Gt => a > b,
            CompareOp::Ge => a >= b,
        }
    }
}

/// NumPy broadcasting of two dim lists (aligned at the right).
pub fn broadcast_dims(a: &[Dim], b: &[Dim]) -> Result<Vec<Dim>, String> {
    let r = a.len().max(b.len());
    let mut out = Vec::with_capacity(r);
    for i in 0..r {
        let da = (i + a.len()).checked_sub(r).map(|k| &a[k]);
        let db = (i + b.len()).checked_sub(r).map(|k| &b[k]);
        let d = match (da, db) {
            (Some(x), None) | (None, Some(x)) => x.clone(),
            (Some(x), Some(y)) if x == y => x.clone(),
            (Some(Dim::Static(1)), Some(y)) => y.clone(),
            (Some(x), Some(Dim::Static(1))) => x.clone(),
            (Some(Dim::Sym(_)), Some(Dim::Static(n))) | (Some(Dim::Static(n)), Some(Dim::Sym(_))) => Dim::Static(*n),
            (Some(x), Some(y)) => return Err(format!("dims {x} and {y} do not broadcast")),
            (None, None) => unreachable!(),
        };
        out.push(d);
    }
    Ok(out)
}

/// Shape and dtype rule of the elementwise family.
pub(crate) fn infer(op: &Op, ins: &[&Shape]) -> Result<Shape, String> {
    match op {
        Op::Unary(u) => {
            arity(u.name(), ins, 1)?;
            let d = ins[0].dtype;
            if !u.accepts(d) {
                return Err(format!("{} does not accept {d}", u.name()));
            }
            let out = if *u == UnaryOp::IsFinite { DType::Bool } else { d };
            Ok(ins[0].with_dtype(out))
        }
        Op::Binary(b) => {
            arity(b.name(), ins, 2)?;
            same_dtype(b.name(), ins)?;
            if !b.accepts(ins[0].dtype) {
                return Err(format!("{} does not accept {}", b.name(), ins[0].dtype));
            }
            Ok(Shape { dims: broadcast_dims(&ins[0].dims, &ins[1].dims)?, dtype: ins[0].dtype })
        }
        Op::Compare(c) => {
            arity(c.name(), ins, 2)?;
            same_dtype(c.name(), ins)?;
            Ok(Shape { dims: broadcast_dims(&ins[0].dims, &ins[1].dims)?, dtype: DType::Bool })
        }
        Op::Select => {
            arity("select", ins, 3)?;
            if ins[0].dtype != DType::Bool {
                return Err(format!("predicate must be bool, got {}", ins[0].dtype));
            }
            same_dtype("select", &ins[1..])?;
            let d = broadcast_dims(&ins[0].dims, &ins[1].dims)?;
            Ok(Shape { dims: broadcast_dims(&d, &ins[2].dims)?, dtype: ins[1].dtype })
        }
        Op::ConvertElementType(d) => {
            arity("convert_element_type", ins, 1)?;
            Ok(ins[0].with_dtype(*d))
        }
        Op::StopGradient => {
            arity("stop_gradient", ins, 1)?;
            Ok(ins[0].clone())
        }
        _ => unreachable!(),
    }
}

fn same_dtype(name: &str, ins: &[&Shape]) -> Result<(), String> {
    if ins.iter().any(|s| s.dtype != ins[0].dtype) {
        return Err(format!("{name} needs operands of one dtype; insert convert_element_type"));
    }
    Ok(())
}

/// Strides (in elements) that read `in_dims` broadcast to `out_dims` (0 on broadcast dims).
pub fn broadcast_strides(in_dims: &[usize], out_dims: &[usize]) -> Vec<usize> {
    let st = strides_of(in_dims);
    let off = out_dims.len() - in_dims.len();
    (0..out_dims.len()).map(|i| if i < off || in_dims[i - off] == 1 { 0 } else { st[i - off] }).collect()
}

/// Visit every output index in row-major order, passing the flat offsets into each operand.
pub fn for_each_broadcast(out_dims: &[usize], ins: &[&[usize]], mut f: impl FnMut(usize, &[usize])) {
    let n: usize = out_dims.iter().product();
    if n == 0 {
        return;
    }
    let strides: Vec<Vec<usize>> = ins.iter().map(|d| broadcast_strides(d, out_dims)).collect();
    let mut idx = vec![0usize; out_dims.len()];
    let mut offs = vec![0usize; ins.len()];
    for o in 0..n {
        f(o, &offs);
        // Increment the multi-index, updating offsets incrementally.
        for ax in (0..out_dims.len()).rev() {
            idx[ax] += 1;
            for (k, s) in strides.iter().enumerate() {
                offs[k] += s[ax];
            }
            if idx[ax] < out_dims[ax] {
                break;
            }
            for (k, s) in strides.iter().enumerate() {
                offs[k] -= s[ax] * out_dims[ax];
            }
            idx[ax] = 0;
        }
    }
}

fn eval_err(op: &Op, msg: impl Into<String>) -> IrError {
    IrError::Eval { op: op.name(), msg: msg.into() }
}

/// Reference evaluation of the elementwise family.
pub(crate) fn eval(op: &Op, ins: &[&Tensor], out: &mut Tensor) -> Result<(), IrError> {
    let out_dims = out.shape().to_vec();
    match op {
        Op::Unary(u) => {
            let d = ins[0].dtype();
            let od = out.dtype();
            with_dtype!(d, T, {
                let x = ins[0].as_slice::<T>().unwrap();
                if d.is_float() || *u == UnaryOp::IsFinite {
                    with_dtype!(od, O, {
                        let y = out.as_mut_slice::<O>().unwrap();
                        for (o, &v) in y.iter_mut().zip(x) {
                            *o = O::of_f64(u.apply_f64(v.to_f64()));
                        }
                    });
                } else if d == DType::Bool {
                    let y = out.as_mut_slice::<bool>().unwrap();
                    for (o, &v) in y.iter_mut().zip(x) {
                        *o = v.to_i64() == 0;
                    }
                } else {
                    let y = out.as_mut_slice::<T>().unwrap();
                    // u64 values above i64::MAX read as negative: abs and sign see them unsigned.
                    let u64_op = (d == DType::U64).then_some(*u);
                    for (o, &v) in y.iter_mut().zip(x) {
                        let v = v.to_i64();
                        *o = T::of_i64(match u64_op {
                            Some(UnaryOp::Abs) => v,
                            Some(UnaryOp::Sign) => (v != 0) as i64,
                            _ => u.apply_i64(v),
                        });
                    }
                }
            });
            Ok(())
        }
        Op::Binary(b) => {
            let d = ins[0].dtype();
            let bits = d.bits();
            let signed = d.is_signed_int();
            with_dtype!(d, T, {
                let (x, y) = (ins[0].as_slice::<T>().unwrap(), ins[1].as_slice::<T>().unwrap());
                let o = out.as_mut_slice::<T>().unwrap();
                let float = d.is_float() || d == DType::Bool;
                for_each_broadcast(&out_dims, &[ins[0].shape(), ins[1].shape()], |k, off| {
                    let (a, c) = (x[off[0]], y[off[1]]);
                    o[k] = if float {
                        T::of_f64(b.apply_f64(a.to_f64(), c.to_f64()))
                    } else {
                        T::of_i64(b.apply_int(a.to_i64(), c.to_i64(), bits, signed))
                    };
                });
            });
            Ok(())
        }
        Op::Compare(c) => {
            let d = ins[0].dtype();
            with_dtype!(d, T, {
                let (x, y) = (ins[0].as_slice::<T>().unwrap(), ins[1].as_slice::<T>().unwrap());
                let o = out.as_mut_slice::<bool>().unwrap();
                for_each_broadcast(&out_dims, &[ins[0].shape(), ins[1].shape()], |k, off| {
                    o[k] = c.apply(x[off[0]], y[off[1]]);
                });
            });
            Ok(())
        }
        Op::Select => {
            let p = ins[0].as_slice::<bool>().ok_or_else(|| eval_err(op, "predicate must be bool"))?;
            with_dtype!(ins[1].dtype(), T, {
                let (x, y) = (ins[1].as_slice::<T>().unwrap(), ins[2].as_slice::<T>().unwrap());
                let o = out.as_mut_slice::<T>().unwrap();
                for_each_broadcast(&out_dims, &[ins[0].shape(), ins[1].shape(), ins[2].shape()], |k, off| {
                    o[k] = if p[off[0]] { x[off[1]] } else { y[off[2]] };
                });
            });
            Ok(())
        }
        Op::ConvertElementType(_) => {
            *out = ins[0].cast(out.dtype());
            Ok(())
        }
        Op::StopGradient => {
            *out = ins[0].clone();
            Ok(())
        }
        _ => unreachable!(),
    }
}

/// Builders of the elementwise family. Binary builders promote dtypes (JAX's lattice, see
/// [`DType::promote`]) by inserting `convert_element_type`, and broadcast NumPy-style.
impl Graph {
    /// Elementwise unary op.
    pub fn unary(&mut self, op: UnaryOp, x: NodeId) -> NodeId {
        self.push(Op::Unary(op), &[x])
    }

    /// Convert both operands to their promoted dtype.
    pub fn promote_pair(&mut self, a: NodeId, b: NodeId) -> (NodeId, NodeId) {
        if a.index() >= self.nodes.len() || b.index() >= self.nodes.len() {
            return (a, b);
        }
        let (da, db) = (self.shape(a).dtype, self.shape(b).dtype);
        let d = da.promote(db);
        (self.convert(a, d), self.convert(b, d))
    }

    /// Elementwise binary op with promotion and broadcasting.
    pub fn binary(&mut self, op: BinaryOp, a: NodeId, b: NodeId) -> NodeId {
        let (a, b) = self.promote_pair(a, b);
        self.push(Op::Binary(op), &[a, b])
    }

    /// Comparison with promotion and broadcasting; result is bool.
    pub fn compare(&mut self, op: CompareOp, a: NodeId, b: NodeId) -> NodeId {
        let (a, b) = self.promote_pair(a, b);
        self.push(Op::Compare(op), &[a, b])
    }

    /// `lax.select(pred, on_true, on_false)` with broadcasting.
    pub fn select(&mut self, pred: NodeId, on_true: NodeId, on_false: NodeId) -> NodeId {
        let (t, f) = self.promote_pair(on_true, on_false);
        self.push(Op::Select, &[pred, t, f])
    }

    /// `lax.convert_element_type`; a no-op (returns `x`) when the dtype already matches.
    pub fn convert(&mut self, x: NodeId, dtype: DType) -> NodeId {
        if x.index() < self.nodes.len() && !self.nodes[x.index()].is_tuple() && self.shape(x).dtype == dtype {
            return x;
        }
        self.push(Op::ConvertElementType(dtype), &[x])
    }

    /// `lax.stop_gradient`.
    pub fn stop_gradient(&mut self, x: NodeId) -> NodeId {
        self.push(Op::StopGradient, &[x])
    }

    /// A rank-0 constant with `x`'s dtype.
    pub fn scalar_like(&mut self, v: f64, x: NodeId) -> NodeId {
        let d = if x.index() < self.nodes.len() { self.shape(x).dtype } else { DType::F32 };
        self.scalar(v, d)
    }
}

macro_rules! binary_builders {
    ($($fn:ident => $op:ident),* $(,)?) => {
        impl Graph {
            $(
                #[doc = concat!("`lax.", stringify!($fn), "` with promotion and NumPy broadcasting.")]
                pub fn $fn(&mut self, a: NodeId, b: NodeId) -> NodeId {
                    self.binary(BinaryOp::$op, a, b)
                }
            )*
        }
    };
}
binary_builders!(add => Add, sub => Sub, mul => Mul, div => Div, rem => Rem, pow => Pow, max => Max, min => Min, atan2 => Atan2);

macro_rules! unary_builders {
    ($($fn:ident => $op:ident),* $(,)?) => {
        impl Graph {
            $(
                #[doc = concat!("Elementwise `", stringify!($fn), "`.")]
                pub fn $fn(&mut self, x: NodeId) -> NodeId {
                    self.unary(UnaryOp::$op, x)
                }
            )*
        }
    };
}
unary_builders!(neg => Neg, abs => Abs, exp => Exp, log => Log, sqrt => Sqrt, rsqrt => Rsqrt, tanh => Tanh,
    logistic => Logistic, erf => Erf, sin => Sin, cos => Cos, square => Square, reciprocal => Reciprocal,
    floor => Floor, ceil => Ceil, log1p => Log1p, expm1 => Expm1, sign => Sign);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erf_inv_inverts_erf() {
        for &x in &[-0.999, -0.5, -1e-6, 0.0, 0.3, 0.9, 0.999999] {
            assert!((libm::erf(erf_inv(x)) - x).abs() < 1e-14, "{x}");
        }
        // scipy.special.erfinv(0.9999999999) = 4.572824958544925
        assert!((erf_inv(0.9999999999) - 4.572824958544925).abs() < 1e-12);
        assert!((erf_inv(-0.9999999999) + 4.572824958544925).abs() < 1e-12);
    }

    #[test]
    fn xla_integer_division_rules() {
        assert_eq!(BinaryOp::Div.apply_int(7, 0, 32, true), -1);
        assert_eq!(BinaryOp::Div.apply_int(-7, 2, 32, true), -3);
        assert_eq!(BinaryOp::Rem.apply_int(-7, 2, 32, true), -1);
        assert_eq!(BinaryOp::Rem.apply_int(5, 0, 32, true), 5);
        assert_eq!(BinaryOp::Div.apply_int(i32::MIN as i64, -1, 32, true), i32::MIN as i64);
    }

    #[test]
    fn broadcast_rule() {
        let d = |v: &[usize]| v.iter().map(|&x| Dim::Static(x)).collect::<Vec<_>>();
        assert_eq!(broadcast_dims(&d(&[3, 1]), &d(&[4])).unwrap(), d(&[3, 4]));
        assert!(broadcast_dims(&d(&[3]), &d(&[4])).is_err());
        assert_eq!(broadcast_dims(&[Dim::dynamic(), Dim::Static(4)], &d(&[4])).unwrap()[0], Dim::dynamic());
    }
}
