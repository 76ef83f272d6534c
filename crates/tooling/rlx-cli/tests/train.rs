//! `rlx train`: a short seeded digits run clears a bar well above chance with a falling loss,
//! the saved weights reload to the same accuracy, reruns are deterministic, bad input is a
//! one-line error.

use serde_json::Value;
use std::process::{Command, Output};

fn rlx(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rlx")).args(args).output().unwrap()
}

fn last_json(o: &Output) -> Value {
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "rlx failed: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_str(out.lines().last().expect("a line")).expect("last stdout line is JSON")
}

#[test]
fn short_digits_run_trains_saves_and_reloads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mlp.safetensors");
    let p = path.to_str().unwrap();
    let args = ["train", "--dataset", "digits", "--model", "mlp", "--epochs", "4", "--seed", "3", "--json"];
    let a = last_json(&rlx(&[&args[..], &["--out", p]].concat()));
    let acc = a["test_accuracy"].as_f64().unwrap();
    assert!(acc > 0.85, "4 epochs reach {acc} (chance is 0.1)");
    assert!(a["seconds"].as_f64().unwrap() > 0.0);
    let losses: Vec<f64> = a["epoch_train_loss"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert!(losses.windows(2).all(|w| w[1] < w[0]), "train loss falls every epoch: {losses:?}");

    let e = last_json(&rlx(&["train", "--dataset", "digits", "--eval", p, "--json"]));
    assert_eq!(e["test_accuracy"], a["test_accuracy"], "reloaded weights give the same accuracy");
    let again = last_json(&rlx(&args));
    assert_eq!(again["epoch_train_loss"], a["epoch_train_loss"], "same seed, same run");
}

#[test]
fn bad_input_is_one_error_line() {
    for args in [
        &["train", "--optimizer", "adamx", "--epochs", "1"][..],
        &["train", "--dataset", "cifar", "--epochs", "1"],
        &["train", "--eval", "/nonexistent/model.safetensors"],
        &["train", "--batch-size", "0"],
    ] {
        let o = rlx(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.starts_with("rlx: error: ") && err.trim_end().lines().count() == 1, "{args:?}: {err}");
    }
}
