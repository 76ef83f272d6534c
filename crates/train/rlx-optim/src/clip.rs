//! Global-norm gradient clipping (optax `clip_by_global_norm`, PyTorch `clip_grad_norm_`).

/// Scale all `grads` together by `max_norm / ‖g‖` when their global L2 norm `‖g‖` exceeds
/// `max_norm` (optax's rule; PyTorch divides by `‖g‖ + 1e-6`). Returns `‖g‖` before clipping.
/// A non-finite norm leaves the gradients unchanged (and is returned, so callers can skip the
/// step).
pub fn clip_grad_norm(grads: &mut [&mut [f32]], max_norm: f32) -> f32 {
    let norm = grads.iter().flat_map(|g| g.iter()).map(|&x| x as f64 * x as f64).sum::<f64>().sqrt();
    if norm.is_finite() && norm > max_norm as f64 {
        let k = max_norm as f64 / norm;
        grads.iter_mut().flat_map(|g| g.iter_mut()).for_each(|x| *x = (*x as f64 * k) as f32);
    }
    norm as f32
}
