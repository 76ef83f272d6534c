//! `dequant_matmul` on the CPU. Exact mode (default) against `rlx_gguf` dequantization + an f64
//! matmul (f32 rounding only); fast mode (`quantized_activations`) against llama.cpp's formula
//! (exact up to f32 rounding) and against the f32 reference (within the activation quantization
//! error); for every scheme with a native path, several shapes, both SIMD levels.

mod common;

use common::rand_tensor;
use rlx_cpu::{CpuExecutable, CpuOptions, SimdLevel};
use rlx_gguf::quants::{dequantize, quantize};
use rlx_gguf::{GgmlType, Layout};
use rlx_ir::{DType, Graph, Shape, Tensor};

/// Schemes with an in-register decoder (exact mode).
const NATIVE: &[GgmlType] = &[
    GgmlType::Q8_0,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
];
/// Schemes run through `dequantize_into` (row by row, or tile by tile).
const OTHERS: &[GgmlType] = &[GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q8_K];
/// Schemes with the integer fast path (Q8_0 activations for the legacy ones, Q8_K for the
/// K-quants): the same eight.
const Q8_PATH: &[GgmlType] = NATIVE;

/// One product: `(kernel name, x, dequantized W [n, k], result)`.
struct Case {
    kernel: String,
    x: Vec<f32>,
    wd: Vec<f32>,
    got: Vec<f64>,
}

fn run_case(ty: GgmlType, lead: &[usize], k: usize, n: usize, seed: u64, opts: &CpuOptions) -> Case {
    rlx_gguf::register_ops();
    let wf = rand_tensor(&[n, k], DType::F32, seed, -1.0, 1.0);
    let packed = quantize(ty, wf.as_slice::<f32>().unwrap()).unwrap();
    let mut xdims = lead.to_vec();
    xdims.push(k);
    let x = rand_tensor(&xdims, DType::F32, seed + 1, -2.0, 2.0);
    let mut g = Graph::new("qmm");
    let xi = g.input("x", Shape::new(&xdims, DType::F32));
    let wi = g.input("w", Shape::new(&[packed.len()], DType::U8));
    let y = g.dequant_matmul(xi, wi, ty.name(), n, k);
    g.set_outputs(vec![y]);
    let wt = Tensor::from_vec(packed.clone(), &[packed.len()]).unwrap();
    let mut exe = CpuExecutable::compile(&g, opts).unwrap();
    let kernel = exe.steps().iter().find(|s| s.op.contains("dequant_matmul")).unwrap().kernel.to_string();
    let got = exe.run(&[&x, &wt], &[]).unwrap().remove(0);
    assert_eq!(got.to_f64_vec(), exe.run(&[&x, &wt], &[]).unwrap()[0].to_f64_vec(), "{}: rerun", ty.name());
    let mut want_dims = lead.to_vec();
    want_dims.push(n);
    assert_eq!(got.shape(), &want_dims[..]);
    Case {
        kernel,
        x: x.as_slice::<f32>().unwrap().to_vec(),
        wd: dequantize(ty, &packed).unwrap(),
        got: got.to_f64_vec(),
    }
}

/// `(Σ w·x, Σ |w·x|)` in f64.
fn dot64(w: &[f32], x: &[f32]) -> (f64, f64) {
    w.iter().zip(x).fold((0.0, 0.0), |(s, a), (&w, &x)| {
        let p = w as f64 * x as f64;
        (s + p, a + p.abs())
    })
}

/// AVX-512 VNNI on this CPU.
fn vnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The SIMD levels the tests run: the CPU's best, AVX2 (where the CPU has AVX-512 too, this
/// runs the AVX2 kernels that an AVX2-only CPU would), and the portable code.
const LEVELS: [SimdLevel; 4] = [SimdLevel::Native, SimdLevel::Avx512, SimdLevel::Avx2, SimdLevel::Baseline];

/// True when the fast mode runs `ty` with `m` activation rows on integer dots at `simd`:
/// everywhere with VNNI, the portable scalar loop, and with AVX2 the decode (up to 8 rows) of
/// Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0; the rest runs the exact mode's vector kernels where the
/// CPU has AVX2 but no VNNI.
fn runs_fast(ty: GgmlType, m: usize, simd: SimdLevel) -> bool {
    let level2 = simd.avx512() && vnni();
    let avx2 = matches!(ty, GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q8_0);
    !simd.avx2() || level2 || m <= 8 && avx2
}

/// [`check_fast`] where the fast mode runs `ty` on integer dots at `opts.simd` ([`runs_fast`]),
/// else [`check_exact`] (and the kernel is an exact one).
fn check_fast_or_exact(ty: GgmlType, lead: &[usize], k: usize, n: usize, seed: u64, opts: &CpuOptions) -> String {
    if runs_fast(ty, lead.iter().product(), opts.simd) {
        let kernel = check_fast(ty, lead, k, n, seed, opts);
        assert!(kernel.starts_with("dequant_matmul_q8"), "{}: {kernel}", ty.name());
        kernel
    } else {
        let kernel = check_exact(ty, lead, k, n, seed, opts);
        assert!(!kernel.starts_with("dequant_matmul_q8"), "{}: {kernel}", ty.name());
        kernel
    }
}

/// The schemes whose exact products with at least 16 activation rows run on block floating
/// point panels where the CPU has AVX-512 VNNI.
const BFP_PANEL: [GgmlType; 6] =
    [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q4_K, GgmlType::Q5_K];

