//! Register tiles for the fused elementwise kernel ([`super::fused`]): a run of its f32
//! instructions becomes one [`TileProg`] that keeps the value being computed in vector
//! registers, [`T`] vectors (64 elements) at a time, instead of writing every instruction's
//! result to a scratch block and reading it back.
//!
//! The block program reads and writes an L1 scratch block per instruction: the cheap ops of a
//! long chain were store-bound (profile of `fusion_bench`'s chain: 11 cheap block ops took a
//! third of the run). A tile program is an accumulator machine: `Load` puts an operand in the
//! accumulator, `Unary` / `Binary` replace it (`acc ∘ y`, or `y ∘ acc`), `Spill` writes it to
//! a scratch register only when a later instruction still reads that value, `Store` writes it
//! to a result. Each op computes exactly what [`super::elementwise::unary_block`] /
//! [`super::elementwise::binary_block`] compute for AVX-512 (the same 16-lane functions of
//! [`super::math_vec`], the same IEEE operations), so results are bit-identical to the
//! block program and to the unfused kernels (test `tests/fused.rs`).
//!
//! Planned at compile time ([`plan`]) where AVX-512 is available; the block loop of
//! `fused::run_task` resolves each operand to a pointer or a scalar once per block, then runs
//! the tiles ([`run_block`]).

use super::fused::{Arg, Instr};
use rlx_ir::ops::{BinaryOp, UnaryOp};

/// Vectors of 16 lanes per tile.
pub(super) const T: usize = 4;
/// Most tile ops in one program (a longer run is cut), so the per-block resolved form fits a
/// fixed stack array and running allocates nothing.
pub(super) const MAX_OPS: usize = 96;

/// The second operand of a tile `Binary`: the accumulator itself (`t ∘ t`) or an argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Opnd {
    Acc,
    Arg(Arg),
}

/// One tile op (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum TOp {
    Load(Arg),
    Unary(UnaryOp),
    /// `acc = acc ∘ y`, or `y ∘ acc` when the flag is set.
    Binary(BinaryOp, Opnd, bool),
    /// Write the accumulator to scratch register `r`.
    Spill(usize),
    /// Write the accumulator to f32 result `k`.
    Store(usize),
}

/// A run of instructions as tile ops.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct TileProg {
    pub(super) ops: Vec<TOp>,
}

/// The unary ops a tile runs (the tests cover each one from this list).
pub const TILE_UNARY_OPS: &[UnaryOp] = {
    use UnaryOp::*;
    &[Neg, Abs, Sqrt, Square, Reciprocal, Rsqrt, Exp, Erf, Erfc, Tanh, Logistic]
};

/// The binary ops a tile runs.
pub const TILE_BINARY_OPS: &[BinaryOp] = {
    use BinaryOp::*;
    &[Add, Sub, Mul, Div, Max, Min]
};

fn unary_ok(u: UnaryOp) -> bool {
    TILE_UNARY_OPS.contains(&u)
}

fn binary_ok(b: BinaryOp) -> bool {
    TILE_BINARY_OPS.contains(&b)
}

/// True when the instruction can run in a tile (`f32_out(k)`: result `k` is f32).
fn tileable(i: &Instr, f32_out: &dyn Fn(usize) -> bool) -> bool {
    match *i {
        Instr::Unary(u, ..) => unary_ok(u),
        Instr::Binary(b, ..) => binary_ok(b),
        Instr::Copy(..) => true,
        Instr::Store(_, k) => f32_out(k),
        _ => false,
    }
}

/// Registers an instruction reads and the one it writes.
fn reads(i: &Instr) -> Vec<Arg> {
    let mut c = i.clone();
    super::fused::args_mut(&mut c).into_iter().map(|a| *a).collect()
}

fn dest(i: &Instr) -> Option<usize> {
    let mut c = i.clone();
    super::fused::dest_mut(&mut c).copied()
}

/// True when the value register `r` holds after instruction `q` is read by a later
/// instruction, or `r` is a result written in place (`r >= nregs`, `fused::store_through`).
fn live_after(prog: &[Instr], nregs: usize, q: usize, r: usize) -> bool {
    if r >= nregs {
        return true;
    }
    for i in &prog[q + 1..] {
        if reads(i).contains(&Arg::Reg(r)) {
            return true;
        }
        if dest(i) == Some(r) {
            return false;
        }
    }
    false
}

