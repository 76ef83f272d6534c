//! Host tensors: a static shape plus typed, contiguous, row-major storage.
//!
//! This is the one host data type of RLX: constants in the IR, reference evaluation, and the
//! runtime's `run_tensors` all use it.

use crate::narrow::{F4E2M1FN, F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ, I2, I4, U2, U4};
use crate::{DType, IrError};
use half::{bf16, f16};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Typed contiguous storage, one variant per [`DType`].
#[derive(Clone, Debug, PartialEq)]
#[allow(missing_docs)]
pub enum Data {
    F32(Vec<f32>),
    F64(Vec<f64>),
    F16(Vec<f16>),
    BF16(Vec<bf16>),
    I8(Vec<i8>),
    I16(Vec<i16>),
    I32(Vec<i32>),
    I64(Vec<i64>),
    U8(Vec<u8>),
    U32(Vec<u32>),
    Bool(Vec<bool>),
    U16(Vec<u16>),
    U64(Vec<u64>),
    F8E4M3FN(Vec<F8E4M3FN>),
    F8E4M3FNUZ(Vec<F8E4M3FNUZ>),
    F8E5M2(Vec<F8E5M2>),
    F8E5M2FNUZ(Vec<F8E5M2FNUZ>),
    F4E2M1FN(Vec<F4E2M1FN>),
    I4(Vec<I4>),
    U4(Vec<U4>),
    I2(Vec<I2>),
    U2(Vec<U2>),
}

/// An element type that can live in a [`Tensor`].
///
/// The conversions are named `of_f64` / `of_i64` (not `from_*`) on purpose: `half`'s types
/// have inherent `from_f64` methods that round twice, and inherent methods win over trait
/// methods in `T::from_f64` calls.
///
/// Conversions follow XLA's `convert_element_type`: float → int truncates toward zero and
/// saturates at the target range, NaN → 0; int → int wraps (two's complement); anything → bool
/// is `!= 0`. The narrow types (see [`crate::narrow`]) follow `ml_dtypes` instead.
pub trait Elem: Copy + Send + Sync + PartialEq + PartialOrd + std::fmt::Debug + 'static {
    /// The dtype tag.
    const DTYPE: DType;
    /// Value as f64 (exact for every type except i64/u64 beyond 2^53).
    fn to_f64(self) -> f64;
    /// Value as i64 (floats truncate and saturate, NaN → 0).
    fn to_i64(self) -> i64;
    /// Convert from f64 with the rules above.
    fn of_f64(v: f64) -> Self;
    /// Convert from i64 with the rules above.
    fn of_i64(v: i64) -> Self;
    /// Borrow the storage if it holds this type.
    fn slice(d: &Data) -> Option<&[Self]>;
    /// Borrow the storage mutably if it holds this type.
    fn slice_mut(d: &mut Data) -> Option<&mut [Self]>;
    /// Wrap a vector as storage.
    fn wrap(v: Vec<Self>) -> Data;
    /// The additive identity.
    fn zero() -> Self {
        Self::of_i64(0)
    }
}

fn f64_to_int_sat(v: f64, lo: f64, hi: f64) -> i64 {
    if v.is_nan() { 0 } else { v.trunc().clamp(lo, hi) as i64 }
}

/// Convert one element from `S` to `D` with [`Elem`]'s rules, rounding once: floats (and
/// anything going to bool, and u64, whose top half i64 cannot hold) go through f64, other
/// integers through i64. The one conversion rule of RLX, shared by [`Tensor::cast`] and the
/// backends' convert kernels.
#[inline(always)]
pub fn convert_elem<S: Elem, D: Elem>(v: S) -> D {
    let (sd, dd) = (S::DTYPE, D::DTYPE);
    if sd.is_float() || dd == DType::Bool || (sd == DType::U64 && dd.is_float()) {
        D::of_f64(v.to_f64())
    } else {
        D::of_i64(v.to_i64())
    }
}

/// The [`Elem`] methods that move between a type and its [`Data`] variant `$d` (one
/// definition for every element type's impl).
macro_rules! elem_storage {
    ($d:ident) => {
        fn slice(d: &Data) -> Option<&[Self]> {
            if let Data::$d(v) = d { Some(v) } else { None }
        }
        fn slice_mut(d: &mut Data) -> Option<&mut [Self]> {
            if let Data::$d(v) = d { Some(v) } else { None }
        }
        fn wrap(v: Vec<Self>) -> Data {
            Data::$d(v)
        }
    };
}
pub(crate) use elem_storage;

