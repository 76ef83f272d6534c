//! The calling thread's CPU time, for the benches' 1-thread figures (steadier than wall time on
//! a loaded host). Included by path by `gemm_bench`, `attention_bench` and rlx-onnx's
//! `onnx_bench` (one definition for all).

/// CPU time of the calling thread, in seconds (0 where the clock is unavailable).
pub fn thread_cpu_secs() -> f64 {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: `ts` is a valid out-pointer for clock_gettime.
        if unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) } == 0 {
            return ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9;
        }
    }
    0.0
}
