//! Golden-fixture machinery shared by op tests: fixture loading (`.npz` written by
//! `tools/refgen/gen_ops.py`), named tolerance levels, and result comparison.
#![allow(dead_code)]

use rlx_ir::half::{bf16, f16};
use rlx_ir::{DType, Tensor};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Where `gen_ops.py` writes the op fixtures.
pub fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ops")
}

/// Named tolerance levels. Integer and bool results are always compared exactly.
///
/// The per-dtype numbers live here and nowhere else (`(rtol, atol)`, a value passes when
/// `|got - want| <= atol + rtol * |want|`; NaN matches NaN, an infinity only itself):
///
/// | level        | f64             | f32          | f16          | bf16         |
/// |--------------|-----------------|--------------|--------------|--------------|
/// | `Exact`      | equal           | equal        | equal        | equal        |
/// | `Close`      | 1e-13 / 2.3e-308| 1e-6 / 1.2e-38 | 2e-3 / 6.1e-5 | 1.6e-2 / 1.2e-38 |
/// | `Approximate`| 1e-10 / 1e-13   | 1e-4 / 1e-6  | 1e-2 / 1e-3  | 5e-2 / 1e-2  |
///
/// - `Exact`: bit-for-bit up to the sign of zero. For ops whose result is exactly defined
///   (movement, compare, select, convert, integer math, and float `+ - * /`, `max`, `rem`, which
///   are correctly rounded both in the f64-then-round reference and in native arithmetic).
/// - `Close`: one correctly-rounded-ish transcendental: about 8 ulp (f32), 2 ulp (f16, bf16);
///   the absolute floor is the dtype's smallest normal, so only flush-to-zero differences hide.
/// - `Approximate`: results that legitimately depend on evaluation order or on intermediate
///   rounding in the dtype (sums, dot products, decomposed composites in f16/bf16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tol {
    /// Equal values (NaN matches NaN).
    Exact,
    /// A few ulp.
    Close,
    /// Accumulation-order and intermediate-rounding differences.
    Approximate,
}

impl Tol {
    /// `(rtol, atol)` for a dtype; `(0, 0)` means exact.
    pub fn bounds(self, d: DType) -> (f64, f64) {
        use DType::*;
        match (self, d) {
            (Tol::Exact, _) => (0.0, 0.0),
            (_, d) if !d.is_float() => (0.0, 0.0),
            (Tol::Close, F64) => (1e-13, f64::MIN_POSITIVE),
            (Tol::Close, F32) => (1e-6, f32::MIN_POSITIVE as f64),
            (Tol::Close, F16) => (2e-3, 6.103515625e-5),
            (Tol::Close, _) => (1.6e-2, f32::MIN_POSITIVE as f64),
            (Tol::Approximate, F64) => (1e-10, 1e-13),
            (Tol::Approximate, F32) => (1e-4, 1e-6),
            (Tol::Approximate, F16) => (1e-2, 1e-3),
            (Tol::Approximate, _) => (5e-2, 1e-2),
        }
    }
}

/// One fixture: inputs and expected outputs, plus its manifest entry.
pub struct Fixture {
    /// Case name (file stem).
    pub name: String,
    /// Graph inputs `in0, in1, ...`.
    pub inputs: Vec<Tensor>,
    /// Expected outputs `out0, out1, ...`.
    pub outputs: Vec<Tensor>,
    /// The manifest entry (`op`, `args`, `pre`, `ref`, ...).
    pub meta: serde_json::Value,
}

/// The manifest: case name -> entry.
pub fn manifest() -> Result<BTreeMap<String, serde_json::Value>, String> {
    let p = fixtures_dir().join("manifest.json");
    let text = std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))
}

