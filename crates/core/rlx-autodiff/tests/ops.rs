//! The op-record table (JAX's `op_record`): one row per differentiable op (and a few
//! non-differentiable ones for batching), driving
//! - gradient checks in f64: forward (JVP vs central differences in a random direction) and
//!   reverse (⟨c, J v⟩ from finite differences vs ⟨vjp(c), v⟩), the VJP dot-product test
//!   ⟨c, jvp(v)⟩ = ⟨vjp(c), v⟩, all repeated on the JVP and VJP graphs themselves (order 2);
//! - vmap vs a loop over slices, for several `in_axes` per row.

mod common;
use common::*;
use rlx_autodiff::vmap;
use rlx_ir::ops::{
    BinaryOp, CompareOp, ConvGeneralDilated, CumulativeOp, DotGeneral, GatherDims, GatherMode, ReduceOp, ScatterDims,
    UnaryOp,
};
use rlx_ir::{DType, Graph, NodeId, Shape, Tensor};

/// How an operand is generated.
#[derive(Clone)]
enum In {
    /// f64 uniform in [lo, hi).
    F(&'static [usize], f64, f64),
    /// Integers uniform in [lo, hi] (i32).
    I(&'static [usize], i64, i64),
}

impl In {
    fn shape(&self) -> &'static [usize] {
        match self {
            In::F(s, ..) | In::I(s, ..) => s,
        }
    }
    fn sample(&self, rng: &mut Rng) -> Tensor {
        match self {
            In::F(s, lo, hi) => rng.tensor(s, DType::F64, *lo, *hi),
            In::I(s, lo, hi) => {
                let n: usize = s.iter().product();
                let v: Vec<f64> =
                    (0..n).map(|_| (*lo + (rng.uniform() * (hi - lo + 1) as f64) as i64) as f64).collect();
                Tensor::from_f64s(s, DType::I32, &v).unwrap()
            }
        }
    }
    fn is_float(&self) -> bool {
        matches!(self, In::F(..))
    }
}

type Build = fn(&mut Graph, &[NodeId]) -> Vec<NodeId>;

struct Rec {
    name: &'static str,
    ins: Vec<In>,
    build: Build,
    /// Run the gradient checks (false for ops with no float output or no derivative).
    grad: bool,
    /// Check second order too.
    order2: bool,
}

fn rec(name: &'static str, ins: Vec<In>, build: Build) -> Rec {
    Rec { name, ins, build, grad: true, order2: true }
}

fn un(name: &'static str, lo: f64, hi: f64, build: Build) -> Rec {
    rec(name, vec![In::F(&[2, 3], lo, hi)], build)
}

fn bin(name: &'static str, lo: f64, hi: f64, build: Build) -> Rec {
    rec(name, vec![In::F(&[2, 3], lo, hi), In::F(&[3], lo, hi)], build)
}

macro_rules! unary_recs {
    ($($op:ident: $lo:expr, $hi:expr);* $(;)?) => {
        vec![$(un(stringify!($op), $lo, $hi, |g, a| vec![g.unary(UnaryOp::$op, a[0])])),*]
    };
}

macro_rules! binary_recs {
    ($($op:ident: $lo:expr, $hi:expr);* $(;)?) => {
        vec![$(bin(stringify!($op), $lo, $hi, |g, a| vec![g.binary(BinaryOp::$op, a[0], a[1])])),*]
    };
}

fn window(op: ReduceOp) -> Build {
    match op {
        ReduceOp::Sum => |g, a| {
            vec![g.reduce_window_dilated(
                a[0],
                ReduceOp::Sum,
                &[1, 2, 2],
                &[1, 2, 1],
                &[(0, 0), (1, 0), (0, 1)],
                &[1, 1, 2],
                &[1, 1, 1],
            )]
        },
        ReduceOp::Max => {
            |g, a| vec![g.reduce_window(a[0], ReduceOp::Max, &[1, 2, 2], &[1, 2, 1], &[(0, 0), (1, 1), (0, 1)])]
        }
        _ => |g, a| {
            vec![g.reduce_window_dilated(
                a[0],
                ReduceOp::Min,
                &[1, 2, 2],
                &[1, 1, 2],
                &[(0, 0), (0, 1), (0, 0)],
                &[1, 1, 1],
                &[1, 1, 2],
            )]
        },
    }
}

fn conv(
    stride: [usize; 2],
    pad: [(i64, i64); 2],
    lhs_d: [usize; 2],
    rhs_d: [usize; 2],
    groups: usize,
) -> ConvGeneralDilated {
    ConvGeneralDilated {
        window_strides: stride.to_vec(),
        padding: pad.to_vec(),
        lhs_dilation: lhs_d.to_vec(),
        rhs_dilation: rhs_d.to_vec(),
        feature_group_count: groups,
    }
}

fn scan_body() -> Graph {
    // h' = tanh(w * h + x), y = h' * h
    let mut b = Graph::new("cell");
    let w = b.input("w", Shape::new(&[3], DType::F64));
    let h = b.input("h", Shape::new(&[3], DType::F64));
    let x = b.input("x", Shape::new(&[3], DType::F64));
    let wh = b.mul(w, h);
    let a = b.add(wh, x);
    let h2 = b.tanh(a);
    let y = b.mul(h2, h);
    b.set_outputs(vec![h2, y]);
    b
}

fn branch(k: usize) -> Graph {
    let mut b = Graph::new(format!("br{k}"));
    let x = b.input("x", Shape::new(&[3], DType::F64));
    let y = b.input("y", Shape::new(&[3], DType::F64));
    let r = match k {
        0 => b.mul(x, y),
        1 => b.sin(x),
        _ => {
            let e = b.exp(y);
            b.sub(e, x)
        }
    };
    b.set_outputs(vec![r]);
    b
}

/// A scan body with control flow inside: `h' = cond(x[0] > 0, h * x, sin(h + x))`, and an
/// inner scan summing `h'` cumulatively (`y = cumsum(h')` via scan).
fn nested_body() -> Graph {
    let mut b = Graph::new("outer");
    let h = b.input("h", Shape::new(&[3], DType::F64));
    let x = b.input("x", Shape::new(&[3], DType::F64));
    let x0 = b.slice(x, &[0], &[1], &[]);
    let x0 = b.reshape(x0, Vec::<usize>::new());
    let z = b.scalar(0.0, DType::F64);
    let p = b.compare(CompareOp::Gt, x0, z);
    let h2 = b.switch(p, vec![branch(1), branch(0)], &[h, x])[0];
    let mut inner = Graph::new("inner");
    let c = inner.input("c", Shape::new(&[], DType::F64));
    let v = inner.input("v", Shape::new(&[], DType::F64));
    let s = inner.add(c, v);
    let t = inner.tanh(s);
    inner.set_outputs(vec![s, t]);
    let c0 = b.scalar(0.0, DType::F64);
    let r = b.scan(inner, &[], &[c0], &[h2], 3, false);
    b.set_outputs(vec![h2, r[1]]);
    b
}

fn fori(n: usize) -> (Graph, Graph) {
    let mut c = Graph::new("cond");
    let i = c.input("i", Shape::new(&[], DType::I32));
    c.input("x", Shape::new(&[3], DType::F64));
    let lim = c.scalar(n as f64, DType::I32);
    let p = c.compare(CompareOp::Lt, i, lim);
    c.set_outputs(vec![p]);
    let mut b = Graph::new("body");
    let i = b.input("i", Shape::new(&[], DType::I32));
    let x = b.input("x", Shape::new(&[3], DType::F64));
    let one = b.scalar(1.0, DType::I32);
    let i2 = b.add(i, one);
    let s = b.sin(x);
    let x2 = b.mul(s, x);
    b.set_outputs(vec![i2, x2]);
    (c, b)
}

fn table() -> Vec<Rec> {
    let mut t = unary_recs![
        Neg: -1., 1.; Abs: -1., 1.; Exp: -1., 1.; Exp2: -1., 1.; Expm1: -1., 1.; Log: 0.5, 2.; Log1p: -0.5, 1.;
        Sqrt: 0.5, 2.; Rsqrt: 0.5, 2.; Cbrt: 0.5, 2.; Square: -1., 1.; Reciprocal: 0.5, 2.; Sin: -2., 2.;
        Cos: -2., 2.; Tan: -1., 1.; Asin: -0.8, 0.8; Acos: -0.8, 0.8; Atan: -2., 2.; Sinh: -1., 1.;
        Cosh: -1., 1.; Tanh: -1., 1.; Asinh: -2., 2.; Acosh: 1.5, 3.; Atanh: -0.8, 0.8; Logistic: -3., 3.;
        Erf: -1., 1.; Erfc: -1., 1.; ErfInv: -0.8, 0.8; Sign: -1., 1.; Floor: -3., 3.; Ceil: -3., 3.;
        Round: -3., 3.; RoundNearestEven: -3., 3.;
    ];
    t.extend(binary_recs![
        Add: -1., 1.; Sub: -1., 1.; Mul: -1., 1.; Div: 0.5, 2.; Rem: 0.5, 3.; Pow: 0.5, 2.; Max: -1., 1.;
        Min: -1., 1.; Atan2: -1., 1.;
    ]);
    t.extend([
        rec("mul_broadcast_2d", vec![In::F(&[2, 1], -1., 1.), In::F(&[1, 3], -1., 1.)], |g, a| vec![g.mul(a[0], a[1])]),
        rec("div_scalar", vec![In::F(&[], 0.5, 2.), In::F(&[2, 3], 0.5, 2.)], |g, a| vec![g.div(a[0], a[1])]),
        rec("select", vec![In::F(&[2, 3], -1., 1.), In::F(&[2, 3], -1., 1.), In::F(&[3], -1., 1.)], |g, a| {
            let p = g.compare(CompareOp::Gt, a[0], a[1]);
            vec![g.select(p, a[1], a[2])]
        }),
        rec("convert_f64_f64", vec![In::F(&[4], -1., 1.)], |g, a| {
            vec![g.push(rlx_ir::Op::ConvertElementType(DType::F64), &[a[0]])]
        }),
        rec("reduce_sum", vec![In::F(&[2, 3, 2], -1., 1.)], |g, a| vec![g.sum(a[0], &[0, 2], false)]),
        rec("reduce_max", vec![In::F(&[2, 3, 2], -1., 1.)], |g, a| vec![g.reduce_max(a[0], &[1], false)]),
        rec("reduce_min", vec![In::F(&[2, 3], -1., 1.)], |g, a| vec![g.reduce_min(a[0], &[0, 1], false)]),
        rec("reduce_prod", vec![In::F(&[2, 3, 2], 0.5, 1.5)], |g, a| vec![g.prod(a[0], &[1, 2], false)]),
        rec("mean_keepdims", vec![In::F(&[2, 3], -1., 1.)], |g, a| vec![g.mean(a[0], &[1], true)]),
        rec("cumsum", vec![In::F(&[3, 4], -1., 1.)], |g, a| vec![g.cumsum(a[0], 1, false)]),
        rec("cumsum_reverse", vec![In::F(&[3, 4], -1., 1.)], |g, a| vec![g.cumsum(a[0], 0, true)]),
        rec("cumprod", vec![In::F(&[3, 4], 0.5, 1.5)], |g, a| vec![g.cumulative(CumulativeOp::Prod, a[0], 1, false)]),
        rec("cummax_reverse", vec![In::F(&[3, 4], -1., 1.)], |g, a| {
            vec![g.cumulative(CumulativeOp::Max, a[0], 1, true)]
        }),
        rec("cummin", vec![In::F(&[4, 2], -1., 1.)], |g, a| vec![g.cumulative(CumulativeOp::Min, a[0], 0, false)]),
        rec("reduce_window_sum", vec![In::F(&[2, 4, 3], -1., 1.)], window(ReduceOp::Sum)),
        rec("reduce_window_max", vec![In::F(&[2, 4, 3], -1., 1.)], window(ReduceOp::Max)),
        rec("reduce_window_min", vec![In::F(&[2, 3, 3], -1., 1.)], window(ReduceOp::Min)),
        Rec { grad: false, ..rec("argmax", vec![In::F(&[3, 4], -1., 1.)], |g, a| vec![g.argmax(a[0], 1, DType::I32)]) },
        rec("broadcast_in_dim", vec![In::F(&[3, 1], -1., 1.)], |g, a| {
            vec![g.broadcast_in_dim(a[0], [2, 3, 4], &[1, 2])]
        }),
        rec("reshape", vec![In::F(&[2, 6], -1., 1.)], |g, a| vec![g.reshape(a[0], [3, 2, 2])]),
        rec("transpose", vec![In::F(&[2, 3, 4], -1., 1.)], |g, a| vec![g.transpose(a[0], &[2, 0, 1])]),
        rec("rev", vec![In::F(&[2, 3], -1., 1.)], |g, a| vec![g.rev(a[0], &[1])]),
        rec("slice_strided", vec![In::F(&[5, 4], -1., 1.)], |g, a| vec![g.slice(a[0], &[1, 0], &[5, 3], &[2, 2])]),
        rec("dynamic_slice", vec![In::F(&[5, 4], -1., 1.), In::I(&[], -1, 4)], |g, a| {
            let z = g.scalar(1.0, DType::I32);
            vec![g.dynamic_slice(a[0], &[a[1], z], &[2, 3])]
        }),
        rec(
            "dynamic_update_slice",
            vec![In::F(&[5, 4], -1., 1.), In::F(&[2, 2], -1., 1.), In::I(&[], -2, 4)],
            |g, a| {
                let z = g.scalar(2.0, DType::I32);
                vec![g.dynamic_update_slice(a[0], a[1], &[a[2], z])]
            },
        ),
        rec("concatenate", vec![In::F(&[2, 3], -1., 1.), In::F(&[2, 1], -1., 1.), In::F(&[2, 2], -1., 1.)], |g, a| {
            vec![g.concatenate(&[a[0], a[1], a[2]], 1)]
        }),
        rec("pad", vec![In::F(&[3, 4], -1., 1.), In::F(&[], -1., 1.)], |g, a| {
            vec![g.pad(a[0], a[1], &[1, -1], &[-1, 2], &[1, 0])]
        }),
        rec("take", vec![In::F(&[4, 3], -1., 1.), In::I(&[2, 2], 0, 3)], |g, a| vec![g.take(a[0], a[1], 0)]),
        rec("gather_window", vec![In::F(&[5, 4], -1., 1.), In::I(&[3, 2], -1, 4)], |g, a| {
            let d = GatherDims { offset_dims: vec![1], collapsed_slice_dims: vec![0], start_index_map: vec![0, 1] };
            vec![g.gather(a[0], a[1], d, &[1, 2], GatherMode::Clip)]
        }),
        rec("gather_fill", vec![In::F(&[5, 4], -1., 1.), In::I(&[3, 1], -1, 5)], |g, a| {
            let d = GatherDims { offset_dims: vec![1], collapsed_slice_dims: vec![0], start_index_map: vec![0] };
            vec![g.gather(a[0], a[1], d, &[1, 4], GatherMode::FillOrDrop)]
        }),
        rec("scatter_add", vec![In::F(&[5, 3], -1., 1.), In::I(&[4, 1], 0, 4), In::F(&[4, 3], -1., 1.)], |g, a| {
            let d = ScatterDims {
                update_window_dims: vec![1],
                inserted_window_dims: vec![0],
                scatter_dims_to_operand_dims: vec![0],
            };
            vec![g.scatter_add(a[0], a[1], a[2], d, GatherMode::Clip)]
        }),
        rec("matmul", vec![In::F(&[2, 3], -1., 1.), In::F(&[3, 4], -1., 1.)], |g, a| vec![g.mm(a[0], a[1])]),
        rec("dot_general_batched", vec![In::F(&[2, 3, 4], -1., 1.), In::F(&[4, 2, 3], -1., 1.)], |g, a| {
            let d = DotGeneral {
                lhs_contracting: vec![2, 1],
                rhs_contracting: vec![0, 2],
                lhs_batch: vec![0],
                rhs_batch: vec![1],
                preferred_element_type: None,
            };
            vec![g.dot_general(a[0], a[1], d)]
        }),
        rec("conv_plain", vec![In::F(&[2, 2, 4, 4], -1., 1.), In::F(&[3, 2, 2, 2], -1., 1.)], |g, a| {
            vec![g.conv_general_dilated(a[0], a[1], ConvGeneralDilated::simple(2))]
        }),
        rec("conv_strided_padded", vec![In::F(&[1, 2, 5, 6], -1., 1.), In::F(&[2, 2, 3, 2], -1., 1.)], |g, a| {
            vec![g.conv_general_dilated(a[0], a[1], conv([2, 3], [(1, 0), (2, 1)], [1, 1], [1, 2], 1))]
        }),
        rec("conv_groups_lhs_dilated", vec![In::F(&[1, 4, 3, 3], -1., 1.), In::F(&[6, 2, 2, 2], -1., 1.)], |g, a| {
            vec![g.conv_general_dilated(a[0], a[1], conv([1, 2], [(0, 1), (1, 1)], [2, 1], [1, 1], 2))]
        }),
        rec("sort_two_operands", vec![In::F(&[3, 4], -1., 1.), In::F(&[3, 4], -1., 1.)], |g, a| {
            g.sort(&[a[0], a[1]], 1, true, 1)
        }),
        rec("top_k", vec![In::F(&[2, 5], -1., 1.)], |g, a| vec![g.top_k(a[0], 3).0]),
        rec("scan_rnn", vec![In::F(&[3], -1., 1.), In::F(&[3], -1., 1.), In::F(&[4, 3], -1., 1.)], |g, a| {
            g.scan(scan_body(), &[a[0]], &[a[1]], &[a[2]], 4, false)
        }),
        rec("scan_reverse", vec![In::F(&[3], -1., 1.), In::F(&[3], -1., 1.), In::F(&[3, 3], -1., 1.)], |g, a| {
            g.scan(scan_body(), &[a[0]], &[a[1]], &[a[2]], 3, true)
        }),
        rec("scan_nested_control_flow", vec![In::F(&[3], -1., 1.), In::F(&[4, 3], -1., 1.)], |g, a| {
            g.scan(nested_body(), &[], &[a[0]], &[a[1]], 4, false)
        }),
        rec("cond_bool", vec![In::F(&[], -1., 1.), In::F(&[3], -1., 1.), In::F(&[3], -1., 1.)], |g, a| {
            let z = g.scalar(0.0, DType::F64);
            let p = g.compare(CompareOp::Gt, a[0], z);
            g.switch(p, vec![branch(0), branch(1)], &[a[1], a[2]])
        }),
        rec("switch_index", vec![In::I(&[], -1, 3), In::F(&[3], -1., 1.), In::F(&[3], -1., 1.)], |g, a| {
            g.switch(a[0], vec![branch(0), branch(1), branch(2)], &[a[1], a[2]])
        }),
        rec("while_fori", vec![In::F(&[3], -1., 1.)], |g, a| {
            let (c, b) = fori(3);
            let i0 = g.scalar(0.0, DType::I32);
            vec![g.while_loop(c, b, &[i0, a[0]])[1]]
        }),
        rec("softmax", vec![In::F(&[2, 4], -2., 2.)], |g, a| vec![g.softmax(a[0], -1)]),
        rec("log_softmax", vec![In::F(&[2, 4], -2., 2.)], |g, a| vec![g.log_softmax(a[0], 0)]),
        rec("gelu", vec![In::F(&[5], -2., 2.)], |g, a| vec![g.gelu(a[0], false)]),
        rec("gelu_tanh", vec![In::F(&[5], -2., 2.)], |g, a| vec![g.gelu(a[0], true)]),
        rec("silu", vec![In::F(&[5], -2., 2.)], |g, a| vec![g.silu(a[0])]),
        rec("layer_norm", vec![In::F(&[2, 5], -2., 2.), In::F(&[5], 0.5, 1.5), In::F(&[5], -1., 1.)], |g, a| {
            vec![g.layer_norm(a[0], Some(a[1]), Some(a[2]), -1, 1e-5)]
        }),
        rec("rms_norm", vec![In::F(&[2, 5], -2., 2.), In::F(&[5], 0.5, 1.5)], |g, a| {
            vec![g.rms_norm(a[0], Some(a[1]), -1, 1e-6)]
        }),
        rec("cross_entropy", vec![In::F(&[3, 4], -2., 2.), In::I(&[3], 0, 3)], |g, a| {
            vec![g.cross_entropy(a[0], a[1])]
        }),
        rec(
            "sdpa_causal",
            vec![In::F(&[1, 2, 3, 4], -1., 1.), In::F(&[1, 1, 3, 4], -1., 1.), In::F(&[1, 1, 3, 2], -1., 1.)],
            |g, a| vec![g.scaled_dot_product_attention(a[0], a[1], a[2], rlx_ir::op::MaskKind::Causal, None)],
        ),
        rec(
            "conv2d_maxpool",
            vec![In::F(&[1, 2, 5, 5], -1., 1.), In::F(&[3, 2, 2, 2], -1., 1.), In::F(&[3], -1., 1.)],
            |g, a| {
                let c = g.conv2d(a[0], a[1], Some(a[2]), [1, 1], [1, 1], [1, 1], 1);
                vec![g.max_pool2d(c, [2, 2], [2, 2], [0, 0])]
            },
        ),
        rec("embedding", vec![In::F(&[5, 3], -1., 1.), In::I(&[2, 3], 0, 4)], |g, a| vec![g.embedding(a[0], a[1])]),
        rec("linear", vec![In::F(&[2, 3], -1., 1.), In::F(&[4, 3], -1., 1.), In::F(&[4], -1., 1.)], |g, a| {
            vec![g.linear(a[0], a[1], Some(a[2]))]
        }),
        rec("avg_pool2d", vec![In::F(&[1, 2, 4, 5], -1., 1.)], |g, a| vec![g.avg_pool2d(a[0], [2, 3], [2, 1], [1, 1])]),
        rec(
            "batch_norm",
            vec![
                In::F(&[2, 3, 2], -1., 1.),
                In::F(&[3], -1., 1.),
                In::F(&[3], 0.5, 1.5),
                In::F(&[3], 0.5, 1.5),
                In::F(&[3], -1., 1.),
            ],
            |g, a| vec![g.batch_norm(a[0], a[1], a[2], a[3], a[4], 1e-5)],
        ),
        rec("rope", vec![In::F(&[3, 2, 4], -1., 1.), In::F(&[3, 4], -1., 1.), In::F(&[3, 4], -1., 1.)], |g, a| {
            vec![g.rope(a[0], a[1], a[2])]
        }),
        rec(
            "sdpa_padding",
            vec![
                In::F(&[2, 1, 3, 2], -1., 1.),
                In::F(&[2, 1, 3, 2], -1., 1.),
                In::F(&[2, 1, 3, 2], -1., 1.),
                In::I(&[2], 1, 3),
            ],
            |g, a| vec![g.scaled_dot_product_attention(a[0], a[1], a[2], rlx_ir::op::MaskKind::Padding(a[3]), None)],
        ),
        rec(
            "sdpa_bias",
            vec![
                In::F(&[1, 2, 2, 3], -1., 1.),
                In::F(&[1, 2, 3, 3], -1., 1.),
                In::F(&[1, 2, 3, 2], -1., 1.),
                In::F(&[1, 1, 2, 3], -1., 1.),
            ],
            |g, a| vec![g.scaled_dot_product_attention(a[0], a[1], a[2], rlx_ir::op::MaskKind::Bias(a[3]), Some(0.7))],
        ),
        rec(
            "sdpa_none_custom_vjp",
            vec![In::F(&[1, 2, 3, 2], -1., 1.), In::F(&[1, 2, 4, 2], -1., 1.), In::F(&[1, 2, 4, 3], -1., 1.)],
            |g, a| vec![g.scaled_dot_product_attention(a[0], a[1], a[2], rlx_ir::op::MaskKind::None, None)],
        ),
    ]);
    t
}

fn build(r: &Rec) -> Graph {
    let mut g = Graph::new(r.name);
    let args: Vec<NodeId> = r
        .ins
        .iter()
        .enumerate()
        .map(|(k, i)| {
            let d = if i.is_float() { DType::F64 } else { DType::I32 };
            g.input(&format!("a{k}"), Shape::new(i.shape(), d))
        })
        .collect();
    let outs = (r.build)(&mut g, &args);
    g.set_outputs(outs);
    rlx_ir::verify(&g).unwrap_or_else(|e| panic!("{}: {e}", r.name));
    g
}

fn feeds(r: &Rec, rng: &mut Rng) -> Vec<(String, Tensor)> {
    r.ins.iter().enumerate().map(|(k, i)| (format!("a{k}"), i.sample(rng))).collect()
}

fn check_grads(f: &Graph, feeds: Vec<(String, Tensor)>, wrt: Vec<String>, order: usize, rng: &mut Rng) {
    let p = Point { f, feeds: feeds.clone(), wrt: wrt.clone() };
    let c = check_first_order(&p, rng, 1e-6, Tol::FiniteDiff);
    if order < 2 {
        return;
    }
    // Order 2: the same checks on the forward- and reverse-mode graphs themselves.
    let mut jf = feeds.clone();
    let tin = &c.jvp.inputs()[c.jvp.inputs().len() - wrt.len()..];
    for &id in tin {
        let s = c.jvp.shape(id).static_dims().unwrap();
        jf.push((c.jvp.source_name(id).unwrap().to_string(), rng.tensor(&s, DType::F64, -1.0, 1.0)));
    }
    check_grads(&c.jvp, jf, wrt.clone(), 1, rng);
    if let Some(d) = c.vjp.input_by_name("d_output") {
        let s = c.vjp.shape(d).static_dims().unwrap();
        let mut vf = feeds.clone();
        vf.push(("d_output".into(), rng.tensor(&s, DType::F64, -1.0, 1.0)));
        check_grads(&c.vjp, vf, wrt, 1, rng);
    }
}

#[test]
fn gradients_of_every_op_match_finite_differences() {
    let mut rng = Rng(7);
    for r in table().iter().filter(|r| r.grad) {
        let f = build(r);
        let fe = feeds(r, &mut rng);
        let wrt: Vec<String> =
            r.ins.iter().enumerate().filter(|(_, i)| i.is_float()).map(|(k, _)| format!("a{k}")).collect();
        check_grads(&f, fe, wrt, if r.order2 { 2 } else { 1 }, &mut rng);
    }
}

/// Stack `parts` (same shape) along a new `axis`.
fn stack(parts: &[Tensor], axis: usize) -> Tensor {
    let s = parts[0].shape().to_vec();
    let outer: usize = s[..axis].iter().product();
    let inner: usize = s[axis..].iter().product();
    let mut out = vec![];
    for o in 0..outer {
        for p in parts {
            out.extend_from_slice(&p.to_f64_vec()[o * inner..(o + 1) * inner]);
        }
    }
    let mut d = s.clone();
    d.insert(axis, parts.len());
    Tensor::from_f64s(&d, parts[0].dtype(), &out).unwrap()
}

/// Slice `b` of `t` along dim 0.
fn unstack0(t: &Tensor, b: usize) -> Vec<f64> {
    let n = t.numel() / t.shape()[0];
    t.to_f64_vec()[b * n..(b + 1) * n].to_vec()
}

fn check_vmap(r: &Rec, axes: &[Option<usize>], rng: &mut Rng) {
    const B: usize = 3;
    let f = build(r);
    let slices: Vec<Vec<(String, Tensor)>> = (0..B).map(|_| feeds(r, rng)).collect();
    let batched: Vec<(String, Tensor)> = (0..r.ins.len())
        .map(|k| {
            let name = format!("a{k}");
            let t = match axes[k] {
                None => slices[0][k].1.clone(),
                Some(a) => stack(&slices.iter().map(|s| s[k].1.clone()).collect::<Vec<_>>(), a),
            };
            (name, t)
        })
        .collect();
    let vg = vmap(&f, axes, &[], B).unwrap_or_else(|e| panic!("vmap of {} with {axes:?}: {e}", r.name));
    let out = eval(&vg, &batched.iter().map(|(k, t)| (k.as_str(), t.clone())).collect::<Vec<_>>());
    for b in 0..B {
        let names: Vec<String> = (0..r.ins.len()).map(|k| format!("a{k}")).collect();
        let fe: Vec<(&str, Tensor)> = (0..r.ins.len())
            .map(|k| {
                let t = if axes[k].is_none() { slices[0][k].1.clone() } else { slices[b][k].1.clone() };
                (names[k].as_str(), t)
            })
            .collect();
        let want = eval(&f, &fe);
        for (j, w) in want.iter().enumerate() {
            assert_close(
                &format!("vmap {} {axes:?} output {j} member {b}", r.name),
                &unstack0(&out[j], b),
                &vals(w),
                Tol::Close,
            );
        }
    }
}

#[test]
fn vmap_of_every_op_matches_a_loop_over_slices() {
    let mut rng = Rng(11);
    for r in table() {
        let n = r.ins.len();
        let ranks: Vec<usize> = r.ins.iter().map(|i| i.shape().len()).collect();
        let mut configs: Vec<Vec<Option<usize>>> = vec![
            vec![Some(0); n],
            ranks.iter().map(|&k| Some(k)).collect(),
            (0..n).map(|k| if k == 0 { Some(ranks[0].min(1)) } else { None }).collect(),
        ];
        if n > 1 {
            configs.push((0..n).map(|k| if k == n - 1 { Some(0) } else { None }).collect());
            configs.push((0..n).map(|k| if k % 2 == 1 { Some(ranks[k] / 2) } else { Some(ranks[k]) }).collect());
        }
        for c in configs {
            check_vmap(&r, &c, &mut rng);
        }
    }
}
