//! The last-resort panic hook: any panic becomes one stderr line and exit status 101.
//!
//! No known input reaches it (every failure is a [`crate::error::CliError`]). It is tested by
//! `tests/panic_hook.rs`, which includes this file and panics in a child process of its own
//! test binary, so the shipped `rlx` needs no test-only switch (it had one, an environment
//! variable that forced a panic; that was a way to crash the product from the environment).

/// Install the hook: print `rlx: internal error (a bug, please report it): <message>` (newlines
/// folded) to stderr and exit with status 101.
pub fn install() {
    std::panic::set_hook(Box::new(|info| {
        let msg = info.to_string().replace('\n', " ");
        eprintln!("rlx: internal error (a bug, please report it): {msg}");
        std::process::exit(101);
    }));
}
