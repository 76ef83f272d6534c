//! `If` / `Loop` / `Scan` on small hand-built models where the node suite lacks coverage:
//! predicates and trip counts known only at run time (RLX `cond` / `while`), captured outer
//! values (nested too), scan axes and directions, and typed errors. Expected values are worked
//! out by hand from the ONNX operator spec (each test says how).

use rlx_ir::{Op, Tensor};
use rlx_onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorShapeProto, TypeProto, ValueInfoProto,
    attribute_proto::AttributeType, tensor_shape_proto::Dimension, tensor_shape_proto::dimension, type_proto,
};
use rlx_onnx::{ImportOptions, Imported, OnnxError, from_tensor, import};
use rlx_runtime::{Device, Session};
use std::collections::HashMap;

const F32: i32 = 1;
const I64: i32 = 7;
const BOOL: i32 = 9;

fn vi(name: &str, elem: i32, dims: &[i64]) -> ValueInfoProto {
    let dim =
        dims.iter().map(|&d| Dimension { value: Some(dimension::Value::DimValue(d)), ..Default::default() }).collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(elem),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// An output / body value whose type is left to inference.
fn untyped(name: &str) -> ValueInfoProto {
    ValueInfoProto { name: Some(name.into()), ..Default::default() }
}

fn node(op: &str, ins: &[&str], outs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: outs.iter().map(|s| s.to_string()).collect(),
        name: Some(format!("{op}_{}", outs.first().copied().unwrap_or(""))),
        attribute: attrs,
        ..Default::default()
    }
}

fn graph(name: &str, nodes: Vec<NodeProto>, ins: Vec<ValueInfoProto>, outs: &[&str]) -> GraphProto {
    GraphProto {
        name: Some(name.into()),
        node: nodes,
        input: ins,
        output: outs.iter().map(|o| untyped(o)).collect(),
        ..Default::default()
    }
}

fn g_attr(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        g: Some(g),
        r#type: Some(AttributeType::Graph as i32),
        ..Default::default()
    }
}

fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        ints: v.to_vec(),
        r#type: Some(AttributeType::Ints as i32),
        ..Default::default()
    }
}

fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        i: Some(v),
        r#type: Some(AttributeType::Int as i32),
        ..Default::default()
    }
}

fn model(mut g: GraphProto, inits: Vec<(&str, Tensor)>) -> ModelProto {
    g.initializer = inits.iter().map(|(n, t)| from_tensor(n, t)).collect();
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(g),
        ..Default::default()
    }
}

fn f32s(v: &[f32], d: &[usize]) -> Tensor {
    Tensor::from_vec(v.to_vec(), d).unwrap()
}

fn has(im: &Imported, pred: fn(&Op) -> bool) -> bool {
    im.graph.nodes().iter().any(|n| pred(&n.op))
}

/// Runs the imported graph through the compiled CPU session and through the reference
/// interpreter, checks they agree, and returns the outputs as f64.
fn run(im: &Imported, feeds: &[(&str, Tensor)]) -> Vec<Vec<f64>> {
    let f: HashMap<String, Tensor> = feeds.iter().map(|(n, t)| (n.to_string(), t.clone())).collect();
    let want = rlx_ir::interp::evaluate(&im.graph, &f).unwrap();
    let mut compiled = Session::try_new(Device::Cpu).unwrap().try_compile(im.graph.clone()).unwrap();
    let got = compiled.run_tensors(feeds).unwrap();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!((g.shape(), g.to_f64_vec()), (w.shape(), w.to_f64_vec()));
    }
    got.iter().map(Tensor::to_f64_vec).collect()
}

/// `y = If(c) then x + 1 else x * x`, with `c` and `x` fed at run time.
fn if_model() -> ModelProto {
    let then_g = graph("then", vec![node("Add", &["x", "one"], &["t"], vec![])], vec![], &["t"]);
    let else_g = graph("else", vec![node("Mul", &["x", "x"], &["e"], vec![])], vec![], &["e"]);
    let g = graph(
        "if",
        vec![node("If", &["c"], &["y"], vec![g_attr("then_branch", then_g), g_attr("else_branch", else_g)])],
        vec![vi("c", BOOL, &[]), vi("x", F32, &[3])],
        &["y"],
    );
    model(g, vec![("one", f32s(&[1.0], &[]))])
}

