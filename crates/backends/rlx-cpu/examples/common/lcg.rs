//! The benches' deterministic inputs: a 64-bit linear congruential generator (Knuth's MMIX
//! constants), 24 bits of each state as a uniform f32. Included by path by the rlx-cpu
//! examples that make data (one definition for all).
#![allow(dead_code)]

/// The generator, `Lcg(seed)`.
pub struct Lcg(pub u64);

impl Lcg {
    /// The next value, uniform in `[lo, hi)`.
    pub fn next(&mut self, lo: f32, hi: f32) -> f32 {
        self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * (hi - lo) + lo
    }

    /// The next `len` values, uniform in `[lo, hi)`.
    pub fn fill(&mut self, len: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..len).map(|_| self.next(lo, hi)).collect()
    }
}

/// `len` values uniform in `[lo, hi)` from `seed`.
pub fn uniform(seed: u64, len: usize, lo: f32, hi: f32) -> Vec<f32> {
    Lcg(seed).fill(len, lo, hi)
}
