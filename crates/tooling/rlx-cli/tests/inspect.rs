//! `rlx inspect` run as a process on fixture files: human and JSON output, and every kind of
//! unreadable file (exit 1, one stderr line, never a panic).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

mod common;
use common::{one_error_line, rlx, stderr};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn gguf_fixture(name: &str) -> PathBuf {
    repo().join("crates/io/rlx-gguf/tests/fixtures").join(name)
}

fn st_fixture(name: &str) -> PathBuf {
    repo().join("crates/io/rlx-safetensors/tests/fixtures").join(name)
}

fn inspect(path: &Path, json: bool) -> Output {
    let mut a: Vec<&std::ffi::OsStr> = vec!["inspect".as_ref(), path.as_os_str()];
    if json {
        a.push("--json".as_ref());
    }
    rlx(&a)
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// The last stdout line, parsed; checks the keys every report has.
fn last_json(o: &Output) -> Value {
    assert!(o.status.success(), "status {:?}, stderr {}", o.status, stderr(o));
    let out = stdout(o);
    let v: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    for k in ["format", "metadata", "tensors", "tensor_count", "total_bytes"] {
        assert!(v.get(k).is_some(), "missing key {k}");
    }
    assert_eq!(v["tensor_count"].as_u64().unwrap() as usize, v["tensors"].as_array().unwrap().len());
    let sum: u64 = v["tensors"].as_array().unwrap().iter().map(|t| t["bytes"].as_u64().unwrap()).sum();
    assert_eq!(v["total_bytes"].as_u64().unwrap(), sum);
    v
}

/// A failure: nothing on stdout, one stderr line `rlx: error: <file>: ...` holding `needle`.
fn assert_clean_error(o: &Output, path: &Path, needle: &str) {
    let err = one_error_line(o, &path.display().to_string());
    assert!(o.stdout.is_empty(), "stdout: {}", stdout(o));
    assert!(err.contains(needle), "expected {needle:?} in {err}");
}

#[test]
fn gguf_human_and_json() {
    let p = gguf_fixture("python_writer.gguf");
    let o = inspect(&p, false);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for want in ["gguf (version 3, alignment 64", "general.architecture", "\"rlxtest\"", "t.q8_0", "Q8_0", "[2, 64]"] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    assert!(text.contains("array[array[i32]]"), "{text}");

    let v = last_json(&inspect(&p, true));
    assert_eq!(v["format"], "gguf");
    assert_eq!(v["version"], 3);
    assert_eq!(v["alignment"], 64);
    assert_eq!(v["metadata"]["t.u64"], 18000000000000000000u64);
    assert_eq!(v["metadata"]["t.str"], "héllo, GGUF ✓");
    assert_eq!(v["metadata"]["t.arr_str"]["len"], 3);
    assert_eq!(v["metadata"]["t.arr_str"]["values"][2], "ccc");
    let q = v["tensors"].as_array().unwrap().iter().find(|t| t["name"] == "t.q8_0").unwrap();
    assert_eq!(q["dtype"], "Q8_0");
    assert_eq!(q["shape"], serde_json::json!([2, 64]));
    assert_eq!(q["ggml_dims"], serde_json::json!([64, 2]));
    assert_eq!(q["bytes"], 136);
    assert_eq!(v["tensor_count"], 4);
}

#[test]
fn every_gguf_fixture_inspects() {
    for name in ["python_writer.gguf", "rust_writer.gguf", "v1_handmade.gguf"] {
        let v = last_json(&inspect(&gguf_fixture(name), true));
        assert_eq!(v["format"], "gguf", "{name}");
    }
    let v = last_json(&inspect(&gguf_fixture("v1_handmade.gguf"), true));
    assert_eq!(v["version"], 1);
}

#[test]
fn safetensors_human_and_json() {
    let p = st_fixture("all_dtypes.safetensors");
    let o = inspect(&p, false);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    for want in ["safetensors", "bf16.vals", "BF16", "F8_E4M3", "[2, 3, 5]", "rlx.fixture", "24 tensors"] {
        assert!(text.contains(want), "missing {want:?} in\n{text}");
    }
    let v = last_json(&inspect(&p, true));
    assert_eq!(v["format"], "safetensors");
    assert_eq!(v["tensor_count"], 24);
    let t = v["tensors"].as_array().unwrap().iter().find(|t| t["name"] == "f32.rand").unwrap();
    assert_eq!(t["dtype"], "F32");
    assert_eq!(t["shape"], serde_json::json!([2, 3, 5]));
    assert_eq!(t["bytes"], 120);
    assert_eq!(
        v["total_bytes"].as_u64().unwrap() + v["data_offset"].as_u64().unwrap(),
        v["file_size"].as_u64().unwrap()
    );
}

#[test]
fn sharded_index_inspects() {
    let v = last_json(&inspect(&st_fixture("sharded/model.safetensors.index.json"), true));
    assert_eq!(v["format"], "safetensors");
    assert_eq!(v["tensor_count"], 4);
    assert_eq!(v["metadata"]["total_size"], v["total_bytes"]);
    assert_eq!(v["shards"].as_array().unwrap().len(), 2);
    assert!(v["tensors"].as_array().unwrap().iter().all(|t| t["shard"].is_string()));
}

#[test]
fn json_is_a_global_flag() {
    let p = st_fixture("rlx_dtypes.safetensors");
    let o = rlx(&["--json".as_ref(), "inspect".as_ref(), p.as_os_str()]);
    assert_eq!(last_json(&o)["format"], "safetensors");
}

#[test]
fn unreadable_files_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    // Missing file.
    let missing = dir.path().join("missing.gguf");
    assert_clean_error(&inspect(&missing, false), &missing, "No such file");
    assert_clean_error(&inspect(&missing, true), &missing, "No such file");
    // A text file.
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "hello, this is not a model\n").unwrap();
    assert_clean_error(&inspect(&text, false), &text, "unknown model format (expected a .gguf, .safetensors, ");
    // An RLX graph's JSON is named as one, with the subcommands that read it.
    let g = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/clean.json"));
    assert_clean_error(
        &inspect(g, false),
        g,
        "is an RLX graph's JSON (rlx_ir::hir_to_json), but rlx inspect reads model files; rlx check and rlx compile read it",
    );
    // Empty file.
    let empty = dir.path().join("empty");
    std::fs::write(&empty, "").unwrap();
    assert_clean_error(&inspect(&empty, false), &empty, "the file is empty (0 bytes)");
    // A directory.
    assert_clean_error(&inspect(dir.path(), false), dir.path(), "is a directory");
    // A text file named .gguf / .safetensors.
    let fake = dir.path().join("fake.gguf");
    std::fs::write(&fake, "hello").unwrap();
    assert_clean_error(&inspect(&fake, true), &fake, "bad magic");
    let fake = dir.path().join("fake.safetensors");
    std::fs::write(&fake, "hello").unwrap();
    assert_clean_error(&inspect(&fake, true), &fake, "too short");
    // Truncated GGUF and safetensors files, cut at many points (the GGUF fixture's last tensor ends
    // at 1240; the padding after it may be cut, as in GGUFWriter's own files).
    let g = std::fs::read(gguf_fixture("python_writer.gguf")).unwrap();
    for cut in [4, 20, 100, 500, 895, 1000, 1239] {
        let p = dir.path().join(format!("cut{cut}.gguf"));
        std::fs::write(&p, &g[..cut]).unwrap();
        assert_clean_error(&inspect(&p, true), &p, "");
    }
    let s = std::fs::read(st_fixture("all_dtypes.safetensors")).unwrap();
    for cut in [3, 9, 500, s.len() - 1] {
        let p = dir.path().join(format!("cut{cut}.safetensors"));
        std::fs::write(&p, &s[..cut]).unwrap();
        assert_clean_error(&inspect(&p, false), &p, "");
    }
    let p = dir.path().join("truncated.safetensors");
    std::fs::write(&p, &s[..s.len() - 1]).unwrap();
    assert_clean_error(&inspect(&p, false), &p, "truncated");
    // Bad index.
    let idx = dir.path().join("model.safetensors.index.json");
    std::fs::write(&idx, r#"{"weight_map": {"a": "nope.safetensors"}}"#).unwrap();
    assert_clean_error(&inspect(&idx, false), &idx, "No such file");
}

