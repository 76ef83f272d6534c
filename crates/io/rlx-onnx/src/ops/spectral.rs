//! Signal ops: `DFT` (and `STFT` over framed, windowed signals) as two real matrix products with cosine / sine tables (forward, inverse,
//! one-sided forward `rfft` and one-sided inverse `irfft`, `dft_length` padding or
//! truncating as `numpy.fft`), and the `HannWindow` / `HammingWindow` / `BlackmanWindow`
//! tables, built at import time from a known `size`.

use super::Ctx;
use crate::error::Result;
use rlx_ir::ops::DotGeneral;
use rlx_ir::{DType, NodeId, Tensor};
use std::f64::consts::PI;

/// `[rows, cols]` table `f(row, col)` as a constant of `dt`.
fn table(c: &mut Ctx, rows: usize, cols: usize, dt: DType, f: impl Fn(usize, usize) -> f64) -> Result<NodeId> {
    let v: Vec<f64> = (0..rows * cols).map(|i| f(i / cols, i % cols)).collect();
    let t = Tensor::from_vec(v, &[rows, cols]).map_err(|e| c.err(e.to_string()))?;
    Ok(c.g.constant(t.cast(dt)))
}

/// `x` (rank R) times `w [n, K]` along axis `a`, the K axis put back at `a`.
fn along(c: &mut Ctx, x: NodeId, w: NodeId, a: usize) -> NodeId {
    let r = c.rank(x);
    let y = c.g.dot_general(x, w, DotGeneral::contract(&[a], &[0]));
    let perm: Vec<usize> = (0..a).chain(std::iter::once(r - 1)).chain(a..r - 1).collect();
    c.g.transpose(y, &perm)
}

/// ONNX `DFT` (opsets 17 and 20): `input [..., N, ..., 1 | 2]` (real, or real/imaginary
/// pairs), `dft_length` (input 1), the axis (attribute `axis`, default 1, before opset 20;
/// input 2, default -2, from 20), `inverse` (scaled by 1/L), `onesided`. Result `[..., K,
/// ..., 2]` (`K = L` or `L/2 + 1` one-sided), or `[..., L, ..., 1]` for the one-sided
/// inverse (Hermitian input, real output), in the input dtype.
pub(super) fn dft(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let dims = c.dims(x)?;
    let r = dims.len();
    if r < 2 {
        return Err(c.err(format!("input {dims:?} needs rank >= 2")));
    }
    let axis =
        if c.opset >= 20 { c.opt_ints_in(2)?.and_then(|v| v.first().copied()).unwrap_or(-2) } else { c.ai("axis", 1) };
    let a = axis.rem_euclid(r as i64) as usize;
    let comp = *dims.last().unwrap_or(&0);
    if a >= r - 1 || !(comp == 1 || comp == 2) {
        return Err(c.err(format!("input {dims:?} needs a last dim of 1 or 2 and axis {axis} before it")));
    }
    let (inverse, onesided) = (c.ai("inverse", 0) != 0, c.ai("onesided", 0) != 0);
    let n_in = dims[a];
    let len = match c.opt_ints_in(1)?.and_then(|v| v.first().copied()) {
        Some(l) if l > 0 => l as usize,
        Some(l) => return Err(c.err(format!("dft_length {l} must be positive"))),
        None if inverse && onesided => 2 * n_in.saturating_sub(1),
        None => n_in,
    };
    Ok(vec![transform(c, x, a, len, inverse, onesided)?])
}

