//! Incremental detokenization for streaming output.

use crate::{TextError, Tokenizer};

/// Turns a stream of token ids into text pieces that are always whole UTF-8: bytes of a
/// character split across tokens are held back until the character is complete.
///
/// `push` returns the newly completed text (`None` when nothing is complete yet); `finish`
/// returns what is left, with any invalid tail replaced by U+FFFD. Control tokens render as
/// nothing (as [`Tokenizer::token_to_piece`]).
#[derive(Debug)]
pub struct StreamDecoder<'t> {
    tok: &'t Tokenizer,
    pending: Vec<u8>,
}

impl<'t> StreamDecoder<'t> {
    /// A decoder for ids produced by `tok`.
    pub fn new(tok: &'t Tokenizer) -> StreamDecoder<'t> {
        StreamDecoder { tok, pending: Vec::new() }
    }

    /// Feed one token; returns the text completed by it.
    ///
    /// Errors: [`TextError::TokenOutOfRange`].
    pub fn push(&mut self, id: u32) -> Result<Option<String>, TextError> {
        let piece = self.tok.token_to_piece(id)?;
        self.pending.extend_from_slice(&piece);
        let valid = match std::str::from_utf8(&self.pending) {
            Ok(_) => self.pending.len(),
            Err(e) if e.error_len().is_none() => e.valid_up_to(),
            // Invalid bytes (not just an incomplete tail): emit them replaced.
            Err(_) => {
                let s = String::from_utf8_lossy(&self.pending).into_owned();
                self.pending.clear();
                return Ok(Some(s));
            }
        };
        if valid == 0 {
            return Ok(None);
        }
        let rest = self.pending.split_off(valid);
        let done = std::mem::replace(&mut self.pending, rest);
        Ok(Some(String::from_utf8(done).unwrap_or_default()))
    }

    /// Flush held-back bytes (an incomplete character becomes U+FFFD).
    pub fn finish(&mut self) -> Option<String> {
        if self.pending.is_empty() {
            return None;
        }
        let s = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        Some(s)
    }
}
