//! Kernel selection and dispatch. Each fast kernel family lives in its own module; everything
//! else runs the op's reference evaluation from `rlx-ir`.
//!
//! [`select`] runs once per node at compile time and sees the whole graph with static shapes;
//! it stores any plan and scratch space in the [`Kernel`]. [`run`] executes one step and
//! allocates nothing (except [`Kernel::CompositeBody`], the slow fallback). Every fast kernel
//! gives the reference's results within float rounding (see each module's docs).

pub mod attention;
pub mod attention_kvcache;
#[cfg(target_arch = "x86_64")]
mod attention_vec;
pub mod composite;
pub mod conv;
pub mod dot;
pub mod elementwise;
pub mod epilogue;
pub mod fused;
mod fused_adam;
mod fused_tile;
pub use fused_tile::{TILE_BINARY_OPS, TILE_UNARY_OPS};
mod avx512;
pub mod gemv;
#[cfg(target_arch = "x86_64")]
mod math_vec;
pub mod movement;
#[cfg(target_arch = "x86_64")]
mod norm_vec;
pub mod qmatmul;
pub mod reduce;
pub mod rope;
pub(crate) mod scratch;
pub mod sgemm;
pub mod simd;
pub(crate) mod spin;
pub mod transpose;
#[cfg(target_arch = "x86_64")]
mod vf32;
pub mod window;

use rlx_ir::{DType, Graph, IrError, NodeId, Op, Tensor};

/// Composites with a native kernel here (others are inlined before compile): those of
/// [`composite::NATIVE`], [`qmatmul::NAME`], [`attention::NAME`], [`attention_kvcache::NAME`]
/// and [`rope::NAME`].
pub const NATIVE_COMPOSITES: &[&str] = &[
    "softmax",
    "log_softmax",
    "layer_norm",
    "rms_norm",
    qmatmul::NAME,
    attention::NAME,
    attention_kvcache::NAME,
    rope::NAME,
];

/// The kernel chosen for one node.
#[derive(Clone, Debug)]
pub enum Kernel {
    /// `Op::eval_into` from rlx-ir.
    Reference,
    /// `dot_general` on `gemm` or our GEMV.
    Dot(Box<dot::DotKernel>),
    /// f32 `conv_general_dilated` as im2col + `gemm`.
    Conv(Box<conv::ConvKernel>),
    /// f32 `reduce_window` sum / max / min (pooling).
    Window(Box<window::WindowKernel>),
    /// Elementwise, copy and convert kernels.
    Elementwise(elementwise::EwKernel),
    /// f32 sum / max / min over a contiguous run of axes.
    Reduce(reduce::ReduceKernel),
    /// Swap of two adjacent axis groups.
    Transpose(transpose::TransposeKernel),
    /// Native softmax / log_softmax / layer_norm / rms_norm.
    Norm(composite::NormKernel),
    /// Slice, rev, broadcast_in_dim, concatenate as strided copies; one-axis gather as block
    /// copies.
    Move(movement::MoveKernel),
    /// `dequant_matmul` on packed GGUF weights.
    QMatmul(Box<qmatmul::QMatmulKernel>),
    /// A `fused_elementwise` region as one blocked register program.
    Fused(Box<fused::FusedKernel>),
    /// A `dot_epilogue`: a product with its elementwise epilogue.
    Epilogue(Box<epilogue::EpilogueKernel>),
    /// `scaled_dot_product_attention` as flash-style tiles.
    Attention(Box<attention::AttentionKernel>),
    /// `attention_with_kvcache` over the visible cache columns.
    KvAttention(Box<attention_kvcache::KvCacheAttention>),
    /// `rope` in one pass.
    Rope(rope::RopeKernel),
    /// A composite without a native kernel for these operands: evaluate its body.
    CompositeBody,
}

