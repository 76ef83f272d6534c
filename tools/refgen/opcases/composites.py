"""Composites with PyTorch semantics, written out as float64 numpy formulas (the formulas are the
PyTorch definitions; `jax.lax.conv_general_dilated` / `reduce_window` do the windowing), rounded
once to the case dtype. The decomposition in RLX rounds every intermediate in the case dtype, so
f16/bf16 cases use a looser tolerance in the Rust records.
"""

import numpy as np
import scipy.special as sp
import jax.numpy as jnp
from jax import lax

from .common import FLOATS, INF, NAN, arr, f64, random, rnd, rng_for, transposed


def softmax64(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def log_softmax64(x, axis):
    m = np.max(x, axis=axis, keepdims=True)
    return (x - m) - np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


SOFTMAX_ROWS = [
    [0.5, -1.0, 2.0, 0.0, 1.5, -3.0],
    [-INF, 1.0, -INF, 2.0, 0.0, -1.0],  # -inf entries give 0 (log: -inf)
    [-INF] * 6,  # all -inf: NaN (PyTorch, JAX)
    [88.0, 89.0, 90.0, 1e4, 1e4 - 1, 50.0],  # naive exp overflows
    [1e-30, -1e-30, 0.0, 1e-45, -0.0, 1e-38],
    [NAN, 1.0, 2.0, 3.0, 4.0, 5.0],
    [INF, 1.0, 2.0, 3.0, 4.0, 5.0],  # inf - inf = NaN: the whole row is NaN
]


def softmaxes(reg):
    for fn, f in (("softmax", softmax64), ("log_softmax", log_softmax64)):
        for dt in FLOATS:
            x = arr(SOFTMAX_ROWS, dt)
            reg.add(f"{fn}_{dt}_rows", fn, [x], [rnd(f(f64(x), -1), dt)], args={"axis": -1},
                    ref=f"formula: PyTorch {fn} (max-subtracted), float64")
        x = random(rng_for(f"{fn}_axis0"), "f64", (3, 4), scale=5.0)
        reg.add(f"{fn}_f64_axis0", fn, [x], [f(x, 0)], args={"axis": 0}, ref=f"formula: PyTorch {fn}")
        x = random(rng_for(f"{fn}_size1"), "f32", (3, 1))
        reg.add(f"{fn}_f32_size1_axis", fn, [x], [rnd(f(f64(x), 1), "f32")], args={"axis": 1},
                ref=f"formula: PyTorch {fn}")
        x = np.zeros((0, 4), np.float32)
        reg.add(f"{fn}_f32_size0", fn, [x], [x], args={"axis": -1}, ref=f"formula: PyTorch {fn}")
        x = random(rng_for(f"{fn}_t"), "f32", (4, 3), scale=3.0)
        s, pre = transposed(x, [1, 0])
        reg.add(f"{fn}_f32_transposed", fn, [s], [rnd(f(f64(x), -1), "f32")], args={"axis": -1}, pre=[pre],
                ref=f"formula: PyTorch {fn}")


ACT_VALS = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.5, -2.5, 6.0, -6.0, 10.0, -10.0, 100.0, -100.0, 1e-8, NAN, INF, -INF]


def gelu64(x, approximate):
    if approximate:
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + sp.erf(x / np.sqrt(2)))


def activations(reg):
    for dt in FLOATS:
        x = arr(ACT_VALS, dt, (3, 6))
        for appr in (False, True):
            reg.add(f"gelu_{'tanh' if appr else 'erf'}_{dt}", "gelu", [x], [rnd(gelu64(f64(x), appr), dt)],
                    args={"approximate": appr}, ref="formula: PyTorch F.gelu (approximate='none' / 'tanh')")
        reg.add(f"silu_{dt}", "silu", [x], [rnd(f64(x) * sp.expit(f64(x)), dt)], ref="formula: PyTorch F.silu")
    x = arr(ACT_VALS, "f32")
    reg.add("relu_f32", "relu", [x], [np.where(np.isnan(x), x, np.maximum(x, 0)).astype(np.float32)],
            ref="formula: max(x, 0), NaN kept")
    xi = arr([-5, 0, 3, -128, 127], "i8")
    reg.add("relu_i8", "relu", [xi], [np.maximum(xi, 0)], ref="formula: max(x, 0)")
    acts = {"relu": lambda v: np.where(np.isnan(v), v, np.maximum(v, 0)), "gelu": lambda v: gelu64(v, False),
            "gelu_tanh": lambda v: gelu64(v, True), "silu": lambda v: v * sp.expit(v), "sigmoid": sp.expit,
            "tanh": np.tanh, "identity": lambda v: v}
    for name, f in acts.items():
        x = random(rng_for(f"activation_{name}"), "f32", (2, 4), scale=3.0)
        reg.add(f"activation_{name}_f32", "activation", [x], [rnd(f(f64(x)), "f32")], args={"act": name},
                ref="formula: the spec's Activation enum (PyTorch definitions)")