/// Names of the `.npz` files in the fixture directory (without extension), sorted.
pub fn fixture_files() -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(fixtures_dir())
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| e.file_name().to_str()?.strip_suffix(".npz").map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Load one case's arrays.
pub fn load(name: &str, meta: &serde_json::Value) -> Result<Fixture, String> {
    let p = fixtures_dir().join(format!("{name}.npz"));
    let f = std::fs::File::open(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    let mut z = zip::ZipArchive::new(f).map_err(|e| format!("{}: {e}", p.display()))?;
    let mut arrays: BTreeMap<String, Tensor> = BTreeMap::new();
    for i in 0..z.len() {
        let mut entry = z.by_index(i).map_err(|e| format!("{name}: {e}"))?;
        let member = entry.name().trim_end_matches(".npy").to_string();
        let mut bytes = vec![];
        entry.read_to_end(&mut bytes).map_err(|e| format!("{name}/{member}: {e}"))?;
        let (key, bf) = match member.strip_suffix("__bf16") {
            Some(k) => (k.to_string(), true),
            None => (member.clone(), false),
        };
        let t = read_npy(&bytes, bf).map_err(|e| format!("{name}/{member}: {e}"))?;
        arrays.insert(key, t);
    }
    let mut take =
        |prefix: &str| -> Vec<Tensor> { (0..).map_while(|k| arrays.remove(&format!("{prefix}{k}"))).collect() };
    let inputs = take("in");
    let outputs = take("out");
    if !arrays.is_empty() {
        return Err(format!("{name}: unexpected arrays {:?}", arrays.keys().collect::<Vec<_>>()));
    }
    Ok(Fixture { name: name.to_string(), inputs, outputs, meta: meta.clone() })
}

fn read_npy(bytes: &[u8], bf: bool) -> Result<Tensor, String> {
    let npy = npyz::NpyFile::new(bytes).map_err(|e| e.to_string())?;
    if npy.order() != npyz::Order::C {
        return Err("fortran-order array".into());
    }
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let ty = match npy.dtype() {
        npyz::DType::Plain(t) => t.to_string(),
        other => return Err(format!("unsupported dtype {other:?}")),
    };
    let e = |e: std::io::Error| e.to_string();
    let t = match (ty.as_str(), bf) {
        ("<u2", true) => {
            let v: Vec<u16> = npy.into_vec().map_err(e)?;
            Tensor::from_vec(v.into_iter().map(bf16::from_bits).collect::<Vec<_>>(), &shape)
        }
        ("<f4", false) => Tensor::from_vec(npy.into_vec::<f32>().map_err(e)?, &shape),
        ("<f8", false) => Tensor::from_vec(npy.into_vec::<f64>().map_err(e)?, &shape),
        ("<f2", false) => Tensor::from_vec(npy.into_vec::<f16>().map_err(e)?, &shape),
        ("|i1", false) => Tensor::from_vec(npy.into_vec::<i8>().map_err(e)?, &shape),
        ("<i2", false) => Tensor::from_vec(npy.into_vec::<i16>().map_err(e)?, &shape),
        ("<i4", false) => Tensor::from_vec(npy.into_vec::<i32>().map_err(e)?, &shape),
        ("<i8", false) => Tensor::from_vec(npy.into_vec::<i64>().map_err(e)?, &shape),
        ("|u1", false) => Tensor::from_vec(npy.into_vec::<u8>().map_err(e)?, &shape),
        ("<u4", false) => Tensor::from_vec(npy.into_vec::<u32>().map_err(e)?, &shape),
        ("|b1", false) => Tensor::from_vec(npy.into_vec::<bool>().map_err(e)?, &shape),
        (t, _) => return Err(format!("unsupported npy type {t} (bf16 marker: {bf})")),
    };
    t.map_err(|e| e.to_string())
}

/// Compare results with expected values under a tolerance (`tol_lowp` for f16 / bf16
/// results); `Err` describes the first mismatches (index, expected, got) and how many there are.
pub fn compare(what: &str, got: &[Tensor], want: &[Tensor], tol: Tol, tol_lowp: Tol) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{what}: {} outputs, expected {}", got.len(), want.len()));
    }
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        if g.dtype() != w.dtype() || g.shape() != w.shape() {
            return Err(format!(
                "{what}: out{k} is {}{:?}, expected {}{:?}",
                g.dtype(),
                g.shape(),
                w.dtype(),
                w.shape()
            ));
        }
        let tol = if matches!(w.dtype(), DType::F16 | DType::BF16) { tol_lowp } else { tol };
        let (rtol, atol) = tol.bounds(w.dtype());
        let n = w.numel();
        let bad: Vec<usize> = if w.dtype().is_float() {
            let (gv, wv) = (g.to_f64_vec(), w.to_f64_vec());
            (0..n).filter(|&i| !value_ok(gv[i], wv[i], rtol, atol)).collect()
        } else {
            // Integers and bools: exact, through the bytes (i64 beyond 2^53 does not fit f64).
            let sz = w.dtype().size_bytes();
            let (gb, wb) = (g.to_le_bytes(), w.to_le_bytes());
            (0..n).filter(|&i| gb[i * sz..(i + 1) * sz] != wb[i * sz..(i + 1) * sz]).collect()
        };
        if !bad.is_empty() {
            let show: Vec<String> = bad
                .iter()
                .take(6)
                .map(|&i| format!("[{}] want {} got {}", unravel(i, w.shape()), fmt_val(w, i), fmt_val(g, i)))
                .collect();
            return Err(format!(
                "{what}: out{k} ({}{:?}, tol {tol:?}): {} of {} differ: {}",
                w.dtype(),
                w.shape(),
                bad.len(),
                n,
                show.join(", ")
            ));
        }
    }
    Ok(())
}

