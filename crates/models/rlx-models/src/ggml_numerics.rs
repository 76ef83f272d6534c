//! Fast mode's f32 arithmetic: llama.cpp's, for the ops between the quantized matmuls.
//!
//! Fast mode (`CompileOptions::quantized_activations`) runs llama.cpp's numerics. Its quantized
//! matmuls (Q8 activations, ggml's summation order) live in `rlx-cpu`; everything between them
//! that rounds differently would flip a Q8 rounding now and then, and a flip moves logits by
//! tenths. So fast-mode step graphs build these custom ops (the attention op in one-token
//! steps only, see `crate::graph::step_graph`), which compute as ggml's CPU backend does with
//! an f32 KV cache and flash attention off, one token per step
//! (`llm_graph_context::build_attn_mha`, llama.cpp as vendored by `llama-cpp-python` 0.3.36,
//! read from its source; `tools/refgen/llama_dump_layers.c` dumps llama.cpp's tensors to check):
//!
//! - [`GGML_ATTENTION`], RoPE and attention of one layer:
//!   - RoPE (`ggml_compute_forward_rope`): per pair `(x0, x1)` with `(cos, sin)`,
//!     `y0 = fma(x0, cos, -(x1·sin))`, `y1 = fma(x0, sin, x1·cos)` (how GCC contracts ggml's
//!     `x0*cos - x1*sin`, checked by compiling ggml's loop with its flags); tables from
//!     [`rope_tables_ggml`];
//!   - scores (`ggml_mul_mat(k, q)`; one query row takes `ggml_vec_dot_f32`, not tinyBLAS):
//!     [`dot_ggml`] of each key with the query, times `scale`, plus the mask;
//!   - softmax (`ggml_compute_forward_soft_max_f32`): the max, `e = ggml_v_expf(w - max)`
//!     ([`expf_ggml`]), each aligned group of 16 keys summed by [`hsum16`] and the groups added
//!     in f64, then `p = e · (f32)(1 / sum)`;
//!   - output (`ggml_mul_mat(vᵀ, p)`): per head dim, [`dot_ggml`]'s order over the keys.
//!
//!   Keys count in position order (visible cache columns, then visible new columns), as
//!   llama.cpp's cache cells do; its masked and padding cells add exact zeros.
//! - [`GGML_RMS_NORM`]: ggml's `rms_norm` (squares summed in f64) then `mul`.
//! - [`GGML_SWIGLU`]: ggml's `swiglu` (`x / (1 + ggml_v_expf(-x)) · up`).
//!
//! Measured (`tests/fast_mode.rs`, SmolLM2-135M Q4_1, 543 teacher-forced positions): fast mode's
//! top-1 equals llama.cpp's one-token-per-step run at every position and its logits equal
//! llama.cpp's to the 4 printed decimals (bit for bit where dumped); before these ops, 97.79%.
//!
//! With an f16 cache the attention op computes llama.cpp's *default* attention instead (f16 K/V
//! cache, flash attention on): see [`flash_f16`]. Measured the same way against llama.cpp's
//! default context fed one token per step: top-1 equal at all 543 positions, logits equal to
//! the 4 printed decimals.
//!
//! [`GGML_ATTENTION`]'s operands: `q` f32 `[B, S, H, D]`, `k`, `v` f32 `[B, S, Hk, D]` (before
//! RoPE), `cos`, `sin` f32 `[B·S, D]` (the step graph's tables), `k_cache`, `v_cache` f32 or
//! both f16 `[B, Hk, C, D]`, `mask` f32 `[B, S, C + S]` (0 visible, `-inf` hidden). Attrs: `scale`
//! (Float), `style` (`"adjacent_pairs"` | `"rotate_half"`). Results: the attention output f32
//! `[B, S, H·D]`, then `k_new`, `v_new` f32 `[B, Hk, S, D]` (`k` after RoPE), which the host
//! appends to the cache. `D` even, `H` a multiple of `Hk`; a query row that sees no key gives
//! NaN (as softmax of an all-`-inf` row; 0 with an f16 cache, as llama.cpp's flash attention). The ops run through their reference `eval` (the
//! `rlx-cpu` executor calls it): RMSNorm and SwiGLU on one thread, linear in the tokens;
//! attention as one task per (query row, KV group) on the run's threads
//! ([`rlx_ir::ops::custom::parallel_for`]), each linear in the keys of its row (a several-token
//! step would make it quadratic, which is why prefill keeps the native attention). SmolLM2
//! `--fast` decode at 2 threads: the op 1.7 → 1.0 ms per token, 116–120 → 133–151 tokens/s.

mod flash_f16;

use rlx_ir::half::{f16, slice::HalfFloatSliceExt};
use rlx_ir::op::RopeStyle;
use rlx_ir::ops::custom::{CustomOp, parallel_for, register_op};
use rlx_ir::{Attr, Attrs, DType, IrError, Shape, Tensor};
use std::sync::{Arc, Once};

/// Name of the attention custom op (see the module docs).
pub const GGML_ATTENTION: &str = "ggml_attention";

/// Name of the RMSNorm custom op: `x` f32 `[.., N]`, `w` f32 `[N]`, attr `eps` (Float);
/// per row `sum` of the f32 squares added in f64 in order, `mean = (f32)(sum / N)`, `scale =
/// 1 / sqrtf(mean + eps)` in f32, `y = (x · scale) · w` (ggml's `rms_norm` then `mul`).
pub const GGML_RMS_NORM: &str = "ggml_rms_norm";

/// Name of the SwiGLU custom op: `gate`, `up` f32 of one shape; `y = gate / (1 + e) · up` with
/// `e = ggml_v_expf(-gate)` ([`expf_ggml`]) for each row's first `16·⌊N/16⌋` elements and
/// libm's `expf` for the rest (ggml's `ggml_vec_swiglu_f32`).
pub const GGML_SWIGLU: &str = "ggml_swiglu";

/// Register [`GGML_ATTENTION`], [`GGML_RMS_NORM`] and [`GGML_SWIGLU`] (idempotent).
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        register_op(GGML_ATTENTION, Arc::new(GgmlAttention));
        register_op(GGML_RMS_NORM, Arc::new(GgmlRmsNorm));
        register_op(GGML_SWIGLU, Arc::new(GgmlSwiglu));
    });
}

struct GgmlRmsNorm;

impl CustomOp for GgmlRmsNorm {
    fn infer(&self, attrs: &Attrs, ins: &[&Shape]) -> Result<Vec<Shape>, String> {
        if !matches!(attrs.get("eps"), Some(Attr::Float(_))) {
            return Err(format!("{GGML_RMS_NORM} needs a float attribute eps"));
        }
        let [x, w] = ins else { return Err(format!("{GGML_RMS_NORM} takes x and w, got {} operands", ins.len())) };
        let n = x.static_dims().and_then(|d| d.last().copied());
        if x.dtype != DType::F32 || n.is_none() || w.static_dims() != n.map(|n| vec![n]) || w.dtype != DType::F32 {
            return Err(format!("{GGML_RMS_NORM}: x must be f32 [.., N] and w f32 [N], got {x} and {w}"));
        }
        Ok(vec![(*x).clone()])
    }

    fn eval(&self, attrs: &Attrs, ins: &[&Tensor], outs: &mut [Tensor]) -> Result<(), IrError> {
        let Some(Attr::Float(eps)) = attrs.get("eps") else { unreachable!("checked by infer") };
        let eps = *eps as f32;
        let (x, w) = (ins[0].as_slice::<f32>().expect("f32"), ins[1].as_slice::<f32>().expect("f32"));
        let y = outs[0].as_mut_slice::<f32>().expect("f32 result");
        for (xr, yr) in x.chunks_exact(w.len()).zip(y.chunks_exact_mut(w.len())) {
            let sum: f64 = xr.iter().map(|&v| (v * v) as f64).sum();
            let mean = (sum / xr.len() as f64) as f32;
            let scale = 1.0 / (mean + eps).sqrt();
            for ((o, &v), &g) in yr.iter_mut().zip(xr).zip(w) {
                *o = v * scale * g;
            }
        }
        Ok(())
    }
}

