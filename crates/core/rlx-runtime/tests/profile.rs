//! `CompileOptions::profile`: every step of every run is counted and timed, and nothing is
//! reported when the option is off.

use rlx_ir::{DType, Graph, Shape};
use rlx_runtime::{CompileOptions, Device, Session};

fn graph() -> Graph {
    let mut g = Graph::new("g");
    let x = g.input("x", Shape::new(&[64, 32], DType::F32));
    let w = g.input("w", Shape::new(&[32, 16], DType::F32));
    let y = g.mm(x, w);
    let y = g.exp(y);
    let y = g.softmax(y, -1);
    g.set_outputs(vec![y]);
    g
}

#[test]
fn profile_counts_each_step_per_run() {
    let (x, w) = (vec![0.5f32; 64 * 32], vec![0.25f32; 32 * 16]);
    let s = Session::new(Device::Cpu);
    let mut plain = s.compile_with(graph(), &CompileOptions::new());
    plain.run(&[("x", &x), ("w", &w)]);
    assert!(plain.profile().is_none(), "off by default");

    let opts = CompileOptions { profile: true, ..CompileOptions::new() };
    let mut g = s.compile_with(graph(), &opts);
    assert!(g.profile().unwrap().iter().all(|t| t.calls == 0 && t.total.is_zero()), "not run yet");
    for _ in 0..3 {
        g.run(&[("x", &x), ("w", &w)]);
    }
    let p = g.profile().unwrap();
    let steps = g.steps();
    assert_eq!(p.len(), steps.len());
    for (t, s) in p.iter().zip(&steps) {
        assert_eq!((t.step.node, t.step.kernel), (s.node, s.kernel));
        assert_eq!(t.calls, 3, "{t:?}");
    }
    assert!(p.iter().any(|t| !t.total.is_zero()), "{p:?}");
}
