//! Native kernel of the `dequant_matmul` composite (`x[.., K] @ Wᵀ`, `W: [N, K]` packed as
//! GGUF blocks, see `rlx_ir::compose::quant`): the weights are read packed, never dequantized
//! as a whole.
//!
//! - Q8_0, Q4_0, Q4_1 (integer path, as llama.cpp's `ggml_vec_dot_q*_q8_0`): each activation
//!   row is quantized once per call to Q8_0 blocks (`d = amax / 127` rounded to f16, `q =
//!   round(x / d)`, exactly `quantize_row_q8_0_ref`) into scratch, together with `d · Σq` per
//!   block; then every weight row is a sum over blocks of `d_w · d_x · Σ q_w·q_x` (+ `m_w ·
//!   d_x · Σq_x` for Q4_1) with the 32-term integer dot done by AVX-512 VNNI `vpdpbusd` (on
//!   256-bit registers, one block each) where the CPU has `avx512vnni`, AVX2 `vpmaddubsw` +
//!   `vpmaddwd` on other AVX-512 CPUs, and a scalar loop elsewhere or under
//!   `RLX_CPU_NO_AVX512` (see [`super::simd::has_avx512`]). Signed products use llama.cpp's
//!   `|x| · sign(w, x)` trick, which assumes weights in `-127..=127` (true of every quantizer;
//!   a stored Q8_0 value of -128 would be misread, as in llama.cpp).
//! - Every other scheme: one weight row at a time is dequantized into a per-thread scratch row
//!   (`rlx_gguf::quants::dequantize_into`, bit-exact) and dotted in f32 with the f32 activation
//!   row, so results match the reference within f32 rounding. (Q4_K/Q5_K/Q6_K run here too:
//!   their Q8_K integer kernels are not written yet.)
//!
//! Accuracy of the integer path: it computes `dequant(W) · dequant(quantize_q8_0(x))` exactly up
//! to f32 rounding of the per-block sums, i.e. it differs from the f32 reference (the
//! composite's body) by the activation quantization error, at most
//! `Σ_i |W[j, i]| · amax(block(i)) / 254` per output (the rounding error of a Q8_0 value is at
//! most half a step `d_x / 2 = amax / 254`). This is what llama.cpp does, and what the tests
//! check. Unlike llama.cpp's Q8_1 the `d · Σq` term used for Q4_1 is kept in f32, not f16.
//!
//! Work split: output rows (weight rows) in chunks across rayon threads when `M · N · K` is
//! large; each chunk loops weight rows outside and activation rows inside, so a weight row is
//! read from memory once (and from L1 for the other `M - 1` activation rows). All scratch is
//! allocated by [`select`]; [`run`] allocates nothing.

use super::simd::has_avx512;
use half::f16;
use rayon::prelude::*;
use rlx_gguf::GgmlType;
use rlx_gguf::quants::dequantize_into;
use rlx_ir::ops::Composite;
use rlx_ir::{DType, IrError, Tensor};

/// The composite name this module runs.
pub const NAME: &str = "dequant_matmul";

/// `M · N · K` from which the rows are split across threads.
const PAR_WORK: usize = 1 << 18;
/// Elements per legacy block.
const QK: usize = 32;

/// How the dot products are done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    /// Integer dot against Q8_0 activations: Q8_0, Q4_0, Q4_1.
    Q8(GgmlType),
    /// One dequantized weight row at a time, f32 dot.
    Dequant,
}

/// A planned `dequant_matmul` with its scratch space.
#[derive(Clone, Debug)]
pub struct QMatmulKernel {
    ty: GgmlType,
    path: Path,
    m: usize,
    n: usize,
    k: usize,
    /// Bytes per weight row.
    row_bytes: usize,
    /// Weight rows per parallel chunk (`n` when sequential).
    chunk: usize,
    /// Quantized activations `[m, k]`.
    xq: Vec<i8>,
    /// Activation block scales `[m, k / 32]` (the f16-rounded `d`).
    xd: Vec<f32>,
    /// `d · Σ q` per activation block.
    xs: Vec<f32>,
    /// Dequantized weight rows, one of `k` per chunk (dequant path).
    rows: Vec<f32>,
}

