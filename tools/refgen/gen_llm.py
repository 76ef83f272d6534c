#!/usr/bin/env python3
"""Greedy-generation goldens for rlx-models' parity tests (crates/models/rlx-models/tests/parity.rs
on SmolLM2-135M, tests/qwen2_real.rs on Qwen2.5-Coder-0.5B with `--set qwen2`).

Reference: an fp64 numpy forward of a Llama- or Qwen2-architecture GGUF, weights dequantized
with the `gguf` package (`gguf.quants.dequantize`, bit-exact with llama.cpp's dequantizers):
RMSNorm, grouped-query attention, SwiGLU, tied LM head when there is no `output.weight`; for
`llama`, adjacent-pair ("NORM", GPT-J style) RoPE because GGUF stores Q/K rows permuted for
it; for `qwen2` (Hugging Face `modeling_qwen2.py`), Q/K/V biases and rotate-half ("NEOX") RoPE
on unpermuted rows, as llama.cpp runs that architecture. Incremental with a numpy KV cache (the
same math as recomputing the full sequence).

For each of 8 fixed prompts: 64 greedy tokens, the first step's top-10 ids and logits, and the
smallest top-1/top-2 logit margin over the 64 steps (a tiny margin would make the greedy ids
fragile under f32 rounding; the chosen prompts keep it above 1e-3: "In machine learning, a neural
network is" was dropped for a 7e-4 margin).

SmolLM2's prompt ids were produced by `--tokenize` (a `tokenizers` BPE built from the GGUF
vocabulary: byte-level, digits split, no prefix space, as llama.cpp's `smollm` pre-tokenizer;
this model's `add_bos_token` is false), Qwen2's by llama.cpp itself (the `ids` that
tools/refgen/llama_top1.c prints for each text; `add_bos_token` false); both are hardcoded
below next to their text.

    pip install -r tools/refgen/requirements-llm.txt
    tools/fetch.sh smollm2 && tools/fetch.sh qwen2
    python3 tools/refgen/gen_llm.py [--set smollm2|qwen2] [--model PATH] [--out PATH] [--tokenize]
"""

import argparse
import hashlib
import json
import os
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

