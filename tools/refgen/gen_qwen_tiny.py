#!/usr/bin/env python3
"""Reference logits for rlx-models' Qwen2 / Qwen3 paths (crates/models/rlx-models/tests/qwen.rs).

A tiny decoder of each architecture with weights given by a formula both sides compute
(`weight(t, i) = 0.5 · sin(0.37 · i + 1.91 · t + 0.3)` for element `i` of tensor number `t`,
rounded to f32; norm weights `1 + 0.25 · weight`), so no model file is committed: the Rust test
writes the same tensors into a GGUF in memory. The reference is an fp64 numpy forward written
from the Qwen2 / Qwen3 model definitions (Hugging Face `modeling_qwen2.py` / `modeling_qwen3.py`):

- qwen2: Q/K/V projections with biases, rotate-half RoPE (llama.cpp's NEOX pairing for these
  GGUF architectures, on unpermuted Q/K rows), grouped-query attention, SwiGLU, tied LM head;
- qwen3: no biases, an RMSNorm over each head of Q and of K (weights `[head_dim]`) before RoPE,
  an untied `output.weight`.

For each architecture: a 7-token prompt, then 8 greedy steps; the logits after the prompt and
after every step (all V values) go to the fixture.

    pip install -r tools/refgen/requirements-llm.txt
    python3 tools/refgen/gen_qwen_tiny.py [--out PATH]
"""

import argparse
import json
import os

import numpy as np

L, E, H, HK, D, F, V = 2, 64, 4, 2, 16, 96, 64
EPS, BASE = 1e-6, 10000.0
PROMPT = [3, 17, 42, 5, 9, 11, 30]
STEPS = 8


def names(arch):
    """Tensor names and shapes in the order the formula numbers them (`t`)."""
    out = [("token_embd.weight", (V, E)), ("output_norm.weight", (E,))]
    if arch == "qwen3":
        out.append(("output.weight", (V, E)))
    for i in range(L):
        blk = [
            ("attn_norm.weight", (E,)),
            ("attn_q.weight", (H * D, E)),
            ("attn_k.weight", (HK * D, E)),
            ("attn_v.weight", (HK * D, E)),
            ("attn_output.weight", (E, H * D)),
        ]
        if arch == "qwen2":
            blk += [("attn_q.bias", (H * D,)), ("attn_k.bias", (HK * D,)), ("attn_v.bias", (HK * D,))]
        else:
            blk += [("attn_q_norm.weight", (D,)), ("attn_k_norm.weight", (D,))]
        blk += [
            ("ffn_norm.weight", (E,)),
            ("ffn_gate.weight", (F, E)),
            ("ffn_up.weight", (F, E)),
            ("ffn_down.weight", (E, F)),
        ]
        out += [(f"blk.{i}.{n}", s) for n, s in blk]
    return out


def weights(arch):
    w = {}
    for t, (name, shape) in enumerate(names(arch)):
        i = np.arange(int(np.prod(shape)), dtype=np.float64)
        v = (0.5 * np.sin(0.37 * i + 1.91 * t + 0.3)).astype(np.float32).astype(np.float64)
        if name.endswith("norm.weight"):
            v = (1.0 + 0.25 * v.astype(np.float32)).astype(np.float32).astype(np.float64)
        w[name] = v.reshape(shape)
    return w


def rms(x, g):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + EPS) * g


def rope(x, pos):
    """Rotate-half RoPE of x [S, heads, D] at positions pos."""
    half = D // 2
    inv = BASE ** (-np.arange(half, dtype=np.float64) * 2 / D)
    ang = np.asarray(pos, dtype=np.float64)[:, None] * inv[None, :]
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * cos - b * sin, b * cos + a * sin], axis=-1)


def forward(arch, w, ids):
    """Logits [S, V] of every position of `ids` (causal, from position 0)."""
    s = len(ids)
    x = w["token_embd.weight"][ids]
    pos = list(range(s))
    mask = np.triu(np.full((s, s), -np.inf), 1)
    for i in range(L):
        p = lambda n: w[f"blk.{i}.{n}"]
        h = rms(x, p("attn_norm.weight"))
        q, k, v = h @ p("attn_q.weight").T, h @ p("attn_k.weight").T, h @ p("attn_v.weight").T
        if arch == "qwen2":
            q, k, v = q + p("attn_q.bias"), k + p("attn_k.bias"), v + p("attn_v.bias")
        q, k, v = q.reshape(s, H, D), k.reshape(s, HK, D), v.reshape(s, HK, D)
        if arch == "qwen3":
            q, k = rms(q, p("attn_q_norm.weight")), rms(k, p("attn_k_norm.weight"))
        q, k = rope(q, pos), rope(k, pos)
        rep = H // HK
        k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
        sc = np.einsum("shd,thd->hst", q, k) / np.sqrt(D) + mask
        sc = np.exp(sc - sc.max(-1, keepdims=True))
        pr = sc / sc.sum(-1, keepdims=True)
        o = np.einsum("hst,thd->shd", pr, v).reshape(s, H * D)
        x = x + o @ p("attn_output.weight").T
        h = rms(x, p("ffn_norm.weight"))
        g, u = h @ p("ffn_gate.weight").T, h @ p("ffn_up.weight").T
        x = x + (g / (1 + np.exp(-g)) * u) @ p("ffn_down.weight").T
    head = w["output.weight"] if arch == "qwen3" else w["token_embd.weight"]
    return rms(x, w["output_norm.weight"]) @ head.T


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    default = os.path.join(here, "..", "..", "crates", "models", "rlx-models", "tests", "fixtures", "qwen_tiny.json")
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.normpath(default))
    a = ap.parse_args()
    fixture = {
        "source": "tools/refgen/gen_qwen_tiny.py: fp64 numpy Qwen2 / Qwen3 forward, weights by formula",
        "dims": {"L": L, "E": E, "H": H, "HK": HK, "D": D, "F": F, "V": V, "eps": EPS, "rope_base": BASE},
        "archs": {},
    }
    for arch in ["qwen2", "qwen3"]:
        w = weights(arch)
        ids = list(PROMPT)
        logits = [forward(arch, w, ids)[-1]]
        for _ in range(STEPS):
            ids.append(int(np.argmax(logits[-1])))
            logits.append(forward(arch, w, ids)[-1])
        top2 = [np.sort(l)[-2:] for l in logits]
        fixture["archs"][arch] = {
            "tensors": [n for n, _ in names(arch)],
            "prompt": PROMPT,
            "greedy": ids[len(PROMPT):],
            "logits": [[float(v) for v in l] for l in logits],
            "min_top2_margin": float(min(t[1] - t[0] for t in top2)),
        }
        print(f"{arch}: greedy {ids[len(PROMPT):]}, min top-2 margin {fixture['archs'][arch]['min_top2_margin']:.4f}")
    with open(a.out, "w") as f:
        json.dump(fixture, f)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