struct GgmlSwiglu;

impl CustomOp for GgmlSwiglu {
    fn infer(&self, _: &Attrs, ins: &[&Shape]) -> Result<Vec<Shape>, String> {
        match ins {
            [g, u] if g == u && g.dtype == DType::F32 && g.static_dims().is_some_and(|d| !d.is_empty()) => {
                Ok(vec![(*g).clone()])
            }
            _ => Err(format!("{GGML_SWIGLU} takes gate and up, f32 of one static shape of rank >= 1")),
        }
    }

    fn eval(&self, _: &Attrs, ins: &[&Tensor], outs: &mut [Tensor]) -> Result<(), IrError> {
        let n = *ins[0].shape().last().expect("rank >= 1");
        let (g, u) = (ins[0].as_slice::<f32>().expect("f32"), ins[1].as_slice::<f32>().expect("f32"));
        let y = outs[0].as_mut_slice::<f32>().expect("f32 result");
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the features were just detected.
            unsafe { swiglu_fma(n, g, u, y) };
            return Ok(());
        }
        #[cfg(target_arch = "x86_64")]
        if avx2_fma() {
            // SAFETY: the features were just detected.
            unsafe { swiglu_avx2(n, g, u, y) };
            return Ok(());
        }
        swiglu(n, g, u, y);
        Ok(())
    }
}

/// The attrs of [`GGML_ATTENTION`].
pub fn attrs(scale: f32, style: RopeStyle) -> Attrs {
    let style = match style {
        RopeStyle::AdjacentPairs => "adjacent_pairs",
        RopeStyle::RotateHalf => "rotate_half",
    };
    [("scale".to_string(), Attr::Float(scale as f64)), ("style".to_string(), Attr::Str(style.into()))]
        .into_iter()
        .collect()
}

/// llama.cpp's RoPE tables for positions `past .. past + cos.len() / d` into `cos` and `sin`
/// (`[s, D]`, each pair's value in the slots `style` pairs): `theta_scale = powf(base,
/// -2/D)`, then per position `θ = pos` (f32) multiplied by `theta_scale` once per pair, each
/// angle scaled by `freq_scale` and taken through `cosf` / `sinf` (ggml's `ggml_rope_cache_init`
/// without YaRN).
pub fn rope_tables_ggml(
    base: f32,
    freq_scale: f32,
    style: RopeStyle,
    d: usize,
    past: usize,
    cos: &mut [f32],
    sin: &mut [f32],
) {
    let theta_scale = base.powf(-2.0f32 / d as f32);
    for (k, (cr, sr)) in cos.chunks_exact_mut(d).zip(sin.chunks_exact_mut(d)).enumerate() {
        let mut theta = (past + k) as f32;
        for i in 0..d / 2 {
            let a = freq_scale * theta;
            let (c, s) = (a.cos(), a.sin());
            for j in pair(style, d, i) {
                cr[j] = c;
                sr[j] = s;
            }
            theta *= theta_scale;
        }
    }
}

/// The two slots of pair `i` of a head of `d`.
fn pair(style: RopeStyle, d: usize, i: usize) -> [usize; 2] {
    match style {
        RopeStyle::AdjacentPairs => [2 * i, 2 * i + 1],
        RopeStyle::RotateHalf => [i, i + d / 2],
    }
}

struct GgmlAttention;

fn dims(s: &Shape, rank: usize, what: &str) -> Result<Vec<usize>, String> {
    match s.static_dims() {
        Some(d) if d.len() == rank && s.dtype == DType::F32 => Ok(d),
        _ => Err(format!("{GGML_ATTENTION}: {what} must be f32 of rank {rank}, got {s}")),
    }
}

/// `(B, S, H, Hk, D, C)` from the operand shapes, or what is wrong.
fn check(ins: &[&Shape]) -> Result<[usize; 6], String> {
    if ins.len() != 8 {
        return Err(format!("{GGML_ATTENTION} takes 8 operands, got {}", ins.len()));
    }
    let q = dims(ins[0], 4, "q")?;
    let k = dims(ins[1], 4, "k")?;
    let (b, s, h, d) = (q[0], q[1], q[2], q[3]);
    let hk = k[2];
    let c = match ins[5].static_dims() {
        Some(kc) if kc.len() == 4 => kc[2],
        _ => return Err(format!("{GGML_ATTENTION}: k_cache must be of rank 4, got {}", ins[5])),
    };
    let want = [
        ("k", vec![b, s, hk, d]),
        ("v", vec![b, s, hk, d]),
        ("cos", vec![b * s, d]),
        ("sin", vec![b * s, d]),
        ("k_cache", vec![b, hk, c, d]),
        ("v_cache", vec![b, hk, c, d]),
        ("mask", vec![b, s, c + s]),
    ];
    for ((name, w), x) in want.iter().zip(&ins[1..]) {
        // The caches: f32, or both f16 (llama.cpp's default attention, `flash_f16`).
        let cache_ok = name.ends_with("cache") && x.dtype == ins[5].dtype && x.dtype == DType::F16;
        if x.static_dims().as_deref() != Some(w.as_slice()) || (x.dtype != DType::F32 && !cache_ok) {
            return Err(format!(
                "{GGML_ATTENTION}: {name} must be f32 {w:?} (the caches both f32 or both f16), got {x}"
            ));
        }
    }
    if d % 2 != 0 || hk == 0 || h % hk != 0 {
        return Err(format!("{GGML_ATTENTION}: head dim {d} must be even and {h} heads a multiple of {hk}"));
    }
    Ok([b, s, h, hk, d, c])
}

fn parse(attrs: &Attrs) -> Result<(f32, RopeStyle), String> {
    let scale = match attrs.get("scale") {
        Some(Attr::Float(v)) => *v as f32,
        _ => return Err(format!("{GGML_ATTENTION} needs a float attribute scale")),
    };
    let style = match attrs.get("style") {
        Some(Attr::Str(s)) if s == "adjacent_pairs" => RopeStyle::AdjacentPairs,
        Some(Attr::Str(s)) if s == "rotate_half" => RopeStyle::RotateHalf,
        _ => return Err(format!("{GGML_ATTENTION} needs style \"adjacent_pairs\" or \"rotate_half\"")),
    };
    Ok((scale, style))
}

impl CustomOp for GgmlAttention {
    fn infer(&self, attrs: &Attrs, ins: &[&Shape]) -> Result<Vec<Shape>, String> {
        parse(attrs)?;
        let [b, s, h, hk, d, _] = check(ins)?;
        let kv = Shape::new(&[b, hk, s, d], DType::F32);
        Ok(vec![Shape::new(&[b, s, h * d], DType::F32), kv.clone(), kv])
    }

