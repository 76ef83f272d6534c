//! In-place f32 elementwise steps: the result overwrites an operand that dies at the step
//! (the memory plan decides which). Each segment of the operand is copied to a stack buffer
//! and computed by [`unary_block`] / [`binary_block`], so an in-place step gives bit for bit
//! what the out-of-place kernel and the fused kernel give (it evaluated the reference's f64
//! formula before: `rsqrt` then differed by an ulp from the same op fused, and `tanh` ran
//! scalar).

use crate::kernels::elementwise::{Access, Src, binary_block, plan_bcast, unary_block};
use rayon::prelude::*;
use rlx_ir::ops::{BinaryOp, UnaryOp};
use rlx_ir::{DType, Graph, IrError, NodeId, Op, Tensor};

/// Elements per parallel chunk.
const CHUNK: usize = 1 << 15;

/// A planned in-place step.
#[derive(Clone, Copy, Debug)]
pub(crate) enum InPlaceKernel {
    /// `acc = u(acc)`.
    Unary(UnaryOp),
    /// `acc = b(acc, other)` or `b(other, acc)`, reading `other` with `access`, which is
    /// valid within aligned blocks of `block` elements (`elementwise::Bcast`).
    Binary { op: BinaryOp, access: Access, block: usize, acc_is_lhs: bool },
}

/// The in-place kernel for node `id` over operand `operand`, if any: an f32 unary op, or an
/// f32 binary op whose other operand is full, scalar, row or column shaped.
pub(crate) fn plan(g: &Graph, id: NodeId, operand: usize) -> Option<InPlaceKernel> {
    let n = g.node(id);
    let f32s = n.inputs.iter().all(|&i| g.shape(i).dtype == DType::F32) && n.ty().dtype == DType::F32;
    if !f32s || g.shape(n.inputs[operand]) != n.ty() {
        return None;
    }
    match n.op {
        Op::Unary(u) => Some(InPlaceKernel::Unary(u)),
        Op::Binary(op) => {
            let out = n.ty().static_dims()?;
            let other = g.shape(n.inputs[1 - operand]).static_dims()?;
            let p = plan_bcast(&out, &[&other])?;
            Some(InPlaceKernel::Binary { op, access: p.access[0], block: p.block, acc_is_lhs: operand == 0 })
        }
        _ => None,
    }
}

/// Run `k` over `acc` (overwritten with the result); `other` is a binary op's other operand.
/// Allocates nothing.
pub(crate) fn run(k: InPlaceKernel, acc: &mut Tensor, other: Option<&Tensor>) -> Result<(), IrError> {
    let bad = || IrError::Invalid("in-place step on a non-f32 operand".into());
    let a = acc.as_mut_slice::<f32>().ok_or_else(bad)?;
    match (k, other) {
        (InPlaceKernel::Unary(u), _) => unary(u, a),
        (InPlaceKernel::Binary { op, access, block, acc_is_lhs }, Some(o)) => {
            binary(op, a, o.as_slice::<f32>().ok_or_else(bad)?, (access, block), acc_is_lhs)
        }
        _ => return Err(bad()),
    }
    Ok(())
}

/// Elements per stack copy.
const SEG: usize = 1024;

/// Call `f(start, copy, segment)` for segments of `a` of at most [`SEG`] elements that stay
/// within aligned blocks of `block`, with `copy` the segment's values; in parallel chunks.
fn segments(a: &mut [f32], block: usize, f: impl Fn(usize, &[f32], &mut [f32]) + Sync) {
    let chunk = |(c, ch): (usize, &mut [f32])| {
        let base = c * CHUNK;
        let mut t = [0f32; SEG];
        let mut p = 0;
        while p < ch.len() {
            let s = base + p;
            let end = ((s / block + 1) * block).min(s + SEG).min(base + ch.len());
            let seg = &mut ch[p..end - base];
            t[..seg.len()].copy_from_slice(seg);
            f(s, &t[..seg.len()], seg);
            p = end - base;
        }
    };
    if a.len() > CHUNK && crate::kernels::simd::threads() > 1 {
        a.par_chunks_mut(CHUNK).enumerate().for_each(chunk);
    } else {
        a.chunks_mut(CHUNK).enumerate().for_each(chunk);
    }
}

fn unary(u: UnaryOp, a: &mut [f32]) {
    segments(a, usize::MAX, |_, x, o| unary_block(u, x, o));
}

fn binary(b: BinaryOp, a: &mut [f32], o: &[f32], (access, block): (Access, usize), acc_is_lhs: bool) {
    segments(a, block.max(1), |s, x, seg| {
        let y = Src::at(o, access, s, seg.len());
        if acc_is_lhs { binary_block(b, Src::Slice(x), y, seg) } else { binary_block(b, y, Src::Slice(x), seg) }
    });
}