#[test]
fn usage_errors_are_clap_errors() {
    let o = rlx(&["inspect"]);
    assert_eq!(o.status.code(), Some(2));
    let o = rlx(&["frobnicate"]);
    assert_eq!(o.status.code(), Some(2));
    let o = rlx(&["--help"]);
    assert!(o.status.success() && stdout(&o).contains("inspect"));
    let o = rlx(&["inspect", "--help"]);
    assert!(o.status.success() && stdout(&o).contains("Usage: rlx inspect"), "{}", stdout(&o));
}

/// Help that cannot be written is an error, as any other output (`rlx --help > /dev/full`
/// exited 0).
#[test]
fn help_to_an_unwritable_stdout_is_an_error() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("SKIP: no /dev/full");
        return;
    };
    for args in [&["--help"][..], &["run", "--help"], &["--version"]] {
        let o = Command::new(env!("CARGO_BIN_EXE_rlx")).args(args).stdout(full.try_clone().unwrap()).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.starts_with("rlx: error: writing output: "), "{args:?}: {e}");
    }
}

#[test]
fn a_closed_stdout_is_not_an_error() {
    use std::io::Read;
    let p = st_fixture("all_dtypes.safetensors");
    let mut child = Command::new(env!("CARGO_BIN_EXE_rlx"))
        .args(["inspect".as_ref(), p.as_os_str()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take()); // like `rlx inspect f | head -0`
    let status = child.wait().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "{status:?} {err}");
    assert!(err.is_empty(), "{err}");
}

