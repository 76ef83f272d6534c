//! Fast `dot_general` for float operands: every layout that is a (batched) matrix product
//! without copying runs with explicit strides — single f32 products on AVX-512 CPUs on our
//! [`super::sgemm`] (a rhs that changes per run up to `SGEMM_PER_RUN_MAX` elements), the
//! rest (f64, batches, large per-run products, other CPUs) on the `gemm` crate; matrix-vector
//! products (`M == 1` or `N == 1`) run on our own bandwidth-oriented GEMV ([`super::gemv`]).
//!
//! Planning (at compile time): the lhs is viewed as `[B, M, K]` and the rhs as `[B, K, N]`,
//! where `B` collects the batch dims (each batch's offsets are precomputed, so batch dims may
//! be laid out anyhow), `M`/`N` the free dims in order and `K` the contracting dims in their
//! paired order. `M`, `N` and `K` must each collapse to one stride (their dims, minus size-1
//! dims, consecutive in memory in that order); transposed operands are just other strides.
//! Other layouts run the reference evaluation. The result `[batch…, lhs free…, rhs free…]` is
//! row-major `[B, M, N]`.
//!
//! Dtypes: f32 and f64 compute natively; an f16 rhs that is a GEMV's matrix is read as it is
//! (widened in registers, see [`super::gemv::MatElem`]); other f16/bf16 operands are widened
//! into the calling thread's scratch buffers ([`WIDE`]) at run time, and a result dtype other than the compute dtype
//! (`preferred_element_type`) is rounded from a scratch result. The compute dtype is f64 when
//! an operand or the result is f64, else f32. Results equal the reference (f64 accumulation)
//! within the compute dtype's rounding for a `K`-term sum.

use super::elementwise::convert_into;
use super::gemv::{self, Gemv};
use super::sgemm::{self, Operand, PackedB};
use super::simd::threads;
use super::spin;
use rlx_ir::ops::{Composite, DotGeneral};
use rlx_ir::{DType, Graph, IrError, NodeId, Op, Tensor, strides_of};

/// Multiply-adds per product below which `gemm` runs on one thread.
const GEMM_PAR_MACS: usize = 1 << 20;
/// Largest rhs (elements) that [`sgemm`] packs on every run: up to 4 MB it beat the `gemm`
/// crate on this machine (784×256×512 and 256×512×512 products of an MLP step, every operand
/// layout); a 2048 × 2048 rhs ran 20–25% slower than the `gemm` crate (bench/RESULTS.md,
/// session 6), so larger per-run products stay there. Constant rhs are packed at compile time
/// whatever their size.
const SGEMM_PER_RUN_MAX: usize = 1 << 20;
/// Total multiply-adds of a batch of small products below which it runs on one thread.
const BATCH_PAR_MACS: usize = 1 << 15;

/// Shape and strides of a (batched) matrix product, in elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DotPlan {
    /// Batch count (product of batch dims).
    pub batch: usize,
    /// Rows of the result (product of lhs free dims).
    pub m: usize,
    /// Columns of the result (product of rhs free dims).
    pub n: usize,
    /// Contraction length (product of contracting dims).
    pub k: usize,
    /// lhs stride between rows (`M`) and along `K`.
    pub lhs_ms: usize,
    /// lhs stride along `K`.
    pub lhs_ks: usize,
    /// rhs stride along `K`.
    pub rhs_ks: usize,
    /// rhs stride between columns (`N`).
    pub rhs_ns: usize,
    /// Element offsets of each batch into (lhs, rhs).
    pub batch_offs: Vec<(usize, usize)>,
    /// Element counts of (lhs, rhs), checked at run time.
    pub numel: (usize, usize),
}

/// Size and single stride of a group of axes read in `axes` order, if they collapse.
fn collapse(dims: &[usize], strides: &[usize], axes: &[usize]) -> Option<(usize, usize)> {
    let size: usize = axes.iter().map(|&a| dims[a]).product();
    if size == 0 {
        return Some((0, 1));
    }
    let live: Vec<usize> = axes.iter().copied().filter(|&a| dims[a] != 1).collect();
    for w in live.windows(2) {
        if strides[w[0]] != strides[w[1]] * dims[w[1]] {
            return None;
        }
    }
    Some((size, live.last().map_or(1, |&a| strides[a])))
}

