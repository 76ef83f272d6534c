//! `rlx train`: a short seeded digits run clears a bar well above chance with a falling loss,
//! the saved weights reload to the same accuracy, reruns are deterministic, `--eval` takes the
//! model and data set from the file (a contradicting flag is an error), bad input is a
//! one-line error.

mod common;
use common::{last_json, one_error_line, rlx, stderr};

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

    // Each epoch's line reaches stderr even when it is not a terminal (here a pipe), with and
    // without --json.
    let o = rlx(&["train", "--epochs", "2", "--seed", "3"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success() && err.contains("epoch 1/2: train loss") && err.contains("epoch 2/2: "), "{err}");
    let e = last_json(&rlx(&["train", "--dataset", "digits", "--eval", p, "--json"]));
    assert_eq!(e["test_accuracy"], a["test_accuracy"], "reloaded weights give the same accuracy");
    let again = last_json(&rlx(&args));
    assert_eq!(again["epoch_train_loss"], a["epoch_train_loss"], "same seed, same run");

    // `--threads` as on `generate`: one thread trains as well; 0 is clap's range error.
    let one = last_json(&rlx(&[&args[..], &["--threads", "1"]].concat()));
    assert!(one["test_accuracy"].as_f64().unwrap() > 0.85, "{one}");
    assert_eq!(rlx(&["train", "--threads", "0"]).status.code(), Some(2));
}

#[test]
fn threads_above_the_cores_are_clamped_with_one_note() {
    // rlx-cpu clamps --threads to the cores; the clamp was silent. One note on stderr (not one
    // per compile: training and each epoch's evaluation compile), none on stdout.
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    let o = rlx(&["train", "--epochs", "1", "--threads", "100000", "--json"]);
    assert!(last_json(&o)["test_accuracy"].as_f64().is_some());
    let err = stderr(&o);
    let s = if cores == 1 { "" } else { "s" };
    let note = format!("rlx: note: --threads 100000 is more than the {cores} available core{s}; using {cores}\n");
    assert_eq!(err.matches(&note).count(), 1, "{err}");
    assert!(!String::from_utf8_lossy(&o.stdout).contains("note"));
    let o = rlx(&["train", "--epochs", "1", "--threads", "1", "--json"]);
    assert!(o.status.success() && !stderr(&o).contains("note:"), "{}", stderr(&o));
    // A bad flag found before anything is compiled is still the one error line, no note.
    one_error_line(&rlx(&["train", "--threads", "100000", "--batch-size", "0"]), "train");
}

#[test]
fn eval_follows_the_file_and_rejects_contradicting_flags() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cnn.safetensors");
    let p = path.to_str().unwrap();
    let a = last_json(&rlx(&["train", "--model", "cnn", "--epochs", "1", "--out", p, "--json"]));
    assert_eq!(a["model"], "cnn");
    // No --model: the file's (cnn), not the flag's default (mlp).
    let e = last_json(&rlx(&["train", "--eval", p, "--json"]));
    assert_eq!((e["model"].as_str(), e["dataset"].as_str()), (Some("cnn"), Some("digits")));
    assert_eq!(e["test_accuracy"], a["test_accuracy"]);
    let err = one_error_line(&rlx(&["train", "--eval", p, "--model", "mlp"]), p);
    assert!(err.contains("trained as cnn, but --model is mlp"), "{err}");
    let err = one_error_line(&rlx(&["train", "--eval", p, "--dataset", "mnist5k"]), p);
    assert!(err.contains("trained on digits, but --dataset is mnist5k"), "{err}");
}

