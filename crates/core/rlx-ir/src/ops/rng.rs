//! Random numbers: counter-based Philox, so results depend only on (seed, element index).
//!
//! # The bit stream
//! The generator is **Philox-4x64-10** (Salmon et al., "Parallel random numbers: as easy as
//! 1, 2, 3", SC'11), chosen so the raw stream equals NumPy's `np.random.Philox(key=seed)`
//! exactly (NumPy's Philox is the 4x64 variant; there is no 4x32 NumPy twin to test against):
//! - key = `[seed, 0]` (two u64 words), counter = 256 bits as four u64 words;
//! - block `b` (0-based) is `philox4x64_10(counter = [b + 1, 0, 0, 0], key)` (NumPy increments
//!   the counter before each block), giving four u64 words;
//! - the u64 stream is the blocks' words in order (`random_raw()`); the u32 stream splits each
//!   u64 word into its low half, then its high half (NumPy's `next_uint32`).
//!
//! # Distributions (element `i` of the row-major output)
//! - `Uniform { low, high }`, f64: `u = (w64[i] >> 11) * 2^-53`;
//!   f32, f16, bf16: `u = (w32[i] >> 8) * 2^-24`; the value is `low + (high - low) * u`
//!   computed in f64 and rounded to the dtype; a result that rounds up to `high` is replaced by
//!   the largest value of the dtype below `high`, so results stay in `[low, high)` (for
//!   `low < high`). With `low = 0, high = 1` this is exactly NumPy's
//!   `Generator(Philox(key=seed)).random(n, dtype)` for f64 and f32.
//! - `Normal { mean, std }`: Box-Muller on pairs. Elements `2p` and `2p + 1` use
//!   `u1 = (w64[2p] >> 11) * 2^-53`, `u2 = (w64[2p + 1] >> 11) * 2^-53` (the f64 uniforms,
//!   whatever the dtype), `r = sqrt(-2 ln(1 - u1))`, `z0 = r cos(2π u2)`, `z1 = r sin(2π u2)`;
//!   element `2p` is `mean + std * z0`, element `2p + 1` is `mean + std * z1`, computed in f64
//!   and rounded to the dtype. (`1 - u1` is in `(0, 1]`, so the log is finite.)
//!
//! This is not JAX's `threefry2x32` stream: `jax.random` results are not reproduced.

use super::Op;
use crate::{DType, Elem, Graph, IrError, NodeId, Shape, Tensor, with_dtype};
use half::{bf16, f16};
use serde::{Deserialize, Serialize};

/// What `rng` draws.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum RngDistribution {
    /// Uniform on `[low, high)`.
    Uniform {
        /// Inclusive lower bound.
        low: f64,
        /// Exclusive upper bound.
        high: f64,
    },
    /// Normal with the given mean and standard deviation.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        std: f64,
    },
}

const PHILOX_M0: u64 = 0xD2E7_470E_E14C_6C93;
const PHILOX_M1: u64 = 0xCA5A_8263_9512_1157;
const PHILOX_W0: u64 = 0x9E37_79B9_7F4A_7C15;
const PHILOX_W1: u64 = 0xBB67_AE85_84CA_A73B;

fn mulhilo(a: u64, b: u64) -> (u64, u64) {
    let p = a as u128 * b as u128;
    ((p >> 64) as u64, p as u64)
}

/// The Philox-4x64 block function with 10 rounds (Random123's `philox4x64_R(10, ctr, key)`).
pub fn philox4x64_10(counter: [u64; 4], key: [u64; 2]) -> [u64; 4] {
    let (mut c, mut k) = (counter, key);
    for round in 0..10 {
        if round > 0 {
            k = [k[0].wrapping_add(PHILOX_W0), k[1].wrapping_add(PHILOX_W1)];
        }
        let (hi0, lo0) = mulhilo(PHILOX_M0, c[0]);
        let (hi1, lo1) = mulhilo(PHILOX_M1, c[2]);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
    }
    c
}

/// The raw streams of one seed, with a one-block cache (sequential reads cost one block per
/// four u64 words).
pub struct PhiloxStream {
    key: [u64; 2],
    block: u64,
    words: [u64; 4],
}