/// Plan `dot_general` of row-major operands with dims `l` and `r`; `None` when a group of
/// axes does not collapse to one stride.
pub fn plan(d: &DotGeneral, l: &[usize], r: &[usize]) -> Option<DotPlan> {
    let (ls, rs) = (strides_of(l), strides_of(r));
    let free = |rank: usize, c: &[usize], b: &[usize]| -> Vec<usize> {
        (0..rank).filter(|a| !c.contains(a) && !b.contains(a)).collect()
    };
    let lf = free(l.len(), &d.lhs_contracting, &d.lhs_batch);
    let rf = free(r.len(), &d.rhs_contracting, &d.rhs_batch);
    let (m, lhs_ms) = collapse(l, &ls, &lf)?;
    let (n, rhs_ns) = collapse(r, &rs, &rf)?;
    let (k, lhs_ks) = collapse(l, &ls, &d.lhs_contracting)?;
    let (k2, rhs_ks) = collapse(r, &rs, &d.rhs_contracting)?;
    if k != k2 || d.lhs_batch.len() != d.rhs_batch.len() {
        return None;
    }
    let bdims: Vec<usize> = d.lhs_batch.iter().map(|&a| l[a]).collect();
    let batch: usize = bdims.iter().product();
    let mut batch_offs = Vec::with_capacity(batch);
    let mut idx = vec![0usize; bdims.len()];
    for _ in 0..batch {
        let lo = idx.iter().zip(&d.lhs_batch).map(|(i, &a)| i * ls[a]).sum();
        let ro = idx.iter().zip(&d.rhs_batch).map(|(i, &a)| i * rs[a]).sum();
        batch_offs.push((lo, ro));
        for ax in (0..idx.len()).rev() {
            idx[ax] += 1;
            if idx[ax] < bdims[ax] {
                break;
            }
            idx[ax] = 0;
        }
    }
    let numel = (l.iter().product(), r.iter().product());
    Some(DotPlan { batch, m, n, k, lhs_ms, lhs_ks, rhs_ks, rhs_ns, batch_offs, numel })
}

/// How the products are computed.
#[derive(Clone, Debug)]
pub enum Path {
    /// `gemm::gemm` per batch.
    Gemm,
    /// Our matrix-vector kernel per batch.
    Gemv(Gemv),
}

/// A planned `dot_general` with its scratch buffers.
#[derive(Clone, Debug)]
pub struct DotKernel {
    /// Shapes and strides.
    pub plan: DotPlan,
    /// The product kernel.
    pub path: Path,
    /// Compute dtype (F32 or F64).
    pub compute: DType,
    /// Operands widened to `compute` (their dtype differs) into the thread's [`WIDE`] buffers.
    widen_in: [bool; 2],
    /// The rhs is an f16 matrix that the GEMV reads directly (not widened).
    rhs_f16: bool,
    /// Result in `compute` when the result dtype differs.
    scratch_out: Option<Tensor>,
    /// The rhs packed for [`sgemm`] once, at compile time, when it is a graph constant
    /// ([`DotKernel::prepack_rhs`]; `prepacked`).
    packed: Option<PackedB>,
    /// `packed` holds a graph constant's packing ([`DotKernel::prepack_rhs`]).
    prepacked: bool,
    /// Without a constant rhs the product runs on [`sgemm`] too, packing the rhs on every run,
    /// panel by panel during the product, into the calling thread's [`PER_RUN`] storage (`k ·
    /// n` up to [`SGEMM_PER_RUN_MAX`]); else it runs on `gemm`.
    per_run: bool,
    /// [`sgemm`] can run this product (single-batch f32 on an AVX-512 CPU).
    sgemm_ok: bool,
}

