//! Native kernel of the `dequant_matmul` composite (`x[.., K] @ Wᵀ`, `W: [N, K]` packed as
//! GGUF blocks, see `rlx_ir::compose::quant`): the weights stay packed in memory and are never
//! dequantized as a whole.
//!
//! Two modes, chosen by `CpuOptions::quantized_activations`:
//!
//! - **Exact** (default): `x_f32 · dequant(W)ᵀ` up to f32 rounding (the dequantized weights
//!   are bit-identical with `rlx_gguf::quants::dequantize_into` where they are formed; the
//!   summation order differs from the composite's f32 body). Paths:
//!   - `fused` (M <= [`FUSED_ROWS`], AVX-512, Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/Q4_K/Q5_K/Q6_K, one
//!     activation row after another): no dequantized weights in memory. With VNNI:
//!     integer dots of the quants against the activation row held as 22- (Q8_0: 21-) bit block
//!     floating point, one rounding per block ([`bfp`]; 1 × 4096 × 4096 Q4_1 from DRAM, 1
//!     core: 1.27–1.30 ms with the f32 kernel, 0.88–0.90 on blocks); a row with a non-finite
//!     or very small block, and every row without VNNI, runs the f32 kernel: 16 dequantized
//!     weights per register, FMA'd against `x`, 4 weight rows at a time sharing the
//!     activation loads ([`decode::dot_rows`], per-(sub-)block `Σx` computed once per call;
//!     Q5_0 / Q5_1 one row at a time through [`exact::dot_row`]). Q5_0 / Q5_1 ran `rowwise`
//!     before: 1 × 4096 × 4096 Q5_0 from DRAM, 1 core (AMD Zen 4), 20.0 → 1.04–1.07 ms; `tile`
//!     64 rows 92 → 22.4 ms. Q6_K on the f32 kernel before: 2.37–2.42 → 0.78 ms (same host).
//!   - `tile` (M > 1): a tile of weight rows (at most [`TILE_BYTES`] of f32, so it stays in L2)
//!     is dequantized once into per-thread scratch (in registers for the schemes above, with
//!     `dequantize_into` for the others), so each weight is dequantized once per call, not once
//!     per activation row, and multiplied with all M activation rows by our [`sgemm`] as
//!     `tile · xᵀ` (`xᵀ` packed once per call; the tile's rows spaced by
//!     [`sgemm::in_place_stride`] so it is read in place, never copied or transposed; the
//!     `[tile, M]` result written transposed into `y`; up to [`EDGE_ROWS`] activation rows
//!     past the last whole panel of `sgemm::NR` are dotted with the tile's rows along `K`
//!     instead, every FMA lane busy: 896 × 4864 Q5_0, M = 133, 1 core, 95.7 → 99.5 GFLOP/s,
//!     M = 35 70 → 91), or by the `gemm` crate where the
//!     decoders or sgemm cannot run. 64 x 4096 x 4096 Q4_K / Q8_0, 1 thread, interleaved
//!     runs: 38-50 ms with the `gemm` crate, 20-23 ms now (llama.cpp: 22 ms for Q4_K).
//!   - `bfp_panel` (M >= [`amx::MIN_M`], AVX-512 VNNI, Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q4_K /
//!     Q5_K): instead of `tile`, the activation rows as block floating point (the `fused` path's
//!     digits, 21 bits for the 5-bit schemes) against the weights unpacked into bytes, in
//!     [`amx`]'s 16 × 16 panels with one `vpdpbusd` per digit plane ([`bfp_panel`]): 128 × 896 ×
//!     4864 Q5_0, 1 Zen 4 core, 10.8–11.0 → 9.0–9.1 ms; Qwen2.5-0.5B exact pp128 0.98× →
//!     1.16× llama.cpp. A call with a non-finite or very small block runs `tile`.
//!   - On CPUs with AVX2 but no AVX-512, `fused` and `tile` run the 8-lane decoders of
//!     [`exact_avx2`] (`dequant_matmul_fused_avx2`, `dequant_matmul_tile_avx2` on our
//!     [`sgemm`]'s AVX2 kernel, on the `gemm` crate before session 45); SmolLM2 decode on one AMD Zen 3 core went from 185 ms per token (`rowwise`) to
//!     16 ms. Q4_0 / Q4_1 / Q5_0 / Q5_1 decode rows of whole pairs of blocks and Q4_K / Q5_K /
//!     Q6_K decode run [`bfp_avx2`] instead (`dequant_matmul_fused_avx2_bfp`: [`bfp`]'s block
//!     floating point on `vpmaddubsw`): SmolLM2's Q4_1 products 1667 → 857 ms over 127 decode
//!     steps, one Zen 3 core; 896 × 4864 from DRAM, Q5_0 0.655–0.680 → 0.402–0.425 ms, Q6_K
//!     0.75 → 0.50–0.55, Q4_K 0.67 → 0.32–0.39.
//!   - `rowwise` (M = 1 otherwise: other schemes, or neither AVX-512 nor AVX2): one weight row
//!     at a time is dequantized into scratch by `dequantize_into` and dotted in f32.
//! - **Fast** (opt-in): integer dots against quantized activations, as llama.cpp: Q8_0, Q4_0,
//!   Q4_1, Q5_0 and Q5_1 against Q8_0 activations ([`int8`]), Q4_K, Q5_K and Q6_K against Q8_K ([`q8k`]),
//!   in `R × C` register tiles (weight rows × activation rows), or with at least
//!   [`amx::MIN_M`] activation rows in panels of 16 weight rows × 16 activation rows
//!   ([`amx`]): on AMX tiles where the CPU has AMX-INT8, else with `vpdpbusd` (64 × 4096 ×
//!   4096 from DRAM, 1 core, AMD Zen 4, against the register tiles: Q4_K 19.0–19.8 → 8.8–12.0
//!   ms, Q4_0 22.7 → 8.3–9.8, Q6_K 17.6–22.9 → 13.3–17.2); other schemes run exact. Without
//!   VNNI, Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0 decode (M up to [`FUSED_ROWS`]) runs [`int8_avx2`]'s
//!   `vpmaddubsw` dot, and the rest runs exact.
//!   Results differ from the f32 reference by the activation quantization error.
//!
//! Weights in `rlx_gguf::Layout::SplitRows` (Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0, attribute `"layout"`; what the model
//! runner uses in both modes) run on the same paths with the same results: the VNNI, AMX and
//! block floating point kernels and the exact mode's tile decoder read them natively
//! ([`int8::tile_split`], [`bfp`], [`exact`]); the fast mode without VNNI and the exact
//! decode's f32 kernel convert 16 rows at a time back into blocks. Split rows cut the block
//! floating point kernel's per-row work (two 32-byte scale loads instead of a gather, one
//! 64-byte load per four blocks): SmolLM2's 1 × 576 × 1536 Q4_1 from L2, 1 core, 0.035–0.037
//! → 0.027 ms, 1 × 1536 × 576 0.028 → 0.020 (the f32 kernel on blocks: 0.030 and 0.030).
//!
//! `dequant_matmul_rows` (attribute `"row_start"`): every path reads its `n` rows in place
//! inside the larger `[R, row_bytes]` operand (one joined Q/K/V or gate/up weight feeding one
//! product per part); the rows are checked inside the operand when the kernel is planned.
//!
//! Work split: output columns (weight rows) in chunks across threads when `M · N · K` is large
//! (the executor's spinning team, [`super::spin`], else rayon); in the `tile` path one contiguous range of rows per thread. Per-kernel state is
//! allocated by [`select`]; working buffers (tiles, converted activations, joined rows) are one
//! set per thread ([`Work`], [`JOIN`]), grown when a thread first runs a larger kernel, so a
//! warm [`run`] allocates nothing.

