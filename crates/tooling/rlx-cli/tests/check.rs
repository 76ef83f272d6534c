//! `rlx check` and `rlx compile` on small graphs: a shape error and a provable NaN each name
//! the node and exit non-zero; a clean graph passes; `compile --dump --json` reports the plan.

use rlx_ir::{DType, Graph, Shape, Tensor};
use std::path::PathBuf;
use std::process::{Command, Output};

fn rlx(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rlx")).args(args).output().unwrap()
}

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
    for (name, text) in [("clean.json", ok), ("shape_error.json", bad), ("nan.json", nan)] {
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
