//! Forward op tests from one op-record table (in the spirit of JAX's `op_record`).
//!
//! Golden cases come from `tools/refgen/gen_ops.py` (numpy / jax.lax / scipy): one
//! `tests/fixtures/ops/<case>.npz` per case plus `manifest.json`, which names each case's op
//! record, builder arguments and pre-ops. A record (see [`Rec`]) names the op, builds it on the
//! graph inputs from the case's arguments, and picks a named tolerance ([`Tol`]). For every case
//! the harness builds the graph and checks
//! 1. the reference interpreter (`rlx_ir::interp::evaluate`) against the fixture,
//! 2. `hir_to_json` -> `hir_from_json` -> evaluate again: bit-identical results (and stable JSON),
//! 3. the CPU runtime (`rlx_runtime::Session` on `Device::Cpu`, `run_tensors`) against the fixture.
//!
//! Each case is reported as its own test (`cargo test -p rlx --test ops -- add_f32` filters);
//! known disagreements are `skip`ped in the table with their reason and show as `ignored`. Two
//! structural tests check that every fixture has a record and every record a fixture, and that
//! every primitive of `Op` is exercised.

mod common;
#[path = "ops/composites.rs"]
mod composites;
#[path = "ops/control.rs"]
mod control;
#[path = "ops/elementwise.rs"]
mod elementwise;
#[path = "ops/movement.rs"]
mod movement;
#[path = "ops/reduce_dot.rs"]
mod reduce_dot;
#[path = "ops/sort_rng.rs"]
mod sort_rng;

use common::{Args, Fixture, Tol};
use rlx_ir::{Graph, NodeId, Shape, Tensor};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

/// Builds an op on the graph inputs (after pre-ops) from the case's builder arguments.
pub type Build = Box<dyn Fn(&mut Graph, &[NodeId], &Args) -> Vec<NodeId>>;

/// One op record: the op, how to build it, how closely it must match, and known skips.
pub struct Rec {
    /// Record name; fixture cases name it in the manifest's `op` field.
    pub op: &'static str,
    /// Tolerance level of f32 / f64 (and integer, always exact) results.
    pub tol: Tol,
    /// Tolerance level of f16 / bf16 results (defaults to `tol`).
    pub tol_lowp: Tol,
    /// The builder call.
    pub build: Build,
    /// Cases skipped with the reason (a real disagreement reported to the op's owner).
    pub skips: Vec<(&'static str, &'static str)>,
}

impl Rec {
    /// A record.
    pub fn new(
        op: &'static str,
        tol: Tol,
        build: impl Fn(&mut Graph, &[NodeId], &Args) -> Vec<NodeId> + 'static,
    ) -> Rec {
        Rec { op, tol, tol_lowp: tol, build: Box::new(build), skips: vec![] }
    }
    /// A different level for f16 / bf16 results, for decompositions that round every
    /// intermediate in the low-precision dtype.
    pub fn lowp(mut self, tol: Tol) -> Rec {
        self.tol_lowp = tol;
        self
    }
    /// Skip one case, with the reason shown in the test output.
    pub fn skip(mut self, case: &'static str, reason: &'static str) -> Rec {
        self.skips.push((case, reason));
        self
    }
}

/// The table: every family's records.
fn table() -> Vec<Rec> {
    let mut t = vec![];
    t.extend(elementwise::records());
    t.extend(movement::records());
    t.extend(sort_rng::records());
    t.extend(reduce_dot::records());
    t.extend(control::records());
    t.extend(composites::records());
    t
}

/// Primitives not covered yet, with the reason (the coverage test fails on any other gap and
/// on a stale entry here).
const NOT_YET: &[(&str, &str)] = &[];

