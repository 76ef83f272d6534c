//! Every optimizer's first 10 updates against optax 0.2.5 / PyTorch's formulas
//! (`tools/refgen/gen_optim.py`), within 1e-6 of each tensor's largest |value|; and the LR
//! schedules against optax's.

use rlx_optim::rule::{Accum, Precond};
use rlx_optim::{Optim, Optimizer, Rule, Schedule, clip_grad_norm};
use serde_json::Value;

const TOL: f64 = 1e-6;

fn golden() -> Value {
    serde_json::from_str(include_str!("fixtures/optim_golden.json")).expect("fixture parses")
}

fn vecf(v: &Value) -> Vec<f64> {
    v.as_array().expect("array").iter().map(|x| x.as_f64().expect("number")).collect()
}

fn warmup_cosine() -> Schedule {
    Schedule::Warmup { init: 0.0, steps: 4, then: Box::new(Schedule::Cosine { lr: 0.1, decay_steps: 8, alpha: 0.1 }) }
}

fn torch_rms(accum: Accum, eps: f32) -> Rule {
    Rule { precond: Precond::Rms { accum, eps, eps_in_sqrt: false, initial: 0.0, rectify: None }, ..Rule::default() }
}

/// The RLX optimizer for each golden case, and whether it clips to global norm 1.
fn optimizer(case: &str) -> (Optim, bool) {
    let o = match case {
        "sgd" => Optim::new(Rule::sgd(0.0, false), 0.1),
        "sgd_momentum" => Optim::new(Rule::sgd(0.9, false), 0.1),
        "sgd_nesterov_l2" => Optim::new(Rule::sgd(0.9, true).with_l2(0.01), 0.1),
        "adam" => Optim::new(Rule::adam(), 0.05),
        "adam_l2" => Optim::new(Rule::adam().with_l2(0.1), 0.05),
        "adamw" => Optim::new(Rule::adamw(0.1), 0.05),
        "nadam" => Optim::new(Rule::nadam(), 0.05),
        "radam" => Optim::new(Rule::radam(), 0.05),
        "adagrad" => Optim::new(Rule::adagrad(), 0.1),
        "adagrad_torch" => Optim::new(torch_rms(Accum::Sum, 1e-10), 0.1),
        "rmsprop" => Optim::new(Rule::rmsprop(), 0.01),
        "rmsprop_torch" => Optim::new(torch_rms(Accum::Ema { beta2: 0.99 }, 1e-8), 0.01),
        "lion" => Optim::new(Rule::lion(0.01), 0.01),
        "lamb" => Optim::new(Rule::lamb(0.01), 0.05),
        "adafactor" => Optim::new(Rule::adafactor(2), 0.1),
        "muon" => Optim::new(Rule::muon(0.01), 0.05),
        "adam_clip_warmup_cosine" => return (Optim::new(Rule::adam(), warmup_cosine()), true),
        other => panic!("golden case {other:?} has no RLX optimizer: add it here"),
    };
    (o, false)
}

#[test]
fn first_ten_updates_match_the_references() {
    let g = golden();
    let names = ["w", "u", "b"];
    let shapes: Vec<Vec<usize>> = names
        .iter()
        .map(|n| g["shapes"][n].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect())
        .collect();
    let cases = g["cases"].as_object().expect("cases");
    assert!(cases.len() >= 17, "fixture lists {} cases", cases.len());
    for (case, c) in cases {
        let (mut opt, clip) = optimizer(case);
        let mut p: Vec<Vec<f32>> =
            names.iter().map(|n| vecf(&g["params0"][n]).iter().map(|&x| x as f32).collect()).collect();
        for (step, want) in c["trajectory"].as_array().unwrap().iter().enumerate() {
            let mut gr: Vec<Vec<f32>> =
                names.iter().map(|n| vecf(&g["grads"][step][n]).iter().map(|&x| x as f32).collect()).collect();
            if clip {
                let mut views: Vec<&mut [f32]> = gr.iter_mut().map(|v| v.as_mut_slice()).collect();
                clip_grad_norm(&mut views, 1.0);
            }
            for k in 0..names.len() {
                opt.step(names[k], &shapes[k], &mut p[k], &gr[k]);
            }
            opt.end_iteration();
            for (k, n) in names.iter().enumerate() {
                let want = vecf(&want[n]);
                let scale = want.iter().fold(0f64, |a, &x| a.max(x.abs()));
                for (i, (&got, &w)) in p[k].iter().zip(&want).enumerate() {
                    let err = (got as f64 - w).abs() / scale;
                    assert!(
                        err <= TOL,
                        "{case} ({}) step {}: {n}[{i}] = {got} vs {w} (rel {err:.2e})",
                        c["reference"],
                        step + 1
                    );
                }
            }
        }
    }
}

#[test]
fn schedules_match_optax() {
    let g = golden();
    let ours = [
        ("constant", Schedule::Constant(0.1)),
        ("step", Schedule::Step { lr: 0.1, step_size: 3, gamma: 0.5 }),
        ("cosine", Schedule::Cosine { lr: 0.1, decay_steps: 10, alpha: 0.1 }),
        ("warmup_cosine", warmup_cosine()),
    ];
    for (name, s) in ours {
        for (t, want) in vecf(&g["schedules"][name]).into_iter().enumerate() {
            let got = s.at(t as u64);
            assert!((got - want).abs() <= TOL * 0.1, "{name} at {t}: {got} vs {want}");
        }
    }
}
