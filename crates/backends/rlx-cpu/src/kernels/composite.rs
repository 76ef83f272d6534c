//! Native kernels for the `softmax`, `log_softmax`, `layer_norm` and `rms_norm` composites
//! (f32, normalizing over the trailing axes), plus the slow fallback that evaluates a
//! composite's body for every other shape or dtype.
//!
//! With AVX-512 or AVX2 the rows run the kernels of [`super::norm_vec`] (online softmax: one
//! statistics pass and one write pass per row, non-temporal stores for outputs of
//! [`STREAM_MIN_BYTES`] or more); the portable versions below are the fallback.
//! Each row (the normalized trailing axes) is processed in cache: a first pass reads it from
//! memory, later passes re-read it from L1/L2, so memory sees one read and one write.
//! - `softmax`: max pass; `e = exp(x - max)` stored into the output while summing (f64); scale
//!   by `1 / sum`. A row of all `-inf` gives NaN (as `jax.nn.softmax`), `-inf` entries in a
//!   row with a finite max get weight 0, any NaN gives a NaN row.
//!   Alternative considered: the online (running max + rescaled sum) single read, which needs
//!   two `exp` per element; with rows in cache the re-read is cheaper than the extra `exp`.
//! - `log_softmax`: `(x - max) - ln Σ exp(x - max)`.
//! - `layer_norm`: `(x - mean) / sqrt(var + eps) · gamma + beta`, biased variance, mean and
//!   variance accumulated in f64 over two in-cache passes (no `E[x²] - E[x]²` cancellation).
//! - `rms_norm`: `x / sqrt(mean(x²) + eps) · gamma`.
//!
//! Attributes (from `Composite::attrs`): `axis` (Int; softmax's single axis, or the first
//! normalized axis of the norms; negative counts from the end) and `epsilon` (Float).
//! Results match the decomposition within f32 rounding (`exp` is [`super::simd::exp_f32`]).

use super::reduce::max_row;
use super::simd::{PAR_THRESHOLD, dispatch, exp_f32, threads};
use super::spin;
use rlx_ir::ops::Composite;
use rlx_ir::{Attr, DType, IrError, Tensor};

/// Output bytes from which the AVX-512 kernels write with non-temporal stores (the result
/// cannot stay in L2 and the bulk of L3 is shared: skipping the read-for-ownership of the
/// destination saves a third of the memory traffic).
pub const STREAM_MIN_BYTES: usize = 16 << 20;

/// True when an f32 result of `elems` elements is written with non-temporal stores
/// ([`STREAM_MIN_BYTES`]): the norms here and the fused elementwise kernel.
pub fn streams_f32(elems: usize) -> bool {
    elems * 4 >= STREAM_MIN_BYTES
}

/// Composite names with a native kernel here.
pub const NATIVE: &[&str] = &["softmax", "log_softmax", "layer_norm", "rms_norm"];

/// Which normalization.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NormOp {
    /// `softmax` over the last axis.
    Softmax,
    /// `log_softmax` over the last axis.
    LogSoftmax,
    /// `layer_norm` with optional gamma / beta.
    LayerNorm {
        /// Variance epsilon.
        eps: f64,
    },
    /// `rms_norm` with optional gamma.
    RmsNorm {
        /// Epsilon added to the mean square.
        eps: f64,
    },
}

/// A native composite kernel over `rows` rows of `len` contiguous elements.
#[derive(Clone, Debug, PartialEq)]
pub struct NormKernel {
    /// The operation.
    pub op: NormOp,
    /// Number of rows.
    pub rows: usize,
    /// Elements per row.
    pub len: usize,
}

impl NormKernel {
    /// Name for reports.
    pub fn name(&self) -> &'static str {
        match self.op {
            NormOp::Softmax => "softmax_f32",
            NormOp::LogSoftmax => "log_softmax_f32",
            NormOp::LayerNorm { .. } => "layer_norm_f32",
            NormOp::RmsNorm { .. } => "rms_norm_f32",
        }
    }
}