/// The exact-mode kernel expected for `ty` with `m` activation rows of `k` at `simd` on this
/// CPU.
fn exact_kernel(ty: GgmlType, m: usize, k: usize, simd: SimdLevel) -> &'static str {
    let native = NATIVE.contains(&ty);
    let (avx512, avx2) = (simd.avx512(), !simd.avx512() && simd.avx2());
    // AVX2's block floating point kernel: Q4_0 / Q4_1 / Q5_0 / Q5_1 rows of whole pairs of
    // blocks, and the K-quants but Q2_K / Q3_K.
    let avx2_bfp = avx2
        && (matches!(ty, GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q5_0 | GgmlType::Q5_1) && k.is_multiple_of(64)
            || matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K));
    match m {
        1..=8 if native && avx512 && vnni() => "dequant_matmul_fused_vnni",
        1..=8 if native && avx512 => "dequant_matmul_fused_avx512",
        1..=8 if avx2_bfp => "dequant_matmul_fused_avx2_bfp",
        1..=8 if native && avx2 => "dequant_matmul_fused_avx2",
        1 => "dequant_matmul_rowwise",
        16.. if avx512 && vnni() && BFP_PANEL.contains(&ty) => "dequant_matmul_bfp_panel",
        _ if native && avx512 => "dequant_matmul_tile_avx512",
        _ if native && avx2 => "dequant_matmul_tile_avx2",
        _ => "dequant_matmul_tile",
    }
}

/// Exact mode: every output within `1e-5 · Σ|w·x|` of the f64 product of the dequantized
/// weights (f32 rounding of a K-term sum is far below that).
fn check_exact(ty: GgmlType, lead: &[usize], k: usize, n: usize, seed: u64, opts: &CpuOptions) -> String {
    let c = run_case(ty, lead, k, n, seed, opts);
    let m: usize = lead.iter().product();
    let what = format!("{} x{lead:?} k={k} n={n} {}", ty.name(), c.kernel);
    for mi in 0..m {
        for j in 0..n {
            let (want, mag) = dot64(&c.wd[j * k..(j + 1) * k], &c.x[mi * k..(mi + 1) * k]);
            let o = c.got[mi * n + j];
            assert!((o - want).abs() <= 1e-5 * mag, "{what}: [{mi},{j}] {o} vs {want} (Σ|wx| {mag})");
        }
    }
    c.kernel
}

#[test]
fn exact_mode_matches_f64_reference() {
    for simd in [SimdLevel::Native, SimdLevel::Avx2] {
        let opts = CpuOptions { threads: Some(2), simd, ..Default::default() };
        let mut seed = 10;
        for &ty in NATIVE.iter().chain(OTHERS) {
            let legacy = ty.block_size() == 32;
            // K a multiple of 256, and (legacy schemes) of 32 only.
            let ks: &[usize] = if legacy { &[512, 96] } else { &[512] };
            for &k in ks {
                for (lead, n) in [(&[1usize][..], 67), (&[3][..], 37), (&[2, 32][..], 45)] {
                    seed += 3;
                    let kernel = check_exact(ty, lead, k, n, seed, &opts);
                    let m: usize = lead.iter().product();
                    // Up to 8 activation rows run the fused kernel once per row (with VNNI: on
                    // integer dots against block floating point activations).
                    assert_eq!(kernel, exact_kernel(ty, m, k, simd), "{} m={m} {simd:?}", ty.name());
                }
            }
        }
    }
}

/// Several tiles per thread, one thread and two, and K = 4096 (a whole LLM row).
#[test]
fn exact_mode_many_tiles() {
    for threads in [1, 2] {
        let opts = CpuOptions { threads: Some(threads), ..Default::default() };
        check_exact(GgmlType::Q4_K, &[3], 4096, 150, 77, &opts);
        // Decode: under 1 MiB of weights one chunk of rows per thread (150 rows: 75 + 75),
        // from 1 MiB up two (601 Q4_0 rows, 1.38 MB: 151 + 151 + 151 + 148).
        check_exact(GgmlType::Q4_0, &[1], 4096, 150, 78, &opts);
        check_exact(GgmlType::Q4_1, &[1], 4096, 150, 79, &opts);
        check_exact(GgmlType::Q4_0, &[1], 4096, 601, 80, &opts);
    }
}

/// The `tile` path dots the activation rows past its last whole panel of 32 (up to 8 of them)
/// with the tile's rows instead of running a narrow panel: row counts on both sides of that
/// rule (33, 37, 40 and 133 dotted; 41, 64 and 72 not), a K of several sgemm blocks, one and
/// two threads.
#[test]
fn exact_mode_activation_row_edges() {
    for threads in [1, 2] {
        let opts = CpuOptions { threads: Some(threads), ..Default::default() };
        for (i, m) in [33usize, 37, 40, 41, 64, 72, 133].into_iter().enumerate() {
            check_exact(GgmlType::Q5_0, &[m], 896, 150, 200 + i as u64, &opts);
        }
        check_exact(GgmlType::Q6_K, &[2, 20], 1024, 70, 220, &opts);
    }
}

/// Kernels of different shapes one after another on one thread, which share its working
/// buffers (tiles, transposed products, the packed `xᵀ` kept per `k`): a larger `m`, a smaller
/// one, a different `k`, then the first shape again, each against the f64 reference. Fast mode
/// too (its quantized activation rows live in the same buffers).
#[test]
fn kernels_share_working_buffers_across_shapes() {
    let exact = CpuOptions { threads: Some(1), ..Default::default() };
    let fast = CpuOptions { threads: Some(1), quantized_activations: true, ..Default::default() };
    for (i, (lead, k)) in
        [(&[40usize][..], 512usize), (&[64], 512), (&[16], 512), (&[24], 256), (&[40], 512)].into_iter().enumerate()
    {
        check_exact(GgmlType::Q4_K, lead, k, 70, 90 + i as u64, &exact);
        check_exact(GgmlType::Q4_0, lead, k, 70, 95 + i as u64, &exact);
        check_fast_or_exact(GgmlType::Q4_0, lead, k, 70, 100 + i as u64, &fast);
    }
}

