//! `rlx-compile`: the RLX compiler's pass pipeline.
//!
//! A graph goes through two stages, each listed in one function:
//!
//! - [`hir_stage`] (always run): `verify`, `inline_composites` (the composites the backend has
//!   no native kernel for, named by [`PassOptions::native_composites`]), `legalize`;
//! - [`mir_stage`] (run when [`PassOptions::optimize`]): `const_fold`, `simplify`, `cse`, `dce`,
//!   `attention` (matmul, scale, mask, softmax, matmul into one `scaled_dot_product_attention`
//!   when the backend runs it natively), then `fuse` (elementwise regions into `fused_elementwise` composites) and `epilogue`
//!   (a `dot_general` with the elementwise region that alone reads it into one `dot_epilogue`
//!   composite) and `upcast` (an f16 / bf16 → f32 convert that alone feeds a product moves
//!   into it, so the backend reads the narrow operand), all three when [`PassOptions::fuse`].
//!
//! Each pass is a module in [`passes`] with one entry point
//! `fn run(&mut Graph, &PassOptions) -> Result<PassStats, CompileError>`. Passes rewrite the
//! append-only [`Graph`] by rebuilding it into a new one with a node map, so node ids change but
//! inputs and params keep their order (the runtime feeds them positionally) and every graph
//! output keeps its type. The verifier runs after every pass when
//! [`PassOptions::verify_each`] is set (the default in debug builds and tests), and
//! [`PassOptions::dump_ir`] collects the printed graph after every pass in the returned
//! [`CompileReport`].
#![warn(missing_docs)]

pub mod dispatch;
pub mod lir;
pub mod passes;
mod rebuild;

pub use dispatch::{Dispatch, DispatchEntry, DispatchReport};
pub use passes::fuse::{MissReason, MissedFusion, missed_fusions};
use rlx_ir::{Graph, IrError};
use std::collections::BTreeSet;
use std::fmt;
use thiserror::Error;

/// Composites that MIR passes create from primitives (only when they are in
/// [`PassOptions::native_composites`]): a runtime asks its backend about these names too, not
/// just about the composites already in the graph.
pub const PASS_COMPOSITES: &[&str] = &[passes::attention::SDPA];

/// Errors from the compiler.
#[derive(Debug, Clone, Error, PartialEq)]
pub enum CompileError {
    /// The input graph is invalid (shape mismatch, bad axis, ...).
    #[error(transparent)]
    Ir(#[from] IrError),
    /// A pass produced a graph that fails verification: a compiler bug, named by pass.
    #[error("pass {pass} produced an invalid graph: {source}")]
    PassBroke {
        /// The pass that ran last.
        pass: &'static str,
        /// The verifier's error.
        source: IrError,
    },
}

/// Options read by the passes.
#[derive(Clone, Debug, PartialEq)]
pub struct PassOptions {
    /// Run the MIR stage (folding, simplification, CSE, DCE). The HIR stage always runs.
    pub optimize: bool,
    /// Composites the backend runs natively; every other composite is inlined.
    pub native_composites: BTreeSet<String>,
    /// Fuse elementwise regions into `fused_elementwise` composites (MIR stage; default on).
    pub fuse: bool,
    /// Constant folding only materializes results with at most this many elements.
    pub fold_budget: usize,
    /// Verify the graph after every pass (default: on in debug builds).
    pub verify_each: bool,
    /// Print the graph after every pass into the report (and to tracing at `info` level).
    pub dump_ir: bool,
    /// With `dump_ir`, also write each dump to stderr.
    pub dump_to_stderr: bool,
}

impl Default for PassOptions {
    fn default() -> PassOptions {
        PassOptions {
            optimize: true,
            native_composites: BTreeSet::new(),
            fuse: true,
            fold_budget: 1 << 16,
            verify_each: cfg!(debug_assertions),
            dump_ir: false,
            dump_to_stderr: false,
        }
    }
}

/// What one pass did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassStats {
    /// Rewrites performed (nodes folded, simplified, merged, removed, inlined).
    pub changed: usize,
    /// Node count before the pass.
    pub nodes_before: usize,
    /// Node count after the pass.
    pub nodes_after: usize,
}

