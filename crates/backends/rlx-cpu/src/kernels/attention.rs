//! Native kernel for the `scaled_dot_product_attention` composite (f32): flash-style tiles that
//! never materialize the `Sq × Sk` score matrix.
//!
//! Operands follow the composite (`rlx_ir::compose::attention`): `q` `[B, H, Sq, D]`, `k`
//! `[B, Hk, Sk, D]`, `v` `[B, Hk, Sk, Dv]` (grouped heads: query head `h` reads key/value head
//! `h / (H / Hk)`), plus the key lengths (`padding`, i32 or i64 `[B]`) or the bias (`bias`, f32
//! added to the scores or bool `true` = attend, broadcastable to `[B, H, Sq, Sk]`); attrs
//! `mask`, `scale` and `layout`. The output `[B, H, Sq, Dv]` is written in place of the
//! accumulator. With `layout = "bshd"` q, k, v and the output are `[B, S, H, D]` and every
//! product reads and writes rows at the stride `H·D` (no transposes); tasks then cover one
//! block of query rows of one batch for all heads, so the output chunks stay disjoint slices.
//!
//! Per task (batch, head, block of [`BQ`] query rows), for each block of [`BK`] keys:
//! `S = scale · Q Kᵀ` (one `gemm` call into a stack tile), the mask, then the online softmax of
//! FlashAttention: with the running row max `m` and sum `l`, `m' = max(m, max S)`, `P = exp(S -
//! m')`, `l' = l·exp(m - m') + ΣP`, `O' = O·exp(m - m') + P V` (a second `gemm` accumulating
//! into the output rows); at the end `O /= l`. Key blocks that a causal mask or the padding
//! length hides entirely are skipped. Tasks run in parallel on the executor's spinning team
//! ([`spin::for_each`]). The per-block step ([`Flash::block`], with [`KeyBlock`] and
//! [`QueryRows`]) also runs `attention_with_kvcache`'s prompt chunks
//! ([`super::attention_kvcache`]).
//!
//! Semantics match the decomposition (`softmax(q kᵀ · scale + mask) v`): a query row that sees
//! no key (every score `-inf`) gives NaN, as the decomposition's softmax of an all-`-inf` row.
//! Results differ from it only by rounding: the exponentials are rescaled once per key block
//! and the normalization is applied to `P V` instead of `P`, so each output element is within a
//! few f32 ulps times the row's `Σ|p·v|` (the tests use 1e-5 absolute + relative).
//! On AVX-512 and on AVX2 + FMA CPUs, tiles of at least 8 query rows run both products through
//! the micro-kernels of [`super::attention_vec`] at 16 or 8 lanes (MiniLM-L6's attention on
//! AVX-512, 1 thread: 0.44 → 0.38 ms per layer), the softmax's max and `exp` passes likewise (`attention_bench 1 128 12 32 1 bias`, 1 core of an AMD EPYC Zen 3:
//! 0.68 → 0.51 ms; `1 512 12 64 1 causal` 9.3 → 7.8–8.1 ms); smaller tiles (decoding) and
//! other CPUs call the `gemm` crate.

#[cfg(target_arch = "x86_64")]
use super::attention_vec as tiles;
use super::reduce::max_row;
use super::simd::{dispatch, exp_f32, has_avx512, threads};
use super::spin::{self, SyncPtr};
use rlx_ir::compose::AttentionLayout;
use rlx_ir::ops::Composite;
use rlx_ir::{Attr, DType, IrError, Tensor};

/// The composite this kernel runs.
pub const NAME: &str = "scaled_dot_product_attention";

/// Query rows per task.
pub const BQ: usize = 64;
/// Keys per block (the score tile is `BQ × BK` f32 on the stack: 32 KiB).
pub const BK: usize = 128;