/// The portable kernels (what a CPU without AVX2 runs), selected through the typed option.
#[test]
fn exact_mode_baseline_simd() {
    let opts = CpuOptions { threads: Some(2), simd: SimdLevel::Baseline, ..Default::default() };
    for (i, &ty) in NATIVE.iter().enumerate() {
        let k = if ty.block_size() == 32 { 96 } else { 256 };
        assert_eq!(check_exact(ty, &[1], k, 37, 40 + i as u64, &opts), "dequant_matmul_rowwise");
        assert_eq!(check_exact(ty, &[5], k, 37, 50 + i as u64, &opts), "dequant_matmul_tile");
    }
}

/// Q8_0 activations as llama.cpp's x86 `quantize_row_q8_0` / `_q8_1` (AVX path) make them:
/// `id = 127 / amax`, rounding half to even, scale stored as f16. Returns the dequantized values
/// and, per block, `|f16(d·Σq) - f16(d)·Σq|` (the Q8_1 block sum's extra rounding).
fn q8_x86(x: &[f32]) -> (Vec<f32>, Vec<f64>) {
    let (mut xq, mut serr) = (Vec::with_capacity(x.len()), vec![]);
    for b in x.chunks(32) {
        let amax = b.iter().fold(0f32, |a, v| a.max(v.abs()));
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        let d16 = half::f16::from_f32(d).to_f32();
        let q: Vec<f32> = b.iter().map(|v| (v * id).round_ties_even()).collect();
        let sq: f32 = q.iter().sum();
        xq.extend(q.iter().map(|q| q * d16));
        serr.push((half::f16::from_f32(d * sq).to_f32() as f64 - d16 as f64 * sq as f64).abs());
    }
    (xq, serr)
}

/// Fast mode: llama.cpp's result `dequant(W) · dequant(quantize_q8(x))` up to f32 rounding (the
/// math of `ggml_vec_dot_<w>_q8_0` / `_q8_1` / `_q8_K`: Q8_0 activations as its x86 quantizer
/// makes them for the legacy schemes, plus for Q4_1 the f16 rounding of Q8_1's block sum; Q8_K
/// through `rlx_gguf`'s bit-exact reference quantizer for the K-quants), and the f32 reference
/// within the activation quantization error.
fn check_fast(ty: GgmlType, lead: &[usize], k: usize, n: usize, seed: u64, opts: &CpuOptions) -> String {
    let c = run_case(ty, lead, k, n, seed, opts);
    let m: usize = lead.iter().product();
    let what = format!("{} x{lead:?} k={k} n={n} {}", ty.name(), c.kernel);
    let eps = f32::EPSILON as f64;
    let act = if ty.block_size() == 256 { GgmlType::Q8_K } else { GgmlType::Q8_0 };
    let bq = act.block_size();
    for mi in 0..m {
        let xr = &c.x[mi * k..(mi + 1) * k];
        let (xq, serr) = if act == GgmlType::Q8_0 {
            q8_x86(xr)
        } else {
            (dequantize(act, &quantize(act, xr).unwrap()).unwrap(), vec![0.0; k / bq])
        };
        for j in 0..n {
            let wr = &c.wd[j * k..(j + 1) * k];
            let o = c.got[mi * n + j];
            let (r, mag) = dot64(wr, xr);
            // Q4_1, Q5_1: `m · f16(d·Σq)` per block, `|m| <= max |w|` over the block.
            let sbound: f64 = if matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1) {
                wr.chunks(bq).zip(&serr).map(|(wb, e)| wb.iter().fold(0f64, |a, &w| a.max((w as f64).abs())) * e).sum()
            } else {
                0.0
            };
            // f32 accumulation: at most one rounding per block sum and per partial sum.
            let round = (k as f64 / 16.0 + 8.0) * eps * mag + sbound;
            let (llama, _) = dot64(wr, &xq);
            assert!((o - llama).abs() <= round, "{what}: [{mi},{j}] {o} vs llama.cpp formula {llama}");
            // Activation quantization error: |x - xq| <= amax(block) / 254 per element.
            let qerr: f64 = (0..k)
                .map(|i| {
                    let b = i / bq * bq;
                    let amax = xr[b..b + bq].iter().fold(0f32, |a, v| a.max(v.abs())) as f64;
                    (wr[i] as f64).abs() * amax / 254.0 * (1.0 + 1e-3)
                })
                .sum();
            assert!((o - r).abs() <= qerr + 2.0 * round, "{what}: [{mi},{j}] {o} vs f32 reference {r}");
        }
    }
    c.kernel
}

#[test]
fn fast_mode_matches_llama_formula() {
    // Odd row and activation-row counts exercise every tile remainder (13 = a K-quant tile of
    // 8 activation rows, one of 4, one single).
    // 16 or more activation rows run on AMX tiles where the CPU has them, else on VNNI
    // panels of the same 16 × 16 products: 17 and
    // 40 leave partial blocks of 16 activation rows, 45 and 29 partial blocks of 16 weight rows.
    let shapes: &[(&[usize], usize, usize)] = &[
        (&[1], 256, 67),
        (&[7], 256, 45),
        (&[1, 7], 1024, 37),
        (&[9], 1024, 45),
        (&[13], 512, 29),
        (&[1], 4096, 67),
        (&[17], 512, 45),
        (&[2, 20], 768, 29),
        (&[16], 256, 16),
    ];
    for simd in LEVELS {
        let opts = CpuOptions { threads: Some(2), quantized_activations: true, simd, ..Default::default() };
        let mut seed = 100;
        for &ty in Q8_PATH {
            for &(lead, k, n) in shapes {
                seed += 3;
                let kernel = check_fast_or_exact(ty, lead, k, n, seed, &opts);
                if simd == SimdLevel::Baseline {
                    assert_eq!(kernel, "dequant_matmul_q8_scalar");
                }
                let m: usize = lead.iter().product();
                let amx = simd.amx() && m >= 16;
                assert_eq!(kernel == "dequant_matmul_q8_amx", amx, "{} x{lead:?}: {kernel}", ty.name());
                // Without AMX, the same 16 × 16 panels on VNNI registers.
                let panel = !simd.amx() && simd.avx512() && vnni() && m >= 16;
                assert_eq!(kernel == "dequant_matmul_q8_vnni_panel", panel, "{} x{lead:?}: {kernel}", ty.name());
            }
        }
    }
}