PROMPTS = [
    ("The capital of France is", [504, 3575, 282, 4649, 314]),
    ("def fibonacci(n):", [1604, 3987, 46477, 24, 94, 727]),
    ("Once upon a time, there was a little", [6403, 1980, 253, 655, 28, 665, 436, 253, 1838]),
    ("The three primary colors are", [504, 1296, 3003, 4683, 359]),
    ("Water boils at a temperature of", [12615, 36411, 418, 253, 2779, 282]),
    ("1, 2, 3, 4, 5,", [33, 28, 216, 34, 28, 216, 35, 28, 216, 36, 28, 216, 37, 28]),
    ("The largest planet in the solar system is", [504, 3995, 3925, 281, 260, 3693, 817, 314]),
    (
        "The quick brown fox jumps over the lazy dog. The quick brown",
        [504, 2365, 6354, 16438, 27003, 690, 260, 23790, 2767, 30, 378, 2365, 6354],
    ),
]
# Qwen2.5-Coder-0.5B-Instruct (151,936-token vocabulary, `pre = qwen2`): ids from llama.cpp.
QWEN2_PROMPTS = [
    ("The capital of France is", [785, 6722, 315, 9625, 374]),
    ("def fibonacci(n):", [750, 75698, 1445, 1648]),
    ("Once upon a time, there was a little", [12522, 5193, 264, 882, 11, 1052, 572, 264, 2632]),
    ("1, 2, 3, 4, 5,", [16, 11, 220, 17, 11, 220, 18, 11, 220, 19, 11, 220, 20, 11]),
]
TOP_K = 10
CACHE = os.environ.get("RLX_CACHE", os.path.expanduser("~/.cache/rlx"))
FIXTURES = "crates/models/rlx-models/tests/fixtures"
# Per set: model file, fixture, prompts, greedy tokens per prompt (Qwen2's 32 keep the test's
# CI time down: a 0.5B model at the test profile's opt-level 1).
SETS = {
    "smollm2": (os.path.join(CACHE, "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
                f"{FIXTURES}/smollm2_greedy.json", PROMPTS, 64),
    "qwen2": (os.path.join(CACHE, "qwen2", "Qwen2.5-Coder-0.5B-Instruct-AWQ.gguf"),
              f"{FIXTURES}/qwen2_greedy.json", QWEN2_PROMPTS, 32),
}


def field(r, key):
    f = r.fields[key]
    v = f.parts[f.data[0]]
    if f.types[0].name == "STRING":
        return bytes(v).decode()
    return v.item() if v.size == 1 else v


def tokenize(r, texts):
    from tokenizers import Tokenizer, models, pre_tokenizers, decoders

    f = r.fields["tokenizer.ggml.tokens"]
    toks = [bytes(f.parts[i]).decode() for i in f.data]
    f = r.fields["tokenizer.ggml.merges"]
    merges = [tuple(bytes(f.parts[i]).decode().split(" ", 1)) for i in f.data]
    tok = Tokenizer(models.BPE({t: i for i, t in enumerate(toks)}, merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    tok.decoder = decoders.ByteLevel()
    for t in texts:
        print(json.dumps(t), tok.encode(t).ids)


class Model:
    def __init__(self, r):
        arch = field(r, "general.architecture")
        kv = lambda k: field(r, f"{arch}.{k}")  # noqa: E731
        self.n_layer = kv("block_count")
        self.n_head = kv("attention.head_count")
        self.n_kv = kv("attention.head_count_kv")
        self.eps = kv("attention.layer_norm_rms_epsilon")
        self.base = kv("rope.freq_base")
        self.neox = arch == "qwen2"
        self.w = {}
        for t in r.tensors:
            a = dequantize(t.data, t.tensor_type).astype(np.float64)
            self.w[t.name] = a.reshape([int(d) for d in reversed(t.shape)])
        self.head = self.w.get("output.weight", self.w["token_embd.weight"])
        self.hd = self.w["blk.0.attn_q.weight"].shape[0] // self.n_head

    def rms(self, x, g):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * g

    def rope(self, x, pos):
        # x [S, H, D]; pair i rotates by pos * base^(-2i/D). Pairs: adjacent (2i, 2i+1), or for
        # NEOX (rotate-half) i and i + D/2.
        d = x.shape[-1]
        inv = self.base ** (-np.arange(0, d, 2, dtype=np.float64) / d)
        ang = pos[:, None] * inv[None, :]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        lo, hi = (slice(0, d // 2), slice(d // 2, d)) if self.neox else (slice(0, d, 2), slice(1, d, 2))
        x0, x1 = x[..., lo], x[..., hi]
        out = np.empty_like(x)
        out[..., lo] = x0 * c - x1 * s
        out[..., hi] = x0 * s + x1 * c
        return out

    def proj(self, h, p, name):
        """h @ W.T (+ bias where the GGUF has one: Qwen2's Q/K/V)."""
        y = h @ self.w[p + name + ".weight"].T
        b = self.w.get(p + name + ".bias")
        return y if b is None else y + b

    def forward(self, ids, cache):
        """ids: new tokens; cache: list of (K, V) per layer, each [T, Hk, D]. Returns last logits."""
        w, hd = self.w, self.hd
        past = cache[0][0].shape[0] if cache[0] is not None else 0
        s = len(ids)
        pos = np.arange(past, past + s, dtype=np.float64)
        x = w["token_embd.weight"][ids]
        rep = self.n_head // self.n_kv
        for li in range(self.n_layer):
            p = f"blk.{li}."
            h = self.rms(x, w[p + "attn_norm.weight"])
            q = self.proj(h, p, "attn_q").reshape(s, self.n_head, hd)
            k = self.proj(h, p, "attn_k").reshape(s, self.n_kv, hd)
            v = self.proj(h, p, "attn_v").reshape(s, self.n_kv, hd)
            q, k = self.rope(q, pos), self.rope(k, pos)
            if cache[li] is not None:
                k = np.concatenate([cache[li][0], k])
                v = np.concatenate([cache[li][1], v])
            cache[li] = (k, v)
            t = k.shape[0]
            kk, vv = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
            sc = np.einsum("shd,thd->hst", q, kk) / np.sqrt(hd)
            mask = np.arange(t)[None, :] > (past + np.arange(s))[:, None]
            sc = np.where(mask[None], -np.inf, sc)
            sc = np.exp(sc - sc.max(-1, keepdims=True))
            sc /= sc.sum(-1, keepdims=True)
            o = np.einsum("hst,thd->shd", sc, vv).reshape(s, -1)
            x = x + o @ w[p + "attn_output.weight"].T
            h = self.rms(x, w[p + "ffn_norm.weight"])
            g = h @ w[p + "ffn_gate.weight"].T
            u = h @ w[p + "ffn_up.weight"].T
            x = x + (g / (1 + np.exp(-g)) * u) @ w[p + "ffn_down.weight"].T
        x = self.rms(x[-1], w["output_norm.weight"])
        return self.head @ x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--set", choices=sorted(SETS), default="smollm2")
    ap.add_argument("--model")
    ap.add_argument("--out")
    ap.add_argument("--tokenize", action="store_true", help="print SmolLM2's prompt ids and exit")
    a = ap.parse_args()
    model, out_path, prompts, n_gen = SETS[a.set]
    a.model, a.out = a.model or model, a.out or out_path
    r = GGUFReader(a.model)
    if a.tokenize:
        tokenize(r, [t for t, _ in prompts])
        return
    m = Model(r)
    with open(a.model, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    out = {"model": os.path.basename(a.model), "sha256": sha, "n_gen": n_gen, "prompts": []}
    for text, ids in prompts:
        cache = [None] * m.n_layer
        logits = m.forward(ids, cache)
        top = np.argsort(-logits)[:TOP_K]
        rec = {
            "text": text,
            "ids": ids,
            "top10_ids": [int(i) for i in top],
            "top10_logits": [round(float(logits[i]), 6) for i in top],
        }
        gen, margin = [], np.inf
        for _ in range(n_gen):
            srt = np.sort(logits)
            margin = min(margin, srt[-1] - srt[-2])
            nxt = int(np.argmax(logits))
            gen.append(nxt)
            logits = m.forward([nxt], cache)
        rec["greedy"] = gen
        rec["min_margin"] = round(float(margin), 6)
        out["prompts"].append(rec)
        print(json.dumps(text), gen[:12], "margin", rec["min_margin"], file=sys.stderr)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
