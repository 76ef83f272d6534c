//! Matmul epilogues: runs a `dot_epilogue` composite (built by
//! `rlx_compile::passes::epilogue`: a `dot_general` followed by the elementwise region that
//! alone reads it, e.g. bias add, activation, residual add) as one step.
//!
//! The product runs on [`super::dot`] into a scratch buffer planned at compile time, and the
//! region on [`super::fused`] with that buffer as its first operand. On one thread, with a
//! single-batch product on our [`sgemm`], both go block by block: each of sgemm's row blocks
//! (at most [`sgemm::MC`] rows) is
//! computed into the start of the product buffer (the same L2-resident lines for every block,
//! when the region reads the product element for element) and then immediately read by the
//! region while it is still in cache. On several threads with a rhs packed at compile time
//! and a row block per thread, each thread does the same over its own contiguous rows, in its
//! own part of the buffer. Otherwise (batches, a GEMV, a rhs packed per run on several
//! threads, the `gemm` crate's products on CPUs without AVX-512) the whole product runs first,
//! then the whole region, each parallel: the `gemm` crate packs the rhs again for every call,
//! so row blocks cost one packing each (MiniLM's FFN-up on Zen 3, 128 × 384 × 1536 with the
//! exact GELU, 1 thread: 3.59–3.66 → 3.02–3.03 ms). Results equal the unfused steps' within the f32 rounding of
//! a `K`-term sum (`gemm` may block a row block's sums differently from the whole product's);
//! the region computes exactly what the unfused elementwise kernels compute.

use super::dot::{self, DotKernel, Path};
use super::fused::{self, FusedKernel};
use super::sgemm;
use super::simd::threads;
use super::spin::SyncPtr;
use rlx_ir::ops::Composite;
use rlx_ir::{DType, Graph, IrError, Node, NodeId, Op, Tensor};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Name of the composite this kernel runs.
pub const NAME: &str = "dot_epilogue";

/// A planned product plus its epilogue region.
#[derive(Clone, Debug)]
pub struct EpilogueKernel {
    dot: DotKernel,
    region: FusedKernel,
    /// Dims of the product (f32), computed into the calling thread's [`ACC`].
    pdims: Vec<usize>,
    /// Both operands are f32 (else the product runs whole, on [`dot::run`], which widens).
    f32_operands: bool,
}

thread_local! {
    /// The product buffer of the epilogue kernels run on this thread, grown to the largest:
    /// one per kernel took 35 MB in SmolLM2 generation after a 400-token prompt (`heaptrack`),
    /// and allocated at compile time, a seventh of a 24-layer encoder's compile-cache hit went
    /// to zeroing them. Each run writes the product before reading it.
    static ACC: std::cell::RefCell<Tensor> = std::cell::RefCell::new(Tensor::zeros(&[0], DType::F32));
}

impl EpilogueKernel {
    /// The packing of the product's constant rhs ([`DotKernel::constant_pack`]).
    pub(crate) fn constant_pack(&mut self) -> Option<&mut super::sgemm::PackedB> {
        self.dot.constant_pack()
    }

    /// Pack the product's rhs, a graph constant, once now ([`DotKernel::prepack_rhs`]).
    pub fn prepack_rhs(&mut self, rhs: &Tensor) {
        self.dot.prepack_rhs(rhs);
    }

    /// Name for reports.
    pub fn name(&self) -> &'static str {
        match self.dot.path {
            Path::Gemm => "gemm_epilogue_f32",
            Path::Gemv(_) if self.dot.reads_f16_rhs() => "gemv_f16_epilogue_f32",
            Path::Gemv(_) => "gemv_epilogue_f32",
        }
    }
}