mod amx;
mod bfp;
#[cfg(target_arch = "x86_64")]
mod bfp_avx2;
#[cfg(target_arch = "x86_64")]
mod bfp_panel;
mod decode;
mod exact;
#[cfg(target_arch = "x86_64")]
mod exact_avx2;
mod int8;
#[cfg(target_arch = "x86_64")]
mod int8_avx2;
mod q8k;

use super::scratch::grown;
use super::sgemm;
use super::spin::{self, SyncPtr as OutPtr};
use crate::CpuOptions;
use rlx_gguf::GgmlType;
use rlx_gguf::layout::{Layout, dequantize_rows, split_row_to_blocks};
use rlx_ir::ops::Composite;
use rlx_ir::{DType, IrError, Tensor};

/// The composite name this module runs.
pub const NAME: &str = "dequant_matmul";

/// `M · N · K` from which the rows are split across threads (a decode step's K/V projections,
/// 192 x 576, are split: on the spinning team a hand-off costs far less than half of them).
const PAR_WORK: usize = 1 << 16;
/// Products on the `fused`, `q8` and `rowwise` paths (decode steps, short prompts) with fewer
/// weight bytes than this run one chunk of weight rows per thread, larger ones two (claimed
/// dynamically, so a late or slower thread takes fewer). A chunk restarts its thread's weight stream (the first rows wait on DRAM before the
/// prefetches ahead cover them), which costs more than the balance buys on SmolLM2's 0.07–0.55
/// MB products; Qwen2.5-0.5B's 2.4–3.5 MB FFN products keep two.
const ONE_CHUNK_BYTES: usize = 1 << 20;
/// Activation rows up to which the exact mode runs the `fused` path once per row instead of
/// the `tile` path: dequantizing every weight to f32 once costs about as much as ~10 fused
/// passes over the packed weights (SmolLM2, 10-token prompt: 155 ms of `tile` products vs
/// ~12 ms per fused pass; 4096 × 4096 Q4_0: ~15 ms vs 1.5 ms).
const FUSED_ROWS: usize = 8;
/// Bytes of dequantized f32 weights per tile of the `tile` path (L2 is 2 MiB per core on the
/// reference machine; the gemm packs x and the tile next to it).
pub const TILE_BYTES: usize = 1 << 20;
/// Activation rows past the last whole `sgemm::NR` panel up to which the `tile` path dots them
/// with the tile's rows instead of running a narrow panel.
const EDGE_ROWS: usize = 8;
/// Weight rows in `Layout::SplitRows` converted back into blocks at a time, per chunk, where
/// the fast mode runs without VNNI (the VNNI and AMX kernels read split rows).
const JOIN_ROWS: usize = 16;

/// How the products are done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Path {
    /// Integer dot against Q8_0 activations (fast mode), with [`int8::simd_level`].
    Q8(u8),
    /// Fast mode on AMX tiles (M >= [`amx::MIN_M`]).
    Amx,
    /// Fast mode, M >= [`amx::MIN_M`], without AMX: [`amx`]'s 16 × 16 panels with VNNI
    /// products.
    Panel,
    /// No dequantized weights in memory, one activation row at a time (up to [`FUSED_ROWS`]):
    /// [`bfp`]'s integer dots (with VNNI), else in-register dequantization
    /// and FMA ([`decode`]).
    Fused,
    /// Tiles of dequantized weight rows, then gemm (M > 1).
    Tile,
    /// Exact mode, M >= [`amx::MIN_M`], VNNI, [`bfp_panel`]'s schemes: block floating point
    /// activations in [`amx`]'s 16 × 16 panels, three `vpdpbusd` per group of 4 values; a call
    /// it cannot convert runs `Tile` (planned alongside).
    BfpPanel,
    /// One `dequantize_into` row at a time, f32 dot.
    Rowwise,
}

