//! `Tensor`: a lazy handle on an expression, its constructors, and the one function
//! ([`Tensor::apply`]) every op goes through.

use crate::error::{Result, TensorError};
use crate::expr::{self, DataAs, Expr, Leaf};
use rlx_ir::{DType, Dim, Elem, Graph, IntoDims, NodeId, Shape, Tensor as HostTensor};
use rlx_runtime::Device;
use std::fmt;
use std::panic::Location;
use std::rc::Rc;

/// A lazy, NumPy-style tensor: operations record IR (through the ordinary `rlx_ir::Graph`
/// builder) instead of computing, and [`Tensor::to_vec`] compiles the recorded expression
/// (cached by its structure), runs it on the chosen device and returns the values.
///
/// Cloning is cheap (a reference count). A tensor is not `Send`: trace on one thread.
///
/// Errors are lazy too: an op whose operands break its rule (shapes that do not broadcast, a
/// bad axis) returns a tensor that carries a [`TensorError`] with the caller's source location;
/// every tensor computed from it carries the same error, and [`Tensor::try_to_vec`] /
/// [`Tensor::error`] return it ([`Tensor::to_vec`] panics with it).
///
/// ```
/// use rlx_tensor::Tensor;
/// let a = Tensor::from_vec(vec![1.0, 2.0, 3.0], [3]);
/// let b = Tensor::from_vec(vec![1.0, 2.0], [2]);
/// let e = (&a + &b).try_to_vec().unwrap_err(); // [3] + [2] do not broadcast
/// assert!(e.to_string().contains("add"), "{e}");
/// assert_eq!(e.location().line(), line!() - 2);
/// ```
#[derive(Clone)]
pub struct Tensor {
    pub(crate) expr: Rc<Expr>,
    pub(crate) err: Option<Rc<TensorError>>,
    pub(crate) device: Option<Device>,
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.err {
            Some(e) => write!(f, "Tensor(error: {e})"),
            None => write!(f, "Tensor({})", self.shape()),
        }
    }
}

impl Tensor {
    pub(crate) fn from_expr(expr: Rc<Expr>, device: Option<Device>) -> Tensor {
        Tensor { expr, err: None, device }
    }

    pub(crate) fn poisoned(e: TensorError, device: Option<Device>) -> Tensor {
        let expr = Expr::leaf(Leaf::Input("<error>".into()), Shape::scalar(DType::F32));
        Tensor { expr, err: Some(Rc::new(e)), device }
    }

    /// The first error among `ts`, if any.
    pub(crate) fn first_error(ts: &[&Tensor]) -> Option<Rc<TensorError>> {
        ts.iter().find_map(|t| t.err.clone())
    }

    /// Record one op: run `f` (any `rlx_ir::Graph` builder) on the operands' nodes. Every op
    /// method goes through here, so op semantics live only in `rlx-ir`. The result inherits the
    /// first operand device set with [`Tensor::on`]; an operand error propagates; a builder
    /// error becomes [`TensorError::Build`] at the caller's location.
    #[track_caller]
    pub fn apply(operands: &[&Tensor], f: impl FnOnce(&mut Graph, &[NodeId]) -> NodeId) -> Tensor {
        let location = Location::caller();
        let device = operands.iter().find_map(|t| t.device);
        if let Some(e) = Tensor::first_error(operands) {
            return Tensor { expr: operands[0].expr.clone(), err: Some(e), device };
        }
        let exprs: Vec<Rc<Expr>> = operands.iter().map(|t| t.expr.clone()).collect();
        match expr::record(&exprs, |g, x| vec![f(g, x)]) {
            Ok(mut v) => Tensor::from_expr(v.remove(0), device),
            Err(source) => Tensor::poisoned(TensorError::Build { location, source }, device),
        }
    }

    /// A tensor holding `data` (f32, the ML default dtype) with static dims `shape`
    /// (row-major). A length that does not match the shape gives an error tensor; see
    /// [`Tensor::try_from_vec`].
    #[track_caller]
    pub fn from_vec(data: Vec<f32>, shape: impl IntoDims) -> Tensor {
        Tensor::from_elems(data, shape)
    }

    /// [`Tensor::from_vec`] for any element type (`f64`, `i64`, `half::f16`, `bool`, ...).
    #[track_caller]
    pub fn from_elems<T: Elem>(data: Vec<T>, shape: impl IntoDims) -> Tensor {
        Tensor::try_from_elems(data, shape).unwrap_or_else(|e| Tensor::poisoned(e, None))
    }