impl Kernel {
    /// Name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            Kernel::Reference => "reference",
            Kernel::Dot(k) => k.name(),
            Kernel::Conv(_) => "conv_im2col_gemm",
            Kernel::Window(_) => "reduce_window_f32",
            Kernel::Elementwise(k) => k.name(),
            Kernel::Reduce(_) => "reduce_f32",
            Kernel::Transpose(_) => "transpose",
            Kernel::Norm(k) => k.name(),
            Kernel::Move(k) => k.name(),
            Kernel::QMatmul(k) => k.name(),
            Kernel::Fused(k) => k.name(),
            Kernel::Epilogue(k) => k.name(),
            Kernel::Attention(k) => k.name(),
            Kernel::KvAttention(k) => k.name(),
            Kernel::Rope(k) => k.name(),
            Kernel::CompositeBody => "composite_body",
        }
    }
}

/// Move the packed constant weights of `ks` into one buffer on huge pages
/// ([`sgemm::share_constants`]); called once per executable, after every kernel is selected.
pub fn share_constant_weights<'a>(ks: impl Iterator<Item = &'a mut Kernel>) {
    let mut packs: Vec<&mut sgemm::PackedB> = ks
        .filter_map(|k| match k {
            Kernel::Dot(d) => d.constant_pack(),
            Kernel::Epilogue(e) => e.constant_pack(),
            _ => None,
        })
        .collect();
    sgemm::share_constants(&mut packs);
}

/// Pick the kernel for node `id` (shapes are static).
pub fn select(g: &Graph, id: NodeId, opts: &crate::CpuOptions) -> Kernel {
    let n = g.node(id);
    let statics = |shapes: &mut dyn Iterator<Item = &rlx_ir::Shape>| -> Option<Vec<(Vec<usize>, DType)>> {
        shapes.map(|s| s.static_dims().map(|d| (d, s.dtype))).collect()
    };
    let (Some(ins), Some(outs)) = (statics(&mut n.inputs.iter().map(|&i| g.shape(i))), statics(&mut n.outputs.iter()))
    else {
        return Kernel::Reference;
    };
    if let Op::Composite(c) = &n.op {
        if c.name == fused::NAME {
            return fused::select(c, &ins, &outs).map_or(Kernel::CompositeBody, |k| Kernel::Fused(Box::new(k)));
        }
        if c.name == epilogue::NAME {
            return epilogue::select(c, &ins, &outs).map_or(Kernel::CompositeBody, |mut k| {
                if let Some(w) = constant(g, n.inputs[1]) {
                    k.prepack_rhs(w);
                }
                Kernel::Epilogue(Box::new(k))
            });
        }
        if c.name == rlx_compile::passes::upcast::DOT_GENERAL_UPCAST {
            return dot::select_upcast(c, &ins, &outs).map_or(Kernel::CompositeBody, |k| Kernel::Dot(Box::new(k)));
        }
        if c.name == attention::NAME {
            return attention::select(c, &ins, &outs).map_or(Kernel::CompositeBody, |k| Kernel::Attention(Box::new(k)));
        }
        if c.name == attention_kvcache::NAME {
            return attention_kvcache::select(c, &ins, &outs)
                .map_or(Kernel::CompositeBody, |k| Kernel::KvAttention(Box::new(k)));
        }
        if c.name == rope::NAME {
            return rope::select(c, &ins, &outs).map_or(Kernel::CompositeBody, Kernel::Rope);
        }
        if c.name == qmatmul::NAME {
            return qmatmul::select(c, &ins, &outs, opts)
                .map_or(Kernel::CompositeBody, |k| Kernel::QMatmul(Box::new(k)));
        }
        return match composite::select(c, &ins, &outs) {
            Some(k) if NATIVE_COMPOSITES.contains(&c.name.as_str()) => Kernel::Norm(k),
            _ => Kernel::CompositeBody,
        };
    }
    if outs.len() != 1 {
        return Kernel::Reference;
    }
    let out = &outs[0];
    let f32_unary = ins.len() == 1 && ins[0].1 == DType::F32 && out.1 == DType::F32;
    let k = match &n.op {
        Op::DotGeneral(d) if ins.len() == 2 => {
            dot::select(d, (&ins[0].0, ins[0].1), (&ins[1].0, ins[1].1), (&out.0, out.1)).map(|mut k| {
                if let Some(w) = constant(g, n.inputs[1]) {
                    k.prepack_rhs(w);
                }
                Kernel::Dot(Box::new(k))
            })
        }
        Op::ConvGeneralDilated(c) if ins.len() == 2 && ins.iter().all(|i| i.1 == DType::F32) && out.1 == DType::F32 => {
            conv::select(c, &ins[0].0, &ins[1].0, &out.0).map(|k| Kernel::Conv(Box::new(k)))
        }
        op if op.is_elementwise() || matches!(op, Op::Reshape { .. }) => {
            elementwise::select(op, &ins, out).map(Kernel::Elementwise)
        }
        Op::Reduce { op, axes } if f32_unary => reduce::plan(*op, &ins[0].0, axes).map(Kernel::Reduce),
        Op::ReduceWindow { op, window_dimensions, window_strides, padding, base_dilation, window_dilation }
            if f32_unary =>
        {
            window::plan(
                *op,
                &ins[0].0,
                &out.0,
                window_dimensions,
                window_strides,
                padding,
                base_dilation,
                window_dilation,
            )
            .map(|k| Kernel::Window(Box::new(k)))
        }
        Op::Transpose { permutation } if ins.len() == 1 && ins[0].1 == out.1 => {
            if permutation.iter().enumerate().all(|(i, &p)| i == p) {
                Some(Kernel::Elementwise(elementwise::EwKernel::Copy))
            } else {
                transpose::plan(&ins[0].0, permutation).map(Kernel::Transpose)
            }
        }
        Op::Slice { .. } | Op::Rev { .. } | Op::BroadcastInDim { .. } | Op::Concatenate { .. }
            if ins.iter().all(|i| i.1 == out.1) =>
        {
            let dims: Vec<Vec<usize>> = ins.iter().map(|i| i.0.clone()).collect();
            movement::plan(&n.op, &dims, &out.0).map(Kernel::Move)
        }
        Op::Gather { .. } if ins.len() == 2 && ins[0].1 == out.1 && ins[1].1.is_int() => {
            movement::plan_take(&n.op, &ins[0].0, &ins[1].0, &out.0).map(Kernel::Move)
        }
        _ => None,
    };
    k.unwrap_or(Kernel::Reference)
}