fn int_attr(c: &Composite, k: &str) -> Option<i64> {
    match c.attrs.get(k)? {
        Attr::Int(v) => Some(*v),
        _ => None,
    }
}

fn float_attr(c: &Composite, k: &str) -> Option<f64> {
    match c.attrs.get(k)? {
        Attr::Float(v) => Some(*v),
        Attr::Int(v) => Some(*v as f64),
        _ => None,
    }
}

/// A native kernel for composite `c` on operands `ins` giving `outs`, if it handles them.
pub fn select(c: &Composite, ins: &[(Vec<usize>, DType)], outs: &[(Vec<usize>, DType)]) -> Option<NormKernel> {
    let (x, xt) = ins.first()?;
    if *xt != DType::F32 || outs.len() != 1 || outs[0].0 != *x || outs[0].1 != DType::F32 {
        return None;
    }
    let rank = x.len() as i64;
    let axis = int_attr(c, "axis")?;
    let axis = if axis < 0 { axis + rank } else { axis };
    if !(0..rank).contains(&axis) {
        return None;
    }
    let axis = axis as usize;
    let rows: usize = x[..axis].iter().product();
    let len: usize = x[axis..].iter().product();
    let affine_ok =
        |n: usize| ins.len() <= n + 1 && ins[1..].iter().all(|(d, t)| *t == DType::F32 && d[..] == x[axis..]);
    let op = match c.name.as_str() {
        "softmax" | "log_softmax" if ins.len() == 1 && axis + 1 == x.len() => {
            if c.name == "softmax" {
                NormOp::Softmax
            } else {
                NormOp::LogSoftmax
            }
        }
        "layer_norm" if affine_ok(2) => NormOp::LayerNorm { eps: float_attr(c, "epsilon")? },
        "rms_norm" if affine_ok(1) => NormOp::RmsNorm { eps: float_attr(c, "epsilon")? },
        _ => return None,
    };
    Some(NormKernel { op, rows, len })
}

