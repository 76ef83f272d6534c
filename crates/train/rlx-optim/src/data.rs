//! The two embedded image data sets `rlx train` uses (UCI digits, MNIST-5k), their fixed
//! train/test splits, and shuffled mini-batch order. Sources and licences: `data/README.md`.

use crate::{OptimError, Result};
use std::io::Read;

const DIGITS: &[u8] = include_bytes!("../data/digits.csv.gz");
const MNIST_5K: &[u8] = include_bytes!("../data/mnist_5k.csv.gz");

/// Images (`n × h × w`, scaled to `[0, 1]`) and labels (`0..classes`).
#[derive(Clone, Debug, PartialEq)]
pub struct Split {
    /// `n·h·w` pixels, row-major per image.
    pub x: Vec<f32>,
    /// `n` labels.
    pub y: Vec<i32>,
}

impl Split {
    /// Number of samples.
    pub fn len(&self) -> usize {
        self.y.len()
    }
    /// No samples.
    pub fn is_empty(&self) -> bool {
        self.y.is_empty()
    }
}

/// A data set with its fixed split.
#[derive(Clone, Debug, PartialEq)]
pub struct Dataset {
    /// `digits` or `mnist5k`.
    pub name: &'static str,
    /// Image height and width.
    pub hw: [usize; 2],
    /// Label count.
    pub classes: usize,
    /// Training split.
    pub train: Split,
    /// Test split.
    pub test: Split,
}

impl Dataset {
    /// Pixels per image.
    pub fn features(&self) -> usize {
        self.hw[0] * self.hw[1]
    }
}

/// Parse a gzipped CSV of `features` pixel columns then the label; pixels divided by `scale`.
fn parse(gz: &[u8], features: usize, scale: f32) -> Result<(Vec<f32>, Vec<i32>)> {
    let mut text = String::new();
    flate2::read::GzDecoder::new(gz)
        .read_to_string(&mut text)
        .map_err(|e| OptimError::Dataset(format!("data set: {e}")))?;
    let (mut x, mut y) = (vec![], vec![]);
    for (ln, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let vals: Vec<f32> = line
            .split(',')
            .map(|v| v.trim().parse::<f32>())
            .collect::<std::result::Result<_, _>>()
            .map_err(|e| OptimError::Dataset(format!("data set line {}: {e}", ln + 1)))?;
        if vals.len() != features + 1 {
            return Err(OptimError::Dataset(format!(
                "data set line {}: {} columns, want {}",
                ln + 1,
                vals.len(),
                features + 1
            )));
        }
        x.extend(vals[..features].iter().map(|v| v / scale));
        y.push(vals[features] as i32);
    }
    Ok((x, y))
}

fn split(x: &[f32], y: &[i32], f: usize, is_test: impl Fn(usize) -> bool) -> (Split, Split) {
    let (mut tr, mut te) = (Split { x: vec![], y: vec![] }, Split { x: vec![], y: vec![] });
    for i in 0..y.len() {
        let s = if is_test(i) { &mut te } else { &mut tr };
        s.x.extend_from_slice(&x[i * f..(i + 1) * f]);
        s.y.push(y[i]);
    }
    (tr, te)
}

/// UCI digits, 8×8: sample `i` is test when `i % 5 == 4` (1,438 train / 359 test).
pub fn digits() -> Result<Dataset> {
    let (x, y) = parse(DIGITS, 64, 16.0)?;
    let (train, test) = split(&x, &y, 64, |i| i % 5 == 4);
    Ok(Dataset { name: "digits", hw: [8, 8], classes: 10, train, test })
}

/// MNIST-5k, 28×28: per class (500 each, file order) the first 400 train, the last 100 test
/// (4,000 / 1,000).
pub fn mnist5k() -> Result<Dataset> {
    let (x, y) = parse(MNIST_5K, 784, 255.0)?;
    let mut seen = [0usize; 10];
    let test: Vec<bool> = y
        .iter()
        .map(|&c| {
            let k = &mut seen[c.clamp(0, 9) as usize];
            *k += 1;
            *k > 400
        })
        .collect();
    let (train, test) = split(&x, &y, 784, |i| test[i]);
    Ok(Dataset { name: "mnist5k", hw: [28, 28], classes: 10, train, test })
}

/// The data set `name` names (`digits`, or `mnist` / `mnist5k` / `mnist-5k` for `mnist5k`),
/// without loading it. Errors: an unknown name, listing the known ones.
pub fn canonical_name(name: &str) -> Result<&'static str> {
    match name {
        "digits" => Ok("digits"),
        "mnist" | "mnist5k" | "mnist-5k" => Ok("mnist5k"),
        _ => Err(OptimError::Dataset(format!("unknown data set {name:?} (digits, mnist5k)"))),
    }
}

/// A data set by name: `digits`, or `mnist` / `mnist5k` ([`canonical_name`]).
pub fn by_name(name: &str) -> Result<Dataset> {
    match canonical_name(name)? {
        "digits" => digits(),
        _ => mnist5k(),
    }
}

/// SplitMix64: a small, seedable generator for shuffles and initial weights.
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[lo, hi)`.
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        (lo as f64 + (hi - lo) as f64 * u) as f32
    }
}

/// The sample order of epoch `epoch` (Fisher–Yates, seeded by `seed` and `epoch` only, so a
/// resumed run sees the same order).
pub fn epoch_order(n: usize, seed: u64, epoch: u64) -> Vec<usize> {
    let mut rng = SplitMix64(seed ^ epoch.wrapping_mul(0xD1B5_4A32_D192_ED03));
    let mut idx: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        idx.swap(i, j);
    }
    idx
}
