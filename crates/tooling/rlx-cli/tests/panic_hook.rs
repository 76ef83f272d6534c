//! The panic hook (`src/panic_hook.rs`, included here as it is compiled into `rlx`): a panic
//! becomes one stderr line `rlx: internal error (a bug, please report it): …` and status 101.
//! The test re-runs its own binary as a child that installs the hook and panics; the variable
//! `RLX_PANIC_HOOK_CHILD` (read by this test only, docs/env.md) tells the child apart.

#[path = "../src/panic_hook.rs"]
mod panic_hook;

use std::process::Command;

#[test]
fn a_panic_is_one_line_and_status_101() {
    if std::env::var_os("RLX_PANIC_HOOK_CHILD").is_some() {
        panic_hook::install();
        panic!("forced\n(second line)");
    }
    let exe = std::env::current_exe().unwrap();
    let o = Command::new(exe)
        .args(["--exact", "a_panic_is_one_line_and_status_101", "--nocapture", "--test-threads", "1"])
        .env("RLX_PANIC_HOOK_CHILD", "1")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(101), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("rlx: ")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].starts_with("rlx: internal error (a bug, please report it): "), "{err}");
    assert!(lines[0].contains("forced (second line)"), "newlines folded: {err}");
    assert!(!err.contains("thread '") && !err.contains("RUST_BACKTRACE"), "the default hook ran: {err}");
}
