//! The Tensor API: lazy errors with the caller's location, the compile cache, devices, graph
//! export, and the function transforms.

use rlx_ir::{DType, Dim, Shape};
use rlx_tensor::{Device, Tensor, TensorError, cache_len, grad, jit, jvp, value_and_grad, vmap};

fn close(a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() <= 1e-5 + 1e-5 * y.abs(), "{a:?} vs {b:?}");
    }
}

#[test]
fn spec_snippet() {
    let a = Tensor::from_vec(vec![1.0, 2.0, 3.0], [3]);
    let c = (&a + &Tensor::ones([3])).relu();
    assert_eq!(c.to_vec(), vec![2.0, 3.0, 4.0]);
}

#[test]
fn broadcasting_and_scalars() {
    let a = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
    let col = Tensor::from_vec(vec![10.0, 20.0], [2, 1]);
    assert_eq!((&a + &col).to_vec(), vec![11.0, 12.0, 13.0, 24.0, 25.0, 26.0]);
    assert_eq!((1.0 - &a * 2.0).to_vec(), vec![-1.0, -3.0, -5.0, -7.0, -9.0, -11.0]);
    assert_eq!((-&a).sum(&[1], false).to_vec(), vec![-6.0, -15.0]);
    assert_eq!(a.t().dims(), &[Dim::Static(3), Dim::Static(2)]);
    assert_eq!(a.transpose(0, 1).to_vec(), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
    assert_eq!(Tensor::eye(2).matmul(&a).to_vec(), a.to_vec());
    let x = Tensor::from_elems(vec![1i64, 5, 2], [3]);
    assert_eq!(x.dtype(), DType::I64);
    assert_eq!((&x * 2.0).to_tensor().as_slice::<i64>().unwrap(), &[2, 10, 4]);
}

#[test]
fn shape_errors_carry_the_callers_location() {
    let a = Tensor::zeros([2, 3]);
    let b = Tensor::zeros([4, 5]);
    let (bad, line) = (a.matmul(&b), line!());
    let later = (&bad + 1.0).relu();
    let e = later.try_to_vec().unwrap_err();
    assert!(matches!(e, TensorError::Build { .. }));
    assert_eq!(e.location().file(), file!());
    assert_eq!(e.location().line(), line);
    let msg = e.to_string();
    assert!(msg.contains("dot_general") && msg.contains("f32[2,3]") && msg.contains("f32[4,5]"), "{msg}");
    // Operators too.
    let e = (&a + &b).error().cloned().unwrap();
    assert_eq!(e.location().line(), line!() - 1);
    // Data of the wrong length.
    assert!(Tensor::try_from_vec(vec![1.0; 5], [2, 3]).is_err());
}

#[test]
#[should_panic(expected = "api.rs")]
fn to_vec_panics_with_the_location() {
    let a = Tensor::zeros([2]);
    let _ = (&a + &Tensor::zeros([3])).to_vec();
}

#[test]
fn named_inputs_have_no_data_but_export() {
    let x = Tensor::input("x", Shape::from_dims(&[Dim::dynamic(), Dim::Static(4)], DType::F32));
    let w = Tensor::param("w", Shape::new(&[4, 2], DType::F32));
    let y = x.matmul(&w).relu();
    assert!(matches!(y.try_to_vec(), Err(TensorError::Unbound { .. })));
    let g = Tensor::to_graph("g", &[&y]).unwrap();
    rlx_ir::verify(&g).unwrap();
    assert_eq!(g.inputs().len(), 1);
    assert_eq!(g.params().len(), 1);
    assert_eq!(g.shape(g.outputs()[0]).to_string(), "f32[?,2]");
    let other = Tensor::input("x", Shape::new(&[4, 2], DType::F32));
    assert!(matches!(Tensor::to_graph("g", &[&y, &other]), Err(TensorError::DuplicateName { .. })));
}

#[test]
fn compiles_once_per_structure() {
    rlx_tensor::clear_cache();
    let f = |v: Vec<f32>| (Tensor::from_vec(v, [3]) * 3.0).exp().sum_all();
    let a = f(vec![0.0, 0.0, 0.0]).to_vec();
    let n = cache_len();
    let b = f(vec![1.0, 0.0, -1.0]).to_vec();
    assert_eq!(cache_len(), n, "new data, same structure: no new compile");
    assert_eq!(a, vec![3.0]);
    close(&b, &[(3.0f32).exp() + 1.0 + (-3.0f32).exp()]);
    let c = Tensor::from_vec(vec![1.0], [1]).on(Device::Cpu);
    assert_eq!((&c + 1.0).device(), Some(Device::Cpu));
    let e = Tensor::from_vec(vec![1.0], [1]).on(Device::Cuda).try_to_vec().unwrap_err();
    assert!(e.to_string().contains("cuda"), "{e}");
}

#[test]
fn grad_jvp_vmap_jit() {
    let x = Tensor::from_vec(vec![1.0, -2.0, 3.0], [3]);
    // d/dx sum(x^3) = 3 x^2
    let cube = |a: &[Tensor]| (&a[0] * &a[0] * &a[0]).sum_all();
    let g = grad(cube, &[0])(std::slice::from_ref(&x));
    close(&g[0].to_vec(), &[3.0, 12.0, 27.0]);
    let (v, g) = value_and_grad(cube, &[0])(std::slice::from_ref(&x));
    close(&v.to_vec(), &[1.0 - 8.0 + 27.0]);
    close(&g[0].to_vec(), &[3.0, 12.0, 27.0]);
    // Second derivative via grad of grad: 6x.
    let d2 = grad(|a: &[Tensor]| grad(cube, &[0])(a)[0].sum_all(), &[0])(std::slice::from_ref(&x));
    close(&d2[0].to_vec(), &[6.0, -12.0, 18.0]);
    // A captured tensor is a constant.
    let w = Tensor::from_vec(vec![2.0, 2.0, 2.0], [3]);
    let g = grad(|a: &[Tensor]| (&a[0] * &w).sum_all(), &[0])(std::slice::from_ref(&x));
    close(&g[0].to_vec(), &[2.0, 2.0, 2.0]);
    // jvp of sin at x along ones: cos(x).
    let (y, t) = jvp(|a: &[Tensor]| a[0].sin(), std::slice::from_ref(&x), &[Tensor::ones([3])]);
    close(&y.to_vec(), &x.sin().to_vec());
    close(&t.to_vec(), &x.cos().to_vec());
    // vmap of a dot product over rows.
    let m = Tensor::from_vec(vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3]);
    let dot = vmap(|a: &[Tensor]| a[0].matmul(&a[1]), &[Some(0), None]);
    close(&dot(&[m.clone(), x.clone()]).to_vec(), &[1.0 - 4.0 + 9.0, 4.0 - 10.0 + 18.0]);
    // jit: traced once per argument types.
    let f = jit(|a: &[Tensor]| (&a[0] * 2.0).relu());
    close(&f(std::slice::from_ref(&x)).to_vec(), &[2.0, 0.0, 6.0]);
    close(&f(&[Tensor::from_vec(vec![-1.0, 1.0, 0.5], [3])]).to_vec(), &[0.0, 2.0, 1.0]);
    // Errors: grad of a non-scalar.
    let e = grad(|a: &[Tensor]| a[0].clone(), &[0])(std::slice::from_ref(&x));
    assert!(matches!(e[0].error(), Some(TensorError::Transform { .. })));
}

#[test]
fn long_chains_drop_without_overflow() {
    let mut x = Tensor::zeros([1]);
    for _ in 0..100_000 {
        x = &x + 1.0;
    }
    drop(x);
}
