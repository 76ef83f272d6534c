//! A global allocator that counts allocations (forwarding to the system allocator), shared by
//! `tests/no_alloc.rs` and `examples/train_step.rs` through `#[path]`. Installing it makes it
//! the allocator of the whole test or example binary.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by this process so far (all threads).
pub fn allocs() -> usize {
    ALLOCS.load(Ordering::Relaxed)
}
