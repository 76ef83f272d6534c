//! Native kernel for the `attention_with_kvcache` composite (`rlx_ir::compose::attention`):
//! a decoder step's attention over a KV cache plus the step's own keys, reading only the
//! visible cache columns.
//!
//! Operands: `q` `[B, S, H, D]`, the new `k` `[B, S, Hk, D]` and `v` `[B, S, Hk, Dv]` (f32),
//! `k_cache` `[B, Hk, C, D]` and `v_cache` `[B, Hk, C, Dv]` (both f32 or both f16, widened in
//! registers as they are read), `cache_len` i32 / i64 `[B]`; attr `scale`. Query `i` of
//! sequence `b` sees the cache columns `j < cache_len[b]` and the new keys `j ≤ i`.
//!
//! A block of [`TILE_ROWS`] or more new tokens (a prompt chunk) runs in flash tiles
//! ([`run_tiles`]): `scaled_dot_product_attention`'s tile and online softmax
//! ([`super::attention`]'s `Flash`) over the filled cache columns and then the new keys up to
//! each tile's last token, one task per (sequence, block of 64 tokens), each key block loaded
//! once for the query heads of its KV group. Before, a prompt chunk after the first attended
//! through the composite's decomposition (`[Hk, rep·S, C + S]` scores, mask, softmax,
//! concatenation, four products); Qwen2.5-0.5B, 1024-token prompt (four chunks of 256), 2
//! threads: attention ≈ 800 → 300 ms, prompt 220 → 245–253 tok/s.
//!
//! Fewer new tokens (decoding) run two passes of GEMVs on the executor's team (FlashDecoding's
//! split of the keys, so that a few KV heads still spread over the threads):
//! 1. one task per chunk of [`CHUNK`] filled cache columns of a (sequence, KV head): for each new
//!    token, the scores of the group's `H / Hk` query heads (`q·k · scale`, [`gemv::dot_many`]:
//!    each key row read once for all of them), the chunk's max `m_c`, `p = exp(score - m_c)`, its
//!    sum `l_c` and `o_c = p · V_chunk` ([`gemv::axpy_many`]);
//! 2. one task per (sequence, KV head): the scores against the new keys `j ≤ i`, the row max `m`
//!    over them and every `m_c`, then `o = (p_new · V_new + Σ exp(m_c - m) o_c) / (l_new + Σ
//!    exp(m_c - m) l_c)`.
//!
//! The decomposition scores and weights the whole capacity `C` (a power of two, up to twice the
//! filled columns) under a mask, through five ops; here only the filled columns are read, once.
//! Chunks are a fixed number of columns, so results do not depend on the thread count; they
//! agree with the decomposition to f32 rounding (the softmax normalized after the products, the
//! exponentials rescaled once per chunk).
//!
//! A `cache_len` outside `0..=C` is an error (the decomposition would read only `C` columns).
//!
//! [`gemv::dot_many`]: super::gemv::dot_many
//! [`gemv::axpy_many`]: super::gemv::axpy_many

use super::attention::{BK, BQ, Flash, KeyBlock, OutRows, QueryRows, causal, exp_sum, row_max};
use super::gemv::{MatElem, axpy_many, dot_many};
use super::scratch::grown;
use super::simd::{dispatch, exp_f32, threads};
use super::spin::{self, SyncPtr};
use rlx_ir::half::f16;
use rlx_ir::half::slice::HalfFloatSliceExt;
use rlx_ir::ops::Composite;
use rlx_ir::{Attr, DType, IrError, Tensor};
use smallvec::SmallVec;
use std::cell::RefCell;

/// The composite this kernel runs.
pub const NAME: &str = "attention_with_kvcache";

/// Multiply-adds of one run (scores and products over every cache column) from which the
/// tasks run in parallel.
const PAR_WORK: usize = 1 << 15;
/// Filled cache columns per task of the first pass: a fixed size (not a share of the threads),
/// so results do not depend on the thread count; a 256-column f32 chunk of K (64 KiB at D =
/// 64) is read once for the group's query heads.
const CHUNK: usize = 256;
/// New tokens per sequence from which a run attends in flash tiles ([`run_tiles`]), as
/// `scaled_dot_product_attention`'s kernel: the AVX-512 tile products start at 8 query rows.
const TILE_ROWS: usize = 8;

