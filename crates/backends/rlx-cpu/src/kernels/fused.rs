//! The fused elementwise kernel: runs a `fused_elementwise` composite (built by
//! `rlx_compile::passes::fuse`) in one pass over memory.
//!
//! At compile time the body becomes a small register program over f32 blocks of [`BLOCK`]
//! elements (bool values are 0/1 masks): each instruction reads registers (scratch blocks),
//! operands (slices of the inputs, or scalars) or immediates, and writes a scratch block that
//! stays in L1; registers are reused once their value is dead. At run time the element space is
//! cut into a fixed number of tasks (by size only, so results do not depend on the thread
//! count) run on the executor's spinning team ([`spin::for_each`]), each walking its range
//! block by block. Operands broadcast into the region (NumPy broadcasting or `broadcast_in_dim`) are read in place when they are a scalar,
//! a full tensor, a repeated row or a repeated column within the block, else gathered through
//! their strides. A trailing `reduce_sum` / `reduce_max` accumulates per block.
//!
//! Each op computes exactly what the unfused kernel computes: unary and binary math call
//! [`super::elementwise::unary_block`] / [`super::elementwise::binary_block`]. Sums add the
//! block partials in a fixed order (16 lanes per block), so they differ from the reference's
//! f64 sums by f32 rounding only. Covered: f32 and bool values; anything else (another dtype,
//! a binary op on bools, `is_finite`) falls back to evaluating the body.
//!
//! Large regions stream: results of at least `composite::STREAM_MIN_BYTES` are written from a
//! register with non-temporal stores, and operands of at least [`PREFETCH_MIN_BYTES`] read in
//! place are prefetched into L2 [`PREFETCH_BLOCKS`] blocks ahead.
//!
//! The reduction accumulators are planned here; the scratch registers of a task live in the
//! running thread's buffer ([`with_scratch`]), so a warm `run` allocates nothing.

use super::elementwise::{Src, binary_block, unary_block};
use super::fused_adam::{self, AdamMatch, AdamScalars};
use super::fused_tile::{self, TileProg};
use super::simd::{dispatch, threads};
use super::spin::{self, SyncPtr};
use rlx_ir::ops::{BinaryOp, CompareOp, Composite, ReduceOp, UnaryOp};
use rlx_ir::{DType, IrError, Op, Tensor};

/// Name of the composite this kernel runs.
pub const NAME: &str = "fused_elementwise";
/// Elements per register block (4 KiB of f32).
pub const BLOCK: usize = 1024;
/// Distance between registers in the scratch: a block plus one cache line. Registers exactly
/// 4 KiB apart made every load of one and store to another alias in the CPU's 4 KiB
/// store-forwarding check (measured: 0.35 → 0.09 ns per element-op on a 20-op chain).
const REG_STRIDE: usize = BLOCK + 16;
/// Most tasks one run is cut into.
const MAX_TASKS: usize = 64;
/// Fewest elements per task.
const MIN_TASK: usize = 1 << 15;
/// How far ahead of the block being computed the operands read in place are prefetched into
/// L2, in blocks. A block is one 4 KiB page when the operand is page-aligned, and the
/// hardware prefetchers stop at page boundaries: without it every block's first reads waited
/// on memory (the 16M-element `gelu_tanh(x·a+b)·sigmoid(x)−c` chain of `fusion_bench`).
const PREFETCH_BLOCKS: usize = 4;
/// Operands of fewer bytes than this are not prefetched (they sit in cache).
const PREFETCH_MIN_BYTES: usize = 1 << 20;

/// An instruction operand.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Arg {
    /// A scratch register.
    Reg(usize),
    /// A view of a composite operand ([`FusedKernel::views`]).
    View(usize),
    /// A scalar constant.
    Imm(f32),
}

#[derive(Clone, Debug)]
pub(super) enum Instr {
    Unary(UnaryOp, Arg, usize),
    Binary(BinaryOp, Arg, Arg, usize),
    /// Result is a 0/1 mask.
    Compare(CompareOp, Arg, Arg, usize),
    /// `pred` is a mask.
    Select(Arg, Arg, Arg, usize),
    /// f32 to bool mask (`x != 0`).
    NonZero(Arg, usize),
    Copy(Arg, usize),
    /// Accumulate into reduction `k`.
    Reduce(ReduceOp, Arg, usize),
    /// Write to composite result `k`.
    Store(Arg, usize),
    /// The whole Adam / AdamW update region in one pass ([`super::fused_adam`]).
    Adam(Box<AdamInstr>),
    /// A run of f32 instructions kept in vector registers ([`super::fused_tile`]).
    Tile(Box<TileProg>),
}

/// Operands of [`Instr::Adam`]: views of `m, v, g, p` (read in place), the scalars in
/// [`AdamMatch::scalars`] order, AdamW's decay, and the results `m2, v2, p2` are written to.
#[derive(Clone, Debug)]
pub(super) struct AdamInstr {
    full: [Arg; 4],
    scalars: [Arg; 8],
    wd: Option<Arg>,
    outs: [usize; 3],
}

/// How a view reads its operand for output element `i`.
#[derive(Clone, Debug, PartialEq)]
enum Access {
    Full,
    Scalar,
    /// Element `i % r`.
    Row(usize),
    /// Element `i / c`.
    Col(usize),
    /// Element `sum(idx[d] * strides[d])` over the (size>1) output dims.
    Strided {
        dims: Vec<usize>,
        strides: Vec<usize>,
    },
}

/// One operand read with one broadcast pattern.
#[derive(Clone, Debug)]
struct View {
    input: usize,
    access: Access,
    is_bool: bool,
    /// Register to gather into when the block cannot be read in place.
    reg: Option<usize>,
}

/// What a composite result is.
#[derive(Clone, Copy, Debug)]
enum OutKind {
    /// The element space, f32 or bool.
    Elems,
    /// Reduction `k`.
    Reduced(usize),
}

