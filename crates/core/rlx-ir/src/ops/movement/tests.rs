//! Hand-checked cases for the movement family: values, dtypes, size-0 dims, negative axes,
//! symbolic dims and error messages.

use super::*;
use crate::interp::{evaluate, evaluate_args};
use std::collections::HashMap;

fn t<T: Elem>(v: Vec<T>, dims: &[usize]) -> Tensor {
    Tensor::from_vec(v, dims).unwrap()
}

/// Verify and evaluate `g` with `outs` as outputs and positional `args`.
fn run(g: &mut Graph, outs: Vec<NodeId>, args: &[&Tensor]) -> Vec<Tensor> {
    g.set_outputs(outs);
    g.verify().unwrap();
    evaluate_args(g, args).unwrap()
}

fn err(g: &Graph) -> String {
    g.error().expect("an error was recorded").to_string()
}

fn iota_f32(dims: &[usize]) -> Tensor {
    let n: usize = dims.iter().product();
    t((0..n).map(|i| i as f32).collect(), dims)
}

#[test]
fn broadcast_in_dim_values_and_errors() {
    let mut g = Graph::new("b");
    let x = g.input("x", Shape::new(&[3], DType::I32));
    let c = g.input("c", Shape::new(&[3, 1], DType::I32));
    let a = g.broadcast_in_dim(x, [2, 3], &[1]);
    let b = g.broadcast_in_dim(c, [3, 2], &[0, 1]);
    let o = run(&mut g, vec![a, b], &[&t(vec![1i32, 2, 3], &[3]), &t(vec![1i32, 2, 3], &[3, 1])]);
    assert_eq!(o[0].as_slice::<i32>().unwrap(), &[1, 2, 3, 1, 2, 3]);
    assert_eq!(o[1].as_slice::<i32>().unwrap(), &[1, 1, 2, 2, 3, 3]);

    let mut g = Graph::new("b");
    let x = g.input("x", Shape::new(&[3], DType::F32));
    g.broadcast_in_dim(x, [2, 4], &[1]);
    let e = err(&g);
    assert!(e.contains("broadcast_in_dim") && e.contains("f32[3]") && e.contains("[2,4]"), "{e}");
    let mut g = Graph::new("b");
    let x = g.input("x", Shape::new(&[1, 1], DType::F32));
    g.broadcast_in_dim(x, [2, 2], &[1, 0]);
    assert!(err(&g).contains("strictly increasing"));
}

#[test]
fn broadcast_to_numpy_rules() {
    let mut g = Graph::new("b");
    let x = g.input("x", Shape::new(&[3], DType::Bool));
    assert_eq!(g.broadcast_to(x, [3]), x);
    let y = g.broadcast_to(x, [2, 3]);
    let o = run(&mut g, vec![y], &[&t(vec![true, false, true], &[3])]);
    assert_eq!(o[0].as_slice::<bool>().unwrap(), &[true, false, true, true, false, true]);

    let mut g = Graph::new("b");
    let x = g.input("x", Shape::new(&[2, 3], DType::F32));
    g.broadcast_to(x, [3]);
    assert!(err(&g).contains("lower rank"));
    let mut g = Graph::new("b");
    let x = g.input("x", Shape::new(&[2], DType::F32));
    g.broadcast_to(x, [2, 3]);
    assert!(err(&g).contains("cannot broadcast"), "{}", err(&g));
}

