//! The ONNX backend node-suite runner: each case directory holds `model.onnx` and
//! `test_data_set_0/{input,output}_N.pb`; a case passes when every output matches in dtype,
//! shape and values (`|got - want| <= atol + rtol·|want|`, NaN equal to NaN; defaults
//! rtol 1e-3, atol 1e-7 as `onnx.backend.test.loader`, overridden by a case's `data.json`).

use crate::error::{OnnxError, Result};
use crate::{ImportOptions, import, load, load_tensor, report};
use rlx_ir::Tensor;
use rlx_runtime::{Device, Session};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

/// Outcome of one case.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Every output matched.
    Pass,
    /// Failed, with a category (`unsupported op`, `unsupported dtype`, `import error`,
    /// `runtime error`, `numeric mismatch`, `shape/dtype mismatch`, `panic`) and a detail.
    Fail(String, String),
}

/// Result of one case.
#[derive(Clone, Debug)]
pub struct CaseResult {
    /// Directory name (`test_abs`).
    pub name: String,
    /// Op types in the model.
    pub ops: Vec<String>,
    /// Outcome.
    pub outcome: Outcome,
}

/// Tolerances of a case (`data.json` overrides the defaults).
fn tolerances(dir: &Path) -> (f64, f64) {
    let (mut rtol, mut atol) = (1e-3, 1e-7);
    if let Ok(s) = std::fs::read_to_string(dir.join("data.json")) {
        for (key, slot) in [("\"rtol\"", &mut rtol), ("\"atol\"", &mut atol)] {
            if let Some(p) = s.find(key) {
                let rest = s[p + key.len()..].trim_start_matches([' ', ':']);
                let num: String = rest.chars().take_while(|c| c.is_ascii_digit() || "+-.eE".contains(*c)).collect();
                if let Ok(v) = num.parse() {
                    *slot = v;
                }
            }
        }
    }
    (rtol, atol)
}

fn numbered(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v = vec![];
    for i in 0.. {
        let p = dir.join(format!("{prefix}_{i}.pb"));
        if !p.exists() {
            break;
        }
        v.push(p);
    }
    v
}

/// Run one case directory.
pub fn run_case(dir: &Path) -> CaseResult {
    let name = dir.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let mut ops = vec![];
    let outcome = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_inner(dir, &mut ops))) {
        Ok(Ok(o)) => o,
        Ok(Err(e)) => Outcome::Fail(e.category().into(), e.to_string()),
        Err(p) => {
            let msg = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
            Outcome::Fail("panic".into(), msg.unwrap_or_default())
        }
    };
    CaseResult { name, ops, outcome }
}

fn run_inner(dir: &Path, ops: &mut Vec<String>) -> Result<Outcome> {
    let m = load(&dir.join("model.onnx"))?;
    *ops = report(&m).ops.keys().cloned().collect();
    let g0 = m.graph.as_ref().ok_or_else(|| OnnxError::Invalid("no graph".into()))?;
    for v in g0.input.iter().chain(&g0.output) {
        crate::import::value_shape(v, "")?; // sequence / optional / unsupported element types
    }
    let data = dir.join("test_data_set_0");
    let ins: Vec<Tensor> = numbered(&data, "input").iter().map(|p| load_tensor(p)).collect::<Result<_>>()?;
    let want: Vec<Tensor> = numbered(&data, "output").iter().map(|p| load_tensor(p)).collect::<Result<_>>()?;
    let g = m.graph.as_ref().ok_or_else(|| OnnxError::Invalid("no graph".into()))?;
    let inits: Vec<&str> = g.initializer.iter().map(|t| t.name()).collect();
    let names: Vec<String> =
        g.input.iter().map(|v| v.name().to_string()).filter(|n| !inits.contains(&n.as_str())).collect();
    let mut opts = ImportOptions { base_dir: Some(dir.to_path_buf()), ..Default::default() };
    for (n, t) in names.iter().zip(&ins) {
        opts.input_values.insert(n.clone(), t.clone());
    }
    let im = import(&m, &opts)?;
    let mut compiled = Session::try_new(Device::Cpu)?.try_compile(im.graph)?;
    let feeds: Vec<(&str, Tensor)> = names.iter().map(String::as_str).zip(ins).collect();
    let got = compiled.run_tensors(&feeds)?;
    let (rtol, atol) = tolerances(dir);
    if got.len() != want.len() {
        return Ok(Outcome::Fail(
            "shape/dtype mismatch".into(),
            format!("{} outputs, {} expected", got.len(), want.len()),
        ));
    }
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        if g.dtype() != w.dtype() || g.shape() != w.shape() {
            return Ok(Outcome::Fail(
                "shape/dtype mismatch".into(),
                format!("output {k}: got {}{:?}, want {}{:?}", g.dtype(), g.shape(), w.dtype(), w.shape()),
            ));
        }
        if let Some(msg) = mismatch(g, w, rtol, atol) {
            return Ok(Outcome::Fail("numeric mismatch".into(), format!("output {k}: {msg}")));
        }
    }
    Ok(Outcome::Pass)
}