/// Execute one kernel into the preallocated `outs`.
pub fn run(k: &mut Kernel, op: &Op, ins: &[&Tensor], outs: &mut [Tensor]) -> Result<(), IrError> {
    match k {
        Kernel::Reference => op.eval_into(ins, outs),
        Kernel::Dot(k) => dot::run(k, ins[0], ins[1], &mut outs[0]),
        Kernel::Conv(k) => conv::run(k, ins[0], ins[1], &mut outs[0]),
        Kernel::Window(k) => window::run(k, ins[0], &mut outs[0]),
        Kernel::Elementwise(k) => elementwise::run(k, ins, &mut outs[0]),
        Kernel::Reduce(k) => reduce::run(k, ins[0], &mut outs[0]),
        Kernel::Transpose(k) => transpose::run(k, ins[0], &mut outs[0]),
        Kernel::Norm(k) => composite::run(k, ins, &mut outs[0]),
        Kernel::Move(k) => movement::run(k, ins, &mut outs[0]),
        Kernel::QMatmul(k) => qmatmul::run(k, ins[0], ins[1], &mut outs[0]),
        Kernel::Fused(k) => fused::run(k, ins, outs),
        Kernel::Epilogue(k) => epilogue::run(k, ins, outs),
        Kernel::Attention(k) => attention::run(k, ins, &mut outs[0]),
        Kernel::KvAttention(k) => attention_kvcache::run(k, ins, &mut outs[0]),
        Kernel::Rope(k) => rope::run(k, ins, &mut outs[0]),
        Kernel::CompositeBody => match op {
            Op::Composite(c) => composite::run_body(c, ins, outs),
            _ => op.eval_into(ins, outs),
        },
    }
}

/// The value of node `id` when it is a graph constant (fixed for the executable's lifetime).
fn constant(g: &Graph, id: NodeId) -> Option<&Tensor> {
    match &g.nodes()[id.index()].op {
        Op::Constant(t) => Some(t),
        _ => None,
    }
}