/// A compiled fused region (see the module docs).
#[derive(Clone, Debug)]
pub struct FusedKernel {
    prog: Vec<Instr>,
    views: Vec<View>,
    regs: usize,
    /// Elements of the region's space.
    n: usize,
    /// Reductions: row length (the reduced extent) and op per reduction.
    row: usize,
    reds: Vec<ReduceOp>,
    outs: Vec<OutKind>,
    /// Task boundaries (element offsets, `tasks + 1` of them).
    bounds: Vec<usize>,
    acc: Vec<f32>,
    /// Write the f32 results with non-temporal stores (results of at least
    /// [`super::composite::STREAM_MIN_BYTES`] on AVX-512 or AVX2: they cannot stay in cache, and
    /// skipping the read-for-ownership of the destination saves a third of the traffic).
    stream: bool,
}

impl FusedKernel {
    /// Name for reports.
    pub fn name(&self) -> &'static str {
        match (self.prog.as_slice(), self.reds.is_empty()) {
            ([Instr::Adam(_)], _) => "fused_adam_f32",
            (_, true) => "fused_elementwise_f32",
            (_, false) => "fused_elementwise_reduce_f32",
        }
    }
}

fn contiguous_strides(d: &[usize]) -> Vec<usize> {
    let mut s = vec![1; d.len()];
    for i in (0..d.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * d[i + 1];
    }
    s
}

/// Classify an operand whose element strides over the output dims `out` are `strides`.
fn classify(out: &[usize], strides: &[usize]) -> Access {
    let (d, s): (Vec<usize>, Vec<usize>) =
        out.iter().zip(strides).filter(|(d, _)| **d > 1).map(|(&d, &s)| (d, s)).unzip();
    let n: usize = d.iter().product();
    if s.iter().all(|&x| x == 0) {
        return Access::Scalar;
    }
    let c = contiguous_strides(&d);
    if s == c {
        return Access::Full;
    }
    for k in 1..d.len() {
        // Row: leading dims broadcast, trailing contiguous.
        if s[..k].iter().all(|&x| x == 0) && s[k..] == contiguous_strides(&d[k..])[..] {
            return Access::Row(d[k..].iter().product());
        }
        // Column: leading contiguous, trailing broadcast.
        if s[k..].iter().all(|&x| x == 0) && s[..k] == contiguous_strides(&d[..k])[..] {
            return Access::Col(n / d[..k].iter().product::<usize>());
        }
    }
    Access::Strided { dims: d, strides: s }
}

/// Per-output-dim strides of an operand of dims `x` mapped onto output dims through `map`
/// (operand dim `i` is output dim `map[i]`); broadcast dims get stride 0.
fn strides_for(out: &[usize], x: &[usize], map: &[usize]) -> Vec<usize> {
    let xs = contiguous_strides(x);
    let mut s = vec![0; out.len()];
    for (i, &o) in map.iter().enumerate() {
        if x[i] == out[o] && x[i] > 1 {
            s[o] = xs[i];
        }
    }
    s
}

struct Builder {
    out: Vec<usize>,
    views: Vec<View>,
    free: Vec<usize>,
    regs: usize,
    prog: Vec<Instr>,
}

impl Builder {
    fn reg(&mut self) -> usize {
        self.free.pop().unwrap_or_else(|| {
            self.regs += 1;
            self.regs - 1
        })
    }
    /// The view of composite operand `input` (dims `x`) broadcast through `map`.
    fn view(&mut self, input: usize, x: &[usize], map: &[usize], is_bool: bool) -> Arg {
        let access = classify(&self.out, &strides_for(&self.out, x, map));
        if let Some(k) = self.views.iter().position(|v| v.input == input && v.access == access) {
            return Arg::View(k);
        }
        let needs_reg = is_bool || !matches!(access, Access::Full | Access::Scalar);
        // Gather registers are never freed (they are refilled each block).
        let reg = needs_reg.then(|| {
            self.regs += 1;
            self.regs - 1
        });
        self.views.push(View { input, access, is_bool, reg });
        Arg::View(self.views.len() - 1)
    }
}

