//! Fuzz the safetensors reader: parse any bytes; for files that parse, read every tensor
//! through every accessor, and check that we accept exactly what the `safetensors` crate
//! accepts (cargo fuzz builds without overflow checks, so the crate's unchecked `end + 8 + n`
//! wraps instead of panicking and still rejects).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rlx_safetensors::SafetensorsFile;

fuzz_target!(|data: &[u8]| {
    let ours = SafetensorsFile::from_slice(data);
    let theirs = safetensors::SafeTensors::deserialize(data);
    assert_eq!(ours.is_ok(), theirs.is_ok(), "accept/reject differs from the safetensors crate");
    if let (Ok(f), Ok(st)) = (ours, theirs) {
        for (name, view) in st.iter() {
            assert_eq!(f.tensor_bytes(name).unwrap(), view.data());
        }
        for t in f.tensors() {
            let bytes = f.tensor_bytes(&t.name).expect("a parsed tensor's bytes are in range");
            assert_eq!(bytes.len(), t.n_bytes());
            let _ = f.f32_view(&t.name);
            let _ = f.to_f32(&t.name);
            let _ = f.tensor(&t.name);
        }
    }
});