/// An empty model file is named empty by every subcommand that reads one, whatever its name
/// (`generate` called an empty `.onnx` "an ONNX model", `inspect` an empty `.gguf` a "truncated
/// file: magic at offset 0 …", `convert` an empty `.safetensors` "too short for the 8-byte
/// header length").
#[test]
fn an_empty_file_is_named_empty_by_every_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["e.gguf", "e.safetensors", "e.onnx", "e.bin"] {
        let p = dir.path().join(name);
        std::fs::write(&p, "").unwrap();
        let s = p.to_string_lossy().into_owned();
        let out = dir.path().join("o.gguf").to_string_lossy().into_owned();
        for args in [
            vec!["inspect", &s],
            vec!["inspect", &s, "--json"],
            vec!["run", &s],
            vec!["generate", "--model", &s],
            vec!["embed", "--model", &s, "hi"],
            vec!["convert", &s, &out, "--quant", "Q8_0"],
            vec!["check", &s],
        ] {
            let e = one_error_line(&rlx(&args), &s);
            assert!(e.contains("the file is empty (0 bytes)"), "{args:?}: {e}");
        }
    }
}

/// ONNX: a model without a graph is "no graph", not a report of an empty model (an empty file:
/// `an_empty_file_is_named_empty_by_every_subcommand`); a real model's initializers have no
/// file offset (JSON `null`, text `-`), not a made-up 0.
#[test]
fn onnx_without_graph_and_initializer_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let graphless = dir.path().join("graphless.onnx");
    std::fs::write(&graphless, [0x08, 0x07]).unwrap(); // ir_version = 7
    assert_clean_error(&inspect(&graphless, false), &graphless, "no graph");
    let Some(model) = rlx_fetched::or_skip(rlx_fetched::MINILM_L3_ONNX, "rlx inspect on ONNX initializers") else {
        return;
    };
    let o = inspect(&model, true);
    assert!(o.status.success(), "{}", stderr(&o));
    let j = last_json(&o);
    assert_eq!(j["format"], "onnx");
    let tensors = j["tensors"].as_array().unwrap();
    assert!(tensors.len() > 10, "MiniLM-L3's initializers: {}", tensors.len());
    assert!(tensors.iter().all(|t| t["offset"].is_null()), "an ONNX offset that is not null");
    let text = stdout(&inspect(&model, false));
    let row = text.lines().find(|l| l.contains("embeddings.word_embeddings.weight")).expect("the embedding row");
    assert!(row.trim_end().ends_with('-'), "{row}");
}

/// A text file whose 9th byte is `{` was taken for safetensors and got the reader's
/// "declared header length 8891626707274064231 exceeds the limit": the length must fit the
/// file, else it is of no known format.
#[test]
fn text_with_a_brace_at_byte_8_is_not_safetensors() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("garbage.bin");
    std::fs::write(&p, "garbage{{{ not json").unwrap();
    assert_clean_error(&inspect(&p, false), &p, "unknown model format");
}