    /// [`Tensor::from_vec`] that returns the error at once. Errors: symbolic dims, a length
    /// that differs from the product of the dims.
    #[track_caller]
    pub fn try_from_vec(data: Vec<f32>, shape: impl IntoDims) -> Result<Tensor> {
        Tensor::try_from_elems(data, shape)
    }

    /// [`Tensor::from_elems`] that returns the error at once.
    #[track_caller]
    pub fn try_from_elems<T: Elem>(data: Vec<T>, shape: impl IntoDims) -> Result<Tensor> {
        let location = Location::caller();
        let dims = shape.into_dims();
        let Some(dims) = dims.iter().map(Dim::as_static).collect::<Option<Vec<usize>>>() else {
            let msg = format!("data tensors need static dims, got {}", Shape::from_dims(&dims, T::DTYPE));
            return Err(TensorError::Build { location, source: rlx_ir::IrError::Invalid(msg) });
        };
        let t = HostTensor::from_vec(data, &dims).map_err(|source| TensorError::Build { location, source })?;
        Ok(Tensor::from_host(t))
    }

    /// A tensor holding a host tensor (any dtype).
    pub fn from_host(t: HostTensor) -> Tensor {
        let shape = Shape::new(t.shape(), t.dtype());
        Tensor::from_expr(Expr::leaf(Leaf::Data(t), shape), None)
    }

    /// A rank-0 f32 tensor.
    pub fn scalar(v: f32) -> Tensor {
        Tensor::from_host(HostTensor::scalar(v))
    }

    /// A named input with no data, of `shape` (dims may be symbolic, e.g. `Dim::dynamic()`):
    /// for building graphs ([`Tensor::to_graph`]) and transforms. Reading its value is a
    /// [`TensorError::Unbound`].
    pub fn input(name: &str, shape: Shape) -> Tensor {
        Tensor::from_expr(Expr::leaf(Leaf::Input(name.into()), shape), None)
    }

    /// A named param with no data (see [`Tensor::input`]).
    pub fn param(name: &str, shape: Shape) -> Tensor {
        Tensor::from_expr(Expr::leaf(Leaf::Param(name.into()), shape), None)
    }

    /// `numpy.full(shape, v)` in f32 (a broadcast scalar: no memory until evaluated).
    #[track_caller]
    pub fn full(shape: impl IntoDims, v: f64) -> Tensor {
        Tensor::full_dtype(shape, v, DType::F32)
    }

    /// `numpy.full(shape, v, dtype)`.
    #[track_caller]
    pub fn full_dtype(shape: impl IntoDims, v: f64, dtype: DType) -> Tensor {
        let dims = shape.into_dims();
        Tensor::apply(&[], |g, _| {
            let s = g.scalar(v, dtype);
            g.broadcast_to(s, dims)
        })
    }

    /// `numpy.zeros(shape)` in f32.
    #[track_caller]
    pub fn zeros(shape: impl IntoDims) -> Tensor {
        Tensor::full(shape, 0.0)
    }

    /// `numpy.ones(shape)` in f32.
    #[track_caller]
    pub fn ones(shape: impl IntoDims) -> Tensor {
        Tensor::full(shape, 1.0)
    }

    /// `torch.arange(end)` in f32: `[0, 1, ..., end - 1]` (an `iota`).
    #[track_caller]
    pub fn arange(end: usize) -> Tensor {
        Tensor::arange_dtype(end, DType::F32)
    }

    /// `numpy.arange(end, dtype=dtype)`.
    #[track_caller]
    pub fn arange_dtype(end: usize, dtype: DType) -> Tensor {
        Tensor::apply(&[], |g, _| g.iota(Shape::new(&[end], dtype), 0))
    }

    /// `numpy.eye(n)` in f32: ones on the diagonal of an `[n, n]` matrix.
    #[track_caller]
    pub fn eye(n: usize) -> Tensor {
        Tensor::apply(&[], |g, _| {
            let r = g.iota(Shape::new(&[n, n], DType::I64), 0);
            let c = g.iota(Shape::new(&[n, n], DType::I64), 1);
            let d = g.compare(rlx_ir::ops::CompareOp::Eq, r, c);
            g.convert(d, DType::F32)
        })
    }