/// The mask of an [`AttentionKernel`].
#[derive(Clone, Debug, PartialEq)]
pub enum AttnMask {
    /// Every key is visible.
    None,
    /// Query `i` sees keys `j ≤ i`.
    Causal,
    /// Operand 3 holds the key length of each batch (this integer dtype).
    Padding(DType),
    /// Operand 3 is the bias: bool (`true` = attend) or f32 (added), read at element strides
    /// `strides` over `[B, H, Sq, Sk]` (0 on broadcast dims).
    Bias {
        /// Bool mask rather than an additive one.
        is_bool: bool,
        /// Element strides per `[B, H, Sq, Sk]` dim.
        strides: [usize; 4],
    },
}

/// A planned attention: dims, scale and mask.
#[derive(Clone, Debug, PartialEq)]
pub struct AttentionKernel {
    /// Batch.
    pub b: usize,
    /// Query heads.
    pub h: usize,
    /// Key / value heads (divides `h`).
    pub hk: usize,
    /// Query length.
    pub sq: usize,
    /// Key length.
    pub sk: usize,
    /// Head dim of q and k.
    pub d: usize,
    /// Head dim of v and the output.
    pub dv: usize,
    /// Score scale.
    pub scale: f32,
    /// The mask.
    pub mask: AttnMask,
    /// q, k, v and the output are `[B, S, H, D]` (else `[B, H, S, D]`).
    pub bshd: bool,
}

impl AttentionKernel {
    /// Name for reports: `attention_f32_tiles_avx512` / `attention_f32_tiles_avx2` where the
    /// query tiles (of 8 rows or more) run the micro-kernels of [`KeyBlock`], else
    /// `attention_f32` (the score and value products on the `gemm` crate).
    pub fn name(&self) -> &'static str {
        if runs_tiles(self.sq, self.d) {
            return if has_avx512() { "attention_f32_tiles_avx512" } else { "attention_f32_tiles_avx2" };
        }
        "attention_f32"
    }
}

/// Plan composite `c` on operands `ins` giving `outs`, when this kernel handles them: f32
/// rank-4 q/k/v with `Sk, D ≥ 1` (an empty key axis or head dim runs the decomposition).
pub fn select(c: &Composite, ins: &[(Vec<usize>, DType)], outs: &[(Vec<usize>, DType)]) -> Option<AttentionKernel> {
    if c.name != NAME || ins.len() < 3 || outs.len() != 1 {
        return None;
    }
    let (q, k, v, o) = (&ins[0], &ins[1], &ins[2], &outs[0]);
    if [q, k, v, o].iter().any(|(d, t)| d.len() != 4 || *t != DType::F32) {
        return None;
    }
    let bshd = AttentionLayout::of_attrs(&c.attrs)? == AttentionLayout::Bshd;
    // The [B, H, S, D] view of each operand.
    let view = |x: &[usize]| if bshd { [x[0], x[2], x[1], x[3]] } else { [x[0], x[1], x[2], x[3]] };
    let (qv, kv, vv, ov) = (view(&q.0), view(&k.0), view(&v.0), view(&o.0));
    let [b, h, sq, d] = qv;
    let [_, hk, sk, _] = kv;
    let dv = vv[3];
    let shapes_ok = kv == [b, hk, sk, d] && vv == [b, hk, sk, dv] && ov == [b, h, sq, dv];
    if !shapes_ok || hk == 0 || h % hk != 0 || sk == 0 || d == 0 {
        return None;
    }
    let scale = match c.attrs.get("scale")? {
        Attr::Float(s) => *s as f32,
        _ => return None,
    };
    let mask = match (c.attrs.get("mask")?, ins.get(3)) {
        (Attr::Str(m), None) if m == "none" => AttnMask::None,
        (Attr::Str(m), None) if m == "causal" => AttnMask::Causal,
        (Attr::Str(m), Some((dims, t)))
            if m == "padding" && dims[..] == [b] && matches!(t, DType::I32 | DType::I64) =>
        {
            AttnMask::Padding(*t)
        }
        (Attr::Str(m), Some((dims, t))) if m == "bias" && matches!(t, DType::F32 | DType::Bool) && dims.len() <= 4 => {
            AttnMask::Bias { is_bool: *t == DType::Bool, strides: broadcast_strides(dims, [b, h, sq, sk])? }
        }
        _ => return None,
    };
    Some(AttentionKernel { b, h, hk, sq, sk, d, dv, scale, mask, bshd })
}

