//! Fuzz the GGUF reader: parse any bytes; for files that parse, touch every tensor's bytes and
//! dequantize it (bounded: the parser has checked every size against the input length).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rlx_gguf::{GgufContent, GgufFile};

fuzz_target!(|data: &[u8]| {
    let content = GgufContent::parse(data);
    let file = GgufFile::from_slice(data);
    assert_eq!(content.is_ok(), file.is_ok());
    if let Ok(f) = file {
        for t in f.tensors() {
            let bytes = f.tensor_data(&t.name).expect("a parsed tensor's bytes are in range");
            assert_eq!(bytes.len() as u64, t.n_bytes);
            let _ = f.dequantize(&t.name);
            let _ = f.tensor(&t.name);
        }
        for (_, v) in f.metadata() {
            let _ = v.to_string();
        }
    }
});
