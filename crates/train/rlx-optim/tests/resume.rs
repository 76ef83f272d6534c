//! Bit-exact resume: 5 steps, `state_dict` → file → `load_state_dict` into a fresh optimizer,
//! 5 more steps, equals 10 straight steps bit for bit, for every named rule; and typed errors.

use rlx_optim::{Optim, OptimError, Optimizer, RULE_NAMES, Schedule, StateDict, rule_by_name};

const SHAPES: [(&str, &[usize]); 3] = [("w", &[3, 4]), ("u", &[4, 2]), ("b", &[3])];

fn grad(step: usize, k: usize, n: usize) -> Vec<f32> {
    (0..n).map(|i| ((step * 31 + k * 7 + i * 13) as f32 * 0.37).sin()).collect()
}

fn fresh(name: &str) -> Optim {
    let s = Schedule::Warmup {
        init: 0.0,
        steps: 3,
        then: Box::new(Schedule::Cosine { lr: 0.05, decay_steps: 10, alpha: 0.0 }),
    };
    Optim::new(rule_by_name(name).expect("known name"), s)
}

fn run(opt: &mut Optim, params: &mut [Vec<f32>], steps: std::ops::Range<usize>) {
    for step in steps {
        for (k, (name, shape)) in SHAPES.iter().enumerate() {
            let g = grad(step, k, params[k].len());
            opt.step(name, shape, &mut params[k], &g);
        }
        opt.end_iteration();
    }
}

fn init() -> Vec<Vec<f32>> {
    SHAPES.iter().map(|(_, s)| (0..s.iter().product::<usize>()).map(|i| (i as f32 * 0.3).cos()).collect()).collect()
}

#[test]
fn resume_is_bit_exact_for_every_rule() {
    let dir = tempfile::tempdir().unwrap();
    for name in RULE_NAMES {
        let mut straight = init();
        run(&mut fresh(name), &mut straight, 0..10);

        let mut p = init();
        let mut first = fresh(name);
        run(&mut first, &mut p, 0..5);
        let path = dir.path().join(format!("{name}.safetensors"));
        first.state_dict().save(&path).unwrap();
        let sd = StateDict::load(&path).unwrap();
        assert_eq!(sd, first.state_dict(), "{name}: file round trip");
        let mut second = fresh(name);
        second.load_state_dict(&sd).unwrap();
        run(&mut second, &mut p, 5..10);
        for (a, b) in p.iter().zip(&straight) {
            let (a, b): (Vec<u32>, Vec<u32>) =
                (a.iter().map(|x| x.to_bits()).collect(), b.iter().map(|x| x.to_bits()).collect());
            assert_eq!(a, b, "{name}: resumed run differs from the straight one");
        }
    }
}

#[test]
fn bad_input_is_a_typed_error() {
    let mut opt = fresh("adam");
    let mut w = vec![0.0f32; 4];
    assert!(matches!(opt.try_step("w", &[2, 3], &mut w, &[0.0; 4]), Err(OptimError::Length { .. })));
    opt.try_step("w", &[4], &mut w, &[0.1; 4]).unwrap();
    assert!(matches!(opt.try_step("w", &[2, 2], &mut w, &[0.1; 4]), Err(OptimError::ShapeChanged { .. })));
    // A momentum-SGD state does not fit Adam (no `v`).
    let mut sgd = fresh("momentum");
    sgd.try_step("w", &[4], &mut w, &[0.1; 4]).unwrap();
    assert!(matches!(opt.load_state_dict(&sgd.state_dict()), Err(OptimError::StateDict(_))));
    // …and an Adam state has a slot plain SGD does not use.
    assert!(matches!(fresh("sgd").load_state_dict(&opt.state_dict()), Err(OptimError::StateDict(_))));
}

#[test]
fn clip_grad_norm_scales_to_the_max() {
    let (mut a, mut b) = (vec![3.0f32, 0.0], vec![4.0f32]);
    let n = rlx_optim::clip_grad_norm(&mut [&mut a, &mut b], 1.0);
    assert_eq!(n, 5.0);
    assert!((a[0] - 0.6).abs() < 1e-7 && (b[0] - 0.8).abs() < 1e-7);
    let n = rlx_optim::clip_grad_norm(&mut [&mut a, &mut b], 2.0);
    assert!((n - 1.0).abs() < 1e-6 && (a[0] - 0.6).abs() < 1e-7, "below the max: unchanged");
}