/// A planned `attention_with_kvcache`.
#[derive(Clone, Debug, PartialEq)]
pub struct KvCacheAttention {
    /// Batch.
    pub b: usize,
    /// New tokens per sequence.
    pub s: usize,
    /// Query heads.
    pub h: usize,
    /// Key / value heads (divides `h`).
    pub hk: usize,
    /// Cache capacity.
    pub c: usize,
    /// Head dim of q and k.
    pub d: usize,
    /// Head dim of v.
    pub dv: usize,
    /// Score scale.
    pub scale: f32,
    /// The cache is f16 (else f32).
    pub cache_f16: bool,
}

impl KvCacheAttention {
    /// Name for reports.
    pub fn name(&self) -> &'static str {
        match (self.s >= TILE_ROWS, self.cache_f16) {
            (false, false) => "attention_kvcache_f32",
            (false, true) => "attention_kvcache_f16_cache",
            (true, false) => "attention_kvcache_tiles_f32",
            (true, true) => "attention_kvcache_tiles_f16_cache",
        }
    }
}

/// The kernel for `c` on these operands, if it runs them: f32 `q`, `k`, `v` and result, an
/// f32 or f16 cache, i32 / i64 lengths.
pub fn select(c: &Composite, ins: &[(Vec<usize>, DType)], outs: &[(Vec<usize>, DType)]) -> Option<KvCacheAttention> {
    let [(q, DType::F32), (k, DType::F32), (v, DType::F32), (kc, kct), (vc, vct), (l, lt)] = ins else { return None };
    let [(o, DType::F32)] = outs else { return None };
    let cache_f16 = match (kct, vct) {
        (DType::F32, DType::F32) => false,
        (DType::F16, DType::F16) => true,
        _ => return None,
    };
    if !matches!(lt, DType::I32 | DType::I64) || q.len() != 4 {
        return None;
    }
    let (b, s, h, d) = (q[0], q[1], q[2], q[3]);
    let (hk, dv, cap) = (*k.get(2)?, *v.get(3)?, *kc.get(2)?);
    let fits = k[..] == [b, s, hk, d]
        && v[..] == [b, s, hk, dv]
        && kc[..] == [b, hk, cap, d]
        && vc[..] == [b, hk, cap, dv]
        && l[..] == [b]
        && o[..] == [b, s, h, dv];
    if !fits || hk == 0 || h % hk != 0 || d == 0 || dv == 0 {
        return None;
    }
    let scale = match c.attrs.get("scale")? {
        Attr::Float(x) => *x as f32,
        _ => return None,
    };
    Some(KvCacheAttention { b, s, h, hk, c: cap, d, dv, scale, cache_f16 })
}

