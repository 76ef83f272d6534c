//! Checked command-line values for the benches: a bad argument prints what is wrong and the
//! usage line and exits 2, never a panic. Included by path by every rlx-cpu example (one
//! definition for all; not every example uses every function).
#![allow(dead_code)]

/// A count of at least 1 (`THREADS`, `MIN_REPS`, a dimension), or what is wrong.
pub fn count(what: &str, s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(format!("{what} must be a whole number of at least 1, got {s:?}")),
    }
}

/// A finite number of seconds >= 0 (`MIN_SECS`), or what is wrong.
pub fn secs(what: &str, s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= 0.0 => Ok(x),
        _ => Err(format!("{what} must be a number of seconds >= 0, got {s:?}")),
    }
}

/// `Ok` value, or `prog: message` and `usage` on stderr and exit status 2.
pub fn or_usage<T>(r: Result<T, String>, prog: &str, usage: &str) -> T {
    r.unwrap_or_else(|e| {
        eprintln!("{prog}: {e}\n{usage}");
        std::process::exit(2)
    })
}
