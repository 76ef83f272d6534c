#!/usr/bin/env python3
"""Reference for rlx-text's sampler chain: the candidate set each configuration keeps and its
renormalized probabilities, computed in float64 numpy from the samplers' definitions
(llama.cpp semantics: penalties -> top-k -> typical-p -> top-p -> min-p -> temperature ->
softmax; mirostat v2 truncation at mu = 2 * tau).

Writes crates/text/rlx-text/tests/fixtures/samplers.json. Run from the repo root:
    python3 tools/refgen/gen_samplers.py
"""
import json
import os

import numpy as np

OUT = os.path.join(os.path.dirname(__file__), "../../crates/text/rlx-text/tests/fixtures/samplers.json")

rng = np.random.default_rng(7)
LOGITS = np.round(rng.normal(0.0, 2.0, size=48), 4)
LOGITS[5] = -1.25  # a non-positive logit that the history penalizes
HISTORY = [3, 5, 5, 9, 11, 3, 5, 20, 47, 0, 1]

NEUTRAL = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, typical_p=1.0, repeat_penalty=1.0,
               repeat_last_n=64, presence_penalty=0.0, frequency_penalty=0.0, mirostat_v2=None)


def softmax(x):
    e = np.exp(x - x.max())
    return e / e.sum()


def chain(cfg, logits, history):
    ids = np.arange(len(logits))
    lg = logits.astype(np.float64).copy()
    if cfg["mirostat_v2"] is not None:
        tau, _ = cfg["mirostat_v2"]
        lg = lg / cfg["temperature"]
        order = np.lexsort((ids, -lg))
        ids, lg = ids[order], lg[order]
        p = softmax(lg)
        surprise = -np.log2(p)
        keep = int(np.argmax(surprise > 2 * tau)) if np.any(surprise > 2 * tau) else len(p)
        keep = max(keep, 1)
        return ids[:keep], softmax(lg[:keep])
    n = cfg["repeat_last_n"]
    if n != 0:
        tail = history if n < 0 else history[-n:] if n <= len(history) else history
        for t in set(tail):
            k = tail.count(t)
            if lg[t] <= 0:
                lg[t] *= cfg["repeat_penalty"]
            else:
                lg[t] /= cfg["repeat_penalty"]
            lg[t] -= k * cfg["frequency_penalty"] + cfg["presence_penalty"]
    if cfg["temperature"] <= 0:
        i = int(np.argmax(lg))
        return np.array([i]), np.array([1.0])
    k = cfg["top_k"]
    if 0 < k < len(ids):
        order = np.lexsort((ids, -lg))[:k]
        ids, lg = ids[order], lg[order]
    if cfg["typical_p"] < 1.0:
        p = softmax(lg)
        ent = -(p * np.log(p)).sum()
        shifted = np.abs(-np.log(p) - ent)
        order = np.lexsort((ids, shifted))
        cum = np.cumsum(p[order])
        last = int(np.argmax(cum > cfg["typical_p"])) + 1 if np.any(cum > cfg["typical_p"]) else len(order)
        ids, lg = ids[order[:last]], lg[order[:last]]
    if cfg["top_p"] < 1.0:
        order = np.lexsort((ids, -lg))
        ids, lg = ids[order], lg[order]
        cum = np.cumsum(softmax(lg))
        last = int(np.argmax(cum >= cfg["top_p"])) + 1 if np.any(cum >= cfg["top_p"]) else len(ids)
        ids, lg = ids[:last], lg[:last]
    if cfg["min_p"] > 0:
        keep = lg >= lg.max() + np.log(cfg["min_p"])
        ids, lg = ids[keep], lg[keep]
    lg = lg / cfg["temperature"]
    order = np.lexsort((ids, -lg))
    return ids[order], softmax(lg[order])


CASES = {
    "top_k_5": dict(NEUTRAL, top_k=5),
    "top_p_0.8": dict(NEUTRAL, top_p=0.8),
    "min_p_0.1": dict(NEUTRAL, min_p=0.1),
    "typical_0.7": dict(NEUTRAL, typical_p=0.7),
    "temperature_0.5": dict(NEUTRAL, temperature=0.5),
    "penalties": dict(NEUTRAL, repeat_penalty=1.3, frequency_penalty=0.2, presence_penalty=0.5, repeat_last_n=8),
    "llama_cpp_defaults": dict(NEUTRAL, temperature=0.8, top_k=40, top_p=0.95, min_p=0.05),
    "full_chain": dict(temperature=1.5, top_k=10, top_p=0.9, min_p=0.02, typical_p=0.9, repeat_penalty=1.1,
                       repeat_last_n=-1, presence_penalty=0.1, frequency_penalty=0.05, mirostat_v2=None),
    "greedy_penalized": dict(NEUTRAL, temperature=0.0, repeat_penalty=5.0),
    "mirostat_v2_tau_2": dict(NEUTRAL, mirostat_v2=[2.0, 0.1]),
}

cases = []
for name, cfg in CASES.items():
    ids, p = chain(cfg, LOGITS, HISTORY)
    cases.append(dict(name=name, config=cfg, ids=[int(i) for i in ids], probs=[float(x) for x in p]))

os.makedirs(os.path.dirname(OUT), exist_ok=True)
with open(OUT, "w") as f:
    json.dump(dict(logits=[float(x) for x in LOGITS], history=HISTORY, cases=cases), f, indent=1)
    f.write("\n")
print("wrote", os.path.normpath(OUT), "with", len(cases), "cases:", [(c["name"], len(c["ids"])) for c in cases])
