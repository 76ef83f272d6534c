//! A spinning thread team for the many small parallel steps of one graph run (a decode step is
//! ~200 matmuls of 0.01–0.1 ms each).
//!
//! Why not rayon alone: between two parallel kernels the other workers of a rayon pool go to
//! sleep within microseconds, and waking one (a futex) costs tens of microseconds on a busy VM,
//! paid by every matmul of a decode step: decode ran 1.2x faster on 2 threads than on 1,
//! where llama.cpp, whose threads spin between ops, gets 2x. A [`Team`] keeps its helper
//! threads spinning on an epoch counter while jobs keep coming, so a hand-off costs a cache
//! line transfer; a helper that sees no job for [`SPIN`] parks on a condvar (no CPU burnt
//! between generations). Rayon still runs the large kernels (gemm, prefill tiles).
//!
//! Use: the executor [`Team::enter`]s the team of its thread count around a run; kernels call
//! [`for_each`], which hands the tasks to the entered team, or runs them on rayon (no team:
//! `threads = 1`, or outside a run), or inline (nested inside a task).

use std::cell::Cell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long an idle helper spins before it parks.
pub const SPIN: Duration = Duration::from_millis(2);

/// A job: a type-erased `&(dyn Fn(usize) + Sync)` valid for the duration of [`Team::run`].
#[derive(Clone, Copy)]
struct Job(*const (dyn Fn(usize) + Sync));
// SAFETY: the pointee is `Sync`, and `run` keeps it alive until every helper is done with it.
unsafe impl Send for Job {}

/// `state` bits: the job's epoch above [`EPOCH_SHIFT`], [`CLOSED`], and the count of helpers
/// that joined the job below it.
const EPOCH_SHIFT: u32 = 16;
/// Set by the caller once every task is claimed: no helper may join any more.
const CLOSED: usize = 1 << 15;
/// Helpers in the job (the low bits).
const ACTIVE: usize = CLOSED - 1;
/// Spins between two `yield_now`s while waiting (lets a descheduled peer run on an
/// oversubscribed machine).
const YIELD_EVERY: u32 = 256;

struct Shared {
    /// Epoch, closed bit and joined-helper count of the current job (see [`EPOCH_SHIFT`]).
    state: AtomicUsize,
    /// Next task index of the current job (tasks are claimed dynamically).
    next: AtomicUsize,
    /// Task count of the current job.
    tasks: AtomicUsize,
    /// Helpers parked (or about to park) on `cv`.
    sleepers: AtomicUsize,
    /// A helper's task panicked.
    panicked: AtomicBool,
    /// The caller of the current job flushes denormals: helpers run its tasks the same way.
    flush: AtomicBool,
    quit: AtomicBool,
    job: Mutex<Option<Job>>,
    lock: Mutex<()>,
    cv: Condvar,
}

/// `threads - 1` helper threads that, with the calling thread, run one job at a time.
///
/// A job's tasks are claimed one at a time from a shared counter by the caller and by every
/// helper that *joins* it; once all are claimed the caller closes the job and waits only for
/// the helpers that joined (each finishing its last task), never for one that has not woken
/// up yet: on an oversubscribed machine a descheduled helper costs nothing but its share.
pub struct Team {
    shared: Arc<Shared>,
    /// Serializes callers (two graphs run from two threads share one team).
    caller: Mutex<()>,
}

thread_local! {
    /// The team entered by this thread's executor run.
    static CURRENT: Cell<Option<&'static Team>> = const { Cell::new(None) };
    /// This thread is inside a task (nested parallelism runs inline).
    static IN_TASK: Cell<bool> = const { Cell::new(false) };
}

