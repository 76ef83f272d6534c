//! In-place f32 elementwise steps: the result overwrites an operand that dies at the step
//! (the memory plan decides which). Results equal the reference's: `add`..`div` in f32 are
//! correctly rounded as the reference's f64-then-round is; every other op evaluates the
//! reference's f64 formula.

use crate::kernels::elementwise::{Access, plan_bcast};
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
    /// `acc = b(acc, other)` or `b(other, acc)`, reading `other` with `access`.
    Binary { op: BinaryOp, access: Access, acc_is_lhs: bool },
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
            let access = plan_bcast(&out, &[&other])?.access[0];
            Some(InPlaceKernel::Binary { op, access, acc_is_lhs: operand == 0 })
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
        (InPlaceKernel::Binary { op, access, acc_is_lhs }, Some(o)) => {
            binary(op, a, o.as_slice::<f32>().ok_or_else(bad)?, access, acc_is_lhs)
        }
        _ => return Err(bad()),
    }
    Ok(())
}

fn map(a: &mut [f32], f: impl Fn(usize, f32) -> f32 + Sync) {
    let chunk = |(c, ch): (usize, &mut [f32])| {
        let base = c * CHUNK;
        ch.iter_mut().enumerate().for_each(|(j, v)| *v = f(base + j, *v));
    };
    if a.len() > CHUNK && crate::kernels::simd::threads() > 1 {
        a.par_chunks_mut(CHUNK).enumerate().for_each(chunk);
    } else {
        a.chunks_mut(CHUNK).enumerate().for_each(chunk);
    }
}

fn unary(u: UnaryOp, a: &mut [f32]) {
    match u {
        UnaryOp::Neg => map(a, |_, v| -v),
        UnaryOp::Abs => map(a, |_, v| v.abs()),
        UnaryOp::Sqrt => map(a, |_, v| v.sqrt()),
        UnaryOp::Floor => map(a, |_, v| v.floor()),
        UnaryOp::Ceil => map(a, |_, v| v.ceil()),
        _ => map(a, |_, v| u.apply_f64(v as f64) as f32),
    }
}

fn binary(b: BinaryOp, a: &mut [f32], o: &[f32], access: Access, acc_is_lhs: bool) {
    let at = move |i: usize| match access {
        Access::Full => o[i],
        Access::Scalar => o[0],
        Access::Row(r) => o[i % r],
        Access::Col(c) => o[i / c],
    };
    macro_rules! go {
        ($f:expr) => {
            if acc_is_lhs { map(a, |i, v| $f(v, at(i))) } else { map(a, |i, v| $f(at(i), v)) }
        };
    }
    match b {
        BinaryOp::Add => go!(|x: f32, y: f32| x + y),
        BinaryOp::Sub => go!(|x: f32, y: f32| x - y),
        BinaryOp::Mul => go!(|x: f32, y: f32| x * y),
        BinaryOp::Div => go!(|x: f32, y: f32| x / y),
        _ => go!(|x: f32, y: f32| b.apply_f64(x as f64, y as f64) as f32),
    }
}
