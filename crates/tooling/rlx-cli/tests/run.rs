//! `rlx run` as a process on real ONNX files from the ONNX node suite (`tools/fetch.sh
//! onnx-node`) and paraphrase-MiniLM-L3-v2 (`tools/fetch.sh minilm-onnx`): a run with `.npy`
//! inputs gives the element-wise sum, a missing input is named before import (a dynamic model
//! would otherwise fail on some Shape node), and a truncated file is a one-line error with
//! status 1. Without the files the checks print SKIP.

use rlx_fetched::{MINILM_L3_ONNX, ONNX_NODE_DIR, or_skip};
use serde_json::Value;
use std::path::Path;
use std::process::Output;

mod common;
use common::{rlx, stderr};

/// Write a C-order `.npy` (format 1.0: magic, header length, dict padded to 64 bytes) of
/// numpy type `descr` from little-endian element bytes.
fn write_npy_bytes(path: &Path, descr: &str, shape: &[usize], data: &[u8]) {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': ({},), }}", dims.join(", "));
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend_from_slice(&(header.len() as u16).to_le_bytes());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    std::fs::write(path, bytes).unwrap();
}

/// Write an f32 `.npy`.
/// `tests/fixtures/colliding_output_names.onnx` (input `x: f32[2]`), a temporary directory
/// holding `x.npy` = [1, -2], and the `--input` value `x=<that file>`.
fn colliding_model() -> (String, tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    write_npy(&dir.path().join("x.npy"), &[2], &[1.0, -2.0]);
    let xa = format!("x={}", dir.path().join("x.npy").display());
    (colliding_onnx(), dir, xa)
}

/// The path of `tests/fixtures/colliding_output_names.onnx` (input `x: f32[2]`; outputs `a:b`
/// = relu(x) and `a/b` = -x).
fn colliding_onnx() -> String {
    let m: std::path::PathBuf =
        [env!("CARGO_MANIFEST_DIR"), "tests", "fixtures", "colliding_output_names.onnx"].iter().collect();
    m.to_string_lossy().into_owned()
}

fn write_npy(path: &Path, shape: &[usize], data: &[f32]) {
    write_npy_bytes(path, "<f4", shape, &data.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>());
}

/// Write an i64 `.npy`.
fn write_npy_i64(path: &Path, shape: &[usize], data: &[i64]) {
    write_npy_bytes(path, "<i8", shape, &data.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>());
}

/// The one error line for the model file `m`.
fn stderr_line(o: &Output, m: &str) -> String {
    common::one_error_line(o, m)
}