#[test]
fn if_with_a_run_time_predicate_is_a_cond_capturing_outer_values() {
    let im = import(&if_model(), &ImportOptions::default()).unwrap();
    assert!(has(&im, |op| matches!(op, Op::Cond(_))));
    let x = f32s(&[1.0, 2.0, 3.0], &[3]);
    let t = Tensor::from_vec(vec![true], &[]).unwrap();
    let f = Tensor::from_vec(vec![false], &[]).unwrap();
    assert_eq!(run(&im, &[("c", t), ("x", x.clone())]), vec![vec![2.0, 3.0, 4.0]]);
    assert_eq!(run(&im, &[("c", f), ("x", x)]), vec![vec![1.0, 4.0, 9.0]]);
}

#[test]
fn if_with_a_constant_predicate_is_inlined() {
    let mut m = if_model();
    let g = m.graph.as_mut().unwrap();
    g.input.remove(0);
    g.initializer.push(from_tensor("c", &Tensor::from_vec(vec![false], &[]).unwrap()));
    let im = import(&m, &ImportOptions::default()).unwrap();
    assert!(!has(&im, |op| matches!(op, Op::Cond(_))));
    assert_eq!(run(&im, &[("x", f32s(&[1.0, 2.0, 3.0], &[3]))]), vec![vec![1.0, 4.0, 9.0]]);
}

