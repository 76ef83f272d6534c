//! Malformed and hostile inputs: every one is a typed error, never a panic, and the parser never
//! allocates in proportion to an unchecked count.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use proptest::prelude::*;
use rlx_gguf::{GgmlType, GgufContent, GgufError, GgufFile, GgufWriter, MetadataArray};

// ---- a per-thread record of the largest single allocation ------------------------------------

struct Tracking;

thread_local! {
    static MAX_ALLOC: Cell<usize> = const { Cell::new(0) };
}

unsafe impl GlobalAlloc for Tracking {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = MAX_ALLOC.try_with(|m| m.set(m.get().max(layout.size())));
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = MAX_ALLOC.try_with(|m| m.set(m.get().max(new_size)));
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Tracking = Tracking;

/// Parse `bytes`, returning the result and the largest allocation made while parsing.
fn parse_tracked(bytes: &[u8]) -> (Result<GgufContent, GgufError>, usize) {
    MAX_ALLOC.with(|m| m.set(0));
    let r = GgufContent::parse(bytes);
    (r, MAX_ALLOC.with(|m| m.get()))
}

// ---- hand-built files --------------------------------------------------------------------------

/// Little-endian GGUF v3 byte builder for hostile files.
#[derive(Default)]
struct B(Vec<u8>);

impl B {
    fn header(n_tensors: u64, n_kv: u64) -> B {
        let mut b = B(b"GGUF".to_vec());
        b.u32(3).u64(n_tensors).u64(n_kv);
        b
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &str) -> &mut Self {
        self.u64(s.len() as u64);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    /// A tensor info: name, dims (ggml order), type id, offset.
    fn tensor(&mut self, name: &str, dims: &[u64], ty: u32, offset: u64) -> &mut Self {
        self.str(name).u32(dims.len() as u32);
        for &d in dims {
            self.u64(d);
        }
        self.u32(ty).u64(offset)
    }
    fn pad(&mut self, align: usize) -> &mut Self {
        while !self.0.len().is_multiple_of(align) {
            self.0.push(0);
        }
        self
    }
    fn zeros(&mut self, n: usize) -> &mut Self {
        self.0.resize(self.0.len() + n, 0);
        self
    }
}

fn err(bytes: &[u8]) -> GgufError {
    let (r, max) = parse_tracked(bytes);
    assert!(max < 1 << 20, "parser allocated {max} bytes for a {}-byte file", bytes.len());
    r.expect_err("malformed file parsed")
}

/// A small valid file whose last tensor ends exactly at the end of the file.
fn small_file() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.add_metadata("general.architecture", "llama").unwrap();
    w.add_metadata("n", 7u32).unwrap();
    w.add_metadata("tokens", vec!["a", "bc", "def"]).unwrap();
    w.add_metadata("nested", MetadataArray::Array(vec![MetadataArray::F32(vec![1.0]), MetadataArray::Bool(vec![])]))
        .unwrap();
    let x: Vec<f32> = (0..64).map(|i| i as f32 * 0.1).collect();
    w.add_f32_tensor("a", &[2, 32], GgmlType::Q8_0, &x).unwrap();
    w.add_f32_tensor("b", &[8], GgmlType::F32, &x[..8]).unwrap(); // 32 bytes: no trailing padding
    w.to_bytes().unwrap()
}

#[test]
fn every_truncation_is_an_error() {
    let full = small_file();
    let (r, max) = parse_tracked(&full);
    assert!(r.is_ok() && max > 0, "the allocation tracker sees the parser's allocations");
    for len in 0..full.len() {
        let e = err(&full[..len]);
        match e {
            // A user who sees either should learn that the file is cut short.
            GgufError::Truncated { .. } | GgufError::TensorOutOfBounds { .. } => {
                assert!(e.to_string().contains("truncated"), "prefix {len}: {e}")
            }
            GgufError::CountTooLarge { .. } => {}
            other => panic!("prefix {len}: unexpected error {other}"),
        }
    }
}

#[test]
fn bad_magic_and_versions() {
    // Empty, or cut inside "GGUF": truncated (an empty file said "bad magic [00, 00, 00, 00]").
    assert!(matches!(err(b""), GgufError::Truncated { what: "magic", available: 0, .. }));
    assert!(matches!(err(b"GG"), GgufError::Truncated { what: "magic", available: 2, .. }));
    let e = err(b"GX");
    assert!(matches!(&e, GgufError::BadMagic { found } if found == b"GX"), "{e:?}");
    assert!(e.to_string().contains("bad magic \"GX\" (47 58) at offset 0 (the file has only 2 bytes)"), "{e}");
    assert!(matches!(err(b"GGML\x03\0\0\0"), GgufError::BadMagic { .. }));
    // The message shows the bytes as text too: a user sees a text or a PNG file for what it is.
    assert_eq!(
        err(b"hello world").to_string(),
        "not a GGUF file: bad magic \"hell\" (68 65 6c 6c) at offset 0, expected \"GGUF\" (47 47 55 46)"
    );
    assert!(err(b"\x89PNG\r\n").to_string().contains(r#""\x89PNG" (89 50 4e 47)"#));
    let mut f = small_file();
    f[4] = 4;
    assert!(matches!(err(&f), GgufError::UnsupportedVersion { version: 4, hint: "" }));
    f[4..8].copy_from_slice(&3u32.to_be_bytes());
    match err(&f) {
        GgufError::UnsupportedVersion { hint, .. } => assert!(hint.contains("big-endian")),
        other => panic!("{other}"),
    }
    f[4..8].copy_from_slice(&0u32.to_le_bytes());
    assert!(matches!(err(&f), GgufError::UnsupportedVersion { version: 0, .. }));
}

#[test]
fn absurd_counts_are_rejected_before_allocating() {
    // 2^60 tensors, 2^60 KVs
    let e = err(&B::header(1 << 60, 0).0);
    assert!(matches!(e, GgufError::CountTooLarge { what: "tensor count", count, offset: 8, .. } if count == 1 << 60));
    assert!(matches!(err(&B::header(0, u64::MAX).0), GgufError::CountTooLarge { what: "metadata KV count", .. }));
    // a key of length 2^62
    let mut b = B::header(0, 1);
    b.u64(1 << 62).zeros(64);
    assert!(matches!(err(&b.0), GgufError::CountTooLarge { what: "metadata key", offset: 24, .. }));
    // an array of 2^40 u64 / 2^40 strings / 2^40 arrays
    for elem in [10u32, 8, 9] {
        let mut b = B::header(0, 1);
        b.str("k").u32(9).u32(elem).u64(1 << 40).zeros(100);
        assert!(matches!(err(&b.0), GgufError::CountTooLarge { what: "array length", .. }), "elem type {elem}");
    }
    // a tensor name of absurd length
    let mut b = B::header(1, 0);
    b.u64(u64::MAX).zeros(64);
    assert!(matches!(err(&b.0), GgufError::CountTooLarge { what: "tensor name", .. }));
}

#[test]
fn bad_type_ids() {
    let mut b = B::header(0, 1);
    b.str("k").u32(13).u32(0);
    assert!(matches!(err(&b.0), GgufError::UnknownValueType { type_id: 13, offset: 33 }));
    let mut b = B::header(0, 1);
    b.str("k").u32(9).u32(77).u64(0);
    assert!(matches!(err(&b.0), GgufError::UnknownValueType { type_id: 77, .. }));
    for id in [4u32, 5, 31, 36, 40, 41, u32::MAX] {
        let mut b = B::header(1, 0);
        b.tensor("t", &[32], id, 0).pad(32).zeros(64);
        match err(&b.0) {
            GgufError::UnknownGgmlType { type_id, name, .. } => assert_eq!((type_id, name.as_str()), (id, "t")),
            other => panic!("{other}"),
        }
    }
}

#[test]
fn bad_shapes() {
    let cases: &[(&[u64], u32)] = &[
        (&[1, 1, 1, 1, 1], 0),         // 5 dims
        (&[u64::MAX, 2], 0),           // element count overflow
        (&[1 << 32, 1 << 32], 0),      // > i64::MAX elements
        (&[0, u64::MAX, u64::MAX], 0), // a zero dim does not hide an overflow
        (&[33], 2),                    // Q4_0 row not a multiple of 32
        (&[1 << 62], 0),               // bytes overflow (F32: 2^64)
    ];
    for &(dims, ty) in cases {
        let mut b = B::header(1, 0);
        b.tensor("t", dims, ty, 0).pad(32).zeros(64);
        assert!(matches!(err(&b.0), GgufError::BadShape { .. }), "dims {dims:?}");
    }
}

#[test]
fn bad_offsets() {
    // past the end
    let mut b = B::header(1, 0);
    b.tensor("t", &[8], 0, 32).pad(32).zeros(32);
    assert!(matches!(err(&b.0), GgufError::TensorOutOfBounds { .. }));
    // offset + size overflows u64
    let mut b = B::header(1, 0);
    b.tensor("t", &[8], 0, u64::MAX - 31).pad(32).zeros(32);
    assert!(matches!(err(&b.0), GgufError::MisalignedTensor { .. } | GgufError::TensorOutOfBounds { .. }));
    let mut b = B::header(1, 0);
    b.tensor("t", &[8], 0, !31u64).pad(32).zeros(32);
    assert!(matches!(err(&b.0), GgufError::TensorOutOfBounds { start: u64::MAX, .. }));
    // misaligned
    let mut b = B::header(1, 0);
    b.tensor("t", &[8], 0, 4).pad(32).zeros(64);
    assert!(matches!(err(&b.0), GgufError::MisalignedTensor { data_offset: 4, alignment: 32, .. }));
    // overlapping
    let mut b = B::header(2, 0);
    b.tensor("a", &[16], 0, 0).tensor("b", &[8], 0, 32).pad(32).zeros(128);
    match err(&b.0) {
        GgufError::OverlappingTensors { first, second, .. } => {
            assert_eq!((first.as_str(), second.as_str()), ("a", "b"))
        }
        other => panic!("{other}"),
    }
    // duplicate name
    let mut b = B::header(2, 0);
    b.tensor("a", &[8], 0, 0).tensor("a", &[8], 0, 32).pad(32).zeros(64);
    assert!(matches!(err(&b.0), GgufError::DuplicateTensor { .. }));
}

#[test]
fn bad_metadata() {
    // alignment: wrong type, zero, not a power of two
    let mut b = B::header(0, 1);
    b.str("general.alignment").u32(10).u64(32);
    assert!(matches!(err(&b.0), GgufError::BadAlignment { .. }));
    for a in [0u32, 3, 48] {
        let mut b = B::header(0, 1);
        b.str("general.alignment").u32(4).u32(a);
        assert!(matches!(err(&b.0), GgufError::BadAlignment { offset: 53, .. }), "{a}");
    }
    // duplicate key
    let mut b = B::header(0, 2);
    b.str("k").u32(0).0.push(1);
    b.str("k").u32(0).0.push(2);
    assert!(matches!(err(&b.0), GgufError::DuplicateKey { .. }));
    // invalid UTF-8 in a key, a value and a tensor name
    let mut b = B::header(0, 1);
    b.u64(2).0.extend_from_slice(&[0xff, 0xfe]);
    b.u32(0).0.push(0);
    assert!(matches!(err(&b.0), GgufError::InvalidUtf8 { what: "metadata key", offset: 32 }));
    let mut b = B::header(0, 1);
    b.str("k").u32(8).u64(1).0.push(0x80);
    assert!(matches!(err(&b.0), GgufError::InvalidUtf8 { what: "string value", .. }));
    // arrays nested 1000 deep (would overflow the stack without the depth limit)
    let mut b = B::header(0, 1);
    b.str("k").u32(9);
    for _ in 0..1000 {
        b.u32(9).u64(1);
    }
    b.u32(0).u64(0);
    assert!(matches!(err(&b.0), GgufError::NestingTooDeep { .. }));
}

#[test]
fn alignment_from_metadata_is_used() {
    let mut b = B::header(1, 1);
    b.str("general.alignment").u32(4).u32(64);
    b.tensor("t", &[4], 0, 64).pad(64).zeros(64 + 16);
    let c = GgufContent::parse(&b.0).unwrap();
    assert_eq!((c.alignment, c.data_offset % 64), (64, 0));
    let mut b = B::header(1, 1);
    b.str("general.alignment").u32(4).u32(64);
    b.tensor("t", &[4], 0, 32).pad(64).zeros(128);
    assert!(matches!(err(&b.0), GgufError::MisalignedTensor { alignment: 64, .. }));
}

#[test]
fn open_errors() {
    assert!(matches!(GgufFile::open("/nonexistent/x.gguf"), Err(GgufError::Io { .. })));
    let dir = std::env::temp_dir().join(format!("rlx-gguf-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let empty = dir.join("empty.gguf");
    std::fs::write(&empty, b"").unwrap();
    assert!(matches!(GgufFile::open(&empty), Err(GgufError::Truncated { .. })));
    let good = dir.join("good.gguf");
    std::fs::write(&good, small_file()).unwrap();
    let f = GgufFile::open(&good).unwrap();
    assert_eq!(f.dequantize("b").unwrap().len(), 8);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Use everything a parsed file offers; nothing may panic.
fn exercise(bytes: &[u8]) {
    if let Ok(f) = GgufFile::from_slice(bytes) {
        for (_, v) in f.metadata() {
            let _ = v.to_string();
        }
        for t in f.tensors() {
            let _ = f.dequantize(&t.name);
            let _ = f.tensor(&t.name);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 3000, ..ProptestConfig::default() })]

    #[test]
    fn random_mutations_never_panic(
        edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut f = small_file();
        for (i, v) in &edits {
            let k = i.index(f.len());
            f[k] = *v;
        }
        if truncate {
            f.truncate(cut.index(f.len()));
        }
        let (_, max) = parse_tracked(&f);
        prop_assert!(max < 1 << 20, "allocated {max}");
        exercise(&f);
    }

    #[test]
    fn mutated_header_fields_never_panic(field in 0usize..6, value in any::<u64>()) {
        // overwrite a count / length / dim / offset-sized field with an arbitrary value
        let mut f = small_file();
        let at = [8usize, 16, 24, 32 + 20, 100, 150][field].min(f.len() - 8);
        f[at..at + 8].copy_from_slice(&value.to_le_bytes());
        let (_, max) = parse_tracked(&f);
        prop_assert!(max < 1 << 20, "allocated {max}");
        exercise(&f);
    }
}