/// Every primitive name `Op::name` can produce, and every composite `rlx_ir::compose` builds
/// (custom ops appear as `custom.<name>`).
fn all_primitives() -> Vec<String> {
    use rlx_ir::ops::{BinaryOp, CompareOp, CumulativeOp, ReduceOp, UnaryOp};
    let mut v: Vec<String> = [
        "input",
        "constant",
        "iota",
        "select",
        "convert_element_type",
        "stop_gradient",
        "argmax",
        "argmin",
        "reduce_window",
        "broadcast_in_dim",
        "reshape",
        "transpose",
        "rev",
        "slice",
        "dynamic_slice",
        "dynamic_update_slice",
        "concatenate",
        "pad",
        "gather",
        "scatter_add",
        "dot_general",
        "conv_general_dilated",
        "sort",
        "top_k",
        "rng",
        "scan",
        "while",
        "cond",
        "custom.optests.axpy_mul",
        "get_tuple_element",
        // Composites.
        "softmax",
        "log_softmax",
        "gelu",
        "silu",
        "layer_norm",
        "rms_norm",
        "batch_norm",
        "linear",
        "embedding",
        "conv2d",
        "max_pool2d",
        "avg_pool2d",
        "cross_entropy",
        "rope",
        "scaled_dot_product_attention",
        "attention_with_kvcache",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    v.extend(UnaryOp::ALL.iter().map(|u| u.name().to_string()));
    v.extend(BinaryOp::ALL.iter().map(|b| b.name().to_string()));
    v.extend(CompareOp::ALL.iter().map(|c| c.name().to_string()));
    let reduces = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min, ReduceOp::And, ReduceOp::Or];
    v.extend(reduces.iter().map(|r| format!("reduce_{}", r.name())));
    let cums = [CumulativeOp::Sum, CumulativeOp::Prod, CumulativeOp::Max, CumulativeOp::Min];
    v.extend(cums.iter().map(|c| c.name().to_string()));
    v
}

fn main() {
    let opts = Opts::parse();
    let start = Instant::now();
    let table = table();
    let manifest = match common::manifest() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("cannot read the fixture manifest: {e}");
            std::process::exit(101);
        }
    };
    let by_op: HashMap<&str, &Rec> = table.iter().map(|r| (r.op, r)).collect();
    std::panic::set_hook(Box::new(|_| {}));

    let mut report = Report::default();
    let mut covered: BTreeSet<String> = BTreeSet::new();
    let mut all_ran = true;
    let names: Vec<String> =
        ["fixtures_match_records", "coverage"].iter().map(|s| s.to_string()).chain(manifest.keys().cloned()).collect();
    let selected: Vec<&String> = names.iter().filter(|n| opts.selects(n)).collect();
    if opts.list {
        for n in &selected {
            println!("{n}: test");
        }
        return;
    }
    println!("\nrunning {} tests", selected.len());
    let filtered = names.len() - selected.len();
    for (name, meta) in &manifest {
        if !opts.selects(name) {
            all_ran = false;
            continue;
        }
        let op = meta.get("op").and_then(|v| v.as_str()).unwrap_or("?");
        let Some(rec) = by_op.get(op) else {
            report.fail(name, format!("no record for op {op:?}"));
            continue;
        };
        if let Some((_, why)) = rec.skips.iter().find(|(c, _)| c == name) {
            if !opts.ignored && !opts.include_ignored {
                report.ignore(name, why);
                continue;
            }
        } else if opts.ignored {
            continue;
        }
        let r = catch_unwind(AssertUnwindSafe(|| {
            let fx = common::load(name, meta)?;
            run_case(rec, &fx, &mut covered)
        }));
        match r {
            Ok(Ok(())) => report.pass(name),
            Ok(Err(e)) => report.fail(name, e),
            Err(p) => report.fail(name, format!("panicked: {}", panic_msg(&p))),
        }
    }
    if opts.selects("fixtures_match_records") && !opts.ignored {
        match check_records(&table, &manifest) {
            Ok(()) => report.pass("fixtures_match_records"),
            Err(e) => report.fail("fixtures_match_records", e),
        }
    }
    if opts.selects("coverage") && !opts.ignored {
        if all_ran {
            match check_coverage(&covered) {
                Ok(()) => report.pass("coverage"),
                Err(e) => report.fail("coverage", e),
            }
        } else {
            report.ignore("coverage", "needs every case to run (no filter)");
        }
    }
    let ok = report.finish(filtered, start);
    if !ok {
        std::process::exit(101);
    }
}

