//! `CompiledGraph::run_into`: same values as `run_tensors`, the output vector reused from run
//! to run (its storage handed back and forth with the memory plan), symbolic dims respecialized,
//! errors as `run_refs`.

use rlx_ir::{DType, Dim, Graph, Shape, Tensor};
use rlx_runtime::{Device, Error, Session};

fn graph() -> Graph {
    let mut g = Graph::new("g");
    let x = g.input("x", Shape::from_dims(&[Dim::Sym("b".into()), Dim::Static(8)], DType::F32));
    let w = g.param("w", Shape::new(&[8, 4], DType::F32));
    let h = g.mm(x, w);
    let y = g.relu(h);
    let s = g.softmax(h, -1);
    g.set_outputs(vec![y, s, x]);
    g
}

fn input(b: usize, k: f32) -> Tensor {
    Tensor::from_vec((0..b * 8).map(|i| ((i % 11) as f32 - 5.0) * k).collect(), &[b, 8]).unwrap()
}

#[test]
fn run_into_matches_run_tensors_and_reuses_storage() {
    let mut c = Session::new(Device::Cpu).try_compile(graph()).unwrap();
    c.try_set_param("w", &(0..32).map(|i| (i as f32 - 16.0) * 0.05).collect::<Vec<_>>()).unwrap();
    let mut outs = vec![];
    for (b, k) in [(3, 0.5), (3, -0.25), (5, 1.0), (3, 0.1)] {
        let x = input(b, k);
        let want = c.run_tensors(&[("x", x.clone())]).unwrap();
        c.run_into(&[("x", &x)], &mut outs).unwrap();
        assert_eq!(outs, want, "b={b} k={k}");
    }
}

#[test]
fn run_into_reports_errors() {
    let mut c = Session::new(Device::Cpu).try_compile(graph()).unwrap();
    let mut outs = vec![];
    let e = c.run_into(&[("x", &input(2, 1.0))], &mut outs).unwrap_err();
    assert!(matches!(e, Error::MissingParam(ref n) if n == "w"), "{e}");
    c.try_set_param("w", &[0.0; 32]).unwrap();
    let bad = Tensor::zeros(&[2, 7], DType::F32);
    let e = c.run_into(&[("x", &bad)], &mut outs).unwrap_err();
    assert!(matches!(e, Error::ShapeMismatch { .. }), "{e}");
}