/// A planned `dequant_matmul` with its scratch space.
#[derive(Clone, Debug)]
pub struct QMatmulKernel {
    ty: GgmlType,
    /// The weights' byte layout (`Layout::SplitRows`: read natively by the VNNI and AMX
    /// kernels, through [`join_rows`] by the fast mode without VNNI, row by row in the exact
    /// mode).
    layout: Layout,
    path: Path,
    m: usize,
    n: usize,
    k: usize,
    /// Bytes per weight row.
    row_bytes: usize,
    /// Byte offset of the first weight row read in the operand (`row_start · row_bytes`,
    /// `rlx_ir::compose::quant::ROW_START_ATTR`; 0 when the operand holds exactly `n` rows).
    w_off: usize,
    /// Bytes of the weight operand (`n · row_bytes`, or more with `row_start`).
    w_len: usize,
    /// Weight rows per parallel chunk (`n` when sequential); per thread in the `tile` path
    /// (also `BfpPanel`'s fallback).
    chunk: usize,
    /// `BfpPanel`: weight rows per parallel chunk of panels (a multiple of 16).
    panel_chunk: usize,
    /// Weight rows per tile (`tile` path).
    tile: usize,
    /// The AVX-512 decoders of [`exact`] may run.
    simd: bool,
    /// No AVX-512, but the AVX2 decoders of [`exact_avx2`] may run (the `fused` and `tile`
    /// paths of [`exact::has_decoder`]'s schemes).
    avx2: bool,
    /// Bytes of the quantized activation rows in the run's [`Work::xq`] (fast mode;
    /// [`int8::quantize_acts`]).
    xq: usize,
    /// Floats of dequantized weights in the run's [`Work::scratch`]: one row of `k` per chunk
    /// (`rowwise`) or one tile per thread (`tile`).
    scratch: usize,
    /// `tile` path on [`sgemm`]: `xᵀ` (`k × m`) is packed once per call (into a
    /// [`Work::xt`]); false: tiles go through the `gemm` crate.
    xt: bool,
    /// Floats between the rows of a tile in the scratch (`k`, or [`sgemm::in_place_stride`]).
    ld: usize,
    /// `tile` path on [`sgemm`]: floats of [`Work::ct`], per thread a tile's `[tile, m]`
    /// product before it is transposed into the result's columns.
    ct: usize,
    /// `Σ x` per 32- (16-) element block (`fused` path, schemes with [`decode::needs_block_sums`]).
    xblk: Vec<f32>,
    /// Bytes of the `fused` path's activation row as block floating point (in the calling
    /// thread's [`Work::xq`]): [`bfp`]'s with VNNI, [`bfp_avx2`]'s on AVX2 for its schemes,
    /// else 0.
    xbfp: usize,
    /// The `amx` path's activation layout and per-chunk scratch.
    amx: Option<amx::AmxScratch>,
    /// Weights in `Layout::SplitRows` that a path reads as blocks (`Path::Q8` without VNNI, the
    /// exact decode's f32 kernel): [`JOIN_ROWS`] rows at a time converted back, in the running
    /// thread's [`JOIN`] buffer.
    join: bool,
}

impl QMatmulKernel {
    /// Name for reports.
    pub fn name(&self) -> &'static str {
        if self.layout == Layout::SplitRows {
            return match self.path {
                Path::Amx => "dequant_matmul_q8_amx_split_rows",
                Path::Panel => "dequant_matmul_q8_vnni_panel_split_rows",
                Path::Q8(2) => "dequant_matmul_q8_vnni_split_rows",
                Path::Q8(1) => "dequant_matmul_q8_avx2_split_rows",
                Path::Q8(_) => "dequant_matmul_q8_scalar_split_rows",
                Path::Fused if self.xbfp > 0 && self.avx2 => "dequant_matmul_fused_avx2_bfp_split_rows",
                Path::Fused if self.xbfp > 0 => "dequant_matmul_fused_vnni_split_rows",
                Path::Fused if self.avx2 => "dequant_matmul_fused_avx2_split_rows",
                Path::Fused => "dequant_matmul_fused_avx512_split_rows",
                Path::BfpPanel => "dequant_matmul_bfp_panel_split_rows",
                Path::Tile if self.simd && exact::has_decoder(self.ty) => "dequant_matmul_tile_avx512_split_rows",
                Path::Tile if self.avx2 && exact::has_decoder(self.ty) => "dequant_matmul_tile_avx2_split_rows",
                Path::Tile => "dequant_matmul_tile_split_rows",
                Path::Rowwise => "dequant_matmul_rowwise_split_rows",
            };
        }
        match self.path {
            Path::Amx => "dequant_matmul_q8_amx",
            Path::Panel => "dequant_matmul_q8_vnni_panel",
            Path::Q8(2) => "dequant_matmul_q8_vnni",
            Path::Q8(1) => "dequant_matmul_q8_avx2",
            Path::Q8(_) => "dequant_matmul_q8_scalar",
            Path::Fused if self.xbfp > 0 && self.avx2 => "dequant_matmul_fused_avx2_bfp",
            Path::Fused if self.xbfp > 0 => "dequant_matmul_fused_vnni",
            Path::Fused if self.avx2 => "dequant_matmul_fused_avx2",
            Path::Fused => "dequant_matmul_fused_avx512",
            Path::BfpPanel => "dequant_matmul_bfp_panel",
            Path::Tile if self.simd && exact::has_decoder(self.ty) => "dequant_matmul_tile_avx512",
            Path::Tile if self.avx2 && exact::has_decoder(self.ty) => "dequant_matmul_tile_avx2",
            Path::Tile => "dequant_matmul_tile",
            Path::Rowwise => "dequant_matmul_rowwise",
        }
    }
}

/// True when `ty` has [`bfp_panel`]'s kernel (x86_64 only).
fn bfp_panel_scheme(ty: GgmlType) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        bfp_panel::has_path(ty)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = ty;
        false
    }
}

/// True when the AVX-512 decoders may run under `opts`.
fn avx512_decoders(opts: &CpuOptions) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        opts.simd.avx512() && std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = opts;
        false
    }
}