impl Team {
    /// The process-wide team of `threads` threads (created on first use, never dropped), or
    /// `None` for one thread.
    pub fn shared(threads: usize) -> Option<&'static Team> {
        static TEAMS: OnceLock<Mutex<HashMap<usize, &'static Team>>> = OnceLock::new();
        if threads <= 1 {
            return None;
        }
        let mut map = TEAMS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        Some(*map.entry(threads).or_insert_with(|| &*Box::leak(Box::new(Team::new(threads - 1)))))
    }

    fn new(helpers: usize) -> Team {
        let shared = Arc::new(Shared {
            state: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            tasks: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            panicked: AtomicBool::new(false),
            flush: AtomicBool::new(false),
            quit: AtomicBool::new(false),
            job: Mutex::new(None),
            lock: Mutex::new(()),
            cv: Condvar::new(),
        });
        for _ in 0..helpers.min(ACTIVE) {
            let s = shared.clone();
            std::thread::Builder::new().name("rlx-spin".into()).spawn(move || helper(&s)).expect("spawn a helper");
        }
        Team { shared, caller: Mutex::new(()) }
    }

    /// Run `f` with this team entered on the calling thread: [`for_each`] inside uses it.
    pub fn enter<R>(&'static self, f: impl FnOnce() -> R) -> R {
        struct Reset(Option<&'static Team>);
        impl Drop for Reset {
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(self.0));
            }
        }
        let _reset = Reset(CURRENT.with(|c| c.replace(Some(self))));
        f()
    }

    /// `f(i)` for every `i < n`, on the calling thread and the helpers that join in time;
    /// returns when all are done. Panics if a task panicked.
    fn run(&self, n: usize, f: &(dyn Fn(usize) + Sync)) {
        let _one = self.caller.lock().unwrap_or_else(|e| e.into_inner());
        let s = &*self.shared;
        // SAFETY (lifetime erasure): a helper uses the pointer only between joining (before
        // `CLOSED`) and leaving the job, and this function returns only after the job is closed
        // and every joined helper has left.
        let job: Job = Job(unsafe { std::mem::transmute::<&(dyn Fn(usize) + Sync), &'static _>(f) });
        *s.job.lock().unwrap_or_else(|e| e.into_inner()) = Some(job);
        s.tasks.store(n, Relaxed);
        s.next.store(0, Relaxed);
        s.flush.store(crate::fpenv::flushes_denormals(), Relaxed);
        let epoch = (s.state.load(Relaxed) >> EPOCH_SHIFT).wrapping_add(1);
        s.state.store(epoch << EPOCH_SHIFT, SeqCst);
        if s.sleepers.load(SeqCst) > 0 {
            let _g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.cv.notify_all();
        }
        work(s, f);
        s.state.fetch_or(CLOSED, SeqCst);
        let mut spins = 0u32;
        while s.state.load(Acquire) & ACTIVE != 0 {
            spin_or_yield(&mut spins);
        }
        if s.panicked.swap(false, Relaxed) {
            panic!("a parallel task panicked on a helper thread");
        }
    }
}

fn spin_or_yield(spins: &mut u32) {
    std::hint::spin_loop();
    *spins = spins.wrapping_add(1);
    if spins.is_multiple_of(YIELD_EVERY) {
        std::thread::yield_now();
    }
}

/// Claim and run tasks of the current job until none are left.
fn work(s: &Shared, f: &(dyn Fn(usize) + Sync)) {
    let was = IN_TASK.with(|t| t.replace(true));
    let n = s.tasks.load(Relaxed);
    loop {
        let i = s.next.fetch_add(1, Relaxed);
        if i >= n {
            break;
        }
        f(i);
    }
    IN_TASK.with(|t| t.set(was));
}

fn helper(s: &Shared) {
    let mut seen = s.state.load(SeqCst) >> EPOCH_SHIFT;
    loop {
        let t0 = Instant::now();
        let mut spins = 0u32;
        while s.state.load(Acquire) >> EPOCH_SHIFT == seen {
            spin_or_yield(&mut spins);
            if spins.is_multiple_of(1024) && t0.elapsed() > SPIN {
                s.sleepers.fetch_add(1, SeqCst);
                let mut g = s.lock.lock().unwrap_or_else(|e| e.into_inner());
                while s.state.load(SeqCst) >> EPOCH_SHIFT == seen && !s.quit.load(SeqCst) {
                    g = s.cv.wait(g).unwrap_or_else(|e| e.into_inner());
                }
                drop(g);
                s.sleepers.fetch_sub(1, SeqCst);
                break;
            }
        }
        if s.quit.load(SeqCst) {
            return;
        }
        // Join the job unless it is already closed (then its tasks are all claimed).
        let mut st = s.state.load(Acquire);
        seen = st >> EPOCH_SHIFT;
        let joined = loop {
            if st & CLOSED != 0 || st >> EPOCH_SHIFT != seen {
                break false;
            }
            match s.state.compare_exchange_weak(st, st + 1, AcqRel, Acquire) {
                Ok(_) => break true,
                Err(now) => st = now,
            }
        };
        if !joined {
            continue;
        }
        let job = *s.job.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(Job(f)) = job {
            // SAFETY: see `Team::run`: the job outlives this use.
            let f = unsafe { &*f };
            // The caller's MXCSR flush bits for this job only (restored when the guard drops).
            let _flush = crate::fpenv::FlushGuard::new(s.flush.load(Relaxed));
            if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| work(s, f))).is_err() {
                s.panicked.store(true, Relaxed);
            }
        }
        s.state.fetch_sub(1, Release);
    }
}

