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

impl FileBytes<'_> {
    /// Drop the pages holding `bytes` (a subslice of `self`) from this process's resident set:
    /// for a reader that has copied them out and will not read them soon, so a loader's peak
    /// memory is not the file plus its copy. On a map, `madvise(MADV_DONTNEED)` on the pages
    /// that `bytes` touches (whole pages, so also the ends of its neighbours): the map is
    /// read-only and of a file, so a later read faults the same bytes back in from the page
    /// cache (`mmap(2)`, `madvise(2)`); nothing else changes. Owned or borrowed bytes, a slice
    /// from elsewhere, or a non-Unix OS: nothing happens. Never fails (the advice is a hint).
    pub fn release(&self, bytes: &[u8]) {
        #[cfg(unix)]
        if let FileBytes::Mmap(m) = self {
            let (base, at) = (m.as_ptr() as usize, bytes.as_ptr() as usize);
            if bytes.is_empty() || at < base || at + bytes.len() > base + m.len() {
                return;
            }
            // SAFETY: DONTNEED on a read-only file map only drops resident pages; their
            // contents read back unchanged from the file, which the map's caveat (see
            // `open`) already requires to stay as it is. No reference sees other bytes.
            let _ = unsafe { m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, at - base, bytes.len()) };
        }
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
        // Released pages read back the same bytes; foreign and empty slices are ignored.
        b.release(&b[1..3]);
        b.release(&b"xy"[..]);
        b.release(&b[..0]);
        assert_eq!(&*b, b"GGUF\x03");
        std::fs::remove_dir_all(&dir).ok();
    }
}