/// Element strides of a row-major tensor `dims` broadcast (NumPy rules, right-aligned) to
/// `to`: 0 on broadcast dims; `None` when it does not broadcast.
fn broadcast_strides(dims: &[usize], to: [usize; 4]) -> Option<[usize; 4]> {
    let mut st = [0; 4];
    let mut acc = 1;
    for (k, &n) in dims.iter().enumerate().rev() {
        let axis = 4 - dims.len() + k;
        if n != 1 && n != to[axis] {
            return None;
        }
        st[axis] = if n == 1 { 0 } else { acc };
        acc *= n;
    }
    Some(st)
}

/// The mask operand as read during a run.
#[derive(Clone, Copy)]
enum MaskData<'a> {
    None,
    Causal,
    Lens(&'a [usize]),
    Bias(&'a [f32], [usize; 4]),
    Bool(&'a [bool], [usize; 4]),
}

/// Run the planned attention into `out` (`[B, H, Sq, Dv]`).
///
/// Errors: operands that differ from the plan (a compiler bug).
pub fn run(k: &AttentionKernel, ins: &[&Tensor], out: &mut Tensor) -> Result<(), IrError> {
    let err = || IrError::Eval { op: NAME.into(), msg: "operands differ from the plan".into() };
    let f = |i: usize| ins.get(i).and_then(|t| t.as_slice::<f32>()).ok_or_else(err);
    let (q, kk, v) = (f(0)?, f(1)?, f(2)?);
    let kv = k.b * k.hk * k.sk;
    if q.len() != k.b * k.h * k.sq * k.d || kk.len() != kv * k.d || v.len() != kv * k.dv {
        return Err(err());
    }
    // Padding lengths, clamped to [0, Sk], live on the stack for small batches.
    let mut lens_buf = smallvec::SmallVec::<[usize; 64]>::new();
    let mask = match &k.mask {
        AttnMask::None => MaskData::None,
        AttnMask::Causal => MaskData::Causal,
        AttnMask::Padding(t) => {
            let t3 = ins.get(3).ok_or_else(err)?;
            let clamp = |x: i64| x.clamp(0, k.sk as i64) as usize;
            match t {
                DType::I32 => lens_buf.extend(t3.as_slice::<i32>().ok_or_else(err)?.iter().map(|&x| clamp(x as i64))),
                _ => lens_buf.extend(t3.as_slice::<i64>().ok_or_else(err)?.iter().map(|&x| clamp(x))),
            }
            if lens_buf.len() != k.b {
                return Err(err());
            }
            MaskData::Lens(&lens_buf)
        }
        AttnMask::Bias { is_bool, strides } => {
            let t3 = ins.get(3).ok_or_else(err)?;
            let need = 1 + (0..4).map(|a| strides[a] * ([k.b, k.h, k.sq, k.sk][a] - 1)).sum::<usize>();
            if *is_bool {
                let s = t3.as_slice::<bool>().ok_or_else(err)?;
                (s.len() >= need).then_some(MaskData::Bool(s, *strides)).ok_or_else(err)?
            } else {
                let s = t3.as_slice::<f32>().ok_or_else(err)?;
                (s.len() >= need).then_some(MaskData::Bias(s, *strides)).ok_or_else(err)?
            }
        }
    };
    let o = out.as_mut_slice::<f32>().ok_or_else(err)?;
    if o.len() != k.b * k.h * k.sq * k.dv {
        return Err(err());
    }
    if o.is_empty() {
        return Ok(());
    }
    let ops = Operands { q, k: kk, v, mask };
    let task = |bh: usize, qb: usize, rows: &mut [f32], at: OutRows| {
        dispatch(
            #[inline(always)]
            || tile(k, &ops, bh, qb * BQ, rows, at),
        )
    };
    let blocks = k.sq.div_ceil(BQ);
    let par = threads() > 1 && k.b * k.h * blocks > 1;
    if k.bshd {
        // Output [B, Sq, H, Dv]: a block of query rows of one batch holds every head's rows,
        // so a task takes that block and runs its heads one after another.
        let per_batch = k.sq * k.h * k.dv;
        let heads = |bi: usize, qb: usize, rows: &mut [f32]| {
            let n = rows.len() / (k.h * k.dv);
            for hi in 0..k.h {
                task(bi * k.h + hi, qb, rows, OutRows { n, stride: k.h * k.dv, offset: hi * k.dv });
            }
        };
        if par {
            let (per_block, op) = (BQ * k.h * k.dv, SyncPtr(o.as_mut_ptr()));
            spin::for_each(k.b * blocks, |t| {
                let (bi, qb) = (t / blocks, t % blocks);
                let off = bi * per_batch + qb * per_block;
                // SAFETY: task `t` alone writes rows block `qb` of batch `bi` (disjoint
                // chunks of `o`, the last one of a batch possibly shorter).
                let rows = unsafe { op.slice(off, per_block.min(per_batch - qb * per_block)) };
                heads(bi, qb, rows)
            });
        } else {
            for (bi, batch) in o.chunks_mut(per_batch).enumerate() {
                for (qb, rows) in batch.chunks_mut(BQ * k.h * k.dv).enumerate() {
                    heads(bi, qb, rows);
                }
            }
        }
        return Ok(());
    }
    let per_head = k.sq * k.dv;
    let plain = |rows: &[f32]| OutRows { n: rows.len() / k.dv, stride: k.dv, offset: 0 };
    if par {
        let (per_block, op) = (BQ * k.dv, SyncPtr(o.as_mut_ptr()));
        spin::for_each(k.b * k.h * blocks, |t| {
            let (bh, qb) = (t / blocks, t % blocks);
            // SAFETY: task `t` alone writes query block `qb` of head `bh` (disjoint chunks of
            // `o`, the last one of a head possibly shorter).
            let rows = unsafe { op.slice(bh * per_head + qb * per_block, per_block.min(per_head - qb * per_block)) };
            let at = plain(rows);
            task(bh, qb, rows, at)
        });
    } else {
        for (bh, head) in o.chunks_mut(per_head).enumerate() {
            for (qb, rows) in head.chunks_mut(BQ * k.dv).enumerate() {
                let at = plain(rows);
                task(bh, qb, rows, at);
            }
        }
    }
    Ok(())
}

/// Where a task's output rows sit in its chunk: `n` rows, row `r` at `offset + r · stride`.
#[derive(Clone, Copy)]
pub(super) struct OutRows {
    pub n: usize,
    pub stride: usize,
    pub offset: usize,
}

struct Operands<'a> {
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    mask: MaskData<'a>,
}

/// One task: query rows `q0 .. q0 + at.n` of flattened (batch, head) `bh`, written to the
/// rows `at` of `o` (used as the accumulator).
#[inline(always)]
fn tile(k: &AttentionKernel, x: &Operands<'_>, bh: usize, q0: usize, o: &mut [f32], at: OutRows) {
    let (d, dv, sk) = (k.d, k.dv, k.sk);
    let (bi, hi) = (bh / k.h, bh % k.h);
    let kh = hi / (k.h / k.hk);
    // Offsets of row 0 and row strides of this head's q, k, v.
    let (qo, qs, ko, ks, vo, vs) = if k.bshd {
        (
            ((bi * k.sq + q0) * k.h + hi) * d,
            k.h * d,
            (bi * sk * k.hk + kh) * d,
            k.hk * d,
            (bi * sk * k.hk + kh) * dv,
            k.hk * dv,
        )
    } else {
        ((bh * k.sq + q0) * d, d, (bi * k.hk + kh) * sk * d, d, (bi * k.hk + kh) * sk * dv, dv)
    };
    let kb = &x.k[ko..][..(sk - 1) * ks + d];
    let vb = &x.v[vo..][..(sk - 1) * vs + dv];
    let kend = match x.mask {
        MaskData::Causal => sk.min(q0 + at.n),
        MaskData::Lens(l) => l[bi],
        _ => sk,
    };
    let rows = QueryRows { q: &x.q[qo..], qs, n: at.n, d, dv, scale: k.scale };
    let mut keys = KeyBlock::new(&rows);
    let mut state = Flash::new();
    for j0 in (0..kend).step_by(BK) {
        let cols = BK.min(kend - j0);
        let kj = &kb[j0 * ks..];
        keys.load(kj, ks, cols, d);
        state.block(&rows, &mut keys, (kj, ks), &vb[j0 * vs..], vs, o, at, |r, sr| {
            apply_mask(x.mask, sr, bi, hi, q0 + r, j0)
        });
    }
    state.finish(&rows, o, at);
}

/// The query rows of one tile: `n ≤ BQ` rows of `d` floats at stride `qs` (from `q[0]`), head
/// dim `dv` of the values, score scale.
pub(super) struct QueryRows<'a> {
    pub q: &'a [f32],
    pub qs: usize,
    pub n: usize,
    pub d: usize,
    pub dv: usize,
    pub scale: f32,
}