/// Plan the kernel for `c` on operands `ins` giving `outs` (dims, dtype); `None` when the
/// body holds something this kernel does not cover (the caller then evaluates the body).
pub fn select(c: &Composite, ins: &[(Vec<usize>, DType)], outs: &[(Vec<usize>, DType)]) -> Option<FusedKernel> {
    let body = &*c.body;
    let ok_dtype = |d: DType| matches!(d, DType::F32 | DType::Bool);
    if !ins.iter().chain(outs).all(|(_, d)| ok_dtype(*d)) {
        return None;
    }
    // The element space: the dims of any non-reduction member.
    let space = body.nodes().iter().find_map(|n| match n.op {
        Op::Input { .. } | Op::Constant(_) | Op::Reduce { .. } => None,
        _ => n.ty().static_dims(),
    })?;
    let n: usize = space.iter().product();
    if n == 0 {
        return None;
    }
    let nodes = body.nodes();
    // Last use of each body value (outputs count as a use right after their definition).
    let mut last = vec![0usize; nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        for x in &node.inputs {
            last[x.index()] = i;
        }
    }
    let mut b = Builder { out: space.clone(), views: vec![], free: vec![], regs: 0, prog: vec![] };
    let mut val: Vec<Option<Arg>> = vec![None; nodes.len()];
    let mut kinds = vec![None; body.outputs().len()];
    let mut reds = vec![];
    let mut row = n;
    if let Some(a) = fused_adam::match_body(body, &space) {
        plan_adam(&mut b, body, &a, &mut kinds)?;
    } else {
        for (i, node) in nodes.iter().enumerate() {
            let ty = node.ty();
            let dims = ty.static_dims()?;
            let is_bool = ty.dtype == DType::Bool;
            let arg = |k: usize| val[node.inputs[k].index()];
            let f32_in = |k: usize| body.shape(node.inputs[k]).dtype == DType::F32;
            // Operand `k` as an instruction argument: a view when it is a composite operand read
            // with NumPy broadcasting.
            let operand = |b: &mut Builder, k: usize| -> Option<Arg> {
                let x = node.inputs[k];
                match &body.node(x).op {
                    Op::Input { .. } => {
                        let xd = body.shape(x).static_dims()?;
                        let input = body.inputs().iter().position(|&y| y == x)?;
                        if xd.len() > dims.len() {
                            return None;
                        }
                        let map: Vec<usize> = (dims.len() - xd.len()..dims.len()).collect();
                        Some(b.view(input, &xd, &map, body.shape(x).dtype == DType::Bool))
                    }
                    _ => val[x.index()],
                }
            };
            let def = match &node.op {
                Op::Input { .. } => None,
                Op::Constant(t) if t.numel() == 1 => Some(Arg::Imm(t.to_f64_vec()[0] as f32)),
                Op::Constant(_) => return None,
                Op::Reduce { op, axes } => {
                    let x = val[node.inputs[0].index()]?;
                    let r = space.len();
                    let this_row = if axes.as_slice() == [r - 1] { space[r - 1] } else { n };
                    if !reds.is_empty() && this_row != row {
                        return None;
                    }
                    row = this_row;
                    reds.push(*op);
                    b.prog.push(Instr::Reduce(*op, x, reds.len() - 1));
                    None
                }
                _ if dims != space => return None,
                Op::Unary(u) if f32_in(0) && !is_bool => {
                    let x = operand(&mut b, 0)?;
                    let d = b.reg();
                    b.prog.push(Instr::Unary(*u, x, d));
                    Some(Arg::Reg(d))
                }
                Op::Binary(op) if f32_in(0) && !is_bool => {
                    let (x, y) = (operand(&mut b, 0)?, operand(&mut b, 1)?);
                    let d = b.reg();
                    b.prog.push(Instr::Binary(*op, x, y, d));
                    Some(Arg::Reg(d))
                }
                Op::Compare(op) if f32_in(0) => {
                    let (x, y) = (operand(&mut b, 0)?, operand(&mut b, 1)?);
                    let d = b.reg();
                    b.prog.push(Instr::Compare(*op, x, y, d));
                    Some(Arg::Reg(d))
                }
                Op::Select => {
                    let (p, x, y) = (operand(&mut b, 0)?, operand(&mut b, 1)?, operand(&mut b, 2)?);
                    let d = b.reg();
                    b.prog.push(Instr::Select(p, x, y, d));
                    Some(Arg::Reg(d))
                }
                Op::ConvertElementType(to) => {
                    let x = operand(&mut b, 0)?;
                    let d = b.reg();
                    let from = body.shape(node.inputs[0]).dtype;
                    b.prog.push(if from == DType::F32 && *to == DType::Bool {
                        Instr::NonZero(x, d)
                    } else {
                        Instr::Copy(x, d)
                    });
                    Some(Arg::Reg(d))
                }
                Op::StopGradient => {
                    let x = operand(&mut b, 0)?;
                    let d = b.reg();
                    b.prog.push(Instr::Copy(x, d));
                    Some(Arg::Reg(d))
                }
                Op::BroadcastInDim { broadcast_dimensions, .. } => {
                    let x = node.inputs[0];
                    let d = b.reg();
                    let src = match &body.node(x).op {
                        Op::Input { .. } => {
                            let xd = body.shape(x).static_dims()?;
                            let input = body.inputs().iter().position(|&y| y == x)?;
                            b.view(input, &xd, broadcast_dimensions, body.shape(x).dtype == DType::Bool)
                        }
                        _ => arg(0)?,
                    };
                    b.prog.push(Instr::Copy(src, d));
                    Some(Arg::Reg(d))
                }
                _ => return None,
            };
            val[i] = def;
            // Results of the composite are stored right after their definition.
            for (k, &o) in body.outputs().iter().enumerate() {
                if o.index() == i {
                    match &node.op {
                        Op::Reduce { .. } => kinds[k] = Some(OutKind::Reduced(reds.len() - 1)),
                        _ => {
                            b.prog.push(Instr::Store(def?, k));
                            kinds[k] = Some(OutKind::Elems);
                        }
                    }
                }
            }
            // Free registers whose value is dead after this node, once per value: a repeated
            // operand (`mul(t, t)`) freed twice would hand one register to two later values.
            for (j, x) in node.inputs.iter().enumerate() {
                if last[x.index()] == i
                    && !node.inputs[..j].contains(x)
                    && !body.outputs().contains(x)
                    && let Some(Arg::Reg(r)) = val[x.index()]
                {
                    b.free.push(r);
                }
            }
            if last[i] <= i
                && let Some(Arg::Reg(r)) = def
            {
                b.free.push(r);
            }
        }
    }
    let outs_k: Vec<OutKind> = kinds.into_iter().collect::<Option<_>>()?;
    let stream = (super::simd::has_avx512() || super::simd::has_avx2())
        && outs.iter().any(|(d, t)| *t == DType::F32 && super::composite::streams_f32(d.iter().product()));
    // Large results are written by their `Store` (non-temporal), small ones by the op itself.
    if !stream {
        store_through(&mut b.prog, b.regs, outs);
    }
    // Runs of f32 math in vector registers, on AVX-512. (AVX2 tiles of 2 or 4 vectors ran
    // `fusion_bench chain-l2` in 0.67–0.71 ms on Zen 3, against the block program's 0.55–0.58:
    // an op dispatch per 16–32 elements, and the accumulators spilled.)
    if super::simd::has_avx512() {
        let f32_out = |k: usize| outs[k].1 == DType::F32;
        b.prog = fused_tile::plan(std::mem::take(&mut b.prog), b.regs, &f32_out);
    }
    // Reduction outputs must have `n / row` elements.
    for (k, o) in outs_k.iter().enumerate() {
        let want = match o {
            OutKind::Elems => n,
            OutKind::Reduced(_) => n / row.max(1),
        };
        if outs[k].0.iter().product::<usize>() != want {
            return None;
        }
    }
    // Tasks: by size only; with reductions over rows, cut at row boundaries.
    let tasks = (n / MIN_TASK).clamp(1, MAX_TASKS);
    let rows = n / row.max(1);
    let bounds: Vec<usize> = if !reds.is_empty() && rows > 1 {
        let t = tasks.min(rows);
        (0..=t).map(|k| rows * k / t * row).collect()
    } else {
        (0..=tasks).map(|k| (n * k / tasks).next_multiple_of(BLOCK).min(n)).collect()
    };
    let t = bounds.len() - 1;
    Some(FusedKernel {
        prog: b.prog,
        views: b.views,
        regs: b.regs,
        n,
        row,
        acc: vec![0.0; t * reds.len().max(1)],
        reds,
        outs: outs_k,
        bounds,
        stream,
    })
}

