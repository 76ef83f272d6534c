//! The spec's Training example (`examples/train.rs`) as a regression test: the backward graph
//! compiles for the CPU, and plain SGD on `grad_with_loss`'s gradient lowers the loss.

use rlx::prelude::*;
use rlx_autodiff::grad_with_loss;

#[test]
fn grad_with_loss_trains_a_linear_regression() {
    let mut forward = Graph::new("linreg");
    let x_id = forward.input("x", Shape::new(&[8, 2], DType::F32));
    let t_id = forward.input("target", Shape::new(&[8, 1], DType::F32));
    let w_id = forward.param("w", Shape::new(&[2, 1], DType::F32));
    let pred = forward.matmul(x_id, w_id, Shape::new(&[8, 1], DType::F32));
    let err = forward.sub(pred, t_id);
    let sq = forward.mul(err, err);
    let loss = forward.mean(sq, &[0, 1], false);
    forward.set_outputs(vec![loss]);
    let x: Vec<f32> = (0..16).map(|i| (i as f32 * 0.37).sin()).collect();
    let target: Vec<f32> = (0..8).map(|r| 2.0 * x[2 * r] - x[2 * r + 1]).collect();

    let backward = grad_with_loss(&forward, &[w_id]);
    let mut compiled = Session::new(Device::Cpu).compile(backward);
    let mut w = vec![0.0f32; 2];
    let mut losses = vec![];
    for _ in 0..60 {
        let out = compiled.run(&[("x", &x), ("target", &target), ("w", &w), ("d_output", &[1.0])]);
        losses.push(out[0][0]);
        // dL/dw = 2/N Σ (x w - t) x, checked against the hand formula.
        let mut want = [0.0f32; 2];
        for r in 0..8 {
            let e = x[2 * r] * w[0] + x[2 * r + 1] * w[1] - target[r];
            want[0] += 2.0 * e * x[2 * r] / 8.0;
            want[1] += 2.0 * e * x[2 * r + 1] / 8.0;
        }
        for k in 0..2 {
            assert!((out[1][k] - want[k]).abs() < 1e-5, "dW[{k}] = {} vs {}", out[1][k], want[k]);
            w[k] -= 0.5 * out[1][k]; // SGD
        }
    }
    assert!(losses.windows(2).all(|p| p[1] <= p[0]), "loss must not increase: {losses:?}");
    assert!(losses[59] < 0.01 * losses[0], "loss {} -> {}", losses[0], losses[59]);
}
