//! Malformed files: every one is a typed error, never a panic; random mutations of real files
//! never panic and are accepted exactly when the `safetensors` crate's own reader accepts them.

use std::path::Path;

use proptest::prelude::*;
use rlx_safetensors::{Header, MAX_HEADER_LEN, SafetensorsError, SafetensorsFile};

fn fixture(rel: &str) -> Vec<u8> {
    std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(rel)).unwrap()
}

/// A file with header text `json` and `data` bytes.
fn file(json: &str, data: &[u8]) -> Vec<u8> {
    let mut b = (json.len() as u64).to_le_bytes().to_vec();
    b.extend(json.as_bytes());
    b.extend(data);
    b
}

fn err(bytes: &[u8]) -> SafetensorsError {
    match SafetensorsFile::from_slice(bytes) {
        Ok(_) => panic!("accepted a malformed file"),
        Err(e) => e,
    }
}

/// Parse, then touch every tensor through every accessor; must not panic.
fn exercise(bytes: &[u8]) -> bool {
    let Ok(f) = SafetensorsFile::from_slice(bytes) else { return false };
    for t in f.tensors() {
        let _ = f.tensor_bytes(&t.name).unwrap();
        let _ = f.f32_view(&t.name);
        let _ = f.to_f32(&t.name);
        let _ = f.tensor(&t.name);
        let _ = f.tensor_as(&t.name, rlx_ir::DType::I32);
    }
    true
}

#[test]
fn every_truncation_and_extension_is_an_error() {
    for name in ["rlx_dtypes.safetensors", "all_dtypes.safetensors"] {
        let good = fixture(name);
        assert!(exercise(&good));
        for len in 0..good.len() {
            let e = err(&good[..len]);
            assert!(
                matches!(
                    e,
                    SafetensorsError::HeaderTooSmall { .. }
                        | SafetensorsError::HeaderTruncated { .. }
                        | SafetensorsError::DataLength { .. }
                ),
                "{name} cut at {len}: {e}"
            );
        }
        let mut longer = good.clone();
        longer.push(0);
        assert!(matches!(err(&longer), SafetensorsError::DataLength { .. }));
    }
}

#[test]
fn header_length_errors() {
    assert!(matches!(err(&[]), SafetensorsError::HeaderTooSmall { file_len: 0 }));
    assert!(matches!(err(&[0; 7]), SafetensorsError::HeaderTooSmall { file_len: 7 }));
    for n in [u64::MAX, 1 << 63, MAX_HEADER_LEN + 1] {
        let mut b = n.to_le_bytes().to_vec();
        b.extend(b"{}");
        let e = err(&b);
        assert!(matches!(e, SafetensorsError::HeaderTooLarge { .. }), "{e}");
        assert!(e.to_string().contains(&n.to_string()), "{e}");
    }
    let mut b = 1000u64.to_le_bytes().to_vec();
    b.extend(b"{}");
    let e = err(&b);
    assert!(matches!(e, SafetensorsError::HeaderTruncated { len: 1000, available: 2 }), "{e}");
    // A header of length 0 is empty JSON.
    assert!(matches!(err(&0u64.to_le_bytes()), SafetensorsError::BadHeader { .. }));
    // The minimal valid file: `{}` and no data.
    let f = SafetensorsFile::from_vec(file("{}", &[])).unwrap();
    assert!(f.tensors().is_empty() && f.metadata().is_empty());
    // Header padded with spaces, as the writers do.
    assert!(SafetensorsFile::from_vec(file("{}      ", &[])).is_ok());
}

