//! Fast f32 `conv_general_dilated` (im2col + gemm) against the reference evaluation: strides,
//! (negative) padding, lhs dilation (the input-gradient form), rhs dilation (the weight-gradient
//! form), groups, batch > 1, 1-D / 2-D / 3-D, one and several threads.

mod common;
use common::{Tol, check_graph, eps, rand_tensor};
use rlx_ir::ops::ConvGeneralDilated;
use rlx_ir::{DType, Graph, Shape};

struct Case {
    x: &'static [usize],
    w: &'static [usize],
    stride: &'static [usize],
    pad: &'static [(i64, i64)],
    ld: &'static [usize],
    rd: &'static [usize],
    groups: usize,
}

fn run(c: &Case, threads: Option<usize>) -> Vec<String> {
    let p = ConvGeneralDilated {
        window_strides: c.stride.to_vec(),
        padding: c.pad.to_vec(),
        lhs_dilation: c.ld.to_vec(),
        rhs_dilation: c.rd.to_vec(),
        feature_group_count: c.groups,
    };
    let mut g = Graph::new("conv");
    let x = g.input("x", Shape::new(c.x, DType::F32));
    let w = g.param("w", Shape::new(c.w, DType::F32));
    let y = g.conv_general_dilated(x, w, p.clone());
    g.set_outputs(vec![y]);
    let k: usize = c.w[1..].iter().product();
    let tol = Tol { abs: 2.0 * k.max(1) as f64 * eps(DType::F32), rel: 2.0 * eps(DType::F32) };
    let feeds = [("x", rand_tensor(c.x, DType::F32, 3, -1.0, 1.0)), ("w", rand_tensor(c.w, DType::F32, 4, -1.0, 1.0))];
    check_graph(&g, &feeds, threads, tol, &format!("conv x{:?} w{:?} {p:?}", c.x, c.w))
}

#[rustfmt::skip]
const CASES: &[Case] = &[
    // Plain, batch 3.
    Case { x: &[3, 2, 7, 6], w: &[4, 2, 3, 3], stride: &[1, 1], pad: &[(0, 0), (0, 0)], ld: &[1, 1], rd: &[1, 1], groups: 1 },
    // Same padding (the CNN's conv2d), stride 2, asymmetric padding.
    Case { x: &[2, 1, 9, 9], w: &[8, 1, 3, 3], stride: &[1, 1], pad: &[(1, 1), (1, 1)], ld: &[1, 1], rd: &[1, 1], groups: 1 },
    Case { x: &[2, 3, 9, 8], w: &[5, 3, 3, 2], stride: &[2, 2], pad: &[(1, 0), (0, 2)], ld: &[1, 1], rd: &[1, 1], groups: 1 },
    // Negative padding (crop).
    Case { x: &[1, 2, 8, 8], w: &[2, 2, 2, 2], stride: &[1, 2], pad: &[(-1, -2), (0, -1)], ld: &[1, 1], rd: &[1, 1], groups: 1 },
    // Kernel (atrous) dilation, groups and depthwise.
    Case { x: &[2, 4, 10, 9], w: &[6, 2, 3, 2], stride: &[1, 1], pad: &[(2, 2), (1, 1)], ld: &[1, 1], rd: &[2, 3], groups: 2 },
    Case { x: &[2, 3, 6, 6], w: &[3, 1, 3, 3], stride: &[2, 1], pad: &[(1, 1), (1, 1)], ld: &[1, 1], rd: &[1, 1], groups: 3 },
    // Input gradient of a stride-2, pad-1 conv: lhs dilation 2, flipped kernel.
    Case { x: &[2, 5, 4, 4], w: &[3, 5, 3, 3], stride: &[1, 1], pad: &[(1, 2), (1, 2)], ld: &[2, 2], rd: &[1, 1], groups: 1 },
    // Weight gradient: [C, N, H, W] with the [O, N, Ho, Wo] cotangent as the kernel, rhs dilation = stride.
    Case { x: &[3, 4, 9, 9], w: &[5, 4, 4, 4], stride: &[1, 1], pad: &[(1, 1), (1, 1)], ld: &[1, 1], rd: &[2, 2], groups: 1 },
    // 1-D and 3-D.
    Case { x: &[2, 3, 11], w: &[4, 3, 3], stride: &[2], pad: &[(1, 1)], ld: &[1], rd: &[2], groups: 1 },
    Case { x: &[1, 2, 4, 5, 3], w: &[3, 2, 2, 3, 2], stride: &[1, 2, 1], pad: &[(1, 0), (1, 1), (0, 1)], ld: &[1, 1, 2], rd: &[1, 1, 1], groups: 1 },
    // Output spatial size 0 and a window wholly in the padding.
    Case { x: &[2, 1, 2, 2], w: &[1, 1, 3, 3], stride: &[1, 1], pad: &[(0, 0), (0, 0)], ld: &[1, 1], rd: &[1, 1], groups: 1 },
    Case { x: &[1, 1, 2, 2], w: &[2, 1, 1, 1], stride: &[1, 1], pad: &[(3, 0), (0, 3)], ld: &[1, 1], rd: &[1, 1], groups: 1 },
];

#[test]
fn matches_reference_table() {
    for c in CASES {
        assert_eq!(run(c, None), vec!["conv_im2col_gemm"], "x{:?} w{:?}", c.x, c.w);
        run(c, Some(2));
    }
}

#[test]
fn large_enough_for_parallel_gemm() {
    let c = Case {
        x: &[2, 16, 28, 28],
        w: &[32, 16, 3, 3],
        stride: &[1, 1],
        pad: &[(1, 1), (1, 1)],
        ld: &[1, 1],
        rd: &[1, 1],
        groups: 1,
    };
    assert_eq!(run(&c, Some(2)), vec!["conv_im2col_gemm"]);
}