    fn eval(&self, attrs: &Attrs, ins: &[&Tensor], outs: &mut [Tensor]) -> Result<(), IrError> {
        let err = |msg: String| IrError::Eval { op: format!("custom.{GGML_ATTENTION}"), msg };
        let (scale, style) = parse(attrs).map_err(err)?;
        let shapes: Vec<Shape> = ins.iter().map(|t| Shape::new(t.shape(), t.dtype())).collect();
        let dims = check(&shapes.iter().collect::<Vec<_>>()).map_err(err)?;
        let f = |i: usize| ins[i].as_slice::<f32>().expect("checked f32");
        let h = |i: usize| ins[i].as_slice::<f16>().unwrap_or(&[]);
        let (kc, vc) = if ins[5].dtype() == DType::F16 { (&[][..], &[][..]) } else { (f(5), f(6)) };
        let x = Operands {
            scale,
            style,
            q: f(0),
            k: f(1),
            v: f(2),
            cos: f(3),
            sin: f(4),
            kc,
            vc,
            kc16: h(5),
            vc16: h(6),
            mask: f(7),
        };
        let [o, kn, vn] = outs else { return Err(err("three results expected".into())) };
        let (o, kn, vn) = (
            o.as_mut_slice::<f32>().expect("f32 result"),
            kn.as_mut_slice::<f32>().expect("f32 result"),
            vn.as_mut_slice::<f32>().expect("f32 result"),
        );
        attention(&x, dims, o, kn, vn, true);
        Ok(())
    }
}

/// [`swiglu`] compiled with FMA and AVX-512.
///
/// # Safety
/// FMA and AVX-512F are available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,fma")]
unsafe fn swiglu_fma(n: usize, g: &[f32], u: &[f32], y: &mut [f32]) {
    swiglu(n, g, u, y)
}

/// [`swiglu`] compiled with AVX2 and FMA (the same results: `mul_add` is one instruction
/// instead of a libm call, the lanes 8 wide).
///
/// # Safety
/// AVX2 and FMA are available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn swiglu_avx2(n: usize, g: &[f32], u: &[f32], y: &mut [f32]) {
    swiglu(n, g, u, y)
}

/// True when the CPU has AVX2 and FMA: the portable forms of these ops are then compiled for
/// them (on a CPU without AVX-512, e.g. AMD Zen 3, `mul_add` was a libm call per element:
/// SmolLM2 `--fast` decode spent 0.55 ms per attention call, 55% of a step).
#[cfg(target_arch = "x86_64")]
fn avx2_fma() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
}

/// [`GGML_SWIGLU`] over rows of `n`.
#[inline(always)]
fn swiglu(n: usize, g: &[f32], u: &[f32], y: &mut [f32]) {
    for ((gr, ur), yr) in g.chunks_exact(n).zip(u.chunks_exact(n)).zip(y.chunks_exact_mut(n)) {
        // Two loops: a single loop with a branch was vectorized computing both branches (libm's
        // expf for every element, measured).
        let v = n - n % L;
        for ((o, &x), &up) in yr[..v].iter_mut().zip(&gr[..v]).zip(&ur[..v]) {
            *o = x / (1.0 + expf_ggml(0.0 - x)) * up;
        }
        for ((o, &x), &up) in yr[v..].iter_mut().zip(&gr[v..]).zip(&ur[v..]) {
            *o = x / (1.0 + (-x).exp()) * up;
        }
    }
}

/// The operands and attrs of one [`GGML_ATTENTION`] evaluation.
struct Operands<'a> {
    scale: f32,
    style: RopeStyle,
    q: &'a [f32],
    k: &'a [f32],
    v: &'a [f32],
    cos: &'a [f32],
    sin: &'a [f32],
    kc: &'a [f32],
    vc: &'a [f32],
    /// The caches when f16 (then `kc`, `vc` are empty): [`flash_f16`]'s arithmetic.
    kc16: &'a [f16],
    vc16: &'a [f16],
    mask: &'a [f32],
}

/// Lanes of ggml's f32 vectors on AVX-512.
const L: usize = 16;
/// Elements per step of `ggml_vec_dot_f32` (four vectors).
const STEP: usize = 4 * L;

/// The attention op: RoPE of `k` into `kn` and the transposed `v` into `vn` here, then one task
/// per (query row, KV group), in parallel ([`parallel_for`]), each writing its heads' outputs.
/// `simd`: take the AVX-512 forms where the CPU has them (the tests compare both; the results
/// are bit-identical).
fn attention(x: &Operands, dims: [usize; 6], o: &mut [f32], kn: &mut [f32], vn: &mut [f32], simd: bool) {
    let [b, s, h, hk, d, c] = dims;
    for bs in 0..b * s {
        let (cr, sr) = (&x.cos[bs * d..][..d], &x.sin[bs * d..][..d]);
        let (bi, si) = (bs / s, bs % s);
        for g in 0..hk {
            let from = (bs * hk + g) * d;
            let to = ((bi * hk + g) * s + si) * d;
            rope(x.style, &x.k[from..from + d], cr, sr, &mut kn[to..to + d]);
            vn[to..to + d].copy_from_slice(&x.v[from..from + d]);
        }
    }
    // The visible key columns of every query row, in position order (in buffers kept between
    // calls on this thread: a warm decode step allocates nothing).
    let n_max = c + s;
    let (mut keys, mut starts) = KEYS.take();
    keys.clear();
    starts.clear();
    starts.push(0);
    for row in 0..b * s {
        let mask = &x.mask[row * n_max..][..n_max];
        keys.extend((0..n_max).filter(|&j| mask[j] != f32::NEG_INFINITY));
        starts.push(keys.len());
    }
    #[cfg(target_arch = "x86_64")]
    let fma = simd
        && std::arch::is_x86_feature_detected!("fma")
        && std::arch::is_x86_feature_detected!("avx512f")
        && std::arch::is_x86_feature_detected!("avx512dq");
    #[cfg(target_arch = "x86_64")]
    let f16c = fma && std::arch::is_x86_feature_detected!("f16c");
    // No AVX-512: the portable forms compiled for AVX2 + FMA (+ F16C), the same arithmetic.
    #[cfg(target_arch = "x86_64")]
    let avx2 = simd && !fma && avx2_fma() && std::arch::is_x86_feature_detected!("f16c");
    #[cfg(not(target_arch = "x86_64"))]
    let fma = {
        let _ = simd;
        false
    };
    // An f16 cache: the new block's rows as the cache will hold them (kept per thread, as
    // the keys).
    let f16_cache = !x.kc16.is_empty();
    let (mut kn16, mut vn16) = NEW16.take();
    if f16_cache {
        kn16.resize(kn.len(), f16::ZERO);
        vn16.resize(vn.len(), f16::ZERO);
        kn16.convert_from_f32_slice(kn);
        vn16.convert_from_f32_slice(vn);
    }
    let t = Task { x, dims, kn, vn, kn16: &kn16, vn16: &vn16, keys: &keys, starts: &starts, out: Out(o.as_mut_ptr()) };
    // One task per (query row, KV group): the group's `H / Hk` query heads read each key and
    // value row once from memory, the others from L1.
    let gd = h / hk * d;
    parallel_for(b * s * hk, &|i| {
        let (row, group) = (i / hk, i % hk);
        // SAFETY: task `i` writes only `o[i·gd .. (i + 1)·gd]` (row-major `[B·S, H, D]`, the
        // group's heads adjacent), which no other task touches, and `o` outlives `parallel_for`.
        let out = unsafe { std::slice::from_raw_parts_mut(t.out.0.add(i * gd), gd) };
        if f16_cache {
            #[cfg(target_arch = "x86_64")]
            if f16c {
                // SAFETY: the features were detected above.
                return unsafe { flash_f16::group_avx512(&t, row, group, out) };
            }
            #[cfg(target_arch = "x86_64")]
            if avx2 {
                // SAFETY: the features were detected above.
                return unsafe { flash_f16::group_avx2(&t, row, group, out) };
            }
            return flash_f16::group::<0>(dot_ggml, &t, row, group, out);
        }
        #[cfg(target_arch = "x86_64")]
        if fma {
            // SAFETY: the features were detected above.
            return unsafe { group_fma(&t, row, group, out) };
        }
        #[cfg(target_arch = "x86_64")]
        if avx2 {
            // SAFETY: the features were detected above.
            return unsafe { group_avx2(&t, row, group, out) };
        }
        group_attention(dot_ggml, &t, row, group, out);
    });
    KEYS.set((keys, starts));
    NEW16.set((kn16, vn16));
}