impl QMatmulKernel {
    /// Name for reports.
    pub fn name(&self) -> &'static str {
        match self.path {
            Path::Q8(_) if simd_level() == 2 => "dequant_matmul_q8_vnni",
            Path::Q8(_) if simd_level() == 1 => "dequant_matmul_q8_avx2",
            Path::Q8(_) => "dequant_matmul_q8_scalar",
            Path::Dequant => "dequant_matmul_rowwise",
        }
    }
}

/// 2: AVX-512 + VNNI, 1: AVX-512 (BW/VL, AVX2 integer ops), 0: scalar.
fn simd_level() -> u8 {
    #[cfg(target_arch = "x86_64")]
    {
        static L: std::sync::OnceLock<u8> = std::sync::OnceLock::new();
        *L.get_or_init(|| {
            if !has_avx512() || !std::is_x86_feature_detected!("avx2") || !std::is_x86_feature_detected!("f16c") {
                0
            } else if std::is_x86_feature_detected!("avx512vnni") {
                2
            } else {
                1
            }
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = has_avx512;
        0
    }
}

/// Plan `c` (a `dequant_matmul`) for static operand types `ins` = `[x f32[.., K], w U8]`.
pub fn select(c: &Composite, ins: &[(Vec<usize>, DType)], outs: &[(Vec<usize>, DType)]) -> Option<QMatmulKernel> {
    if c.name != NAME || ins.len() != 2 || outs.len() != 1 {
        return None;
    }
    let (ty, n, k, bytes) = rlx_gguf::ir_ops::parse_attrs(&c.attrs).ok()?;
    let ((xd, xt), (wd, wt)) = (&ins[0], &ins[1]);
    if *xt != DType::F32 || *wt != DType::U8 || xd.last() != Some(&k) || wd.iter().product::<usize>() != bytes {
        return None;
    }
    let m: usize = xd[..xd.len() - 1].iter().product();
    let path = match ty {
        GgmlType::Q8_0 | GgmlType::Q4_0 | GgmlType::Q4_1 => Path::Q8(ty),
        _ => Path::Dequant,
    };
    let row_bytes = k / ty.block_size() * ty.type_size();
    let par = m.saturating_mul(n).saturating_mul(k) >= PAR_WORK && n >= 32;
    let chunk = if par { n.div_ceil(64).max(16) } else { n.max(1) };
    let (q8, nrows) = match path {
        Path::Q8(_) => (m * k, 0),
        Path::Dequant => (0, n.div_ceil(chunk) * k),
    };
    Some(QMatmulKernel {
        ty,
        path,
        m,
        n,
        k,
        row_bytes,
        chunk,
        xq: vec![0; q8],
        xd: vec![0.0; q8 / QK],
        xs: vec![0.0; q8 / QK],
        rows: vec![0.0; nrows],
    })
}

/// Quantize `x` (whole Q8_0 blocks) into `q` / `d` / `s` as `quantize_row_q8_0_ref`.
fn quantize_q8_0(x: &[f32], q: &mut [i8], d: &mut [f32], s: &mut [f32]) {
    for (((xb, qb), db), sb) in x.chunks_exact(QK).zip(q.chunks_exact_mut(QK)).zip(d).zip(s) {
        let amax = xb.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let dd = amax / 127.0;
        let id = if dd != 0.0 { 1.0 / dd } else { 0.0 };
        let mut sum = 0i32;
        for (qv, &v) in qb.iter_mut().zip(xb) {
            *qv = (v * id).round() as i8;
            sum += i32::from(*qv);
        }
        *db = f16::from_f32(dd).to_f32();
        *sb = *db * sum as f32;
    }
}

/// Raw output pointer shared by the row chunks (each writes disjoint columns).
#[derive(Clone, Copy)]
struct OutPtr(*mut f32);
// SAFETY: chunks write disjoint elements of one live buffer while `run` blocks on them.
unsafe impl Send for OutPtr {}
unsafe impl Sync for OutPtr {}

impl OutPtr {
    /// The pointer (a method, so closures capture the `Sync` wrapper, not the raw field).
    fn get(self) -> *mut f32 {
        self.0
    }
}

/// Run `k` on `x` and the packed weights `w` into `out` (`[.., N]` f32).
pub fn run(k: &mut QMatmulKernel, x: &Tensor, w: &Tensor, out: &mut Tensor) -> Result<(), IrError> {
    let err = |msg: &str| IrError::Eval { op: NAME.into(), msg: msg.into() };
    let xs = x.as_slice::<f32>().ok_or_else(|| err("x is not f32"))?;
    let wb = w.as_slice::<u8>().ok_or_else(|| err("weights are not U8"))?;
    let y = out.as_mut_slice::<f32>().ok_or_else(|| err("result is not f32"))?;
    let (m, n, kk) = (k.m, k.n, k.k);
    if xs.len() != m * kk || wb.len() != n * k.row_bytes || y.len() != m * n {
        return Err(err("operand sizes differ from the planned ones"));
    }
    if kk == 0 {
        y.fill(0.0);
        return Ok(());
    }
    if let Path::Q8(_) = k.path {
        quantize_q8_0(xs, &mut k.xq, &mut k.xd, &mut k.xs);
    }
    let yp = OutPtr(y.as_mut_ptr());
    let (chunk, row_bytes, ty, path) = (k.chunk, k.row_bytes, k.ty, k.path);
    let (xq, xd, xsum) = (&k.xq[..], &k.xd[..], &k.xs[..]);
    let level = simd_level();
    let body = |c: usize, scratch: &mut [f32]| {
        let j1 = ((c + 1) * chunk).min(n);
        for j in c * chunk..j1 {
            let wrow = &wb[j * row_bytes..(j + 1) * row_bytes];
            if path == Path::Dequant {
                // The lengths were checked at select time.
                let _ = dequantize_into(ty, wrow, scratch);
            }
            for mi in 0..m {
                let v = match path {
                    Path::Q8(t) => {
                        let nb = kk / QK;
                        let r = mi * nb;
                        dot_q8(t, level, wrow, &xq[mi * kk..(mi + 1) * kk], &xd[r..r + nb], &xsum[r..r + nb])
                    }
                    Path::Dequant => dot_f32(scratch, &xs[mi * kk..(mi + 1) * kk]),
                };
                // SAFETY: mi < m, j < n: inside `y`; no other chunk writes column j.
                unsafe { *yp.get().add(mi * n + j) = v };
            }
        }
    };
    let nchunks = n.div_ceil(chunk);
    if path == Path::Dequant {
        let rows = &mut k.rows[..nchunks * kk];
        if nchunks > 1 {
            rows.par_chunks_mut(kk).enumerate().for_each(|(c, s)| body(c, s));
        } else {
            body(0, rows);
        }
    } else if nchunks > 1 {
        (0..nchunks).into_par_iter().for_each(|c| body(c, &mut []));
    } else {
        body(0, &mut []);
    }
    Ok(())
}

/// `Σ_i a[i] · b[i]` in f32 with 16 partial sums (vectorizes).
fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 16];
    let (ac, bc) = (a.chunks_exact(16), b.chunks_exact(16));
    let tail: f32 = ac.remainder().iter().zip(bc.remainder()).map(|(x, y)| x * y).sum();
    for (x, y) in ac.zip(bc) {
        for l in 0..16 {
            acc[l] += x[l] * y[l];
        }
    }
    acc.iter().sum::<f32>() + tail
}

