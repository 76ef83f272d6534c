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
    /// Element count, or `None` if any dim is symbolic.
    pub fn numel(&self) -> Option<usize> {
        self.static_dims().map(|d| d.iter().product())
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
