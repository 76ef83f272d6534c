//! `rlx convert` run as a process: a small safetensors file converted to every quant type,
//! read back with `rlx-gguf`, dequantized and compared with the source (byte-identical with
//! `rlx_gguf::quants::quantize`, and within the scheme's error bound); bad inputs exit 1 with
//! one stderr line.

use std::path::Path;

use rlx_gguf::quants::quantize;
use rlx_gguf::{GgmlType, GgufFile, MetadataValue};
use rlx_ir::{DType, Tensor};
use serde_json::Value;

mod common;
use common::{one_error_line, rlx};

/// Deterministic values in `[-1, 1)`.
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// A checkpoint with a 2-D weight (rows of 512), a 1-D norm, an F16 2-D weight, a weight
/// whose rows (96) fit the 32-blocks but no k-quant block, one whose rows (48) fit no block,
/// and an I64 buffer.
fn write_source(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("model.safetensors");
    let w = Tensor::from_vec(values(8 * 512, 1), &[8, 512]).unwrap();
    let norm = Tensor::from_vec(values(512, 2), &[512]).unwrap();
    let wh = Tensor::from_vec(values(4 * 256, 3), &[4, 256]).unwrap().cast(DType::F16);
    let odd = Tensor::from_vec(values(3 * 48, 4), &[3, 48]).unwrap();
    let mid = Tensor::from_vec(values(2 * 96, 5), &[2, 96]).unwrap();
    let ids = Tensor::from_vec((0..10i64).collect::<Vec<_>>(), &[1, 10]).unwrap();
    let t =
        [("blk.0.w", &w), ("blk.0.norm", &norm), ("blk.0.wh", &wh), ("odd", &odd), ("mid", &mid), ("pos_ids", &ids)];
    rlx_safetensors::save(&path, t, None).unwrap();
    path
}

/// `general.file_type` per `--quant` value: llama.cpp's `LLAMA_FTYPE_*` from `include/llama.h`.
const LLAMA_FTYPES: &[(&str, u32)] = &[
    ("F32", 0),
    ("F16", 1),
    ("Q4_0", 2),
    ("Q4_1", 3),
    ("Q8_0", 7),
    ("Q5_0", 8),
    ("Q5_1", 9),
    ("Q2_K", 10),
    ("Q3_K", 12),
    ("Q4_K", 15),
    ("Q5_K", 17),
    ("Q6_K", 18),
];

/// Max |error| / max |x| allowed per scheme: one quantization step (b-bit symmetric schemes:
/// `amax / 2^(b-1)`; schemes with a min: `range / (2^b - 1)`, range <= 2 amax) plus a margin
/// for the quantized scales.
fn bound(ty: GgmlType) -> f32 {
    match ty {
        GgmlType::F32 => 0.0,
        GgmlType::F16 => 1e-3,
        GgmlType::Q8_0 => 0.01,
        GgmlType::Q6_K => 0.035,
        GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q5_K => 0.07,
        GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q4_K => 0.14,
        GgmlType::Q3_K => 0.3,
        _ => 0.6,
    }
}

