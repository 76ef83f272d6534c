//! The native `rope` kernel against the reference evaluation of its composite body
//! (`Graph::rope_with_style` inlined): the same bits, for both layouts and both pairing styles,
//! leading dims, odd head counts and special values; operands it does not plan for run the
//! body. (The numpy fixtures of `crates/rlx/tests/ops.rs`, `rope_f32_shd` / `rope_f32_hsd`, check
//! the compiled path against an independent reference.)

mod common;
use common::rand_tensor;
use rlx_cpu::kernels;
use rlx_ir::op::{RopeLayout, RopeStyle};
use rlx_ir::{DType, Graph, Shape, Tensor};
use std::collections::HashMap;

/// Run `rope` on `x` with `[S, D]` tables `cos`, `sin` through `kernels::select` / `run`;
/// compare bit for bit with the inlined body's reference evaluation; return the kernel name.
fn check(x: &Tensor, cos: &Tensor, sin: &Tensor, layout: RopeLayout, style: RopeStyle) -> &'static str {
    let mut g = Graph::new("rope");
    let shape = |t: &Tensor| Shape::new(t.shape(), t.dtype());
    let (xi, ci, si) = (g.input("x", shape(x)), g.input("cos", shape(cos)), g.input("sin", shape(sin)));
    let y = g.rope_with_style(xi, ci, si, layout, style);
    g.set_outputs(vec![y]);
    assert!(g.error().is_none(), "{:?}", g.error());

    let mut k = kernels::select(&g, y, &rlx_cpu::CpuOptions::default());
    let mut outs = vec![Tensor::zeros(x.shape(), x.dtype())];
    kernels::run(&mut k, &g.node(y).op, &[x, cos, sin], &mut outs).unwrap();

    let inlined = rlx_ir::inline_composites(&g, &|_| false);
    let feeds: HashMap<String, Tensor> =
        [("x", x), ("cos", cos), ("sin", sin)].into_iter().map(|(n, t)| (n.to_string(), t.clone())).collect();
    let want = rlx_ir::interp::evaluate(&inlined, &feeds).unwrap();
    let what = format!("{:?} {layout:?} {style:?}", x.shape());
    match x.dtype() {
        DType::F32 => {
            let (got, want) = (outs[0].as_slice::<f32>().unwrap(), want[0].as_slice::<f32>().unwrap());
            assert_eq!(got.len(), want.len(), "{what}");
            for (i, (a, b)) in got.iter().zip(want).enumerate() {
                assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()), "{what} [{i}]: {a} vs {b}");
            }
        }
        _ => assert_eq!(outs[0], want[0], "{what}"),
    }
    k.name()
}

/// `[S, D]` tables of angles `pos · base^(-2i/D)` in each style's slots.
fn tables(s: usize, d: usize, style: RopeStyle, dtype: DType) -> (Tensor, Tensor) {
    let (mut c, mut sn) = (vec![0f64; s * d], vec![0f64; s * d]);
    for p in 0..s {
        for i in 0..d / 2 {
            let a = p as f64 * 10000f64.powf(-2.0 * i as f64 / d as f64);
            let slots = match style {
                RopeStyle::RotateHalf => [i, i + d / 2],
                RopeStyle::AdjacentPairs => [2 * i, 2 * i + 1],
            };
            for j in slots {
                c[p * d + j] = a.cos();
                sn[p * d + j] = a.sin();
            }
        }
    }
    (Tensor::from_f64s(&[s, d], dtype, &c).unwrap(), Tensor::from_f64s(&[s, d], dtype, &sn).unwrap())
}

#[test]
fn rope_is_the_body_bit_for_bit() {
    let cases: &[(&[usize], RopeLayout)] = &[
        (&[1, 9, 64], RopeLayout::Shd),      // one decode step of SmolLM2's q
        (&[34, 3, 64], RopeLayout::Shd),     // a prompt's k
        (&[2, 5, 3, 6], RopeLayout::Shd),    // a batch dim
        (&[2, 3, 5, 8], RopeLayout::Hsd),    // [B, H, S, D]
        (&[3, 2, 4, 7, 2], RopeLayout::Hsd), // two leading dims, D = 2
        (&[1, 1, 130], RopeLayout::Shd),
    ];
    for (n, &(dims, layout)) in cases.iter().enumerate() {
        let r = dims.len();
        let (s, d) = (if layout == RopeLayout::Shd { dims[r - 3] } else { dims[r - 2] }, dims[r - 1]);
        for style in [RopeStyle::RotateHalf, RopeStyle::AdjacentPairs] {
            let x = rand_tensor(dims, DType::F32, n as u64, -4.0, 4.0);
            let (c, sn) = tables(s, d, style, DType::F32);
            assert_eq!(check(&x, &c, &sn, layout, style), "rope_f32", "{dims:?}");
            // Any tables, not only angles' (whose pair slots hold equal values).
            let c = rand_tensor(&[s, d], DType::F32, 100 + n as u64, -1.0, 1.0);
            let sn = rand_tensor(&[s, d], DType::F32, 200 + n as u64, -1.0, 1.0);
            assert_eq!(check(&x, &c, &sn, layout, style), "rope_f32", "{dims:?}");
        }
    }
}

#[test]
fn rope_special_values_and_fallback() {
    // NaN, infinities, signed zeros and subnormals go through the same products and sum.
    let v = [f32::NAN, f32::INFINITY, -0.0, 1e-45, -3e38, 0.0, 2.5, f32::NEG_INFINITY];
    let x = Tensor::from_vec(v.to_vec(), &[1, 1, 8]).unwrap();
    let c = Tensor::from_vec(vec![1.0, 0.0, -1.0, 1e-40, 3e38, f32::NAN, 0.5, -0.0], &[1, 8]).unwrap();
    let sn = Tensor::from_vec(vec![0.0, 1.0, 0.25, -2.0, 1e-45, 7.0, f32::INFINITY, 1.0], &[1, 8]).unwrap();
    for style in [RopeStyle::RotateHalf, RopeStyle::AdjacentPairs] {
        assert_eq!(check(&x, &c, &sn, RopeLayout::Shd, style), "rope_f32");
    }
    // f64 operands: no native kernel, the body runs.
    let x = rand_tensor(&[2, 3, 4], DType::F64, 7, -1.0, 1.0);
    let (c, sn) = tables(2, 4, RopeStyle::RotateHalf, DType::F64);
    assert_eq!(check(&x, &c, &sn, RopeLayout::Shd, RopeStyle::RotateHalf), "composite_body");
}