/// Whether a tile of `n` query rows of head dim `d` runs the micro-kernels of
/// [`super::attention_vec`] ([`KeyBlock`]; also the report name's test, with `n` = all the
/// query rows): 8 rows or more (fewer, as in decoding, would spend as long transposing each key
/// block as multiplying with it), `d ≤ MAX_D`, and AVX-512 or AVX2 + FMA.
#[inline(always)]
fn runs_tiles(n: usize, d: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    return n >= 8 && d <= tiles::MAX_D && super::sgemm::available();
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (n, d);
        false
    }
}

/// One block of `cols ≤ BK` keys as the tile's score product reads it: transposed once into a
/// 64-byte aligned block for the AVX-512 (AVX2) micro-kernels (tiles of at least 8 query rows; fewer,
/// as in decoding, would spend as long transposing each key block as multiplying with it), else
/// in place for the `gemm` crate. One load serves every query head that attends to the block.
pub(super) struct KeyBlock {
    fast: bool,
    /// With `fast`: the AVX-512 micro-kernels, else the AVX2 ones ([`super::attention_vec`]).
    wide: bool,
    #[cfg(target_arch = "x86_64")]
    kt: tiles::KeysT,
    cols: usize,
}

impl KeyBlock {
    /// An empty block for tiles shaped as `rows`.
    #[inline(always)]
    pub(super) fn new(rows: &QueryRows<'_>) -> Self {
        #[cfg(target_arch = "x86_64")]
        return KeyBlock { fast: runs_tiles(rows.n, rows.d), wide: has_avx512(), kt: tiles::KeysT::new(), cols: 0 };
        #[cfg(not(target_arch = "x86_64"))]
        KeyBlock { fast: false, wide: false, cols: 0 }
    }