/// Run a native composite kernel into the preallocated `out`.
pub fn run(k: &NormKernel, ins: &[&Tensor], out: &mut Tensor) -> Result<(), IrError> {
    let err = || IrError::Eval { op: k.name().into(), msg: "operands differ from the plan".into() };
    let x = ins[0].as_slice::<f32>().ok_or_else(err)?;
    let gamma = ins.get(1).map(|t| t.as_slice::<f32>().ok_or_else(err)).transpose()?;
    let beta = ins.get(2).map(|t| t.as_slice::<f32>().ok_or_else(err)).transpose()?;
    let y = out.as_mut_slice::<f32>().ok_or_else(err)?;
    let len = k.len;
    if x.len() != k.rows * len
        || y.len() != x.len()
        || gamma.is_some_and(|g| g.len() != len)
        || beta.is_some_and(|b| b.len() != len)
    {
        return Err(err());
    }
    if y.is_empty() {
        return Ok(());
    }
    // The vector row kernels of the widest SIMD level this CPU has (None: the portable rows).
    #[cfg(target_arch = "x86_64")]
    let vk = super::norm_vec::RowKernels::best();
    let stream = streams_f32(y.len());
    // Rows run in parallel tasks of at least `per_task` rows when `par` (`len > 0`: `y` is not
    // empty).
    let par = x.len() >= PAR_THRESHOLD && threads() > 1 && k.rows > 1;
    // At most 4 tasks per thread: the team hands tasks out in turn, so small ones interleave
    // the threads' rows (a [4096, 4096] softmax / layer_norm on 2 threads ran 10-15% slower
    // with tasks of PAR_THRESHOLD / 4 elements than rayon's contiguous halves).
    let per_task = (PAR_THRESHOLD / 4 / len).max(k.rows.div_ceil(4 * threads())).max(1);
    #[cfg(target_arch = "x86_64")]
    if let Some(vk) = vk.filter(|_| k.op == NormOp::Softmax && len <= super::norm_vec::SCRATCH) {
        // Blocks of rows: each row's write pass overlaps the next row's `exp` pass.
        let rows = if par { per_task.min(k.rows) } else { k.rows };
        let block = |(b, yb): (usize, &mut [f32])| {
            let at = b * rows * len;
            let xb = &x[at..at + yb.len()];
            let next = x.get(at + yb.len()..(at + yb.len() + len).min(x.len())).unwrap_or(&[]);
            // SAFETY: `best` lists only kernels the CPU runs; `xb` / `yb` hold whole rows of
            // `len` ≤ SCRATCH.
            unsafe { (vk.softmax_rows)(xb, yb, len, stream, next) }
        };
        if rows < k.rows {
            spin::for_chunks_mut(y, rows * len, |b, yb| block((b, yb)));
        } else {
            block((0, y));
        }
        return Ok(());
    }
    let row = |(i, yr): (usize, &mut [f32])| {
        let xr = &x[i * len..(i + 1) * len];
        let next = x.get((i + 1) * len..(i + 2) * len).unwrap_or(&[]);
        #[cfg(target_arch = "x86_64")]
        if let Some(v) = vk {
            // SAFETY: `best` lists only kernels the CPU runs; gamma / beta have `len` elements
            // (checked).
            unsafe {
                match k.op {
                    NormOp::Softmax => (v.softmax_row)(xr, yr, false, stream, next),
                    NormOp::LogSoftmax => (v.softmax_row)(xr, yr, true, stream, next),
                    NormOp::LayerNorm { eps } => (v.layer_norm_row)(xr, yr, eps, gamma, beta, stream),
                    NormOp::RmsNorm { eps } => (v.rms_norm_row)(xr, yr, eps, gamma, stream),
                }
            }
            return;
        }
        let _ = (stream, next);
        match k.op {
            NormOp::Softmax => dispatch(
                #[inline(always)]
                || softmax_row(xr, yr),
            ),
            NormOp::LogSoftmax => dispatch(
                #[inline(always)]
                || log_softmax_row(xr, yr),
            ),
            NormOp::LayerNorm { eps } => dispatch(
                #[inline(always)]
                || layer_norm_row(xr, yr, eps, gamma, beta),
            ),
            NormOp::RmsNorm { eps } => dispatch(
                #[inline(always)]
                || rms_norm_row(xr, yr, eps, gamma),
            ),
        }
    };
    if par {
        // Tasks of `per_task` rows on the executor's spinning team (rayon wakes sleeping workers
        // per op: tens of µs).
        spin::for_chunks_mut(y, per_task * len, |t, yt| {
            yt.chunks_mut(len).enumerate().for_each(|(j, yr)| row((t * per_task + j, yr)))
        });
    } else {
        y.chunks_mut(len).enumerate().for_each(row);
    }
    Ok(())
}

#[inline(always)]
fn softmax_row(x: &[f32], y: &mut [f32]) {
    let m = max_row(x);
    let s = exp_sum(x, m, Some(y));
    let r = (1.0 / s) as f32;
    y.iter_mut().for_each(|v| *v *= r);
}

#[inline(always)]
fn log_softmax_row(x: &[f32], y: &mut [f32]) {
    let m = max_row(x);
    let lse = exp_sum(x, m, None).ln() as f32;
    y.iter_mut().zip(x).for_each(|(o, &v)| *o = (v - m) - lse);
}

