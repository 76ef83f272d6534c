#!/usr/bin/env python3
"""RLX vs numpy/OpenBLAS on f32 matrix products, in one run on one machine.

Builds the `gemm_bench` example of rlx-cpu (release), then for every workload and thread
count runs RLX (`CpuExecutable`, dot_general -> gemm / GEMV) and numpy (`np.matmul` into a
preallocated output) as separate processes, interleaved, `--rounds` times. Each process does one
warm-up and then at least 5 reps and at least 1 s, and reports its median; the table shows the
median over rounds. 1 thread: pinned with `taskset -c 0`, RAYON_NUM_THREADS=1 / CpuOptions
threads 1, OPENBLAS_NUM_THREADS=1. 2 threads: unpinned, both set to 2. numpy runs under
`env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE` and threadpoolctl sets and reports its threads.

Ends with one line per workload: `RATIO <workload> <numpy ms / RLX ms>` (> 1: RLX faster).

Usage: python3 bench/compare_gemm.py [--rounds N] [--threads 1,2] [--quick]
Needs: cargo, python3 with numpy and threadpoolctl (`pip install numpy threadpoolctl`).
"""

import argparse
import statistics

from _common import build, machine, median_ms, peer_cmd, pin, print_ratios, run

WORKLOADS = [("gemm_512", 512, 512, 512), ("gemm_2048", 2048, 2048, 2048), ("gemv_4096", 1, 4096, 4096)]

NUMPY = r"""
import sys, numpy as np
from threadpoolctl import threadpool_limits, threadpool_info
m, k, n, t = map(int, sys.argv[1:5])
with threadpool_limits(limits=t):
    info = [(i["internal_api"], i["num_threads"]) for i in threadpool_info()]
    r = np.random.default_rng(0)
    a = r.standard_normal((m, k), dtype=np.float32); b = r.standard_normal((k, n), dtype=np.float32)
    c = np.empty((m, n), np.float32)
    ms, reps = timed_ms(lambda: np.matmul(a, b, out=c))
    print(f"numpy median {ms:.4f} ms reps={reps} pools={info}")
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--quick", action="store_true", help="one round, 1 thread only")
    args = ap.parse_args()
    threads = [1] if args.quick else [int(t) for t in args.threads.split(",")]
    rounds = 1 if args.quick else args.rounds

    rlx_bin = build("rlx-cpu", "gemm_bench")
    print(f"{machine()}; rounds={rounds}")

    results = {}  # workload -> (rlx ms list, numpy ms list)
    for t in threads:
        for _ in range(rounds):
            for name, m, k, n in WORKLOADS:
                key = f"{name}_t{t}"
                rlx_out = run(pin(t) + [rlx_bin, str(m), str(k), str(n), str(t)], {"RAYON_NUM_THREADS": str(t)})
                np_out = run(
                    pin(t) + peer_cmd(NUMPY, m, k, n, t),
                    {"OPENBLAS_NUM_THREADS": str(t)},
                    unset=("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"),
                )
                print(f"# {key}: {rlx_out.strip()} | {np_out.strip()}", flush=True)
                r, p = results.setdefault(key, ([], []))
                r.append(median_ms(rlx_out))
                p.append(median_ms(np_out))

    print("\n| workload | RLX ms | numpy ms | numpy/RLX | RLX GFLOP/s |")
    print("|---|---|---|---|---|")
    flops = {name: 2 * m * k * n for name, m, k, n in WORKLOADS}
    for key, (r, p) in results.items():
        rm, pm = statistics.median(r), statistics.median(p)
        gf = flops[key.rsplit("_t", 1)[0]] / (rm * 1e-3) / 1e9
        print(f"| {key} | {rm:.3f} | {pm:.3f} | {pm / rm:.2f} | {gf:.1f} |")
    print()
    print_ratios((key, statistics.median(p) / statistics.median(r)) for key, (r, p) in results.items())


if __name__ == "__main__":
    main()
