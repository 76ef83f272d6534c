//! `Col2Im` (opset 18): sum sliding-window columns back into an image, as one matrix product
//! with a constant 0/1 placement matrix (window element × window position → pixel).

use super::Ctx;
use crate::error::Result;
use rlx_ir::{NodeId, Tensor};

/// Largest placement matrix (elements) built; larger problems are refused with the node named.
const MAX_PLACEMENT: usize = 1 << 24;

/// `input [N, C·Πblock, L]`, `image_shape` and `block_shape` (known at import time),
/// attributes `dilations`, `pads` (begin…, end…), `strides`; result `[N, C, *image_shape]`
/// where every column value is added at `position·stride + offset·dilation − pad_begin` when
/// that lands inside the image.
pub(super) fn col2im(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let xd = c.dims(x)?;
    let img: Vec<usize> = c.ints_in(1)?.iter().map(|&v| v.max(0) as usize).collect();
    let blk: Vec<usize> = c.ints_in(2)?.iter().map(|&v| v.max(0) as usize).collect();
    let nd = img.len();
    let attr = |c: &Ctx, name: &str, n: usize, d: i64| c.aints(name).unwrap_or(vec![d; n]);
    let (dil, st, pads) = (attr(c, "dilations", nd, 1), attr(c, "strides", nd, 1), attr(c, "pads", 2 * nd, 0));
    let kk: usize = blk.iter().product();
    if nd == 0 || blk.len() != nd || xd.len() != 3 || kk == 0 || xd[1] % kk != 0 {
        return Err(c.err(format!("input {xd:?}, image_shape {img:?}, block_shape {blk:?} do not fit")));
    }
    if dil.len() != nd || st.len() != nd || pads.len() != 2 * nd || dil.iter().chain(&st).any(|&v| v < 1) {
        return Err(c.err("dilations / strides need one positive entry per spatial dim, pads two"));
    }
    // Window positions per dim.
    let mut npos = vec![];
    for d in 0..nd {
        let span = (dil[d] as usize) * (blk[d].max(1) - 1) + 1;
        let padded = img[d] as i64 + pads[d] + pads[nd + d];
        if padded < span as i64 {
            return Err(c.err(format!("dim {d}: the block does not fit the padded image")));
        }
        npos.push(((padded - span as i64) / st[d]) as usize + 1);
    }
    let l: usize = npos.iter().product();
    let p: usize = img.iter().product();
    if xd[2] != l || kk * l * p > MAX_PLACEMENT {
        return Err(c.err(format!("input has {} columns, the geometry gives {l} (or the problem is too large)", xd[2])));
    }
    let unflat = |mut i: usize, dims: &[usize]| -> Vec<usize> {
        let mut v = vec![0; dims.len()];
        for d in (0..dims.len()).rev() {
            v[d] = i % dims[d];
            i /= dims[d];
        }
        v
    };
    let mut m = vec![0f32; kk * l * p];
    for k in 0..kk {
        let off = unflat(k, &blk);
        for w in 0..l {
            let pos = unflat(w, &npos);
            let mut flat = 0usize;
            let mut inside = true;
            for d in 0..nd {
                let o = (pos[d] as i64) * st[d] + (off[d] as i64) * dil[d] - pads[d];
                inside &= o >= 0 && (o as usize) < img[d];
                flat = flat * img[d] + o.max(0) as usize;
            }
            if inside {
                m[(k * l + w) * p + flat] = 1.0;
            }
        }
    }
    let (n, ch) = (xd[0], xd[1] / kk);
    let mt = Tensor::from_vec(m, &[kk * l, p]).map_err(|e| c.err(e.to_string()))?;
    let mt = c.g.constant(mt.cast(c.dtype(x)));
    let rows = c.g.reshape(x, [n * ch, kk * l]);
    let y = c.g.mm(rows, mt);
    let mut out = vec![n, ch];
    out.extend(&img);
    Ok(vec![c.g.reshape(y, out)])
}