#[test]
fn reshape_static_and_symbolic() {
    let mut g = Graph::new("r");
    let x = g.input("x", Shape::new(&[2, 3], DType::F16));
    let y = g.reshape(x, [3, 2]);
    let xt = Tensor::from_f64s(&[2, 3], DType::F16, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let o = run(&mut g, vec![y], &[&xt]);
    assert_eq!(o[0].shape(), &[3, 2]);
    assert_eq!(o[0].to_f64_vec(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);

    let mut g = Graph::new("r");
    let x = g.input("x", Shape::new(&[2, 3], DType::F32));
    g.reshape(x, [4]);
    let e = err(&g);
    assert!(e.contains("reshape") && e.contains("f32[2,3]") && e.contains("[4]"), "{e}");

    let q = Dim::dynamic;
    let mut g = Graph::new("r");
    let x = g.input("x", Shape::from_dims(&[q(), 6.into()], DType::F32));
    let a = g.reshape(x, vec![q(), 2.into(), 3.into()]);
    let b = g.reshape(x, vec![6.into(), q()]);
    assert!(g.error().is_none());
    assert_eq!(g.shape(a).dims, vec![q(), 2.into(), 3.into()]);
    g.set_outputs(vec![a, b]);
    let feeds = HashMap::from([("x".to_string(), iota_f32(&[2, 6]))]);
    let o = evaluate(&g, &feeds).unwrap();
    assert_eq!(o[0].shape(), &[2, 2, 3]);
    assert_eq!(o[1].shape(), &[6, 2]);
    g.reshape(x, vec![q(), 5.into()]);
    assert!(err(&g).contains("same symbols"));
    let mut g = Graph::new("r");
    let x = g.input("x", Shape::from_dims(&[q()], DType::F32));
    g.reshape(x, [4]);
    assert!(g.error().is_some());
}

#[test]
fn transpose_and_rev() {
    let mut g = Graph::new("t");
    let x = g.input("x", Shape::new(&[2, 3], DType::I64));
    let tr = g.transpose(x, &[1, 0]);
    let r1 = g.rev(x, &[1]);
    let r01 = g.rev(x, &[0, 1]);
    let o = run(&mut g, vec![tr, r1, r01], &[&t(vec![1i64, 2, 3, 4, 5, 6], &[2, 3])]);
    assert_eq!(o[0].shape(), &[3, 2]);
    assert_eq!(o[0].as_slice::<i64>().unwrap(), &[1, 4, 2, 5, 3, 6]);
    assert_eq!(o[1].as_slice::<i64>().unwrap(), &[3, 2, 1, 6, 5, 4]);
    assert_eq!(o[2].as_slice::<i64>().unwrap(), &[6, 5, 4, 3, 2, 1]);

    let mut g = Graph::new("t");
    let x = g.input("x", Shape::new(&[2, 3, 4], DType::F32));
    let y = g.transpose(x, &[2, 0, 1]);
    assert_eq!(g.shape(y), &Shape::new(&[4, 2, 3], DType::F32));
    g.transpose(x, &[0, 0, 1]);
    let e = err(&g);
    assert!(e.contains("not a permutation") && e.contains("f32[2,3,4]"), "{e}");
    let mut g = Graph::new("t");
    let x = g.input("x", Shape::new(&[2], DType::F32));
    g.rev(x, &[1]);
    assert!(err(&g).contains("out of range"));
}

#[test]
fn slice_strides_bounds_and_slice_in_dim() {
    let mut g = Graph::new("s");
    let x = g.input("x", Shape::new(&[3, 4], DType::F32));
    let a = g.slice(x, &[0, 1], &[3, 4], &[2, 2]);
    let b = g.slice_in_dim(x, 1, 3, -1);
    let c = g.slice(x, &[1, 0], &[1, 4], &[]);
    let o = run(&mut g, vec![a, b, c], &[&iota_f32(&[3, 4])]);
    assert_eq!(o[0].as_slice::<f32>().unwrap(), &[1.0, 3.0, 9.0, 11.0]);
    assert_eq!(o[1].shape(), &[3, 2]);
    assert_eq!(o[1].as_slice::<f32>().unwrap(), &[1.0, 2.0, 5.0, 6.0, 9.0, 10.0]);
    assert_eq!(o[2].shape(), &[0, 4]);

    for (st, lim, strides, want) in [
        ([0, 0], [3, 5], [1, 1], "exceeds"),
        ([2, 0], [1, 4], [1, 1], "start 2 > limit 1"),
        ([0, 0], [3, 4], [0, 1], "stride"),
    ] {
        let mut g = Graph::new("s");
        let x = g.input("x", Shape::new(&[3, 4], DType::F32));
        g.slice(x, &st, &lim, &strides);
        assert!(err(&g).contains(want), "{}", err(&g));
    }
    let mut g = Graph::new("s");
    let x = g.input("x", Shape::new(&[3, 4], DType::F32));
    g.slice_in_dim(x, 0, 1, 2);
    assert!(err(&g).contains("axis 2"));
}

#[test]
fn dynamic_slice_clamps_starts() {
    let mut g = Graph::new("d");
    let x = g.input("x", Shape::new(&[4], DType::F16));
    let i = g.input("i", Shape::scalar(DType::I64));
    let y = g.dynamic_slice(x, &[i], &[2]);
    let xt = Tensor::from_f64s(&[4], DType::F16, &[0.0, 1.0, 2.0, 3.0]).unwrap();
    for (start, want) in [(1i64, [1.0, 2.0]), (3, [2.0, 3.0]), (-5, [0.0, 1.0])] {
        let o = run(&mut g, vec![y], &[&xt, &Tensor::scalar(start)]);
        assert_eq!(o[0].to_f64_vec(), want, "start {start}");
    }

    let mut g = Graph::new("d");
    let x = g.input("x", Shape::new(&[3, 3], DType::F32));
    let i = g.input("i", Shape::scalar(DType::U8));
    let j = g.input("j", Shape::scalar(DType::I16));
    let y = g.dynamic_slice(x, &[i, j], &[2, 2]);
    let o = run(&mut g, vec![y], &[&iota_f32(&[3, 3]), &Tensor::scalar(1u8), &Tensor::scalar(1i16)]);
    assert_eq!(o[0].as_slice::<f32>().unwrap(), &[4.0, 5.0, 7.0, 8.0]);

    let mut g = Graph::new("d");
    let x = g.input("x", Shape::new(&[3, 3], DType::F32));
    let f = g.input("f", Shape::scalar(DType::F32));
    g.dynamic_slice(x, &[f, f], &[1, 1]);
    assert!(err(&g).contains("integer scalar"));
    let mut g = Graph::new("d");
    let x = g.input("x", Shape::new(&[3, 3], DType::F32));
    let i = g.input("i", Shape::scalar(DType::I32));
    g.dynamic_slice(x, &[i], &[1, 1]);
    assert!(err(&g).contains("one start index per dim"));
    let mut g = Graph::new("d");
    let x = g.input("x", Shape::new(&[3], DType::F32));
    let i = g.input("i", Shape::scalar(DType::I32));
    g.dynamic_slice(x, &[i], &[4]);
    assert!(err(&g).contains("exceeds"));
}

#[test]
fn dynamic_update_slice_clamps_starts() {
    let mut g = Graph::new("u");
    let x = g.input("x", Shape::new(&[2, 4], DType::I32));
    let u = g.input("u", Shape::new(&[1, 2], DType::I32));
    let i = g.input("i", Shape::scalar(DType::I32));
    let y = g.dynamic_update_slice(x, u, &[i, i]);
    let xt = Tensor::zeros(&[2, 4], DType::I32);
    let o = run(&mut g, vec![y], &[&xt, &t(vec![7i32, 8], &[1, 2]), &Tensor::scalar(3i32)]);
    assert_eq!(o[0].as_slice::<i32>().unwrap(), &[0, 0, 0, 0, 0, 0, 7, 8]);

    let mut g = Graph::new("u");
    let x = g.input("x", Shape::new(&[2], DType::I32));
    let u = g.input("u", Shape::new(&[3], DType::I32));
    let i = g.input("i", Shape::scalar(DType::I32));
    g.dynamic_update_slice(x, u, &[i]);
    assert!(err(&g).contains("larger"));
    let mut g = Graph::new("u");
    let x = g.input("x", Shape::new(&[2], DType::I32));
    let u = g.input("u", Shape::new(&[1], DType::F32));
    g.dynamic_update_slice(x, u, &[x]);
    assert!(err(&g).contains("dtype"));
}

#[test]
fn concatenate_values_axes_and_errors() {
    let mut g = Graph::new("c");
    let a = g.input("a", Shape::new(&[2, 1], DType::U32));
    let b = g.input("b", Shape::new(&[2, 2], DType::U32));
    let z = g.input("z", Shape::new(&[2, 0], DType::U32));
    let y = g.concatenate(&[a, z, b], -1);
    let y0 = g.concatenate(&[b, b], 0);
    let o = run(
        &mut g,
        vec![y, y0],
        &[&t(vec![1u32, 2], &[2, 1]), &t(vec![3u32, 4, 5, 6], &[2, 2]), &t(Vec::<u32>::new(), &[2, 0])],
    );
    assert_eq!(o[0].as_slice::<u32>().unwrap(), &[1, 3, 4, 2, 5, 6]);
    assert_eq!(o[1].shape(), &[4, 2]);
    assert_eq!(o[1].as_slice::<u32>().unwrap(), &[3, 4, 5, 6, 3, 4, 5, 6]);

    let mut g = Graph::new("c");
    let a = g.input("a", Shape::new(&[2, 1], DType::F32));
    let b = g.input("b", Shape::new(&[3, 1], DType::F32));
    g.concatenate(&[a, b], 1);
    let e = err(&g);
    assert!(e.contains("f32[3,1]") && e.contains("dim 0"), "{e}");
    let mut g = Graph::new("c");
    let a = g.input("a", Shape::new(&[2], DType::F32));
    g.concatenate(&[a], 1);
    assert!(err(&g).contains("axis 1"));
    let mut g = Graph::new("c");
    g.concatenate(&[], 0);
    assert!(err(&g).contains("at least one"));
    let mut g = Graph::new("c");
    let a = g.input("a", Shape::from_dims(&[Dim::dynamic(), 2.into()], DType::F32));
    let c = g.concatenate(&[a, a], 1);
    assert_eq!(g.shape(c).dims, vec![Dim::dynamic(), 4.into()]);
    g.concatenate(&[a, a], 0);
    assert!(err(&g).contains("symbolic"));
}

#[test]
fn pad_low_high_interior_and_crop() {
    let mut g = Graph::new("p");
    let x = g.input("x", Shape::new(&[2, 3], DType::I32));
    let v = g.scalar(9.0, DType::I32);
    let y = g.pad(x, v, &[1, -1], &[0, 1], &[1, 0]);
    let o = run(&mut g, vec![y], &[&t(vec![1i32, 2, 3, 4, 5, 6], &[2, 3])]);
    assert_eq!(o[0].shape(), &[4, 3]);
    assert_eq!(o[0].as_slice::<i32>().unwrap(), &[9, 9, 9, 2, 3, 9, 9, 9, 9, 5, 6, 9]);

    let mut g = Graph::new("p");
    let x = g.input("x", Shape::new(&[0], DType::F32));
    let v = g.scalar(1.5, DType::F32);
    let y = g.pad(x, v, &[2], &[1], &[3]);
    let o = run(&mut g, vec![y], &[&t(Vec::<f32>::new(), &[0])]);
    assert_eq!(o[0].as_slice::<f32>().unwrap(), &[1.5, 1.5, 1.5]);

    let mut g = Graph::new("p");
    let x = g.input("x", Shape::new(&[2], DType::F32));
    let v = g.scalar(0.0, DType::F32);
    g.pad(x, v, &[-2], &[-1], &[]);
    assert!(err(&g).contains("negative size -1"));
    let mut g = Graph::new("p");
    let x = g.input("x", Shape::new(&[2], DType::F32));
    let v = g.scalar(0.0, DType::F64);
    g.pad(x, v, &[0], &[0], &[]);
    assert!(err(&g).contains("padding value"));
}

#[test]
fn iota_ints_and_floats() {
    let mut g = Graph::new("i");
    let a = g.iota(Shape::new(&[2, 3], DType::I32), 1);
    let b = g.iota(Shape::new(&[2, 3], DType::F32), 0);
    let o = run(&mut g, vec![a, b], &[]);
    assert_eq!(o[0].as_slice::<i32>().unwrap(), &[0, 1, 2, 0, 1, 2]);
    assert_eq!(o[1].as_slice::<f32>().unwrap(), &[0.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
    let mut g = Graph::new("i");
    g.iota(Shape::new(&[2], DType::I32), 1);
    assert!(err(&g).contains("out of range"));
}

fn gdims(offset: &[usize], collapsed: &[usize], map: &[usize]) -> GatherDims {
    GatherDims { offset_dims: offset.to_vec(), collapsed_slice_dims: collapsed.to_vec(), start_index_map: map.to_vec() }
}

#[test]
fn gather_points_rows_and_offset_placement() {
    let x3 = iota_f32(&[3, 3]);
    // Point gather with a 2-component index vector.
    let mut g = Graph::new("g");
    let x = g.input("x", Shape::new(&[3, 3], DType::F32));
    let i = g.input("i", Shape::new(&[2, 2], DType::I32));
    let y = g.gather(x, i, gdims(&[], &[0, 1], &[0, 1]), &[1, 1], GatherMode::Clip);
    let o = run(&mut g, vec![y], &[&x3, &t(vec![1i32, 1, 2, 0], &[2, 2])]);
    assert_eq!(o[0].as_slice::<f32>().unwrap(), &[4.0, 6.0]);

    // Row windows; offset dim after the batch dim, then before it.
    let mut g = Graph::new("g");
    let x = g.input("x", Shape::new(&[3, 3], DType::F32));
    let i = g.input("i", Shape::new(&[2, 1], DType::I64));
    let a = g.gather(x, i, gdims(&[1], &[0], &[0]), &[1, 2], GatherMode::Clip);
    let b = g.gather(x, i, gdims(&[0], &[0], &[0]), &[1, 2], GatherMode::Clip);
    assert_eq!(g.shape(a), &Shape::new(&[2, 2], DType::F32));
    let o = run(&mut g, vec![a, b], &[&x3, &t(vec![0i64, 2], &[2, 1])]);
    assert_eq!(o[0].as_slice::<f32>().unwrap(), &[0.0, 1.0, 6.0, 7.0]);
    assert_eq!(o[1].as_slice::<f32>().unwrap(), &[0.0, 6.0, 1.0, 7.0]);
}

#[test]
fn gather_clip_and_fill_modes() {
    let x3 = iota_f32(&[3, 3]);
    let idx = t(vec![5i32, -1, 1], &[3, 1]);
    let mut g = Graph::new("g");
    let x = g.input("x", Shape::new(&[3, 3], DType::F32));
    let i = g.input("i", Shape::new(&[3, 1], DType::I32));
    let c = g.gather(x, i, gdims(&[1], &[0], &[0]), &[1, 2], GatherMode::Clip);
    let f = g.gather(x, i, gdims(&[1], &[0], &[0]), &[1, 2], GatherMode::FillOrDrop);
    // Columns picked by index (collapsed dim 1): 5 clamps to 2, -1 to 0.
    let cc = g.gather(x, i, gdims(&[0], &[1], &[1]), &[3, 1], GatherMode::Clip);
    let o = run(&mut g, vec![c, f, cc], &[&x3, &idx]);
    assert_eq!(o[0].as_slice::<f32>().unwrap(), &[6.0, 7.0, 0.0, 1.0, 3.0, 4.0]);
    assert_eq!(o[1].as_slice::<f32>().unwrap(), &[0.0, 0.0, 0.0, 0.0, 3.0, 4.0]);
    assert_eq!(o[2].shape(), &[3, 3]);
    assert_eq!(o[2].as_slice::<f32>().unwrap(), &[2.0, 0.0, 1.0, 5.0, 3.0, 4.0, 8.0, 6.0, 7.0]);

    // A window that only partly fits is filled whole.
    let mut g = Graph::new("g");
    let x = g.input("x", Shape::new(&[4], DType::I8));
    let i = g.input("i", Shape::new(&[1], DType::U32));
    let f = g.gather(x, i, gdims(&[0], &[], &[0]), &[2], GatherMode::FillOrDrop);
    let o = run(&mut g, vec![f], &[&t(vec![1i8, 2, 3, 4], &[4]), &t(vec![3u32], &[1])]);
    assert_eq!(o[0].as_slice::<i8>().unwrap(), &[0, 0]);
}

#[test]
fn gather_errors_name_the_problem() {
    type Case = (GatherDims, Vec<usize>, DType, Vec<usize>, &'static str);
    let cases: Vec<Case> = vec![
        (gdims(&[1], &[0], &[0]), vec![1, 2], DType::F32, vec![2, 1], "integer"),
        (gdims(&[1], &[0], &[0, 1]), vec![1, 2], DType::I32, vec![2, 1], "start_index_map"),
        (gdims(&[1], &[0], &[0]), vec![2, 2], DType::I32, vec![2, 1], "slice size 1"),
        (gdims(&[], &[0], &[0]), vec![1, 2], DType::I32, vec![2, 1], "offset_dims"),
        (gdims(&[1], &[0], &[0]), vec![1, 4], DType::I32, vec![2, 1], "exceeds"),
        (gdims(&[1], &[0], &[0]), vec![1], DType::I32, vec![2, 1], "slice_sizes"),
        (gdims(&[2], &[0], &[0]), vec![1, 2], DType::I32, vec![2, 1], "out of range"),
        (gdims(&[1], &[0], &[0]), vec![1, 2], DType::I32, vec![], "rank ≥ 1"),
    ];
    for (d, ss, idt, idims, want) in cases {
        let mut g = Graph::new("g");
        let x = g.input("x", Shape::new(&[3, 3], DType::F32));
        let i = g.input("i", Shape::new(&idims, idt));
        g.gather(x, i, d, &ss, GatherMode::Clip);
        let e = err(&g);
        assert!(e.contains(want) && e.contains("gather"), "want {want:?}: {e}");
    }
}

fn sdims(window: &[usize], inserted: &[usize], map: &[usize]) -> ScatterDims {
    ScatterDims {
        update_window_dims: window.to_vec(),
        inserted_window_dims: inserted.to_vec(),
        scatter_dims_to_operand_dims: map.to_vec(),
    }
}

#[test]
fn scatter_add_points_duplicates_and_modes() {
    let mut g = Graph::new("s");
    let x = g.input("x", Shape::new(&[5], DType::F32));
    let i = g.input("i", Shape::new(&[4, 1], DType::I32));
    let u = g.input("u", Shape::new(&[4], DType::F32));
    let c = g.scatter_add(x, i, u, sdims(&[], &[0], &[0]), GatherMode::Clip);
    let f = g.scatter_add(x, i, u, sdims(&[], &[0], &[0]), GatherMode::FillOrDrop);
    let args = [&t(vec![0.5f32; 5], &[5]), &t(vec![1i32, 3, 1, 7], &[4, 1]), &t(vec![10.0f32, 20.0, 30.0, 40.0], &[4])];
    let o = run(&mut g, vec![c, f], &args);
    assert_eq!(o[0].as_slice::<f32>().unwrap(), &[0.5, 40.5, 0.5, 20.5, 40.5]);
    assert_eq!(o[1].as_slice::<f32>().unwrap(), &[0.5, 40.5, 0.5, 20.5, 0.5]);
}

#[test]
fn scatter_add_windows() {
    let mut g = Graph::new("s");
    let x = g.input("x", Shape::new(&[3, 3], DType::I32));
    let i = g.input("i", Shape::new(&[2, 1], DType::I64));
    let u = g.input("u", Shape::new(&[2, 3], DType::I32));
    let y = g.scatter_add(x, i, u, sdims(&[1], &[0], &[0]), GatherMode::Clip);
    let o = run(
        &mut g,
        vec![y],
        &[&t(vec![1i32; 9], &[3, 3]), &t(vec![0i64, 2], &[2, 1]), &t(vec![1i32, 2, 3, 4, 5, 6], &[2, 3])],
    );
    assert_eq!(o[0].as_slice::<i32>().unwrap(), &[2, 3, 4, 1, 1, 1, 5, 6, 7]);

    // A width-2 window starting at 3 of a size-4 operand: clipped to start 2, or dropped.
    let mut g = Graph::new("s");
    let x = g.input("x", Shape::new(&[4], DType::I64));
    let i = g.input("i", Shape::new(&[1, 1], DType::U8));
    let u = g.input("u", Shape::new(&[1, 2], DType::I64));
    let c = g.scatter_add(x, i, u, sdims(&[1], &[], &[0]), GatherMode::Clip);
    let f = g.scatter_add(x, i, u, sdims(&[1], &[], &[0]), GatherMode::FillOrDrop);
    let o =
        run(&mut g, vec![c, f], &[&t(vec![0i64; 4], &[4]), &t(vec![3u8], &[1, 1]), &t(vec![1i64, i64::MAX], &[1, 2])]);
    assert_eq!(o[0].as_slice::<i64>().unwrap(), &[0, 0, 1, i64::MAX]);
    assert_eq!(o[1].as_slice::<i64>().unwrap(), &[0, 0, 0, 0]);
}

#[test]
fn scatter_add_errors() {
    let cases: Vec<(ScatterDims, DType, Vec<usize>, &str)> = vec![
        (sdims(&[], &[0], &[0]), DType::F64, vec![4], "dtype"),
        (sdims(&[], &[0], &[0]), DType::F32, vec![3], "must equal indices dim"),
        (sdims(&[0], &[0], &[0]), DType::F32, vec![4], "together number"),
        (sdims(&[], &[0], &[0]), DType::F32, vec![4, 1], "rank"),
    ];
    for (d, udt, udims, want) in cases {
        let mut g = Graph::new("s");
        let x = g.input("x", Shape::new(&[5], DType::F32));
        let i = g.input("i", Shape::new(&[4, 1], DType::I32));
        let u = g.input("u", Shape::new(&udims, udt));
        g.scatter_add(x, i, u, d, GatherMode::Clip);
        let e = err(&g);
        assert!(e.contains(want) && e.contains("scatter_add"), "want {want:?}: {e}");
    }
}

#[test]
fn take_is_numpy_take_with_clip() {
    let table = t(vec![0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0], &[3, 2]);
    let mut g = Graph::new("t");
    let x = g.input("x", Shape::new(&[3, 2], DType::F32));
    let i = g.input("i", Shape::new(&[2, 2], DType::I64));
    let j = g.input("j", Shape::new(&[1], DType::U8));
    let k = g.input("k", Shape::scalar(DType::I32));
    let a = g.take(x, i, 0);
    let b = g.take(x, j, -1);
    let c = g.take(x, k, 0);
    assert_eq!(g.shape(a), &Shape::new(&[2, 2, 2], DType::F32));
    let o = run(
        &mut g,
        vec![a, b, c],
        &[&table, &t(vec![2i64, 0, 1, 9], &[2, 2]), &t(vec![1u8], &[1]), &Tensor::scalar(1i32)],
    );
    assert_eq!(o[0].as_slice::<f32>().unwrap(), &[4.0, 5.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(o[1].shape(), &[3, 1]);
    assert_eq!(o[1].as_slice::<f32>().unwrap(), &[1.0, 3.0, 5.0]);
    assert_eq!(o[2].as_slice::<f32>().unwrap(), &[2.0, 3.0]);

    // Embedding lookup with a symbolic batch of token ids, specialized at run time.
    let mut g = Graph::new("emb");
    let w = g.param("w", Shape::new(&[3, 2], DType::F32));
    let ids = g.input("ids", Shape::from_dims(&[Dim::dynamic()], DType::I32));
    let e = g.take(w, ids, 0);
    assert_eq!(g.shape(e).dims, vec![Dim::dynamic(), 2.into()]);
    g.set_outputs(vec![e]);
    g.verify().unwrap();
    let feeds = HashMap::from([("w".to_string(), table.clone()), ("ids".to_string(), t(vec![2i32, 2, 0], &[3]))]);
    let o = evaluate(&g, &feeds).unwrap();
    assert_eq!(o[0].as_slice::<f32>().unwrap(), &[4.0, 5.0, 4.0, 5.0, 0.0, 1.0]);

    let mut g = Graph::new("t");
    let x = g.input("x", Shape::new(&[3, 2], DType::F32));
    let i = g.input("i", Shape::new(&[2], DType::F32));
    g.take(x, i, 2);
    assert!(err(&g).contains("axis 2"));
    g = Graph::new("t");
    let x = g.input("x", Shape::new(&[3, 2], DType::F32));
    let i = g.input("i", Shape::new(&[2], DType::F32));
    g.take(x, i, 0);
    assert!(err(&g).contains("integer"));
}

#[test]
fn expand_dims_and_squeeze() {
    let mut g = Graph::new("e");
    let x = g.input("x", Shape::new(&[2, 3], DType::Bool));
    let a = g.expand_dims(x, -1);
    let b = g.expand_dims(x, 0);
    assert_eq!(g.shape(a), &Shape::new(&[2, 3, 1], DType::Bool));
    assert_eq!(g.shape(b), &Shape::new(&[1, 2, 3], DType::Bool));
    let y = g.input("y", Shape::new(&[1, 2, 1], DType::F32));
    let c = g.squeeze(y, &[]);
    let d = g.squeeze(y, &[-1]);
    assert_eq!(g.shape(c), &Shape::new(&[2], DType::F32));
    assert_eq!(g.shape(d), &Shape::new(&[1, 2], DType::F32));
    assert!(g.error().is_none());
    g.squeeze(y, &[1]);
    assert!(err(&g).contains("not 1"));
    let mut g = Graph::new("e");
    let x = g.input("x", Shape::new(&[2, 3], DType::F32));
    let e = g.expand_dims(x, -3);
    assert_eq!(g.shape(e), &Shape::new(&[1, 2, 3], DType::F32));
    assert!(g.error().is_none());
    g.expand_dims(x, 3);
    assert!(err(&g).contains("axis 3"));
}

#[test]
fn builders_never_panic_on_bad_node_ids() {
    let mut g = Graph::new("bad");
    let bogus = NodeId(99);
    g.broadcast_to(bogus, [2]);
    g.take(bogus, bogus, 0);
    g.expand_dims(bogus, 0);
    g.squeeze(bogus, &[]);
    g.slice_in_dim(bogus, 0, 1, 0);
    g.concatenate(&[bogus], 0);
    assert!(err(&g).contains("does not exist"));
}

#[test]
fn size_zero_and_bool_movement() {
    let mut g = Graph::new("z");
    let x = g.input("x", Shape::new(&[0, 3], DType::Bool));
    let a = g.transpose(x, &[1, 0]);
    let b = g.rev(x, &[0]);
    let c = g.broadcast_in_dim(x, [2, 0, 3], &[1, 2]);
    let o = run(&mut g, vec![a, b, c], &[&Tensor::zeros(&[0, 3], DType::Bool)]);
    assert_eq!(o[0].shape(), &[3, 0]);
    assert_eq!(o[2].shape(), &[2, 0, 3]);
}