/// `Σ exp(x - m)`, optionally storing each `exp` into `y`. Sums 16 f32 lanes over blocks of
/// 256 elements (at most 16 terms per lane, each ≤ 1) and adds the blocks in f64, so the
/// error stays at a few f32 ulps for any row length.
#[inline(always)]
fn exp_sum(x: &[f32], m: f32, mut y: Option<&mut [f32]>) -> f64 {
    const BLOCK: usize = 256;
    let mut total = 0f64;
    for (bi, xb) in x.chunks(BLOCK).enumerate() {
        let mut acc = [0f32; 16];
        let mut tail = 0f32;
        let mut xc = xb.chunks_exact(16);
        match y.as_deref_mut() {
            Some(y) => {
                let yb = &mut y[bi * BLOCK..bi * BLOCK + xb.len()];
                let mut yc = yb.chunks_exact_mut(16);
                for (xs, ys) in (&mut xc).zip(&mut yc) {
                    for j in 0..16 {
                        let e = exp_f32(xs[j] - m);
                        ys[j] = e;
                        acc[j] += e;
                    }
                }
                for (&v, o) in xc.remainder().iter().zip(yc.into_remainder()) {
                    let e = exp_f32(v - m);
                    *o = e;
                    tail += e;
                }
            }
            None => {
                for xs in &mut xc {
                    for j in 0..16 {
                        acc[j] += exp_f32(xs[j] - m);
                    }
                }
                for &v in xc.remainder() {
                    tail += exp_f32(v - m);
                }
            }
        }
        total += acc.iter().map(|&v| v as f64).sum::<f64>() + tail as f64;
    }
    total
}

/// `Σ f(x)` in f64 with 16 lanes.
#[inline(always)]
fn sum_map(x: &[f32], f: impl Fn(f32) -> f64) -> f64 {
    let mut acc = [0f64; 16];
    let mut xc = x.chunks_exact(16);
    for xs in &mut xc {
        for j in 0..16 {
            acc[j] += f(xs[j]);
        }
    }
    xc.remainder().iter().map(|&v| f(v)).sum::<f64>() + acc.iter().sum::<f64>()
}

#[inline(always)]
fn layer_norm_row(x: &[f32], y: &mut [f32], eps: f64, gamma: Option<&[f32]>, beta: Option<&[f32]>) {
    let n = x.len() as f64;
    let mean = sum_map(x, |v| v as f64) / n;
    let var = sum_map(x, |v| {
        let d = v as f64 - mean;
        d * d
    }) / n;
    let rstd = (1.0 / (var + eps).sqrt()) as f32;
    let mean = mean as f32;
    match (gamma, beta) {
        (Some(g), Some(b)) => {
            for (((o, &v), &g), &b) in y.iter_mut().zip(x).zip(g).zip(b) {
                *o = (v - mean) * rstd * g + b;
            }
        }
        (Some(g), None) => y.iter_mut().zip(x).zip(g).for_each(|((o, &v), &g)| *o = (v - mean) * rstd * g),
        _ => y.iter_mut().zip(x).for_each(|(o, &v)| *o = (v - mean) * rstd),
    }
}

#[inline(always)]
fn rms_norm_row(x: &[f32], y: &mut [f32], eps: f64, gamma: Option<&[f32]>) {
    let ms = sum_map(x, |v| (v as f64) * (v as f64)) / x.len() as f64;
    let r = (1.0 / (ms + eps).sqrt()) as f32;
    match gamma {
        Some(g) => y.iter_mut().zip(x).zip(g).for_each(|((o, &v), &g)| *o = v * r * g),
        None => y.iter_mut().zip(x).for_each(|(o, &v)| *o = v * r),
    }
}

/// The slow fallback: evaluate the composite's body with the reference interpreter and move
/// its results into `outs` (allocates).
pub fn run_body(c: &Composite, ins: &[&Tensor], outs: &mut [Tensor]) -> Result<(), IrError> {
    let res = rlx_ir::interp::evaluate_args(&c.body, ins)?;
    if res.len() != outs.len() {
        return Err(IrError::Eval {
            op: c.name.clone(),
            msg: format!("body returned {} results for {} outputs", res.len(), outs.len()),
        });
    }
    for (o, r) in outs.iter_mut().zip(res) {
        *o = r;
    }
    Ok(())
}
