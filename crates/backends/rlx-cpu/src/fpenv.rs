//! Denormal handling of the threads that run kernels (`CpuOptions::flush_denormals`):
//! flush-to-zero (FTZ) and denormals-are-zero (DAZ), i.e. MXCSR bits 15 and 6 on x86-64 and
//! FPCR.FZ on AArch64, set on the calling thread for the duration of a run (the caller's
//! register is restored afterwards) and on the executor's rayon threads for their lifetime.
//!
//! Why: XLA (hence JAX) and oneDNN run CPU kernels this way. Subnormal operands cost 100+
//! cycles per instruction on x86 (microcode assists); training hits them routinely (Adam's
//! first moment of a dead ReLU unit decays geometrically into the subnormal range), and the
//! in-graph training step measured 203–264 µs with IEEE subnormals vs 132–151 µs flushed.
//! Other architectures keep IEEE semantics (the flag is a no-op there).

use std::sync::OnceLock;

#[cfg(target_arch = "x86_64")]
mod reg {
    /// MXCSR.FTZ (bit 15) | MXCSR.DAZ (bit 6).
    pub(super) const BITS: u32 = (1 << 15) | (1 << 6);
    pub(super) type Word = u32;

    pub(super) fn read() -> u32 {
        let mut v: u32 = 0;
        // SAFETY: `stmxcsr` stores the 32-bit MXCSR to the given, valid, aligned address.
        unsafe { std::arch::asm!("stmxcsr [{}]", in(reg) &mut v as *mut u32, options(nostack, preserves_flags)) };
        v
    }

    pub(super) fn write(v: u32) {
        // SAFETY: `ldmxcsr` loads MXCSR from a valid address; only the FTZ/DAZ bits differ from
        // the value read before, and no reserved bit is set (the value came from `stmxcsr`).
        unsafe {
            std::arch::asm!("ldmxcsr [{}]", in(reg) &v as *const u32, options(nostack, preserves_flags, readonly))
        };
    }
}

#[cfg(target_arch = "aarch64")]
mod reg {
    /// FPCR.FZ (bit 24): flush subnormal inputs and outputs of f32/f64 arithmetic to zero.
    pub(super) const BITS: u64 = 1 << 24;
    pub(super) type Word = u64;

    pub(super) fn read() -> u64 {
        let v: u64;
        // SAFETY: reading FPCR has no side effects.
        unsafe { std::arch::asm!("mrs {}, fpcr", out(reg) v, options(nomem, nostack, preserves_flags)) };
        v
    }

    pub(super) fn write(v: u64) {
        // SAFETY: only FPCR.FZ differs from the value read before.
        unsafe { std::arch::asm!("msr fpcr, {}", in(reg) v, options(nomem, nostack, preserves_flags)) };
    }
}

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
mod reg {
    pub(super) const BITS: u8 = 0;
    pub(super) type Word = u8;
    pub(super) fn read() -> u8 {
        0
    }
    pub(super) fn write(_: u8) {}
}

/// Sets FTZ+DAZ on the calling thread while alive and restores the previous register value
/// when dropped (also on unwind).
pub(crate) struct FlushGuard(Option<reg::Word>);

impl FlushGuard {
    /// Flush denormals on this thread until the guard drops; `on == false` changes nothing.
    pub(crate) fn new(on: bool) -> FlushGuard {
        if !on {
            return FlushGuard(None);
        }
        let old = reg::read();
        if old & reg::BITS != reg::BITS {
            reg::write(old | reg::BITS);
        }
        FlushGuard(Some(old))
    }
}

impl Drop for FlushGuard {
    fn drop(&mut self) {
        if let Some(old) = self.0
            && old & reg::BITS != reg::BITS
        {
            reg::write(old);
        }
    }
}

/// Flush denormals on the calling thread for the rest of its life (a pool's `start_handler`).
pub(crate) fn flush_this_thread() {
    reg::write(reg::read() | reg::BITS);
}

/// Whether the calling thread flushes denormals (FTZ and DAZ both set; always `false` on
/// architectures other than x86-64 and AArch64). For tests and diagnostics.
pub fn flushes_denormals() -> bool {
    reg::BITS != 0 && reg::read() & reg::BITS == reg::BITS
}

/// The process-wide pool that executables with `threads: None` and `flush_denormals: true` run
/// in: rayon's default size (`RAYON_NUM_THREADS`, else one thread per core), every thread
/// flushing denormals. Rayon's global pool cannot be given a start handler after it exists,
/// and setting the flags on it would change every other rayon user in the process, so RLX
/// keeps this one pool of its own (built on first use). Errors: the threads cannot be spawned.
pub(crate) fn shared_pool() -> Result<&'static rayon::ThreadPool, String> {
    static POOL: OnceLock<Result<rayon::ThreadPool, String>> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .thread_name(|i| format!("rlx-cpu-{i}"))
            .start_handler(|_| flush_this_thread())
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(Clone::clone)
}
