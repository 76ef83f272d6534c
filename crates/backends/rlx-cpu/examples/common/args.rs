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

/// A number of seconds in [0, 3600] (`MIN_SECS`), or what is wrong.
pub fn secs(what: &str, s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(x) if (0.0..=3600.0).contains(&x) => Ok(x),
        _ => Err(format!("{what} must be a number of seconds from 0 to 3600, got {s:?}")),
    }
}

/// Most f32 elements one bench operand may have (4 GiB): larger dims are refused before any
/// allocation (an allocation failure aborts the process instead of returning an error).
pub const MAX_ELEMENTS: usize = 1 << 30;

/// The element count of an operand of `dims`, or what is wrong when it exceeds
/// [`MAX_ELEMENTS`] (or overflows).
pub fn elements(what: &str, dims: &[usize]) -> Result<usize, String> {
    match dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d)) {
        Some(n) if n <= MAX_ELEMENTS => Ok(n),
        _ => Err(format!(
            "{what} of shape {dims:?}: more than {MAX_ELEMENTS} elements (4 GiB of f32), too large for a bench"
        )),
    }
}

/// `Ok` value, or `prog: error: message` on stderr and exit status 1 (a failure after the
/// arguments were accepted, such as a compile error).
pub fn or_exit<T, E: std::fmt::Display>(r: Result<T, E>, prog: &str) -> T {
    r.unwrap_or_else(|e| {
        eprintln!("{prog}: error: {e}");
        std::process::exit(1)
    })
}

/// `Ok` value, or `prog: message` and `usage` on stderr and exit status 2.
pub fn or_usage<T>(r: Result<T, String>, prog: &str, usage: &str) -> T {
    r.unwrap_or_else(|e| {
        eprintln!("{prog}: {e}\n{usage}");
        std::process::exit(2)
    })
}
