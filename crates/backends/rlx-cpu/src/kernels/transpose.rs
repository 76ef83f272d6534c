//! Fast `transpose` for permutations that swap two adjacent groups of axes, which covers 2-D
//! transposes, swapping the last two dims of a batch, `[0, 2, 1, 3]` head splits and axis
//! rotations. The operand is viewed as `[B, P, Q, C]` and the result as `[B, Q, P, C]`; with
//! `C == 1` the copy is blocked in square tiles so both sides stay in cache, otherwise it moves
//! contiguous runs of `C` elements. Any dtype (it only moves elements); results are
//! bit-identical to the reference.

use super::simd::{PAR_THRESHOLD, threads};
use rayon::prelude::*;
use rlx_ir::{Elem, IrError, Tensor, with_dtype};

/// A transpose of `[B, P, Q, C]` into `[B, Q, P, C]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransposeKernel {
    /// Leading dims kept in place.
    pub b: usize,
    /// First swapped group.
    pub p: usize,
    /// Second swapped group.
    pub q: usize,
    /// Trailing dims kept in place.
    pub c: usize,
}

/// Plan `transpose(permutation)` of `dims`; `None` when it is not a swap of two adjacent axis
/// groups (identity permutations are planned as a copy by the caller).
pub fn plan(dims: &[usize], perm: &[usize]) -> Option<TransposeKernel> {
    let r = perm.len();
    if r != dims.len() {
        return None;
    }
    let lo = (0..r).find(|&i| perm[i] != i)?;
    let hi = (0..r).rfind(|&i| perm[i] != i)? + 1;
    let mid = &perm[lo..hi];
    // mid == [lo+k .. hi) ++ [lo .. lo+k) for some k.
    let k = mid[0].checked_sub(lo)?;
    if k == 0 || k >= hi - lo {
        return None;
    }
    let want = (lo + k..hi).chain(lo..lo + k);
    if !mid.iter().copied().eq(want) {
        return None;
    }
    Some(TransposeKernel {
        b: dims[..lo].iter().product(),
        p: dims[lo..lo + k].iter().product(),
        q: dims[lo + k..hi].iter().product(),
        c: dims[hi..].iter().product(),
    })
}

/// Run the transpose into the preallocated `out` (same dtype as `x`).
pub fn run(k: &TransposeKernel, x: &Tensor, out: &mut Tensor) -> Result<(), IrError> {
    if x.dtype() != out.dtype() || x.numel() != out.numel() {
        return Err(IrError::Eval { op: "transpose".into(), msg: "operand and result differ".into() });
    }
    with_dtype!(x.dtype(), T, transpose::<T>(k, x.as_slice::<T>().unwrap(), out.as_mut_slice::<T>().unwrap()));
    Ok(())
}

const TILE: usize = 32;

fn transpose<T: Elem>(k: &TransposeKernel, x: &[T], o: &mut [T]) {
    let (p, q, c) = (k.p, k.q, k.c);
    let n = o.len();
    if n == 0 {
        return;
    }
    // Output rows (one per (b, q) pair) hold p * c elements; tasks take a band of TILE rows
    // of one batch.
    let band = TILE * p * c;
    let per_batch = q * p * c;
    let work = |bi: usize, q0: usize, dst: &mut [T]| {
        let src = &x[bi * per_batch..(bi + 1) * per_batch];
        let rows = dst.len() / (p * c);
        if c == 1 {
            for p0 in (0..p).step_by(TILE) {
                let pe = (p0 + TILE).min(p);
                for qi in 0..rows {
                    let d = &mut dst[qi * p + p0..qi * p + pe];
                    for (j, v) in d.iter_mut().enumerate() {
                        *v = src[(p0 + j) * q + q0 + qi];
                    }
                }
            }
        } else {
            for qi in 0..rows {
                for pi in 0..p {
                    let s = (pi * q + q0 + qi) * c;
                    dst[(qi * p + pi) * c..(qi * p + pi + 1) * c].copy_from_slice(&src[s..s + c]);
                }
            }
        }
    };
    let par = n >= PAR_THRESHOLD && threads() > 1;
    if par {
        o.par_chunks_mut(per_batch)
            .enumerate()
            .for_each(|(bi, ob)| ob.par_chunks_mut(band).enumerate().for_each(|(t, dst)| work(bi, t * TILE, dst)));
    } else {
        for (bi, ob) in o.chunks_mut(per_batch).enumerate() {
            for (t, dst) in ob.chunks_mut(band).enumerate() {
                work(bi, t * TILE, dst);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans() {
        assert_eq!(plan(&[3, 4], &[1, 0]), Some(TransposeKernel { b: 1, p: 3, q: 4, c: 1 }));
        assert_eq!(plan(&[2, 3, 4, 5], &[0, 2, 1, 3]), Some(TransposeKernel { b: 2, p: 3, q: 4, c: 5 }));
        assert_eq!(plan(&[2, 3, 4], &[1, 2, 0]), Some(TransposeKernel { b: 1, p: 2, q: 12, c: 1 }));
        assert_eq!(plan(&[2, 3, 4], &[2, 1, 0]), None);
        assert_eq!(plan(&[2, 3], &[0, 1]), None);
    }
}