/// Decode (one activation row) of the legacy schemes over block counts that leave an odd
/// block in a group of 16 scales (Q4_0 / Q4_1 take their blocks in fours, then pairs): 1, 3,
/// 15, 17 and 33 blocks, and 18 and 20 (a short second group: one pair, one quad), 5 weight
/// rows (a tile of 4 and one single), on every SIMD level.
#[test]
fn fast_mode_decode_odd_block_counts() {
    for simd in LEVELS {
        let opts = CpuOptions { threads: Some(1), quantized_activations: true, simd, ..Default::default() };
        let types = [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q5_0, GgmlType::Q5_1];
        for (i, &ty) in types.iter().enumerate() {
            for (j, nb) in [1usize, 3, 15, 17, 33, 18, 20].into_iter().enumerate() {
                check_fast_or_exact(ty, &[1], 32 * nb, 5, 300 + 10 * i as u64 + j as u64, &opts);
            }
        }
    }
}

/// `dequant_matmul` of the packed weights `packed` (`[n, k]` GGUF blocks of `ty`, given to the
/// graph in `layout`) with the one activation row `x`, exact mode on two threads: `(kernel,
/// result)`.
fn run_row(ty: GgmlType, layout: Layout, x: &[f32], packed: &[u8], n: usize) -> (String, Vec<f64>) {
    run_rows(ty, layout, x, 1, packed, n)
}

/// [`run_row`] for `m` activation rows (`x`: `m × k`); the result `m × n`.
fn run_rows(ty: GgmlType, layout: Layout, x: &[f32], m: usize, packed: &[u8], n: usize) -> (String, Vec<f64>) {
    rlx_gguf::register_ops();
    let k = x.len() / m;
    let mut packed = packed.to_vec();
    if layout == Layout::SplitRows {
        rlx_gguf::layout::to_split_rows(ty, &mut packed, k).unwrap();
    }
    let mut g = Graph::new("qmm");
    let xi = g.input("x", Shape::new(&[m, k], DType::F32));
    let wi = g.input("w", Shape::new(&[packed.len()], DType::U8));
    let y = g.dequant_matmul_layout(xi, wi, ty.name(), layout.name(), n, k);
    g.set_outputs(vec![y]);
    let opts = CpuOptions { threads: Some(2), ..Default::default() };
    let mut exe = CpuExecutable::compile(&g, &opts).unwrap();
    let kernel = exe.steps().iter().find(|s| s.op.contains("dequant_matmul")).unwrap().kernel.to_string();
    let xt = Tensor::from_vec(x.to_vec(), &[m, k]).unwrap();
    let wt = Tensor::from_vec(packed.to_vec(), &[packed.len()]).unwrap();
    (kernel, exe.run(&[&xt, &wt], &[]).unwrap()[0].to_f64_vec())
}

