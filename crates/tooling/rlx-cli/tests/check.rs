//! `rlx check` and `rlx compile` on small graphs: a shape error and a provable NaN each name
//! the node and exit non-zero; a clean graph passes; `compile --dump --json` reports the plan.

use rlx_ir::{DType, Graph, Shape, Tensor};
use std::path::PathBuf;

mod common;
use common::{one_error_line, rlx};

fn fixture(name: &str) -> String {
    let p: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests", "fixtures", name].iter().collect();
    p.to_string_lossy().into_owned()
}

fn clean() -> Graph {
    let mut g = Graph::new("clean");
    let x = g.input("x", Shape::new(&[4], DType::F32));
    let y = g.input("y", Shape::new(&[4], DType::F32));
    let s = g.add(x, y);
    let e = g.exp(s);
    g.set_outputs(vec![e]);
    g
}

/// An elementwise op whose reduction over a leading axis cannot join its loop.
fn hints() -> Graph {
    let mut g = Graph::new("hints");
    let x = g.input("x", Shape::new(&[8, 16], DType::F32));
    let e = g.exp(x);
    let s = g.sum(e, &[0], false);
    g.set_outputs(vec![s]);
    g
}

/// Regenerate the committed fixtures (run with `RLX_WRITE_FIXTURES=1`); otherwise check that
/// they match what the builder produces today.
#[test]
fn fixtures_are_current() {
    let ok = rlx_ir::hir_to_json(&clean()).unwrap();
    // A shape error: x declared [3] while y and the add are [4].
    let bad = ok.replacen("{\"Static\":4}", "{\"Static\":3}", 2);
    let mut g = Graph::new("nan");
    let x = g.input("x", Shape::new(&[2], DType::F32));
    let c = g.constant(Tensor::from_vec(vec![1.0f32, -2.0], &[2]).unwrap());
    let l = g.log(c);
    let y = g.add(x, l);
    g.set_outputs(vec![y]);
    let nan = rlx_ir::hir_to_json(&g).unwrap();
    let hints = rlx_ir::hir_to_json(&hints()).unwrap();
    for (name, text) in [("clean.json", ok), ("shape_error.json", bad), ("nan.json", nan), ("hints.json", hints)] {
        if std::env::var_os("RLX_WRITE_FIXTURES").is_some() {
            std::fs::write(fixture(name), &text).unwrap();
        }
        assert_eq!(std::fs::read_to_string(fixture(name)).unwrap(), text, "{name} is stale");
    }
}