/// Plan `c` (a `dequant_matmul`) for static operand types `ins` = `[x f32[.., K], w U8]`.
pub fn select(
    c: &Composite,
    ins: &[(Vec<usize>, DType)],
    outs: &[(Vec<usize>, DType)],
    opts: &CpuOptions,
) -> Option<QMatmulKernel> {
    if c.name != NAME || ins.len() != 2 || outs.len() != 1 {
        return None;
    }
    let (ty, n, k, bytes) = rlx_gguf::ir_ops::parse_attrs(&c.attrs).ok()?;
    let layout = rlx_gguf::ir_ops::parse_layout(&c.attrs, ty).ok()?;
    let split = layout == Layout::SplitRows;
    let ((xd, xt), (wd, wt)) = (&ins[0], &ins[1]);
    if *xt != DType::F32 || *wt != DType::U8 || xd.last() != Some(&k) {
        return None;
    }
    let row_bytes = k / ty.block_size() * ty.type_size();
    // `dequant_matmul_rows`: rows `row_start .. row_start + n` of a `[R, row_bytes]` operand.
    let w_off = match c.attrs.get(rlx_ir::compose::quant::ROW_START_ATTR) {
        None if wd.iter().product::<usize>() == bytes => 0,
        Some(&rlx_ir::Attr::Int(r0)) if r0 >= 0 => match wd[..] {
            [r, rb] if rb == row_bytes && (r0 as usize).checked_add(n).is_some_and(|end| end <= r) => {
                r0 as usize * row_bytes
            }
            _ => return None,
        },
        _ => return None,
    };
    let m: usize = xd[..xd.len() - 1].iter().product();
    let simd = avx512_decoders(opts);
    let avx2 = !simd && cfg!(target_arch = "x86_64") && opts.simd.avx2();
    // The panels (AMX or not) and the block floating point kernel run VNNI code (AMX CPUs have
    // it).
    let level = int8::simd_level(opts.simd);
    let vnni = level == 2;
    let bfp_ok = bfp::has_path(ty) && vnni;
    // Schemes without a vector integer kernel at this level (no VNNI) run exact: its f32
    // kernels are faster than the scalar integer loop, which runs only where nothing is vector
    // (`SimdLevel::Baseline`, no AVX2).
    let fast = opts.quantized_activations
        && (int8::has_q8_0_path(ty) || q8k::has_q8_k_path(ty))
        && (level == 0 || int8::has_vector_kernel(ty, level, m, FUSED_ROWS));
    let path = if fast && m >= amx::MIN_M && opts.simd.amx() && simd && vnni {
        Path::Amx
    } else if fast && m >= amx::MIN_M && simd && vnni {
        Path::Panel
    } else if fast {
        Path::Q8(level)
    } else if m <= FUSED_ROWS && (simd || avx2) && exact::has_decoder(ty) {
        Path::Fused
    } else if m <= 1 {
        Path::Rowwise
    } else if m >= amx::MIN_M && simd && vnni && bfp_panel_scheme(ty) {
        Path::BfpPanel
    } else {
        Path::Tile
    };
    let threads = opts.threads.unwrap_or_else(rayon::current_num_threads).max(1);
    let par = threads > 1 && m.saturating_mul(n).saturating_mul(k) >= PAR_WORK && n >= 32;
    // The panels' chunks (`Amx`, `Panel`, `BfpPanel`): whole blocks of 16 weight rows, two
    // chunks per thread.
    let panel_chunk = if par { n.div_ceil(2 * threads).next_multiple_of(16) } else { n.next_multiple_of(16) };
    let tiled = matches!(path, Path::Tile | Path::BfpPanel);
    let on_sgemm = tiled && (simd || avx2) && exact::has_decoder(ty) && sgemm::available();
    // Tile rows spaced so that sgemm reads the tile in place (its rows in different L1 sets)
    // instead of copying it into its packed layout.
    let ld = if on_sgemm { sgemm::in_place_stride(k) } else { k };
    let (chunk, tile, scratch) = match path {
        Path::Tile | Path::BfpPanel => {
            let parts = if par { threads.min(n.div_ceil(16)) } else { 1 };
            let chunk = n.div_ceil(parts);
            let tile = (TILE_BYTES / (4 * k.max(1))).clamp(16, 512).min(chunk);
            (chunk, tile, parts * tile * ld)
        }
        _ => {
            // One or two chunks per thread (`ONE_CHUNK_BYTES`; claimed dynamically, so a slower
            // thread takes fewer), each long enough that the rows prefetched ahead inside it
            // cover most of it: chunks of 16 rows (n / 64) left half of each unprefetched and
            // ran SmolLM2's decode as hundreds of 0.4 µs tasks, and a single thread split the
            // rows for nothing. Four per thread restarted each thread's weight stream twice as
            // often: SmolLM2 decode at 2 threads (Zen 5), medians of interleaved runs, exact 226
            // → 254 tok/s, `--fast --kv-type f16` 231 → 270, after a 441-token prompt 217 → 232.
            let chunk = if matches!(path, Path::Amx | Path::Panel) {
                panel_chunk
            } else if par {
                // One chunk per thread below `ONE_CHUNK_BYTES` of weights (see there).
                let per = if n * row_bytes < ONE_CHUNK_BYTES { 1 } else { 2 };
                n.div_ceil(per * threads).max(32)
            } else {
                n.max(1)
            };
            (chunk, 0, if path == Path::Rowwise { n.div_ceil(chunk) * k } else { 0 })
        }
    };
    let q8 = if matches!(path, Path::Q8(_) | Path::Amx | Path::Panel) { m * int8::act_row_bytes(ty, k) } else { 0 };
    // Split rows converted back into blocks: the scalar fast mode, and the exact decode where
    // its block floating point kernel cannot run (no VNNI, or a row it does not convert).
    // (The AVX2 kernels read split rows in place.)
    let join = split && (path == Path::Q8(0) || path == Path::Fused && !avx2);
    let amx = matches!(path, Path::Amx | Path::Panel).then(|| amx::AmxScratch::new(ty, m, k));
    Some(QMatmulKernel {
        ty,
        layout,
        path,
        m,
        n,
        k,
        row_bytes,
        w_off,
        w_len: wd.iter().product(),
        chunk,
        panel_chunk,
        tile,
        simd,
        avx2,
        xq: q8,
        scratch,
        xt: on_sgemm,
        ct: if on_sgemm { scratch / ld.max(1) * m } else { 0 },
        ld,
        xblk: vec![
            0.0;
            if path == Path::Fused && simd && decode::needs_block_sums(ty) { k / decode::sum_len(ty) } else { 0 }
        ],
        xbfp: match path {
            Path::Fused if bfp_ok => bfp::act_bytes(k),
            #[cfg(target_arch = "x86_64")]
            Path::Fused if avx2 && bfp_avx2::has_path(ty, k) => bfp_avx2::act_bytes(ty, k),
            _ => 0,
        },
        amx,
        join,
    })
}

