//! `rlx-mmap`: the bytes a model-file reader parses — memory-mapped from a path, owned, or
//! borrowed — behind one type, [`FileBytes`], shared by `rlx-gguf` and `rlx-safetensors`.
//!
//! Why a crate of its own: both readers hold their file the same three ways and must agree on
//! the one `unsafe` (the map) and its caveat; the IR crate, which both depend on, must not know
//! about files. The alternative, a copy in each reader, is what this replaced.
//!
//! ```
//! use rlx_mmap::FileBytes;
//!
//! let owned = FileBytes::from(vec![1u8, 2, 3]);
//! let data = [4u8, 5];
//! let borrowed = FileBytes::from(&data[..]);
//! assert_eq!((&*owned, &*borrowed), (&[1u8, 2, 3][..], &[4u8, 5][..]));
//! ```

#![warn(missing_docs)]

use std::ops::Deref;
use std::path::Path;

/// A file's bytes: a read-only memory map, an owned buffer, or a borrowed slice. Derefs to
/// `[u8]`; the whole file, never copied after [`FileBytes::open`].
pub enum FileBytes<'a> {
    /// A read-only memory map of a file.
    Mmap(memmap2::Mmap),
    /// Bytes the value owns (also used for an empty file, which cannot be mapped).
    Owned(Vec<u8>),
    /// Bytes borrowed from the caller (zero-copy).
    Borrowed(&'a [u8]),
}

impl FileBytes<'static> {
    /// Memory-map the file at `path` (an empty file gives empty owned bytes).
    ///
    /// The file must not be modified or truncated while the value lives (the usual `mmap`
    /// caveat). Errors: the `std::io::Error` of opening, `stat` or mapping; a directory is
    /// an [`std::io::ErrorKind::IsADirectory`] error (mapping one would say "No such device").
    pub fn open(path: impl AsRef<Path>) -> std::io::Result<FileBytes<'static>> {
        let file = std::fs::File::open(path)?;
        let meta = file.metadata()?;
        if meta.is_dir() {
            return Err(std::io::Error::new(std::io::ErrorKind::IsADirectory, "is a directory, not a file"));
        }
        if meta.len() == 0 {
            return Ok(FileBytes::Owned(Vec::new()));
        }
        // SAFETY: the map is read-only; like every mmap-based reader we rely on the file not
        // being truncated or rewritten by another process while it is mapped.
        Ok(FileBytes::Mmap(unsafe { memmap2::Mmap::map(&file) }?))
    }
}

impl Deref for FileBytes<'_> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            FileBytes::Mmap(m) => m,
            FileBytes::Owned(v) => v,
            FileBytes::Borrowed(b) => b,
        }
    }
}

impl From<Vec<u8>> for FileBytes<'static> {
    fn from(v: Vec<u8>) -> Self {
        FileBytes::Owned(v)
    }
}

impl<'a> From<&'a [u8]> for FileBytes<'a> {
    fn from(b: &'a [u8]) -> Self {
        FileBytes::Borrowed(b)
    }
}

impl std::fmt::Debug for FileBytes<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self {
            FileBytes::Mmap(_) => "Mmap",
            FileBytes::Owned(_) => "Owned",
            FileBytes::Borrowed(_) => "Borrowed",
        };
        write!(f, "FileBytes::{kind}({} bytes)", self.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn open_maps_reads_empty_and_rejects_a_directory() {
        let dir = std::env::temp_dir().join(format!("rlx-mmap-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (full, empty) = (dir.join("full.bin"), dir.join("empty.bin"));
        std::fs::write(&full, b"GGUF\x03").unwrap();
        std::fs::write(&empty, b"").unwrap();
        let b = FileBytes::open(&full).unwrap();
        assert!(matches!(b, FileBytes::Mmap(_)));
        assert_eq!(&*b, b"GGUF\x03");
        assert!(FileBytes::open(&empty).unwrap().is_empty());
        assert_eq!(FileBytes::open(&dir).unwrap_err().kind(), std::io::ErrorKind::IsADirectory);
        assert_eq!(FileBytes::open(dir.join("absent")).unwrap_err().kind(), std::io::ErrorKind::NotFound);
        assert_eq!(format!("{b:?}"), "FileBytes::Mmap(5 bytes)");
        std::fs::remove_dir_all(&dir).ok();
    }
}