def norms(reg):
    def ln(x, g, b, axis, eps):
        ax = tuple(range(axis % x.ndim, x.ndim))
        m = x.mean(axis=ax, keepdims=True)
        v = ((x - m) ** 2).mean(axis=ax, keepdims=True)
        y = (x - m) / np.sqrt(v + eps)
        return y * (1 if g is None else g) + (0 if b is None else b)

    cases = [("f32_last_affine", "f32", (2, 3, 4), -1, True, True, 1e-5, 1.0),
             ("f32_axis1_gamma", "f32", (2, 3, 4), 1, True, False, 1e-5, 1.0),
             ("f64_plain", "f64", (3, 5), -1, False, False, 1e-12, 1.0),
             ("f16_affine", "f16", (2, 8), -1, True, True, 1e-5, 1.0),
             ("bf16_affine", "bf16", (2, 8), -1, True, True, 1e-5, 1.0),
             ("f32_large_offset", "f32", (2, 16), -1, False, False, 1e-5, 1.0)]
    for name, dt, shape, axis, has_g, has_b, eps, scale in cases:
        rng = rng_for(f"layer_norm_{name}")
        x = random(rng, dt, shape, scale)
        if name.endswith("large_offset"):
            # Rows 1000 +- d: a one-pass E[x^2] - E[x]^2 variance loses every digit here, while the
            # mean (exactly 1000: the rounded pairs are symmetric) and x - mean stay exact in f32.
            d = f64(x[0, :8])
            x[0] = rnd(np.concatenate([1000.0 + d, 1000.0 - d])[rng.permutation(16)], dt)
            x[1, :] = arr(3.0, dt)  # a constant row: zero variance
        pshape = shape[axis % len(shape):]
        g = random(rng, dt, pshape) if has_g else None
        b = random(rng, dt, pshape) if has_b else None
        ins = [x] + [p for p in (g, b) if p is not None]
        y = ln(f64(x), None if g is None else f64(g), None if b is None else f64(b), axis, eps)
        reg.add(f"layer_norm_{name}", "layer_norm", ins, [rnd(y, dt)],
                args={"axis": axis, "epsilon": eps, "gamma": has_g, "beta": has_b},
                ref="formula: PyTorch F.layer_norm (biased variance), float64")
    for name, dt, shape, axis, has_g, eps in (("f32_gamma", "f32", (2, 3, 4), -1, True, 1e-6),
                                              ("f32_axis1", "f32", (2, 3, 4), 1, False, 1e-6),
                                              ("bf16_gamma", "bf16", (3, 8), -1, True, 1e-5),
                                              ("f64_zeros", "f64", (2, 4), -1, False, 1e-6)):
        rng = rng_for(f"rms_norm_{name}")
        x = random(rng, dt, shape) if "zeros" not in name else np.zeros(shape)
        ax = tuple(range(axis % len(shape), len(shape)))
        g = random(rng, dt, shape[axis % len(shape):]) if has_g else None
        y = f64(x) / np.sqrt((f64(x) ** 2).mean(axis=ax, keepdims=True) + eps) * (1 if g is None else f64(g))
        reg.add(f"rms_norm_{name}", "rms_norm", [x] + ([g] if has_g else []), [rnd(y, dt)],
                args={"axis": axis, "epsilon": eps, "gamma": has_g}, ref="formula: PyTorch F.rms_norm, float64")
    for name, dt, shape in (("f32_nchw", "f32", (2, 3, 4, 4)), ("f64_nc", "f64", (5, 3)), ("bf16_ncl", "bf16", (2, 3, 4))):
        rng = rng_for(f"batch_norm_{name}")
        x = random(rng, dt, shape)
        m, g, b = random(rng, dt, (3,)), random(rng, dt, (3,)), random(rng, dt, (3,))
        v = rnd(np.abs(f64(random(rng, dt, (3,)))) + 0.1, dt)
        al = (1, 3) + (1,) * (len(shape) - 2)
        y = (f64(x) - f64(m).reshape(al)) / np.sqrt(f64(v).reshape(al) + 1e-5) * f64(g).reshape(al) + f64(b).reshape(al)
        reg.add(f"batch_norm_{name}", "batch_norm", [x, m, v, g, b], [rnd(y, dt)], args={"epsilon": 1e-5},
                ref="formula: PyTorch F.batch_norm(training=False), float64")


