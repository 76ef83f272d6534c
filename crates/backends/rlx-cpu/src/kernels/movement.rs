//! Movement ops as strided copies: `slice`, `rev`, `broadcast_in_dim` and `concatenate`, for
//! every dtype, and `gather` along one axis (`jnp.take` / ONNX `Gather`, e.g. an embedding
//! lookup) as one block copy per index. Each is planned at compile time into an offset plus per-dim element strides of
//! the operand (negative for `rev`, zero for broadcast dims); `run` walks the output in order
//! with an index held on the stack and copies contiguous inner runs with `copy_from_slice`.
//! Ranks above [`MAX_RANK`] use the reference evaluation.

use rlx_ir::ops::GatherMode;
use rlx_ir::ops::movement::out_of_range;
use rlx_ir::{Elem, IrError, Op, Tensor, strides_of, with_dtype};

/// Highest rank planned here.
pub const MAX_RANK: usize = 8;

/// How one operand is read into (a block of) the output.
#[derive(Clone, Debug)]
pub struct Strided {
    rank: usize,
    dims: [usize; MAX_RANK],
    strides: [isize; MAX_RANK],
    offset: isize,
}

/// A planned movement op.
#[derive(Clone, Debug)]
pub enum MoveKernel {
    /// One operand read through a strided view into the whole output.
    View(Strided),
    /// `concatenate`: operand `i` fills columns `[col_i, col_i + width_i)` of the output seen as
    /// `[outer, row]`.
    Concat {
        /// Product of the dims before the axis.
        outer: usize,
        /// Output elements per outer index.
        row: usize,
        /// (start column, width) per operand.
        parts: Vec<(usize, usize)>,
    },
    /// `gather` of whole slices along one operand axis (the operand seen as `[outer, dim,
    /// inner]`, the indices as `n` values): `out[o, b, :] = x[o, idx[b], :]`, indices clamped
    /// into `[0, dim)` (`Clip`), the slice zero-filled when out of range (`FillOrDrop`), as
    /// `lax.gather` with those modes, or an error naming the index (`Checked`; `CheckedWrap`
    /// first counts an index in `[-dim, 0)` from the end, as ONNX `Gather`).
    Take {
        /// Product of the operand dims before the axis.
        outer: usize,
        /// The axis (for error messages).
        axis: usize,
        /// Size of the axis.
        dim: usize,
        /// Product of the operand dims after the axis.
        inner: usize,
        /// Number of indices.
        n: usize,
        /// What an out-of-range index does.
        mode: GatherMode,
    },
}

impl MoveKernel {
    /// Name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            MoveKernel::View(_) => "strided_copy",
            MoveKernel::Concat { .. } => "concat_copy",
            MoveKernel::Take { .. } => "take_copy",
        }
    }
}

fn strided(dims: &[usize], strides: &[isize], offset: isize) -> Option<Strided> {
    if dims.len() > MAX_RANK {
        return None;
    }
    let mut s = Strided { rank: dims.len(), dims: [1; MAX_RANK], strides: [0; MAX_RANK], offset };
    s.dims[..dims.len()].copy_from_slice(dims);
    s.strides[..dims.len()].copy_from_slice(strides);
    Some(s)
}

/// Plan `op` on operands of dims `ins` producing `out` dims, or `None` to use the reference.
pub fn plan(op: &Op, ins: &[Vec<usize>], out: &[usize]) -> Option<MoveKernel> {
    let st = |d: &[usize]| strides_of(d).into_iter().map(|s| s as isize).collect::<Vec<_>>();
    match op {
        Op::Slice { start_indices, strides, .. } => {
            let s = st(&ins[0]);
            let offset = start_indices.iter().zip(&s).map(|(&a, &b)| a as isize * b).sum();
            let ss: Vec<isize> = s.iter().zip(strides).map(|(&a, &k)| a * k as isize).collect();
            strided(out, &ss, offset).map(MoveKernel::View)
        }
        Op::Rev { dimensions } => {
            let mut s = st(&ins[0]);
            let mut offset = 0;
            for &d in dimensions {
                offset += (ins[0][d] as isize - 1).max(0) * s[d];
                s[d] = -s[d];
            }
            strided(out, &s, offset).map(MoveKernel::View)
        }
        Op::BroadcastInDim { broadcast_dimensions, .. } => {
            let s = st(&ins[0]);
            let mut ss = vec![0isize; out.len()];
            for (k, &od) in broadcast_dimensions.iter().enumerate() {
                if ins[0][k] != 1 {
                    ss[od] = s[k];
                }
            }
            strided(out, &ss, 0).map(MoveKernel::View)
        }
        Op::Concatenate { dimension } => {
            let outer = out[..*dimension].iter().product();
            let row = out[*dimension..].iter().product();
            let mut col = 0;
            let parts = ins
                .iter()
                .map(|d| {
                    let w: usize = d[*dimension..].iter().product();
                    col += w;
                    (col - w, w)
                })
                .collect();
            Some(MoveKernel::Concat { outer, row, parts })
        }
        _ => None,
    }
}