/// A pass entry point.
pub type PassFn = fn(&mut Graph, &PassOptions) -> Result<PassStats, CompileError>;

/// A named pass of a stage.
#[derive(Clone, Copy, Debug)]
pub struct Pass {
    /// Name in reports and dumps.
    pub name: &'static str,
    /// Entry point.
    pub run: PassFn,
}

/// One pass's record in a [`CompileReport`].
#[derive(Clone, Debug, PartialEq)]
pub struct PassRecord {
    /// `hir` or `mir`.
    pub stage: &'static str,
    /// Pass name.
    pub pass: &'static str,
    /// What it did.
    pub stats: PassStats,
    /// The printed graph after the pass, when `dump_ir` is set.
    pub ir: Option<String>,
}

/// What the pipeline did, pass by pass.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompileReport {
    /// One record per pass run, in order.
    pub passes: Vec<PassRecord>,
    /// True when the pipeline did not run because a compile cache held its result (the
    /// records are then those of the compile that filled the cache).
    pub cache_hit: bool,
}

impl fmt::Display for CompileReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.cache_hit {
            writeln!(f, "compile cache hit (records of the cached compile follow)")?;
        }
        for r in &self.passes {
            writeln!(
                f,
                "{}.{}: {} changes, {} -> {} nodes",
                r.stage, r.pass, r.stats.changed, r.stats.nodes_before, r.stats.nodes_after
            )?;
        }
        Ok(())
    }
}

/// The HIR stage: check the graph, inline the composites the backend lacks, legalize.
pub fn hir_stage() -> Vec<Pass> {
    vec![
        Pass { name: "verify", run: passes::verify::run },
        Pass { name: "inline_composites", run: passes::inline::run },
        Pass { name: "legalize", run: passes::legalize::run },
    ]
}

/// The MIR stage: constant folding, algebraic simplification, CSE, DCE (in that order: folding
/// and simplification expose duplicates for CSE, and all three leave dead nodes for DCE), then
/// attention patterns into the native attention composite (before fusion would split them),
/// then elementwise fusion on the cleaned graph, then matmul epilogues (a product absorbs the
/// elementwise region that alone reads it), then operand upcasts into products.
pub fn mir_stage() -> Vec<Pass> {
    vec![
        Pass { name: "const_fold", run: passes::const_fold::run },
        Pass { name: "simplify", run: passes::simplify::run },
        Pass { name: "cse", run: passes::cse::run },
        Pass { name: "dce", run: passes::dce::run },
        Pass { name: "attention", run: passes::attention::run },
        Pass { name: "fuse", run: passes::fuse::run },
        Pass { name: "epilogue", run: passes::epilogue::run },
        Pass { name: "upcast", run: passes::upcast::run },
    ]
}

/// Run the pipeline on `g` in place: the HIR stage, then the MIR stage when `opts.optimize`.
///
/// Errors: [`CompileError::Ir`] when the input graph is invalid, [`CompileError::PassBroke`]
/// when a pass broke the graph (checked with `verify_each`).
pub fn compile(g: &mut Graph, opts: &PassOptions) -> Result<CompileReport, CompileError> {
    let mut report = CompileReport::default();
    run_stage(g, opts, "hir", &hir_stage(), &mut report)?;
    if opts.optimize {
        run_stage(g, opts, "mir", &mir_stage(), &mut report)?;
    }
    Ok(report)
}

/// Run one stage's passes in order, appending to `report`.
pub fn run_stage(
    g: &mut Graph,
    opts: &PassOptions,
    stage: &'static str,
    passes: &[Pass],
    report: &mut CompileReport,
) -> Result<(), CompileError> {
    for p in passes {
        let stats = (p.run)(g, opts)?;
        if opts.verify_each {
            rlx_ir::verify(g).map_err(|source| CompileError::PassBroke { pass: p.name, source })?;
        }
        let ir = opts.dump_ir.then(|| {
            let text = g.to_string();
            tracing::info!(stage, pass = p.name, "IR after pass:\n{text}");
            if opts.dump_to_stderr {
                eprintln!("// ---- {stage}.{} ----\n{text}", p.name);
            }
            text
        });
        report.passes.push(PassRecord { stage, pass: p.name, stats, ir });
    }
    Ok(())
}