/// What every task of [`attention`] reads, and the output they write.
struct Task<'a> {
    x: &'a Operands<'a>,
    dims: [usize; 6],
    kn: &'a [f32],
    vn: &'a [f32],
    /// `kn`, `vn` rounded to f16 (an f16 cache; else empty).
    kn16: &'a [f16],
    vn16: &'a [f16],
    /// Visible key columns of query row `r`: `keys[starts[r] .. starts[r + 1]]`.
    keys: &'a [usize],
    starts: &'a [usize],
    out: Out,
}

/// The attention output, written by the tasks at disjoint offsets.
struct Out(*mut f32);
// SAFETY: tasks write disjoint ranges through it (see `attention`).
unsafe impl Sync for Out {}

/// [`group_attention`] compiled with FMA and AVX-512 (the lane loops vectorize; `mul_add` is one
/// instruction instead of a libm call), scores by [`dot_ggml_avx512`].
///
/// # Safety
/// FMA, AVX-512F and AVX-512DQ are available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,fma")]
unsafe fn group_fma(t: &Task, row: usize, g: usize, out: &mut [f32]) {
    // SAFETY: the caller's contract (AVX-512F and FMA).
    group_attention(|a, b| unsafe { dot_ggml_avx512(a, b) }, t, row, g, out)
}

/// [`group_attention`] compiled with AVX2 and FMA, scores by [`dot_ggml_avx2`].
///
/// # Safety
/// AVX2 and FMA are available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn group_avx2(t: &Task, row: usize, g: usize, out: &mut [f32]) {
    // SAFETY: the caller's contract (AVX2 and FMA).
    group_attention(|a, b| unsafe { dot_ggml_avx2(a, b) }, t, row, g, out)
}

/// Attention of query row `row` (`bi·S + si`) for the `H / Hk` heads of KV group `g` (heads
/// `g·H/Hk ..`), into `out` (their `D` values each, head after head). Each head computes
/// exactly as alone; the heads take turns per key (scores) and per output slot, so a key or
/// value row comes from memory once per group.
#[inline(always)]
fn group_attention<'a>(dot: impl Fn(&[f32], &[f32]) -> f32, t: &Task<'a>, row: usize, g: usize, out: &mut [f32]) {
    let (x, [b, s, h, hk, d, c]) = (t.x, t.dims);
    debug_assert!(row < b * s);
    let (bi, gh) = (row / s, h / hk);
    let keys = &t.keys[t.starts[row]..t.starts[row + 1]];
    if keys.is_empty() {
        out.fill(f32::NAN);
        return;
    }
    let mask = &x.mask[row * (c + s)..][..c + s];
    // Key or value row of column `j`: the cache's, or the new block's.
    let at = |j: usize, cache: &'a [f32], new: &'a [f32]| -> &'a [f32] {
        if j < c { &cache[((bi * hk + g) * c + j) * d..][..d] } else { &new[((bi * hk + g) * s + j - c) * d..][..d] }
    };
    // The buffers are taken out of the thread-local for the work and put back after: inside
    // `LocalKey::with`'s closure the loops compiled without the caller's FMA / AVX-512
    // (`mul_add` became a libm call, attention 8x slower).
    let mut sc = SCRATCH.take();
    let Scratch { q, w, acc } = &mut sc;
    let n = keys.len();
    q.resize(gh * d, 0.0);
    for (e, qe) in q.chunks_exact_mut(d).enumerate() {
        let head = g * gh + e;
        rope(x.style, &x.q[(row * h + head) * d..][..d], &x.cos[row * d..][..d], &x.sin[row * d..][..d], qe);
    }
    w.resize(gh * n, 0.0);
    // Scores: w = dot · scale + mask. (Prefetching key rows 4 or 16 keys ahead, and value
    // rows for the output loop, measured within the noise on SmolLM2 decode.)
    for (i, &j) in keys.iter().enumerate() {
        let kr = at(j, x.kc, t.kn);
        prefetch_row(at(j, x.vc, t.vn));
        for (e, qe) in q.chunks_exact(d).enumerate() {
            w[e * n + i] = dot(kr, qe) * x.scale + mask[j];
        }
    }
    for we in w.chunks_exact_mut(n) {
        softmax_ggml(we);
    }
    // Output: per head dim, `ggml_vec_dot_f32` of the value column and the weights over
    // the keys (llama.cpp's key window is padded to 256 cells, or the context size when
    // smaller, with zero weights, so its tail loop runs only for a context that is not a
    // multiple of 64; not emulated). The output's accumulators, `[STEP][D]`: slot `t` takes
    // the `p · v` rows of keys `t, t + 64, …` in that order, so each dim's 64 slots are
    // `ggml_vec_dot_f32`'s lanes. Slot by slot and 16 dims at a time, the accumulator stays in
    // a register over the slot's keys (key by key, every FMA loaded and stored its
    // accumulator: 33–38 → 29 µs per SmolLM2 decode layer from cache).
    acc.resize(gh * STEP * d, 0.0);
    let v_at = |i: usize| at(keys[i], x.vc, t.vn);
    for slot in 0..STEP {
        for (e, we) in w.chunks_exact(n).enumerate() {
            let dst = &mut acc[(e * STEP + slot) * d..][..d];
            let mut c0 = 0;
            while c0 + 8 * L <= d {
                slot_dims::<8>(&v_at, we, slot, c0, dst);
                c0 += 8 * L;
            }
            while c0 + 4 * L <= d {
                slot_dims::<4>(&v_at, we, slot, c0, dst);
                c0 += 4 * L;
            }
            while c0 + L <= d {
                slot_dims::<1>(&v_at, we, slot, c0, dst);
                c0 += L;
            }
            for (dd, a) in dst.iter_mut().enumerate().skip(c0) {
                *a = 0.0;
                for i in (slot..n).step_by(STEP) {
                    *a = v_at(i)[dd].mul_add(we[i], *a);
                }
            }
        }
    }
    for (a, o) in acc.chunks_exact_mut(STEP * d).zip(out.chunks_exact_mut(d)) {
        reduce_rows(a, d, o);
    }
    SCRATCH.set(sc);
}

/// Scores `w` (one head's, one query row's) to softmax weights in place, as ggml's
/// `soft_max_f32` (see the module docs).
#[inline(always)]
fn softmax_ggml(w: &mut [f32]) {
    // The max in 16 lanes after the scores, not in their loop (there it was a dependency chain
    // through every key); a max is exact, so the order does not change it.
    let mut lanes = [f32::NEG_INFINITY; L];
    for grp in w.chunks(L) {
        for (m, &v) in lanes.iter_mut().zip(grp) {
            *m = m.max(v);
        }
    }
    let max = lanes.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
    // Exponentials, and their sum by aligned groups of 16 (f32 tree, f64 total).
    let mut sum = 0f64;
    for grp in w.chunks_mut(L) {
        let mut lanes = [0f32; L];
        for (e, l) in grp.iter_mut().zip(&mut lanes) {
            *e = expf_ggml(*e - max);
            *l = *e;
        }
        sum += hsum16(&lanes) as f64;
    }
    let inv = (1.0 / sum) as f32;
    for e in w.iter_mut() {
        *e *= inv;
    }
}