fn value_ok(g: f64, w: f64, rtol: f64, atol: f64) -> bool {
    if w.is_nan() || g.is_nan() {
        return w.is_nan() && g.is_nan();
    }
    if w.is_infinite() || g.is_infinite() {
        return g == w;
    }
    g == w || (g - w).abs() <= atol + rtol * w.abs()
}

fn fmt_val(t: &Tensor, i: usize) -> String {
    match t.dtype() {
        DType::I64 => t.as_slice::<i64>().unwrap()[i].to_string(),
        DType::Bool => t.as_slice::<bool>().unwrap()[i].to_string(),
        d if d.is_float() => format!("{:e}", t.to_f64_vec()[i]),
        _ => format!("{}", t.to_f64_vec()[i]),
    }
}

fn unravel(mut i: usize, shape: &[usize]) -> String {
    let mut idx = vec![0; shape.len()];
    for (k, &d) in shape.iter().enumerate().rev() {
        if d > 0 {
            idx[k] = i % d;
            i /= d;
        }
    }
    idx.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")
}

/// Bitwise equality of two result lists (serialize round trip must change nothing).
pub fn identical(a: &[Tensor], b: &[Tensor]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.dtype() == y.dtype() && x.shape() == y.shape() && x.to_le_bytes() == y.to_le_bytes())
}

/// Builder arguments of a case (`args` in the manifest), with typed accessors that panic with
/// the case's key on a malformed manifest (the harness reports a panic as a failed case).
pub struct Args<'a>(pub &'a serde_json::Value);

impl Args<'_> {
    fn get(&self, k: &str) -> &serde_json::Value {
        self.0.get(k).unwrap_or_else(|| panic!("manifest args lack {k:?}: {}", self.0))
    }
    /// Whether the key is present (and not null).
    pub fn has(&self, k: &str) -> bool {
        self.0.get(k).is_some_and(|v| !v.is_null())
    }
    /// An integer.
    pub fn i64(&self, k: &str) -> i64 {
        self.get(k).as_i64().unwrap_or_else(|| panic!("{k} is not an integer"))
    }
    /// An unsigned 64-bit integer (seeds).
    pub fn u64(&self, k: &str) -> u64 {
        self.get(k).as_u64().unwrap_or_else(|| panic!("{k} is not an unsigned integer"))
    }
    /// A non-negative integer.
    pub fn usize(&self, k: &str) -> usize {
        self.i64(k) as usize
    }
    /// A float.
    pub fn f64(&self, k: &str) -> f64 {
        self.get(k).as_f64().unwrap_or_else(|| panic!("{k} is not a number"))
    }
    /// A bool.
    pub fn bool(&self, k: &str) -> bool {
        self.get(k).as_bool().unwrap_or_else(|| panic!("{k} is not a bool"))
    }
    /// A string.
    pub fn str(&self, k: &str) -> &str {
        self.get(k).as_str().unwrap_or_else(|| panic!("{k} is not a string"))
    }
    /// A list of integers.
    pub fn i64s(&self, k: &str) -> Vec<i64> {
        ints(self.get(k))
    }
    /// A list of non-negative integers.
    pub fn usizes(&self, k: &str) -> Vec<usize> {
        self.i64s(k).into_iter().map(|v| v as usize).collect()
    }
    /// A list of integer pairs (`[[lo, hi], ...]`).
    pub fn pairs(&self, k: &str) -> Vec<(i64, i64)> {
        let v = self.get(k).as_array().unwrap_or_else(|| panic!("{k} is not a list"));
        v.iter()
            .map(|p| {
                let p = ints(p);
                (p[0], p[1])
            })
            .collect()
    }
    /// A list of floats.
    pub fn f64s(&self, k: &str) -> Vec<f64> {
        let v = self.get(k).as_array().unwrap_or_else(|| panic!("{k} is not a list"));
        v.iter().map(|x| x.as_f64().unwrap_or_else(|| panic!("{k} holds a non-number"))).collect()
    }
    /// A dtype name (`f32`, `bf16`, ...).
    pub fn dtype(&self, k: &str) -> DType {
        DType::from_name(self.str(k)).unwrap_or_else(|| panic!("{k} is not a dtype"))
    }
    /// A nested object.
    pub fn sub(&self, k: &str) -> Args<'_> {
        Args(self.get(k))
    }
}

fn ints(v: &serde_json::Value) -> Vec<i64> {
    let a = v.as_array().unwrap_or_else(|| panic!("{v} is not a list"));
    a.iter().map(|x| x.as_i64().unwrap_or_else(|| panic!("{v} holds a non-integer"))).collect()
}
