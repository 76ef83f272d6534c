//! The canonical byte stream the compile cache hashes: a serde `Serializer` that writes every
//! value of a graph (ops, attributes, types, names, constants) into a blake3 hasher as a
//! tagged, self-delimiting encoding, with tensor data as its raw little-endian bytes.
//!
//! Encoding (each value starts with a one-byte tag, so the stream is prefix-free and two
//! different values never give the same bytes):
//! - `b` bool (one byte), `i` signed integer (i64 LE), `u` unsigned (u64 LE), `I` / `U` 128-bit
//!   (16 bytes LE), `f` f32 and `d` f64 (their IEEE bits LE, so `-0.0 ≠ 0.0` and NaN payloads
//!   differ), `c` char (u32 LE);
//! - `s` string and `y` byte string: length (u64 LE) then the bytes;
//! - `n` none, `S` some + value, `0` unit;
//! - structs `{` name, then for each field its name and value, `}`; enum variants `v` + the
//!   enum's name + the variant's *name* (not its index, so reordering an enum's variants keeps
//!   fingerprints) + the payload; sequences `[` … `]`, tuples `(` … `)`, maps `m` key value …
//!   `}`. Names are written as strings (`s` + length + bytes).
//!
//! Tensors serialize their data with `serialize_bytes` for non-human-readable formats (see
//! `rlx_ir::Tensor`), so a weight is hashed straight from its storage: no hex, no JSON, no
//! copy. Alternative considered: blake3 over `hir_to_json` — correct, but it formats every
//! weight as hex inside a JSON string (~0.35 s for MiniLM-L6's 90 MB).

use serde::ser::{self, Serialize};
use std::fmt;

/// Writes values into a blake3 hasher (see the module docs for the encoding), the small
/// pieces gathered in a buffer first: one `update` per tag or integer cost a fifth of a
/// compile-cache hit (a 24-layer encoder, `perf`); the bytes hashed are the same.
pub(crate) struct Canon<'a> {
    h: &'a mut blake3::Hasher,
    buf: Vec<u8>,
}

/// Bytes gathered before they go to the hasher (slices this long go straight to it).
const GATHER: usize = 16 << 10;

