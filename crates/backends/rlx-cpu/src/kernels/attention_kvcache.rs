//! Native kernel for the `attention_with_kvcache` composite (`rlx_ir::compose::attention`):
//! a decoder step's attention over a KV cache plus the step's own keys, reading only the
//! visible cache columns.
//!
//! Operands: `q` `[B, S, H, D]`, the new `k` `[B, S, Hk, D]` and `v` `[B, S, Hk, Dv]` (f32),
//! `k_cache` `[B, Hk, C, D]` and `v_cache` `[B, Hk, C, Dv]` (both f32 or both f16, widened in
//! registers as they are read), `cache_len` i32 / i64 `[B]`; attr `scale`. Query `i` of
//! sequence `b` sees the cache columns `j < cache_len[b]` and the new keys `j ≤ i`.
//!
//! One task per (sequence, KV head), on the executor's team: for each new token, the scores of
//! the group's `H / Hk` query heads against the visible keys ([`gemv::dot_many`]: each key row
//! read once for all of them), `· scale`, the softmax of each row over its visible prefix
//! ([`composite::softmax_into`]), then `p · V_cache` and `p · V_new`
//! ([`gemv::axpy_many`]) added. The decomposition computes the same scores and products over
//! the whole capacity `C` with masked (zero-weight) columns; a capacity is a power of two, so
//! it read up to twice the filled columns (bench/RESULTS.md, session 31). The products give
//! the decomposition's bits (the skipped columns add exact zeros); the softmax's sum runs over
//! fewer (zero) terms in another lane order, so results agree to f32 rounding.
//!
//! A `cache_len` outside `0..=C` is an error (the decomposition would read only `C` columns).
//!
//! [`gemv::dot_many`]: super::gemv::dot_many
//! [`gemv::axpy_many`]: super::gemv::axpy_many
//! [`composite::softmax_into`]: super::composite::softmax_into

use super::composite::softmax_into;
use super::gemv::{MatElem, axpy_many, dot_many};
use super::scratch::grown;
use super::simd::threads;
use super::spin::{self, SyncPtr};
use rlx_ir::half::f16;
use rlx_ir::ops::Composite;
use rlx_ir::{Attr, DType, IrError, Tensor};
use std::cell::RefCell;

/// The composite this kernel runs.
pub const NAME: &str = "attention_with_kvcache";

/// Multiply-adds of one run (scores and products over every cache column) from which the
/// (sequence, KV head) tasks run in parallel.
const PAR_WORK: usize = 1 << 15;

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
        if self.cache_f16 { "attention_kvcache_f16_cache" } else { "attention_kvcache_f32" }
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
    /// Scores, probabilities and the new keys' share of the output, per thread.
    static WORK: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
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
    let lens: Vec<i64> = match (ins[5].as_slice::<i32>(), ins[5].as_slice::<i64>()) {
        (Some(l), _) => l.iter().map(|&x| i64::from(x)).collect(),
        (_, Some(l)) => l.to_vec(),
        _ => return Err(plan()),
    };
    let lens: Vec<usize> = lens
        .iter()
        .enumerate()
        .map(|(r, &l)| {
            usize::try_from(l)
                .ok()
                .filter(|&l| l <= k.c)
                .ok_or_else(|| err(format!("cache_len[{r}] = {l} is outside 0..={} (the cache capacity)", k.c)))
        })
        .collect::<Result<_, _>>()?;
    let o = out.as_mut_slice::<f32>().ok_or_else(plan)?;
    let (b, s, h, hk, c, d, dv) = (k.b, k.s, k.h, k.hk, k.c, k.d, k.dv);
    if q.len() != b * s * h * d
        || kn.len() != b * s * hk * d
        || vn.len() != b * s * hk * dv
        || lens.len() != b
        || o.len() != b * s * h * dv
    {
        return Err(plan());
    }
    let ops = Ops { q, kn, vn, lens: &lens };
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

/// The f32 operands and the checked lengths.
struct Ops<'a> {
    q: &'a [f32],
    kn: &'a [f32],
    vn: &'a [f32],
    lens: &'a [usize],
}

fn run_typed<M: MatElem>(k: &KvCacheAttention, x: &Ops, kc: &[M], vc: &[M], o: &mut [f32]) {
    let (b, s, h, hk, c, d, dv) = (k.b, k.s, k.h, k.hk, k.c, k.d, k.dv);
    let rep = h / hk;
    let op = SyncPtr(o.as_mut_ptr());
    let task = |t: usize| {
        let (bi, g) = (t / hk, t % hk);
        let len = x.lens[bi];
        let ldw = len + s;
        // This group's cache rows, and its first new key / value row (rows `hk·d` apart).
        let (kcg, vcg) = (&kc[(bi * hk + g) * c * d..][..c * d], &vc[(bi * hk + g) * c * dv..][..c * dv]);
        let (kng, vng) = (&x.kn[(bi * s * hk + g) * d..], &x.vn[(bi * s * hk + g) * dv..]);
        WORK.with_borrow_mut(|work| {
            let (w, rest) = grown(work, 2 * rep * ldw + rep * dv).split_at_mut(rep * ldw);
            let (p, on) = rest.split_at_mut(rep * ldw);
            for i in 0..s {
                // The group's query heads of token i: `rep` rows `d` apart.
                let qi = &x.q[((bi * s + i) * h + g * rep) * d..][..rep * d];
                let vis = len + i + 1;
                dot_many(kcg, d, len, qi, d, rep, d, w, ldw);
                dot_many(kng, hk * d, i + 1, qi, d, rep, d, &mut w[len..], ldw);
                for r in 0..rep {
                    let row = &mut w[r * ldw..][..vis];
                    row.iter_mut().for_each(|e| *e *= k.scale);
                    softmax_into(row, &mut p[r * ldw..][..vis]);
                }
                // SAFETY: task (bi, g) alone writes the `rep` heads of group g of token i.
                let oi = unsafe { op.slice(((bi * s + i) * h + g * rep) * dv, rep * dv) };
                axpy_many(vcg, dv, dv, p, ldw, 1, rep, len, oi, dv);
                axpy_many(vng, hk * dv, dv, &p[len..], ldw, 1, rep, i + 1, on, dv);
                oi.iter_mut().zip(on.iter()).for_each(|(a, &n)| *a += n);
            }
        });
    };
    let tasks = b * hk;
    let work = b * h * s * (c + s) * (d + dv);
    if tasks > 1 && threads() > 1 && work >= PAR_WORK {
        spin::for_each(tasks, task);
    } else {
        (0..tasks).for_each(task);
    }
}