impl DotKernel {
    /// Pack `rhs`, a graph constant, once now and run the product on [`sgemm`] (as ONNX
    /// Runtime's MLAS pre-packs constant weights). A no-op unless [`sgemm`] can run the product
    /// and `rhs` is the f32 operand the plan expects.
    pub fn prepack_rhs(&mut self, rhs: &Tensor) {
        let Some(b) = rhs.as_slice::<f32>() else { return };
        if !self.sgemm_ok || b.len() != self.plan.numel.1 {
            return;
        }
        let (p, ro) = (&self.plan, self.plan.batch_offs[0].1);
        let bp = self.packed.get_or_insert_with(|| PackedB::new(p.k, p.n));
        // SAFETY: the plan's strides address only elements inside `b` (size checked above).
        unsafe { sgemm::pack_b(Operand { ptr: b[ro..].as_ptr(), rs: p.rhs_ks, cs: p.rhs_ns }, bp) };
        self.prepacked = true;
    }

    /// The packing of a constant rhs ([`DotKernel::prepack_rhs`]), for
    /// [`sgemm::share_constants`].
    pub(crate) fn constant_pack(&mut self) -> Option<&mut PackedB> {
        self.packed.as_mut().filter(|_| self.prepacked)
    }

    /// The rhs is an f16 matrix read directly by the GEMV.
    pub fn reads_f16_rhs(&self) -> bool {
        self.rhs_f16
    }

    /// Name for reports.
    pub fn name(&self) -> &'static str {
        match self.path {
            Path::Gemm => "gemm",
            Path::Gemv(_) if self.rhs_f16 => "gemv_f16",
            Path::Gemv(_) => "gemv",
        }
    }
}

thread_local! {
    /// The calling thread's storage for rhs packed per run ([`DotKernel`]'s `per_run`): one
    /// buffer per thread, grown to its largest product, not one per kernel — a 24-layer
    /// encoder whose weights are params held 170 MB of them, zeroed at every compile.
    static PER_RUN: std::cell::RefCell<PackedB> = std::cell::RefCell::new(PackedB::default());
}

/// `f` on the thread's [`PER_RUN`] storage fitted to a `k × n` rhs; `None` (`f` not run) while
/// that storage is in use on this thread. With `packs` (`f` packs the rhs before reading it)
/// debug builds poison the storage first; later row blocks of one product (`packs` false) read
/// what its first block packed.
fn with_per_run<R>(k: usize, n: usize, packs: bool, f: impl FnOnce(&mut PackedB) -> R) -> Option<R> {
    PER_RUN.with(|s| {
        let mut bp = s.try_borrow_mut().ok()?;
        bp.fit(k, n);
        if packs {
            bp.poison_in_debug();
        }
        Some(f(&mut bp))
    })
}

/// Pick a fast kernel for `dot_general` with operand dtypes/dims and result dtype/dims.
pub fn select(d: &DotGeneral, l: (&[usize], DType), r: (&[usize], DType), out: (&[usize], DType)) -> Option<DotKernel> {
    if !(l.1.is_float() && r.1.is_float() && out.1.is_float()) {
        return None;
    }
    let plan = plan(d, l.0, r.0)?;
    let compute = if [l.1, r.1, out.1].contains(&DType::F64) { DType::F64 } else { DType::F32 };
    let path = match (compute, gemv::plan(&plan)) {
        (DType::F32, Some(g)) => Path::Gemv(g),
        _ => Path::Gemm,
    };
    let scratch = |dims: &[usize], dt: DType| (dt != compute).then(|| Tensor::zeros(dims, compute));
    let rhs_f16 = r.1 == DType::F16
        && l.1 == DType::F32
        && matches!(path, Path::Gemv(Gemv::Axpy { mat_is_lhs: false, .. } | Gemv::Dot { mat_is_lhs: false, .. }));
    let sgemm_ok = compute == DType::F32 && matches!(path, Path::Gemm) && plan.batch == 1 && sgemm::available();
    Some(DotKernel {
        packed: None,
        prepacked: false,
        per_run: sgemm_ok && plan.k * plan.n <= SGEMM_PER_RUN_MAX,
        sgemm_ok,
        widen_in: [l.1 != compute, r.1 != compute && !rhs_f16],
        rhs_f16,
        scratch_out: scratch(out.0, out.1),
        plan,
        path,
        compute,
    })
}

