#!/usr/bin/env python3
"""LLM generation speed: RLX (`rlx generate --json`, release build) vs llama.cpp's `llama-bench`
on the same GGUF in the same run: prompt processing of 128 tokens (pp128; `--prompt-tokens N`
for another length, e.g. 1024, which RLX runs in chunks of 256) and generation of 128 tokens
(tg128), pinned to 1 core (`taskset -c 0`) and 2 cores (`taskset -c 0,1`).

Prints tokens/s for both, one `RATIO <workload> <x>` line per workload (x = llama.cpp time /
RLX time = RLX tok/s / llama.cpp tok/s), and the memory-bandwidth bound for generation: every
weight byte is read once per generated token (the tied LM head reads the whole embedding), at
the rate `bench/stream.c read` sums a buffer of the same size on the same cores, interleaved
with the rounds (the buffer sits in whatever cache level the weights do; with a C compiler),
printed as each mode's share: `BANDWIDTH tg128_t<T> <share>` (the issue's goal: 0.8).

Needs the `gguf` Python package (`pip install -r tools/refgen/requirements-gguf.txt`), a C
compiler, and llama.cpp's `llama-bench` (`tools/build-llama.sh`).

    cargo build --release -p rlx-cli
    python3 bench/compare_llm.py [--model GGUF] [--llama-bench PATH] [--reps 3] [--modes exact,fast]
                                 [--prompt-tokens 128]

`--reps` rounds per thread count, each one llama-bench repetition then one RLX run per mode
(alternating, so the host's speed changes land on both sides); medians over the rounds.

RATIO names: `pp128_t1` / `tg128_t1` (`pp<N>_t1` with `--prompt-tokens N`) for the default
(exact) mode, `pp128_fast_t1` / … for `rlx generate --fast` (Q8 activations in the quantized
matmuls, llama.cpp's arithmetic, f32 KV cache), `pp128_fast_f16_t1` / … for `--fast --kv-type
f16` (llama.cpp's default numerics, the configuration `llama-bench` itself runs: f16 KV cache,
flash attention).
"""

import argparse
import json
import os
import re
import statistics
import sys

try:
    from gguf import GGUFReader
except ImportError:
    sys.exit("compare_llm.py needs the gguf package: pip install -r tools/refgen/requirements-gguf.txt")

from _common import CACHE, ROOT, build_c, load, print_ratios, run


def prompt(n):
    """`n` tokens with the SmolLM2 and Qwen2.5 tokenizers (no BOS: add_bos_token is false; " the"
    is one token); the count is checked against what `rlx generate` reports."""
    return "The" + " the" * (n - 1)


def default_model():
    return os.path.join(CACHE, "smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")


def run_rlx(rlx, model, cpus, threads, mode, n):
    flags = {"exact": [], "fast": ["--fast"], "fast_f16": ["--fast", "--kv-type", "f16"]}[mode]
    cmd = ["taskset", "-c", cpus, rlx, "generate", "--model", model, "--prompt", prompt(n), "--max-tokens", "128",
           "--ignore-eos", "--threads", str(threads), "--json"] + flags
    j = json.loads(run(cmd).strip().splitlines()[-1])
    if j["prompt_tokens"] != n or len(j["tokens"]) != 128:
        sys.exit(f"rlx: expected {n} prompt and 128 generated tokens, got {j['prompt_tokens']} / {len(j['tokens'])}")
    return j["prompt_tokens_per_s"], j["gen_tokens_per_s"]


