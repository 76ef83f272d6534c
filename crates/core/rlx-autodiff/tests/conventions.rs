//! One test per convention of `docs/autodiff.md`: derivatives at non-differentiable points and
//! numerically delicate ones. The expected values are what `jax.grad` returns (jax 0.4.38,
//! x64), except where the doc names a deviation.

mod common;
use common::*;
use rlx_autodiff::grad;
use rlx_ir::ops::{CompareOp, CumulativeOp, GatherDims, GatherMode, ReduceOp};
use rlx_ir::{DType, Graph, NodeId, Shape, Tensor};

/// `grad(sum(f(x)))` at `x`.
fn grad_at(x: &[f64], f: impl FnOnce(&mut Graph, NodeId) -> NodeId) -> Vec<f64> {
    let mut g = Graph::new("f");
    let xi = g.input("x", Shape::new(&[x.len()], DType::F64));
    let y = f(&mut g, xi);
    let l = g.sum(y, &[0], false);
    g.set_outputs(vec![l]);
    let d = grad(&g, &[xi]);
    vals(&eval(&d, &[("x", Tensor::from_vec(x.to_vec(), &[x.len()]).unwrap())])[0])
}

fn same(got: &[f64], want: &[f64]) {
    let ok = got.len() == want.len() && got.iter().zip(want).all(|(a, b)| (a.is_nan() && b.is_nan()) || a == b);
    assert!(ok, "got {got:?}, want {want:?}");
}

#[test]
fn relu_at_zero_is_zero() {
    same(&grad_at(&[-1.0, 0.0, 2.0], |g, x| g.relu(x)), &[0.0, 0.0, 1.0]);
}

#[test]
fn abs_at_zero_is_one() {
    same(&grad_at(&[-1.0, 0.0, 2.0], |g, x| g.abs(x)), &[-1.0, 1.0, 1.0]);
}

#[test]
fn max_and_min_split_ties_equally() {
    same(
        &grad_at(&[0.0, 1.0], |g, x| {
            let z = g.scalar(0.0, DType::F64);
            g.max(x, z)
        }),
        &[0.5, 1.0],
    );
    same(
        &grad_at(&[1.0, 2.0], |g, x| {
            let o = g.scalar(1.0, DType::F64);
            g.min(x, o)
        }),
        &[0.5, 0.0],
    );
}

#[test]
fn reduce_max_and_min_share_the_tangent_among_ties() {
    same(&grad_at(&[1.0, 3.0, 3.0], |g, x| g.reduce_max(x, &[0], true)), &[0.0, 0.5, 0.5]);
    same(&grad_at(&[1.0, 1.0, 3.0], |g, x| g.reduce_min(x, &[0], true)), &[0.5, 0.5, 0.0]);
}

#[test]
fn max_pooling_gives_a_tie_to_the_first_element() {
    same(
        &grad_at(&[1.0, 1.0, 0.0, 2.0], |g, x| g.reduce_window(x, ReduceOp::Max, &[2], &[2], &[(0, 0)])),
        &[1.0, 0.0, 0.0, 1.0],
    );
}

#[test]
fn roots_and_logs_at_zero_are_infinite() {
    same(&grad_at(&[0.0], |g, x| g.sqrt(x)), &[f64::INFINITY]);
    same(&grad_at(&[0.0], |g, x| g.rsqrt(x)), &[f64::NEG_INFINITY]);
    same(&grad_at(&[0.0], |g, x| g.unary(rlx_ir::ops::UnaryOp::Cbrt, x)), &[f64::INFINITY]);
    same(&grad_at(&[0.0], |g, x| g.log(x)), &[f64::INFINITY]);
    same(&grad_at(&[1.0], |g, x| g.unary(rlx_ir::ops::UnaryOp::ErfInv, x)), &[f64::INFINITY]);
}

#[test]
fn piecewise_constant_functions_have_zero_derivative() {
    for op in [
        rlx_ir::ops::UnaryOp::Sign,
        rlx_ir::ops::UnaryOp::Floor,
        rlx_ir::ops::UnaryOp::Ceil,
        rlx_ir::ops::UnaryOp::Round,
    ] {
        same(&grad_at(&[0.0, 0.5, 1.5], |g, x| g.unary(op, x)), &[0.0, 0.0, 0.0]);
    }
}

