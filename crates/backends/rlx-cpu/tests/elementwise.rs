//! Fast elementwise, reduction and transpose kernels against the reference evaluation.

mod common;
use common::{EXACT, Tol, check_graph, rand_tensor};
use rlx_ir::ops::{BinaryOp, CompareOp, ReduceOp, UnaryOp};
use rlx_ir::{DType, Graph, Shape, Tensor};

/// Shapes covering empty, single-element, small odd and parallel (> 64K elements) sizes.
const SHAPES: &[&[usize]] = &[&[0], &[1], &[3, 5], &[2, 0, 3], &[300, 301]];

#[test]
fn unary_f32() {
    for &u in UnaryOp::ALL.iter().filter(|u| u.accepts(DType::F32)) {
        for (si, &d) in SHAPES.iter().enumerate() {
            let mut g = Graph::new("u");
            let x = g.input("x", Shape::new(d, DType::F32));
            let y = g.unary(u, x);
            g.set_outputs(vec![y]);
            let x = rand_tensor(d, DType::F32, si as u64, -3.0, 3.0);
            // exp / logistic use a polynomial exp (about 1 ulp), tanh Cephes' tanhf (about
            // 2 ulp); the rest match exactly.
            let tol = match u {
                UnaryOp::Exp | UnaryOp::Logistic => Tol { abs: 1e-37, rel: 3e-7 },
                UnaryOp::Tanh => Tol { abs: 1e-37, rel: 5e-7 },
                // erf_f32: 2 ulp at |erf| ~ 1, 4 ulp relative near 0 (its unit test in simd.rs).
                UnaryOp::Erf => Tol { abs: 1.2e-7, rel: 2.4e-7 },
                // the vector erfc (AVX-512, AVX2): 8 units of |erfc|·ε/2 (its unit test in math_vec.rs);
                // elsewhere f64 libm rounded (exact).
                UnaryOp::Erfc => Tol { abs: 1e-44, rel: 8.0 * f32::EPSILON as f64 / 2.0 },
                UnaryOp::Rsqrt => Tol { abs: 0.0, rel: 1.2e-7 },
                _ => EXACT,
            };
            let ks = check_graph(&g, &[("x", x)], Some(2), tol, u.name());
            assert_eq!(ks, vec!["ew_unary_f32"], "{}", u.name());
        }
    }
}

#[test]
fn exp_and_logistic_extremes() {
    let vals = [f32::NEG_INFINITY, f32::INFINITY, f32::NAN, -100.0, 100.0, 88.7, -87.5, 0.0, -0.0, 1e-30];
    for u in [UnaryOp::Exp, UnaryOp::Logistic] {
        let mut g = Graph::new("u");
        let x = g.input("x", Shape::new(&[vals.len()], DType::F32));
        let y = g.unary(u, x);
        g.set_outputs(vec![y]);
        let x = Tensor::from_vec(vals.to_vec(), &[vals.len()]).unwrap();
        check_graph(&g, &[("x", x)], None, Tol { abs: 1e-44, rel: 3e-7 }, u.name());
    }
}

fn binary_graph(op: BinaryOp, a: &[usize], b: &[usize], dt: DType) -> Graph {
    let mut g = Graph::new("b");
    let x = g.input("a", Shape::new(a, dt));
    let y = g.input("b", Shape::new(b, dt));
    let z = g.binary(op, x, y);
    g.set_outputs(vec![z]);
    g
}

/// (lhs dims, rhs dims, fast kernel expected).
const BCASTS: &[(&[usize], &[usize], bool)] = &[
    (&[3, 5], &[3, 5], true),
    (&[3, 5], &[], true),
    (&[], &[3, 5], true),
    (&[4, 3, 5], &[5], true),
    (&[4, 3, 5], &[3, 5], true),
    (&[4, 3, 5], &[4, 1, 1], true),
    (&[4, 3, 5], &[4, 3, 1], true),
    (&[4, 1, 5], &[4, 3, 5], false),
    (&[1, 5], &[4, 1], true),
    (&[2, 1, 5], &[1, 3, 1], false),
    (&[0, 5], &[5], true),
    (&[300, 301], &[300, 1], true),
    (&[300, 301], &[301], true),
    (&[300, 301], &[300, 301], true),
];

