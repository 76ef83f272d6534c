//! The op table: one line per ONNX op that maps directly onto RLX primitives or composites,
//! and a call into a small per-family file for ops that need logic. [`Ctx`] gives handlers
//! their operands, attributes and typed errors.

mod attention;
mod col2im;
pub(crate) mod control;
mod einsum;
mod elementwise;
mod flex_attention;
mod grid_sample;
mod loss;
mod misc;
mod nn;
mod quant;
mod recurrent;
mod reduce;
mod resize;
mod rnn;
mod rotary;
mod scatter;
mod shape;
mod spectral;
mod tfidf;
mod training;

use crate::error::{OnnxError, Result};
use crate::import::ImportOptions;
use crate::proto::{AttributeProto, NodeProto, attribute_proto::AttributeType};
use crate::tensor::{dtype_of, to_tensor};
use elementwise::{act, binary, cmp, unary, variadic};
use rlx_ir::ops::{BinaryOp as B, CompareOp as C, ReduceOp as R, UnaryOp as U};
use rlx_ir::{DType, Dim, Graph, NodeId, Op, Shape, Tensor, normalize_axis};
use std::collections::HashMap;

/// An ONNX value during import: its RLX node, its value when it is a constant (initializers,
/// `Constant`, folded nodes), and its value when only known from `ImportOptions::input_values`.
#[derive(Clone, Debug)]
pub(crate) struct Val {
    pub id: NodeId,
    pub konst: Option<std::sync::Arc<Tensor>>,
    pub demand: Option<Tensor>,
}

impl Val {
    /// A value for node `id`, constant when the node is a literal.
    pub fn of(g: &Graph, id: NodeId) -> Val {
        let konst = match &g.node(id).op {
            Op::Constant(t) => Some(t.clone()),
            _ => None,
        };
        Val { id, konst, demand: None }
    }
}

/// An op importer: builds the node's results into `cx.g` and returns one id per output.
pub(crate) type Handler = fn(&mut Ctx) -> Result<Vec<NodeId>>;

/// What a handler sees of one ONNX node.
pub(crate) struct Ctx<'a> {
    pub g: &'a mut Graph,
    pub node: &'a NodeProto,
    pub name: &'a str,
    pub ins: &'a [Option<Val>],
    pub opset: i64,
    pub opts: &'a ImportOptions,
    /// Every value visible to the node (what its sub-graphs capture from).
    pub scope: &'a HashMap<String, Val>,
}

/// `op_type` with its domain when not the default one (`com.microsoft::Gelu`).
pub(crate) fn qualified(domain: &str, op_type: &str) -> String {
    if matches!(domain, "" | "ai.onnx") { op_type.to_string() } else { format!("{domain}::{op_type}") }
}

/// Ops whose results must not be folded at import time.
pub(crate) fn is_random(op_type: &str) -> bool {
    matches!(
        op_type,
        "RandomNormal" | "RandomUniform" | "RandomNormalLike" | "RandomUniformLike" | "Bernoulli" | "Multinomial"
    )
}

/// The importer for `op_type` in `domain`, if there is one.
pub(crate) fn lookup(domain: &str, op_type: &str) -> Option<Handler> {
    if !matches!(domain, "" | "ai.onnx") {
        let q = qualified(domain, op_type);
        return PREVIEW.iter().find(|(n, _)| *n == q).map(|(_, h)| *h);
    }
    TABLE.iter().find(|(n, _)| *n == op_type).map(|(_, h)| *h)
}

/// Every ONNX op type with an importer (other domains' ops qualified, `domain::Op`).
pub fn supported_ops() -> Vec<&'static str> {
    TABLE.iter().chain(PREVIEW).map(|(n, _)| *n).collect()
}

