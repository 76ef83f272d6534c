//! Fast f32 `conv_general_dilated` (NC… / OI… layout, any number of spatial dims): im2col into
//! a scratch buffer allocated at compile time, then one `gemm` per (batch, group).
//!
//! Every configuration of the op is covered: window strides, (negative) padding, lhs dilation
//! (transposed convolution, as the input gradient uses), rhs dilation (as the weight gradient
//! uses, with the forward strides) and feature groups. For each spatial dim a table maps
//! (window position, output position) to the input index or "zero" (padding or a dilation
//! hole), so the column fill is a gather. Column row `(ci, k…)` matches the row-major weight
//! `[O, C/G, k…]`, so group `g`'s weights are a `[O/G, C/G·Πk]` matrix used in place.
//! Results equal the reference (f64 accumulation) within f32 rounding of a `C/G·Πk`-term sum.

use super::simd::threads;
use rlx_ir::ops::ConvGeneralDilated;
use rlx_ir::{IrError, Tensor};

/// Multiply-adds per product below which `gemm` runs on one thread.
const GEMM_PAR_MACS: usize = 1 << 20;

/// A planned convolution with its im2col scratch.
#[derive(Clone, Debug)]
pub struct ConvKernel {
    /// Batch size `N`.
    n: usize,
    /// Input channels per group and groups.
    cg: usize,
    groups: usize,
    /// Output channels per group.
    og: usize,
    /// Input spatial dims and window dims.
    in_sp: Vec<usize>,
    win: Vec<usize>,
    /// Output spatial dims.
    out_sp: Vec<usize>,
    /// Per spatial dim `s`, `tab[s][k * out_sp[s] + o]` = input index, or -1 for a zero.
    tab: Vec<Vec<i64>>,
    /// Row-major strides of one input image.
    istr: Vec<usize>,
    /// `[C/G · Πwin, Πout_sp]` column matrix.
    col: Vec<f32>,
    /// Multi-index scratch (window, leading output dims), so a run allocates nothing.
    kidx: Vec<usize>,
    oidx: Vec<usize>,
}

/// Plan an f32 convolution of `x` `[N, C, …]` with `w` `[O, C/G, …]` into `out` `[N, O, …]`.
pub fn select(c: &ConvGeneralDilated, x: &[usize], w: &[usize], out: &[usize]) -> Option<ConvKernel> {
    let ns = x.len().checked_sub(2)?;
    if ns == 0 || w.len() != x.len() || out.len() != x.len() || c.feature_group_count == 0 {
        return None;
    }
    let groups = c.feature_group_count;
    let (in_sp, win, out_sp) = (x[2..].to_vec(), w[2..].to_vec(), out[2..].to_vec());
    let mut tab = Vec::with_capacity(ns);
    for s in 0..ns {
        let (ld, lo) = (c.lhs_dilation[s] as i64, c.padding[s].0);
        let mut t = Vec::with_capacity(win[s] * out_sp[s]);
        for k in 0..win[s] {
            for o in 0..out_sp[s] {
                let p = (o * c.window_strides[s] + k * c.rhs_dilation[s]) as i64 - lo;
                let ok = p >= 0 && p % ld == 0 && p / ld < in_sp[s] as i64;
                t.push(if ok { p / ld } else { -1 });
            }
        }
        tab.push(t);
    }
    let (kdim, p) = (w[1] * win.iter().product::<usize>(), out_sp.iter().product::<usize>());
    let mut istr = vec![1usize; ns];
    for s in (0..ns - 1).rev() {
        istr[s] = istr[s + 1] * in_sp[s + 1];
    }
    Some(ConvKernel {
        n: x[0],
        cg: w[1],
        groups,
        og: w[0] / groups,
        in_sp,
        win,
        out_sp,
        tab,
        istr,
        col: vec![0.0; kdim * p],
        kidx: vec![0; ns],
        oidx: vec![0; ns - 1],
    })
}

