//! JSON serialization of graphs (serde). Tensors inside constants keep exact bits (hex).

use crate::{Graph, IrError, verify};

/// Serialize a graph (with its sub-graphs and constants) to JSON.
///
/// Errors if the graph carries a recorded builder error (a broken graph is not saved).
pub fn hir_to_json(g: &Graph) -> Result<String, IrError> {
    if let Some(e) = g.error() {
        return Err(e.clone());
    }
    serde_json::to_string(g).map_err(|e| IrError::Serde(e.to_string()))
}

/// Parse a graph from JSON and [`verify`] it, so a hand-edited or truncated file is reported
/// as an error rather than run.
pub fn hir_from_json(s: &str) -> Result<Graph, IrError> {
    let g: Graph = serde_json::from_str(s).map_err(|e| IrError::Serde(e.to_string()))?;
    verify(&g)?;
    Ok(g)
}