/// Ops of other domains, by qualified name.
#[rustfmt::skip]
static PREVIEW: &[(&str, Handler)] = &[
    ("ai.onnx.preview::FlexAttention", flex_attention::flex_attention),
    ("ai.onnx.preview.training::Adagrad", training::adagrad), ("ai.onnx.preview.training::Adam", training::adam),
    ("ai.onnx.preview.training::Momentum", training::momentum),
];

#[rustfmt::skip]
static TABLE: &[(&str, Handler)] = &[
    // Elementwise unary: jax.lax primitives one to one.
    ("Abs", |c| unary(c, U::Abs)), ("Neg", |c| unary(c, U::Neg)), ("Sign", |c| unary(c, U::Sign)),
    ("Floor", |c| unary(c, U::Floor)), ("Ceil", |c| unary(c, U::Ceil)), ("Round", |c| unary(c, U::RoundNearestEven)),
    ("Exp", |c| unary(c, U::Exp)), ("Log", |c| unary(c, U::Log)), ("Sqrt", |c| unary(c, U::Sqrt)),
    ("Reciprocal", |c| unary(c, U::Reciprocal)), ("Sin", |c| unary(c, U::Sin)), ("Cos", |c| unary(c, U::Cos)),
    ("Tan", |c| unary(c, U::Tan)), ("Asin", |c| unary(c, U::Asin)), ("Acos", |c| unary(c, U::Acos)),
    ("Atan", |c| unary(c, U::Atan)), ("Sinh", |c| unary(c, U::Sinh)), ("Cosh", |c| unary(c, U::Cosh)),
    ("Tanh", |c| unary(c, U::Tanh)), ("Asinh", |c| unary(c, U::Asinh)), ("Acosh", |c| unary(c, U::Acosh)),
    ("Atanh", |c| unary(c, U::Atanh)), ("Sigmoid", |c| unary(c, U::Logistic)), ("Erf", |c| unary(c, U::Erf)),
    ("Not", |c| unary(c, U::Not)), ("BitwiseNot", |c| unary(c, U::Not)),
    // Elementwise binary with multidirectional (NumPy) broadcasting.
    ("Add", |c| binary(c, B::Add)), ("Sub", |c| binary(c, B::Sub)), ("Mul", |c| binary(c, B::Mul)),
    ("Div", elementwise::div), ("Pow", elementwise::pow), ("Mod", elementwise::modulo),
    ("And", |c| binary(c, B::And)), ("Or", |c| binary(c, B::Or)), ("Xor", |c| binary(c, B::Xor)),
    ("BitwiseAnd", |c| binary(c, B::And)), ("BitwiseOr", |c| binary(c, B::Or)), ("BitwiseXor", |c| binary(c, B::Xor)),
    ("BitShift", elementwise::bit_shift),
    ("Equal", |c| cmp(c, C::Eq)), ("Less", |c| cmp(c, C::Lt)), ("LessOrEqual", |c| cmp(c, C::Le)),
    ("Greater", |c| cmp(c, C::Gt)), ("GreaterOrEqual", |c| cmp(c, C::Ge)),
    ("Max", |c| variadic(c, B::Max)), ("Min", |c| variadic(c, B::Min)), ("Sum", |c| variadic(c, B::Add)),
    ("Mean", elementwise::mean),
    ("Where", elementwise::where_), ("IsNaN", elementwise::is_nan), ("IsInf", elementwise::is_inf),
    ("Cast", elementwise::cast), ("CastLike", elementwise::cast_like), ("Clip", elementwise::clip),
    ("Identity", |c| Ok(vec![c.x(0)?])), ("Dropout", elementwise::dropout),
    // Activations (composites where RLX has one, else a few primitives).
    ("Relu", |c| act(c, "Relu")), ("LeakyRelu", |c| act(c, "LeakyRelu")), ("Elu", |c| act(c, "Elu")),
    ("Selu", |c| act(c, "Selu")), ("Celu", |c| act(c, "Celu")), ("HardSigmoid", |c| act(c, "HardSigmoid")),
    ("HardSwish", |c| act(c, "HardSwish")), ("Softplus", |c| act(c, "Softplus")), ("Softsign", |c| act(c, "Softsign")),
    ("ThresholdedRelu", |c| act(c, "ThresholdedRelu")), ("Mish", |c| act(c, "Mish")), ("Gelu", |c| act(c, "Gelu")),
    ("Swish", |c| act(c, "Swish")), ("Shrink", |c| act(c, "Shrink")), ("PRelu", elementwise::prelu),
    // Reductions.
    ("ReduceSum", |c| reduce::reduce(c, "Sum")), ("ReduceMean", |c| reduce::reduce(c, "Mean")),
    ("ReduceMax", |c| reduce::reduce(c, "Max")), ("ReduceMin", |c| reduce::reduce(c, "Min")),
    ("ReduceProd", |c| reduce::reduce(c, "Prod")), ("ReduceL1", |c| reduce::reduce(c, "L1")),
    ("ReduceL2", |c| reduce::reduce(c, "L2")), ("ReduceSumSquare", |c| reduce::reduce(c, "SumSquare")),
    ("ReduceLogSum", |c| reduce::reduce(c, "LogSum")), ("ReduceLogSumExp", |c| reduce::reduce(c, "LogSumExp")),
    ("ArgMax", |c| reduce::arg(c, R::Max)), ("ArgMin", |c| reduce::arg(c, R::Min)),
    ("CumSum", reduce::cumsum), ("CumProd", reduce::cumprod),
    ("Softmax", |c| reduce::softmax(c, "Softmax")), ("LogSoftmax", |c| reduce::softmax(c, "LogSoftmax")),
    ("Hardmax", |c| reduce::softmax(c, "Hardmax")),
    // Shapes and data movement.
    ("Reshape", shape::reshape), ("Flatten", shape::flatten), ("Squeeze", shape::squeeze),
    ("Unsqueeze", shape::unsqueeze), ("Transpose", shape::transpose), ("Concat", shape::concat),
    ("Split", shape::split), ("Slice", shape::slice), ("Expand", shape::expand), ("Tile", shape::tile),
    ("Shape", shape::shape), ("Size", shape::size), ("ConstantOfShape", shape::constant_of_shape),
    ("Constant", shape::constant), ("Range", shape::range), ("Pad", shape::pad),
    ("Gather", shape::gather), ("GatherElements", shape::gather_elements), ("GatherND", shape::gather_nd),
    ("DepthToSpace", shape::depth_to_space), ("SpaceToDepth", shape::space_to_depth),
    ("ScatterND", scatter::scatter_nd), ("ScatterElements", scatter::scatter_elements),
    ("Scatter", scatter::scatter_elements), ("TensorScatter", scatter::tensor_scatter),
    ("MaxUnpool", scatter::max_unpool), ("Det", misc::det),
    ("GridSample", grid_sample::grid_sample), ("AffineGrid", grid_sample::affine_grid),
    ("CenterCropPad", shape::center_crop_pad), ("Col2Im", col2im::col2im), ("Compress", shape::compress),
    ("ReverseSequence", shape::reverse_sequence),
    ("Resize", resize::resize), ("Upsample", resize::upsample),
    ("DFT", spectral::dft), ("STFT", spectral::stft), ("MelWeightMatrix", spectral::mel_weight_matrix), ("HannWindow", |c| spectral::window(c, "Hann")),
    ("HammingWindow", |c| spectral::window(c, "Hamming")), ("BlackmanWindow", |c| spectral::window(c, "Blackman")),
    ("TfIdfVectorizer", tfidf::tfidf_vectorizer), ("Trilu", misc::trilu), ("EyeLike", misc::eye_like), ("OneHot", misc::one_hot), ("TopK", misc::top_k),
    // Linear algebra and neural-network layers.
    ("Einsum", einsum::einsum), ("RNN", rnn::rnn), ("GRU", rnn::gru), ("LSTM", rnn::lstm),
    ("MatMul", nn::matmul), ("Gemm", nn::gemm), ("Conv", nn::conv), ("ConvTranspose", nn::conv_transpose),
    ("MaxPool", |c| nn::pool(c, "Max")), ("AveragePool", |c| nn::pool(c, "Avg")), ("LpPool", |c| nn::pool(c, "Lp")),
    ("GlobalAveragePool", |c| nn::global_pool(c, R::Sum)), ("GlobalMaxPool", |c| nn::global_pool(c, R::Max)),
    ("BatchNormalization", nn::batch_norm), ("InstanceNormalization", nn::instance_norm),
    ("LayerNormalization", nn::layer_norm), ("RMSNormalization", nn::rms_norm), ("GroupNormalization", nn::group_norm),
    ("LpNormalization", nn::lp_norm), ("MeanVarianceNormalization", nn::mvn), ("LRN", nn::lrn),
    ("Attention", attention::attention), ("LinearAttention", recurrent::linear_attention),
    ("CausalConvWithState", recurrent::causal_conv_with_state), ("RotaryEmbedding", rotary::rotary_embedding),
    ("NegativeLogLikelihoodLoss", loss::nll_loss), ("SoftmaxCrossEntropyLoss", loss::softmax_cross_entropy),
    // Quantization.
    ("QuantizeLinear", quant::quantize_linear), ("DequantizeLinear", quant::dequantize_linear),
    ("DynamicQuantizeLinear", quant::dynamic_quantize_linear), ("MatMulInteger", quant::matmul_integer),
    ("QLinearMatMul", quant::qlinear_matmul), ("ConvInteger", quant::conv_integer),
    ("QLinearConv", quant::qlinear_conv),
    // Control flow (sub-graphs capture outer values).
    ("If", control::if_), ("Loop", control::loop_), ("Scan", control::scan),
];

