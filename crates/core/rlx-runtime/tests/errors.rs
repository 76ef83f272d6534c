//! Bad input gives a clear, typed error from the `try_` API, and the panicking convenience
//! forms panic with that same message.

use rlx_ir::{DType, Dim, Graph, IrError, Shape, Tensor};
use rlx_runtime::{Device, Error, Session};

fn add_graph() -> Graph {
    let mut g = Graph::new("add");
    let x = g.input("x", Shape::new(&[2, 3], DType::F32));
    let b = g.param("b", Shape::new(&[3], DType::F32));
    let y = g.add(x, b);
    g.set_outputs(vec![y]);
    g
}

#[test]
fn runs_with_broadcast() {
    let mut c = Session::new(Device::Cpu).try_compile(add_graph()).unwrap();
    c.try_set_param("b", &[10.0, 20.0, 30.0]).unwrap();
    let out = c.try_run(&[("x", &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])]).unwrap();
    assert_eq!(out[0], vec![11.0, 22.0, 33.0, 14.0, 25.0, 36.0]);
}

#[test]
fn shape_mismatch_names_op_node_and_shapes() {
    let mut g = Graph::new("bad");
    let x = g.input("x", Shape::new(&[2, 3], DType::F32));
    let y = g.input("y", Shape::new(&[4], DType::F32));
    let z = g.add(x, y);
    g.set_outputs(vec![z]);
    let e = Session::new(Device::Cpu).try_compile(g).err().expect("must fail");
    let msg = e.to_string();
    assert!(matches!(e, Error::Ir(IrError::Shape { node: 2, .. })), "{e:?}");
    assert!(msg.contains("add") && msg.contains("f32[2,3]") && msg.contains("f32[4]") && msg.contains("%2"), "{msg}");
}

#[test]
fn unknown_input_name() {
    let mut c = Session::new(Device::Cpu).try_compile(add_graph()).unwrap();
    c.try_set_param("b", &[0.0; 3]).unwrap();
    let e = c.try_run(&[("z", &[0.0; 6])]).unwrap_err();
    assert!(matches!(&e, Error::UnknownName { name, .. } if name == "z"), "{e:?}");
    assert!(e.to_string().contains("\"x\""), "lists the known inputs: {e}");
}

#[test]
fn unknown_param_name() {
    let mut c = Session::new(Device::Cpu).try_compile(add_graph()).unwrap();
    assert!(matches!(c.try_set_param("w", &[0.0; 3]), Err(Error::UnknownName { .. })));
}

#[test]
fn wrong_buffer_length() {
    let mut c = Session::new(Device::Cpu).try_compile(add_graph()).unwrap();
    let e = c.try_set_param("b", &[0.0; 4]).unwrap_err();
    assert!(matches!(e, Error::BufferLength { expected: 3, got: 4, .. }), "{e:?}");
    c.try_set_param("b", &[0.0; 3]).unwrap();
    let e = c.try_run(&[("x", &[0.0; 5])]).unwrap_err();
    assert!(matches!(e, Error::BufferLength { expected: 6, got: 5, .. }), "{e:?}");
}

#[test]
fn missing_param_and_input() {
    let mut c = Session::new(Device::Cpu).try_compile(add_graph()).unwrap();
    let e = c.try_run(&[("x", &[0.0; 6])]).unwrap_err();
    assert_eq!(e, Error::MissingParam("b".into()));
    c.try_set_param("b", &[0.0; 3]).unwrap();
    assert_eq!(c.try_run(&[]).unwrap_err(), Error::MissingInput("x".into()));
}

#[test]
fn dtype_and_dims_mismatch() {
    let mut c = Session::new(Device::Cpu).try_compile(add_graph()).unwrap();
    c.try_set_param("b", &[0.0; 3]).unwrap();
    let t = Tensor::from_vec(vec![0i32; 6], &[2, 3]).unwrap();
    assert!(matches!(
        c.run_tensors(&[("x", t)]),
        Err(Error::DTypeMismatch { expected: DType::F32, got: DType::I32, .. })
    ));
    let t = Tensor::from_vec(vec![0f32; 6], &[3, 2]).unwrap();
    assert!(matches!(c.run_tensors(&[("x", t)]), Err(Error::ShapeMismatch { .. })));
}

#[test]
#[should_panic(expected = "param \"b\" was never set")]
fn plain_run_panics_with_the_same_message() {
    let mut c = Session::new(Device::Cpu).compile(add_graph());
    c.run(&[("x", &[0.0; 6])]);
}

#[test]
fn symbolic_batch_is_specialized_per_shape() {
    let mut g = Graph::new("dyn");
    let x = g.input("x", Shape::from_dims(&[Dim::dynamic(), Dim::Static(2)], DType::F32));
    let y = g.mul(x, x);
    g.set_outputs(vec![y]);
    let mut c = Session::new(Device::Cpu).try_compile(g).unwrap();
    assert_eq!(c.try_run(&[("x", &[1.0, 2.0])]).unwrap()[0], vec![1.0, 4.0]);
    assert_eq!(c.try_run(&[("x", &[1.0, 2.0, 3.0, 4.0])]).unwrap()[0], vec![1.0, 4.0, 9.0, 16.0]);
    assert!(matches!(c.try_run(&[("x", &[1.0, 2.0, 3.0])]), Err(Error::BufferLength { .. })));
}

#[test]
fn unavailable_device_is_an_error() {
    assert!(matches!(Session::try_new(Device::Cuda), Err(Error::DeviceUnavailable(Device::Cuda))));
}

#[test]
fn graph_without_outputs_is_an_error() {
    let mut g = Graph::new("empty");
    g.input("x", Shape::new(&[1], DType::F32));
    let e = Session::new(Device::Cpu).try_compile(g).err().unwrap();
    assert!(e.to_string().contains("no outputs"), "{e}");
}

#[test]
fn messages_for_symbolic_lengths_and_inputs_given_as_params() {
    let mut g = Graph::new("dyn");
    let x = g.input("x", Shape::from_dims(&[Dim::dynamic(), Dim::Static(3)], DType::F32));
    let b = g.param("b", Shape::new(&[3], DType::F32));
    let y = g.add(x, b);
    g.set_outputs(vec![y]);
    let mut c = Session::new(Device::Cpu).try_compile(g).unwrap();
    c.try_set_param("b", &[0.0; 3]).unwrap();
    let e = c.try_run(&[("x", &[1.0, 2.0])]).unwrap_err();
    assert!(e.to_string().contains("needs a multiple of 3 elements, got 2"), "{e}");
    let e = c.try_set_param("x", &[0.0; 3]).unwrap_err();
    assert!(matches!(&e, Error::NotAParam { name, .. } if name == "x"), "{e:?}");
    assert!(e.to_string().contains("is an input, not a param"), "{e}");
}
