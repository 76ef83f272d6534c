//! The in-graph update (the default `Trainer` path) against the host reference
//! (`UpdateMode::Host`, f64 `rule::apply`): 10 steps of every rule that runs in-graph, with a
//! warmup + cosine schedule, with and without global-norm clipping, give the same params and
//! optimizer state within 1e-6 of each tensor's largest |value|; rules that need the host
//! (Adafactor, Muon) fall back to it; a state dict saved from one path resumes the other.

use rlx_ir::{DType, Graph, Shape};
use rlx_optim::{Optim, Optimizer, RULE_NAMES, Schedule, Trainer, TrainerOptions, UpdateMode, rule_by_name};

const B: usize = 8;

fn forward() -> Graph {
    let mut g = Graph::new("mlp");
    let x = g.input("x", Shape::new(&[B, 4], DType::F32));
    let y = g.input("y", Shape::new(&[B], DType::I32));
    let w1 = g.param("w1", Shape::new(&[6, 4], DType::F32));
    let b1 = g.param("b1", Shape::new(&[6], DType::F32));
    let w2 = g.param("w2", Shape::new(&[3, 6], DType::F32));
    let b2 = g.param("b2", Shape::new(&[3], DType::F32));
    let h = g.linear(x, w1, Some(b1));
    let h = g.tanh(h);
    let logits = g.linear(h, w2, Some(b2));
    let loss = g.cross_entropy(logits, y);
    g.set_outputs(vec![loss]);
    g
}

fn schedule() -> Schedule {
    Schedule::Warmup { init: 0.0, steps: 3, then: Box::new(Schedule::Cosine { lr: 0.05, decay_steps: 10, alpha: 0.1 }) }
}

fn trainer(name: &str, update: UpdateMode, clip: Option<f32>) -> Trainer<Optim> {
    let opt = Optim::new(rule_by_name(name).unwrap(), schedule());
    let mut tr =
        Trainer::new(&forward(), opt, TrainerOptions { clip_grad_norm: clip, update, ..Default::default() }).unwrap();
    for (k, (n, d)) in tr.params().to_vec().iter().enumerate() {
        let v: Vec<f32> = (0..d.iter().product()).map(|i| ((i * 5 + k * 11) as f32 * 0.71).sin() * 0.5).collect();
        tr.set_param(n, &v).unwrap();
    }
    tr
}

fn run(tr: &mut Trainer<Optim>, steps: std::ops::Range<usize>) {
    for s in steps {
        let x = tr.input_mut::<f32>("x").unwrap();
        for (i, v) in x.iter_mut().enumerate() {
            *v = ((s * 37 + i * 3) as f32 * 0.53).cos() * 2.0;
        }
        let y = tr.input_mut::<i32>("y").unwrap();
        for (i, v) in y.iter_mut().enumerate() {
            *v = ((s + i * 7) % 3) as i32;
        }
        tr.step().unwrap();
    }
}

fn assert_close(name: &str, what: &str, a: &[f32], b: &[f32]) {
    let scale = b.iter().fold(0f32, |m, v| m.max(v.abs())).max(1e-30);
    for (i, (x, y)) in a.iter().zip(b).enumerate() {
        assert!((x - y).abs() <= 1e-6 * scale, "{name}: {what}[{i}] in-graph {x} vs host {y} (scale {scale})");
    }
}

#[test]
fn in_graph_updates_equal_host_updates() {
    for clip in [None, Some(0.5)] {
        for name in RULE_NAMES {
            let (mut fused, mut host) = (trainer(name, UpdateMode::Auto, clip), trainer(name, UpdateMode::Host, clip));
            let expect_fused = !matches!(*name, "adafactor" | "muon");
            assert_eq!(fused.in_graph(), expect_fused, "{name}");
            assert!(!host.in_graph());
            run(&mut fused, 0..10);
            run(&mut host, 0..10);
            for (n, _) in fused.params().to_vec() {
                assert_close(name, &n, fused.param(&n).unwrap(), host.param(&n).unwrap());
            }
            let (sf, sh) = (fused.optimizer().state_dict(), host.optimizer().state_dict());
            assert_eq!(sf.step, 10);
            assert_eq!(sf.shapes, sh.shapes, "{name}");
            assert_eq!(sf.tensors.keys().collect::<Vec<_>>(), sh.tensors.keys().collect::<Vec<_>>(), "{name}");
            for (k, t) in &sf.tensors {
                assert_close(name, k, t.as_slice::<f32>().unwrap(), sh.tensors[k].as_slice::<f32>().unwrap());
            }
        }
    }
}

#[test]
fn state_dict_moves_between_paths() {
    // 4 host steps, then the state (params + slots) continues in-graph: same as 8 host steps.
    let mut host = trainer("adam", UpdateMode::Host, None);
    run(&mut host, 0..8);
    let mut first = trainer("adam", UpdateMode::Host, None);
    run(&mut first, 0..4);
    let mut second = trainer("adam", UpdateMode::Auto, None);
    for (n, _) in first.params().to_vec() {
        second.set_param(&n, first.param(&n).unwrap()).unwrap();
    }
    second.optimizer_mut().load_state_dict(&first.optimizer().state_dict()).unwrap();
    run(&mut second, 4..8);
    assert_eq!(second.optimizer().iteration(), 8);
    for (n, _) in host.params().to_vec() {
        assert_close("adam resume", &n, second.param(&n).unwrap(), host.param(&n).unwrap());
    }
}