/// Run `k` on `x` and the packed weights `w` into `out` (`[.., N]` f32).
pub fn run(k: &mut QMatmulKernel, x: &Tensor, w: &Tensor, out: &mut Tensor) -> Result<(), IrError> {
    let err = |msg: &str| IrError::Eval { op: NAME.into(), msg: msg.into() };
    let xs = x.as_slice::<f32>().ok_or_else(|| err("x is not f32"))?;
    let wb = w.as_slice::<u8>().ok_or_else(|| err("weights are not U8"))?;
    let y = out.as_mut_slice::<f32>().ok_or_else(|| err("result is not f32"))?;
    let (m, n, kk) = (k.m, k.n, k.k);
    if xs.len() != m * kk || wb.len() != k.w_len || y.len() != m * n {
        return Err(err("operand sizes differ from the planned ones"));
    }
    // The `n` rows read (checked inside the operand at select time).
    let wb = &wb[k.w_off..k.w_off + n * k.row_bytes];
    if kk == 0 {
        y.fill(0.0);
        return Ok(());
    }
    if m == 0 {
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    if k.path == Path::BfpPanel {
        let split = k.layout == Layout::SplitRows;
        let rows = amx::WeightRows { ty: k.ty, split, w: wb, row_bytes: k.row_bytes };
        // SAFETY: planned only with VNNI and the AVX-512 decoders' features, for
        // `bfp_panel::has_path` schemes; lengths checked above.
        if unsafe { bfp_panel::run(rows, (m, kk), k.panel_chunk, xs, y) } {
            return Ok(());
        }
    }
    if matches!(k.path, Path::Tile | Path::BfpPanel) {
        WORK.with_borrow_mut(|w| run_tile(k, xs, wb, y, w));
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    if let (Path::Amx | Path::Panel, Some(s)) = (k.path, k.amx.as_mut()) {
        WORK.with_borrow_mut(|w| {
            let xq = grown(&mut w.xq, k.xq);
            int8::quantize_acts(k.ty, xs, kk, xq);
            amx::layout_acts(k.ty, xq, m, kk, s);
        });
        let (split, on_amx) = (k.layout == Layout::SplitRows, k.path == Path::Amx);
        let rows = amx::WeightRows { ty: k.ty, split, w: wb, row_bytes: k.row_bytes };
        // SAFETY: both paths are planned only where VNNI and the AVX-512 decoders' features
        // were detected, `Path::Amx` also `SimdLevel::amx`; the scratch was made for this
        // shape; lengths checked above.
        unsafe { amx::run(rows, (m, kk), k.chunk, &s.acts(), y, on_amx) };
        return Ok(());
    }
    if let Path::Q8(level) = k.path {
        WORK.with_borrow_mut(|w| {
            let xq = grown(&mut w.xq, k.xq);
            int8::quantize_acts(k.ty, xs, kk, xq);
            run_q8(k, level, wb, y, xq);
        });
        return Ok(());
    }
    if k.path == Path::Fused {
        run_decode(k, xs, wb, y);
        return Ok(());
    }
    let yp = OutPtr(y.as_mut_ptr());
    let (chunk, row_bytes, ty, path, layout) = (k.chunk, k.row_bytes, k.ty, k.path, k.layout);
    let body = |c: usize, scratch: &mut [f32]| {
        let j1 = ((c + 1) * chunk).min(n);
        for j in c * chunk..j1 {
            let wrow = &wb[j * row_bytes..(j + 1) * row_bytes];
            if path == Path::Rowwise {
                // The lengths and the layout were checked at select time.
                let _ = dequantize_rows(ty, layout, wrow, kk, scratch);
            }
            for mi in 0..m {
                let xr = &xs[mi * kk..(mi + 1) * kk];
                let v = dot_f32(scratch, xr);
                // SAFETY: mi < m, j < n: inside `y`; no other chunk writes column j.
                unsafe { *yp.get().add(mi * n + j) = v };
            }
        }
    };
    let nchunks = n.div_ceil(chunk);
    if path == Path::Rowwise {
        WORK.with_borrow_mut(|w| {
            let rows = OutPtr(grown(&mut w.scratch, k.scratch).as_mut_ptr());
            // SAFETY: chunk c uses only its own row `c` of the scratch (`nchunks · kk` long).
            spin::for_each(nchunks, |c| body(c, unsafe { rows.slice(c * kk, kk) }));
        });
    } else {
        spin::for_each(nchunks, |c| body(c, &mut []));
    }
    Ok(())
}

/// The fast path: chunks of weight rows across threads, each through [`int8::tile`] (weights
/// in `Layout::SplitRows`: [`int8::tile_split`] with VNNI, else [`JOIN_ROWS`] rows at a time
/// converted back into blocks in the chunk's scratch).
fn run_q8(k: &mut QMatmulKernel, level: u8, wb: &[u8], y: &mut [f32], xq: &[u8]) {
    let (m, n, chunk, row_bytes, ty) = (k.m, k.n, k.chunk, k.row_bytes, k.ty);
    let yp = OutPtr(y.as_mut_ptr());
    // SAFETY (every `put` below): mi < m, j0 + r < j1 <= n: inside `y`; no other chunk writes
    // these columns.
    let put = |j0: usize| move |mi: usize, r: usize, v: f32| unsafe { *yp.get().add(mi * n + j0 + r) = v };
    let rows = |c: usize| (c * chunk, ((c + 1) * chunk).min(n));
    if level == 1 {
        let (split, xr) = (k.layout == Layout::SplitRows, xq.len() / m.max(1));
        spin::for_each(n.div_ceil(chunk), |c| {
            let (j0, j1) = rows(c);
            for (mi, x) in xq.chunks_exact(xr).enumerate() {
                // 64 rows at a time into a buffer, then into column `mi` of their outputs.
                for s0 in (j0..j1).step_by(64) {
                    let s1 = (s0 + 64).min(j1);
                    let mut buf = [0f32; 64];
                    let w = &wb[s0 * row_bytes..s1 * row_bytes];
                    q8_avx2_dot_rows(ty, split, w, row_bytes, x, &mut buf[..s1 - s0]);
                    let put = put(s0);
                    buf[..s1 - s0].iter().enumerate().for_each(|(r, &v)| put(mi, r, v));
                }
            }
        });
        return;
    }
    if !k.join {
        let split = k.layout == Layout::SplitRows;
        spin::for_each(n.div_ceil(chunk), |c| {
            let (j0, j1) = rows(c);
            let w = &wb[j0 * row_bytes..j1 * row_bytes];
            if split {
                int8::tile_split(ty, w, row_bytes, xq, m, &mut put(j0));
            } else {
                int8::tile(ty, level, w, row_bytes, xq, m, &mut put(j0));
            }
        });
        return;
    }
    spin::for_each(n.div_ceil(chunk), |c| {
        let (j0, j1) = rows(c);
        with_join(JOIN_ROWS * row_bytes, |buf| {
            for s0 in (j0..j1).step_by(JOIN_ROWS) {
                let s1 = (s0 + JOIN_ROWS).min(j1);
                let blocks = &mut buf[..(s1 - s0) * row_bytes];
                join_rows(ty, &wb[s0 * row_bytes..s1 * row_bytes], row_bytes, blocks);
                int8::tile(ty, level, blocks, row_bytes, xq, m, &mut put(s0));
            }
        })
    });
}

thread_local! {
    /// The [`JOIN_ROWS`] weight rows a chunk converts back into blocks (`QMatmulKernel::join`),
    /// on the thread that runs the chunk: one buffer per thread, not one per kernel and chunk
    /// (those were ~11 MB of every SmolLM2 decode graph's ~18 MB of compiled state). Apart
    /// from [`WORK`], which the calling thread holds borrowed while its chunks run.
    static JOIN: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Run `f` on the first `len` bytes of this thread's [`JOIN`] buffer ([`join_rows`] writes
/// every byte a chunk reads).
fn with_join<R>(len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
    JOIN.with_borrow_mut(|b| f(grown(b, len)))
}

/// Rows of `src` (`row_bytes` each, in `Layout::SplitRows`) back into GGUF blocks in `dst`
/// (same length; lengths and type checked when the kernel was planned).
fn join_rows(ty: GgmlType, src: &[u8], row_bytes: usize, dst: &mut [u8]) {
    for (s, d) in src.chunks_exact(row_bytes).zip(dst.chunks_exact_mut(row_bytes)) {
        let _ = split_row_to_blocks(ty, s, d);
    }
}

/// The `fused` path for the schemes of [`decode`]: per activation row, chunks of weight rows
/// across threads.
fn run_decode(k: &mut QMatmulKernel, xs: &[f32], wb: &[u8], y: &mut [f32]) {
    let (m, n, kk) = (k.m, k.n, k.k);
    for (x, y) in xs.chunks_exact(kk).zip(y.chunks_exact_mut(n)).take(m) {
        let (chunk, row_bytes, ty) = (k.chunk, k.row_bytes, k.ty);
        let split = k.layout == Layout::SplitRows;
        let yp = OutPtr(y.as_mut_ptr());
        // The row converted in the calling thread's `Work`, read by every chunk (the chunks'
        // code does not borrow `WORK`).
        let on_bfp = k.xbfp > 0
            && WORK.with_borrow_mut(|w| {
                let xa = grown(&mut w.xq, k.xbfp);
                if !bfp_quantize(ty, k.avx2, x, xa) {
                    return false;
                }
                let (xa, nb) = (&*xa, kk / 32);
                spin::for_each(n.div_ceil(chunk), |c| {
                    let (j0, j1) = (c * chunk, ((c + 1) * chunk).min(n));
                    // SAFETY: chunks write disjoint ranges `j0..j1` of `y`, which outlives the call.
                    let yc = unsafe { yp.slice(j0, j1 - j0) };
                    bfp_dot_rows(ty, k.avx2, split, &wb[j0 * row_bytes..j1 * row_bytes], row_bytes, xa, nb, yc);
                });
                true
            });
        if on_bfp {
            continue;
        }
        if k.avx2 {
            spin::for_each(n.div_ceil(chunk), |c| {
                let (j0, j1) = (c * chunk, ((c + 1) * chunk).min(n));
                // SAFETY: chunks write disjoint ranges `j0..j1` of `y`, which outlives the call.
                let yc = unsafe { yp.slice(j0, j1 - j0) };
                avx2_dot_rows(ty, split, &wb[j0 * row_bytes..j1 * row_bytes], row_bytes, x, yc);
            });
            continue;
        }
        if !k.xblk.is_empty() {
            decode::block_sums(x, decode::sum_len(ty), &mut k.xblk);
        }
        let xblk = &k.xblk[..];
        if split {
            // The f32 kernel reads blocks: `JOIN_ROWS` rows at a time converted back.
            spin::for_each(n.div_ceil(chunk), |c| {
                let (j0, j1) = (c * chunk, ((c + 1) * chunk).min(n));
                with_join(JOIN_ROWS * row_bytes, |buf| {
                    for s0 in (j0..j1).step_by(JOIN_ROWS) {
                        let s1 = (s0 + JOIN_ROWS).min(j1);
                        let blocks = &mut buf[..(s1 - s0) * row_bytes];
                        join_rows(ty, &wb[s0 * row_bytes..s1 * row_bytes], row_bytes, blocks);
                        // SAFETY: chunks write disjoint ranges of `y`, which outlives the call.
                        let yc = unsafe { yp.slice(s0, s1 - s0) };
                        decode_dot_rows(ty, blocks, row_bytes, x, xblk, yc);
                    }
                })
            });
            continue;
        }
        spin::for_each(n.div_ceil(chunk), |c| {
            let (j0, j1) = (c * chunk, ((c + 1) * chunk).min(n));
            // SAFETY: chunks write disjoint ranges `j0..j1` of `y`, which outlives the call.
            let yc = unsafe { yp.slice(j0, j1 - j0) };
            decode_dot_rows(ty, &wb[j0 * row_bytes..j1 * row_bytes], row_bytes, x, xblk, yc);
        });
    }
}

/// [`decode::dot_rows`] (the `fused` path is planned only where it can run).
#[cfg(target_arch = "x86_64")]
fn decode_dot_rows(ty: GgmlType, w: &[u8], row_bytes: usize, x: &[f32], xblk: &[f32], y: &mut [f32]) {
    // SAFETY: `Path::Fused` is planned only when the features were detected; lengths checked
    // in `run`; `xblk` was filled above where the scheme needs it.
    unsafe { decode::dot_rows(ty, w, row_bytes, x, xblk, y) }
}

/// [`exact_avx2::dot_rows`] (`avx2` is planned only where it can run).
#[cfg(target_arch = "x86_64")]
fn avx2_dot_rows(ty: GgmlType, split: bool, w: &[u8], row_bytes: usize, x: &[f32], y: &mut [f32]) {
    debug_assert!(exact_avx2::available());
    // SAFETY: `QMatmulKernel::avx2` is set only when the features were detected; lengths and
    // layout checked in `run` and `select`.
    unsafe { exact_avx2::dot_rows(ty, split, w, row_bytes, x, y) }
}

#[cfg(not(target_arch = "x86_64"))]
fn avx2_dot_rows(_: GgmlType, _: bool, _: &[u8], _: usize, _: &[f32], _: &mut [f32]) {
    unreachable!("the AVX2 decoders are planned only on x86_64")
}

/// [`int8_avx2::dot_rows`] (`Path::Q8(1)` is planned only where it can run).
#[cfg(target_arch = "x86_64")]
fn q8_avx2_dot_rows(ty: GgmlType, split: bool, w: &[u8], row_bytes: usize, x: &[u8], y: &mut [f32]) {
    // SAFETY: level 1 means AVX2, FMA and F16C were detected, and it is planned only for the
    // schemes of `int8_avx2::has_kernel`; lengths and layout checked in `run` and `select`.
    unsafe { int8_avx2::dot_rows(ty, split, w, row_bytes, x, y) }
}

#[cfg(not(target_arch = "x86_64"))]
fn q8_avx2_dot_rows(_: GgmlType, _: bool, _: &[u8], _: usize, _: &[u8], _: &mut [f32]) {
    unreachable!("the AVX2 integer kernel is planned only on x86_64")
}

/// [`bfp::quantize`], or with `avx2` [`bfp_avx2::quantize`] (`xbfp` is nonzero only where
/// they can run).
#[cfg(target_arch = "x86_64")]
fn bfp_quantize(ty: GgmlType, avx2: bool, x: &[f32], xa: &mut [u8]) -> bool {
    // SAFETY: `xbfp` is planned only with AVX-512 + VNNI detected (or, `avx2`, AVX2, FMA and
    // F16C, for the schemes and lengths of `bfp_avx2::has_path`), `act_bytes(k)` long.
    unsafe { if avx2 { bfp_avx2::quantize(ty, x, xa) } else { bfp::quantize(ty, x, xa) } }
}

/// [`bfp::dot_rows`], or with `avx2` [`bfp_avx2::dot_rows`] (`split`: rows in
/// `Layout::SplitRows`).
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
fn bfp_dot_rows(
    ty: GgmlType,
    avx2: bool,
    split: bool,
    w: &[u8],
    row_bytes: usize,
    xa: &[u8],
    nb: usize,
    y: &mut [f32],
) {
    // SAFETY: as `bfp_quantize`; `xa` was written by it; lengths and layout checked in `run`
    // and `select`.
    unsafe {
        if avx2 {
            bfp_avx2::dot_rows(ty, split, w, row_bytes, xa, nb, y)
        } else {
            bfp::dot_rows(ty, split, w, row_bytes, xa, nb, y)
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn bfp_quantize(_: GgmlType, _: bool, _: &[f32], _: &mut [u8]) -> bool {
    false
}

#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
fn bfp_dot_rows(_: GgmlType, _: bool, _: bool, _: &[u8], _: usize, _: &[u8], _: usize, _: &mut [f32]) {
    unreachable!("the bfp kernel is planned only on x86_64")
}

#[cfg(not(target_arch = "x86_64"))]
fn decode_dot_rows(_: GgmlType, _: &[u8], _: usize, _: &[f32], _: &[f32], _: &mut [f32]) {
    unreachable!("the fused path is planned only on x86_64")
}

/// Working buffers of the `tile` and `rowwise` paths, the fast mode's quantized activations and
/// the panels' per-chunk buffers, one set per thread and shared by every kernel run on it: a
/// kernel's tiles, transposed products, packed or quantized activations and unpacked weight
/// rows live only during its own run (a chunk's, on the thread that runs the chunk).
/// Owned per kernel they took 410 MB for SmolLM2's 210 quantized products (its prefill and
/// decode graphs, `heaptrack`); shared, the largest kernel's few MB.
/// Contents carry nothing between runs: every element read is written earlier in the same
/// run (`pack_b` rewrites a packed `xᵀ` whole, zeroing its padding lanes); the vectors are
/// handed out by [`grown`], which poisons them in debug builds so the tests check that.
#[derive(Default)]
struct Work {
    scratch: Vec<f32>,
    /// Quantized activation rows ([`int8::quantize_acts`] writes every byte it is given), or
    /// the exact decode's block floating point row ([`bfp::quantize`] writes every byte the
    /// kernels read).
    xq: Vec<u8>,
    ct: Vec<f32>,
    /// The packed `xᵀ` of the `tile` path ([`sgemm::PackedB::fit`] to each call's `k × m`).
    xt: sgemm::PackedB,
    /// The `amx` / panel paths' buffers of the chunk this thread runs.
    chunk: amx::ChunkScratch,
}

thread_local! {
    static WORK: std::cell::RefCell<Work> = std::cell::RefCell::new(Work::default());
}

/// Write `src` (`nt` rows of `m` results, row `r` from `src[r · ld]`) transposed into columns
/// `j .. j + nt` of `y` (`[m, n]` at `yp`), sixteen columns at a time so that each row of `y`
/// gets one 64-byte run: a column at a time wrote `m` lines `4n` bytes apart, which for n =
/// 1536 or 3072 fall into one or two L1 sets (the `tile` path ran at half speed; session 34).
///
/// # Safety
/// `y` holds `m · n` floats and `j + nt <= n`; no other thread writes those columns meanwhile;
/// `src` holds `(nt - 1) · ld + m` floats.
unsafe fn write_columns(yp: OutPtr<f32>, n: usize, j: usize, src: &[f32], ld: usize, nt: usize, m: usize) {
    let vector = sgemm::available();
    for r0 in (0..nt).step_by(16) {
        let r1 = (r0 + 16).min(nt);
        // Whole 16 × 16 blocks by register transposes; the rest (edges) element by element.
        let mut i0 = 0;
        if vector && r1 - r0 == 16 {
            while i0 + 16 <= m {
                // SAFETY: rows r0..r0 + 16 of `src` hold columns i0..i0 + 16 (i0 + 16 <= m);
                // rows i0..i0 + 16 of `y` hold columns j + r0..j + r0 + 16 (< n).
                unsafe { sgemm::transpose16(src.as_ptr().add(r0 * ld + i0), ld, yp.get().add(i0 * n + j + r0), n) };
                i0 += 16;
            }
        }
        for i in i0..m {
            for r in r0..r1 {
                // SAFETY: i < m, j + r < n (the caller's contract).
                unsafe { *yp.get().add(i * n + j + r) = src[r * ld + i] };
            }
        }
    }
}

/// The `tile` path: each thread dequantizes tiles of its row range and runs gemm on them.
fn run_tile(k: &mut QMatmulKernel, xs: &[f32], wb: &[u8], y: &mut [f32], work: &mut Work) {
    let (m, n, kk, chunk, tile, row_bytes, ty, ld) = (k.m, k.n, k.k, k.chunk, k.tile, k.row_bytes, k.ty, k.ld);
    let (layout, split) = (k.layout, k.layout == Layout::SplitRows);
    let fast = (k.simd || k.avx2) && exact::has_decoder(ty);
    let avx2 = k.avx2;
    let yp = OutPtr(y.as_mut_ptr());
    let Work { scratch, ct, xt: packed, .. } = work;
    let (kscratch, kct) = (grown(scratch, k.scratch), grown(ct, k.ct));
    // The sgemm takes the activation rows in panels of `sgemm::NR`: a last panel of at most
    // `EDGE_ROWS` rows would use a few of its kernel's 16 FMA lanes, so those rows (`mg..m`)
    // are dotted with the tile's rows instead (`gemv::avx512::dot_multi`: 4 weight rows ×
    // up to 4 activation rows per pass along `K`, every lane busy), straight into `y`.
    // (AVX-512 only: on AVX2 the sgemm takes every row.)
    let edge = if k.xt && k.simd && m > sgemm::NR && m % sgemm::NR <= EDGE_ROWS { m % sgemm::NR } else { 0 };
    let mg = m - edge;
    let xt = if k.xt {
        packed.fit(kk, mg);
        packed.poison_in_debug();
        // SAFETY: x is [m, kk] row-major, its first mg rows read as their transpose [kk, mg];
        // `packed` is sized for it.
        unsafe { sgemm::pack_b(sgemm::Operand { ptr: xs.as_ptr(), rs: 1, cs: kk }, packed) };
        Some(&*packed)
    } else {
        None
    };
    let part = |p: usize, buf: &mut [f32], ct: &mut [f32]| {
        let j1 = ((p + 1) * chunk).min(n);
        let mut j = p * chunk;
        while j < j1 {
            let nt = tile.min(j1 - j);
            let t = &mut buf[..nt * ld];
            for (r, out) in t.chunks_exact_mut(ld).map(|row| &mut row[..kk]).enumerate() {
                let wrow = &wb[(j + r) * row_bytes..(j + r + 1) * row_bytes];
                if fast {
                    decode_row(ty, split, avx2, wrow, out);
                } else {
                    // The lengths and the layout were checked at select time.
                    let _ = dequantize_rows(ty, layout, wrow, kk, out);
                }
            }
            match xt {
                // Our sgemm with the tile as the lhs (read in place, see `ld`) against `xᵀ`,
                // packed once per call: `[nt, m]`, then written transposed into the columns
                // `j .. j + nt` of `y`.
                Some(xt) => {
                    let a = sgemm::Operand { ptr: t.as_ptr(), rs: ld, cs: 1 };
                    let ct = &mut ct[..nt * mg];
                    // SAFETY: the tile holds nt rows of kk floats, ld apart; ct has nt rows of mg.
                    unsafe { sgemm::matmul(nt, a, xt, ct.as_mut_ptr(), mg) };
                    // SAFETY: columns j..j + nt < n of y are this part's; ct holds nt rows of mg.
                    unsafe { write_columns(yp, n, j, ct, mg, nt, mg) };
                    #[cfg(target_arch = "x86_64")]
                    if edge > 0 {
                        // SAFETY: AVX-512 (k.simd); x rows mg..m hold kk floats each; y rows
                        // mg..m, columns j..j + nt (this part's) receive the dots.
                        unsafe {
                            let (xe, ye) = (xs.as_ptr().add(mg * kk), yp.get().add(mg * n + j));
                            super::gemv::avx512::dot_multi(t.as_ptr(), ld, nt, xe, kk, edge, kk, ye, n)
                        }
                    }
                }
                // SAFETY: y is [m, n] with row stride n; columns j..j + nt are written only by
                // this part; x is [m, kk]; the tile is [nt, kk] read as its transpose [kk, nt].
                None => unsafe {
                    gemm::gemm(
                        m,
                        nt,
                        kk,
                        yp.get().add(j),
                        1,
                        n as isize,
                        false,
                        xs.as_ptr(),
                        1,
                        kk as isize,
                        t.as_ptr(),
                        ld as isize,
                        1,
                        0.0,
                        1.0,
                        false,
                        false,
                        false,
                        gemm::Parallelism::None,
                    )
                },
            }
            j += nt;
        }
    };
    let per = tile * ld;
    let cper = if k.ct == 0 { 0 } else { tile * m };
    if k.scratch > per && super::simd::threads() > 1 {
        // One part per thread, on the executor's spinning team (a rayon hand-off wakes sleeping
        // workers, tens of µs per product of a prefill step); each part's products run on its
        // own thread. (Two parts per thread, claimed dynamically, measured slower.)
        let parts = k.scratch / per;
        debug_assert!(cper == 0 || k.ct >= parts * cper);
        let (sp, cp) = (OutPtr(kscratch.as_mut_ptr()), OutPtr(kct.as_mut_ptr()));
        spin::for_each(parts, |p| {
            // SAFETY: part `p` uses only its own `per` scratch and `cper` ct elements, inside
            // the buffers (sized `parts` times those at plan time).
            let (s, ct) = unsafe { (sp.slice(p * per, per), cp.slice(p * cper, cper)) };
            super::simd::serial(|| part(p, s, ct))
        });
    } else {
        // Every part on this thread, one after another in the first part's scratch (a kernel
        // planned for several threads may run where only one is available).
        let (sl, cl) = (k.scratch, k.ct);
        let parts = (sl / per.max(1)).max(1);
        let (s0, c0) = (&mut kscratch[..per.min(sl)], &mut kct[..cper.min(cl)]);
        for p in 0..parts {
            part(p, s0, c0);
        }
    }
}

/// [`exact::decode_row`], or with `avx2` [`exact_avx2::decode_row`] (used only where they can
/// run).
#[cfg(target_arch = "x86_64")]
fn decode_row(ty: GgmlType, split: bool, avx2: bool, w: &[u8], out: &mut [f32]) {
    // SAFETY: called only when `simd` or `avx2` (features detected); lengths and layout
    // checked at select time.
    unsafe { if avx2 { exact_avx2::decode_row(ty, split, w, out) } else { exact::decode_row(ty, split, w, out) } }
}

#[cfg(not(target_arch = "x86_64"))]
fn decode_row(_: GgmlType, _: bool, _: bool, _: &[u8], _: &mut [f32]) {
    unreachable!("the AVX-512 decoders are used only on x86_64")
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
