//! One-axis `gather` (`take`, embedding lookup) as block copies against the reference
//! evaluation: every axis, batched index shapes, i32 / i64 indices, float and integer data,
//! out-of-range and negative indices in every mode (`Clip` clamps, `FillOrDrop` gives zeros,
//! `Checked` fails), and a gather of partial slices that must stay on the reference.

mod common;
use common::{EXACT, check_graph, rand_tensor};
use rlx_ir::ops::{GatherDims, GatherMode};
use rlx_ir::{DType, Graph, Shape, Tensor};

fn indices(vals: &[i64], dims: &[usize], dt: DType) -> Tensor {
    let f: Vec<f64> = vals.iter().map(|&v| v as f64).collect();
    Tensor::from_f64s(dims, dt, &f).unwrap()
}

#[test]
fn take_every_axis_matches_reference() {
    let xd = [4usize, 5, 3];
    // Includes -1 and 9 (out of range on every axis): `take` clamps them.
    let (iv, id) = ([2i64, 0, -1, 9, 1, 3], [2usize, 3]);
    for data in [DType::F32, DType::I64, DType::BF16] {
        for idt in [DType::I64, DType::I32] {
            for axis in 0..3 {
                let mut g = Graph::new("take");
                let x = g.input("x", Shape::new(&xd, data));
                let i = g.input("i", Shape::new(&id, idt));
                let y = g.take(x, i, axis);
                g.set_outputs(vec![y]);
                let feeds = [("x", rand_tensor(&xd, data, 3, -50.0, 50.0)), ("i", indices(&iv, &id, idt))];
                let what = format!("take axis {axis} {data} by {idt}");
                let ks = check_graph(&g, &feeds, None, EXACT, &what);
                assert!(ks.contains(&"take_copy".to_string()), "{what}: kernels {ks:?}");
            }
        }
    }
}

#[test]
fn fill_mode_zeroes_out_of_range_slices() {
    // An embedding table [6, 4] looked up by [[5, -1], [6, 0]] with FillOrDrop: rows for -1
    // and 6 are zeros.
    let mut g = Graph::new("embed");
    let x = g.input("x", Shape::new(&[6, 4], DType::F32));
    let i = g.input("i", Shape::new(&[2, 2, 1], DType::I64));
    let dims = GatherDims { offset_dims: vec![2], collapsed_slice_dims: vec![0], start_index_map: vec![0] };
    let y = g.gather(x, i, dims, &[1, 4], GatherMode::FillOrDrop);
    g.set_outputs(vec![y]);
    let feeds =
        [("x", rand_tensor(&[6, 4], DType::F32, 5, -1.0, 1.0)), ("i", indices(&[5, -1, 6, 0], &[2, 2, 1], DType::I64))];
    let ks = check_graph(&g, &feeds, Some(1), EXACT, "fill");
    assert!(ks.contains(&"take_copy".to_string()), "kernels {ks:?}");
    let mut exe = rlx_cpu::CpuExecutable::compile(&g, &Default::default()).unwrap();
    let out = exe.run(&[&feeds[0].1, &feeds[1].1], &[]).unwrap();
    let v = out[0].as_slice::<f32>().unwrap();
    assert!(v[4..12].iter().all(|&z| z == 0.0), "rows for -1 and 6 are zero: {v:?}");
    assert_eq!(&v[..4], &feeds[0].1.as_slice::<f32>().unwrap()[20..24]);
}

#[test]
fn partial_slices_stay_on_the_reference() {
    // Slices of 2 of the 4 columns: not a whole-slice take.
    let mut g = Graph::new("partial");
    let x = g.input("x", Shape::new(&[6, 4], DType::F32));
    let i = g.input("i", Shape::new(&[3, 1], DType::I32));
    let dims = GatherDims { offset_dims: vec![1], collapsed_slice_dims: vec![0], start_index_map: vec![0] };
    let y = g.gather(x, i, dims, &[1, 2], GatherMode::Clip);
    g.set_outputs(vec![y]);
    let feeds =
        [("x", rand_tensor(&[6, 4], DType::F32, 9, -1.0, 1.0)), ("i", indices(&[0, 5, 2], &[3, 1], DType::I32))];
    let ks = check_graph(&g, &feeds, None, EXACT, "partial");
    assert!(!ks.contains(&"take_copy".to_string()), "kernels {ks:?}");
}

