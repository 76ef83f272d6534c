//! Fast f32 `reduce_window` (max, min, sum) for pooling and its gradients: any rank, window,
//! strides, (negative) padding, base and window dilation.
//!
//! As in [`super::conv`], each dim gets a table from (window position, output position) to
//! the operand index or "skip" (padding or a dilation hole, which read the identity). The
//! last dim is the inner loop. Max / min equal the reference exactly (NaN propagates); sum
//! accumulates in f32 in window order, within f32 rounding of the reference's f64 sum.

use rlx_ir::ops::ReduceOp;
use rlx_ir::{IrError, Tensor};

/// A planned window reduction.
#[derive(Clone, Debug)]
pub struct WindowKernel {
    op: ReduceOp,
    /// Operand dims, window dims, output dims and operand row-major strides.
    in_dims: Vec<usize>,
    win: Vec<usize>,
    out: Vec<usize>,
    istr: Vec<usize>,
    /// Per dim `a`, `tab[a][w * out[a] + o]` = operand index, or -1 to skip.
    tab: Vec<Vec<i64>>,
    /// Multi-index scratch (leading output dims, window), so a run allocates nothing.
    oidx: Vec<usize>,
    widx: Vec<usize>,
}

/// Plan `reduce_window` of an f32 operand with dims `x` into `out`; `None` for ops other than
/// sum / max / min or rank 0.
#[allow(clippy::too_many_arguments)]
pub fn plan(
    op: ReduceOp,
    x: &[usize],
    out: &[usize],
    window: &[usize],
    strides: &[usize],
    padding: &[(i64, i64)],
    base_dilation: &[usize],
    window_dilation: &[usize],
) -> Option<WindowKernel> {
    let r = x.len();
    if r == 0 || !matches!(op, ReduceOp::Sum | ReduceOp::Max | ReduceOp::Min) || out.len() != r {
        return None;
    }
    let mut tab = Vec::with_capacity(r);
    for a in 0..r {
        let bd = base_dilation[a] as i64;
        let mut t = Vec::with_capacity(window[a] * out[a]);
        for w in 0..window[a] {
            for o in 0..out[a] {
                let p = (o * strides[a] + w * window_dilation[a]) as i64 - padding[a].0;
                let ok = p >= 0 && p % bd == 0 && p / bd < x[a] as i64;
                t.push(if ok { p / bd } else { -1 });
            }
        }
        tab.push(t);
    }
    Some(WindowKernel {
        op,
        in_dims: x.to_vec(),
        win: window.to_vec(),
        out: out.to_vec(),
        istr: rlx_ir::strides_of(x),
        tab,
        oidx: vec![0; r - 1],
        widx: vec![0; r],
    })
}

/// Run a planned window reduction.
pub fn run(k: &mut WindowKernel, x: &Tensor, out: &mut Tensor) -> Result<(), IrError> {
    let err = |msg: &str| IrError::Eval { op: "reduce_window".into(), msg: msg.into() };
    let xs = x.as_slice::<f32>().ok_or_else(|| err("expected an f32 operand"))?;
    let o = out.as_mut_slice::<f32>().ok_or_else(|| err("expected an f32 result"))?;
    if xs.len() != k.in_dims.iter().product::<usize>() || o.len() != k.out.iter().product::<usize>() {
        return Err(err("operand sizes differ from the plan"));
    }
    let ident = match k.op {
        ReduceOp::Max => f32::NEG_INFINITY,
        ReduceOp::Min => f32::INFINITY,
        _ => 0.0,
    };
    o.fill(ident);
    if o.is_empty() || k.win.contains(&0) {
        return Ok(());
    }
    let r = k.in_dims.len();
    let last = k.out[r - 1];
    let (oidx, widx) = (&mut k.oidx, &mut k.widx);
    oidx.fill(0);
    for row in o.chunks_exact_mut(last) {
        widx.fill(0);
        loop {
            let mut base = Some(0usize);
            for a in 0..r - 1 {
                let i = k.tab[a][widx[a] * k.out[a] + oidx[a]];
                base = base.and_then(|b| (i >= 0).then(|| b + i as usize * k.istr[a]));
            }
            if let Some(b) = base {
                let lt = &k.tab[r - 1][widx[r - 1] * last..][..last];
                let line = &xs[b..b + k.in_dims[r - 1]];
                match k.op {
                    ReduceOp::Max => {
                        for (acc, &i) in row.iter_mut().zip(lt) {
                            if i >= 0 {
                                let v = line[i as usize];
                                *acc = if v.is_nan() || acc.is_nan() { f32::NAN } else { acc.max(v) };
                            }
                        }
                    }
                    ReduceOp::Min => {
                        for (acc, &i) in row.iter_mut().zip(lt) {
                            if i >= 0 {
                                let v = line[i as usize];
                                *acc = if v.is_nan() || acc.is_nan() { f32::NAN } else { acc.min(v) };
                            }
                        }
                    }
                    _ => {
                        for (acc, &i) in row.iter_mut().zip(lt) {
                            if i >= 0 {
                                *acc += line[i as usize];
                            }
                        }
                    }
                }
            }
            if !super::conv::odometer(widx, &k.win) {
                break;
            }
        }
        super::conv::odometer(oidx, &k.out[..r - 1]);
    }
    Ok(())
}