#[test]
fn binary_f32_with_broadcasts() {
    for &op in BinaryOp::ALL.iter().filter(|b| b.accepts(DType::F32)) {
        for (i, &(a, b, fast)) in BCASTS.iter().enumerate() {
            let g = binary_graph(op, a, b, DType::F32);
            let mut xa = rand_tensor(a, DType::F32, i as u64, -3.0, 3.0);
            let xb = rand_tensor(b, DType::F32, 100 + i as u64, -3.0, 3.0);
            if let Some(v) = xa.as_mut_slice::<f32>().unwrap().first_mut() {
                *v = f32::NAN; // max/min must propagate NaN
            }
            let ks = check_graph(&g, &[("a", xa), ("b", xb)], Some(2), EXACT, &format!("{} {a:?} {b:?}", op.name()));
            assert_eq!(ks, vec![if fast { "ew_binary_f32" } else { "reference" }], "{} {a:?} {b:?}", op.name());
        }
    }
}

#[test]
fn compare_f32() {
    for &c in &CompareOp::ALL {
        for (i, &(a, b, fast)) in BCASTS.iter().enumerate() {
            let mut g = Graph::new("c");
            let x = g.input("a", Shape::new(a, DType::F32));
            let y = g.input("b", Shape::new(b, DType::F32));
            let z = g.compare(c, x, y);
            g.set_outputs(vec![z]);
            // Few distinct values so equality is common.
            let xa = rand_tensor(a, DType::F32, i as u64, -2.0, 2.0).cast(DType::I32).cast(DType::F32);
            let xb = rand_tensor(b, DType::F32, 50 + i as u64, -2.0, 2.0).cast(DType::I32).cast(DType::F32);
            let ks = check_graph(&g, &[("a", xa), ("b", xb)], None, EXACT, c.name());
            assert_eq!(ks, vec![if fast { "ew_compare_f32" } else { "reference" }]);
        }
    }
}

#[test]
fn compare_int() {
    for dt in [DType::I32, DType::I64, DType::U8] {
        for &c in &CompareOp::ALL {
            for (i, &(a, b, fast)) in BCASTS.iter().enumerate() {
                let mut g = Graph::new("c");
                let x = g.input("a", Shape::new(a, dt));
                let y = g.input("b", Shape::new(b, dt));
                let z = g.compare(c, x, y);
                g.set_outputs(vec![z]);
                // Few distinct values so equality is common.
                let xa = rand_tensor(a, DType::F32, i as u64, 0.0, 4.0).cast(dt);
                let xb = rand_tensor(b, DType::F32, 50 + i as u64, 0.0, 4.0).cast(dt);
                let ks = check_graph(&g, &[("a", xa), ("b", xb)], None, EXACT, c.name());
                assert_eq!(ks, vec![if fast { "ew_compare_int" } else { "reference" }], "{dt:?}");
            }
        }
    }
}

#[test]
fn select_any_dtype() {
    let cases: &[(&[usize], &[usize], &[usize])] = &[
        (&[4, 5], &[4, 5], &[4, 5]),
        (&[], &[4, 5], &[4, 5]),
        (&[4, 5], &[5], &[]),
        (&[4, 1], &[4, 5], &[1, 5]),
        (&[300, 301], &[300, 301], &[]),
        (&[2, 1], &[2, 3], &[1, 1]),
    ];
    for dt in [DType::F32, DType::I64, DType::F16, DType::U8] {
        for (i, &(p, a, b)) in cases.iter().enumerate() {
            let mut g = Graph::new("s");
            let pn = g.input("p", Shape::new(p, DType::Bool));
            let an = g.input("a", Shape::new(a, dt));
            let bn = g.input("b", Shape::new(b, dt));
            let z = g.select(pn, an, bn);
            g.set_outputs(vec![z]);
            let feeds = [
                ("p", rand_tensor(p, DType::F32, i as u64, -1.0, 1.0).cast(DType::I32).cast(DType::Bool)),
                ("a", rand_tensor(a, dt, 7 + i as u64, 0.0, 100.0)),
                ("b", rand_tensor(b, dt, 70 + i as u64, 0.0, 100.0)),
            ];
            let ks = check_graph(&g, &feeds, Some(2), EXACT, &format!("select {dt} {p:?} {a:?} {b:?}"));
            assert_eq!(ks, vec!["ew_select"], "select {dt} {p:?} {a:?} {b:?}");
        }
    }
}

