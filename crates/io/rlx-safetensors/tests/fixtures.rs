//! Fixtures written by the Python `safetensors` package (tools/refgen/gen_safetensors.py): every
//! dtype read bit-exactly, conversions, zero-copy views, our writer's bytes, sharded checkpoints.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rlx_ir::{DType, Tensor};
use rlx_safetensors::{Dtype, SafetensorsError, SafetensorsFile, ShardedSafetensors, dtype_name, dtype_to_rlx};
use serde_json::Value;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel)
}

fn sidecar(rel: &str) -> Value {
    serde_json::from_slice(&std::fs::read(fixture(rel)).unwrap()).unwrap()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn f32_bits(b: &[u8]) -> Vec<u32> {
    b.chunks_exact(4).map(|c| u32::from_le_bytes(c.try_into().unwrap())).collect()
}

fn shape_of(v: &Value) -> Vec<usize> {
    v["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect()
}

/// Every tensor of `file` against its sidecar: dtype, shape, offsets, raw bytes, f32 bits.
fn check_against_sidecar(f: &SafetensorsFile<'_>, expect: &Value) -> usize {
    let tensors = expect["tensors"].as_object().unwrap();
    assert_eq!(f.tensors().len(), tensors.len());
    let meta: BTreeMap<String, String> = serde_json::from_value(expect["metadata"].clone()).unwrap();
    assert_eq!(f.metadata(), &meta);
    let mut checked = 0;
    for (name, e) in tensors {
        let info = f.info(name).unwrap();
        assert_eq!(dtype_name(info.dtype), e["dtype"].as_str().unwrap(), "{name}");
        assert_eq!(info.shape, shape_of(e), "{name}");
        let offs = e["data_offsets"].as_array().unwrap();
        assert_eq!(info.data_offsets, (offs[0].as_u64().unwrap() as usize, offs[1].as_u64().unwrap() as usize));
        let raw = unhex(e["hex"].as_str().unwrap());
        assert_eq!(f.tensor_bytes(name).unwrap(), raw.as_slice(), "{name}");
        assert_eq!(info.n_bytes(), raw.len());
        match e.get("f32_hex") {
            Some(h) => {
                let want = f32_bits(&unhex(h.as_str().unwrap()));
                let got: Vec<u32> = f.to_f32(name).unwrap().iter().map(|x| x.to_bits()).collect();
                assert_eq!(got, want, "{name}: to_f32 bits");
                let t = f.tensor(name).unwrap();
                assert_eq!(Some(t.dtype()), dtype_to_rlx(info.dtype), "{name}");
                assert_eq!(t.shape(), info.shape.as_slice());
                assert_eq!(t.to_le_bytes(), raw, "{name}: tensor keeps the bytes");
                let t32 = f.tensor_as(name, DType::F32).unwrap();
                let got: Vec<u32> = t32.as_slice::<f32>().unwrap().iter().map(|x| x.to_bits()).collect();
                assert_eq!(got, want, "{name}: tensor_as(F32) bits");
                checked += 1;
            }
            None => {
                assert_eq!(dtype_to_rlx(info.dtype), None, "{name}");
                assert!(matches!(f.tensor(name), Err(SafetensorsError::UnsupportedDtype { .. })), "{name}");
                assert!(matches!(f.to_f32(name), Err(SafetensorsError::UnsupportedDtype { .. })), "{name}");
            }
        }
    }
    checked
}

#[test]
fn all_dtypes_bit_exact_memory_mapped() {
    let f = SafetensorsFile::open(fixture("all_dtypes.safetensors")).unwrap();
    let expect = sidecar("all_dtypes.json");
    assert_eq!(f.tensors().len(), 24);
    let converted = check_against_sidecar(&f, &expect);
    // 15 before U16, U64 and the four FLOAT8 types had rlx twins (checked against ml_dtypes).
    assert_eq!(converted, 21, "tensors with an rlx dtype");
    // Every format dtype appears.
    let seen: std::collections::BTreeSet<String> = f.tensors().iter().map(|t| dtype_name(t.dtype)).collect();
    assert_eq!(seen.len(), 20, "{seen:?}");
    // File order is offset order.
    assert!(f.tensors().windows(2).all(|w| w[0].data_offsets.1 == w[1].data_offsets.0));
}

#[test]
fn all_dtypes_from_vec_and_slice() {
    let bytes = std::fs::read(fixture("all_dtypes.safetensors")).unwrap();
    let expect = sidecar("all_dtypes.json");
    check_against_sidecar(&SafetensorsFile::from_slice(&bytes).unwrap(), &expect);
    check_against_sidecar(&SafetensorsFile::from_vec(bytes.clone()).unwrap(), &expect);
}

#[test]
fn f32_view_is_borrowed_from_the_map() {
    let f = SafetensorsFile::open(fixture("all_dtypes.safetensors")).unwrap();
    let v = f.f32_view("f32.rand").unwrap();
    assert!(matches!(v, Cow::Borrowed(_)), "aligned F32 data must not be copied");
    let range = f.bytes().as_ptr_range();
    assert!(range.contains(&(v.as_ptr() as *const u8)), "the view points into the mapped file");
    assert_eq!(v.len(), 30);
    assert_eq!(&*v, f.to_f32("f32.rand").unwrap().as_slice());
    // Special values survive bit for bit.
    let s = f.f32_view("f32.special").unwrap();
    assert!(s[6].is_nan() && s[4] == f32::INFINITY && s[1].to_bits() == 0x8000_0000 && s[7].to_bits() == 1);
    assert_eq!(&*f.f32_view("f32.scalar").unwrap(), &[-2.75]);
    assert!(f.f32_view("f32.empty").unwrap().is_empty());
    assert_eq!(f.info("f32.scalar").unwrap().shape, Vec::<usize>::new());
    assert_eq!(f.tensor("f32.empty").unwrap().shape(), &[0, 3]);
    let e = f.f32_view("f16.rand").unwrap_err();
    assert!(matches!(e, SafetensorsError::WrongDtype { expected: Dtype::F32, found: Dtype::F16, .. }), "{e}");
    assert!(matches!(f.f32_view("nope"), Err(SafetensorsError::TensorNotFound(_))));
}

#[test]
fn f32_view_copies_when_misaligned() {
    // A hand-made file whose header length (5) leaves the data at offset 13: not 4-aligned.
    let t = Tensor::from_vec(vec![1.5f32, -2.0], &[2]).unwrap();
    let good = rlx_safetensors::serialize([("x", &t)], None).unwrap();
    let src = SafetensorsFile::from_slice(&good).unwrap();
    let hdr = &good[8..src.header().data_offset as usize];
    let json = String::from_utf8(hdr.to_vec()).unwrap();
    let json = json.trim_end();
    let mut b = Vec::new();
    b.extend((json.len() as u64 + 1).to_le_bytes());
    b.extend(json.as_bytes());
    b.push(b' ');
    b.extend(src.tensor_bytes("x").unwrap());
    // Keep the data misaligned in memory whatever the Vec's own alignment is.
    let mut buf = vec![0u8; b.len() + 4];
    let shift = (0..4).find(|s| !(buf.as_ptr() as usize + s + 8 + json.len() + 1).is_multiple_of(4)).unwrap();
    buf[shift..shift + b.len()].copy_from_slice(&b);
    let f = SafetensorsFile::from_slice(&buf[shift..shift + b.len()]).unwrap();
    let v = f.f32_view("x").unwrap();
    assert!(matches!(v, Cow::Owned(_)));
    assert_eq!(&*v, &[1.5, -2.0]);
}

#[test]
fn f16_bf16_convert_or_keep_their_dtype() {
    let f = SafetensorsFile::open(fixture("all_dtypes.safetensors")).unwrap();
    let h = f.tensor("f16.special").unwrap();
    assert_eq!(h.dtype(), DType::F16);
    assert_eq!(h.shape(), &[2, 5]);
    let b = f.tensor("bf16.vals").unwrap();
    assert_eq!(b.dtype(), DType::BF16);
    let x = f.to_f32("bf16.vals").unwrap();
    assert_eq!(x[2], 1.0);
    assert!(x[6].is_nan());
    assert_eq!(f.to_f32("f16.special").unwrap()[8], 65504.0);
    // Other conversions go through rlx_ir's cast.
    assert_eq!(f.tensor_as("i8.vals", DType::I32).unwrap().as_slice::<i32>().unwrap(), &[-128, -1, 0, 1, 127]);
    assert_eq!(f.tensor("bool.mask").unwrap().as_slice::<bool>().unwrap(), &[true, false, false, true, true]);
}

#[test]
fn writer_reproduces_the_python_file_byte_for_byte() {
    let reference = std::fs::read(fixture("rlx_dtypes.safetensors")).unwrap();
    let f = SafetensorsFile::from_slice(&reference).unwrap();
    let tensors: BTreeMap<String, Tensor> = f.names().map(|n| (n.to_string(), f.tensor(n).unwrap())).collect();
    let ours = rlx_safetensors::serialize(tensors.iter().map(|(k, v)| (k.as_str(), v)), Some(f.metadata())).unwrap();
    assert_eq!(ours, reference);
    // And through a file.
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("out.safetensors");
    rlx_safetensors::save(&p, tensors.iter().map(|(k, v)| (k.as_str(), v)), Some(f.metadata())).unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), reference);
    check_against_sidecar(&SafetensorsFile::open(&p).unwrap(), &sidecar("rlx_dtypes.json"));
}