/// The `dot_general` of a product composite's body (`dot_general_upcast`, `dot_epilogue`):
/// the one node that reads body inputs 0 and 1 as its lhs and rhs, each directly or through a
/// `convert_element_type` to f32 (the `upcast` pass's), with nothing else reading the inputs or
/// the converts. `None` for any other body.
pub fn body_product(body: &Graph) -> Option<(usize, &DotGeneral)> {
    let nodes = body.nodes();
    let dots: Vec<usize> = (0..nodes.len()).filter(|&i| matches!(nodes[i].op, Op::DotGeneral(_))).collect();
    let ([d], [lhs, rhs, ..]) = (dots.as_slice(), body.inputs()) else { return None };
    let Op::DotGeneral(dg) = &nodes[*d].op else { return None };
    let reads = |x: NodeId| {
        nodes.iter().filter(|n| n.inputs.contains(&x)).count() + body.outputs().iter().filter(|&&o| o == x).count()
    };
    let operand = |x: NodeId, input: NodeId| {
        let widened =
            matches!(nodes[x.index()].op, Op::ConvertElementType(DType::F32)) && nodes[x.index()].inputs == [input];
        (x == input || widened) && reads(x) == 1 && reads(input) == 1
    };
    let dn = &nodes[*d];
    let ok = dn.inputs.len() == 2 && operand(dn.inputs[0], *lhs) && operand(dn.inputs[1], *rhs);
    ok.then_some((*d, dg))
}

/// Plan a `dot_general_upcast` composite (`rlx_compile::passes::upcast`): its body's product on
/// the narrow operands `ins` (an f16 GEMV matrix read directly, others widened into scratch).
/// `None` when the body is not [`body_product`]'s form with the product as its one result.
pub fn select_upcast(c: &Composite, ins: &[(Vec<usize>, DType)], outs: &[(Vec<usize>, DType)]) -> Option<DotKernel> {
    let (d, dg) = body_product(&c.body)?;
    let ([l, r], [o], true) = (ins, outs, c.body.outputs() == [NodeId(d as u32)]) else { return None };
    select(dg, (&l.0, l.1), (&r.0, r.1), (&o.0, o.1))
}

thread_local! {
    /// The calling thread's buffers for operands widened to the compute dtype ([`DotKernel`]'s
    /// `widen_in`), grown to the largest: one pair per kernel, allocated at compile time, held
    /// the widened f16 KV cache of every attention product of every prefill graph (`rlx
    /// generate --kv-type f16`, 517-token prompt: 275 MB peak RSS against 254 with f32).
    static WIDE: std::cell::RefCell<[Option<Tensor>; 2]> = const { std::cell::RefCell::new([None, None]) };
}

/// Execute into the preallocated `out`.
pub fn run(k: &mut DotKernel, lhs: &Tensor, rhs: &Tensor, out: &mut Tensor) -> Result<(), IrError> {
    let p = &k.plan;
    if (lhs.numel(), rhs.numel()) != p.numel || out.numel() != p.batch * p.m * p.n {
        return Err(IrError::Eval { op: "dot_general".into(), msg: "operand sizes differ from the plan".into() });
    }
    if k.widen_in == [false, false] {
        return product(k, lhs, rhs, out);
    }
    // Taken out for the run (a nested run on this thread would find none and allocate), then
    // put back.
    let mut wide = WIDE.with(|w| std::mem::take(&mut *w.borrow_mut()));
    let [w0, w1] = &mut wide;
    let lhs = if k.widen_in[0] { widen(lhs, w0, k.compute) } else { lhs };
    let rhs = if k.widen_in[1] { widen(rhs, w1, k.compute) } else { rhs };
    let res = product(k, lhs, rhs, out);
    WIDE.with(|w| *w.borrow_mut() = wide);
    res
}