#[test]
fn shape_error_names_the_node_and_fails() {
    let o = rlx(&["check", &fixture("shape_error.json")]);
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(!o.status.success(), "{text}");
    assert!(text.contains("add") && text.contains('%'), "names the node: {text}");
    // A finding of the report (exit 1, JSON on stdout), not a failure to read the file.
    let o = rlx(&["check", &fixture("shape_error.json"), "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let out = String::from_utf8_lossy(&o.stdout);
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(v["errors"], 1, "{out}");
    assert!(v["problems"][0]["message"].as_str().unwrap().contains("f32[3]"), "{out}");
    // The node it belongs to, as the text says and other findings are named (it was "graph").
    assert_eq!(v["problems"][0]["node"], "%2 (add)", "{out}");
    assert!(text.contains("error: %2 (add): "), "{text}");
    // compile verifies and stops, in check's words.
    let f = fixture("shape_error.json");
    assert!(one_error_line(&rlx(&["compile", &f]), &f).contains(&format!("{f}: %2 (add): ")));
}

#[test]
fn files_that_are_not_graphs_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("cut.gguf");
    std::fs::write(&bin, b"GGUF\x03\x00\x00\x00\xff\xfe").unwrap();
    let b = bin.to_string_lossy().into_owned();
    // A model file given by mistake is named as one (it was "binary data, not a graph's JSON").
    let raw = dir.path().join("weights.bin");
    std::fs::write(&raw, b"\xff\xfe\x00\x01").unwrap();
    let r = raw.to_string_lossy().into_owned();
    for cmd in ["check", "compile"] {
        let e = one_error_line(&rlx(&[cmd, &b]), &b);
        assert!(e.contains("is a GGUF file, but rlx check and rlx compile read a graph's JSON"), "{e}");
        assert!(one_error_line(&rlx(&[cmd, &r]), &r).contains("binary data, not a graph's JSON"));
    }
    let other = dir.path().join("other.json");
    std::fs::write(&other, "{\"a\": 1}").unwrap();
    let o = other.to_string_lossy().into_owned();
    assert!(one_error_line(&rlx(&["check", &o]), &o).contains("not a graph's JSON"));
    let d = dir.path().to_string_lossy().into_owned();
    // Worded as every other subcommand words it (it was io's "Is a directory (os error 21)").
    for cmd in ["check", "compile"] {
        assert!(one_error_line(&rlx(&[cmd, &d]), &d).contains("is a directory, not a file"));
    }
}

/// A graph JSON whose `inputs` / `params` name a missing node, a node of another kind, or a
/// node twice, or leave out an input node: both subcommands say so in one line (compile panicked on an index past the end,
/// and check passed such files).
#[test]
fn bad_input_and_param_lists_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let clean = std::fs::read_to_string(fixture("clean.json")).unwrap();
    let lists = r#""inputs":[0,1],"params":[]"#;
    assert!(clean.contains(lists));
    let cases = [
        (r#""inputs":[0,7],"params":[]"#, "input %7 does not exist"),
        (r#""inputs":[0,1],"params":[9]"#, "param %9 does not exist"),
        (r#""inputs":[0,2],"params":[]"#, "%2 (add): in the inputs list, but not an input node"),
        (r#""inputs":[0,0,1],"params":[]"#, r#"%0 (input "x"): listed twice in the inputs list"#),
        (r#""inputs":[0],"params":[1]"#, r#"%1 (input "y"): in the params list, but not a param node"#),
        // An input node left out of the list could never be fed (check passed such files).
        (r#""inputs":[0],"params":[]"#, r#"%1 (input "y"): "y" is missing from the graph's inputs list"#),
    ];
    for (k, (with, want)) in cases.iter().enumerate() {
        let f = dir.path().join(format!("bad{k}.json"));
        std::fs::write(&f, clean.replace(lists, with)).unwrap();
        let f = f.to_string_lossy().into_owned();
        for cmd in ["check", "compile"] {
            let o = rlx(&[cmd, &f]);
            assert_eq!(o.status.code(), Some(1), "{cmd} {with}: {o:?}");
            let all = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
            assert!(all.contains(want), "{cmd} {with}: {all}");
            assert!(!all.contains("panicked"), "{all}");
        }
    }
}

#[test]
fn provable_nan_names_the_node_and_fails() {
    let o = rlx(&["check", &fixture("nan.json"), "--json"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(!o.status.success(), "{out}");
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(v["errors"], 1, "{out}");
    assert!(v["problems"][0]["node"].as_str().unwrap().contains("log"), "{out}");
}

#[test]
fn clean_graph_passes_and_compiles_with_a_plan() {
    let o = rlx(&["check", &fixture("clean.json")]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    let o = rlx(&["compile", &fixture("clean.json"), "--dump", "--json"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{out} {}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert!(v["lir"]["arena_bytes"].as_u64().unwrap() > 0 && v["passes"][0]["ir"].is_string(), "{out}");
}

#[test]
fn compile_memory_line_is_at_most_the_unplanned_figure() {
    // clean.json's one 16-byte value takes one 64-byte-aligned buffer: the line said
    // "unplanned 16 B, 400.0%" (the arena was aligned, the figure it was compared with not).
    let f = fixture("clean.json");
    let o = rlx(&["compile", &f]);
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{text}");
    let line = text.lines().find(|l| l.starts_with("lir: ")).expect("the memory line");
    let pct: f64 = line.split("B, ").nth(1).and_then(|s| s.split('%').next()).expect("a percentage").parse().unwrap();
    assert!(pct <= 100.0, "{line}");
    let v = common::last_json(&rlx(&["compile", &f, "--json"]));
    let lir = &v["lir"];
    let (arena, fixed) = (lir["arena_bytes"].as_u64().unwrap(), lir["fixed_bytes"].as_u64().unwrap());
    assert!(arena + fixed <= lir["unplanned_bytes"].as_u64().unwrap(), "{lir}");
}

#[test]
fn compile_fails_with_checks_error() {
    // nan.json's provable NaN is an error to `rlx check` (exit 1); `rlx compile` exited 0 on it.
    let f = fixture("nan.json");
    let o = rlx(&["check", &f]);
    assert_eq!(o.status.code(), Some(1));
    let report = String::from_utf8_lossy(&o.stdout).into_owned();
    let finding = report.lines().find_map(|l| l.strip_prefix("error: ")).expect("an error finding");
    for args in [vec!["compile", &f], vec!["compile", &f, "--json"], vec!["compile", &f, "--dump"]] {
        let o = rlx(&args);
        let e = one_error_line(&o, &f);
        assert_eq!(e.trim_end(), format!("rlx: error: {f}: {finding}"), "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}");
    }
}

/// A value read by two elementwise ops fuses (the fusion pass fuses DAGs): `rlx check` said
/// "the elementwise chain will not fuse through it" while `rlx compile` fused the chain.
#[test]
fn check_does_not_claim_a_value_read_twice_breaks_fusion() {
    let mut g = Graph::new("twice");
    let x = g.input("x", Shape::new(&[4], DType::F32));
    let e = g.exp(x);
    let y = g.mul(e, e);
    let z = g.add(y, e);
    g.set_outputs(vec![z]);
    let (_dir, p) = graph_file(&g);
    let o = rlx(&["check", &p]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && !out.contains("fuse") && out.contains("0 error(s), 0 hint(s)"), "{o:?}");
    let v = common::last_json(&rlx(&["compile", &p, "--json"]));
    let fuse = v["passes"].as_array().unwrap().iter().find(|r| r["pass"] == "fuse").expect("a fuse pass");
    assert_eq!(fuse["changed"], 1, "{v}");
}

/// A report that cannot be written is an error (`rlx check > /dev/full` exited 0 in silence;
/// every other subcommand said `writing output: …`), whether the graph is clean or not.
#[test]
fn check_reports_an_unwritable_stdout() {
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        eprintln!("SKIP: no /dev/full");
        return;
    };
    for (name, json) in [("clean.json", false), ("clean.json", true), ("nan.json", true)] {
        let mut args = vec!["check".to_string(), fixture(name)];
        if json {
            args.push("--json".into());
        }
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_rlx"))
            .args(&args)
            .stdout(full.try_clone().unwrap())
            .output()
            .expect("run rlx");
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let e = String::from_utf8_lossy(&o.stderr);
        assert!(e.starts_with("rlx: error: writing output: "), "{args:?}: {e}");
    }
}

/// A reduction over a leading axis cannot join its producer's loop: `rlx check` says so as a
/// hint (exit 0), under the reduction's node, in text and in `--json`.
#[test]
fn check_hints_at_a_reduction_that_makes_its_own_pass() {
    let p = fixture("hints.json");
    let o = rlx(&["check", &p]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{o:?}");
    let hint = out.lines().find(|l| l.starts_with("hint: ")).expect("a hint");
    assert!(hint.starts_with("hint: %2 (reduce_sum): reduces axes [0] in its own pass over %1 (exp)"), "{hint}");
    assert!(out.contains("0 error(s), 1 hint(s)"), "{out}");
    let v = common::last_json(&rlx(&["check", &p, "--json"]));
    assert_eq!(v["errors"], 0, "{v}");
    let h = &v["problems"][0];
    assert_eq!((h["level"].as_str(), h["node"].as_str()), (Some("hint"), Some("%2 (reduce_sum)")), "{v}");
}

/// `rlx check` imports an ONNX model (dynamic dims as 1): MiniLM-L3's mean pooling sums the
/// masked hidden states over the sequence axis, a reduction its producer's loop cannot take.
#[test]
fn check_imports_an_onnx_model_and_hints_at_its_pooling() {
    let Some(model) = rlx_fetched::or_skip(rlx_fetched::MINILM_L3_ONNX, "rlx check on MiniLM-L3") else { return };
    let m = model.to_string_lossy();
    let o = rlx(&["check", &m]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{o:?}");
    let hints: Vec<&str> = out.lines().filter(|l| l.starts_with("hint: ")).collect();
    assert_eq!(hints.len(), 1, "{out}");
    assert!(hints[0].contains("(reduce_sum): reduces axes [1] in its own pass over %"), "{out}");
    assert!(out.contains("0 error(s), 1 hint(s)"), "{out}");
    let v = common::last_json(&rlx(&["compile", &m, "--json"]));
    let fuse = v["passes"].as_array().unwrap().iter().find(|r| r["pass"] == "fuse").expect("a fuse pass");
    assert!(fuse["changed"].as_u64().unwrap() > 0, "{v}");
}

/// `g` saved as JSON in a temporary directory (kept alive by the first element), and its path.
fn graph_file(g: &Graph) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("g.json");
    std::fs::write(&p, rlx_ir::hir_to_json(g).unwrap()).unwrap();
    let p = p.to_string_lossy().into_owned();
    (dir, p)
}

/// `rlx check` on `g`: the process output and its stdout.
fn check_text(g: &Graph) -> (std::process::Output, String) {
    let (_dir, p) = graph_file(g);
    let o = rlx(&["check", &p]);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    (o, out)
}

/// Hints come from the graph the fusion pass sees: an identity transpose that simplification
/// removes splits nothing (it was "splits the elementwise ops … into two passes" while
/// `rlx compile` fused one loop), and an f16 chain is one fusion hint, not one per op, plus
/// one for its steps on the reference evaluator.
#[test]
fn check_hints_follow_the_compiler_and_group_one_dtype() {
    let mut g = Graph::new("identity");
    let x = g.input("x", Shape::new(&[4, 8], DType::F32));
    let e = g.exp(x);
    let t = g.transpose(e, &[0, 1]);
    let n = g.tanh(t);
    g.set_outputs(vec![n]);
    let (o, out) = check_text(&g);
    assert!(o.status.success() && out.contains("0 error(s), 0 hint(s)"), "{out}");

    let mut g = Graph::new("half");
    let x = g.input("x", Shape::new(&[64], DType::F16));
    let a = g.add(x, x);
    let e = g.exp(a);
    let t = g.tanh(e);
    g.set_outputs(vec![t]);
    let (o, out) = check_text(&g);
    assert!(o.status.success() && out.contains("0 error(s), 2 hint(s)"), "{out}");
    // The CPU has no f16 arithmetic kernels: the steps run on the reference evaluator (the
    // dispatch report calls every primitive native: some backend code runs it).
    let hints: Vec<&str> = out.lines().filter(|l| l.starts_with("hint: ")).collect();
    assert!(
        hints[0].starts_with(
            "hint: %1 (add): 3 step(s) run on the reference evaluator, much slower than a kernel: \
             the CPU has no kernel for add f16 x1, exp f16 x1, tanh f16 x1"
        ),
        "{out}"
    );
    let hint = hints[1];
    assert!(
        hint.starts_with(
            "hint: %1 (add): it and 2 more elementwise ops on f16 values (%2 (exp), %3 (tanh)) run one pass each"
        ),
        "{hint}"
    );
}

/// An ONNX model's dynamic dims are taken as 1 and the report says so (text and `--json`); a
/// model under another name is still read as ONNX (it was "binary data, not … an ONNX model").
#[test]
fn check_names_the_dims_it_assumed_for_an_onnx_model() {
    let Some(model) = rlx_fetched::or_skip(rlx_fetched::MINILM_L3_ONNX, "rlx check on MiniLM-L3") else { return };
    let dir = tempfile::tempdir().unwrap();
    let renamed = dir.path().join("model.bin");
    std::fs::copy(&model, &renamed).unwrap();
    let m = renamed.to_string_lossy();
    let o = rlx(&["check", &m]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{o:?}");
    let note = "dynamic dims taken as 1: input_ids [batch_size, sequence_length], attention_mask [batch_size, sequence_length]";
    assert_eq!(out.lines().next(), Some(format!("note: {note}").as_str()), "{out}");
    let v = common::last_json(&rlx(&["check", &m, "--json"]));
    assert_eq!((v["notes"][0].as_str(), v["hints"].as_u64()), (Some(note), Some(1)), "{v}");
    let v = common::last_json(&rlx(&["compile", &m, "--json"]));
    assert_eq!(v["notes"][0].as_str(), Some(note), "{v}");
    // The step list is in the JSON too, one object per step as the text prints them.
    let steps = v["steps"].as_array().expect("steps");
    assert_eq!(steps.len() as u64, v["lir"]["steps"].as_u64().unwrap(), "{v}");
    let text = String::from_utf8_lossy(&rlx(&["compile", &m]).stdout).into_owned();
    for s in steps {
        let line = format!(
            "  {} {} [{}] {} B",
            s["node"].as_str().unwrap(),
            s["op"].as_str().unwrap(),
            s["kernel"].as_str().unwrap(),
            s["bytes"]
        );
        assert!(text.contains(&line), "{line:?} not in the text");
    }
}

/// A structural verifier error that names a node is filed under that node, as shape errors and
/// every other finding are (it was under `graph`, the node only in the message's text); one
/// that names no node stays under `graph`.
#[test]
fn structural_errors_are_filed_under_their_node() {
    let dir = tempfile::tempdir().unwrap();
    let clean = std::fs::read_to_string(fixture("clean.json")).unwrap();
    let cases = [
        // The add reads the exp defined after it.
        (
            r#""inputs":[0,1],"outputs""#,
            r#""inputs":[0,3],"outputs""#,
            "%2 (add)",
            "uses %3, which is not defined before it",
        ),
        // An input given an operand.
        (
            r#"{"Input":{"name":"y"}},"inputs":[]"#,
            r#"{"Input":{"name":"y"}},"inputs":[0]"#,
            r#"%1 (input "y")"#,
            "takes no operands, but has 1 (%0)",
        ),
        // An input named "".
        (r#"{"Input":{"name":"y"}}"#, r#"{"Input":{"name":""}}"#, r#"%1 (input "")"#, "has an empty name"),
        // No node at fault.
        (r#""outputs":[3]}"#, r#""outputs":[]}"#, "graph", "has no outputs"),
    ];
    for (k, (from, to, node, msg)) in cases.iter().enumerate() {
        assert!(clean.contains(from), "{from}");
        let f = dir.path().join(format!("bad{k}.json"));
        std::fs::write(&f, clean.replacen(from, to, 1)).unwrap();
        let f = f.to_string_lossy().into_owned();
        let o = rlx(&["check", &f, "--json"]);
        assert_eq!(o.status.code(), Some(1), "{to}: {o:?}");
        let out = String::from_utf8_lossy(&o.stdout);
        let v: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
        assert_eq!(v["problems"][0]["node"], *node, "{v}");
        assert!(v["problems"][0]["message"].as_str().unwrap().contains(msg), "{v}");
        // rlx compile names it the same way.
        let e = one_error_line(&rlx(&["compile", &f]), &f);
        assert!(e.contains(&format!("{node}: ")) && e.contains(msg), "{e}");
    }
}

/// An importer folds `Log(-1)` into a NaN constant before `rlx check` sees the log: the
/// arithmetic that reads it is the provable NaN (0 errors before).
#[test]
fn arithmetic_on_a_nan_constant_is_an_error() {
    let mut g = Graph::new("nan_const");
    let x = g.input("x", Shape::new(&[2], DType::F32));
    let c = g.constant(Tensor::from_vec(vec![f32::NAN, 1.0], &[2]).unwrap());
    let y = g.add(x, c);
    g.set_outputs(vec![y]);
    let (o, out) = check_text(&g);
    assert_eq!(o.status.code(), Some(1), "{out}");
    assert!(out.contains("error: %2 (add): reads a constant holding NaN"), "{out}");
}

/// A graph's JSON with a symbolic input dim: `rlx check` passed it and `rlx compile` then
/// said "specialize the graph first", which the CLI cannot do. Both take the symbol as 1 and
/// say so, as for an ONNX model's dynamic dims.
#[test]
fn symbolic_dims_of_a_json_graph_are_taken_as_1_and_named() {
    let mut g = Graph::new("sym");
    let x = g.input("x", Shape::from_dims(&[rlx_ir::Dim::Sym("n".into()), rlx_ir::Dim::Static(4)], DType::F32));
    let e = g.exp(x);
    g.set_outputs(vec![e]);
    let (_dir, p) = graph_file(&g);
    let o = rlx(&["check", &p]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success() && out.starts_with("note: symbolic dims taken as 1: n\n"), "{o:?}");
    let v = common::last_json(&rlx(&["compile", &p, "--json"]));
    assert_eq!(v["notes"][0], "symbolic dims taken as 1: n", "{v}");
}