    /// Load `cols` keys of `d` floats at stride `ks` from `keys` (the same slice and stride
    /// are passed to [`Flash::block`]).
    #[inline(always)]
    pub(super) fn load(&mut self, keys: &[f32], ks: usize, cols: usize, d: usize) {
        assert!((1..=BK).contains(&cols) && keys.len() > (cols - 1) * ks + d - 1);
        self.cols = cols;
        #[cfg(target_arch = "x86_64")]
        if self.fast {
            // SAFETY: `sgemm::available()` checked (`fast`); `keys` holds cols rows of d at
            // stride ks (asserted), `d ≤ MAX_D`.
            unsafe { tiles::pack_keys(keys.as_ptr(), ks, cols, d, &mut self.kt) };
        }
    }
}

/// The online-softmax state of one tile of query rows (FlashAttention): the running row max
/// `m` and sum `l`, and whether the output rows hold a partial sum yet.
pub(super) struct Flash {
    m: [f32; BQ],
    l: [f32; BQ],
    started: bool,
}

impl Flash {
    /// No key seen yet.
    #[inline(always)]
    pub(super) fn new() -> Self {
        Flash { m: [f32::NEG_INFINITY; BQ], l: [0.0; BQ], started: false }
    }

    /// Attend `rows` to the key block loaded into `keys` from `kb` (at stride `ks`) and its
    /// values (`keys.cols` rows of `dv` at stride `vs` from `vj[0]`): `S = scale · Q Kᵀ`, `mask(r, scores of row r)`, then `m' =
    /// max(m, max S)`, `P = exp(S - m')`, `l' = l·exp(m - m') + ΣP`, `O' = O·exp(m - m') + P V`
    /// into the output rows `at` of `o`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn block(
        &mut self,
        rows: &QueryRows<'_>,
        keys: &mut KeyBlock,
        (kb, ks): (&[f32], usize),
        vj: &[f32],
        vs: usize,
        o: &mut [f32],
        at: OutRows,
        mut mask: impl FnMut(usize, &mut [f32]),
    ) {
        let (n, cols, dv, os) = (rows.n, keys.cols, rows.dv, at.stride);
        let qp = &rows.q[..(n - 1) * rows.qs + rows.d];
        let o = &mut o[at.offset..][..(n - 1) * os + dv];
        // The score tile, written whole (n × cols) before each read: not zeroed per block.
        let mut s_buf = std::mem::MaybeUninit::<[f32; BQ * BK]>::uninit();
        let sp = s_buf.as_mut_ptr().cast::<f32>();
        #[cfg(target_arch = "x86_64")]
        if keys.fast {
            // SAFETY: AVX-512 (`wide`), else AVX2 + FMA (`fast`: `sgemm::available()`); `kt`
            // holds the loaded block; `qp` holds n rows of d at stride qs; `sp` BQ × BK ≥ n ×
            // cols floats (all written).
            unsafe {
                if keys.wide {
                    tiles::scores_avx512(n, cols, rows.d, qp.as_ptr(), rows.qs, &keys.kt, rows.scale, sp);
                } else {
                    tiles::scores_avx2(n, cols, rows.d, qp.as_ptr(), rows.qs, &keys.kt, rows.scale, sp);
                }
            }
        }
        if !keys.fast {
            // SAFETY: `sp` holds BQ × BK ≥ n × cols floats.
            unsafe { std::ptr::write_bytes(sp, 0, n * cols) };
        }
        // SAFETY: n × cols ≤ BQ × BK floats of `s_buf`, initialized just above.
        let st = unsafe { std::slice::from_raw_parts_mut(sp, n * cols) };
        if !keys.fast {
            gemm_scores(n, cols, rows.d, qp, rows.qs, kb, ks, rows.scale, st);
        }
        let (m, l) = (&mut self.m, &mut self.l);
        for (r, sr) in st.chunks_exact_mut(cols).enumerate() {
            mask(r, sr);
            // NaN-propagating max: a NaN score makes the row NaN, as in the decomposition.
            let mx = row_max(sr);
            let m_new = if mx.is_nan() { mx } else { m[r].max(mx) };
            if m_new == f32::NEG_INFINITY {
                // Nothing visible yet in this row: weights 0, state unchanged.
                sr.fill(0.0);
                continue;
            }
            let sum = exp_sum(sr, m_new);
            let corr = exp_f32(m[r] - m_new);
            l[r] = l[r] * corr + sum;
            m[r] = m_new;
            if self.started && corr != 1.0 {
                for e in &mut o[r * os..r * os + dv] {
                    *e *= corr;
                }
            }
        }
        #[cfg(target_arch = "x86_64")]
        if keys.fast {
            // SAFETY: AVX-512 (`wide`), else AVX2 + FMA; `st` holds n × cols, `vj` cols rows of
            // dv at stride vs, `o` n rows of dv at stride os (a different buffer).
            unsafe {
                let (p, v, op) = (st.as_ptr(), vj.as_ptr(), o.as_mut_ptr());
                if keys.wide {
                    tiles::accumulate_pv_avx512(n, cols, dv, p, v, vs, op, os, self.started);
                } else {
                    tiles::accumulate_pv_avx2(n, cols, dv, p, v, vs, op, os, self.started);
                }
            }
        }
        if !keys.fast {
            gemm_pv(n, cols, dv, st, vj, vs, o, os, self.started);
        }
        self.started = true;
    }

    /// Divide the output rows `at` of `o` by their sums: NaN for a row that saw no key (as the
    /// decomposition's softmax of an all `-inf` row).
    #[inline(always)]
    pub(super) fn finish(&self, rows: &QueryRows<'_>, o: &mut [f32], at: OutRows) {
        for r in 0..rows.n {
            let orow = &mut o[at.offset + r * at.stride..][..rows.dv];
            if !self.started || self.l[r] == 0.0 {
                orow.fill(f32::NAN);
            } else {
                let inv = 1.0 / self.l[r];
                for e in orow {
                    *e *= inv;
                }
            }
        }
    }
}