macro_rules! impl_int_elem {
    ($t:ty, $d:ident) => {
        impl Elem for $t {
            const DTYPE: DType = DType::$d;
            fn to_f64(self) -> f64 {
                self as f64
            }
            fn to_i64(self) -> i64 {
                self as i64
            }
            fn of_f64(v: f64) -> Self {
                // Rust's float-to-int `as` truncates, saturates, and maps NaN to 0.
                v as $t
            }
            fn of_i64(v: i64) -> Self {
                v as $t
            }
            crate::tensor::elem_storage!($d);
        }
    };
}
impl_int_elem!(i8, I8);
impl_int_elem!(i16, I16);
impl_int_elem!(i32, I32);
impl_int_elem!(i64, I64);
impl_int_elem!(u8, U8);
impl_int_elem!(u32, U32);
impl_int_elem!(u16, U16);
impl_int_elem!(u64, U64);

/// `v` rounded to f32 with round-to-odd: an inexact result has its last mantissa bit set.
/// Rounding that to a narrower float (f16, bf16) with round-to-nearest-even then gives the
/// correctly rounded result; going through a plain `v as f32` would round twice.
fn f32_round_to_odd(v: f64) -> f32 {
    let f = v as f32;
    if !f.is_finite() || f as f64 == v {
        return f;
    }
    // Step toward zero if rounding went away from zero, then mark inexact.
    let f = if (f as f64).abs() > v.abs() { f32::from_bits(f.to_bits() - 1) } else { f };
    f32::from_bits(f.to_bits() | 1)
}

/// `v` as f32 with round-to-odd (see [`f32_round_to_odd`]); exact for |v| < 2^24.
fn i64_to_f32_round_to_odd(v: i64) -> f32 {
    let f = v as f32;
    if f as i128 == v as i128 {
        return f;
    }
    let f = if (f as i128).abs() > (v as i128).abs() { f32::from_bits(f.to_bits() - 1) } else { f };
    f32::from_bits(f.to_bits() | 1)
}

macro_rules! impl_float_elem {
    ($t:ty, $d:ident, $to:expr, $from:expr, $from_int:expr) => {
        impl Elem for $t {
            const DTYPE: DType = DType::$d;
            fn to_f64(self) -> f64 {
                $to(self)
            }
            fn to_i64(self) -> i64 {
                f64_to_int_sat($to(self), i64::MIN as f64, i64::MAX as f64)
            }
            fn of_f64(v: f64) -> Self {
                $from(v)
            }
            fn of_i64(v: i64) -> Self {
                $from_int(v)
            }
            crate::tensor::elem_storage!($d);
        }
    };
}
// Every conversion rounds once (to nearest even), as XLA's convert does.
impl_float_elem!(f32, F32, |x: f32| x as f64, |v: f64| v as f32, |v: i64| v as f32);
impl_float_elem!(f64, F64, |x: f64| x, |v: f64| v, |v: i64| v as f64);
impl_float_elem!(f16, F16, |x: f16| x.to_f64(), |v: f64| f16::from_f32(f32_round_to_odd(v)), |v: i64| f16::from_f32(
    i64_to_f32_round_to_odd(v)
));
impl_float_elem!(bf16, BF16, |x: bf16| x.to_f64(), |v: f64| bf16::from_f32(f32_round_to_odd(v)), |v: i64| {
    bf16::from_f32(i64_to_f32_round_to_odd(v))
});

impl Elem for bool {
    const DTYPE: DType = DType::Bool;
    fn to_f64(self) -> f64 {
        self as u8 as f64
    }
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn of_f64(v: f64) -> Self {
        v != 0.0
    }
    fn of_i64(v: i64) -> Self {
        v != 0
    }
    elem_storage!(Bool);
}