/// Run a planned convolution.
pub fn run(k: &mut ConvKernel, x: &Tensor, w: &Tensor, out: &mut Tensor) -> Result<(), IrError> {
    let err = |msg: &str| IrError::Eval { op: "conv_general_dilated".into(), msg: msg.into() };
    let (xs, ws) = (x.as_slice::<f32>(), w.as_slice::<f32>());
    let (Some(xs), Some(ws)) = (xs, ws) else { return Err(err("expected f32 operands")) };
    let o = out.as_mut_slice::<f32>().ok_or_else(|| err("expected an f32 result"))?;
    let img: usize = k.in_sp.iter().product();
    let p: usize = k.out_sp.iter().product();
    let kdim = k.cg * k.win.iter().product::<usize>();
    let c = k.cg * k.groups;
    if xs.len() != k.n * c * img || ws.len() != k.og * k.groups * kdim || o.len() != k.n * k.og * k.groups * p {
        return Err(err("operand sizes differ from the plan"));
    }
    if o.is_empty() {
        return Ok(());
    }
    let macs = k.og * p * kdim;
    let t = threads();
    let par = if t > 1 && macs >= GEMM_PAR_MACS { gemm::Parallelism::Rayon(t) } else { gemm::Parallelism::None };
    for n in 0..k.n {
        for g in 0..k.groups {
            let src = &xs[(n * c + g * k.cg) * img..][..k.cg * img];
            im2col(k, src);
            let dst = &mut o[(n * k.groups + g) * k.og * p..][..k.og * p];
            if kdim == 0 {
                dst.fill(0.0);
                continue;
            }
            let wg = &ws[g * k.og * kdim..][..k.og * kdim];
            // SAFETY: `wg` is `[og, kdim]`, `col` is `[kdim, p]` and `dst` is `[og, p]`, all
            // row-major and exactly that long (checked above and at plan time).
            unsafe {
                gemm::gemm(
                    k.og,
                    p,
                    kdim,
                    dst.as_mut_ptr(),
                    1,
                    p as isize,
                    false,
                    wg.as_ptr(),
                    1,
                    kdim as isize,
                    k.col.as_ptr(),
                    1,
                    p as isize,
                    0.0f32,
                    1.0f32,
                    false,
                    false,
                    false,
                    par,
                )
            }
        }
    }
    Ok(())
}

/// Fill `k.col` (`[cg · Πwin, Πout]`) from one group's input `src` (`[cg, in_sp…]`).
fn im2col(k: &mut ConvKernel, src: &[f32]) {
    let ns = k.in_sp.len();
    let img: usize = k.in_sp.iter().product();
    let (last_out, last_in) = (k.out_sp[ns - 1], k.in_sp[ns - 1]);
    let (istr, kidx, oidx, col) = (&k.istr, &mut k.kidx, &mut k.oidx, &mut k.col);
    let mut row = 0usize;
    let p: usize = k.out_sp.iter().product();
    for ci in 0..k.cg {
        let chan = &src[ci * img..][..img];
        // Every window position.
        kidx.fill(0);
        loop {
            let dst_row = &mut col[row * p..][..p];
            let last_tab = &k.tab[ns - 1][kidx[ns - 1] * last_out..][..last_out];
            // Every output position of the leading spatial dims; the last dim is the inner run.
            oidx.fill(0);
            let mut at = 0;
            loop {
                let mut base = Some(0usize);
                for s in 0..ns - 1 {
                    let i = k.tab[s][kidx[s] * k.out_sp[s] + oidx[s]];
                    base = base.and_then(|b| (i >= 0).then(|| b + i as usize * istr[s]));
                }
                let d = &mut dst_row[at..at + last_out];
                match base {
                    None => d.fill(0.0),
                    Some(b) => {
                        let line = &chan[b..b + last_in];
                        for (v, &i) in d.iter_mut().zip(last_tab) {
                            *v = if i >= 0 { line[i as usize] } else { 0.0 };
                        }
                    }
                }
                at += last_out;
                if !odometer(oidx, &k.out_sp[..ns - 1]) {
                    break;
                }
            }
            row += 1;
            if !odometer(kidx, &k.win) {
                break;
            }
        }
    }
}

/// Advance a row-major multi-index; `false` after the last one.
pub(crate) fn odometer(idx: &mut [usize], dims: &[usize]) -> bool {
    for s in (0..idx.len()).rev() {
        idx[s] += 1;
        if idx[s] < dims[s] {
            return true;
        }
        idx[s] = 0;
    }
    false
}