/// `st = scale · Q Kᵀ` through the `gemm` crate: `q` rows of `d` at stride `qs`, `kb` `cols`
/// keys of `d` at stride `ks`, `st` `rows × cols`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn gemm_scores(
    rows: usize,
    cols: usize,
    d: usize,
    q: &[f32],
    qs: usize,
    kb: &[f32],
    ks: usize,
    scale: f32,
    st: &mut [f32],
) {
    assert!(q.len() > (rows - 1) * qs + d - 1 && kb.len() > (cols - 1) * ks + d - 1 && st.len() >= rows * cols);
    // SAFETY: the asserted extents: every stride addresses inside those slices.
    unsafe {
        gemm::gemm(
            rows,
            cols,
            d,
            st.as_mut_ptr(),
            1,
            cols as isize,
            false,
            q.as_ptr(),
            1,
            qs as isize,
            kb.as_ptr(),
            ks as isize,
            1,
            0.0f32,
            scale,
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    };
}

/// `o (+)= P V` through the `gemm` crate: `st` `rows × cols`, `vj` `cols` rows of `dv` at
/// stride `vs`, `o` rows of `dv` at stride `os`, accumulated when `acc`.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn gemm_pv(
    rows: usize,
    cols: usize,
    dv: usize,
    st: &[f32],
    vj: &[f32],
    vs: usize,
    o: &mut [f32],
    os: usize,
    acc: bool,
) {
    assert!(st.len() >= rows * cols && vj.len() > (cols - 1) * vs + dv - 1 && o.len() > (rows - 1) * os + dv - 1);
    // SAFETY: the asserted extents: every stride addresses inside those slices.
    unsafe {
        gemm::gemm(
            rows,
            dv,
            cols,
            o.as_mut_ptr(),
            1,
            os as isize,
            acc,
            st.as_ptr(),
            1,
            cols as isize,
            vj.as_ptr(),
            1,
            vs as isize,
            if acc { 1.0f32 } else { 0.0 },
            1.0f32,
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    };
}

/// NaN-propagating maximum of a row ([`super::math_vec::max_slice_avx512`] on AVX-512 CPUs,
/// [`super::math_vec::max_slice_avx2`] on AVX2 ones).
#[inline(always)]
pub(super) fn row_max(x: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        // SAFETY: AVX-512 checked.
        return unsafe { super::math_vec::max_slice_avx512(x) };
    }
    #[cfg(target_arch = "x86_64")]
    if super::simd::has_avx2() {
        // SAFETY: AVX2 + FMA checked.
        return unsafe { super::math_vec::max_slice_avx2(x) };
    }
    super::simd::dispatch(
        #[inline(always)]
        || max_row(x),
    )
}