/// Run `$body` with the type alias `$T` bound to the Rust type of `$dtype`.
///
/// ```
/// use rlx_ir::{DType, Elem, with_dtype};
/// let size = with_dtype!(DType::F16, T, std::mem::size_of::<T>());
/// assert_eq!(size, 2);
/// ```
#[macro_export]
macro_rules! with_dtype {
    ($dtype:expr, $T:ident, $body:expr) => {{
        match $dtype {
            $crate::DType::F32 => {
                type $T = f32;
                $body
            }
            $crate::DType::F64 => {
                type $T = f64;
                $body
            }
            $crate::DType::F16 => {
                type $T = $crate::half::f16;
                $body
            }
            $crate::DType::BF16 => {
                type $T = $crate::half::bf16;
                $body
            }
            $crate::DType::I8 => {
                type $T = i8;
                $body
            }
            $crate::DType::I16 => {
                type $T = i16;
                $body
            }
            $crate::DType::I32 => {
                type $T = i32;
                $body
            }
            $crate::DType::I64 => {
                type $T = i64;
                $body
            }
            $crate::DType::U8 => {
                type $T = u8;
                $body
            }
            $crate::DType::U32 => {
                type $T = u32;
                $body
            }
            $crate::DType::Bool => {
                type $T = bool;
                $body
            }
            $crate::DType::U16 => {
                type $T = u16;
                $body
            }
            $crate::DType::U64 => {
                type $T = u64;
                $body
            }
            $crate::DType::F8E4M3FN => {
                type $T = $crate::narrow::F8E4M3FN;
                $body
            }
            $crate::DType::F8E4M3FNUZ => {
                type $T = $crate::narrow::F8E4M3FNUZ;
                $body
            }
            $crate::DType::F8E5M2 => {
                type $T = $crate::narrow::F8E5M2;
                $body
            }
            $crate::DType::F8E5M2FNUZ => {
                type $T = $crate::narrow::F8E5M2FNUZ;
                $body
            }
            $crate::DType::F4E2M1FN => {
                type $T = $crate::narrow::F4E2M1FN;
                $body
            }
            $crate::DType::I4 => {
                type $T = $crate::narrow::I4;
                $body
            }
            $crate::DType::U4 => {
                type $T = $crate::narrow::U4;
                $body
            }
            $crate::DType::I2 => {
                type $T = $crate::narrow::I2;
                $body
            }
            $crate::DType::U2 => {
                type $T = $crate::narrow::U2;
                $body
            }
        }
    }};
}

/// Every [`Data`] variant: `each_variant!(m)` expands to `m!(F32, F64, ...)`.
macro_rules! each_variant {
    ($m:ident) => {
        $m!(
            F32, F64, F16, BF16, I8, I16, I32, I64, U8, U32, Bool, U16, U64, F8E4M3FN, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ,
            F4E2M1FN, I4, U4, I2, U2
        )
    };
}

/// The typed vector behind `d`, if it holds `T`.
fn vec_mut<T: Elem>(d: &mut Data) -> Option<&mut Vec<T>> {
    // Elem gives slices only; match the variant whose element type is T.
    macro_rules! arm {
        ($($v:ident),*) => {
            match d {
                $(Data::$v(v) => (v as &mut dyn std::any::Any).downcast_mut::<Vec<T>>(),)*
            }
        };
    }
    each_variant!(arm)
}

/// The typed vector behind `d`, if it holds `T` (for its capacity).
fn vec_ref<T: Elem>(d: &Data) -> Option<&Vec<T>> {
    macro_rules! arm {
        ($($v:ident),*) => {
            match d {
                $(Data::$v(v) => (v as &dyn std::any::Any).downcast_ref::<Vec<T>>(),)*
            }
        };
    }
    each_variant!(arm)
}

impl Data {
    /// The dtype of the elements.
    pub fn dtype(&self) -> DType {
        match self {
            Data::F32(_) => DType::F32,
            Data::F64(_) => DType::F64,
            Data::F16(_) => DType::F16,
            Data::BF16(_) => DType::BF16,
            Data::I8(_) => DType::I8,
            Data::I16(_) => DType::I16,
            Data::I32(_) => DType::I32,
            Data::I64(_) => DType::I64,
            Data::U8(_) => DType::U8,
            Data::U32(_) => DType::U32,
            Data::Bool(_) => DType::Bool,
            Data::U16(_) => DType::U16,
            Data::U64(_) => DType::U64,
            Data::F8E4M3FN(_) => DType::F8E4M3FN,
            Data::F8E4M3FNUZ(_) => DType::F8E4M3FNUZ,
            Data::F8E5M2(_) => DType::F8E5M2,
            Data::F8E5M2FNUZ(_) => DType::F8E5M2FNUZ,
            Data::F4E2M1FN(_) => DType::F4E2M1FN,
            Data::I4(_) => DType::I4,
            Data::U4(_) => DType::U4,
            Data::I2(_) => DType::I2,
            Data::U2(_) => DType::U2,
        }
    }
    /// Number of elements.
    pub fn len(&self) -> usize {
        with_dtype!(self.dtype(), T, T::slice(self).unwrap().len())
    }
    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// `n` zero elements of `dtype`.
    pub fn zeros(dtype: DType, n: usize) -> Data {
        with_dtype!(dtype, T, T::wrap(vec![T::zero(); n]))
    }
}

