//! Records of the composites (`rlx_ir::compose`), PyTorch semantics. A composite runs as its
//! decomposition, which rounds every intermediate in the case dtype: pure elementwise chains are
//! `Close` in f32/f64 and `Approximate` in f16/bf16; anything that sums (norms, contractions,
//! log-sum-exp cancellation) is `Approximate`.

use crate::Rec;
use crate::common::Tol;
use rlx_ir::op::{Activation, MaskKind, RopeLayout};

fn pair(v: Vec<usize>) -> [usize; 2] {
    [v[0], v[1]]
}

pub fn records() -> Vec<Rec> {
    vec![
        // exp(x - max) in the dtype: the rounding of x - max is amplified by |x - max| (a
        // probability e^-16 is only good to ~16 eps relative, in PyTorch's kernel too).
        Rec::new("softmax", Tol::Approximate, |g, x, a| vec![g.softmax(x[0], a.i64("axis"))]),
        Rec::new("log_softmax", Tol::Approximate, |g, x, a| vec![g.log_softmax(x[0], a.i64("axis"))]),
        // 1 + erf(x / sqrt 2) cancels for x < -2 in the dtype (as PyTorch's own kernel does).
        Rec::new("gelu", Tol::Approximate, |g, x, a| vec![g.gelu(x[0], a.bool("approximate"))]),
        Rec::new("silu", Tol::Close, |g, x, _| vec![g.silu(x[0])]).lowp(Tol::Approximate),
        Rec::new("relu", Tol::Exact, |g, x, _| vec![g.relu(x[0])]),
        Rec::new("activation", Tol::Approximate, |g, x, a| {
            let act = match a.str("act") {
                "relu" => Activation::Relu,
                "gelu" => Activation::Gelu,
                "gelu_tanh" => Activation::GeluTanh,
                "silu" => Activation::Silu,
                "sigmoid" => Activation::Sigmoid,
                "tanh" => Activation::Tanh,
                _ => Activation::Identity,
            };
            let s = g.shape(x[0]).clone();
            vec![g.activation(act, x[0], s)]
        }),
        Rec::new("layer_norm", Tol::Approximate, |g, x, a| {
            let gamma = a.bool("gamma").then(|| x[1]);
            let beta = a.bool("beta").then(|| x[if a.bool("gamma") { 2 } else { 1 }]);
            vec![g.layer_norm(x[0], gamma, beta, a.i64("axis"), a.f64("epsilon"))]
        }),
        Rec::new("rms_norm", Tol::Approximate, |g, x, a| {
            let gamma = a.bool("gamma").then(|| x[1]);
            vec![g.rms_norm(x[0], gamma, a.i64("axis"), a.f64("epsilon"))]
        }),
        Rec::new("batch_norm", Tol::Close, |g, x, a| {
            vec![g.batch_norm(x[0], x[1], x[2], x[3], x[4], a.f64("epsilon"))]
        })
        .lowp(Tol::Approximate),
        Rec::new("linear", Tol::Approximate, |g, x, a| {
            let bias = a.bool("bias").then(|| x[2]);
            vec![g.linear(x[0], x[1], bias)]
        }),
        Rec::new("embedding", Tol::Exact, |g, x, _| vec![g.embedding(x[0], x[1])]),
        Rec::new("conv2d", Tol::Approximate, |g, x, a| {
            let bias = a.bool("bias").then(|| x[2]);
            let (s, p, d) = (pair(a.usizes("stride")), pair(a.usizes("padding")), pair(a.usizes("dilation")));
            vec![g.conv2d(x[0], x[1], bias, s, p, d, a.usize("groups"))]
        }),
        Rec::new("max_pool2d", Tol::Exact, |g, x, a| {
            vec![g.max_pool2d(x[0], pair(a.usizes("kernel")), pair(a.usizes("stride")), pair(a.usizes("padding")))]
        }),
        Rec::new("avg_pool2d", Tol::Approximate, |g, x, a| {
            vec![g.avg_pool2d(x[0], pair(a.usizes("kernel")), pair(a.usizes("stride")), pair(a.usizes("padding")))]
        }),
        Rec::new("cross_entropy", Tol::Approximate, |g, x, _| vec![g.cross_entropy(x[0], x[1])]),
        // x cos + rotate_half(x) sin: the two rounded products can cancel.
        Rec::new("rope", Tol::Approximate, |g, x, a| {
            let layout = if a.str("layout") == "hsd" { RopeLayout::Hsd } else { RopeLayout::Shd };
            vec![g.rope_with_layout(x[0], x[1], x[2], layout)]
        }),
        Rec::new("scaled_dot_product_attention", Tol::Approximate, |g, x, a| {
            let mask = match a.str("mask") {
                "causal" => MaskKind::Causal,
                "padding" => MaskKind::Padding(x[3]),
                "bias" => MaskKind::Bias(x[3]),
                _ => MaskKind::None,
            };
            let scale = a.has("scale").then(|| a.f64("scale"));
            vec![g.scaled_dot_product_attention(x[0], x[1], x[2], mask, scale)]
        }),
        Rec::new("attention_with_kvcache", Tol::Approximate, |g, x, _| {
            vec![g.attention_with_kvcache(x[0], x[1], x[2], x[3], x[4], x[5], None)]
        }),
    ]
}