impl<'a> Canon<'a> {
    /// A writer into `h`; call [`Canon::finish`] to hash what it still holds.
    pub(crate) fn new(h: &'a mut blake3::Hasher) -> Canon<'a> {
        Canon { h, buf: Vec::with_capacity(GATHER) }
    }

    /// Hash the bytes still gathered.
    pub(crate) fn finish(self) {
        self.h.update(&self.buf);
    }

    fn write(&mut self, b: &[u8]) {
        if self.buf.len() + b.len() > GATHER {
            self.h.update(&self.buf);
            self.buf.clear();
        }
        if b.len() >= GATHER {
            self.h.update(b);
        } else {
            self.buf.extend_from_slice(b);
        }
    }
}

/// Serialization into the hasher cannot fail except through a type's own `Serialize` error.
#[derive(Debug)]
pub(crate) struct CanonError(String);

impl fmt::Display for CanonError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for CanonError {}
impl ser::Error for CanonError {
    fn custom<T: fmt::Display>(msg: T) -> CanonError {
        CanonError(msg.to_string())
    }
}

type R = Result<(), CanonError>;

impl Canon<'_> {
    fn tag(&mut self, t: u8) {
        self.write(&[t]);
    }
    fn len(&mut self, n: usize) {
        self.write(&(n as u64).to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.tag(b's');
        self.len(s.len());
        self.write(s.as_bytes());
    }
    fn variant(&mut self, name: &str, variant: &str) {
        self.tag(b'v');
        self.str(name);
        self.str(variant);
    }
}

impl<'a, 'b> ser::Serializer for &'a mut Canon<'b> {
    type Ok = ();
    type Error = CanonError;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    fn is_human_readable(&self) -> bool {
        false
    }
    fn serialize_bool(self, v: bool) -> R {
        self.write(&[b'b', v as u8]);
        Ok(())
    }
    fn serialize_i8(self, v: i8) -> R {
        self.serialize_i64(v.into())
    }
    fn serialize_i16(self, v: i16) -> R {
        self.serialize_i64(v.into())
    }
    fn serialize_i32(self, v: i32) -> R {
        self.serialize_i64(v.into())
    }
    fn serialize_i64(self, v: i64) -> R {
        self.tag(b'i');
        self.write(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_i128(self, v: i128) -> R {
        self.tag(b'I');
        self.write(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> R {
        self.serialize_u64(v.into())
    }
    fn serialize_u16(self, v: u16) -> R {
        self.serialize_u64(v.into())
    }
    fn serialize_u32(self, v: u32) -> R {
        self.serialize_u64(v.into())
    }
    fn serialize_u64(self, v: u64) -> R {
        self.tag(b'u');
        self.write(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_u128(self, v: u128) -> R {
        self.tag(b'U');
        self.write(&v.to_le_bytes());
        Ok(())
    }
    fn serialize_f32(self, v: f32) -> R {
        self.tag(b'f');
        self.write(&v.to_bits().to_le_bytes());
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> R {
        self.tag(b'd');
        self.write(&v.to_bits().to_le_bytes());
        Ok(())
    }
    fn serialize_char(self, v: char) -> R {
        self.tag(b'c');
        self.write(&u32::from(v).to_le_bytes());
        Ok(())
    }
    fn serialize_str(self, v: &str) -> R {
        self.str(v);
        Ok(())
    }
    fn serialize_bytes(self, v: &[u8]) -> R {
        self.tag(b'y');
        self.len(v.len());
        self.write(v);
        Ok(())
    }
    fn serialize_none(self) -> R {
        self.tag(b'n');
        Ok(())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, v: &T) -> R {
        self.tag(b'S');
        v.serialize(self)
    }
    fn serialize_unit(self) -> R {
        self.tag(b'0');
        Ok(())
    }
    fn serialize_unit_struct(self, name: &'static str) -> R {
        self.tag(b'{');
        self.str(name);
        self.tag(b'}');
        Ok(())
    }
    fn serialize_unit_variant(self, name: &'static str, _: u32, variant: &'static str) -> R {
        self.variant(name, variant);
        Ok(())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, name: &'static str, v: &T) -> R {
        self.tag(b'{');
        self.str(name);
        v.serialize(&mut *self)?;
        self.tag(b'}');
        Ok(())
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        _: u32,
        variant: &'static str,
        v: &T,
    ) -> R {
        self.variant(name, variant);
        v.serialize(self)
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Self, CanonError> {
        self.tag(b'[');
        Ok(self)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self, CanonError> {
        self.tag(b'(');
        Ok(self)
    }
    fn serialize_tuple_struct(self, name: &'static str, _: usize) -> Result<Self, CanonError> {
        self.tag(b'(');
        self.str(name);
        Ok(self)
    }
    fn serialize_tuple_variant(
        self,
        name: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Self, CanonError> {
        self.variant(name, variant);
        self.tag(b'(');
        Ok(self)
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self, CanonError> {
        self.tag(b'm');
        Ok(self)
    }
    fn serialize_struct(self, name: &'static str, _: usize) -> Result<Self, CanonError> {
        self.tag(b'{');
        self.str(name);
        Ok(self)
    }
    fn serialize_struct_variant(
        self,
        name: &'static str,
        _: u32,
        variant: &'static str,
        _: usize,
    ) -> Result<Self, CanonError> {
        self.variant(name, variant);
        self.tag(b'{');
        Ok(self)
    }
}

/// Elements of sequences, tuples and maps are written one after another (each is
/// self-delimiting); `end` writes the closing tag.
macro_rules! compound {
    ($tr:ident, $m:ident, $close:literal $(, $key:ident)?) => {
        impl ser::$tr for &mut Canon<'_> {
            type Ok = ();
            type Error = CanonError;
            fn $m<T: ?Sized + Serialize>(&mut self, $($key: &'static str,)? v: &T) -> R {
                $(self.str($key);)?
                v.serialize(&mut **self)
            }
            fn end(self) -> R {
                self.tag($close);
                Ok(())
            }
        }
    };
}
compound!(SerializeSeq, serialize_element, b']');
compound!(SerializeTuple, serialize_element, b')');
compound!(SerializeTupleStruct, serialize_field, b')');
compound!(SerializeTupleVariant, serialize_field, b')');
compound!(SerializeStruct, serialize_field, b'}', key);
compound!(SerializeStructVariant, serialize_field, b'}', key);

impl ser::SerializeMap for &mut Canon<'_> {
    type Ok = ();
    type Error = CanonError;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, k: &T) -> R {
        k.serialize(&mut **self)
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, v: &T) -> R {
        v.serialize(&mut **self)
    }
    fn end(self) -> R {
        self.tag(b'}');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gathered_writes_hash_as_the_bytes_in_one_piece() {
        // Pieces around the gather size: small ones gathered, a flush mid-stream, long ones
        // straight through.
        let sizes = [1, 7, GATHER, 3, GATHER + 5, GATHER - 1, 2, 3 * GATHER, 0, 9];
        let pieces: Vec<Vec<u8>> = sizes.iter().map(|&n| (0..n).map(|i| (i * 31 + n) as u8).collect()).collect();
        let mut h = blake3::Hasher::new();
        let mut c = Canon::new(&mut h);
        for p in &pieces {
            c.write(p);
        }
        c.finish();
        assert_eq!(h.finalize(), blake3::hash(&pieces.concat()));
    }
}