#[test]
fn bad_json_and_bad_fields() {
    let cases: &[(&str, &str)] = &[
        ("\u{0}", "control"),
        ("[]", "not an object"),
        ("{", "EOF"),
        (r#"{"a": 1}"#, "not a tensor"),
        (r#"{"a": {"dtype": "F32", "shape": [1]}}"#, "missing data_offsets"),
        (r#"{"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}"#, "negative dim"),
        (r#"{"a": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}}"#, "fractional dim"),
        (r#"{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}}"#, "one offset"),
        (r#"{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}}"#, "three offsets"),
        (r#"{"a": {"dtype": 3, "shape": [1], "data_offsets": [0, 4]}}"#, "numeric dtype"),
        (r#"{"a": {"dtype": "F32", "shape": [18446744073709551616], "data_offsets": [0, 4]}}"#, "dim > u64"),
        (r#"{"__metadata__": {"k": 1}}"#, "metadata value not a string"),
        (r#"{"__metadata__": []}"#, "metadata not a map"),
    ];
    for (json, why) in cases {
        let e = err(&file(json, &[0; 4]));
        assert!(matches!(e, SafetensorsError::BadHeader { .. }), "{why}: {e}");
    }
    let mut b = file("{}", &[]);
    b[8] = 0xff;
    b[9] = 0xfe;
    assert!(matches!(err(&b), SafetensorsError::HeaderNotUtf8 { valid_up_to: 0 }));
}

#[test]
fn bad_dtype_shape_and_offsets() {
    let e = err(&file(r#"{"a": {"dtype": "Q4_0", "shape": [1], "data_offsets": [0, 4]}}"#, &[0; 4]));
    assert!(matches!(&e, SafetensorsError::UnknownDtype { tensor, dtype } if tensor == "a" && dtype == "Q4_0"), "{e}");
    // Lower-case is not the format's spelling.
    assert!(matches!(
        err(&file(r#"{"a": {"dtype": "f32", "shape": [1], "data_offsets": [0, 4]}}"#, &[0; 4])),
        SafetensorsError::UnknownDtype { .. }
    ));
    let e = err(&file(r#"{"a": {"dtype": "F32", "shape": [3], "data_offsets": [0, 8]}}"#, &[0; 8]));
    assert!(matches!(e, SafetensorsError::SizeMismatch { expected: 12, got: 8, .. }), "{e}");
    let e = err(&file(r#"{"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}"#, &[0; 4]));
    assert!(matches!(e, SafetensorsError::BadOffsets { .. }) && e.to_string().contains("end before start"), "{e}");
    let big = format!(r#"{{"a": {{"dtype": "F64", "shape": [{}, 4], "data_offsets": [0, 4]}}}}"#, u64::MAX / 2);
    let e = err(&file(&big, &[0; 4]));
    assert!(matches!(e, SafetensorsError::BadShape { .. }) && e.to_string().contains("overflow"), "{e}");
    let e = err(&file(r#"{"a": {"dtype": "F4", "shape": [3], "data_offsets": [0, 1]}}"#, &[0; 1]));
    assert!(matches!(e, SafetensorsError::BadShape { .. }) && e.to_string().contains("whole number of bytes"), "{e}");
    // Gap, overlap, not starting at 0, past the end, short of the end.
    let two = |a: (u32, u32), b: (u32, u32), len: usize| {
        let j = format!(
            r#"{{"a": {{"dtype": "U8", "shape": [{}], "data_offsets": [{}, {}]}}, "b": {{"dtype": "U8", "shape": [{}], "data_offsets": [{}, {}]}}}}"#,
            a.1 - a.0,
            a.0,
            a.1,
            b.1 - b.0,
            b.0,
            b.1
        );
        err(&file(&j, &vec![0; len]))
    };
    let e = two((0, 4), (5, 8), 8);
    assert!(e.to_string().contains("\"b\"") && e.to_string().contains("gap"), "{e}");
    let e = two((0, 4), (2, 8), 8);
    assert!(e.to_string().contains("overlap"), "{e}");
    let e = two((1, 4), (4, 8), 8);
    assert!(matches!(e, SafetensorsError::BadOffsets { start: 1, .. }), "{e}");
    let e = two((0, 4), (4, 8), 6);
    assert!(matches!(e, SafetensorsError::DataLength { expected: 8, got: 6 }), "{e}");
    let e = two((0, 4), (4, 8), 9);
    assert!(matches!(e, SafetensorsError::DataLength { expected: 8, got: 9 }), "{e}");
    let e = err(&file(r#"{"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 18446744073709551615]}}"#, &[]));
    assert!(matches!(e, SafetensorsError::SizeMismatch { .. }), "{e}");
}

/// Offsets that add up to nearly `u64::MAX`: the `safetensors` 0.8.0 reader computes
/// `end + 8 + n` unchecked (a panic under overflow checks); ours reports the length mismatch.
#[test]
fn crate_overflow_header_is_an_error() {
    let each: u64 = (1 << 61) - 1; // the most U8 elements whose bit count fits in u64
    let mut parts = Vec::new();
    for i in 0..8u64 {
        parts.push(format!(
            r#""t{i}": {{"dtype": "U8", "shape": [{each}], "data_offsets": [{}, {}]}}"#,
            i * each,
            (i + 1) * each
        ));
    }
    let b = file(&format!("{{{}}}", parts.join(", ")), &[]);
    let e = err(&b);
    assert!(matches!(e, SafetensorsError::DataLength { expected, got: 0 } if expected == 8 * each), "{e}");
    // The crate itself: an error or (with overflow checks) a panic; never a success.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {})); // the expected panic need not print a backtrace
    let theirs = std::panic::catch_unwind(|| safetensors::SafeTensors::deserialize(&b).is_ok());
    std::panic::set_hook(hook);
    assert_ne!(theirs.ok(), Some(true));
}

#[test]
fn tensor_bytes_with_a_foreign_buffer_is_an_error() {
    let good = fixture("rlx_dtypes.safetensors");
    let h = Header::parse(&good).unwrap();
    let t = h.tensors.last().unwrap();
    assert!(matches!(h.tensor_bytes(&good[..10], t), Err(SafetensorsError::DataLength { .. })));
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Set(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
    HeaderLen(u64),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1..=255u8).prop_map(|(i, b)| Mutation::Flip(i, b)),
        (any::<usize>(), prop::sample::select(b"{}[]\",:0123456789-eE.  \x00\xffFUIBO".to_vec()))
            .prop_map(|(i, b)| Mutation::Set(i, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), prop::collection::vec(any::<u8>(), 1..8)).prop_map(|(i, v)| Mutation::Insert(i, v)),
        (any::<usize>(), 1..16usize).prop_map(|(i, n)| Mutation::Remove(i, n)),
        prop_oneof![any::<u64>(), 0..4096u64].prop_map(Mutation::HeaderLen),
    ]
}

/// Apply mutations, aiming at the header (where the structure is) three times out of four.
fn apply(mut b: Vec<u8>, ms: &[Mutation]) -> Vec<u8> {
    let hdr_end = 8 + u64::from_le_bytes(b[..8].try_into().unwrap()) as usize;
    for m in ms {
        let len = b.len().max(1);
        let pos = |i: usize| if !i.is_multiple_of(4) { i / 4 % hdr_end.min(len) } else { i / 4 % len };
        match m {
            Mutation::Flip(i, x) if !b.is_empty() => {
                let p = pos(*i).min(b.len() - 1);
                b[p] ^= x
            }
            Mutation::Set(i, x) if !b.is_empty() => {
                let p = pos(*i).min(b.len() - 1);
                b[p] = *x
            }
            Mutation::Truncate(i) => b.truncate(i % len),
            Mutation::Insert(i, v) => {
                let p = pos(*i).min(b.len());
                b.splice(p..p, v.iter().copied());
            }
            Mutation::Remove(i, n) if !b.is_empty() => {
                let p = pos(*i).min(b.len() - 1);
                let e = (p + n).min(b.len());
                b.drain(p..e);
            }
            Mutation::HeaderLen(n) if b.len() >= 8 => b[..8].copy_from_slice(&n.to_le_bytes()),
            _ => {}
        }
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn mutations_never_panic_and_agree_with_the_crate(
        which in 0..4usize,
        ms in prop::collection::vec(mutation(), 1..4),
    ) {
        let name = ["rlx_dtypes.safetensors", "all_dtypes.safetensors",
            "sharded/model-00001-of-00002.safetensors", "sharded/model-00002-of-00002.safetensors"][which];
        let b = apply(fixture(name), &ms);
        let ours = exercise(&b);
        if let Ok(theirs) = std::panic::catch_unwind(|| safetensors::SafeTensors::deserialize(&b)) {
            prop_assert_eq!(ours, theirs.is_ok(), "accept/reject differs from the safetensors crate");
            if let Ok(st) = theirs {
                let f = SafetensorsFile::from_slice(&b).unwrap();
                for (name, view) in st.iter() {
                    prop_assert_eq!(f.tensor_bytes(name).unwrap(), view.data());
                    prop_assert_eq!(&f.info(name).unwrap().shape, &view.shape().to_vec());
                }
            }
        }
    }
}