/// Build the case's graph, run it three ways, compare. Records the primitives it used.
fn run_case(rec: &Rec, fx: &Fixture, covered: &mut BTreeSet<String>) -> Result<(), String> {
    let mut g = Graph::new(fx.name.clone());
    let mut ids = vec![];
    let pre = fx.meta.get("pre");
    for (k, t) in fx.inputs.iter().enumerate() {
        let x = g.input(&format!("in{k}"), Shape::new(t.shape(), t.dtype()));
        let x = match pre.and_then(|p| p.get(k)).filter(|v| !v.is_null()) {
            Some(p) => apply_pre(&mut g, x, &Args(p))?,
            None => x,
        };
        ids.push(x);
    }
    let null = serde_json::Value::Null;
    let args = Args(fx.meta.get("args").unwrap_or(&null));
    let outs = (rec.build)(&mut g, &ids, &args);
    g.set_outputs(outs);
    if let Some(e) = g.error() {
        return Err(format!("build: {e}"));
    }
    collect_ops(&g, covered);
    let feeds: HashMap<String, Tensor> =
        fx.inputs.iter().enumerate().map(|(k, t)| (format!("in{k}"), t.clone())).collect();

    let mut errs = vec![];
    let a = rlx_ir::interp::evaluate(&g, &feeds).map_err(|e| format!("interp: {e}"));
    match &a {
        Ok(a) => errs.extend(common::compare("interp", a, &fx.outputs, rec.tol, rec.tol_lowp).err()),
        Err(e) => errs.push(e.clone()),
    }
    match roundtrip(&g, &feeds) {
        Ok(b) => {
            if a.as_ref().is_ok_and(|a| !common::identical(a, &b)) {
                errs.push("serialize round trip: results differ from the original graph's".into());
            }
        }
        Err(e) => errs.push(e),
    }
    match run_cpu(&g, &fx.inputs) {
        Ok(c) => errs.extend(common::compare("cpu", &c, &fx.outputs, rec.tol, rec.tol_lowp).err()),
        Err(e) => errs.push(e),
    }
    if errs.is_empty() { Ok(()) } else { Err(errs.join("\n")) }
}

/// Pre-ops make an operand non-contiguous inside the graph (a transpose or broadcast view).
fn apply_pre(g: &mut Graph, x: NodeId, p: &Args) -> Result<NodeId, String> {
    if p.has("transpose") {
        Ok(g.transpose(x, &p.usizes("transpose")))
    } else if p.has("broadcast_in_dim") {
        let b = p.sub("broadcast_in_dim");
        Ok(g.broadcast_in_dim(x, b.usizes("shape"), &b.usizes("dims")))
    } else {
        Err(format!("unknown pre-op {}", p.0))
    }
}

fn roundtrip(g: &Graph, feeds: &HashMap<String, Tensor>) -> Result<Vec<Tensor>, String> {
    let json = rlx_ir::hir_to_json(g).map_err(|e| format!("hir_to_json: {e}"))?;
    let g2 = rlx_ir::hir_from_json(&json).map_err(|e| format!("hir_from_json: {e}"))?;
    let json2 = rlx_ir::hir_to_json(&g2).map_err(|e| format!("hir_to_json (second): {e}"))?;
    if json2 != json {
        return Err("serialize round trip: JSON changed on the second trip".into());
    }
    rlx_ir::interp::evaluate(&g2, feeds).map_err(|e| format!("interp after round trip: {e}"))
}

/// The CPU runtime through the public API (`Session` inlines the composites the backend has no
/// kernel for, specializes and compiles). With IEEE subnormals (`flush_denormals: false`): the
/// fixtures are IEEE 754 results (numpy / JAX on float64), and the elementwise cases feed
/// subnormal operands on purpose (e.g. `eq_f32`, `max_f32`, `add_f32`), which the default
/// flush-to-zero mode reads as zero (`RLX_FLUSH_DENORMALS=1` overrides this to see them fail).
fn run_cpu(g: &Graph, inputs: &[Tensor]) -> Result<Vec<Tensor>, String> {
    let ieee = rlx_runtime::CompileOptions::default().with_flush_denormals(false);
    let mut compiled = rlx_runtime::Session::new(rlx_runtime::Device::Cpu)
        .try_compile_with(g.clone(), &ieee)
        .map_err(|e| format!("cpu compile: {e}"))?;
    let feeds: Vec<(String, Tensor)> = inputs.iter().enumerate().map(|(k, t)| (format!("in{k}"), t.clone())).collect();
    let feeds: Vec<(&str, Tensor)> = feeds.iter().map(|(n, t)| (n.as_str(), t.clone())).collect();
    compiled.run_tensors(&feeds).map_err(|e| format!("cpu run: {e}"))
}

fn collect_ops(g: &Graph, covered: &mut BTreeSet<String>) {
    for n in g.nodes() {
        covered.insert(n.op.name());
        for sub in n.op.subgraphs() {
            collect_ops(sub, covered);
        }
    }
}

