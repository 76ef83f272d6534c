//! Shared helpers for the tests that need downloaded files.

use std::path::PathBuf;

/// `${RLX_CACHE:-$HOME/.cache/rlx}`, as tools/fetch.sh uses.
pub fn cache_dir() -> PathBuf {
    match std::env::var_os("RLX_CACHE") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/rlx"),
    }
}