/// The register an instruction writes, if any (tiles are planned last and never asked).
pub(super) fn dest_mut(i: &mut Instr) -> Option<&mut usize> {
    match i {
        Instr::Unary(_, _, d)
        | Instr::Binary(_, _, _, d)
        | Instr::Compare(_, _, _, d)
        | Instr::Select(_, _, _, d)
        | Instr::NonZero(_, d)
        | Instr::Copy(_, d) => Some(d),
        Instr::Reduce(..) | Instr::Store(..) | Instr::Adam(_) | Instr::Tile(_) => None,
    }
}

/// Register arguments an instruction reads (tiles are planned last and never asked).
pub(super) fn args_mut(i: &mut Instr) -> Vec<&mut Arg> {
    match i {
        Instr::Unary(_, x, _)
        | Instr::NonZero(x, _)
        | Instr::Copy(x, _)
        | Instr::Reduce(_, x, _)
        | Instr::Store(x, _) => {
            vec![x]
        }
        Instr::Binary(_, x, y, _) | Instr::Compare(_, x, y, _) => vec![x, y],
        Instr::Select(p, x, y, _) => vec![p, x, y],
        Instr::Adam(_) | Instr::Tile(_) => vec![],
    }
}

/// Write f32 results in place: an instruction whose value is stored to f32 result `k` right
/// after it writes that result's block directly (register `regs + k`, see `run_task`), later
/// reads of its register read the result, and the `Store` (a copy per block) goes. A matmul
/// epilogue's `acc + bias` then writes the output in the pass that reads the product. Results
/// never alias the region's operands (the memory plan runs only plain unary / binary steps in
/// place), and every later reader already saw the stored value at the same program point.
fn store_through(prog: &mut Vec<Instr>, regs: usize, outs: &[(Vec<usize>, DType)]) {
    let mut i = 0;
    while i + 1 < prog.len() {
        let (head, tail) = prog.split_at_mut(i + 1);
        let target = match (dest_mut(&mut head[i]), &tail[0]) {
            (Some(d), &Instr::Store(Arg::Reg(r), k)) if *d == r && outs[k].1 == DType::F32 => {
                *d = regs + k;
                Some((r, regs + k))
            }
            _ => None,
        };
        if let Some((r, v)) = target {
            prog.remove(i + 1);
            for later in &mut prog[i + 1..] {
                for a in args_mut(later) {
                    if *a == Arg::Reg(r) {
                        *a = Arg::Reg(v);
                    }
                }
                if dest_mut(later).is_some_and(|d| *d == r) {
                    break;
                }
            }
        }
        i += 1;
    }
}

/// The program of a matched Adam region: one [`Instr::Adam`] reading its leaves as views
/// (full tensors in place, scalars) or immediates.
fn plan_adam(b: &mut Builder, body: &rlx_ir::Graph, a: &AdamMatch, kinds: &mut [Option<OutKind>]) -> Option<()> {
    let mut arg = |x: rlx_ir::NodeId| -> Option<Arg> {
        match &body.node(x).op {
            Op::Constant(t) => Some(Arg::Imm(t.to_f64_vec()[0] as f32)),
            _ => {
                let xd = body.shape(x).static_dims()?;
                let input = body.inputs().iter().position(|&y| y == x)?;
                let out = b.out.len();
                let map: Vec<usize> = (out.checked_sub(xd.len())?..out).collect();
                Some(b.view(input, &xd, &map, false))
            }
        }
    };
    let full = [arg(a.full[0])?, arg(a.full[1])?, arg(a.full[2])?, arg(a.full[3])?];
    let mut scalars = [Arg::Imm(0.0); 8];
    for (s, &x) in scalars.iter_mut().zip(&a.scalars) {
        *s = arg(x)?;
    }
    let wd = match a.wd {
        Some(x) => Some(arg(x)?),
        None => None,
    };
    // Full views must be read in place and scalars must be scalars, as `adam_block` reads them.
    let ok = |x: &Arg, want_full: bool| match x {
        Arg::View(k) => b.views[*k].access == if want_full { Access::Full } else { Access::Scalar },
        Arg::Imm(_) => !want_full,
        Arg::Reg(_) => false,
    };
    if !full.iter().all(|x| ok(x, true)) || !scalars.iter().chain(&wd).all(|x| ok(x, false)) {
        return None;
    }
    b.prog.push(Instr::Adam(Box::new(AdamInstr { full, scalars, wd, outs: a.outs })));
    kinds.iter_mut().for_each(|k| *k = Some(OutKind::Elems));
    Some(())
}

/// Raw output pointers shared by tasks that write disjoint ranges.
#[derive(Clone, Copy)]
struct OutPtr(*mut u8);
// SAFETY: tasks write disjoint element ranges (and reduction rows) of each output.
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

fn identity(op: ReduceOp) -> f32 {
    if op == ReduceOp::Max { f32::NEG_INFINITY } else { 0.0 }
}

#[inline(always)]
fn combine(op: ReduceOp, a: f32, b: f32) -> f32 {
    if op == ReduceOp::Max { if a > b || a.is_nan() { a } else { b } } else { a + b }
}