thread_local! {
    /// Scores, per thread.
    static WORK: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// The chunks' partial sums of one run, on the thread that runs the kernel.
    static PARTIALS: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
    /// An f16 cache's key and value block widened to f32 ([`run_tiles`]), per thread.
    static WIDE: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// Run `k` on `ins` (`[q, k, v, k_cache, v_cache, cache_len]`) into `out`.
///
/// Errors: operands that differ from the plan, a `cache_len` outside `0..=C`.
pub fn run(k: &KvCacheAttention, ins: &[&Tensor], out: &mut Tensor) -> Result<(), IrError> {
    let err = |msg: String| IrError::Eval { op: NAME.into(), msg };
    let plan = || err("operands differ from the plan".into());
    fn f32s(t: &Tensor, plan: impl Fn() -> IrError) -> Result<&[f32], IrError> {
        t.as_slice::<f32>().ok_or_else(plan)
    }
    let (q, kn, vn) = (f32s(ins[0], plan)?, f32s(ins[1], plan)?, f32s(ins[2], plan)?);
    let lens = match (ins[5].as_slice::<i32>(), ins[5].as_slice::<i64>()) {
        (Some(l), _) => Lens::I32(l),
        (_, Some(l)) => Lens::I64(l),
        _ => return Err(plan()),
    };
    for r in 0..lens.count() {
        let l = lens.raw(r);
        if usize::try_from(l).map_or(true, |l| l > k.c) {
            return Err(err(format!("cache_len[{r}] = {l} is outside 0..={} (the cache capacity)", k.c)));
        }
    }
    let o = out.as_mut_slice::<f32>().ok_or_else(plan)?;
    let (b, s, h, hk, c, d, dv) = (k.b, k.s, k.h, k.hk, k.c, k.d, k.dv);
    if q.len() != b * s * h * d
        || kn.len() != b * s * hk * d
        || vn.len() != b * s * hk * dv
        || lens.count() != b
        || o.len() != b * s * h * dv
    {
        return Err(plan());
    }
    let ops = Ops { q, kn, vn, lens };
    if k.cache_f16 {
        let (kc, vc) = (ins[3].as_slice::<f16>().ok_or_else(plan)?, ins[4].as_slice::<f16>().ok_or_else(plan)?);
        if kc.len() != b * hk * c * d || vc.len() != b * hk * c * dv {
            return Err(plan());
        }
        run_typed(k, &ops, kc, vc, o);
    } else {
        let (kc, vc) = (f32s(ins[3], plan)?, f32s(ins[4], plan)?);
        if kc.len() != b * hk * c * d || vc.len() != b * hk * c * dv {
            return Err(plan());
        }
        run_typed(k, &ops, kc, vc, o);
    }
    Ok(())
}

/// The f32 operands and the lengths (checked to lie in `0..=C`).
struct Ops<'a> {
    q: &'a [f32],
    kn: &'a [f32],
    vn: &'a [f32],
    lens: Lens<'a>,
}

/// `cache_len` as given, read in place (a run allocates nothing).
#[derive(Clone, Copy)]
enum Lens<'a> {
    I32(&'a [i32]),
    I64(&'a [i64]),
}

impl Lens<'_> {
    fn count(self) -> usize {
        match self {
            Lens::I32(l) => l.len(),
            Lens::I64(l) => l.len(),
        }
    }

    fn raw(self, r: usize) -> i64 {
        match self {
            Lens::I32(l) => i64::from(l[r]),
            Lens::I64(l) => l[r],
        }
    }

    /// Length `r`, once checked.
    fn at(self, r: usize) -> usize {
        self.raw(r) as usize
    }

    /// Pass-1 chunks of the sequences before `r` (each chunk is one per KV head).
    fn chunks_before(self, r: usize) -> usize {
        (0..r).map(|i| self.at(i).div_ceil(CHUNK)).sum()
    }
}

/// Where task `t` of the cache-chunk pass works: `(sequence, KV head, first column, columns)`,
/// or `None` past the last chunk. Chunks are [`CHUNK`] columns of each (sequence, KV head)'s
/// filled cache, in (sequence, head) order.
fn chunk_of(k: &KvCacheAttention, lens: Lens, mut t: usize) -> Option<(usize, usize, usize, usize)> {
    for bi in 0..lens.count() {
        let len = lens.at(bi);
        let per = len.div_ceil(CHUNK);
        if t < per * k.hk {
            let (g, ch) = (t / per, t % per);
            let j0 = ch * CHUNK;
            return Some((bi, g, j0, CHUNK.min(len - j0)));
        }
        t -= per * k.hk;
    }
    None
}

