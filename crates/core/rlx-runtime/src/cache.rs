//! The compile cache: pipeline results keyed by a stable fingerprint of the canonical IR, so
//! compiling the same graph again (same shapes, constants, options and backend) skips the
//! passes. Kept in memory per [`crate::Session`] (clones of a session share it).

use rlx_compile::{CompileReport, PassOptions};
use rlx_ir::{Graph, IrError};
use std::collections::HashMap;
use std::sync::Mutex;

/// A blake3 digest identifying one compile.
pub type Fingerprint = [u8; 32];

/// blake3 over the serialized graph (the canonical JSON of `rlx_ir::hir_to_json`: ops,
/// attributes, constants' bytes, types, names), the pass options and the backend's name.
/// Param values are not part of a graph (they are set after compiling), so they never miss.
pub fn fingerprint(g: &Graph, opts: &PassOptions, backend: &str) -> Result<Fingerprint, IrError> {
    let mut h = blake3::Hasher::new();
    h.update(rlx_ir::hir_to_json(g)?.as_bytes());
    h.update(format!("{opts:?}").as_bytes());
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
