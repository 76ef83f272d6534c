//! Records of the reduction family (`reduce_*`, `mean`, `argmax`/`argmin`, cumulative ops,
//! `reduce_window`) and the contraction family (`dot_general`, `mm`, `matmul`,
//! `conv_general_dilated`). Selections (`max`, `min`, `and`, `or`, arg-reductions) are exact;
//! sums, products and contractions depend on accumulation order and are `Approximate`.

use crate::Rec;
use crate::common::{Args, Tol};
use rlx_ir::Shape;
use rlx_ir::ops::{ConvGeneralDilated, CumulativeOp, DotGeneral, ReduceOp};

fn reduce_rec(name: &'static str, op: ReduceOp, tol: Tol) -> Rec {
    Rec::new(name, tol, move |g, x, a| vec![g.reduce(x[0], op, &a.i64s("axes"), a.bool("keepdims"))])
}

fn window_rec(name: &'static str, op: ReduceOp, tol: Tol) -> Rec {
    Rec::new(name, tol, move |g, x, a| {
        vec![g.reduce_window_dilated(
            x[0],
            op,
            &a.usizes("window"),
            &a.usizes("strides"),
            &a.pairs("padding"),
            &a.usizes("base_dilation"),
            &a.usizes("window_dilation"),
        )]
    })
}

fn dims(a: &Args) -> DotGeneral {
    DotGeneral {
        lhs_contracting: a.usizes("lhs_contracting"),
        rhs_contracting: a.usizes("rhs_contracting"),
        lhs_batch: a.usizes("lhs_batch"),
        rhs_batch: a.usizes("rhs_batch"),
        preferred_element_type: a.has("preferred").then(|| a.dtype("preferred")),
    }
}

pub fn records() -> Vec<Rec> {
    let mut v = vec![
        reduce_rec("reduce_sum", ReduceOp::Sum, Tol::Approximate),
        reduce_rec("reduce_prod", ReduceOp::Prod, Tol::Approximate),
        reduce_rec("reduce_max", ReduceOp::Max, Tol::Exact),
        reduce_rec("reduce_min", ReduceOp::Min, Tol::Exact),
        reduce_rec("reduce_and", ReduceOp::And, Tol::Exact),
        reduce_rec("reduce_or", ReduceOp::Or, Tol::Exact),
        Rec::new("mean", Tol::Approximate, |g, x, a| vec![g.mean(x[0], &a.i64s("axes"), a.bool("keepdims"))]),
        Rec::new("argmax", Tol::Exact, |g, x, a| vec![g.argmax(x[0], a.i64("axis"), a.dtype("index_dtype"))]),
        Rec::new("argmin", Tol::Exact, |g, x, a| vec![g.argmin(x[0], a.i64("axis"), a.dtype("index_dtype"))]),
        window_rec("reduce_window_sum", ReduceOp::Sum, Tol::Approximate),
        window_rec("reduce_window_max", ReduceOp::Max, Tol::Exact),
        window_rec("reduce_window_min", ReduceOp::Min, Tol::Exact),
        Rec::new("dot_general", Tol::Approximate, |g, x, a| vec![g.dot_general(x[0], x[1], dims(a))]),
        Rec::new("mm", Tol::Approximate, |g, x, _| vec![g.mm(x[0], x[1])]),
        Rec::new("matmul", Tol::Approximate, |g, x, a| {
            let s = Shape::new(&a.usizes("shape"), g.shape(x[0]).dtype);
            vec![g.matmul(x[0], x[1], s)]
        }),
        Rec::new("conv_general_dilated", Tol::Approximate, |g, x, a| {
            let p = ConvGeneralDilated {
                window_strides: a.usizes("window_strides"),
                padding: a.pairs("padding"),
                lhs_dilation: a.usizes("lhs_dilation"),
                rhs_dilation: a.usizes("rhs_dilation"),
                feature_group_count: a.usize("feature_group_count"),
            };
            vec![g.conv_general_dilated(x[0], x[1], p)]
        }),
    ];
    for (op, tol) in [
        (CumulativeOp::Sum, Tol::Approximate),
        (CumulativeOp::Prod, Tol::Approximate),
        (CumulativeOp::Max, Tol::Exact),
        (CumulativeOp::Min, Tol::Exact),
    ] {
        v.push(Rec::new(op.name(), tol, move |g, x, a| vec![g.cumulative(op, x[0], a.i64("axis"), a.bool("reverse"))]));
    }
    v
}