#[test]
fn writer_round_trips_every_rlx_dtype() {
    let mut m = BTreeMap::new();
    for (i, d) in DType::ALL.iter().enumerate() {
        let vals: Vec<f64> = (0..6).map(|k| (k as f64 - 2.0) * (i as f64 + 1.0) * 0.75).collect();
        let t = Tensor::from_f64s(&[2, 3], *d, &vals).unwrap();
        if rlx_safetensors::rlx_to_dtype(*d).is_none() {
            // FLOAT4 and the 4/2-bit integers have no safetensors dtype: a typed error.
            let one = [("t", &t)];
            let err = rlx_safetensors::serialize(one.iter().map(|&(k, v)| (k, v)), None).unwrap_err();
            assert!(err.to_string().contains("has no"), "{d}: {err}");
            continue;
        }
        m.insert(format!("t.{d}"), t);
    }
    m.insert("scalar".into(), Tensor::scalar(7i64));
    m.insert("empty".into(), Tensor::zeros(&[3, 0], DType::BF16));
    let meta: BTreeMap<String, String> = [("k".to_string(), "v".to_string())].into();
    let bytes = rlx_safetensors::serialize(m.iter().map(|(k, v)| (k.as_str(), v)), Some(&meta)).unwrap();
    let f = SafetensorsFile::from_vec(bytes).unwrap();
    assert_eq!(f.metadata(), &meta);
    for (k, v) in &m {
        assert_eq!(&f.tensor(k).unwrap(), v, "{k}");
    }
    // The crate's own reader agrees.
    let st = safetensors::SafeTensors::deserialize(f.bytes()).unwrap();
    assert_eq!(st.len(), m.len());
}