/// `None` when `got` matches `want` within `atol + rtol·|want|` (NaN matches NaN, infinities
/// must be equal); else a description of the worst element.
pub fn mismatch(got: &Tensor, want: &Tensor, rtol: f64, atol: f64) -> Option<String> {
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let mut bad = 0;
    let mut worst: Option<(usize, f64)> = None;
    for (i, (&a, &b)) in g.iter().zip(&w).enumerate() {
        let ok = (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= atol + rtol * b.abs();
        if !ok {
            bad += 1;
            let d = if (a - b).is_nan() { f64::INFINITY } else { (a - b).abs() };
            if worst.is_none_or(|(_, wd)| d > wd) {
                worst = Some((i, d));
            }
        }
    }
    worst.map(|(i, d)| {
        format!("{bad}/{} elements differ; worst at {i}: got {} want {} (|Δ| {d:.3e})", g.len(), g[i], w[i])
    })
}

/// Every case directory under `dir` (those holding a `model.onnx`), sorted by name.
pub fn cases(dir: &Path) -> Result<Vec<PathBuf>> {
    let rd = std::fs::read_dir(dir).map_err(|source| OnnxError::Io { path: dir.display().to_string(), source })?;
    let mut v: Vec<PathBuf> = rd.flatten().map(|e| e.path()).filter(|p| p.join("model.onnx").exists()).collect();
    v.sort();
    Ok(v)
}

/// Run cases on `jobs` threads, in name order.
pub fn run_all(cases: &[PathBuf], jobs: usize) -> Vec<CaseResult> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let out = std::sync::Mutex::new(Vec::with_capacity(cases.len()));
    std::thread::scope(|s| {
        for _ in 0..jobs.max(1) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(dir) = cases.get(i) else { break };
                    let r = run_case(dir);
                    out.lock().unwrap_or_else(|e| e.into_inner()).push((i, r));
                }
            });
        }
    });
    let mut v = out.into_inner().unwrap_or_else(|e| e.into_inner());
    v.sort_by_key(|(i, _)| *i);
    v.into_iter().map(|(_, r)| r).collect()
}

/// The markdown report: totals, failures by category, per-op and per-test tables.
pub fn markdown(results: &[CaseResult], suite: &str) -> String {
    let passed = results.iter().filter(|r| r.outcome == Outcome::Pass).count();
    let mut s = format!(
        "# ONNX backend node-suite conformance\n\nGenerated by `cargo run --release -p rlx-onnx --bin onnx-conformance -- DIR --doc docs/onnx-conformance.md` over {suite} (onnx 1.22.0 wheel, `tools/fetch.sh onnx-node`). A case passes when every output matches in dtype, shape and values (rtol 1e-3, atol 1e-7 unless the case's `data.json` says otherwise; NaN equals NaN), run through `rlx_runtime::Session` on the CPU backend.\n\n**Passed {passed} of {}.**\n\n## Failures by category\n\n| category | cases |\n|---|---:|\n",
        results.len()
    );
    let mut cats: BTreeMap<&str, usize> = BTreeMap::new();
    for r in results {
        if let Outcome::Fail(c, _) = &r.outcome {
            *cats.entry(c.as_str()).or_default() += 1;
        }
    }
    for (c, n) in &cats {
        s += &format!("| {c} | {n} |\n");
    }
    s += "\n## Per op (cases whose model uses the op)\n\n| op | cases | passed |\n|---|---:|---:|\n";
    let mut per_op: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for r in results {
        for o in &r.ops {
            let e = per_op.entry(o.as_str()).or_default();
            e.0 += 1;
            e.1 += usize::from(r.outcome == Outcome::Pass);
        }
    }
    for (o, (n, p)) in &per_op {
        s += &format!("| {o} | {n} | {p} |\n");
    }
    s += "\n## Per test\n\n| test | result | detail |\n|---|---|---|\n";
    for r in results {
        let (res, detail) = match &r.outcome {
            Outcome::Pass => ("pass".to_string(), String::new()),
            Outcome::Fail(c, d) => (c.clone(), d.chars().take(160).collect::<String>()),
        };
        s += &format!("| {} | {res} | {} |\n", r.name, detail.replace('|', "\\|").replace('\n', " "));
    }
    s
}

/// Count of passes by category, for the runner's summary.
pub fn summary(results: &[CaseResult]) -> HashMap<String, usize> {
    let mut m = HashMap::new();
    for r in results {
        let k = match &r.outcome {
            Outcome::Pass => "pass".to_string(),
            Outcome::Fail(c, _) => c.clone(),
        };
        *m.entry(k).or_default() += 1;
    }
    m
}