/// Output slot `slot` of one head in [`group_attention`], dims `c0 .. c0 + 16·C`:
/// `Σ p_i · v_i[dims]` over keys `i = slot, slot + 64, …` in that order, by FMAs from zero, into `dst[dims]` (`C`
/// vectors of accumulators, kept in registers across the keys).
#[inline(always)]
fn slot_dims<'a, const C: usize>(
    v_at: &impl Fn(usize) -> &'a [f32],
    w: &[f32],
    slot: usize,
    c0: usize,
    dst: &mut [f32],
) {
    let mut r = [[0f32; L]; C];
    for i in (slot..w.len()).step_by(STEP) {
        let (p, v) = (w[i], &v_at(i)[c0..c0 + C * L]);
        for (rc, vc) in r.iter_mut().zip(v.chunks_exact(L)) {
            for (a, &vv) in rc.iter_mut().zip(vc) {
                *a = vv.mul_add(p, *a);
            }
        }
    }
    for (rc, out) in r.iter().zip(dst[c0..c0 + C * L].chunks_exact_mut(L)) {
        out.copy_from_slice(rc);
    }
}

/// A task's buffers, kept per thread between calls (an evaluation runs once per layer and
/// step): the rotated query, the scores / weights, and the output's `[STEP][D]` accumulators.
#[derive(Default)]
struct Scratch {
    q: Vec<f32>,
    w: Vec<f32>,
    acc: Vec<f32>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
    /// [`attention`]'s visible key columns and their per-row starts.
    static KEYS: std::cell::RefCell<(Vec<usize>, Vec<usize>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
    /// [`attention`]'s new key and value rows rounded to f16 (an f16 cache).
    static NEW16: std::cell::RefCell<(Vec<f16>, Vec<f16>)> = const { std::cell::RefCell::new((Vec::new(), Vec::new())) };
}

/// Ask for `row`'s cache lines into L2 (no-op off x86_64).
#[inline(always)]
fn prefetch_row<T>(row: &[T]) {
    #[cfg(target_arch = "x86_64")]
    for off in (0..std::mem::size_of_val(row)).step_by(64) {
        // SAFETY: a prefetch of an address inside `row` (it does not fault in any case).
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T1 }>(row.as_ptr().cast::<i8>().add(off))
        };
    }
}

/// RoPE of one head, ggml's rounding (see the module docs).
#[inline(always)]
fn rope(style: RopeStyle, x: &[f32], cos: &[f32], sin: &[f32], y: &mut [f32]) {
    let d = x.len();
    for i in 0..d / 2 {
        let [a, b] = pair(style, d, i);
        let (c, s) = (cos[a], sin[a]);
        let (x0, x1) = (x[a], x[b]);
        y[a] = x0.mul_add(c, -(x1 * s));
        y[b] = x0.mul_add(s, x1 * c);
    }
}

/// ggml's `ggml_vec_dot_f32` on AVX-512: four 16-lane accumulators over steps of 64 elements
/// (accumulator `j` of a step takes elements `16j .. 16j + 16`, by FMAs from zero), combined
/// as `(a0 + a2) + (a1 + a3)`, summed by [`hsum16`]; the last `n % 64` elements are added one
/// by one with FMAs (GCC contracts ggml's `sumf += x[i]*y[i]`).
#[inline(always)]
fn dot_ggml(a: &[f32], b: &[f32]) -> f32 {
    let n = a.len().min(b.len());
    let np = n - n % STEP;
    let mut acc = [[0f32; L]; 4];
    for i in (0..np).step_by(STEP) {
        for (j, lanes) in acc.iter_mut().enumerate() {
            let (x, y) = (&a[i + j * L..][..L], &b[i + j * L..][..L]);
            for ((s, &x), &y) in lanes.iter_mut().zip(x).zip(y) {
                *s = x.mul_add(y, *s);
            }
        }
    }
    let mut sum = reduce4(&acc);
    for i in np..n {
        sum = a[i].mul_add(b[i], sum);
    }
    sum
}

/// [`reduce4`] of every column of `acc` (`[STEP][d]`, rows in slot order) into `out`, row by
/// row so the adds run over whole rows: the same additions, in the same order, per column.
/// `acc` is left holding partial sums.
#[inline(always)]
fn reduce_rows(acc: &mut [f32], d: usize, out: &mut [f32]) {
    let add = |acc: &mut [f32], to: usize, from: usize| {
        let (lo, hi) = acc.split_at_mut(from * d);
        for (a, &b) in lo[to * d..][..d].iter_mut().zip(&hi[..d]) {
            *a += b;
        }
    };
    // (a0 + a2) + (a1 + a3) per lane: rows l, 16 + l, 32 + l, 48 + l.
    for l in 0..L {
        add(acc, l, 2 * L + l);
        add(acc, L + l, 3 * L + l);
        add(acc, l, L + l);
    }
    // hsum16 over rows 0..16: halves, quarters, then (0 + 2) + (1 + 3).
    for i in 0..8 {
        add(acc, i, i + 8);
    }
    for i in 0..4 {
        add(acc, i, i + 4);
    }
    add(acc, 0, 2);
    add(acc, 1, 3);
    add(acc, 0, 1);
    out.copy_from_slice(&acc[..d]);
}

/// [`dot_ggml`] with AVX-512 intrinsics (the lane sum as GCC's `_mm512_reduce_add_ps` does
/// it: halves, quarters, `(0, 2)` and `(1, 3)`, then the two).
///
/// # Safety
/// AVX-512F and FMA are available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,fma")]
unsafe fn dot_ggml_avx512(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let np = n - n % STEP;
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    let mut acc = [_mm512_setzero_ps(); 4];
    let mut i = 0;
    while i < np {
        for (j, s) in acc.iter_mut().enumerate() {
            // SAFETY: `i + 16j + 16 <= np <= n`, inside both slices.
            let (x, y) = unsafe { (_mm512_loadu_ps(pa.add(i + j * L)), _mm512_loadu_ps(pb.add(i + j * L))) };
            *s = _mm512_fmadd_ps(x, y, *s);
        }
        i += STEP;
    }
    // SAFETY: the caller's contract (AVX-512F, AVX-512DQ).
    let mut sum = unsafe { reduce4_avx512(acc) };
    for k in np..n {
        sum = a[k].mul_add(b[k], sum);
    }
    sum
}

/// [`dot_ggml`] with AVX2 intrinsics, bit-identical: each 16-lane accumulator of the portable
/// form as two 8-lane registers, and [`reduce4`] / [`hsum16`]'s additions in their order (the
/// portable form compiled for AVX2 kept its 16 lanes in memory: SmolLM2 `--fast` decode on a
/// Zen 3 core spent 2.3 ms per token in `ggml_attention`).
///
/// # Safety
/// AVX2 and FMA are available.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_ggml_avx2(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::*;
    let n = a.len().min(b.len());
    let np = n - n % STEP;
    let (pa, pb) = (a.as_ptr(), b.as_ptr());
    // `acc[j][h]`: lanes `8 h .. 8 h + 8` of the portable form's accumulator `j`.
    let mut acc = [[_mm256_setzero_ps(); 2]; 4];
    let mut i = 0;
    while i < np {
        for (j, s) in acc.iter_mut().enumerate() {
            for (h, s) in s.iter_mut().enumerate() {
                let o = i + j * L + 8 * h;
                // SAFETY: `o + 8 <= np <= n`, inside both slices.
                let (x, y) = unsafe { (_mm256_loadu_ps(pa.add(o)), _mm256_loadu_ps(pb.add(o))) };
                *s = _mm256_fmadd_ps(x, y, *s);
            }
        }
        i += STEP;
    }
    // reduce4: (a0 + a2) + (a1 + a3) lane by lane; hsum16: t8 = x[8..] + x[..8], t4 = t8[4..] +
    // t8[..4], then (t4[0] + t4[2]) + (t4[1] + t4[3]).
    let lanes: [__m256; 2] = std::array::from_fn(|h| {
        _mm256_add_ps(_mm256_add_ps(acc[0][h], acc[2][h]), _mm256_add_ps(acc[1][h], acc[3][h]))
    });
    let t8 = _mm256_add_ps(lanes[1], lanes[0]);
    let t4 = _mm_add_ps(_mm256_extractf128_ps::<1>(t8), _mm256_castps256_ps128(t8));
    let t2 = _mm_add_ps(t4, _mm_movehl_ps(t4, t4));
    let mut sum = _mm_cvtss_f32(_mm_add_ss(t2, _mm_movehdup_ps(t2)));
    for k in np..n {
        sum = a[k].mul_add(b[k], sum);
    }
    sum
}