/// `x = exp(x - m)` in place; returns the sum (16 partial sums, so the loop vectorizes; with
/// FMAs on AVX-512 CPUs, [`super::math_vec::exp_sum_slice_avx512`], and on AVX2 ones,
/// [`super::math_vec::exp_sum_slice_avx2`]).
#[inline(always)]
pub(super) fn exp_sum(x: &mut [f32], m: f32) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if has_avx512() {
        // SAFETY: AVX-512 checked.
        return unsafe { super::math_vec::exp_sum_slice_avx512(x, m) };
    }
    #[cfg(target_arch = "x86_64")]
    if super::simd::has_avx2() {
        // SAFETY: AVX2 + FMA checked.
        return unsafe { super::math_vec::exp_sum_slice_avx2(x, m) };
    }
    // Compiled for AVX2 + FMA where the CPU has them (without AVX-512).
    super::simd::dispatch(
        #[inline(always)]
        || {
            let mut acc = [0f32; 16];
            let mut chunks = x.chunks_exact_mut(16);
            for c in &mut chunks {
                for (e, a) in c.iter_mut().zip(&mut acc) {
                    *e = exp_f32(*e - m);
                    *a += *e;
                }
            }
            let mut sum = 0f32;
            for e in chunks.into_remainder() {
                *e = exp_f32(*e - m);
                sum += *e;
            }
            sum + acc.iter().sum::<f32>()
        },
    )
}