impl Ctx<'_> {
    /// A typed error naming this node.
    pub fn err(&self, msg: impl Into<String>) -> OnnxError {
        OnnxError::Node { op_type: self.node.op_type().into(), node: self.name.into(), msg: msg.into() }
    }
    /// Optional input `i` (absent when not listed or named `""`).
    pub fn opt(&self, i: usize) -> Option<NodeId> {
        self.ins.get(i).and_then(|v| v.as_ref()).map(|v| v.id)
    }
    /// Required input `i`.
    pub fn x(&self, i: usize) -> Result<NodeId> {
        self.opt(i).ok_or_else(|| self.err(format!("input {i} is required")))
    }
    /// Every present input.
    pub fn all(&self) -> Vec<NodeId> {
        self.ins.iter().flatten().map(|v| v.id).collect()
    }
    /// Value of input `i` when known at import time.
    pub fn value(&self, i: usize) -> Option<&Tensor> {
        let v = self.ins.get(i)?.as_ref()?;
        v.konst.as_deref().or(v.demand.as_ref())
    }
    /// Input `i` as integers; it must be known at import time.
    pub fn ints_in(&self, i: usize) -> Result<Vec<i64>> {
        let t = self.value(i).ok_or_else(|| {
            self.err(format!("input {i} must be a constant (an initializer, or given in ImportOptions::input_values)"))
        })?;
        if t.dtype().is_float() {
            return Ok(t.to_f64_vec().into_iter().map(|v| v as i64).collect());
        }
        Ok(t.cast(DType::I64).as_slice::<i64>().expect("cast to i64").to_vec())
    }
    /// Optional constant integer input `i`.
    pub fn opt_ints_in(&self, i: usize) -> Result<Option<Vec<i64>>> {
        if self.opt(i).is_none() { Ok(None) } else { self.ints_in(i).map(Some) }
    }
    /// Input `i` as floats; it must be known at import time.
    pub fn floats_in(&self, i: usize) -> Result<Vec<f64>> {
        self.value(i).map(|t| t.to_f64_vec()).ok_or_else(|| self.err(format!("input {i} must be a constant")))
    }
    /// The type of a node.
    pub fn ty(&self, id: NodeId) -> Shape {
        self.g.shape(id).clone()
    }
    /// Rank of a node's type.
    pub fn rank(&self, id: NodeId) -> usize {
        self.g.shape(id).rank()
    }
    /// Dtype of a node.
    pub fn dtype(&self, id: NodeId) -> DType {
        self.g.shape(id).dtype
    }
    /// Static dims of a node, or an error naming the node.
    pub fn dims(&self, id: NodeId) -> Result<Vec<usize>> {
        let s = self.g.shape(id);
        s.static_dims().ok_or_else(|| self.err(format!("needs static dims, got {s}")))
    }
    /// Dims of a node (static or symbolic).
    pub fn sdims(&self, id: NodeId) -> Vec<Dim> {
        self.g.shape(id).dims.clone()
    }
    /// Normalize an ONNX axis (negative counts from the end).
    pub fn axis(&self, a: i64, rank: usize) -> Result<usize> {
        normalize_axis(a, rank).ok_or_else(|| self.err(format!("axis {a} is out of range for rank {rank}")))
    }
    fn attr(&self, name: &str) -> Option<&AttributeProto> {
        self.node.attribute.iter().find(|a| a.name() == name)
    }
    /// True when the attribute is present.
    pub fn has(&self, name: &str) -> bool {
        self.attr(name).is_some()
    }
    /// Int attribute.
    pub fn ai(&self, name: &str, default: i64) -> i64 {
        self.attr(name).map(|a| a.i()).unwrap_or(default)
    }
    /// Float attribute.
    pub fn af(&self, name: &str, default: f32) -> f32 {
        self.attr(name).map(|a| a.f()).unwrap_or(default)
    }
    /// Ints attribute.
    pub fn aints(&self, name: &str) -> Option<Vec<i64>> {
        self.attr(name).map(|a| a.ints.clone())
    }
    /// Floats attribute.
    pub fn afloats(&self, name: &str) -> Option<Vec<f32>> {
        self.attr(name).map(|a| a.floats.clone())
    }
    /// String attribute (lossy UTF-8).
    pub fn astr(&self, name: &str, default: &str) -> String {
        self.attr(name).map(|a| String::from_utf8_lossy(a.s()).into_owned()).unwrap_or_else(|| default.into())
    }
    /// Tensor attribute.
    pub fn atensor(&self, name: &str) -> Result<Option<Tensor>> {
        match self.attr(name) {
            Some(a) if a.r#type() == AttributeType::Tensor || a.t.is_some() => {
                let t = a.t.as_ref().ok_or_else(|| self.err(format!("attribute {name} has no tensor")))?;
                Ok(Some(to_tensor(t, self.opts.base_dir.as_deref())?))
            }
            _ => Ok(None),
        }
    }
    /// Dtype attribute (`to`, `dtype`, `output_datatype`).
    pub fn adtype(&self, name: &str, default: DType) -> Result<DType> {
        match self.attr(name) {
            Some(a) => dtype_of(a.i() as i32, &format!("attribute {name} of node {}", self.name)),
            None => Ok(default),
        }
    }
    /// A scalar constant of `dtype`.
    pub fn scalar(&mut self, v: f64, dtype: DType) -> NodeId {
        self.g.scalar(v, dtype)
    }
    /// A scalar constant with the dtype of `like`.
    pub fn scalar_like(&mut self, v: f64, like: NodeId) -> NodeId {
        let d = self.dtype(like);
        self.g.scalar(v, d)
    }
    /// A 1-D i64 constant.
    pub fn i64s(&mut self, v: &[i64]) -> NodeId {
        self.g.constant(Tensor::from_vec(v.to_vec(), &[v.len()]).expect("1-D"))
    }
}