/// Reduce one block: 16 lanes, then the lanes in order.
fn reduce_block(op: ReduceOp, x: Src<'_, f32>, len: usize) -> f32 {
    let x = match x {
        Src::Scalar(v) => {
            let mut a = identity(op);
            for _ in 0..len {
                a = combine(op, a, v);
            }
            return a;
        }
        Src::Slice(s) => s,
    };
    dispatch(
        #[inline(always)]
        || {
            let mut l = [identity(op); 16];
            let mut ch = x.chunks_exact(16);
            for c in &mut ch {
                for (a, &v) in l.iter_mut().zip(c) {
                    *a = combine(op, *a, v);
                }
            }
            let mut a = identity(op);
            for &v in l.iter().chain(ch.remainder()) {
                a = combine(op, a, v);
            }
            a
        },
    )
}

/// Check operand dtypes against the plan and take raw pointers to the results.
fn out_ptrs(
    k: &FusedKernel,
    ins: &[&Tensor],
    outs: &mut [Tensor],
) -> Result<smallvec::SmallVec<[(OutPtr, bool); 8]>, IrError> {
    let bad = |m: &str| IrError::Eval { op: NAME.into(), msg: m.into() };
    for v in &k.views {
        let ok = if v.is_bool {
            ins[v.input].as_slice::<bool>().is_some()
        } else {
            ins[v.input].as_slice::<f32>().is_some()
        };
        if !ok {
            return Err(bad("operand dtype differs from the plan"));
        }
    }
    let mut ptrs: smallvec::SmallVec<[(OutPtr, bool); 8]> = smallvec::SmallVec::new();
    for o in outs.iter_mut() {
        let p = match o.dtype() {
            DType::F32 => (OutPtr(o.as_mut_slice::<f32>().unwrap().as_mut_ptr() as *mut u8), false),
            DType::Bool => (OutPtr(o.as_mut_slice::<bool>().unwrap().as_mut_ptr() as *mut u8), true),
            _ => return Err(bad("result dtype differs from the plan")),
        };
        ptrs.push(p);
    }
    Ok(ptrs)
}

/// True when the kernel has no reductions (its element range can be split anywhere).
pub fn is_elementwise(k: &FusedKernel) -> bool {
    k.reds.is_empty()
}

/// True when every read of operand `input` is the whole element space, element for element
/// (so [`run_range`] can take that operand as a block holding only the range).
pub fn reads_whole(k: &FusedKernel, input: usize) -> bool {
    k.views.iter().filter(|v| v.input == input).all(|v| v.access == Access::Full && !v.is_bool)
}

/// Run an elementwise-only kernel (see [`is_elementwise`]) over elements `[start, end)` of its
/// space on the calling thread: the other elements of `outs` are left as they are. With
/// `first_is_block`, `ins[0]` holds only elements `[start, end)` (from its element 0), which
/// needs [`reads_whole`] for operand 0.
pub fn run_range(
    k: &mut FusedKernel,
    ins: &[&Tensor],
    outs: &mut [Tensor],
    (start, end): (usize, usize),
    first_is_block: bool,
) -> Result<(), IrError> {
    if !k.reds.is_empty() || start > end || end > k.n {
        return Err(IrError::Eval { op: NAME.into(), msg: "bad element range for a fused region".into() });
    }
    if first_is_block && (!reads_whole(k, 0) || ins.first().is_none_or(|x| x.numel() < end - start)) {
        return Err(IrError::Eval { op: NAME.into(), msg: "first operand is not a block of the range".into() });
    }
    let ptrs = out_ptrs(k, ins, outs)?;
    // One task's registers (`REG_STRIDE` apart, as `run_task` addresses them).
    let stride = k.regs.max(1) * REG_STRIDE;
    let op0 = first_is_block.then(|| Block0 {
        base: ins[0].as_slice::<f32>().unwrap().as_ptr(),
        shift: start,
        len: end - start,
    });
    with_scratch(stride, |scr| run_task(k, ins, &ptrs, (start, end), scr, &mut [], 1, op0));
    Ok(())
}

/// Run an elementwise-only kernel in `tasks` parallel tasks on the executor's team: task `t`
/// calls `body(t, run)`, and each `run((start, end), at)` computes elements `[start, end)` on
/// that task with operand 0 read from `first` (not from `ins[0]`): the block of
/// `end - start` floats at float offset `at` (tasks fill their blocks before each call). The
/// ranges of all tasks must be disjoint. `Ok(false)` (nothing run) when the kernel has
/// reductions or operand 0 is not read element for element ([`reads_whole`]).
///
/// # Safety
/// `first` addresses `first_len` floats; `run` reads only the block it is given, which no
/// other task writes meanwhile.
pub unsafe fn run_tasks(
    k: &mut FusedKernel,
    ins: &[&Tensor],
    outs: &mut [Tensor],
    (first, first_len): (SyncPtr<f32>, usize),
    tasks: usize,
    body: impl Fn(usize, &mut dyn FnMut((usize, usize), usize)) + Sync,
) -> Result<bool, IrError> {
    let stride = k.regs.max(1) * REG_STRIDE;
    if !k.reds.is_empty() || !reads_whole(k, 0) {
        return Ok(false);
    }
    let ptrs = out_ptrs(k, ins, outs)?;
    let (kk, ptrs, n) = (&*k, &ptrs, k.n);
    spin::for_each(tasks, |t| {
        body(t, &mut |(start, end), at| {
            assert!(start <= end && end <= n && at + (end - start) <= first_len, "fused range outside the region");
            // SAFETY: the block lies in `first` (asserted); the caller's contract.
            let base = unsafe { first.get().add(at) };
            let op0 = Some(Block0 { base, shift: start, len: end - start });
            with_scratch(stride, |scr| run_task(kk, ins, ptrs, (start, end), scr, &mut [], 1, op0));
        });
    });
    Ok(true)
}