/// Hide keys `j > i` from the scores `sr` of query `i` against keys `j0 ..`.
#[inline(always)]
pub(super) fn causal(sr: &mut [f32], i: usize, j0: usize) {
    let first_hidden = (i + 1).saturating_sub(j0).min(sr.len());
    sr[first_hidden..].fill(f32::NEG_INFINITY);
}

/// Mask the scores `sr` of query `i` against keys `j0 ..` (batch `bi`, head `hi`).
#[inline(always)]
fn apply_mask(mask: MaskData<'_>, sr: &mut [f32], bi: usize, hi: usize, i: usize, j0: usize) {
    match mask {
        MaskData::None | MaskData::Lens(_) => {}
        MaskData::Causal => causal(sr, i, j0),
        MaskData::Bias(b, st) => {
            let base = bi * st[0] + hi * st[1] + i * st[2] + j0 * st[3];
            if st[3] == 1 {
                let n = sr.len();
                for (e, &a) in sr.iter_mut().zip(&b[base..base + n]) {
                    *e += a;
                }
            } else {
                for (c, e) in sr.iter_mut().enumerate() {
                    *e += b[base + c * st[3]];
                }
            }
        }
        MaskData::Bool(b, st) => {
            let base = bi * st[0] + hi * st[1] + i * st[2] + j0 * st[3];
            for (c, e) in sr.iter_mut().enumerate() {
                if !b[base + c * st[3]] {
                    *e = f32::NEG_INFINITY;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::broadcast_strides;

    #[test]
    fn strides_of_broadcast_bias() {
        assert_eq!(broadcast_strides(&[2, 1, 1, 5], [2, 3, 4, 5]), Some([5, 0, 0, 1]));
        assert_eq!(broadcast_strides(&[4, 5], [2, 3, 4, 5]), Some([0, 0, 5, 1]));
        assert_eq!(broadcast_strides(&[], [2, 3, 4, 5]), Some([0, 0, 0, 0]));
        assert_eq!(broadcast_strides(&[3, 4, 1], [2, 3, 4, 5]), Some([0, 4, 1, 0]));
        assert_eq!(broadcast_strides(&[3, 5], [2, 3, 4, 5]), None);
    }
}
