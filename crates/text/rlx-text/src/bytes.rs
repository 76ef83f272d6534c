//! GPT-2's byte-to-unicode table (`bytes_to_unicode` in OpenAI's `encoder.py`): byte-level BPE
//! vocabularies store every byte as a printable character. Bytes `!`..`~`, `¡`..`¬` and `®`..`ÿ`
//! map to themselves; the other 68 bytes map, in order, to U+0100, U+0101, ...

/// Byte `b` as its printable stand-in character.
pub(crate) static BYTE_TO_CHAR: [char; 256] = build();

const fn build() -> [char; 256] {
    let mut table = ['\0'; 256];
    let mut n = 0u32;
    let mut b = 0usize;
    while b < 256 {
        let printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
        let cp = if printable {
            b as u32
        } else {
            n += 1;
            255 + n
        };
        table[b] = match char::from_u32(cp) {
            Some(c) => c,
            None => '\0',
        };
        b += 1;
    }
    table
}

/// The byte a stand-in character encodes, if it is one.
pub(crate) fn char_to_byte(c: char) -> Option<u8> {
    let cp = c as u32;
    match cp {
        0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF => Some(cp as u8),
        0x100..=0x143 => BYTE_TO_CHAR.iter().position(|&x| x == c).map(|b| b as u8),
        _ => None,
    }
}

/// `text`'s bytes as stand-in characters.
pub(crate) fn byte_encode(text: &str) -> String {
    text.bytes().map(|b| BYTE_TO_CHAR[b as usize]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_a_bijection_onto_the_gpt2_alphabet() {
        assert_eq!(BYTE_TO_CHAR[b' ' as usize], 'Ġ');
        assert_eq!(BYTE_TO_CHAR[b'\n' as usize], 'Ċ');
        assert_eq!(BYTE_TO_CHAR[b'a' as usize], 'a');
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(BYTE_TO_CHAR[b as usize]), Some(b));
        }
        assert_eq!(char_to_byte('€'), None);
    }
}