/// Run the kernel: `ins` are the composite's operands, `outs` its results.
pub fn run(k: &mut FusedKernel, ins: &[&Tensor], outs: &mut [Tensor]) -> Result<(), IrError> {
    let ptrs = out_ptrs(k, ins, outs)?;
    let nred = k.reds.len();
    let stride = k.regs.max(1) * REG_STRIDE;
    let rows = k.n / k.row.max(1);
    let mut acc = std::mem::take(&mut k.acc);
    {
        let kk = &*k;
        let ptrs = &ptrs;
        let work = |(t, acc): (usize, &mut [f32])| {
            with_scratch(stride, |scr| run_task(kk, ins, ptrs, (kk.bounds[t], kk.bounds[t + 1]), scr, acc, rows, None));
        };
        let tasks = kk.bounds.len() - 1;
        if tasks > 1 && threads() > 1 {
            // On the executor's spinning team (a rayon hand-off wakes sleeping workers: tens
            // of µs per step on a VM, and their spinning competes with the team's).
            let (na, ap) = (nred.max(1), SyncPtr(acc.as_mut_ptr()));
            spin::for_each(tasks, |t| {
                // SAFETY: task `t` alone uses chunk `t` of the accumulators (`na` per task,
                // sized for every task).
                work((t, unsafe { ap.slice(t * na, na) }));
            });
        } else if tasks > 1 {
            acc.chunks_mut(nred.max(1)).enumerate().for_each(work);
        } else {
            work((0, &mut acc[..]));
        }
    }
    // A full reduction: combine the task partials in order.
    if rows == 1 && nred > 0 {
        for (o, kind) in k.outs.iter().enumerate() {
            if let OutKind::Reduced(r) = *kind {
                let op = k.reds[r];
                let total = (0..k.bounds.len() - 1).fold(identity(op), |a, t| combine(op, a, acc[t * nred.max(1) + r]));
                outs[o].as_mut_slice::<f32>().unwrap()[0] = total;
            }
        }
    }
    k.acc = acc;
    Ok(())
}

/// Operand 0 read from a block: element `i` of the region at `base + i - shift`, for `i` in
/// `[shift, shift + len)`.
#[derive(Clone, Copy)]
struct Block0 {
    base: *const f32,
    shift: usize,
    len: usize,
}