/// The DFT of `x` (`[..., N, ..., 1 | 2]`, validated by the caller) along axis `a` with
/// length `len`.
fn transform(c: &mut Ctx, x: NodeId, a: usize, len: usize, inverse: bool, onesided: bool) -> Result<NodeId> {
    let dims = c.dims(x)?;
    let (r, n_in, comp) = (dims.len(), dims[a], dims[dims.len() - 1]);
    if len == 0 {
        return Err(c.err("the transform length is 0"));
    }
    let dt = c.dtype(x);
    let part = |c: &mut Ctx, k: usize| {
        let s = c.g.slice_in_dim(x, k, k + 1, (r - 1) as i64);
        c.g.squeeze(s, &[(r - 1) as i64])
    };
    let re = part(c, 0);
    let im = if comp == 2 { Some(part(c, 1)) } else { None };
    let lf = len as f64;
    let ang = move |n: usize, k: usize| 2.0 * PI * ((n * k) % len) as f64 / lf;
    if inverse && onesided {
        // y[n] = 1/L Σ_k w_k (Re X_k cos θ − Im X_k sin θ), w_k = 1 at DC and Nyquist, else 2.
        let m = n_in.min(len / 2 + 1);
        let wk = move |k: usize| if k == 0 || 2 * k == len { 1.0 } else { 2.0 } / lf;
        let cre = table(c, m, len, dt, |k, n| wk(k) * ang(k, n).cos())?;
        let re = c.g.slice_in_dim(re, 0, m, a as i64);
        let mut y = along(c, re, cre, a);
        if let Some(im) = im {
            let cim = table(c, m, len, dt, |k, n| -wk(k) * ang(k, n).sin())?;
            let im = c.g.slice_in_dim(im, 0, m, a as i64);
            let t = along(c, im, cim, a);
            y = c.g.add(y, t);
        }
        return Ok(c.g.expand_dims(y, (r - 1) as i64));
    }
    let m = n_in.min(len);
    let k_out = if onesided { len / 2 + 1 } else { len };
    let (sign, scale) = if inverse { (1.0, 1.0 / lf) } else { (-1.0, 1.0) };
    let wre = table(c, m, k_out, dt, |n, k| scale * ang(n, k).cos())?;
    let wim = table(c, m, k_out, dt, |n, k| sign * scale * ang(n, k).sin())?;
    let re = c.g.slice_in_dim(re, 0, m, a as i64);
    let (mut yre, mut yim) = (along(c, re, wre, a), along(c, re, wim, a));
    if let Some(im) = im {
        let im = c.g.slice_in_dim(im, 0, m, a as i64);
        let (a1, a2) = (along(c, im, wim, a), along(c, im, wre, a));
        yre = c.g.sub(yre, a1);
        yim = c.g.add(yim, a2);
    }
    let (yre, yim) = (c.g.expand_dims(yre, (r - 1) as i64), c.g.expand_dims(yim, (r - 1) as i64));
    Ok(c.g.concatenate(&[yre, yim], (r - 1) as i64))
}

/// ONNX `STFT` (opset 17): `signal [B, L, 1 | 2]`, `frame_step`, optional `window [W]` and
/// `frame_length` (at least one of them; a missing window is all ones), `onesided` (default
/// 1). Frames `f·step … f·step + W` for `f < 1 + (L − W) / step`, weighted by the window and
/// transformed with length `frame_length`: `[B, frames, K, 2]`.
pub(super) fn stft(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let d = c.dims(x)?;
    let step = c.ints_in(1)?.first().copied().unwrap_or(0);
    let flen = c.opt_ints_in(3)?.and_then(|v| v.first().copied());
    let w = match (c.opt(2), flen) {
        (Some(win), _) => c.dims(win)?.first().copied().unwrap_or(0),
        (None, Some(f)) => f.max(0) as usize,
        (None, None) => return Err(c.err("needs a window or a frame_length")),
    };
    if d.len() != 3 || !(d[2] == 1 || d[2] == 2) || step <= 0 || w == 0 || w > d[1] {
        return Err(c.err(format!("signal {d:?} with frame_step {step} and window length {w} do not fit")));
    }
    let step = step as usize;
    let frames: Vec<NodeId> = (0..1 + (d[1] - w) / step)
        .map(|f| {
            let s = c.g.slice_in_dim(x, f * step, f * step + w, 1);
            c.g.expand_dims(s, 1)
        })
        .collect();
    let mut fr = if frames.len() == 1 { frames[0] } else { c.g.concatenate(&frames, 1) };
    if let Some(win) = c.opt(2) {
        let win = c.g.convert(win, c.dtype(x));
        let nf = frames.len();
        let wb = c.g.broadcast_in_dim(win, [d[0], nf, w, d[2]], &[2]);
        fr = c.g.mul(fr, wb);
    }
    let len = flen.map_or(w, |f| f.max(1) as usize);
    Ok(vec![transform(c, fr, 2, len, false, c.ai("onesided", 1) != 0)?])
}