/// Plan the kernel for composite `c` on operands `ins` (`lhs, rhs, region operands…`) giving
/// `outs`; `None` when the body is not one f32 `dot_general` (of f32 operands, or of f16 /
/// bf16 ones the body widens: `rlx_compile::passes::upcast`) followed by a region the fused
/// kernel covers without reductions (the caller then evaluates the body).
pub fn select(c: &Composite, ins: &[(Vec<usize>, DType)], outs: &[(Vec<usize>, DType)]) -> Option<EpilogueKernel> {
    let body = &*c.body;
    let nodes = body.nodes();
    let (d, dg) = dot::body_product(body)?;
    let dn = &nodes[d];
    let pdims = dn.ty().static_dims()?;
    // The operands: f32, or narrow ones that the body widens (`upcast` pass).
    let narrow = |k: usize| nodes[dn.inputs[k].index()].inputs.first() == Some(&body.inputs()[k]);
    let (lhs_f32, rhs_f32) = (ins.first()?.1 == DType::F32, ins.get(1)?.1 == DType::F32);
    if body.inputs().len() != ins.len()
        || dn.ty().dtype != DType::F32
        || !(lhs_f32 || narrow(0))
        || !(rhs_f32 || narrow(1))
        || body.outputs().contains(&NodeId(d as u32))
    {
        return None;
    }
    let dotk = dot::select(dg, (&ins[0].0, ins[0].1), (&ins[1].0, ins[1].1), (&pdims, DType::F32))?;
    if dotk.compute != DType::F32 {
        return None;
    }
    // The region: the body with the product as its first input (the operands' converts are
    // the product's).
    let mut rb = Graph::new(fused::NAME);
    let mut map: Vec<NodeId> = vec![NodeId(0); nodes.len()];
    map[d] = rb.input("acc", dn.ty().clone());
    for (k, &x) in body.inputs().iter().enumerate().skip(2) {
        map[x.index()] = rb.input(&format!("arg{k}"), body.shape(x).clone());
    }
    for (i, n) in nodes.iter().enumerate() {
        if i == d || matches!(n.op, Op::Input { .. }) || dn.inputs.contains(&NodeId(i as u32)) {
            continue;
        }
        let inputs = n.inputs.iter().map(|x| map[x.index()]).collect();
        map[i] = rb.push_node(Node { op: n.op.clone(), inputs, outputs: n.outputs.clone() });
    }
    rb.set_outputs(body.outputs().iter().map(|o| map[o.index()]).collect());
    let mut rins = vec![(pdims.clone(), DType::F32)];
    rins.extend(ins[2..].iter().cloned());
    let rc = Composite { name: fused::NAME.into(), attrs: Default::default(), body: Box::new(rb) };
    let region = fused::select(&rc, &rins, outs)?;
    if !fused::is_elementwise(&region) {
        return None;
    }
    Some(EpilogueKernel { dot: dotk, region, pdims, f32_operands: lhs_f32 && rhs_f32 })
}

/// Run the kernel: `ins` are the composite's operands, `outs` its results.
pub fn run(k: &mut EpilogueKernel, ins: &[&Tensor], outs: &mut [Tensor]) -> Result<(), IrError> {
    if ins.len() < 2 {
        return Err(IrError::Eval { op: NAME.into(), msg: "needs lhs and rhs".into() });
    }
    // Taken out for the run (a nested run on this thread would take an empty one), then put
    // back.
    let mut acc = ACC.with(|a| std::mem::replace(&mut *a.borrow_mut(), Tensor::zeros(&[0], DType::F32)));
    let numel = k.pdims.iter().product();
    if !acc.can_hold(DType::F32, numel, k.pdims.len()) {
        acc = Tensor::with_capacity(DType::F32, numel, k.pdims.len());
    }
    acc.set_dims(&k.pdims);
    // The product is written before it is read (`scratch`'s contract; NaN would show).
    super::scratch::poison(acc.as_mut_slice::<f32>().expect("ACC is f32"));
    let res = run_with(k, ins, outs, &mut acc);
    ACC.with(|a| *a.borrow_mut() = acc);
    res
}

fn run_with(k: &mut EpilogueKernel, ins: &[&Tensor], outs: &mut [Tensor], acc: &mut Tensor) -> Result<(), IrError> {
    let (batch, m, n) = (k.dot.plan.batch, k.dot.plan.m, k.dot.plan.n);
    let blocked = threads() == 1 && batch == 1 && k.f32_operands && dot::on_sgemm(&k.dot);
    if !blocked && k.f32_operands && run_blocks_in_parallel(k, ins, outs, acc)? {
        return Ok(());
    }
    if !blocked {
        dot::run(&mut k.dot, ins[0], ins[1], acc)?;
        return fused::run(&mut k.region, &region_ins(acc, ins), outs);
    }
    let bad = || IrError::Eval { op: NAME.into(), msg: "operand dtype differs from the plan".into() };
    let (a, b) = (ins[0].as_slice::<f32>().ok_or_else(bad)?, ins[1].as_slice::<f32>().ok_or_else(bad)?);
    // sgemm's own row blocks (at most MC rows, split evenly, whole micro-kernel tiles): every
    // block streams all of the packed rhs, so smaller blocks would read it from memory again
    // (MiniLM's FFN-up rhs is 2.4 MB: 48-row blocks read it three times).
    let rows = m.div_ceil(m.div_ceil(sgemm::MC).max(1)).next_multiple_of(sgemm::MR);
    // Every block goes to the start of `acc`, which stays in L2 from block to block (a fresh
    // block of a whole-size product costs a read-for-ownership of every line it writes), when
    // the region reads the product element for element.
    let reuse = fused::reads_whole(&k.region, 0);
    let mut r0 = 0;
    while r0 < m {
        let r1 = (r0 + rows).min(m);
        let at = if reuse { 0 } else { r0 * n };
        dot::rows_f32(&mut k.dot, a, b, &mut acc.as_mut_slice::<f32>().ok_or_else(bad)?[at..], r0, r1)?;
        fused::run_range(&mut k.region, &region_ins(acc, ins), outs, (r0 * n, r1 * n), reuse)?;
        r0 = r1;
    }
    Ok(())
}