/// [`run`] on operands in the compute dtype (an f16 GEMV rhs aside).
fn product(k: &mut DotKernel, lhs: &Tensor, rhs: &Tensor, out: &mut Tensor) -> Result<(), IrError> {
    let p = &k.plan;
    let res = match &mut k.scratch_out {
        Some(s) => s,
        None => &mut *out,
    };
    match k.compute {
        DType::F32 if k.rhs_f16 => {
            let b = rhs.as_slice::<rlx_ir::half::f16>().ok_or_else(|| IrError::Eval {
                op: "dot_general".into(),
                msg: format!("rhs is {}, planned as f16", rhs.dtype()),
            })?;
            let (a, c) = (lhs.as_slice::<f32>().unwrap(), res.as_mut_slice::<f32>().unwrap());
            let Path::Gemv(g) = &k.path else { unreachable!("rhs_f16 is planned for a GEMV only") };
            gemv::run(g, p, a, b, c);
        }
        DType::F32 => {
            let (a, b) = (lhs.as_slice::<f32>().unwrap(), rhs.as_slice::<f32>().unwrap());
            let c = res.as_mut_slice::<f32>().unwrap();
            match (&k.path, &k.packed) {
                (Path::Gemv(g), _) => gemv::run(g, p, a, b, c),
                // SAFETY (both arms): the plan's strides address only elements inside `a` and
                // `b` (sizes checked above), `c` holds m · n, `bp` holds the k × n rhs packed
                // (prepacked) or is sized for it (per run).
                (Path::Gemm, Some(bp)) if k.prepacked => unsafe {
                    sgemm::matmul(p.m, lhs_operand(p, a), bp, c.as_mut_ptr(), p.n)
                },
                (Path::Gemm, _) if k.per_run => {
                    let (lhs, rhs, c) = (lhs_operand(p, a), rhs_operand(p, b), c.as_mut_ptr());
                    let product = |bp: &mut PackedB| unsafe { sgemm::matmul_packing(p.m, lhs, rhs, bp, c, p.n) };
                    // The whole product packs and reads within this call: any storage will do.
                    with_per_run(p.k, p.n, true, product).unwrap_or_else(|| product(&mut PackedB::new(p.k, p.n)))
                }
                (Path::Gemm, _) => gemm_all(p, a, b, c),
            }
        }
        _ => {
            let (a, b) = (lhs.as_slice::<f64>().unwrap(), rhs.as_slice::<f64>().unwrap());
            gemm_all(p, a, b, res.as_mut_slice::<f64>().unwrap());
        }
    }
    if let Some(s) = &k.scratch_out {
        convert_into(s, out);
    }
    Ok(())
}

/// `x` converted to `dtype` in `s` (grown when short).
fn widen<'a>(x: &Tensor, s: &'a mut Option<Tensor>, dtype: DType) -> &'a Tensor {
    let (n, rank) = (x.numel(), x.shape().len());
    let s = s.get_or_insert_with(|| Tensor::with_capacity(dtype, n, rank));
    if !s.can_hold(dtype, n, rank) {
        *s = Tensor::with_capacity(dtype, n, rank);
    }
    s.set_dims(x.shape());
    convert_into(x, s);
    s
}

/// Element types `gemm` computes in here.
trait Num: Copy + Send + Sync + 'static {
    const ZERO: Self;
    const ONE: Self;
}
impl Num for f32 {
    const ZERO: f32 = 0.0;
    const ONE: f32 = 1.0;
}
impl Num for f64 {
    const ZERO: f64 = 0.0;
    const ONE: f64 = 1.0;
}

fn gemm_all<T: Num>(p: &DotPlan, a: &[T], b: &[T], c: &mut [T]) {
    let (m, n, k) = (p.m, p.n, p.k);
    if c.is_empty() {
        return;
    }
    if k == 0 {
        c.fill(T::ZERO);
        return;
    }
    let t = threads();
    let macs = m * n * k;
    let one = |bi: usize, c: &mut [T], par: gemm::Parallelism| {
        let (lo, ro) = p.batch_offs[bi];
        // SAFETY: the plan's strides and offsets address only elements inside `a` and `b`
        // (sizes checked against the plan by the caller), and `c` holds exactly m * n.
        unsafe {
            gemm::gemm(
                m,
                n,
                k,
                c.as_mut_ptr(),
                1,
                n as isize,
                false,
                a.as_ptr().add(lo),
                p.lhs_ks as isize,
                p.lhs_ms as isize,
                b.as_ptr().add(ro),
                p.rhs_ns as isize,
                p.rhs_ks as isize,
                T::ZERO,
                T::ONE,
                false,
                false,
                false,
                par,
            )
        }
    };
    if t > 1 && p.batch >= t && p.batch * macs >= BATCH_PAR_MACS {
        // At least one product per thread: one thread each (on the executor's spinning team:
        // attention in a decode step is a few tiny products per layer, too short for a rayon
        // wake-up; in a prefill step, products of a few M multiply-adds that `gemm`'s own
        // rayon split ran no faster on 2 threads than on 1).
        spin::for_chunks_mut(c, m * n, |bi, cb| one(bi, cb, gemm::Parallelism::None));
    } else {
        let par = if t > 1 && macs >= GEMM_PAR_MACS { gemm::Parallelism::Rayon(t) } else { gemm::Parallelism::None };
        for (bi, cb) in c.chunks_mut(m * n).enumerate() {
            one(bi, cb, par);
        }
    }
}

