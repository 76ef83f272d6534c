//! The spec's Training example, as written, on a real forward graph: linear regression
//! `loss = mean((x @ w - target)²)` over a fixed data set, trained with Adam.
//!
//! `rlx_optim` does not exist yet (it is its own issue); until it lands, the `Adam` below is a
//! minimal stand-in with the API the spec uses (`Adam::new(lr)`, `step(name, shape, &mut w,
//! grad)`, `end_iteration()`), written by hand. Replace it with `use rlx_optim::{Adam,
//! Optimizer};` then.
//!
//! `cargo run --release -p rlx --example train`
use rlx::prelude::*;
use rlx_autodiff::grad_with_loss;

/// Stand-in for `rlx_optim::Adam` (β₁ = 0.9, β₂ = 0.999, ε = 1e-8), one state per name.
struct Adam {
    lr: f32,
    t: i32,
    state: std::collections::HashMap<String, (Vec<f32>, Vec<f32>)>,
}

impl Adam {
    fn new(lr: f32) -> Adam {
        Adam { lr, t: 1, state: Default::default() }
    }
    /// In-place update of `w` from its gradient.
    fn step(&mut self, name: &str, shape: &[usize], w: &mut [f32], grad: &[f32]) {
        let n: usize = shape.iter().product();
        let (m, v) = self.state.entry(name.to_string()).or_insert_with(|| (vec![0.0; n], vec![0.0; n]));
        let (b1, b2) = (0.9f32, 0.999f32);
        for i in 0..n {
            m[i] = b1 * m[i] + (1.0 - b1) * grad[i];
            v[i] = b2 * v[i] + (1.0 - b2) * grad[i] * grad[i];
            let mh = m[i] / (1.0 - b1.powi(self.t));
            let vh = v[i] / (1.0 - b2.powi(self.t));
            w[i] -= self.lr * mh / (vh.sqrt() + 1e-8);
        }
    }
    fn end_iteration(&mut self) {
        self.t += 1;
    }
}

/// `x` [32, 4], `target = x @ w_true + noise` [32, 1].
fn data() -> (Vec<f32>, Vec<f32>) {
    let w_true = [0.5f32, -0.3, 0.2, 0.1];
    let x: Vec<f32> = (0..128).map(|i| ((i * 37 % 101) as f32 / 50.0) - 1.0).collect();
    let target = (0..32)
        .map(|r| (0..4).map(|c| x[r * 4 + c] * w_true[c]).sum::<f32>() + ((r * 13 % 7) as f32 - 3.0) * 0.01)
        .collect();
    (x, target)
}

fn init_weights() -> Vec<f32> {
    vec![0.0; 4]
}

fn main() {
    // The forward graph: its FIRST output is the scalar loss; `w` is the trainable param.
    let mut forward = Graph::new("linreg");
    let x_id = forward.input("x", Shape::new(&[32, 4], DType::F32));
    let t_id = forward.input("target", Shape::new(&[32, 1], DType::F32));
    let w_id = forward.param("w", Shape::new(&[4, 1], DType::F32));
    let pred = forward.matmul(x_id, w_id, Shape::new(&[32, 1], DType::F32));
    let err = forward.sub(pred, t_id);
    let sq = forward.mul(err, err);
    let loss = forward.mean(sq, &[0, 1], false);
    forward.set_outputs(vec![loss]);
    let (x, target) = data();

    // From the spec:
    let backward = grad_with_loss(&forward, &[w_id]); // outputs: [loss, dW]
    let mut compiled = Session::new(Device::Cpu).compile(backward);

    let mut opt = Adam::new(1e-3);
    let mut w = init_weights(); // Vec<f32>
    for step in 0..200 {
        let out = compiled.run(&[
            ("x", &x),
            ("target", &target),
            ("w", &w),            // feed the current params in
            ("d_output", &[1.0]), // ∂loss/∂loss = 1
        ]);
        let (loss, grad) = (out[0][0], &out[1]);
        opt.step("w", &[w.len()], &mut w, grad); // in-place Adam update
        opt.end_iteration();
        if step % 20 == 0 {
            println!("step {step}: loss {loss:.6}");
        }
    }
}