#[test]
fn writer_rejects_bad_names() {
    let t = Tensor::scalar(1.0f32);
    let e = rlx_safetensors::serialize([("a", &t), ("a", &t)], None).unwrap_err();
    assert!(e.to_string().contains("duplicate tensor name \"a\""), "{e}");
    let e = rlx_safetensors::serialize([("__metadata__", &t)], None).unwrap_err();
    assert!(matches!(e, SafetensorsError::Write(_)), "{e}");
    let e = rlx_safetensors::save("/nonexistent-dir/x.safetensors", [("a", &t)], None).unwrap_err();
    assert!(matches!(e, SafetensorsError::Io { .. }), "{e}");
}

#[test]
fn agrees_with_the_safetensors_crate_reader() {
    let bytes = std::fs::read(fixture("all_dtypes.safetensors")).unwrap();
    let ours = SafetensorsFile::from_slice(&bytes).unwrap();
    let theirs = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    assert_eq!(theirs.len(), ours.tensors().len());
    for (name, view) in theirs.iter() {
        let info = ours.info(name).unwrap();
        assert_eq!(view.dtype(), info.dtype);
        assert_eq!(view.shape(), info.shape.as_slice());
        assert_eq!(view.data(), ours.tensor_bytes(name).unwrap());
    }
}