/// Plan a `gather` that takes whole slices along one axis `a` of an operand of dims `x` with
/// indices of dims `ix` (index vector of length 1 in the last dim): `collapsed_slice_dims =
/// start_index_map = [a]`, full slices elsewhere, output `x[..a] ++ ix[..-1] ++ x[a+1..]`.
/// `None` for any other gather (the reference evaluation runs it).
pub fn plan_take(op: &Op, x: &[usize], ix: &[usize], out: &[usize]) -> Option<MoveKernel> {
    let Op::Gather { dims, slice_sizes, mode } = op else { return None };
    let (r, nb) = (x.len(), ix.len().checked_sub(1)?);
    let (&[a], &[a2]) = (dims.start_index_map.as_slice(), dims.collapsed_slice_dims.as_slice()) else {
        return None;
    };
    if a != a2 || a >= r || ix[nb] != 1 || slice_sizes.len() != r {
        return None;
    }
    if (0..r).any(|j| slice_sizes[j] != if j == a { 1 } else { x[j] }) {
        return None;
    }
    let offset_dims: Vec<usize> = (0..a).chain(a + nb..nb + r - 1).collect();
    let want: Vec<usize> = x[..a].iter().chain(&ix[..nb]).chain(&x[a + 1..]).copied().collect();
    if dims.offset_dims != offset_dims || out != want.as_slice() || x[a] == 0 {
        return None;
    }
    Some(MoveKernel::Take {
        outer: x[..a].iter().product(),
        axis: a,
        dim: x[a],
        inner: x[a + 1..].iter().product(),
        n: ix[..nb].iter().product(),
        mode: *mode,
    })
}

/// Execute a planned movement op.
pub fn run(k: &MoveKernel, ins: &[&Tensor], out: &mut Tensor) -> Result<(), IrError> {
    let dtype = out.dtype();
    with_dtype!(dtype, T, {
        let o = T::slice_mut(out.data_mut()).expect("planned dtype");
        match k {
            MoveKernel::View(s) => copy_view_par(s, data::<T>(ins[0]), o),
            MoveKernel::Concat { outer, row, parts } => {
                for (x, &(col, w)) in ins.iter().zip(parts) {
                    let x = data::<T>(x);
                    for r in 0..*outer {
                        o[r * row + col..r * row + col + w].copy_from_slice(&x[r * w..(r + 1) * w]);
                    }
                }
            }
            &MoveKernel::Take { outer, axis, dim, inner, n, mode } => {
                let x = data::<T>(ins[0]);
                let ix = ins[1];
                if !ix.dtype().is_int() || ix.numel() != n {
                    return Err(IrError::Eval { op: "gather".into(), msg: "indices differ from the plan".into() });
                }
                with_dtype!(ix.dtype(), I, {
                    let ix = data::<I>(ix);
                    for b in 0..n {
                        let i = ix[b].to_i64();
                        let src = match mode {
                            _ if (0..dim as i64).contains(&i) => Some(i as usize),
                            GatherMode::FillOrDrop => None,
                            GatherMode::Clip => Some(i.clamp(0, dim as i64 - 1) as usize),
                            GatherMode::CheckedWrap if (-(dim as i64)..0).contains(&i) => {
                                Some((i + dim as i64) as usize)
                            }
                            GatherMode::Checked | GatherMode::CheckedWrap => {
                                return Err(out_of_range("gather", i, axis, dim, 1, mode));
                            }
                        };
                        for q in 0..outer {
                            let dst = &mut o[(q * n + b) * inner..(q * n + b + 1) * inner];
                            match src {
                                Some(i) => dst.copy_from_slice(&x[(q * dim + i) * inner..(q * dim + i + 1) * inner]),
                                None => dst.fill(T::zero()),
                            }
                        }
                    }
                });
            }
        }
    });
    Ok(())
}

fn data<T: Elem>(t: &Tensor) -> &[T] {
    T::slice(t.data()).expect("operand dtype checked by the verifier")
}

/// Output bytes from which [`copy_view_par`] splits a copy across threads (a prefill step's
/// column slices of a joined Q/K/V product: 128 × 896 f32 is 448 KiB).
const PAR_BYTES: usize = 1 << 18;

/// [`copy_view`] in pieces of whole inner runs, one per thread, when the output is at least
/// [`PAR_BYTES`] (a copy is exact, so the split changes no result). Qwen2.5-0.5B's 128-token
/// prefill on 2 threads (Zen 4) spent 3.6% of its steps in one-thread slices when gate / up
/// were also sliced out of one product (session 39; `rlx-models` now runs them as two).
fn copy_view_par<T: Elem>(s: &Strided, x: &[T], o: &mut [T]) {
    let t = super::simd::threads();
    if t == 1 || std::mem::size_of_val(o) < PAR_BYTES {
        copy_view(s, x, o);
    } else {
        copy_view_pieces(s, x, o, t);
    }
}