fn run_typed<M: MatElem>(k: &KvCacheAttention, x: &Ops, kc: &[M], vc: &[M], o: &mut [f32]) {
    if k.s >= TILE_ROWS {
        return run_tiles(k, x, kc, vc, o);
    }
    let (b, s, h, hk, c, d, dv) = (k.b, k.s, k.h, k.hk, k.c, k.d, k.dv);
    let rep = h / hk;
    // Per (chunk, token, query head): the chunk's score max `m`, its sum `l = Σ exp(score - m)`
    // and `Σ exp(score - m) · v` (`dv` floats).
    let slot = dv + 2;
    let chunks = x.lens.chunks_before(b) * hk;
    // Multiply-adds of the run: every filled column and new key, for every query row.
    let filled: usize = (0..b).map(|r| x.lens.at(r) + s).sum();
    let par = threads() > 1 && h * s * filled * (d + dv) >= PAR_WORK;
    let run =
        |n: usize, f: &(dyn Fn(usize) + Sync)| if par && n > 1 { spin::for_each(n, f) } else { (0..n).for_each(f) };
    PARTIALS.with_borrow_mut(|parts| {
        let pp = SyncPtr(grown(parts, chunks * s * rep * slot).as_mut_ptr());
        // Pass 1: every chunk of filled cache columns, all tokens and query heads of its group.
        run(chunks, &|t| {
            let Some((bi, g, j0, n)) = chunk_of(k, x.lens, t) else { return };
            let kcg = &kc[((bi * hk + g) * c + j0) * d..][..n * d];
            let vcg = &vc[((bi * hk + g) * c + j0) * dv..][..n * dv];
            WORK.with_borrow_mut(|work| {
                let w = grown(work, rep * n);
                for i in 0..s {
                    // The group's query heads of token i: `rep` rows `d` apart.
                    let qi = &x.q[((bi * s + i) * h + g * rep) * d..][..rep * d];
                    // SAFETY: task t alone writes its chunk's slots.
                    let part = unsafe { pp.slice((t * s + i) * rep * slot, rep * slot) };
                    dot_many(kcg, d, n, qi, d, rep, d, w, n);
                    for r in 0..rep {
                        let row = &mut w[r * n..][..n];
                        row.iter_mut().for_each(|e| *e *= k.scale);
                        let m = row_max(row);
                        part[r * slot] = m;
                        part[r * slot + 1] = exp_sum(row, m);
                    }
                    axpy_many(vcg, dv, dv, w, n, 1, rep, n, &mut part[2..], slot);
                }
            });
        });
        let parts = &*parts;
        let op = SyncPtr(o.as_mut_ptr());
        // Pass 2, per (sequence, KV head): the new keys, then the chunks merged (FlashDecoding's
        // split-KV reduction: each chunk's sums rescaled by `exp(m_chunk - m)`).
        run(b * hk, &|t| {
            let (bi, g) = (t / hk, t % hk);
            // This sequence's chunks of head g: tasks `c0 .. c0 + per` of pass 1.
            let per = x.lens.at(bi).div_ceil(CHUNK);
            let c0 = x.lens.chunks_before(bi) * hk + g * per;
            let (kng, vng) = (&x.kn[(bi * s * hk + g) * d..], &x.vn[(bi * s * hk + g) * dv..]);
            WORK.with_borrow_mut(|work| {
                let w = grown(work, rep * s);
                for i in 0..s {
                    let qi = &x.q[((bi * s + i) * h + g * rep) * d..][..rep * d];
                    dot_many(kng, hk * d, i + 1, qi, d, rep, d, w, s);
                    // SAFETY: task (bi, g) alone writes the `rep` heads of group g of token i.
                    let oi = unsafe { op.slice(((bi * s + i) * h + g * rep) * dv, rep * dv) };
                    for r in 0..rep {
                        let row = &mut w[r * s..][..=i];
                        row.iter_mut().for_each(|e| *e *= k.scale);
                        let chunk = |ch: usize| &parts[((c0 + ch) * s + i) * rep * slot + r * slot..][..slot];
                        let m = (0..per).fold(row_max(row), |m, ch| m.max(chunk(ch)[0]));
                        let mut l = exp_sum(row, m);
                        let or = &mut oi[r * dv..][..dv];
                        axpy_many(vng, hk * dv, dv, row, 1, 1, 1, i + 1, or, dv);
                        for ch in 0..per {
                            let pc = chunk(ch);
                            let f = exp_f32(pc[0] - m);
                            l += f * pc[1];
                            or.iter_mut().zip(&pc[2..]).for_each(|(a, &v)| *a += f * v);
                        }
                        let inv = 1.0 / l;
                        or.iter_mut().for_each(|a| *a *= inv);
                    }
                }
            });
        });
    });
}