thread_local! {
    /// The scratch registers of the task this thread runs (`regs · REG_STRIDE` floats): one
    /// buffer per thread, grown to the largest kernel's, instead of `tasks` sets per kernel
    /// (SmolLM2's 441-token prefill graphs held 27.6 MB of them, `heaptrack`).
    static SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Run `f` on the first `len` floats of this thread's [`SCRATCH`] (every register is written
/// by an instruction before one reads it; [`super::scratch::grown`]).
fn with_scratch<R>(len: usize, f: impl FnOnce(&mut [f32]) -> R) -> R {
    SCRATCH.with_borrow_mut(|b| f(super::scratch::grown(b, len)))
}

/// Elements `[start, end)`; with `op0`, operand 0 comes from that block ([`run_range`],
/// [`run_tasks`]).
#[allow(clippy::too_many_arguments)]
fn run_task(
    k: &FusedKernel,
    ins: &[&Tensor],
    ptrs: &[(OutPtr, bool)],
    (start, end): (usize, usize),
    scr: &mut [f32],
    acc: &mut [f32],
    rows: usize,
    op0: Option<Block0>,
) {
    if let Some(b) = op0 {
        assert!(b.shift <= start && end <= b.shift + b.len, "fused range outside operand 0's block");
    }
    for (a, &op) in acc.iter_mut().zip(&k.reds) {
        *a = identity(op);
    }
    let base = scr.as_mut_ptr();
    let mut s = start;
    while s < end {
        let mut len = BLOCK.min(end - s);
        if !k.reds.is_empty() && rows > 1 {
            len = len.min((s / k.row + 1) * k.row - s);
        }
        // SAFETY: register `r` is `scr[r * REG_STRIDE..][..BLOCK]`; an instruction's destination is
        // never one of its operands (registers are freed only after their last reader), so the
        // shared and mutable views below never overlap.
        // Register `k.regs + o` is block [s, s + len) of f32 result `o` (`store_through`):
        // this task owns those elements, and results alias no operand.
        let at = |r: usize| match r.checked_sub(k.regs) {
            None => unsafe { base.add(r * REG_STRIDE) },
            Some(o) => unsafe { (ptrs[o].0.0 as *mut f32).add(s) },
        };
        let reg = |r: usize| unsafe { std::slice::from_raw_parts(at(r), len) };
        let reg_mut = |r: usize| unsafe { std::slice::from_raw_parts_mut(at(r), len) };
        prefetch_ahead(k, ins, s, end, op0.is_some());
        // Gather the views that cannot be read in place.
        for v in &k.views {
            if let Some(r) = v.reg {
                gather(v, ins[v.input], s, reg_mut(r));
            }
        }
        let src = |a: Arg| -> Src<'_, f32> {
            match a {
                Arg::Reg(r) => Src::Slice(reg(r)),
                Arg::Imm(v) => Src::Scalar(v),
                Arg::View(i) => {
                    let v = &k.views[i];
                    match (v.reg, &v.access) {
                        (Some(r), _) if !in_place(&v.access, s, len) || v.is_bool => Src::Slice(reg(r)),
                        (_, Access::Scalar) => Src::Scalar(ins[v.input].as_slice::<f32>().unwrap()[0]),
                        (_, Access::Col(c)) => Src::Scalar(ins[v.input].as_slice::<f32>().unwrap()[s / c]),
                        (_, Access::Row(r)) => Src::Slice(&ins[v.input].as_slice::<f32>().unwrap()[s % r..s % r + len]),
                        (_, _) if v.input == 0 && op0.is_some() => {
                            let b = op0.unwrap();
                            // SAFETY: elements [s, s + len) of the region lie in the block
                            // (asserted above), which the caller keeps unwritten meanwhile.
                            Src::Slice(unsafe { std::slice::from_raw_parts(b.base.add(s - b.shift), len) })
                        }
                        _ => Src::Slice(&ins[v.input].as_slice::<f32>().unwrap()[s..s + len]),
                    }
                }
            }
        };
        for ins_ in &k.prog {
            match *ins_ {
                Instr::Unary(u, x, d) => match src(x) {
                    Src::Slice(x) => unary_block(u, x, reg_mut(d)),
                    Src::Scalar(v) => {
                        let mut o = [0f32];
                        unary_block(u, &[v], &mut o);
                        reg_mut(d).fill(o[0]);
                    }
                },
                Instr::Binary(b, x, y, d) => binary_block(b, src(x), src(y), reg_mut(d)),
                Instr::Compare(c, x, y, d) => compare_block(c, src(x), src(y), reg_mut(d)),
                Instr::Select(p, x, y, d) => select_block(src(p), src(x), src(y), reg_mut(d)),
                Instr::NonZero(x, d) => {
                    let o = reg_mut(d);
                    match src(x) {
                        Src::Slice(x) => o.iter_mut().zip(x).for_each(|(o, &v)| *o = (v != 0.0) as u8 as f32),
                        Src::Scalar(v) => o.fill((v != 0.0) as u8 as f32),
                    }
                }
                Instr::Copy(x, d) => match src(x) {
                    Src::Slice(x) => reg_mut(d).copy_from_slice(x),
                    Src::Scalar(v) => reg_mut(d).fill(v),
                },
                Instr::Adam(ref a) => {
                    // Planned as full views read in place (slices) and scalars (`plan_adam`).
                    let full = a.full.map(|x| match src(x) {
                        Src::Slice(v) => v,
                        Src::Scalar(_) => &[][..],
                    });
                    let scalar = |x: Arg| match src(x) {
                        Src::Scalar(v) => v,
                        Src::Slice(v) => v[0],
                    };
                    let sc = AdamScalars { s: a.scalars.map(scalar), wd: a.wd.map(scalar) };
                    // SAFETY: this task owns elements [start, end) of every result; the three
                    // results are distinct tensors.
                    let [om, ov, op] = a
                        .outs
                        .map(|o| unsafe { std::slice::from_raw_parts_mut((ptrs[o].0.0 as *mut f32).add(s), len) });
                    dispatch(
                        #[inline(always)]
                        || fused_adam::adam_block(full, sc, om, ov, op),
                    );
                }
                #[cfg(target_arch = "x86_64")]
                Instr::Tile(ref t) => {
                    use fused_tile::{MAX_OPS, Res, TOp};
                    use std::mem::MaybeUninit;
                    // Uninitialized: filling all `MAX_OPS` entries per block was 8% of the
                    // chain's run.
                    let mut m = [const { MaybeUninit::<Res>::uninit() }; MAX_OPS];
                    assert!(t.ops.len() <= MAX_OPS, "tile program longer than planned");
                    let ptr = |a: Arg| match src(a) {
                        Src::Slice(v) => Ok(v.as_ptr()),
                        Src::Scalar(v) => Err(v),
                    };
                    for (r, op) in m.iter_mut().zip(&t.ops) {
                        r.write(match *op {
                            TOp::Load(a) => ptr(a).map_or_else(Res::LoadS, Res::LoadP),
                            TOp::Unary(u) => Res::Unary(u),
                            TOp::Binary(b, fused_tile::Opnd::Acc, _) => Res::BinAcc(b),
                            TOp::Binary(b, fused_tile::Opnd::Arg(a), rev) => match ptr(a) {
                                Ok(p) => Res::BinP(b, p, rev),
                                Err(v) => Res::BinS(b, v, rev),
                            },
                            TOp::Spill(r) => Res::Spill(at(r)),
                            TOp::Store(o) => {
                                // SAFETY: this task owns elements [start, end) of every result.
                                let p = unsafe { (ptrs[o].0.0 as *mut f32).add(s) };
                                Res::Store(p, k.stream && (p as usize).is_multiple_of(64))
                            }
                        });
                    }
                    // SAFETY: the first `t.ops.len()` (<= MAX_OPS, `fused_tile::plan`) entries
                    // are written above (`Res` is `Copy`). Planned only where AVX-512 is
                    // available; every pointer addresses `len` floats of this block (operands,
                    // this task's registers and results).
                    unsafe {
                        let m = std::slice::from_raw_parts(m.as_ptr().cast::<Res>(), t.ops.len());
                        fused_tile::run_block(m, len)
                    };
                }
                #[cfg(not(target_arch = "x86_64"))]
                Instr::Tile(_) => unreachable!("tiles are planned for AVX-512 only"),
                Instr::Reduce(op, x, r) => {
                    let p = reduce_block(op, src(x), len);
                    acc[r] = combine(op, acc[r], p);
                }
                Instr::Store(x, o) => {
                    let (p, is_bool) = ptrs[o];
                    // SAFETY: this task owns elements [start, end) of every elementwise result.
                    if is_bool {
                        let out = unsafe { std::slice::from_raw_parts_mut((p.0 as *mut bool).add(s), len) };
                        match src(x) {
                            Src::Slice(x) => out.iter_mut().zip(x).for_each(|(o, &v)| *o = v != 0.0),
                            Src::Scalar(v) => out.fill(v != 0.0),
                        }
                    } else {
                        let out = unsafe { std::slice::from_raw_parts_mut((p.0 as *mut f32).add(s), len) };
                        match src(x) {
                            // SAFETY: `best` lists only kernels the CPU runs (`stream` is set
                            // only where there is one).
                            #[cfg(target_arch = "x86_64")]
                            Src::Slice(x)
                                if k.stream
                                    && let Some(v) = super::norm_vec::RowKernels::best() =>
                            unsafe { (v.stream_copy)(x, out) },
                            Src::Slice(x) => out.copy_from_slice(x),
                            Src::Scalar(v) => out.fill(v),
                        }
                    }
                }
            }
        }
        s += len;
        // End of a reduction row: write the row's results.
        if !k.reds.is_empty() && rows > 1 && s % k.row == 0 {
            let rowi = s / k.row - 1;
            for (o, kind) in k.outs.iter().enumerate() {
                if let OutKind::Reduced(r) = *kind {
                    // SAFETY: rows are split between tasks; this task owns row `rowi`.
                    unsafe { *(ptrs[o].0.0 as *mut f32).add(rowi) = acc[r] };
                }
            }
            for (a, &op) in acc.iter_mut().zip(&k.reds) {
                *a = identity(op);
            }
        }
    }
}