/// A raw pointer that parallel tasks share, each touching only its own disjoint elements.
pub struct SyncPtr<T>(pub *mut T);
// Copy for every `T` (a derive would ask `T: Copy`): the pointer is what is copied.
impl<T> Clone for SyncPtr<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for SyncPtr<T> {}
// SAFETY: users write disjoint elements of one buffer that outlives the parallel call.
unsafe impl<T> Send for SyncPtr<T> {}
unsafe impl<T> Sync for SyncPtr<T> {}

impl<T> SyncPtr<T> {
    /// The pointer (a method, so closures capture the `Sync` wrapper, not the raw field).
    pub fn get(self) -> *mut T {
        self.0
    }

    /// `len` elements from `off`.
    ///
    /// # Safety
    /// In bounds of the buffer, and no other live reference overlaps them.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice<'a>(self, off: usize, len: usize) -> &'a mut [T] {
        // SAFETY: the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.0.add(off), len) }
    }
}

/// `f(i)` for every `i < n`, in parallel where it pays: on the team entered by the running
/// executor, else on rayon's current pool; inline for `n <= 1`, inside another task, or in a
/// one-thread run ([`super::simd::serial`]).
pub fn for_each(n: usize, f: impl Fn(usize) + Sync) {
    if n <= 1 || IN_TASK.with(Cell::get) {
        (0..n).for_each(f);
        return;
    }
    match CURRENT.with(Cell::get) {
        Some(team) => team.run(n, &f),
        None if super::simd::threads() == 1 => (0..n).for_each(f),
        None => {
            use rayon::prelude::*;
            (0..n).into_par_iter().for_each(&f)
        }
    }
}

/// `f(i, piece)` for each `chunk`-element piece `i` of `out` (the last one may be shorter), as
/// rayon's `par_chunks_mut(chunk).enumerate()`, on [`for_each`]'s threads. `chunk > 0`.
pub fn for_chunks_mut<T: Send>(out: &mut [T], chunk: usize, f: impl Fn(usize, &mut [T]) + Sync) {
    assert!(chunk > 0, "for_chunks_mut: chunk of 0 elements");
    let (n, p) = (out.len(), SyncPtr(out.as_mut_ptr()));
    for_each(n.div_ceil(chunk), |i| {
        let at = i * chunk;
        // SAFETY: piece `i` is `out[at .. at + its length]`: inside `out`, disjoint from every
        // other piece, and `out`'s exclusive borrow outlives the call.
        f(i, unsafe { p.slice(at, chunk.min(n - at)) })
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_every_element_once() {
        let team = Team::shared(3).unwrap();
        for (n, chunk) in [(0, 4), (1, 4), (10, 4), (12, 4), (100, 7)] {
            let mut v = vec![0usize; n];
            team.enter(|| {
                for_chunks_mut(&mut v, chunk, |i, piece| {
                    assert!(piece.len() == chunk || (i + 1) * chunk >= n, "piece {i}: {}", piece.len());
                    for (j, x) in piece.iter_mut().enumerate() {
                        *x += i * chunk + j + 1;
                    }
                })
            });
            assert_eq!(v, (1..=n).collect::<Vec<_>>(), "n {n}, chunk {chunk}");
        }
    }

    #[test]
    fn every_task_runs_once_on_a_team() {
        let team = Team::shared(3).unwrap();
        for n in [0, 1, 2, 7, 100] {
            let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
            team.enter(|| for_each(n, |i| _ = hits[i].fetch_add(1, Relaxed)));
            assert!(hits.iter().all(|h| h.load(Relaxed) == 1), "n = {n}");
        }
    }

    #[test]
    fn nested_and_after_parking() {
        let team = Team::shared(2).unwrap();
        let sum = AtomicUsize::new(0);
        team.enter(|| for_each(4, |i| for_each(3, |j| _ = sum.fetch_add(i * 3 + j, Relaxed))));
        assert_eq!(sum.load(Relaxed), (0..12).sum::<usize>());
        std::thread::sleep(SPIN * 3); // helpers park
        let sum = AtomicUsize::new(0);
        team.enter(|| for_each(50, |i| _ = sum.fetch_add(i, Relaxed)));
        assert_eq!(sum.load(Relaxed), (0..50).sum::<usize>());
    }
}