/// True when the product runs on [`sgemm`] (so row blocks of whole micro-kernel tiles suit it).
pub fn on_sgemm(k: &DotKernel) -> bool {
    k.per_run || is_prepacked(k)
}

/// True when the rhs was packed at compile time, so [`prepacked_rows`] can run the product.
pub fn is_prepacked(k: &DotKernel) -> bool {
    k.prepacked && k.packed.is_some()
}

/// Rows `[r0, r1)` of a single-batch f32 product whose rhs was packed at compile time
/// ([`is_prepacked`]), written to `c` (room for `(r1 - r0) · n` floats): reads `k` only, so
/// several threads can compute disjoint row ranges at once.
///
/// Errors: not prepacked, several batches, rows or `a` that do not fit the plan.
///
/// # Safety
/// `c` addresses `(r1 - r0) · n` writable floats that no other thread reads or writes meanwhile.
pub unsafe fn prepacked_rows(k: &DotKernel, a: &[f32], c: *mut f32, r0: usize, r1: usize) -> Result<(), IrError> {
    let p = &k.plan;
    match &k.packed {
        Some(bp) if k.prepacked && p.batch == 1 && r0 <= r1 && r1 <= p.m && a.len() == p.numel.0 => {
            // SAFETY: the plan's strides address only elements inside `a` (size checked); `bp`
            // holds the rhs packed; `c` as the caller's contract.
            unsafe { sgemm::matmul_range(r0, r1, lhs_operand(p, a), bp, c, p.n) };
            Ok(())
        }
        _ => Err(IrError::Eval { op: "dot_general".into(), msg: "row block does not fit the plan".into() }),
    }
}

/// The lhs of the single batch as an [`sgemm`] view.
fn lhs_operand(p: &DotPlan, a: &[f32]) -> Operand {
    Operand { ptr: a[p.batch_offs[0].0..].as_ptr(), rs: p.lhs_ms, cs: p.lhs_ks }
}

/// The rhs of the single batch as an [`sgemm`] view.
fn rhs_operand(p: &DotPlan, b: &[f32]) -> Operand {
    Operand { ptr: b[p.batch_offs[0].1..].as_ptr(), rs: p.rhs_ks, cs: p.rhs_ns }
}