def _conv_nchw(x, w, stride, padding, dilation, groups):
    y = lax.conv_general_dilated(jnp.asarray(x), jnp.asarray(w), tuple(stride), [(p, p) for p in padding],
                                 (1, 1), tuple(dilation), ("NCHW", "OIHW", "NCHW"), groups,
                                 precision=lax.Precision.HIGHEST)
    return np.asarray(y)


def _pool(x, kernel, stride, padding, kind):
    init = -INF if kind == "max" else 0.0
    comp = lax.max if kind == "max" else lax.add
    y = np.asarray(lax.reduce_window(jnp.asarray(x), init, comp, (1, 1) + tuple(kernel), (1, 1) + tuple(stride),
                                     [(0, 0), (0, 0)] + [(p, p) for p in padding]))
    return y / (kernel[0] * kernel[1]) if kind == "avg" else y


def layers(reg):
    for name, dt, sx, bias in (("f32_bias", "f32", (2, 3, 4), True), ("f64_nobias", "f64", (5, 4), False),
                               ("bf16_bias", "bf16", (3, 4), True), ("f32_vector", "f32", (4,), True)):
        rng = rng_for(f"linear_{name}")
        x, w = random(rng, dt, sx), random(rng, dt, (5, 4))
        b = random(rng, dt, (5,)) if bias else None
        y = f64(x) @ f64(w).T + (f64(b) if bias else 0)
        reg.add(f"linear_{name}", "linear", [x, w] + ([b] if bias else []), [rnd(y, dt)], args={"bias": bias},
                ref="formula: PyTorch F.linear (w is [out, in]), float64")
    for name, dt, idt, ids in (("f32_i32_clamped", "f32", "i32", [[0, 5, 7], [-1, 2, 2]]),
                               ("bf16_i64", "bf16", "i64", [3, 1]), ("f64_u8_rank0", "f64", "u8", 4)):
        t = random(rng_for(f"embedding_{name}"), dt, (6, 4))
        i = arr(ids, idt)
        reg.add(f"embedding_{name}", "embedding", [t, i], [t[np.clip(np.asarray(ids), 0, 5)]],
                ref="numpy.take(table, ids, axis=0, mode='clip') (PyTorch F.embedding; out of range clamped)")
    for name, dt, sx, sw, st, pd, dl, gr, bias in (
            ("f32_groups_bias", "f32", (2, 4, 5, 5), (6, 2, 3, 3), [2, 1], [1, 0], [1, 2], 2, True),
            ("f64_plain", "f64", (1, 3, 4, 4), (2, 3, 2, 2), [1, 1], [0, 0], [1, 1], 1, False),
            ("bf16_pad", "bf16", (1, 2, 3, 3), (2, 2, 3, 3), [1, 1], [1, 1], [1, 1], 1, True)):
        rng = rng_for(f"conv2d_{name}")
        x, w = random(rng, dt, sx), random(rng, dt, sw)
        b = random(rng, dt, (sw[0],)) if bias else None
        y = _conv_nchw(f64(x), f64(w), st, pd, dl, gr) + (f64(b).reshape(1, -1, 1, 1) if bias else 0)
        reg.add(f"conv2d_{name}", "conv2d", [x, w] + ([b] if bias else []), [rnd(y, dt)],
                args={"stride": st, "padding": pd, "dilation": dl, "groups": gr, "bias": bias},
                ref="formula: PyTorch F.conv2d via jax.lax.conv_general_dilated, float64")
    for kind in ("max", "avg"):
        for name, dt, sx, k, s, p in (("f32_k3s2p1", "f32", (1, 2, 5, 5), [3, 3], [2, 2], [1, 1]),
                                      ("f16_k2s1p0", "f16", (2, 1, 3, 4), [2, 2], [1, 1], [0, 0]),
                                      ("f64_k2s2p1", "f64", (1, 1, 4, 4), [2, 2], [2, 2], [1, 1])):
            x = random(rng_for(f"{kind}_pool_{name}"), dt, sx, scale=3.0)
            if kind == "max" and dt == "f32":
                x = x.copy()
                x[0, 0, 0, 0] = -INF
            reg.add(f"{kind}_pool2d_{name}", f"{kind}_pool2d", [x], [rnd(_pool(f64(x), k, s, p, kind), dt)],
                    args={"kernel": k, "stride": s, "padding": p},
                    ref=f"formula: PyTorch F.{kind}_pool2d" + (" (count_include_pad=True)" if kind == "avg" else ""))
    xi = random(rng_for("max_pool_i32"), "i32", (1, 1, 4, 4))
    y = np.asarray(lax.reduce_window(jnp.asarray(xi), np.int32(np.iinfo(np.int32).min), lax.max, (1, 1, 2, 2),
                                     (1, 1, 2, 2), [(0, 0), (0, 0), (1, 1), (1, 1)]))
    reg.add("max_pool2d_i32_k2s2p1", "max_pool2d", [xi], [y], args={"kernel": [2, 2], "stride": [2, 2],
                                                                    "padding": [1, 1]},
            ref="formula: PyTorch F.max_pool2d (padding reads the int minimum)")
    for name, dt, idt, logits, targets in (
            ("f32_ignore", "f32", "i64", None, [1, -100, 4, 0]),
            ("f64_large_logits", "f64", "i32", [[1e3, -1e3, 0.0], [50.0, 51.0, 52.0]], [0, 2]),
            ("f32_all_ignored", "f32", "i64", None, [-100, -100, -100, -100]),
            ("bf16", "bf16", "i32", None, [0, 1, 2, 3])):
        lg = arr(logits, dt) if logits else random(rng_for(f"ce_{name}"), dt, (4, 5), scale=2.0)
        t = np.asarray(targets)
        lsm = log_softmax64(f64(lg), -1)
        keep = t != -100
        with np.errstate(all="ignore"):
            loss = -np.sum(lsm[np.arange(len(t))[keep], t[keep]]) / keep.sum()
        reg.add(f"cross_entropy_{name}", "cross_entropy", [lg, arr(targets, idt)], [rnd(loss, dt)],
                ref="formula: PyTorch F.cross_entropy(reduction='mean', ignore_index=-100), float64")