#[test]
fn converts_every_quant_type() {
    let dir = tempfile::tempdir().unwrap();
    let src_path = write_source(dir.path());
    let src = rlx_safetensors::SafetensorsFile::open(&src_path).unwrap();
    for q in ["F32", "F16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K", "Q3_K", "Q4_K", "Q5_K", "q6_k"] {
        let qt = GgmlType::from_name(&q.to_ascii_uppercase()).unwrap();
        // llama.cpp's `tensor_type_fallback` for rows of 96 (a multiple of 32, not of 256).
        let mid = match qt {
            GgmlType::Q2_K | GgmlType::Q3_K => GgmlType::Q4_0,
            GgmlType::Q4_K => GgmlType::Q5_0,
            GgmlType::Q5_K => GgmlType::Q5_1,
            GgmlType::Q6_K => GgmlType::Q8_0,
            t => t,
        };
        let out = dir.path().join(format!("{q}.gguf"));
        let o = rlx(&["convert", src_path.to_str().unwrap(), out.to_str().unwrap(), "--quant", q, "--json"]);
        assert!(o.status.success(), "{q}: {}", String::from_utf8_lossy(&o.stderr));
        let stdout = String::from_utf8(o.stdout).unwrap();
        let report: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        assert_eq!(report["quant"], qt.name());
        // "odd" falls back for every block type, "mid" for the k-quants.
        let want_fallbacks = usize::from(qt.block_size() > 1) + usize::from(mid != qt);
        assert_eq!(report["fallbacks"], want_fallbacks, "{q}");
        let g = GgufFile::open(&out).unwrap();
        // llama.cpp's `llama_ftype` (include/llama.h); k-quants as its loader guesses a file
        // mostly of that type (Q3_K_M, Q4_K_M, Q5_K_M).
        let ftype = LLAMA_FTYPES.iter().find(|(name, _)| *name == qt.name()).unwrap().1;
        assert_eq!(g.get("general.file_type"), Some(&MetadataValue::U32(ftype)), "{q}");
        for (name, want_ty) in [
            ("blk.0.w", qt),
            ("blk.0.norm", GgmlType::F32),
            ("blk.0.wh", qt),
            ("odd", if 48 % qt.block_size() == 0 { qt } else { GgmlType::F16 }),
            ("mid", mid),
        ] {
            let info = g.tensor_info(name).unwrap();
            assert_eq!(info.ty, want_ty, "{q} {name}");
            let x = src.to_f32(name).unwrap();
            assert_eq!(info.shape(), src.info(name).unwrap().shape.iter().map(|&d| d as u64).collect::<Vec<_>>());
            assert_eq!(g.tensor_data(name).unwrap(), &quantize(want_ty, &x).unwrap()[..], "{q} {name}: bytes");
            let back = g.dequantize(name).unwrap();
            let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
            let err = x.iter().zip(&back).fold(0f32, |a, (p, r)| a.max((p - r).abs()));
            assert!(err <= bound(want_ty) * amax, "{q} {name}: max error {err} (amax {amax})");
        }
        let ids = g.tensor_info("pos_ids").unwrap();
        assert_eq!(ids.ty, GgmlType::I64);
        assert_eq!(g.tensor_data("pos_ids").unwrap(), src.tensor_bytes("pos_ids").unwrap());
    }
    // The converted file has no general.architecture: inspect says so rather than "null".
    let o = rlx(&["inspect", dir.path().join("Q8_0.gguf").to_str().unwrap()]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("architecture (none)") && !text.contains("null"), "{text}");
    // ... and generate says the file holds no model, not only which key is missing.
    let o = rlx(&["generate", "--model", dir.path().join("Q8_0.gguf").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(e.contains("\"general.architecture\"") && e.contains("holds tensors without a model"), "{e}");
    // Converting a file onto itself is refused (it replaced the input).
    let same = dir.path().join("same.gguf");
    std::fs::copy(&src_path, &same).unwrap();
    let refused = |out: &Path| {
        let o = rlx(&["convert", same.to_str().unwrap(), out.to_str().unwrap(), "--quant", "Q8_0"]);
        assert_eq!(o.status.code(), Some(1), "{}", out.display());
        assert!(String::from_utf8_lossy(&o.stderr).contains("is the input file; give another name"));
        assert_eq!(std::fs::read(&same).unwrap(), std::fs::read(&src_path).unwrap(), "the input is untouched");
    };
    refused(&same);
    // A hard link to the input is the input too (it was overwritten through the link).
    #[cfg(unix)]
    {
        let link = dir.path().join("link.gguf");
        std::fs::hard_link(&same, &link).unwrap();
        refused(&link);
    }
}

#[test]
fn bad_inputs_exit_1_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let src = write_source(dir.path());
    let out = dir.path().join("o.gguf");
    let (src, out) = (src.to_str().unwrap(), out.to_str().unwrap());
    let missing = dir.path().join("missing.safetensors");
    let not_st = dir.path().join("junk.safetensors");
    std::fs::write(&not_st, b"not a safetensors file").unwrap();
    let gguf = dir.path().join("model.gguf");
    std::fs::write(&gguf, b"GGUF\x03\x00\x00\x00").unwrap();
    // A file of no known format: an unknown format, not the safetensors reader's "declared
    // header length 8031924123371070824 exceeds the limit".
    let junk = dir.path().join("foo.bin");
    std::fs::write(&junk, b"hello world\n").unwrap();
    let junk = junk.to_str().unwrap();
    let d = dir.path().to_str().unwrap();
    let (missing, not_st, gguf) = (missing.to_str().unwrap(), not_st.to_str().unwrap(), gguf.to_str().unwrap());
    let gguf_dir = dir.path().join("dir.gguf");
    std::fs::create_dir(&gguf_dir).unwrap();
    let gguf_dir = gguf_dir.to_string_lossy().into_owned();
    for (args, subject, needle) in [
        (vec!["convert", missing, out, "--quant", "Q4_K"], missing, "No such file or directory"),
        (vec!["convert", not_st, out, "--quant", "Q8_0", "--json"], not_st, "header"),
        (vec!["convert", gguf, out, "--quant", "Q8_0"], gguf, "is a GGUF file, but rlx convert reads a safetensors"),
        (vec!["convert", d, out, "--quant", "Q8_0"], d, "is a directory"),
        (
            vec!["convert", junk, out, "--quant", "Q8_0"],
            junk,
            "unknown model format (expected a .safetensors checkpoint",
        ),
        // The output is checked before any tensor is quantized (a large model takes minutes).
        (
            vec!["convert", src, "/nonexistent-dir/o.gguf", "--quant", "Q8_0"],
            src,
            "OUT /nonexistent-dir/o.gguf: the directory /nonexistent-dir does not exist",
        ),
        (vec!["convert", src, &gguf_dir, "--quant", "Q8_0"], src, "is a directory; give a file name"),
    ] {
        let err = one_error_line(&rlx(&args), subject);
        assert!(err.contains(needle) && !err.contains("I/O error on"), "{args:?}: {err}");
    }
}

/// OUT must be named `.gguf` (any case), as `rlx run --output` must be `.npz`: another name is a
/// usage error (status 2) before any file is read (`out.txt` got a GGUF file; only a few model
/// names such as `.safetensors` were refused, with status 1).
#[test]
fn an_out_not_named_gguf_is_a_usage_error_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let src = write_source(dir.path());
    let src = src.to_str().unwrap();
    for name in ["out.txt", "out", "out.safetensors", "out.gguf.bak"] {
        let out = dir.path().join(name);
        let o = rlx(&["convert", src, &out.to_string_lossy(), "--quant", "Q4_K"]);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{name}: {e}");
        assert!(e.contains("for '<OUT.gguf>': rlx convert writes a GGUF file; name it .gguf"), "{name}: {e}");
        assert!(o.stdout.is_empty() && !e.contains("panicked") && !out.exists(), "{name}");
    }
    // Checked before the input: a missing input with a bad OUT is still the usage error.
    let o = rlx(&["convert", "/nonexistent.safetensors", "o.txt", "--quant", "Q8_0"]);
    assert_eq!(o.status.code(), Some(2));
    let out = dir.path().join("OUT.GGUF");
    let o = rlx(&["convert", src, &out.to_string_lossy(), "--quant", "Q8_0"]);
    assert!(o.status.success() && out.exists(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn the_human_report_aligns_the_dtype_column_for_long_names() {
    // all-MiniLM-L6-v2's `encoder.layer.0.attention.output.LayerNorm.weight` (49 characters)
    // overflowed a fixed 48-wide name column and shifted its row.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("model.safetensors");
    let long = Tensor::from_vec(values(4, 5), &[4]).unwrap();
    let short = Tensor::from_vec(values(4, 6), &[4]).unwrap();
    let long_name = "encoder.layer.0.attention.output.LayerNorm.weight.extra";
    rlx_safetensors::save(&src, [(long_name, &long), ("b", &short)], None).unwrap();
    let out = dir.path().join("out.gguf");
    let o = rlx(&["convert", &src.to_string_lossy(), &out.to_string_lossy(), "--quant", "Q8_0"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    let cols: Vec<usize> = text.lines().filter(|l| l.contains(" -> F32")).map(|l| l.find("F32").unwrap()).collect();
    assert_eq!(cols.len(), 2, "{text}");
    assert_eq!(cols[0], cols[1], "dtype columns differ:\n{text}");
    assert!(text.contains(&format!("  {long_name}   F32 -> F32")), "{text}");
    // 32 bytes of tensors make a larger GGUF (header, alignment): not "0.06x smaller".
    assert!(text.trim_end().ends_with("x larger)") && !text.contains("x smaller"), "{text}");
}

/// The input's format is read from its content: a safetensors checkpoint renamed `in.gguf`
/// converts (it was refused as "a GGUF file"), and a text file named `notes.gguf` is of no
/// known format; a file with the GGUF magic is still named a GGUF file.
#[test]
fn a_safetensors_input_named_gguf_is_a_safetensors_input() {
    let dir = tempfile::tempdir().unwrap();
    let renamed = dir.path().join("in.gguf");
    std::fs::rename(write_source(dir.path()), &renamed).unwrap();
    let out = dir.path().join("out.gguf");
    let o = rlx(&["convert", &renamed.to_string_lossy(), &out.to_string_lossy(), "--quant", "Q8_0"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(GgufFile::open(&out).unwrap().tensors().len(), 6);
    let text = dir.path().join("notes.gguf");
    std::fs::write(&text, b"hello world\n").unwrap();
    let text = text.to_string_lossy().into_owned();
    let e = one_error_line(&rlx(&["convert", &text, &out.to_string_lossy(), "--quant", "Q8_0"]), &text);
    assert!(
        e.contains("unknown model format (expected a .safetensors checkpoint") && e.contains("no GGUF magic"),
        "{e}"
    );
    assert!(!e.contains("is a GGUF file"), "{e}");
}

/// An unknown `--quant` scheme is a bad flag value: a usage error (status 2) from clap that lists
/// the accepted schemes, before any file is read (it was status 1, after reading the input).
#[test]
fn an_unknown_quant_type_is_a_usage_error_listing_the_schemes() {
    let dir = tempfile::tempdir().unwrap();
    let src = write_source(dir.path());
    let out = dir.path().join("o.gguf");
    for (input, quant) in
        [(src.to_str().unwrap(), "Q9_0"), (src.to_str().unwrap(), "IQ2_XXS"), ("/nonexistent.safetensors", "Q9_9")]
    {
        let o = rlx(&["convert", input, &out.to_string_lossy(), "--quant", quant]);
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{quant}: {e}");
        let want = format!(
            "invalid value '{quant}' for '--quant <TYPE>': unknown quant type (one of F32, F16, Q4_0, Q4_1, Q5_0, \
             Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)"
        );
        assert!(e.contains(&want), "{quant}: {e}");
        assert!(o.stdout.is_empty() && !out.exists(), "{quant}");
    }
    // Any case is accepted.
    let o = rlx(&["convert", src.to_str().unwrap(), &out.to_string_lossy(), "--quant", "q8_0"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}
