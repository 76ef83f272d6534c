//! Einsum (opset 12+): NumPy `einsum` semantics, explicit (`->`) or implicit output, `...`
//! broadcasting dims, repeated labels within one operand (diagonals). Lowered onto `select` +
//! `reduce_sum` for diagonals and labels used by one operand only, then one `dot_general` per
//! further operand (labels shared and still needed are batch dims, shared and not needed are
//! contracted), then a `transpose` into the output order.

use super::Ctx;
use crate::error::Result;
use rlx_ir::ops::{CompareOp as C, DotGeneral};
use rlx_ir::{DType, NodeId, Shape};

/// Labels of each operand and of the output, with `...` expanded into per-dim labels.
fn parse(c: &Ctx, eq: &str, ranks: &[usize]) -> Result<(Vec<Vec<char>>, Vec<char>)> {
    let eq: String = eq.chars().filter(|ch| !ch.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != ranks.len() {
        return Err(c.err(format!("equation {eq:?} has {} operands, the node {}", terms.len(), ranks.len())));
    }
    // Ellipsis dims get labels from a private range, aligned from the right.
    let ell = |k: usize| char::from_u32(0x1000 + k as u32).unwrap_or('?');
    let mut max_ell = 0;
    let mut ops = vec![];
    for (t, &r) in terms.iter().zip(ranks) {
        let explicit = t.replace("...", "").chars().count();
        let mut labels = vec![];
        if let Some((a, b)) = t.split_once("...") {
            let n =
                r.checked_sub(explicit).ok_or_else(|| c.err(format!("term {t:?} has more labels than rank {r}")))?;
            max_ell = max_ell.max(n);
            labels.extend(a.chars());
            labels.extend((0..n).map(|k| ell(n - 1 - k)));
            labels.extend(b.chars());
        } else {
            labels.extend(t.chars());
        }
        if labels.len() != r {
            return Err(c.err(format!("term {t:?} does not match an operand of rank {r}")));
        }
        ops.push(labels);
    }
    let ell_out: Vec<char> = (0..max_ell).rev().map(ell).collect();
    let out = match rhs {
        Some(r) => {
            let mut o = vec![];
            if let Some((a, b)) = r.split_once("...") {
                o.extend(a.chars());
                o.extend(ell_out);
                o.extend(b.chars());
            } else {
                o.extend(r.chars());
            }
            o
        }
        None => {
            let all: Vec<char> = ops.iter().flatten().copied().filter(|ch| ch.is_alphabetic()).collect();
            let mut once: Vec<char> =
                all.iter().copied().filter(|ch| all.iter().filter(|x| *x == ch).count() == 1).collect();
            once.sort_unstable();
            ell_out.into_iter().chain(once).collect()
        }
    };
    Ok((ops, out))
}

/// Take the diagonal of every label repeated within one operand.
fn diagonals(c: &mut Ctx, mut x: NodeId, labels: &mut Vec<char>) -> Result<NodeId> {
    while let Some((i, j)) = (0..labels.len())
        .flat_map(|i| (i + 1..labels.len()).map(move |j| (i, j)))
        .find(|&(i, j)| labels[i] == labels[j])
    {
        let dims = c.dims(x)?;
        let a = c.g.iota(Shape::new(&dims, DType::I64), i);
        let b = c.g.iota(Shape::new(&dims, DType::I64), j);
        let eq = c.g.compare(C::Eq, a, b);
        let zero = c.scalar_like(0.0, x);
        let m = c.g.select(eq, x, zero);
        x = c.g.sum(m, &[j as i64], false);
        labels.remove(j);
    }
    Ok(x)
}

/// ONNX `Einsum`.
pub(super) fn einsum(c: &mut Ctx) -> Result<Vec<NodeId>> {
    let xs = c.all();
    let ranks: Vec<usize> = xs.iter().map(|&x| c.rank(x)).collect();
    let (mut labels, out) = parse(c, &c.astr("equation", ""), &ranks)?;
    let mut ops = vec![];
    for (k, &x) in xs.iter().enumerate() {
        let mut l = std::mem::take(&mut labels[k]);
        let mut x = diagonals(c, x, &mut l)?;
        // Sum out labels no other operand and not the output use.
        let others: Vec<char> = labels
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != k)
            .flat_map(|(_, l)| l.clone())
            .chain(ops.iter().flat_map(|(_, l): &(NodeId, Vec<char>)| l.clone()))
            .collect();
        let lone: Vec<usize> = (0..l.len()).filter(|&i| !out.contains(&l[i]) && !others.contains(&l[i])).collect();
        if !lone.is_empty() {
            x = c.g.sum(x, &lone.iter().map(|&i| i as i64).collect::<Vec<_>>(), false);
            l = l.iter().enumerate().filter(|(i, _)| !lone.contains(i)).map(|(_, ch)| *ch).collect();
        }
        labels[k] = l.clone();
        ops.push((x, l));
    }
    let (mut acc, mut al) = ops[0].clone();
    for k in 1..ops.len() {
        let (x, xl) = ops[k].clone();
        let later: Vec<char> = out.iter().copied().chain(ops[k + 1..].iter().flat_map(|(_, l)| l.clone())).collect();
        let shared: Vec<char> = al.iter().copied().filter(|ch| xl.contains(ch)).collect();
        let batch: Vec<char> = shared.iter().copied().filter(|ch| later.contains(ch)).collect();
        let contract: Vec<char> = shared.iter().copied().filter(|ch| !later.contains(ch)).collect();
        let pos = |l: &[char], ch: &char| l.iter().position(|x| x == ch).unwrap_or(0);
        let dg = DotGeneral {
            lhs_contracting: contract.iter().map(|ch| pos(&al, ch)).collect(),
            rhs_contracting: contract.iter().map(|ch| pos(&xl, ch)).collect(),
            lhs_batch: batch.iter().map(|ch| pos(&al, ch)).collect(),
            rhs_batch: batch.iter().map(|ch| pos(&xl, ch)).collect(),
            preferred_element_type: None,
        };
        acc = c.g.dot_general(acc, x, dg);
        let mut nl = batch.clone();
        nl.extend(al.iter().copied().filter(|ch| !shared.contains(ch)));
        nl.extend(xl.iter().copied().filter(|ch| !shared.contains(ch)));
        al = nl;
    }
    let extra: Vec<i64> = (0..al.len()).filter(|&i| !out.contains(&al[i])).map(|i| i as i64).collect();
    if !extra.is_empty() {
        acc = c.g.sum(acc, &extra, false);
        al.retain(|ch| out.contains(ch));
    }
    if al.len() != out.len() {
        return Err(c.err(format!("output labels {out:?} do not match the operands' {al:?}")));
    }
    let perm: Vec<usize> = out.iter().map(|ch| al.iter().position(|x| x == ch).unwrap_or(0)).collect();
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        return Ok(vec![acc]);
    }
    Ok(vec![c.g.transpose(acc, &perm)])
}