/// A block of prompt tokens (`S ≥` [`TILE_ROWS`]) in flash tiles: one task per (sequence, block
/// of [`BQ`] new tokens) on the executor's team; per KV head, each block of [`BK`] filled cache
/// columns and then each block of new keys up to the task's last token is loaded once and
/// attended by the group's query heads (`scaled_dot_product_attention`'s tile and online
/// softmax, [`Flash`]; new key `j` is hidden from the tokens `i < j`).
/// Nothing of size `S × (C + S)` is formed; an f16 cache block is widened into a per-thread
/// scratch once for the group.
fn run_tiles<M: MatElem>(k: &KvCacheAttention, x: &Ops, kc: &[M], vc: &[M], o: &mut [f32]) {
    let (b, s, h, hk, c, d, dv) = (k.b, k.s, k.h, k.hk, k.c, k.d, k.dv);
    let rep = h / hk;
    let blocks = s.div_ceil(BQ);
    let (per_batch, per_block) = (s * h * dv, BQ * h * dv);
    let op = SyncPtr(o.as_mut_ptr());
    let task = |t: usize| {
        let (bi, qb) = (t / blocks, t % blocks);
        let q0 = qb * BQ;
        let n = BQ.min(s - q0);
        // SAFETY: task `t` alone writes the rows of tokens q0 .. q0 + n of sequence bi (disjoint
        // chunks of `o`).
        let ot = unsafe { op.slice(bi * per_batch + qb * per_block, n * h * dv) };
        let len = x.lens.at(bi);
        let head = |hi: usize| {
            let rows = QueryRows { q: &x.q[((bi * s + q0) * h + hi) * d..], qs: h * d, n, d, dv, scale: k.scale };
            (rows, OutRows { n, stride: h * dv, offset: hi * dv })
        };
        let mut states: SmallVec<[Flash; 8]> = SmallVec::new();
        WIDE.with_borrow_mut(|wide| {
            let mut keys = KeyBlock::new(&head(0).0);
            let wide = grown(wide, if M::as_f32(kc).is_some() { 0 } else { BK * (d + dv) });
            for g in 0..hk {
                states.clear();
                states.extend((0..rep).map(|_| Flash::new()));
                let (kcg, vcg) = (&kc[(bi * hk + g) * c * d..], &vc[(bi * hk + g) * c * dv..]);
                for j0 in (0..len).step_by(BK) {
                    let cols = BK.min(len - j0);
                    let (kb, vb): (&[f32], &[f32]) = match (M::as_f32(kcg), M::as_f32(vcg)) {
                        (Some(kf), Some(vf)) => (&kf[j0 * d..][..cols * d], &vf[j0 * dv..][..cols * dv]),
                        _ => {
                            let (kh, vh) = (M::as_f16(kcg).expect("f32 or f16"), M::as_f16(vcg).expect("f32 or f16"));
                            let (kw, vw) = wide.split_at_mut(BK * d);
                            kh[j0 * d..][..cols * d].convert_to_f32_slice(&mut kw[..cols * d]);
                            vh[j0 * dv..][..cols * dv].convert_to_f32_slice(&mut vw[..cols * dv]);
                            (&kw[..cols * d], &vw[..cols * dv])
                        }
                    };
                    keys.load(kb, d, cols, d);
                    for (r, st) in states.iter_mut().enumerate() {
                        let (rows, at) = head(g * rep + r);
                        st.block(&rows, &mut keys, (kb, d), vb, dv, ot, at, |_, _| {});
                    }
                }
                // The new keys of this group up to the task's last token, causal.
                let (kn, vn) = (&x.kn[(bi * s * hk + g) * d..], &x.vn[(bi * s * hk + g) * dv..]);
                for j0 in (0..q0 + n).step_by(BK) {
                    let cols = BK.min(q0 + n - j0);
                    let kj = &kn[j0 * hk * d..];
                    keys.load(kj, hk * d, cols, d);
                    for (r, st) in states.iter_mut().enumerate() {
                        let (rows, at) = head(g * rep + r);
                        st.block(&rows, &mut keys, (kj, hk * d), &vn[j0 * hk * dv..], hk * dv, ot, at, |i, sr| {
                            causal(sr, q0 + i, j0)
                        });
                    }
                }
                for (r, st) in states.iter().enumerate() {
                    let (rows, at) = head(g * rep + r);
                    st.finish(&rows, ot, at);
                }
            }
        });
    };
    let tasks = b * blocks;
    if threads() > 1 && tasks > 1 {
        spin::for_each(tasks, |t| dispatch(|| task(t)));
    } else {
        (0..tasks).for_each(|t| dispatch(|| task(t)));
    }
}
