//! `RotaryEmbedding` (opset 23): rotate pairs of each head's first `rotary_embedding_dim`
//! features by the angles in `cos_cache` / `sin_cache` (indexed by `position_ids` when given),
//! pairing the two halves or, with `interleaved`, adjacent features — the ONNX reference
//! algorithm, in `[B, H, S, D]` layout.

use super::Ctx;
use super::attention::heads;
use crate::error::Result;
use rlx_ir::NodeId;

/// `X [B, H, S, D]` or `[B, S, H·D]` (with `num_heads`), `cos_cache` / `sin_cache` `[max_pos,
/// R/2]` with `position_ids [B, S]`, or `[B, S, R/2]` without; `R = rotary_embedding_dim`
/// (0: `D`). Result: the shape and dtype of `X`.
pub(super) fn rotary_embedding(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x0 = c.x(0)?;
    let three_d = c.rank(x0) == 3;
    let x = heads(c, x0, c.ai("num_heads", 0) as usize)?;
    let [b, h, s, d] =
        <[usize; 4]>::try_from(c.dims(x)?).map_err(|v| c.err(format!("X must be rank 3 or 4, got {v:?}")))?;
    let rd = match c.ai("rotary_embedding_dim", 0) {
        0 => d,
        r => r as usize,
    };
    if rd > d || rd % 2 != 0 {
        return Err(c.err(format!("rotary_embedding_dim {rd} must be even and at most the head size {d}")));
    }
    let half = rd / 2;
    let cache = |c: &mut Ctx, i: usize| -> Result<NodeId> {
        let t = c.x(i)?;
        let t = match c.opt(3) {
            Some(pos) => c.g.take(t, pos, 0),
            None => t,
        };
        if c.dims(t)? != [b, s, half] {
            return Err(c.err(format!("cos/sin cache gives {:?}, expected {:?}", c.dims(t)?, [b, s, half])));
        }
        Ok(c.g.broadcast_in_dim(t, [b, h, s, half], &[0, 2, 3]))
    };
    let (cos, sin) = (cache(c, 1)?, cache(c, 2)?);
    let xr = c.g.slice_in_dim(x, 0, rd, 3);
    let (x1, x2) = if c.ai("interleaved", 0) != 0 {
        (
            c.g.slice(xr, &[0, 0, 0, 0], &[b, h, s, rd], &[1, 1, 1, 2]),
            c.g.slice(xr, &[0, 0, 0, 1], &[b, h, s, rd], &[1, 1, 1, 2]),
        )
    } else {
        (c.g.slice_in_dim(xr, 0, half, 3), c.g.slice_in_dim(xr, half, rd, 3))
    };
    let (c1, s2, s1, c2) = (c.g.mul(cos, x1), c.g.mul(sin, x2), c.g.mul(sin, x1), c.g.mul(cos, x2));
    let (real, imag) = (c.g.sub(c1, s2), c.g.add(s1, c2));
    let mut y = if c.ai("interleaved", 0) != 0 {
        let (r, i) = (c.g.expand_dims(real, 4), c.g.expand_dims(imag, 4));
        let ri = c.g.concatenate(&[r, i], 4);
        c.g.reshape(ri, [b, h, s, rd])
    } else {
        c.g.concatenate(&[real, imag], 3)
    };
    if rd < d {
        let pass = c.g.slice_in_dim(x, rd, d, 3);
        y = c.g.concatenate(&[y, pass], 3);
    }
    if three_d {
        let t = c.g.transpose(y, &[0, 2, 1, 3]);
        y = c.g.reshape(t, [b, s, h * d]);
    }
    Ok(vec![y])
}