#[inline(always)]
fn f16_at(b: &[u8], i: usize) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[i], b[i + 1]])).to_f32()
}

/// One weight row (`w`, blocks of `ty`) against one Q8_0 activation row.
#[inline]
fn dot_q8(ty: GgmlType, level: u8, w: &[u8], xq: &[i8], xd: &[f32], xs: &[f32]) -> f32 {
    debug_assert_eq!(w.len(), xd.len() * ty.type_size());
    #[cfg(target_arch = "x86_64")]
    if level > 0 {
        // SAFETY: level > 0 means the features were detected; lengths match (checked at run).
        return unsafe { if level == 2 { avx::dot_vnni(ty, w, xq, xd, xs) } else { avx::dot_avx2(ty, w, xq, xd, xs) } };
    }
    let _ = level;
    dot_q8_scalar(ty, w, xq, xd, xs)
}

/// Portable form of [`dot_q8`].
pub(crate) fn dot_q8_scalar(ty: GgmlType, w: &[u8], xq: &[i8], xd: &[f32], xs: &[f32]) -> f32 {
    let ts = ty.type_size();
    let mut sum = 0f32;
    for (b, blk) in w.chunks_exact(ts).enumerate() {
        let q = &xq[b * QK..(b + 1) * QK];
        let d = f16_at(blk, 0);
        let (isum, extra) = match ty {
            GgmlType::Q8_0 => (blk[2..34].iter().zip(q).map(|(&w, &x)| i32::from(w as i8) * i32::from(x)).sum(), 0.0),
            GgmlType::Q4_0 => (nib_dot(&blk[2..18], q, 8), 0.0),
            _ => (nib_dot(&blk[4..20], q, 0), f16_at(blk, 2) * xs[b]),
        };
        sum += d * xd[b] * isum as f32 + extra;
    }
    sum
}