#[test]
fn run_add_with_npy_inputs_and_name_a_missing_input() {
    let Some(node) = or_skip(ONNX_NODE_DIR, "rlx run on test_add") else { return };
    let model = node.join("test_add/model.onnx");
    let dir = std::env::temp_dir().join(format!("rlx-run-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let x: Vec<f32> = (0..60).map(|i| i as f32 * 0.5).collect();
    let y: Vec<f32> = (0..60).map(|i| 1.0 - i as f32).collect();
    write_npy(&dir.join("x.npy"), &[3, 4, 5], &x);
    write_npy(&dir.join("y.npy"), &[3, 4, 5], &y);
    let m = model.to_string_lossy();
    let (xa, ya) = (format!("x={}", dir.join("x.npy").display()), format!("y={}", dir.join("y.npy").display()));

    let o = rlx(&["run", &m, "--input", &xa, "--input", &ya, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8_lossy(&o.stdout);
    let v: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let out = &v["outputs"][0];
    assert_eq!(out["shape"], serde_json::json!([3, 4, 5]));
    assert!(v.get("saved").is_some_and(Value::is_null), "every key, null without --output: {v}");
    for (i, got) in out["values"].as_array().unwrap().iter().enumerate() {
        assert_eq!(got.as_f64().unwrap() as f32, x[i] + y[i], "element {i}");
    }
    // `--threads` as on `generate` / `train`: the same values on one thread; 0 is clap's error.
    let one = rlx(&["run", &m, "--input", &xa, "--input", &ya, "--threads", "1", "--json"]);
    assert_eq!(String::from_utf8_lossy(&one.stdout).lines().last(), text.lines().last());
    assert_eq!(rlx(&["run", &m, "--input", &xa, "--threads", "0"]).status.code(), Some(2));
    // More threads than cores: the same values on the cores, and a note on stderr (only).
    let many = rlx(&["run", &m, "--input", &xa, "--input", &ya, "--threads", "100000", "--json"]);
    assert_eq!(String::from_utf8_lossy(&many.stdout).lines().last(), text.lines().last());
    assert!(stderr(&many).starts_with("rlx: note: --threads 100000 is more than the "), "{}", stderr(&many));

    let e = stderr_line(&rlx(&["run", &m, "--input", &xa]), &m);
    assert!(e.contains("no --input for model input \"y\""), "{e}");
    // Usage errors (status 2, see `input_values_not_name_eq_file_are_usage_errors`).
    let o = rlx(&["run", &m, "--input", &xa, "--input", &ya, "--input", &ya]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--input \"y\" is given twice"), "{}", stderr(&o));
    // `y=` with no file was ": No such file or directory" (an empty path).
    let o = rlx(&["run", &m, "--input", &xa, "--input", "y="]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("names no file after '='"), "{}", stderr(&o));
    let o = rlx(&["run", &m, "--input", &xa, "--input", &ya, "--output", &dir.join("out.npz").to_string_lossy()]);
    assert!(String::from_utf8_lossy(&o.stdout).contains("saved 1 output to"), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).ok();
}

/// An input of another dtype than the model's is named with numpy's dtype names, as the
/// outputs are printed (the runtime's error said `"x": declared dtype f32, got i64`).
#[test]
fn a_dtype_mismatch_names_numpy_dtypes() {
    let Some(node) = or_skip(ONNX_NODE_DIR, "rlx run on test_add with int64 inputs") else { return };
    let m = node.join("test_add/model.onnx").to_string_lossy().into_owned();
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    write_npy_i64(&x, &[3, 4, 5], &[1; 60]);
    write_npy(&y, &[3, 4, 5], &[1.0; 60]);
    let (xa, ya) = (format!("x={}", x.display()), format!("y={}", y.display()));
    let e = stderr_line(&rlx(&["run", &m, "--input", &xa, "--input", &ya]), &m);
    assert!(e.contains("--input \"x\": the model declares float32, the .npy file holds int64"), "{e}");
    assert!(!e.contains("f32") && !e.contains("i64"), "{e}");
}

/// A safetensors file holds weights, not a graph: the hint says what `rlx run` takes and that
/// `rlx inspect` shows the file (it pointed to `rlx generate`, which runs GGUF files).
#[test]
fn a_safetensors_file_is_named_as_weights_without_a_graph() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["model.safetensors", "model.safetensors.index.json"] {
        let p = dir.path().join(name);
        std::fs::write(&p, b"{}").unwrap();
        let p = p.to_string_lossy().into_owned();
        let e = stderr_line(&rlx(&["run", &p]), &p);
        assert!(e.contains("but rlx run needs an ONNX model (.onnx: a graph with its weights)"), "{e}");
        assert!(e.contains("rlx inspect") && !e.contains("rlx generate"), "{e}");
    }
    // A GGUF keeps its pointer to `rlx generate`.
    let g = dir.path().join("m.gguf");
    std::fs::write(&g, b"GGUF\x03\x00\x00\x00").unwrap();
    let g = g.to_string_lossy().into_owned();
    assert!(stderr_line(&rlx(&["run", &g]), &g).contains("(rlx generate runs GGUF LLMs)"));
}

#[test]
fn a_file_of_no_known_format_is_an_unknown_model_format() {
    // ONNX has no magic number: a file not named .onnx is tried as ONNX, and one that is not
    // ONNX is an unknown format (it was "malformed ONNX protobuf: … unexpected end group tag").
    let dir = tempfile::tempdir().unwrap();
    for (name, bytes, why) in [
        ("foo.bin", &b"hello world\n"[..], "failed to decode Protobuf message"),
        ("notes.txt", b"hello world\n", "failed to decode Protobuf message"),
        // Decodes as protobuf (field 1 = 7, field 2 = "test"), but holds no graph.
        ("x.bin", b"\x08\x07\x12\x04test", "it decodes as protobuf, but holds no graph"),
    ] {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        let p = p.to_string_lossy();
        // With an input that is no .npy either: the model is what is named (the input was read
        // first and blamed under the model's name).
        for args in [vec!["run", &*p], vec!["run", &*p, "--input", "x=/nonexistent/in.txt"]] {
            let e = stderr_line(&rlx(&args), &p);
            assert!(e.contains("unknown model format (expected an ONNX model, .onnx): not named .onnx"), "{e}");
            assert!(e.contains(why), "{e}");
        }
    }
    // An RLX graph's JSON (what `rlx check` / `rlx compile` read) is named as one, with where
    // to take it; other JSON stays an unknown format.
    let g = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/clean.json");
    let e = stderr_line(&rlx(&["run", g]), g);
    assert!(e.contains("is an RLX graph's JSON") && e.contains("rlx check and rlx compile read it"), "{e}");
    let c = dir.path().join("config.json");
    std::fs::write(&c, br#"{"hidden_size": 384}"#).unwrap();
    let c = c.to_string_lossy();
    assert!(stderr_line(&rlx(&["run", &c]), &c).contains("unknown model format"));
    // A file named .onnx that does not decode is a malformed ONNX model, as it was.
    let p = dir.path().join("model.onnx");
    std::fs::write(&p, b"hello world\n").unwrap();
    let p = p.to_string_lossy();
    let e = stderr_line(&rlx(&["run", &p]), &p);
    assert!(e.contains("malformed ONNX protobuf") && !e.contains("unknown model format"), "{e}");
}

#[test]
fn a_gguf_or_a_directory_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let gguf = dir.path().join("model.gguf");
    std::fs::write(&gguf, b"GGUF\x03\x00\x00\x00").unwrap();
    let g = gguf.to_string_lossy();
    let e = stderr_line(&rlx(&["run", &g]), &g);
    assert!(e.contains("is a GGUF file, but rlx run needs an ONNX model") && !e.contains("protobuf"), "{e}");
    let d = dir.path().to_string_lossy();
    assert!(stderr_line(&rlx(&["run", &d]), &d).contains("is a directory"));
}

#[test]
fn dynamic_model_without_inputs_names_the_missing_input_and_truncated_file_is_an_error() {
    let Some(model) = or_skip(MINILM_L3_ONNX, "rlx run on MiniLM-L3") else { return };
    let m = model.to_string_lossy();
    let e = stderr_line(&rlx(&["run", &m]), &m);
    assert!(e.contains("no --input for model input \"input_ids\""), "{e}");

    let bytes = std::fs::read(&model).unwrap();
    let cut = std::env::temp_dir().join(format!("rlx-run-truncated-{}.onnx", std::process::id()));
    std::fs::write(&cut, &bytes[..1000]).unwrap();
    let c = cut.to_string_lossy();
    let e = stderr_line(&rlx(&["run", &c]), &c);
    assert!(e.contains("malformed ONNX"), "{e}");
    std::fs::remove_file(&cut).ok();
}

#[test]
fn minilm_inputs_are_checked_by_name_and_named_dim_and_integer_outputs_print_as_integers() {
    let Some(model) = or_skip(MINILM_L3_ONNX, "rlx run on MiniLM-L3 with .npy inputs") else { return };
    let m = model.to_string_lossy();
    let dir = tempfile::tempdir().unwrap();
    let npy = |name: &str, shape: &[usize], v: &[i64]| {
        let p = dir.path().join(name);
        write_npy_i64(&p, shape, v);
        p.to_string_lossy().into_owned()
    };
    let ids = format!("input_ids={}", npy("ids.npy", &[1, 4], &[101, 2023, 2003, 102]));
    let mask = format!("attention_mask={}", npy("mask.npy", &[1, 4], &[1; 4]));
    let mask5 = format!("attention_mask={}", npy("mask5.npy", &[1, 5], &[1; 5]));

    // A name the model does not have is named as such (not as the input it then lacks).
    let foo = format!("foo={}", dir.path().join("ids.npy").display());
    let e = stderr_line(&rlx(&["run", &m, "--input", &foo, "--input", &mask]), &m);
    assert!(e.contains("--input \"foo\": the model has no such input (inputs: input_ids, attention_mask)"), "{e}");
    // Both inputs are [batch_size, sequence_length]: 4 and 5 contradict before any node sees them.
    let e = stderr_line(&rlx(&["run", &m, "--input", &ids, "--input", &mask5]), &m);
    assert!(
        e.contains("input \"attention_mask\" has sequence_length = 5, but input \"input_ids\" has sequence_length = 4"),
        "{e}"
    );
    // --output is checked before the model is imported and run.
    let bad_out = dir.path().join("no/such/dir/out.npz");
    let e =
        stderr_line(&rlx(&["run", &m, "--input", &ids, "--input", &mask, "--output", &bad_out.to_string_lossy()]), &m);
    assert!(e.contains("does not exist"), "{e}");

    // The model echoes input_ids as its int64 output "output": integers, not 101.000000.
    let o = rlx(&["run", &m, "--input", &ids, "--input", &mask]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("output: int64 [1, 4] [101, 2023, 2003, 102]"), "{text}{}", stderr(&o));
    let o = rlx(&["run", &m, "--input", &ids, "--input", &mask, "--json"]);
    let v = common::last_json(&o);
    let out = v["outputs"].as_array().unwrap().iter().find(|o| o["name"] == "output").expect("output");
    assert_eq!(out["dtype"], "int64");
    assert_eq!(out["values"], serde_json::json!([101, 2023, 2003, 102]));
}

#[test]
fn a_wrong_rank_is_named_as_such_not_as_another_inputs_dim() {
    let Some(model) = or_skip(MINILM_L3_ONNX, "rlx run on MiniLM-L3 with a rank-1 input") else { return };
    let m = model.to_string_lossy();
    let dir = tempfile::tempdir().unwrap();
    let (ids, mask) = (dir.path().join("ids.npy"), dir.path().join("mask.npy"));
    // input_ids is [batch_size, sequence_length]; a rank-1 [4] once bound batch_size = 4 and the
    // error blamed attention_mask's batch_size = 1.
    write_npy_i64(&ids, &[4], &[101, 2023, 2003, 102]);
    write_npy_i64(&mask, &[1, 4], &[1; 4]);
    let ids = format!("input_ids={}", ids.display());
    let mask = format!("attention_mask={}", mask.display());
    let e = stderr_line(&rlx(&["run", &m, "--input", &ids, "--input", &mask]), &m);
    assert!(e.contains("input \"input_ids\": given shape [4] contradicts the model's declared shape"), "{e}");
    assert!(!e.contains("attention_mask"), "{e}");
}

#[test]
fn a_truncated_npy_names_the_npy_and_says_truncated() {
    let Some(node) = or_skip(ONNX_NODE_DIR, "rlx run on test_add with a truncated .npy") else { return };
    let m = node.join("test_add/model.onnx").to_string_lossy().into_owned();
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = (dir.path().join("x.npy"), dir.path().join("y.npy"));
    write_npy(&x, &[3, 4, 5], &[0.5; 60]);
    write_npy(&y, &[3, 4, 5], &[1.0; 60]);
    let full = std::fs::read(&x).unwrap();
    let (xa, ya) = (format!("x={}", x.display()), format!("y={}", y.display()));
    // Data cut short (header intact), then the header itself cut: both once said only
    // "failed to fill whole buffer", naming the model but not the .npy.
    for keep in [full.len() - 7, 50] {
        std::fs::write(&x, &full[..keep]).unwrap();
        let e = stderr_line(&rlx(&["run", &m, "--input", &xa, "--input", &ya]), &m);
        assert!(e.contains(&format!("{}: truncated .npy file ({keep} bytes)", x.display())), "{e}");
    }
}

#[test]
fn an_out_of_range_token_id_is_an_error_not_a_clamped_lookup() {
    let Some(model) = or_skip(MINILM_L3_ONNX, "rlx run on MiniLM-L3 with an id past the vocabulary") else { return };
    let m = model.to_string_lossy();
    let dir = tempfile::tempdir().unwrap();
    let (ids, mask) = (dir.path().join("ids.npy"), dir.path().join("mask.npy"));
    // 99999 >= the vocabulary (30522): ONNX Gather says that is invalid (ONNX Runtime fails);
    // the embedding lookup used to clamp it to the last row and exit 0.
    write_npy_i64(&ids, &[1, 4], &[101, 99999, 2003, 102]);
    write_npy_i64(&mask, &[1, 4], &[1; 4]);
    let ids = format!("input_ids={}", ids.display());
    let mask = format!("attention_mask={}", mask.display());
    let e = stderr_line(&rlx(&["run", &m, "--input", &ids, "--input", &mask]), &m);
    assert!(e.contains("gather") && e.contains("index 99999 is out of range [-30522, 30522)"), "{e}");
    // A negative id past the vocabulary is named as given (it said -69477, after the wrap).
    let far = dir.path().join("far.npy");
    write_npy_i64(&far, &[1, 4], &[101, -99999, 2003, 102]);
    let far = format!("input_ids={}", far.display());
    let e = stderr_line(&rlx(&["run", &m, "--input", &far, "--input", &mask]), &m);
    assert!(e.contains("gather") && e.contains("index -99999 is out of range [-30522, 30522)"), "{e}");
    // Negative ids still wrap once (-1 is the last row), as ONNX Gather says.
    let neg = dir.path().join("neg.npy");
    write_npy_i64(&neg, &[1, 4], &[101, -1, 2003, 102]);
    let o = rlx(&["run", &m, "--input", &format!("input_ids={}", neg.display()), "--input", &mask]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn outputs_whose_names_sanitize_alike_are_saved_as_distinct_npz_members() {
    // tests/fixtures/colliding_output_names.onnx: x -> Relu -> "a:b", x -> Neg -> "a/b". Both
    // were written as a_b.npy, and numpy loaded the Neg result under both names.
    let (m, dir, xa) = colliding_model();
    let out = dir.path().join("out.npz");
    let o = rlx(&["run", &m, "--input", &xa, "--output", &out.to_string_lossy()]);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut z = zip::ZipArchive::new(std::fs::File::open(&out).unwrap()).unwrap();
    // `file_names` iterates a hash map: compare as a sorted list.
    let mut names: Vec<String> = z.file_names().map(String::from).collect();
    names.sort();
    assert_eq!(names, ["a_b.npy", "a_b_2.npy"]);
    // The members hold Relu's then Neg's values (the last 8 bytes of each .npy).
    for (member, want) in [("a_b.npy", [1.0f32, 0.0]), ("a_b_2.npy", [-1.0, 2.0])] {
        let mut bytes = vec![];
        std::io::Read::read_to_end(&mut z.by_name(member).unwrap(), &mut bytes).unwrap();
        let tail = &bytes[bytes.len() - 8..];
        let got: Vec<f32> = tail.chunks(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(got, want, "{member}");
    }
}

#[test]
fn an_output_named_like_a_model_or_npy_is_refused_before_running() {
    // `rlx run m.onnx ... --output m.onnx` used to overwrite the model with the .npz archive
    // (and `--output o.npy` wrote a zip under a .npy name).
    let Some(node) = or_skip(ONNX_NODE_DIR, "rlx run --output names") else { return };
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model.onnx");
    std::fs::copy(node.join("test_add/model.onnx"), &model).unwrap();
    let before = std::fs::read(&model).unwrap();
    let x: Vec<f32> = (0..60).map(|i| i as f32).collect();
    write_npy(&dir.path().join("x.npy"), &[3, 4, 5], &x);
    write_npy(&dir.path().join("y.npy"), &[3, 4, 5], &x);
    let m = model.to_string_lossy();
    let xa = format!("x={}", dir.path().join("x.npy").display());
    let ya = format!("y={}", dir.path().join("y.npy").display());
    for name in ["model.onnx", "out.npy", "out.gguf", "out.safetensors", "out.json"] {
        let out = dir.path().join(name);
        let o = rlx(&["run", &m, "--input", &xa, "--input", &ya, "--output", &out.to_string_lossy()]);
        assert_eq!(o.status.code(), Some(2), "{name}: a usage error");
        assert!(stderr(&o).contains("rlx run writes an .npz archive; name it .npz"), "{name}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{name}");
    }
    assert_eq!(std::fs::read(&model).unwrap(), before, "the model file is unchanged");
    for name in ["out.npy", "out.gguf", "out.safetensors", "out.json"] {
        assert!(!dir.path().join(name).exists(), "{name} was not written");
    }
    let o =
        rlx(&["run", &m, "--input", &xa, "--input", &ya, "--output", &dir.path().join("out.npz").to_string_lossy()]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn an_output_not_named_npz_is_a_usage_error_and_nothing_is_written() {
    // `--output o.txt` wrote a zip archive under that name, while the error for `o.npy` said
    // "name it .npz": every name not ending in .npz is now refused (status 2) before any file
    // is read, the model included.
    let fixture = colliding_onnx();
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model.onnx");
    std::fs::copy(&fixture, &model).unwrap();
    let before = std::fs::read(&model).unwrap();
    write_npy(&dir.path().join("x.npy"), &[2], &[1.0, -2.0]);
    let m = model.to_string_lossy();
    let xa = format!("x={}", dir.path().join("x.npy").display());
    for name in ["o.txt", "out", "out.npy", "model.onnx", "out.npz.txt"] {
        let out = dir.path().join(name);
        let o = rlx(&["run", &m, "--input", &xa, "--output", &out.to_string_lossy()]);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {e}");
        assert!(e.contains("for '--output <OUT.npz>': rlx run writes an .npz archive; name it .npz"), "{name}: {e}");
        assert!(o.stdout.is_empty() && !e.contains("panicked"), "{name}");
        assert!(name == "model.onnx" || !out.exists(), "{name} was written");
    }
    assert_eq!(std::fs::read(&model).unwrap(), before, "the model file is unchanged");
    // Any case of the extension is an .npz name.
    let o = rlx(&["run", &m, "--input", &xa, "--output", &dir.path().join("OUT.NPZ").to_string_lossy()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(String::from_utf8_lossy(&o.stdout).contains("saved 2 outputs to"), "{}", stderr(&o));
}

/// An `--input` value that is not `NAME=FILE.npy`, or a name given twice, is a usage error
/// (status 2, clap's message, before any file is read), as a bad `--output` name is; it was
/// status 1, as if a file were at fault. (`--input =x.npy` was once taken as an input named ""
/// and blamed on the model.)
#[test]
fn input_values_not_name_eq_file_are_usage_errors() {
    let m = colliding_onnx();
    let dir = tempfile::tempdir().unwrap();
    let x = dir.path().join("x.npy");
    write_npy(&x, &[2], &[1.0, -2.0]);
    let (bare, unnamed, named) = (x.display().to_string(), format!("={}", x.display()), format!("x={}", x.display()));
    let cases = [
        (vec![bare.as_str()], format!("invalid value '{bare}' for '--input <NAME=FILE.npy>': not NAME=FILE.npy")),
        (vec![&unnamed], format!("invalid value '{unnamed}' for '--input <NAME=FILE.npy>': names no input before '='")),
        (vec!["x="], "invalid value 'x=' for '--input <NAME=FILE.npy>': names no file after '='".into()),
        (vec![&named, &named], "--input \"x\" is given twice".into()),
    ];
    for (inputs, want) in cases {
        let mut args = vec!["run", "/nonexistent/model.onnx"];
        for i in &inputs {
            args.extend(["--input", i]);
        }
        let o = rlx(&args);
        let e = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{inputs:?}: {e}");
        assert!(e.contains(&want) && !e.contains("nonexistent"), "{inputs:?}: {e}");
        assert!(o.stdout.is_empty(), "{inputs:?}");
    }
    let o = rlx(&["run", &m, "--input", &named]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn text_and_json_name_dtypes_alike() {
    // The text said `f32` where the JSON (and `rlx inspect` of an ONNX file) said `float32`.
    let (m, _dir, xa) = colliding_model();
    let o = rlx(&["run", &m, "--input", &xa]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let v = common::last_json(&rlx(&["run", &m, "--input", &xa, "--json"]));
    for out in v["outputs"].as_array().unwrap() {
        assert_eq!(out["dtype"], "float32", "{v}");
        let line = format!("{}: float32 [2] [", out["name"].as_str().unwrap());
        assert!(text.contains(&line), "{line:?} in {text}");
    }
}

#[test]
fn an_unparsable_rlx_num_threads_is_a_note_not_silence() {
    // docs/env.md: RLX_NUM_THREADS overrides the thread count; `abc` was ignored without a word.
    let (m, _dir, xa) = colliding_model();
    let run = |v: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_rlx"))
            .args(["run", &m, "--input", &xa, "--json"])
            .env("RLX_NUM_THREADS", v)
            .output()
            .unwrap()
    };
    let o = run("abc");
    common::last_json(&o);
    assert_eq!(
        stderr(&o),
        "rlx: note: RLX_NUM_THREADS=\"abc\" is not a whole number; ignored (docs/env.md)\n",
        "one note line"
    );
    let o = run("1");
    common::last_json(&o);
    assert_eq!(stderr(&o), "", "a valid value needs no note");
    // More threads than cores is clamped, and said, as `--threads 999` is (it was silent).
    let cores = std::thread::available_parallelism().unwrap().get();
    let o = run("999");
    common::last_json(&o);
    let s = if cores == 1 { "" } else { "s" };
    assert_eq!(
        stderr(&o),
        format!("rlx: note: RLX_NUM_THREADS=999 is more than the {cores} available core{s}; using {cores}\n")
    );
    // Every override's rule lives in CompileOptions; a flag set to another value than it takes
    // is named the same way.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_rlx"))
        .args(["run", &m, "--input", &xa, "--json"])
        .env("RLX_FLUSH_DENORMALS", "yes")
        .output()
        .unwrap();
    common::last_json(&o);
    assert_eq!(stderr(&o), "rlx: note: RLX_FLUSH_DENORMALS=\"yes\" is not 0 or 1; ignored (docs/env.md)\n");
}

#[test]
fn an_output_under_a_file_is_named_as_not_a_directory() {
    // `--output /dev/full/o.npz` said "the directory /dev/full does not exist": it exists, but
    // is not a directory.
    let (m, dir, xa) = colliding_model();
    let file = dir.path().join("x.npy");
    let mut parents = vec![file.to_string_lossy().into_owned()];
    if Path::new("/dev/full").exists() {
        parents.push("/dev/full".into());
    }
    for parent in parents {
        let out = format!("{parent}/o.npz");
        let e = stderr_line(&rlx(&["run", &m, "--input", &xa, "--output", &out]), &m);
        assert!(e.contains(&format!("--output {out}: {parent} is not a directory")), "{e}");
        assert!(!e.contains("does not exist"), "{e}");
    }
}

#[test]
fn a_safetensors_file_named_gguf_is_named_by_its_content() {
    // A safetensors file renamed `x.gguf` was "a GGUF file" (by its name), and a text file
    // named `x.gguf` too: only the GGUF magic makes a GGUF file.
    let dir = tempfile::tempdir().unwrap();
    let t = rlx_ir::Tensor::from_vec(vec![1.0f32, 2.0], &[2]).unwrap();
    let st = dir.path().join("x.gguf");
    std::fs::write(&st, rlx_safetensors::serialize([("w", &t)], None).unwrap()).unwrap();
    let st = st.to_string_lossy().into_owned();
    let e = stderr_line(&rlx(&["run", &st]), &st);
    assert!(e.contains("is a safetensors file, but rlx run needs an ONNX model"), "{e}");
    assert!(!e.contains("GGUF file") && !e.contains("rlx generate"), "{e}");
    let text = dir.path().join("notes.gguf");
    std::fs::write(&text, b"hello world\n").unwrap();
    let text = text.to_string_lossy().into_owned();
    let e = stderr_line(&rlx(&["run", &text]), &text);
    assert!(e.contains("unknown model format (expected an ONNX model, .onnx)"), "{e}");
    assert!(!e.contains("GGUF file"), "{e}");
}

/// A malformed `.npy` is an error of the data given, status 1 with one line naming the `.npy`,
/// as an unknown input name and a shape the model contradicts are; a header whose dims multiply
/// past 64 bits was a panic (status 101, "attempt to multiply with overflow" inside npyz).
#[test]
fn malformed_npy_files_exit_1_like_the_other_input_errors() {
    let m = colliding_onnx();
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    write_npy(&p("good.npy"), &[2], &[1.0, -2.0]);
    write_npy(&p("three.npy"), &[3], &[1.0, -2.0, 3.0]);
    write_npy_bytes(&p("overflow.npy"), "<f4", &[1 << 32, 1 << 32, 16], &[]);
    write_npy_bytes(&p("overflow_to_0.npy"), "<f4", &[1 << 32, 1 << 32, 0], &[]);
    write_npy_bytes(&p("descr.npy"), "zz", &[2], &[0; 8]);
    std::fs::write(p("text.npy"), b"hello world\n").unwrap();
    std::fs::write(p("empty.npy"), b"").unwrap();
    std::fs::write(p("magic3.npy"), b"\x93NU").unwrap();
    let input = |name: &str, file: &str| format!("{name}={}", p(file).display());
    let cases = [
        (input("x", "overflow.npy"), "overflow.npy: corrupt .npy header: shape [4294967296, 4294967296, 16] has more"),
        (input("x", "overflow_to_0.npy"), "overflow_to_0.npy: corrupt .npy header: shape [4294967296, 4294967296, 0]"),
        (input("x", "descr.npy"), "descr.npy: invalid type string"),
        (input("x", "text.npy"), "text.npy: not an .npy file (it does not start with \\x93NUMPY)"),
        (input("x", "empty.npy"), "empty.npy: empty file (an .npy file starts with \\x93NUMPY)"),
        (input("x", "magic3.npy"), "magic3.npy: truncated .npy file (3 bytes)"),
        // The other input errors, for comparison: the same status and form.
        (input("y", "good.npy"), "--input \"y\": the model has no such input (inputs: x)"),
        (input("x", "three.npy"), "input \"x\": given shape [3] contradicts the model's declared shape [2]"),
    ];
    for (spec, want) in cases {
        let e = stderr_line(&rlx(&["run", &m, "--input", &spec]), &m);
        assert!(e.contains(want), "{spec}: {e}");
    }
}

/// `--output-name` keeps the named outputs, in the order given (the others are not computed);
/// a name the model does not have is an error listing the outputs.
#[test]
fn output_name_selects_outputs_in_order() {
    let (m, _dir, xa) = colliding_model();
    let o = rlx(&["run", &m, "--input", &xa, "--output-name", "a/b", "--output-name", "a:b", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    let v: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let outs = v["outputs"].as_array().unwrap();
    let names: Vec<&str> = outs.iter().map(|o| o["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["a/b", "a:b"]);
    // x = [1, -2]: -x, then relu(x).
    assert_eq!(outs[0]["values"], serde_json::json!([-1.0, 2.0]));
    assert_eq!(outs[1]["values"], serde_json::json!([1.0, 0.0]));
    let o = rlx(&["run", &m, "--input", &xa, "--output-name", "a:b"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.starts_with("a:b: float32 [2] [1") && !text.contains("a/b"), "{text}");
    // A name given twice is a usage error (status 2), as a repeated --input is.
    let o = rlx(&["run", &m, "--input", &xa, "--output-name", "a:b", "--output-name", "a:b"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--output-name \"a:b\" is given twice"), "{}", stderr(&o));
    let e = stderr_line(&rlx(&["run", &m, "--input", &xa, "--output-name", "logits"]), &m);
    assert!(e.contains("--output-name \"logits\": the model has no such output (outputs: a:b, a/b)"), "{e}");
}