fn check_records(table: &[Rec], manifest: &BTreeMap<String, serde_json::Value>) -> Result<(), String> {
    let mut errs = vec![];
    let files: BTreeSet<String> = common::fixture_files().into_iter().collect();
    let listed: BTreeSet<String> = manifest.keys().cloned().collect();
    for f in files.difference(&listed) {
        errs.push(format!("fixture {f}.npz is not in manifest.json"));
    }
    for f in listed.difference(&files) {
        errs.push(format!("manifest case {f} has no .npz file"));
    }
    let mut ops: BTreeMap<&str, usize> = BTreeMap::new();
    for (name, meta) in manifest {
        let op = meta.get("op").and_then(|v| v.as_str()).unwrap_or("?");
        *ops.entry(op).or_default() += 1;
        if !table.iter().any(|r| r.op == op) {
            errs.push(format!("case {name}: no record for op {op:?}"));
        }
    }
    let mut seen = BTreeSet::new();
    for r in table {
        if !seen.insert(r.op) {
            errs.push(format!("record {:?} appears twice", r.op));
        }
        if !ops.contains_key(r.op) {
            errs.push(format!("record {:?} has no fixture case", r.op));
        }
        for (c, _) in &r.skips {
            let op = manifest.get(*c).and_then(|m| m.get("op")).and_then(|v| v.as_str());
            if op != Some(r.op) {
                errs.push(format!("record {:?} skips {c:?}, which is not one of its cases", r.op));
            }
        }
    }
    if errs.is_empty() { Ok(()) } else { Err(errs.join("\n")) }
}

fn check_coverage(covered: &BTreeSet<String>) -> Result<(), String> {
    let mut errs = vec![];
    let all = all_primitives();
    for seen in covered {
        if !all.contains(seen) {
            errs.push(format!("op {seen} is not in all_primitives(): add it there"));
        }
    }
    for p in all {
        let pending = NOT_YET.iter().any(|(n, _)| *n == p);
        match (covered.contains(&p), pending) {
            (false, false) => errs.push(format!("primitive {p} is exercised by no case")),
            (true, true) => errs.push(format!("primitive {p} is covered now: remove it from NOT_YET")),
            _ => {}
        }
    }
    if errs.is_empty() { Ok(()) } else { Err(errs.join("\n")) }
}

fn panic_msg(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

/// Command-line options, a subset of libtest's.
#[derive(Default)]
struct Opts {
    filters: Vec<String>,
    exact: bool,
    ignored: bool,
    include_ignored: bool,
    list: bool,
}

impl Opts {
    fn parse() -> Opts {
        let mut o = Opts::default();
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            match a.as_str() {
                "--exact" => o.exact = true,
                "--ignored" => o.ignored = true,
                "--include-ignored" => o.include_ignored = true,
                "--list" => o.list = true,
                "--test-threads" | "--format" | "--color" | "--skip" | "-Z" => {
                    args.next();
                }
                s if s.starts_with('-') => {}
                s => o.filters.push(s.to_string()),
            }
        }
        o
    }

    fn selects(&self, name: &str) -> bool {
        self.filters.is_empty()
            || self.filters.iter().any(|f| if self.exact { name == f } else { name.contains(f.as_str()) })
    }
}

/// libtest-style output, so `cargo test`'s summary and CI's result line read as usual.
#[derive(Default)]
struct Report {
    passed: usize,
    ignored: usize,
    failures: Vec<(String, String)>,
}

impl Report {
    fn pass(&mut self, name: &str) {
        println!("test {name} ... ok");
        self.passed += 1;
    }
    fn ignore(&mut self, name: &str, why: &str) {
        println!("test {name} ... ignored, {why}");
        self.ignored += 1;
    }
    fn fail(&mut self, name: &str, why: String) {
        println!("test {name} ... FAILED");
        self.failures.push((name.to_string(), why));
    }
    fn finish(&self, filtered: usize, start: Instant) -> bool {
        if !self.failures.is_empty() {
            println!("\nfailures:\n");
            for (n, why) in &self.failures {
                println!("---- {n} ----\n{why}\n");
            }
            println!("failures:");
            for (n, _) in &self.failures {
                println!("    {n}");
            }
        }
        let ok = self.failures.is_empty();
        println!(
            "\ntest result: {}. {} passed; {} failed; {} ignored; 0 measured; {} filtered out; finished in {:.2}s\n",
            if ok { "ok" } else { "FAILED" },
            self.passed,
            self.failures.len(),
            self.ignored,
            filtered,
            start.elapsed().as_secs_f64()
        );
        ok
    }
}