#[test]
fn checked_mode_errors_on_out_of_range_indices() {
    // `GatherMode::Checked` (ONNX Gather): in range it is the same block copy; an index outside
    // [0, dim) fails on the kernel and the reference alike, naming the index and the dim.
    for axis in [0i64, 1] {
        let mut g = Graph::new("checked");
        let x = g.input("x", Shape::new(&[6, 4], DType::F32));
        let i = g.input("i", Shape::new(&[3], DType::I64));
        let y = g.take_with_mode(x, i, axis, GatherMode::Checked);
        g.set_outputs(vec![y]);
        let xv = rand_tensor(&[6, 4], DType::F32, 7, -1.0, 1.0);
        let ok = [("x", xv.clone()), ("i", indices(&[3, 0, 2], &[3], DType::I64))];
        let ks = check_graph(&g, &ok, None, EXACT, "checked in range");
        assert!(ks.contains(&"take_copy".to_string()), "kernels {ks:?}");
        let n = if axis == 0 { 6 } else { 4 };
        for bad in [n, -1, 99999] {
            let iv = indices(&[0, bad, 1], &[3], DType::I64);
            let mut exe = rlx_cpu::CpuExecutable::compile(&g, &Default::default()).unwrap();
            let e = exe.run(&[&xv, &iv], &[]).expect_err("out-of-range index must fail").to_string();
            let want = format!("index {bad} is out of range [0, {n}) in operand dim {axis} (of size {n})");
            assert!(e.contains(&want) && e.contains("gather"), "axis {axis}, index {bad}: {e}");
            let map = [("x".to_string(), xv.clone()), ("i".to_string(), iv)].into_iter().collect();
            let r = rlx_ir::interp::evaluate(&g, &map).expect_err("the reference fails too").to_string();
            assert!(r.contains(&want), "reference, axis {axis}, index {bad}: {r}");
        }
    }
}

#[test]
fn checked_wrap_counts_negative_indices_from_the_end_and_names_the_given_index() {
    // `GatherMode::CheckedWrap` (ONNX Gather): an index in [-n, 0) is n + index, the same block
    // copy as the reference; outside [-n, n) both fail naming the index as given (the ONNX
    // importer used to wrap in the graph, so -99999 was reported as -99999 + n).
    for axis in [0i64, 1] {
        let mut g = Graph::new("checked_wrap");
        let x = g.input("x", Shape::new(&[6, 4], DType::F32));
        let i = g.input("i", Shape::new(&[3], DType::I64));
        let y = g.take_with_mode(x, i, axis, GatherMode::CheckedWrap);
        g.set_outputs(vec![y]);
        let n: i64 = if axis == 0 { 6 } else { 4 };
        let xv = rand_tensor(&[6, 4], DType::F32, 7, -1.0, 1.0);
        let neg = [("x", xv.clone()), ("i", indices(&[-1, 0, -n], &[3], DType::I64))];
        let ks = check_graph(&g, &neg, None, EXACT, "checked_wrap negative");
        assert!(ks.contains(&"take_copy".to_string()), "kernels {ks:?}");
        // Independent of the gather: -1 and -n are the rows (columns) n - 1 and 0.
        let mut exe = rlx_cpu::CpuExecutable::compile(&g, &Default::default()).unwrap();
        let got = exe.run(&[&xv, &neg[1].1], &[]).unwrap()[0].to_f64_vec();
        let xs = xv.to_f64_vec();
        let at = |r: usize, c: usize| xs[r * 4 + c];
        let want: Vec<f64> = match axis {
            0 => [5usize, 0, 0].iter().flat_map(|&r| (0..4).map(move |c| (r, c))).map(|(r, c)| at(r, c)).collect(),
            _ => (0..6).flat_map(|r| [3usize, 0, 0].map(|c| at(r, c))).collect(),
        };
        assert_eq!(got, want, "axis {axis}");
        for bad in [n, -n - 1, 99999, -99999] {
            let iv = indices(&[0, bad, 1], &[3], DType::I64);
            let e = exe.run(&[&xv, &iv], &[]).expect_err("out-of-range index must fail").to_string();
            let want = format!("index {bad} is out of range [-{n}, {n}) in operand dim {axis} (of size {n})");
            assert!(e.contains(&want) && e.contains("gather"), "axis {axis}, index {bad}: {e}");
            let map = [("x".to_string(), xv.clone()), ("i".to_string(), iv)].into_iter().collect();
            let r = rlx_ir::interp::evaluate(&g, &map).expect_err("the reference fails too").to_string();
            assert!(r.contains(&want), "reference, axis {axis}, index {bad}: {r}");
        }
    }
}
