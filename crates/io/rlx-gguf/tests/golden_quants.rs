//! Dequantization of every ggml type is bit-exact against the `gguf` Python package, and our
//! quantizers are byte-identical with `gguf.quants.quantize` where it exists.
//!
//! Fixtures: `tests/fixtures/quants/`, made by `tools/refgen/gen_gguf.py` (see its docstring).

use std::path::PathBuf;

use rlx_gguf::GgmlType;
use rlx_gguf::quants::{can_quantize, dequantize, quantize};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/quants")
}

fn read(name: &str) -> Vec<u8> {
    std::fs::read(dir().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn f32s(bytes: &[u8]) -> Vec<f32> {
    bytes.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

struct Set {
    ty: GgmlType,
    set: String,
    blocks: usize,
}

fn manifest() -> Vec<Set> {
    let m: serde_json::Value = serde_json::from_slice(&read("manifest.json")).unwrap();
    m["sets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let name = s["type"].as_str().unwrap();
            let ty = GgmlType::from_name(name).unwrap_or_else(|| panic!("unknown type {name}"));
            assert_eq!(u64::from(ty.id()), s["id"].as_u64().unwrap(), "{name} id");
            assert_eq!(ty.block_size() as u64, s["block_size"].as_u64().unwrap(), "{name} block size");
            assert_eq!(ty.type_size() as u64, s["type_size"].as_u64().unwrap(), "{name} type size");
            Set { ty, set: s["set"].as_str().unwrap().to_string(), blocks: s["blocks"].as_u64().unwrap() as usize }
        })
        .collect()
}

fn assert_bits_eq(ty: GgmlType, what: &str, got: &[f32], want: &[f32]) {
    assert_eq!(got.len(), want.len(), "{ty} {what}: length");
    let bad: Vec<usize> = (0..got.len()).filter(|&i| got[i].to_bits() != want[i].to_bits()).collect();
    assert!(
        bad.is_empty(),
        "{ty} {what}: {} of {} values differ, first at {}: got {} ({:#010x}), want {} ({:#010x})",
        bad.len(),
        got.len(),
        bad[0],
        got[bad[0]],
        got[bad[0]].to_bits(),
        want[bad[0]],
        want[bad[0]].to_bits()
    );
}

#[test]
fn every_type_has_fixtures() {
    let sets = manifest();
    for &ty in GgmlType::ALL {
        assert!(sets.iter().any(|s| s.ty == ty && s.set == "rand"), "{ty}: no random-block fixture");
    }
}

#[test]
fn dequantization_is_bit_exact_for_every_type() {
    for s in manifest() {
        let name = s.ty.name();
        let blocks = read(&format!("{name}.{}.bin", s.set));
        assert_eq!(blocks.len(), s.blocks * s.ty.type_size(), "{name}.{}", s.set);
        let want = f32s(&read(&format!("{name}.{}.expected.f32", s.set)));
        let got = dequantize(s.ty, &blocks).unwrap();
        assert_bits_eq(s.ty, &format!("dequantize {}", s.set), &got, &want);
    }
}

#[test]
fn quantization_is_byte_identical_with_gguf_py() {
    let mut checked = Vec::new();
    for s in manifest().into_iter().filter(|s| s.set == "ref") {
        let name = s.ty.name();
        assert!(can_quantize(s.ty), "{name}: the reference can quantize it but we cannot");
        let x = f32s(&read(&format!("{name}.ref.input.f32")));
        let want = read(&format!("{name}.ref.bin"));
        let got = quantize(s.ty, &x).unwrap();
        if got != want {
            let ts = s.ty.type_size();
            let blk = (0..want.len()).find(|&i| got[i] != want[i]).unwrap() / ts;
            panic!(
                "{name}: block {blk} differs\n got  {:02x?}\n want {:02x?}\n input {:?}",
                &got[blk * ts..(blk + 1) * ts],
                &want[blk * ts..(blk + 1) * ts],
                &x[blk * s.ty.block_size()..(blk + 1) * s.ty.block_size()]
            );
        }
        checked.push(s.ty);
    }
    for ty in [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0] {
        assert!(checked.contains(&ty), "{ty}: no reference quantization fixture");
    }
}

#[test]
fn kquant_quantizer_output_dequantizes_consistently() {
    // Our k-quant blocks, dequantized, then requantized, give the same bytes (the quantizer
    // reproduces a grid it produced), and all values stay finite.
    let x: Vec<f32> = (0..1024).map(|i| ((i * 37 % 101) as f32 - 50.0) / 40.0).collect();
    for ty in [GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_K] {
        let q = quantize(ty, &x).unwrap();
        let y = dequantize(ty, &q).unwrap();
        assert!(y.iter().all(|v| v.is_finite()), "{ty}");
        let max_err = x.iter().zip(&y).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
        let bound = match ty {
            GgmlType::Q2_K => 0.5,
            GgmlType::Q3_K => 0.25,
            GgmlType::Q4_K => 0.12,
            GgmlType::Q5_K => 0.06,
            GgmlType::Q6_K => 0.03,
            _ => 0.01,
        };
        assert!(max_err < bound, "{ty}: max error {max_err} >= {bound}");
    }
}