/// Exact-mode decode where the block floating point activations of the VNNI kernel
/// (`dequant_matmul_fused_vnni`, 22 bits per element, 21 for Q8_0) are weakest, against the
/// f64 product of the dequantized weights: a 3000x outlier in every block (the small elements
/// lose low bits), blocks on scales from 2⁻³ to 2³, the largest integer dots (all weights at
/// their most negative, Q6_K also at its largest quant, all activations just under 2), a block
/// below the converted range, NaN and infinity (those
/// rows run the f32 kernel, on split rows after converting them back into blocks). Bound: the
/// conversion's `Σ_b 2^-B max_b |x| Σ_b |w|` plus an f32 sum's rounding, `(2 nb + 8) 2^-24 Σ
/// |w x|`. Each case on GGUF blocks and on `Layout::SplitRows`, bit-identical.
#[test]
fn exact_decode_block_floating_point_edges() {
    let n = 37;
    let check = |ty: GgmlType, x: &[f32], packed: &[u8], what: &str| {
        let k = x.len();
        let (kernel, got) = run_row(ty, Layout::Blocks, x, packed, n);
        if Layout::SplitRows.supports(ty) {
            let (ks, split) = run_row(ty, Layout::SplitRows, x, packed, n);
            assert_eq!(format!("{kernel}_split_rows"), ks);
            let same = got.iter().zip(&split).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{} {what}: split rows {split:?} vs blocks {got:?}", ty.name());
        }
        let wd = dequantize(ty, packed).unwrap();
        let bits = if ty == GgmlType::Q8_0 { 21 } else { 22 };
        for j in 0..n {
            let w = &wd[j * k..(j + 1) * k];
            let (want, mag) = dot64(w, x);
            let conv: f64 = w
                .chunks(32)
                .zip(x.chunks(32))
                .map(|(wb, xb)| {
                    let amax = xb.iter().fold(0f64, |a, &v| a.max((v as f64).abs()));
                    (2f64).powi(-bits) * amax * wb.iter().map(|&v| (v as f64).abs()).sum::<f64>()
                })
                .sum();
            let bound = conv + (2.0 * (k / 32) as f64 + 8.0) * (2f64).powi(-24) * mag;
            let err = (got[j] - want).abs();
            assert!(err <= bound, "{} {what} {kernel}: [{j}] {} vs {want} (bound {bound})", ty.name(), got[j]);
        }
        kernel
    };
    let bfp = [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
    ];
    for (t, &ty) in bfp.iter().enumerate() {
        let k = if ty.block_size() == 256 { 512 } else { 576 };
        let wf = rand_tensor(&[n, k], DType::F32, 900 + t as u64, -1.0, 1.0);
        let packed = quantize(ty, wf.as_slice::<f32>().unwrap()).unwrap();
        let mut x: Vec<f32> =
            rand_tensor(&[k], DType::F32, 910 + t as u64, -1e-2, 1e-2).as_slice::<f32>().unwrap().to_vec();
        for b in 0..k / 32 {
            x[32 * b + (5 * b) % 32] = if b % 2 == 0 { 30.0 } else { -30.0 };
        }
        let kernel = check(ty, &x, &packed, "outliers");
        // Every block on its own scale `s_b` (the K-quants' sub-blocks each take their block's).
        let ramp: Vec<f32> = x.iter().enumerate().map(|(i, &v)| v * (2f32).powi((i / 32 % 7) as i32 - 3)).collect();
        check(ty, &ramp, &packed, "block scales");
        if vnni() && rlx_cpu::SimdLevel::Native.avx512() {
            assert_eq!(kernel, "dequant_matmul_fused_vnni");
        } else if !rlx_cpu::SimdLevel::Native.avx512() && rlx_cpu::SimdLevel::Native.avx2() {
            let avx2_bfp = ty != GgmlType::Q8_0;
            assert_eq!(kernel == "dequant_matmul_fused_avx2_bfp", avx2_bfp, "{}: {kernel}", ty.name());
        }
        // A block of magnitude 1e-30 (below 2^-81): the row runs the f32 kernel.
        let mut tiny = x.clone();
        tiny[64..96].iter_mut().for_each(|v| *v *= 1e-30 / 30.0);
        check(ty, &tiny, &packed, "tiny block");
        for (bad, what) in [(f32::NAN, "NaN"), (f32::INFINITY, "inf")] {
            let mut xb = x.clone();
            xb[40] = bad;
            let wd = dequantize(ty, &packed).unwrap();
            for layout in [Layout::Blocks, Layout::SplitRows].into_iter().filter(|l| l.supports(ty)) {
                let (_, got) = run_row(ty, layout, &xb, &packed, n);
                for j in (0..n).filter(|&j| wd[j * k + 40] != 0.0) {
                    assert!(!got[j].is_finite(), "{} {what} {layout:?}: [{j}] = {}", ty.name(), got[j]);
                }
            }
        }
    }
    // Activations the conversion holds exactly (a block maximum of 1.0, so `s_b` is 2^-21, Q8_0
    // 2^-20, and the other elements multiples of `s_b`) against weights that are zero where
    // the maximum sits: only the f32 rounding is left, far below what one bit fewer costs.
    let k = 576;
    for (t, ty) in [GgmlType::Q4_0, GgmlType::Q8_0].into_iter().enumerate() {
        let mut wf = rand_tensor(&[n, k], DType::F32, 920 + t as u64, -1.0, 1.0).as_slice::<f32>().unwrap().to_vec();
        wf.iter_mut().step_by(32).for_each(|v| *v = 0.0);
        let packed = quantize(ty, &wf).unwrap();
        let j = rand_tensor(&[k], DType::F32, 930 + t as u64, -1000.0, 1000.0);
        let s_b = (2f32).powi(if ty == GgmlType::Q8_0 { -20 } else { -21 });
        let mut x: Vec<f32> = j.as_slice::<f32>().unwrap().iter().map(|v| v.round() * s_b).collect();
        x.iter_mut().step_by(32).for_each(|v| *v = 1.0);
        let (_, got) = run_row(ty, Layout::Blocks, &x, &packed, n);
        let wd = dequantize(ty, &packed).unwrap();
        for jj in 0..n {
            let (want, mag) = dot64(&wd[jj * k..(jj + 1) * k], &x);
            let bound = (2.0 * (k / 32) as f64 + 8.0) * (2f64).powi(-24) * mag;
            assert!(
                (got[jj] - want).abs() <= bound,
                "{} exact digits: [{jj}] {} vs {want} (bound {bound})",
                ty.name(),
                got[jj]
            );
        }
    }
    // The largest dots: every weight at its scheme's most negative value (d = 1; Q8_0 q = -128,
    // Q4_0 nibble 0 = -8), every activation just under 2 (|n| rounds up to 2^B), both signs.
    // Q6_K (d = 1, scales -128): q = 0 (w = 4096), and q = 63, the largest unsigned quant
    // in the integer chain (w = -3968).
    let just_under_2 = f32::from_bits(2f32.to_bits() - 1);
    let q6k = |q: u8| [&[q; 192][..], &[0x80; 16], &[0x00, 0x3c]].concat();
    for (ty, block) in [
        (GgmlType::Q8_0, [&[0x00u8, 0x3c][..], &[0x80; 32]].concat()),
        (GgmlType::Q4_0, [&[0x00u8, 0x3c][..], &[0x00; 16]].concat()),
        (GgmlType::Q6_K, q6k(0x00)),
        (GgmlType::Q6_K, q6k(0xff)),
    ] {
        let k = 256 * k.div_ceil(256);
        let per_row = k / ty.block_size() * block.len();
        let packed: Vec<u8> = block.iter().copied().cycle().take(per_row * n).collect();
        for sign in [1.0f32, -1.0] {
            check(ty, &vec![sign * just_under_2; k], &packed, "extreme");
        }
    }
}

