//! Import tests on small hand-built models: table ops, constant folding of shape chains,
//! typed errors for unsupported ops and malformed bytes (never a panic).

use proptest::prelude::*;
use prost::Message;
use rlx_ir::Tensor;
use rlx_onnx::proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorShapeProto, TypeProto, ValueInfoProto,
    attribute_proto::AttributeType, tensor_shape_proto::Dimension, tensor_shape_proto::dimension, type_proto,
};
use rlx_onnx::{ImportOptions, OnnxError, from_tensor, import, parse};
use std::collections::HashMap;

fn vi(name: &str, dims: &[Option<i64>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                Some(v) => dimension::Value::DimValue(*v),
                None => dimension::Value::DimParam("batch".into()),
            }),
            ..Default::default()
        })
        .collect();
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(1),
                shape: Some(TensorShapeProto { dim }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn node(op: &str, ins: &[&str], outs: &[&str]) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        input: ins.iter().map(|s| s.to_string()).collect(),
        output: outs.iter().map(|s| s.to_string()).collect(),
        name: Some(format!("{op}_0")),
        ..Default::default()
    }
}

fn model(nodes: Vec<NodeProto>, inits: Vec<(&str, Tensor)>, ins: Vec<ValueInfoProto>, outs: &[&str]) -> ModelProto {
    ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto { domain: Some(String::new()), version: Some(17) }],
        graph: Some(GraphProto {
            node: nodes,
            initializer: inits.iter().map(|(n, t)| from_tensor(n, t)).collect(),
            input: ins,
            output: outs.iter().map(|o| vi(o, &[])).collect(),
            name: Some("g".into()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn run(m: &ModelProto, feeds: &[(&str, Tensor)]) -> Vec<Tensor> {
    let bytes = m.encode_to_vec();
    let m = parse(&bytes).unwrap();
    let im = import(&m, &ImportOptions::default()).unwrap();
    let f: HashMap<String, Tensor> = feeds.iter().map(|(n, t)| (n.to_string(), t.clone())).collect();
    rlx_ir::interp::evaluate(&im.graph, &f).unwrap()
}

#[test]
fn gemm_relu_with_initializers() {
    let w = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], &[3, 2]).unwrap();
    let b = Tensor::from_vec(vec![0.5f32, -100.0], &[2]).unwrap();
    let mut gemm = node("Gemm", &["x", "w", "b"], &["h"]);
    gemm.attribute.push(AttributeProto {
        name: Some("alpha".into()),
        f: Some(2.0),
        r#type: Some(AttributeType::Float as i32),
        ..Default::default()
    });
    let m = model(
        vec![gemm, node("Relu", &["h"], &["y"])],
        vec![("w", w), ("b", b)],
        vec![vi("x", &[Some(1), Some(3)])],
        &["y"],
    );
    let y = run(&m, &[("x", Tensor::from_vec(vec![1.0f32, 1.0, 1.0], &[1, 3]).unwrap())]);
    // 2 * [9, 12] + [0.5, -100] = [18.5, -76] -> relu
    assert_eq!(y[0].to_f64_vec(), vec![18.5, 0.0]);
}

#[test]
fn shape_chain_folds_into_a_constant_reshape_target() {
    // y = Reshape(x, Concat(Shape(x)[0:1], [-1])) with a symbolic batch dim would need the
    // runtime shape; with static dims the whole shape chain folds.
    let mut sl = node("Slice", &["s", "st", "en"], &["s0"]);
    sl.name = Some("slice".into());
    let m = model(
        vec![
            node("Shape", &["x"], &["s"]),
            sl,
            node("Concat", &["s0", "m1"], &["t"]),
            node("Reshape", &["x", "t"], &["y"]),
        ],
        vec![
            ("st", Tensor::from_vec(vec![0i64], &[1]).unwrap()),
            ("en", Tensor::from_vec(vec![1i64], &[1]).unwrap()),
            ("m1", Tensor::from_vec(vec![-1i64], &[1]).unwrap()),
        ],
        vec![vi("x", &[Some(2), Some(3), Some(4)])],
        &["y"],
    );
    let mut m = m;
    m.graph.as_mut().unwrap().node[2].attribute.push(AttributeProto {
        name: Some("axis".into()),
        i: Some(0),
        r#type: Some(AttributeType::Int as i32),
        ..Default::default()
    });
    let x = Tensor::from_vec((0..24).map(|v| v as f32).collect(), &[2, 3, 4]).unwrap();
    let y = run(&m, &[("x", x)]);
    assert_eq!(y[0].shape(), &[2, 12]);
}

#[test]
fn symbolic_batch_dim_becomes_dim_sym() {
    let m = model(vec![node("Tanh", &["x"], &["y"])], vec![], vec![vi("x", &[None, Some(4)])], &["y"]);
    let im = import(&m, &ImportOptions::default()).unwrap();
    let x = im.graph.inputs()[0];
    assert_eq!(im.graph.shape(x).dims[0], rlx_ir::Dim::Sym("batch".into()));
    let y = run(&m, &[("x", Tensor::from_vec(vec![0.0f32; 8], &[2, 4]).unwrap())]);
    assert_eq!(y[0].shape(), &[2, 4]);
}

#[test]
fn unsupported_op_names_op_and_node() {
    let m = model(vec![node("NoSuchOp", &["x"], &["y"])], vec![], vec![vi("x", &[Some(1)])], &["y"]);
    let e = import(&m, &ImportOptions::default()).unwrap_err();
    assert!(matches!(e, OnnxError::UnsupportedOp { .. }), "{e}");
    let msg = e.to_string();
    assert!(msg.contains("NoSuchOp") && msg.contains("NoSuchOp_0"), "{msg}");
    let r = rlx_onnx::report(&m);
    assert_eq!((r.supported_nodes(), r.unsupported_nodes()), (0, 1));
}

#[test]
fn fed_dims_contradicting_static_declared_dims_are_an_error() {
    let m = model(vec![node("Relu", &["x"], &["y"])], vec![], vec![vi("x", &[None, Some(3)])], &["y"]);
    let feed = |dims: &[usize]| {
        let n = dims.iter().product();
        let t = Tensor::from_vec(vec![0.0f32; n], dims).unwrap();
        import(&m, &ImportOptions { input_values: HashMap::from([("x".to_string(), t)]), ..Default::default() })
    };
    assert!(feed(&[5, 3]).is_ok(), "a symbolic dim takes any size");
    for bad in [&[2usize, 4][..], &[3][..], &[1, 3, 1][..]] {
        let e = feed(bad).unwrap_err();
        assert!(matches!(e, OnnxError::InputShape { .. }), "{bad:?}: {e}");
        let msg = e.to_string();
        assert!(msg.contains("\"x\"") && msg.contains("batch, 3") && msg.contains(&format!("{bad:?}")), "{msg}");
    }
    let shapes = HashMap::from([("x".to_string(), vec![2, 4])]);
    assert!(matches!(
        import(&m, &ImportOptions { input_shapes: shapes, ..Default::default() }),
        Err(OnnxError::InputShape { .. })
    ));
}

#[test]
fn truncated_model_is_a_decode_error() {
    let m = model(vec![node("Tanh", &["x"], &["y"])], vec![], vec![vi("x", &[Some(1)])], &["y"]);
    let bytes = m.encode_to_vec();
    let mut errors = 0;
    for n in 0..bytes.len() {
        if parse(&bytes[..n]).is_err() {
            errors += 1;
        }
    }
    assert!(errors > 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// Arbitrary mutations of a valid model never panic the parser or the importer.
    #[test]
    fn mutated_bytes_never_panic(flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..8), cut in any::<usize>()) {
        let w = Tensor::from_vec(vec![1.0f32; 4], &[2, 2]).unwrap();
        let m = model(vec![node("MatMul", &["x", "w"], &["y"])], vec![("w", w)], vec![vi("x", &[Some(2), Some(2)])], &["y"]);
        let mut bytes = m.encode_to_vec();
        for (i, b) in flips {
            let n = bytes.len();
            bytes[i % n] ^= b;
        }
        let n = bytes.len();
        bytes.truncate(cut % (n + 1));
        if let Ok(m) = parse(&bytes) {
            let _ = import(&m, &ImportOptions::default());
        }
    }
}

/// `LayerNormalization` whose `Mean` / `InvStdDev` outputs are not requested imports as the
/// `layer_norm` composite (one native kernel); with them it stays primitives. Both give the
/// ONNX formula `(x - mean) / sqrt(var + eps) · scale + bias` (biased variance, over the last
/// axis), checked here against the same formula in f64.
#[test]
fn layer_normalization_only_y_is_the_composite() {
    let (rows, d) = (3usize, 5usize);
    let x: Vec<f32> = (0..rows * d).map(|i| ((i * 7 % 11) as f32 - 5.0) * 0.3).collect();
    let scale: Vec<f32> = (0..d).map(|i| 0.5 + i as f32 * 0.25).collect();
    let bias: Vec<f32> = (0..d).map(|i| i as f32 * 0.1 - 0.2).collect();
    let eps = 1e-5f64;
    let (sc, bi) = (&scale, &bias);
    let want: Vec<f64> = x
        .chunks(d)
        .flat_map(|r| {
            let m = r.iter().map(|&v| v as f64).sum::<f64>() / d as f64;
            let var = r.iter().map(|&v| (v as f64 - m).powi(2)).sum::<f64>() / d as f64;
            r.iter().enumerate().map(move |(j, &v)| (v as f64 - m) / (var + eps).sqrt() * sc[j] as f64 + bi[j] as f64)
        })
        .collect();
    for outs in [&["y"][..], &["y", "mean", "inv"][..]] {
        let m = model(
            vec![node("LayerNormalization", &["x", "s", "b"], outs)],
            vec![
                ("s", Tensor::from_vec(scale.clone(), &[d]).unwrap()),
                ("b", Tensor::from_vec(bias.clone(), &[d]).unwrap()),
            ],
            vec![vi("x", &[Some(rows as i64), Some(d as i64)])],
            &["y"],
        );
        let im = import(&m, &ImportOptions::default()).unwrap();
        let composite =
            im.graph.nodes().iter().any(|n| matches!(&n.op, rlx_ir::Op::Composite(c) if c.name == "layer_norm"));
        assert_eq!(composite, outs.len() == 1, "outputs {outs:?}");
        let y = run(&m, &[("x", Tensor::from_vec(x.clone(), &[rows, d]).unwrap())]);
        for (g, w) in y[0].to_f64_vec().iter().zip(&want) {
            assert!((g - w).abs() < 1e-5, "outputs {outs:?}: {g} vs {w}");
        }
    }
}

/// `vi` with an int64 element type.
fn vi_i64(name: &str, dims: &[i64]) -> ValueInfoProto {
    let mut v = vi(name, &dims.iter().map(|&d| Some(d)).collect::<Vec<_>>());
    if let Some(type_proto::Value::TensorType(t)) = v.r#type.as_mut().and_then(|t| t.value.as_mut()) {
        t.elem_type = Some(7);
    }
    v
}

