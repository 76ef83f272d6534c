#!/usr/bin/env python3
"""RLX `dequant_matmul` vs llama.cpp's CPU quantized matmul, same machine, same run.

Workloads: decode 1x4096 . 4096x4096 and prefill 64x4096 . 4096x4096 for Q4_0, Q8_0, Q4_1,
Q4_K, Q5_K and Q6_K weights. RLX runs in both modes (exact = default, fast = quantized activations, see
crates/backends/rlx-cpu/src/kernels/qmatmul/), through
crates/backends/rlx-cpu/examples/qmatmul_bench.rs (release build). The peer is
bench/ggml_qmatmul_bench.c, compiled here against a local llama.cpp build (libggml*,
/work/llama-build by default, see its README.txt): ggml_mul_mat through
ggml_graph_compute_with_ctx on 1 thread, the plain ggml CPU path (activations quantized to
Q8_0 / Q8_K, integer dots; no weight repacking). Same LCG weights and activations on both sides.
RLX's fast mode holds Q4_0 / Q4_1 weights in `rlx_gguf::Layout::SplitRows` (each row's quants,
then its scales; converted once, outside the timing), as `rlx generate --fast` does after
loading a model — the counterpart of llama.cpp's own load-time repacking of CPU weights, which
this peer (plain `ggml_mul_mat` on blocks) does not use. qmatmul_bench's mode `fast-blocks`
times RLX on the file's blocks.

Decode reads every weight byte once, so its bound is how fast one core reads those bytes: the
RLX process also times a plain sum over the same packed weights (same reps, same residency)
and the script prints each decode as a share of that read bandwidth.

Everything is pinned to one core (`taskset -c 0`, 1 thread). Each process prints a median over
>= 10 reps and >= 1 s; the script runs ROUNDS rounds (RLX then llama.cpp, interleaved) and
reports the median of the process medians. Prints a table, the weight-streaming GB/s (packed
weight bytes / time; this machine's DRAM streams 14-19 GB/s on one core, see
/work/shared/notes/perf-anchors.md), and one `RATIO <workload> <x>` line per workload with
x = llama.cpp time / RLX time (> 1: RLX faster). Never run in CI.

With `--copies C` both sides hold the weights in C copies and each run reads the next one:
with more copies than fit the last-level cache (`--copies 64`: 0.6-1.1 GB per type against the
480 MiB L3 this host reports) every run reads its weights from DRAM, as a model's decode step
does, and the decode shares are of DRAM read bandwidth; by default (1 copy) the weights stay
in cache between runs and the shares are of cache read bandwidth.

    python3 bench/compare_qmatmul.py [--rounds 3] [--types Q4_0,Q8_0,Q4_1,Q4_K,Q5_K,Q6_K]
        [--copies 1] [--llama-build /work/llama-build]
        [--llama-src ~/.cache/rlx/llama-cpp-src/vendor/llama.cpp]
"""
import argparse
import os
import statistics
import sys
import tempfile

from _common import CACHE, ROOT, build, load, pin, print_ratios, run


def results(text):
    """RESULT lines -> {(type, m, mode): (ms, extra...)}; STREAM lines -> {(type, "stream"): GB/s}."""
    out = {}
    for line in text.splitlines():
        p = line.split()
        if p and p[0] == "RESULT":
            out[(p[1].upper(), int(p[2]), p[3])] = p[4:]
        elif p and p[0] == "STREAM":
            out[(p[1].upper(), "stream")] = p[3]
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--types", default="Q4_0,Q8_0,Q4_1,Q4_K,Q5_K,Q6_K")
    ap.add_argument("--copies", type=int, default=1, help="weight copies, one per run in turn (64: from DRAM)")
    ap.add_argument("--llama-build", default="/work/llama-build")
    ap.add_argument("--llama-src", default=os.path.join(CACHE, "llama-cpp-src", "vendor", "llama.cpp"))
    a = ap.parse_args()
    types = a.types.split(",")
    ms = [1, 64]
    lib = os.path.join(a.llama_build, "bin")
    if not os.path.exists(os.path.join(lib, "libggml-cpu.so")):
        sys.exit(f"no llama.cpp build at {a.llama_build}: run tools/build-llama.sh")
    print("uptime:", load(), f"weights: {a.copies} cop{'y' if a.copies == 1 else 'ies'}", flush=True)
    rlx_bin = build("rlx-cpu", "qmatmul_bench")
    peer = os.path.join(tempfile.mkdtemp(), "ggml_qmatmul_bench")
    run(["cc", "-O2", os.path.join(ROOT, "bench", "ggml_qmatmul_bench.c"), "-I", os.path.join(a.llama_src, "ggml", "include"),
        "-L", lib, "-lggml", "-lggml-base", "-lggml-cpu", "-lm", f"-Wl,-rpath,{lib}", "-o", peer])
    rlx_t, peer_t, info, stream = {}, {}, {}, {}
    for r in range(a.rounds):
        out = results(run(pin() + [rlx_bin, "1", "10", ",".join(types), "1,64", "exact,fast", str(a.copies)], {"RAYON_NUM_THREADS": "1"}))
        for key, v in out.items():
            if key[1] == "stream":
                stream.setdefault(key[0], []).append(float(v))
                continue
            rlx_t.setdefault(key, []).append(float(v[0]))
            info[key] = v
        for ty in types:
            for m in ms:
                out = results(run(pin() + [peer, ty, str(m), "10", str(a.copies)]))
                for (t, mm, _), v in out.items():
                    peer_t.setdefault((t, mm), []).append(float(v[0]))
                    info[(t, mm, "bytes")] = int(v[1])
        print(f"round {r + 1}/{a.rounds} done", flush=True)
    print(f"\n{'workload':<22}{'llama.cpp ms':>13}{'RLX ms':>10}{'GB/s':>8}  ratio  kernel")
    ratios = []
    for ty in types:
        for m in ms:
            lt = statistics.median(peer_t[(ty, m)])
            nbytes = info[(ty, m, "bytes")]
            print(f"{ty + ' m=' + str(m) + ' llama':<22}{lt:>13.3f}{'':>10}{nbytes / lt / 1e6:>8.1f}")
            for mode in ["exact", "fast"]:
                rt = statistics.median(rlx_t[(ty, m, mode)])
                name = f"{ty}_{'decode' if m == 1 else 'prefill'}_{mode}"
                kern = info[(ty, m, mode)][-1]
                print(f"{name:<22}{'':>13}{rt:>10.3f}{nbytes / rt / 1e6:>8.1f}  {lt / rt:5.2f}  {kern}")
                ratios.append((name, lt / rt))
    # Decode reads every weight byte once: its bound is the read bandwidth over the same bytes
    # (the STREAM line of qmatmul_bench: a plain sum over the packed weights, same reps).
    print(f"\n{'decode vs reading the weights':<30}{'read GB/s':>10}{'llama.cpp':>10}{'RLX exact':>10}{'RLX fast':>10}")
    for ty in types:
        gbs = statistics.median(stream[ty])
        nbytes = info[(ty, 1, "bytes")]
        share = lambda ms: nbytes / ms / 1e6 / gbs
        lt = statistics.median(peer_t[(ty, 1)])
        ex, fa = (statistics.median(rlx_t[(ty, 1, mode)]) for mode in ("exact", "fast"))
        print(f"{ty:<30}{gbs:>10.1f}{share(lt):>10.0%}{share(ex):>10.0%}{share(fa):>10.0%}")
    print("\nuptime:", load())
    print_ratios(ratios, digits=3)


if __name__ == "__main__":
    main()