/// Exact-mode products of 16 and more activation rows on the block floating point panels
/// (`dequant_matmul_bfp_panel`, AVX-512 VNNI; elsewhere the same cases check the `tile` path),
/// against the f64 product of the dequantized weights, where they are weakest: an outlier in
/// every block, blocks on scales from 2⁻³ to 2³, the largest per-lane integer sums (every weight
/// at the scheme's largest magnitude, every activation just under 2 so that `|n|` rounds up to
/// `2^B`: 32 of them in one lane), a block below the converted range and NaN / infinity (the
/// call runs the `tile` path). Bound: the conversion's `Σ_b 2^-B max_b |x| Σ_b |w|` (`B` 22, 21
/// for the 5-bit schemes) plus an f32 sum's rounding, `(2 nb + 8) 2^-24 Σ |w x|`. Legacy
/// schemes on GGUF blocks and split rows, bit-identical; 20 rows (a partial last panel) and 2
/// threads.
#[test]
fn exact_prefill_block_floating_point_panel_edges() {
    let (n, m) = (37, 20);
    let check = |ty: GgmlType, x: &[f32], packed: &[u8], what: &str| {
        let k = x.len() / m;
        let (kernel, got) = run_rows(ty, Layout::Blocks, x, m, packed, n);
        if Layout::SplitRows.supports(ty) {
            let (ks, split) = run_rows(ty, Layout::SplitRows, x, m, packed, n);
            assert_eq!(format!("{kernel}_split_rows"), ks);
            let same = got.iter().zip(&split).all(|(a, b)| a.to_bits() == b.to_bits());
            assert!(same, "{} {what}: split rows differ from blocks", ty.name());
        }
        let wd = dequantize(ty, packed).unwrap();
        let bits = if matches!(ty, GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q5_K) { 21 } else { 22 };
        for mi in 0..m {
            let xr = &x[mi * k..(mi + 1) * k];
            for j in 0..n {
                let w = &wd[j * k..(j + 1) * k];
                let (want, mag) = dot64(w, xr);
                let conv: f64 = w
                    .chunks(32)
                    .zip(xr.chunks(32))
                    .map(|(wb, xb)| {
                        let amax = xb.iter().fold(0f64, |a, &v| a.max((v as f64).abs()));
                        (2f64).powi(-bits) * amax * wb.iter().map(|&v| (v as f64).abs()).sum::<f64>()
                    })
                    .sum();
                let bound = conv + (2.0 * (k / 32) as f64 + 8.0) * (2f64).powi(-24) * mag;
                let o = got[mi * n + j];
                assert!(
                    (o - want).abs() <= bound,
                    "{} {what} {kernel}: [{mi},{j}] {o} vs {want} (bound {bound})",
                    ty.name()
                );
            }
        }
        kernel
    };
    for (t, &ty) in BFP_PANEL.iter().enumerate() {
        let k = if ty.block_size() == 256 { 512 } else { 576 };
        let wf = rand_tensor(&[n, k], DType::F32, 940 + t as u64, -1.0, 1.0);
        let packed = quantize(ty, wf.as_slice::<f32>().unwrap()).unwrap();
        let mut x: Vec<f32> =
            rand_tensor(&[m, k], DType::F32, 950 + t as u64, -1e-2, 1e-2).as_slice::<f32>().unwrap().to_vec();
        for b in 0..m * k / 32 {
            x[32 * b + (5 * b) % 32] = if b % 2 == 0 { 30.0 } else { -30.0 };
        }
        let kernel = check(ty, &x, &packed, "outliers");
        let ramp: Vec<f32> = x.iter().enumerate().map(|(i, &v)| v * (2f32).powi((i / 32 % 7) as i32 - 3)).collect();
        check(ty, &ramp, &packed, "block scales");
        if vnni() && SimdLevel::Native.avx512() {
            assert_eq!(kernel, "dequant_matmul_bfp_panel", "{}", ty.name());
        }
        let mut tiny = x.clone();
        tiny[k + 64..k + 96].iter_mut().for_each(|v| *v *= 1e-30 / 30.0);
        check(ty, &tiny, &packed, "tiny block");
        let wd = dequantize(ty, &packed).unwrap();
        for (bad, what) in [(f32::NAN, "NaN"), (f32::INFINITY, "inf")] {
            let mut xb = x.clone();
            xb[3 * k + 40] = bad;
            for layout in [Layout::Blocks, Layout::SplitRows].into_iter().filter(|l| l.supports(ty)) {
                let (_, got) = run_rows(ty, layout, &xb, m, &packed, n);
                for j in 0..n {
                    let row3 = got[3 * n + j];
                    assert!(
                        wd[j * k + 40] == 0.0 || !row3.is_finite(),
                        "{} {what} {layout:?}: [3,{j}] = {row3}",
                        ty.name()
                    );
                    assert!(got[2 * n + j].is_finite(), "{} {what} {layout:?}: [2,{j}]", ty.name());
                }
            }
        }
    }
    // The largest per-lane sums: d = 1 (f16 0x3c00), every quant at the value of largest
    // magnitude (Q4_0 nibble 0 = -8, Q5_0 q = 0 = -16, Q4_1 15, Q5_1 31, m = 0; the K-quants'
    // quants at 15 / 31 with 6-bit scales 1 and dmin 0), every activation ±(just under 2).
    let just_under_2 = f32::from_bits(2f32.to_bits() - 1);
    let kq = |qh: &[u8], q: u8| [&[0x00u8, 0x3c, 0, 0][..], &[0x01; 12], qh, &[q; 128]].concat();
    for (ty, block) in [
        (GgmlType::Q4_0, [&[0x00u8, 0x3c][..], &[0x00; 16]].concat()),
        (GgmlType::Q5_0, [&[0x00u8, 0x3c][..], &[0x00; 4], &[0x00; 16]].concat()),
        (GgmlType::Q4_1, [&[0x00u8, 0x3c, 0, 0][..], &[0xff; 16]].concat()),
        (GgmlType::Q5_1, [&[0x00u8, 0x3c, 0, 0][..], &[0xff; 4], &[0xff; 16]].concat()),
        (GgmlType::Q4_K, kq(&[], 0xff)),
        (GgmlType::Q5_K, kq(&[0xff; 32], 0xff)),
    ] {
        assert_eq!(block.len(), ty.type_size(), "{}", ty.name());
        let k = 512;
        let per_row = k / ty.block_size() * block.len();
        let packed: Vec<u8> = block.iter().copied().cycle().take(per_row * n).collect();
        for sign in [1.0f32, -1.0] {
            check(ty, &vec![sign * just_under_2; m * k], &packed, "extreme");
        }
    }
}