#[test]
fn gather_family_out_of_range_index_is_an_error_not_a_clamp() {
    // ONNX (and ONNX Runtime) reject an index outside [-n, n); the IR's default gather clamps
    // like XLA, so the importer asks for `GatherMode::CheckedWrap`: negative indices wrap once,
    // and the error names the index as given (not after the wrap) with the range [-n, n).
    let x = Tensor::from_vec((0..12).map(|v| v as f32).collect::<Vec<_>>(), &[4, 3]).unwrap();
    let ids = |v: &[i64], d: &[usize]| Tensor::from_vec(v.to_vec(), d).unwrap();
    let gather = model(
        vec![node("Gather", &["x", "i"], &["y"])],
        vec![],
        vec![vi("x", &[Some(4), Some(3)]), vi_i64("i", &[2])],
        &["y"],
    );
    let elems = model(
        vec![node("GatherElements", &["x", "i"], &["y"])],
        vec![],
        vec![vi("x", &[Some(4), Some(3)]), vi_i64("i", &[1, 3])],
        &["y"],
    );
    let nd = model(
        vec![node("GatherND", &["x", "i"], &["y"])],
        vec![],
        vec![vi("x", &[Some(4), Some(3)]), vi_i64("i", &[2, 2])],
        &["y"],
    );
    // In range, negative ones included: rows 3 and 0 (-4 wraps to 0).
    let y = run(&gather, &[("x", x.clone()), ("i", ids(&[-1, -4], &[2]))]);
    assert_eq!(y[0].as_slice::<f32>().unwrap(), &[9.0, 10.0, 11.0, 0.0, 1.0, 2.0]);
    let cases = [
        (&gather, ids(&[0, 4], &[2]), "index 4 is out of range [-4, 4)"),
        (&gather, ids(&[99999, 0], &[2]), "index 99999 is out of range [-4, 4)"),
        // -5 would wrap once to -1, still out of range: the message names -5 (it said -1).
        (&gather, ids(&[1, -5], &[2]), "index -5 is out of range [-4, 4)"),
        (&gather, ids(&[-99999, 0], &[2]), "index -99999 is out of range [-4, 4)"),
        (&elems, ids(&[0, 1, 4], &[1, 3]), "index 4 is out of range [-4, 4)"),
        (&elems, ids(&[0, -5, 1], &[1, 3]), "index -5 is out of range [-4, 4)"),
        (&nd, ids(&[1, 2, 0, 3], &[2, 2]), "index 3 is out of range [-3, 3)"),
        (&nd, ids(&[1, 2, -5, 0], &[2, 2]), "index -5 is out of range [-4, 4)"),
    ];
    for (m, i, want) in cases {
        let m = parse(&m.encode_to_vec()).unwrap();
        let im = import(&m, &ImportOptions::default()).unwrap();
        let feeds: HashMap<String, Tensor> = [("x".to_string(), x.clone()), ("i".to_string(), i.clone())].into();
        let e = rlx_ir::interp::evaluate(&im.graph, &feeds).expect_err(want).to_string();
        assert!(e.contains(want) && e.contains("gather"), "reference: {e}");
        // The CPU runtime (the block-copy kernel for Gather, the reference for the others).
        let mut c = rlx_runtime::Session::new(rlx_runtime::Device::Cpu).try_compile(im.graph).unwrap();
        let e = c.run_tensors(&[("x", x.clone()), ("i", i)]).expect_err(want).to_string();
        assert!(e.contains(want) && e.contains("gather"), "cpu: {e}");
    }
}

/// An `Expand` whose target's element count overflows (2^32 · 2^32 wraps to 0 in a plain
/// product; 2^62 · 4 f32 elements) is an error naming the node, with the operand fed or constant;
/// it used to try a 32 GiB allocation (abort) or panic in a kernel.
#[test]
fn expand_whose_element_count_overflows_is_an_error() {
    let x = Tensor::from_vec(vec![1.0f32], &[1]).unwrap();
    for dims in [vec![1i64 << 32, 1 << 32], vec![1 << 62, 4], vec![1 << 33, 1 << 31]] {
        let s = Tensor::from_vec(dims.clone(), &[2]).unwrap();
        let fed =
            model(vec![node("Expand", &["x", "s"], &["y"])], vec![("s", s.clone())], vec![vi("x", &[Some(1)])], &["y"]);
        let konst = model(vec![node("Expand", &["x", "s"], &["y"])], vec![("s", s), ("x", x.clone())], vec![], &["y"]);
        for m in [fed, konst] {
            let e = import(&m, &ImportOptions::default()).unwrap_err().to_string();
            assert!(e.contains("Expand") && e.contains("isize::MAX bytes"), "{dims:?}: {e}");
        }
    }
}