/// Several threads, a product with a rhs packed at compile time and at least one [`sgemm`]
/// row block per thread: one task per thread, each claiming row blocks from a shared counter
/// and going block by block as one thread does (product block into that task's own part of
/// `acc`, then the region on it, still in that core's L2). Claiming rather than a fixed half
/// per thread keeps both cores busy when one runs slower (another process, or a VM whose
/// vCPUs change speed: `perf` of MiniLM-L6 b32 t2 showed one thread 45% longer in sgemm on the
/// same rows). `Ok(false)`: not applicable ([`fused::run_tasks`]'s conditions included),
/// nothing run.
fn run_blocks_in_parallel(
    k: &mut EpilogueKernel,
    ins: &[&Tensor],
    outs: &mut [Tensor],
    acc: &mut Tensor,
) -> Result<bool, IrError> {
    let (t, m, n) = (threads(), k.dot.plan.m, k.dot.plan.n);
    if t < 2 || !dot::is_prepacked(&k.dot) || m.div_ceil(sgemm::MC) < t {
        return Ok(false);
    }
    let bad = |what: &str| IrError::Eval { op: NAME.into(), msg: format!("{what} is not f32") };
    let a = ins[0].as_slice::<f32>().ok_or_else(|| bad("lhs"))?;
    // Blocks of at most MC rows, whole micro-kernel tiles, at least two per thread; each task's
    // part of `acc` holds one block.
    let blocks = m.div_ceil(sgemm::MC).max(2 * t);
    let rows = m.div_ceil(blocks).next_multiple_of(sgemm::MR);
    if t * rows > m {
        return Ok(false);
    }
    let accp = SyncPtr(acc.as_mut_slice::<f32>().ok_or_else(|| bad("the product buffer"))?.as_mut_ptr());
    let (failed, next) = (AtomicBool::new(false), AtomicUsize::new(0));
    let dotk = &k.dot;
    let body = |task: usize, run: &mut dyn FnMut((usize, usize), usize)| loop {
        let r0 = next.fetch_add(1, Ordering::Relaxed) * rows;
        if r0 >= m {
            return;
        }
        let r1 = (r0 + rows).min(m);
        // SAFETY: task `task` alone uses rows task·rows .. (task + 1)·rows of `acc` (inside the
        // m · n buffer: t · rows ≤ m), and a block holds at most `rows` rows.
        let ok = unsafe { dot::prepacked_rows(dotk, a, accp.get().add(task * rows * n), r0, r1) }.is_ok();
        if !ok {
            failed.store(true, Ordering::Relaxed);
            return;
        }
        run((r0 * n, r1 * n), task * rows * n);
    };
    // SAFETY: `acc` holds m · n floats; each task writes and reads only its own part of it.
    let ran = unsafe { fused::run_tasks(&mut k.region, &region_ins(acc, ins), outs, (accp, m * n), t, body)? };
    if failed.into_inner() {
        return Err(IrError::Eval { op: NAME.into(), msg: "row block does not fit the plan".into() });
    }
    Ok(ran)
}

/// The region's operands: the product, then the composite's operands after lhs and rhs (on the
/// stack: `run` allocates nothing).
fn region_ins<'a>(acc: &'a Tensor, ins: &[&'a Tensor]) -> smallvec::SmallVec<[&'a Tensor; 8]> {
    std::iter::once(acc).chain(ins[2..].iter().copied()).collect()
}