/// A host tensor: static dims plus typed row-major storage.
///
/// Invariant: `data.len() == shape.iter().product()`.
#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    shape: Vec<usize>,
    data: Data,
}

impl Tensor {
    /// Build a tensor; errors if the element count does not match the shape.
    pub fn new(shape: &[usize], data: Data) -> Result<Tensor, IrError> {
        let n = crate::shape::numel_of(shape);
        if data.len() != n {
            return Err(IrError::BufferLength {
                what: "tensor".into(),
                expected: n,
                got: data.len(),
                shape: shape.to_vec(),
            });
        }
        Ok(Tensor { shape: shape.to_vec(), data })
    }
    /// Build from a typed vector (`Tensor::from_vec(vec![1.0f32, 2.0], &[2])`).
    pub fn from_vec<T: Elem>(v: Vec<T>, shape: &[usize]) -> Result<Tensor, IrError> {
        Tensor::new(shape, T::wrap(v))
    }
    /// A rank-0 tensor.
    pub fn scalar<T: Elem>(v: T) -> Tensor {
        Tensor { shape: vec![], data: T::wrap(vec![v]) }
    }
    /// All-zero tensor.
    pub fn zeros(shape: &[usize], dtype: DType) -> Tensor {
        Tensor { shape: shape.to_vec(), data: Data::zeros(dtype, crate::shape::numel_of(shape)) }
    }
    /// Build from f64 values converted to `dtype` (see [`Elem`] for conversion rules).
    pub fn from_f64s(shape: &[usize], dtype: DType, vals: &[f64]) -> Result<Tensor, IrError> {
        let data = with_dtype!(dtype, T, T::wrap(vals.iter().map(|&v| T::of_f64(v)).collect()));
        Tensor::new(shape, data)
    }
    /// An empty tensor (dims `[0]`) of `dtype` whose storage holds `numel` elements and whose
    /// shape holds `rank` dims without reallocating: a buffer for [`Tensor::set_dims`].
    pub fn with_capacity(dtype: DType, numel: usize, rank: usize) -> Tensor {
        let mut shape = Vec::with_capacity(rank.max(1));
        shape.push(0);
        let data = with_dtype!(dtype, T, T::wrap(Vec::with_capacity(numel)));
        Tensor { shape, data }
    }
    /// [`Tensor::with_capacity`], or `None` when the allocator refuses `numel` elements (so a
    /// graph with absurd static shapes is an error, not an abort).
    pub fn try_with_capacity(dtype: DType, numel: usize, rank: usize) -> Option<Tensor> {
        let mut shape = Vec::with_capacity(rank.max(1));
        shape.push(0);
        let data = with_dtype!(dtype, T, {
            let mut v: Vec<T> = Vec::new();
            v.try_reserve_exact(numel).ok()?;
            T::wrap(v)
        });
        Some(Tensor { shape, data })
    }
    /// Reuse this tensor's storage for `dims` (same dtype): elements are kept up to the new
    /// count (so a prefix survives), new ones are zero. Allocates only when the storage or
    /// shape capacity is short. A memory planner keeps one tensor per buffer and resizes it for
    /// each value the buffer holds in turn.
    pub fn set_dims(&mut self, dims: &[usize]) {
        let n = crate::shape::numel_of(dims);
        with_dtype!(self.dtype(), T, {
            if let Some(v) = vec_mut::<T>(&mut self.data) {
                v.resize(n, T::zero());
            }
        });
        self.shape.clear();
        self.shape.extend_from_slice(dims);
    }
    /// Elements the storage holds without reallocating (at least [`Tensor::numel`]; more for a
    /// tensor made by [`Tensor::with_capacity`] or shrunk by [`Tensor::set_dims`]).
    pub fn capacity(&self) -> usize {
        with_dtype!(self.dtype(), T, vec_ref::<T>(&self.data).map_or(0, |v| v.capacity()))
    }
    /// Whether [`Tensor::set_dims`] to any dims of rank ≤ `rank` and at most `numel` elements
    /// of `dtype` would reuse this tensor's storage (no allocation).
    pub fn can_hold(&self, dtype: DType, numel: usize, rank: usize) -> bool {
        self.dtype() == dtype && self.capacity() >= numel && self.shape.capacity() >= rank
    }
    /// Make this tensor equal to `src`, reusing its storage when the dtype matches and the
    /// capacity suffices (as `Vec::clone_from`): no allocation in a loop that copies tensors
    /// of the same type over and over.
    pub fn copy_from(&mut self, src: &Tensor) {
        if self.dtype() != src.dtype() {
            *self = src.clone();
            return;
        }
        with_dtype!(self.dtype(), T, {
            let v = vec_mut::<T>(&mut self.data).expect("dtype checked");
            v.clear();
            v.extend_from_slice(T::slice(&src.data).expect("dtype checked"));
        });
        self.shape.clear();
        self.shape.extend_from_slice(&src.shape);
    }
    /// Dims.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    /// Element dtype.
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }
    /// Element count.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    /// Storage.
    pub fn data(&self) -> &Data {
        &self.data
    }
    /// Mutable storage (length must not change).
    pub fn data_mut(&mut self) -> &mut Data {
        &mut self.data
    }
    /// Consume into storage.
    pub fn into_data(self) -> Data {
        self.data
    }
    /// Typed view; `None` if the dtype differs.
    pub fn as_slice<T: Elem>(&self) -> Option<&[T]> {
        T::slice(&self.data)
    }
    /// Typed mutable view; `None` if the dtype differs.
    pub fn as_mut_slice<T: Elem>(&mut self) -> Option<&mut [T]> {
        T::slice_mut(&mut self.data)
    }
    /// Every element converted to f64.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        with_dtype!(self.dtype(), T, T::slice(&self.data).unwrap().iter().map(|x| x.to_f64()).collect())
    }
    /// Every element converted to f32 (the runtime's `run` convenience format).
    pub fn to_f32_vec(&self) -> Vec<f32> {
        match &self.data {
            Data::F32(v) => v.clone(),
            _ => self.to_f64_vec().into_iter().map(|x| x as f32).collect(),
        }
    }
    /// Same data under new dims with the same element count.
    pub fn reshape(mut self, shape: &[usize]) -> Result<Tensor, IrError> {
        let n = crate::shape::numel_of(shape);
        if n != self.numel() {
            return Err(IrError::BufferLength {
                what: "reshape".into(),
                expected: self.numel(),
                got: n,
                shape: shape.to_vec(),
            });
        }
        self.shape = shape.to_vec();
        Ok(self)
    }
    /// Convert every element to `dtype` (XLA `convert_element_type` rules, see [`Elem`]).
    pub fn cast(&self, dtype: DType) -> Tensor {
        if dtype == self.dtype() {
            return self.clone();
        }
        let src = self.dtype();
        let data = with_dtype!(dtype, D, {
            let out: Vec<D> = with_dtype!(src, S, {
                S::slice(&self.data).unwrap().iter().map(|&x| convert_elem::<S, D>(x)).collect()
            });
            D::wrap(out)
        });
        Tensor { shape: self.shape.clone(), data }
    }
    /// Raw little-endian bytes of the storage (bool as one byte, 0 or 1; narrow types their
    /// encoding in one byte each, unpacked, see [`crate::narrow::pack_bits`]): borrowed on
    /// little-endian targets (no copy, so hashing a large weight costs one pass over it),
    /// converted elsewhere.
    pub fn le_bytes(&self) -> std::borrow::Cow<'_, [u8]> {
        use std::borrow::Cow;
        if cfg!(target_endian = "big") {
            return Cow::Owned(self.to_le_bytes_converted());
        }
        // SAFETY: every storage type is a primitive number, `half`'s `u16` wrappers, or `bool`
        // (one byte, 0 or 1): no padding and no uninitialized bytes, alignment of `u8` is 1,
        // and the byte length is the slice's size in bytes. On a little-endian target the
        // in-memory bytes are the little-endian encoding.
        fn raw<T>(v: &[T]) -> &[u8] {
            unsafe { std::slice::from_raw_parts(v.as_ptr().cast::<u8>(), std::mem::size_of_val(v)) }
        }
        Cow::Borrowed(match &self.data {
            Data::F32(v) => raw(v),
            Data::F64(v) => raw(v),
            Data::F16(v) => raw(v),
            Data::BF16(v) => raw(v),
            Data::I8(v) => raw(v),
            Data::I16(v) => raw(v),
            Data::I32(v) => raw(v),
            Data::I64(v) => raw(v),
            Data::U8(v) => v,
            Data::U32(v) => raw(v),
            Data::Bool(v) => raw(v),
            Data::U16(v) => raw(v),
            Data::U64(v) => raw(v),
            Data::F8E4M3FN(v) => raw(v),
            Data::F8E4M3FNUZ(v) => raw(v),
            Data::F8E5M2(v) => raw(v),
            Data::F8E5M2FNUZ(v) => raw(v),
            Data::F4E2M1FN(v) => raw(v),
            Data::I4(v) => raw(v),
            Data::U4(v) => raw(v),
            Data::I2(v) => raw(v),
            Data::U2(v) => raw(v),
        })
    }
    /// Raw little-endian bytes of the storage, owned (see [`Tensor::le_bytes`]).
    pub fn to_le_bytes(&self) -> Vec<u8> {
        self.le_bytes().into_owned()
    }
    /// Element-by-element little-endian encoding (big-endian targets).
    fn to_le_bytes_converted(&self) -> Vec<u8> {
        match &self.data {
            Data::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::BF16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::I8(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::U8(v) => v.clone(),
            Data::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::Bool(v) => v.iter().map(|&b| b as u8).collect(),
            Data::U16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::U64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::F8E4M3FN(v) => v.iter().map(|x| x.to_bits()).collect(),
            Data::F8E4M3FNUZ(v) => v.iter().map(|x| x.to_bits()).collect(),
            Data::F8E5M2(v) => v.iter().map(|x| x.to_bits()).collect(),
            Data::F8E5M2FNUZ(v) => v.iter().map(|x| x.to_bits()).collect(),
            Data::F4E2M1FN(v) => v.iter().map(|x| x.to_bits()).collect(),
            Data::I4(v) => v.iter().map(|x| x.to_bits()).collect(),
            Data::U4(v) => v.iter().map(|x| x.to_bits()).collect(),
            Data::I2(v) => v.iter().map(|x| x.to_bits()).collect(),
            Data::U2(v) => v.iter().map(|x| x.to_bits()).collect(),
        }
    }
    /// Build from raw little-endian bytes; errors on a length that does not match.
    pub fn from_le_bytes(shape: &[usize], dtype: DType, bytes: &[u8]) -> Result<Tensor, IrError> {
        let n = crate::shape::numel_of(shape);
        let sz = dtype.size_bytes();
        if bytes.len() != n.saturating_mul(sz) {
            return Err(IrError::BufferLength {
                what: format!("{dtype} bytes"),
                expected: n.saturating_mul(sz),
                got: bytes.len(),
                shape: shape.to_vec(),
            });
        }
        macro_rules! conv {
            ($t:ty, $v:ident, $n:literal) => {
                Data::$v(bytes.chunks_exact($n).map(|c| <$t>::from_le_bytes(c.try_into().unwrap())).collect())
            };
        }
        let data = match dtype {
            DType::F32 => conv!(f32, F32, 4),
            DType::F64 => conv!(f64, F64, 8),
            DType::F16 => conv!(f16, F16, 2),
            DType::BF16 => conv!(bf16, BF16, 2),
            DType::I8 => conv!(i8, I8, 1),
            DType::I16 => conv!(i16, I16, 2),
            DType::I32 => conv!(i32, I32, 4),
            DType::I64 => conv!(i64, I64, 8),
            DType::U8 => Data::U8(bytes.to_vec()),
            DType::U32 => conv!(u32, U32, 4),
            DType::Bool => Data::Bool(bytes.iter().map(|&b| b != 0).collect()),
            DType::U16 => conv!(u16, U16, 2),
            DType::U64 => conv!(u64, U64, 8),
            DType::F8E4M3FN => Data::F8E4M3FN(bytes.iter().map(|&b| F8E4M3FN::from_bits(b)).collect()),
            DType::F8E4M3FNUZ => Data::F8E4M3FNUZ(bytes.iter().map(|&b| F8E4M3FNUZ::from_bits(b)).collect()),
            DType::F8E5M2 => Data::F8E5M2(bytes.iter().map(|&b| F8E5M2::from_bits(b)).collect()),
            DType::F8E5M2FNUZ => Data::F8E5M2FNUZ(bytes.iter().map(|&b| F8E5M2FNUZ::from_bits(b)).collect()),
            DType::F4E2M1FN => Data::F4E2M1FN(bytes.iter().map(|&b| F4E2M1FN::from_bits(b)).collect()),
            DType::I4 => Data::I4(bytes.iter().map(|&b| I4::from_bits(b)).collect()),
            DType::U4 => Data::U4(bytes.iter().map(|&b| U4::from_bits(b)).collect()),
            DType::I2 => Data::I2(bytes.iter().map(|&b| I2::from_bits(b)).collect()),
            DType::U2 => Data::U2(bytes.iter().map(|&b| U2::from_bits(b)).collect()),
        };
        Ok(Tensor { shape: shape.to_vec(), data })
    }
}

