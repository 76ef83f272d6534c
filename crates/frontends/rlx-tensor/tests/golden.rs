//! Tensor methods against NumPy goldens (`tools/refgen/gen_tensor.py` writes
//! `tests/fixtures/tensor_ops.json`).

use rlx_tensor::Tensor;
use serde_json::Value;

fn tensor(v: &Value) -> (Vec<f32>, Vec<usize>) {
    let data = v["data"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
    let shape = v["shape"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
    (data, shape)
}

/// The Tensor expression of each case, on the case's inputs.
fn build(name: &str, x: &[Tensor]) -> Tensor {
    match name {
        "add_broadcast" => &x[0] + &x[1],
        "scalar_arith" => (&x[0] * 2.0 - 1.0) / 4.0,
        "matmul_batched" => x[0].matmul(&x[1]),
        "mean_keepdims" => x[0].mean(&[0, 2], true),
        "permute" => x[0].permute(&[2, 0, 1]),
        "var_axis1" => x[0].var(&[1], false),
        "max_axis0" => x[0].max(&[0], false),
        "argmax_axis1" => x[0].argmax(1),
        "softmax_last" => x[0].softmax(-1),
        "layer_norm" => x[0].layer_norm(Some(&x[1]), Some(&x[2]), 1e-5),
        "gelu" => x[0].gelu(),
        "concat_axis1" => Tensor::concat(&[&x[0], &x[1]], 1),
        "slice" => x[0].slice(&[1, 0], &[3, 4]),
        "eye3" => Tensor::eye(3),
        "arange5" => Tensor::arange(5),
        "randn_seed7" => Tensor::randn([5], 7),
        other => panic!("no Tensor expression for fixture case {other}"),
    }
}

#[test]
fn tensor_ops_match_numpy() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/tensor_ops.json");
    let text = std::fs::read_to_string(path).unwrap();
    let doc: Value = serde_json::from_str(&text).unwrap();
    let cases = doc["cases"].as_object().unwrap();
    assert!(cases.len() >= 16);
    for (name, c) in cases {
        let ins: Vec<Tensor> = c["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                let (d, s) = tensor(v);
                Tensor::from_vec(d, s)
            })
            .collect();
        let (want, shape) = tensor(&c["expect"]);
        let y = build(name, &ins);
        let dims: Vec<usize> = y.dims().iter().map(|d| d.as_static().unwrap()).collect();
        assert_eq!(dims, shape, "{name}: shape");
        let got = y.try_to_vec().unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got.len(), want.len(), "{name}: length");
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            // f32 computation against a float64 reference of the same f32 inputs.
            assert!((g - w).abs() <= 1e-6 + 1e-5 * w.abs(), "{name}[{i}]: got {g}, numpy {w}");
        }
    }
}