def run_llama(bench, model, cpus, threads, n):
    cmd = ["taskset", "-c", cpus, bench, "-m", model, "-p", str(n), "-n", "128", "-t", str(threads), "-r", "1",
           "-o", "json"]
    rows = json.loads(run(cmd))
    pp = next(r["avg_ts"] for r in rows if r["n_prompt"] == n and r["n_gen"] == 0)
    tg = next(r["avg_ts"] for r in rows if r["n_gen"] == 128 and r["n_prompt"] == 0)
    return pp, tg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=default_model(),
                    help="GGUF file both run (default: SmolLM2-135M Q4_1 from tools/fetch.sh smollm2)")
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    ap.add_argument("--rlx", default=os.path.join(target, "release", "rlx"),
                    help="the rlx binary (default: $CARGO_TARGET_DIR or target/, release/rlx)")
    ap.add_argument("--llama-bench", default="/work/llama-build/bin/llama-bench",
                    help="llama.cpp's llama-bench (default: where tools/build-llama.sh puts it)")
    ap.add_argument("--reps", type=int, default=3, help="rounds per configuration (default 3)")
    ap.add_argument("--modes", default="exact,fast,fast_f16",
                    help="RLX numerics to run: exact (default mode), fast (--fast: Q8 activations, as llama.cpp), "
                         "fast_f16 (--fast --kv-type f16: llama.cpp's default numerics)")
    ap.add_argument("--prompt-tokens", type=int, default=128,
                    help="prompt tokens of the prompt-processing rows (default 128)")
    a = ap.parse_args()
    n = a.prompt_tokens
    if n < 1:
        ap.error(f"--prompt-tokens: expected a positive count, got {n}")
    if a.reps < 1:
        ap.error(f"--reps: expected at least one round, got {a.reps}")
    if not os.path.exists(a.rlx):
        ap.error(f"--rlx: {a.rlx} does not exist (cargo build --release -p rlx-cli)")
    modes = a.modes.split(",")
    if any(m not in ("exact", "fast", "fast_f16") for m in modes):
        ap.error(f"--modes: expected a comma-separated list of exact, fast, fast_f16; got {a.modes!r}")
    r = GGUFReader(a.model)
    # A token reads every tensor but the embedding table, of which it gathers one row; with no
    # `output.weight` the table is also the LM head (tied) and is read whole.
    names = {t.name for t in r.tensors}
    weight_bytes = sum(int(t.n_bytes) for t in r.tensors
                       if t.name != "token_embd.weight" or "output.weight" not in names)
    print(f"model {os.path.basename(a.model)}: {weight_bytes / 1e6:.1f} MB of weights read per generated token")
    stream = build_c("stream", "bandwidth rows")
    print("load:", load())
    have_llama = os.path.exists(a.llama_bench)
    if not have_llama:
        print(f"llama-bench not found at {a.llama_bench}: RLX only, no RATIO lines")
    for threads, cpus in [(1, "0"), (2, "0,1")]:
        # Rounds alternate the two (one llama-bench repetition, then one RLX run per mode), so a
        # change in the host's speed lands on both sides; medians over the rounds.
        lpp, ltg, rlx, gbs = [], [], {m: [] for m in modes}, []
        for _ in range(a.reps):
            if stream:
                out = run(["taskset", "-c", cpus, stream, "read", str(threads), str(-(-weight_bytes // 2**20))])
                gbs.append(float(re.search(r"median ([0-9.]+) GB/s", out).group(1)))
            if have_llama:
                lp, lt = run_llama(a.llama_bench, a.model, cpus, threads, n)
                lpp.append(lp)
                ltg.append(lt)
            for mode in modes:
                rlx[mode].append(run_rlx(a.rlx, a.model, cpus, threads, mode, n))
        if have_llama:
            lp, lt = statistics.median(lpp), statistics.median(ltg)
            print(f"t={threads}: llama.cpp pp{n} {lp:8.1f} tok/s  tg128 {lt:7.1f} tok/s "
                  f"(rounds: tg {' '.join(f'{v:.1f}' for v in ltg)})", flush=True)
        if gbs:
            g = statistics.median(gbs)
            print(f"t={threads}: reading {weight_bytes / 1e6:.1f} MB: {g:.1f} GB/s, the bound for tg128 "
                  f"{g * 1e9 / weight_bytes:.0f} tok/s", flush=True)
        for mode in modes:
            rl = rlx[mode]
            rpp, rtg = statistics.median(x[0] for x in rl), statistics.median(x[1] for x in rl)
            print(f"t={threads}: RLX {mode:8} pp{n} {rpp:8.1f} tok/s  tg128 {rtg:7.1f} tok/s "
                  f"({rtg * weight_bytes / 1e9:.1f} GB/s; rounds: tg {' '.join(f'{x[1]:.1f}' for x in rl)})", flush=True)
            tag = "" if mode == "exact" else f"_{mode}"
            if gbs:
                print(f"BANDWIDTH tg128{tag}_t{threads} {rtg * weight_bytes / 1e9 / statistics.median(gbs):.2f}")
            if have_llama:
                print_ratios([(f"pp{n}{tag}_t{threads}", rpp / lp), (f"tg128{tag}_t{threads}", rtg / lt)], digits=3)

if __name__ == "__main__":
    main()