/// Serialized form for human-readable formats (JSON): dtype, dims, and the little-endian
/// bytes as hex (keeps NaN/inf exact, which JSON numbers cannot).
#[derive(Serialize, Deserialize)]
struct TensorRepr {
    dtype: DType,
    shape: Vec<usize>,
    hex: String,
}

/// Serialized form for binary formats (`is_human_readable() == false`: CBOR, the compile
/// cache's fingerprint): dtype, dims, and the little-endian bytes as one byte string, written
/// straight from the storage (no hex, no copy on little-endian targets).
#[derive(Serialize)]
struct TensorBin<'a> {
    dtype: DType,
    shape: &'a [usize],
    bytes: RawBytes<'a>,
}

/// A byte string that serializes with `serialize_bytes` (a plain `&[u8]` is a sequence).
struct RawBytes<'a>(&'a [u8]);

impl Serialize for RawBytes<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

#[derive(Deserialize)]
struct TensorBinOwned {
    dtype: DType,
    shape: Vec<usize>,
    bytes: ByteBuf,
}

/// Owned bytes read from a byte string (or, from formats without one, a sequence of `u8`).
struct ByteBuf(Vec<u8>);

impl<'de> Deserialize<'de> for ByteBuf {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<ByteBuf, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = ByteBuf;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("tensor bytes")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<ByteBuf, E> {
                Ok(ByteBuf(v.to_vec()))
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<ByteBuf, E> {
                Ok(ByteBuf(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<ByteBuf, A::Error> {
                let mut v = Vec::new();
                while let Some(b) = a.next_element::<u8>()? {
                    v.push(b);
                }
                Ok(ByteBuf(v))
            }
        }
        d.deserialize_byte_buf(V)
    }
}

impl Serialize for Tensor {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let bytes = self.le_bytes();
        if !s.is_human_readable() {
            return TensorBin { dtype: self.dtype(), shape: &self.shape, bytes: RawBytes(&bytes) }.serialize(s);
        }
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut hex = String::with_capacity(bytes.len() * 2);
        for &b in bytes.iter() {
            hex.push(HEX[(b >> 4) as usize] as char);
            hex.push(HEX[(b & 15) as usize] as char);
        }
        TensorRepr { dtype: self.dtype(), shape: self.shape.clone(), hex }.serialize(s)
    }
}

impl<'de> Deserialize<'de> for Tensor {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Tensor, D::Error> {
        use serde::de::Error;
        if !d.is_human_readable() {
            let r = TensorBinOwned::deserialize(d)?;
            return Tensor::from_le_bytes(&r.shape, r.dtype, &r.bytes.0).map_err(D::Error::custom);
        }
        let r = TensorRepr::deserialize(d)?;
        if r.hex.len() % 2 != 0 || !r.hex.is_ascii() {
            return Err(D::Error::custom("tensor hex payload has odd length or non-ascii"));
        }
        let nib = |c: u8| -> Result<u8, D::Error> {
            (c as char).to_digit(16).map(|v| v as u8).ok_or_else(|| D::Error::custom("bad hex digit"))
        };
        let raw = r.hex.as_bytes();
        let mut bytes = Vec::with_capacity(raw.len() / 2);
        for c in raw.chunks_exact(2) {
            bytes.push(nib(c[0])? << 4 | nib(c[1])?);
        }
        Tensor::from_le_bytes(&r.shape, r.dtype, &bytes).map_err(D::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cast_follows_xla_rules() {
        let t = Tensor::from_vec(vec![1.7f32, -1.7, f32::NAN, 1e10, -1e10], &[5]).unwrap();
        assert_eq!(t.cast(DType::I32).as_slice::<i32>().unwrap(), &[1, -1, 0, i32::MAX, i32::MIN]);
        assert_eq!(t.cast(DType::U8).as_slice::<u8>().unwrap(), &[1, 0, 0, 255, 0]);
        let i = Tensor::from_vec(vec![300i32, -1], &[2]).unwrap();
        assert_eq!(i.cast(DType::U8).as_slice::<u8>().unwrap(), &[44, 255]);
    }

    #[test]
    fn narrow_float_conversions_round_once() {
        // 1 + 2^-11 + 2^-40 is just above the f16 midpoint between 1 and 1 + 2^-10.
        let v = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(<f16 as Elem>::of_f64(0.0) + <f16 as Elem>::of_f64(v), <f16 as Elem>::of_f64(1.0009765625));
        let v = 1.0 + 2f64.powi(-8) + 2f64.powi(-40);
        assert_eq!(<bf16 as Elem>::of_f64(v).to_f64(), 1.0078125);
        // 2^62 + 2^38 + 1 rounds up to 2^62 + 2^39 in f32 (a double rounding gives 2^62).
        let i = (1i64 << 62) + (1i64 << 38) + 1;
        assert_eq!(<f32 as Elem>::of_i64(i) as f64, 4611686568183201792.0);
        assert_eq!(<bf16 as Elem>::of_i64(i).to_f64(), 2f64.powi(62));
        // Exactly halfway values still round to even.
        assert_eq!(<f16 as Elem>::of_f64(1.0 + 2f64.powi(-11)).to_f64(), 1.0);
    }

    #[test]
    fn serde_keeps_nan_and_inf() {
        let t = Tensor::from_vec(vec![f32::NAN, f32::NEG_INFINITY, 1.5], &[3]).unwrap();
        let s = serde_json::to_string(&t).unwrap();
        let back: Tensor = serde_json::from_str(&s).unwrap();
        assert_eq!(t.to_le_bytes(), back.to_le_bytes());
    }

    #[test]
    fn binary_serde_keeps_bits_and_bytes() {
        // CBOR is not human-readable: the tensor travels as one byte string, not hex.
        let ts = [
            Tensor::from_vec(vec![f32::NAN, -0.0, f32::NEG_INFINITY, 1.5], &[2, 2]).unwrap(),
            Tensor::from_vec(vec![true, false, true], &[3]).unwrap(),
            Tensor::from_vec(vec![f16::from_f32(0.5), f16::NAN], &[2]).unwrap(),
            Tensor::from_vec(vec![-7i64], &[]).unwrap(),
        ];
        for t in ts {
            let mut buf = vec![];
            ciborium::into_writer(&t, &mut buf).unwrap();
            assert!(buf.len() < 64 + t.to_le_bytes().len(), "binary form is not hex");
            let back: Tensor = ciborium::from_reader(buf.as_slice()).unwrap();
            assert_eq!((back.dtype(), back.shape()), (t.dtype(), t.shape()));
            assert_eq!(back.to_le_bytes(), t.to_le_bytes());
        }
    }

    #[test]
    fn wide_unsigned_casts() {
        let t = Tensor::from_vec(vec![u64::MAX, 3], &[2]).unwrap();
        assert_eq!(t.cast(DType::F64).as_slice::<f64>().unwrap(), &[18446744073709551615.0, 3.0]);
        assert_eq!(t.cast(DType::I32).as_slice::<i32>().unwrap(), &[-1, 3]);
        let f = Tensor::from_vec(vec![1.9e19f64, -2.0, 65535.9], &[3]).unwrap();
        assert_eq!(f.cast(DType::U64).as_slice::<u64>().unwrap(), &[u64::MAX, 0, 65535]);
        assert_eq!(f.cast(DType::U16).as_slice::<u16>().unwrap(), &[u16::MAX, 0, 65535]);
        for d in DType::ALL {
            let z = Tensor::zeros(&[3], d);
            let back = Tensor::from_le_bytes(&[3], d, &z.to_le_bytes()).unwrap();
            assert_eq!(back.dtype(), d);
            assert_eq!(back.to_f64_vec(), vec![0.0; 3]);
        }
    }

    #[test]
    fn le_bytes_are_little_endian() {
        let t = Tensor::from_vec(vec![1.0f32, -2.0], &[2]).unwrap();
        assert_eq!(&*t.le_bytes(), &[0, 0, 0x80, 0x3f, 0, 0, 0, 0xc0]);
        let b = Tensor::from_vec(vec![true, false], &[2]).unwrap();
        assert_eq!(&*b.le_bytes(), &[1, 0]);
    }

    #[test]
    fn wrong_length_is_an_error() {
        assert!(Tensor::from_vec(vec![1.0f32; 3], &[2, 2]).is_err());
    }
}