/// `Σ (nibble - off) · q` for 16 packed bytes (low nibbles first, then high).
fn nib_dot(qs: &[u8], q: &[i8], off: i32) -> i32 {
    let mut s = 0i32;
    for j in 0..16 {
        s += (i32::from(qs[j] & 15) - off) * i32::from(q[j]);
        s += (i32::from(qs[j] >> 4) - off) * i32::from(q[j + 16]);
    }
    s
}

#[cfg(target_arch = "x86_64")]
mod avx {
    use super::QK;
    use rlx_gguf::GgmlType;
    use std::arch::x86_64::*;

    macro_rules! legacy_dot {
        ($name:ident, $feat:literal, $dp:expr) => {
            /// One weight row against one Q8_0 activation row (see [`super::dot_q8_scalar`]).
            ///
            /// # Safety
            /// The features named must be available; `w` holds `xd.len()` blocks of `ty`, `xq`
            /// `32 · xd.len()` values, `xs` `xd.len()`.
            #[target_feature(enable = $feat)]
            pub unsafe fn $name(ty: GgmlType, w: &[u8], xq: &[i8], xd: &[f32], xs: &[f32]) -> f32 {
                let nb = xd.len();
                let ts = ty.type_size();
                let mut acc = _mm256_setzero_ps();
                let mut corr = 0f32;
                let mask = _mm256_set1_epi8(0x0f);
                let eight = _mm256_set1_epi8(8);
                let dp = $dp;
                let (wp, xp) = (w.as_ptr(), xq.as_ptr());
                for b in 0..nb {
                    // SAFETY: b < nb blocks of `ts` bytes in `w`, of 32 values in `xq`.
                    let (p, dw) = unsafe {
                        let blk = wp.add(b * ts);
                        let xv = _mm256_loadu_si256(xp.add(b * QK) as *const __m256i);
                        let nibbles = |at: usize| {
                            let v = _mm_loadu_si128(blk.add(at) as *const __m128i);
                            _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), mask)
                        };
                        let signed = |wv: __m256i| dp(_mm256_sign_epi8(xv, xv), _mm256_sign_epi8(wv, xv));
                        match ty {
                            GgmlType::Q8_0 => (signed(_mm256_loadu_si256(blk.add(2) as *const __m256i)), 0),
                            GgmlType::Q4_0 => (signed(_mm256_sub_epi8(nibbles(2), eight)), 0),
                            _ => (dp(nibbles(4), xv), 1),
                        }
                    };
                    let wb = &w[b * ts..];
                    // F16C conversion (half's portable one is several times slower here).
                    let h = |i: usize| {
                        let bits = i32::from(u16::from_le_bytes([wb[i], wb[i + 1]]));
                        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(bits)))
                    };
                    if dw == 1 {
                        corr += h(2) * xs[b];
                    }
                    let s = _mm256_set1_ps(h(0) * xd[b]);
                    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), s, acc);
                }
                let h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
                let h = _mm_add_ps(h, _mm_movehl_ps(h, h));
                let h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
                _mm_cvtss_f32(h) + corr
            }
        };
    }

    legacy_dot!(dot_vnni, "avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni", |u: __m256i, s: __m256i| {
        _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s)
    });
    legacy_dot!(dot_avx2, "avx2,fma,f16c,avx512f,avx512vl,avx512bw", |u: __m256i, s: __m256i| {
        _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1))
    });
}
