//! SentencePiece BPE by piece score (llama.cpp `llm_tokenizer_spm_session`): start from UTF-8
//! characters, repeatedly merge the adjacent pair whose concatenation is a token with the
//! highest score (ties: leftmost), then emit each symbol's token, or its bytes as `<0xXX>`
//! byte-fallback tokens.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use crate::TextError;
use crate::vocab::Vocab;

#[derive(Clone, Copy)]
struct Sym {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Bigram {
    /// Max-heap order: higher score first, then lower left index.
    fn cmp(&self, o: &Self) -> Ordering {
        self.score.total_cmp(&o.score).then_with(|| o.left.cmp(&self.left))
    }
}

/// Tokenize `text` (spaces already escaped to `▁`) into `out`.
///
/// Errors: [`TextError::Unencodable`] when a character is neither a token nor representable by
/// byte-fallback tokens.
pub(crate) fn spm_tokenize(vocab: &Vocab, text: &str, out: &mut Vec<u32>) -> Result<(), TextError> {
    let mut syms: Vec<Sym> = Vec::with_capacity(text.len());
    for (i, (start, ch)) in text.char_indices().enumerate() {
        let len = ch.len_utf8();
        let next = if start + len == text.len() { None } else { Some(i + 1) };
        syms.push(Sym { start, len, prev: i.checked_sub(1), next });
    }
    let mut heap = BinaryHeap::new();
    let try_add = |heap: &mut BinaryHeap<Bigram>, syms: &[Sym], l: Option<usize>, r: Option<usize>| {
        let (Some(l), Some(r)) = (l, r) else { return };
        let size = syms[l].len + syms[r].len;
        let s = syms[l].start;
        if let Some(id) = vocab.id(&text[s..s + size]) {
            heap.push(Bigram { score: vocab.scores[id as usize], left: l, right: r, size });
        }
    };
    for i in 1..syms.len() {
        try_add(&mut heap, &syms, Some(i - 1), Some(i));
    }
    while let Some(b) = heap.pop() {
        let (l, r) = (b.left, b.right);
        if syms[l].len == 0 || syms[r].len == 0 || syms[l].len + syms[r].len != b.size {
            continue;
        }
        syms[l].len += syms[r].len;
        syms[r].len = 0;
        syms[l].next = syms[r].next;
        if let Some(n) = syms[r].next {
            syms[n].prev = Some(l);
        }
        let (p, n) = (syms[l].prev, syms[l].next);
        try_add(&mut heap, &syms, p, Some(l));
        try_add(&mut heap, &syms, Some(l), n);
    }
    let mut i = if syms.is_empty() { None } else { Some(0) };
    while let Some(k) = i {
        let s = syms[k];
        let piece = &text[s.start..s.start + s.len];
        if let Some(id) = vocab.id(piece) {
            out.push(id);
        } else {
            for &byte in piece.as_bytes() {
                out.push(vocab.byte_token(byte, false).ok_or_else(|| TextError::Unencodable(piece.to_string()))?);
            }
        }
        i = s.next;
    }
    Ok(())
}
