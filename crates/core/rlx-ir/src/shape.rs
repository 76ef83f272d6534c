//! Tensor types: dims (static or symbolic) plus a dtype.

use crate::DType;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// One dimension: a known size, or a named symbol bound when the graph is run.
///
/// `Dim::Sym("?")` is the anonymous dynamic dim written `?` in the spec; every `?` in a graph
/// names the same symbol (the batch), other names are independent.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Dim {
    /// A size known when the graph is built.
    Static(usize),
    /// A size bound from the input shapes at run time.
    Sym(String),
}

impl Dim {
    /// The anonymous dynamic dim `?`.
    pub fn dynamic() -> Dim {
        Dim::Sym("?".to_string())
    }
    /// The static size, if known.
    pub fn as_static(&self) -> Option<usize> {
        match self {
            Dim::Static(n) => Some(*n),
            Dim::Sym(_) => None,
        }
    }
}

impl From<usize> for Dim {
    fn from(n: usize) -> Dim {
        Dim::Static(n)
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Static(n) => write!(f, "{n}"),
            Dim::Sym(s) => f.write_str(s),
        }
    }
}

/// The type of a value: dims plus element dtype. Row-major (C order) layout is implied.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Shape {
    /// Dimensions, outermost first.
    pub dims: Vec<Dim>,
    /// Element type.
    pub dtype: DType,
}

/// Symbol bindings used to specialize symbolic shapes (`"?" -> 32`).
pub type Bindings = BTreeMap<String, usize>;

impl Shape {
    /// A static shape, e.g. `Shape::new(&[1, 4], DType::F32)`.
    pub fn new(dims: &[usize], dtype: DType) -> Shape {
        Shape { dims: dims.iter().map(|&d| Dim::Static(d)).collect(), dtype }
    }
    /// A shape from dims that may be symbolic.
    pub fn from_dims(dims: &[Dim], dtype: DType) -> Shape {
        Shape { dims: dims.to_vec(), dtype }
    }
    /// A rank-0 shape.
    pub fn scalar(dtype: DType) -> Shape {
        Shape { dims: vec![], dtype }
    }
    /// Number of dims.
    pub fn rank(&self) -> usize {
        self.dims.len()
    }
    /// True when every dim is static.
    pub fn is_static(&self) -> bool {
        self.dims.iter().all(|d| matches!(d, Dim::Static(_)))
    }
    /// Static dims, or `None` if any dim is symbolic.
    pub fn static_dims(&self) -> Option<Vec<usize>> {
        self.dims.iter().map(Dim::as_static).collect()
    }
    /// Element count, or `None` if any dim is symbolic; `usize::MAX` when the count overflows
    /// (see [`numel_of`]).
    pub fn numel(&self) -> Option<usize> {
        self.static_dims().map(|d| numel_of(&d))
    }
    /// Errors when a static shape's data cannot exist in one allocation: more than
    /// `isize::MAX` bytes (Rust's bound, as `Layout::array`), including element counts whose
    /// product overflows `usize`. Symbolic shapes pass; they are checked once bound.
    pub fn check_size(&self) -> Result<(), String> {
        let Some(dims) = self.static_dims() else { return Ok(()) };
        let fits = numel_of(&dims).checked_mul(self.dtype.size_bytes()).is_some_and(|b| b <= isize::MAX as usize);
        if fits {
            Ok(())
        } else {
            Err(format!("{self} holds more than isize::MAX bytes, more than one allocation can"))
        }
    }
    /// The same dims with another dtype.
    pub fn with_dtype(&self, dtype: DType) -> Shape {
        Shape { dims: self.dims.clone(), dtype }
    }
    /// Substitute bound symbols by their sizes; unbound symbols stay symbolic.
    pub fn bind(&self, b: &Bindings) -> Shape {
        let dims = self
            .dims
            .iter()
            .map(|d| match d {
                Dim::Sym(s) => b.get(s).map(|&n| Dim::Static(n)).unwrap_or_else(|| d.clone()),
                s => s.clone(),
            })
            .collect();
        Shape { dims, dtype: self.dtype }
    }
    /// Names of the symbols this shape uses.
    pub fn symbols(&self) -> impl Iterator<Item = &str> {
        self.dims.iter().filter_map(|d| match d {
            Dim::Sym(s) => Some(s.as_str()),
            _ => None,
        })
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[", self.dtype)?;
        for (i, d) in self.dims.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{d}")?;
        }
        f.write_str("]")
    }
}