/// Schemes without an integer kernel run exact in fast mode too.
#[test]
fn fast_mode_falls_back_to_exact() {
    let opts = CpuOptions { threads: Some(2), quantized_activations: true, ..Default::default() };
    for (i, &ty) in [GgmlType::Q2_K, GgmlType::Q3_K].iter().enumerate() {
        let kernel = check_exact(ty, &[1], 256, 33, 200 + i as u64, &opts);
        assert_eq!(kernel, "dequant_matmul_rowwise", "{}", ty.name());
    }
}

#[test]
fn bad_operands_fall_back_or_error() {
    rlx_gguf::register_ops();
    // Wrong byte count: the registered op's shape rule rejects it, naming the sizes.
    let mut g = Graph::new("g");
    let x = g.input("x", Shape::new(&[1, 32], DType::F32));
    let w = g.input("w", Shape::new(&[33], DType::U8));
    g.dequant_matmul(x, w, "Q8_0", 1, 32);
    assert!(g.error().unwrap().to_string().contains("needs 34 bytes"), "{:?}", g.error());
    // k not a multiple of the block size.
    let mut g = Graph::new("g");
    let x = g.input("x", Shape::new(&[1, 48], DType::F32));
    let w = g.input("w", Shape::new(&[51], DType::U8));
    g.dequant_matmul(x, w, "Q8_0", 1, 48);
    assert!(g.error().unwrap().to_string().contains("not a multiple"), "{:?}", g.error());
    let mut g = Graph::new("g");
    let x = g.input("x", Shape::new(&[1, 32], DType::F32));
    let w = g.input("w", Shape::new(&[34], DType::U8));
    g.dequant_matmul(x, w, "Q9_9", 1, 32);
    assert!(g.error().unwrap().to_string().contains("unknown ggml type"), "{:?}", g.error());
}

/// `dequant_matmul` of Q4_0 / Q4_1 / Q8_0 weights quantized from `seed` in `layout`, with `x` of
/// dims `lead + [k]`: `(kernel, result)`; `None` layout runs the graph's body through the
/// reference interpreter instead of the CPU backend.
fn run_layout(
    ty: GgmlType,
    layout: Layout,
    lead: &[usize],
    (k, n): (usize, usize),
    seed: u64,
    opts: Option<&CpuOptions>,
) -> (String, Vec<f32>) {
    rlx_gguf::register_ops();
    let wf = rand_tensor(&[n, k], DType::F32, seed, -1.0, 1.0);
    let mut packed = quantize(ty, wf.as_slice::<f32>().unwrap()).unwrap();
    if layout == Layout::SplitRows {
        rlx_gguf::layout::to_split_rows(ty, &mut packed, k).unwrap();
    }
    let xdims: Vec<usize> = lead.iter().copied().chain([k]).collect();
    let x = rand_tensor(&xdims, DType::F32, seed + 1, -2.0, 2.0);
    let mut g = Graph::new("qmm");
    let xi = g.input("x", Shape::new(&xdims, DType::F32));
    let wi = g.input("w", Shape::new(&[packed.len()], DType::U8));
    let y = g.dequant_matmul_layout(xi, wi, ty.name(), layout.name(), n, k);
    g.set_outputs(vec![y]);
    let len = packed.len();
    let wt = Tensor::from_vec(packed, &[len]).unwrap();
    let Some(opts) = opts else {
        let out = rlx_ir::interp::evaluate_args(&g, &[&x, &wt]).unwrap();
        return ("interpreter".into(), out[0].as_slice::<f32>().unwrap().to_vec());
    };
    let mut exe = CpuExecutable::compile(&g, opts).unwrap();
    let kernel = exe.steps().iter().find(|s| s.op.contains("dequant_matmul")).unwrap().kernel.to_string();
    let out = exe.run(&[&x, &wt], &[]).unwrap();
    (kernel, out[0].as_slice::<f32>().unwrap().to_vec())
}

/// Weights in `Layout::SplitRows` (how the model runner holds Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q8_0): fast
/// mode bit-identical with the same weights as blocks, on every path (decode with odd block
/// counts and a short last row group, the VNNI tiles at M > 1, AMX at M >= 16, the
/// non-VNNI levels); exact mode and the graph's own body (the interpreter) within f32
/// rounding of the blocks.
#[test]
fn split_rows_layout_matches_blocks() {
    let mut seed = 900;
    for ty in [GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q8_0] {
        for simd in LEVELS {
            for threads in [1, 2] {
                let fast =
                    CpuOptions { threads: Some(threads), quantized_activations: true, simd, ..Default::default() };
                let exact = CpuOptions { quantized_activations: false, ..fast.clone() };
                for nb in [1usize, 3, 17, 18, 20, 128] {
                    for lead in [&[1usize][..], &[3], &[2, 10]] {
                        seed += 2;
                        let shape = (32 * nb, 37);
                        let what = format!("{} {simd:?} t{threads} nb={nb} {lead:?}", ty.name());
                        let (kb, blocks) = run_layout(ty, Layout::Blocks, lead, shape, seed, Some(&fast));
                        let (ks, split) = run_layout(ty, Layout::SplitRows, lead, shape, seed, Some(&fast));
                        assert_eq!(format!("{kb}_split_rows"), ks, "{what}");
                        assert!(blocks.iter().zip(&split).all(|(a, b)| a.to_bits() == b.to_bits()), "{what} ({ks})");
                        // Exact mode: the same kernel and bits on both layouts.
                        let (keb, exact_blocks) = run_layout(ty, Layout::Blocks, lead, shape, seed, Some(&exact));
                        let (ke, got) = run_layout(ty, Layout::SplitRows, lead, shape, seed, Some(&exact));
                        assert_eq!(format!("{keb}_split_rows"), ke, "{what}");
                        let same = exact_blocks.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits());
                        assert!(same, "{what} ({ke})");
                        if simd != SimdLevel::Native || threads != 1 {
                            continue;
                        }
                        // Exact mode and the body against the f64 product of the dequantized
                        // blocks, within `check_exact`'s bound (f32 rounding of a K-term sum).
                        let (_, body) = run_layout(ty, Layout::SplitRows, lead, shape, seed, None);
                        let (k, n) = shape;
                        let wf = rand_tensor(&[n, k], DType::F32, seed, -1.0, 1.0);
                        let wd = dequantize(ty, &quantize(ty, wf.as_slice::<f32>().unwrap()).unwrap()).unwrap();
                        let xdims: Vec<usize> = lead.iter().copied().chain([k]).collect();
                        let x = rand_tensor(&xdims, DType::F32, seed + 1, -2.0, 2.0);
                        let x = x.as_slice::<f32>().unwrap();
                        for (i, (g, b)) in got.iter().zip(&body).enumerate() {
                            let (mi, j) = (i / n, i % n);
                            let (want, mag) = dot64(&wd[j * k..(j + 1) * k], &x[mi * k..(mi + 1) * k]);
                            let ok = |v: f32| (f64::from(v) - want).abs() <= 1e-5 * mag;
                            assert!(ok(*g) && ok(*b), "{what} [{mi},{j}]: {g} {b} vs {want} (Σ|wx| {mag})");
                        }
                    }
                }
            }
        }
    }
}