impl PhiloxStream {
    /// The stream of `np.random.Philox(key=seed)`.
    pub fn new(seed: u64) -> PhiloxStream {
        let key = [seed, 0];
        PhiloxStream { key, block: 0, words: philox4x64_10([1, 0, 0, 0], key) }
    }
    /// u64 word `i` (NumPy's `random_raw()[i]`).
    pub fn u64_at(&mut self, i: u64) -> u64 {
        let b = i / 4;
        if b != self.block {
            self.block = b;
            // Counter is 256-bit; `b + 1` never carries for u64 element indices.
            self.words = philox4x64_10([b + 1, 0, 0, 0], self.key);
        }
        self.words[(i % 4) as usize]
    }
    /// u32 word `i`: the low half of u64 word `i / 2` for even `i`, its high half for odd.
    pub fn u32_at(&mut self, i: u64) -> u32 {
        let w = self.u64_at(i / 2);
        if i.is_multiple_of(2) { w as u32 } else { (w >> 32) as u32 }
    }
    /// Uniform f64 in `[0, 1)` with 53 bits: `(w64[i] >> 11) * 2^-53`.
    pub fn f64_at(&mut self, i: u64) -> f64 {
        (self.u64_at(i) >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
    /// Uniform in `[0, 1)` with 24 bits: `(w32[i] >> 8) * 2^-24` (exact in f32).
    pub fn f32_at(&mut self, i: u64) -> f64 {
        (self.u32_at(i) >> 8) as f64 * (1.0 / (1u32 << 24) as f64)
    }
}

/// Largest value of the float `dtype` strictly below `x` (finite `x`), as f64.
fn below(dtype: DType, x: f64) -> f64 {
    // One step toward -inf on the sign-magnitude bit pattern.
    fn down16(b: u16) -> u16 {
        if b == 0 {
            0x8001
        } else if b & 0x8000 == 0 {
            b - 1
        } else {
            b + 1
        }
    }
    let step = |v: f64| match dtype {
        DType::F64 => v.next_down(),
        DType::F32 => (v as f32).next_down() as f64,
        DType::F16 => f16::from_bits(down16(<f16 as Elem>::of_f64(v).to_bits())).to_f64(),
        _ => bf16::from_bits(down16(<bf16 as Elem>::of_f64(v).to_bits())).to_f64(),
    };
    let r = with_dtype!(dtype, T, T::of_f64(x).to_f64());
    if r >= x { step(r) } else { r }
}

pub(crate) fn eval(seed: u64, d: &RngDistribution, out: &mut Tensor) -> Result<(), IrError> {
    let dt = out.dtype();
    if !dt.is_float() {
        return Err(IrError::Eval { op: "rng".into(), msg: format!("rng produces floats, not {dt}") });
    }
    let mut s = PhiloxStream::new(seed);
    with_dtype!(dt, T, {
        let o = out.as_mut_slice::<T>().unwrap();
        match *d {
            RngDistribution::Uniform { low, high } => {
                let top = below(dt, high).max(T::of_f64(low).to_f64());
                for (i, v) in o.iter_mut().enumerate() {
                    let u = if dt == DType::F64 { s.f64_at(i as u64) } else { s.f32_at(i as u64) };
                    let x = T::of_f64(low + (high - low) * u);
                    *v = if low < high && x.to_f64() >= high { T::of_f64(top) } else { x };
                }
            }
            RngDistribution::Normal { mean, std } => {
                for p in 0..o.len().div_ceil(2) {
                    let (u1, u2) = (s.f64_at(2 * p as u64), s.f64_at(2 * p as u64 + 1));
                    let r = (-2.0 * (1.0 - u1).ln()).sqrt();
                    let a = 2.0 * std::f64::consts::PI * u2;
                    o[2 * p] = T::of_f64(mean + std * r * a.cos());
                    if 2 * p + 1 < o.len() {
                        o[2 * p + 1] = T::of_f64(mean + std * r * a.sin());
                    }
                }
            }
        }
    });
    Ok(())
}

/// Builders of random tensors (see the module docs for the exact streams).
impl Graph {
    /// Uniform random numbers on `[low, high)` of float `shape` from Philox key `seed`.
    /// Records an error for a non-float dtype or `!(low <= high)` (NaN bounds included).
    pub fn rng_uniform(&mut self, shape: Shape, seed: u64, low: f64, high: f64) -> NodeId {
        if !(low <= high && low.is_finite() && high.is_finite()) {
            self.record_error(IrError::Shape {
                node: self.nodes.len(),
                op: "rng".into(),
                msg: format!("uniform bounds must be finite with low <= high, got [{low}, {high})"),
            });
        }
        self.push_multi(Op::Rng { seed, distribution: RngDistribution::Uniform { low, high } }, &[], Some(&shape))[0]
    }

    /// Normal random numbers with `mean` and `std` of float `shape` from Philox key `seed`.
    /// Records an error for a non-float dtype or a negative / NaN `std`.
    pub fn rng_normal(&mut self, shape: Shape, seed: u64, mean: f64, std: f64) -> NodeId {
        if std.is_nan() || std < 0.0 || mean.is_nan() {
            self.record_error(IrError::Shape {
                node: self.nodes.len(),
                op: "rng".into(),
                msg: format!("normal needs std >= 0 and a mean that is not NaN, got mean {mean}, std {std}"),
            });
        }
        self.push_multi(Op::Rng { seed, distribution: RngDistribution::Normal { mean, std } }, &[], Some(&shape))[0]
    }
}

/// `rng` has no operands, so no tangent (its output is a constant of the key).
pub(crate) fn jvp(_op: &Op) -> Result<super::ad::JvpOut, super::ad::AdError> {
    Ok(vec![None].into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interp::evaluate_args;

    fn draw(shape: Shape, f: impl Fn(&mut Graph, Shape) -> NodeId) -> Tensor {
        let mut g = Graph::new("r");
        let n = f(&mut g, shape);
        g.set_outputs(vec![n]);
        g.verify().unwrap();
        evaluate_args(&g, &[]).unwrap().remove(0)
    }

    // python: import numpy as np; b = np.random.Philox(key=5); print([hex(w) for w in b.random_raw(5)])
    #[test]
    fn raw_words_match_numpy_philox() {
        let mut s = PhiloxStream::new(5);
        let want =
            [0xbbd6c66234fd0c91u64, 0x972c5c680d78ea48, 0x3532f77bf5c294a3, 0x71803e5d0e6f08fe, 0x3fbe633223a39c06];
        for (i, &w) in want.iter().enumerate() {
            assert_eq!(s.u64_at(i as u64), w, "word {i}");
        }
        // Random access gives the same words (counter-based).
        assert_eq!(PhiloxStream::new(5).u64_at(4), want[4]);
        assert_eq!(s.u32_at(0), 0x34fd0c91);
        assert_eq!(s.u32_at(1), 0xbbd6c662);
    }

    // python: g = np.random.Generator(np.random.Philox(key=5)); print(g.random(3).tolist())
    //         g = np.random.Generator(np.random.Philox(key=5)); print(g.random(3, dtype=np.float32).tolist())
    #[test]
    fn uniform_matches_numpy_generator_random() {
        let t = draw(Shape::new(&[3], DType::F64), |g, s| g.rng_uniform(s, 5, 0.0, 1.0));
        assert_eq!(t.as_slice::<f64>().unwrap(), &[0.7337459554446363, 0.5905206445727093, 0.20780894066207112]);
        let t = draw(Shape::new(&[3], DType::F32), |g, s| g.rng_uniform(s, 5, 0.0, 1.0));
        // The f32 values, printed by python as the f64s they widen to.
        assert_eq!(t.dtype(), DType::F32);
        assert_eq!(t.to_f64_vec(), vec![0.2069861888885498, 0.7337459325790405, 0.05262625217437744]);
    }

    #[test]
    fn uniform_stays_below_high_after_rounding() {
        for dt in [DType::F32, DType::F16, DType::BF16, DType::F64] {
            let t = draw(Shape::new(&[4000], dt), |g, s| g.rng_uniform(s, 7, 1.0, 2.0));
            for v in t.to_f64_vec() {
                assert!((1.0..2.0).contains(&v), "{dt}: {v}");
            }
        }
        assert_eq!(below(DType::F32, 2.0), (2.0f32).next_down() as f64);
        assert_eq!(below(DType::BF16, 1.0), 1.0 - 2f64.powi(-8));
        assert_eq!(below(DType::F16, 0.0), -(2f64.powi(-24)));
    }

    #[test]
    fn normal_box_muller_and_moments() {
        let t = draw(Shape::new(&[3], DType::F64), |g, s| g.rng_normal(s, 5, 1.0, 2.0));
        let mut st = PhiloxStream::new(5);
        let (u1, u2) = (st.f64_at(0), st.f64_at(1));
        let r = (-2.0 * (1.0 - u1).ln()).sqrt();
        let v = t.as_slice::<f64>().unwrap();
        assert_eq!(v[0], 1.0 + 2.0 * r * (2.0 * std::f64::consts::PI * u2).cos());
        assert_eq!(v[1], 1.0 + 2.0 * r * (2.0 * std::f64::consts::PI * u2).sin());
        let t = draw(Shape::new(&[100, 101], DType::F32), |g, s| g.rng_normal(s, 11, 0.0, 1.0));
        let v = t.to_f64_vec();
        let n = v.len() as f64;
        let mean = v.iter().sum::<f64>() / n;
        let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
        assert!(mean.abs() < 0.03 && (var - 1.0).abs() < 0.05, "mean {mean} var {var}");
    }

    #[test]
    fn seeds_differ_and_repeat() {
        let a = draw(Shape::new(&[8], DType::F32), |g, s| g.rng_uniform(s, 1, 0.0, 1.0));
        let b = draw(Shape::new(&[8], DType::F32), |g, s| g.rng_uniform(s, 2, 0.0, 1.0));
        let c = draw(Shape::new(&[8], DType::F32), |g, s| g.rng_uniform(s, 1, 0.0, 1.0));
        assert_ne!(a, b);
        assert_eq!(a, c);
        let e = draw(Shape::new(&[0, 3], DType::F32), |g, s| g.rng_normal(s, 1, 0.0, 1.0));
        assert_eq!(e.numel(), 0);
    }

    #[test]
    fn errors() {
        let mut g = Graph::new("r");
        g.rng_uniform(Shape::new(&[2], DType::I32), 0, 0.0, 1.0);
        assert!(g.error().unwrap().to_string().contains("floats"));
        let mut g = Graph::new("r");
        g.rng_uniform(Shape::new(&[2], DType::F32), 0, 1.0, 0.0);
        assert!(g.error().unwrap().to_string().contains("low <= high"));
        let mut g = Graph::new("r");
        g.rng_normal(Shape::new(&[2], DType::F32), 0, 0.0, f64::NAN);
        assert!(g.error().is_some());
        let mut t = Tensor::zeros(&[2], DType::I32);
        assert!(eval(0, &RngDistribution::Normal { mean: 0.0, std: 1.0 }, &mut t).is_err());
    }
}
