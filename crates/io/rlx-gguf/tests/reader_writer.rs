//! Reader on the `gguf` package's GGUFWriter output, a hand-packed v1 file, writer -> reader
//! round trips (v1/v2/v3, every value type), and byte identity with GGUFWriter.

use std::path::PathBuf;

use rlx_gguf::{GgmlType, GgufError, GgufFile, GgufWriter, MetadataArray, MetadataValue, quants};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn json() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(fixture("python_writer.json")).unwrap()).unwrap()
}

fn floats(v: &serde_json::Value) -> Vec<f32> {
    v.as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect()
}

#[test]
fn reads_python_gguf_writer_file() {
    let f = GgufFile::open(fixture("python_writer.gguf")).unwrap();
    let j = json();
    assert_eq!(f.version(), 3);
    assert_eq!(f.content().alignment, 64);
    let keys: Vec<&str> = f.metadata().iter().map(|(k, _)| k.as_str()).collect();
    let want_keys: Vec<&str> = j["metadata_keys"].as_array().unwrap().iter().map(|k| k.as_str().unwrap()).collect();
    assert_eq!(keys, want_keys);
    let g = |k: &str| f.get(k).unwrap().clone();
    assert_eq!(g("general.architecture"), MetadataValue::String("rlxtest".into()));
    assert_eq!(g("general.alignment"), MetadataValue::U32(64));
    assert_eq!(g("t.u8"), MetadataValue::U8(200));
    assert_eq!(g("t.i8"), MetadataValue::I8(-100));
    assert_eq!(g("t.u16"), MetadataValue::U16(60000));
    assert_eq!(g("t.i16"), MetadataValue::I16(-30000));
    assert_eq!(g("t.u32"), MetadataValue::U32(4_000_000_000));
    assert_eq!(g("t.i32"), MetadataValue::I32(-2_000_000_000));
    assert_eq!(g("t.f32"), MetadataValue::F32(1.5));
    assert_eq!(g("t.u64"), MetadataValue::U64(18_000_000_000_000_000_000));
    assert_eq!(g("t.i64"), MetadataValue::I64(-9_000_000_000_000_000_000));
    assert_eq!(g("t.f64"), MetadataValue::F64(0.1));
    assert_eq!(g("t.bool"), MetadataValue::Bool(true));
    assert_eq!(g("t.str"), MetadataValue::String("héllo, GGUF ✓".into()));
    assert_eq!(g("t.arr_i32"), MetadataValue::from(vec![1i32, -2, 3]));
    assert_eq!(g("t.arr_f32"), MetadataValue::from(vec![0.5f32, -0.25]));
    assert_eq!(g("t.arr_str"), MetadataValue::from(vec!["a", "", "ccc"]));
    assert_eq!(g("t.arr_bool"), MetadataValue::from(vec![true, false, true]));
    assert_eq!(g("t.arr_u16"), MetadataValue::from(vec![1u16, 65535]));
    assert_eq!(
        g("t.nested"),
        MetadataValue::Array(MetadataArray::Array(vec![
            MetadataArray::I32(vec![1, 2]),
            MetadataArray::I32(vec![3, 4, 5])
        ]))
    );
    assert_eq!(f.content().architecture(), Some("rlxtest"));

    let tensors = j["tensors"].as_object().unwrap();
    assert_eq!(f.tensors().len(), tensors.len());
    for (name, t) in tensors {
        let info = f.tensor_info(name).unwrap();
        assert_eq!(info.ty.name(), t["type"].as_str().unwrap(), "{name}");
        let shape: Vec<u64> = t["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap()).collect();
        assert_eq!(info.shape(), shape, "{name}");
        assert_eq!(info.offset % 64, 0, "{name}");
        assert_eq!(f.dequantize(name).unwrap(), floats(&t["values"]), "{name}");
        let tensor = f.tensor(name).unwrap();
        let us: Vec<usize> = shape.iter().map(|&d| d as usize).collect();
        assert_eq!(tensor.shape(), &us[..]);
        assert_eq!(tensor.to_f32_vec(), floats(&t["values"]), "{name}");
    }
    assert_eq!(f.tensor("t.i32").unwrap().dtype(), rlx_ir::DType::I32);
    assert_eq!(f.tensor("t.f16").unwrap().dtype(), rlx_ir::DType::F16);
    assert_eq!(f.tensor("t.q8_0").unwrap().dtype(), rlx_ir::DType::F32);
    // zero-copy: the tensor slice points into the mapped file
    let data = f.tensor_data("t.f32").unwrap();
    let base = f.bytes().as_ptr() as usize;
    assert_eq!(
        data.as_ptr() as usize - base,
        (f.content().data_offset + f.tensor_info("t.f32").unwrap().offset) as usize
    );
    assert!(matches!(f.tensor_data("nope"), Err(rlx_gguf::GgufError::TensorNotFound(_))));
}

/// The same content through our writer gives the very bytes GGUFWriter wrote.
#[test]
fn writer_is_byte_identical_with_gguf_py() {
    let j = json();
    let t = &j["tensors"];
    let mut w = GgufWriter::new();
    w.add_metadata("general.architecture", "rlxtest").unwrap();
    w.set_alignment(64).unwrap();
    w.add_metadata("t.u8", 200u8).unwrap();
    w.add_metadata("t.i8", -100i8).unwrap();
    w.add_metadata("t.u16", 60000u16).unwrap();
    w.add_metadata("t.i16", -30000i16).unwrap();
    w.add_metadata("t.u32", 4_000_000_000u32).unwrap();
    w.add_metadata("t.i32", -2_000_000_000i32).unwrap();
    w.add_metadata("t.f32", 1.5f32).unwrap();
    w.add_metadata("t.u64", 18_000_000_000_000_000_000u64).unwrap();
    w.add_metadata("t.i64", -9_000_000_000_000_000_000i64).unwrap();
    w.add_metadata("t.f64", 0.1f64).unwrap();
    w.add_metadata("t.bool", true).unwrap();
    w.add_metadata("t.str", "héllo, GGUF ✓").unwrap();
    w.add_metadata("t.arr_i32", vec![1i32, -2, 3]).unwrap();
    w.add_metadata("t.arr_f32", vec![0.5f32, -0.25]).unwrap();
    w.add_metadata("t.arr_str", vec!["a", "", "ccc"]).unwrap();
    w.add_metadata("t.arr_bool", vec![true, false, true]).unwrap();
    w.add_metadata("t.arr_u16", vec![1u16, 65535]).unwrap();
    let nested = MetadataArray::Array(vec![MetadataArray::I32(vec![1, 2]), MetadataArray::I32(vec![3, 4, 5])]);
    w.add_metadata("t.nested", nested).unwrap();
    w.add_f32_tensor("t.f32", &[3, 5], GgmlType::F32, &floats(&t["t.f32"]["values"])).unwrap();
    w.add_f32_tensor("t.f16", &[2, 8], GgmlType::F16, &floats(&t["t.f16"]["values"])).unwrap();
    // quantized by our Q8_0 quantizer from the same input the Python script quantized
    w.add_f32_tensor("t.q8_0", &[2, 64], GgmlType::Q8_0, &floats(&t["t.q8_0"]["input"])).unwrap();
    let i32s: Vec<u8> = floats(&t["t.i32"]["values"]).iter().flat_map(|&v| (v as i32).to_le_bytes()).collect();
    w.add_tensor("t.i32", &[2, 3], GgmlType::I32, i32s).unwrap();
    let ours = w.to_bytes().unwrap();
    let theirs = std::fs::read(fixture("python_writer.gguf")).unwrap();
    assert_eq!(ours.len(), theirs.len());
    let first_diff = ours.iter().zip(&theirs).position(|(a, b)| a != b);
    assert_eq!(first_diff, None, "first differing byte");
}

#[test]
fn reads_hand_packed_v1_file() {
    let bytes = std::fs::read(fixture("v1_handmade.gguf")).unwrap();
    let f = GgufFile::from_slice(&bytes).unwrap();
    assert_eq!(f.version(), 1);
    assert_eq!(f.content().architecture(), Some("llama"));
    assert_eq!(f.get("v1.arr"), Some(&MetadataValue::from(vec![7i32, -8, 9])));
    assert_eq!(f.get("v1.f32"), Some(&MetadataValue::F32(2.5)));
    let a = f.tensor_info("a").unwrap();
    assert_eq!((a.dims.clone(), a.shape(), a.ty), (vec![4, 2], vec![2, 4], GgmlType::F32));
    assert_eq!(f.dequantize("a").unwrap(), (0..8).map(|i| i as f32 - 3.0).collect::<Vec<_>>());
    let b = f.dequantize("b").unwrap();
    assert_eq!(b.len(), 32);
    assert!((b[0] + 1.0).abs() < 0.01 && (b[31] - 1.0).abs() < 0.01);
}

fn all_value_types() -> Vec<(String, MetadataValue)> {
    vec![
        ("general.architecture".into(), "test".into()),
        ("u8".into(), 1u8.into()),
        ("i8".into(), (-1i8).into()),
        ("u16".into(), 65535u16.into()),
        ("i16".into(), i16::MIN.into()),
        ("u32".into(), u32::MAX.into()),
        ("i32".into(), i32::MIN.into()),
        ("f32".into(), f32::MIN_POSITIVE.into()),
        ("bool".into(), false.into()),
        ("string".into(), "".into()),
        ("u64".into(), u64::MAX.into()),
        ("i64".into(), i64::MIN.into()),
        ("f64".into(), (-0.0f64).into()),
        ("a.u8".into(), vec![0u8, 255].into()),
        ("a.i8".into(), vec![-128i8].into()),
        ("a.u16".into(), vec![7u16].into()),
        ("a.i16".into(), vec![-7i16, 7].into()),
        ("a.u32".into(), vec![1u32, 2, 3].into()),
        ("a.i32".into(), Vec::<i32>::new().into()),
        ("a.f32".into(), vec![1.25f32].into()),
        ("a.bool".into(), vec![true].into()),
        ("a.str".into(), vec!["x", "ünï"].into()),
        ("a.u64".into(), vec![u64::MAX].into()),
        ("a.i64".into(), vec![i64::MIN].into()),
        ("a.f64".into(), vec![f64::MAX].into()),
        (
            "a.nested".into(),
            MetadataValue::Array(MetadataArray::Array(vec![
                MetadataArray::Array(vec![MetadataArray::String(vec!["deep".into()])]),
                MetadataArray::Array(vec![]),
                MetadataArray::U8(vec![]),
            ])),
        ),
    ]
}

#[test]
fn writer_reader_round_trip_every_version() {
    let x: Vec<f32> = (0..512).map(|i| ((i * 13 % 29) as f32 - 14.0) / 7.0).collect();
    for version in [1, 2, 3] {
        for alignment in [1u32, 32, 256] {
            let mut w = GgufWriter::new();
            w.set_version(version).unwrap();
            for (k, v) in all_value_types() {
                w.add_metadata(k, v).unwrap();
            }
            w.set_alignment(alignment).unwrap();
            w.add_f32_tensor("f32", &[2, 3], GgmlType::F32, &x[..6]).unwrap();
            w.add_f32_tensor("q4_k", &[2, 256], GgmlType::Q4_K, &x).unwrap();
            w.add_f32_tensor("q5_0", &[16, 32], GgmlType::Q5_0, &x).unwrap();
            w.add_tensor("empty", &[0, 32], GgmlType::Q8_0, vec![]).unwrap();
            w.add_tensor("scalar", &[], GgmlType::I64, (-5i64).to_le_bytes().to_vec()).unwrap();
            let bytes = w.to_bytes().unwrap();
            let f = GgufFile::from_vec(bytes.clone()).unwrap();
            assert_eq!(f.version(), version);
            assert_eq!(f.content().alignment, u64::from(alignment));
            let mut want = all_value_types();
            want.push(("general.alignment".into(), MetadataValue::U32(alignment)));
            assert_eq!(f.metadata(), &want[..], "v{version} align {alignment}");
            let names: Vec<&str> = f.tensors().iter().map(|t| t.name.as_str()).collect();
            assert_eq!(names, ["f32", "q4_k", "q5_0", "empty", "scalar"]);
            assert_eq!(f.dequantize("f32").unwrap(), &x[..6]);
            let q = quants::quantize(GgmlType::Q4_K, &x).unwrap();
            assert_eq!(f.tensor_data("q4_k").unwrap(), &q[..]);
            assert_eq!(f.tensor_info("q5_0").unwrap().dims, vec![32, 16]);
            assert_eq!(f.dequantize("empty").unwrap(), Vec::<f32>::new());
            assert_eq!(f.tensor_info("scalar").unwrap().n_elements, 1);
            assert_eq!(f.dequantize("scalar").unwrap(), vec![-5.0]);
            assert_eq!(f.tensor("scalar").unwrap().shape(), &[] as &[usize]);
            for t in f.tensors() {
                assert_eq!((f.content().data_offset + t.offset) % u64::from(alignment), 0);
            }
            // writing what we read gives the same bytes
            let mut w2 = GgufWriter::new();
            w2.set_version(version).unwrap();
            for (k, v) in f.metadata() {
                w2.add_metadata(k.clone(), v.clone()).unwrap();
            }
            for t in f.tensors() {
                w2.add_tensor(t.name.clone(), &t.shape(), t.ty, f.tensor_data(&t.name).unwrap().to_vec()).unwrap();
            }
            assert_eq!(w2.to_bytes().unwrap(), bytes);
        }
    }
}

#[test]
fn writer_rejects_bad_input() {
    let mut w = GgufWriter::new();
    w.add_metadata("k", 1u8).unwrap();
    assert!(w.add_metadata("k", 2u8).is_err());
    assert!(w.add_metadata("general.alignment", 3u32).is_err());
    assert!(w.add_metadata("general.alignment", 64u64).is_err());
    assert!(w.set_alignment(0).is_err());
    assert!(w.set_version(4).is_err());
    assert!(w.add_tensor("t", &[33], GgmlType::Q4_0, vec![0; 18]).is_err()); // not whole blocks
    assert!(w.add_tensor("t", &[32], GgmlType::Q4_0, vec![0; 17]).is_err()); // wrong byte count
    assert!(w.add_tensor("t", &[1, 1, 1, 1, 1], GgmlType::F32, vec![0; 4]).is_err()); // 5 dims
    assert!(w.add_tensor("t", &[u64::MAX, 2], GgmlType::F32, vec![]).is_err()); // overflow
    w.add_tensor("t", &[32], GgmlType::Q4_0, vec![0; 18]).unwrap();
    assert!(w.add_tensor("t", &[32], GgmlType::Q4_0, vec![0; 18]).is_err()); // duplicate
    assert!(w.add_f32_tensor("iq", &[256], GgmlType::IQ2_XXS, &[0.0; 256]).is_err()); // no quantizer
    let mut deep = MetadataArray::U8(vec![]);
    for _ in 0..rlx_gguf::MAX_ARRAY_DEPTH {
        deep = MetadataArray::Array(vec![deep]);
    }
    assert!(w.add_metadata("deep", deep).is_err());
}

/// `tests/fixtures/rust_writer.gguf` is what our writer produces for k-quant and other tensors
/// quantized by our quantizers, each with an F32 twin `<name>.dequant` holding our
/// dequantization. `python tools/refgen/gen_gguf.py --check-rust` reads it with GGUFReader and
/// checks the twins against `gguf.quants.dequantize` bit for bit. Regenerate the file with
/// `RLX_GGUF_REGEN=1 cargo test -p rlx-gguf --test reader_writer`.
#[test]
fn rust_writer_fixture_is_current() {
    // libm-free deterministic data (xorshift), so the committed bytes do not depend on the platform
    let mut s = 0x9e37_79b9u32;
    let x: Vec<f32> = (0..1024)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            ((s >> 8) as f32 / (1 << 24) as f32 - 0.5) * (1.0 + (i % 7) as f32 * 0.3)
        })
        .collect();
    let mut w = GgufWriter::new();
    w.add_metadata("general.architecture", "rlxwriter").unwrap();
    w.set_alignment(128).unwrap();
    w.add_metadata("w.u16", 65535u16).unwrap();
    w.add_metadata("w.i64", -5i64).unwrap();
    w.add_metadata("w.f64", 0.1f64).unwrap();
    w.add_metadata("w.bool", false).unwrap();
    w.add_metadata("w.str", "rust ✓").unwrap();
    w.add_metadata("w.arr_str", vec!["x", "yy"]).unwrap();
    w.add_metadata("w.arr_u64", vec![1u64, 1 << 63]).unwrap();
    for ty in [
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::TQ1_0,
        GgmlType::TQ2_0,
        GgmlType::MXFP4,
        GgmlType::BF16,
    ] {
        let name = format!("t.{}", ty.name().to_lowercase());
        let q = quants::quantize(ty, &x).unwrap();
        let y = quants::dequantize(ty, &q).unwrap();
        w.add_tensor(name.clone(), &[4, 256], ty, q).unwrap();
        w.add_f32_tensor(format!("{name}.dequant"), &[4, 256], GgmlType::F32, &y).unwrap();
    }
    let bytes = w.to_bytes().unwrap();
    let path = fixture("rust_writer.gguf");
    if std::env::var_os("RLX_GGUF_REGEN").is_some() {
        std::fs::write(&path, &bytes).unwrap();
    }
    let committed = std::fs::read(&path).expect("rust_writer.gguf missing: run with RLX_GGUF_REGEN=1");
    assert!(
        committed == bytes,
        "rust_writer.gguf is stale: rerun with RLX_GGUF_REGEN=1, then gen_gguf.py --check-rust"
    );
    let f = GgufFile::from_vec(committed).unwrap();
    assert_eq!(f.tensors().len(), 28);
}

/// Released tensor pages read back the same bytes (a loader copies a tensor out, releases
/// it, and may read it again); an unknown name is an error.
#[test]
fn released_tensor_data_reads_back_unchanged() {
    let f = GgufFile::open(fixture("python_writer.gguf")).unwrap();
    let names: Vec<String> = f.tensors().iter().map(|t| t.name.clone()).collect();
    assert!(!names.is_empty());
    for n in &names {
        let before = f.tensor_data(n).unwrap().to_vec();
        f.release_tensor_data(n).unwrap();
        assert_eq!(f.tensor_data(n).unwrap(), &before[..], "{n}");
    }
    assert!(matches!(f.release_tensor_data("no.such.tensor"), Err(GgufError::TensorNotFound { .. })));
}
