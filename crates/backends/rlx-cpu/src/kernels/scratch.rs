//! Per-thread working buffers. Kernels keep the buffers they need only during a run in a
//! `thread_local!` of their own (one per thread, grown to the largest use) instead of one per
//! kernel: per kernel, SmolLM2's compiled graphs held hundreds of MB of them (`bench/RESULTS.md`,
//! sessions 29 and 33). [`grown`] hands out the first `len` elements; their contents are
//! unspecified, so every kernel writes an element before it reads it, and debug builds fill
//! the slice with [`Poison::POISON`] first so that the tests catch a kernel that does not.

/// The value debug builds write over a buffer before a kernel uses it.
pub(crate) trait Poison: Copy + Default {
    const POISON: Self;
}

impl Poison for f32 {
    const POISON: f32 = f32::NAN;
}

impl Poison for u8 {
    const POISON: u8 = 0xA5;
}

impl Poison for i32 {
    const POISON: i32 = 0x5A5A_5A5A;
}

/// The first `len` elements of `buf`, grown on first use (poisoned in debug builds).
pub(crate) fn grown<T: Poison>(buf: &mut Vec<T>, len: usize) -> &mut [T] {
    if buf.len() < len {
        buf.resize(len, T::default());
    }
    let b = &mut buf[..len];
    poison(b);
    b
}

/// Fill `b` with [`Poison::POISON`] in debug builds (a no-op in release): for per-thread
/// buffers that are not plain vectors (a packed operand, a tensor).
pub(crate) fn poison<T: Poison>(b: &mut [T]) {
    if cfg!(debug_assertions) {
        b.fill(T::POISON);
    }
}