#[test]
fn split_rows_layout_refuses_other_schemes_and_names() {
    rlx_gguf::register_ops();
    for (scheme, layout, msg) in [("Q4_K", "split_rows", "does not hold Q4_K"), ("Q4_0", "rows", "unknown layout")] {
        let mut g = Graph::new("g");
        let ty = GgmlType::from_name(scheme).unwrap();
        let k = ty.block_size();
        let x = g.input("x", Shape::new(&[1, k], DType::F32));
        let w = g.input("w", Shape::new(&[ty.type_size()], DType::U8));
        g.dequant_matmul_layout(x, w, scheme, layout, 1, k);
        assert!(g.error().unwrap().to_string().contains(msg), "{:?}", g.error());
    }
}

/// `dequant_matmul_rows`: each part of a joined `[R, bytes_per_row]` weight read in place gives
/// the bits of `dequant_matmul` on a copy of just those rows — native kernel (not the body),
/// every path (decode, tile, fast), split rows and blocks, 1 and 2 threads — and the graph's
/// body (the interpreter) gives the body's bits on the copy.
#[test]
fn row_ranges_read_the_rows_in_place() {
    rlx_gguf::register_ops();
    let parts = [(0usize, 64usize), (64, 32), (96, 48)];
    let (k, r) = (64, 144);
    let mut seed = 1200;
    for (ty, layout) in [
        (GgmlType::Q5_0, Layout::SplitRows),
        (GgmlType::Q8_0, Layout::SplitRows),
        (GgmlType::Q4_K, Layout::Blocks),
        (GgmlType::Q6_K, Layout::Blocks),
    ] {
        let k = if ty.block_size() == 256 { 256 } else { k };
        seed += 2;
        let wf = rand_tensor(&[r, k], DType::F32, seed, -1.0, 1.0);
        let mut packed = quantize(ty, wf.as_slice::<f32>().unwrap()).unwrap();
        if layout == Layout::SplitRows {
            rlx_gguf::layout::to_split_rows(ty, &mut packed, k).unwrap();
        }
        let rb = packed.len() / r;
        let joined = Tensor::from_vec(packed.clone(), &[r, rb]).unwrap();
        for m in [1usize, 5, 40] {
            let x = rand_tensor(&[m, k], DType::F32, seed + 1, -2.0, 2.0);
            let mut g = Graph::new("rows");
            let xi = g.input("x", Shape::new(&[m, k], DType::F32));
            let wi = g.input("w", Shape::new(&[r, rb], DType::U8));
            let ys = parts.map(|(r0, n)| g.dequant_matmul_rows(xi, wi, ty.name(), layout.name(), r0, n, k));
            g.set_outputs(ys.to_vec());
            let body = rlx_ir::interp::evaluate_args(&g, &[&x, &joined]).unwrap();
            for (fast, threads) in [(false, 1), (false, 2), (true, 1), (true, 2)] {
                let opts = CpuOptions { threads: Some(threads), quantized_activations: fast, ..Default::default() };
                let mut exe = CpuExecutable::compile(&g, &opts).unwrap();
                let got = exe.run(&[&x, &joined], &[]).unwrap();
                for (p, &(r0, n)) in parts.iter().enumerate() {
                    let what = format!("{} m={m} fast={fast} t{threads} rows {r0}+{n}", ty.name());
                    let kernel = exe
                        .steps()
                        .iter()
                        .filter(|s| s.op.contains("dequant_matmul"))
                        .nth(p)
                        .unwrap()
                        .kernel
                        .to_string();
                    assert!(kernel.starts_with("dequant_matmul_"), "{what}: {kernel}");
                    let mut g1 = Graph::new("one");
                    let xi = g1.input("x", Shape::new(&[m, k], DType::F32));
                    let wi = g1.input("w", Shape::new(&[n, rb], DType::U8));
                    let y = g1.dequant_matmul_layout(xi, wi, ty.name(), layout.name(), n, k);
                    g1.set_outputs(vec![y]);
                    let w1 = Tensor::from_vec(packed[r0 * rb..(r0 + n) * rb].to_vec(), &[n, rb]).unwrap();
                    let want = CpuExecutable::compile(&g1, &opts).unwrap().run(&[&x, &w1], &[]).unwrap();
                    let bits =
                        |t: &Tensor| t.as_slice::<f32>().unwrap().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                    assert_eq!(got[p].shape(), &[m, n], "{what}");
                    assert_eq!(bits(&got[p]), bits(&want[0]), "{what}");
                    let want_body = rlx_ir::interp::evaluate_args(&g1, &[&x, &w1]).unwrap();
                    assert_eq!(bits(&body[p]), bits(&want_body[0]), "{what}: body");
                }
            }
        }
    }
}