#[test]
fn bad_input_is_one_error_line() {
    for args in [
        &["train", "--batch-size", "0"][..],
        &["train", "--lr=-0.1", "--epochs", "1"],
        &["train", "--clip", "0", "--epochs", "1"],
    ] {
        one_error_line(&rlx(args), "train");
    }
    // A zero count is a usage error (status 2), as `--threads 0` is; so are an unknown
    // optimizer or data set (they were status 1, found after the arguments were parsed).
    for (args, msg) in [
        (&["train", "--epochs", "0"][..], "must be at least 1"),
        (&["train", "--optimizer", "adamx", "--epochs", "1"], "unknown optimizer (one of sgd, momentum"),
        (&["train", "--dataset", "cifar", "--epochs", "1"], "unknown data set \"cifar\" (digits, mnist5k)"),
    ] {
        let o = rlx(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(msg), "{}", stderr(&o));
    }
    let missing = "/nonexistent/model.safetensors";
    let err = one_error_line(&rlx(&["train", "--eval", missing]), missing);
    assert!(err.ends_with(": No such file or directory (os error 2)\n"), "the path once: {err}");
    // --out is checked before training, not after it.
    let err = one_error_line(&rlx(&["train", "--out", missing]), "train");
    assert!(err.contains("the directory /nonexistent does not exist"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    let gguf = dir.path().join("w.gguf");
    std::fs::write(&gguf, b"GGUF\x03\x00\x00\x00").unwrap();
    let g = gguf.to_str().unwrap();
    let err = one_error_line(&rlx(&["train", "--eval", g]), g);
    assert!(err.contains("is a GGUF file, but --eval reads the safetensors file"), "{err}");
    // A file of no known format: not the safetensors reader's "declared header length …".
    let junk = dir.path().join("w.bin");
    std::fs::write(&junk, b"hello world\n").unwrap();
    let j = junk.to_str().unwrap();
    let err = one_error_line(&rlx(&["train", "--eval", j]), j);
    assert!(err.contains("unknown model format (expected the .safetensors file of `rlx train --out`)"), "{err}");
}

#[test]
fn out_named_as_another_format_is_refused_before_training() {
    // It used to write safetensors under the name, which `--eval` then called a GGUF file.
    let dir = tempfile::tempdir().unwrap();
    for name in ["w.gguf", "w.onnx", "w.npz"] {
        let out = dir.path().join(name);
        let o = out.to_str().unwrap();
        // A usage error (status 2) before anything runs.
        let r = rlx(&["train", "--epochs", "1", "--out", o]);
        assert_eq!(r.status.code(), Some(2), "{o}");
        assert!(stderr(&r).contains("rlx train writes safetensors; name it .safetensors"), "{}", stderr(&r));
        assert!(!out.exists(), "nothing written to {o}");
    }
}

#[test]
fn an_unknown_data_set_is_a_usage_error() {
    // Once "rlx: error: train: trainer: unknown data set …", then status 1: now clap's.
    let o = rlx(&["train", "--dataset", "nope"]);
    assert_eq!(o.status.code(), Some(2));
    let e = stderr(&o);
    assert!(
        e.starts_with(
            "error: invalid value 'nope' for '--dataset <DATASET>': unknown data set \"nope\" (digits, mnist5k)"
        ),
        "{e}"
    );
}

#[test]
fn eval_of_a_foreign_safetensors_file_says_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("foreign.safetensors");
    // A valid safetensors file with one tensor and no rlx.* metadata.
    let header = br#"{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#;
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend_from_slice(header);
    bytes.extend_from_slice(&1f32.to_le_bytes());
    std::fs::write(&path, bytes).unwrap();
    let p = path.to_str().unwrap();
    let err = one_error_line(&rlx(&["train", "--eval", p]), p);
    assert!(err.contains("no rlx.model metadata: not a file written by `rlx train --out`"), "{err}");
    assert!(!err.contains("None"), "no Debug text in the message: {err}");
}

#[test]
fn a_negative_lr_or_clip_is_the_range_error_not_clap_unexpected_argument() {
    // `--lr -1` was clap's "unexpected argument '-1' found" (status 2, five lines); only the
    // `--lr=-1` spelling reached the range check.
    for (flag, want) in
        [("--lr", "--lr must be a positive number, not -1"), ("--clip", "--clip must be a positive number, not -1")]
    {
        let err = one_error_line(&rlx(&["train", flag, "-1", "--epochs", "1"]), "train");
        assert!(err.contains(want), "{err}");
    }
}
