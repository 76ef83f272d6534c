//! Rank-ordered BPE over one pre-tokenized piece (llama.cpp `llm_tokenizer_bpe_session`): start
//! from UTF-8 characters, repeatedly merge the adjacent pair with the lowest merge rank (ties:
//! leftmost), then look each symbol up; a symbol that is not a token is emitted byte by byte.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::vocab::Vocab;

#[derive(Clone, Copy)]
struct Sym {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// Tokenize one piece `word` (already byte-encoded when the vocabulary is byte-level) into `out`.
pub(crate) fn bpe_piece(vocab: &Vocab, word: &str, byte_level: bool, newline_runs_whole: bool, out: &mut Vec<u32>) {
    if word.is_empty() {
        return;
    }
    if vocab.ignore_merges
        && let Some(id) = vocab.id(word)
    {
        out.push(id);
        return;
    }
    if newline_runs_whole
        && word.bytes().all(|b| b == b'\n')
        && let Some(id) = vocab.id(word)
    {
        out.push(id);
        return;
    }
    let mut syms: Vec<Sym> = Vec::with_capacity(word.len());
    for (i, (start, ch)) in word.char_indices().enumerate() {
        let len = ch.len_utf8();
        let next = if start + len == word.len() { None } else { Some(i + 1) };
        syms.push(Sym { start, len, prev: i.checked_sub(1), next });
    }
    // (rank, left, right, left_len, right_len): min-heap by rank, then leftmost.
    #[allow(clippy::type_complexity)] // (rank, position, left, right, generation)
    let mut heap: BinaryHeap<Reverse<(u32, usize, usize, usize, usize)>> = BinaryHeap::new();
    let text = |s: &Sym| &word[s.start..s.start + s.len];
    let push = |heap: &mut BinaryHeap<_>, syms: &[Sym], l: Option<usize>, r: Option<usize>| {
        let (Some(l), Some(r)) = (l, r) else { return };
        let (a, b) = (&syms[l], &syms[r]);
        let (Some(ia), Some(ib)) = (vocab.id(text(a)), vocab.id(text(b))) else { return };
        if let Some(&rank) = vocab.merges.get(&(ia, ib)) {
            heap.push(Reverse((rank, l, r, a.len, b.len)));
        }
    };
    for i in 1..syms.len() {
        push(&mut heap, &syms, Some(i - 1), Some(i));
    }
    while let Some(Reverse((_, l, r, llen, rlen))) = heap.pop() {
        // Stale if either side changed since the pair was queued.
        if syms[l].len != llen || syms[r].len != rlen || llen == 0 || rlen == 0 {
            continue;
        }
        syms[l].len += rlen;
        syms[r].len = 0;
        syms[l].next = syms[r].next;
        if let Some(n) = syms[r].next {
            syms[n].prev = Some(l);
        }
        let (p, n) = (syms[l].prev, syms[l].next);
        push(&mut heap, &syms, p, Some(l));
        push(&mut heap, &syms, Some(l), n);
    }
    for s in syms.iter().filter(|s| s.len > 0) {
        let t = text(s);
        if let Some(id) = vocab.id(t) {
            out.push(id);
        } else {
            for &b in t.as_bytes() {
                // llama.cpp looks up each byte of the symbol's text as a one-byte token
                // (byte-level) or as `<0xXX>` (raw UTF-8 vocabularies), and drops misses.
                let id = if byte_level {
                    std::str::from_utf8(&[b]).ok().and_then(|s| vocab.id(s))
                } else {
                    vocab.byte_token(b, false)
                };
                out.extend(id);
            }
        }
    }
}