#[test]
fn pow_at_zero() {
    // d/dx x^0 at 0: 0 (JAX gives NaN for a float exponent: a documented deviation).
    same(
        &grad_at(&[0.0], |g, x| {
            let z = g.scalar(0.0, DType::F64);
            g.pow(x, z)
        }),
        &[0.0],
    );
    // d/dx x^2 at 0 = 0; d/dx x^0.5 at 0 = inf; d/dy 0^y = 0 (log of 0 replaced by log 1).
    same(
        &grad_at(&[0.0], |g, x| {
            let two = g.scalar(2.0, DType::F64);
            g.pow(x, two)
        }),
        &[0.0],
    );
    same(
        &grad_at(&[0.0], |g, x| {
            let h = g.scalar(0.5, DType::F64);
            g.pow(x, h)
        }),
        &[f64::INFINITY],
    );
    same(
        &grad_at(&[2.0], |g, y| {
            let z = g.scalar(0.0, DType::F64);
            g.pow(z, y)
        }),
        &[0.0],
    );
}

#[test]
fn atan2_at_the_origin_is_nan() {
    same(
        &grad_at(&[0.0], |g, a| {
            let z = g.scalar(0.0, DType::F64);
            g.atan2(a, z)
        }),
        &[f64::NAN],
    );
}

#[test]
fn select_differentiates_only_the_taken_branch_but_nan_leaks() {
    // select(x > 0, x, 2x) at 0 takes the false branch: 2.
    same(
        &grad_at(&[0.0], |g, x| {
            let z = g.scalar(0.0, DType::F64);
            let p = g.compare(CompareOp::Gt, x, z);
            let two = g.scalar(2.0, DType::F64);
            let d = g.mul(x, two);
            g.select(p, x, d)
        }),
        &[2.0],
    );
    // where(x > 0, sqrt(x), 0) at 0: 0 · inf = NaN, as in JAX (guard the input instead).
    same(
        &grad_at(&[0.0], |g, x| {
            let z = g.scalar(0.0, DType::F64);
            let p = g.compare(CompareOp::Gt, x, z);
            let s = g.sqrt(x);
            g.select(p, s, z)
        }),
        &[f64::NAN],
    );
}

#[test]
fn sort_and_cummax_ties_follow_the_stable_order() {
    same(
        &grad_at(&[1.0, 1.0], |g, x| {
            let s = g.sort(&[x], 0, true, 1)[0];
            g.slice(s, &[0], &[1], &[])
        }),
        &[1.0, 0.0],
    );
    same(&grad_at(&[1.0, 1.0, 0.5], |g, x| g.cumulative(CumulativeOp::Max, x, 0, false)), &[2.0, 1.0, 0.0]);
}

#[test]
fn products_with_zeros_are_exact() {
    same(&grad_at(&[0.0, 2.0, 3.0], |g, x| g.prod(x, &[0], true)), &[6.0, 0.0, 0.0]);
    same(&grad_at(&[0.0, 0.0, 3.0], |g, x| g.prod(x, &[0], true)), &[0.0, 0.0, 0.0]);
}

#[test]
fn softmax_of_minus_infinity_has_zero_gradient() {
    same(
        &grad_at(&[0.0, f64::NEG_INFINITY], |g, x| {
            let s = g.softmax(x, 0);
            g.slice(s, &[0], &[1], &[])
        }),
        &[0.0, 0.0],
    );
}

#[test]
fn out_of_bounds_gathers() {
    // Clip: the clamped position receives the gradient; FillOrDrop: nothing does.
    let build = |mode: GatherMode| {
        move |g: &mut Graph, x: NodeId| {
            let idx = g.constant(Tensor::from_vec(vec![5i32, -2], &[2, 1]).unwrap());
            let d = GatherDims { offset_dims: vec![], collapsed_slice_dims: vec![0], start_index_map: vec![0] };
            g.gather(x, idx, d, &[1], mode)
        }
    };
    same(&grad_at(&[1.0, 2.0, 3.0], build(GatherMode::Clip)), &[1.0, 0.0, 1.0]);
    same(&grad_at(&[1.0, 2.0, 3.0], build(GatherMode::FillOrDrop)), &[0.0, 0.0, 0.0]);
    // CheckedWrap (ONNX Gather): -1 and -3 are rows 2 and 0; the VJP scatter wraps alike, so
    // the gradient lands on those rows (a Clip scatter would have sent it to row 0 twice).
    let wrap = |g: &mut Graph, x: NodeId| {
        let idx = g.constant(Tensor::from_vec(vec![-1i32, -3, -1], &[3, 1]).unwrap());
        let d = GatherDims { offset_dims: vec![], collapsed_slice_dims: vec![0], start_index_map: vec![0] };
        g.gather(x, idx, d, &[1], GatherMode::CheckedWrap)
    };
    same(&grad_at(&[1.0, 2.0, 3.0], wrap), &[1.0, 0.0, 2.0]);
}

#[test]
fn saturated_functions_have_exactly_zero_derivative() {
    same(&grad_at(&[-800.0], |g, x| g.logistic(x)), &[0.0]);
    same(&grad_at(&[400.0], |g, x| g.tanh(x)), &[0.0]);
}