#[test]
fn if_branches_of_different_types_need_a_known_predicate() {
    let mut m = if_model();
    let g = m.graph.as_mut().unwrap();
    // else branch now returns a [1, 3] value.
    let else_g = graph("else", vec![node("Unsqueeze", &["x", "zero"], &["e"], vec![])], vec![], &["e"]);
    g.node[0].attribute[1] = g_attr("else_branch", else_g);
    g.initializer.push(from_tensor("zero", &Tensor::from_vec(vec![0i64], &[1]).unwrap()));
    let e = import(&m, &ImportOptions::default()).unwrap_err();
    assert!(matches!(e, OnnxError::Node { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("If") && msg.contains("If_y") && msg.contains("then_branch"), "{msg}");
    // Known at import time, the predicate picks one branch.
    let c = Tensor::from_vec(vec![false], &[]).unwrap();
    let opts = ImportOptions { input_values: HashMap::from([("c".into(), c.clone())]), ..Default::default() };
    let im = import(&m, &opts).unwrap();
    let x = f32s(&[1.0, 2.0, 3.0], &[3]);
    let f: HashMap<String, Tensor> = HashMap::from([("c".into(), c), ("x".into(), x)]);
    assert_eq!(rlx_ir::interp::evaluate(&im.graph, &f).unwrap()[0].shape(), &[1, 3]);
}

/// `Loop(M, true, v)` with body `v' = v * 2; cond' = v' < 100`: a while loop on
/// `cond && i < M`. From v = 3: 6, 12, 24, 48, 96, 192 (192 < 100 is false, so it stops
/// after the 6th iteration); with M = 3 it stops at 24.
#[test]
fn loop_with_a_run_time_trip_count_is_a_while() {
    let body = graph(
        "body",
        vec![node("Mul", &["v", "two"], &["v2"], vec![]), node("Less", &["v2", "hundred"], &["c2"], vec![])],
        vec![vi("i", I64, &[]), vi("c", BOOL, &[]), vi("v", F32, &[])],
        &["c2", "v2"],
    );
    let g = graph(
        "loop",
        vec![node("Loop", &["M", "go", "v0"], &["v"], vec![g_attr("body", body)])],
        vec![vi("M", I64, &[]), vi("v0", F32, &[])],
        &["v"],
    );
    let m = model(
        g,
        vec![
            ("two", f32s(&[2.0], &[])),
            ("hundred", f32s(&[100.0], &[])),
            ("go", Tensor::from_vec(vec![true], &[]).unwrap()),
        ],
    );
    let im = import(&m, &ImportOptions::default()).unwrap();
    assert!(has(&im, |op| matches!(op, Op::While(_))));
    let trip = |n: i64| Tensor::from_vec(vec![n], &[]).unwrap();
    assert_eq!(run(&im, &[("M", trip(10)), ("v0", f32s(&[3.0], &[]))]), vec![vec![192.0]]);
    assert_eq!(run(&im, &[("M", trip(3)), ("v0", f32s(&[3.0], &[]))]), vec![vec![24.0]]);
    assert_eq!(run(&im, &[("M", trip(0)), ("v0", f32s(&[3.0], &[]))]), vec![vec![3.0]]);
}

/// `Loop(4, "", v)` with body `v' = v + w; s = v' * i` (w a graph input the body captures):
/// a scan of length 4. v: [1,2] → [11,22], [21,42], [31,62], [41,82]; s = v' · i.
#[test]
fn loop_with_a_known_trip_count_is_a_scan_with_scan_outputs() {
    let body = graph(
        "body",
        vec![
            node("Add", &["v", "w"], &["v2"], vec![]),
            node("Cast", &["i"], &["fi"], vec![int_attr("to", F32 as i64)]),
            node("Mul", &["v2", "fi"], &["s"], vec![]),
            node("Identity", &["c"], &["c2"], vec![]),
        ],
        vec![vi("i", I64, &[]), vi("c", BOOL, &[]), vi("v", F32, &[2])],
        &["c2", "v2", "s"],
    );
    let g = graph(
        "loop",
        vec![node("Loop", &["M", "", "v0"], &["v", "s"], vec![g_attr("body", body)])],
        vec![vi("v0", F32, &[2]), vi("w", F32, &[2])],
        &["v", "s"],
    );
    let m = model(g, vec![("M", Tensor::from_vec(vec![4i64], &[]).unwrap())]);
    let im = import(&m, &ImportOptions::default()).unwrap();
    assert!(has(&im, |op| matches!(op, Op::Scan(_))));
    let out = run(&im, &[("v0", f32s(&[1.0, 2.0], &[2])), ("w", f32s(&[10.0, 20.0], &[2]))]);
    assert_eq!(out[0], vec![41.0, 82.0]);
    assert_eq!(out[1], vec![0.0, 0.0, 21.0, 42.0, 62.0, 124.0, 123.0, 246.0]);
}

/// A `Loop` whose body holds an `If` on an outer predicate, both reading outer `w`: the
/// captures thread through the scan body into the cond. v0 ± 3·w.
#[test]
fn nested_bodies_capture_through_each_level() {
    let m = nested_model();
    let im = import(&m, &ImportOptions::default()).unwrap();
    let feeds = |p: bool| {
        vec![
            ("p", Tensor::from_vec(vec![p], &[]).unwrap()),
            ("v0", f32s(&[1.0, 2.0], &[2])),
            ("w", f32s(&[10.0, 100.0], &[2])),
        ]
    };
    assert_eq!(run(&im, &feeds(true)), vec![vec![31.0, 302.0]]);
    assert_eq!(run(&im, &feeds(false)), vec![vec![-29.0, -298.0]]);
}

/// `Scan` over axis 1 of x = [[1,2,3],[4,5,6]], reversed (columns 2, 1, 0), running sum from
/// [0, 0]: steps [3,6], [5,11], [6,15]. Output 1 stacks steps on axis 1; output 2 on axis 0
/// in reverse (prepended) order.
#[test]
fn scan_axes_and_directions() {
    let body = graph(
        "body",
        vec![node("Add", &["s", "x"], &["s2"], vec![]), node("Identity", &["s2"], &["y2"], vec![])],
        vec![vi("s", F32, &[2]), vi("x", F32, &[2])],
        &["s2", "s2", "y2"],
    );
    let attrs = vec![
        g_attr("body", body),
        int_attr("num_scan_inputs", 1),
        ints_attr("scan_input_axes", &[1]),
        ints_attr("scan_input_directions", &[1]),
        ints_attr("scan_output_axes", &[1, 0]),
        ints_attr("scan_output_directions", &[0, 1]),
    ];
    let g = graph(
        "scan",
        vec![node("Scan", &["s0", "x"], &["s", "y1", "y2"], attrs)],
        vec![vi("s0", F32, &[2]), vi("x", F32, &[2, 3])],
        &["s", "y1", "y2"],
    );
    let im = import(&model(g, vec![]), &ImportOptions::default()).unwrap();
    let out = run(&im, &[("s0", f32s(&[0.0, 0.0], &[2])), ("x", f32s(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]))]);
    assert_eq!(out[0], vec![6.0, 15.0]);
    assert_eq!(out[1], vec![3.0, 5.0, 6.0, 6.0, 11.0, 15.0]);
    assert_eq!(out[2], vec![6.0, 15.0, 5.0, 11.0, 3.0, 6.0]);
}

#[test]
fn malformed_bodies_are_typed_errors_naming_the_node() {
    // Body with the wrong number of inputs.
    let body = graph("body", vec![], vec![vi("i", I64, &[])], &["i"]);
    let g = graph(
        "loop",
        vec![node("Loop", &["M", "", "v0"], &["v"], vec![g_attr("body", body)])],
        vec![vi("M", I64, &[]), vi("v0", F32, &[])],
        &["v"],
    );
    let e = import(&model(g, vec![]), &ImportOptions::default()).unwrap_err();
    assert!(matches!(e, OnnxError::Node { .. }) && e.to_string().contains("Loop_v"), "{e}");
    // An unsupported op inside a body names the op and the body node.
    let mut bad = node("NoSuchOp", &["x"], &["t"], vec![]);
    bad.name = None;
    let then_g = graph("then", vec![bad], vec![], &["t"]);
    let else_g = graph("else", vec![node("Neg", &["x"], &["e"], vec![])], vec![], &["e"]);
    let g = graph(
        "if",
        vec![node("If", &["c"], &["y"], vec![g_attr("then_branch", then_g), g_attr("else_branch", else_g)])],
        vec![vi("c", BOOL, &[]), vi("x", F32, &[3])],
        &["y"],
    );
    let e = import(&model(g, vec![]), &ImportOptions::default()).unwrap_err();
    assert!(matches!(e, OnnxError::UnsupportedOp { .. }), "{e}");
    assert!(e.to_string().contains("NoSuchOp") && e.to_string().contains("If_y/then_branch#0"), "{e}");
    // A Scan without its body attribute.
    let g = graph(
        "scan",
        vec![node("Scan", &["s0", "x"], &["s"], vec![int_attr("num_scan_inputs", 1)])],
        vec![vi("s0", F32, &[2]), vi("x", F32, &[2, 3])],
        &["s"],
    );
    let e = import(&model(g, vec![]), &ImportOptions::default()).unwrap_err();
    assert!(e.to_string().contains("body") && e.to_string().contains("Scan_s"), "{e}");
}

/// A model with a `Loop` (scan form) whose body holds an `If` on the outer `p`, both reading
/// the outer `w`; 3 iterations. For the capture test and the mutation test.
fn nested_model() -> ModelProto {
    let then_g = graph("then", vec![node("Add", &["v", "w"], &["t"], vec![])], vec![], &["t"]);
    let else_g = graph("else", vec![node("Sub", &["v", "w"], &["e"], vec![])], vec![], &["e"]);
    let body = graph(
        "body",
        vec![node("If", &["p"], &["v2"], vec![g_attr("then_branch", then_g), g_attr("else_branch", else_g)])],
        vec![vi("i", I64, &[]), vi("c", BOOL, &[]), vi("v", F32, &[2])],
        &["c", "v2"],
    );
    let g = graph(
        "loop",
        vec![node("Loop", &["M", "", "v0"], &["v"], vec![g_attr("body", body)])],
        vec![vi("p", BOOL, &[]), vi("v0", F32, &[2]), vi("w", F32, &[2])],
        &["v"],
    );
    model(g, vec![("M", Tensor::from_vec(vec![3i64], &[]).unwrap())])
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]
    /// Mutated and truncated bytes of models with sub-graphs never panic the parser or the
    /// importer (every failure is a typed error).
    #[test]
    fn mutated_control_flow_models_never_panic(
        which in 0usize..3,
        flips in proptest::collection::vec((proptest::prelude::any::<usize>(), proptest::prelude::any::<u8>()), 1..8),
        cut in proptest::prelude::any::<usize>(),
    ) {
        use prost::Message;
        let m = match which {
            0 => if_model(),
            1 => nested_model(),
            _ => {
                let body = graph(
                    "body",
                    vec![node("Add", &["s", "x"], &["s2"], vec![])],
                    vec![vi("s", F32, &[2]), vi("x", F32, &[2])],
                    &["s2", "s2"],
                );
                let g = graph(
                    "scan",
                    vec![node("Scan", &["s0", "x"], &["s", "y"], vec![g_attr("body", body), int_attr("num_scan_inputs", 1)])],
                    vec![vi("s0", F32, &[2]), vi("x", F32, &[3, 2])],
                    &["s", "y"],
                );
                model(g, vec![])
            }
        };
        let mut bytes = m.encode_to_vec();
        for (i, b) in flips {
            let n = bytes.len();
            bytes[i % n] ^= b;
        }
        let n = bytes.len();
        bytes.truncate(cut % (n + 1));
        if let Ok(m) = rlx_onnx::parse(&bytes) {
            let _ = import(&m, &ImportOptions::default());
        }
    }
}
