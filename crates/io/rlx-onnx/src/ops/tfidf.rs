//! `TfIdfVectorizer` (opset 9, integer pools): n-gram counts of each row as comparisons of
//! shifted slices against the pool's n-grams (known from the attributes), following the ONNX
//! reference: unigrams are counted once, longer n-grams once per skip distance `1 …
//! max_skip_count + 1`.

use super::Ctx;
use crate::error::Result;
use rlx_ir::ops::{BinaryOp as B, CompareOp as C};
use rlx_ir::{DType, NodeId};

/// `X [L]` or `[B, L]` (integers) → `Y [C]` / `[B, C]` f32, `C = max(ngram_indexes) + 1`;
/// `mode` `TF` (counts), `IDF` (`weight · (count > 0)`), `TFIDF` (`weight · count`).
pub(super) fn tfidf_vectorizer(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let x = c.x(0)?;
    let d = c.dims(x)?;
    let pool = c.aints("pool_int64s").ok_or_else(|| c.err("needs pool_int64s (string pools are not supported)"))?;
    let starts = c.aints("ngram_counts").unwrap_or_default();
    let cols = c.aints("ngram_indexes").unwrap_or_default();
    let (min_n, max_n) = (c.ai("min_gram_length", 1).max(1) as usize, c.ai("max_gram_length", 1).max(1) as usize);
    let max_skip = c.ai("max_skip_count", 0).max(0) as usize;
    let mode = c.astr("mode", "TF");
    if d.is_empty() || d.len() > 2 || !matches!(mode.as_str(), "TF" | "IDF" | "TFIDF") {
        return Err(c.err(format!("input {d:?} must be [L] or [B, L]; mode {mode:?} TF, IDF or TFIDF")));
    }
    let (b, l) = if d.len() == 1 { (1, d[0]) } else { (d[0], d[1]) };
    let x2 = c.g.reshape(x, [b, l]);
    let x2 = c.g.convert(x2, DType::I64);
    // The pool's n-grams in order: n-grams of size k + 1 start at ngram_counts[k].
    let mut grams: Vec<&[i64]> = vec![];
    for (k, &s) in starts.iter().enumerate() {
        let end = starts.get(k + 1).copied().unwrap_or(pool.len() as i64);
        let (s, e, n) = (s.max(0) as usize, (end.max(0) as usize).min(pool.len()), k + 1);
        if s > e || (e - s) % n != 0 {
            return Err(c.err(format!("ngram_counts {starts:?} do not split a pool of {}", pool.len())));
        }
        grams.extend(pool[s..e].chunks(n));
    }
    if grams.len() != cols.len() || cols.iter().any(|&i| i < 0) {
        return Err(c.err(format!("{} pool n-grams but ngram_indexes {cols:?}", grams.len())));
    }
    let width = cols.iter().max().map_or(0, |&m| m as usize + 1);
    let mut out: Vec<Option<NodeId>> = vec![None; width];
    for (gram, &col) in grams.iter().zip(&cols) {
        let n = gram.len();
        if n < min_n || n > max_n {
            continue;
        }
        let dists = if n == 1 { 1..=1 } else { 1..=max_skip + 1 };
        for dist in dists {
            let span = (n - 1) * dist;
            if span >= l {
                continue;
            }
            let w = l - span;
            let mut hit = None;
            for (k, &g) in gram.iter().enumerate() {
                let s = c.g.slice_in_dim(x2, k * dist, k * dist + w, 1);
                let gv = c.scalar(g as f64, DType::I64);
                let eq = c.g.compare(C::Eq, s, gv);
                hit = Some(match hit {
                    Some(h) => c.g.binary(B::And, h, eq),
                    None => eq,
                });
            }
            let hit = c.g.convert(hit.expect("n >= 1"), DType::F32);
            let cnt = c.g.sum(hit, &[1], false);
            let slot = &mut out[col as usize];
            *slot = Some(match *slot {
                Some(acc) => c.g.add(acc, cnt),
                None => cnt,
            });
        }
    }
    let weights = c.afloats("weights");
    let mut columns = Vec::with_capacity(width);
    for (j, v) in out.into_iter().enumerate() {
        let v = match v {
            Some(v) => v,
            None => {
                let z = c.scalar(0.0, DType::F32);
                c.g.broadcast_in_dim(z, [b], &[])
            }
        };
        let wj = weights.as_ref().and_then(|w| w.get(j).copied()).unwrap_or(1.0) as f64;
        let v = match mode.as_str() {
            "TF" => v,
            "IDF" => {
                let zero = c.scalar(0.0, DType::F32);
                let present = c.g.compare(C::Gt, v, zero);
                let p = c.g.convert(present, DType::F32);
                let k = c.scalar(wj, DType::F32);
                c.g.mul(p, k)
            }
            _ => {
                let k = c.scalar(wj, DType::F32);
                c.g.mul(v, k)
            }
        };
        columns.push(c.g.expand_dims(v, 1));
    }
    if columns.is_empty() {
        return Err(c.err("the pool is empty"));
    }
    let y = if columns.len() == 1 { columns[0] } else { c.g.concatenate(&columns, 1) };
    Ok(vec![if d.len() == 1 { c.g.reshape(y, [width]) } else { y }])
}