    /// Standard normal f32 samples of `shape` from Philox-4x64-10 with key `seed` (the
    /// `rng` op, Box-Muller on NumPy's `Philox(key=seed)` stream; see `rlx_ir::ops::rng`).
    /// The same seed gives the same values on every backend. Not JAX's `threefry` stream.
    #[track_caller]
    pub fn randn(shape: impl IntoDims, seed: u64) -> Tensor {
        let dims = shape.into_dims();
        Tensor::apply(&[], |g, _| g.rng_normal(Shape::from_dims(&dims, DType::F32), seed, 0.0, 1.0))
    }

    /// Uniform f32 samples on `[0, 1)` of `shape` from Philox key `seed` (equal to NumPy's
    /// `Generator(Philox(key=seed)).random(n, dtype=np.float32)`).
    #[track_caller]
    pub fn rand(shape: impl IntoDims, seed: u64) -> Tensor {
        let dims = shape.into_dims();
        Tensor::apply(&[], |g, _| g.rng_uniform(Shape::from_dims(&dims, DType::F32), seed, 0.0, 1.0))
    }

    /// The type (dims and dtype). Unspecified (`f32[]`) for a tensor carrying an error.
    pub fn shape(&self) -> &Shape {
        self.expr.shape()
    }

    /// The dims.
    pub fn dims(&self) -> &[Dim] {
        &self.shape().dims
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.shape().dtype
    }

    /// Number of dims.
    pub fn ndim(&self) -> usize {
        self.shape().rank()
    }

    /// The error this tensor carries, if an op it depends on failed.
    pub fn error(&self) -> Option<&TensorError> {
        self.err.as_deref()
    }

    /// `Ok(self)`, or the error it carries.
    pub fn check(&self) -> Result<&Tensor> {
        match &self.err {
            Some(e) => Err((**e).clone()),
            None => Ok(self),
        }
    }

    /// This tensor, evaluated on `device` (results of ops on it inherit the device). Default:
    /// [`rlx_runtime::fastest_device`].
    pub fn on(&self, device: Device) -> Tensor {
        Tensor { device: Some(device), ..self.clone() }
    }

    /// The device set with [`Tensor::on`], if any.
    pub fn device(&self) -> Option<Device> {
        self.device
    }

    /// The IR computing `outputs`, as an `rlx_ir::Graph` named `name`: named inputs and
    /// params ([`Tensor::input`], [`Tensor::param`]) become the graph's inputs and params,
    /// data tensors become constants. Nodes are in depth-first post-order from the outputs,
    /// so the same computation written twice gives the same graph.
    /// Errors: an error carried by an output, two different tensors with one name.
    #[track_caller]
    pub fn to_graph(name: &str, outputs: &[&Tensor]) -> Result<Graph> {
        let location = Location::caller();
        if let Some(e) = Tensor::first_error(outputs) {
            return Err((*e).clone());
        }
        let exprs: Vec<Rc<Expr>> = outputs.iter().map(|t| t.expr.clone()).collect();
        expr::extract(name, &exprs, &[], DataAs::Constants)
            .map(|x| x.graph)
            .map_err(|name| TensorError::DuplicateName { location, name })
    }
}

impl Tensor {
    /// The outputs of graph `g` as tensors, its inputs and params becoming named
    /// [`Tensor::input`] / [`Tensor::param`] leaves (one per name). With [`Tensor::to_graph`]
    /// this re-emits a builder graph in the DSL's canonical node order.
    pub fn from_graph(g: &Graph) -> Vec<Tensor> {
        let mut leaves: std::collections::HashMap<String, Rc<Expr>> = std::collections::HashMap::new();
        let outs = expr::import(g, |_, n| {
            let (leaf, name) = match &n.op {
                rlx_ir::Op::Param { name } => (Leaf::Param(name.clone()), name),
                rlx_ir::Op::Input { name } => (Leaf::Input(name.clone()), name),
                _ => unreachable!("import only asks for sources"),
            };
            let e = leaves.entry(name.clone()).or_insert_with(|| Expr::leaf(leaf, n.ty().clone())).clone();
            Ok::<_, ()>(e)
        });
        outs.expect("sources always resolve").into_iter().map(|e| Tensor::from_expr(e, None)).collect()
    }
}
