//! Native kernel for the `rope` composite (`rlx_ir::Graph::rope_with_style`), f32: one pass
//! over `x` instead of its body's reshape, `rev`, sign multiply and three elementwise ops.
//!
//! Per head row of `D` and its position's `cos` / `sin` rows, with `p(i)` the slot paired with
//! `i` (rotate-half: `i ± D/2`; adjacent pairs: `i ^ 1`) and `σ(i) = -1` for the first slot of
//! each pair, `+1` for the second:
//! `y[i] = x[i] · cos[i] + (σ(i) · x[p(i)]) · sin[i]`, two products and one sum each rounded to
//! f32 (no FMA) — the body's `mul`, `mul`, `add` in the same order, so the same bits as the
//! reference evaluation (`tests/rope.rs`).
//!
//! Layouts: `x` `[.., S, H, D]` (`"shd"`: the row of head `h` at position `s` reads `cos[s]`) or
//! `[.., H, S, D]` (`"hsd"`); `cos`, `sin` `[S, D]`. Other dtypes and shapes run the body.
//!
//! In SmolLM2-135M decode (30 layers, `q` and `k` per layer) the body cost 2 `rev`, 2 `mul`
//! and 2 fused elementwise steps per layer: about 5% of a token's step time at 1 thread.

use super::simd::{PAR_THRESHOLD, dispatch, threads};
use super::spin;
use rlx_ir::ops::Composite;
use rlx_ir::{Attr, DType, IrError, Tensor};

/// The composite's name.
pub const NAME: &str = "rope";

/// A planned `rope` over `outer · S · H` rows of `D`.
#[derive(Clone, Debug, PartialEq)]
pub struct RopeKernel {
    /// Product of the dims before the (S, H) or (H, S) pair.
    outer: usize,
    /// Positions (rows of `cos` / `sin`).
    s: usize,
    /// Heads.
    h: usize,
    /// Head dim (even).
    d: usize,
    /// `[.., H, S, D]` rather than `[.., S, H, D]`.
    hsd: bool,
    /// Adjacent pairs `(2i, 2i + 1)` rather than rotate-half `(i, i + D/2)`.
    adjacent: bool,
}

impl RopeKernel {
    /// Name for reports.
    pub fn name(&self) -> &'static str {
        "rope_f32"
    }
}

/// The kernel for `rope` composite `c` on `ins` = `[x, cos, sin]` giving `outs`, when all are
/// f32 with the shapes `Graph::rope_with_style` checks and known attrs; `None` otherwise.
pub fn select(c: &Composite, ins: &[(Vec<usize>, DType)], outs: &[(Vec<usize>, DType)]) -> Option<RopeKernel> {
    if c.name != NAME || ins.len() != 3 || outs.len() != 1 || ins.iter().chain(outs).any(|(_, t)| *t != DType::F32) {
        return None;
    }
    let x = &ins[0].0;
    let r = x.len();
    if r < 3 || outs[0].0 != *x {
        return None;
    }
    let str_attr = |k: &str, default: &'static str| match c.attrs.get(k) {
        None => Some(default.to_string()),
        Some(Attr::Str(v)) => Some(v.clone()),
        Some(_) => None,
    };
    let hsd = match str_attr("layout", "shd")?.as_str() {
        "shd" => false,
        "hsd" => true,
        _ => return None,
    };
    let adjacent = match str_attr("style", "rotate_half")?.as_str() {
        "rotate_half" => false,
        "adjacent_pairs" => true,
        _ => return None,
    };
    let (d, a, b) = (x[r - 1], x[r - 3], x[r - 2]);
    let (s, h) = if hsd { (b, a) } else { (a, b) };
    if d % 2 != 0 || ins[1].0 != [s, d] || ins[2].0 != [s, d] {
        return None;
    }
    Some(RopeKernel { outer: x[..r - 3].iter().product(), s, h, d, hsd, adjacent })
}

/// Run `k` on `ins` = `[x, cos, sin]` into `out`.
///
/// Errors: operands whose lengths or dtypes differ from the plan.
pub fn run(k: &RopeKernel, ins: &[&Tensor], out: &mut Tensor) -> Result<(), IrError> {
    let err = || IrError::Eval { op: NAME.into(), msg: "operands differ from the plan".into() };
    let [x, cos, sin] = ins else { return Err(err()) };
    let (x, cos, sin) = (
        x.as_slice::<f32>().ok_or_else(err)?,
        cos.as_slice::<f32>().ok_or_else(err)?,
        sin.as_slice::<f32>().ok_or_else(err)?,
    );
    let y = out.as_mut_slice::<f32>().ok_or_else(err)?;
    let (d, rows) = (k.d, k.outer * k.s * k.h);
    if x.len() != rows * d || y.len() != x.len() || cos.len() != k.s * d || sin.len() != k.s * d {
        return Err(err());
    }
    if y.is_empty() {
        return Ok(());
    }
    // Position of row `i` (row-major over `[outer, S, H]` or `[outer, H, S]`).
    let pos = |i: usize| if k.hsd { i % k.s } else { i / k.h % k.s };
    let block = |first: usize, yb: &mut [f32]| {
        dispatch(
            #[inline(always)]
            || {
                for (j, yr) in yb.chunks_exact_mut(d).enumerate() {
                    let i = first + j;
                    let at = pos(i) * d;
                    let xr = &x[i * d..(i + 1) * d];
                    rope_row(xr, &cos[at..at + d], &sin[at..at + d], yr, k.adjacent);
                }
            },
        )
    };
    if x.len() >= PAR_THRESHOLD && threads() > 1 && rows > 1 {
        let per = (PAR_THRESHOLD / 4 / d).max(rows.div_ceil(4 * threads())).max(1);
        spin::for_chunks_mut(y, per * d, |c, yb| block(c * per, yb));
    } else {
        block(0, y);
    }
    Ok(())
}

/// One head row: `y = x · c + rot(x) · s` (see the module docs).
#[inline(always)]
fn rope_row(x: &[f32], c: &[f32], s: &[f32], y: &mut [f32], adjacent: bool) {
    if adjacent {
        for (((y, x), c), s) in
            y.chunks_exact_mut(2).zip(x.chunks_exact(2)).zip(c.chunks_exact(2)).zip(s.chunks_exact(2))
        {
            y[0] = x[0] * c[0] + -x[1] * s[0];
            y[1] = x[1] * c[1] + x[0] * s[1];
        }
    } else {
        let half = x.len() / 2;
        let (x1, x2) = x.split_at(half);
        let ((c1, c2), (s1, s2)) = (c.split_at(half), s.split_at(half));
        let (y1, y2) = y.split_at_mut(half);
        for i in 0..half {
            y1[i] = x1[i] * c1[i] + -x2[i] * s1[i];
            y2[i] = x2[i] * c2[i] + x1[i] * s2[i];
        }
    }
}