/// Replace each run of two or more tileable instructions of `prog` (scratch registers
/// `0..nregs`; above them, results written in place) by one [`Instr::Tile`].
pub(super) fn plan(prog: Vec<Instr>, nregs: usize, f32_out: &dyn Fn(usize) -> bool) -> Vec<Instr> {
    let mut out = Vec::with_capacity(prog.len());
    let mut i = 0;
    while i < prog.len() {
        let mut j = i;
        while j < prog.len() && tileable(&prog[j], f32_out) {
            j += 1;
        }
        if j - i < 2 {
            out.extend_from_slice(&prog[i..j.max(i + 1)]);
            i = j.max(i + 1);
            continue;
        }
        while i < j {
            let (t, next) = convert(&prog, nregs, i, j);
            out.push(Instr::Tile(Box::new(t)));
            i = next;
        }
    }
    out
}

/// Convert instructions `[i, j)` (all tileable) from `i` until they end or the program would
/// pass [`MAX_OPS`]; returns the program and where it stopped.
fn convert(prog: &[Instr], nregs: usize, i: usize, j: usize) -> (TileProg, usize) {
    let mut ops = vec![];
    // The register whose value the accumulator holds, and whether it is in memory too.
    let mut acc: Option<usize> = None;
    let mut saved = true;
    // Before instruction `q` changes the accumulator: write its value out when an instruction
    // after `q` still reads it (`q` reads it from the accumulator; when `q` redefines the
    // register, the old value is dead; a register is never an operand of its own definition).
    let save = |ops: &mut Vec<TOp>, acc: Option<usize>, saved: &mut bool, q: usize| {
        if let Some(r) = acc
            && !*saved
            && (r >= nregs || dest(&prog[q]) != Some(r))
            && live_after(prog, nregs, q, r)
        {
            ops.push(TOp::Spill(r));
            *saved = true;
        }
    };
    let is_acc = |a: Arg, acc: Option<usize>| acc.is_some() && a == Arg::Reg(acc.unwrap());
    let mut q = i;
    while q < j && ops.len() + 4 <= MAX_OPS {
        match prog[q] {
            Instr::Unary(u, x, d) => {
                save(&mut ops, acc, &mut saved, q);
                if !is_acc(x, acc) {
                    ops.push(TOp::Load(x));
                }
                ops.push(TOp::Unary(u));
                (acc, saved) = (Some(d), false);
            }
            Instr::Binary(b, x, y, d) => {
                save(&mut ops, acc, &mut saved, q);
                if is_acc(x, acc) {
                    ops.push(TOp::Binary(b, if y == x { Opnd::Acc } else { Opnd::Arg(y) }, false));
                } else if is_acc(y, acc) {
                    ops.push(TOp::Binary(b, Opnd::Arg(x), true));
                } else {
                    ops.push(TOp::Load(x));
                    ops.push(TOp::Binary(b, if y == x { Opnd::Acc } else { Opnd::Arg(y) }, false));
                }
                (acc, saved) = (Some(d), false);
            }
            Instr::Copy(x, d) => {
                save(&mut ops, acc, &mut saved, q);
                if !is_acc(x, acc) {
                    ops.push(TOp::Load(x));
                }
                (acc, saved) = (Some(d), false);
            }
            Instr::Store(x, k) => {
                if !is_acc(x, acc) {
                    save(&mut ops, acc, &mut saved, q);
                    ops.push(TOp::Load(x));
                    // The accumulator now holds a value already in memory (or none).
                    (acc, saved) = (if let Arg::Reg(r) = x { Some(r) } else { None }, true);
                }
                ops.push(TOp::Store(k));
            }
            _ => unreachable!("convert: untileable instruction"),
        }
        q += 1;
    }
    if let Some(r) = acc
        && !saved
        && live_after(prog, nregs, q - 1, r)
    {
        ops.push(TOp::Spill(r));
    }
    (TileProg { ops }, q)
}

/// One tile op with its operand resolved for the current block.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
pub(super) enum Res {
    LoadP(*const f32),
    LoadS(f32),
    Unary(UnaryOp),
    BinP(BinaryOp, *const f32, bool),
    BinS(BinaryOp, f32, bool),
    BinAcc(BinaryOp),
    Spill(*mut f32),
    /// Destination, and whether it takes non-temporal stores (64-byte aligned).
    Store(*mut f32, bool),
}