/// [`copy_view`] as up to `pieces` tasks of whole inner runs on [`super::spin::for_chunks_mut`].
fn copy_view_pieces<T: Elem>(s: &Strided, x: &[T], o: &mut [T], pieces: usize) {
    let inner = if s.rank == 0 { 1 } else { s.dims[s.rank - 1].max(1) };
    let runs = o.len() / inner;
    if s.rank == 0 || runs < 2 || pieces < 2 {
        copy_view(s, x, o);
        return;
    }
    let per = runs.div_ceil(pieces.min(runs)) * inner;
    super::spin::for_chunks_mut(o, per, |i, piece| copy_runs(s, x, piece, i * per / inner));
}

/// out[i] = x[offset + Σ idx_d · stride_d], in output order.
fn copy_view<T: Elem>(s: &Strided, x: &[T], o: &mut [T]) {
    if o.is_empty() {
        return;
    }
    if s.rank == 0 {
        o[0] = x[s.offset as usize];
        return;
    }
    copy_runs(s, x, o, 0);
}

/// The output's inner runs `first ..` (rank ≥ 1) into `o`, which starts at run `first`.
fn copy_runs<T: Elem>(s: &Strided, x: &[T], o: &mut [T], first: usize) {
    let r = s.rank;
    let inner = s.dims[r - 1];
    let inner_stride = s.strides[r - 1];
    // The outer index of run `first` (dims 0..r-1, last fastest) and its offset.
    let mut idx = [0usize; MAX_RANK];
    let mut base = s.offset;
    let mut run = first;
    for d in (0..r - 1).rev() {
        idx[d] = run % s.dims[d];
        base += idx[d] as isize * s.strides[d];
        run /= s.dims[d];
    }
    for run in o.chunks_exact_mut(inner) {
        // Every index here is inside `x`: the verifier checked the op's bounds.
        if inner_stride == 1 {
            let b = base as usize;
            run.copy_from_slice(&x[b..b + inner]);
        } else {
            let mut p = base;
            for v in run.iter_mut() {
                *v = x[p as usize];
                p += inner_stride;
            }
        }
        // Advance the outer index (dims 0..r-1).
        for d in (0..r - 1).rev() {
            idx[d] += 1;
            base += s.strides[d];
            if idx[d] < s.dims[d] {
                break;
            }
            base -= s.strides[d] * s.dims[d] as isize;
            idx[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Split copies equal the definition `out[i] = x[offset + Σ idx_d · stride_d]` for slices
    /// (inner runs contiguous or strided), `rev` and `broadcast_in_dim`, whatever the number of
    /// pieces (pieces that start mid-way through an outer dim re-base their index).
    #[test]
    fn split_views_match_the_definition() {
        let x: Vec<f32> = (0..3 * 7 * 11 * 5).map(|i| i as f32).collect();
        let d = [3usize, 7, 11, 5];
        let slice = |start: Vec<usize>, limit: Vec<usize>, strides: Vec<usize>| Op::Slice {
            start_indices: start,
            limit_indices: limit,
            strides,
        };
        let cases = [
            (slice(vec![0, 1, 2, 0], vec![3, 6, 9, 5], vec![1, 1, 1, 1]), vec![3, 5, 7, 5]),
            (slice(vec![1, 0, 3, 1], vec![3, 7, 11, 5], vec![1, 2, 3, 2]), vec![2, 4, 3, 2]),
            (Op::Rev { dimensions: vec![1, 3] }, d.to_vec()),
        ];
        for (op, out) in cases {
            let k = plan(&op, &[d.to_vec()], &out).expect("planned");
            let MoveKernel::View(s) = &k else { panic!("a view") };
            let n: usize = out.iter().product();
            let want: Vec<f32> = (0..n)
                .map(|mut i| {
                    let mut at = s.offset;
                    for a in (0..s.rank).rev() {
                        at += (i % s.dims[a]) as isize * s.strides[a];
                        i /= s.dims[a];
                    }
                    x[at as usize]
                })
                .collect();
            for pieces in [1, 2, 3, 4, 7, 1000] {
                let mut o = vec![f32::NAN; n];
                copy_view_pieces(s, &x, &mut o, pieces);
                assert_eq!(o, want, "{op:?} in {pieces} pieces");
            }
        }
        let shape = [4, 3, 6].map(rlx_ir::Dim::Static).to_vec();
        let b = Op::BroadcastInDim { shape, broadcast_dimensions: vec![1] };
        let k = plan(&b, &[vec![3]], &[4, 3, 6]).expect("planned");
        let MoveKernel::View(s) = &k else { panic!("a view") };
        let mut o = vec![f32::NAN; 72];
        copy_view_pieces(s, &x[..3], &mut o, 5);
        assert!(o.iter().enumerate().all(|(i, &v)| v == ((i / 6) % 3) as f32), "{o:?}");
    }
}