/// Rows `[r0, r1)` of a single-batch f32 product on the calling thread, written to
/// `c[..(r1 - r0) * n]` (a block-sized buffer can be reused for every block), on [`sgemm`] when it runs the
/// product (with a pre-packed rhs `b` is not read; else the block starting at row 0 packs `b`,
/// so each run must compute that block first), else on `gemm`.
///
/// Errors: a plan with several batches, or rows or slices that do not fit the plan.
pub fn rows_f32(k: &mut DotKernel, a: &[f32], b: &[f32], c: &mut [f32], r0: usize, r1: usize) -> Result<(), IrError> {
    let p = &k.plan;
    let (m, n, kk) = (p.m, p.n, p.k);
    if p.batch != 1 || r0 > r1 || r1 > m || c.len() < (r1 - r0) * n || (a.len(), b.len()) != p.numel {
        return Err(IrError::Eval { op: "dot_general".into(), msg: "row block does not fit the plan".into() });
    }
    // SAFETY (both): the plan's strides address only elements inside `a` and `b` (sizes checked
    // above); `c` holds (r1 - r0) · n elements; `bp` holds the k × n rhs packed (prepacked), or
    // is the thread's per-run storage, which the block at row 0 packs and which no other
    // product uses until the caller's next step (this thread computes every block of a step).
    if let Some(bp) = k.packed.as_ref().filter(|_| k.prepacked) {
        unsafe { sgemm::matmul_range(r0, r1, lhs_operand(p, a), bp, c.as_mut_ptr(), n) };
        return Ok(());
    }
    if k.per_run {
        let (lhs, rhs) = (lhs_operand(p, a), rhs_operand(p, b));
        // Not a fresh buffer when the thread's is in use: later row blocks read what the block
        // at row 0 packed into the thread's.
        let packed = with_per_run(kk, n, r0 == 0, |bp| unsafe {
            sgemm::matmul_range_packing(r0, r1, lhs, rhs, bp, c.as_mut_ptr(), n)
        });
        if packed.is_none() {
            return Err(IrError::Eval {
                op: "dot_general".into(),
                msg: "packing storage in use on this thread".into(),
            });
        }
        return Ok(());
    }
    let c = &mut c[..(r1 - r0) * n];
    if c.is_empty() {
        return Ok(());
    }
    if kk == 0 {
        c.fill(0.0);
        return Ok(());
    }
    let (lo, ro) = p.batch_offs[0];
    // SAFETY: the plan's strides and offsets address only elements inside `a` and `b` (sizes
    // checked above); rows r0..r1 of the lhs start at `lo + r0 * lhs_ms`; `c` holds exactly
    // (r1 - r0) * n elements.
    unsafe {
        gemm::gemm(
            r1 - r0,
            n,
            kk,
            c.as_mut_ptr(),
            1,
            n as isize,
            false,
            a.as_ptr().add(lo + r0 * p.lhs_ms),
            p.lhs_ks as isize,
            p.lhs_ms as isize,
            b.as_ptr().add(ro),
            p.rhs_ns as isize,
            p.rhs_ks as isize,
            0.0f32,
            1.0f32,
            false,
            false,
            false,
            gemm::Parallelism::None,
        )
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dg(lc: &[usize], rc: &[usize], lb: &[usize], rb: &[usize]) -> DotGeneral {
        DotGeneral {
            lhs_contracting: lc.to_vec(),
            rhs_contracting: rc.to_vec(),
            lhs_batch: lb.to_vec(),
            rhs_batch: rb.to_vec(),
            preferred_element_type: None,
        }
    }

    #[test]
    fn plans_matmul_and_transposes() {
        let p = plan(&dg(&[1], &[0], &[], &[]), &[3, 4], &[4, 5]).unwrap();
        assert_eq!((p.m, p.n, p.k, p.lhs_ms, p.lhs_ks, p.rhs_ks, p.rhs_ns), (3, 5, 4, 4, 1, 5, 1));
        // lhs^T @ rhs^T
        let p = plan(&dg(&[0], &[1], &[], &[]), &[4, 3], &[5, 4]).unwrap();
        assert_eq!((p.m, p.n, p.k, p.lhs_ms, p.lhs_ks, p.rhs_ks, p.rhs_ns), (3, 5, 4, 1, 3, 1, 4));
        // Batched with batch dim in the middle of the rhs.
        let p = plan(&dg(&[2], &[0], &[0], &[1]), &[2, 3, 4], &[4, 2, 5]).unwrap();
        assert_eq!(p.batch_offs, vec![(0, 0), (12, 5)]);
        assert_eq!((p.rhs_ks, p.rhs_ns), (10, 1));
        // Two contracting dims in swapped order do not collapse.
        assert!(plan(&dg(&[1, 2], &[1, 0], &[], &[]), &[3, 4, 5], &[5, 4, 6]).is_none());
        // ... in matching order they do.
        let p = plan(&dg(&[1, 2], &[0, 1], &[], &[]), &[3, 4, 5], &[4, 5, 6]).unwrap();
        assert_eq!((p.k, p.lhs_ks, p.rhs_ks), (20, 1, 6));
    }
}
