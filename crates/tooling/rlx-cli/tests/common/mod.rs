//! Helpers shared by the `rlx` process tests: run the binary, read its last JSON line, check
//! the one-line error contract. Fetched models come from `rlx_fetched` (SKIP when absent).

// Each test file uses a subset.
#![allow(dead_code)]

use std::ffi::OsStr;
use std::process::{Command, Output};

use serde_json::Value;

/// Run the `rlx` binary under test with `args`.
pub fn rlx<S: AsRef<OsStr>>(args: &[S]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rlx")).args(args).output().expect("run rlx")
}

/// The process's stderr as text.
pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The last stdout line parsed as JSON, after checking the process succeeded.
pub fn last_json(o: &Output) -> Value {
    assert!(o.status.success(), "rlx failed ({:?}): {}", o.status, stderr(o));
    let out = String::from_utf8_lossy(&o.stdout);
    serde_json::from_str(out.lines().last().expect("a stdout line")).expect("the last stdout line is JSON")
}

/// A failure by the contract: status 1, exactly one stderr line starting with
/// `rlx: error: <subject>: `, no panic text. Returns the line.
pub fn one_error_line(o: &Output, subject: &str) -> String {
    let e = stderr(o);
    assert_eq!(o.status.code(), Some(1), "status {:?}: {e}", o.status);
    assert_eq!(e.trim_end().lines().count(), 1, "one line on stderr: {e}");
    assert!(e.starts_with(&format!("rlx: error: {subject}: ")), "prefix `rlx: error: {subject}: ` in {e}");
    assert!(!e.contains("panicked") && !e.contains("internal error"), "{e}");
    e
}