/// [`reduce4`] on AVX-512 registers: `(a0 + a2) + (a1 + a3)`, then the lane sum in
/// `_mm512_reduce_add_ps`'s order (halves, quarters, `(0, 2)` and `(1, 3)`, then the two).
///
/// # Safety
/// AVX-512F and AVX-512DQ are available.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn reduce4_avx512(acc: [std::arch::x86_64::__m512; 4]) -> f32 {
    use std::arch::x86_64::*;
    // SAFETY: register-only intrinsics of the caller's features.
    unsafe {
        let r = _mm512_add_ps(_mm512_add_ps(acc[0], acc[2]), _mm512_add_ps(acc[1], acc[3]));
        let t8 = _mm256_add_ps(_mm512_extractf32x8_ps::<1>(r), _mm512_castps512_ps256(r));
        let t4 = _mm_add_ps(_mm256_extractf128_ps::<1>(t8), _mm256_castps256_ps128(t8));
        let t2 = _mm_add_ps(t4, _mm_shuffle_ps::<0b01_00_11_10>(t4, t4));
        _mm_cvtss_f32(_mm_add_ss(t2, _mm_shuffle_ps::<0b01>(t2, t2)))
    }
}

/// `ggml_vec_dot_f32`'s end: `(a0 + a2) + (a1 + a3)` lane by lane, then [`hsum16`].
#[inline(always)]
fn reduce4(acc: &[[f32; L]; 4]) -> f32 {
    let lanes: [f32; L] = std::array::from_fn(|l| (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]));
    hsum16(&lanes)
}

/// The sum of 16 lanes in the order of GCC's `_mm512_reduce_add_ps`: halves, quarters, then
/// the pairs `(0, 2)` and `(1, 3)`, then the two.
#[inline(always)]
fn hsum16(x: &[f32; L]) -> f32 {
    let mut t8 = [0f32; 8];
    for i in 0..8 {
        t8[i] = x[i + 8] + x[i];
    }
    let mut t4 = [0f32; 4];
    for i in 0..4 {
        t4[i] = t8[i + 4] + t8[i];
    }
    (t4[0] + t4[2]) + (t4[1] + t4[3])
}