#[test]
fn sharded_checkpoint_opens_shards_lazily() {
    let s = ShardedSafetensors::open(fixture("sharded/model.safetensors.index.json")).unwrap();
    assert_eq!(s.len(), 4);
    assert_eq!(s.opened_shards(), 0, "opening the index maps no shard");
    assert_eq!(s.index_metadata()["total_size"], 8 * 4 * 4 + 4 * 4 * 2 + 4 * 4 * 2 + 4 * 4);
    assert_eq!(
        s.shard_files().collect::<Vec<_>>(),
        ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    );
    assert_eq!(s.shard_of("model.norm.weight"), Some("model-00002-of-00002.safetensors"));
    assert_eq!(&*s.f32_view("model.norm.weight").unwrap(), &[0.5, 1.0, 1.5, 2.0]);
    assert_eq!(s.opened_shards(), 1);
    for (shard, json) in [
        ("model-00001-of-00002", "sharded/model-00001-of-00002.json"),
        ("model-00002-of-00002", "sharded/model-00002-of-00002.json"),
    ] {
        let e = sidecar(json);
        for (name, t) in e["tensors"].as_object().unwrap() {
            assert_eq!(s.shard_of(name).unwrap(), format!("{shard}.safetensors"));
            let want = f32_bits(&unhex(t["f32_hex"].as_str().unwrap()));
            let got: Vec<u32> = s.to_f32(name).unwrap().iter().map(|x| x.to_bits()).collect();
            assert_eq!(got, want, "{name}");
            assert_eq!(s.tensor_bytes(name).unwrap(), unhex(t["hex"].as_str().unwrap()).as_slice());
            assert_eq!(s.info(name).unwrap().shape, shape_of(t));
        }
    }
    assert_eq!(s.opened_shards(), 2);
    assert_eq!(s.tensor("model.layers.1.w").unwrap().dtype(), DType::BF16);
    assert_eq!(s.tensor_as("model.layers.0.w", DType::F32).unwrap().dtype(), DType::F32);
    s.open_all().unwrap();
    assert!(matches!(s.tensor("missing"), Err(SafetensorsError::TensorNotFound(_))));
}

#[test]
fn sharded_errors_are_typed() {
    let dir = tempfile::tempdir().unwrap();
    let idx = dir.path().join("model.safetensors.index.json");
    // Path escaping the directory.
    std::fs::write(&idx, r#"{"weight_map": {"a": "../evil.safetensors"}}"#).unwrap();
    let e = ShardedSafetensors::open(&idx).unwrap_err();
    assert!(matches!(e, SafetensorsError::BadIndex { .. }) && e.to_string().contains("evil"), "{e}");
    std::fs::write(&idx, r#"{"weight_map": {"a": "/abs.safetensors"}}"#).unwrap();
    assert!(matches!(ShardedSafetensors::open(&idx), Err(SafetensorsError::BadIndex { .. })));
    // Bad JSON, missing weight_map.
    std::fs::write(&idx, "{not json").unwrap();
    assert!(matches!(ShardedSafetensors::open(&idx), Err(SafetensorsError::BadIndex { .. })));
    std::fs::write(&idx, r#"{"metadata": {}}"#).unwrap();
    let e = ShardedSafetensors::open(&idx).unwrap_err();
    assert!(e.to_string().contains("weight_map"), "{e}");
    // Missing shard: an I/O error on first access, not at open.
    std::fs::write(&idx, r#"{"weight_map": {"a": "gone.safetensors"}}"#).unwrap();
    let s = ShardedSafetensors::open(&idx).unwrap();
    assert!(matches!(s.tensor("a"), Err(SafetensorsError::Io { .. })));
    // A shard that lacks the tensor the index promises.
    let t = Tensor::scalar(1.0f32);
    rlx_safetensors::save(dir.path().join("s.safetensors"), [("b", &t)], None).unwrap();
    std::fs::write(&idx, r#"{"weight_map": {"a": "s.safetensors", "b": "s.safetensors"}}"#).unwrap();
    let s = ShardedSafetensors::open(&idx).unwrap();
    assert_eq!(s.to_f32("b").unwrap(), vec![1.0]);
    assert!(matches!(s.tensor("a"), Err(SafetensorsError::NotInShard { .. })));
    assert!(s.open_all().is_err());
    // Missing index file.
    assert!(matches!(ShardedSafetensors::open(dir.path().join("none.json")), Err(SafetensorsError::Io { .. })));
}

/// `save` writes through a temporary file (mode 0600) renamed over the path: the result has a
/// new file's mode (as `File::create` gives, umask applied), or the replaced file's mode
/// (`rlx train --out` wrote 0600 files; fresh-user pass).
#[cfg(unix)]
#[test]
fn saved_files_get_a_new_files_mode_or_keep_the_replaced_ones() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let t = Tensor::scalar(2.0f32);
    let probe = dir.path().join("probe");
    std::fs::File::create(&probe).unwrap();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let p = dir.path().join("new.safetensors");
    rlx_safetensors::save(&p, [("a", &t)], None).unwrap();
    assert_eq!(mode(&p), mode(&probe));
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
    rlx_safetensors::save(&p, [("a", &t)], None).unwrap();
    assert_eq!(mode(&p), 0o640);
    assert_eq!(SafetensorsFile::open(&p).unwrap().names().count(), 1);
    // A failed write leaves no empty file behind.
    let bad = dir.path().join("bad.safetensors");
    assert!(rlx_safetensors::save(&bad, [("__metadata__", &t)], None).is_err());
    assert!(!bad.exists());
}