/// `HannWindow` / `HammingWindow` / `BlackmanWindow` (opset 17): `size` (known at import
/// time) values of the window, `periodic` (default 1: denominator `size`, else `size − 1`),
/// in `output_datatype` (default float), as the ONNX reference.
pub(super) fn window(c: &mut Ctx, kind: &str) -> Result<Vec<NodeId>> {
    let size = c.ints_in(0)?.first().copied().unwrap_or(0).max(0) as usize;
    let dt = c.adtype("output_datatype", DType::F32)?;
    let n = if c.ai("periodic", 1) != 0 { size as f64 } else { size as f64 - 1.0 };
    let v: Vec<f64> = (0..size)
        .map(|i| {
            let t = i as f64 / n;
            match kind {
                "Hann" => (PI * t).sin().powi(2),
                "Hamming" => 25.0 / 46.0 - (1.0 - 25.0 / 46.0) * (2.0 * PI * t).cos(),
                _ => 0.42 - 0.5 * (2.0 * PI * t).cos() + 0.08 * (4.0 * PI * t).cos(),
            }
        })
        .collect();
    let t = Tensor::from_vec(v, &[size]).map_err(|e| c.err(e.to_string()))?;
    Ok(vec![c.g.constant(t.cast(dt))])
}

/// `MelWeightMatrix` (opset 17): `[dft_length/2 + 1, num_mel_bins]` triangular filters
/// between `lower_edge_hertz` and `upper_edge_hertz` (all inputs known at import time), in
/// `output_datatype` (default float). As the ONNX reference, the mel edges are computed in
/// f32 and the bin edges in f64, floored to spectrogram bins.
pub(super) fn mel_weight_matrix(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let first = |c: &Ctx, i: usize| c.floats_in(i).map(|v| v.first().copied().unwrap_or(0.0));
    let (mels, dft, rate) = (first(c, 0)? as i64, first(c, 1)? as i64, first(c, 2)? as i64);
    let (lo, hi) = (first(c, 3)? as f32, first(c, 4)? as f32);
    if mels <= 0 || dft <= 0 || rate <= 0 {
        return Err(c.err(format!("num_mel_bins {mels}, dft_length {dft}, sample_rate {rate} must be positive")));
    }
    let (mels, bins) = (mels as usize, (dft / 2 + 1) as usize);
    let to_mel = |f: f32| 2595f32 * (1f32 + f / 700f32).log10();
    let (lm, hm) = (to_mel(lo), to_mel(hi));
    let step = (hm - lm) / (mels + 2) as f32;
    let edge: Vec<i64> = (0..mels + 2)
        .map(|i| {
            let m = i as f64 * step as f64 + lm as f64;
            let f = 700.0 * (10f64.powf(m / 2595.0) - 1.0);
            (((dft + 1) as f64 * f) / rate as f64).floor() as i64
        })
        .collect();
    let mut out = vec![0f64; bins * mels];
    let mut set = |j: i64, i: usize, v: f64| {
        if let Ok(j) = usize::try_from(j)
            && j < bins
        {
            out[j * mels + i] = v;
        }
    };
    for i in 0..mels {
        let (l, m, h) = (edge[i], edge[i + 1], edge[i + 2]);
        if m == l {
            set(m, i, 1.0);
        } else {
            for j in l..=m {
                set(j, i, (j - l) as f64 / (m - l) as f64);
            }
        }
        if h > m {
            for j in m..h {
                set(j, i, (h - j) as f64 / (h - m) as f64);
            }
        }
    }
    let dt = c.adtype("output_datatype", DType::F32)?;
    let t = Tensor::from_vec(out, &[bins, mels]).map_err(|e| c.err(e.to_string()))?;
    Ok(vec![c.g.constant(t.cast(dt))])
}
