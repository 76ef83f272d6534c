//! The compile cache: pipeline results keyed by a stable fingerprint of the canonical IR, so
//! compiling the same graph again (same shapes, constants, options and backend) skips the
//! passes. Kept in memory per [`crate::Session`] (clones of a session share it).

mod canon;

use rlx_compile::{CompileReport, PassOptions};
use rlx_ir::{Graph, IrError};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Mutex;

/// A blake3 digest identifying one compile.
pub type Fingerprint = [u8; 32];

/// blake3 over the canonical encoding of the graph (every node's op with its attributes and
/// sub-graphs, operands, result types, the input / param / output lists and the graph's name;
/// constants as dtype, dims and their raw little-endian bytes), the pass options (their
/// `Debug` form: a few flags and composite names) and the backend's name. The encoding is
/// tagged and self-delimiting, names enum variants by name, and writes floats as their bits
/// (see `cache/canon.rs`), so it is the same in every process and on every run, and a
/// one-ulp change of a constant or any attribute changes it. No JSON and no `Debug` string of
/// the graph is built. Param values are not part of a graph (they are set after compiling),
/// so they never miss.
///
/// Errors: the graph carries a recorded builder error ([`IrError`]), or a value fails to
/// serialize ([`IrError::Serde`]).
pub fn fingerprint(g: &Graph, opts: &PassOptions, backend: &str) -> Result<Fingerprint, IrError> {
    if let Some(e) = g.error() {
        return Err(e.clone());
    }
    let mut h = blake3::Hasher::new();
    h.update(b"rlx-fingerprint-v1");
    let mut c = canon::Canon::new(&mut h);
    g.serialize(&mut c).map_err(|e| IrError::Serde(e.to_string()))?;
    c.finish();
    let o = format!("{opts:?}");
    h.update(&(o.len() as u64).to_le_bytes());
    h.update(o.as_bytes());
    h.update(backend.as_bytes());
    Ok(*h.finalize().as_bytes())
}

/// Optimized graphs and their reports by fingerprint.
#[derive(Default)]
pub(crate) struct CompileCache {
    map: Mutex<HashMap<Fingerprint, (Graph, CompileReport)>>,
}

impl CompileCache {
    pub(crate) fn get(&self, k: &Fingerprint) -> Option<(Graph, CompileReport)> {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).get(k).cloned()
    }
    pub(crate) fn insert(&self, k: Fingerprint, v: (Graph, CompileReport)) {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).insert(k, v);
    }
}
