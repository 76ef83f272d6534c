//! The compiler pipeline inside `CompiledGraph`: optimized and unoptimized runs agree, and the
//! per-pass report (with IR dumps) is exposed.

use rlx_ir::{DType, Graph, Shape, Tensor};
use rlx_runtime::{CompileOptions, Device, Session};

fn graph() -> Graph {
    let mut g = Graph::new("opt");
    let x = g.input("x", Shape::new(&[2, 3], DType::F32));
    let w = g.param("w", Shape::new(&[3], DType::F32));
    let one = g.scalar(1.0, DType::F32);
    let c = g.constant(Tensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3]).unwrap());
    let c2 = g.mul(c, c); // folds
    let a = g.mul(x, one); // simplifies to x
    let b = g.add(a, w);
    let e1 = g.tanh(b);
    let e2 = g.tanh(b); // merged with e1
    let s = g.add(e1, e2);
    let y = g.add(s, c2);
    let t = g.transpose(y, &[1, 0]);
    let t2 = g.transpose(t, &[1, 0]); // becomes y
    g.set_outputs(vec![t2, e1, a]);
    g
}

#[test]
fn optimized_and_unoptimized_agree() {
    let s = Session::new(Device::Cpu);
    let feeds: &[(&str, &[f32])] = &[("x", &[0.1, -0.2, 0.3, 0.4, -0.5, 0.6]), ("w", &[0.5, -1.0, 0.25])];
    let mut on = s.compile_with(graph(), &CompileOptions::new().with_dump_ir(true));
    let mut off = s.compile_with(graph(), &CompileOptions::new().with_optimize(false));
    assert_eq!(on.run(feeds), off.run(feeds));
    let report = on.compile_report().expect("compiled at construction");
    assert_eq!(report.passes.len(), 11, "HIR 3 + MIR 8 (fold, simplify, cse, dce, attention, fuse, epilogue, upcast)");
    assert!(report.passes.iter().all(|r| r.ir.is_some()));
    let last = report.passes.last().unwrap();
    assert!(last.stats.nodes_after < report.passes[0].stats.nodes_after);
    assert_eq!(off.compile_report().unwrap().passes.len(), 3, "HIR stage only");
}

/// A composite built for a symbolic batch (`gelu` on `[?, 4]`) is inlined at the concrete batch
/// the feeds give: the spliced body is re-typed from its operands (it used to keep `[?, 4]`
/// and fail verification).
#[test]
fn composites_on_a_symbolic_batch_run() {
    let mut g = Graph::new("sym_gelu");
    let x = g.input("x", Shape::from_dims(&[rlx_ir::Dim::dynamic(), 4.into()], DType::F32));
    let y = g.gelu(x, false);
    g.set_outputs(vec![y]);
    let xs = [-2.0f32, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0];
    for opts in [CompileOptions::new(), CompileOptions::new().with_optimize(false)] {
        let mut c = Session::new(Device::Cpu).compile_with(g.clone(), &opts);
        let out = c.run(&[("x", &xs)]);
        for (o, &v) in out[0].iter().zip(&xs) {
            let want = 0.5 * v as f64 * (1.0 + libm_erf(v as f64 / std::f64::consts::SQRT_2));
            assert!((*o as f64 - want).abs() < 1e-6, "gelu({v}) = {o}, want {want}");
        }
    }
}

/// erf by its Maclaurin series (|x| ≤ 2.2 here; converges to f64 precision).
fn libm_erf(x: f64) -> f64 {
    let (mut term, mut sum, mut n) = (x, x, 0.0);
    while term.abs() > 1e-17 {
        n += 1.0;
        term *= -x * x / n;
        sum += term / (2.0 * n + 1.0);
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}
