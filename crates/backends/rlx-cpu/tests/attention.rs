//! The native `scaled_dot_product_attention` kernel (flash-style tiles) against the reference
//! interpreter's evaluation of the composite's decomposition (`softmax(q kᵀ·scale + mask) v`
//! with the full score matrix), for every mask kind, grouped heads, lengths that are not
//! multiples of the tile sizes (64 queries × 128 keys), fully masked rows (NaN, as the
//! decomposition), 1 and 2 threads, and both layouts (`[B, H, S, D]` and `[B, S, H, D]`).
//!
//! Tolerance `TOL` (1e-5 absolute + 1e-5 relative on outputs of magnitude ≤ 1): the kernel
//! rescales its exponentials once per key block, normalizes `P V` rather than `P`, and uses the
//! backend's `exp_f32` (≈1 ulp) where the interpreter calls libm, so results agree to a few f32
//! ulps times the number of keys summed, not bitwise.

mod common;
use common::{Tol, check_graph, rand_tensor};
use rlx_ir::op::{AttentionLayout, MaskKind};
use rlx_ir::{DType, Graph, Shape, Tensor};

const TOL: Tol = Tol { abs: 1e-5, rel: 1e-5 };

/// Which mask a case uses.
#[derive(Clone, Copy, Debug)]
enum M {
    None,
    Causal,
    /// Key lengths per batch.
    Padding,
    /// Additive f32 bias of these dims (broadcast to [B, H, Sq, Sk]).
    Bias(&'static [char]),
    /// Bool mask [Sq, Sk].
    Bool,
}

/// Dims of a case: batch, heads, kv heads, sq, sk, d, dv.
#[derive(Clone, Copy, Debug)]
struct Case {
    b: usize,
    h: usize,
    hk: usize,
    sq: usize,
    sk: usize,
    d: usize,
    dv: usize,
}

fn dims_of(spec: &[char], c: Case) -> Vec<usize> {
    spec.iter()
        .map(|ch| match ch {
            'b' => c.b,
            'h' => c.h,
            'q' => c.sq,
            'k' => c.sk,
            _ => 1,
        })
        .collect()
}

/// Build the case, run it compiled (1 and 2 threads) and by the reference; check the kernel ran.
fn run_case(c: Case, m: M, seed: u64) {
    run_case_in(c, m, seed, AttentionLayout::Bhsd)
}

/// [`run_case`] with q, k, v and the result in `layout`.
fn run_case_in(c: Case, m: M, seed: u64, layout: AttentionLayout) {
    let what = format!("{c:?} {m:?} {layout:?}");
    let mut g = Graph::new("attn");
    let f32s = |d: &[usize]| Shape::new(d, DType::F32);
    let dims = |h: usize, s: usize, d: usize| match layout {
        AttentionLayout::Bhsd => [c.b, h, s, d],
        AttentionLayout::Bshd => [c.b, s, h, d],
    };
    let (qd, kd, vd) = (dims(c.h, c.sq, c.d), dims(c.hk, c.sk, c.d), dims(c.hk, c.sk, c.dv));
    let q = g.input("q", f32s(&qd));
    let k = g.input("k", f32s(&kd));
    let v = g.input("v", f32s(&vd));
    let mut feeds = vec![
        ("q", rand_tensor(&qd, DType::F32, seed, -1.0, 1.0)),
        ("k", rand_tensor(&kd, DType::F32, seed + 1, -1.0, 1.0)),
        ("v", rand_tensor(&vd, DType::F32, seed + 2, -1.0, 1.0)),
    ];
    let mask = match m {
        M::None => MaskKind::None,
        M::Causal => MaskKind::Causal,
        M::Padding => {
            // Batch 0 sees no key (NaN rows), the others a partial and an over-long length.
            let l = g.input("lens", Shape::new(&[c.b], DType::I32));
            let lens: Vec<i32> =
                (0..c.b as i32).map(|i| [0, c.sk as i32 / 2 + 1, c.sk as i32 + 7][i as usize % 3]).collect();
            feeds.push(("lens", Tensor::from_vec(lens, &[c.b]).unwrap()));
            MaskKind::Padding(l)
        }
        M::Bias(spec) => {
            let dims = dims_of(spec, c);
            let l = g.input("bias", f32s(&dims));
            let mut t = rand_tensor(&dims, DType::F32, seed + 3, -2.0, 2.0);
            // Some -inf entries; the first key-row of the bias fully masked.
            let n = *dims.last().unwrap();
            for (i, x) in t.as_mut_slice::<f32>().unwrap().iter_mut().enumerate() {
                if i < n || i % 5 == 0 {
                    *x = f32::NEG_INFINITY;
                }
            }
            feeds.push(("bias", t));
            MaskKind::Bias(l)
        }
        M::Bool => {
            let l = g.input("bias", Shape::new(&[c.sq, c.sk], DType::Bool));
            // Row 0 sees nothing; otherwise a pseudo-random pattern.
            let v: Vec<bool> = (0..c.sq * c.sk).map(|i| i >= c.sk && (i * 7919) % 3 != 0).collect();
            feeds.push(("bias", Tensor::from_vec(v, &[c.sq, c.sk]).unwrap()));
            MaskKind::Bias(l)
        }
    };
    let y = g.scaled_dot_product_attention_with_layout(q, k, v, mask, None, layout);
    g.set_outputs(vec![y]);
    assert!(g.error().is_none(), "{what}: {:?}", g.error());
    for threads in [Some(1), Some(2)] {
        let kernels = check_graph(&g, &feeds, threads, TOL, &what);
        assert!(kernels.iter().any(|k| k.starts_with("attention_f32")), "{what}: kernels {kernels:?}");
    }
}

#[test]
fn every_mask_kind_on_tile_edges() {
    let cases = [
        Case { b: 1, h: 2, hk: 2, sq: 1, sk: 1, d: 4, dv: 4 },
        Case { b: 2, h: 3, hk: 3, sq: 70, sk: 130, d: 16, dv: 8 },
        Case { b: 3, h: 4, hk: 2, sq: 129, sk: 129, d: 32, dv: 32 },
        Case { b: 1, h: 2, hk: 1, sq: 5, sk: 300, d: 8, dv: 12 },
    ];
    let masks = [M::None, M::Causal, M::Padding, M::Bias(&['b', '1', '1', 'k']), M::Bias(&['q', 'k']), M::Bool];
    for (i, c) in cases.iter().enumerate() {
        for (j, m) in masks.iter().enumerate() {
            run_case(*c, *m, (i * 10 + j) as u64);
        }
    }
}

#[test]
fn bshd_layout_every_mask_kind_with_grouped_heads() {
    let cases = [
        Case { b: 2, h: 3, hk: 3, sq: 70, sk: 130, d: 16, dv: 8 },
        Case { b: 3, h: 4, hk: 2, sq: 129, sk: 129, d: 32, dv: 32 },
        Case { b: 1, h: 2, hk: 1, sq: 5, sk: 300, d: 8, dv: 12 },
    ];
    let masks = [M::None, M::Causal, M::Padding, M::Bias(&['b', '1', '1', 'k']), M::Bias(&['h', 'q', 'k']), M::Bool];
    for (i, c) in cases.iter().enumerate() {
        for (j, m) in masks.iter().enumerate() {
            run_case_in(*c, *m, (i * 10 + j) as u64, AttentionLayout::Bshd);
        }
    }
}

#[test]
fn random_shapes() {
    let mut s = 12345u64;
    let mut next = |n: usize| {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        1 + (s >> 33) as usize % n
    };
    for seed in 0..8 {
        let hk = next(2);
        let c = Case { b: next(2), h: hk * next(2), hk, sq: next(150), sk: next(270), d: next(40), dv: next(40) };
        let m = [M::None, M::Causal, M::Padding, M::Bias(&['h', 'q', 'k']), M::Bool][seed % 5];
        run_case(c, m, 100 + seed as u64);
    }
}

/// Head dims the AVX-512 (AVX2) tile products split (query tiles of ≥ 8 rows): `d` and `dv` past
/// 64 (several 64-column chunks of `P V`, the 4-vector kernel; AVX2: 16-column chunks, the
/// masked last one), not multiples of 16 (scalar
/// transposes and masked columns), key blocks not multiples of 16, and a head dim past the
/// transposed-key buffer (`d > 256`: the `gemm` crate path).
#[test]
fn wide_and_ragged_head_dims() {
    let cases = [
        Case { b: 1, h: 2, hk: 1, sq: 70, sk: 150, d: 72, dv: 80 },
        Case { b: 2, h: 1, hk: 1, sq: 20, sk: 33, d: 130, dv: 130 },
        Case { b: 1, h: 1, hk: 1, sq: 9, sk: 20, d: 260, dv: 20 },
    ];
    let masks = [M::None, M::Causal, M::Bias(&['b', '1', '1', 'k'])];
    for (i, c) in cases.iter().enumerate() {
        for (j, m) in masks.iter().enumerate() {
            run_case(*c, *m, (200 + i * 10 + j) as u64);
            run_case_in(*c, *m, (300 + i * 10 + j) as u64, AttentionLayout::Bshd);
        }
    }
}

/// The MiniLM layout: bias `[B, 1, 1, Sk]` from an attention mask, 12 heads of 32, seq 128.
#[test]
fn encoder_shape_with_padding_bias() {
    let c = Case { b: 2, h: 12, hk: 12, sq: 128, sk: 128, d: 32, dv: 32 };
    run_case(c, M::Bias(&['b', '1', '1', 'k']), 7);
}

/// `attention_with_kvcache` [B, S, H, D] over a cache [B, Hk, C, D] (f32 or f16) with per-sequence
/// lengths: the native kernel (reads only the visible columns) against the interpreter's
/// evaluation of the decomposition (scores over the whole capacity, masked), 1 and 2 threads;
/// lengths 0, partial and full capacity, one and several chunks of 256 cache columns, one and
/// several new tokens, grouped heads. From 8 new tokens the kernel works in flash tiles (blocks
/// of 64 tokens × 128 keys): prompt blocks of 8, 70 and 130 tokens (a partial last tile of 6
/// rows, new keys across a key block's edge), cache blocks partial and whole, head dims 20 / 12.
#[test]
fn attention_with_kvcache_matches_decomposition() {
    // (b, s, h, hk, c, d, dv), lens
    type KvCase = ((usize, usize, usize, usize, usize, usize, usize), &'static [i32]);
    let cases: [KvCase; 10] = [
        ((1, 1, 9, 3, 16, 64, 64), &[5]),
        ((3, 1, 4, 2, 32, 16, 8), &[0, 17, 32]),
        ((2, 3, 6, 2, 8, 20, 12), &[8, 3]),
        ((1, 1, 14, 2, 256, 64, 64), &[200]),
        ((2, 2, 2, 2, 4, 4, 4), &[0, 0]),
        // Several 256-column chunks of the first pass, one exactly full.
        ((2, 1, 6, 2, 1024, 32, 32), &[700, 256]),
        ((1, 2, 4, 1, 600, 16, 8), &[513]),
        // Prompt blocks (flash tiles).
        ((2, 8, 4, 4, 16, 16, 16), &[16, 9]),
        ((1, 70, 14, 2, 300, 64, 64), &[260]),
        ((2, 130, 6, 2, 256, 20, 12), &[0, 256]),
    ];
    for (n, &((b, s, h, hk, c, d, dv), lens)) in cases.iter().enumerate() {
        for cache in [DType::F32, DType::F16] {
            let what = format!("case {n} {cache:?}");
            let mut g = Graph::new("kv");
            let f32s = |d: &[usize]| Shape::new(d, DType::F32);
            let q = g.input("q", f32s(&[b, s, h, d]));
            let k = g.input("k", f32s(&[b, s, hk, d]));
            let v = g.input("v", f32s(&[b, s, hk, dv]));
            let kc = g.input("kc", Shape::new(&[b, hk, c, d], cache));
            let vc = g.input("vc", Shape::new(&[b, hk, c, dv], cache));
            let l = g.input("l", Shape::new(&[b], DType::I32));
            let y = g.attention_with_kvcache(q, k, v, kc, vc, l, None);
            g.set_outputs(vec![y]);
            assert!(g.error().is_none(), "{what}: {:?}", g.error());
            let seed = 40 + 10 * n as u64;
            let feeds = [
                ("q", rand_tensor(&[b, s, h, d], DType::F32, seed, -1.0, 1.0)),
                ("k", rand_tensor(&[b, s, hk, d], DType::F32, seed + 1, -1.0, 1.0)),
                ("v", rand_tensor(&[b, s, hk, dv], DType::F32, seed + 2, -1.0, 1.0)),
                ("kc", rand_tensor(&[b, hk, c, d], cache, seed + 3, -1.0, 1.0)),
                ("vc", rand_tensor(&[b, hk, c, dv], cache, seed + 4, -1.0, 1.0)),
                ("l", Tensor::from_vec(lens.to_vec(), &[b]).unwrap()),
            ];
            for threads in [Some(1), Some(2)] {
                let kernels = check_graph(&g, &feeds, threads, TOL, &what);
                let want = if s >= 8 { "attention_kvcache_tiles" } else { "attention_kvcache" };
                assert!(kernels.iter().any(|k| k.starts_with(want)), "{what}: kernels {kernels:?}");
            }
        }
    }
}

/// A cache length past the capacity (or negative) is an error naming the sequence, not a read
/// past the cache.
#[test]
fn attention_with_kvcache_rejects_lengths_past_the_cache() {
    let mut g = Graph::new("kv");
    let q = g.input("q", Shape::new(&[2, 1, 2, 4], DType::F32));
    let k = g.input("k", Shape::new(&[2, 1, 1, 4], DType::F32));
    let kc = g.input("kc", Shape::new(&[2, 1, 8, 4], DType::F32));
    let l = g.input("l", Shape::new(&[2], DType::I32));
    let y = g.attention_with_kvcache(q, k, k, kc, kc, l, None);
    g.set_outputs(vec![y]);
    let mut exe = rlx_cpu::CpuExecutable::compile(&g, &Default::default()).unwrap();
    let (qt, kt, kct) = (
        Tensor::zeros(&[2, 1, 2, 4], DType::F32),
        Tensor::zeros(&[2, 1, 1, 4], DType::F32),
        Tensor::zeros(&[2, 1, 8, 4], DType::F32),
    );
    for (bad, want) in [(9, "cache_len[1] = 9 is outside 0..=8"), (-1, "cache_len[1] = -1")] {
        let lt = Tensor::from_vec(vec![3i32, bad], &[2]).unwrap();
        let e = exe.run(&[&qt, &kt, &kct, &lt], &[]).unwrap_err().to_string();
        assert!(e.contains(want), "{e}");
    }
}