#[cfg(target_arch = "x86_64")]
pub(super) use x86::run_block;

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::super::avx512::tail_mask;
    use super::super::math_vec::{erf, erfc, exp, logistic, tanh};
    use super::super::vf32::F32x16;
    use super::{Res, T};
    use rlx_ir::ops::{BinaryOp, UnaryOp};
    use std::arch::x86_64::*;

    type Acc = [__m512; T];
    const W: usize = 16 * T;

    /// Run resolved ops `m` over `len` elements (pointers address element 0 of the block).
    ///
    /// # Safety
    /// AVX-512F is available; every pointer of `m` addresses `len` floats (stores: writable,
    /// not read by any other op of `m` except through the same register).
    #[target_feature(enable = "avx512f,avx512vl,avx512bw,avx2,fma")]
    pub(in super::super) unsafe fn run_block(m: &[Res], len: usize) {
        let full = len / W;
        let mut stream = false;
        // SAFETY: the caller's contract; offsets stay below `len`.
        unsafe {
            for t in 0..full {
                stream |= tile::<false>(m, t * W, [!0; T]);
            }
            let rem = len - full * W;
            if rem > 0 {
                let mut mask = [0 as __mmask16; T];
                for (j, mk) in mask.iter_mut().enumerate() {
                    let k = rem.saturating_sub(16 * j).min(16);
                    *mk = if k == 16 { !0 } else { tail_mask(k) };
                }
                tile::<true>(m, full * W, mask);
            }
            if stream {
                // Non-temporal stores are weakly ordered: fence before another thread reads.
                _mm_sfence();
            }
        }
    }

    #[inline(always)]
    unsafe fn ld<const M: bool>(p: *const f32, m: __mmask16) -> __m512 {
        unsafe { if M { _mm512_maskz_loadu_ps(m, p) } else { _mm512_loadu_ps(p) } }
    }

    #[inline(always)]
    unsafe fn st<const M: bool>(p: *mut f32, v: __m512, m: __mmask16) {
        unsafe { if M { _mm512_mask_storeu_ps(p, m, v) } else { _mm512_storeu_ps(p, v) } }
    }

    /// `acc[j] = f(acc[j], y(j))` (`f(y(j), acc[j])` when `rev`) for each vector, for each
    /// binary op. Macros, not closures: a closure does not carry the caller's target features,
    /// so the intrinsics in it stayed calls (measured: 14x slower).
    macro_rules! binary {
        ($b:expr, $rev:expr, $acc:ident, |$j:ident| $y:expr) => {{
            macro_rules! go {
                (|$x:ident, $z:ident| $f:expr) => {
                    if $rev {
                        for $j in 0..T {
                            let ($x, $z) = ($y, $acc[$j]);
                            $acc[$j] = $f;
                        }
                    } else {
                        for $j in 0..T {
                            let ($x, $z) = ($acc[$j], $y);
                            $acc[$j] = $f;
                        }
                    }
                };
            }
            match $b {
                BinaryOp::Add => go!(|a, b| _mm512_add_ps(a, b)),
                BinaryOp::Sub => go!(|a, b| _mm512_sub_ps(a, b)),
                BinaryOp::Mul => go!(|a, b| _mm512_mul_ps(a, b)),
                BinaryOp::Div => go!(|a, b| _mm512_div_ps(a, b)),
                // `if a > b || a.is_nan() { a } else { b }` (`np.maximum`), and min alike.
                BinaryOp::Max => go!(|a, b| _mm512_mask_blend_ps(
                    _mm512_cmp_ps_mask::<_CMP_GT_OQ>(a, b) | _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, a),
                    b,
                    a
                )),
                BinaryOp::Min => go!(|a, b| _mm512_mask_blend_ps(
                    _mm512_cmp_ps_mask::<_CMP_LT_OQ>(a, b) | _mm512_cmp_ps_mask::<_CMP_UNORD_Q>(a, a),
                    b,
                    a
                )),
                _ => unreachable!("tile: binary op not planned"),
            }
        }};
    }

    /// One tile of `16·T` elements at `off`; returns whether it streamed. Unary and binary
    /// math as `elementwise::unary_block` / `binary_block` compute it with AVX-512.
    #[inline(always)]
    unsafe fn tile<const M: bool>(m: &[Res], off: usize, mask: [__mmask16; T]) -> bool {
        let mut streamed = false;
        unsafe {
            let mut acc: Acc = [_mm512_setzero_ps(); T];
            let sign = _mm512_set1_epi32(i32::MIN);
            let one = _mm512_set1_ps(1.0);
            macro_rules! each {
                (|$v:ident| $e:expr) => {
                    for a in acc.iter_mut() {
                        let $v = *a;
                        *a = $e;
                    }
                };
            }
            for op in m {
                match *op {
                    Res::LoadP(p) => {
                        for j in 0..T {
                            acc[j] = ld::<M>(p.add(off + 16 * j), mask[j]);
                        }
                    }
                    Res::LoadS(v) => acc = [_mm512_set1_ps(v); T],
                    Res::Unary(u) => match u {
                        UnaryOp::Neg => each!(|v| _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), sign))),
                        UnaryOp::Abs => each!(|v| _mm512_abs_ps(v)),
                        UnaryOp::Sqrt => each!(|v| _mm512_sqrt_ps(v)),
                        UnaryOp::Square => each!(|v| _mm512_mul_ps(v, v)),
                        UnaryOp::Reciprocal => each!(|v| _mm512_div_ps(one, v)),
                        UnaryOp::Rsqrt => each!(|v| _mm512_div_ps(one, _mm512_sqrt_ps(v))),
                        UnaryOp::Exp => each!(|v| exp(F32x16(v)).0),
                        UnaryOp::Erf => each!(|v| erf(F32x16(v)).0),
                        UnaryOp::Erfc => each!(|v| erfc(F32x16(v)).0),
                        UnaryOp::Tanh => each!(|v| tanh(F32x16(v)).0),
                        UnaryOp::Logistic => each!(|v| logistic(F32x16(v)).0),
                        _ => unreachable!("tile: unary op not planned"),
                    },
                    Res::BinP(b, p, rev) => binary!(b, rev, acc, |j| ld::<M>(p.add(off + 16 * j), mask[j])),
                    Res::BinS(b, v, rev) => {
                        let y = _mm512_set1_ps(v);
                        binary!(b, rev, acc, |j| y)
                    }
                    Res::BinAcc(b) => {
                        let y = acc;
                        binary!(b, false, acc, |j| y[j])
                    }
                    Res::Spill(p) => {
                        for j in 0..T {
                            st::<M>(p.add(off + 16 * j), acc[j], mask[j]);
                        }
                    }
                    Res::Store(p, nt) => {
                        if nt && !M {
                            for (j, &v) in acc.iter().enumerate() {
                                _mm512_stream_ps(p.add(off + 16 * j), v);
                            }
                            streamed = true;
                        } else {
                            for j in 0..T {
                                st::<M>(p.add(off + 16 * j), acc[j], mask[j]);
                            }
                        }
                    }
                }
            }
        }
        streamed
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::super::elementwise::{Src, binary_block, unary_block};
    use super::*;

    /// 1000 values: random over ±8 and ±100, NaN, ±inf, ±0, subnormals.
    fn values(seed: u64) -> Vec<f32> {
        let mut s = seed;
        let sp = [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 0.0, -0.0, 1e-40, -3e-39, 0.625, -0.625, 88.9];
        (0..1000)
            .map(|i| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let u = (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
                if i % 9 == 0 { sp[i / 9 % sp.len()] } else { u * if i % 2 == 0 { 8.0 } else { 100.0 } }
            })
            .collect()
    }

    fn run(ops: &[Res], len: usize) {
        // SAFETY: checked for AVX-512 by the callers; pointers address `len` floats.
        unsafe { run_block(ops, len) }
    }

    #[test]
    fn each_op_is_bit_identical_to_the_block_kernels() {
        if !super::super::simd::has_avx512() {
            return;
        }
        let (x, y) = (values(1), values(2));
        // 1000 = 15 full tiles and a partial one (40 elements: 2 full vectors and a half).
        let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        for &u in TILE_UNARY_OPS {
            assert!(unary_ok(u));
            let mut want = vec![0.0; x.len()];
            unary_block(u, &x, &mut want);
            let mut got = vec![0.0; x.len()];
            run(&[Res::LoadP(x.as_ptr()), Res::Unary(u), Res::Store(got.as_mut_ptr(), false)], x.len());
            assert_eq!(bits(&got), bits(&want), "{u:?}");
        }
        for &b in TILE_BINARY_OPS {
            assert!(binary_ok(b));
            let mut want = vec![0.0; x.len()];
            binary_block(b, Src::Slice(&x), Src::Slice(&y), &mut want);
            let cases: [(&[Res], &str); 2] = [
                (&[Res::LoadP(x.as_ptr()), Res::BinP(b, y.as_ptr(), false)], "acc op y"),
                (&[Res::LoadP(y.as_ptr()), Res::BinP(b, x.as_ptr(), true)], "x op acc"),
            ];
            for (ops, how) in cases {
                let mut got = vec![0.0; x.len()];
                let mut ops = ops.to_vec();
                ops.push(Res::Store(got.as_mut_ptr(), false));
                run(&ops, x.len());
                assert_eq!(bits(&got), bits(&want), "{b:?} {how}");
            }
            // A scalar operand on either side, and the accumulator with itself.
            let mut want = vec![0.0; x.len()];
            binary_block(b, Src::Scalar(-1.5), Src::Slice(&x), &mut want);
            let mut got = vec![0.0; x.len()];
            run(&[Res::LoadP(x.as_ptr()), Res::BinS(b, -1.5, true), Res::Store(got.as_mut_ptr(), false)], x.len());
            assert_eq!(bits(&got), bits(&want), "{b:?} scalar op acc");
            binary_block(b, Src::Slice(&x), Src::Slice(&x), &mut want);
            run(&[Res::LoadP(x.as_ptr()), Res::BinAcc(b), Res::Store(got.as_mut_ptr(), false)], x.len());
            assert_eq!(bits(&got), bits(&want), "{b:?} acc op acc");
        }
    }
}