/// `exp(x)` as ggml's AVX-512 `ggml_v_expf` computes each lane: `n = round(x·log2 e)` by the
/// 1.5·2²³ shift, `b = x - n·ln 2` in two FMAs, a degree-5 polynomial in `b` evaluated as
/// ggml nests it, scaled by `2ⁿ` with one rounding (`vscalefps`); `|n| > 192` gives `+inf`
/// or 0. Constants: ggml's, as f32 bit patterns.
#[inline(always)]
fn expf_ggml(x: f32) -> f32 {
    let c = f32::from_bits;
    let shift = c(0x4b40_0000); // 0x1.8p23
    let z = x.mul_add(c(0x3fb8_aa3b), shift);
    let n = z - shift;
    let b = (-n).mul_add(c(0x35bf_be8e), (-n).mul_add(c(0x3f31_7200), x));
    if n.abs() > 192.0 {
        return if n <= 0.0 { 0.0 } else { f32::INFINITY };
    }
    let u = b * b;
    let hi = c(0x3c07_2010).mul_add(b, c(0x3d2b_9f17));
    let mid = c(0x3e2a_af33).mul_add(b, c(0x3eff_fedb));
    let lo = c(0x3f7f_fff6).mul_add(b, 1.0);
    let j = hi.mul_add(u, mid).mul_add(u, lo);
    // j · 2ⁿ with one rounding: exact in f64 (|n| ≤ 192, 2ⁿ built from its exponent bits),
    // then rounded to f32 once.
    (j as f64 * f64::from_bits(((n as i64 + 1023) as u64) << 52)) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `expf_ggml` is an `exp` (within ggml's stated 1.5 ulp-ish accuracy) and handles the ends.
    #[test]
    fn expf_ggml_is_exp() {
        let mut worst = 0f64;
        for i in -20000..=20000 {
            let x = i as f32 * 0.0043;
            let want = (x as f64).exp();
            let got = expf_ggml(x) as f64;
            worst = worst.max(((got - want) / want).abs());
        }
        assert!(worst < 4e-7, "relative error {worst}");
        assert_eq!(expf_ggml(f32::NEG_INFINITY), 0.0);
        assert_eq!(expf_ggml(-200.0), 0.0);
        assert_eq!(expf_ggml(0.0), 1.0);
    }

    /// Deterministic values in [-1, 1).
    fn vals(n: usize, seed: usize) -> Vec<f32> {
        (0..n).map(|i| (((i * 7919 + seed * 104_729) % 2003) as f32 / 1001.5) - 1.0).collect()
    }

    fn t(v: Vec<f32>, d: &[usize]) -> Tensor {
        Tensor::from_vec(v, d).unwrap()
    }

    /// The operands of an attention test case (`[B, S, H, Hk, D, C]`, each batch row's cached
    /// length): deterministic values, llama.cpp's RoPE tables for each row's positions, and the
    /// causal mask over the visible cache columns and the new block.
    struct Case {
        q: Vec<f32>,
        k: Vec<f32>,
        v: Vec<f32>,
        kc: Vec<f32>,
        vc: Vec<f32>,
        cos: Vec<f32>,
        sin: Vec<f32>,
        mask: Vec<f32>,
    }

    fn case([b, s, h, hk, d, c]: [usize; 6], past: [usize; 2]) -> Case {
        let (mut cos, mut sin) = (vec![0f32; b * s * d], vec![0f32; b * s * d]);
        for (r, &p) in past.iter().enumerate() {
            let at = r * s * d..(r + 1) * s * d;
            rope_tables_ggml(10000.0, 1.0, RopeStyle::AdjacentPairs, d, p, &mut cos[at.clone()], &mut sin[at]);
        }
        let mut mask = vec![f32::NEG_INFINITY; b * s * (c + s)];
        for (r, &p) in past.iter().enumerate() {
            for i in 0..s {
                let row = &mut mask[(r * s + i) * (c + s)..][..c + s];
                row[..p].fill(0.0);
                row[c..=c + i].fill(0.0);
            }
        }
        Case {
            q: vals(b * s * h * d, 1),
            k: vals(b * s * hk * d, 2),
            v: vals(b * s * hk * d, 3),
            kc: vals(b * hk * c * d, 4),
            vc: vals(b * hk * c * d, 5),
            cos,
            sin,
            mask,
        }
    }

    /// The op on `cs` with its caches rounded to f16 (scale 0.125, adjacent pairs): the
    /// attention output and `k_new`. The output starts as ones, so a row left unwritten shows.
    fn run_f16_cache(cs: &Case, [b, s, h, hk, d, c]: [usize; 6], simd: bool) -> (Vec<f32>, Vec<f32>) {
        let to16 = |v: &[f32]| -> Vec<f16> { v.iter().map(|&x| f16::from_f32(x)).collect() };
        let (kc16, vc16) = (to16(&cs.kc), to16(&cs.vc));
        let x = Operands {
            scale: 0.125,
            style: RopeStyle::AdjacentPairs,
            q: &cs.q,
            k: &cs.k,
            v: &cs.v,
            cos: &cs.cos,
            sin: &cs.sin,
            kc: &[],
            vc: &[],
            kc16: &kc16,
            vc16: &vc16,
            mask: &cs.mask,
        };
        let (mut o, mut kn, mut vn) = (vec![1f32; b * s * h * d], vec![0f32; cs.k.len()], vec![0f32; cs.v.len()]);
        attention(&x, [b, s, h, hk, d, c], &mut o, &mut kn, &mut vn, simd);
        (o, kn)
    }

    /// One query row's attention in f64 over `(key, value)` rows, the scale the tests use
    /// (0.125): `Σ softmax(q·k · 0.125) v`.
    fn f64_attention(q: &[f64], keys: &[(Vec<f64>, Vec<f64>)]) -> Vec<f64> {
        let sc: Vec<f64> =
            keys.iter().map(|(kr, _)| kr.iter().zip(q).map(|(a, b)| a * b).sum::<f64>() * 0.125).collect();
        let m = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = sc.iter().map(|x| (x - m).exp()).collect();
        let z: f64 = e.iter().sum();
        (0..q.len()).map(|dd| keys.iter().zip(&e).map(|((_, vr), p)| vr[dd] * p / z).sum()).collect()
    }

    /// The op against plain f64 attention (RoPE from the same tables, softmax, GQA, a cache
    /// part and a causal new block, batch rows of different lengths): the same function, only
    /// the rounding differs.
    #[test]
    fn attention_matches_f64_attention() {
        // The second case: more keys than the 64 output slots (up to 153 per row) and a head
        // dim that is not a multiple of 16.
        for (b, s, h, hk, d, c, past) in [(2, 3, 4, 2, 32, 5, [2usize, 5]), (2, 3, 4, 2, 40, 150, [70, 150])] {
            let Case { q, k, v, kc, vc, cos, sin, mask } = case([b, s, h, hk, d, c], past);
            let ins = [
                t(q.clone(), &[b, s, h, d]),
                t(k.clone(), &[b, s, hk, d]),
                t(v.clone(), &[b, s, hk, d]),
                t(cos.clone(), &[b * s, d]),
                t(sin.clone(), &[b * s, d]),
                t(kc.clone(), &[b, hk, c, d]),
                t(vc.clone(), &[b, hk, c, d]),
                t(mask.clone(), &[b, s, c + s]),
            ];
            let a = attrs(0.125, RopeStyle::AdjacentPairs);
            let shapes: Vec<Shape> = ins.iter().map(|x| Shape::new(x.shape(), x.dtype())).collect();
            let outs_t = GgmlAttention.infer(&a, &shapes.iter().collect::<Vec<_>>()).unwrap();
            let mut outs: Vec<Tensor> =
                outs_t.iter().map(|x| Tensor::zeros(&x.static_dims().unwrap(), x.dtype)).collect();
            GgmlAttention.eval(&a, &ins.iter().collect::<Vec<_>>(), &mut outs).unwrap();
            let o = outs[0].as_slice::<f32>().unwrap();
            // f64 reference.
            let rope = |x: &[f32], row: usize| -> Vec<f64> {
                let mut y = vec![0f64; d];
                for i in 0..d / 2 {
                    let (cs, sn) = (cos[row * d + 2 * i] as f64, sin[row * d + 2 * i] as f64);
                    let (x0, x1) = (x[2 * i] as f64, x[2 * i + 1] as f64);
                    y[2 * i] = x0 * cs - x1 * sn;
                    y[2 * i + 1] = x0 * sn + x1 * cs;
                }
                y
            };
            let mut worst = 0f64;
            for (bi, &pb) in past.iter().enumerate() {
                for si in 0..s {
                    let row = bi * s + si;
                    for head in 0..h {
                        let g = head / (h / hk);
                        let qr = rope(&q[(row * h + head) * d..][..d], row);
                        let mut keys: Vec<(Vec<f64>, Vec<f64>)> = (0..pb)
                            .map(|j| {
                                let at = ((bi * hk + g) * c + j) * d;
                                (
                                    kc[at..at + d].iter().map(|&x| x as f64).collect(),
                                    vc[at..at + d].iter().map(|&x| x as f64).collect(),
                                )
                            })
                            .collect();
                        for j in 0..=si {
                            let at = ((bi * s + j) * hk + g) * d;
                            keys.push((
                                rope(&k[at..at + d], bi * s + j),
                                v[at..at + d].iter().map(|&x| x as f64).collect(),
                            ));
                        }
                        for (dd, want) in f64_attention(&qr, &keys).into_iter().enumerate() {
                            worst = worst.max((o[(row * h + head) * d + dd] as f64 - want).abs());
                        }
                    }
                }
            }
            assert!(worst < 1e-5, "largest difference from f64 attention {worst}");
            // k_new is k after RoPE, transposed to [B, Hk, S, D]; v_new is v transposed.
            let (kn, vn) = (outs[1].as_slice::<f32>().unwrap(), outs[2].as_slice::<f32>().unwrap());
            let (from, to) = (((s + 2) * hk + 1) * d, ((hk + 1) * s + 2) * d);
            assert_eq!(&vn[to..to + d], &v[from..from + d]);
            let want = rope(&k[from..from + d], s + 2);
            assert!(kn[to..to + d].iter().zip(&want).all(|(a, b)| (*a as f64 - b).abs() < 1e-6));
        }
    }

    /// The f16-cache path (llama.cpp's flash attention, `flash_f16`) against f64 attention over
    /// the same f16-rounded query, keys and values: the GQA mapping, the visible keys and their
    /// order, a head dim of 64 (AVX-512 accumulators in registers, 5 heads per group: a chunk of
    /// 4 and one of 1), of 128 (scores over two 64-element steps) and of 40 (the other paths),
    /// one-token and several-token steps. The f16 accumulator rounds after each of a row's `n`
    /// keys, each rounding off by at most 2⁻¹¹ of a value bounded by `max |v|` (after the
    /// division by the sum), hence the bound. The portable path must give the same bits as the
    /// AVX-512 one.
    #[test]
    fn f16_cache_attention_matches_f64_and_portable() {
        let r16 = |x: f32| f16::from_f32(x).to_f32() as f64;
        for (b, s, h, hk, d, c, past) in
            [(2, 1, 10, 2, 64, 150, [70usize, 150]), (2, 3, 4, 2, 40, 20, [7, 20]), (2, 2, 6, 2, 128, 37, [37, 5])]
        {
            let cs = case([b, s, h, hk, d, c], past);
            let Case { q, v, kc, vc, cos, sin, .. } = &cs;
            let run = |simd| run_f16_cache(&cs, [b, s, h, hk, d, c], simd);
            let ((o, kn), (o_portable, _)) = (run(true), run(false));
            assert!(
                o.iter().zip(&o_portable).all(|(a, p)| a.to_bits() == p.to_bits()),
                "the vector (AVX-512 or AVX2) and portable forms differ"
            );
            let mut worst = 0f64;
            for (bi, &pb) in past.iter().enumerate() {
                for si in 0..s {
                    let row = bi * s + si;
                    for head in 0..h {
                        let g = head / (h / hk);
                        // The query after RoPE as the op rounds it (its own f32 RoPE, then f16).
                        let mut qr = vec![0f32; d];
                        rope(
                            RopeStyle::AdjacentPairs,
                            &q[(row * h + head) * d..][..d],
                            &cos[row * d..][..d],
                            &sin[row * d..][..d],
                            &mut qr,
                        );
                        let qr: Vec<f64> = qr.iter().map(|&x| r16(x)).collect();
                        let mut keys: Vec<(Vec<f64>, Vec<f64>)> = (0..pb)
                            .map(|j| {
                                let at = ((bi * hk + g) * c + j) * d;
                                (
                                    kc[at..at + d].iter().map(|&x| r16(x)).collect(),
                                    vc[at..at + d].iter().map(|&x| r16(x)).collect(),
                                )
                            })
                            .collect();
                        for j in 0..=si {
                            let (from, to) = (((bi * s + j) * hk + g) * d, ((bi * hk + g) * s + j) * d);
                            keys.push((
                                kn[to..to + d].iter().map(|&x| r16(x)).collect(),
                                v[from..from + d].iter().map(|&x| r16(x)).collect(),
                            ));
                        }
                        let bound = keys.len() as f64 * 2f64.powi(-11);
                        for (dd, want) in f64_attention(&qr, &keys).into_iter().enumerate() {
                            worst = worst.max((o[(row * h + head) * d + dd] as f64 - want).abs() / bound);
                        }
                    }
                }
            }
            // |v| < 1 here: the bound is n · 2⁻¹¹.
            assert!(worst <= 1.0, "difference from f64 attention {worst} × the f16 rounding bound");
            eprintln!("d = {d}: largest difference {worst:.4} × n · 2⁻¹¹");
        }
    }

    /// A query row that sees no key (all `-inf` mask) gives zeros with an f16 cache, as
    /// llama.cpp's flash attention (`S == 0`), on both paths and without a panic.
    #[test]
    fn f16_cache_attention_of_a_row_with_no_key_is_zero() {
        let ([b, s, h, hk, d, c], past) = ([2, 1, 2, 1, 64, 4], [3, 0]);
        let mut cs = case([b, s, h, hk, d, c], past);
        cs.mask.fill(f32::NEG_INFINITY);
        for simd in [true, false] {
            let (o, _) = run_f16_cache(&cs, [b, s, h, hk, d, c], simd);
            assert!(o.iter().all(|&y| y == 0.0), "simd {simd}: {:?}", &o[..4]);
        }
    }

    #[test]
    fn attention_rejects_bad_operands() {
        let f = |d: &[usize]| Shape::new(d, DType::F32);
        let good = [
            f(&[1, 1, 4, 8]),
            f(&[1, 1, 2, 8]),
            f(&[1, 1, 2, 8]),
            f(&[1, 8]),
            f(&[1, 8]),
            f(&[1, 2, 3, 8]),
            f(&[1, 2, 3, 8]),
            f(&[1, 1, 4]),
        ];
        let a = attrs(0.5, RopeStyle::RotateHalf);
        assert!(GgmlAttention.infer(&a, &good.iter().collect::<Vec<_>>()).is_ok());
        let mut bad = good.clone();
        bad[7] = f(&[1, 1, 5]);
        let e = GgmlAttention.infer(&a, &bad.iter().collect::<Vec<_>>()).unwrap_err();
        assert!(e.contains("mask"), "{e}");
        let mut bad = good.clone();
        bad[1] = f(&[1, 1, 3, 8]);
        bad[2] = f(&[1, 1, 3, 8]);
        bad[5] = f(&[1, 3, 3, 8]);
        bad[6] = f(&[1, 3, 3, 8]);
        let e = GgmlAttention.infer(&a, &bad.iter().collect::<Vec<_>>()).unwrap_err();
        assert!(e.contains("multiple"), "{e}");
        assert!(GgmlAttention.infer(&Attrs::new(), &good.iter().collect::<Vec<_>>()).is_err());
    }

    /// RMSNorm and SwiGLU against f64 formulas (rounding only), and their operand checks.
    #[test]
    fn rms_norm_and_swiglu_match_f64() {
        let (rows, n) = (3, 40);
        let (x, w) = (vals(rows * n, 7), vals(n, 8));
        let a: Attrs = [("eps".to_string(), Attr::Float(1e-5))].into_iter().collect();
        let mut y = [Tensor::zeros(&[rows, n], DType::F32)];
        GgmlRmsNorm.eval(&a, &[&t(x.clone(), &[rows, n]), &t(w.clone(), &[n])], &mut y).unwrap();
        for (r, yr) in y[0].as_slice::<f32>().unwrap().chunks(n).enumerate() {
            let xr = &x[r * n..][..n];
            let ms = xr.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / n as f64;
            for ((&o, &v), &g) in yr.iter().zip(xr).zip(&w) {
                let want = v as f64 / (ms + 1e-5).sqrt() * g as f64;
                assert!((o as f64 - want).abs() <= 1e-6 * (1.0 + want.abs()), "{o} vs {want}");
            }
        }
        let (g, u) = (vals(rows * n, 9).iter().map(|v| v * 8.0).collect::<Vec<_>>(), vals(rows * n, 10));
        GgmlSwiglu.eval(&Attrs::new(), &[&t(g.clone(), &[rows, n]), &t(u.clone(), &[rows, n])], &mut y).unwrap();
        for ((&o, &gv), &uv) in y[0].as_slice::<f32>().unwrap().iter().zip(&g).zip(&u) {
            let want = gv as f64 / (1.0 + (-(gv as f64)).exp()) * uv as f64;
            assert!((o as f64 - want).abs() <= 1e-6 * (1.0 + want.abs()), "{o} vs {want}");
        }
        let f = |d: &[usize]| Shape::new(d, DType::F32);
        assert!(GgmlRmsNorm.infer(&a, &[&f(&[2, 4]), &f(&[5])]).is_err());
        assert!(GgmlRmsNorm.infer(&Attrs::new(), &[&f(&[2, 4]), &f(&[4])]).is_err());
        assert!(GgmlSwiglu.infer(&Attrs::new(), &[&f(&[2, 4]), &f(&[2, 5])]).is_err());
    }

    /// The intrinsic form and the portable form of `ggml_vec_dot_f32` agree bit for bit
    /// (lengths with and without a tail), and both are dot products.
    #[test]
    fn dot_forms_agree() {
        for n in [16, 64, 80, 128, 200] {
            let (a, b) = (vals(n, 11), vals(n, 12));
            let p = dot_ggml(&a, &b);
            let want: f64 = a.iter().zip(&b).map(|(x, y)| *x as f64 * *y as f64).sum();
            assert!((p as f64 - want).abs() < 1e-5, "{p} vs {want}");
            #[cfg(target_arch = "x86_64")]
            if std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("avx512dq") {
                // SAFETY: detected just above.
                assert_eq!(unsafe { dot_ggml_avx512(&a, &b) }.to_bits(), p.to_bits(), "n = {n}");
            }
            #[cfg(target_arch = "x86_64")]
            if avx2_fma() {
                // SAFETY: detected just above.
                assert_eq!(unsafe { dot_ggml_avx2(&a, &b) }.to_bits(), p.to_bits(), "n = {n}");
            }
        }
    }

    /// The row-wise reduction of the output's accumulators adds in `reduce4`'s order, column by
    /// column, bit for bit (the two spell one order twice).
    #[test]
    fn reduce_rows_is_reduce4_per_column() {
        let d = 24;
        let acc: Vec<f32> =
            vals(STEP * d, 13).iter().enumerate().map(|(i, v)| v * (1.0 + (i % 7) as f32 * 1e3)).collect();
        let mut out = vec![0f32; d];
        reduce_rows(&mut acc.clone(), d, &mut out);
        for (dd, y) in out.iter().enumerate() {
            let lanes: [[f32; L]; 4] = std::array::from_fn(|st| std::array::from_fn(|l| acc[(st * L + l) * d + dd]));
            assert_eq!(y.to_bits(), reduce4(&lanes).to_bits(), "column {dd}");
        }
    }

    #[test]
    fn hsum16_is_a_sum() {
        let x: [f32; 16] = std::array::from_fn(|i| i as f32 * 0.5);
        assert_eq!(hsum16(&x), 60.0);
    }
}