/// Element count of static dims: 0 when any dim is 0, `usize::MAX` when the product overflows
/// (so an absurd shape never wraps around to a small count such as 0).
pub fn numel_of(dims: &[usize]) -> usize {
    if dims.contains(&0) {
        return 0;
    }
    dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).unwrap_or(usize::MAX)
}

/// Row-major strides (in elements) of a static shape.
pub fn strides_of(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

/// Normalize a possibly negative axis against `rank` (numpy convention: -1 is the last axis).
pub fn normalize_axis(axis: i64, rank: usize) -> Option<usize> {
    let r = rank as i64;
    let a = if axis < 0 { axis + r } else { axis };
    (0..r).contains(&a).then_some(a as usize)
}

/// Anything usable as a dim list in builders: `&[usize]`, `[usize; N]`, `Vec<usize>`,
/// `&[Dim]`, `Vec<Dim>`.
pub trait IntoDims {
    /// The dims.
    fn into_dims(self) -> Vec<Dim>;
}
impl IntoDims for &[usize] {
    fn into_dims(self) -> Vec<Dim> {
        self.iter().map(|&d| Dim::Static(d)).collect()
    }
}
impl IntoDims for Vec<usize> {
    fn into_dims(self) -> Vec<Dim> {
        self.as_slice().into_dims()
    }
}
impl IntoDims for &Vec<usize> {
    fn into_dims(self) -> Vec<Dim> {
        self.as_slice().into_dims()
    }
}
impl<const N: usize> IntoDims for [usize; N] {
    fn into_dims(self) -> Vec<Dim> {
        self.as_slice().into_dims()
    }
}
impl<const N: usize> IntoDims for &[usize; N] {
    fn into_dims(self) -> Vec<Dim> {
        self.as_slice().into_dims()
    }
}
impl IntoDims for &[Dim] {
    fn into_dims(self) -> Vec<Dim> {
        self.to_vec()
    }
}
impl IntoDims for Vec<Dim> {
    fn into_dims(self) -> Vec<Dim> {
        self
    }
}
impl IntoDims for &Vec<Dim> {
    fn into_dims(self) -> Vec<Dim> {
        self.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Graph, IrError, Tensor, verify};

    #[test]
    fn element_counts_never_wrap() {
        assert_eq!(numel_of(&[]), 1);
        assert_eq!(numel_of(&[3, 4]), 12);
        // 2^32 · 2^32 wraps to 0 in a plain product.
        assert_eq!(numel_of(&[1 << 32, 1 << 32]), usize::MAX);
        assert_eq!(numel_of(&[1 << 32, 1 << 32, 0]), 0);
        assert!(Shape::new(&[1 << 40, 1 << 22], DType::F32).check_size().is_err());
        // 2^61 bytes fit isize; 2^61 f32 elements (2^63 bytes) do not.
        assert!(Shape::new(&[1 << 61], DType::U8).check_size().is_ok());
        assert!(Shape::new(&[1 << 61], DType::F32).check_size().is_err());
        assert!(Shape::from_dims(&[Dim::dynamic(), Dim::Static(1 << 62)], DType::F32).check_size().is_ok());
        // A tensor whose shape's product wraps to the data length is refused.
        assert!(matches!(Tensor::from_vec(Vec::<f32>::new(), &[1 << 32, 1 << 32]), Err(IrError::BufferLength { .. })));
        assert!(Tensor::from_le_bytes(&[1 << 62, 4], DType::F32, &[]).is_err());
    }

    #[test]
    fn a_node_whose_data_cannot_exist_is_a_graph_error() {
        let mut g = Graph::new("huge");
        let x = g.input("x", Shape::new(&[1], DType::F32));
        let y = g.broadcast_in_dim(x, [1 << 32, 1 << 32], &[1]);
        g.set_outputs(vec![y]);
        let e = verify(&g).unwrap_err().to_string();
        assert!(e.contains("isize::MAX bytes"), "{e}");
        // Symbolic dims are checked when bound.
        let mut g = Graph::new("bound");
        let x = g.input("x", Shape::from_dims(&[Dim::dynamic(), Dim::Static(1 << 40)], DType::F32));
        let y = g.neg(x);
        g.set_outputs(vec![y]);
        verify(&g).unwrap();
        let b = Bindings::from([("?".to_string(), 1usize << 40)]);
        assert!(crate::specialize(&g, &b).is_err());
    }
}