def _rope_tables(S, D, theta=10000.0):
    inv = 1.0 / theta ** (np.arange(0, D, 2) / D)
    fr = np.outer(np.arange(S), inv)
    emb = np.concatenate([fr, fr], axis=1)
    return np.cos(emb), np.sin(emb)


def attention(reg):
    for name, dt, shape, layout in (("f32_shd", "f32", (1, 4, 2, 6), "shd"), ("f32_hsd", "f32", (2, 2, 4, 6), "hsd"),
                                    ("bf16_shd", "bf16", (4, 3, 4), "shd")):
        x = random(rng_for(f"rope_{name}"), dt, shape)
        S, D = (shape[-3] if layout == "shd" else shape[-2]), shape[-1]
        cos, sin = _rope_tables(S, D)
        cos, sin = rnd(cos, dt), rnd(sin, dt)
        c = f64(cos)[:, None, :] if layout == "shd" else f64(cos)
        s_ = f64(sin)[:, None, :] if layout == "shd" else f64(sin)
        xv = f64(x)
        rot = np.concatenate([-xv[..., D // 2:], xv[..., :D // 2]], axis=-1)
        reg.add(f"rope_{name}", "rope", [x, cos, sin], [rnd(xv * c + rot * s_, dt)], args={"layout": layout},
                ref="formula: HF apply_rotary_pos_emb (rotate_half), theta 10000, float64")

    def sdpa64(q, k, v, mask, scale, lens=None, bias=None):
        H, Hk = q.shape[1], k.shape[1]
        if Hk != H:
            k, v = np.repeat(k, H // Hk, axis=1), np.repeat(v, H // Hk, axis=1)
        s = q @ np.swapaxes(k, -1, -2) * scale
        Sq, Sk = s.shape[-2:]
        if mask == "causal":
            s = np.where(np.tril(np.ones((Sq, Sk), bool)), s, -INF)
        elif mask == "padding":
            s = np.where(np.arange(Sk)[None, None, None, :] < lens[:, None, None, None], s, -INF)
        elif mask == "bias":
            s = np.where(bias, s, -INF) if bias.dtype == bool else s + bias
        return softmax64(s, -1) @ v

    cases = [("none_f32", "f32", (1, 2, 3, 4), (1, 2, 5, 4), 3, "none", None),
             ("causal_square_f32", "f32", (2, 2, 4, 4), (2, 2, 4, 4), 4, "causal", None),
             ("causal_short_q_f64", "f64", (1, 1, 2, 3), (1, 1, 5, 3), 3, "causal", None),
             ("padding_f32", "f32", (2, 1, 3, 4), (2, 1, 5, 4), 2, "padding", None),
             ("bias_float_f32", "f32", (1, 2, 3, 4), (1, 2, 4, 4), 4, "bias", "float"),
             ("bias_bool_f32", "f32", (2, 1, 2, 4), (2, 1, 3, 4), 4, "bias", "bool"),
             ("gqa_f32", "f32", (1, 4, 3, 4), (1, 2, 3, 4), 4, "none", None),
             ("scale_bf16", "bf16", (1, 1, 3, 8), (1, 1, 3, 8), 8, "none", 0.5)]
    for name, dt, sq, sk, dv, mask, extra in cases:
        rng = rng_for(f"sdpa_{name}")
        q, k = random(rng, dt, sq), random(rng, dt, sk)
        v = random(rng, dt, sk[:3] + (dv,))
        scale = extra if isinstance(extra, float) else 1.0 / np.sqrt(sq[-1])
        ins, lens, bias = [q, k, v], None, None
        if mask == "padding":
            lens = arr([3, 0], "i32")  # batch 1 sees no key: NaN, as PyTorch's math backend
            ins.append(lens)
        if extra == "float":
            bias = random(rng, dt, (1, 1, sq[2], sk[2]))
            bias[0, 0, 1, 2] = -INF
            ins.append(bias)
        if extra == "bool":
            bias = rng.random((sq[0], 1, sq[2], sk[2])) < 0.7
            bias[0, 0, 0, :] = True
            ins.append(bias)
        y = sdpa64(f64(q), f64(k), f64(v), mask, scale, None if lens is None else lens.astype(np.int64),
                   None if bias is None else (bias if bias.dtype == bool else f64(bias)))
        a = {"mask": mask}
        if isinstance(extra, float):
            a["scale"] = extra
        reg.add(f"sdpa_{name}", "scaled_dot_product_attention", ins, [rnd(y, dt)], args=a,
                ref="formula: PyTorch F.scaled_dot_product_attention (math backend), float64")

    def kvcache64(q, k, v, kc, vc, lens, scale):
        # flash_attn_with_kvcache(causal=True): query i of sequence b sees the cache columns
        # j < lens[b], then the new keys j <= i; query head h reads KV head h // (H // Hk).
        B, S, H, _ = q.shape
        Hk, C, Dv = k.shape[2], kc.shape[2], v.shape[3]
        out = np.zeros((B, S, H, Dv))
        for b in range(B):
            for i in range(S):
                for h in range(H):
                    g = h // (H // Hk)
                    keys = np.concatenate([kc[b, g, :lens[b]], k[b, :i + 1, g]])
                    vals = np.concatenate([vc[b, g, :lens[b]], v[b, :i + 1, g]])
                    out[b, i, h] = softmax64(keys @ q[b, i, h] * scale, -1) @ vals
        return out

    # (name, B, S, H, Hk, C, D, Dv, cache dtype, lens)
    for name, B, S, H, Hk, C, D, Dv, cdt, lens in (
            ("decode_gqa_f32", 2, 1, 4, 2, 6, 8, 8, "f32", [0, 4]),
            ("block_full_f32", 1, 3, 3, 1, 5, 4, 6, "f32", [5]),
            ("decode_f16_cache", 1, 1, 2, 2, 4, 8, 8, "f16", [3])):
        rng = rng_for(f"kvcache_{name}")
        q, k, v = random(rng, "f32", (B, S, H, D)), random(rng, "f32", (B, S, Hk, D)), random(rng, "f32", (B, S, Hk, Dv))
        kc, vc = random(rng, cdt, (B, Hk, C, D)), random(rng, cdt, (B, Hk, C, Dv))
        ln = arr(lens, "i32")
        y = kvcache64(f64(q), f64(k), f64(v), f64(kc), f64(vc), lens, 1.0 / np.sqrt(D))
        reg.add(f"kvcache_{name}", "attention_with_kvcache", [q, k, v, kc, vc, ln], [rnd(y, "f32")],
                ref="formula: flash_attn_with_kvcache(causal=True) written out per query, float64")


def build(reg):
    softmaxes(reg)
    activations(reg)
    norms(reg)
    layers(reg)
    attention(reg)
    sweep(reg)


def sweep(reg):
    """Every float dtype for the composites whose main cases cover a subset."""
    for dt in FLOATS:
        rng = rng_for(f"composite_sweep_{dt}")
        n = f"_dtype_{dt}"
        x = random(rng, dt, (2, 3, 4))
        g = random(rng, dt, (4,))
        y = f64(x) / np.sqrt((f64(x) ** 2).mean(axis=-1, keepdims=True) + 1e-6) * f64(g)
        reg.add("rms_norm" + n, "rms_norm", [x, g], [rnd(y, dt)], args={"axis": -1, "epsilon": 1e-6, "gamma": True},
                ref="formula: PyTorch F.rms_norm")
        m, gg, b = random(rng, dt, (3,)), random(rng, dt, (3,)), random(rng, dt, (3,))
        v = rnd(np.abs(f64(random(rng, dt, (3,)))) + 0.5, dt)
        al = (1, 3, 1)
        y = (f64(x) - f64(m).reshape(al)) / np.sqrt(f64(v).reshape(al) + 1e-5) * f64(gg).reshape(al) + f64(b).reshape(al)
        reg.add("batch_norm" + n, "batch_norm", [x, m, v, gg, b], [rnd(y, dt)], args={"epsilon": 1e-5},
                ref="formula: PyTorch F.batch_norm(training=False)")
        w, bias = random(rng, dt, (5, 4)), random(rng, dt, (5,))
        reg.add("linear" + n, "linear", [x, w, bias], [rnd(f64(x) @ f64(w).T + f64(bias), dt)], args={"bias": True},
                ref="formula: PyTorch F.linear")
        t, ids = random(rng, dt, (5, 2)), arr([4, 0, 9], "i32")
        reg.add("embedding" + n, "embedding", [t, ids], [t[[4, 0, 4]]], ref="numpy.take(mode='clip')")
        xi, wi = random(rng, dt, (1, 2, 4, 4)), random(rng, dt, (2, 1, 2, 2))
        y = _conv_nchw(f64(xi), f64(wi), [1, 1], [1, 1], [1, 1], 2)
        reg.add("conv2d" + n, "conv2d", [xi, wi], [rnd(y, dt)],
                args={"stride": [1, 1], "padding": [1, 1], "dilation": [1, 1], "groups": 2, "bias": False},
                ref="formula: PyTorch F.conv2d")
        for kind in ("max", "avg"):
            reg.add(f"{kind}_pool2d" + n, f"{kind}_pool2d", [xi], [rnd(_pool(f64(xi), [2, 2], [2, 2], [1, 1], kind), dt)],
                    args={"kernel": [2, 2], "stride": [2, 2], "padding": [1, 1]}, ref=f"formula: PyTorch F.{kind}_pool2d")
        lg, tg = random(rng, dt, (3, 4)), [3, 0, 1]
        loss = -np.mean(log_softmax64(f64(lg), -1)[np.arange(3), tg])
        reg.add("cross_entropy" + n, "cross_entropy", [lg, arr(tg, "i64")], [rnd(loss, dt)],
                ref="formula: PyTorch F.cross_entropy")
        xr = random(rng, dt, (3, 2, 4))
        cos, sin = (rnd(v, dt) for v in _rope_tables(3, 4))
        xv = f64(xr)
        rot = np.concatenate([-xv[..., 2:], xv[..., :2]], axis=-1)
        y = xv * f64(cos)[:, None, :] + rot * f64(sin)[:, None, :]
        reg.add("rope" + n, "rope", [xr, cos, sin], [rnd(y, dt)], args={"layout": "shd"}, ref="formula: HF rotate_half")
        q, k, vv = random(rng, dt, (1, 2, 3, 4)), random(rng, dt, (1, 2, 3, 4)), random(rng, dt, (1, 2, 3, 4))
        s = f64(q) @ np.swapaxes(f64(k), -1, -2) / 2.0
        s = np.where(np.tril(np.ones((3, 3), bool)), s, -INF)
        reg.add("sdpa" + n, "scaled_dot_product_attention", [q, k, vv], [rnd(softmax64(s, -1) @ f64(vv), dt)],
                args={"mask": "causal"}, ref="formula: PyTorch F.scaled_dot_product_attention")
    for dt in ("i32", "u8", "bool"):
        t = random(rng_for(f"embedding_{dt}"), dt, (4, 3))
        reg.add(f"embedding_dtype_{dt}", "embedding", [t, arr([[3, 1]], "i32")], [t[[[3, 1]]]], ref="numpy.take")