/// Prefetch into L2 the block [`PREFETCH_BLOCKS`] blocks after the one at `s` (within the
/// task's range, which ends at `end`) of every large operand read in place element for element
/// (`Access::Full`; operand 0 not when it comes from a caller's block).
fn prefetch_ahead(k: &FusedKernel, ins: &[&Tensor], s: usize, end: usize, op0: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T1, _mm_prefetch};
        let from = s + PREFETCH_BLOCKS * BLOCK;
        if from >= end {
            return;
        }
        let to = (from + BLOCK).min(end);
        for v in &k.views {
            if v.access != Access::Full || v.is_bool || v.reg.is_some() || (op0 && v.input == 0) {
                continue;
            }
            let Some(x) = ins[v.input].as_slice::<f32>() else { continue };
            if x.len() * 4 < PREFETCH_MIN_BYTES || to > x.len() {
                continue;
            }
            for i in (from..to).step_by(16) {
                // SAFETY: `i < x.len()`; a prefetch changes nothing architecturally.
                unsafe { _mm_prefetch::<_MM_HINT_T1>(x.as_ptr().add(i).cast()) };
            }
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (k, ins, s, end, op0);
}

/// True when view access `a` can be read in place for elements `[s, s + len)`.
fn in_place(a: &Access, s: usize, len: usize) -> bool {
    match a {
        Access::Full | Access::Scalar => true,
        Access::Row(r) => s % r + len <= *r,
        Access::Col(c) => s / c == (s + len - 1) / c,
        Access::Strided { .. } => false,
    }
}

/// Write elements `[s, s + o.len())` of view `v` of `x` into `o` (bools as 0/1).
fn gather(v: &View, x: &Tensor, s: usize, o: &mut [f32]) {
    if !v.is_bool && in_place(&v.access, s, o.len()) {
        return;
    }
    match x.as_slice::<bool>() {
        Some(b) => gather_t(&v.access, b, s, o, |v| v as u8 as f32),
        None => gather_t(&v.access, x.as_slice::<f32>().unwrap(), s, o, |v| v),
    }
}

fn gather_t<T: Copy>(a: &Access, x: &[T], s: usize, o: &mut [f32], f: impl Fn(T) -> f32) {
    match a {
        Access::Full => o.iter_mut().zip(&x[s..]).for_each(|(o, &v)| *o = f(v)),
        Access::Scalar => o.fill(f(x[0])),
        // Runs of consecutive elements (a row piece, one column value), not an index
        // division per element.
        Access::Row(r) => {
            let (mut at, mut done) = (s % r, 0);
            while done < o.len() {
                let len = (r - at).min(o.len() - done);
                o[done..done + len].iter_mut().zip(&x[at..at + len]).for_each(|(o, &v)| *o = f(v));
                (at, done) = (0, done + len);
            }
        }
        Access::Col(c) => {
            let (mut i, mut done) = (s, 0);
            while done < o.len() {
                let len = (c - i % c).min(o.len() - done);
                o[done..done + len].fill(f(x[i / c]));
                (i, done) = (i + len, done + len);
            }
        }
        Access::Strided { dims, strides } => {
            // Odometer over the output index, starting at `s`.
            let mut idx: smallvec::SmallVec<[usize; 8]> = smallvec::SmallVec::from_elem(0, dims.len());
            let mut rem = s;
            for d in (0..dims.len()).rev() {
                idx[d] = rem % dims[d];
                rem /= dims[d];
            }
            let mut off: usize = idx.iter().zip(strides).map(|(i, s)| i * s).sum();
            for o in o.iter_mut() {
                *o = f(x[off]);
                for d in (0..dims.len()).rev() {
                    idx[d] += 1;
                    off += strides[d];
                    if idx[d] < dims[d] {
                        break;
                    }
                    off -= strides[d] * dims[d];
                    idx[d] = 0;
                }
            }
        }
    }
}

fn compare_block(c: CompareOp, x: Src<'_, f32>, y: Src<'_, f32>, o: &mut [f32]) {
    use super::elementwise::zip2;
    let m = |b: bool| b as u8 as f32;
    dispatch(
        #[inline(always)]
        || match c {
            CompareOp::Eq => zip2(x, y, o, |a, b| m(a == b)),
            CompareOp::Ne => zip2(x, y, o, |a, b| m(a != b)),
            CompareOp::Lt => zip2(x, y, o, |a, b| m(a < b)),
            CompareOp::Le => zip2(x, y, o, |a, b| m(a <= b)),
            CompareOp::Gt => zip2(x, y, o, |a, b| m(a > b)),
            CompareOp::Ge => zip2(x, y, o, |a, b| m(a >= b)),
        },
    )
}

fn select_block(p: Src<'_, f32>, x: Src<'_, f32>, y: Src<'_, f32>, o: &mut [f32]) {
    match p {
        Src::Scalar(c) => {
            let v = if c != 0.0 { x } else { y };
            match v {
                Src::Slice(s) => o.copy_from_slice(s),
                Src::Scalar(v) => o.fill(v),
            }
        }
        // One monomorphized loop per operand shape, so each compiles to a compare and a blend
        // (a per-element `match` on the operand kind kept this loop scalar).
        Src::Slice(p) => dispatch(
            #[inline(always)]
            || {
                let pick = |c: f32, a: f32, b: f32| if c != 0.0 { a } else { b };
                match (x, y) {
                    (Src::Slice(x), Src::Slice(y)) => {
                        for (((o, &c), &a), &b) in o.iter_mut().zip(p).zip(x).zip(y) {
                            *o = pick(c, a, b);
                        }
                    }
                    (Src::Slice(x), Src::Scalar(b)) => {
                        o.iter_mut().zip(p).zip(x).for_each(|((o, &c), &a)| *o = pick(c, a, b))
                    }
                    (Src::Scalar(a), Src::Slice(y)) => {
                        o.iter_mut().zip(p).zip(y).for_each(|((o, &c), &b)| *o = pick(c, a, b))
                    }
                    (Src::Scalar(a), Src::Scalar(b)) => o.iter_mut().zip(p).for_each(|(o, &c)| *o = pick(c, a, b)),
                }
            },
        ),
    }
}