#[test]
fn convert_all_pairs() {
    let dts = DType::ALL;
    for &from in &dts {
        for &to in &dts {
            let mut g = Graph::new("cv");
            let x = g.input("x", Shape::new(&[7, 11], from));
            let y = g.push(rlx_ir::Op::ConvertElementType(to), &[x]);
            g.set_outputs(vec![y]);
            let mut xt = rand_tensor(&[7, 11], DType::F64, 3, -300.0, 300.0);
            if from.is_float() {
                let v = xt.as_mut_slice::<f64>().unwrap();
                v[0] = f64::NAN;
                v[1] = f64::INFINITY;
                v[2] = 1e-30;
                v[3] = 65520.0; // rounds to inf in f16
            }
            let ks = check_graph(&g, &[("x", xt.cast(from))], None, EXACT, &format!("convert {from} -> {to}"));
            assert_eq!(ks, vec![if from == to { "copy" } else { "convert" }], "{from} -> {to}");
        }
    }
}

#[test]
fn copies_do_not_allocate_new_kernels() {
    let mut g = Graph::new("cp");
    let x = g.input("x", Shape::new(&[3, 4], DType::I32));
    let s = g.stop_gradient(x);
    let r = g.reshape(s, [4, 3]);
    let t = g.transpose(r, &[0, 1]);
    g.set_outputs(vec![t]);
    let ks = check_graph(&g, &[("x", rand_tensor(&[3, 4], DType::I32, 1, -50.0, 50.0))], None, EXACT, "copies");
    // The reshape aliases its operand (a view: its operand dies there), the others copy.
    assert_eq!(ks, vec!["copy", "view", "copy"]);
}

#[test]
fn reductions_f32() {
    let cases: &[(&[usize], &[i64], bool)] = &[
        (&[5, 37], &[1], true),
        (&[5, 37], &[0], true),
        (&[2, 3, 4, 5], &[1, 2], true),
        (&[2, 3, 4, 5], &[2, 3], true),
        (&[2, 3, 4, 5], &[0, 2], false),
        (&[4, 0], &[1], true),
        (&[0, 4], &[1], true),
        (&[3, 0, 2], &[1], true),
        (&[1], &[0], true),
        (&[300, 301], &[1], true),
        (&[300, 301], &[0], true),
        (&[7, 100, 130], &[1], true),
    ];
    for op in [ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min] {
        for (i, &(d, axes, fast)) in cases.iter().enumerate() {
            let mut g = Graph::new("r");
            let x = g.input("x", Shape::new(d, DType::F32));
            let y = g.reduce(x, op, axes, false);
            g.set_outputs(vec![y]);
            let mut xt = rand_tensor(d, DType::F32, i as u64, -1.0, 1.0);
            if i == 1 {
                xt.as_mut_slice::<f32>().unwrap()[7] = f32::NAN;
            }
            let tol = Tol { abs: 1e-6, rel: 1.2e-7 };
            let ks = check_graph(&g, &[("x", xt)], Some(2), tol, &format!("reduce_{} {d:?} {axes:?}", op.name()));
            assert_eq!(ks, vec![if fast { "reduce_f32" } else { "reference" }], "{} {d:?} {axes:?}", op.name());
        }
    }
}

#[test]
fn transposes() {
    let cases: &[(&[usize], &[usize], &str)] = &[
        (&[3, 4], &[1, 0], "transpose"),
        (&[37, 70], &[1, 0], "transpose"),
        (&[300, 301], &[1, 0], "transpose"),
        (&[2, 33, 65], &[0, 2, 1], "transpose"),
        (&[2, 3, 4, 5], &[0, 2, 1, 3], "transpose"),
        (&[2, 3, 4], &[1, 2, 0], "transpose"),
        (&[2, 3, 4], &[2, 0, 1], "transpose"),
        (&[2, 3, 4], &[2, 1, 0], "reference"),
        (&[0, 3], &[1, 0], "transpose"),
        (&[1, 5], &[1, 0], "transpose"),
        (&[2, 3], &[0, 1], "copy"),
    ];
    for dt in [DType::F32, DType::I64, DType::BF16] {
        for (i, &(d, perm, kernel)) in cases.iter().enumerate() {
            let mut g = Graph::new("t");
            let x = g.input("x", Shape::new(d, dt));
            let y = g.transpose(x, perm);
            g.set_outputs(vec![y]);
            let xt = rand_tensor(d, dt, i as u64, -100.0, 100.0);
            let ks = check_graph(&g, &[("x", xt)], Some(2), EXACT, &format!("transpose {dt} {d:?} {perm:?}"));
            assert_eq!(ks, vec![kernel], "{d:?} {perm:?}");
        }
    }
}
